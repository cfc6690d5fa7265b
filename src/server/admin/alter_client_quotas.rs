//! AlterClientQuotas (API key 49), v0–1: sets or removes quota values of `user`,
//! `client-id` and `user`+`client-id` entities (each part one name, or `<default>` by a null
//! name), each entry validated and written as one metadata-log operation; `validate_only`.
//! Entities naming `ip` (connection-rate quotas) are refused with INVALID_REQUEST.
//!
//! Runs on the controller shard (a [`Mutation`]: the new image reaches every shard before
//! the answer leaves, so the quota applies from the client's next request).

use std::collections::HashSet;

use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::alter_client_quotas_request::EntryData;
use kafka_protocol::messages::alter_client_quotas_response::{
    EntityData as RespEntity, EntryData as RespEntry,
};
use kafka_protocol::messages::{AlterClientQuotasRequest, AlterClientQuotasResponse};

use super::{error_code, sb, Mutation};
use crate::controller::{ControllerState, QuotaChange};
use crate::quota::QuotaEntity;

/// Every version Kafka 4.1 defines (v1 is the flexible encoding of v0).
pub const VERSIONS: (i16, i16) = (0, 1);

pub fn handle(
    controller: &mut ControllerState,
    request: &AlterClientQuotasRequest,
    _version: i16,
) -> Mutation<AlterClientQuotasResponse> {
    let mut image_changed = false;
    let entries = request
        .entries
        .iter()
        .map(|e| {
            let entity = e
                .entity
                .iter()
                .map(|p| {
                    RespEntity::default()
                        .with_entity_type(p.entity_type.clone())
                        .with_entity_name(p.entity_name.clone())
                })
                .collect();
            let resp = RespEntry::default().with_entity(entity).with_error_message(None);
            match alter_one(controller, e, request.validate_only) {
                Ok(changed) => {
                    image_changed |= changed;
                    resp
                }
                Err((code, message)) => {
                    resp.with_error_code(code).with_error_message(Some(sb(message)))
                }
            }
        })
        .collect();
    let response = AlterClientQuotasResponse::default().with_entries(entries);
    Mutation { response, image_changed }
}

fn alter_one(
    controller: &mut ControllerState,
    entry: &EntryData,
    validate_only: bool,
) -> Result<bool, (i16, String)> {
    let entity = quota_entity(entry)?;
    let invalid = |m: String| (ResponseError::InvalidRequest.code(), m);
    let mut seen = HashSet::new();
    let mut changes: Vec<QuotaChange> = Vec::new();
    for op in &entry.ops {
        let key = op.key.to_string();
        if !seen.insert(key.clone()) {
            return Err(invalid(format!(
                "Duplicate quota key {key} not updating quota for entity"
            )));
        }
        changes.push((key, (!op.remove).then_some(op.value)));
    }
    controller.alter_client_quotas(&entity, &changes, validate_only).map_err(|e| error_code(&e))
}

/// The entity an entry names; Kafka's INVALID_REQUEST for anything else.
fn quota_entity(entry: &EntryData) -> Result<QuotaEntity, (i16, String)> {
    QuotaEntity::from_parts(
        entry
            .entity
            .iter()
            .map(|p| (p.entity_type.as_str(), p.entity_name.as_ref().map(|n| n.as_str()))),
    )
    .map_err(|e| (ResponseError::InvalidRequest.code(), e.to_string()))
}
