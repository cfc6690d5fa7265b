//! The data path through the real binary with an independent client (rskafka): topics
//! created and deleted over the wire, produce/fetch/list-offsets on partitions spread
//! over both shards (so most requests cross the mesh).

mod common;

use common::{record, Broker};
use rskafka::client::partition::{Compression, OffsetAt, UnknownTopicHandling};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn produce_fetch_and_list_offsets_across_shards() {
    let dir = tempfile::tempdir().expect("tempdir");
    let broker = Broker::start(dir.path());
    let client = broker.client().await;
    let controller = client.controller_client().expect("controller client");
    controller.create_topic("orders", 4, 1, 5_000).await.expect("create topic");
    let topics = client.list_topics().await.expect("list topics");
    let orders = topics.iter().find(|t| t.name == "orders").expect("orders listed");
    assert_eq!(orders.partitions.len(), 4);

    for partition in 0..4 {
        let pc = client
            .partition_client("orders", partition, UnknownTopicHandling::Error)
            .await
            .expect("partition client");
        let before = common::now() - rskafka::chrono::Duration::seconds(1);
        for batch in 0..3 {
            let records: Vec<_> =
                (0..5).map(|i| record(&format!("p{partition}-b{batch}-r{i}"))).collect();
            let offsets = pc.produce(records, Compression::NoCompression).await.expect("produce");
            assert_eq!(offsets, (batch * 5..batch * 5 + 5).collect::<Vec<i64>>());
        }
        let (fetched, high_watermark) =
            pc.fetch_records(0, 1..1_000_000, 1_000).await.expect("fetch");
        assert_eq!(high_watermark, 15);
        assert_eq!(fetched.len(), 15);
        for (i, r) in fetched.iter().enumerate() {
            assert_eq!(r.offset, i as i64);
            let want = format!("p{partition}-b{}-r{}", i / 5, i % 5);
            assert_eq!(r.record.value.as_deref(), Some(want.as_bytes()));
            assert_eq!(r.record.key.as_deref(), Some(format!("k-{want}").as_bytes()));
            assert_eq!(r.record.headers.get("h").map(Vec::as_slice), Some(&b"v"[..]));
        }
        // From the middle of a batch: the whole batch comes back, as in Kafka.
        let (mid, _) = pc.fetch_records(7, 1..1_000_000, 1_000).await.expect("fetch mid");
        assert!(mid.iter().any(|r| r.offset == 7));
        assert_eq!(pc.get_offset(OffsetAt::Earliest).await.expect("earliest"), 0);
        assert_eq!(pc.get_offset(OffsetAt::Latest).await.expect("latest"), 15);
        let by_ts = pc.get_offset(OffsetAt::Timestamp(before)).await.expect("by timestamp");
        assert_eq!(by_ts, 0);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fetch_long_poll_is_woken_by_an_append() {
    let dir = tempfile::tempdir().expect("tempdir");
    let broker = Broker::start(dir.path());
    let client = broker.client().await;
    client
        .controller_client()
        .expect("cc")
        .create_topic("tail", 2, 1, 5_000)
        .await
        .expect("create");
    for partition in 0..2 {
        let pc = client
            .partition_client("tail", partition, UnknownTopicHandling::Error)
            .await
            .expect("partition client");
        let start = std::time::Instant::now();
        let (none, _) = pc.fetch_records(0, 1..1_000_000, 300).await.expect("empty fetch");
        assert!(none.is_empty());
        assert!(start.elapsed() >= std::time::Duration::from_millis(250), "waited max_wait");
        let waiter = {
            let pc = client
                .partition_client("tail", partition, UnknownTopicHandling::Error)
                .await
                .expect("partition client");
            tokio::spawn(async move { pc.fetch_records(0, 1..1_000_000, 20_000).await })
        };
        tokio::time::sleep(std::time::Duration::from_millis(200)).await;
        let start = std::time::Instant::now();
        pc.produce(vec![record("wake")], Compression::NoCompression).await.expect("produce");
        let (got, _) = waiter.await.expect("join").expect("fetch");
        assert_eq!(got.len(), 1);
        // Woken by the append, not by the 20 s deadline.
        assert!(start.elapsed() < std::time::Duration::from_secs(10));
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn delete_topic_renames_then_name_is_reusable() {
    let dir = tempfile::tempdir().expect("tempdir");
    let broker = Broker::start(dir.path());
    let client = broker.client().await;
    let controller = client.controller_client().expect("controller client");
    controller.create_topic("gone", 2, 1, 5_000).await.expect("create");
    let pc = client.partition_client("gone", 1, UnknownTopicHandling::Error).await.expect("pc");
    pc.produce(vec![record("a"), record("b")], Compression::NoCompression).await.expect("produce");
    assert!(dir.path().join("gone-1").join("partition.metadata").exists());
    controller.delete_topic("gone", 5_000).await.expect("delete");
    assert!(!dir.path().join("gone-1").exists(), "directory renamed away at once");
    controller.create_topic("gone", 2, 1, 5_000).await.expect("re-create");
    let pc = client.partition_client("gone", 1, UnknownTopicHandling::Error).await.expect("pc");
    let offsets = pc.produce(vec![record("c")], Compression::NoCompression).await.expect("produce");
    assert_eq!(offsets, vec![0], "a re-created topic starts empty");
    let err = controller.create_topic("gone", 1, 1, 5_000).await;
    assert!(err.is_err(), "TOPIC_ALREADY_EXISTS");
}
