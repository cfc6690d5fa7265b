//! Request routing: peek at the API and version, refuse a version outside an advertised
//! range (closing the connection, as Kafka does), answer an API the broker does not serve
//! with an error response where one can be built ([`super::unserved`]), decode, and start
//! the API's handler.
//!
//! Runs on the connection's shard. Invariant: a handler's `start` issues all its
//! cross-shard sends before returning, so requests of one connection reach each owner
//! shard in the order they were read; the returned future only gathers replies.

use std::future::Future;
use std::net::IpAddr;
use std::pin::Pin;
use std::rc::Rc;

use bytes::Bytes;
use kafka_protocol::messages::ApiKey;

use super::admin_wiring::CONTROLLER_APIS;
use super::{
    admin, api_versions, delete_records, describe_producers, fetch, group, list_offsets, log_dirs,
    metadata, offset_for_leader_epoch, produce, txn,
};
use crate::protocol::versions::{find, ApiRange};
use crate::protocol::{encode_response, peek_api, ResponseFrame};
use crate::shard::ShardCtx;

/// What the connection does once a request's processing completes.
pub enum Outcome {
    /// Write this whole response frame.
    Respond(ResponseFrame),
    /// Nothing to write (acks=0 produce).
    Silent,
    /// Close the connection, logging the reason.
    Close(String),
    /// An outcome whose client is over its quota: the writer delays it or mutes the
    /// connection after it (see [`super::throttle`]).
    Throttled(Box<Outcome>, super::throttle::Throttle),
}

pub type ResponseFuture = Pin<Box<dyn Future<Output = Outcome>>>;

/// Every API this broker serves, with the range its handler declares.
pub const API_TABLE: &[ApiRange] = &[
    ApiRange::new(ApiKey::Produce, produce::VERSIONS),
    ApiRange::new(ApiKey::Fetch, fetch::VERSIONS),
    ApiRange::new(ApiKey::ListOffsets, list_offsets::VERSIONS),
    ApiRange::new(ApiKey::Metadata, admin::metadata::VERSIONS),
    ApiRange::new(ApiKey::OffsetForLeaderEpoch, offset_for_leader_epoch::VERSIONS),
    ApiRange::new(ApiKey::DeleteRecords, delete_records::VERSIONS),
    ApiRange::new(ApiKey::DescribeProducers, describe_producers::VERSIONS),
    ApiRange::new(ApiKey::DescribeLogDirs, log_dirs::describe::VERSIONS),
    ApiRange::new(ApiKey::AlterReplicaLogDirs, log_dirs::alter::VERSIONS),
    ApiRange::new(ApiKey::ApiVersions, api_versions::VERSIONS),
    ApiRange::new(ApiKey::CreateTopics, admin::create_topics::VERSIONS),
    ApiRange::new(ApiKey::DeleteTopics, admin::delete_topics::VERSIONS),
    ApiRange::new(ApiKey::CreatePartitions, admin::create_partitions::VERSIONS),
    ApiRange::new(ApiKey::InitProducerId, admin::init_producer_id::VERSIONS),
    ApiRange::new(ApiKey::AlterConfigs, admin::alter_configs::VERSIONS),
    ApiRange::new(ApiKey::IncrementalAlterConfigs, admin::incremental_alter_configs::VERSIONS),
    ApiRange::new(ApiKey::DescribeConfigs, admin::describe_configs::VERSIONS),
    ApiRange::new(ApiKey::DescribeCluster, admin::describe_cluster::VERSIONS),
    ApiRange::new(ApiKey::DescribeTopicPartitions, admin::describe_topic_partitions::VERSIONS),
    ApiRange::new(ApiKey::DescribeQuorum, admin::describe_quorum::VERSIONS),
    ApiRange::new(ApiKey::DescribeClientQuotas, admin::describe_client_quotas::VERSIONS),
    ApiRange::new(ApiKey::AlterClientQuotas, admin::alter_client_quotas::VERSIONS),
    ApiRange::new(ApiKey::ElectLeaders, admin::elect_leaders::VERSIONS),
    ApiRange::new(
        ApiKey::AlterPartitionReassignments,
        admin::alter_partition_reassignments::VERSIONS,
    ),
    ApiRange::new(
        ApiKey::ListPartitionReassignments,
        admin::list_partition_reassignments::VERSIONS,
    ),
    ApiRange::new(
        ApiKey::DescribeUserScramCredentials,
        admin::describe_user_scram_credentials::VERSIONS,
    ),
    ApiRange::new(ApiKey::AlterUserScramCredentials, admin::alter_user_scram_credentials::VERSIONS),
    ApiRange::new(ApiKey::SaslHandshake, super::sasl_gate::HANDSHAKE_VERSIONS),
    ApiRange::new(ApiKey::SaslAuthenticate, super::sasl_gate::AUTHENTICATE_VERSIONS),
    ApiRange::new(ApiKey::FindCoordinator, group::find_coordinator::VERSIONS),
    ApiRange::new(ApiKey::JoinGroup, group::join_group::VERSIONS),
    ApiRange::new(ApiKey::SyncGroup, group::sync_group::VERSIONS),
    ApiRange::new(ApiKey::Heartbeat, group::heartbeat::VERSIONS),
    ApiRange::new(ApiKey::LeaveGroup, group::leave_group::VERSIONS),
    ApiRange::new(ApiKey::OffsetCommit, group::offset_commit::VERSIONS),
    ApiRange::new(ApiKey::OffsetFetch, group::offset_fetch::VERSIONS),
    ApiRange::new(ApiKey::ListGroups, group::list_groups::VERSIONS),
    ApiRange::new(ApiKey::DescribeGroups, group::describe_groups::VERSIONS),
    ApiRange::new(ApiKey::DeleteGroups, group::delete_groups::VERSIONS),
    ApiRange::new(ApiKey::OffsetDelete, group::offset_delete::VERSIONS),
    ApiRange::new(ApiKey::AddPartitionsToTxn, txn::add_partitions_to_txn::VERSIONS),
    ApiRange::new(ApiKey::AddOffsetsToTxn, txn::add_offsets_to_txn::VERSIONS),
    ApiRange::new(ApiKey::EndTxn, txn::end_txn::VERSIONS),
    ApiRange::new(ApiKey::TxnOffsetCommit, txn::txn_offset_commit::VERSIONS),
    ApiRange::new(ApiKey::WriteTxnMarkers, txn::write_txn_markers::VERSIONS),
    ApiRange::new(ApiKey::DescribeTransactions, txn::describe_transactions::VERSIONS),
    ApiRange::new(ApiKey::ListTransactions, txn::list_transactions::VERSIONS),
    ApiRange::new(ApiKey::DescribeAcls, admin::acls::VERSIONS),
    ApiRange::new(ApiKey::CreateAcls, admin::acls::VERSIONS),
    ApiRange::new(ApiKey::DeleteAcls, admin::acls::VERSIONS),
];

/// Starts processing one request frame from a client at `peer` authenticated as
/// `principal`, or says why the connection must close. A request over its client's byte
/// quota mutes the connection through `mute` as it is recorded ([`super::throttle`]).
pub async fn dispatch(
    ctx: &Rc<ShardCtx>,
    frame: Bytes,
    peer: Option<IpAddr>,
    (session, mute): (&Rc<crate::security::Session>, &super::throttle::Mute),
) -> Result<ResponseFuture, String> {
    let principal = &session.principal();
    let peek = peek_api(&frame).map_err(|e| e.to_string())?;
    let api =
        ApiKey::try_from(peek.api_key).map_err(|()| format!("unknown api key {}", peek.api_key))?;
    if api == ApiKey::ApiVersions {
        return Ok(ready(api_versions::respond(frame, peek)));
    }
    let Some(range) = find(API_TABLE, api) else {
        return super::unserved::answer(api, peek.version, peek.correlation_id).map(ready);
    };
    if !range.contains(peek.version) {
        return Err(format!(
            "{api:?} v{} not supported (advertised {}..={})",
            peek.version, range.min, range.max
        ));
    }
    let version = peek.version;
    tracing::trace!(shard = %ctx.id, ?api, version, correlation_id = peek.correlation_id, "request");
    match api {
        ApiKey::Produce => produce::start(ctx, frame, version, session, mute).await,
        ApiKey::Fetch => fetch::start(ctx, frame, version, session).await,
        ApiKey::ListOffsets => list_offsets::start(ctx, frame, version, session).await,
        ApiKey::Metadata => metadata::start(ctx, frame, version, session),
        ApiKey::OffsetForLeaderEpoch => {
            offset_for_leader_epoch::start(ctx, frame, version, session).await
        }
        ApiKey::DeleteRecords => delete_records::start(ctx, frame, version, session).await,
        ApiKey::DescribeProducers => describe_producers::start(ctx, frame, version, session).await,
        ApiKey::DescribeLogDirs => log_dirs::describe::start(ctx, frame, version, session).await,
        ApiKey::AlterReplicaLogDirs => log_dirs::alter::start(ctx, frame, version, session),
        ApiKey::DescribeConfigs
        | ApiKey::DescribeCluster
        | ApiKey::DescribeTopicPartitions
        | ApiKey::DescribeClientQuotas
        | ApiKey::DescribeUserScramCredentials => {
            metadata::start_read_only(ctx, api, frame, version, session)
        }
        // A transactional id's InitProducerId goes to its transaction coordinator.
        ApiKey::InitProducerId if txn::init_producer_id::is_transactional(&frame, version) => {
            txn::init_producer_id::start(ctx, frame, version, session).await
        }
        // Before the controller APIs: CreateAcls and DeleteAcls are checked here first.
        ApiKey::DescribeAcls | ApiKey::CreateAcls | ApiKey::DeleteAcls => {
            super::acl_apis::start(ctx, api, frame, version, session)
        }
        api if CONTROLLER_APIS.contains(&api) || api == ApiKey::DescribeQuorum => {
            // Authorization first: the mutation quota counts only what is sent on.
            let (frame, merge) =
                match super::controller_authz::gate(ctx, api, version, frame, session)? {
                    super::controller_authz::Gate::Forward(frame, merge) => (frame, merge),
                    super::controller_authz::Gate::Answer(outcome) => return Ok(ready(outcome)),
                };
            let delay_ms = match super::mutation_quota::gate(ctx, api, version, &frame, principal)?
            {
                super::mutation_quota::Gate::Forward { delay_ms } => delay_ms,
                super::mutation_quota::Gate::Answer(outcome) => return Ok(ready(outcome)),
            };
            let fut = controller_api_merged(ctx, (api, version), frame, merge);
            if delay_ms == 0 {
                return Ok(fut);
            }
            // KIP-599, permissive version over quota: answered, but late.
            Ok(Box::pin(async move { super::throttle::wrap(fut.await, delay_ms, false) }))
        }
        ApiKey::FindCoordinator => group::find_coordinator::start(ctx, frame, version, session),
        ApiKey::JoinGroup => group::join_group::start(ctx, frame, version, (peer, session)).await,
        ApiKey::SyncGroup => group::sync_group::start(ctx, frame, version, session).await,
        ApiKey::Heartbeat => group::heartbeat::start(ctx, frame, version, session).await,
        ApiKey::LeaveGroup => group::leave_group::start(ctx, frame, version, session).await,
        ApiKey::OffsetCommit => group::offset_commit::start(ctx, frame, version, session).await,
        ApiKey::OffsetFetch => group::offset_fetch::start(ctx, frame, version, session).await,
        ApiKey::ListGroups => group::list_groups::start(ctx, frame, version, session),
        ApiKey::DescribeGroups => group::describe_groups::start(ctx, frame, version, session).await,
        ApiKey::DeleteGroups => group::delete_groups::start(ctx, frame, version, session).await,
        ApiKey::OffsetDelete => group::offset_delete::start(ctx, frame, version, session).await,
        ApiKey::AddPartitionsToTxn => {
            txn::add_partitions_to_txn::start(ctx, frame, version, session).await
        }
        ApiKey::AddOffsetsToTxn => {
            txn::add_offsets_to_txn::start(ctx, frame, version, session).await
        }
        ApiKey::EndTxn => txn::end_txn::start(ctx, frame, version, session).await,
        ApiKey::TxnOffsetCommit => {
            txn::txn_offset_commit::start(ctx, frame, version, session).await
        }
        ApiKey::WriteTxnMarkers => {
            txn::write_txn_markers::start(ctx, frame, version, session).await
        }
        ApiKey::DescribeTransactions => {
            txn::describe_transactions::start(ctx, frame, version, session).await
        }
        ApiKey::ListTransactions => {
            txn::list_transactions::start(ctx, frame, version, session).await
        }
        // On a listener without SASL, or after authentication: Kafka's ILLEGAL_SASL_STATE.
        ApiKey::SaslHandshake | ApiKey::SaslAuthenticate => {
            super::unserved::answer(api, version, peek.correlation_id).map(ready)
        }
        other => Err(format!("no handler for {other:?}")),
    }
}

/// Forwards an admin request to the controller shard.
pub(super) fn controller_api(
    ctx: &Rc<ShardCtx>,
    api: ApiKey,
    version: i16,
    frame: Bytes,
) -> ResponseFuture {
    use super::control::{call_controller, ControllerReply, ControllerRequest};
    let ctx = ctx.clone();
    Box::pin(async move {
        match call_controller(&ctx, ControllerRequest::Admin { api, version, frame }).await {
            ControllerReply::Encoded(frame) => Outcome::Respond(frame.into()),
            ControllerReply::Done => Outcome::Close("controller gave no response".into()),
            ControllerReply::Rejected(reason) => Outcome::Close(reason),
        }
    })
}

/// [`controller_api`], the answer passed through `merge` (the refused items added back).
fn controller_api_merged(
    ctx: &Rc<ShardCtx>,
    (api, version): (ApiKey, i16),
    frame: Bytes,
    merge: Option<super::controller_authz::Merge>,
) -> ResponseFuture {
    use super::control::{call_controller, ControllerReply, ControllerRequest};
    let Some(merge) = merge else { return controller_api(ctx, api, version, frame) };
    let ctx = ctx.clone();
    Box::pin(async move {
        match call_controller(&ctx, ControllerRequest::Admin { api, version, frame }).await {
            ControllerReply::Encoded(frame) => merge(frame),
            ControllerReply::Done => Outcome::Close("controller gave no response".into()),
            ControllerReply::Rejected(reason) => Outcome::Close(reason),
        }
    })
}

pub fn ready(outcome: Outcome) -> ResponseFuture {
    Box::pin(std::future::ready(outcome))
}

/// Encodes a response into an outcome, closing the connection if encoding fails.
pub fn respond<R: kafka_protocol::protocol::Encodable>(
    api: ApiKey,
    version: i16,
    correlation_id: i32,
    response: &R,
) -> Outcome {
    match encode_response(api, version, correlation_id, response) {
        Ok(frame) => Outcome::Respond(frame.into()),
        Err(err) => Outcome::Close(err.to_string()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn table_is_decodable_by_the_codec_and_follows_version_rules() {
        crate::protocol::versions::check_against_codec(API_TABLE).expect("codec covers table");
        let produce = find(API_TABLE, ApiKey::Produce).expect("produce");
        assert_eq!(produce.min, 0, "Produce is advertised from v0 for old clients");
        assert!(produce.contains(3) && produce.contains(7));
        let fetch = find(API_TABLE, ApiKey::Fetch).expect("fetch");
        assert!(fetch.min <= 4, "Fetch >= 4 advertised");
    }

    /// Kafka 4.1's maxima (what clients infer the broker version from: kafka-python
    /// takes Produce 13 for 4.1); OffsetCommit/OffsetFetch 10 and InitProducerId 6 are
    /// unstable in 4.1, so not advertised.
    #[test]
    fn table_reaches_kafka_4_1_maxima() {
        for (api, max) in [
            (ApiKey::Produce, 13),
            (ApiKey::Fetch, 18),
            (ApiKey::ListOffsets, 10),
            (ApiKey::Metadata, 13),
            (ApiKey::OffsetCommit, 9),
            (ApiKey::OffsetFetch, 9),
            (ApiKey::DescribeGroups, 6),
            (ApiKey::ApiVersions, 4),
            (ApiKey::DescribeClientQuotas, 1),
            (ApiKey::AlterClientQuotas, 1),
            (ApiKey::DescribeLogDirs, 4),
            (ApiKey::AlterReplicaLogDirs, 2),
        ] {
            assert_eq!(find(API_TABLE, api).map(|r| r.max), Some(max), "{api:?}");
        }
    }
}
