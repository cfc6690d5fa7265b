//! DescribeClientQuotas (API key 48), v0–1: the client quotas in force matching a filter of
//! components (EXACT name, DEFAULT entity, or ANY entity of a type; `strict` asks for
//! entities with no other entity types), with Kafka's INVALID_REQUEST for a malformed
//! filter.
//!
//! Read-only over a [`MetadataImage`]: runs on any shard. Matching follows Kafka's
//! `ClientQuotasImage.describe`: an entity matches when it has every filtered type (EXACT: with
//! that name, DEFAULT: as `<default>`, ANY: any name) and, with `strict`, no other type.
//! `ip` entities are not stored here, so a filter naming `ip` matches nothing.

use std::collections::HashSet;

use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::describe_client_quotas_request::ComponentData;
use kafka_protocol::messages::describe_client_quotas_response::{EntityData, EntryData, ValueData};
use kafka_protocol::messages::{DescribeClientQuotasRequest, DescribeClientQuotasResponse};

use super::sb;
use crate::controller::MetadataImage;
use crate::quota::{QuotaEntity, ENTITY_CLIENT_ID, ENTITY_USER};

/// Every version Kafka 4.1 defines (v1 is the flexible encoding of v0).
pub const VERSIONS: (i16, i16) = (0, 1);

/// Kafka's `ClientQuotaFilterComponent` match types.
const MATCH_EXACT: i8 = 0;
const MATCH_DEFAULT: i8 = 1;
const MATCH_ANY: i8 = 2;

#[must_use]
pub fn handle(
    image: &MetadataImage,
    request: &DescribeClientQuotasRequest,
    _version: i16,
) -> DescribeClientQuotasResponse {
    if let Err(message) = check_filter(&request.components) {
        return DescribeClientQuotasResponse::default()
            .with_error_code(ResponseError::InvalidRequest.code())
            .with_error_message(Some(sb(message)))
            .with_entries(None);
    }
    let entries = image
        .client_quotas
        .entities
        .iter()
        .filter(|(entity, _)| matches(&request.components, request.strict, entity))
        .map(|(entity, values)| {
            let parts = entity
                .parts()
                .into_iter()
                .map(|(kind, name)| {
                    EntityData::default().with_entity_type(sb(kind)).with_entity_name(name.map(sb))
                })
                .collect();
            let values = values
                .iter()
                .map(|(k, v)| ValueData::default().with_key(sb(k.clone())).with_value(*v))
                .collect();
            EntryData::default().with_entity(parts).with_values(values)
        })
        .collect();
    DescribeClientQuotasResponse::default().with_error_message(None).with_entries(Some(entries))
}

fn check_filter(components: &[ComponentData]) -> Result<(), String> {
    let mut types = HashSet::new();
    for c in components {
        let kind = c.entity_type.as_str();
        if kind.is_empty() {
            return Err("Invalid empty entity type.".into());
        }
        if !types.insert(kind) {
            return Err(format!("Duplicate {kind} filter component entity type"));
        }
        match c.match_type {
            MATCH_EXACT if c._match.is_none() => {
                return Err("Request specified MATCH_TYPE_EXACT, but match was null".into())
            }
            MATCH_DEFAULT | MATCH_ANY if c._match.is_some() => {
                return Err(format!(
                    "Request specified match type {}, but also specified a match string",
                    c.match_type
                ))
            }
            MATCH_EXACT | MATCH_DEFAULT | MATCH_ANY => {}
            other => return Err(format!("Unknown match type {other}")),
        }
    }
    if types.contains("ip") && (types.contains(ENTITY_USER) || types.contains(ENTITY_CLIENT_ID)) {
        return Err("Invalid entity filter component combination, IP filter component should \
             not be used with user or clientId filter component."
            .into());
    }
    Ok(())
}

/// Whether `entity` passes the filter.
fn matches(components: &[ComponentData], strict: bool, entity: &QuotaEntity) -> bool {
    for c in components {
        let part = match c.entity_type.as_str() {
            ENTITY_USER => &entity.user,
            ENTITY_CLIENT_ID => &entity.client_id,
            // The entity has no part of this type (`ip`, or a custom type).
            _ => return false,
        };
        let Some(name) = part else { return false };
        let ok = match c.match_type {
            MATCH_EXACT => {
                name.is_some() && c._match.as_ref().map(|m| m.as_str()) == name.as_deref()
            }
            MATCH_DEFAULT => name.is_none(),
            _ => true,
        };
        if !ok {
            return false;
        }
    }
    // Strict: the entity has no types beyond the filter's.
    !strict || entity.parts().len() == components.len()
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;
    use crate::quota::{ClientQuotaConfigs, PRODUCER_BYTE_RATE};

    fn component(kind: &str, match_type: i8, m: Option<&str>) -> ComponentData {
        ComponentData::default()
            .with_entity_type(sb(kind))
            .with_match_type(match_type)
            .with_match(m.map(sb))
    }

    fn client(match_type: i8, m: Option<&str>) -> ComponentData {
        component(ENTITY_CLIENT_ID, match_type, m)
    }

    fn user(match_type: i8, m: Option<&str>) -> ComponentData {
        component(ENTITY_USER, match_type, m)
    }

    #[test]
    fn exact_default_any_and_strict() {
        let mut q = ClientQuotaConfigs::default();
        let a = Some("a".to_string());
        for e in [
            QuotaEntity::client(a.clone()),
            QuotaEntity::client(None),
            QuotaEntity::user(Some("alice".into())),
            QuotaEntity::user(None),
            QuotaEntity::user_client(None, a.clone()),
            QuotaEntity::user_client(Some("alice".into()), None),
        ] {
            q.set(&e, PRODUCER_BYTE_RATE, Some(1.0));
        }
        let mut image = crate::server::fetch::one_partition_image();
        image.client_quotas = Arc::new(q);
        let found = |components: Vec<ComponentData>, strict: bool| -> Vec<String> {
            let req = DescribeClientQuotasRequest::default()
                .with_components(components)
                .with_strict(strict);
            let resp = handle(&image, &req, 1);
            assert_eq!(resp.error_code, 0, "{:?}", resp.error_message);
            resp.entries
                .unwrap()
                .iter()
                .map(|e| {
                    let parts: Vec<String> = e
                        .entity
                        .iter()
                        .map(|p| {
                            let name = p.entity_name.as_ref().map_or("<default>", |n| n.as_str());
                            format!("{}={name}", p.entity_type.as_str())
                        })
                        .collect();
                    parts.join(",")
                })
                .collect()
        };
        assert_eq!(found(vec![client(MATCH_EXACT, Some("a"))], true), ["client-id=a"]);
        assert_eq!(
            found(vec![client(MATCH_EXACT, Some("a"))], false),
            ["client-id=a", "user=<default>,client-id=a"]
        );
        assert_eq!(found(vec![client(MATCH_DEFAULT, None)], true), ["client-id=<default>"]);
        assert_eq!(found(vec![client(MATCH_ANY, None)], true).len(), 2);
        assert_eq!(found(vec![user(MATCH_EXACT, Some("alice"))], true), ["user=alice"]);
        assert_eq!(
            found(vec![user(MATCH_EXACT, Some("alice"))], false),
            ["user=alice", "user=alice,client-id=<default>"]
        );
        assert_eq!(found(vec![user(MATCH_DEFAULT, None)], true), ["user=<default>"]);
        assert_eq!(
            found(vec![user(MATCH_ANY, None), client(MATCH_ANY, None)], true),
            ["user=<default>,client-id=a", "user=alice,client-id=<default>"]
        );
        assert_eq!(
            found(vec![user(MATCH_DEFAULT, None), client(MATCH_EXACT, Some("a"))], true),
            ["user=<default>,client-id=a"]
        );
        assert_eq!(found(vec![], false).len(), 6);
        assert!(found(vec![], true).is_empty());
        assert!(found(vec![component("ip", MATCH_ANY, None)], false).is_empty());
        for bad in [
            vec![client(MATCH_EXACT, None)],
            vec![client(MATCH_ANY, Some("a"))],
            vec![user(MATCH_ANY, None), user(MATCH_DEFAULT, None)],
            vec![user(MATCH_ANY, None), component("ip", MATCH_ANY, None)],
            vec![client(7, None)],
        ] {
            let req = DescribeClientQuotasRequest::default().with_components(bad);
            assert_eq!(handle(&image, &req, 1).error_code, ResponseError::InvalidRequest.code());
        }
    }
}
