//! The deterministic replication simulation over many seeds (`shardlog::sim::replication`):
//! three replicas of one partition on the shipped log, leader and fetcher code, with kills,
//! power losses, restarts, leader moves and late metadata under an idempotent acks=all
//! producer.
//!
//! `cargo test --test replication_sim` runs `SIM_SEEDS_DEFAULT` seeds; `SHARDLOG_SIM_SEEDS=N`
//! runs N (from `SHARDLOG_SIM_SEED_BASE`, default 0); `SHARDLOG_SIM_SEED=N` replays one seed.

use std::time::Instant;

use shardlog::sim::replication::{run, ReplicationOutcome, ReplicationSimConfig};
use shardlog::sim::{env_u64, seeds_from_env};

/// Seeds per plain `cargo test` run (a debug build).
const SIM_SEEDS_DEFAULT: u64 = 300;

#[test]
fn replication_simulation_holds_its_invariants_over_many_seeds() {
    let seeds = seeds_from_env(SIM_SEEDS_DEFAULT);
    let started = Instant::now();
    let mut total = ReplicationOutcome::default();
    let mut count = 0;
    for seed in seeds {
        let o = run(&ReplicationSimConfig::for_seed(seed)).unwrap_or_else(|f| panic!("{f}"));
        total.acked_batches += o.acked_batches;
        total.elections += o.elections;
        total.kills += o.kills;
        total.power_losses += o.power_losses;
        total.truncations += o.truncations;
        total.settle_truncations_max = total.settle_truncations_max.max(o.settle_truncations_max);
        count += 1;
    }
    eprintln!(
        "[figure] {count} replication seeds in {:.1?}: {} batches acknowledged, {} elections, \
         {} kills, {} power losses, {} truncations (at most {} by one follower while settling)",
        started.elapsed(),
        total.acked_batches,
        total.elections,
        total.kills,
        total.power_losses,
        total.truncations,
        total.settle_truncations_max
    );
}

#[test]
fn a_replication_seed_replays_exactly() {
    let cfg = ReplicationSimConfig::for_seed(env_u64("SHARDLOG_SIM_SEED").unwrap_or(11));
    let first = run(&cfg).unwrap_or_else(|f| panic!("{f}"));
    let second = run(&cfg).unwrap_or_else(|f| panic!("{f}"));
    assert_eq!(first, second);
    assert!(first.acked_batches > 0 && first.elections > 0, "{first:?}");
}
