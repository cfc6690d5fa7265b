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
