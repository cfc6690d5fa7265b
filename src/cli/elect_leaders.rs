//! `shardlog elect-leaders`: Kafka's `kafka-leader-election.sh` (`LeaderElectionCommand`)
//! over the Kafka protocol: `--election-type preferred|unclean` with `--topic T --partition
//! P`, `--all-topic-partitions` or `--path-to-json-file F` (`{"partitions": [{"topic": ..,
//! "partition": ..}]}`), printing the tool's lines ("Successfully completed leader
//! election", "Valid replica already elected", "Error completing leader election").
//!
//! Runs in the CLI process (blocking sockets through [`crate::protocol::blocking`]), never
//! inside the broker. Exit status 1 when any partition could not be elected, as Kafka's.

use std::io::Write as _;

use anyhow::{anyhow, bail};
use clap::{Args, ValueEnum};
use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::elect_leaders_request::TopicPartitions;
use kafka_protocol::messages::{ApiKey, ElectLeadersRequest, ElectLeadersResponse, TopicName};
use kafka_protocol::protocol::StrBytes;

use crate::cli::ClientArgs;
use crate::constants::CLI_REQUEST_TIMEOUT_MS;

const CLIENT_ID: &str = "shardlog-elect-leaders";
const ELECT_LEADERS_VERSION: i16 = 2;

#[derive(ValueEnum, Debug, Clone, Copy, PartialEq, Eq)]
pub enum ElectionKind {
    Preferred,
    Unclean,
}

#[derive(Args, Debug, Clone)]
pub struct ElectLeadersArgs {
    #[command(flatten)]
    pub client: ClientArgs,
    /// `--user`, `--password`, `--sasl-mechanism`: log in on a SASL listener.
    #[command(flatten)]
    pub sasl: super::sasl::SaslArgs,
    /// Type of election to attempt.
    #[arg(long, value_enum)]
    pub election_type: ElectionKind,
    /// Topic of the partition to elect a leader for (with --partition).
    #[arg(long, requires = "partition", conflicts_with_all = ["all_topic_partitions", "path_to_json_file"])]
    pub topic: Option<String>,
    /// Partition id (with --topic).
    #[arg(long, requires = "topic")]
    pub partition: Option<i32>,
    /// Elect leaders for every partition.
    #[arg(long, conflicts_with = "path_to_json_file")]
    pub all_topic_partitions: bool,
    /// A JSON file listing the partitions: {"partitions": [{"topic": "t", "partition": 0}]}.
    #[arg(long)]
    pub path_to_json_file: Option<std::path::PathBuf>,
}

/// The partitions a JSON file names, grouped by topic in file order.
fn parse_json(text: &str) -> anyhow::Result<Vec<(String, Vec<i32>)>> {
    let v: serde_json::Value = serde_json::from_str(text)?;
    let list = v["partitions"].as_array().ok_or_else(|| anyhow!("no \"partitions\" array"))?;
    let mut out: Vec<(String, Vec<i32>)> = Vec::new();
    for p in list {
        let topic = p["topic"].as_str().ok_or_else(|| anyhow!("an entry without \"topic\""))?;
        let partition = p["partition"]
            .as_i64()
            .and_then(|n| i32::try_from(n).ok())
            .ok_or_else(|| anyhow!("an entry without a valid \"partition\""))?;
        match out.iter_mut().find(|(t, _)| t == topic) {
            Some((_, ps)) if ps.contains(&partition) => bail!("duplicate {topic}-{partition}"),
            Some((_, ps)) => ps.push(partition),
            None => out.push((topic.to_string(), vec![partition])),
        }
    }
    Ok(out)
}

/// Runs the elections and prints the tool's report.
pub fn run(args: ElectLeadersArgs) -> anyhow::Result<()> {
    args.sasl.install();
    let targets: Option<Vec<(String, Vec<i32>)>> =
        match (&args.topic, args.partition, args.all_topic_partitions, &args.path_to_json_file) {
            (Some(t), Some(p), false, None) => Some(vec![(t.clone(), vec![p])]),
            (None, None, true, None) => None,
            (None, None, false, Some(path)) => Some(parse_json(&std::fs::read_to_string(path)?)?),
            _ => bail!(
                "one of --topic/--partition, --all-topic-partitions or --path-to-json-file is \
                 required"
            ),
        };
    let (wire_type, label) = match args.election_type {
        ElectionKind::Preferred => (0, "PREFERRED"),
        ElectionKind::Unclean => (1, "UNCLEAN"),
    };
    let req = ElectLeadersRequest::default()
        .with_election_type(wire_type)
        .with_timeout_ms(i32::try_from(CLI_REQUEST_TIMEOUT_MS).unwrap_or(i32::MAX))
        .with_topic_partitions(targets.map(|ts| {
            ts.into_iter()
                .map(|(t, ps)| {
                    TopicPartitions::default()
                        .with_topic(TopicName(StrBytes::from_string(t)))
                        .with_partitions(ps)
                })
                .collect()
        }));
    let mut conn = super::sasl::connect(args.client.bootstrap(), CLIENT_ID)?;
    let resp: ElectLeadersResponse =
        conn.call(ApiKey::ElectLeaders, ELECT_LEADERS_VERSION, &req)?;
    if resp.error_code != 0 {
        let e = ResponseError::try_from_code(resp.error_code);
        bail!("ElectLeaders failed: {e:?} (error code {})", resp.error_code);
    }
    let (mut done, mut noop, mut failed) = (Vec::new(), Vec::new(), Vec::new());
    for t in &resp.replica_election_results {
        for p in &t.partition_result {
            let name = format!("{}-{}", t.topic.0, p.partition_id);
            match p.error_code {
                0 => done.push(name),
                c if c == ResponseError::ElectionNotNeeded.code() => noop.push(name),
                c => {
                    let e = ResponseError::try_from_code(c)
                        .map_or_else(|| format!("error code {c}"), |e| format!("{e:?}"));
                    let msg = p.error_message.as_ref().map(ToString::to_string).unwrap_or_default();
                    failed.push(format!("{name}: {e}: {msg}"));
                }
            }
        }
    }
    let mut out = std::io::stdout().lock();
    if !done.is_empty() {
        writeln!(
            out,
            "Successfully completed leader election ({label}) for partitions {}",
            done.join(", ")
        )?;
    }
    if !noop.is_empty() {
        writeln!(out, "Valid replica already elected for partitions {}", noop.join(", "))?;
    }
    for f in &failed {
        writeln!(out, "Error completing leader election ({label}) for partition: {f}")?;
    }
    if !failed.is_empty() {
        bail!("{} replica(s) could not be elected", failed.len());
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::parse_json;

    #[test]
    fn json_file_groups_partitions_by_topic_and_refuses_duplicates() {
        let text = r#"{"partitions":[{"topic":"a","partition":0},{"topic":"b","partition":2},
            {"topic":"a","partition":1}]}"#;
        assert_eq!(
            parse_json(text).unwrap(),
            vec![("a".to_string(), vec![0, 1]), ("b".to_string(), vec![2])]
        );
        assert!(parse_json(
            r#"{"partitions":[{"topic":"a","partition":0},{"topic":"a","partition":0}]}"#
        )
        .is_err());
        assert!(parse_json(r#"{"partitions":[{"topic":"a"}]}"#).is_err());
        assert!(parse_json("{}").is_err());
    }
}
