//! Writes the seed corpora (`tests/__fuzz__/<target>/corpus/seed-*`) from the broker's own
//! encoders and the kafka-protocol crate's: real requests for every advertised API at its
//! lowest and highest version, batches with every codec, decompression bombs, and one valid
//! file of each on-disk format. Run after a format or API change, then commit the files:
//! `cargo test --manifest-path fuzz/Cargo.toml --test targets write_seeds -- --ignored`

use std::path::{Path, PathBuf};

use bytes::{Bytes, BytesMut};
use kafka_protocol::messages::produce_request::{PartitionProduceData, TopicProduceData};
use kafka_protocol::messages::*;
use kafka_protocol::protocol::{Encodable, StrBytes};
use shardlog::controller::log::encode_frame;
use shardlog::controller::records::{MetadataRecord, TopicRecord};
use shardlog::group::records::{OffsetValue, Record};
use shardlog::io::mem::MemFileSystem;
use shardlog::quorum::store::{RaftStore, LOG_FILE, SNAPSHOT_FILE};
use shardlog::quorum::ConfState;
use shardlog::server::dispatch::API_TABLE;
use shardlog::storage::batch::{patch_offset_and_epoch, recompute_crc, Compression};
use shardlog::storage::checkpoint;
use shardlog::storage::epoch::EpochCache;
use shardlog::storage::index::{OffsetIndex, TimeIndex};
use shardlog::storage::producer_state::{AbortedTxn, ProducerBatch, ProducerStateMap};
use shardlog::storage::records::{build_batch, NewRecord};
use shardlog::storage::txn_index;
use shardlog::types::{Epoch, Offset};

const CODECS: [Compression; 5] = [
    Compression::None,
    Compression::Gzip,
    Compression::Snappy,
    Compression::Lz4,
    Compression::Zstd,
];

fn corpus(target: &str) -> PathBuf {
    let dir =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/__fuzz__").join(target).join("corpus");
    std::fs::create_dir_all(&dir).expect("corpus dir");
    dir
}

fn write(target: &str, name: &str, bytes: &[u8]) {
    std::fs::write(corpus(target).join(format!("seed-{name}")), bytes).expect("write seed");
}

fn batch(codec: Compression) -> Bytes {
    let recs: Vec<NewRecord<'_>> = (0..3)
        .map(|i| NewRecord {
            key: Some(b"key".as_slice()),
            value: Some(b"value value value value".as_slice()),
            timestamp_ms: 1_700_000_000_000 + i,
            headers: vec![("h", Some(b"v".as_slice()))],
        })
        .collect();
    build_batch(&recs, codec)
}

/// Encodes header + body as a client sends it (without the size prefix).
fn request<R: Encodable>(api: ApiKey, version: i16, body: &R) -> Option<Vec<u8>> {
    let header = RequestHeader::default()
        .with_request_api_key(api as i16)
        .with_request_api_version(version)
        .with_correlation_id(7)
        .with_client_id(Some(StrBytes::from_static_str("seed")));
    let mut buf = BytesMut::new();
    header.encode(&mut buf, api.request_header_version(version)).ok()?;
    body.encode(&mut buf, version).ok()?;
    Some(buf.to_vec())
}

fn default_request(api: ApiKey, v: i16) -> Option<Vec<u8>> {
    macro_rules! enc {
        ($t:ty) => {
            request(api, v, &<$t>::default())
        };
    }
    match api {
        ApiKey::Produce => enc!(ProduceRequest),
        ApiKey::Fetch => enc!(FetchRequest),
        ApiKey::ListOffsets => enc!(ListOffsetsRequest),
        ApiKey::Metadata => enc!(MetadataRequest),
        ApiKey::OffsetForLeaderEpoch => enc!(OffsetForLeaderEpochRequest),
        ApiKey::DeleteRecords => enc!(DeleteRecordsRequest),
        ApiKey::DescribeProducers => enc!(DescribeProducersRequest),
        ApiKey::ApiVersions => enc!(ApiVersionsRequest),
        ApiKey::CreateTopics => enc!(CreateTopicsRequest),
        ApiKey::DeleteTopics => enc!(DeleteTopicsRequest),
        ApiKey::CreatePartitions => enc!(CreatePartitionsRequest),
        ApiKey::InitProducerId => enc!(InitProducerIdRequest),
        ApiKey::AlterConfigs => enc!(AlterConfigsRequest),
        ApiKey::IncrementalAlterConfigs => enc!(IncrementalAlterConfigsRequest),
        ApiKey::DescribeConfigs => enc!(DescribeConfigsRequest),
        ApiKey::DescribeCluster => enc!(DescribeClusterRequest),
        ApiKey::FindCoordinator => enc!(FindCoordinatorRequest),
        ApiKey::JoinGroup => enc!(JoinGroupRequest),
        ApiKey::SyncGroup => enc!(SyncGroupRequest),
        ApiKey::Heartbeat => enc!(HeartbeatRequest),
        ApiKey::LeaveGroup => enc!(LeaveGroupRequest),
        ApiKey::OffsetCommit => enc!(OffsetCommitRequest),
        ApiKey::OffsetFetch => enc!(OffsetFetchRequest),
        ApiKey::ListGroups => enc!(ListGroupsRequest),
        ApiKey::DescribeGroups => enc!(DescribeGroupsRequest),
        ApiKey::DeleteGroups => enc!(DeleteGroupsRequest),
        ApiKey::OffsetDelete => enc!(OffsetDeleteRequest),
        _ => None,
    }
}

fn request_seeds() {
    for range in API_TABLE {
        for v in [range.min, range.max] {
            if let Some(bytes) = default_request(range.api, v) {
                write("request_frame", &format!("{:?}-v{v}", range.api), &bytes);
            }
        }
    }
    for (v, codec) in [(3, Compression::None), (9, Compression::Zstd), (13, Compression::Lz4)] {
        let part = PartitionProduceData::default().with_index(0).with_records(Some(batch(codec)));
        let mut topic = TopicProduceData::default().with_partition_data(vec![part]);
        if v >= 13 {
            topic = topic.with_topic_id(uuid::Uuid::from_u128(1));
        } else {
            topic = topic.with_name(TopicName(StrBytes::from_static_str("t")));
        }
        let req = ProduceRequest::default().with_acks(-1).with_timeout_ms(30_000);
        let bytes =
            request(ApiKey::Produce, v, &req.with_topic_data(vec![topic])).expect("produce");
        // Size-prefixed, as it arrives on the socket.
        let mut framed = (bytes.len() as u32).to_be_bytes().to_vec();
        framed.extend_from_slice(&bytes);
        write("request_frame", &format!("produce-records-v{v}"), &framed);
    }
}

/// Compressed record sets that expand past `DECOMPRESSED_BATCH_BYTES_MAX`.
fn bomb_seeds() {
    use std::io::Write;
    let zeros = vec![0u8; 65 << 20];
    let zstd = zstd::encode_all(&zeros[..], 19).expect("zstd");
    let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::best());
    gz.write_all(&zeros).expect("gzip");
    let gzip = gz.finish().expect("gzip");
    // A raw snappy block whose header claims 4 GiB.
    let snappy = vec![0xff, 0xff, 0xff, 0xff, 0x0f, 0x00];
    let mut lz = lz4::EncoderBuilder::new().level(9).build(Vec::new()).expect("lz4");
    lz.write_all(&zeros).expect("lz4");
    let (lz4, res) = lz.finish();
    res.expect("lz4");
    for (codec, data) in [(4u8, zstd), (1, gzip), (2, snappy), (3, lz4)] {
        let mut seed = vec![codec];
        seed.extend_from_slice(&data);
        write("decompress", &format!("bomb-codec{codec}"), &seed);
    }
}

fn batch_seeds() {
    let mut segment = Vec::new();
    for (i, codec) in CODECS.into_iter().enumerate() {
        let b = batch(codec);
        for mode in [0u8, 1, 2] {
            let mut seed = vec![mode];
            seed.extend_from_slice(&b);
            write("record_batch", &format!("{codec:?}-mode{mode}"), &seed);
        }
        let mut seed = vec![i as u8];
        seed.extend_from_slice(&b[61..]);
        write("decompress", &format!("{codec:?}"), &seed);
        let mut stored = b.to_vec();
        patch_offset_and_epoch(&mut stored, 3 * i as i64, 1);
        recompute_crc(&mut stored);
        segment.extend_from_slice(&stored);
    }
    write("segment_scan", "five-codecs", &segment);
    let torn = segment.len() - 10;
    write("segment_scan", "torn-tail", &segment[..torn]);
}

fn file_seeds() {
    let mut idx = OffsetIndex::default();
    (1..20u32).for_each(|i| idx.push(i * 3, i * 4096));
    let mut seed = (1u64 << 20).to_be_bytes().to_vec();
    seed.extend_from_slice(&idx.to_bytes());
    write("offset_index", "19-entries", &seed);
    let mut t = TimeIndex::default();
    (1..20u32).for_each(|i| t.push(1_700_000_000_000 + i64::from(i), i * 3));
    write("time_index", "19-entries", &t.to_bytes());
    let aborted: Vec<AbortedTxn> = (0..3i64)
        .map(|i| AbortedTxn {
            producer_id: 1000 + i,
            first_offset: 10 * i,
            last_offset: 10 * i + 5,
            last_stable_offset: 10 * i,
        })
        .collect();
    write("txn_index", "3-entries", &txn_index::encode(&aborted));
    let mut e = EpochCache::default();
    e.assign(Epoch(0), Offset(0));
    e.assign(Epoch(3), Offset(120));
    write("epoch_checkpoint", "two-epochs", e.to_text().as_bytes());
    write("cleaner_checkpoint", "offset", checkpoint::encode(Offset(12_345)).as_bytes());
    let mut m = ProducerStateMap::default();
    for (id, seq) in [(1000i64, 0i32), (1000, 5), (2000, 0)] {
        let b = ProducerBatch {
            producer_id: id,
            epoch: 0,
            first_seq: seq,
            offset_delta: 4,
            transactional: false,
        };
        m.apply(&b, i64::from(seq) + id, 1_700_000_000_000);
    }
    write("producer_snapshot", "two-producers", &m.encode(3000));
}

fn metadata_and_group_seeds() {
    let topic =
        TopicRecord { name: "t".into(), topic_id: uuid::Uuid::from_u128(7), internal: false };
    let mut log = encode_frame(&[MetadataRecord::Topic(topic)]);
    log.extend(encode_frame(&[MetadataRecord::ProducerIdsBlock { block_end: 1000 }]));
    write("metadata_log", "two-frames", &log);
    let value = OffsetValue {
        offset: 42,
        leader_epoch: 1,
        metadata: "m".into(),
        commit_timestamp_ms: 1_700_000_000_000,
        expire_timestamp_ms: -1,
    };
    let rec =
        Record::Offset { group: "g".into(), topic: "t".into(), partition: 0, value: Some(value) };
    let (key, value) = rec.encode();
    let mut seed = vec![key.len() as u8];
    seed.extend_from_slice(&key);
    seed.extend_from_slice(value.as_deref().unwrap_or_default());
    write("group_records", "offset-commit", &seed);
    let b = build_batch(
        &[NewRecord { key: Some(&key), value: value.as_deref(), ..NewRecord::default() }],
        Compression::None,
    );
    write("group_records", "offset-commit-batch", &b);
}

fn raft_seeds() {
    let fs = MemFileSystem::new();
    let dir = Path::new("/raft");
    let conf = ConfState { voters: vec![1, 2, 3], ..ConfState::default() };
    futures::executor::block_on(RaftStore::open(fs.clone(), dir, &conf)).expect("open");
    let snap = fs.file_content(&dir.join(SNAPSHOT_FILE)).expect("snapshot file");
    let log = fs.file_content(&dir.join(LOG_FILE)).expect("log file");
    let mut seed = vec![u8::try_from(snap.len()).expect("small snapshot")];
    seed.extend_from_slice(&snap);
    seed.extend_from_slice(&log);
    write("raft_store", "bootstrap", &seed);
}

#[test]
#[ignore = "writes the committed seed corpora; run by hand"]
fn write_seeds() {
    request_seeds();
    bomb_seeds();
    batch_seeds();
    file_seeds();
    metadata_and_group_seeds();
    raft_seeds();
}
