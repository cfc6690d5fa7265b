//! Compaction and transactions (issue 17): the cleaner removes the records of aborted
//! transactions (and never lets an aborted value supersede a committed one), keeps the
//! markers, and cleans nothing at or past the first offset of a transaction still open.

use std::path::Path;
use std::rc::Rc;

use bytes::{Bytes, BytesMut};
use shardlog::io::mem::MemFileSystem;
use shardlog::io::run_local;
use shardlog::storage::batch::{recompute_crc, BatchHeader, Compression};
use shardlog::storage::cleaner::throttle::Throttler;
use shardlog::storage::producer_state::encode_marker;
use shardlog::storage::records::{build_batch, NewRecord};
use shardlog::storage::{BatchCache, CleanOptions, LogConfig, PartitionLog};
use shardlog::types::{Epoch, Offset};

const DIR: &str = "/data/txn-compact-0";
const T0: i64 = 1_000_000;

fn config() -> LogConfig {
    LogConfig {
        segment_bytes: 2048,
        segment_ms: 1_000_000_000,
        index_interval_bytes: 256,
        segment_index_bytes: 4096,
        timestamp_before_max_ms: i64::MAX,
        timestamp_after_max_ms: i64::MAX,
        compacted: true,
        delete_retention_enabled: false,
        retention_ms: -1,
        file_delete_delay_ms: 10,
        ..LogConfig::default()
    }
}

/// One record `key` = `value`; transactional for producer `pid` at `seq` when `pid` >= 0.
fn batch(key: &str, value: &[u8], pid: i64, seq: i32) -> Bytes {
    let rec = NewRecord {
        key: Some(key.as_bytes()),
        value: Some(value),
        timestamp_ms: T0,
        headers: vec![],
    };
    let mut b = BytesMut::from(&build_batch(&[rec], Compression::None)[..]);
    if pid >= 0 {
        let attributes = i16::from_be_bytes([b[21], b[22]]) | 0x10;
        b[21..23].copy_from_slice(&attributes.to_be_bytes());
        b[43..51].copy_from_slice(&pid.to_be_bytes());
        b[51..53].copy_from_slice(&0i16.to_be_bytes());
        b[53..57].copy_from_slice(&seq.to_be_bytes());
        recompute_crc(&mut b);
    }
    b.freeze()
}

/// The value of every stored record of `key`, and the number of control batches.
async fn values(log: &PartitionLog<MemFileSystem>, key: &str) -> (Vec<Vec<u8>>, usize) {
    let all = log.read(Offset(0), usize::MAX, log.log_end_offset()).await.expect("read");
    let (mut at, mut out, mut markers) = (0, Vec::new(), 0);
    while at < all.len() {
        let h = BatchHeader::parse(&all[at..]).expect("batch");
        let mut one = all.slice(at..at + h.total_size());
        at += h.total_size();
        if h.is_control() {
            markers += 1;
            continue;
        }
        let set = kafka_protocol::records::RecordBatchDecoder::decode(&mut one).expect("decode");
        for r in set.records {
            if r.key.as_deref() == Some(key.as_bytes()) {
                out.push(r.value.map(|v| v.to_vec()).unwrap_or_default());
            }
        }
    }
    (out, markers)
}

#[test]
fn aborted_data_goes_and_open_transactions_stay() {
    run_local(async {
        let fs = Rc::new(MemFileSystem::new());
        let log = PartitionLog::open(
            fs.clone(),
            Path::new(DIR),
            config(),
            Rc::new(BatchCache::new(1 << 20)),
        )
        .await
        .expect("open");
        let filler = vec![b'f'; 200];
        // "k" committed, then overwritten by an aborted transaction of producer 7.
        log.append(batch("k", b"committed", -1, -1), Epoch(0), T0).await.expect("append");
        log.append(batch("k", b"aborted", 7, 0), Epoch(0), T0).await.expect("append");
        let (info, done) = log
            .append_coordinator(encode_marker(7, 0, false, 0, T0), Epoch(0), T0)
            .await
            .expect("marker");
        assert!(done.is_some_and(|t| t.aborted), "{info:?}");
        for i in 0..20 {
            log.append(batch(&format!("f{}", i % 3), &filler, -1, -1), Epoch(0), T0)
                .await
                .expect("fill");
        }
        // Producer 8 opens a transaction that overwrites "o"; it stays open.
        log.append(batch("o", b"old", -1, -1), Epoch(0), T0).await.expect("append");
        log.append(batch("o", b"open", 8, 0), Epoch(0), T0).await.expect("append");
        for i in 0..20 {
            log.append(batch(&format!("f{}", i % 3), &filler, -1, -1), Epoch(0), T0)
                .await
                .expect("fill");
        }
        log.flush().await.expect("flush");
        let throttle = Throttler::unlimited();
        let opts = CleanOptions {
            key_map_bytes: 1 << 20,
            throttle: &throttle,
            abort: &|| false,
            force: true,
            stop_after: None,
        };
        let out = log.clean(T0 + 1, &opts).await.expect("clean");
        assert!(out.cleaned, "{out:?}");
        let (k, markers) = values(&log, "k").await;
        assert_eq!(k, vec![b"committed".to_vec()], "the aborted value went, the committed stayed");
        assert_eq!(markers, 1, "the ABORT marker stays");
        let (o, _) = values(&log, "o").await;
        assert_eq!(
            o,
            vec![b"old".to_vec(), b"open".to_vec()],
            "nothing past an open transaction is cleaned"
        );
        log.close().await.expect("close");
    });
}
