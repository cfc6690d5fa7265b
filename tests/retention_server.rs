//! DeleteRecords against the real broker (rskafka's client): the log start advances, the
//! low watermark is returned, ListOffsets earliest and Fetch honour it (OFFSET_OUT_OF_RANGE
//! below it), and it survives a SIGKILL restart (checkpointed before the answer).

mod common;

use common::{record, Broker};
use rskafka::client::error::{Error as ClientError, ProtocolError};
use rskafka::client::partition::{Compression, OffsetAt, UnknownTopicHandling};

#[tokio::test]
async fn delete_records_advances_log_start_durably() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut broker = Broker::start_with(dir.path(), &["--shards", "1"]);
    let client = broker.client().await;
    client
        .controller_client()
        .expect("controller")
        .create_topic("dr", 1, 1, 5_000)
        .await
        .expect("create");
    let pc = client.partition_client("dr", 0, UnknownTopicHandling::Retry).await.expect("pc");
    for i in 0..10 {
        let records = (0..10).map(|j| record(&format!("{i}-{j}"))).collect();
        pc.produce(records, Compression::NoCompression).await.expect("produce");
    }
    assert_eq!(pc.get_offset(OffsetAt::Earliest).await.expect("earliest"), 0);
    pc.delete_records(42, 5_000).await.expect("delete records");
    assert_eq!(pc.get_offset(OffsetAt::Earliest).await.expect("earliest"), 42);
    let below = pc.fetch_records(10, 1..1_000_000, 100).await;
    assert!(
        matches!(
            below,
            Err(ClientError::ServerError { protocol_error: ProtocolError::OffsetOutOfRange, .. })
        ),
        "{below:?}"
    );
    let (records, hw) = pc.fetch_records(42, 1..1_000_000, 100).await.expect("fetch at start");
    assert_eq!(hw, 100);
    assert_eq!(records.first().map(|r| r.offset), Some(42));
    // Beyond the high watermark: OFFSET_OUT_OF_RANGE; below the start: a no-op.
    assert!(pc.delete_records(101, 5_000).await.is_err());
    pc.delete_records(5, 5_000).await.expect("no-op");
    assert_eq!(pc.get_offset(OffsetAt::Earliest).await.expect("earliest"), 42);
    drop(pc);
    drop(client);
    broker.kill();
    let broker = Broker::start_with(dir.path(), &["--shards", "1"]);
    let client = broker.client().await;
    let pc = client.partition_client("dr", 0, UnknownTopicHandling::Retry).await.expect("pc");
    assert_eq!(pc.get_offset(OffsetAt::Earliest).await.expect("earliest"), 42, "durable");
    assert_eq!(pc.get_offset(OffsetAt::Latest).await.expect("latest"), 100);
}
