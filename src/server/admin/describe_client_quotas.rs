//! DescribeClientQuotas (API key 48), v0–1: the client quotas in force matching a filter of
//! components (EXACT name, DEFAULT entity, or ANY entity of a type; `strict` asks for
//! entities with no other entity types), with Kafka's INVALID_REQUEST for a malformed
//! filter.
//!
//! Read-only over a [`MetadataImage`]: runs on any shard. Only client-id entities exist, so
//! a filter naming `user` or `ip` matches nothing.

use std::collections::HashSet;

use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::describe_client_quotas_request::ComponentData;
use kafka_protocol::messages::describe_client_quotas_response::{EntityData, EntryData, ValueData};
use kafka_protocol::messages::{DescribeClientQuotasRequest, DescribeClientQuotasResponse};

use super::sb;
use crate::controller::MetadataImage;
use crate::quota::ENTITY_CLIENT_ID;

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
        .clients
        .iter()
        .filter(|(name, _)| matches(&request.components, request.strict, name.as_deref()))
        .map(|(name, values)| {
            let entity = EntityData::default()
                .with_entity_type(sb(ENTITY_CLIENT_ID))
                .with_entity_name(name.clone().map(sb));
            let values = values
                .iter()
                .map(|(k, v)| ValueData::default().with_key(sb(k.clone())).with_value(*v))
                .collect();
            EntryData::default().with_entity(vec![entity]).with_values(values)
        })
        .collect();
    DescribeClientQuotasResponse::default().with_error_message(None).with_entries(Some(entries))
}

fn check_filter(components: &[ComponentData]) -> Result<(), String> {
    let mut types = HashSet::new();
    for c in components {
        if !types.insert(c.entity_type.as_str()) {
            return Err(format!("Duplicate {} filter component entity type", c.entity_type));
        }
        match c.match_type {
            MATCH_EXACT if c._match.is_none() => {
                return Err("Request specified MATCH_TYPE_EXACT, but match was null".into())
            }
            MATCH_EXACT | MATCH_DEFAULT | MATCH_ANY => {}
            other => return Err(format!("Unknown match type {other}")),
        }
    }
    Ok(())
}

/// Whether the client-id entity `name` (`None`: `<default>`) passes the filter.
fn matches(components: &[ComponentData], strict: bool, name: Option<&str>) -> bool {
    let mut has_client_component = false;
    for c in components {
        if c.entity_type.as_str() != ENTITY_CLIENT_ID {
            // The entity has no part of this type.
            return false;
        }
        has_client_component = true;
        let ok = match c.match_type {
            MATCH_EXACT => name.is_some() && c._match.as_ref().map(|m| m.as_str()) == name,
            MATCH_DEFAULT => name.is_none(),
            _ => true,
        };
        if !ok {
            return false;
        }
    }
    // Strict: the entity may not have types beyond the filter's (it has client-id).
    !strict || has_client_component
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;
    use crate::quota::{ClientQuotaConfigs, PRODUCER_BYTE_RATE};

    fn component(match_type: i8, m: Option<&str>) -> ComponentData {
        ComponentData::default()
            .with_entity_type(sb(ENTITY_CLIENT_ID))
            .with_match_type(match_type)
            .with_match(m.map(sb))
    }

    #[test]
    fn exact_default_and_any() {
        let mut q = ClientQuotaConfigs::default();
        q.set(&Some("a".into()), PRODUCER_BYTE_RATE, Some(1.0));
        q.set(&None, PRODUCER_BYTE_RATE, Some(2.0));
        let mut image = crate::server::fetch::one_partition_image();
        image.client_quotas = Arc::new(q);
        let names = |components: Vec<ComponentData>, strict: bool| -> Vec<Option<String>> {
            let req = DescribeClientQuotasRequest::default()
                .with_components(components)
                .with_strict(strict);
            let resp = handle(&image, &req, 1);
            assert_eq!(resp.error_code, 0);
            resp.entries
                .unwrap()
                .iter()
                .map(|e| e.entity[0].entity_name.as_ref().map(|n| n.to_string()))
                .collect()
        };
        assert_eq!(names(vec![component(MATCH_EXACT, Some("a"))], true), [Some("a".into())]);
        assert_eq!(names(vec![component(MATCH_DEFAULT, None)], true), [None]);
        assert_eq!(names(vec![component(MATCH_ANY, None)], true).len(), 2);
        assert_eq!(names(vec![], false).len(), 2);
        assert!(names(vec![], true).is_empty());
        let bad = DescribeClientQuotasRequest::default()
            .with_components(vec![component(MATCH_EXACT, None)]);
        assert_eq!(handle(&image, &bad, 1).error_code, ResponseError::InvalidRequest.code());
    }
}
