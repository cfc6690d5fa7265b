//! Client quotas of the [`ControllerState`]: AlterClientQuotas changes for client-id entities
//! (one client id, or `<default>`), validated as Kafka validates them, stored in the metadata
//! log as `ClientQuotaRecord`s, replayed at start, and published in the metadata image so
//! every shard enforces them from its next request.
//!
//! Runs on the controller shard. Invariant: `client_quotas` holds only values that pass
//! [`crate::quota::validate`] (a recorded value a newer rule refuses is skipped at replay
//! with a warning).

use std::sync::Arc;

use super::records::{ClientQuotaRecord, EntityPart, MetadataRecord};
#[cfg(test)]
use super::Controller;
use super::{ControllerError, ControllerState};
use crate::quota::{validate, ClientEntity, ClientQuotaConfigs, ENTITY_CLIENT_ID};

/// One quota change: key and new value (`None`: remove).
pub type QuotaChange = (String, Option<f64>);

impl ControllerState {
    /// The client quotas in force.
    #[must_use]
    pub fn client_quotas(&self) -> &Arc<ClientQuotaConfigs> {
        &self.client_quotas
    }

    /// Applies `changes` to a client-id entity as one operation (one frame) unless
    /// `validate_only`. Returns whether anything changed (the image was rebuilt).
    pub fn alter_client_quotas(
        &mut self,
        entity: &ClientEntity,
        changes: &[QuotaChange],
        validate_only: bool,
    ) -> Result<bool, ControllerError> {
        for (key, value) in changes {
            match value {
                Some(v) => validate(key, *v),
                // Removing any known key is fine, as is removing an absent one.
                None => validate(key, 1.0),
            }
            .map_err(|e| ControllerError::InvalidRequest(e.to_string()))?;
        }
        let current = self.client_quotas.clients.get(entity);
        let records: Vec<MetadataRecord> = changes
            .iter()
            .filter(|(key, value)| current.and_then(|q| q.get(key)).copied() != *value)
            .map(|(key, value)| {
                MetadataRecord::ClientQuota(ClientQuotaRecord {
                    entity: vec![EntityPart {
                        kind: ENTITY_CLIENT_ID.into(),
                        name: entity.clone(),
                    }],
                    key: key.clone(),
                    value: *value,
                })
            })
            .collect();
        if validate_only || records.is_empty() {
            return Ok(false);
        }
        self.propose(records)?;
        Ok(true)
    }

    /// Applies one recorded change (replay and live alike).
    pub(super) fn apply_client_quota(&mut self, q: ClientQuotaRecord) -> Result<(), String> {
        let [part] = q.entity.as_slice() else {
            return Err(format!("client quota with {} entity parts", q.entity.len()));
        };
        if part.kind != ENTITY_CLIENT_ID {
            return Err(format!("client quota for unknown entity type {}", part.kind));
        }
        if let Some(v) = q.value {
            if let Err(e) = validate(&q.key, v) {
                tracing::warn!(key = %q.key, "ignoring a recorded client quota: {e}");
                return Ok(());
            }
        }
        Arc::make_mut(&mut self.client_quotas).set(&part.name, &q.key, q.value);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use super::*;
    use crate::controller::BrokerDefaults;
    use crate::quota::{CONSUMER_BYTE_RATE, PRODUCER_BYTE_RATE};
    use crate::types::NodeId;

    fn open(dir: &Path) -> Controller {
        let defaults = BrokerDefaults::from_settings(std::iter::empty::<(&str, &str)>()).unwrap();
        Controller::open(dir, NodeId(1), 2, defaults).unwrap()
    }

    #[test]
    fn quotas_are_published_and_survive_a_restart() {
        let dir = tempfile::tempdir().unwrap();
        let app: ClientEntity = Some("app".into());
        {
            let mut c = open(dir.path());
            let set = [(PRODUCER_BYTE_RATE.to_string(), Some(1024.0))];
            assert!(c.alter_client_quotas(&app, &set, false).unwrap());
            assert!(!c.alter_client_quotas(&app, &set, false).unwrap(), "no change, no record");
            let dflt = [(CONSUMER_BYTE_RATE.to_string(), Some(2048.0))];
            c.alter_client_quotas(&None, &dflt, false).unwrap();
            assert_eq!(c.image().client_quotas.quota("app", PRODUCER_BYTE_RATE), Some(1024.0));
        }
        let mut c = open(dir.path());
        let q = c.image().client_quotas.clone();
        assert_eq!(q.quota("app", PRODUCER_BYTE_RATE), Some(1024.0));
        assert_eq!(q.quota("app", CONSUMER_BYTE_RATE), Some(2048.0));
        c.alter_client_quotas(&app, &[(PRODUCER_BYTE_RATE.into(), None)], false).unwrap();
        assert_eq!(c.image().client_quotas.quota("app", PRODUCER_BYTE_RATE), None);
    }

    #[test]
    fn invalid_values_are_refused_and_validate_only_writes_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let mut c = open(dir.path());
        let bad = [("request_percentage".to_string(), Some(5.0))];
        assert!(matches!(
            c.alter_client_quotas(&None, &bad, false),
            Err(ControllerError::InvalidRequest(_))
        ));
        let ok = [(PRODUCER_BYTE_RATE.to_string(), Some(10.0))];
        assert!(!c.alter_client_quotas(&None, &ok, true).unwrap());
        assert!(c.client_quotas().clients.is_empty());
    }
}
