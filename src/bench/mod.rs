//! `shardlog bench`: the bundled load generator. It speaks the Kafka protocol to any
//! Kafka-compatible broker (Shardlog, Apache Kafka, Redpanda), produces, consumes or
//! measures end-to-end latency, and reports HdrHistogram latency percentiles.
//!
//! Runs in its own process, never inside the broker: one glommio executor per `--cpus`
//! core of the allowed CPU set, each owning its connections ("lanes"). Module map:
//! - [`cli`]: arguments and their validation.
//! - [`wire`]: framing, connections, version negotiation (the shared
//!   [`crate::protocol::client`]).
//! - [`client`]: metadata, topic creation, offsets.
//! - [`batch`]: RecordBatch v2 encoding and scanning.
//! - [`rate`]: open-loop schedule and coordinated-omission correction.
//! - [`group`]: the classic consumer-group protocol; [`member`]: a `--group` member.
//! - [`producer`], [`consumer`]: the lanes; [`modes`]: the runs; [`runtime`]: executors.
//! - [`stats`]: recorder, progress, summary, `.hgrm`, JSON; [`plot`]: SVG charts.
//!
//! Invariant: bad input or an unreachable broker ends the run with one clear error line
//! (returned as `Err` from [`run`]), never a panic.

pub mod batch;
pub mod cli;
pub mod client;
#[cfg(test)]
mod co_tests;
pub mod consumer;
#[cfg(test)]
mod fake_broker;
pub mod group;
pub mod member;
pub mod modes;
pub mod plot;
pub mod producer;
pub mod rate;
pub mod runtime;
pub mod stats;
/// The shared Kafka client, under the name the load generator always used.
pub use crate::protocol::client as wire;

pub use cli::BenchArgs;

/// Runs one `shardlog bench` command.
pub fn run(args: BenchArgs) -> anyhow::Result<()> {
    stats::install_signal_handlers();
    match args.command {
        cli::BenchCommand::Produce(a) => modes::produce(a),
        cli::BenchCommand::Consume(a) => modes::consume(a),
        cli::BenchCommand::E2e(a) => modes::e2e(a),
        cli::BenchCommand::Plot(a) => plot::run(a),
    }
}
