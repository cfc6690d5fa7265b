//! State-machine tests of the coordinator: join rounds, generations, error paths, static
//! membership, timers, offsets and replay, all on virtual time.

use bytes::Bytes;

use super::records::Record;
use super::types::*;
use super::{Coordinator, GroupConfig};

const G: &str = "g";

fn coordinator() -> Coordinator {
    Coordinator::new(GroupConfig::default())
}

fn join_req(member_id: &str) -> JoinRequest {
    JoinRequest {
        group_id: G.into(),
        member_id: member_id.into(),
        group_instance_id: None,
        client_id: "client".into(),
        client_host: "/127.0.0.1".into(),
        session_timeout_ms: 10_000,
        rebalance_timeout_ms: 30_000,
        protocol_type: "consumer".into(),
        protocols: vec![
            Protocol { name: "range".into(), metadata: Bytes::from_static(b"r") },
            Protocol { name: "roundrobin".into(), metadata: Bytes::from_static(b"rr") },
        ],
        require_known_member_id: true,
    }
}

fn reply_for(effects: &Effects, token: Token) -> Option<Reply> {
    effects
        .replies
        .iter()
        .chain(effects.after_persist.iter())
        .find(|(t, _)| *t == token)
        .map(|(_, r)| r.clone())
}

fn join_reply(effects: &Effects, token: Token) -> JoinResponse {
    match reply_for(effects, token) {
        Some(Reply::Join(j)) => j,
        other => panic!("expected a join reply for {token}, got {other:?}"),
    }
}

fn sync_reply(effects: &Effects, token: Token) -> SyncResponse {
    match reply_for(effects, token) {
        Some(Reply::Sync(s)) => s,
        other => panic!("expected a sync reply for {token}, got {other:?}"),
    }
}

/// Two-step join of a new member (MEMBER_ID_REQUIRED then join); returns its id.
fn join_new(c: &mut Coordinator, token: Token, now: i64) -> (String, Effects) {
    let e = c.join(token, join_req(""), now);
    let r = join_reply(&e, token);
    assert_eq!(r.error, Some(GroupError::MemberIdRequired));
    assert!(r.member_id.starts_with("client-"));
    let e = c.join(token + 1000, join_req(&r.member_id), now);
    (r.member_id, e)
}

/// OffsetCommit as the driver runs it: records applied once "durable".
fn commit_now(c: &mut Coordinator, req: &CommitRequest, now: i64) -> super::offsets::CommitOutcome {
    let out = c.commit(req, now);
    let applied = out.records.clone();
    c.apply_durable(applied, now);
    out
}

fn sync_req(member: &str, generation: i32, assignments: Vec<(String, Bytes)>) -> SyncRequest {
    SyncRequest {
        group_id: G.into(),
        generation_id: generation,
        member_id: member.into(),
        group_instance_id: None,
        protocol_type: Some("consumer".into()),
        protocol_name: Some("range".into()),
        assignments,
    }
}

fn hb(member: &str, generation: i32) -> HeartbeatRequest {
    HeartbeatRequest {
        group_id: G.into(),
        generation_id: generation,
        member_id: member.into(),
        group_instance_id: None,
    }
}

/// A single member group, joined and synced, at generation 1.
fn stable_single(c: &mut Coordinator) -> String {
    let (m, e) = join_new(c, 1, 0);
    assert!(e.replies.is_empty(), "join parked during the initial delay");
    let e = c.tick(3_000);
    let r = join_reply(&e, 1001);
    assert_eq!((r.error, r.generation_id, r.leader.as_str()), (None, 1, m.as_str()));
    assert_eq!(r.members.len(), 1);
    assert_eq!(r.protocol_name.as_deref(), Some("range"));
    let e = c.sync(2, sync_req(&m, 1, vec![(m.clone(), Bytes::from_static(b"A"))]), 3_001);
    assert_eq!(e.records.len(), 1, "group metadata persisted");
    assert_eq!(sync_reply(&e, 2).assignment, Bytes::from_static(b"A"));
    assert!(e.replies.is_empty(), "sync answered only after the record is durable");
    m
}

#[test]
fn member_id_required_then_initial_delay_then_generation_one() {
    let mut c = coordinator();
    let m = stable_single(&mut c);
    assert_eq!(c.describe(G).state, GroupState::Stable);
    assert_eq!(c.heartbeat(&hb(&m, 1), 4_000), Ok(()));
}

#[test]
fn initial_delay_extends_while_members_arrive() {
    let mut c = coordinator();
    let (_a, _) = join_new(&mut c, 1, 0);
    let (_b, _) = join_new(&mut c, 2, 2_000);
    // The first delay ends at 3000 but a member arrived: extended by up to 3000 more.
    let e = c.tick(3_000);
    assert!(e.replies.is_empty());
    let e = c.tick(6_000);
    assert_eq!(e.replies.len(), 2);
    assert!(e.replies.iter().all(|(_, r)| matches!(r, Reply::Join(j) if j.generation_id == 1)));
}

#[test]
fn second_member_triggers_rebalance_and_leader_gets_members() {
    let mut c = coordinator();
    let a = stable_single(&mut c);
    let (b, e) = join_new(&mut c, 10, 5_000);
    assert!(e.replies.is_empty(), "b parked until a rejoins");
    assert_eq!(c.heartbeat(&hb(&a, 1), 5_100), Err(GroupError::RebalanceInProgress));
    // Commit with the current generation is allowed while preparing (eager revoke).
    let commit = CommitRequest {
        group_id: G.into(),
        generation_id: 1,
        member_id: a.clone(),
        group_instance_id: None,
        retention_time_ms: -1,
        partitions: vec![CommitPartition {
            topic: "t".into(),
            partition: 0,
            offset: 5,
            leader_epoch: 0,
            metadata: None,
        }],
    };
    assert_eq!(commit_now(&mut c, &commit, 5_150).errors, vec![None]);
    let e = c.join(20, join_req(&a), 5_200);
    let ra = join_reply(&e, 20);
    let rb = join_reply(&e, 1010);
    assert_eq!((ra.generation_id, rb.generation_id), (2, 2));
    assert_eq!(ra.leader, a);
    assert_eq!(ra.members.len(), 2);
    assert!(rb.members.is_empty());
    // Follower syncs first: parked until the leader's assignment.
    let e = c.sync(21, sync_req(&b, 2, vec![]), 5_300);
    assert!(e.replies.is_empty() && e.after_persist.is_empty());
    assert_eq!(c.heartbeat(&hb(&b, 2), 5_350), Ok(()));
    let assignment =
        vec![(a.clone(), Bytes::from_static(b"A")), (b.clone(), Bytes::from_static(b"B"))];
    let e = c.sync(22, sync_req(&a, 2, assignment), 5_400);
    assert_eq!(sync_reply(&e, 21).assignment, Bytes::from_static(b"B"));
    assert_eq!(sync_reply(&e, 22).assignment, Bytes::from_static(b"A"));
    // Stale generation.
    assert_eq!(c.heartbeat(&hb(&b, 1), 5_500), Err(GroupError::IllegalGeneration));
    let e = c.sync(23, sync_req(&b, 1, vec![]), 5_500);
    assert_eq!(sync_reply(&e, 23).error, Some(GroupError::IllegalGeneration));
}

#[test]
fn error_paths_leave_the_group_intact() {
    let mut c = coordinator();
    let m = stable_single(&mut c);
    let mut bad = join_req("");
    bad.session_timeout_ms = 1_000;
    assert_eq!(
        join_reply(&c.join(50, bad, 4_000), 50).error,
        Some(GroupError::InvalidSessionTimeout)
    );
    let mut bad = join_req("");
    bad.protocol_type = "connect".into();
    assert_eq!(
        join_reply(&c.join(51, bad, 4_000), 51).error,
        Some(GroupError::InconsistentGroupProtocol)
    );
    let mut bad = join_req("");
    bad.protocols = vec![Protocol { name: "sticky".into(), metadata: Bytes::new() }];
    assert_eq!(
        join_reply(&c.join(52, bad, 4_000), 52).error,
        Some(GroupError::InconsistentGroupProtocol)
    );
    let mut huge = join_req("");
    huge.protocols[0].metadata = Bytes::from(vec![0u8; 2 * 1024 * 1024]);
    assert_eq!(join_reply(&c.join(53, huge, 4_000), 53).error, Some(GroupError::MetadataTooLarge));
    assert_eq!(
        join_reply(&c.join(54, join_req("nobody"), 4_000), 54).error,
        Some(GroupError::UnknownMemberId)
    );
    assert_eq!(c.heartbeat(&hb("nobody", 1), 4_000), Err(GroupError::UnknownMemberId));
    let summary = c.describe(G);
    assert_eq!((summary.state, summary.members.len()), (GroupState::Stable, 1));
    assert_eq!(c.heartbeat(&hb(&m, 1), 4_001), Ok(()));
    let commit = CommitRequest {
        group_id: G.into(),
        generation_id: 7,
        member_id: m.clone(),
        group_instance_id: None,
        retention_time_ms: -1,
        partitions: vec![CommitPartition {
            topic: "t".into(),
            partition: 0,
            offset: 1,
            leader_epoch: -1,
            metadata: None,
        }],
    };
    let out = commit_now(&mut c, &commit, 4_002);
    assert_eq!(out.errors, vec![Some(GroupError::IllegalGeneration)]);
    assert!(out.records.is_empty());
    let commit = CommitRequest { generation_id: -1, member_id: String::new(), ..commit };
    assert_eq!(commit_now(&mut c, &commit, 4_003).errors, vec![Some(GroupError::UnknownMemberId)]);
    assert_eq!(c.fetch(G, &[("t".into(), 0)]), vec![None]);
}

#[test]
fn join_on_unknown_group_with_member_id_is_unknown_member() {
    let mut c = coordinator();
    assert_eq!(
        join_reply(&c.join(1, join_req("x"), 0), 1).error,
        Some(GroupError::UnknownMemberId)
    );
    let mut empty_id = join_req("");
    empty_id.group_id = String::new();
    assert_eq!(join_reply(&c.join(2, empty_id, 0), 2).error, Some(GroupError::InvalidGroupId));
}

#[test]
fn session_expiry_removes_member_and_rebalances_others() {
    let mut c = coordinator();
    let a = stable_single(&mut c);
    let (b, _) = join_new(&mut c, 10, 4_000);
    let e = c.join(20, join_req(&a), 4_100);
    assert_eq!(join_reply(&e, 20).generation_id, 2);
    let both = vec![(a.clone(), Bytes::from_static(b"A")), (b.clone(), Bytes::from_static(b"B"))];
    c.sync(21, sync_req(&a, 2, both), 4_200);
    c.sync(22, sync_req(&b, 2, vec![]), 4_200);
    // a keeps heartbeating, b goes silent.
    for t in (5_000..15_000).step_by(2_000) {
        assert_eq!(c.heartbeat(&hb(&a, 2), t), Ok(()));
        c.tick(t);
    }
    let deadline = c.next_deadline().expect("deadline");
    let e = c.tick(deadline.max(14_300));
    assert!(e.replies.is_empty());
    assert_eq!(c.heartbeat(&hb(&a, 2), 14_400), Err(GroupError::RebalanceInProgress));
    let e = c.join(30, join_req(&a), 14_500);
    let r = join_reply(&e, 30);
    assert_eq!((r.generation_id, r.members.len()), (3, 1));
}

#[test]
fn leave_group_batched_and_last_member_empties_group() {
    let mut c = coordinator();
    let a = stable_single(&mut c);
    let leaving = vec![
        LeavingMember { member_id: a.clone(), group_instance_id: None },
        LeavingMember { member_id: "ghost".into(), group_instance_id: None },
    ];
    let (results, effects) = c.leave(G, &leaving, 5_000);
    assert_eq!(results, Ok(vec![None, Some(GroupError::UnknownMemberId)]));
    assert_eq!(c.describe(G).state, GroupState::Empty);
    assert_eq!(effects.records.len(), 1, "empty group persisted");
    // Now the empty group accepts admin-style commits.
    let commit = CommitRequest {
        group_id: G.into(),
        generation_id: -1,
        member_id: String::new(),
        group_instance_id: None,
        retention_time_ms: -1,
        partitions: vec![CommitPartition {
            topic: "t".into(),
            partition: 1,
            offset: 9,
            leader_epoch: 3,
            metadata: Some("m".into()),
        }],
    };
    assert_eq!(commit_now(&mut c, &commit, 5_100).errors, vec![None]);
    assert_eq!(
        c.fetch(G, &[("t".into(), 1)]),
        vec![Some(Committed { offset: 9, leader_epoch: 3, metadata: "m".into(), unstable: false })]
    );
}

#[test]
fn static_member_rejoin_keeps_assignment_and_fences_old_id() {
    let mut c = coordinator();
    let mut req = join_req("");
    req.group_instance_id = Some("inst-1".into());
    let e = c.join(1, req.clone(), 0);
    assert!(e.replies.is_empty(), "static members skip MEMBER_ID_REQUIRED");
    let e = c.tick(3_000);
    let first = join_reply(&e, 1);
    assert_eq!(first.generation_id, 1);
    // A second (dynamic) member so the static one is not the leader.
    let mut other = req.clone();
    other.group_instance_id = Some("inst-0".into());
    c.sync(
        2,
        SyncRequest {
            group_instance_id: Some("inst-1".into()),
            ..sync_req(
                &first.member_id,
                1,
                vec![(first.member_id.clone(), Bytes::from_static(b"S"))],
            )
        },
        3_001,
    );
    let e = c.join(3, other, 3_100);
    assert!(e.replies.is_empty());
    let mut rejoin = req.clone();
    rejoin.member_id = first.member_id.clone();
    let e = c.join(4, rejoin, 3_200);
    let leader = join_reply(&e, 4);
    let follower = join_reply(&e, 3);
    assert_eq!(leader.generation_id, 2);
    let assign = vec![
        (leader.member_id.clone(), Bytes::from_static(b"L")),
        (follower.member_id.clone(), Bytes::from_static(b"F")),
    ];
    let sync = |m: &str, inst: &str, a| SyncRequest {
        group_instance_id: Some(inst.into()),
        ..sync_req(m, 2, a)
    };
    c.sync(5, sync(&follower.member_id, "inst-0", vec![]), 3_300);
    c.sync(6, sync(&leader.member_id, "inst-1", assign), 3_300);
    assert_eq!(c.describe(G).state, GroupState::Stable);
    // The follower restarts: same instance id, no member id, same protocols.
    let mut restart = req.clone();
    restart.group_instance_id = Some("inst-0".into());
    let e = c.join(7, restart, 4_000);
    let r = join_reply(&e, 7);
    assert_eq!((r.error, r.generation_id), (None, 2), "no rebalance for a static rejoin");
    assert_ne!(r.member_id, follower.member_id);
    assert_eq!(c.describe(G).state, GroupState::Stable);
    // The old incarnation is fenced.
    let old =
        HeartbeatRequest { group_instance_id: Some("inst-0".into()), ..hb(&follower.member_id, 2) };
    assert_eq!(c.heartbeat(&old, 4_100), Err(GroupError::FencedInstanceId));
    let new = HeartbeatRequest { group_instance_id: Some("inst-0".into()), ..hb(&r.member_id, 2) };
    assert_eq!(c.heartbeat(&new, 4_100), Ok(()));
    let e = c.sync(8, sync(&r.member_id, "inst-0", vec![]), 4_200);
    assert_eq!(sync_reply(&e, 8).assignment, Bytes::from_static(b"F"));
}

#[test]
fn rebalance_deadline_drops_members_that_do_not_rejoin() {
    let mut c = coordinator();
    let a = stable_single(&mut c);
    let (_b, _) = join_new(&mut c, 10, 4_000);
    // a never rejoins (but keeps heartbeating): dropped when the join phase times out.
    c.heartbeat(&hb(&a, 1), 20_000).expect_err("rebalancing");
    c.heartbeat(&hb(&a, 1), 30_000).expect_err("rebalancing");
    let e = c.tick(34_000);
    let r = join_reply(&e, 1010);
    assert_eq!((r.generation_id, r.members.len()), (2, 1));
    assert_eq!(c.heartbeat(&hb(&a, 2), 34_001), Err(GroupError::UnknownMemberId));
}

#[test]
fn sync_timeout_drops_members_that_never_sync() {
    let mut c = coordinator();
    let (m, _) = join_new(&mut c, 1, 0);
    c.tick(3_000);
    assert_eq!(c.describe(G).state, GroupState::CompletingRebalance);
    let e = c.tick(3_000 + 30_000);
    assert!(e.replies.is_empty());
    assert_eq!(c.describe(G).state, GroupState::Empty);
    assert_eq!(c.heartbeat(&hb(&m, 1), 33_001), Err(GroupError::UnknownMemberId));
}

#[test]
fn pending_member_expires_after_session_timeout() {
    let mut c = coordinator();
    let r = join_reply(&c.join(1, join_req(""), 0), 1);
    c.tick(20_000);
    let e = c.join(2, join_req(&r.member_id), 20_001);
    assert_eq!(join_reply(&e, 2).error, Some(GroupError::UnknownMemberId));
}

#[test]
fn commits_persist_records_and_replay_restores_everything() {
    let mut c = coordinator();
    let a = stable_single(&mut c);
    let commit = CommitRequest {
        group_id: G.into(),
        generation_id: 1,
        member_id: a.clone(),
        group_instance_id: None,
        retention_time_ms: -1,
        partitions: vec![
            CommitPartition {
                topic: "t".into(),
                partition: 0,
                offset: 10,
                leader_epoch: 2,
                metadata: Some("x".into()),
            },
            CommitPartition {
                topic: "t".into(),
                partition: 1,
                offset: 20,
                leader_epoch: 2,
                metadata: Some("y".repeat(5000)),
            },
        ],
    };
    let out = commit_now(&mut c, &commit, 4_000);
    assert_eq!(out.errors, vec![None, Some(GroupError::OffsetMetadataTooLarge)]);
    assert_eq!(out.records.len(), 1);
    // Replay into a fresh coordinator: group record (from sync) and the commit.
    let group_record =
        c.group(G).map(|g| Record::Group { group: G.into(), value: Some(g.to_value()) });
    let mut fresh = coordinator();
    for r in group_record.into_iter().chain(out.records) {
        let (k, v) = r.encode();
        fresh.replay(Record::decode(&k, v.as_deref()).expect("decode"), 10_000);
    }
    assert_eq!(
        fresh.fetch_all(G),
        vec![(
            "t".into(),
            0,
            Committed { offset: 10, leader_epoch: 2, metadata: "x".into(), unstable: false }
        )]
    );
    let d = fresh.describe(G);
    assert_eq!((d.state, d.members.len()), (GroupState::Stable, 1));
    assert_eq!(fresh.heartbeat(&hb(&a, 1), 10_001), Ok(()));
}

#[test]
fn delete_groups_and_offset_delete() {
    let mut c = coordinator();
    let a = stable_single(&mut c);
    assert_eq!(c.delete_group(G).err(), Some(GroupError::NonEmptyGroup));
    assert_eq!(c.delete_group("nope").err(), Some(GroupError::GroupIdNotFound));
    let commit = CommitRequest {
        group_id: G.into(),
        generation_id: 1,
        member_id: a.clone(),
        group_instance_id: None,
        retention_time_ms: -1,
        partitions: vec![CommitPartition {
            topic: "t".into(),
            partition: 0,
            offset: 10,
            leader_epoch: -1,
            metadata: None,
        }],
    };
    commit_now(&mut c, &commit, 4_000);
    let (errors, records) = c.offset_delete(G, &[("t".into(), 0)], |_, t| t == "t").expect("ok");
    assert_eq!(errors, vec![Some(GroupError::GroupSubscribedToTopic)]);
    assert!(records.is_empty());
    let _ = c.leave(G, &[LeavingMember { member_id: a, group_instance_id: None }], 5_000);
    let (errors, records) = c.offset_delete(G, &[("t".into(), 0)], |_, _| true).expect("ok");
    assert_eq!((errors, records.len()), (vec![None], 1));
    let tombstones = c.delete_group(G).expect("deleted");
    assert!(matches!(tombstones.last(), Some(Record::Group { value: None, .. })));
    assert_eq!(c.describe(G).state, GroupState::Dead);
}

#[test]
fn retention_expires_offsets_of_empty_groups_and_deleted_topics() {
    let mut c = coordinator();
    let commit = CommitRequest {
        group_id: G.into(),
        generation_id: -1,
        member_id: String::new(),
        group_instance_id: None,
        retention_time_ms: -1,
        partitions: vec![
            CommitPartition {
                topic: "kept".into(),
                partition: 0,
                offset: 1,
                leader_epoch: -1,
                metadata: None,
            },
            CommitPartition {
                topic: "gone".into(),
                partition: 0,
                offset: 1,
                leader_epoch: -1,
                metadata: None,
            },
        ],
    };
    assert_eq!(commit_now(&mut c, &commit, 0).errors, vec![None, None]);
    let records = c.expire(1_000, |t| t == "kept");
    assert_eq!(records.len(), 1, "deleted topic's offset tombstoned");
    let week = c.config.offsets_retention_ms;
    let records = c.expire(week + 1, |_| true);
    assert_eq!(records.len(), 2, "offset and group tombstones");
    assert!(c.group(G).is_none());
}

#[test]
fn commit_for_unknown_group_with_generation_is_illegal() {
    let mut c = coordinator();
    let commit = CommitRequest {
        group_id: "other".into(),
        generation_id: 3,
        member_id: "m".into(),
        group_instance_id: None,
        retention_time_ms: -1,
        partitions: vec![CommitPartition {
            topic: "t".into(),
            partition: 0,
            offset: 1,
            leader_epoch: -1,
            metadata: None,
        }],
    };
    assert_eq!(commit_now(&mut c, &commit, 0).errors, vec![Some(GroupError::IllegalGeneration)]);
    assert!(c.group("other").is_none());
}

#[test]
fn protocol_vote_prefers_common_first_choice() {
    let mut c = coordinator();
    let (a, _) = join_new(&mut c, 1, 0);
    let mut req = join_req("");
    req.protocols.reverse();
    let e = c.join(2, req.clone(), 100);
    let b = join_reply(&e, 2).member_id;
    let mut known = req;
    known.member_id = b;
    c.join(3, known, 200);
    let mut req3 = join_req("");
    req3.protocols.reverse();
    let e = c.join(4, req3.clone(), 300);
    let id = join_reply(&e, 4).member_id;
    req3.member_id = id;
    c.join(5, req3, 300);
    assert!(c.tick(3_000).replies.is_empty());
    let e = c.tick(6_000);
    let r = join_reply(&e, 1001);
    assert_eq!(r.protocol_name.as_deref(), Some("roundrobin"), "two of three prefer roundrobin");
    assert!(!a.is_empty());
}

#[test]
fn empty_group_without_offsets_is_removed_at_the_next_check() {
    let mut c = coordinator();
    let a = stable_single(&mut c);
    let _ = c.leave(G, &[LeavingMember { member_id: a, group_instance_id: None }], 5_000);
    assert_eq!(c.describe(G).state, GroupState::Empty);
    let records = c.expire(6_000, |_| true);
    assert!(matches!(records.as_slice(), [Record::Group { value: None, .. }]));
    assert_eq!(c.describe(G).state, GroupState::Dead);
    // A group still waiting for a MEMBER_ID_REQUIRED member stays.
    let _ = c.join(9, join_req(""), 7_000);
    assert!(c.expire(7_001, |_| true).is_empty());
    assert!(c.group(G).is_some());
}
