//! A real full disk: a small ext4 image created and loop-mounted by each test (root only;
//! skipped, saying why, when mounting is not permitted), the broker's data dir on it. Produce
//! until the broker answers KAFKA_STORAGE_ERROR — at ENOSPC of its O_DIRECT writes
//! (`log.dir.reserved.bytes` 0), or at the reserve (default), where a consumer group still
//! joins and commits; meanwhile fetch and metadata keep working; free space (delete a file
//! pre-allocated to leave only a little room); produce resumes by itself (no restart); every
//! acknowledged record is then consumed at its offset (and again after a restart). Figures
//! are printed.

mod common;

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use bytes::Bytes;
use common::{split_batches, Broker, Wire};
use kafka_protocol::messages::join_group_request::JoinGroupRequestProtocol;
use kafka_protocol::messages::metadata_request::MetadataRequestTopic;
use kafka_protocol::messages::offset_commit_request::{
    OffsetCommitRequestPartition, OffsetCommitRequestTopic,
};
use kafka_protocol::messages::offset_fetch_request::OffsetFetchRequestTopic;
use kafka_protocol::messages::produce_request::{PartitionProduceData, TopicProduceData};
use kafka_protocol::messages::sync_group_request::SyncGroupRequestAssignment;
use kafka_protocol::messages::*;
use kafka_protocol::protocol::StrBytes;
use shardlog::storage::batch::Compression;
use shardlog::storage::records::{build_batch, NewRecord};

const TOPIC: &str = "full";
/// Large enough for the broker's start-up check (it refuses to start with < 256 MiB free):
/// the ballast file, allocated after the broker started, leaves `FILL_MIB` to fill.
const IMAGE_MIB: u64 = 512;
const FILL_MIB: u64 = 64;
const VALUE_BYTES: usize = 64 * 1024;
const KAFKA_STORAGE_ERROR: i16 = 56;

/// A loop-mounted ext4 image, unmounted on drop (even when the test fails).
struct Ext4 {
    _dir: tempfile::TempDir,
    mnt: PathBuf,
}

impl Ext4 {
    fn mount(size_mib: u64) -> Result<Ext4, String> {
        let dir = tempfile::tempdir().map_err(|e| e.to_string())?;
        let img = dir.path().join("disk.img");
        std::fs::File::create(&img)
            .and_then(|f| f.set_len(size_mib << 20))
            .map_err(|e| e.to_string())?;
        // -m 0: no blocks reserved for root (the broker runs as root here).
        run(Command::new("mkfs.ext4").args(["-q", "-F", "-m", "0"]).arg(&img))?;
        let mnt = dir.path().join("mnt");
        std::fs::create_dir(&mnt).map_err(|e| e.to_string())?;
        run(Command::new("mount").args(["-o", "loop"]).arg(&img).arg(&mnt))?;
        Ok(Ext4 { _dir: dir, mnt })
    }
}

impl Drop for Ext4 {
    fn drop(&mut self) {
        if run(Command::new("umount").arg(&self.mnt)).is_err() {
            let _ = run(Command::new("umount").arg("-l").arg(&self.mnt));
        }
    }
}

fn run(cmd: &mut Command) -> Result<(), String> {
    let out = cmd.output().map_err(|e| format!("{cmd:?}: {e}"))?;
    if out.status.success() {
        Ok(())
    } else {
        Err(format!("{cmd:?}: {}", String::from_utf8_lossy(&out.stderr).trim()))
    }
}

fn free_mib(path: &Path) -> u64 {
    let out = Command::new("df").args(["-B1M", "--output=avail"]).arg(path).output();
    let text = String::from_utf8_lossy(&out.expect("df").stdout).to_string();
    text.lines().nth(1).and_then(|l| l.trim().parse().ok()).unwrap_or(0)
}

fn now_ms() -> i64 {
    let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH);
    i64::try_from(now.expect("clock").as_millis()).expect("ms")
}

/// Record `seq`: its value starts with the sequence number, the rest is filler.
fn value(seq: u64) -> Vec<u8> {
    let mut v = vec![(seq % 251) as u8; VALUE_BYTES];
    v[..8].copy_from_slice(&seq.to_be_bytes());
    v
}

/// Produces record `seq` (acks=all): the error code and the base offset.
fn produce(wire: &mut Wire, seq: u64) -> (i16, i64) {
    let v = value(seq);
    let recs = [NewRecord { key: None, value: Some(&v), timestamp_ms: now_ms(), headers: vec![] }];
    let batch: Bytes = build_batch(&recs, Compression::None);
    let part = PartitionProduceData::default().with_index(0).with_records(Some(batch));
    let topic = TopicProduceData::default()
        .with_name(TopicName(StrBytes::from_static_str(TOPIC)))
        .with_partition_data(vec![part]);
    let req = ProduceRequest::default()
        .with_acks(-1)
        .with_timeout_ms(10_000)
        .with_topic_data(vec![topic]);
    let resp: ProduceResponse = wire.call(ApiKey::Produce, 9, &req);
    let p = &resp.responses[0].partition_responses[0];
    (p.error_code, p.base_offset)
}

/// Every record of the partition: offset → value's sequence number.
fn consume_all(wire: &mut Wire) -> std::collections::BTreeMap<i64, u64> {
    let mut out = std::collections::BTreeMap::new();
    let mut offset = 0;
    loop {
        let answer = wire.fetch(TOPIC, 0, offset);
        assert_eq!(answer.error_code, 0, "fetch at {offset}");
        let batches = split_batches(answer.records);
        let Some(next) = batches.last().map(|(_, next)| *next) else { break };
        for (records, _) in batches {
            for r in records {
                let v = r.value.expect("value");
                out.insert(r.offset, u64::from_be_bytes(v[..8].try_into().expect("seq")));
            }
        }
        offset = next;
        if offset >= answer.high_watermark {
            break;
        }
    }
    out
}

fn check_acked(wire: &mut Wire, acked: &[(i64, u64)]) {
    let got = consume_all(wire);
    for (offset, seq) in acked {
        assert_eq!(got.get(offset), Some(seq), "acknowledged record {seq} at offset {offset}");
    }
}

/// Produces records until the broker answers KAFKA_STORAGE_ERROR; returns the refused
/// record's number (records acknowledged on the way are added to `acked`).
fn fill(wire: &mut Wire, seq: &mut u64, acked: &mut Vec<(i64, u64)>) -> u64 {
    let started = Instant::now();
    let refused = loop {
        let (code, base) = produce(wire, *seq);
        *seq += 1;
        match code {
            0 => acked.push((base, *seq - 1)),
            KAFKA_STORAGE_ERROR => break *seq - 1,
            other => panic!("produce of record {} answered {other}", *seq - 1),
        }
        assert!(*seq < (FILL_MIB << 20) / VALUE_BYTES as u64 * 4, "the disk never filled");
    };
    eprintln!(
        "refused after {} acknowledged 64 KiB records ({:?})",
        acked.len(),
        started.elapsed()
    );
    refused
}

/// Produces until accepted again (the broker resumes by itself), then 20 more.
fn resume(wire: &mut Wire, seq: &mut u64, acked: &mut Vec<(i64, u64)>) {
    let freed = Instant::now();
    loop {
        let (code, base) = produce(wire, *seq);
        *seq += 1;
        if code == 0 {
            acked.push((base, *seq - 1));
            break;
        }
        assert_eq!(code, KAFKA_STORAGE_ERROR);
        assert!(freed.elapsed() < Duration::from_secs(60), "writes did not resume");
        std::thread::sleep(Duration::from_millis(200));
    }
    eprintln!("produce accepted again {:?} after space was freed", freed.elapsed());
    for _ in 0..20 {
        let (code, base) = produce(wire, *seq);
        assert_eq!(code, 0, "after space returned");
        acked.push((base, *seq));
        *seq += 1;
    }
}

/// Mounts the image, starts a broker on it with `flags`, creates the topic, and allocates a
/// ballast file that leaves `room_mib` free. `None` (said on stderr) when mounting is not
/// permitted here.
fn setup(flags: &[&str], room_mib: u64) -> Option<(Ext4, Broker, PathBuf)> {
    let disk = match Ext4::mount(IMAGE_MIB) {
        Ok(disk) => disk,
        Err(why) => {
            eprintln!("SKIPPED: cannot create and loop-mount an ext4 image here ({why})");
            return None;
        }
    };
    let data = disk.mnt.join("data");
    let broker = Broker::start_with(&data, flags);
    Wire::connect(&broker.addr).create_topic(TOPIC, 1, &[]);
    let ballast = disk.mnt.join("ballast");
    let ballast_mib = free_mib(&disk.mnt).saturating_sub(room_mib);
    if let Err(why) =
        run(Command::new("fallocate").args(["-l", &format!("{ballast_mib}M")]).arg(&ballast))
    {
        eprintln!("SKIPPED: cannot pre-allocate the ballast file ({why})");
        return None;
    }
    eprintln!("free before producing: {} MiB", free_mib(&disk.mnt));
    Some((disk, broker, ballast))
}

fn metadata_works(wire: &mut Wire) {
    let topic = MetadataRequestTopic::default()
        .with_name(Some(TopicName(StrBytes::from_static_str(TOPIC))));
    let md = MetadataRequest::default().with_topics(Some(vec![topic]));
    let md: MetadataResponse = wire.call(ApiKey::Metadata, 9, &md);
    assert_eq!(md.topics[0].error_code, 0, "metadata while the disk is full");
}

/// With `log.dir.reserved.bytes` 0 the disk really fills: O_DIRECT writes meet ENOSPC, the
/// log's writer waits for space and resumes by itself.
#[test]
fn enospc_refuses_produce_then_writes_resume_with_nothing_acknowledged_lost() {
    let flags = [
        "--shards",
        "1",
        "--log-dir-reserved-bytes",
        "0",
        "--offsets-topic-num-partitions",
        "1",
        "--group-initial-rebalance-delay-ms",
        "0",
    ];
    let Some((disk, mut broker, ballast)) = setup(&flags, FILL_MIB) else { return };
    let mut wire = Wire::connect(&broker.addr);
    let (mut seq, mut acked) = (0u64, Vec::new());
    let refused = fill(&mut wire, &mut seq, &mut acked);
    eprintln!("free at ENOSPC: {} MiB", free_mib(&disk.mnt));
    assert!(acked.len() > 100, "only {} records fit", acked.len());
    assert!(broker.log_contains("disk full"), "the broker says why it refused");
    // Still full: refused again, with the retriable error.
    assert_eq!(produce(&mut wire, seq).0, KAFKA_STORAGE_ERROR);
    seq += 1;
    // Reads and metadata keep working.
    check_acked(&mut wire, &acked);
    metadata_works(&mut wire);

    let find = FindCoordinatorRequest::default().with_key(s("full-group"));
    let found: FindCoordinatorResponse = wire.call(ApiKey::FindCoordinator, 3, &find);
    eprintln!("FindCoordinator on the full disk (no reserve): error {}", found.error_code);

    std::fs::remove_file(&ballast).expect("remove the ballast");
    resume(&mut wire, &mut seq, &mut acked);
    check_acked(&mut wire, &acked);
    eprintln!("record {refused} was the first refused; {} acknowledged in all", acked.len());
    // Groups work again once space is back (the offsets topic is created now if the full
    // disk refused it before).
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let found: FindCoordinatorResponse = wire.call(ApiKey::FindCoordinator, 3, &find);
        if found.error_code == 0 {
            break;
        }
        assert!(Instant::now() < deadline, "FindCoordinator keeps failing: {}", found.error_code);
        std::thread::sleep(Duration::from_millis(200));
    }
    let last = acked.last().map_or(0, |(o, _)| *o);
    assert_eq!(group_commit_and_fetch(&mut wire, last), last, "a group commits after the episode");

    // And they survive a restart.
    broker.terminate();
    let broker = Broker::start_with(&broker.data_dir, &flags);
    check_acked(&mut Wire::connect(&broker.addr), &acked);
}

/// With the default `log.dir.reserved.bytes`, produce is refused before the disk is full, so
/// a consumer group still joins, syncs, commits and fetches its offset; produce resumes
/// once space is freed.
#[test]
fn the_reserve_keeps_consumer_groups_working_when_produce_is_refused() {
    let flags = [
        "--shards",
        "1",
        "--offsets-topic-num-partitions",
        "1",
        "--group-initial-rebalance-delay-ms",
        "0",
    ];
    let reserve_mib = 64;
    let Some((disk, broker, ballast)) = setup(&flags, reserve_mib + FILL_MIB) else { return };
    let mut wire = Wire::connect(&broker.addr);
    let (mut seq, mut acked) = (0u64, Vec::new());
    fill(&mut wire, &mut seq, &mut acked);
    let free = free_mib(&disk.mnt);
    eprintln!("free when produce was refused: {free} MiB");
    assert!(free > reserve_mib / 2, "refused by the reserve, not by ENOSPC");
    assert!(broker.log_contains("log.dir.reserved.bytes"), "the broker says why it refused");
    check_acked(&mut wire, &acked);
    metadata_works(&mut wire);
    let last = acked.last().map_or(0, |(o, _)| *o);
    assert_eq!(group_commit_and_fetch(&mut wire, last), last, "a group commits on a full disk");

    std::fs::remove_file(&ballast).expect("remove the ballast");
    resume(&mut wire, &mut seq, &mut acked);
    check_acked(&mut wire, &acked);
}

fn s(v: &str) -> StrBytes {
    StrBytes::from_string(v.to_string())
}

/// A one-member group: FindCoordinator, JoinGroup, SyncGroup, OffsetCommit of `offset`,
/// OffsetFetch; returns the fetched offset.
fn group_commit_and_fetch(wire: &mut Wire, offset: i64) -> i64 {
    let group = GroupId(s("full-group"));
    let find = FindCoordinatorRequest::default().with_key(s("full-group"));
    let found: FindCoordinatorResponse = wire.call(ApiKey::FindCoordinator, 3, &find);
    assert_eq!(found.error_code, 0, "FindCoordinator");
    let join = JoinGroupRequest::default()
        .with_group_id(group.clone())
        .with_session_timeout_ms(10_000)
        .with_rebalance_timeout_ms(10_000)
        .with_member_id(s(""))
        .with_protocol_type(s("consumer"))
        .with_protocols(vec![JoinGroupRequestProtocol::default()
            .with_name(s("range"))
            .with_metadata(Bytes::new())]);
    let joined: JoinGroupResponse = wire.call(ApiKey::JoinGroup, 3, &join);
    assert_eq!(joined.error_code, 0, "JoinGroup");
    let sync = SyncGroupRequest::default()
        .with_group_id(group.clone())
        .with_generation_id(joined.generation_id)
        .with_member_id(joined.member_id.clone())
        .with_assignments(vec![SyncGroupRequestAssignment::default()
            .with_member_id(joined.member_id.clone())
            .with_assignment(Bytes::new())]);
    let synced: SyncGroupResponse = wire.call(ApiKey::SyncGroup, 1, &sync);
    assert_eq!(synced.error_code, 0, "SyncGroup");
    let part = OffsetCommitRequestPartition::default()
        .with_partition_index(0)
        .with_committed_offset(offset);
    let topic = OffsetCommitRequestTopic::default()
        .with_name(TopicName(s(TOPIC)))
        .with_partitions(vec![part]);
    let commit = OffsetCommitRequest::default()
        .with_group_id(group.clone())
        .with_generation_id_or_member_epoch(joined.generation_id)
        .with_member_id(joined.member_id)
        .with_topics(vec![topic]);
    let committed: OffsetCommitResponse = wire.call(ApiKey::OffsetCommit, 2, &commit);
    assert_eq!(committed.topics[0].partitions[0].error_code, 0, "OffsetCommit");
    let topic = OffsetFetchRequestTopic::default()
        .with_name(TopicName(s(TOPIC)))
        .with_partition_indexes(vec![0]);
    let fetch = OffsetFetchRequest::default().with_group_id(group).with_topics(Some(vec![topic]));
    let fetched: OffsetFetchResponse = wire.call(ApiKey::OffsetFetch, 1, &fetch);
    fetched.topics[0].partitions[0].committed_offset
}
