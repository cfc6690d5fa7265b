//! Dynamic broker configs of the [`ControllerState`]: IncrementalAlterConfigs and AlterConfigs on
//! BROKER resources, for one broker (`<node id>`) or as the cluster default (`""`), stored in
//! the metadata log as `BrokerConfigRecord`s and replayed at start like topic configs.
//!
//! Runs on the controller shard. After a change (or replay) the controller rebuilds its
//! [`BrokerDefaults`] with this broker's dynamic layers and re-resolves the effective configs
//! of every topic, so the published image carries the new `log.*` defaults to every open log
//! (the shards apply each image's topic configs live) and the new cleaner settings to each
//! shard's cleaner loop. Invariant: the dynamic layers in `defaults` hold only values that
//! pass [`validate_dynamic_configs`] today (a value a newer registry refuses is skipped at
//! replay with a warning, as Kafka skips an invalid dynamic config at start).

use std::collections::BTreeMap;
use std::sync::Arc;

use super::configs::{validate_dynamic_configs, BrokerDefaults, TopicConfig};
use super::records::{BrokerConfigRecord, MetadataRecord};
#[cfg(test)]
use super::Controller;
use super::{ControllerError, ControllerState};
use crate::types::NodeId;

/// One dynamic broker config change: set (`Some`) or delete (`None`).
pub type BrokerChange = (String, Option<String>);

impl ControllerState {
    /// The dynamic configs recorded for `node` (`None`: the cluster default).
    #[must_use]
    pub fn dynamic_broker_configs(&self, node: Option<NodeId>) -> BTreeMap<String, String> {
        self.broker_configs.get(&node).cloned().unwrap_or_default()
    }

    /// Applies `changes` to the dynamic configs of `node` (`None`: the cluster default),
    /// validated as one set the way Kafka validates it; writes one frame unless
    /// `validate_only`. Returns whether anything changed.
    pub fn alter_broker_configs(
        &mut self,
        node: Option<NodeId>,
        changes: &[BrokerChange],
        validate_only: bool,
    ) -> Result<bool, ControllerError> {
        let current = self.dynamic_broker_configs(node);
        let mut wanted = current.clone();
        for (name, value) in changes {
            match value {
                Some(v) => wanted.insert(name.clone(), v.clone()),
                None => wanted.remove(name),
            };
        }
        let normalized = validate_dynamic_configs(&wanted, node.is_some())?;
        let record = |name: &str, value: Option<String>| {
            MetadataRecord::BrokerConfig(BrokerConfigRecord { node, name: name.into(), value })
        };
        let mut records: Vec<MetadataRecord> = normalized
            .iter()
            .filter(|(k, v)| current.get(*k) != Some(*v))
            .map(|(k, v)| record(k, Some(v.clone())))
            .collect();
        records.extend(
            current.keys().filter(|k| !normalized.contains_key(*k)).map(|k| record(k, None)),
        );
        if validate_only || records.is_empty() {
            return Ok(false);
        }
        self.propose(records)?;
        Ok(true)
    }

    /// Applies one recorded change (replay and live alike) and refreshes the defaults.
    pub(super) fn apply_broker_config(&mut self, c: BrokerConfigRecord) {
        let layer = self.broker_configs.entry(c.node).or_default();
        match c.value {
            Some(value) => {
                let one = BTreeMap::from([(c.name.clone(), value)]);
                match validate_dynamic_configs(&one, c.node.is_some()) {
                    Ok(valid) => layer.extend(valid),
                    Err(e) => {
                        tracing::warn!(
                            name = %c.name,
                            node = ?c.node,
                            "ignoring a recorded dynamic broker config: {e}"
                        );
                        layer.remove(&c.name);
                    }
                }
            }
            None => {
                layer.remove(&c.name);
            }
        }
        if self.broker_configs.get(&c.node).is_some_and(BTreeMap::is_empty) {
            self.broker_configs.remove(&c.node);
        }
        self.refresh_broker_defaults();
    }

    /// Rebuilds the defaults with this broker's dynamic layers and re-resolves every topic
    /// whose effective config changes (others keep their `Arc`, so deltas stay small).
    fn refresh_broker_defaults(&mut self) {
        let mine = self.dynamic_broker_configs(Some(self.node_id));
        let default = self.dynamic_broker_configs(None);
        let defaults: Arc<BrokerDefaults> = Arc::new(self.defaults.with_dynamic(mine, default));
        if defaults == self.defaults {
            return;
        }
        self.defaults = Arc::clone(&defaults);
        for topic in self.topics.values_mut() {
            let config = TopicConfig::resolve(&topic.configs, &defaults);
            if config != topic.config {
                Arc::make_mut(topic).config = config;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use super::super::configs::{BrokerSource, DynamicConfigError};
    use super::super::NewTopic;
    use super::*;

    fn open(dir: &Path, statics: &[(&str, &str)]) -> Controller {
        let defaults = BrokerDefaults::from_settings(statics.iter().copied()).unwrap();
        Controller::open(dir, NodeId(1), 1, defaults).unwrap()
    }

    fn set(name: &str, value: &str) -> BrokerChange {
        (name.into(), Some(value.into()))
    }

    #[test]
    fn precedence_is_per_broker_then_default_then_static() {
        let dir = tempfile::tempdir().unwrap();
        let mut c = open(dir.path(), &[("log.retention.bytes", "1000")]);
        c.create_topics(&[NewTopic { num_partitions: 1, ..NewTopic::with_defaults("t") }], false);
        let retention = |c: &Controller| c.image().topic("t").unwrap().config.retention_bytes;
        assert_eq!(retention(&c), 1000);
        assert!(c
            .alter_broker_configs(None, &[set("log.retention.bytes", "2000")], false)
            .unwrap());
        assert_eq!(retention(&c), 2000);
        let me = Some(NodeId(1));
        c.alter_broker_configs(me, &[set("log.retention.bytes", "3000")], false).unwrap();
        assert_eq!(retention(&c), 3000);
        let d = c.image().broker_defaults.clone();
        assert_eq!(
            d.explicit("log.retention.bytes"),
            Some(("3000".into(), BrokerSource::DynamicBroker))
        );
        assert_eq!(d.layers_of("log.retention.bytes").len(), 3);
        // Deleting the per-broker value falls back to the cluster default.
        c.alter_broker_configs(me, &[("log.retention.bytes".into(), None)], false).unwrap();
        assert_eq!(retention(&c), 2000);
        // A topic override still wins over every broker layer.
        c.alter_topic_configs("t", &[set("retention.bytes", "7")], false).unwrap();
        assert_eq!(retention(&c), 7);
    }

    #[test]
    fn dynamic_configs_survive_a_restart() {
        let dir = tempfile::tempdir().unwrap();
        {
            let mut c = open(dir.path(), &[]);
            c.alter_broker_configs(None, &[set("log.cleaner.backoff.ms", "1000")], false).unwrap();
            let me = Some(NodeId(1));
            c.alter_broker_configs(me, &[set("log.segment.bytes", "2097152")], false).unwrap();
        }
        let c = open(dir.path(), &[]);
        let d = c.image().broker_defaults.clone();
        assert_eq!(d.long("log.cleaner.backoff.ms"), 1000);
        assert_eq!(d.long("log.segment.bytes"), 2_097_152);
        assert_eq!(c.dynamic_broker_configs(None).len(), 1);
    }

    #[test]
    fn refusals_use_kafkas_rules() {
        let dir = tempfile::tempdir().unwrap();
        let mut c = open(dir.path(), &[]);
        let err = |c: &mut Controller, change: BrokerChange| match c
            .alter_broker_configs(None, &[change], false)
            .unwrap_err()
        {
            ControllerError::DynamicConfig(e) => e,
            other => panic!("{other}"),
        };
        assert_eq!(err(&mut c, set("no.such", "1")), DynamicConfigError::Unknown("no.such".into()));
        let e = err(&mut c, set("num.partitions", "3"));
        assert_eq!(e.to_string(), "Cannot update these configs dynamically: Set(num.partitions)");
        // The coarse synonyms are read-only in Kafka; the precise one is dynamic.
        assert!(matches!(
            err(&mut c, set("log.retention.hours", "1")),
            DynamicConfigError::ReadOnly(_)
        ));
        let e = err(&mut c, set("log.cleaner.backoff.ms", "abc"));
        assert_eq!(
            e.to_string(),
            "Invalid value abc for configuration log.cleaner.backoff.ms: Not a number of type LONG"
        );
        assert!(matches!(
            err(&mut c, set("log.segment.bytes", "10")),
            DynamicConfigError::Invalid(_)
        ));
        // validate_only writes nothing.
        let before = c.image().version;
        assert!(!c.alter_broker_configs(None, &[set("log.retention.ms", "5")], true).unwrap());
        assert_eq!(c.image().version, before);
        assert!(c.dynamic_broker_configs(None).is_empty());
    }

    #[test]
    fn unchanged_topics_keep_their_image() {
        let dir = tempfile::tempdir().unwrap();
        let mut c = open(dir.path(), &[]);
        let t = |n: &str| NewTopic { num_partitions: 1, ..NewTopic::with_defaults(n) };
        c.create_topics(&[t("plain"), t("pinned")], false);
        c.alter_topic_configs("pinned", &[set("retention.ms", "5")], false).unwrap();
        let before = c.image();
        c.alter_broker_configs(None, &[set("log.retention.ms", "60000")], false).unwrap();
        let after = c.image();
        let d = after.delta_from(&before);
        let names: Vec<&str> = d.reconfigured.iter().map(|t| t.name.as_str()).collect();
        assert_eq!(names, ["plain"]);
        assert_eq!(after.topic("plain").unwrap().config.retention_ms, 60_000);
        assert!(Arc::ptr_eq(after.topic("pinned").unwrap(), before.topic("pinned").unwrap()));
    }
}
