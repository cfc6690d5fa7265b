//! DescribeConfigs (API key 32), v1–4, for topics, for this broker and for the cluster-wide
//! broker defaults (the BROKER resource `""`): every config with its value, source
//! (DYNAMIC_TOPIC_CONFIG / DYNAMIC_BROKER_CONFIG / DYNAMIC_DEFAULT_BROKER_CONFIG /
//! STATIC_BROKER_CONFIG / DEFAULT_CONFIG), synonyms when asked, type and documentation (v3+),
//! read-only and sensitivity flags.
//!
//! Read-only over a [`MetadataImage`]: runs on any shard. Sources and synonym order follow
//! Kafka (`ConfigHelper`): a topic override, then the broker synonyms set dynamically for
//! this broker, then those set as the dynamic cluster default, then the static ones (each
//! layer in the synonyms' priority order), then the default under the name of the broker
//! config that supplies it. The default resource lists only the dynamic defaults set, and
//! its synonyms leave out per-broker values, as Kafka's do.

use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::describe_configs_response::{
    DescribeConfigsResourceResult, DescribeConfigsResult, DescribeConfigsSynonym,
};
use kafka_protocol::messages::{DescribeConfigsRequest, DescribeConfigsResponse};

use super::sb;
use crate::controller::configs::{
    broker_config_def, broker_setting_names, effective_value, update_mode, BrokerDefaults,
    BrokerSource, ConfigType, ValueSource, TOPIC_CONFIGS,
};
use crate::controller::{validate_topic_name, MetadataImage, TopicImage};

/// Kafka 4.x's floor (KIP-896) to the newest schema.
pub const VERSIONS: (i16, i16) = (1, 4);

/// Kafka's `ConfigSource` codes.
pub const SOURCE_TOPIC: i8 = 1;
pub const SOURCE_DYNAMIC_BROKER: i8 = 2;
pub const SOURCE_DYNAMIC_DEFAULT: i8 = 3;
pub const SOURCE_STATIC_BROKER: i8 = 4;
pub const SOURCE_DEFAULT: i8 = 5;
/// Kafka's resource type codes.
pub const RESOURCE_TOPIC: i8 = 2;
pub const RESOURCE_BROKER: i8 = 4;

/// One described config, independent of the response version.
#[derive(Clone, Debug, PartialEq)]
pub struct ConfigEntry {
    pub name: String,
    pub value: Option<String>,
    pub source: i8,
    pub read_only: bool,
    pub kind: ConfigType,
    pub doc: &'static str,
    /// (name, value, source), highest priority first.
    pub synonyms: Vec<(String, Option<String>, i8)>,
}

/// Describes the requested resources.
#[must_use]
pub fn handle(
    image: &MetadataImage,
    request: &DescribeConfigsRequest,
    version: i16,
) -> DescribeConfigsResponse {
    let results = request
        .resources
        .iter()
        .map(|r| {
            let keys: Option<Vec<&str>> =
                r.configuration_keys.as_ref().map(|k| k.iter().map(|s| s.as_str()).collect());
            let name = r.resource_name.as_str();
            let entries = match r.resource_type {
                RESOURCE_TOPIC => describe_topic(image, name, keys.as_deref()),
                RESOURCE_BROKER => describe_broker(image, name, keys.as_deref()),
                other => Err((
                    ResponseError::InvalidRequest,
                    format!("Shardlog cannot describe configs of resource type {other}"),
                )),
            };
            let result = DescribeConfigsResult::default()
                .with_resource_type(r.resource_type)
                .with_resource_name(r.resource_name.clone());
            match entries {
                Ok(entries) => result.with_error_message(None).with_configs(
                    entries.into_iter().map(|e| to_wire(e, request, version)).collect(),
                ),
                Err((code, message)) => {
                    result.with_error_code(code.code()).with_error_message(Some(sb(message)))
                }
            }
        })
        .collect();
    DescribeConfigsResponse::default().with_results(results)
}

fn describe_topic(
    image: &MetadataImage,
    name: &str,
    keys: Option<&[&str]>,
) -> Result<Vec<ConfigEntry>, (ResponseError, String)> {
    validate_topic_name(name).map_err(|m| (ResponseError::InvalidTopicException, m))?;
    let topic = image.topic(name).ok_or_else(|| {
        (ResponseError::UnknownTopicOrPartition, format!("The topic '{name}' does not exist."))
    })?;
    Ok(topic_config_entries(topic, &image.broker_defaults, keys))
}

/// Every (or each requested) topic config of `topic` with its effective value and source.
#[must_use]
pub fn topic_config_entries(
    topic: &TopicImage,
    broker: &BrokerDefaults,
    keys: Option<&[&str]>,
) -> Vec<ConfigEntry> {
    TOPIC_CONFIGS
        .iter()
        .filter(|d| !d.internal || topic.configs.contains_key(d.name))
        .filter(|d| keys.is_none_or(|k| k.contains(&d.name)))
        .map(|d| {
            let mut synonyms = Vec::new();
            if let Some(v) = topic.configs.get(d.name) {
                synonyms.push((d.name.to_string(), Some(v.clone()), SOURCE_TOPIC));
            }
            for layer in BrokerSource::ALL {
                for s in d.synonyms {
                    if let Some(v) = broker.layer(layer).get(s.name) {
                        synonyms.push((s.name.to_string(), Some(v.clone()), source_code(layer)));
                    }
                }
            }
            let default = d
                .synonyms
                .iter()
                .find_map(|s| s.default.map(|v| (s.name, v)))
                .or(d.default.map(|v| (d.name, v)));
            if let Some((n, v)) = default {
                synonyms.push((n.to_string(), Some(v.to_string()), SOURCE_DEFAULT));
            }
            let (value, source) = effective_value(d, &topic.configs, broker);
            let source = match source {
                ValueSource::Topic => SOURCE_TOPIC,
                ValueSource::DynamicBroker(_) => SOURCE_DYNAMIC_BROKER,
                ValueSource::DynamicDefault(_) => SOURCE_DYNAMIC_DEFAULT,
                ValueSource::StaticBroker(_) => SOURCE_STATIC_BROKER,
                ValueSource::Default => SOURCE_DEFAULT,
            };
            ConfigEntry {
                name: d.name.to_string(),
                value,
                source,
                read_only: false,
                kind: d.kind,
                doc: d.doc,
                synonyms,
            }
        })
        .collect()
}

fn describe_broker(
    image: &MetadataImage,
    name: &str,
    keys: Option<&[&str]>,
) -> Result<Vec<ConfigEntry>, (ResponseError, String)> {
    if name.is_empty() {
        return Ok(cluster_default_entries(&image.broker_defaults, keys));
    }
    let id: i32 = name.parse().map_err(|_| {
        (ResponseError::InvalidRequest, format!("Broker id must be an integer, but it is: {name}"))
    })?;
    if id != image.node_id.0 {
        return Err((
            ResponseError::InvalidRequest,
            format!(
                "Unexpected broker id, expected {} or empty string, but received {name}",
                image.node_id
            ),
        ));
    }
    Ok(broker_config_entries(image, keys))
}

/// Kafka's `ConfigSource` code of a broker layer.
#[must_use]
pub fn source_code(layer: BrokerSource) -> i8 {
    match layer {
        BrokerSource::DynamicBroker => SOURCE_DYNAMIC_BROKER,
        BrokerSource::DynamicDefault => SOURCE_DYNAMIC_DEFAULT,
        BrokerSource::Static => SOURCE_STATIC_BROKER,
    }
}

/// Every broker config Shardlog knows, sorted by name, with its value in force and source
/// (dynamic for this broker > dynamic cluster default > static > default).
#[must_use]
pub fn broker_config_entries(image: &MetadataImage, keys: Option<&[&str]>) -> Vec<ConfigEntry> {
    let names = broker_setting_names();
    let node = image.node_id.to_string();
    let mut entries: Vec<ConfigEntry> = ["broker.id", "node.id"]
        .into_iter()
        .map(|n| ConfigEntry {
            name: n.to_string(),
            value: Some(node.clone()),
            source: SOURCE_STATIC_BROKER,
            read_only: true,
            kind: ConfigType::Int,
            doc: "The node id of this server.",
            synonyms: vec![(n.to_string(), Some(node.clone()), SOURCE_STATIC_BROKER)],
        })
        .collect();
    let broker = &image.broker_defaults;
    for name in names {
        let layers: Vec<(String, i8)> =
            broker.layers_of(name).into_iter().map(|(v, l)| (v, source_code(l))).collect();
        entries.extend(broker_entry(name, &layers));
    }
    entries.sort_by(|a, b| a.name.cmp(&b.name));
    entries.retain(|e| keys.is_none_or(|k| k.contains(&e.name.as_str())));
    entries
}

/// The dynamic cluster defaults set (the BROKER resource `""`), sorted by name; synonyms
/// leave out per-broker values, as Kafka's do.
#[must_use]
pub fn cluster_default_entries(broker: &BrokerDefaults, keys: Option<&[&str]>) -> Vec<ConfigEntry> {
    broker
        .dynamic_default
        .keys()
        .filter(|n| keys.is_none_or(|k| k.contains(&n.as_str())))
        .filter_map(|name| {
            let layers: Vec<(String, i8)> = broker
                .layers_of(name)
                .into_iter()
                .filter(|(_, l)| *l != BrokerSource::DynamicBroker)
                .map(|(v, l)| (v, source_code(l)))
                .collect();
            broker_entry(name, &layers)
        })
        .collect()
}

/// One broker config from its explicit values (highest precedence first) and its default.
fn broker_entry(name: &str, layers: &[(String, i8)]) -> Option<ConfigEntry> {
    let (kind, _, default, doc) = broker_config_def(name)?;
    let mut synonyms: Vec<(String, Option<String>, i8)> =
        layers.iter().map(|(v, s)| (name.to_string(), Some(v.clone()), *s)).collect();
    if let Some(d) = default {
        synonyms.push((name.to_string(), Some(d.to_string()), SOURCE_DEFAULT));
    }
    let (value, source) = match layers.first() {
        Some((v, s)) => (Some(v.clone()), *s),
        None => (default.map(str::to_string), SOURCE_DEFAULT),
    };
    Some(ConfigEntry {
        name: name.to_string(),
        value,
        source,
        read_only: !update_mode(name).is_some_and(|m| m.is_dynamic()),
        kind,
        doc,
        synonyms,
    })
}

fn to_wire(
    e: ConfigEntry,
    request: &DescribeConfigsRequest,
    version: i16,
) -> DescribeConfigsResourceResult {
    let sensitive = e.kind == ConfigType::Password;
    let synonyms = if request.include_synonyms {
        e.synonyms
            .into_iter()
            .map(|(n, v, s)| {
                DescribeConfigsSynonym::default()
                    .with_name(sb(n))
                    .with_value(if sensitive { None } else { v.map(sb) })
                    .with_source(s)
            })
            .collect()
    } else {
        Vec::new()
    };
    let value = if sensitive { None } else { e.value.map(sb) };
    let mut r = DescribeConfigsResourceResult::default()
        .with_name(sb(e.name))
        .with_value(value)
        .with_read_only(e.read_only)
        .with_config_source(e.source)
        .with_is_sensitive(sensitive)
        .with_synonyms(synonyms);
    if version >= 3 {
        r = r.with_config_type(e.kind.describe_code());
        r = r.with_documentation(request.include_documentation.then(|| sb(e.doc)));
    }
    r
}
