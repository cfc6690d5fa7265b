//! `shardlog format`: gives a data directory its cluster id and node id before the first
//! start, as Kafka's `kafka-storage.sh format` does. Every node of a cluster is formatted with
//! the same cluster id; a single node may skip this (its first start picks an id).
//!
//! Runs on the main thread of the CLI process. Invariant: an existing `meta.properties` is
//! never rewritten: formatting again with the same identity is refused unless
//! `--ignore-formatted`, and with a different one always.

use std::path::PathBuf;

use base64::Engine;

use super::UsageError;
use crate::controller::{random_kafka_uuid, MetaProperties};
use crate::types::NodeId;

/// Flags of `shardlog format`.
#[derive(clap::Args, Debug, Clone)]
pub struct FormatArgs {
    /// The cluster id, the same on every node (Kafka's form: 22 characters of URL-safe
    /// base64, as `shardlog format --print-random-uuid` prints; default: a new random one).
    #[arg(long, short = 't', value_name = "ID")]
    pub cluster_id: Option<String>,
    /// The data directory to format (the one `serve --data-dir` will use).
    #[arg(long, value_name = "DIR", default_value = "shardlog-data")]
    pub data_dir: PathBuf,
    /// This node's id (the one `serve --node-id` will use).
    #[arg(long, value_name = "ID", default_value_t = 0)]
    pub node_id: i32,
    /// Succeed without change when the directory is already formatted with this identity.
    #[arg(long, short = 'g')]
    pub ignore_formatted: bool,
    /// Print a new random cluster id and exit (Kafka's `kafka-storage.sh random-uuid`).
    #[arg(long, conflicts_with_all = ["cluster_id", "ignore_formatted"])]
    pub print_random_uuid: bool,
}

/// Checks that `id` is a Kafka UUID string (16 bytes in URL-safe base64 without padding).
pub fn validate_cluster_id(id: &str) -> Result<(), UsageError> {
    let bytes = base64::engine::general_purpose::URL_SAFE_NO_PAD.decode(id).ok();
    if id.len() != 22 || bytes.map(|b| b.len()) != Some(16) {
        return Err(UsageError(format!(
            "cluster id {id:?} is not a Kafka UUID (22 characters of URL-safe base64); \
             `shardlog format --print-random-uuid` prints one"
        )));
    }
    Ok(())
}

/// Runs `shardlog format`.
pub fn run(args: &FormatArgs) -> anyhow::Result<()> {
    if args.print_random_uuid {
        println!("{}", random_kafka_uuid());
        return Ok(());
    }
    if args.node_id < 0 {
        return Err(UsageError(format!("--node-id {} must not be negative", args.node_id)).into());
    }
    let cluster_id = match &args.cluster_id {
        Some(id) => {
            validate_cluster_id(id)?;
            id.clone()
        }
        None => random_kafka_uuid(),
    };
    let node_id = NodeId(args.node_id);
    // The file `MetaProperties::write` creates (Kafka's name).
    let path = args.data_dir.join("meta.properties");
    if let Ok(text) = std::fs::read_to_string(&path) {
        let existing = MetaProperties::parse(&text, &path)?;
        let same = existing.cluster_id == cluster_id && existing.node_id == node_id;
        if same && args.ignore_formatted {
            println!(
                "{} is already formatted for cluster {cluster_id}, node {node_id}",
                path.display()
            );
            return Ok(());
        }
        anyhow::bail!(
            "{} is already formatted (cluster.id {}, node.id {}){}",
            args.data_dir.display(),
            existing.cluster_id,
            existing.node_id,
            if same { "; pass --ignore-formatted to accept it" } else { "; refusing to change it" }
        );
    }
    let props = MetaProperties {
        cluster_id: cluster_id.clone(),
        node_id,
        directory_id: random_kafka_uuid(),
    };
    props.write(&args.data_dir)?;
    println!("Formatted {} for cluster {cluster_id}, node {node_id}", args.data_dir.display());
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cluster_ids_are_kafka_uuids() {
        validate_cluster_id(&random_kafka_uuid()).unwrap();
        assert!(validate_cluster_id("short").is_err());
        assert!(validate_cluster_id("-aaaaaaaaaaaaaaaaaaaa!").is_err());
    }

    #[test]
    fn formats_once() {
        let dir = tempfile::tempdir().unwrap();
        let id = random_kafka_uuid();
        let args = FormatArgs {
            cluster_id: Some(id.clone()),
            data_dir: dir.path().join("d"),
            node_id: 2,
            ignore_formatted: false,
            print_random_uuid: false,
        };
        run(&args).unwrap();
        let err = run(&args).unwrap_err().to_string();
        assert!(err.contains("already formatted"), "{err}");
        run(&FormatArgs { ignore_formatted: true, ..args.clone() }).unwrap();
        let other =
            FormatArgs { cluster_id: Some(random_kafka_uuid()), ignore_formatted: true, ..args };
        assert!(run(&other).unwrap_err().to_string().contains("refusing"));
        let text = std::fs::read_to_string(dir.path().join("d/meta.properties")).unwrap();
        assert!(text.contains(&format!("cluster.id={id}")) && text.contains("node.id=2"));
    }
}
