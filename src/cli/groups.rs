//! `shardlog groups list|describe GROUP`: consumer groups and their lag, over the Kafka
//! protocol (so it works against any Kafka-compatible broker). `describe` prints, per
//! partition, the committed offset, log end offset, lag, member, host and client id, in
//! the layout of `kafka-consumer-groups.sh --describe`.
//!
//! Runs in the CLI process (blocking sockets through [`crate::protocol::blocking`], no
//! runtime), never inside the broker.

use std::collections::BTreeMap;
use std::io::Write;

use anyhow::{anyhow, bail};
use bytes::{Buf, Bytes};
use clap::{Args, Subcommand};
use kafka_protocol::messages::list_offsets_request::{ListOffsetsPartition, ListOffsetsTopic};
use kafka_protocol::messages::{
    ApiKey, ConsumerProtocolAssignment, DescribeGroupsRequest, DescribeGroupsResponse,
    FindCoordinatorRequest, FindCoordinatorResponse, GroupId, ListGroupsRequest,
    ListGroupsResponse, ListOffsetsRequest, ListOffsetsResponse, OffsetFetchRequest,
    OffsetFetchResponse, TopicName,
};
use kafka_protocol::protocol::{Decodable, StrBytes};

use crate::cli::ClientArgs;
use crate::protocol::blocking::BlockingConn;

/// The client id of every request `shardlog groups` sends.
const CLIENT_ID: &str = "shardlog-groups";

#[derive(Args, Debug, Clone)]
pub struct GroupsArgs {
    /// The broker (`--bootstrap-server`, `--bootstrap`, `-b`), accepted anywhere on the line.
    #[command(flatten)]
    pub client: ClientArgs,
    /// `--user`, `--password`, `--sasl-mechanism`: log in on a SASL listener.
    #[command(flatten)]
    pub sasl: super::sasl::SaslArgs,
    #[command(subcommand)]
    pub command: GroupsCommand,
}

#[derive(Subcommand, Debug, Clone)]
pub enum GroupsCommand {
    /// List every consumer group with its state.
    List,
    /// Committed offsets, log end offsets, lag and members of one group.
    Describe {
        /// The group id.
        group: String,
    },
}

/// Runs the command and prints its report on stdout.
pub fn run(args: GroupsArgs) -> anyhow::Result<()> {
    args.sasl.install();
    let mut out = std::io::stdout().lock();
    match args.command {
        GroupsCommand::List => {
            let groups = list(args.client.bootstrap())?;
            writeln!(out, "{:<40} {:<22} PROTOCOL-TYPE", "GROUP", "STATE")?;
            for (group, state, protocol_type) in groups {
                writeln!(out, "{group:<40} {state:<22} {protocol_type}")?;
            }
        }
        GroupsCommand::Describe { group } => {
            let report = describe(args.client.bootstrap(), &group)?;
            out.write_all(report.render().as_bytes())?;
        }
    }
    Ok(())
}

/// One row of `describe`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LagRow {
    pub topic: String,
    pub partition: i32,
    pub committed: Option<i64>,
    pub log_end: Option<i64>,
    pub member: Option<(String, String, String)>,
}

impl LagRow {
    #[must_use]
    pub fn lag(&self) -> Option<i64> {
        Some(self.log_end? - self.committed?).map(|l| l.max(0))
    }
}

#[derive(Debug, Clone)]
pub struct GroupReport {
    pub group: String,
    pub state: String,
    pub rows: Vec<LagRow>,
}

impl GroupReport {
    #[must_use]
    pub fn render(&self) -> String {
        let dash = |v: Option<i64>| v.map_or_else(|| "-".to_string(), |v| v.to_string());
        let mut s = String::new();
        if self.state == "Dead" && self.rows.is_empty() {
            return format!("Consumer group '{}' does not exist.\n", self.group);
        }
        if self.rows.iter().all(|r| r.member.is_none()) {
            s.push_str(&format!("\nConsumer group '{}' has no active members.\n", self.group));
        }
        s.push_str(&format!(
            "\n{:<15} {:<15} {:<10} {:<15} {:<15} {:<15} {:<45} {:<15} {}\n",
            "GROUP",
            "TOPIC",
            "PARTITION",
            "CURRENT-OFFSET",
            "LOG-END-OFFSET",
            "LAG",
            "CONSUMER-ID",
            "HOST",
            "CLIENT-ID"
        ));
        for r in &self.rows {
            let (member, host, client) =
                r.member.clone().unwrap_or_else(|| ("-".into(), "-".into(), "-".into()));
            s.push_str(&format!(
                "{:<15} {:<15} {:<10} {:<15} {:<15} {:<15} {:<45} {:<15} {}\n",
                self.group,
                r.topic,
                r.partition,
                dash(r.committed),
                dash(r.log_end),
                dash(r.lag()),
                member,
                host,
                client
            ));
        }
        s
    }
}

/// (group, state, protocol type) of every group the broker lists.
pub fn list(bootstrap: &str) -> anyhow::Result<Vec<(String, String, String)>> {
    let mut conn = super::sasl::connect(bootstrap, CLIENT_ID)?;
    let resp: ListGroupsResponse =
        conn.call(ApiKey::ListGroups, 4, &ListGroupsRequest::default())?;
    if resp.error_code != 0 {
        bail!("ListGroups failed with error {}", resp.error_code);
    }
    Ok(resp
        .groups
        .into_iter()
        .map(|g| (g.group_id.0.to_string(), g.group_state.to_string(), g.protocol_type.to_string()))
        .collect())
}

/// Committed offsets, log end offsets and members of a group.
pub fn describe(bootstrap: &str, group: &str) -> anyhow::Result<GroupReport> {
    let mut boot = super::sasl::connect(bootstrap, CLIENT_ID)?;
    let find = FindCoordinatorRequest::default().with_key(StrBytes::from_string(group.into()));
    let found: FindCoordinatorResponse = boot.call(ApiKey::FindCoordinator, 3, &find)?;
    if found.error_code != 0 {
        bail!("FindCoordinator failed with error {}", found.error_code);
    }
    let mut coord = super::sasl::connect(&format!("{}:{}", found.host, found.port), CLIENT_ID)?;
    let req = DescribeGroupsRequest::default()
        .with_groups(vec![GroupId(StrBytes::from_string(group.into()))]);
    let described: DescribeGroupsResponse = coord.call(ApiKey::DescribeGroups, 4, &req)?;
    let g =
        described.groups.into_iter().next().ok_or_else(|| anyhow!("no group in the response"))?;
    if g.error_code != 0 {
        bail!("DescribeGroups failed with error {}", g.error_code);
    }
    let mut owners: BTreeMap<(String, i32), (String, String, String)> = BTreeMap::new();
    for m in &g.members {
        let who = (m.member_id.to_string(), m.client_host.to_string(), m.client_id.to_string());
        for (topic, partition) in assigned_partitions(&m.member_assignment) {
            owners.insert((topic, partition), who.clone());
        }
    }
    let fetch = OffsetFetchRequest::default()
        .with_group_id(GroupId(StrBytes::from_string(group.into())))
        .with_topics(None);
    let fetched: OffsetFetchResponse = coord.call(ApiKey::OffsetFetch, 7, &fetch)?;
    if fetched.error_code != 0 {
        bail!("OffsetFetch failed with error {}", fetched.error_code);
    }
    let mut committed: BTreeMap<(String, i32), Option<i64>> = BTreeMap::new();
    for t in fetched.topics {
        for p in t.partitions {
            let offset = (p.committed_offset >= 0).then_some(p.committed_offset);
            committed.insert((t.name.0.to_string(), p.partition_index), offset);
        }
    }
    for key in owners.keys() {
        committed.entry(key.clone()).or_insert(None);
    }
    let ends = log_end_offsets(&mut boot, committed.keys())?;
    let rows = committed
        .into_iter()
        .map(|((topic, partition), committed)| LagRow {
            log_end: ends.get(&(topic.clone(), partition)).copied(),
            member: owners.get(&(topic.clone(), partition)).cloned(),
            topic,
            partition,
            committed,
        })
        .collect();
    Ok(GroupReport { group: group.into(), state: g.group_state.to_string(), rows })
}

fn assigned_partitions(assignment: &Bytes) -> Vec<(String, i32)> {
    let mut buf = assignment.clone();
    if buf.len() < 2 {
        return Vec::new();
    }
    let version = buf.get_i16();
    match ConsumerProtocolAssignment::decode(&mut buf, version.clamp(0, 3)) {
        Ok(a) => a
            .assigned_partitions
            .into_iter()
            .flat_map(|t| t.partitions.into_iter().map(move |p| (t.topic.0.to_string(), p)))
            .collect(),
        Err(_) => Vec::new(),
    }
}

/// Latest offsets (ListOffsets -1) of the given partitions.
fn log_end_offsets<'a>(
    conn: &mut BlockingConn,
    partitions: impl Iterator<Item = &'a (String, i32)>,
) -> anyhow::Result<BTreeMap<(String, i32), i64>> {
    let mut by_topic: BTreeMap<String, Vec<i32>> = BTreeMap::new();
    for (t, p) in partitions {
        by_topic.entry(t.clone()).or_default().push(*p);
    }
    if by_topic.is_empty() {
        return Ok(BTreeMap::new());
    }
    let topics = by_topic
        .into_iter()
        .map(|(t, ps)| {
            ListOffsetsTopic::default()
                .with_name(TopicName(StrBytes::from_string(t)))
                .with_partitions(
                    ps.into_iter()
                        .map(|p| {
                            ListOffsetsPartition::default()
                                .with_partition_index(p)
                                .with_timestamp(-1)
                        })
                        .collect(),
                )
        })
        .collect();
    let req = ListOffsetsRequest::default()
        .with_replica_id(kafka_protocol::messages::BrokerId(-1))
        .with_topics(topics);
    let resp: ListOffsetsResponse = conn.call(ApiKey::ListOffsets, 1, &req)?;
    let mut out = BTreeMap::new();
    for t in resp.topics {
        for p in t.partitions {
            if p.error_code == 0 {
                out.insert((t.name.0.to_string(), p.partition_index), p.offset);
            }
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lag_is_end_minus_committed_or_unknown() {
        let row = LagRow {
            topic: "t".into(),
            partition: 0,
            committed: Some(4),
            log_end: Some(10),
            member: None,
        };
        assert_eq!(row.lag(), Some(6));
        let none = LagRow { committed: None, ..row.clone() };
        assert_eq!(none.lag(), None);
        let report = GroupReport { group: "g".into(), state: "Empty".into(), rows: vec![row] };
        let text = report.render();
        assert!(text.contains("has no active members"));
        let row = ["g", "t", "0", "4", "10", "6"];
        let has_row = |l: &str| l.split_whitespace().collect::<Vec<_>>().get(..6) == Some(&row[..]);
        assert!(text.lines().any(has_row));
    }
}
