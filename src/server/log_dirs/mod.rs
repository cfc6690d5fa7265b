//! The log-directory APIs: DescribeLogDirs (API key 35: per partition this broker hosts, the
//! bytes of its segments and its offset lag, plus the volume's size, what
//! `kafka-log-dirs.sh --describe` and the Admin client's `describeLogDirs` /
//! `describeReplicaLogDirs` show) and AlterReplicaLogDirs (API key 34: move replicas to
//! another log directory).
//!
//! A Shardlog broker has exactly one log directory, its data directory, reported as an
//! absolute path: moving a replica "to" it is a no-op success, any other path is
//! LOG_DIR_NOT_FOUND (Kafka's answers for a broker with one `log.dirs` entry).
//! With an authorizer, Kafka's checks apply: DESCRIBE on the cluster for DescribeLogDirs,
//! ALTER on it for AlterReplicaLogDirs (`server::authz`).
//!
//! Runs on the connection's shard; DescribeLogDirs asks each replica's owner shard for its
//! figures through the one per-partition scatter/gather ([`crate::server::route`],
//! [`crate::partition::log_dir`]). Invariant: broker-local, never forwarded to the
//! controller (Kafka's clients address these requests to the broker they describe).

pub mod alter;
pub mod describe;

use std::path::{Path, PathBuf};

use crate::shard::ShardCtx;

/// The broker's one log directory as Kafka reports it: the data directory made absolute
/// (against the broker's working directory, as Java's `toAbsolutePath`).
#[must_use]
pub fn log_dir(ctx: &ShardCtx) -> PathBuf {
    absolute(&ctx.config.data_dir)
}

fn absolute(dir: &Path) -> PathBuf {
    std::path::absolute(dir).unwrap_or_else(|_| dir.to_path_buf())
}

/// Whether a client's `path` names `log_dir`: an absolute path equal component by component
/// (so a trailing `/` or a `.` component does not matter; Kafka compares the strings, and
/// refuses a relative path, as here).
#[must_use]
pub fn names_log_dir(path: &str, log_dir: &Path) -> bool {
    let path = Path::new(path);
    path.is_absolute() && path.components().eq(log_dir.components())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_data_dir_is_a_log_dir() {
        let dir = Path::new("/var/lib/shardlog/data");
        assert!(names_log_dir("/var/lib/shardlog/data", dir));
        assert!(names_log_dir("/var/lib/shardlog/data/", dir));
        assert!(names_log_dir("/var/lib/shardlog/./data", dir));
        assert!(!names_log_dir("/var/lib/shardlog", dir));
        assert!(!names_log_dir("/var/lib/shardlog/data2", dir));
        assert!(!names_log_dir("data", dir));
        assert!(!names_log_dir("", dir));
    }

    #[test]
    fn relative_data_dir_is_reported_absolute() {
        let abs = absolute(Path::new("shardlog-data"));
        assert!(abs.is_absolute());
        assert!(abs.ends_with("shardlog-data"));
    }
}
