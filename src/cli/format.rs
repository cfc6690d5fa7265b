//! `shardlog format`: gives a data directory its cluster id and node id before the first
//! start, as Kafka's `kafka-storage.sh format` does. Every node of a cluster is formatted with
//! the same cluster id; a single node may skip this (its first start picks an id).
//!
//! `--add-scram 'SCRAM-SHA-512=[name=admin,password=admin-secret]'` (Kafka's flag) gives the
//! cluster its first SCRAM credentials, e.g. the brokers' own login on a SASL inter-broker
//! listener: they are kept in `bootstrap-scram` (mode 0600, salted, never the password) until
//! the first active controller writes them to the metadata log
//! (`server::cluster::bootstrap`).
//!
//! Runs on the main thread of the CLI process. Invariant: an existing `meta.properties` is
//! never rewritten: formatting again with the same identity is refused unless
//! `--ignore-formatted`, and with a different one always.

use std::path::PathBuf;

use base64::Engine;

use anyhow::Context as _;

use super::UsageError;
use crate::constants::{SCRAM_ITERATIONS_MAX, SCRAM_ITERATIONS_MIN};
use crate::controller::scram::{
    encode_bootstrap, ScramChange, ScramMechanism, BOOTSTRAP_SCRAM_FILE,
};
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
    /// A first SCRAM credential, as Kafka's `kafka-storage.sh format --add-scram`:
    /// `'SCRAM-SHA-512=[name=admin,password=admin-secret]'` (also `iterations=N`, default
    /// 4096, and `salt=<base64>`, default random). Repeatable; give the same on every voter.
    #[arg(long = "add-scram", short = 'S', value_name = "MECHANISM=[name=..,password=..]")]
    pub add_scram: Vec<String>,
}

/// Parses one `--add-scram` value into the change AlterUserScramCredentials would carry.
pub fn parse_add_scram(text: &str) -> Result<ScramChange, UsageError> {
    use base64::engine::general_purpose::STANDARD as B64;
    let bad = |why: &str| {
        UsageError(format!(
            "--add-scram {text:?}: {why} (expected 'SCRAM-SHA-512=[name=alice,password=...]')"
        ))
    };
    let (mechanism, rest) = text.split_once('=').ok_or_else(|| bad("no MECHANISM="))?;
    let mechanism =
        ScramMechanism::from_name(mechanism.trim()).ok_or_else(|| bad("unknown mechanism"))?;
    let body = rest.trim().strip_prefix('[').and_then(|b| b.strip_suffix(']'));
    let body = body.ok_or_else(|| bad("the options go in [...]"))?;
    let (mut name, mut password, mut iterations, mut salt) = (None, None, 4096, None);
    for option in body.split(',').map(str::trim).filter(|o| !o.is_empty()) {
        let (key, value) = option.split_once('=').ok_or_else(|| bad("an option without ="))?;
        let value = value.trim().trim_matches('"').to_string();
        match key.trim() {
            "name" => name = Some(value),
            "password" => password = Some(value),
            "iterations" => iterations = value.parse().map_err(|_| bad("iterations"))?,
            "salt" => salt = Some(B64.decode(value).map_err(|_| bad("salt is not base64"))?),
            other => return Err(bad(&format!("unknown option {other}"))),
        }
    }
    let user = name.filter(|n| !n.is_empty()).ok_or_else(|| bad("no name="))?;
    let password = password.ok_or_else(|| bad("no password="))?;
    if !(SCRAM_ITERATIONS_MIN..=SCRAM_ITERATIONS_MAX).contains(&iterations) {
        return Err(bad(&format!(
            "iterations must be {SCRAM_ITERATIONS_MIN}..={SCRAM_ITERATIONS_MAX}"
        )));
    }
    let salt = salt.unwrap_or_else(|| {
        use rand::RngCore;
        let mut s = vec![0u8; 16];
        rand::thread_rng().fill_bytes(&mut s);
        s
    });
    let salted = mechanism.salted_password(password.as_bytes(), &salt, iterations.unsigned_abs());
    Ok(ScramChange::Upsert { user, mechanism, salted, salt, iterations })
}

/// Writes the `--add-scram` credentials for the first active controller (mode 0600).
fn write_bootstrap_scram(dir: &std::path::Path, changes: &[ScramChange]) -> anyhow::Result<()> {
    use std::io::Write as _;
    use std::os::unix::fs::OpenOptionsExt as _;
    let path = dir.join(BOOTSTRAP_SCRAM_FILE);
    let mut file = std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(0o600)
        .open(&path)
        .with_context(|| format!("cannot write {}", path.display()))?;
    file.write_all(encode_bootstrap(changes).as_bytes())?;
    file.sync_all()?;
    Ok(())
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
    let scram = args.add_scram.iter().map(|a| parse_add_scram(a)).collect::<Result<Vec<_>, _>>()?;
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
    if !scram.is_empty() {
        write_bootstrap_scram(&args.data_dir, &scram)?;
    }
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
            add_scram: Vec::new(),
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

    #[test]
    fn add_scram_takes_kafka_syntax() {
        let c = parse_add_scram("SCRAM-SHA-512=[name=alice,password=\"a,b\"]");
        // A comma inside a quoted password is not supported (Kafka's parser splits too).
        assert!(c.is_err());
        let c =
            parse_add_scram("SCRAM-SHA-256=[name=bob,password=pw,iterations=8192,salt=c2FsdA==]")
                .expect("parse");
        let ScramChange::Upsert { user, mechanism, salt, iterations, salted } = &c else {
            unreachable!()
        };
        assert_eq!(
            (user.as_str(), *mechanism, salt.as_slice(), *iterations),
            ("bob", ScramMechanism::Sha256, &b"salt"[..], 8192)
        );
        assert_eq!(salted, &ScramMechanism::Sha256.salted_password(b"pw", b"salt", 8192));
        let text = encode_bootstrap(std::slice::from_ref(&c));
        assert_eq!(crate::controller::scram::parse_bootstrap(&text).expect("round trip"), vec![c]);
        for bad in [
            "SCRAM-SHA-1=[name=a,password=b]",
            "SCRAM-SHA-256=name=a",
            "SCRAM-SHA-256=[password=b]",
            "SCRAM-SHA-256=[name=a,password=b,iterations=10]",
        ] {
            assert!(parse_add_scram(bad).is_err(), "{bad}");
        }
    }
}
