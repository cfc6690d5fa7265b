//! `shardlog configs describe|alter`: topic and broker configs (one broker with `--broker N`,
//! the cluster-wide broker defaults with `--broker-default`) over the Kafka protocol, the
//! counterpart of Kafka's `kafka-configs.sh` (so it works against any Kafka-compatible
//! broker). `describe` sends DescribeConfigs and prints every config with its value, source
//! (Kafka's `ConfigSource` names) and read-only/sensitive flags; `alter` sends
//! IncrementalAlterConfigs with a SET per `--add-config` entry and a DELETE per
//! `--delete-config` name, and turns a refusal into one line naming Kafka's error.
//!
//! Runs in the CLI process (blocking sockets through [`crate::protocol::blocking`], no
//! runtime), never inside the broker: it lives beside the controller because it is the
//! client of the controller's config registry, not part of it.

use std::io::Write;

use anyhow::{anyhow, bail, Context};
use clap::{Args, Subcommand};
use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::describe_configs_request::DescribeConfigsResource;
use kafka_protocol::messages::incremental_alter_configs_request::{
    AlterConfigsResource, AlterableConfig,
};
use kafka_protocol::messages::{
    ApiKey, DescribeConfigsRequest, DescribeConfigsResponse, IncrementalAlterConfigsRequest,
    IncrementalAlterConfigsResponse, MetadataRequest, MetadataResponse,
};
use kafka_protocol::protocol::StrBytes;

use crate::cli::{ClientArgs, UsageError};

/// The client id of every request `shardlog configs` sends.
const CLIENT_ID: &str = "shardlog-configs";
/// Versions Kafka 4.x and Shardlog both serve (KIP-896 floors to current).
const DESCRIBE_CONFIGS_VERSION: i16 = 4;
const INCREMENTAL_ALTER_CONFIGS_VERSION: i16 = 1;
const METADATA_VERSION: i16 = 4;
/// Kafka's `ConfigResource.Type` codes.
const RESOURCE_TOPIC: i8 = 2;
const RESOURCE_BROKER: i8 = 4;
/// Kafka's `AlterConfigOp.OpType` codes.
const OP_SET: i8 = 0;
const OP_DELETE: i8 = 1;
/// Kafka's `INVALID_CONFIG` error code: an unknown config name or a value out of range.
const INVALID_CONFIG: i16 = 40;
/// Kafka's `ConfigSource` code of a topic override.
const SOURCE_DYNAMIC_TOPIC: i8 = 1;

#[derive(Args, Debug, Clone)]
pub struct ConfigsArgs {
    /// The broker (`--bootstrap-server`, `--bootstrap`, `-b`), accepted anywhere on the line.
    #[command(flatten)]
    pub client: ClientArgs,
    /// `--user`, `--password`, `--sasl-mechanism`: log in on a SASL listener.
    #[command(flatten)]
    pub sasl: super::sasl::SaslArgs,
    #[command(subcommand)]
    pub command: ConfigsCommand,
}

#[derive(Subcommand, Debug, Clone)]
pub enum ConfigsCommand {
    /// Configs of a topic (its overrides; `--all` for every config) or of a broker (all).
    Describe {
        #[command(flatten)]
        entity: Entity,
        /// List every config, defaults included (topics list only overrides without it).
        #[arg(long)]
        all: bool,
    },
    /// Set or remove configs (IncrementalAlterConfigs SET / DELETE).
    Alter {
        #[command(flatten)]
        entity: Entity,
        /// Configs to set: `k=v[,k=v]`; a value with commas goes in brackets: `k=[a,b]`.
        #[arg(long, value_name = "K=V,...")]
        add_config: Option<String>,
        /// Configs to return to their default: `k[,k]`.
        #[arg(long, value_name = "K,...")]
        delete_config: Option<String>,
    },
}

/// The resource a command acts on: exactly one of `--topic`, `--broker` and
/// `--broker-default`.
#[derive(Args, Debug, Clone, Default)]
#[group(required = true, multiple = false)]
pub struct Entity {
    /// A topic name.
    #[arg(long)]
    pub topic: Option<String>,
    /// A broker's node id (its dynamic configs: DYNAMIC_BROKER_CONFIG).
    #[arg(long)]
    pub broker: Option<i32>,
    /// The cluster-wide broker defaults (DYNAMIC_DEFAULT_BROKER_CONFIG), Kafka's
    /// `--entity-type brokers --entity-default`.
    #[arg(long)]
    pub broker_default: bool,
}

impl Entity {
    /// Kafka's resource type and name (the empty name is the cluster default); clap's group
    /// makes exactly one present, a hand-built `Entity` may not.
    fn resource(&self) -> anyhow::Result<(i8, String)> {
        match (&self.topic, self.broker, self.broker_default) {
            (Some(topic), None, false) => Ok((RESOURCE_TOPIC, topic.clone())),
            (None, Some(id), false) => Ok((RESOURCE_BROKER, id.to_string())),
            (None, None, true) => Ok((RESOURCE_BROKER, String::new())),
            _ => bail!("give exactly one of --topic, --broker and --broker-default"),
        }
    }

    /// How reports name the entity: `topic t`, `broker 1`, `brokers (cluster default)`.
    fn label(&self) -> String {
        match (&self.topic, self.broker) {
            (Some(topic), _) => format!("topic {topic}"),
            (None, Some(id)) => format!("broker {id}"),
            (None, None) => "brokers (cluster default)".to_string(),
        }
    }
}

/// Runs the command and prints its report on stdout.
pub fn run(args: ConfigsArgs) -> anyhow::Result<()> {
    args.sasl.install();
    let mut out = std::io::stdout().lock();
    match args.command {
        ConfigsCommand::Describe { entity, all } => {
            let entries = describe(args.client.bootstrap(), &entity)?;
            let (kind, _) = entity.resource()?;
            let is_topic = kind == RESOURCE_TOPIC;
            out.write_all(
                render(&entries, is_topic, &entity.label(), all || !is_topic).as_bytes(),
            )?;
        }
        ConfigsCommand::Alter { entity, add_config, delete_config } => {
            // A malformed entry is a usage error (exit 2), found before any connection.
            let usage = |e: anyhow::Error| UsageError(e.to_string());
            let set = add_config.as_deref().map(parse_add_config).transpose().map_err(usage)?;
            let delete =
                delete_config.as_deref().map(parse_delete_config).transpose().map_err(usage)?;
            let (set, delete) = (set.unwrap_or_default(), delete.unwrap_or_default());
            alter(args.client.bootstrap(), &entity, &set, &delete)?;
            writeln!(out, "Completed updating config for {}.", entity.label())?;
        }
    }
    Ok(())
}

/// One described config.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConfigRow {
    pub name: String,
    pub value: Option<String>,
    pub source: i8,
    pub read_only: bool,
    pub sensitive: bool,
}

/// Every config of the entity as the broker describes it, sorted by name.
pub fn describe(bootstrap: &str, entity: &Entity) -> anyhow::Result<Vec<ConfigRow>> {
    let (kind, name) = entity.resource()?;
    let mut conn = match entity.broker {
        // A broker describes only itself: ask that broker, found through Metadata.
        Some(id) => super::sasl::connect(&broker_addr(bootstrap, id)?, CLIENT_ID)?,
        None => super::sasl::connect(bootstrap, CLIENT_ID)?,
    };
    let req =
        DescribeConfigsRequest::default().with_resources(vec![DescribeConfigsResource::default()
            .with_resource_type(kind)
            .with_resource_name(StrBytes::from_string(name))
            .with_configuration_keys(None)]);
    let resp: DescribeConfigsResponse =
        conn.call(ApiKey::DescribeConfigs, DESCRIBE_CONFIGS_VERSION, &req)?;
    let result =
        resp.results.into_iter().next().ok_or_else(|| anyhow!("no resource in the response"))?;
    check(result.error_code, result.error_message.as_deref())?;
    let mut rows: Vec<ConfigRow> = result
        .configs
        .into_iter()
        .map(|c| ConfigRow {
            name: c.name.to_string(),
            value: c.value.map(|v| v.to_string()),
            source: c.config_source,
            read_only: c.read_only,
            sensitive: c.is_sensitive,
        })
        .collect();
    // Apache Kafka answers in no particular order; sort as kafka-configs.sh does.
    rows.sort_by(|a, b| a.name.cmp(&b.name));
    Ok(rows)
}

/// Applies `set` (SET) and `delete` (DELETE) to the entity in one request.
pub fn alter(
    bootstrap: &str,
    entity: &Entity,
    set: &[(String, String)],
    delete: &[String],
) -> anyhow::Result<()> {
    if set.is_empty() && delete.is_empty() {
        let msg = "nothing to alter: give --add-config and/or --delete-config";
        return Err(UsageError(msg.into()).into());
    }
    if let Some(both) = delete.iter().find(|d| set.iter().any(|(k, _)| k == *d)) {
        let msg = "is both added and deleted: give it to one of --add-config/--delete-config";
        return Err(UsageError(format!("{both} {msg}")).into());
    }
    let configs = set
        .iter()
        .map(|(k, v)| (k, OP_SET, Some(v)))
        .chain(delete.iter().map(|k| (k, OP_DELETE, None)))
        .map(|(k, op, v)| {
            AlterableConfig::default()
                .with_name(StrBytes::from_string(k.clone()))
                .with_config_operation(op)
                .with_value(v.map(|v| StrBytes::from_string(v.clone())))
        })
        .collect();
    let (kind, name) = entity.resource()?;
    let req = IncrementalAlterConfigsRequest::default().with_resources(vec![
        AlterConfigsResource::default()
            .with_resource_type(kind)
            .with_resource_name(StrBytes::from_string(name.clone()))
            .with_configs(configs),
    ]);
    let mut conn = super::sasl::connect(bootstrap, CLIENT_ID)?;
    let resp: IncrementalAlterConfigsResponse =
        conn.call(ApiKey::IncrementalAlterConfigs, INCREMENTAL_ALTER_CONFIGS_VERSION, &req)?;
    let result =
        resp.responses.into_iter().next().ok_or_else(|| anyhow!("no resource in the response"))?;
    check(result.error_code, result.error_message.as_deref()).map_err(|e| {
        if result.error_code != INVALID_CONFIG {
            return e;
        }
        // The broker refused a name or value we were given: an argument error (exit 2).
        let what = match (kind, name.as_str()) {
            (RESOURCE_TOPIC, _) => format!("--topic {name}"),
            (_, "") => "--broker <id>".to_string(),
            _ => format!("--broker {name}"),
        };
        let hint = format!("`shardlog configs describe {what} --all` lists every config");
        UsageError(format!("{e} ({hint})")).into()
    })
}

/// Splits `--add-config` as Kafka's ConfigCommand does: entries separated by commas outside
/// brackets, each `key=value` with whitespace around `=` ignored, brackets removed from the
/// value (`k=[a,b]` sets `a,b`), an empty value allowed (`k=`).
pub fn parse_add_config(text: &str) -> anyhow::Result<Vec<(String, String)>> {
    let mut out: Vec<(String, String)> = Vec::new();
    for entry in split_outside_brackets(text, ',')? {
        let parts = split_outside_brackets(&entry, '=')?;
        let [key, value] = parts.as_slice() else {
            bail!(
                "invalid entry '{}' in --add-config: configs to be added must be in the \
                 format \"key=val\" (put a value holding ',' or '=' in brackets: k=[a,b])",
                entry.trim()
            );
        };
        let key = key.trim();
        if key.is_empty() {
            bail!("invalid entry '{}' in --add-config: empty config name", entry.trim());
        }
        if out.iter().any(|(k, _)| k == key) {
            bail!("{key} is given twice in --add-config");
        }
        let value: String = value.chars().filter(|c| *c != '[' && *c != ']').collect();
        out.push((key.to_string(), value.trim().to_string()));
    }
    Ok(out)
}

/// Splits `--delete-config`: names separated by commas, trimmed, empty ones refused.
pub fn parse_delete_config(text: &str) -> anyhow::Result<Vec<String>> {
    let names: Vec<String> = text.split(',').map(|s| s.trim().to_string()).collect();
    if names.iter().any(String::is_empty) {
        bail!("invalid --delete-config '{text}': an empty config name");
    }
    Ok(names)
}

/// Splits on `sep` where it is not inside `[...]`; refuses unbalanced or nested brackets.
fn split_outside_brackets(text: &str, sep: char) -> anyhow::Result<Vec<String>> {
    let mut parts = Vec::new();
    let mut current = String::new();
    let mut inside = false;
    for ch in text.chars() {
        match ch {
            '[' if inside => bail!("nested '[' in '{text}'"),
            ']' if !inside => bail!("']' without '[' in '{text}'"),
            '[' | ']' => inside = ch == '[',
            c if c == sep && !inside => {
                parts.push(std::mem::take(&mut current));
                continue;
            }
            _ => {}
        }
        current.push(ch);
    }
    if inside {
        bail!("'[' without ']' in '{text}'");
    }
    parts.push(current);
    Ok(parts)
}

/// host:port of broker `id`, from the bootstrap broker's Metadata.
fn broker_addr(bootstrap: &str, id: i32) -> anyhow::Result<String> {
    let mut conn = super::sasl::connect(bootstrap, CLIENT_ID)?;
    let req = MetadataRequest::default().with_topics(Some(Vec::new()));
    let resp: MetadataResponse = conn.call(ApiKey::Metadata, METADATA_VERSION, &req)?;
    let broker = resp
        .brokers
        .iter()
        .find(|b| b.node_id.0 == id)
        .with_context(|| format!("broker {id} is not in the cluster's metadata"))?;
    Ok(format!("{}:{}", broker.host, broker.port))
}

/// A Kafka error as one line: its name (e.g. `INVALID_CONFIG`) and the broker's message.
pub(crate) fn check(code: i16, message: Option<&str>) -> anyhow::Result<()> {
    if code == 0 {
        return Ok(());
    }
    let message = message
        .filter(|m| !m.trim().is_empty())
        .map(|m| m.split_whitespace().collect::<Vec<_>>().join(" "));
    match message {
        Some(m) => bail!("{}: {m}", error_name(code)),
        None => bail!("{}", error_name(code)),
    }
}

/// Kafka's name of an error code (`Errors.name()`), e.g. 40 → `INVALID_CONFIG`.
#[must_use]
pub fn error_name(code: i16) -> String {
    match ResponseError::try_from_code(code) {
        None => "NONE".to_string(),
        Some(ResponseError::Unknown(c)) => format!("UNKNOWN_ERROR_CODE_{c}"),
        Some(e) => {
            let camel = format!("{e:?}");
            let mut name = String::with_capacity(camel.len() + 8);
            for (i, ch) in camel.chars().enumerate() {
                if ch.is_ascii_uppercase() && i > 0 {
                    name.push('_');
                }
                name.push(ch.to_ascii_uppercase());
            }
            name
        }
    }
}

/// Kafka's `ConfigSource` name of a source code.
#[must_use]
pub fn source_name(source: i8) -> &'static str {
    match source {
        1 => "DYNAMIC_TOPIC_CONFIG",
        2 => "DYNAMIC_BROKER_CONFIG",
        3 => "DYNAMIC_DEFAULT_BROKER_CONFIG",
        4 => "STATIC_BROKER_CONFIG",
        5 => "DEFAULT_CONFIG",
        6 => "DYNAMIC_BROKER_LOGGER_CONFIG",
        7 => "CLIENT_METRICS_CONFIG",
        8 => "GROUP_CONFIG",
        _ => "UNKNOWN",
    }
}

/// The describe report: a heading and a table of NAME, VALUE, SOURCE, READ-ONLY, SENSITIVE.
/// Without `all`, only topic overrides are listed (as `kafka-configs.sh --describe` does).
/// `label` names the entity (`topic t`, `broker 1`).
#[must_use]
pub fn render(rows: &[ConfigRow], is_topic: bool, label: &str, all: bool) -> String {
    let shown: Vec<&ConfigRow> =
        rows.iter().filter(|r| all || !is_topic || r.source == SOURCE_DYNAMIC_TOPIC).collect();
    let mut s = if all {
        format!("All configs for {label}:\n")
    } else {
        format!("Dynamic configs for {label}:\n")
    };
    if shown.is_empty() {
        s.push_str("  (none: every config has its default value; --all lists them)\n");
        return s;
    }
    let value = |r: &ConfigRow| match (&r.value, r.sensitive) {
        (_, true) => "(sensitive)".to_string(),
        (Some(v), false) => v.clone(),
        (None, false) => "null".to_string(),
    };
    let name_width = shown.iter().map(|r| r.name.len()).max().unwrap_or(0).max(4);
    let value_width = shown.iter().map(|r| value(r).len()).max().unwrap_or(0).clamp(5, 40);
    let line = |n: &str, v: &str, src: &str, ro: &str, sens: &str| {
        format!("{n:<name_width$}  {v:<value_width$}  {src:<29}  {ro:<9}  {sens}\n")
    };
    s.push_str(&line("NAME", "VALUE", "SOURCE", "READ-ONLY", "SENSITIVE"));
    for r in shown {
        s.push_str(&line(
            &r.name,
            &value(r),
            source_name(r.source),
            &r.read_only.to_string(),
            &r.sensitive.to_string(),
        ));
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(name: &str, value: &str, source: i8) -> ConfigRow {
        ConfigRow {
            name: name.into(),
            value: Some(value.into()),
            source,
            read_only: false,
            sensitive: false,
        }
    }

    fn pairs(text: &str) -> Vec<(String, String)> {
        parse_add_config(text).expect("parses")
    }

    #[test]
    fn add_config_splits_like_kafka() {
        let kv = |k: &str, v: &str| (k.to_string(), v.to_string());
        assert_eq!(pairs("retention.ms=1000"), [kv("retention.ms", "1000")]);
        assert_eq!(
            pairs("retention.ms = 1000, cleanup.policy=[compact,delete],segment.ms=5"),
            [
                kv("retention.ms", "1000"),
                kv("cleanup.policy", "compact,delete"),
                kv("segment.ms", "5")
            ]
        );
        assert_eq!(pairs("a=[x=1,y=2]"), [kv("a", "x=1,y=2")]);
        assert_eq!(pairs("a="), [kv("a", "")]);
        assert_eq!(pairs("a=[]"), [kv("a", "")]);
        assert_eq!(pairs("a=[b,c],d=e"), [kv("a", "b,c"), kv("d", "e")]);
    }

    #[test]
    fn add_config_refuses_malformed_entries() {
        for bad in
            ["retention.ms", "a=1,b", "=1", "a=1=2", "a=[b,c", "a=b],c", "a=[[b]]", "a=1,a=2"]
        {
            let err = parse_add_config(bad).expect_err(bad).to_string();
            assert!(!err.contains('\n'), "one line: {err}");
        }
        let err = parse_add_config("a=1,b").expect_err("no =").to_string();
        assert!(err.contains("'b'") && err.contains("key=val"), "{err}");
    }

    #[test]
    fn delete_config_splits_on_commas() {
        assert_eq!(parse_delete_config("a, b").expect("ok"), ["a", "b"]);
        assert!(parse_delete_config("a,,b").is_err());
        assert!(parse_delete_config("").is_err());
    }

    #[test]
    fn error_names_are_kafkas() {
        assert_eq!(error_name(40), "INVALID_CONFIG");
        assert_eq!(error_name(3), "UNKNOWN_TOPIC_OR_PARTITION");
        assert_eq!(error_name(42), "INVALID_REQUEST");
        assert_eq!(error_name(0), "NONE");
        assert_eq!(error_name(-1), "UNKNOWN_SERVER_ERROR");
    }

    #[test]
    fn errors_become_one_line_with_the_name() {
        let err = check(40, Some("Invalid value abc\nfor retention.ms")).expect_err("error");
        assert_eq!(err.to_string(), "INVALID_CONFIG: Invalid value abc for retention.ms");
        assert_eq!(check(3, None).expect_err("error").to_string(), "UNKNOWN_TOPIC_OR_PARTITION");
        assert!(check(0, Some("ignored")).is_ok());
    }

    #[test]
    fn render_lists_overrides_or_everything() {
        let rows = vec![
            row("cleanup.policy", "delete", 5),
            row("retention.ms", "2000", 1),
            ConfigRow { sensitive: true, value: None, ..row("secret", "", 4) },
        ];
        let text = render(&rows, true, "topic t", false);
        assert!(text.starts_with("Dynamic configs for topic t:"));
        assert!(text.lines().any(|l| l.split_whitespace().collect::<Vec<_>>()
            == ["retention.ms", "2000", "DYNAMIC_TOPIC_CONFIG", "false", "false"]));
        assert!(!text.contains("cleanup.policy"));
        let text = render(&rows, true, "topic t", true);
        assert!(text.contains("cleanup.policy") && text.contains("DEFAULT_CONFIG"));
        assert!(text.contains("(sensitive)") && text.contains("STATIC_BROKER_CONFIG"));
        let none = render(&rows[..1], true, "topic t", false);
        assert!(none.contains("(none"));
    }

    #[test]
    fn alter_refuses_an_empty_or_contradictory_change() {
        let entity = Entity { topic: Some("t".into()), ..Entity::default() };
        // Refused before any connection, so the unroutable address is never dialled.
        let err = alter("127.0.0.1:1", &entity, &[], &[]).expect_err("empty");
        assert!(err.to_string().contains("nothing to alter"));
        let set = [("retention.ms".to_string(), "1".to_string())];
        let err = alter("127.0.0.1:1", &entity, &set, &["retention.ms".into()]).expect_err("both");
        assert!(err.to_string().contains("both added and deleted"));
    }
}
