//! The deterministic cluster simulation over many seeds (`shardlog::sim::cluster`): the
//! quorum with the real `ControllerState` as its state machine, the active controller's
//! working copy and broker sessions, brokers registering and heartbeating, clients creating
//! topics, under the quorum simulation's faults.
//!
//! `cargo test --test cluster_sim` runs `SIM_SEEDS_DEFAULT` seeds; `SHARDLOG_SIM_SEEDS=N` runs
//! N (from `SHARDLOG_SIM_SEED_BASE`, default 0); `SHARDLOG_SIM_SEED=N` replays one seed.

use std::time::Instant;

use shardlog::sim::{env_u64, run, seeds_from_env, Outcome, SimConfig};

/// Seeds per plain `cargo test` run (a debug build; see docs/architecture-details.md for the timing).
const SIM_SEEDS_DEFAULT: u64 = 300;

#[test]
fn cluster_simulation_holds_its_invariants_over_many_seeds() {
    let seeds = seeds_from_env(SIM_SEEDS_DEFAULT);
    let started = Instant::now();
    let (mut count, mut committed, mut registrations, mut topics, mut fences, mut superseded) =
        (0, 0, 0, 0, 0, 0);
    let (mut crashes, mut dropped, mut shutdowns, mut deleted, mut timeouts) = (0, 0, 0, 0, 0);
    let (mut elections, mut rebalanced, mut deaths, mut expansions) = (0, 0, 0, 0);
    let (mut reassign_ops, mut reassign_elections) = (0, 0);
    for seed in seeds {
        match run(&SimConfig::cluster_for_seed(seed)) {
            Ok(o) => {
                count += 1;
                committed += o.committed;
                registrations += o.cluster.registrations;
                topics += o.cluster.topics_created;
                fences += o.cluster.fences;
                superseded += o.cluster.supersessions;
                dropped += o.cluster.dropped_in_flight;
                shutdowns += o.cluster.shutdowns;
                deleted += o.cluster.topics_deleted;
                timeouts += o.cluster.timeouts;
                elections += o.cluster.elections;
                rebalanced += o.cluster.rebalance_moves;
                deaths += o.cluster.shutdown_deaths;
                expansions += o.cluster.isr_expansions;
                reassign_ops += o.cluster.reassign_ops;
                reassign_elections += o.cluster.reassign_elections;
                crashes += o.crashes + o.power_losses + o.disk_faults;
            }
            Err(failure) => panic!("{failure}"),
        }
    }
    eprintln!(
        "{count} cluster seeds in {:.1?}: {committed} entries committed, {registrations} \
         registrations, {topics} topics created, {deleted} deleted, {timeouts} operations timed out, {fences} brokers fenced, {shutdowns} controlled \
         shutdowns, {dropped} working copies dropped with an operation in flight, {superseded} \
         superseded, {crashes} crashes/power losses/disk faults, {elections} ElectLeaders \
         answered, {rebalanced} leaders moved by the automatic rebalance, {deaths} brokers dead \
         during their controlled shutdown, {expansions} ISR expansions, {reassign_ops} reassignment \
         requests and ISR expansions accepted, {reassign_elections} elections during a \
         reassignment",
        started.elapsed()
    );
    assert!(count < 5 || reassign_ops > 0, "reassignments ran during the simulation");
}

/// Equal seeds take equal paths. Topic ids are random (`Uuid::new_v4` in the controller),
/// so the committed bytes, and with them the digest, differ between runs; nothing branches
/// on them.
#[test]
fn a_cluster_seed_replays_exactly() {
    let cfg = SimConfig::cluster_for_seed(env_u64("SHARDLOG_SIM_SEED").unwrap_or(7));
    let strip = |o: Outcome| Outcome { digest: 0, ..o };
    let first = strip(run(&cfg).unwrap_or_else(|f| panic!("{f}")));
    let second = strip(run(&cfg).unwrap_or_else(|f| panic!("{f}")));
    assert_eq!(first, second);
    assert!(first.cluster.registrations > 0 && first.cluster.topics_created > 0, "{first:?}");
}
