//! A real full disk: a small ext4 image created and loop-mounted by the test (root only; the
//! test is skipped, saying why, when mounting is not permitted), the broker's data dir on it,
//! O_DIRECT writes running into ENOSPC. Produce until the broker answers
//! KAFKA_STORAGE_ERROR; meanwhile fetch and metadata keep working; free space (delete a
//! file pre-allocated to leave only a little room); produce resumes by itself (no
//! restart); every acknowledged record is then consumed at its offset, and again after a
//! restart. Figures are printed.

mod common;

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use bytes::Bytes;
use common::{split_batches, Broker, Wire};
use kafka_protocol::messages::metadata_request::MetadataRequestTopic;
use kafka_protocol::messages::produce_request::{PartitionProduceData, TopicProduceData};
use kafka_protocol::messages::{
    ApiKey, MetadataRequest, MetadataResponse, ProduceRequest, ProduceResponse, TopicName,
};
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

#[test]
fn a_full_ext4_disk_refuses_produce_then_resumes_with_nothing_acknowledged_lost() {
    let disk = match Ext4::mount(IMAGE_MIB) {
        Ok(disk) => disk,
        Err(why) => {
            eprintln!("SKIPPED: cannot create and loop-mount an ext4 image here ({why})");
            return;
        }
    };
    let data = disk.mnt.join("data");
    let mut broker = Broker::start_with(&data, &["--shards", "1"]);
    let mut wire = Wire::connect(&broker.addr);
    wire.create_topic(TOPIC, 1, &[]);
    let ballast = disk.mnt.join("ballast");
    let ballast_mib = free_mib(&disk.mnt).saturating_sub(FILL_MIB);
    run(Command::new("fallocate").args(["-l", &format!("{ballast_mib}M")]).arg(&ballast))
        .expect("pre-allocate the ballast file");
    eprintln!("free before producing: {} MiB", free_mib(&disk.mnt));

    // Fill the disk.
    let started = Instant::now();
    let mut acked: Vec<(i64, u64)> = Vec::new();
    let mut seq = 0u64;
    let full_at = loop {
        let (code, base) = produce(&mut wire, seq);
        seq += 1;
        match code {
            0 => acked.push((base, seq - 1)),
            KAFKA_STORAGE_ERROR => break seq - 1,
            other => panic!("produce of record {} answered {other}", seq - 1),
        }
        assert!(seq < (FILL_MIB << 20) / VALUE_BYTES as u64 * 2, "the disk never filled");
    };
    eprintln!(
        "disk full after {} acknowledged 64 KiB records ({:?}); free: {} MiB",
        acked.len(),
        started.elapsed(),
        free_mib(&disk.mnt)
    );
    assert!(acked.len() > 100, "only {} records fit", acked.len());
    // Still full: refused again, with the retriable error.
    assert_eq!(produce(&mut wire, seq).0, KAFKA_STORAGE_ERROR);
    seq += 1;
    // Reads, offsets and metadata keep working.
    check_acked(&mut wire, &acked);
    let md = MetadataRequest::default().with_topics(Some(vec![MetadataRequestTopic::default()
        .with_name(Some(TopicName(StrBytes::from_static_str(TOPIC))))]));
    let md: MetadataResponse = wire.call(ApiKey::Metadata, 9, &md);
    assert_eq!(md.topics[0].error_code, 0, "metadata while the disk is full");

    // Free space: the broker resumes writing by itself.
    std::fs::remove_file(&ballast).expect("remove the ballast");
    let freed = Instant::now();
    loop {
        let (code, base) = produce(&mut wire, seq);
        seq += 1;
        if code == 0 {
            acked.push((base, seq - 1));
            break;
        }
        assert_eq!(code, KAFKA_STORAGE_ERROR);
        assert!(freed.elapsed() < Duration::from_secs(60), "writes did not resume");
        std::thread::sleep(Duration::from_millis(200));
    }
    eprintln!("produce accepted again {:?} after space was freed", freed.elapsed());
    for _ in 0..20 {
        let (code, base) = produce(&mut wire, seq);
        assert_eq!(code, 0, "after space returned");
        acked.push((base, seq));
        seq += 1;
    }
    check_acked(&mut wire, &acked);
    eprintln!("record {full_at} was the first refused; {} acknowledged in all", acked.len());
    assert!(broker.log_contains("disk full"), "the broker says why it refused");

    // And they survive a restart.
    broker.terminate();
    let broker = Broker::start_with(&data, &["--shards", "1"]);
    check_acked(&mut Wire::connect(&broker.addr), &acked);
    drop(broker);
}
