//! Answers for a controller request that cannot reach an active controller: every topic,
//! resource or entity of the request gets the same retriable error (NOT_CONTROLLER when no
//! controller is known, REQUEST_TIMED_OUT when it did not answer in time), so clients retry
//! instead of waiting on a request that will never complete.
//!
//! Pure: decodes the request frame and encodes a response; runs on the controller shard.

use bytes::Bytes;
use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::create_partitions_response::CreatePartitionsTopicResult;
use kafka_protocol::messages::create_topics_response::CreatableTopicResult;
use kafka_protocol::messages::delete_topics_response::DeletableTopicResult;
use kafka_protocol::messages::{
    alter_client_quotas_response, alter_configs_response, incremental_alter_configs_response,
    AlterClientQuotasRequest, AlterClientQuotasResponse, AlterConfigsRequest, AlterConfigsResponse,
    ApiKey, CreatePartitionsRequest, CreatePartitionsResponse, CreateTopicsRequest,
    CreateTopicsResponse, DeleteTopicsRequest, DeleteTopicsResponse, ElectLeadersRequest,
    ElectLeadersResponse, IncrementalAlterConfigsRequest, IncrementalAlterConfigsResponse,
    InitProducerIdRequest, InitProducerIdResponse, ProducerId,
};

use kafka_protocol::messages::{
    AlterPartitionReassignmentsRequest, AlterPartitionReassignmentsResponse,
    ListPartitionReassignmentsRequest, ListPartitionReassignmentsResponse,
};

use super::sb;
use crate::protocol::{decode_request, encode_response};

/// The response frame for `frame` (a request of `api` v`version`) with `error` everywhere.
/// InitProducerId gets COORDINATOR_NOT_AVAILABLE, the retriable error producers expect.
pub fn response(
    api: ApiKey,
    version: i16,
    frame: Bytes,
    error: ResponseError,
    message: &str,
) -> Result<Bytes, String> {
    let code = error.code();
    let msg = Some(sb(message.to_string()));
    macro_rules! answer {
        ($req:ty, $build:expr) => {{
            let (header, req) =
                decode_request::<$req>(frame, api, version).map_err(|e| e.to_string())?;
            let response = $build(req);
            encode_response(api, version, header.correlation_id, &response)
                .map_err(|e| e.to_string())
        }};
    }
    match api {
        ApiKey::CreateTopics => answer!(CreateTopicsRequest, |r: CreateTopicsRequest| {
            CreateTopicsResponse::default().with_topics(
                r.topics
                    .into_iter()
                    .map(|t| {
                        CreatableTopicResult::default()
                            .with_name(t.name)
                            .with_error_code(code)
                            .with_error_message(msg.clone())
                            .with_num_partitions(-1)
                            .with_replication_factor(-1)
                    })
                    .collect(),
            )
        }),
        ApiKey::DeleteTopics => answer!(DeleteTopicsRequest, |r: DeleteTopicsRequest| {
            let mut results: Vec<DeletableTopicResult> = r
                .topic_names
                .into_iter()
                .map(|n| DeletableTopicResult::default().with_name(Some(n)))
                .collect();
            results.extend(r.topics.into_iter().map(|t| {
                DeletableTopicResult::default().with_name(t.name).with_topic_id(t.topic_id)
            }));
            let results = results
                .into_iter()
                .map(|t| t.with_error_code(code).with_error_message(msg.clone()))
                .collect();
            DeleteTopicsResponse::default().with_responses(results)
        }),
        ApiKey::CreatePartitions => {
            answer!(CreatePartitionsRequest, |r: CreatePartitionsRequest| {
                CreatePartitionsResponse::default().with_results(
                    r.topics
                        .into_iter()
                        .map(|t| {
                            CreatePartitionsTopicResult::default()
                                .with_name(t.name)
                                .with_error_code(code)
                                .with_error_message(msg.clone())
                        })
                        .collect(),
                )
            })
        }
        ApiKey::InitProducerId => answer!(InitProducerIdRequest, |_r: InitProducerIdRequest| {
            InitProducerIdResponse::default()
                .with_error_code(ResponseError::CoordinatorNotAvailable.code())
                .with_producer_id(ProducerId(-1))
                .with_producer_epoch(-1)
        }),
        ApiKey::AlterConfigs => answer!(AlterConfigsRequest, |r: AlterConfigsRequest| {
            AlterConfigsResponse::default().with_responses(
                r.resources
                    .into_iter()
                    .map(|res| {
                        alter_configs_response::AlterConfigsResourceResponse::default()
                            .with_resource_type(res.resource_type)
                            .with_resource_name(res.resource_name)
                            .with_error_code(code)
                            .with_error_message(msg.clone())
                    })
                    .collect(),
            )
        }),
        ApiKey::IncrementalAlterConfigs => {
            answer!(IncrementalAlterConfigsRequest, |r: IncrementalAlterConfigsRequest| {
                IncrementalAlterConfigsResponse::default().with_responses(
                    r.resources
                        .into_iter()
                        .map(|res| {
                            incremental_alter_configs_response::AlterConfigsResourceResponse::default()
                                .with_resource_type(res.resource_type)
                                .with_resource_name(res.resource_name)
                                .with_error_code(code)
                                .with_error_message(msg.clone())
                        })
                        .collect(),
                )
            })
        }
        ApiKey::AlterClientQuotas => {
            answer!(AlterClientQuotasRequest, |r: AlterClientQuotasRequest| {
                AlterClientQuotasResponse::default().with_entries(
                    r.entries
                        .into_iter()
                        .map(|e| {
                            let entity = e
                                .entity
                                .into_iter()
                                .map(|p| {
                                    alter_client_quotas_response::EntityData::default()
                                        .with_entity_type(p.entity_type)
                                        .with_entity_name(p.entity_name)
                                })
                                .collect();
                            alter_client_quotas_response::EntryData::default()
                                .with_entity(entity)
                                .with_error_code(code)
                                .with_error_message(msg.clone())
                        })
                        .collect(),
                )
            })
        }
        ApiKey::ElectLeaders => answer!(ElectLeadersRequest, |r: ElectLeadersRequest| {
            use kafka_protocol::messages::elect_leaders_response::{
                PartitionResult, ReplicaElectionResult,
            };
            // Every named partition gets the error; a null list has only the top-level one.
            let results = r
                .topic_partitions
                .unwrap_or_default()
                .into_iter()
                .map(|t| {
                    ReplicaElectionResult::default().with_topic(t.topic).with_partition_result(
                        t.partitions
                            .into_iter()
                            .map(|p| {
                                PartitionResult::default()
                                    .with_partition_id(p)
                                    .with_error_code(code)
                                    .with_error_message(msg.clone())
                            })
                            .collect(),
                    )
                })
                .collect();
            let response = ElectLeadersResponse::default().with_replica_election_results(results);
            if version >= 1 {
                response.with_error_code(code)
            } else {
                response
            }
        }),
        ApiKey::AlterPartitionReassignments => {
            answer!(AlterPartitionReassignmentsRequest, |_r: AlterPartitionReassignmentsRequest| {
                AlterPartitionReassignmentsResponse::default()
                    .with_error_code(code)
                    .with_error_message(msg.clone())
            })
        }
        ApiKey::ListPartitionReassignments => {
            answer!(ListPartitionReassignmentsRequest, |_r: ListPartitionReassignmentsRequest| {
                ListPartitionReassignmentsResponse::default()
                    .with_error_code(code)
                    .with_error_message(msg.clone())
            })
        }
        other => Err(format!("{other:?} is not a controller API")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::blocking::decode_response;
    use kafka_protocol::messages::create_topics_request::CreatableTopic;
    use kafka_protocol::messages::{RequestHeader, TopicName};
    use kafka_protocol::protocol::Encodable;

    fn frame<R: Encodable>(api: ApiKey, version: i16, req: &R) -> Bytes {
        let mut buf = bytes::BytesMut::new();
        RequestHeader::default()
            .with_request_api_key(api as i16)
            .with_request_api_version(version)
            .with_correlation_id(7)
            .encode(&mut buf, api.request_header_version(version))
            .unwrap();
        req.encode(&mut buf, version).unwrap();
        buf.freeze()
    }

    #[test]
    fn every_topic_gets_the_error() {
        let req = CreateTopicsRequest::default().with_topics(vec![
            CreatableTopic::default().with_name(TopicName(sb("a"))),
            CreatableTopic::default().with_name(TopicName(sb("b"))),
        ]);
        let out = response(
            ApiKey::CreateTopics,
            5,
            frame(ApiKey::CreateTopics, 5, &req),
            ResponseError::NotController,
            "no active controller",
        )
        .unwrap();
        // The encoded frame carries a length prefix; the decoder wants the body after it.
        let resp: CreateTopicsResponse =
            decode_response(ApiKey::CreateTopics, 5, 7, out.slice(4..)).unwrap();
        assert_eq!(resp.topics.len(), 2);
        assert!(resp.topics.iter().all(|t| t.error_code == ResponseError::NotController.code()));
    }
}
