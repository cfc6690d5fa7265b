//! Consumer groups (Kafka's classic protocol) and committed offsets.
//!
//! A group lives on the shard that owns its `__consumer_offsets` partition
//! ([`placement::partition_for`], Kafka's hash of the group id); that shard's
//! [`Coordinator`] holds the group's members, generation and offsets. The coordinator is
//! pure (no I/O, no clock): requests and `now_ms` in, [`types::Effects`] out. The driver
//! in `server::group` persists the emitted [`records::Record`]s in `__consumer_offsets`
//! with Kafka's own key/value schemas, answers once they are durable, runs the timers,
//! and replays the partition when the shard opens it.
//!
//! - [`records`]: `__consumer_offsets` key/value codec (OffsetCommit, GroupMetadata).
//! - [`load`]: stored batches → records for the loader, decompression bounded.
//! - [`placement`]: group → partition.
//! - [`coordinator`]: JoinGroup/SyncGroup; [`membership`]: heartbeats, leaves, timers;
//!   [`offsets`]: commits, fetches, deletes, expiry, replay.
//! - `shardlog groups list|describe` lives in [`crate::cli::groups`].

pub mod coordinator;
pub mod load;

pub mod membership;
pub mod offsets;
pub mod placement;
pub mod records;
pub mod state;
pub mod types;

#[cfg(test)]
mod tests;

pub use coordinator::Coordinator;

use crate::constants::{
    GROUP_INITIAL_REBALANCE_DELAY_MS_DEFAULT, GROUP_MAX_SESSION_TIMEOUT_MS_DEFAULT,
    GROUP_MAX_SIZE_DEFAULT, GROUP_MEMBER_METADATA_BYTES_MAX, GROUP_METADATA_RECORD_BYTES_MAX,
    GROUP_MIN_SESSION_TIMEOUT_MS_DEFAULT, OFFSETS_RETENTION_MS_DEFAULT,
    OFFSET_METADATA_BYTES_MAX_DEFAULT,
};

/// Group coordinator settings (Kafka's broker configs of the same names).
#[derive(Debug, Clone)]
pub struct GroupConfig {
    pub min_session_timeout_ms: i32,
    pub max_session_timeout_ms: i32,
    pub initial_rebalance_delay_ms: i64,
    pub group_max_size: usize,
    pub offset_metadata_bytes_max: usize,
    pub offsets_retention_ms: i64,
    pub member_metadata_bytes_max: usize,
    pub group_metadata_bytes_max: usize,
}

impl Default for GroupConfig {
    fn default() -> Self {
        Self {
            min_session_timeout_ms: GROUP_MIN_SESSION_TIMEOUT_MS_DEFAULT,
            max_session_timeout_ms: GROUP_MAX_SESSION_TIMEOUT_MS_DEFAULT,
            initial_rebalance_delay_ms: GROUP_INITIAL_REBALANCE_DELAY_MS_DEFAULT,
            group_max_size: GROUP_MAX_SIZE_DEFAULT,
            offset_metadata_bytes_max: OFFSET_METADATA_BYTES_MAX_DEFAULT,
            offsets_retention_ms: OFFSETS_RETENTION_MS_DEFAULT,
            member_metadata_bytes_max: GROUP_MEMBER_METADATA_BYTES_MAX,
            group_metadata_bytes_max: GROUP_METADATA_RECORD_BYTES_MAX,
        }
    }
}
