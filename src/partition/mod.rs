//! One partition's state and work on its owner shard: the table of partitions a shard owns
//! (opened and closed as the metadata image changes, [`table`]; held by the server's
//! per-shard broker value, and passed to the functions here that read it), the partition-level
//! operations a request sends there (append, read, offset and epoch lookups, the long-poll
//! wait, [`ops`]), one replica's role, its transitions and the leader's produce path
//! ([`replica`], run by the broker and the simulator alike), the leader's view of its followers (high watermark, ISR decisions,
//! min.insync.replicas: [`replicas`], pure; kept per partition by [`leader`]; the answer
//! to a follower's Fetch: [`replica_fetch`]), the high-watermark checkpoint
//! ([`hw_checkpoint`]), a replica's size and lag for DescribeLogDirs ([`log_dir`]), and the periodic retention and cleaning of the shard's logs
//! ([`maintenance`]). It grows into the leader/follower state
//! of replication.
//!
//! Lives on each partition's owner shard; nothing here is touched by another thread.
//! Invariants: at most one open log per partition directory; appends to a partition take
//! effect in the order a connection sent them; a produce is answered only once the flush
//! policy's durability is reached, and then wakes the partition's long-polls.

pub mod hw_checkpoint;
pub mod leader;
pub mod log_dir;
pub mod maintenance;
pub mod ops;
pub mod replica;
pub mod replica_fetch;
pub mod replicas;
pub mod table;
pub mod transactions;

pub use table::{OwnedPartition, PartitionTable};
