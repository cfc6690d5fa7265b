//! End-to-end checks of the partition log on both backends: append, wait_committed, read,
//! reopen (clean and crashed), indexes, and a fresh data dir read with glommio (iopoll pitfall).

use std::path::Path;
use std::rc::Rc;

use bytes::Bytes;
use shardlog::io::dma::DmaFileSystem;
use shardlog::io::mem::MemFileSystem;
use shardlog::io::{run_local, FileSystem};
use shardlog::storage::batch::BatchHeader;
use shardlog::storage::records::build_simple_batch;
use shardlog::storage::{BatchCache, FlushPolicy, LogConfig, PartitionLog};
use shardlog::types::{Epoch, Offset};

fn batches_in(data: &Bytes) -> Vec<BatchHeader> {
    let mut out = Vec::new();
    let mut at = 0;
    while at < data.len() {
        let h = BatchHeader::parse(&data[at..]).unwrap();
        at += h.total_size();
        out.push(h);
    }
    assert_eq!(at, data.len(), "only whole batches");
    out
}

async fn roundtrip<F: FileSystem>(fs: Rc<F>, dir: &Path, config: LogConfig) {
    let cache = Rc::new(BatchCache::new(1 << 20));
    let log = PartitionLog::open(fs.clone(), dir, config.clone(), cache.clone()).await.unwrap();
    let mut expected = Vec::new();
    for i in 0..200 {
        let b = build_simple_batch(1 + i % 5, 100 + i * 7, 1_000 + i as i64);
        let info = log.append(b.clone(), Epoch(3), 2_000).await.unwrap();
        expected.push((info.base_offset, info.last_offset));
    }
    let last = expected.last().unwrap().1;
    log.wait_committed(last).await.unwrap();
    assert_eq!(log.committed_offset(), last.next());
    for (base, _) in &expected {
        let data = log.read(*base, 1, log.committed_offset()).await.unwrap();
        let hs = batches_in(&data);
        assert_eq!(hs.len(), 1);
        assert_eq!(hs[0].base_offset, base.0);
        assert_eq!(hs[0].partition_leader_epoch, 3);
    }
    let all = log.read(Offset(0), usize::MAX, log.committed_offset()).await.unwrap();
    assert_eq!(batches_in(&all).len(), 200);
    let seg_count = log.segment_count();
    log.close().await.unwrap();
    // Reopen after a clean shutdown: nothing lost, reads from disk (cold cache).
    let cache = Rc::new(BatchCache::new(1 << 20));
    let log = PartitionLog::open(fs.clone(), dir, config.clone(), cache).await.unwrap();
    assert_eq!(log.log_end_offset(), last.next());
    assert_eq!(log.segment_count(), seg_count);
    assert_eq!(log.latest_epoch(), Some(Epoch(3)));
    for (base, lst) in &expected {
        let mid = Offset((base.0 + lst.0) / 2);
        let data = log.read(mid, 1, log.committed_offset()).await.unwrap();
        let hs = batches_in(&data);
        assert!(
            !hs.is_empty(),
            "nothing read at {mid} (batch {base}..={lst}), end {}",
            log.log_end_offset()
        );
        assert_eq!(hs[0].base_offset, base.0);
    }
    let again = log.read(Offset(0), usize::MAX, log.committed_offset()).await.unwrap();
    assert_eq!(again, all, "byte-identical after reopen");
    let info = log.append(build_simple_batch(2, 10, 5_000), Epoch(4), 6_000).await.unwrap();
    assert_eq!(info.base_offset, last.next());
    log.wait_committed(info.last_offset).await.unwrap();
    log.close().await.unwrap();
}

fn small_segments() -> LogConfig {
    LogConfig { segment_bytes: 64 * 1024, index_interval_bytes: 1024, ..LogConfig::default() }
}

#[test]
fn mem_roundtrip_with_rolls() {
    run_local(async {
        roundtrip(Rc::new(MemFileSystem::new()), Path::new("/data/t-0"), small_segments()).await;
    });
}

#[test]
fn dma_roundtrip_with_rolls_on_fresh_dir() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("t-0");
    run_local(async move {
        shardlog::io::probe_data_dir(dir.parent().unwrap()).await.unwrap();
        roundtrip(Rc::new(DmaFileSystem), &dir, small_segments()).await;
    });
}

#[test]
fn dma_flush_never_roundtrip() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("t-1");
    run_local(async move {
        shardlog::io::probe_data_dir(tmp.path()).await.unwrap();
        let config = LogConfig { flush: FlushPolicy::Never, ..small_segments() };
        roundtrip(Rc::new(DmaFileSystem), &dir, config).await;
    });
}

#[test]
fn rolls_by_age_and_by_full_index_and_trims_indexes() {
    run_local(async {
        let fs = Rc::new(MemFileSystem::new());
        let dir = Path::new("/data/roll-0");
        let config = LogConfig {
            segment_ms: 100,
            index_interval_bytes: 1,
            segment_index_bytes: 8 * 4,
            ..LogConfig::default()
        };
        let log = PartitionLog::open(fs.clone(), dir, config, Rc::new(BatchCache::new(1 << 20)))
            .await
            .unwrap();
        // Age: a new segment once 100 ms passed since the segment's first append.
        log.append(build_simple_batch(1, 10, 0), Epoch(0), 1_000).await.unwrap();
        log.append(build_simple_batch(1, 10, 0), Epoch(0), 1_050).await.unwrap();
        assert_eq!(log.segment_count(), 1);
        log.append(build_simple_batch(1, 10, 0), Epoch(0), 1_100).await.unwrap();
        assert_eq!(log.segment_count(), 2);
        // Index full: 4 entries of 8 bytes fit in segment.index.bytes = 32.
        for _ in 0..12 {
            log.append(build_simple_batch(1, 10, 0), Epoch(0), 1_100).await.unwrap();
        }
        assert!(log.segment_count() >= 4, "{} segments", log.segment_count());
        log.flush().await.unwrap();
        // Sealed segments' indexes are trimmed to their entries (the first segment's second
        // batch is its only entry: Kafka never indexes a segment's first batch).
        let idx = fs.file_content(&dir.join("00000000000000000000.index")).unwrap();
        assert_eq!(idx.len(), 8);
        let second = fs.file_content(&dir.join("00000000000000000002.index")).unwrap();
        assert!(!second.is_empty() && second.len() <= 32 && second.len() % 8 == 0);
        log.close().await.unwrap();
    });
}

#[test]
fn appends_keep_call_order_under_back_pressure() {
    run_local(async {
        let fs = Rc::new(MemFileSystem::new());
        let log = Rc::new(
            PartitionLog::open(
                fs,
                Path::new("/data/order-0"),
                LogConfig::default(),
                Rc::new(BatchCache::new(1 << 20)),
            )
            .await
            .unwrap(),
        );
        let big = build_simple_batch(1, 1_000_000, 0);
        // 40 MiB of appends issued at once: more than the unwritten-bytes bound, so most
        // must wait, and they must still get offsets in call order.
        let tasks: Vec<_> = (0..40)
            .map(|i| {
                let (log, big) = (log.clone(), big.clone());
                glommio::spawn_local(async move {
                    let info = log.append(big, Epoch(0), 1).await.unwrap();
                    (i, info.base_offset)
                })
            })
            .collect();
        for t in tasks {
            let (i, base) = t.await;
            assert_eq!(base, Offset(i));
        }
    });
}

#[test]
fn corruption_below_the_recovery_point_names_file_and_position() {
    run_local(async {
        let fs = MemFileSystem::new();
        let dir = Path::new("/data/corrupt-0");
        let log = PartitionLog::open(
            Rc::new(fs.clone()),
            dir,
            small_segments(),
            Rc::new(BatchCache::new(1 << 20)),
        )
        .await
        .unwrap();
        for _ in 0..100 {
            log.append(build_simple_batch(2, 900, 0), Epoch(0), 1).await.unwrap();
        }
        log.close().await.unwrap();
        let seg = dir.join("00000000000000000000.log");
        let len = fs.file_content(&seg).unwrap().len();
        fs.corrupt(&seg, len - 10, b"garbage");
        let err = PartitionLog::open(
            Rc::new(fs.clone()),
            dir,
            small_segments(),
            Rc::new(BatchCache::new(1 << 20)),
        )
        .await
        .err()
        .expect("corrupt trusted segment fails the open");
        let msg = err.to_string();
        assert!(msg.contains("00000000000000000000.log"), "{msg}");
        assert!(matches!(err, shardlog::storage::StorageError::Corrupt { .. }), "{msg}");
    });
}

#[test]
fn epochs_offsets_for_timestamps_and_log_start() {
    run_local(async {
        let fs = Rc::new(MemFileSystem::new());
        let dir = Path::new("/data/epochs-0");
        let log = PartitionLog::open(
            fs.clone(),
            dir,
            small_segments(),
            Rc::new(BatchCache::new(1 << 20)),
        )
        .await
        .unwrap();
        for (epoch, ts) in [(1, 100), (1, 200), (3, 300), (3, 400), (5, 500)] {
            let info = log.append(build_simple_batch(2, 2000, ts), Epoch(epoch), 1).await.unwrap();
            log.wait_committed(info.last_offset).await.unwrap();
        }
        assert_eq!(log.latest_epoch(), Some(Epoch(5)));
        assert_eq!(log.end_offset_for_epoch(Epoch(1)), Some((Epoch(1), Offset(4))));
        assert_eq!(log.end_offset_for_epoch(Epoch(4)), Some((Epoch(3), Offset(8))));
        assert_eq!(log.end_offset_for_epoch(Epoch(5)), Some((Epoch(5), Offset(10))));
        assert_eq!(log.offset_for_timestamp(250).await.unwrap(), Some((Offset(4), 300)));
        assert_eq!(log.offset_for_timestamp(501).await.unwrap(), None);
        assert_eq!(log.max_timestamp(), Some((500, Offset(8))));
        log.truncate_to(Offset(5)).await.unwrap();
        assert_eq!(log.log_end_offset(), Offset(4));
        assert_eq!(log.latest_epoch(), Some(Epoch(1)));
        log.advance_log_start(Offset(3)).await.unwrap();
        log.close().await.unwrap();
        let log = PartitionLog::open(fs, dir, small_segments(), Rc::new(BatchCache::new(1 << 20)))
            .await
            .unwrap();
        assert_eq!(log.log_start_offset(), Offset(3));
        assert_eq!(log.log_end_offset(), Offset(4));
        assert_eq!(log.latest_epoch(), Some(Epoch(1)));
        assert_eq!(log.max_timestamp(), Some((200, Offset(2))));
        assert!(log.read(Offset(2), 10, Offset(4)).await.is_err());
    });
}

#[test]
fn large_backlogs_are_cut_at_pages_and_survive_a_crash_mid_way() {
    run_local(async {
        let fs = MemFileSystem::new();
        let dir = Path::new("/data/large-0");
        let config = LogConfig {
            flush: FlushPolicy::Never,
            max_message_bytes: 4 << 20,
            ..LogConfig::default()
        };
        let open = |fs: MemFileSystem| {
            let config = config.clone();
            async move {
                PartitionLog::open(Rc::new(fs), dir, config, Rc::new(BatchCache::new(1 << 20)))
                    .await
                    .unwrap()
            }
        };
        let log = open(fs.clone()).await;
        let mut stored = Vec::new();
        let mut snapshot = None;
        for i in 0..30 {
            let info = log
                .append(build_simple_batch(1, 1_500_000 + i * 999, 0), Epoch(0), 1)
                .await
                .unwrap();
            if i == 20 {
                log.wait_committed(info.last_offset).await.unwrap();
                snapshot = Some((fs.crash(), i + 1));
            }
            stored.push(info.base_offset);
        }
        log.wait_committed(Offset(29)).await.unwrap();
        let all = log.read(Offset(0), usize::MAX, Offset(30)).await.unwrap();
        assert_eq!(batches_in(&all).len(), 30);
        let (crashed, acked) = snapshot.unwrap();
        let log2 = open(crashed).await;
        assert!(log2.log_end_offset().0 >= acked as i64);
        let got = log2.read(Offset(0), usize::MAX, log2.log_end_offset()).await.unwrap();
        let n = batches_in(&got).len();
        assert!(n >= acked, "{n} batches after crash, {acked} acked");
        assert_eq!(&got[..], &all[..got.len()], "recovered prefix byte-identical");
        log.close().await.unwrap();
    });
}
