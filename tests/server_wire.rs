//! Wire-level behaviour through raw sockets against the real binary: bad input closes
//! only the offending connection, ApiVersions falls back to v0 with error 35, a batch with
//! a bad CRC fails only its partition, acks=0 produces get no response (and close the
//! connection on error), and pipelined requests are answered in order.

mod common;

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::Duration;

use bytes::{Bytes, BytesMut};
use common::Broker;
use kafka_protocol::messages::create_topics_request::CreatableTopic;
use kafka_protocol::messages::produce_request::{PartitionProduceData, TopicProduceData};
use kafka_protocol::messages::{
    ApiKey, ApiVersionsRequest, ApiVersionsResponse, CreateTopicsRequest, CreateTopicsResponse,
    MetadataRequest, MetadataResponse, ProduceRequest, ProduceResponse, RequestHeader,
    ResponseHeader, TopicName,
};
use kafka_protocol::protocol::{Decodable, Encodable, StrBytes};
use kafka_protocol::records::{
    Compression, Record, RecordBatchEncoder, RecordEncodeOptions, TimestampType,
};

struct Raw {
    s: TcpStream,
}

impl Raw {
    fn connect(broker: &Broker) -> Raw {
        let s = TcpStream::connect(&broker.addr).expect("connect");
        s.set_read_timeout(Some(Duration::from_secs(10))).expect("timeout");
        Raw { s }
    }

    fn frame<R: Encodable>(api: ApiKey, version: i16, correlation_id: i32, body: &R) -> Vec<u8> {
        let header = RequestHeader::default()
            .with_request_api_key(api as i16)
            .with_request_api_version(version)
            .with_correlation_id(correlation_id)
            .with_client_id(Some(StrBytes::from_static_str("raw")));
        let mut buf = BytesMut::new();
        header.encode(&mut buf, api.request_header_version(version)).expect("header");
        body.encode(&mut buf, version).expect("body");
        let mut out = (buf.len() as u32).to_be_bytes().to_vec();
        out.extend_from_slice(&buf);
        out
    }

    fn send<R: Encodable>(&mut self, api: ApiKey, version: i16, correlation_id: i32, body: &R) {
        self.s.write_all(&Self::frame(api, version, correlation_id, body)).expect("write");
    }

    fn recv_frame(&mut self) -> Option<Bytes> {
        let mut size = [0u8; 4];
        self.s.read_exact(&mut size).ok()?;
        let mut body = vec![0u8; u32::from_be_bytes(size) as usize];
        self.s.read_exact(&mut body).ok()?;
        Some(Bytes::from(body))
    }

    fn recv<R: Decodable>(&mut self, api: ApiKey, version: i16) -> (i32, R) {
        let mut frame = self.recv_frame().expect("response frame");
        let header_version =
            if api == ApiKey::ApiVersions { 0 } else { api.response_header_version(version) };
        let header = ResponseHeader::decode(&mut frame, header_version).expect("header");
        (header.correlation_id, R::decode(&mut frame, version).expect("body"))
    }

    /// True if the broker closed the connection (EOF or reset) within the read timeout.
    fn closed(&mut self) -> bool {
        let mut byte = [0u8; 1];
        match self.s.read(&mut byte) {
            Ok(0) => true,
            Ok(_) => false,
            Err(e) => {
                e.kind() != std::io::ErrorKind::WouldBlock
                    && e.kind() != std::io::ErrorKind::TimedOut
            }
        }
    }
}

fn create_topic(broker: &Broker, name: &str, partitions: i32) {
    let mut raw = Raw::connect(broker);
    let topic = CreatableTopic::default()
        .with_name(TopicName(StrBytes::from_string(name.into())))
        .with_num_partitions(partitions)
        .with_replication_factor(1);
    let req = CreateTopicsRequest::default().with_topics(vec![topic]).with_timeout_ms(5_000);
    raw.send(ApiKey::CreateTopics, 5, 1, &req);
    let (_, resp): (_, CreateTopicsResponse) = raw.recv(ApiKey::CreateTopics, 5);
    assert_eq!(resp.topics[0].error_code, 0, "create {name}");
}

/// One batch (the encoder starts a new batch per record, so callers pass one value).
fn batch(values: &[&str]) -> Bytes {
    let records: Vec<Record> = values
        .iter()
        .enumerate()
        .map(|(i, v)| Record {
            transactional: false,
            control: false,
            delete_horizon: false,
            partition_leader_epoch: -1,
            producer_id: -1,
            producer_epoch: -1,
            timestamp_type: TimestampType::Creation,
            offset: i as i64,
            sequence: -1,
            timestamp: 1_700_000_000_000,
            key: None,
            value: Some(Bytes::from(v.to_string())),
            headers: Default::default(),
        })
        .collect();
    let mut buf = BytesMut::new();
    let options = RecordEncodeOptions { version: 2, compression: Compression::None };
    RecordBatchEncoder::encode(&mut buf, &records, &options).expect("encode batch");
    buf.freeze()
}

fn produce(topic: &str, acks: i16, parts: Vec<(i32, Bytes)>) -> ProduceRequest {
    let data = parts
        .into_iter()
        .map(|(p, records)| {
            PartitionProduceData::default().with_index(p).with_records(Some(records))
        })
        .collect();
    let topic = TopicProduceData::default()
        .with_name(TopicName(StrBytes::from_string(topic.into())))
        .with_partition_data(data);
    ProduceRequest::default().with_acks(acks).with_timeout_ms(5_000).with_topic_data(vec![topic])
}

#[test]
fn bad_frames_close_only_their_connection() {
    let dir = tempfile::tempdir().expect("tempdir");
    let broker = Broker::start(dir.path());

    // ApiVersions with a version we do not know: error 35 in v0 format, connection kept.
    let mut raw = Raw::connect(&broker);
    raw.send(ApiKey::ApiVersions, 3, 7, &ApiVersionsRequest::default());
    let (corr, ok): (_, ApiVersionsResponse) = raw.recv(ApiKey::ApiVersions, 3);
    assert_eq!((corr, ok.error_code), (7, 0));
    assert!(ok.api_keys.iter().any(|k| k.api_key == 0 && k.min_version == 0));
    let mut frame = Raw::frame(ApiKey::ApiVersions, 0, 8, &ApiVersionsRequest::default());
    frame[6..8].copy_from_slice(&99i16.to_be_bytes());
    raw.s.write_all(&frame).expect("write");
    let (corr, fallback): (_, ApiVersionsResponse) = raw.recv(ApiKey::ApiVersions, 0);
    assert_eq!((corr, fallback.error_code), (8, 35));
    assert!(!fallback.api_keys.is_empty());
    raw.send(ApiKey::Metadata, 4, 9, &MetadataRequest::default().with_topics(Some(vec![])));
    let (corr, _): (_, MetadataResponse) = raw.recv(ApiKey::Metadata, 4);
    assert_eq!(corr, 9, "connection still usable after the fallback");

    // Oversize frame (above socket.request.max.bytes).
    let mut raw = Raw::connect(&broker);
    raw.s.write_all(&0x7fff_fff0u32.to_be_bytes()).expect("write");
    assert!(raw.closed(), "oversize frame closes the connection");

    // Unknown API key.
    let mut raw = Raw::connect(&broker);
    let mut frame = Raw::frame(ApiKey::Metadata, 4, 1, &MetadataRequest::default());
    frame[4..6].copy_from_slice(&0x7123i16.to_be_bytes());
    raw.s.write_all(&frame).expect("write");
    assert!(raw.closed(), "unknown api key closes the connection");

    // Garbage: a frame too short for a header, then random bytes.
    let mut raw = Raw::connect(&broker);
    raw.s.write_all(&[0, 0, 0, 3, 0xde, 0xad, 0xbe]).expect("write");
    assert!(raw.closed(), "garbage closes the connection");

    // A malformed body of a known API.
    let mut raw = Raw::connect(&broker);
    let mut frame =
        Raw::frame(ApiKey::Metadata, 4, 1, &MetadataRequest::default().with_topics(Some(vec![])));
    let n = frame.len();
    frame[n - 5..n - 1].copy_from_slice(&0x7fff_ffffu32.to_be_bytes()); // absurd array length
    raw.s.write_all(&frame).expect("write");
    assert!(raw.closed(), "malformed body closes the connection");

    // Truncated frame then EOF: the broker just drops the connection.
    let mut raw = Raw::connect(&broker);
    raw.s.write_all(&[0, 0, 0, 100, 0, 3]).expect("write");
    raw.s.shutdown(std::net::Shutdown::Write).expect("shutdown");
    assert!(raw.closed());

    // Produce v2 is advertised but refused by closing.
    let mut raw = Raw::connect(&broker);
    let mut frame = Raw::frame(ApiKey::Produce, 3, 1, &produce("x", 1, vec![]));
    frame[6..8].copy_from_slice(&2i16.to_be_bytes());
    raw.s.write_all(&frame).expect("write");
    assert!(raw.closed(), "produce v2 closes the connection");

    // The broker still serves everyone else.
    let mut raw = Raw::connect(&broker);
    raw.send(ApiKey::ApiVersions, 0, 1, &ApiVersionsRequest::default());
    let (_, ok): (_, ApiVersionsResponse) = raw.recv(ApiKey::ApiVersions, 0);
    assert_eq!(ok.error_code, 0);
}

#[test]
fn produce_errors_acks_zero_and_pipelining() {
    let dir = tempfile::tempdir().expect("tempdir");
    let broker = Broker::start(dir.path());
    create_topic(&broker, "wire", 2);

    // A bad CRC fails its partition only.
    let mut raw = Raw::connect(&broker);
    let good = batch(&["a"]);
    let mut bad = BytesMut::from(&batch(&["c"])[..]);
    let last = bad.len() - 1;
    bad[last] ^= 0xff;
    raw.send(ApiKey::Produce, 8, 1, &produce("wire", 1, vec![(0, good), (1, bad.freeze())]));
    let (_, resp): (_, ProduceResponse) = raw.recv(ApiKey::Produce, 8);
    let parts = &resp.responses[0].partition_responses;
    assert_eq!((parts[0].index, parts[0].error_code, parts[0].base_offset), (0, 0, 0), "{parts:?}");
    assert_eq!((parts[1].index, parts[1].error_code), (1, 2), "CORRUPT_MESSAGE");

    // Unknown partition and invalid acks.
    raw.send(ApiKey::Produce, 7, 2, &produce("wire", 1, vec![(9, batch(&["x"]))]));
    let (_, resp): (_, ProduceResponse) = raw.recv(ApiKey::Produce, 7);
    assert_eq!(resp.responses[0].partition_responses[0].error_code, 3);
    raw.send(ApiKey::Produce, 7, 3, &produce("wire", 5, vec![(0, batch(&["x"]))]));
    let (_, resp): (_, ProduceResponse) = raw.recv(ApiKey::Produce, 7);
    assert_eq!(resp.responses[0].partition_responses[0].error_code, 21, "INVALID_REQUIRED_ACKS");

    // acks=0: no response; the next answer on the connection is the next request's.
    raw.send(ApiKey::Produce, 7, 4, &produce("wire", 0, vec![(1, batch(&["q"]))]));
    raw.send(ApiKey::Metadata, 4, 5, &MetadataRequest::default().with_topics(Some(vec![])));
    let (corr, _): (_, MetadataResponse) = raw.recv(ApiKey::Metadata, 4);
    assert_eq!(corr, 5);

    // Pipelining: five produces written at once, answered in order with ordered offsets.
    let mut burst = Vec::new();
    for i in 0..5 {
        let req = produce("wire", 1, vec![(1, batch(&["p"]))]);
        burst.extend(Raw::frame(ApiKey::Produce, 7, 100 + i, &req));
    }
    raw.s.write_all(&burst).expect("write burst");
    let mut offsets = Vec::new();
    for i in 0..5 {
        let (corr, resp): (_, ProduceResponse) = raw.recv(ApiKey::Produce, 7);
        assert_eq!(corr, 100 + i, "responses in request order");
        offsets.push(resp.responses[0].partition_responses[0].base_offset);
    }
    assert_eq!(offsets, vec![1, 2, 3, 4, 5], "appends in request order after the acks=0 one");

    // Fetch and ListOffsets check current_leader_epoch: newer than the broker's → 75.
    use kafka_protocol::messages::fetch_request::{FetchPartition, FetchTopic};
    use kafka_protocol::messages::list_offsets_request::{ListOffsetsPartition, ListOffsetsTopic};
    use kafka_protocol::messages::offset_for_leader_epoch_request::{
        OffsetForLeaderPartition, OffsetForLeaderTopic,
    };
    use kafka_protocol::messages::{
        FetchRequest, FetchResponse, ListOffsetsRequest, ListOffsetsResponse,
        OffsetForLeaderEpochRequest, OffsetForLeaderEpochResponse,
    };
    let fetch = |epoch: i32| {
        let part = FetchPartition::default()
            .with_partition(1)
            .with_fetch_offset(0)
            .with_current_leader_epoch(epoch)
            .with_partition_max_bytes(1 << 20);
        let topic = FetchTopic::default()
            .with_topic(TopicName(StrBytes::from_static_str("wire")))
            .with_partitions(vec![part]);
        FetchRequest::default().with_max_wait_ms(0).with_max_bytes(1 << 20).with_topics(vec![topic])
    };
    raw.send(ApiKey::Fetch, 11, 20, &fetch(5));
    let (_, resp): (_, FetchResponse) = raw.recv(ApiKey::Fetch, 11);
    assert_eq!(resp.responses[0].partitions[0].error_code, 75, "UNKNOWN_LEADER_EPOCH");
    raw.send(ApiKey::Fetch, 11, 21, &fetch(0));
    let (_, resp): (_, FetchResponse) = raw.recv(ApiKey::Fetch, 11);
    let p = &resp.responses[0].partitions[0];
    assert_eq!((p.error_code, p.high_watermark), (0, 6));
    assert!(p.records.as_ref().is_some_and(|r| !r.is_empty()));
    let list = |ts: i64| {
        let part = ListOffsetsPartition::default().with_partition_index(1).with_timestamp(ts);
        let topic = ListOffsetsTopic::default()
            .with_name(TopicName(StrBytes::from_static_str("wire")))
            .with_partitions(vec![part]);
        ListOffsetsRequest::default()
            .with_replica_id(kafka_protocol::messages::BrokerId(-1))
            .with_topics(vec![topic])
    };
    for (ts, offset) in [(-2i64, 0i64), (-1, 6), (-3, 0)] {
        raw.send(ApiKey::ListOffsets, 7, 22, &list(ts));
        let (_, resp): (_, ListOffsetsResponse) = raw.recv(ApiKey::ListOffsets, 7);
        let p = &resp.topics[0].partitions[0];
        assert_eq!((p.error_code, p.offset, p.leader_epoch), (0, offset, 0), "timestamp {ts}");
    }
    let epochs = OffsetForLeaderEpochRequest::default()
        .with_replica_id(kafka_protocol::messages::BrokerId(-1))
        .with_topics(vec![OffsetForLeaderTopic::default()
            .with_topic(TopicName(StrBytes::from_static_str("wire")))
            .with_partitions(vec![OffsetForLeaderPartition::default()
                .with_partition(1)
                .with_current_leader_epoch(-1)
                .with_leader_epoch(0)])]);
    raw.send(ApiKey::OffsetForLeaderEpoch, 3, 23, &epochs);
    let (_, resp): (_, OffsetForLeaderEpochResponse) = raw.recv(ApiKey::OffsetForLeaderEpoch, 3);
    let p = &resp.topics[0].partitions[0];
    assert_eq!((p.error_code, p.leader_epoch, p.end_offset), (0, 0, 6));

    // acks=0 with an error closes the connection.
    raw.send(ApiKey::Produce, 7, 6, &produce("missing", 0, vec![(0, batch(&["x"]))]));
    assert!(raw.closed(), "acks=0 failure closes the connection");
}

#[test]
fn auto_create_and_create_partitions_open_logs_on_owner_shards() {
    use kafka_protocol::messages::create_partitions_request::CreatePartitionsTopic;
    use kafka_protocol::messages::metadata_request::MetadataRequestTopic;
    use kafka_protocol::messages::{CreatePartitionsRequest, CreatePartitionsResponse};
    let dir = tempfile::tempdir().expect("tempdir");
    let broker = Broker::start(dir.path());
    let mut raw = Raw::connect(&broker);
    let wanted = MetadataRequestTopic::default()
        .with_name(Some(TopicName(StrBytes::from_static_str("auto"))));
    let req = MetadataRequest::default()
        .with_topics(Some(vec![wanted]))
        .with_allow_auto_topic_creation(true);
    raw.send(ApiKey::Metadata, 9, 1, &req);
    let (_, resp): (_, MetadataResponse) = raw.recv(ApiKey::Metadata, 9);
    assert_eq!(resp.topics[0].error_code, 0, "auto-created and answered at once");
    assert_eq!(resp.topics[0].partitions.len(), 1);

    let grow = CreatePartitionsTopic::default()
        .with_name(TopicName(StrBytes::from_static_str("auto")))
        .with_count(3)
        .with_assignments(None);
    let req = CreatePartitionsRequest::default().with_topics(vec![grow]).with_timeout_ms(5_000);
    raw.send(ApiKey::CreatePartitions, 2, 2, &req);
    let (_, resp): (_, CreatePartitionsResponse) = raw.recv(ApiKey::CreatePartitions, 2);
    assert_eq!(resp.results[0].error_code, 0);
    // The new partitions are open on their owner shards as soon as the answer arrives.
    raw.send(
        ApiKey::Produce,
        7,
        3,
        &produce("auto", 1, vec![(1, batch(&["x"])), (2, batch(&["y"]))]),
    );
    let (_, resp): (_, ProduceResponse) = raw.recv(ApiKey::Produce, 7);
    for p in &resp.responses[0].partition_responses {
        assert_eq!((p.error_code, p.base_offset), (0, 0), "partition {}", p.index);
    }
}
