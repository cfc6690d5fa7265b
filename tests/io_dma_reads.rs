//! Large and small reads of glommio DMA files (`io::dma`): an unaligned start, a file whose
//! size is not a multiple of the alignment, reads that run past the end (short) and reads
//! at the end (empty) return exactly the file's bytes (catch-up reads and read-ahead ask
//! for megabytes at arbitrary batch positions).

use std::path::PathBuf;

use shardlog::io::dma::DmaFileSystem;
use shardlog::io::{run_local, DataFile, FileSystem};

fn pattern(at: u64) -> u8 {
    (at.wrapping_mul(31) ^ (at >> 9)) as u8
}

#[test]
fn large_reads_return_exactly_the_files_bytes() {
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("dma-large-reads");
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("scratch dir");
    run_local(async move {
        shardlog::io::probe_data_dir(&dir).await.expect("probe");
        let fs = DmaFileSystem;
        let f = fs.open(&dir.join("data"), true).await.expect("open");
        let size: u64 = 3 * 1024 * 1024 + 1000;
        let bytes: Vec<u8> = (0..size).map(pattern).collect();
        f.write_at(0, &[&bytes]).await.expect("write");
        f.truncate(size).await.expect("truncate to the exact size");
        for (pos, len) in [
            (0u64, 1024 * 1024usize),
            (4095, 512 * 1024),
            (12_345, 2 * 1024 * 1024 + 17),
            (size - 300_000, 1024 * 1024), // runs past the end: short
            (size - 10, 256 * 1024),
            (size, 256 * 1024), // at the end: empty
            (100, 4000),        // small
        ] {
            let got = f.read_at(pos, len).await.expect("read");
            let want_end = size.min(pos + len as u64);
            let want = &bytes[pos as usize..want_end as usize];
            assert_eq!(got.len(), want.len(), "read of {len} at {pos}");
            assert!(got[..] == want[..], "read of {len} at {pos}: bytes differ");
        }
        f.close().await.expect("close");
        assert!(f.read_at(0, 1 << 20).await.is_err(), "a closed file refuses reads");
    });
}
