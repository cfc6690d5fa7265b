//! Runs the controller's mutating admin handlers on the active controller's working state
//! (see [`super::cluster`]): decode, call the handler with `&mut ControllerState`, encode. The
//! records the handler queued are proposed by the caller, which answers once they commit.

use bytes::Bytes;
use kafka_protocol::messages::{
    AlterClientQuotasRequest, AlterConfigsRequest, AlterUserScramCredentialsRequest, ApiKey,
    CreateAclsRequest, CreatePartitionsRequest, CreateTopicsRequest, DeleteAclsRequest,
    DeleteTopicsRequest, ElectLeadersRequest, IncrementalAlterConfigsRequest,
    InitProducerIdRequest,
};
use kafka_protocol::messages::{
    AlterPartitionReassignmentsRequest, ListPartitionReassignmentsRequest,
};
use kafka_protocol::protocol::{Decodable, Encodable};

use super::admin::{self, Mutation};
use crate::controller::ControllerState;
use crate::protocol::{decode_request, encode_response};

/// The encoded response frame, or why the request could not be processed.
type Outcome = Bytes;

/// APIs answered on the controller shard because they change metadata.
pub const CONTROLLER_APIS: &[ApiKey] = &[
    ApiKey::CreateTopics,
    ApiKey::DeleteTopics,
    ApiKey::CreatePartitions,
    ApiKey::InitProducerId,
    ApiKey::AlterConfigs,
    ApiKey::IncrementalAlterConfigs,
    ApiKey::AlterClientQuotas,
    ApiKey::ElectLeaders,
    ApiKey::AlterPartitionReassignments,
    ApiKey::ListPartitionReassignments,
    ApiKey::AlterUserScramCredentials,
    ApiKey::CreateAcls,
    ApiKey::DeleteAcls,
];

pub(super) fn run(
    controller: &mut ControllerState,
    api: ApiKey,
    version: i16,
    frame: Bytes,
) -> Result<Outcome, String> {
    let c = controller;
    let result = match api {
        ApiKey::CreateTopics => mutate::<CreateTopicsRequest, _>(c, api, version, frame, |c, r| {
            admin::create_topics::handle(c, r, version)
        }),
        ApiKey::DeleteTopics => mutate::<DeleteTopicsRequest, _>(c, api, version, frame, |c, r| {
            admin::delete_topics::handle(c, r, version)
        }),
        ApiKey::CreatePartitions => {
            mutate::<CreatePartitionsRequest, _>(c, api, version, frame, |c, r| {
                admin::create_partitions::handle(c, r, version)
            })
        }
        ApiKey::InitProducerId => {
            mutate::<InitProducerIdRequest, _>(c, api, version, frame, |c, r| {
                admin::init_producer_id::handle(c, r, version)
            })
        }
        ApiKey::AlterConfigs => mutate::<AlterConfigsRequest, _>(c, api, version, frame, |c, r| {
            admin::alter_configs::handle(c, r, version)
        }),
        ApiKey::IncrementalAlterConfigs => {
            mutate::<IncrementalAlterConfigsRequest, _>(c, api, version, frame, |c, r| {
                admin::incremental_alter_configs::handle(c, r, version)
            })
        }
        ApiKey::AlterUserScramCredentials => {
            mutate::<AlterUserScramCredentialsRequest, _>(c, api, version, frame, |c, r| {
                admin::alter_user_scram_credentials::handle(c, r, version)
            })
        }
        ApiKey::AlterClientQuotas => {
            mutate::<AlterClientQuotasRequest, _>(c, api, version, frame, |c, r| {
                admin::alter_client_quotas::handle(c, r, version)
            })
        }
        ApiKey::ElectLeaders => mutate::<ElectLeadersRequest, _>(c, api, version, frame, |c, r| {
            admin::elect_leaders::handle(c, r, version)
        }),
        ApiKey::AlterPartitionReassignments => {
            mutate::<AlterPartitionReassignmentsRequest, _>(c, api, version, frame, |c, r| {
                admin::alter_partition_reassignments::handle(c, r, version)
            })
        }
        ApiKey::ListPartitionReassignments => {
            mutate::<ListPartitionReassignmentsRequest, _>(c, api, version, frame, |c, r| {
                admin::list_partition_reassignments::handle(c, r, version)
            })
        }
        ApiKey::CreateAcls => {
            mutate::<CreateAclsRequest, _>(c, api, version, frame, admin::acls::create)
        }
        ApiKey::DeleteAcls => {
            mutate::<DeleteAclsRequest, _>(c, api, version, frame, admin::acls::delete)
        }
        other => Err(format!("{other:?} is not a controller API")),
    };
    result
}

fn mutate<Req: Decodable, Resp: Encodable>(
    controller: &mut ControllerState,
    api: ApiKey,
    version: i16,
    frame: Bytes,
    handler: impl FnOnce(&mut ControllerState, &Req) -> Mutation<Resp>,
) -> Result<Outcome, String> {
    let (header, request) =
        decode_request::<Req>(frame, api, version).map_err(|e| e.to_string())?;
    let mutation = handler(controller, &request);
    encode_response(api, version, header.correlation_id, &mutation.response)
        .map_err(|e| e.to_string())
}
