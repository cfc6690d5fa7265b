//! Transactions through raw Kafka requests against the real binary (issue 17): the
//! coordinator's InitProducerId/AddPartitionsToTxn/EndTxn, transactional produce, the last
//! stable offset and `aborted_transactions` of read_committed fetches, ListOffsets isolation,
//! fencing (PRODUCER_FENCED, INVALID_PRODUCER_EPOCH before KIP-588's versions), the timeout
//! abort, Describe/ListTransactions, and recovery after a SIGKILL with a transaction open.

mod common;

use std::time::{Duration, Instant};

use bytes::Bytes;
use common::{Broker, Wire};
use kafka_protocol::messages::add_partitions_to_txn_request::AddPartitionsToTxnTopic;
use kafka_protocol::messages::fetch_request::{FetchPartition, FetchTopic};
use kafka_protocol::messages::list_offsets_request::{ListOffsetsPartition, ListOffsetsTopic};
use kafka_protocol::messages::produce_request::{PartitionProduceData, TopicProduceData};
use kafka_protocol::messages::{
    AddPartitionsToTxnRequest, AddPartitionsToTxnResponse, ApiKey, DescribeTransactionsRequest,
    DescribeTransactionsResponse, EndTxnRequest, EndTxnResponse, FetchRequest, FetchResponse,
    FindCoordinatorRequest, FindCoordinatorResponse, InitProducerIdRequest, InitProducerIdResponse,
    ListOffsetsRequest, ListOffsetsResponse, ListTransactionsRequest, ListTransactionsResponse,
    ProduceRequest, ProduceResponse, ProducerId, TopicName, TransactionalId,
};
use kafka_protocol::protocol::StrBytes;

const TOPIC: &str = "txn";
const PRODUCER_FENCED: i16 = 90;
const INVALID_PRODUCER_EPOCH: i16 = 47;
const CONCURRENT_TRANSACTIONS: i16 = 51;
const INVALID_TXN_STATE: i16 = 48;

use common::txn_batch;

fn s(v: &str) -> StrBytes {
    StrBytes::from_string(v.to_string())
}

fn produce(w: &mut Wire, records: Bytes) -> (i16, i64) {
    let part = PartitionProduceData::default().with_index(0).with_records(Some(records));
    let topic =
        TopicProduceData::default().with_name(TopicName(s(TOPIC))).with_partition_data(vec![part]);
    let req = ProduceRequest::default()
        .with_transactional_id(None)
        .with_acks(-1)
        .with_timeout_ms(10_000)
        .with_topic_data(vec![topic]);
    let resp: ProduceResponse = w.call(ApiKey::Produce, 9, &req);
    let p = &resp.responses[0].partition_responses[0];
    (p.error_code, p.base_offset)
}

fn init(w: &mut Wire, id: &str, timeout_ms: i32) -> (i16, i64, i16) {
    let req = InitProducerIdRequest::default()
        .with_transactional_id(Some(TransactionalId(s(id))))
        .with_transaction_timeout_ms(timeout_ms)
        .with_producer_id(ProducerId(-1))
        .with_producer_epoch(-1);
    let resp: InitProducerIdResponse = w.call(ApiKey::InitProducerId, 4, &req);
    (resp.error_code, resp.producer_id.0, resp.producer_epoch)
}

/// InitProducerId, retried while the coordinator answers CONCURRENT_TRANSACTIONS (it is
/// aborting the previous instance's transaction), as clients do.
fn init_retrying(w: &mut Wire, id: &str, timeout_ms: i32) -> (i64, i16) {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let (code, pid, epoch) = init(w, id, timeout_ms);
        if code == 0 {
            return (pid, epoch);
        }
        assert_eq!(code, CONCURRENT_TRANSACTIONS, "InitProducerId");
        assert!(Instant::now() < deadline, "InitProducerId kept answering {code}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

fn add_partition(w: &mut Wire, id: &str, pid: i64, epoch: i16, version: i16) -> i16 {
    let req = AddPartitionsToTxnRequest::default()
        .with_v3_and_below_transactional_id(TransactionalId(s(id)))
        .with_v3_and_below_producer_id(ProducerId(pid))
        .with_v3_and_below_producer_epoch(epoch)
        .with_v3_and_below_topics(vec![AddPartitionsToTxnTopic::default()
            .with_name(TopicName(s(TOPIC)))
            .with_partitions(vec![0])]);
    let resp: AddPartitionsToTxnResponse = w.call(ApiKey::AddPartitionsToTxn, version, &req);
    resp.results_by_topic_v3_and_below[0].results_by_partition[0].partition_error_code
}

fn end(w: &mut Wire, id: &str, pid: i64, epoch: i16, commit: bool) -> i16 {
    let req = EndTxnRequest::default()
        .with_transactional_id(TransactionalId(s(id)))
        .with_producer_id(ProducerId(pid))
        .with_producer_epoch(epoch)
        .with_committed(commit);
    let resp: EndTxnResponse = w.call(ApiKey::EndTxn, 3, &req);
    resp.error_code
}

struct Read {
    high_watermark: i64,
    last_stable_offset: i64,
    aborted: Option<Vec<(i64, i64)>>,
    records: Bytes,
}

fn fetch(w: &mut Wire, offset: i64, read_committed: bool) -> Read {
    let part = FetchPartition::default()
        .with_partition(0)
        .with_fetch_offset(offset)
        .with_partition_max_bytes(1 << 20);
    let req = FetchRequest::default()
        .with_max_wait_ms(0)
        .with_min_bytes(1)
        .with_max_bytes(1 << 20)
        .with_isolation_level(i8::from(read_committed))
        .with_topics(vec![FetchTopic::default()
            .with_topic(TopicName(s(TOPIC)))
            .with_partitions(vec![part])]);
    let resp: FetchResponse = w.call(ApiKey::Fetch, 11, &req);
    let p = &resp.responses[0].partitions[0];
    assert_eq!(p.error_code, 0);
    Read {
        high_watermark: p.high_watermark,
        last_stable_offset: p.last_stable_offset,
        aborted: p
            .aborted_transactions
            .as_ref()
            .map(|v| v.iter().map(|a| (a.producer_id.0, a.first_offset)).collect()),
        records: p.records.clone().unwrap_or_default(),
    }
}

/// Waits (bounded) until the last stable offset reaches the high watermark.
fn wait_stable(w: &mut Wire, limit: Duration) -> Read {
    let deadline = Instant::now() + limit;
    loop {
        let r = fetch(w, 0, true);
        if r.last_stable_offset == r.high_watermark {
            return r;
        }
        assert!(
            Instant::now() < deadline,
            "LSO {} stuck below HW {}",
            r.last_stable_offset,
            r.high_watermark
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

fn latest(w: &mut Wire, read_committed: bool) -> i64 {
    let req = ListOffsetsRequest::default()
        .with_replica_id(kafka_protocol::messages::BrokerId(-1))
        .with_isolation_level(i8::from(read_committed))
        .with_topics(vec![ListOffsetsTopic::default()
            .with_name(TopicName(s(TOPIC)))
            .with_partitions(vec![ListOffsetsPartition::default()
                .with_partition_index(0)
                .with_timestamp(-1)])]);
    let resp: ListOffsetsResponse = w.call(ApiKey::ListOffsets, 5, &req);
    resp.topics[0].partitions[0].offset
}

fn describe(w: &mut Wire, id: &str) -> (i16, String, Vec<i32>) {
    let req =
        DescribeTransactionsRequest::default().with_transactional_ids(vec![TransactionalId(s(id))]);
    let resp: DescribeTransactionsResponse = w.call(ApiKey::DescribeTransactions, 0, &req);
    let t = &resp.transaction_states[0];
    let parts = t.topics.iter().flat_map(|t| t.partitions.clone()).collect();
    (t.error_code, t.transaction_state.to_string(), parts)
}

#[test]
fn transactions_over_the_wire() {
    let dir = tempfile::tempdir().expect("tempdir");
    // Timed-out transactions are looked for every 200 ms (Kafka's default is 10 s).
    let flags =
        ["--shards", "2", "--transaction-abort-timed-out-transaction-cleanup-interval-ms", "200"];
    let mut broker = Broker::start_with(dir.path(), &flags);
    let mut w = Wire::connect(&broker.addr);
    w.create_topic(TOPIC, 1, &[]);

    let find = FindCoordinatorRequest::default().with_key(s("tx")).with_key_type(1);
    let found: FindCoordinatorResponse = w.call(ApiKey::FindCoordinator, 3, &find);
    assert_eq!(found.error_code, 0, "FindCoordinator for a transactional id");

    // An aborted transaction: invisible to read_committed, reported as aborted.
    let (code, pid, epoch) = init(&mut w, "tx", 60_000);
    assert_eq!((code, epoch), (0, 0));
    assert_eq!(end(&mut w, "tx", pid, epoch, true), INVALID_TXN_STATE, "nothing to commit");
    assert_eq!(add_partition(&mut w, "tx", pid, epoch, 3), 0);
    assert_eq!(describe(&mut w, "tx"), (0, "Ongoing".into(), vec![0]));
    assert_eq!(produce(&mut w, txn_batch(pid, epoch, 0, 3)), (0, 0));
    let r = fetch(&mut w, 0, true);
    assert_eq!((r.high_watermark, r.last_stable_offset), (3, 0));
    assert!(r.records.is_empty(), "read_committed stops at the LSO");
    assert!(!fetch(&mut w, 0, false).records.is_empty());
    assert_eq!((latest(&mut w, true), latest(&mut w, false)), (0, 3));
    assert_eq!(end(&mut w, "tx", pid, epoch, false), 0);
    let r = wait_stable(&mut w, Duration::from_secs(10));
    assert_eq!(r.high_watermark, 4, "three records and the ABORT marker");
    assert_eq!(r.aborted, Some(vec![(pid, 0)]));
    assert_eq!(fetch(&mut w, 0, false).aborted, None, "null for read_uncommitted");
    assert_eq!(latest(&mut w, true), 4);

    // A committed one: no aborted transaction in its range.
    assert_eq!(add_partition_retry(&mut w, pid, epoch), 0);
    assert_eq!(produce(&mut w, txn_batch(pid, epoch, 3, 2)), (0, 4));
    assert_eq!(end(&mut w, "tx", pid, epoch, true), 0);
    let r = wait_stable(&mut w, Duration::from_secs(10));
    assert_eq!(r.high_watermark, 7);
    assert_eq!(fetch(&mut w, 4, true).aborted, Some(vec![]));

    // Fencing: a new instance bumps the epoch; the old one is fenced (by version).
    let (pid2, epoch2) = init_retrying(&mut w, "tx", 60_000);
    assert_eq!((pid2, epoch2), (pid, epoch + 1));
    assert_eq!(add_partition(&mut w, "tx", pid, epoch, 3), PRODUCER_FENCED);
    assert_eq!(add_partition(&mut w, "tx", pid, epoch, 1), INVALID_PRODUCER_EPOCH);
    assert_eq!(end(&mut w, "tx", pid, epoch, true), PRODUCER_FENCED);
    // A new instance while a transaction is open aborts it first.
    assert_eq!(add_partition(&mut w, "tx", pid2, epoch2, 3), 0);
    assert_eq!(produce(&mut w, txn_batch(pid2, epoch2, 0, 1)), (0, 7));
    let (pid3, epoch3) = init_retrying(&mut w, "tx", 60_000);
    assert_eq!(pid3, pid);
    assert!(epoch3 >= epoch2 + 2, "the abort bumped the epoch, then the init did");
    let r = wait_stable(&mut w, Duration::from_secs(10));
    assert_eq!(r.aborted.map(|a| a.len()), Some(2));

    // Timeout: a producer that hangs is aborted and fenced; the LSO moves on.
    let (code, slow, slow_epoch) = init(&mut w, "slow", 1_000);
    assert_eq!(code, 0);
    assert_ne!(slow, pid, "each transactional id has its own producer id");
    assert_eq!(add_partition_as(&mut w, "slow", slow, slow_epoch), 0);
    let (_, first) = produce(&mut w, txn_batch(slow, slow_epoch, 0, 2));
    let started = Instant::now();
    let r = wait_stable(&mut w, Duration::from_secs(30));
    eprintln!("timeout abort after {:?} (timeout 1 s, check every 200 ms)", started.elapsed());
    assert!(r.aborted.unwrap().contains(&(slow, first)));
    assert_eq!(end(&mut w, "slow", slow, slow_epoch, true), PRODUCER_FENCED);
    let listed: ListTransactionsResponse = w.call(
        ApiKey::ListTransactions,
        1,
        &ListTransactionsRequest::default().with_duration_filter(-1),
    );
    let mut ids: Vec<(String, String)> = listed
        .transaction_states
        .iter()
        .map(|t| (t.transactional_id.0.to_string(), t.transaction_state.to_string()))
        .collect();
    ids.sort();
    assert_eq!(ids, vec![("slow".into(), "CompleteAbort".into()), ("tx".into(), "Empty".into())]);

    // SIGKILL with a transaction open: both sides recover it, and it can still commit.
    let (pid4, epoch4) = init_retrying(&mut w, "tx", 60_000);
    assert_eq!(add_partition(&mut w, "tx", pid4, epoch4, 3), 0);
    let (_, open_at) = produce(&mut w, txn_batch(pid4, epoch4, 0, 2));
    drop(w);
    broker.kill();
    let broker = Broker::start_with(dir.path(), &flags);
    let mut w = Wire::connect(&broker.addr);
    let r = fetch(&mut w, 0, true);
    assert_eq!(r.last_stable_offset, open_at, "the open transaction survived the restart");
    assert_eq!(describe(&mut w, "tx").1, "Ongoing");
    assert_eq!(end(&mut w, "tx", pid4, epoch4, true), 0);
    let r = wait_stable(&mut w, Duration::from_secs(10));
    assert_eq!(r.high_watermark, open_at + 3);
    assert_eq!(r.aborted.map(|a| a.len()), Some(3), "the aborted index survived too");
}

/// AddPartitionsToTxn right after a completed transaction may meet CONCURRENT_TRANSACTIONS
/// while the markers complete; clients retry. Returns 0 once it succeeds.
fn add_partition_retry(w: &mut Wire, pid: i64, epoch: i16) -> i16 {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        match add_partition(w, "tx", pid, epoch, 3) {
            CONCURRENT_TRANSACTIONS if Instant::now() < deadline => {
                std::thread::sleep(Duration::from_millis(20));
            }
            code => return code,
        }
    }
}

fn add_partition_as(w: &mut Wire, id: &str, pid: i64, epoch: i16) -> i16 {
    add_partition(w, id, pid, epoch, 3)
}

/// A hanging transaction (data written without the coordinator knowing: possible while
/// KIP-890's verification is not served) holds the LSO; DescribeProducers shows its start
/// offset (what `kafka-transactions.sh find-hanging` reads) and WriteTxnMarkers aborts it
/// (what `kafka-transactions.sh abort` sends).
#[test]
fn a_hanging_transaction_is_found_and_aborted_by_hand() {
    use kafka_protocol::messages::describe_producers_request::TopicRequest;
    use kafka_protocol::messages::write_txn_markers_request::{
        WritableTxnMarker, WritableTxnMarkerTopic,
    };
    use kafka_protocol::messages::{
        DescribeProducersRequest, DescribeProducersResponse, WriteTxnMarkersRequest,
        WriteTxnMarkersResponse,
    };
    let dir = tempfile::tempdir().expect("tempdir");
    let broker = Broker::start(dir.path());
    let mut w = Wire::connect(&broker.addr);
    w.create_topic(TOPIC, 1, &[]);
    let pid = 4242;
    assert_eq!(produce(&mut w, txn_batch(pid, 3, 0, 2)), (0, 0));
    let r = fetch(&mut w, 0, true);
    assert_eq!((r.high_watermark, r.last_stable_offset), (2, 0));
    let req = DescribeProducersRequest::default().with_topics(vec![TopicRequest::default()
        .with_name(TopicName(s(TOPIC)))
        .with_partition_indexes(vec![0])]);
    let described: DescribeProducersResponse = w.call(ApiKey::DescribeProducers, 0, &req);
    let p = &described.topics[0].partitions[0].active_producers[0];
    assert_eq!((p.producer_id.0, p.current_txn_start_offset), (pid, 0));
    let marker = WritableTxnMarker::default()
        .with_producer_id(ProducerId(pid))
        .with_producer_epoch(3)
        .with_transaction_result(false)
        .with_coordinator_epoch(0)
        .with_topics(vec![WritableTxnMarkerTopic::default()
            .with_name(TopicName(s(TOPIC)))
            .with_partition_indexes(vec![0])]);
    let answer: WriteTxnMarkersResponse = w.call(
        ApiKey::WriteTxnMarkers,
        1,
        &WriteTxnMarkersRequest::default().with_markers(vec![marker]),
    );
    assert_eq!(answer.markers[0].topics[0].partitions[0].error_code, 0);
    let r = wait_stable(&mut w, Duration::from_secs(10));
    assert_eq!((r.high_watermark, r.aborted), (3, Some(vec![(pid, 0)])));
    // A marker of an older epoch is refused.
    let stale = WritableTxnMarker::default()
        .with_producer_id(ProducerId(pid))
        .with_producer_epoch(2)
        .with_transaction_result(true)
        .with_topics(vec![WritableTxnMarkerTopic::default()
            .with_name(TopicName(s(TOPIC)))
            .with_partition_indexes(vec![0])]);
    let answer: WriteTxnMarkersResponse = w.call(
        ApiKey::WriteTxnMarkers,
        1,
        &WriteTxnMarkersRequest::default().with_markers(vec![stale]),
    );
    assert_eq!(answer.markers[0].topics[0].partitions[0].error_code, INVALID_PRODUCER_EPOCH);
}

/// TxnOffsetCommit: offsets are pending (OffsetFetch with require_stable gets
/// UNSTABLE_OFFSET_COMMIT) until the COMMIT marker applies them; an abort drops them; both
/// survive a restart (replay of `__consumer_offsets` with its markers).
#[test]
fn transactional_offsets_apply_at_commit() {
    use kafka_protocol::messages::offset_fetch_request::OffsetFetchRequestTopic;
    use kafka_protocol::messages::txn_offset_commit_request::{
        TxnOffsetCommitRequestPartition, TxnOffsetCommitRequestTopic,
    };
    use kafka_protocol::messages::{
        AddOffsetsToTxnRequest, AddOffsetsToTxnResponse, GroupId, OffsetFetchRequest,
        OffsetFetchResponse, TxnOffsetCommitRequest, TxnOffsetCommitResponse,
    };
    let dir = tempfile::tempdir().expect("tempdir");
    let mut broker = Broker::start(dir.path());
    let mut w = Wire::connect(&broker.addr);
    w.create_topic(TOPIC, 1, &[]);
    let find = FindCoordinatorRequest::default().with_key(s("g")).with_key_type(0);
    let _: FindCoordinatorResponse = w.call(ApiKey::FindCoordinator, 3, &find);
    let (code, pid, epoch) = init(&mut w, "otx", 60_000);
    assert_eq!(code, 0);
    let fetch_offset = |w: &mut Wire, stable: bool| -> (i16, i64) {
        let req = OffsetFetchRequest::default()
            .with_group_id(GroupId(s("g")))
            .with_require_stable(stable)
            .with_topics(Some(vec![OffsetFetchRequestTopic::default()
                .with_name(TopicName(s(TOPIC)))
                .with_partition_indexes(vec![0])]));
        let resp: OffsetFetchResponse = w.call(ApiKey::OffsetFetch, 7, &req);
        let p = &resp.topics[0].partitions[0];
        (p.error_code, p.committed_offset)
    };
    let commit_offset = |w: &mut Wire, offset: i64, epoch: i16| {
        let add = AddOffsetsToTxnRequest::default()
            .with_transactional_id(TransactionalId(s("otx")))
            .with_producer_id(ProducerId(pid))
            .with_producer_epoch(epoch)
            .with_group_id(GroupId(s("g")));
        let added: AddOffsetsToTxnResponse = w.call(ApiKey::AddOffsetsToTxn, 3, &add);
        assert_eq!(added.error_code, 0);
        let req = TxnOffsetCommitRequest::default()
            .with_transactional_id(TransactionalId(s("otx")))
            .with_group_id(GroupId(s("g")))
            .with_producer_id(ProducerId(pid))
            .with_producer_epoch(epoch)
            .with_generation_id(-1)
            .with_topics(vec![TxnOffsetCommitRequestTopic::default()
                .with_name(TopicName(s(TOPIC)))
                .with_partitions(vec![TxnOffsetCommitRequestPartition::default()
                    .with_partition_index(0)
                    .with_committed_offset(offset)])]);
        let resp: TxnOffsetCommitResponse = w.call(ApiKey::TxnOffsetCommit, 3, &req);
        assert_eq!(resp.topics[0].partitions[0].error_code, 0);
    };
    let wait_offset = |w: &mut Wire, want: i64| {
        let deadline = Instant::now() + Duration::from_secs(10);
        while fetch_offset(w, true) != (0, want) {
            assert!(Instant::now() < deadline, "offset {want} never became stable");
            std::thread::sleep(Duration::from_millis(20));
        }
    };
    commit_offset(&mut w, 5, epoch);
    assert_eq!(fetch_offset(&mut w, true), (88, -1), "UNSTABLE_OFFSET_COMMIT while pending");
    assert_eq!(fetch_offset(&mut w, false), (0, -1), "not yet committed");
    assert_eq!(end(&mut w, "otx", pid, epoch, true), 0);
    wait_offset(&mut w, 5);
    assert_eq!(add_partition_retry_as(&mut w, "otx", pid, epoch), 0);
    commit_offset(&mut w, 9, epoch);
    assert_eq!(end(&mut w, "otx", pid, epoch, false), 0);
    wait_offset(&mut w, 5);
    drop(w);
    broker.kill();
    let broker = Broker::start(dir.path());
    let mut w = Wire::connect(&broker.addr);
    let _: FindCoordinatorResponse = w.call(ApiKey::FindCoordinator, 3, &find);
    wait_offset(&mut w, 5);
}

fn add_partition_retry_as(w: &mut Wire, id: &str, pid: i64, epoch: i16) -> i16 {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        match add_partition(w, id, pid, epoch, 3) {
            CONCURRENT_TRANSACTIONS if Instant::now() < deadline => {
                std::thread::sleep(Duration::from_millis(20));
            }
            code => return code,
        }
    }
}
