//! DescribeQuorum (API key 55), v0–2: the metadata quorum's leader, epoch, high watermark,
//! voters and observers with their log end offsets and last fetch / caught-up times, as
//! `kafka-metadata-quorum.sh describe --status` and `--replication` print them.
//!
//! A pure builder over a [`QuorumView`] taken from the quorum on the controller shard. Only the
//! active controller knows its followers' progress: another node answers with
//! NOT_LEADER_OR_FOLLOWER when it cannot ask the leader (the server forwards first).

use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::describe_quorum_response::{
    Listener, Node, PartitionData, ReplicaState, TopicData,
};
use kafka_protocol::messages::{
    BrokerId, DescribeQuorumRequest, DescribeQuorumResponse, TopicName,
};

use super::sb;

/// Every version Kafka 4.x defines.
pub const VERSIONS: (i16, i16) = (0, 2);

/// Kafka's name of the metadata log's topic; partition 0 is the only one.
pub const METADATA_TOPIC: &str = "__cluster_metadata";

/// One member of the quorum as the leader sees it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ReplicaView {
    pub id: i32,
    /// The next offset the replica's log holds (Raft index + 1), -1 when unknown.
    pub log_end_offset: i64,
    /// Wall-clock ms of its last fetch (append response), -1 when unknown.
    pub last_fetch_ms: i64,
    /// Wall-clock ms when it last held everything the leader had, -1 when unknown.
    pub last_caught_up_ms: i64,
}

/// The quorum as its leader sees it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct QuorumView {
    pub leader_id: i32,
    /// The Raft term (Kafka's leader epoch of the metadata partition).
    pub leader_epoch: i32,
    /// The committed offset (Raft commit index + 1).
    pub high_watermark: i64,
    pub voters: Vec<ReplicaView>,
    pub observers: Vec<ReplicaView>,
    /// Each voter's controller endpoint: (id, host, port).
    pub voter_endpoints: Vec<(i32, String, u16)>,
}

fn replica(r: &ReplicaView, version: i16) -> ReplicaState {
    let mut state = ReplicaState::default()
        .with_replica_id(BrokerId(r.id))
        .with_log_end_offset(r.log_end_offset);
    if version >= 1 {
        state = state
            .with_last_fetch_timestamp(r.last_fetch_ms)
            .with_last_caught_up_timestamp(r.last_caught_up_ms);
    }
    state
}

/// Answers `request` from `view` (`None`: this node is not the leader and could not ask it).
#[must_use]
pub fn handle(
    view: Option<&QuorumView>,
    request: &DescribeQuorumRequest,
    version: i16,
) -> DescribeQuorumResponse {
    let mut topics = Vec::new();
    for t in &request.topics {
        let mut partitions = Vec::new();
        for p in &t.partitions {
            let mut data = PartitionData::default().with_partition_index(p.partition_index);
            if t.topic_name.0.as_str() != METADATA_TOPIC || p.partition_index != 0 {
                data = data.with_error_code(ResponseError::UnknownTopicOrPartition.code());
            } else if let Some(v) = view {
                data = data
                    .with_leader_id(BrokerId(v.leader_id))
                    .with_leader_epoch(v.leader_epoch)
                    .with_high_watermark(v.high_watermark)
                    .with_current_voters(v.voters.iter().map(|r| replica(r, version)).collect())
                    .with_observers(v.observers.iter().map(|r| replica(r, version)).collect());
            } else {
                data = data
                    .with_error_code(ResponseError::NotLeaderOrFollower.code())
                    .with_leader_id(BrokerId(-1))
                    .with_leader_epoch(-1)
                    .with_high_watermark(-1);
                if version >= 2 {
                    data = data.with_error_message(Some(sb(
                        "this node is not the metadata quorum's leader and no leader is known",
                    )));
                }
            }
            partitions.push(data);
        }
        topics.push(
            TopicData::default().with_topic_name(t.topic_name.clone()).with_partitions(partitions),
        );
    }
    let mut response = DescribeQuorumResponse::default().with_topics(topics);
    if version >= 2 {
        if let Some(v) = view {
            let nodes = v
                .voter_endpoints
                .iter()
                .map(|(id, host, port)| {
                    Node::default().with_node_id(BrokerId(*id)).with_listeners(vec![
                        Listener::default()
                            .with_name(sb("CONTROLLER"))
                            .with_host(sb(host.clone()))
                            .with_port(*port),
                    ])
                })
                .collect();
            response = response.with_nodes(nodes);
        }
    }
    response
}

/// The request for the metadata partition (used when forwarding and in tests).
#[must_use]
pub fn metadata_partition_request() -> DescribeQuorumRequest {
    use kafka_protocol::messages::describe_quorum_request;
    DescribeQuorumRequest::default().with_topics(vec![describe_quorum_request::TopicData::default(
    )
    .with_topic_name(TopicName(sb(METADATA_TOPIC)))
    .with_partitions(vec![
        describe_quorum_request::PartitionData::default().with_partition_index(0)
    ])])
}

#[cfg(test)]
mod tests {
    use super::*;

    fn view() -> QuorumView {
        QuorumView {
            leader_id: 2,
            leader_epoch: 7,
            high_watermark: 42,
            voters: vec![
                ReplicaView { id: 1, log_end_offset: 40, last_fetch_ms: 5, last_caught_up_ms: 4 },
                ReplicaView { id: 2, log_end_offset: 42, last_fetch_ms: 6, last_caught_up_ms: 6 },
            ],
            observers: vec![ReplicaView {
                id: 4,
                log_end_offset: 42,
                last_fetch_ms: 6,
                last_caught_up_ms: 6,
            }],
            voter_endpoints: vec![(1, "h1".into(), 9093), (2, "h2".into(), 9193)],
        }
    }

    #[test]
    fn answers_the_metadata_partition() {
        let r = handle(Some(&view()), &metadata_partition_request(), 2);
        let p = &r.topics[0].partitions[0];
        assert_eq!((p.error_code, p.leader_id.0, p.leader_epoch, p.high_watermark), (0, 2, 7, 42));
        assert_eq!(p.current_voters.len(), 2);
        assert_eq!(p.observers[0].replica_id.0, 4);
        assert_eq!(p.current_voters[0].last_fetch_timestamp, 5);
        assert_eq!(r.nodes.len(), 2);
    }

    #[test]
    fn unknown_partition_and_no_leader() {
        let mut req = metadata_partition_request();
        req.topics[0].partitions[0].partition_index = 1;
        let r = handle(Some(&view()), &req, 1);
        assert_eq!(
            r.topics[0].partitions[0].error_code,
            ResponseError::UnknownTopicOrPartition.code()
        );
        let r = handle(None, &metadata_partition_request(), 1);
        assert_eq!(r.topics[0].partitions[0].error_code, ResponseError::NotLeaderOrFollower.code());
    }
}
