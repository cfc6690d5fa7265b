//! `shardlog topics list|describe|create|delete`: daily topic work without a Java tool, over
//! the Kafka protocol (so it works against any Kafka-compatible broker). `describe` prints
//! Kafka's layout (`kafka-topics.sh --describe`) plus the vocabulary of replication: AR (the
//! assigned replicas), ISR, OSR (AR minus ISR, the replicas out of sync), ELR and last known
//! ELR (KIP-966, from DescribeTopicPartitions; `N/A` from a broker without it, as Kafka
//! prints) and the preferred leader (the first assigned replica), by broker id.
//!
//! Runs in the CLI process (blocking sockets through [`crate::protocol::blocking`], no
//! runtime), never inside the broker.

use std::fmt::Write as _;
use std::io::Write as _;

use anyhow::{anyhow, bail};
use clap::{Args, Subcommand};
use kafka_protocol::messages::create_topics_request::{CreatableTopic, CreatableTopicConfig};
use kafka_protocol::messages::delete_topics_request::DeleteTopicState;
use kafka_protocol::messages::metadata_request::MetadataRequestTopic;
use kafka_protocol::messages::metadata_response::MetadataResponseTopic;
use kafka_protocol::messages::{
    ApiKey, CreateTopicsRequest, CreateTopicsResponse, DeleteTopicsRequest, DeleteTopicsResponse,
    MetadataRequest, MetadataResponse, TopicName,
};
use kafka_protocol::protocol::StrBytes;

use super::configs::{check, describe as describe_configs, parse_add_config, Entity};
use crate::cli::ClientArgs;
use crate::constants::CLI_REQUEST_TIMEOUT_MS;

/// The client id of every request `shardlog topics` sends.
const CLIENT_ID: &str = "shardlog-topics";
const METADATA_VERSION: i16 = 12;
const CREATE_TOPICS_VERSION: i16 = 7;
const DELETE_TOPICS_VERSION: i16 = 6;
/// DescribeConfigs' source of a topic's own override (Kafka's DYNAMIC_TOPIC_CONFIG).
const SOURCE_TOPIC_OVERRIDE: i8 = 1;

#[derive(Args, Debug, Clone)]
pub struct TopicsArgs {
    /// The broker (`--bootstrap-server`, `--bootstrap`, `-b`), accepted anywhere on the line.
    #[command(flatten)]
    pub client: ClientArgs,
    /// `--user`, `--password`, `--sasl-mechanism`: log in on a SASL listener.
    #[command(flatten)]
    pub sasl: super::sasl::SaslArgs,
    #[command(subcommand)]
    pub command: TopicsCommand,
}

#[derive(Subcommand, Debug, Clone)]
pub enum TopicsCommand {
    /// Every topic name, one a line (internal topics included, as kafka-topics.sh --list).
    List,
    /// Partitions with leader, AR, ISR, OSR and preferred leader; the topic's overrides.
    Describe {
        /// Topics to describe (default: every topic).
        topics: Vec<String>,
    },
    /// Create a topic (CreateTopics).
    Create {
        topic: String,
        /// Partitions (default: the broker's num.partitions).
        #[arg(long)]
        partitions: Option<i32>,
        /// Replicas of each partition (default: the broker's default.replication.factor).
        #[arg(long)]
        replication_factor: Option<i16>,
        /// Topic configs, `k=v[,k=v]` (a value with commas in brackets: `k=[a,b]`).
        #[arg(long, value_name = "K=V,...")]
        config: Option<String>,
    },
    /// Delete a topic (DeleteTopics).
    Delete { topic: String },
}

/// Runs the command and prints its report on stdout.
pub fn run(args: TopicsArgs) -> anyhow::Result<()> {
    args.sasl.install();
    let bootstrap = args.client.bootstrap();
    let mut out = std::io::stdout().lock();
    match args.command {
        TopicsCommand::List => {
            for topic in metadata(bootstrap, None)? {
                writeln!(out, "{}", topic_name(&topic))?;
            }
        }
        TopicsCommand::Describe { topics } => {
            let wanted = (!topics.is_empty()).then_some(topics);
            for topic in metadata(bootstrap, wanted)? {
                let name = topic_name(&topic);
                let entity = Entity { topic: Some(name.clone()), ..Entity::default() };
                let overrides: Vec<String> = describe_configs(bootstrap, &entity)?
                    .into_iter()
                    .filter(|r| r.source == SOURCE_TOPIC_OVERRIDE)
                    .map(|r| format!("{}={}", r.name, r.value.unwrap_or_default()))
                    .collect();
                let elr = elr_of(bootstrap, &name);
                out.write_all(render(&topic, &overrides, elr.as_ref()).as_bytes())?;
            }
        }
        TopicsCommand::Create { topic, partitions, replication_factor, config } => {
            let configs = match config {
                Some(text) => parse_add_config(&text)?,
                None => Vec::new(),
            };
            create(bootstrap, &topic, partitions, replication_factor, &configs)?;
            writeln!(out, "Created topic {topic}.")?;
        }
        TopicsCommand::Delete { topic } => {
            delete(bootstrap, &topic)?;
            writeln!(out, "Deleted topic {topic}.")?;
        }
    }
    Ok(())
}

fn topic_name(topic: &MetadataResponseTopic) -> String {
    topic.name.as_ref().map(|n| n.0.to_string()).unwrap_or_default()
}

/// Metadata of `topics` (every topic when `None`), sorted by name; an unknown requested
/// topic is an error naming it.
fn metadata(
    bootstrap: &str,
    topics: Option<Vec<String>>,
) -> anyhow::Result<Vec<MetadataResponseTopic>> {
    let mut conn = super::sasl::connect(bootstrap, CLIENT_ID)?;
    let req = MetadataRequest::default()
        .with_topics(topics.map(|names| {
            names
                .into_iter()
                .map(|n| {
                    MetadataRequestTopic::default()
                        .with_name(Some(TopicName(StrBytes::from_string(n))))
                })
                .collect()
        }))
        .with_allow_auto_topic_creation(false);
    let resp: MetadataResponse = conn.call(ApiKey::Metadata, METADATA_VERSION, &req)?;
    let mut topics = resp.topics;
    for t in &topics {
        check(t.error_code, Some(&format!("topic {}", topic_name(t))))?;
    }
    topics.sort_by_key(topic_name);
    Ok(topics)
}

/// Each partition's (ELR, last known ELR) of `topic` from DescribeTopicPartitions (every
/// page); `None` when the broker does not answer it (an older broker: printed `N/A`).
fn elr_of(bootstrap: &str, topic: &str) -> Option<Elr> {
    use kafka_protocol::messages::describe_topic_partitions_request::{Cursor, TopicRequest};
    use kafka_protocol::messages::{
        DescribeTopicPartitionsRequest, DescribeTopicPartitionsResponse,
    };
    let mut conn = super::sasl::connect(bootstrap, CLIENT_ID).ok()?;
    let name = TopicName(StrBytes::from_string(topic.to_string()));
    let mut out = Elr::new();
    let mut cursor = None;
    // Bounded: each page covers at least one partition, and a topic has at most this many.
    for _ in 0..=crate::constants::TOPIC_PARTITIONS_MAX {
        let req = DescribeTopicPartitionsRequest::default()
            .with_topics(vec![TopicRequest::default().with_name(name.clone())])
            .with_cursor(cursor.take());
        let resp: DescribeTopicPartitionsResponse =
            conn.call(ApiKey::DescribeTopicPartitions, 0, &req).ok()?;
        for p in resp.topics.iter().flat_map(|t| &t.partitions) {
            let ids = |v: &Option<Vec<kafka_protocol::messages::BrokerId>>| {
                v.iter().flatten().map(|b| b.0).collect::<Vec<_>>()
            };
            out.insert(
                p.partition_index,
                (ids(&p.eligible_leader_replicas), ids(&p.last_known_elr)),
            );
        }
        match resp.next_cursor {
            Some(c) if c.topic_name == name => {
                cursor = Some(
                    Cursor::default()
                        .with_topic_name(c.topic_name)
                        .with_partition_index(c.partition_index),
                );
            }
            _ => return Some(out),
        }
    }
    Some(out)
}

/// Per partition: (ELR, last known ELR) broker ids.
pub type Elr = std::collections::BTreeMap<i32, (Vec<i32>, Vec<i32>)>;

/// `kafka-topics.sh --describe`'s layout, with AR, OSR, ELR, last known ELR (`N/A` when
/// `elr` is `None`) and the preferred leader added.
#[must_use]
pub fn render(topic: &MetadataResponseTopic, overrides: &[String], elr: Option<&Elr>) -> String {
    let ids = |v: &[kafka_protocol::messages::BrokerId]| {
        if v.is_empty() {
            "-".to_string()
        } else {
            v.iter().map(|b| b.0.to_string()).collect::<Vec<_>>().join(",")
        }
    };
    let name = topic_name(topic);
    let rf = topic.partitions.first().map_or(0, |p| p.replica_nodes.len());
    let mut out = String::new();
    let _ = writeln!(
        out,
        "Topic: {name}\tTopicId: {}\tPartitionCount: {}\tReplicationFactor: {rf}\tConfigs: {}",
        kafka_topic_id(topic.topic_id),
        topic.partitions.len(),
        overrides.join(",")
    );
    let mut partitions: Vec<_> = topic.partitions.iter().collect();
    partitions.sort_by_key(|p| p.partition_index);
    for p in partitions {
        let osr: Vec<_> =
            p.replica_nodes.iter().filter(|r| !p.isr_nodes.contains(r)).copied().collect();
        let preferred = p.replica_nodes.first().map_or(-1, |b| b.0);
        let list = |v: &[i32]| {
            if v.is_empty() {
                "-".to_string()
            } else {
                v.iter().map(i32::to_string).collect::<Vec<_>>().join(",")
            }
        };
        let (elr, last_known) = match elr.map(|e| e.get(&p.partition_index)) {
            Some(Some((e, l))) => (list(e), list(l)),
            Some(None) => ("-".to_string(), "-".to_string()),
            None => ("N/A".to_string(), "N/A".to_string()),
        };
        let _ = writeln!(
            out,
            "\tTopic: {name}\tPartition: {}\tLeader: {}\tReplicas: {}\tIsr: {}\tOsr: {}\t\
             Elr: {elr}\tLastKnownElr: {last_known}\tOffline: {}\tPreferredLeader: {preferred}",
            p.partition_index,
            p.leader_id.0,
            ids(&p.replica_nodes),
            ids(&p.isr_nodes),
            ids(&osr),
            ids(&p.offline_replicas),
        );
    }
    out
}

/// Kafka prints topic ids as URL-safe base64 without padding.
fn kafka_topic_id(id: uuid::Uuid) -> String {
    use base64::Engine;
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(id.as_bytes())
}

fn create(
    bootstrap: &str,
    topic: &str,
    partitions: Option<i32>,
    replication_factor: Option<i16>,
    configs: &[(String, String)],
) -> anyhow::Result<()> {
    let mut conn = super::sasl::connect(bootstrap, CLIENT_ID)?;
    let creatable = CreatableTopic::default()
        .with_name(TopicName(StrBytes::from_string(topic.to_string())))
        .with_num_partitions(partitions.unwrap_or(-1))
        .with_replication_factor(replication_factor.unwrap_or(-1))
        .with_configs(
            configs
                .iter()
                .map(|(k, v)| {
                    CreatableTopicConfig::default()
                        .with_name(StrBytes::from_string(k.clone()))
                        .with_value(Some(StrBytes::from_string(v.clone())))
                })
                .collect(),
        );
    let req = CreateTopicsRequest::default()
        .with_topics(vec![creatable])
        .with_timeout_ms(i32::try_from(CLI_REQUEST_TIMEOUT_MS).unwrap_or(i32::MAX));
    let resp: CreateTopicsResponse =
        conn.call(ApiKey::CreateTopics, CREATE_TOPICS_VERSION, &req)?;
    let result = resp.topics.into_iter().next().ok_or_else(|| anyhow!("no topic in the answer"))?;
    check(result.error_code, result.error_message.as_deref())
}

fn delete(bootstrap: &str, topic: &str) -> anyhow::Result<()> {
    if topic.is_empty() {
        bail!("a topic name is needed");
    }
    let mut conn = super::sasl::connect(bootstrap, CLIENT_ID)?;
    let req = DeleteTopicsRequest::default()
        .with_topics(vec![DeleteTopicState::default()
            .with_name(Some(TopicName(StrBytes::from_string(topic.to_string()))))])
        .with_timeout_ms(i32::try_from(CLI_REQUEST_TIMEOUT_MS).unwrap_or(i32::MAX));
    let resp: DeleteTopicsResponse =
        conn.call(ApiKey::DeleteTopics, DELETE_TOPICS_VERSION, &req)?;
    let result =
        resp.responses.into_iter().next().ok_or_else(|| anyhow!("no topic in the answer"))?;
    check(result.error_code, result.error_message.as_deref())
}

#[cfg(test)]
mod tests {
    use kafka_protocol::messages::metadata_response::MetadataResponsePartition;
    use kafka_protocol::messages::BrokerId;

    use super::*;

    #[test]
    fn describe_names_ar_isr_osr_and_the_preferred_leader() {
        let part = |i: i32, leader: i32, ar: &[i32], isr: &[i32]| {
            MetadataResponsePartition::default()
                .with_partition_index(i)
                .with_leader_id(BrokerId(leader))
                .with_replica_nodes(ar.iter().map(|b| BrokerId(*b)).collect())
                .with_isr_nodes(isr.iter().map(|b| BrokerId(*b)).collect())
        };
        let topic = MetadataResponseTopic::default()
            .with_name(Some(TopicName(StrBytes::from_static_str("t"))))
            .with_partitions(vec![
                part(1, 3, &[2, 3, 1], &[3, 1]),
                part(0, 1, &[1, 2, 3], &[1, 2, 3]),
            ]);
        let elr: Elr = [(1, (vec![2], vec![]))].into_iter().collect();
        let text = render(&topic, &["retention.ms=1000".to_string()], Some(&elr));
        let lines: Vec<&str> = text.lines().collect();
        assert!(lines[0].contains("PartitionCount: 2\tReplicationFactor: 3"), "{text}");
        assert!(lines[0].ends_with("Configs: retention.ms=1000"), "{text}");
        assert!(lines[1].contains("Partition: 0\tLeader: 1\tReplicas: 1,2,3\tIsr: 1,2,3\tOsr: -"));
        assert!(lines[2].contains("Partition: 1\tLeader: 3\tReplicas: 2,3,1\tIsr: 3,1\tOsr: 2"));
        assert!(lines[2].ends_with("PreferredLeader: 2"), "{text}");
        assert!(lines[1].contains("Osr: -\tElr: -\tLastKnownElr: -"), "{text}");
        assert!(lines[2].contains("Osr: 2\tElr: 2\tLastKnownElr: -"), "{text}");
        let text = render(&topic, &[], None);
        assert!(text.contains("Elr: N/A\tLastKnownElr: N/A"), "{text}");
    }
}
