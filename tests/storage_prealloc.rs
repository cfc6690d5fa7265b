//! Zero-filled preallocation (`storage::prealloc`) under fsync every batch: the active
//! segment's file runs ahead of the log with fsynced zeros, yet every acknowledged batch
//! survives a power loss byte-identical, recovery trims the zeros, close leaves the file at
//! its exact size, and with preallocation off the file never runs ahead. Recovery tells
//! those zeros (the end of the written log, INFO) from a torn tail (WARN, bytes dropped).

use std::path::Path;
use std::rc::Rc;
use std::sync::{Arc, Mutex};

use bytes::Bytes;
use shardlog::io::mem::MemFileSystem;
use shardlog::io::run_local;
use shardlog::storage::records::build_simple_batch;
use shardlog::storage::{BatchCache, LogConfig, PartitionLog};
use shardlog::types::{Epoch, Offset};

const SEG: &str = "00000000000000000000.log";

async fn open(fs: &MemFileSystem, dir: &Path, config: LogConfig) -> PartitionLog<MemFileSystem> {
    let cache = Rc::new(BatchCache::new(1 << 20));
    PartitionLog::open(Rc::new(fs.clone()), dir, config, cache).await.expect("open")
}

/// Appends `n` batches of ~1 KiB, each acknowledged before the next; returns the log's bytes.
async fn acked(log: &PartitionLog<MemFileSystem>, n: usize) -> Bytes {
    for _ in 0..n {
        let info = log.append(build_simple_batch(2, 450, 0), Epoch(0), 1).await.unwrap();
        log.wait_committed(info.last_offset).await.unwrap();
    }
    log.read(Offset(0), usize::MAX, log.log_end_offset()).await.unwrap()
}

#[test]
fn preallocated_zeros_never_cost_an_acknowledged_batch() {
    run_local(async {
        let fs = MemFileSystem::new();
        let dir = Path::new("/data/prealloc-0");
        let config = LogConfig { preallocate_bytes: 8 << 20, ..LogConfig::default() };
        let log = open(&fs, dir, config.clone()).await;
        // 60 KiB of data: writes past the first page wait for (or are cut at) the first
        // fill, so it has completed and been synced by the time these are acknowledged.
        let data = acked(&log, 60).await;
        let end = log.log_end_offset();
        let after_power_loss = fs.power_loss();
        let durable = after_power_loss.file_content(&dir.join(SEG)).expect("segment");
        assert!(durable.len() >= 256 * 1024, "a fsynced zero-filled step: {} bytes", durable.len());
        assert!(durable[data.len()..].iter().all(|b| *b == 0), "only zeros past the data");

        // Power loss: recovery scans, trims the zeros, keeps every acknowledged batch.
        let recovered = open(&after_power_loss, dir, config.clone()).await;
        assert_eq!(recovered.log_end_offset(), end);
        assert_eq!(recovered.read(Offset(0), usize::MAX, end).await.unwrap(), data);
        // It appends on top (and preallocates again), and a clean close trims the file.
        let more = acked(&recovered, 5).await;
        recovered.close().await.unwrap();
        let closed = after_power_loss.file_content(&dir.join(SEG)).expect("segment");
        assert_eq!(closed.len(), more.len(), "close leaves the exact size");
        assert_eq!(&closed[..], &more[..]);

        // A clean shutdown of the original log trims too.
        log.close().await.unwrap();
        assert_eq!(fs.file_content(&dir.join(SEG)).expect("segment").len(), data.len());
    });
}

#[test]
fn without_preallocation_or_durable_flush_the_file_never_runs_ahead() {
    run_local(async {
        for config in [
            LogConfig { preallocate_bytes: 0, ..LogConfig::default() },
            LogConfig {
                flush: shardlog::storage::FlushPolicy::IntervalMs(1000),
                ..LogConfig::default()
            },
        ] {
            let fs = MemFileSystem::new();
            let dir = Path::new("/data/prealloc-1");
            let log = open(&fs, dir, config).await;
            let data = acked(&log, 20).await;
            log.flush().await.unwrap();
            let len = fs.file_content(&dir.join(SEG)).expect("segment").len() as u64;
            // O_DIRECT pads the last page, nothing more.
            assert_eq!(len, (data.len() as u64).div_ceil(4096) * 4096);
            log.close().await.unwrap();
        }
    });
}

/// Log lines written while `f` runs on this thread, without colours.
fn logs_of(f: impl FnOnce()) -> String {
    #[derive(Clone, Default)]
    struct Captured(Arc<Mutex<Vec<u8>>>);
    impl std::io::Write for Captured {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            self.0.lock().expect("log buffer").extend_from_slice(buf);
            Ok(buf.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }
    let out = Captured::default();
    let sink = out.clone();
    let subscriber = tracing_subscriber::fmt()
        .with_writer(move || sink.clone())
        .with_ansi(false)
        .with_max_level(tracing::Level::INFO)
        .finish();
    tracing::subscriber::with_default(subscriber, f);
    let bytes = out.0.lock().expect("log buffer").clone();
    String::from_utf8_lossy(&bytes).into_owned()
}

/// Issue 32: after a SIGKILL, recovery warned "truncating torn tail … unsupported magic 0"
/// on almost every restart, for the preallocated zeros after the last batch. Zeros are the
/// end of the written log (INFO); non-zero bytes past it, or a batch failing its CRC, are a
/// torn tail (WARN, with the bytes of data dropped).
#[test]
fn zeros_after_the_log_are_its_end_and_only_real_bytes_are_a_torn_tail() {
    let dir = Path::new("/data/prealloc-2");
    let seg = dir.join(SEG);
    let config = LogConfig { preallocate_bytes: 8 << 20, ..LogConfig::default() };
    let fs = MemFileSystem::new();
    let data = run_local(async { acked(&open(&fs, dir, config.clone()).await, 60).await });
    let recover = |crashed: MemFileSystem| {
        let config = config.clone();
        logs_of(|| {
            run_local(async {
                let log = open(&crashed, dir, config).await;
                let _ = log.read(Offset(0), usize::MAX, log.log_end_offset()).await;
            });
        })
    };
    // SIGKILL: only zeros follow the last batch.
    let logs = recover(fs.crash());
    assert!(logs.contains("end of the written log"), "{logs}");
    assert!(!logs.contains("WARN") && !logs.contains("torn tail"), "{logs}");

    // Garbage after the log: those bytes are reported dropped, the zeros after them not.
    let crashed = fs.crash();
    crashed.corrupt(&seg, data.len() + 100, b"garbage");
    let logs = recover(crashed.clone());
    assert!(logs.contains("WARN") && logs.contains("truncating torn tail"), "{logs}");
    assert!(logs.contains("bytes_dropped=107 "), "{logs}");
    assert_eq!(crashed.file_content(&seg).expect("segment").len(), data.len());

    // The last batch fails its CRC: a torn tail too, and that batch is gone.
    let crashed = fs.crash();
    crashed.corrupt(&seg, data.len() - 3, &[0xff]);
    let logs = recover(crashed.clone());
    assert!(logs.contains("WARN") && logs.contains("truncating torn tail"), "{logs}");
    assert!(logs.contains("CRC") || logs.contains("crc"), "{logs}");
    let left = crashed.file_content(&seg).expect("segment");
    assert!(left.len() < data.len() && data.starts_with(&left), "cut at a batch boundary");
}
