//! DescribeConfigs (API key 32), v1–4, for topics and for this broker: every config with its
//! value, source (DYNAMIC_TOPIC_CONFIG / STATIC_BROKER_CONFIG / DEFAULT_CONFIG), synonyms
//! when asked, type and documentation (v3+), read-only and sensitivity flags.
//!
//! Read-only over a [`MetadataImage`]: runs on any shard. Sources and synonym order follow
//! Kafka: a topic override, then each broker synonym set in the server config, then the
//! default under the name of the broker config that supplies it.

use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::describe_configs_response::{
    DescribeConfigsResourceResult, DescribeConfigsResult, DescribeConfigsSynonym,
};
use kafka_protocol::messages::{DescribeConfigsRequest, DescribeConfigsResponse};

use super::sb;
use crate::controller::configs::{
    broker_config_def, broker_setting_names, BrokerDefaults, ConfigType, TOPIC_CONFIGS,
};
use crate::controller::{validate_topic_name, MetadataImage, TopicImage};

/// Kafka 4.x's floor (KIP-896) to the newest schema.
pub const VERSIONS: (i16, i16) = (1, 4);

/// Kafka's `ConfigSource` codes.
pub const SOURCE_TOPIC: i8 = 1;
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
            for s in d.synonyms {
                if let Some(v) = broker.settings.get(s.name) {
                    synonyms.push((s.name.to_string(), Some(v.clone()), SOURCE_STATIC_BROKER));
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
            let (value, source) =
                crate::controller::configs::effective_value(d, &topic.configs, broker);
            let source = match source {
                crate::controller::configs::ValueSource::Topic => SOURCE_TOPIC,
                crate::controller::configs::ValueSource::StaticBroker(_) => SOURCE_STATIC_BROKER,
                crate::controller::configs::ValueSource::Default => SOURCE_DEFAULT,
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
        // The cluster-wide dynamic defaults: Shardlog has no dynamic broker configs yet.
        return Ok(Vec::new());
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

/// Every broker config Shardlog knows, sorted by name, with its value and source.
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
    for name in names {
        let Some((kind, _, default, doc)) = broker_config_def(name) else { continue };
        let explicit = image.broker_defaults.value_of(name).filter(|(_, set)| *set);
        let mut synonyms = Vec::new();
        if let Some((v, _)) = &explicit {
            synonyms.push((name.to_string(), Some(v.clone()), SOURCE_STATIC_BROKER));
        }
        if let Some(d) = default {
            synonyms.push((name.to_string(), Some(d.to_string()), SOURCE_DEFAULT));
        }
        let (value, source) = match explicit {
            Some((v, _)) => (Some(v), SOURCE_STATIC_BROKER),
            None => (default.map(str::to_string), SOURCE_DEFAULT),
        };
        entries.push(ConfigEntry {
            name: name.to_string(),
            value,
            source,
            // Dynamic broker configs (AlterConfigs on a broker) are not implemented.
            read_only: true,
            kind,
            doc,
            synonyms,
        });
    }
    entries.sort_by(|a, b| a.name.cmp(&b.name));
    entries.retain(|e| keys.is_none_or(|k| k.contains(&e.name.as_str())));
    entries
}

fn to_wire(
    e: ConfigEntry,
    request: &DescribeConfigsRequest,
    version: i16,
) -> DescribeConfigsResourceResult {
    let synonyms = if request.include_synonyms {
        e.synonyms
            .into_iter()
            .map(|(n, v, s)| {
                DescribeConfigsSynonym::default()
                    .with_name(sb(n))
                    .with_value(v.map(sb))
                    .with_source(s)
            })
            .collect()
    } else {
        Vec::new()
    };
    let mut r = DescribeConfigsResourceResult::default()
        .with_name(sb(e.name))
        .with_value(e.value.map(sb))
        .with_read_only(e.read_only)
        .with_config_source(e.source)
        .with_is_sensitive(false)
        .with_synonyms(synonyms);
    if version >= 3 {
        r = r.with_config_type(e.kind.describe_code());
        r = r.with_documentation(request.include_documentation.then(|| sb(e.doc)));
    }
    r
}
