//! Property test: the partition log against an in-memory model (a list of stored batches),
//! on both file backends. Random appends of random sizes (small segments, so rolls happen),
//! reads at random offsets and sizes, truncations, log-start advances, offset-for-timestamp,
//! and clean or unclean reopens.

use std::path::{Path, PathBuf};
use std::rc::Rc;

use bytes::{Bytes, BytesMut};
use proptest::prelude::*;
use shardlog::io::dma::DmaFileSystem;
use shardlog::io::mem::MemFileSystem;
use shardlog::io::{probe_data_dir, run_local, FileSystem};
use shardlog::storage::records::build_simple_batch;
use shardlog::storage::validate::assign;
use shardlog::storage::{BatchCache, LogConfig, PartitionLog, StorageError};
use shardlog::types::{Epoch, Offset};

#[derive(Clone, Debug)]
enum Op {
    Append { count: usize, value_bytes: usize, ts: i64 },
    Read { at: f64, max_bytes: usize },
    Truncate { at: f64 },
    AdvanceStart { at: f64 },
    ForTimestamp { ts: i64 },
    Reopen { clean: bool },
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        6 => (1usize..6, 0usize..1500, 0i64..1000)
            .prop_map(|(count, value_bytes, ts)| Op::Append { count, value_bytes, ts }),
        4 => (0.0f64..1.0, 1usize..20_000).prop_map(|(at, max_bytes)| Op::Read { at, max_bytes }),
        1 => (0.0f64..1.0).prop_map(|at| Op::Truncate { at }),
        1 => (0.0f64..1.0).prop_map(|at| Op::AdvanceStart { at }),
        1 => (0i64..1100).prop_map(|ts| Op::ForTimestamp { ts }),
        1 => any::<bool>().prop_map(|clean| Op::Reopen { clean }),
    ]
}

#[derive(Default)]
struct Model {
    batches: Vec<(i64, i64, Bytes, i64)>,
    start: i64,
    end: i64,
}

impl Model {
    fn pick(&self, at: f64) -> i64 {
        self.start + ((self.end - self.start) as f64 * at).round() as i64
    }

    fn expected_read(&self, at: i64, max_bytes: usize) -> Bytes {
        let Some(i) = self.batches.iter().position(|b| b.1 >= at) else { return Bytes::new() };
        let mut out = BytesMut::new();
        for (_, _, b, _) in &self.batches[i..] {
            if !out.is_empty() && out.len() + b.len() > max_bytes {
                break;
            }
            out.extend_from_slice(b);
        }
        out.freeze()
    }
}

fn config() -> LogConfig {
    LogConfig {
        segment_bytes: 24 * 1024,
        index_interval_bytes: 700,
        segment_index_bytes: 24 * 8,
        timestamp_after_max_ms: i64::MAX,
        ..LogConfig::default()
    }
}

async fn open<F: FileSystem>(fs: &Rc<F>, dir: &Path) -> PartitionLog<F> {
    PartitionLog::open(fs.clone(), dir, config(), Rc::new(BatchCache::new(64 * 1024)))
        .await
        .expect("open")
}

/// `crash` turns the current file system into the one a restarted process sees.
async fn run_ops<F: FileSystem>(
    mut fs: Rc<F>,
    dir: PathBuf,
    ops: Vec<Op>,
    crash: impl Fn(&F) -> F,
) {
    let mut log = open(&fs, &dir).await;
    let mut m = Model::default();
    for op in ops {
        match op {
            Op::Append { count, value_bytes, ts } => {
                let b = build_simple_batch(count, value_bytes, ts);
                let info = log.append(b.clone(), Epoch(1), 0).await.unwrap();
                assert_eq!(info.base_offset.0, m.end);
                log.wait_committed(info.last_offset).await.unwrap();
                let stored = assign(b, m.end, 1, &config(), 0);
                m.batches.push((m.end, info.last_offset.0, stored, ts));
                m.end = info.last_offset.0 + 1;
            }
            Op::Read { at, max_bytes } => {
                let at = m.pick(at);
                let got = log.read(Offset(at), max_bytes, log.committed_offset()).await.unwrap();
                assert_eq!(got, m.expected_read(at, max_bytes), "read at {at} max {max_bytes}");
                let below = log.read(Offset(m.start - 1), 1, Offset(m.end)).await;
                assert!(matches!(below, Err(StorageError::OffsetOutOfRange { .. })));
                let above = log.read(Offset(m.end + 1), 1, Offset(m.end + 2)).await;
                assert!(matches!(above, Err(StorageError::OffsetOutOfRange { .. })));
            }
            Op::Truncate { at } => {
                let at = m.pick(at);
                log.truncate_to(Offset(at)).await.unwrap();
                if let Some(i) = m.batches.iter().position(|b| b.1 >= at) {
                    m.end = m.batches[i].0;
                    m.batches.truncate(i);
                }
                m.start = m.start.min(m.end);
            }
            Op::AdvanceStart { at } => {
                let at = m.pick(at);
                log.advance_log_start(Offset(at)).await.unwrap();
                m.start = m.start.max(at);
            }
            Op::ForTimestamp { ts } => {
                let got = log.offset_for_timestamp(ts).await.unwrap();
                let want = m
                    .batches
                    .iter()
                    .find(|b| b.1 >= m.start && b.3 >= ts)
                    .map(|b| (Offset(b.0), b.3));
                assert_eq!(got, want, "offset for timestamp {ts}");
            }
            Op::Reopen { clean } => {
                if clean {
                    log.close().await.unwrap();
                } else {
                    drop(log);
                    fs = Rc::new(crash(&fs));
                }
                log = open(&fs, &dir).await;
            }
        }
        assert_eq!(log.log_end_offset().0, m.end);
        assert_eq!(log.log_start_offset().0, m.start);
        assert_eq!(log.committed_offset().0, m.end);
    }
    log.close().await.unwrap();
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 48, ..ProptestConfig::default() })]
    #[test]
    fn mem_log_matches_model(ops in prop::collection::vec(op(), 1..80)) {
        run_local(async move {
            let fs = Rc::new(MemFileSystem::new());
            run_ops(fs, PathBuf::from("/data/model-0"), ops, MemFileSystem::crash).await;
        });
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 12, ..ProptestConfig::default() })]
    #[test]
    fn dma_log_matches_model(ops in prop::collection::vec(op(), 1..60)) {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("model-0");
        run_local(async move {
            probe_data_dir(dir.parent().unwrap()).await.unwrap();
            // An unclean reopen on real files: the completed O_DIRECT writes are what a
            // SIGKILLed process leaves behind.
            run_ops(Rc::new(DmaFileSystem), dir, ops, |_| DmaFileSystem).await;
        });
    }
}
