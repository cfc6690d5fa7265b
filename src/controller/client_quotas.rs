//! Client quotas of the [`ControllerState`]: AlterClientQuotas changes for `user`,
//! `client-id` and `user`+`client-id` entities (each part a name or `<default>`), validated as Kafka validates them, stored in the metadata
//! log as `ClientQuotaRecord`s, replayed at start, and published in the metadata image so
//! every shard enforces them from its next request.
//!
//! Runs on the controller shard. Invariant: `client_quotas` holds only values that pass
//! [`crate::metadata::client_quotas::validate`] (a recorded value a newer rule refuses is skipped at replay
//! with a warning).

use std::sync::Arc;

use super::records::{ClientQuotaRecord, EntityPart, MetadataRecord};
#[cfg(test)]
use super::Controller;
use super::{ControllerError, ControllerState};
use crate::metadata::client_quotas::{validate, ClientQuotaConfigs, QuotaEntity};

/// One quota change: key and new value (`None`: remove).
pub type QuotaChange = (String, Option<f64>);

impl ControllerState {
    /// The client quotas in force.
    #[must_use]
    pub fn client_quotas(&self) -> &Arc<ClientQuotaConfigs> {
        &self.client_quotas
    }

    /// Applies `changes` to an entity as one operation (one frame) unless
    /// `validate_only`. Returns whether anything changed (the image was rebuilt).
    pub fn alter_client_quotas(
        &mut self,
        entity: &QuotaEntity,
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
        let current = self.client_quotas.entities.get(entity);
        let records: Vec<MetadataRecord> = changes
            .iter()
            .filter(|(key, value)| current.and_then(|q| q.get(key)).copied() != *value)
            .map(|(key, value)| {
                MetadataRecord::ClientQuota(ClientQuotaRecord {
                    entity: record_parts(entity),
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
        let entity =
            QuotaEntity::from_parts(q.entity.iter().map(|p| (p.kind.as_str(), p.name.as_deref())))
                .map_err(|e| format!("client quota record: {e}"))?;
        if let Some(v) = q.value {
            if let Err(e) = validate(&q.key, v) {
                tracing::warn!(key = %q.key, "ignoring a recorded client quota: {e}");
                return Ok(());
            }
        }
        Arc::make_mut(&mut self.client_quotas).set(&entity, &q.key, q.value);
        Ok(())
    }
}

/// An entity as the metadata log's entity parts (user first).
#[must_use]
pub fn record_parts(entity: &QuotaEntity) -> Vec<EntityPart> {
    entity.parts().into_iter().map(|(kind, name)| EntityPart { kind: kind.into(), name }).collect()
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

    const ANON: &str = crate::quota::Principal::ANONYMOUS_NAME;

    #[test]
    fn quotas_are_published_and_survive_a_restart() {
        let dir = tempfile::tempdir().unwrap();
        let app = QuotaEntity::client(Some("app".into()));
        let alice_dflt = QuotaEntity::user_client(Some("alice".into()), None);
        {
            let mut c = open(dir.path());
            let set = [(PRODUCER_BYTE_RATE.to_string(), Some(1024.0))];
            assert!(c.alter_client_quotas(&app, &set, false).unwrap());
            assert!(!c.alter_client_quotas(&app, &set, false).unwrap(), "no change, no record");
            let dflt = [(CONSUMER_BYTE_RATE.to_string(), Some(2048.0))];
            c.alter_client_quotas(&QuotaEntity::client(None), &dflt, false).unwrap();
            let alice = [(PRODUCER_BYTE_RATE.to_string(), Some(512.0))];
            c.alter_client_quotas(&alice_dflt, &alice, false).unwrap();
            let q = &c.image().client_quotas;
            assert_eq!(q.quota(ANON, "app", PRODUCER_BYTE_RATE), Some(1024.0));
            assert_eq!(q.quota("alice", "app", PRODUCER_BYTE_RATE), Some(512.0));
        }
        let mut c = open(dir.path());
        let q = c.image().client_quotas.clone();
        assert_eq!(q.quota(ANON, "app", PRODUCER_BYTE_RATE), Some(1024.0));
        assert_eq!(q.quota(ANON, "app", CONSUMER_BYTE_RATE), Some(2048.0));
        assert_eq!(q.quota("alice", "x", PRODUCER_BYTE_RATE), Some(512.0), "user+client replayed");
        c.alter_client_quotas(&app, &[(PRODUCER_BYTE_RATE.into(), None)], false).unwrap();
        assert_eq!(c.image().client_quotas.quota(ANON, "app", PRODUCER_BYTE_RATE), None);
    }

    #[test]
    fn invalid_values_are_refused_and_validate_only_writes_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let mut c = open(dir.path());
        let dflt = QuotaEntity::client(None);
        let bad = [("foo_rate".to_string(), Some(5.0))];
        assert!(matches!(
            c.alter_client_quotas(&dflt, &bad, false),
            Err(ControllerError::InvalidRequest(_))
        ));
        let ok = [(PRODUCER_BYTE_RATE.to_string(), Some(10.0))];
        assert!(!c.alter_client_quotas(&dflt, &ok, true).unwrap());
        assert!(c.client_quotas().entities.is_empty());
    }
}
