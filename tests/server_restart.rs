//! Restart: everything acknowledged before a SIGTERM or a SIGKILL is read back after the
//! broker starts again on the same data dir; topics (metadata log) survive too, and a
//! SIGTERM leaves every partition with its clean-shutdown marker (no recovery scan).

mod common;

use common::{record, Broker};
use rskafka::client::partition::{Compression, UnknownTopicHandling};

const PARTITIONS: i32 = 4;
const BATCHES: usize = 20;
const RECORDS_PER_BATCH: usize = 10;

/// Produces to every partition; returns the acknowledged values per partition, in order.
async fn produce_all(broker: &Broker, topic: &str, round: usize) -> Vec<Vec<String>> {
    let client = broker.client().await;
    let mut acked = vec![Vec::new(); PARTITIONS as usize];
    for partition in 0..PARTITIONS {
        let pc = client
            .partition_client(topic, partition, UnknownTopicHandling::Retry)
            .await
            .expect("partition client");
        for b in 0..BATCHES {
            let values: Vec<String> =
                (0..RECORDS_PER_BATCH).map(|r| format!("r{round}-p{partition}-b{b}-{r}")).collect();
            let records = values.iter().map(|v| record(v)).collect();
            pc.produce(records, Compression::NoCompression).await.expect("produce");
            acked[partition as usize].extend(values);
        }
    }
    acked
}

async fn read_all(broker: &Broker, topic: &str) -> Vec<Vec<String>> {
    let client = broker.client().await;
    let mut out = Vec::new();
    for partition in 0..PARTITIONS {
        let pc = client
            .partition_client(topic, partition, UnknownTopicHandling::Retry)
            .await
            .expect("partition client");
        let mut values = Vec::new();
        let mut offset = 0;
        loop {
            let (records, high_watermark) =
                pc.fetch_records(offset, 1..1_000_000, 100).await.expect("fetch");
            for r in records.into_iter().filter(|r| r.offset >= offset) {
                assert_eq!(r.offset, values.len() as i64, "offsets are dense");
                values.push(String::from_utf8(r.record.value.unwrap_or_default()).expect("utf8"));
            }
            offset = values.len() as i64;
            if offset >= high_watermark {
                break;
            }
        }
        out.push(values);
    }
    out
}

async fn restart_keeps_acknowledged(kill: bool) {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut broker = Broker::start(dir.path());
    let client = broker.client().await;
    client
        .controller_client()
        .expect("cc")
        .create_topic("durable", PARTITIONS, 1, 5_000)
        .await
        .expect("create");
    let mut expected = produce_all(&broker, "durable", 0).await;
    if kill {
        broker.kill();
    } else {
        assert!(broker.terminate().success(), "clean exit on SIGTERM");
        for p in 0..PARTITIONS {
            let marker = dir.path().join(format!("durable-{p}")).join("clean-shutdown");
            assert!(marker.exists(), "partition {p} closed cleanly");
        }
    }
    let broker = Broker::start(dir.path());
    assert_eq!(read_all(&broker, "durable").await, expected, "all acknowledged records back");
    // The log continues where it stopped.
    let more = produce_all(&broker, "durable", 1).await;
    for (e, m) in expected.iter_mut().zip(more) {
        e.extend(m);
    }
    assert_eq!(read_all(&broker, "durable").await, expected);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigterm_restart_keeps_everything() {
    restart_keeps_acknowledged(false).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigkill_restart_keeps_everything_acknowledged() {
    restart_keeps_acknowledged(true).await;
}
