//! Tests of [`ControllerState`] as a state machine: proposal equivalence (an operation on a
//! working copy equals applying its frames to a clone of the state before it), snapshot round
//! trips with deterministic bytes, legacy-log import, the broker lifecycle with its leader
//! moves, and placement over registered brokers.

use proptest::prelude::*;
use uuid::Uuid;

use super::records::BrokerEndpoint;
use super::*;
use crate::types::{Epoch, NodeId};

fn state() -> ControllerState {
    ControllerState::new("cluster".into(), NodeId(1), 2, BrokerDefaults::default()).unwrap()
}

fn reg(node: i32, incarnation: u128) -> BrokerRegistration {
    BrokerRegistration {
        node: NodeId(node),
        incarnation_id: Uuid::from_u128(incarnation),
        endpoints: vec![BrokerEndpoint {
            listener: "PLAINTEXT".into(),
            host: "127.0.0.1".into(),
            port: u16::try_from(9000 + node).unwrap(),
            security_protocol: 0,
        }],
        rack: None,
    }
}

fn topic(name: &str, partitions: i32, rf: i16) -> NewTopic {
    NewTopic { num_partitions: partitions, replication_factor: rf, ..NewTopic::with_defaults(name) }
}

/// The replicated part of a snapshot (the last-applied index left out).
fn replicated(s: &ControllerState) -> Vec<u8> {
    let mut b = s.snapshot();
    b.drain(1..9);
    b
}

/// Applies frames to `s` from index `next`, as the committed copy would.
fn apply_all(s: &mut ControllerState, frames: &[Vec<u8>], next: &mut u64) {
    for f in frames {
        *next += 1;
        s.apply_entry(*next, f).unwrap();
    }
}

/// Registers and unfences `n` brokers 1..=n on `s` (frames stay queued).
fn with_brokers(s: &mut ControllerState, n: i32) {
    let mut hb = BrokerHeartbeats::new(9000);
    for node in 1..=n {
        let epoch = hb.register(s, &reg(node, node as u128), 0, 0).unwrap();
        let out = hb
            .heartbeat(
                s,
                BrokerHeartbeat {
                    node: NodeId(node),
                    epoch,
                    metadata_offset: u64::MAX >> 1,
                    want_fence: false,
                    want_shutdown: false,
                },
                0,
            )
            .unwrap();
        assert!(!out.is_fenced && out.is_caught_up);
    }
}

#[derive(Clone, Debug)]
enum Op {
    Create(u8, i32, i16),
    Delete(u8),
    Grow(u8),
    TopicConfig(u8, u32),
    BrokerConfig(u32),
    Quota(u32),
    ProducerIds(u16),
    Register(u8, u8),
    Fence(u8),
    Unfence(u8),
    Unregister(u8),
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        (0u8..6, 1i32..5, 1i16..4).prop_map(|(t, p, rf)| Op::Create(t, p, rf)),
        (0u8..6).prop_map(Op::Delete),
        (0u8..6).prop_map(Op::Grow),
        (0u8..6, 1u32..1000).prop_map(|(t, v)| Op::TopicConfig(t, v)),
        (1u32..1000).prop_map(Op::BrokerConfig),
        (1u32..1000).prop_map(Op::Quota),
        (1u16..2500).prop_map(Op::ProducerIds),
        (1u8..5, 0u8..3).prop_map(|(n, i)| Op::Register(n, i)),
        (1u8..5).prop_map(Op::Fence),
        (1u8..5).prop_map(Op::Unfence),
        (1u8..5).prop_map(Op::Unregister),
    ]
}

fn run(s: &mut ControllerState, op: &Op) {
    let name = |t: &u8| format!("t{t}");
    let epoch = |s: &ControllerState, n: &u8| {
        s.brokers().get(&NodeId(i32::from(*n))).map_or(BrokerEpoch(0), |b| BrokerEpoch(b.epoch))
    };
    // Refusals are part of the property: they must propose nothing.
    let _ = match op {
        Op::Create(t, p, rf) => {
            s.create_topics(&[topic(&name(t), *p, *rf)], false);
            Ok(())
        }
        Op::Delete(t) => s.delete_topic(&name(t)).map(drop),
        Op::Grow(t) => {
            let n = s.image().topic(&name(t)).map_or(1, |t| t.partitions.len() as i32 + 1);
            s.create_partitions(&name(t), n, None, false).map(drop)
        }
        Op::TopicConfig(t, v) => s
            .alter_topic_configs(&name(t), &[("retention.ms".into(), Some(v.to_string()))], false)
            .map(drop),
        Op::BrokerConfig(v) => s
            .alter_broker_configs(None, &[("log.retention.ms".into(), Some(v.to_string()))], false)
            .map(drop),
        Op::Quota(v) => s
            .alter_client_quotas(
                &crate::quota::QuotaEntity::client(Some("app".into())),
                &[(crate::quota::PRODUCER_BYTE_RATE.into(), Some(f64::from(*v)))],
                false,
            )
            .map(drop),
        Op::ProducerIds(n) => (0..*n).try_for_each(|_| s.allocate_producer_id().map(drop)),
        Op::Register(n, i) => {
            s.register_broker(&reg(i32::from(*n), u128::from(*i) + 1), 0).map(drop)
        }
        Op::Fence(n) => s.fence_broker(NodeId(i32::from(*n)), epoch(s, n)),
        Op::Unfence(n) => s.unfence_broker(NodeId(i32::from(*n)), epoch(s, n)),
        Op::Unregister(n) => s.unregister_broker(NodeId(i32::from(*n)), epoch(s, n)),
    };
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]

    /// Every operation type: running it on the working copy gives the same replicated state
    /// (and topics) as applying its frames to a clone of the state before it; and a snapshot
    /// restores the same state.
    #[test]
    fn proposals_reproduce_the_operation(ops in proptest::collection::vec(op(), 1..30)) {
        let mut working = state();
        let mut committed = working.clone();
        let mut index = 0u64;
        for op in &ops {
            run(&mut working, op);
            let frames = working.take_proposals();
            apply_all(&mut committed, &frames, &mut index);
            prop_assert_eq!(replicated(&working), replicated(&committed), "after {:?}", op);
            prop_assert_eq!(&working.image().topics, &committed.image().topics);
            prop_assert_eq!(&working.image().brokers, &committed.image().brokers);
        }
        let mut restored = state();
        restored.restore_snapshot(index, &committed.snapshot()).unwrap();
        prop_assert_eq!(restored.snapshot(), committed.snapshot());
        prop_assert_eq!(&restored.image().topics, &committed.image().topics);
        prop_assert_eq!(restored.last_applied(), index);
    }
}

#[test]
fn snapshot_round_trip_is_deterministic_and_keeps_everything() {
    let mut s = state();
    with_brokers(&mut s, 3);
    s.create_topics(&[topic("a", 3, 3), topic("b", 2, 1)], false);
    s.alter_topic_configs("a", &[("retention.ms".into(), Some("5".into()))], false).unwrap();
    s.alter_broker_configs(None, &[("log.retention.ms".into(), Some("7".into()))], false).unwrap();
    s.alter_client_quotas(
        &crate::quota::QuotaEntity::client(None),
        &[(crate::quota::CONSUMER_BYTE_RATE.into(), Some(9.0))],
        false,
    )
    .unwrap();
    s.allocate_producer_id().unwrap();
    s.fence_broker(NodeId(2), BrokerEpoch(s.brokers()[&NodeId(2)].epoch)).unwrap();
    let mut committed = state();
    let mut index = 0;
    apply_all(&mut committed, &s.take_proposals(), &mut index);
    let bytes = committed.snapshot();
    assert_eq!(bytes, committed.clone().snapshot(), "same state, same bytes");
    let mut r = state();
    r.restore_snapshot(index, &bytes).unwrap();
    assert_eq!(r.snapshot(), bytes);
    assert_eq!(r.image().topics, committed.image().topics);
    assert_eq!(r.image().brokers, committed.image().brokers);
    assert_eq!(r.dynamic_broker_configs(None), committed.dynamic_broker_configs(None));
    assert_eq!(r.client_quotas(), committed.client_quotas());
    assert_eq!(r.image().topic("a").unwrap().config.retention_ms, 5);
    // Producer ids skip the restored block; broker epochs never repeat.
    assert_eq!(r.allocate_producer_id().unwrap().0, crate::constants::PRODUCER_ID_BLOCK_SIZE);
    let e = r.register_broker(&reg(9, 99), 0).unwrap();
    assert!(r.brokers().values().all(|b| b.epoch < e.0 || b.incarnation_id == Uuid::from_u128(99)));
    // Damaged snapshots are errors, not panics.
    for cut in [0, 5, 17, 21, bytes.len() - 1] {
        assert!(state().restore_snapshot(1, &bytes[..cut]).is_err(), "cut {cut}");
    }
    let mut bad = bytes.clone();
    bad[0] = 7;
    assert!(state().restore_snapshot(1, &bad).is_err());
}

#[test]
fn apply_entry_refuses_damaged_frames_and_skips_replays() {
    let mut s = state();
    s.create_topics(&[topic("a", 1, 1)], false);
    let frames = s.take_proposals();
    let mut c = state();
    let mut bad = frames[0].clone();
    let last = bad.len() - 1;
    bad[last] ^= 1;
    assert!(matches!(c.apply_entry(1, &bad), Err(ControllerError::BadEntry { index: 1, .. })));
    assert!(c.apply_entry(1, &frames[0][..10]).is_err());
    c.apply_entry(1, &frames[0]).unwrap();
    // The same index again (a replay after restart) is skipped, not a duplicate topic.
    c.apply_entry(1, &frames[0]).unwrap();
    assert_eq!(c.image().topics.len(), 1);
    assert!(matches!(c.apply_entry(2, &frames[0]), Err(ControllerError::BadEntry { .. })));
}

/// A frame as the code before issue 13 wrote it: PartitionRecords at version 0, with the
/// owner shard `shard_of(partition)` after the partition index.
fn legacy_frame(records: &[records::MetadataRecord], shard_of: impl Fn(i32) -> u32) -> Vec<u8> {
    let mut body = vec![0u8];
    body.extend_from_slice(&u32::try_from(records.len()).unwrap().to_be_bytes());
    for r in records {
        let mut b = Vec::new();
        r.encode(&mut b);
        if let records::MetadataRecord::Partition(p) = r {
            b[1] = 0;
            let len = u32::from_be_bytes([b[2], b[3], b[4], b[5]]) + 4;
            b[2..6].copy_from_slice(&len.to_be_bytes());
            let at = 6 + 16 + 4;
            b.splice(at..at, shard_of(p.partition).to_be_bytes());
        }
        body.extend_from_slice(&b);
    }
    let mut frame = u32::try_from(body.len()).unwrap().to_be_bytes().to_vec();
    frame.extend_from_slice(&crc32fast::hash(&body).to_be_bytes());
    frame.extend_from_slice(&body);
    frame
}

#[test]
fn legacy_log_imports_into_a_snapshot_once() {
    let dir = tempfile::tempdir().unwrap();
    assert!(import_legacy_log(dir.path()).unwrap().is_none());
    {
        let mut c = Controller::open(dir.path(), NodeId(1), 2, BrokerDefaults::default()).unwrap();
        c.create_topics(&[topic("orders", 3, 1), topic("gone", 1, 1)], false);
        c.delete_topic("gone").unwrap();
        c.alter_topic_configs("orders", &[("retention.ms".into(), Some("60000".into()))], false)
            .unwrap();
        c.alter_broker_configs(None, &[("log.retention.ms".into(), Some("7".into()))], false)
            .unwrap();
        c.alter_client_quotas(
            &crate::quota::QuotaEntity::client(Some("app".into())),
            &[(crate::quota::PRODUCER_BYTE_RATE.into(), Some(1024.0))],
            false,
        )
        .unwrap();
        c.allocate_producer_id().unwrap();
    }
    // Rewrite it as the released format wrote it (partitions at version 0 with their shard;
    // no shard-assignment file), plus a torn tail the import must ignore.
    let log = dir.path().join(log::METADATA_DIR).join(log::METADATA_FILE);
    let ops = log::parse_log(&std::fs::read(&log).unwrap(), &log).unwrap().operations;
    let shard_of = |p: i32| u32::try_from((p + 1) % 2).unwrap();
    let mut bytes: Vec<u8> = ops.iter().flat_map(|(_, r)| legacy_frame(r, shard_of)).collect();
    bytes.extend_from_slice(&[0, 0, 0, 40, 1, 2]);
    std::fs::write(&log, &bytes).unwrap();
    std::fs::remove_file(dir.path().join(SHARD_ASSIGNMENT_FILE)).unwrap();
    // The single-node path reads it with the recorded shards (on a copy of the directory).
    let copy = tempfile::tempdir().unwrap();
    std::fs::create_dir(copy.path().join(log::METADATA_DIR)).unwrap();
    std::fs::copy(&log, copy.path().join(log::METADATA_DIR).join(log::METADATA_FILE)).unwrap();
    std::fs::copy(dir.path().join("meta.properties"), copy.path().join("meta.properties")).unwrap();
    let expected =
        Controller::open(copy.path(), NodeId(1), 2, BrokerDefaults::default()).unwrap().image();
    let owners: Vec<u32> =
        expected.topic("orders").unwrap().partitions.iter().map(|p| p.owner_shard.0).collect();
    assert_eq!(owners, vec![1, 0, 1]);

    let snap = import_legacy_log(dir.path()).unwrap().unwrap();
    let mut s = state();
    s.restore_snapshot(1, &snap).unwrap();
    assert_eq!(s.image().topic_ids, expected.topic_ids);
    assert_eq!(s.client_quotas(), &expected.client_quotas);
    assert_eq!(s.dynamic_broker_configs(None).len(), 1);
    assert_eq!(s.allocate_producer_id().unwrap().0, crate::constants::PRODUCER_ID_BLOCK_SIZE);
    // The old records' owner shards are kept in this node's shard assignment.
    let mut a = ShardAssignment::load_from(dir.path(), 2).unwrap();
    let before = a.clone();
    assert!(
        !a.reconcile(&s.image(), NodeId(1)),
        "the legacy shards are all in place: {before:?} -> {a:?}"
    );
    let mine = node_image(&s.image(), NodeId(1), NodeId(1), &a);
    assert_eq!(mine.topics, expected.topics);
    mark_legacy_log_imported(dir.path()).unwrap();
    assert!(!log.exists());
    let renamed = log.with_file_name(format!("{}{LEGACY_IMPORTED_SUFFIX}", log::METADATA_FILE));
    assert!(renamed.exists());
    assert!(import_legacy_log(dir.path()).unwrap().is_none(), "imported once");
}

#[test]
fn registration_starts_fenced_and_heartbeats_unfence_once_caught_up() {
    let mut s = state();
    let mut hb = BrokerHeartbeats::new(s.broker_session_timeout_ms());
    assert_eq!(s.broker_session_timeout_ms(), crate::constants::BROKER_SESSION_TIMEOUT_MS_DEFAULT);
    assert_eq!(
        s.broker_heartbeat_interval_ms(),
        crate::constants::BROKER_HEARTBEAT_INTERVAL_MS_DEFAULT
    );
    let e = hb.register(&mut s, &reg(2, 1), 10, 0).unwrap();
    assert_eq!(e, BrokerEpoch(10), "epoch = the registration entry's index hint");
    assert!(s.brokers()[&NodeId(2)].fenced);
    // Same incarnation again: same epoch, nothing proposed.
    s.take_proposals();
    assert_eq!(hb.register(&mut s, &reg(2, 1), 50, 100).unwrap(), e);
    assert!(s.take_proposals().is_empty());
    let beat = |offset: u64| BrokerHeartbeat {
        node: NodeId(2),
        epoch: e,
        metadata_offset: offset,
        want_fence: false,
        want_shutdown: false,
    };
    let out = hb.heartbeat(&mut s, beat(9), 1000).unwrap();
    assert!(!out.is_caught_up && out.is_fenced && out.records.is_empty());
    let out = hb.heartbeat(&mut s, beat(10), 2000).unwrap();
    assert!(out.is_caught_up && !out.is_fenced);
    assert_eq!(out.records.len(), 1);
    assert!(!s.brokers()[&NodeId(2)].fenced);
    // A stale epoch and an unknown broker are refused with the typed error.
    let stale = BrokerHeartbeat { epoch: BrokerEpoch(3), ..beat(10) };
    assert!(matches!(
        hb.heartbeat(&mut s, stale, 2000),
        Err(ControllerError::StaleBrokerEpoch { .. })
    ));
    let unknown = BrokerHeartbeat { node: NodeId(7), ..beat(10) };
    assert!(hb.heartbeat(&mut s, unknown, 2000).is_err());
    // Another incarnation while the session lives: duplicate; after it expired: accepted.
    assert!(matches!(
        hb.register(&mut s, &reg(2, 2), 0, 3000),
        Err(ControllerError::DuplicateBrokerRegistration(NodeId(2)))
    ));
    assert!(hb.expire(&mut s, 2000 + 8000).is_empty(), "session still live");
    let fences = hb.expire(&mut s, 2000 + 9000);
    assert_eq!(fences.len(), 1);
    assert!(s.brokers()[&NodeId(2)].fenced);
    assert!(hb.expire(&mut s, 30_000).is_empty(), "already fenced");
    let e2 = hb.register(&mut s, &reg(2, 2), 0, 30_000).unwrap();
    assert!(e2 > e);
    // Shutdown: fenced and told to go.
    let out = hb
        .heartbeat(
            &mut s,
            BrokerHeartbeat { epoch: e2, want_shutdown: true, ..beat(u64::MAX) },
            31_000,
        )
        .unwrap();
    assert!(out.should_shutdown && out.is_fenced);
    s.unregister_broker(NodeId(2), e2).unwrap();
    assert!(s.brokers().is_empty());
}

#[test]
fn fencing_elects_from_the_isr_and_unfencing_restores_leaderless_partitions() {
    let mut s = state();
    with_brokers(&mut s, 3);
    s.create_topics(&[topic("t", 3, 3)], false)[0].as_ref().unwrap();
    let part = |s: &ControllerState, i: i32| s.image().partition("t", i).unwrap().clone();
    let before: Vec<PartitionImage> = (0..3).map(|i| part(&s, i)).collect();
    let leaders: Vec<NodeId> = before.iter().map(|p| p.leader).collect();
    assert_eq!(leaders.iter().collect::<std::collections::BTreeSet<_>>().len(), 3);
    let victim = before[0].leader;
    let epoch = |s: &ControllerState, n: NodeId| BrokerEpoch(s.brokers()[&n].epoch);
    s.fence_broker(victim, epoch(&s, victim)).unwrap();
    for (i, b) in before.iter().enumerate() {
        let p = part(&s, i as i32);
        assert!(!p.isr.contains(&victim));
        assert_ne!(p.leader, victim);
        if b.leader == victim {
            let first_live = *b.replicas.iter().find(|r| **r != victim).unwrap();
            assert_eq!((p.leader, p.leader_epoch), (first_live, Epoch(b.leader_epoch.0 + 1)));
        } else {
            assert_eq!((p.leader, p.leader_epoch), (b.leader, b.leader_epoch));
        }
    }
    // Every broker fenced: no leader at all; each last ISR member moves to the ELR (KIP-966;
    // no unclean election, so the partition waits for it).
    let mut last = Vec::new();
    for n in [1, 2, 3].map(NodeId) {
        if n != victim {
            s.fence_broker(n, epoch(&s, n)).unwrap();
        }
    }
    for i in 0..3 {
        let p = part(&s, i);
        assert_eq!((p.leader, p.isr.len(), p.elr.len()), (NO_LEADER, 0, 1));
        assert_ne!(p.elr[0], victim);
        last.push(p.elr[0]);
    }
    assert!(s.create_topics(&[topic("x", 1, 1)], false)[0].is_err(), "no live broker");
    // The victim left every ISR: unfenced, it leads nothing and rejoins no ISR.
    s.unfence_broker(victim, epoch(&s, victim)).unwrap();
    assert!((0..3).all(|i| part(&s, i).leader == NO_LEADER));
    // The last ISR members come back and lead again.
    for n in [1, 2, 3].map(NodeId) {
        if n != victim {
            s.unfence_broker(n, epoch(&s, n)).unwrap();
        }
    }
    for (i, last) in last.iter().enumerate() {
        let p = part(&s, i as i32);
        assert_eq!((p.leader, p.isr.clone()), (*last, vec![*last]));
    }
}

#[test]
fn placement_uses_unfenced_brokers_and_refuses_too_high_a_factor() {
    let mut s = state();
    with_brokers(&mut s, 3);
    let t = s.create_topics(&[topic("t", 6, 2)], false).remove(0).unwrap();
    let mut leaders = std::collections::BTreeMap::new();
    for p in &t.partitions {
        assert_eq!(p.replicas.len(), 2);
        assert_eq!(p.isr, p.replicas);
        assert_eq!(p.leader, p.replicas[0]);
        *leaders.entry(p.leader).or_insert(0) += 1;
    }
    assert_eq!(leaders.values().copied().collect::<Vec<_>>(), vec![2, 2, 2]);
    let err = s.create_topics(&[topic("big", 1, 4)], false).remove(0).unwrap_err();
    assert!(matches!(err, ControllerError::InvalidReplicationFactor(_)), "{err}");
    assert!(err.to_string().contains("only 3 broker(s)"), "{err}");
    // Fenced brokers do not count; default.replication.factor applies to -1.
    s.fence_broker(NodeId(3), BrokerEpoch(s.brokers()[&NodeId(3)].epoch)).unwrap();
    assert!(s.create_topics(&[topic("three", 1, 3)], false)[0].is_err());
    let t = s.create_topics(&[topic("dflt", 4, -1)], false).remove(0).unwrap();
    assert!(t.partitions.iter().all(|p| p.replicas.len() == 1 && p.replicas[0] != NodeId(3)));
    // Growing a topic keeps its replication factor.
    let t = s.create_partitions("t", 8, None, false).unwrap();
    assert!(t.partitions.iter().all(|p| p.replicas.len() == 2));
    // Manual assignments: registered brokers only (fenced allowed), no repeats.
    let manual =
        |a: Vec<i32>| NewTopic { assignments: vec![(0, a)], ..NewTopic::with_defaults("m") };
    for (bad, why) in [(vec![9], "no such broker"), (vec![1, 1], "duplicate"), (vec![], "empty")] {
        let err = s.create_topics(&[manual(bad)], false).remove(0).unwrap_err().to_string();
        assert!(err.contains(why), "{err}");
    }
    let t = s.create_topics(&[manual(vec![3, 1])], false).remove(0).unwrap();
    let p = &t.partitions[0];
    assert_eq!((p.leader, p.isr.clone()), (NodeId(1), vec![NodeId(1)]), "fenced 3 cannot lead");
}

#[test]
fn a_new_active_controller_gives_every_broker_a_full_session() {
    let mut s = state();
    with_brokers(&mut s, 2);
    // The old leader's sessions are gone; the new one starts counting at its activation.
    let mut hb = BrokerHeartbeats::new(9000);
    hb.activate(&s, 100_000);
    // The expiry loop checks every 500 ms.
    for now in (100_500..109_000).step_by(500) {
        assert!(hb.expire(&mut s, now).is_empty());
    }
    assert!(hb.expire(&mut s, 108_999).is_empty());
    let fences = hb.expire(&mut s, 109_000);
    assert_eq!(fences.len(), 2, "one fence operation per silent broker");
    assert!(s.brokers().values().all(|b| b.fenced));
    assert!(s.live_brokers().is_empty());
}

#[test]
fn a_stalled_controller_extends_sessions_by_the_stall() {
    let mut s = state();
    with_brokers(&mut s, 2);
    let mut hb = BrokerHeartbeats::new(9000);
    hb.activate(&s, 0);
    assert!(hb.expire(&mut s, 500).is_empty());
    // The controller's shard did not run for 20 s: heartbeats sent meanwhile were not
    // processed either, so nobody is fenced for it...
    assert!(hb.expire(&mut s, 20_500).is_empty(), "a stall is not the brokers' silence");
    // ...and each session keeps what was left of it before the stall (8.5 s).
    assert!(hb.expire(&mut s, 25_000).is_empty());
    assert!(hb.expire(&mut s, 28_999).is_empty());
    assert_eq!(hb.expire(&mut s, 29_000).len(), 2, "silent after the stall: fenced");
}
