//! Fuzz targets for every Shardlog decoder that reads bytes from outside the process:
//! client request frames, record batches (every codec), segment files, indexes (offset, time,
//! aborted transactions), checkpoints,
//! producer-state snapshots, the metadata log, group records, the raft store, and SASL
//! tokens (OAUTHBEARER's messages and JWTs too) with the JAAS, PEM and JWKS texts of listener
//! settings.
//!
//! Each target is a plain `fn(&[u8])` that drives the broker's own decode path and panics
//! only on a bug (a decoder panic, an allocation past its bound, a broken round trip). The
//! harness in `tests/targets.rs` runs each under bolero: corpus replay plus random inputs in
//! `cargo test`, coverage-guided under `cargo bolero test` (see README.md).

// Links bolero into every binary of this package: under `cargo bolero test` the instrumented
// code of each needs the libFuzzer runtime that bolero brings.
#[doc(hidden)]
pub use bolero as _bolero;

mod frames;
mod records;
mod security;
mod state;

pub use frames::request_frame;
pub use records::{decompress, record_batch, segment_scan};
pub use security::{oauthbearer, sasl_tokens, tls_stores};
pub use state::{
    cleaner_checkpoint, epoch_checkpoint, group_records, metadata_log, offset_index,
    producer_snapshot, raft_store, time_index, txn_index,
};

/// Runs a future that never waits (in-memory files) to completion on this thread.
fn block_on<T>(f: impl std::future::Future<Output = T>) -> T {
    futures::executor::block_on(f)
}
