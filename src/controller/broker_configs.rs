//! Dynamic broker configs of the [`Controller`]: IncrementalAlterConfigs and AlterConfigs on
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
use super::{Controller, ControllerError};
use crate::types::NodeId;

/// One dynamic broker config change: set (`Some`) or delete (`None`).
pub type BrokerChange = (String, Option<String>);

impl Controller {
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
        records.extend(current.keys().filter(|k| !normalized.contains_key(*k)).map(|k| record(k, None)));
        if validate_only || records.is_empty() {
            return Ok(false);
        }
        self.commit(records)?;
        self.rebuild_image();
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
        let mine = self.dynamic_broker_configs(Some(self.meta.node_id));
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
