//! Kafka broker settings by Kafka's own names, in both places an operator sets them:
//! a `serve` flag per setting (Kafka's name with dots as dashes: `group.min.session.timeout.ms`
//! is `--group-min-session-timeout-ms`) and a TOML key (Kafka's dotted name, quoted or bare:
//! bare dots make nested tables, which are flattened back to the dotted name).
//!
//! The names, types, defaults and validators come from the broker-config registry
//! ([`crate::controller::configs`]), so a setting added there is a flag, a file key and a
//! DescribeConfigs entry at once. Runs on the main thread at start-up only.

use std::collections::BTreeMap;
use std::sync::OnceLock;

use clap::{Arg, ArgAction, ArgMatches, Command};

use super::units;
use super::ConfigError;
use crate::controller::configs::{broker_config_def, broker_setting_names, ConfigType};

/// Every broker setting as `(Kafka name, flag name)`, built once (clap wants `'static`).
fn flags() -> &'static [(&'static str, &'static str)] {
    static FLAGS: OnceLock<Vec<(&'static str, &'static str)>> = OnceLock::new();
    FLAGS.get_or_init(|| {
        broker_setting_names()
            .into_iter()
            .map(|name| {
                let flag: &'static str = Box::leak(flag_name(name).into_boxed_str());
                (name, flag)
            })
            .collect()
    })
}

/// The `serve` flag of a Kafka setting: dots become dashes.
#[must_use]
pub fn flag_name(kafka_name: &str) -> String {
    kafka_name.replace('.', "-")
}

/// Kafka broker settings given as `serve` flags, by Kafka name, as typed (validated later).
#[derive(Debug, Default, Clone)]
pub struct KafkaArgs {
    pub values: BTreeMap<String, String>,
}

impl clap::FromArgMatches for KafkaArgs {
    fn from_arg_matches(matches: &ArgMatches) -> Result<Self, clap::Error> {
        let values = flags()
            .iter()
            .filter_map(|(name, _)| {
                matches.get_one::<String>(name).map(|v| ((*name).to_string(), v.clone()))
            })
            .collect();
        Ok(Self { values })
    }

    fn update_from_arg_matches(&mut self, matches: &ArgMatches) -> Result<(), clap::Error> {
        *self = Self::from_arg_matches(matches)?;
        Ok(())
    }
}

impl clap::Args for KafkaArgs {
    fn augment_args(cmd: Command) -> Command {
        let mut cmd =
            cmd.next_help_heading("Kafka broker settings (Kafka's names, dots as dashes)");
        for (name, flag) in flags() {
            let Some((kind, _, default, _)) = broker_config_def(name) else { continue };
            let help =
                format!("{name} ({}, default {})", kind_name(kind), default.unwrap_or("null"));
            cmd = cmd.arg(
                Arg::new(*name)
                    .long(*flag)
                    .value_name(value_name(kind))
                    .value_parser(unit_parser(name, kind))
                    .action(ArgAction::Set)
                    // -1 means "unlimited" for many Kafka settings.
                    .allow_negative_numbers(true)
                    .help(help),
            );
        }
        cmd
    }

    fn augment_args_for_update(cmd: Command) -> Command {
        Self::augment_args(cmd)
    }
}

/// Flags of whole-number settings whose name ends in a unit take that unit with a suffix too
/// (`--log-cleaner-backoff-ms 15s`, `--log-segment-bytes 1GiB`), as every CLI duration and
/// size does (`cli::units`); the value is passed on as a plain number in the name's unit, so
/// the registry's validator sees what a TOML file would give. -1 and other plain numbers
/// pass unchanged.
fn unit_parser(name: &str, kind: ConfigType) -> fn(&str) -> Result<String, String> {
    let whole = matches!(kind, ConfigType::Int | ConfigType::Long);
    let plain = |text: &str| Ok(text.to_string());
    if !whole {
        return plain;
    }
    fn with(text: &str, parse: fn(&str) -> Result<u64, String>) -> Result<String, String> {
        if text.trim_start().starts_with('-') || text.trim().parse::<i64>().is_ok() {
            Ok(text.to_string())
        } else {
            parse(text).map(|n| n.to_string())
        }
    }
    if name.ends_with(".ms") {
        |text| with(text, units::millis::<u64>)
    } else if name.ends_with(".bytes") || name.ends_with(".size") || name.ends_with(".second") {
        |text| with(text, units::bytes::<u64>)
    } else {
        plain
    }
}

fn kind_name(kind: ConfigType) -> &'static str {
    match kind {
        ConfigType::Boolean => "boolean",
        ConfigType::Int => "int",
        ConfigType::Long => "long",
        ConfigType::Double => "double",
        ConfigType::List => "list",
        ConfigType::String | ConfigType::Class => "string",
        ConfigType::Password => "password",
    }
}

fn value_name(kind: ConfigType) -> &'static str {
    match kind {
        ConfigType::Boolean => "BOOL",
        ConfigType::Int | ConfigType::Long => "N",
        ConfigType::Double => "X",
        ConfigType::List => "A,B",
        ConfigType::String | ConfigType::Class => "TEXT",
        ConfigType::Password => "SECRET",
    }
}

/// Flattens TOML keys into Kafka's dotted names with their values as text: `a.b = 1` (a
/// nested table) and `"a.b" = 1` both give `("a.b", "1")`; arrays become comma lists.
pub fn flatten(
    prefix: &str,
    table: toml::Table,
    out: &mut BTreeMap<String, String>,
) -> Result<(), ConfigError> {
    for (key, value) in table {
        let name = if prefix.is_empty() { key } else { format!("{prefix}.{key}") };
        let text = match value {
            toml::Value::Table(inner) => {
                flatten(&name, inner, out)?;
                continue;
            }
            toml::Value::String(s) => s,
            toml::Value::Integer(n) => n.to_string(),
            toml::Value::Float(x) => x.to_string(),
            toml::Value::Boolean(b) => b.to_string(),
            toml::Value::Array(items) => items
                .into_iter()
                .map(|v| match v {
                    toml::Value::String(s) => s,
                    other => other.to_string(),
                })
                .collect::<Vec<_>>()
                .join(","),
            toml::Value::Datetime(_) => {
                return Err(ConfigError::Invalid {
                    name: "config file",
                    reason: format!("{name}: dates are not a setting value"),
                })
            }
        };
        if broker_config_def(&name).is_none() {
            return Err(ConfigError::UnknownSetting(name));
        }
        if out.insert(name.clone(), text).is_some() {
            return Err(ConfigError::Invalid {
                name: "config file",
                reason: format!("{name} is set twice"),
            });
        }
    }
    Ok(())
}

/// Typed reads of validated settings: the explicit value, else the registry default.
pub struct Settings<'a>(pub &'a BTreeMap<String, String>);

impl Settings<'_> {
    pub(crate) fn text(&self, name: &str) -> Option<String> {
        self.0
            .get(name)
            .cloned()
            .or_else(|| broker_config_def(name).and_then(|(_, _, d, _)| d).map(str::to_string))
    }

    /// An INT or LONG setting (validated before, so it parses; a registry bug panics in tests).
    #[must_use]
    pub fn long(&self, name: &str) -> i64 {
        let text = self.text(name).unwrap_or_default();
        text.parse().unwrap_or_else(|_| unreachable!("{name}={text} was validated as a number"))
    }

    #[must_use]
    pub fn int(&self, name: &str) -> i32 {
        i32::try_from(self.long(name)).unwrap_or(i32::MAX)
    }

    #[must_use]
    pub fn double(&self, name: &str) -> f64 {
        self.text(name).and_then(|t| t.parse().ok()).unwrap_or(f64::MAX)
    }

    #[must_use]
    pub fn boolean(&self, name: &str) -> bool {
        self.text(name).as_deref() == Some("true")
    }
}
