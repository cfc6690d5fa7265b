//! InitProducerId (API key 22), v0–5, for idempotent producers: a producer id unique across
//! restarts (allocated in persisted blocks by the controller) with epoch 0. A request with a
//! transactional id never reaches this handler from a client: dispatch sends it to the
//! transaction coordinator (`server::txn::init_producer_id`); the branch below refusing one
//! stays for direct callers.
//!
//! Runs on the controller shard. Like Kafka, a request without a transactional id always gets
//! a fresh producer id, even when it names its current one (KIP-360 epoch bumps). A
//! transactional id gets TRANSACTIONAL_ID_AUTHORIZATION_FAILED: transactions are not
//! implemented, and that code is fatal in the Java producer and librdkafka with a message
//! naming the transactional id, instead of being retried forever (as COORDINATOR_NOT_AVAILABLE
//! would be) or misread as a protocol mismatch (as UNSUPPORTED_VERSION would be). An empty
//! (not null) transactional id gets INVALID_REQUEST, as Kafka answers it.

use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::{InitProducerIdRequest, InitProducerIdResponse, ProducerId};

use super::{error_code, Mutation};
use crate::controller::ControllerState;

/// Kafka 4.x's range up to v5 (v6 adds two-phase-commit transactions, not implemented).
pub const VERSIONS: (i16, i16) = (0, 5);

/// Hands out a producer id.
pub fn handle(
    controller: &mut ControllerState,
    request: &InitProducerIdRequest,
    _version: i16,
) -> Mutation<InitProducerIdResponse> {
    let response = InitProducerIdResponse::default();
    if request.transactional_id.as_ref().is_some_and(|t| t.0.is_empty()) {
        // Kafka's answer to an empty (not null) transactional id.
        let code = ResponseError::InvalidRequest.code();
        return Mutation { response: response.with_error_code(code), image_changed: false };
    }
    if request.transactional_id.is_some() {
        tracing::info!(
            transactional_id = ?request.transactional_id.as_ref().map(|t| t.0.as_str()),
            "refusing InitProducerId for a transactional producer: transactions are not implemented"
        );
        let code = ResponseError::TransactionalIdAuthorizationFailed.code();
        return Mutation { response: response.with_error_code(code), image_changed: false };
    }
    match controller.allocate_producer_id() {
        Ok(id) => Mutation {
            response: response.with_producer_id(ProducerId(id.0)).with_producer_epoch(0),
            // A new producer-id block changes no topic: nothing to publish.
            image_changed: false,
        },
        Err(e) => {
            let (code, _) = error_code(&e);
            Mutation { response: response.with_error_code(code), image_changed: false }
        }
    }
}
