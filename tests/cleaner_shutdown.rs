//! SIGTERM while the log cleaner is mid-pass (held back by a 1 B/s I/O limit) must not keep
//! the log open: the pass is abandoned, every log closes, and the clean-shutdown marker is
//! written, so the next start skips the recovery scan (Kafka aborts its cleaner likewise).

mod common;

use std::time::Duration;

use common::{Broker, Wire};
use rskafka::client::partition::{Compression, UnknownTopicHandling};

#[tokio::test]
async fn sigterm_abandons_a_throttled_clean_and_closes_cleanly() {
    let dir = tempfile::tempdir().expect("tempdir");
    let args = [
        "--shards",
        "1",
        "--log-cleaner-backoff-ms",
        "100",
        "--log-cleaner-io-max-bytes-per-second",
        "1",
    ];
    let mut broker = Broker::start_with(dir.path(), &args);
    Wire::connect(&broker.addr).create_topic(
        "cs",
        1,
        &[
            ("cleanup.policy", "compact"),
            ("internal.segment.bytes", "4096"),
            ("min.cleanable.dirty.ratio", "0.01"),
        ],
    );
    let client = broker.client().await;
    let pc = client.partition_client("cs", 0, UnknownTopicHandling::Retry).await.expect("pc");
    for i in 0..60 {
        let mut r = common::record(&format!("{i}-{}", "v".repeat(200)));
        r.key = Some(format!("k{}", i % 5).into_bytes());
        pc.produce(vec![r], Compression::NoCompression).await.expect("produce");
    }
    // Several sealed, dirty segments: within a backoff (100 ms) the cleaner starts and
    // stalls on its throttle; give it ample time to get there.
    tokio::time::sleep(Duration::from_secs(2)).await;
    drop(pc);
    drop(client);
    let status = broker.terminate();
    assert!(status.success(), "{status:?}");
    assert!(broker.log_contains("cleaner pass abandoned"), "the pass was cut short");
    assert!(!broker.log_contains("still in use at shutdown"));
    assert!(dir.path().join("cs-0").join("clean-shutdown").exists(), "clean-shutdown marker");
}
