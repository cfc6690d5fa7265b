//! A consuming group member (`bench consume --group G`): joins G as a Kafka consumer
//! does, fetches the partitions the range assignor gave it, heartbeats in the
//! background, commits what it consumed every second and at the end, and leaves.
//!
//! Each member runs on one bench executor as a task plus a heartbeat task, with its own
//! connections (coordinator, heartbeat, one per partition leader). Invariants: offsets
//! are committed only for partitions assigned in the current generation; after a
//! rebalance the member resumes from the committed offsets, so a record is counted again
//! only if its range was not committed (at-least-once, as Kafka's auto-commit).

use std::cell::{Cell, RefCell};
use std::collections::BTreeMap;
use std::rc::Rc;
use std::sync::Arc;
use std::time::{Duration, Instant};

use super::cli::StartFrom;
use super::client::{list_offsets, topic_name, EARLIEST, LATEST};
use super::consumer::{fetch_round, ConsumerPlan, PartitionCursor};
use super::group::{self as g, GroupVersions, Timeouts};
use super::stats::Shared;
use super::wire::Conn;

/// Kafka's auto.commit.interval.ms default.
const COMMIT_INTERVAL: Duration = Duration::from_secs(1);
/// Join/sync rounds (each one retriable error or rebalance) before the member gives up.
const JOIN_ROUNDS_MAX: u32 = 100;
/// Pause before retrying a coordinator that is loading or moving.
const RETRY_PAUSE: Duration = Duration::from_millis(100);

/// What every member of a run shares, read-only.
pub struct GroupPlan {
    pub consumer: ConsumerPlan,
    pub group: String,
    pub bootstrap: String,
    /// Partition → leader address.
    pub leaders: BTreeMap<i32, String>,
    pub timeouts: Timeouts,
}

/// Membership state shared by the member task and its heartbeat task (same executor).
#[derive(Default)]
struct Membership {
    generation: Cell<i32>,
    member_id: RefCell<String>,
    /// Set by the heartbeat when the coordinator asks for a rejoin.
    rejoin: Cell<bool>,
    /// No heartbeats while a join is in progress (the join itself keeps us alive).
    joining: Cell<bool>,
    done: Cell<bool>,
}

/// Cursors of the current assignment, by partition leader address.
type Cursors = BTreeMap<String, BTreeMap<i32, PartitionCursor>>;

/// Runs one member until the run stops (or, with `--to-end`, its partitions reached the
/// end they had when assigned); always tries to leave the group.
pub async fn run_member(plan: Arc<GroupPlan>, shared: Arc<Shared>) -> anyhow::Result<()> {
    let mut boot = super::client::connect(&plan.bootstrap).await?;
    let gv = GroupVersions::negotiate(&mut boot).await?;
    let coord_addr = locate(&mut boot, &gv, &plan.group).await?;
    let mut coord = super::client::connect(&coord_addr).await?;
    let hb_conn = super::client::connect(&coord_addr).await?;
    let state = Rc::new(Membership { joining: Cell::new(true), ..Default::default() });
    let hb = glommio::spawn_local(heartbeat_loop(plan.clone(), gv, hb_conn, state.clone()));
    let result = member_loop(&plan, &gv, &mut coord, &state, &shared).await;
    let member_id = state.member_id.borrow().clone();
    state.done.set(true);
    let left = if member_id.is_empty() {
        Ok(0)
    } else {
        g::leave(&mut coord, &gv, &plan.group, &member_id).await
    };
    hb.await;
    result?;
    match left? {
        0 | g::UNKNOWN_MEMBER_ID => Ok(()),
        code => Err(g::group_error("LeaveGroup", &plan.group, code)),
    }
}

async fn locate(conn: &mut Conn, gv: &GroupVersions, group: &str) -> anyhow::Result<String> {
    for _ in 0..JOIN_ROUNDS_MAX {
        match g::find_coordinator(conn, gv, group).await? {
            Ok(addr) => return Ok(addr),
            Err(c) if g::is_retriable(c) => glommio::timer::sleep(RETRY_PAUSE).await,
            Err(c) => return Err(g::group_error("FindCoordinator", group, c)),
        }
    }
    anyhow::bail!("no coordinator found for group '{group}'")
}

async fn member_loop(
    plan: &GroupPlan,
    gv: &GroupVersions,
    coord: &mut Conn,
    state: &Membership,
    shared: &Shared,
) -> anyhow::Result<()> {
    let mut fetch_conns: BTreeMap<String, Conn> = BTreeMap::new();
    while !shared.stopped() {
        let assigned = join_and_sync(plan, gv, coord, state).await?;
        let mut cursors = start_cursors(plan, gv, coord, &mut fetch_conns, &assigned).await?;
        let finished =
            consume(plan, gv, coord, &mut cursors, &mut fetch_conns, state, shared).await?;
        commit(plan, gv, coord, state, shared, &cursors).await?;
        if finished {
            break;
        }
    }
    Ok(())
}

/// Joins (MEMBER_ID_REQUIRED round included), computes the range assignment when we
/// lead, and returns our partitions.
async fn join_and_sync(
    plan: &GroupPlan,
    gv: &GroupVersions,
    coord: &mut Conn,
    state: &Membership,
) -> anyhow::Result<Vec<i32>> {
    state.joining.set(true);
    let topic = &plan.consumer.topic;
    let partitions: Vec<i32> = plan.leaders.keys().copied().collect();
    for _ in 0..JOIN_ROUNDS_MAX {
        let mut id = state.member_id.borrow().clone();
        let joined = g::join(coord, gv, &plan.group, &mut id, topic, plan.timeouts).await?;
        *state.member_id.borrow_mut() = id;
        let j = match joined {
            Ok(j) => j,
            Err(g::MEMBER_ID_REQUIRED) => continue,
            Err(g::UNKNOWN_MEMBER_ID) => {
                state.member_id.borrow_mut().clear();
                continue;
            }
            Err(c) if g::is_retriable(c) || c == g::REBALANCE_IN_PROGRESS => {
                glommio::timer::sleep(RETRY_PAUSE).await;
                continue;
            }
            Err(c) => return Err(g::group_error("JoinGroup", &plan.group, c)),
        };
        let assignments = if j.leader == j.member_id {
            g::range_assign(&j.members, topic, &partitions)
        } else {
            BTreeMap::new()
        };
        match g::sync(coord, gv, &plan.group, &j, topic, &assignments).await? {
            Ok(mine) => {
                state.generation.set(j.generation);
                state.rejoin.set(false);
                state.joining.set(false);
                return Ok(mine);
            }
            Err(g::UNKNOWN_MEMBER_ID) => state.member_id.borrow_mut().clear(),
            Err(g::REBALANCE_IN_PROGRESS | g::ILLEGAL_GENERATION) => {}
            Err(c) if g::is_retriable(c) => glommio::timer::sleep(RETRY_PAUSE).await,
            Err(c) => return Err(g::group_error("SyncGroup", &plan.group, c)),
        }
    }
    anyhow::bail!("group '{}' did not settle after {JOIN_ROUNDS_MAX} join rounds", plan.group)
}

/// Cursors at the committed offsets; partitions without one start at `--from`.
async fn start_cursors(
    plan: &GroupPlan,
    gv: &GroupVersions,
    coord: &mut Conn,
    conns: &mut BTreeMap<String, Conn>,
    assigned: &[i32],
) -> anyhow::Result<Cursors> {
    let topic = &plan.consumer.topic;
    let committed = match g::fetch_offsets(coord, gv, &plan.group, topic, assigned).await? {
        Ok(c) => c,
        Err(c) => return Err(g::group_error("OffsetFetch", &plan.group, c)),
    };
    let mut by_leader: BTreeMap<String, Vec<i32>> = BTreeMap::new();
    for p in assigned {
        let leader = plan.leaders.get(p).ok_or_else(|| anyhow::anyhow!("no leader for {p}"))?;
        by_leader.entry(leader.clone()).or_default().push(*p);
    }
    let v = plan.consumer.versions;
    let ts = if plan.consumer.from == StartFrom::Earliest { EARLIEST } else { LATEST };
    let mut out = Cursors::new();
    for (addr, parts) in by_leader {
        let conn = connection(conns, &addr).await?;
        let need: Vec<i32> = parts
            .iter()
            .copied()
            .filter(|p| committed.get(p).copied().flatten().is_none())
            .collect();
        let starts = if need.is_empty() {
            BTreeMap::new()
        } else {
            list_offsets(conn, &v, topic, &need, ts).await?
        };
        let ends = if plan.consumer.to_end {
            Some(list_offsets(conn, &v, topic, &parts, LATEST).await?)
        } else {
            None
        };
        let cursors = out.entry(addr).or_default();
        for p in parts {
            let offset = committed.get(&p).copied().flatten().or(starts.get(&p).copied());
            let offset =
                offset.ok_or_else(|| anyhow::anyhow!("no start offset for {topic}-{p}"))?;
            cursors.insert(p, PartitionCursor { offset, end: ends.as_ref().map(|e| e[&p]) });
        }
    }
    Ok(out)
}

async fn connection<'a>(
    conns: &'a mut BTreeMap<String, Conn>,
    addr: &str,
) -> anyhow::Result<&'a mut Conn> {
    if !conns.contains_key(addr) {
        conns.insert(addr.to_string(), super::client::connect(addr).await?);
    }
    conns.get_mut(addr).ok_or_else(|| anyhow::anyhow!("connection to {addr} vanished"))
}

/// Fetches until the run stops, a rebalance is asked for, or (`--to-end`) every
/// assigned partition reached its end; commits every [`COMMIT_INTERVAL`]. Returns
/// whether the member is finished.
async fn consume(
    plan: &GroupPlan,
    gv: &GroupVersions,
    coord: &mut Conn,
    cursors: &mut Cursors,
    conns: &mut BTreeMap<String, Conn>,
    state: &Membership,
    shared: &Shared,
) -> anyhow::Result<bool> {
    let topic = topic_name(&plan.consumer.topic);
    let mut lat = Vec::new();
    let mut last_commit = Instant::now();
    while !shared.stopped() && !state.rejoin.get() {
        let mut active = false;
        for (addr, parts) in cursors.iter_mut() {
            let live: BTreeMap<i32, PartitionCursor> = parts
                .iter()
                .filter(|(_, c)| c.end.is_none_or(|e| c.offset < e))
                .map(|(p, c)| (*p, PartitionCursor { offset: c.offset, end: c.end }))
                .collect();
            if live.is_empty() {
                continue;
            }
            active = true;
            let mut live = live;
            let conn = connection(conns, addr).await?;
            fetch_round(&plan.consumer, conn, &topic, &mut live, shared, &mut lat).await?;
            for (p, c) in live {
                if let Some(cur) = parts.get_mut(&p) {
                    cur.offset = c.offset;
                }
            }
        }
        if !active {
            if plan.consumer.to_end {
                return Ok(true);
            }
            // Nothing assigned: stay a member, wait for a rebalance or the end of the run.
            glommio::timer::sleep(RETRY_PAUSE).await;
        }
        if last_commit.elapsed() >= COMMIT_INTERVAL {
            commit(plan, gv, coord, state, shared, cursors).await?;
            last_commit = Instant::now();
        }
    }
    Ok(shared.stopped())
}

/// Commits every assigned partition's next offset; a rebalance answer asks for a rejoin.
async fn commit(
    plan: &GroupPlan,
    gv: &GroupVersions,
    coord: &mut Conn,
    state: &Membership,
    shared: &Shared,
    cursors: &Cursors,
) -> anyhow::Result<()> {
    let offsets: BTreeMap<i32, i64> =
        cursors.values().flat_map(|m| m.iter().map(|(p, c)| (*p, c.offset))).collect();
    let member_id = state.member_id.borrow().clone();
    let gen = state.generation.get();
    let topic = &plan.consumer.topic;
    match g::commit_offsets(coord, gv, &plan.group, gen, &member_id, topic, &offsets).await? {
        0 => Ok(()),
        g::REBALANCE_IN_PROGRESS | g::ILLEGAL_GENERATION => {
            state.rejoin.set(true);
            Ok(())
        }
        g::UNKNOWN_MEMBER_ID => {
            state.member_id.borrow_mut().clear();
            state.rejoin.set(true);
            Ok(())
        }
        code => {
            shared.record_error(shared.is_measuring(), code, 0);
            Ok(())
        }
    }
}

/// Heartbeats every third of the session timeout while the member is in a generation;
/// an answer that asks for a rejoin sets the flag the fetch loop checks.
async fn heartbeat_loop(
    plan: Arc<GroupPlan>,
    gv: GroupVersions,
    mut conn: Conn,
    state: Rc<Membership>,
) {
    let interval = Duration::from_millis((plan.timeouts.session_ms / 3).max(1) as u64);
    let mut next = Instant::now() + interval;
    while !state.done.get() {
        if Instant::now() < next || state.joining.get() {
            glommio::timer::sleep(RETRY_PAUSE.min(interval)).await;
            continue;
        }
        next = Instant::now() + interval;
        let gen = state.generation.get();
        let member_id = state.member_id.borrow().clone();
        let Ok(code) = g::heartbeat(&mut conn, &gv, &plan.group, gen, &member_id).await else {
            // A broken heartbeat connection shows up as a failed commit or fetch.
            return;
        };
        let stale = state.joining.get() || state.generation.get() != gen;
        if !stale && matches!(code, g::REBALANCE_IN_PROGRESS | g::ILLEGAL_GENERATION) {
            state.rejoin.set(true);
        } else if !stale && code == g::UNKNOWN_MEMBER_ID {
            state.member_id.borrow_mut().clear();
            state.rejoin.set(true);
        }
    }
}
