//! `shardlog log-dirs`: what `kafka-log-dirs.sh --describe` (`LogDirsCommand`) shows, over
//! the Kafka protocol: each broker's log directory with its volume's total and usable
//! bytes, and the size and offset lag of every replica it holds. The brokers come from
//! Metadata (`--broker-list` narrows them); DescribeLogDirs goes to each broker itself, as
//! the Admin client does. `--json` prints the Kafka tool's JSON instead of the tables.
//!
//! Runs in the CLI process (blocking sockets through [`crate::protocol::blocking`]), never
//! inside the broker. A broker that cannot be reached is reported on its line and makes the
//! exit status 1; the others are still shown.

use std::collections::BTreeSet;
use std::io::Write as _;

use anyhow::bail;
use clap::Args;
use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::describe_log_dirs_request::DescribableLogDirTopic;
use kafka_protocol::messages::{
    ApiKey, DescribeLogDirsRequest, DescribeLogDirsResponse, MetadataRequest, MetadataResponse,
    TopicName,
};
use kafka_protocol::protocol::StrBytes;

use crate::cli::ClientArgs;
use crate::protocol::blocking::BlockingConn;

const CLIENT_ID: &str = "shardlog-log-dirs";
const METADATA_VERSION: i16 = 12;
/// v4: with the volume's total and usable bytes.
const DESCRIBE_LOG_DIRS_VERSION: i16 = 4;

#[derive(Args, Debug, Clone)]
pub struct LogDirsArgs {
    #[command(flatten)]
    pub client: ClientArgs,
    /// `--user`, `--password`, `--sasl-mechanism`: log in on a SASL listener.
    #[command(flatten)]
    pub sasl: super::sasl::SaslArgs,
    /// Brokers to query, `1,2,3` (default: every broker in the cluster's metadata).
    #[arg(long, value_name = "IDS", value_delimiter = ',')]
    pub broker_list: Vec<i32>,
    /// Topics to show, `a,b` (default: every topic).
    #[arg(long, value_name = "TOPICS", value_delimiter = ',')]
    pub topic_list: Vec<String>,
    /// Print Kafka's `kafka-log-dirs.sh --describe` JSON instead of tables.
    #[arg(long)]
    pub json: bool,
}

/// One replica in a log directory.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Replica {
    pub topic: String,
    pub partition: i32,
    pub size_bytes: i64,
    pub offset_lag: i64,
    pub is_future: bool,
}

/// One log directory of one broker.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Dir {
    pub path: String,
    /// The directory's error, by Kafka's exception name (`None`: fine).
    pub error: Option<String>,
    pub total_bytes: i64,
    pub usable_bytes: i64,
    pub replicas: Vec<Replica>,
}

/// A broker's answer, or why there is none.
pub type BrokerDirs = (i32, Result<Vec<Dir>, String>);

pub fn run(args: LogDirsArgs) -> anyhow::Result<()> {
    args.sasl.install();
    let bootstrap = args.client.bootstrap();
    let mut conn = super::sasl::connect(bootstrap, CLIENT_ID)?;
    let meta: MetadataResponse = conn.call(
        ApiKey::Metadata,
        METADATA_VERSION,
        &MetadataRequest::default().with_topics(Some(Vec::new())),
    )?;
    let known: Vec<(i32, String)> =
        meta.brokers.iter().map(|b| (b.node_id.0, format!("{}:{}", b.host, b.port))).collect();
    let wanted: BTreeSet<i32> = args.broker_list.iter().copied().collect();
    if let Some(missing) = wanted.iter().find(|id| !known.iter().any(|(k, _)| k == *id)) {
        bail!("broker {missing} is not in the cluster (brokers: {:?})", ids(&known));
    }
    let topics = (!args.topic_list.is_empty()).then_some(args.topic_list.as_slice());
    let mut answers: Vec<BrokerDirs> = Vec::new();
    for (id, addr) in known.iter().filter(|(id, _)| wanted.is_empty() || wanted.contains(id)) {
        answers.push((*id, describe(addr, topics).map_err(|e| format!("{e:#}"))));
    }
    answers.sort_by_key(|(id, _)| *id);
    let text = if args.json { render_json(&answers) } else { render(&answers) };
    std::io::stdout().lock().write_all(text.as_bytes())?;
    if let Some((id, Err(e))) = answers.iter().find(|(_, a)| a.is_err()) {
        bail!("broker {id} did not answer: {e}");
    }
    Ok(())
}

fn ids(brokers: &[(i32, String)]) -> Vec<i32> {
    brokers.iter().map(|(id, _)| *id).collect()
}

/// Asks the broker at `addr` for its log directories (only the `topics` named, if any).
fn describe(addr: &str, topics: Option<&[String]>) -> anyhow::Result<Vec<Dir>> {
    let mut conn = super::sasl::connect(addr, CLIENT_ID)?;
    let topics = match topics {
        None => None,
        Some(names) => Some(partitions_of(&mut conn, names)?),
    };
    let req = DescribeLogDirsRequest::default().with_topics(topics);
    let resp: DescribeLogDirsResponse =
        conn.call(ApiKey::DescribeLogDirs, DESCRIBE_LOG_DIRS_VERSION, &req)?;
    if resp.error_code != 0 {
        bail!("DescribeLogDirs failed: {}", error_name(resp.error_code));
    }
    Ok(dirs_of(&resp))
}

/// The named topics with every partition: DescribeLogDirs names partitions one by one, so
/// their counts come from Metadata first (Kafka's tool does the same). An unknown topic is
/// asked for with no partitions and so shows none.
fn partitions_of(
    conn: &mut BlockingConn,
    names: &[String],
) -> anyhow::Result<Vec<DescribableLogDirTopic>> {
    let req = MetadataRequest::default().with_topics(None);
    let meta: MetadataResponse = conn.call(ApiKey::Metadata, METADATA_VERSION, &req)?;
    Ok(names
        .iter()
        .map(|name| {
            let parts: Vec<i32> = meta
                .topics
                .iter()
                .find(|t| t.name.as_ref().is_some_and(|n| n.0.as_str() == name))
                .map(|t| t.partitions.iter().map(|p| p.partition_index).collect())
                .unwrap_or_default();
            DescribableLogDirTopic::default()
                .with_topic(TopicName(StrBytes::from_string(name.clone())))
                .with_partitions(parts)
        })
        .collect())
}

fn error_name(code: i16) -> String {
    ResponseError::try_from_code(code)
        .map_or_else(|| format!("error code {code}"), |e| format!("{e:?}"))
}

/// The response's directories, replicas sorted by topic and partition.
#[must_use]
pub fn dirs_of(resp: &DescribeLogDirsResponse) -> Vec<Dir> {
    resp.results
        .iter()
        .map(|r| {
            let mut replicas: Vec<Replica> = r
                .topics
                .iter()
                .flat_map(|t| {
                    t.partitions.iter().map(|p| Replica {
                        topic: t.name.0.to_string(),
                        partition: p.partition_index,
                        size_bytes: p.partition_size,
                        offset_lag: p.offset_lag,
                        is_future: p.is_future_key,
                    })
                })
                .collect();
            replicas.sort_by(|a, b| (&a.topic, a.partition).cmp(&(&b.topic, b.partition)));
            Dir {
                path: r.log_dir.to_string(),
                error: (r.error_code != 0).then(|| error_name(r.error_code)),
                total_bytes: r.total_bytes,
                usable_bytes: r.usable_bytes,
                replicas,
            }
        })
        .collect()
}

/// Two tables: the directories, then the replicas (sizes in bytes, for scripts).
#[must_use]
pub fn render(answers: &[BrokerDirs]) -> String {
    let mut dirs =
        vec![["BROKER", "LOG-DIR", "TOTAL-BYTES", "USABLE-BYTES", "ERROR"].map(String::from)];
    let mut reps =
        vec![["BROKER", "LOG-DIR", "PARTITION", "SIZE-BYTES", "OFFSET-LAG", "FUTURE"]
            .map(String::from)];
    for (id, answer) in answers {
        match answer {
            Err(e) => dirs.push([id.to_string(), "-".into(), "-".into(), "-".into(), e.clone()]),
            Ok(list) => {
                for d in list {
                    let error = d.error.clone().unwrap_or_else(|| "-".into());
                    let total = d.total_bytes.to_string();
                    dirs.push([
                        id.to_string(),
                        d.path.clone(),
                        total,
                        d.usable_bytes.to_string(),
                        error,
                    ]);
                    for r in &d.replicas {
                        reps.push([
                            id.to_string(),
                            d.path.clone(),
                            format!("{}-{}", r.topic, r.partition),
                            r.size_bytes.to_string(),
                            r.offset_lag.to_string(),
                            r.is_future.to_string(),
                        ]);
                    }
                }
            }
        }
    }
    format!("{}\n{}", table(&dirs), table(&reps))
}

fn table<const N: usize>(rows: &[[String; N]]) -> String {
    let mut widths = [0usize; N];
    for row in rows {
        for (w, cell) in widths.iter_mut().zip(row) {
            *w = (*w).max(cell.len());
        }
    }
    let mut out = String::new();
    for row in rows {
        let cells: Vec<String> = row.iter().zip(widths).map(|(c, w)| format!("{c:<w$}")).collect();
        out.push_str(cells.join("  ").trim_end());
        out.push('\n');
    }
    out
}

/// Kafka's `LogDirsCommand` JSON (`version` 1; a broker that did not answer is left out,
/// as the tool leaves out brokers it has no answer from).
#[must_use]
pub fn render_json(answers: &[BrokerDirs]) -> String {
    let brokers: Vec<serde_json::Value> = answers
        .iter()
        .filter_map(|(id, a)| a.as_ref().ok().map(|dirs| (id, dirs)))
        .map(|(id, dirs)| {
            let log_dirs: Vec<serde_json::Value> = dirs
                .iter()
                .map(|d| {
                    let partitions: Vec<serde_json::Value> = d
                        .replicas
                        .iter()
                        .map(|r| {
                            serde_json::json!({
                                "partition": format!("{}-{}", r.topic, r.partition),
                                "size": r.size_bytes,
                                "offsetLag": r.offset_lag,
                                "isFuture": r.is_future,
                            })
                        })
                        .collect();
                    serde_json::json!({
                        "partitions": partitions,
                        "error": d.error,
                        "logDir": d.path,
                    })
                })
                .collect();
            serde_json::json!({ "broker": id, "logDirs": log_dirs })
        })
        .collect();
    format!("{}\n", serde_json::json!({ "brokers": brokers, "version": 1 }))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> Vec<BrokerDirs> {
        let replica = |partition, size_bytes| Replica {
            topic: "t".into(),
            partition,
            size_bytes,
            offset_lag: 0,
            is_future: false,
        };
        let dir = Dir {
            path: "/data/1".into(),
            error: None,
            total_bytes: 1000,
            usable_bytes: 400,
            replicas: vec![replica(0, 10), replica(1, 2048)],
        };
        vec![(1, Ok(vec![dir])), (2, Err("connection refused".into()))]
    }

    #[test]
    fn tables_list_dirs_then_replicas() {
        let text = render(&sample());
        let lines: Vec<&str> = text.lines().collect();
        assert!(lines[0].starts_with("BROKER  LOG-DIR  TOTAL-BYTES"), "{text}");
        assert!(lines[1].starts_with("1       /data/1  1000"), "{text}");
        assert!(lines[2].contains("connection refused"), "{text}");
        assert!(lines.iter().any(|l| l.contains("t-1") && l.contains("2048")), "{text}");
    }

    #[test]
    fn json_is_the_kafka_tools() {
        let v: serde_json::Value = serde_json::from_str(&render_json(&sample())).unwrap();
        assert_eq!(v["version"], 1);
        let brokers = v["brokers"].as_array().unwrap();
        assert_eq!(brokers.len(), 1, "a broker without an answer is left out");
        let dir = &brokers[0]["logDirs"][0];
        assert_eq!(dir["logDir"], "/data/1");
        assert!(dir["error"].is_null());
        assert_eq!(dir["partitions"][1]["partition"], "t-1");
        assert_eq!(dir["partitions"][1]["size"], 2048);
        assert_eq!(dir["partitions"][1]["isFuture"], false);
    }
}
