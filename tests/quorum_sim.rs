//! The deterministic quorum simulation over many seeds (`shardlog::sim`).
//!
//! `cargo test --test quorum_sim` runs `SIM_SEEDS_DEFAULT` seeds; `SHARDLOG_SIM_SEEDS=N` runs
//! N (from `SHARDLOG_SIM_SEED_BASE`, default 0); `SHARDLOG_SIM_SEED=N` replays one seed.

use std::time::Instant;

use shardlog::sim::{env_u64, run, seeds_from_env, SimConfig};

/// Seeds per plain `cargo test` run (a debug build; see docs/architecture-details.md for the timing).
const SIM_SEEDS_DEFAULT: u64 = 500;

#[test]
fn quorum_simulation_holds_its_invariants_over_many_seeds() {
    let seeds = seeds_from_env(SIM_SEEDS_DEFAULT);
    let started = Instant::now();
    let (mut committed, mut snapshots, mut crashes, mut count) = (0, 0, 0, 0);
    for seed in seeds {
        match run(&SimConfig::for_seed(seed)) {
            Ok(o) => {
                committed += o.committed;
                snapshots += o.snapshots_sent;
                crashes += o.crashes + o.power_losses + o.disk_faults;
                count += 1;
            }
            Err(failure) => panic!("{failure}"),
        }
    }
    eprintln!(
        "{count} seeds in {:.1?}: {committed} entries committed, {snapshots} snapshots sent, \
         {crashes} crashes/power losses/disk faults",
        started.elapsed()
    );
}

#[test]
fn a_seed_replays_exactly() {
    let cfg = SimConfig::for_seed(env_u64("SHARDLOG_SIM_SEED").unwrap_or(7));
    let first = run(&cfg).unwrap_or_else(|f| panic!("{f}"));
    let second = run(&cfg).unwrap_or_else(|f| panic!("{f}"));
    assert_eq!(first, second);
    assert!(first.committed > 0, "{first:?}");
}
