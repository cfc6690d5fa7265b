//! Unit tests of DescribeTopicPartitions: pagination over several topics, ELR fields,
//! offline replicas, cursor errors.

use std::collections::BTreeMap;
use std::sync::Arc;

use kafka_protocol::messages::describe_topic_partitions_request::{Cursor, TopicRequest};
use uuid::Uuid;

use super::*;
use crate::controller::{BrokerDefaults, BrokerImage, TopicConfig};
use crate::server::admin::metadata::TOPIC_OPERATIONS;
use crate::server::authz::AllowAll;
use crate::types::{Epoch, ShardId};

fn partition(index: i32) -> PartitionImage {
    let n = |v: &[i32]| v.iter().map(|i| NodeId(*i)).collect::<Vec<_>>();
    PartitionImage {
        index,
        owner_shard: ShardId(0),
        hosted: true,
        leader: NodeId(1),
        leader_epoch: Epoch(3),
        replicas: n(&[1, 2, 3]),
        isr: n(&[1]),
        elr: n(&[2]),
        last_known_elr: n(&[3]),
    }
}

/// Topics "a", "b", "c" with 5, 7 and 3 partitions; brokers 1 and 2 registered, 2 fenced.
fn image() -> MetadataImage {
    let defaults = Arc::new(BrokerDefaults::default());
    let mut image = MetadataImage::empty(NodeId(1), 1, &defaults);
    for (name, count) in [("a", 5), ("b", 7), ("c", 3)] {
        let topic = TopicImage {
            name: name.into(),
            topic_id: Uuid::new_v4(),
            internal: false,
            configs: BTreeMap::new(),
            config: TopicConfig::resolve(&BTreeMap::new(), &defaults),
            partitions: (0..count).map(partition).collect(),
        };
        image.topic_ids.insert(topic.topic_id, name.into());
        image.topics.insert(name.into(), Arc::new(topic));
    }
    let broker = |fenced| BrokerImage {
        epoch: 1,
        incarnation_id: Uuid::nil(),
        endpoints: Vec::new(),
        rack: None,
        fenced,
    };
    image.brokers = Arc::new([(NodeId(1), broker(false)), (NodeId(2), broker(true))].into());
    image
}

fn request(
    topics: &[&str],
    limit: i32,
    cursor: Option<(&str, i32)>,
) -> DescribeTopicPartitionsRequest {
    DescribeTopicPartitionsRequest::default()
        .with_topics(
            topics.iter().map(|t| TopicRequest::default().with_name(TopicName(sb(*t)))).collect(),
        )
        .with_response_partition_limit(limit)
        .with_cursor(cursor.map(|(t, p)| {
            Cursor::default().with_topic_name(TopicName(sb(t))).with_partition_index(p)
        }))
}

/// (topic, partition) pairs of a response, and its next cursor.
type Position = (String, i32);

fn pages(r: &DescribeTopicPartitionsResponse) -> (Vec<Position>, Option<Position>) {
    let got = r
        .topics
        .iter()
        .flat_map(|t| {
            let name = t.name.as_ref().map(|n| n.0.to_string()).unwrap_or_default();
            t.partitions.iter().map(move |p| (name.clone(), p.partition_index))
        })
        .collect();
    let next = r.next_cursor.as_ref().map(|c| (c.topic_name.0.to_string(), c.partition_index));
    (got, next)
}

#[test]
fn every_partition_once_across_pages() {
    let image = image();
    for limit in [1, 2, 4, 5, 6, 15, 2000] {
        let mut seen = Vec::new();
        let mut cursor: Option<(String, i32)> = None;
        for _ in 0..100 {
            let c = cursor.as_ref().map(|(t, p)| (t.as_str(), *p));
            let (got, next) = pages(&handle(&image, &request(&[], limit, c), &AllowAll));
            assert!(got.len() <= limit as usize);
            seen.extend(got);
            cursor = next;
            if cursor.is_none() {
                break;
            }
        }
        let expected: Vec<(String, i32)> = [("a", 5), ("b", 7), ("c", 3)]
            .iter()
            .flat_map(|(t, n)| (0..*n).map(move |p| ((*t).to_string(), p)))
            .collect();
        assert_eq!(seen, expected, "limit {limit}");
    }
}

#[test]
fn a_cursor_at_a_topic_boundary_points_at_its_first_partition() {
    let (got, next) = pages(&handle(&image(), &request(&["a", "b"], 5, None), &AllowAll));
    assert_eq!(got.len(), 5);
    assert_eq!(next, Some(("b".into(), 0)));
    let (got, next) = pages(&handle(&image(), &request(&["a", "b"], 5, Some(("b", 0))), &AllowAll));
    assert_eq!((got.len(), next), (5, Some(("b".into(), 5))));
}

#[test]
fn elr_offline_replicas_and_unknown_topics() {
    let r = handle(&image(), &request(&["zz", "c", "bad/name"], 2000, None), &AllowAll);
    let names: Vec<String> =
        r.topics.iter().map(|t| t.name.as_ref().unwrap().0.to_string()).collect();
    assert_eq!(names, vec!["bad/name", "c", "zz"], "name order");
    assert_eq!(r.topics[0].error_code, ResponseError::InvalidTopicException.code());
    assert_eq!(r.topics[2].error_code, ResponseError::UnknownTopicOrPartition.code());
    let p = &r.topics[1].partitions[0];
    let ids = |v: &[BrokerId]| v.iter().map(|b| b.0).collect::<Vec<_>>();
    assert_eq!(p.leader_id.0, 1);
    assert_eq!(ids(p.eligible_leader_replicas.as_ref().unwrap()), vec![2]);
    assert_eq!(ids(p.last_known_elr.as_ref().unwrap()), vec![3]);
    assert_eq!(ids(&p.offline_replicas), vec![2, 3], "2 is fenced, 3 unregistered");
    assert_eq!(r.topics[1].topic_authorized_operations, TOPIC_OPERATIONS);
    assert!(r.next_cursor.is_none());
}

#[test]
fn bad_cursors_are_invalid_requests() {
    let r = handle(&image(), &request(&["a"], 10, Some(("b", 0))), &AllowAll);
    assert_eq!(r.topics[0].error_code, ResponseError::InvalidRequest.code());
    let r = handle(&image(), &request(&["a"], 10, Some(("a", -1))), &AllowAll);
    assert_eq!(r.topics[0].error_code, ResponseError::InvalidRequest.code());
    // The limit is at least one partition.
    let (got, next) = pages(&handle(&image(), &request(&["a"], 0, None), &AllowAll));
    assert_eq!((got.len(), next), (1, Some(("a".into(), 1))));
}
