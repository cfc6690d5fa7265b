//! `shardlog top` against a running two-shard broker: in non-TTY mode (stdout is a pipe)
//! it prints plain frames, one per refresh, with a row per shard and the latency of the
//! APIs the broker served; a wrong admin address fails with a clear message.
#![cfg(feature = "metrics")]

mod metrics_support;

use std::process::Command;

use metrics_support::broker::{self, BIN};
use rskafka::client::partition::{Compression, UnknownTopicHandling};
use rskafka::client::ClientBuilder;
use rskafka::record::Record;

async fn produce_some(addr: &str) {
    let client = ClientBuilder::new(vec![addr.to_owned()]).build().await.expect("client");
    client.controller_client().expect("ctl").create_topic("top", 2, 1, 5_000).await.expect("topic");
    let pc = client.partition_client("top", 1, UnknownTopicHandling::Retry).await.expect("pc");
    let ts = rskafka::chrono::DateTime::from_timestamp_millis(1_700_000_000_000).expect("ts");
    for _ in 0..3 {
        let r = Record {
            key: None,
            value: Some(vec![1; 64]),
            headers: Default::default(),
            timestamp: ts,
        };
        pc.produce(vec![r], Compression::NoCompression).await.expect("produce");
    }
}

#[test]
fn plain_frames_show_every_shard_and_the_served_apis() {
    let b = broker::start(2);
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().expect("rt");
    rt.block_on(produce_some(&b.addr));
    std::thread::sleep(std::time::Duration::from_millis(400)); // one publish interval
    let out = Command::new(BIN)
        .args(["top", "--admin", &b.admin, "--iterations", "2", "--interval-ms", "300"])
        .output()
        .expect("run top");
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{text}{}", String::from_utf8_lossy(&out.stderr));
    assert!(!text.contains('\x1b'), "no terminal escapes when not a TTY: {text:?}");
    assert_eq!(text.matches("shardlog top  ").count(), 2, "two frames: {text}");
    assert_eq!(text.matches(" SHARD  BUSY%").count(), 2, "{text}");
    let frame = text.split("shardlog top  ").nth(2).expect("second frame");
    let shard_rows: Vec<&str> = frame
        .lines()
        .filter(|l| {
            l.split_whitespace()
                .next()
                .is_some_and(|w| w.trim_end_matches('*').parse::<u32>().is_ok())
        })
        .collect();
    assert_eq!(shard_rows.len(), 2, "a row per shard: {frame}");
    let produce = frame.lines().find(|l| l.starts_with("Produce")).expect("Produce row");
    assert_eq!(produce.split_whitespace().nth(1), Some("3"), "{produce}");
    assert!(frame.contains("ApiVersions") || frame.contains("Metadata"), "{frame}");
    // The first frame (rates since start) lists the producing client with its byte rate.
    let first = text.split("shardlog top  ").nth(1).expect("first frame");
    assert!(first.contains("PROD MiB/s") && first.contains("THROTTLE ms/s"), "{first}");

    // --admin and a duration with its unit are accepted before the subcommand too.
    let out = Command::new(BIN)
        .args(["--admin", &b.admin, "top", "--iterations", "1", "--interval-ms", "1s"])
        .output()
        .expect("run top");
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{text}{}", String::from_utf8_lossy(&out.stderr));
    assert_eq!(text.matches("shardlog top  ").count(), 1, "one frame: {text}");
}

#[test]
fn unreachable_admin_endpoint_is_a_clear_error() {
    let out = Command::new(BIN)
        .args(["top", "--admin", "127.0.0.1:9", "--iterations", "1"])
        .output()
        .expect("run top");
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("cannot reach the admin endpoint at 127.0.0.1:9"), "{err}");
}
