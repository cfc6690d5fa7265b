//! Controller tests over real temp directories: placement, replay after restart (topics,
//! configs, producer-id blocks, torn tails, corruption), error paths, and property tests that
//! replay reproduces the image after any sequence of operations.

use std::path::Path;

use super::log::{MemStore, METADATA_DIR, METADATA_FILE};
use super::*;
use crate::types::{Epoch, ShardId};

fn open(dir: &Path, shards: u32) -> Controller {
    Controller::open(dir, NodeId(1), shards, BrokerDefaults::default()).unwrap()
}

fn topic(name: &str, partitions: i32) -> NewTopic {
    NewTopic {
        name: name.into(),
        num_partitions: partitions,
        replication_factor: 1,
        ..NewTopic::default()
    }
}

fn with_configs(name: &str, configs: &[(&str, &str)]) -> NewTopic {
    NewTopic {
        configs: configs.iter().map(|(k, v)| ((*k).into(), Some((*v).into()))).collect(),
        ..topic(name, 1)
    }
}

#[test]
fn create_topic_builds_the_image() {
    let dir = tempfile::tempdir().unwrap();
    let mut c = open(dir.path(), 2);
    let before = c.image();
    let created = c.create_topics(&[topic("orders", 3)], false);
    let t = created[0].as_ref().unwrap();
    assert_eq!(t.partitions.len(), 3);
    assert!(!t.topic_id.is_nil());
    let img = c.image();
    assert!(img.version > before.version);
    assert_eq!(img.topic_by_id(&t.topic_id).unwrap().name, "orders");
    let p = img.partition("orders", 2).unwrap();
    assert_eq!((p.leader, p.leader_epoch), (NodeId(1), Epoch(0)));
    assert_eq!((p.replicas.clone(), p.isr.clone()), (vec![NodeId(1)], vec![NodeId(1)]));
    assert!(img.partition("orders", 3).is_none());
    assert_eq!(img.cluster_id, c.meta_properties().cluster_id);
    assert_eq!(img.controller_id, NodeId(1));
    // The old image is unchanged: images are immutable snapshots.
    assert!(before.topic("orders").is_none());
}

#[test]
fn placement_balances_across_shards_and_survives_restart() {
    let dir = tempfile::tempdir().unwrap();
    let mut c = open(dir.path(), 3);
    c.create_topics(&[topic("a", 4)], false)[0].as_ref().unwrap();
    c.create_topics(&[topic("b", 2)], false)[0].as_ref().unwrap();
    assert_eq!(c.image().partitions_per_shard(), vec![2, 2, 2]);
    let owners: Vec<_> =
        c.image().topic("a").unwrap().partitions.iter().map(|p| p.owner_shard.0).collect();
    assert_eq!(owners, vec![0, 1, 2, 0]);
    drop(c);
    let c = open(dir.path(), 3);
    let again: Vec<_> =
        c.image().topic("a").unwrap().partitions.iter().map(|p| p.owner_shard.0).collect();
    assert_eq!(again, owners);
    assert_eq!(c.image().partitions_of_shard(ShardId(1)).count(), 2);
}

#[test]
fn fewer_shards_after_restart_re_places_and_records_the_move() {
    let dir = tempfile::tempdir().unwrap();
    let mut c = open(dir.path(), 4);
    c.create_topics(&[topic("a", 8)], false);
    drop(c);
    let c = open(dir.path(), 2);
    assert_eq!(c.image().partitions_per_shard(), vec![4, 4]);
    let owners: Vec<_> =
        c.image().topic("a").unwrap().partitions.iter().map(|p| p.owner_shard).collect();
    drop(c);
    let c = open(dir.path(), 2);
    let again: Vec<_> =
        c.image().topic("a").unwrap().partitions.iter().map(|p| p.owner_shard).collect();
    assert_eq!(owners, again);
}

#[test]
fn replay_restores_topics_configs_deletions_and_partitions() {
    let dir = tempfile::tempdir().unwrap();
    let mut c = open(dir.path(), 2);
    c.create_topics(&[with_configs("kept", &[("retention.ms", "1000")])], false);
    c.create_topics(&[topic("gone", 2)], false);
    c.delete_topic("gone").unwrap();
    c.create_partitions("kept", 3, None, false).unwrap();
    c.alter_topic_configs("kept", &[("cleanup.policy".into(), Some("compact".into()))], false)
        .unwrap();
    let id = c.image().topic("kept").unwrap().topic_id;
    let cluster_id = c.meta_properties().cluster_id.clone();
    drop(c);
    let c = open(dir.path(), 2);
    let img = c.image();
    assert_eq!(img.cluster_id, cluster_id);
    assert!(img.topic("gone").is_none());
    let kept = img.topic("kept").unwrap();
    assert_eq!(kept.topic_id, id);
    assert_eq!(kept.partitions.len(), 3);
    assert_eq!(kept.configs.get("retention.ms").map(String::as_str), Some("1000"));
    assert_eq!(kept.config.retention_ms, 1000);
    assert!(kept.config.cleanup_policy.compact);
}

#[test]
fn producer_ids_are_unique_across_restarts() {
    let dir = tempfile::tempdir().unwrap();
    let mut c = open(dir.path(), 1);
    let first: Vec<i64> = (0..5).map(|_| c.allocate_producer_id().unwrap().0).collect();
    assert_eq!(first, vec![0, 1, 2, 3, 4]);
    drop(c);
    let mut c = open(dir.path(), 1);
    let next = c.allocate_producer_id().unwrap().0;
    assert!(next > 4, "{next}");
    assert_eq!(next, crate::constants::PRODUCER_ID_BLOCK_SIZE);
    // Crossing a block boundary reserves the next block.
    for _ in 0..crate::constants::PRODUCER_ID_BLOCK_SIZE {
        c.allocate_producer_id().unwrap();
    }
    drop(c);
    let mut c = open(dir.path(), 1);
    assert_eq!(c.allocate_producer_id().unwrap().0, 3 * crate::constants::PRODUCER_ID_BLOCK_SIZE);
}

#[test]
fn torn_tail_is_truncated_on_replay() {
    let dir = tempfile::tempdir().unwrap();
    let mut c = open(dir.path(), 1);
    c.create_topics(&[topic("a", 1)], false);
    c.create_topics(&[topic("b", 1)], false);
    drop(c);
    let path = dir.path().join(METADATA_DIR).join(METADATA_FILE);
    let len = std::fs::metadata(&path).unwrap().len();
    let f = std::fs::OpenOptions::new().write(true).open(&path).unwrap();
    f.set_len(len - 3).unwrap();
    let mut c = open(dir.path(), 1);
    assert!(c.image().topic("a").is_some());
    assert!(c.image().topic("b").is_none());
    // The log is usable again after the cut.
    c.create_topics(&[topic("b", 1)], false)[0].as_ref().unwrap();
    drop(c);
    assert!(open(dir.path(), 1).image().topic("b").is_some());
}

#[test]
fn corruption_in_the_middle_is_an_error_naming_file_and_position() {
    let dir = tempfile::tempdir().unwrap();
    let mut c = open(dir.path(), 1);
    c.create_topics(&[topic("a", 1)], false);
    c.create_topics(&[topic("b", 1)], false);
    drop(c);
    let path = dir.path().join(METADATA_DIR).join(METADATA_FILE);
    let mut bytes = std::fs::read(&path).unwrap();
    bytes[12] ^= 0xff;
    std::fs::write(&path, bytes).unwrap();
    let err = Controller::open(dir.path(), NodeId(1), 1, BrokerDefaults::default())
        .err()
        .unwrap()
        .to_string();
    assert!(err.contains(METADATA_FILE) && err.contains("byte 0"), "{err}");
}

#[test]
fn create_errors() {
    let dir = tempfile::tempdir().unwrap();
    let mut c = open(dir.path(), 1);
    c.create_topics(&[topic("a.b", 1)], false);
    let cases = [
        (topic("a.b", 1), "already exists"),
        (topic("a_b", 1), "collides with existing topic: a.b"),
        (topic("bad name", 1), "illegal"),
        (topic("z", 0), "non-positive"),
        (topic("z", crate::constants::TOPIC_PARTITIONS_MAX + 1), "exceeds"),
        (NewTopic { replication_factor: 3, ..topic("z", 1) }, "only 1 broker"),
        (NewTopic { replication_factor: 0, ..topic("z", 1) }, "larger than 0"),
        (with_configs("z", &[("nope", "1")]), "Unknown topic config name: nope"),
        (with_configs("z", &[("retention.ms", "x")]), "Not a number"),
        (NewTopic { configs: vec![("retention.ms".into(), None)], ..topic("z", 1) }, "Null value"),
        (
            NewTopic { assignments: vec![(0, vec![2])], ..NewTopic::with_defaults("z") },
            "only place replicas on broker 1",
        ),
        (
            NewTopic { assignments: vec![(1, vec![1])], ..NewTopic::with_defaults("z") },
            "consecutive",
        ),
        (NewTopic { assignments: vec![(0, vec![1])], ..topic("z", 1) }, "Both"),
    ];
    for (spec, expected) in cases {
        let err = c.create_topics(&[spec], false).remove(0).unwrap_err().to_string();
        assert!(err.contains(expected), "{err} should contain {expected}");
    }
    assert!(c.image().topic("z").is_none());
    let ok =
        NewTopic { assignments: vec![(1, vec![1]), (0, vec![1])], ..NewTopic::with_defaults("z") };
    assert_eq!(c.create_topics(&[ok], false)[0].as_ref().unwrap().partitions.len(), 2);
}

#[test]
fn one_request_batch_checks_names_and_placement_across_its_topics() {
    let dir = tempfile::tempdir().unwrap();
    let mut c = open(dir.path(), 2);
    let r =
        c.create_topics(&[topic("x.y", 1), topic("x_y", 1), topic("z", 1), topic("z", 1)], false);
    assert!(r[0].is_ok() && r[2].is_ok());
    assert!(r[1].as_ref().unwrap_err().to_string().contains("collides"));
    assert!(matches!(r[3], Err(ControllerError::TopicAlreadyExists(_))));
    assert_eq!(c.image().partitions_per_shard(), vec![1, 1]);
    drop(c);
    assert_eq!(open(dir.path(), 2).image().topics.len(), 2);
}

#[test]
fn validate_only_changes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let mut c = open(dir.path(), 1);
    let version = c.image().version;
    let r = c.create_topics(&[topic("v", 2)], true).remove(0).unwrap();
    assert!(r.topic_id.is_nil());
    assert_eq!(r.partitions.len(), 2);
    assert!(c.image().topic("v").is_none());
    assert_eq!(c.image().version, version);
}

#[test]
fn defaults_apply_to_minus_one_and_auto_create() {
    let dir = tempfile::tempdir().unwrap();
    let defaults = BrokerDefaults::from_settings([("num.partitions", "3")]).unwrap();
    let mut c = Controller::open(dir.path(), NodeId(1), 2, defaults).unwrap();
    let r = c.create_topics(&[NewTopic::with_defaults("d")], false).remove(0).unwrap();
    assert_eq!(r.partitions.len(), 3);
    let out = c.create_topics_with_defaults(&["d".into(), "e".into(), "bad/name".into()]);
    assert_eq!(out.len(), 3);
    assert!(out.iter().find(|(n, _)| n == "d").unwrap().1.is_ok());
    assert_eq!(out.iter().find(|(n, _)| n == "e").unwrap().1.as_ref().unwrap().partitions.len(), 3);
    assert!(out.iter().find(|(n, _)| n == "bad/name").unwrap().1.is_err());
}

#[test]
fn create_partitions_rules() {
    let dir = tempfile::tempdir().unwrap();
    let mut c = open(dir.path(), 2);
    c.create_topics(&[topic("p", 2)], false);
    assert!(c.create_partitions("p", 1, None, false).unwrap_err().to_string().contains("higher"));
    assert!(c.create_partitions("p", 2, None, false).unwrap_err().to_string().contains("already"));
    assert!(matches!(
        c.create_partitions("nope", 3, None, false),
        Err(ControllerError::UnknownTopic(_))
    ));
    assert!(c.create_partitions("p", 4, Some(&[vec![1]]), false).is_err());
    assert!(c.create_partitions("p", 3, Some(&[vec![2]]), false).is_err());
    let preview = c.create_partitions("p", 5, None, true).unwrap();
    assert_eq!(preview.partitions.len(), 5);
    assert_eq!(c.image().topic("p").unwrap().partitions.len(), 2);
    let t = c.create_partitions("p", 4, Some(&[vec![1], vec![1]]), false).unwrap();
    assert_eq!(t.partitions.len(), 4);
    assert_eq!(c.image().partitions_per_shard(), vec![2, 2]);
}

#[test]
fn delete_by_name_and_id_then_recreate_gets_a_new_id() {
    let dir = tempfile::tempdir().unwrap();
    let mut c = open(dir.path(), 1);
    let first = c.create_topics(&[topic("t", 1)], false).remove(0).unwrap();
    c.delete_topic_by_id(&first.topic_id).unwrap();
    assert!(matches!(
        c.delete_topic_by_id(&first.topic_id),
        Err(ControllerError::UnknownTopicId(_))
    ));
    assert!(matches!(c.delete_topic("t"), Err(ControllerError::UnknownTopic(_))));
    let second = c.create_topics(&[topic("t", 1)], false).remove(0).unwrap();
    assert_ne!(first.topic_id, second.topic_id);
    c.delete_topic("t").unwrap();
    assert!(c.image().topic("t").is_none());
}

#[test]
fn a_failed_write_makes_the_controller_refuse_changes() {
    let meta =
        MetaProperties { cluster_id: "c".into(), node_id: NodeId(1), directory_id: "d".into() };
    let store = MemStore { fail_appends: true, ..MemStore::default() };
    let mut c =
        Controller::open_with_store(Box::new(store), meta, 1, BrokerDefaults::default()).unwrap();
    let err = c.create_topics(&[topic("t", 1)], false).remove(0).unwrap_err();
    assert!(err.is_storage());
    let err = c.allocate_producer_id().unwrap_err();
    assert!(matches!(err, ControllerError::ReadOnly(_)), "{err}");
    assert!(c.image().topic("t").is_none());
}

#[test]
fn alter_configs_sets_and_deletes() {
    let dir = tempfile::tempdir().unwrap();
    let mut c = open(dir.path(), 1);
    c.create_topics(&[with_configs("t", &[("retention.ms", "5")])], false);
    let t = c
        .alter_topic_configs(
            "t",
            &[("retention.ms".into(), None), ("segment.ms".into(), Some("100".into()))],
            false,
        )
        .unwrap();
    assert_eq!(t.configs.len(), 1);
    assert_eq!(t.config.retention_ms, 604_800_000);
    assert_eq!(t.config.segment_ms, 100);
    assert!(c.alter_topic_configs("t", &[("segment.ms".into(), Some("0".into()))], false).is_err());
}

mod replay_model {
    use proptest::prelude::*;

    use super::*;

    #[derive(Clone, Debug)]
    enum Op {
        Create(u8, i32),
        Delete(u8),
        Grow(u8, i32),
        Config(u8, Option<i64>),
        ProducerId,
    }

    fn op() -> impl Strategy<Value = Op> {
        prop_oneof![
            (0u8..4, 1i32..4).prop_map(|(t, n)| Op::Create(t, n)),
            (0u8..4).prop_map(Op::Delete),
            (0u8..4, 1i32..3).prop_map(|(t, n)| Op::Grow(t, n)),
            (0u8..4, proptest::option::of(0i64..1_000_000)).prop_map(|(t, v)| Op::Config(t, v)),
            Just(Op::ProducerId),
        ]
    }

    type TopicSummary = (String, Uuid, Vec<PartitionImage>, Vec<(String, String)>);

    fn summary(img: &MetadataImage) -> Vec<TopicSummary> {
        img.topics
            .values()
            .map(|t| {
                let configs = t.configs.iter().map(|(k, v)| (k.clone(), v.clone())).collect();
                (t.name.clone(), t.topic_id, t.partitions.clone(), configs)
            })
            .collect()
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(48))]

        /// Any sequence of operations replays to exactly the image clients last saw, and no
        /// producer id is handed out twice across the restart.
        #[test]
        fn restart_reproduces_the_image(ops in proptest::collection::vec(op(), 1..25)) {
            let dir = tempfile::tempdir().unwrap();
            let mut c = open(dir.path(), 3);
            let mut max_pid = -1;
            for op in ops {
                let name = |t: u8| format!("t{t}");
                match op {
                    Op::Create(t, n) => { let _ = c.create_topics(&[topic(&name(t), n)], false); }
                    Op::Delete(t) => { let _ = c.delete_topic(&name(t)); }
                    Op::Grow(t, n) => {
                        let current = c.image().topic(&name(t)).map_or(0, |x| x.partitions.len());
                        let count = i32::try_from(current).unwrap() + n;
                        let _ = c.create_partitions(&name(t), count, None, false);
                    }
                    Op::Config(t, v) => {
                        let change = ("retention.ms".to_string(), v.map(|v| v.to_string()));
                        let _ = c.alter_topic_configs(&name(t), &[change], false);
                    }
                    Op::ProducerId => max_pid = c.allocate_producer_id().unwrap().0,
                }
            }
            let before = summary(&c.image());
            for t in c.image().topics.values() {
                let expected = TopicConfig::resolve(&t.configs, &BrokerDefaults::default());
                prop_assert_eq!(&t.config, &expected);
            }
            drop(c);
            let mut c = open(dir.path(), 3);
            prop_assert_eq!(summary(&c.image()), before);
            prop_assert!(c.allocate_producer_id().unwrap().0 > max_pid);
        }

        /// A valid log with one byte changed opens cleanly, truncates, or reports corruption;
        /// it never panics (the CRC catches the change or replay rejects the record).
        #[test]
        fn mutated_log_never_panics(pos in 0usize..10_000, xor in 1u8..=255) {
            let dir = tempfile::tempdir().unwrap();
            let mut c = open(dir.path(), 2);
            let _ = c.create_topics(&[with_configs("a", &[("retention.ms", "5")]), topic("b", 3)], false);
            let _ = c.allocate_producer_id();
            drop(c);
            let path = dir.path().join(METADATA_DIR).join(METADATA_FILE);
            let mut bytes = std::fs::read(path).unwrap();
            let at = pos % bytes.len();
            bytes[at] ^= xor;
            let meta = MetaProperties { cluster_id: "c".into(), node_id: NodeId(1), directory_id: "d".into() };
            let store = MemStore { bytes, ..MemStore::default() };
            let _ = Controller::open_with_store(Box::new(store), meta, 2, BrokerDefaults::default());
        }

        /// Replay of arbitrary bytes never panics: it parses, truncates or reports corruption.
        #[test]
        fn replay_of_garbage_never_panics(bytes in proptest::collection::vec(any::<u8>(), 0..300)) {
            let _ = super::super::log::parse_log(&bytes, Path::new("fuzz"));
        }
    }
}

/// Prints figures (not asserted): cost of a durable metadata change, of replay, and of
/// building an image. Run with
/// `cargo test --lib controller::tests::print_controller_figures -- --ignored --nocapture`.
#[test]
#[ignore = "prints measurements"]
fn print_controller_figures() {
    use std::time::Instant;
    let dir =
        tempfile::tempdir_in(std::env::var("FIGURES_DIR").unwrap_or_else(|_| ".".into())).unwrap();
    let mut c = open(dir.path(), 2);
    let topics = 1000;
    let mut create_us = Vec::new();
    for i in 0..topics {
        let t = Instant::now();
        c.create_topics(&[topic(&format!("t{i}"), 10)], false).remove(0).unwrap();
        create_us.push(t.elapsed().as_micros());
    }
    create_us.sort_unstable();
    let pid = Instant::now();
    for _ in 0..10_000 {
        c.allocate_producer_id().unwrap();
    }
    let pid_ns = pid.elapsed().as_nanos() / 10_000;
    let image = Instant::now();
    let mut state = c.state().clone();
    for _ in 0..100 {
        state.rebuild_image();
    }
    let image_us = image.elapsed().as_micros() / 100;
    let snap = Instant::now();
    let bytes = state.snapshot();
    let snapshot_us = snap.elapsed().as_micros();
    let restore = Instant::now();
    state.restore_snapshot(1, &bytes).unwrap();
    let restore_ms = restore.elapsed().as_millis();
    println!(
        "snapshot of {topics} topics: {} bytes, written in {snapshot_us} us, restored in \
         {restore_ms} ms",
        bytes.len()
    );
    drop(c);
    let replay = Instant::now();
    let c = open(dir.path(), 2);
    let replay_ms = replay.elapsed().as_millis();
    assert_eq!(c.image().topics.len(), topics);
    println!(
        "create topic (10 partitions, one fsync): p50 {} us, p99 {} us; producer id: {} ns \
         amortized (block of {}); image rebuild with {topics} topics / {} partitions: {} us; \
         replay of {topics} topics: {} ms",
        create_us[create_us.len() / 2],
        create_us[create_us.len() * 99 / 100],
        pid_ns,
        crate::constants::PRODUCER_ID_BLOCK_SIZE,
        topics * 10,
        image_us,
        replay_ms
    );
}
