//! Bounded file descriptors against the real broker (issue 19): with a per-shard open-file
//! cache of 4 (`SHARDLOG_SEGMENT_OPEN_FILES_MAX`), records produced across many sealed
//! segments (`segment.ms` = 1: every produce rolls) are consumed back byte-identical after a
//! clean restart (cold batch cache: every read opens its segment through the cache), and the
//! broker's open file descriptors (`/proc/PID/fd`) stay under its base count plus one active
//! segment per partition plus the bound and a margin, far below the sealed-segment count.

mod common;

use std::time::Duration;

use common::{Broker, Wire};
use rskafka::client::partition::{Compression, UnknownTopicHandling};
use rskafka::record::Record;

const PARTITIONS: i32 = 4;
const PRODUCES_PER_PARTITION: usize = 40;
const RECORDS_PER_PRODUCE: usize = 3;
const OPEN_FILES_MAX: usize = 4;
/// Descriptors the broker may open besides segments and its base (client connections, a
/// directory being synced, index files being written, the metadata log).
const FD_MARGIN: usize = 16;

fn open_fds(pid: i32) -> usize {
    std::fs::read_dir(format!("/proc/{pid}/fd")).expect("fd dir").count()
}

fn start(dir: &std::path::Path) -> Broker {
    let bound = OPEN_FILES_MAX.to_string();
    Broker::start_env(dir, &["--shards", "1"], &[("SHARDLOG_SEGMENT_OPEN_FILES_MAX", &bound)])
}

fn value(p: i32, produce: usize, r: usize) -> Vec<u8> {
    // Varied lengths, content unique per record.
    let stem = format!("p{p}-n{produce}-r{r}-");
    stem.repeat(1 + (produce * 7 + r * 13) % 40).into_bytes()
}

/// Sealed segments of topic `lazy` on disk: `.log` files in its partition directories
/// (wherever the data dir puts them) beyond one active segment per partition.
fn sealed_segments(dir: &std::path::Path) -> usize {
    fn walk(dir: &std::path::Path, in_topic: bool, logs: &mut usize) {
        let Ok(entries) = std::fs::read_dir(dir) else { return };
        for e in entries.filter_map(Result::ok) {
            let name = e.file_name().to_string_lossy().into_owned();
            if e.file_type().is_ok_and(|t| t.is_dir()) {
                walk(&e.path(), in_topic || name.starts_with("lazy-"), logs);
            } else if in_topic && name.ends_with(".log") {
                *logs += 1;
            }
        }
    }
    let mut logs = 0;
    walk(dir, false, &mut logs);
    logs.saturating_sub(PARTITIONS as usize)
}

#[tokio::test]
async fn consumes_many_sealed_segments_byte_identical_with_bounded_fds() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut broker = start(dir.path());
    let base_fds = open_fds(broker.pid());
    Wire::connect(&broker.addr).create_topic("lazy", PARTITIONS, &[("segment.ms", "1")]);
    let client = broker.client().await;
    let mut expected: Vec<Vec<(i64, Vec<u8>)>> = vec![Vec::new(); PARTITIONS as usize];
    for p in 0..PARTITIONS {
        let pc = client.partition_client("lazy", p, UnknownTopicHandling::Retry).await.expect("pc");
        for n in 0..PRODUCES_PER_PARTITION {
            let records: Vec<Record> = (0..RECORDS_PER_PRODUCE)
                .map(|r| Record {
                    key: Some(format!("k{n}-{r}").into_bytes()),
                    value: Some(value(p, n, r)),
                    headers: Default::default(),
                    timestamp: common::now(),
                })
                .collect();
            let offsets = pc.produce(records, Compression::NoCompression).await.expect("produce");
            for (r, o) in offsets.iter().enumerate() {
                expected[p as usize].push((*o, value(p, n, r)));
            }
            // segment.ms = 1: the next produce rolls a new segment.
            tokio::time::sleep(Duration::from_millis(2)).await;
        }
    }
    drop(client);
    let during_produce = open_fds(broker.pid());
    broker.terminate();

    let sealed = sealed_segments(dir.path());
    let bound = base_fds + PARTITIONS as usize + OPEN_FILES_MAX + FD_MARGIN;
    assert!(sealed > bound, "the test needs more sealed segments ({sealed}) than the fd bound {bound}");
    eprintln!("sealed segments {sealed}; fds: base {base_fds}, after producing {during_produce}");
    assert!(during_produce <= bound, "{during_produce} fds after producing, bound {bound}");

    // A clean restart: recovery opens each sealed segment once and closes it again, and the
    // batch cache is cold, so every fetch below reads segment files through the cache.
    let broker = start(dir.path());
    let after_start = open_fds(broker.pid());
    assert!(after_start <= bound, "{after_start} fds after restart, bound {bound}");
    let client = broker.client().await;
    let mut peak = after_start;
    for p in 0..PARTITIONS {
        let pc = client.partition_client("lazy", p, UnknownTopicHandling::Retry).await.expect("pc");
        let want = &expected[p as usize];
        let mut got: Vec<(i64, Vec<u8>)> = Vec::new();
        let mut next = 0;
        while got.len() < want.len() {
            // Small fetches: a few segments per fetch, so the cache evicts all along.
            let (records, _hw) = pc.fetch_records(next, 1..2_000, 1_000).await.expect("fetch");
            assert!(!records.is_empty(), "partition {p}: nothing at {next}");
            for r in records {
                next = r.offset + 1;
                got.push((r.offset, r.record.value.unwrap_or_default()));
            }
            peak = peak.max(open_fds(broker.pid()));
        }
        assert_eq!(&got, want, "partition {p} reads back byte-identical");
    }
    eprintln!("fds: after restart {after_start}, peak while consuming {peak}, bound {bound}");
    assert!(peak <= bound, "{peak} fds while consuming, bound {bound}");
}
