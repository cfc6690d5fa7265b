//! Unit tests of the move's checks on a node image (the steps run on real brokers in
//! `tests/processes/shard_move.rs`).

use std::sync::Arc;

use super::*;
use crate::controller::{node_image, BrokerDefaults, ControllerState, NewTopic, ShardAssignment};
use crate::types::NodeId;

fn image(shards: u32) -> MetadataImage {
    let mut s = ControllerState::new("c".into(), NodeId(1), 2, BrokerDefaults::default()).unwrap();
    let specs = [
        NewTopic { num_partitions: 2, ..NewTopic::with_defaults("a") },
        NewTopic { num_partitions: 1, ..NewTopic::with_defaults("__consumer_offsets") },
    ];
    for r in s.create_topics(&specs, false) {
        r.unwrap();
    }
    let committed = s.image();
    let mut assignment = ShardAssignment::new(shards);
    assignment.reconcile(&committed, NodeId(1));
    node_image(&committed, NodeId(1), NodeId(1), &assignment)
}

#[test]
fn a_move_names_its_source_or_why_it_cannot_happen() {
    let img = image(2);
    let tp = TopicPartition::new("a", 1);
    let from = check_move(&img, &tp, ShardId(0)).unwrap();
    assert_eq!(Some(from), img.owner_shard("a", 1));
    assert_eq!(
        check_move(&img, &tp, ShardId(2)),
        Err(MoveError::NoSuchShard { to: ShardId(2), count: 2 })
    );
    let unknown = TopicPartition::new("a", 7);
    assert_eq!(check_move(&img, &unknown, ShardId(0)), Err(MoveError::Unknown(unknown)));
    let coord = TopicPartition::new("__consumer_offsets", 0);
    assert_eq!(check_move(&img, &coord, ShardId(1)), Err(MoveError::Coordinator(coord)));
    // Another node's view: it hosts nothing.
    let theirs = {
        let mut i = img.clone();
        for t in i.topics.values_mut() {
            for p in &mut Arc::make_mut(t).partitions {
                p.hosted = false;
            }
        }
        i
    };
    assert_eq!(check_move(&theirs, &tp, ShardId(0)), Err(MoveError::NotHosted(tp)));
}

#[test]
fn the_assignment_records_a_move_and_refuses_bad_ones() {
    let img = image(2);
    let id = img.topic("a").unwrap().topic_id;
    let mut a = ShardAssignment::new(2);
    a.reconcile(&img, NodeId(1));
    let before = a.shard_of(&id, 0).unwrap();
    let to = ShardId(1 - before.0);
    assert_eq!(a.set(id, 0, to), Ok(before));
    assert_eq!(a.shard_of(&id, 0), Some(to));
    assert!(a.set(id, 0, ShardId(2)).is_err(), "no such shard");
    assert!(a.set(id, 9, ShardId(0)).is_err(), "not hosted");
    let dir = tempfile::tempdir().unwrap();
    a.save(dir.path()).unwrap();
    assert_eq!(ShardAssignment::load_from(dir.path(), 2).unwrap().shard_of(&id, 0), Some(to));
}

#[test]
fn every_op_names_its_partition() {
    let op = PartitionOp::DescribeProducers { topic: "t".into(), partition: 4 };
    assert_eq!(tp_of(&op), ("t", 4));
}
