use super::*;
use crate::planted::Bug;

/// Seeds the planted bug may take before the simulator must have found it (the CI budget).
const PLANTED_SEED_BUDGET: u64 = 300;

/// With `bug` planted, the first failing seed within the budget, and its failure.
fn find(bug: Bug) -> (u64, SimFailure) {
    let _bug = crate::planted::plant(bug);
    let found = (0..PLANTED_SEED_BUDGET)
        .find_map(|seed| run(&ReplicationSimConfig::for_seed(seed)).err().map(|f| (seed, f)));
    let Some((seed, failure)) = found else {
        panic!("the planted bug {bug:?} survived {PLANTED_SEED_BUDGET} seeds");
    };
    eprintln!("[figure] planted {bug:?} found at seed {seed}: {}", failure.reason);
    assert_eq!(failure.seed, seed);
    assert!(failure.to_string().contains("SHARDLOG_SIM_SEED="), "{failure}");
    (seed, failure)
}

/// Issue 41: with the old truncation rule back (the leader's end of the common epoch), the
/// simulator fails within its budget, and the failure names the seed that replays it.
#[test]
fn the_simulator_finds_the_leader_end_truncation_bug() {
    find(Bug::LeaderEndTruncation);
}

/// Issue 41: with a trailing epoch entry that holds no batch kept through a truncation at
/// the log end, the follower loops; the simulator finds it.
#[test]
fn the_simulator_finds_the_empty_epoch_kept_bug() {
    find(Bug::EmptyEpochKept);
}

/// Issue 33: a leader demoted (or at a new leader epoch) after it appended a batch
/// acknowledges acks=all anyway, by a replica state that now describes a follower of one;
/// the new leader may not hold the batch. The fault matrix found it on real processes in
/// rolling restarts; the simulator runs the shipped role transition and acks=all decision
/// (`partition::replica`) and finds it.
#[test]
fn the_simulator_finds_the_demoted_leader_ack_bug() {
    find(Bug::DemotedLeaderAck);
}

/// Issue 33: a leader that stepped down and leads again must not start from its follower
/// state's high watermark; the simulator found this one itself, the first time it ran the
/// shipped role transition.
#[test]
fn the_simulator_finds_the_follower_high_watermark_carried_bug() {
    find(Bug::FollowerHwCarried);
}
