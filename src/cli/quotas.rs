//! `shardlog quotas describe|alter`: client quotas without a Java tool, over the Kafka
//! protocol (DescribeClientQuotas, AlterClientQuotas), like `kafka-configs.sh --entity-type
//! users|clients`. An entity is `--user U` / `--user-default` and/or `--client-id C` /
//! `--client-default`; `describe` without one lists every entity. Byte rates take units
//! (`producer_byte_rate=1MiB` is 1 MiB/s).
//!
//! Runs in the CLI process (blocking sockets through [`crate::protocol::blocking`]), never
//! inside the broker.

use std::io::Write as _;

use anyhow::bail;
use clap::{Args, Subcommand};
use kafka_protocol::messages::alter_client_quotas_request::{EntityData, EntryData, OpData};
use kafka_protocol::messages::describe_client_quotas_request::ComponentData;
use kafka_protocol::messages::{
    AlterClientQuotasRequest, AlterClientQuotasResponse, ApiKey, DescribeClientQuotasRequest,
    DescribeClientQuotasResponse,
};
use kafka_protocol::protocol::StrBytes;

use super::configs::{check, parse_add_config};
use crate::cli::ClientArgs;
use crate::quota::{CONSUMER_BYTE_RATE, ENTITY_CLIENT_ID, ENTITY_USER, PRODUCER_BYTE_RATE};

/// The client id of every request `shardlog quotas` sends.
const CLIENT_ID: &str = "shardlog-quotas";
const QUOTAS_VERSION: i16 = 1;
const MATCH_EXACT: i8 = 0;
const MATCH_DEFAULT: i8 = 1;
const MATCH_ANY: i8 = 2;

#[derive(Args, Debug, Clone)]
pub struct QuotasArgs {
    /// The broker (`--bootstrap-server`, `--bootstrap`, `-b`), accepted anywhere on the line.
    #[command(flatten)]
    pub client: ClientArgs,
    /// `--user`, `--password`, `--sasl-mechanism`: log in on a SASL listener.
    #[command(flatten)]
    pub sasl: super::sasl::SaslArgs,
    #[command(subcommand)]
    pub command: QuotasCommand,
}

/// One quota entity as flags.
#[derive(Args, Debug, Clone, Default)]
pub struct EntityArgs {
    /// A client id.
    #[arg(long, conflicts_with = "client_default")]
    pub client_id: Option<String>,
    /// The `<default>` client id.
    #[arg(long)]
    pub client_default: bool,
    /// A user (principal name; `ANONYMOUS` without authentication).
    #[arg(long, conflicts_with = "user_default")]
    pub user: Option<String>,
    /// The `<default>` user.
    #[arg(long)]
    pub user_default: bool,
}

#[derive(Subcommand, Debug, Clone)]
pub enum QuotasCommand {
    /// The quotas of an entity (exactly it), or of every entity without one.
    Describe {
        #[command(flatten)]
        entity: EntityArgs,
    },
    /// Set and/or remove quota values of one entity.
    Alter {
        #[command(flatten)]
        entity: EntityArgs,
        /// Values to set, `k=v[,k=v]` (byte rates take units: `1MiB`).
        #[arg(long, value_name = "K=V,...")]
        add: Option<String>,
        /// Keys to remove, `k[,k]`.
        #[arg(long, value_name = "K,...")]
        delete: Option<String>,
    },
}

impl EntityArgs {
    /// (entity type, name) parts; `None` name: `<default>`.
    fn parts(&self) -> Vec<(&'static str, Option<String>)> {
        let mut parts = Vec::new();
        if self.user.is_some() || self.user_default {
            parts.push((ENTITY_USER, self.user.clone()));
        }
        if self.client_id.is_some() || self.client_default {
            parts.push((ENTITY_CLIENT_ID, self.client_id.clone()));
        }
        parts
    }
}

fn sb(s: &str) -> StrBytes {
    StrBytes::from_string(s.to_string())
}

/// A quota value from the command line: byte rates with units, others plain numbers.
fn parse_value(key: &str, text: &str) -> anyhow::Result<f64> {
    let parsed = if key == PRODUCER_BYTE_RATE || key == CONSUMER_BYTE_RATE {
        crate::cli::units::bytes_per_second(text).map_err(anyhow::Error::msg)
    } else {
        text.trim().parse::<f64>().map_err(|e| anyhow::anyhow!("{key}={text}: {e}"))
    };
    parsed.map(|v| if key.ends_with("_byte_rate") { v.round() } else { v })
}

/// One line per entity: `user=U client-id=C: k=v, k=v`.
fn render(resp: &DescribeClientQuotasResponse) -> String {
    let mut lines: Vec<String> = resp
        .entries
        .iter()
        .flatten()
        .map(|e| {
            let entity: Vec<String> = e
                .entity
                .iter()
                .map(|p| {
                    let name = p.entity_name.as_ref().map_or("<default>", |n| n.as_str());
                    format!("{}={name}", p.entity_type.as_str())
                })
                .collect();
            let values: Vec<String> =
                e.values.iter().map(|v| format!("{}={}", v.key.as_str(), v.value)).collect();
            format!("{}: {}\n", entity.join(" "), values.join(", "))
        })
        .collect();
    lines.sort();
    lines.concat()
}

/// Runs the command and prints its report on stdout.
pub fn run(args: QuotasArgs) -> anyhow::Result<()> {
    args.sasl.install();
    let mut conn = super::sasl::connect(args.client.bootstrap(), CLIENT_ID)?;
    let mut out = std::io::stdout().lock();
    match args.command {
        QuotasCommand::Describe { entity } => {
            let parts = entity.parts();
            let components: Vec<ComponentData> = if parts.is_empty() {
                vec![ComponentData::default()
                    .with_entity_type(sb(ENTITY_CLIENT_ID))
                    .with_match_type(MATCH_ANY)]
            } else {
                parts
                    .iter()
                    .map(|(kind, name)| {
                        ComponentData::default()
                            .with_entity_type(sb(kind))
                            .with_match_type(if name.is_some() {
                                MATCH_EXACT
                            } else {
                                MATCH_DEFAULT
                            })
                            .with_match(name.as_deref().map(sb))
                    })
                    .collect()
            };
            // Without an entity: everything (no component, not strict).
            let (components, strict) =
                if parts.is_empty() { (Vec::new(), false) } else { (components, true) };
            let req = DescribeClientQuotasRequest::default()
                .with_components(components)
                .with_strict(strict);
            let resp: DescribeClientQuotasResponse =
                conn.call(ApiKey::DescribeClientQuotas, QUOTAS_VERSION, &req)?;
            check(resp.error_code, resp.error_message.as_deref())?;
            out.write_all(render(&resp).as_bytes())?;
        }
        QuotasCommand::Alter { entity, add, delete } => {
            let parts = entity.parts();
            if parts.is_empty() {
                bail!("alter needs an entity: --client-id/--client-default and/or --user/--user-default");
            }
            let mut ops = Vec::new();
            for (key, value) in
                add.as_deref().map(parse_add_config).transpose()?.unwrap_or_default()
            {
                let v = parse_value(&key, &value)?;
                ops.push(OpData::default().with_key(sb(&key)).with_value(v));
            }
            for key in delete.iter().flat_map(|d| d.split(',')).map(str::trim) {
                if !key.is_empty() {
                    ops.push(OpData::default().with_key(sb(key)).with_remove(true));
                }
            }
            if ops.is_empty() {
                bail!("nothing to alter: give --add k=v and/or --delete k");
            }
            let entity_data = parts
                .iter()
                .map(|(kind, name)| {
                    EntityData::default()
                        .with_entity_type(sb(kind))
                        .with_entity_name(name.as_deref().map(sb))
                })
                .collect();
            let req = AlterClientQuotasRequest::default()
                .with_entries(vec![EntryData::default().with_entity(entity_data).with_ops(ops)]);
            let resp: AlterClientQuotasResponse =
                conn.call(ApiKey::AlterClientQuotas, QUOTAS_VERSION, &req)?;
            for e in &resp.entries {
                check(e.error_code, e.error_message.as_deref())?;
            }
            let names: Vec<String> = parts
                .iter()
                .map(|(k, n)| format!("{k}={}", n.as_deref().unwrap_or("<default>")))
                .collect();
            writeln!(out, "Altered quotas of {}.", names.join(" "))?;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn byte_rates_take_units() {
        assert_eq!(parse_value(PRODUCER_BYTE_RATE, "1MiB").unwrap(), 1_048_576.0);
        assert_eq!(parse_value(CONSUMER_BYTE_RATE, "2048").unwrap(), 2048.0);
        assert_eq!(parse_value("request_percentage", "12.5").unwrap(), 12.5);
        assert!(parse_value("request_percentage", "x").is_err());
    }
}
