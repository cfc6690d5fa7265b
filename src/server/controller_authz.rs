//! Authorization of the controller APIs on the connection's shard, before the request goes
//! to the controller (Kafka's `ControllerApis` checks, made where the client's principal is
//! known: the controller never sees it).
//!
//! Whole-request checks (Kafka's `authorizeClusterOperation`) answer here with the API's
//! error response: ElectLeaders and AlterPartitionReassignments, AlterUserScramCredentials
//! (ALTER on the cluster), ListPartitionReassignments and DescribeQuorum (DESCRIBE),
//! AlterClientQuotas (ALTER_CONFIGS), InitProducerId without a transactional id
//! (IDEMPOTENT_WRITE on the cluster, or WRITE on some topic). Per-item checks rewrite the
//! request without the items the principal may not touch, forward it, and add their errors to
//! the controller's answer (KRaft's `ControllerApis.createTopics` does the same): CreateTopics
//! (CREATE on the cluster or the topic; topics without DESCRIBE_CONFIGS get no configs and
//! TOPIC_AUTHORIZATION_FAILED as their config error), DeleteTopics (DELETE, and DESCRIBE to
//! learn whether a topic exists or which name an id has), CreatePartitions (ALTER),
//! AlterConfigs and IncrementalAlterConfigs (ALTER_CONFIGS on the topic, group or cluster).
//!
//! With or without an authorizer, an alter of this broker's own dynamic configs that names TLS
//! key or trust stores is refused with INVALID_REQUEST when they do not load
//! (`tls_reload::validate`, Kafka's check on the broker the resource names).
//!
//! Runs on the connection's shard; touches nothing but the request and response (and, for
//! the store check, the store files).

use std::collections::{BTreeMap, HashMap};
use std::rc::Rc;

use bytes::Bytes;
use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::*;
use kafka_protocol::protocol::{Decodable, Encodable, StrBytes};
use uuid::Uuid;

use super::admin::describe_configs::RESOURCE_BROKER;
use super::authz::{Auth, Authorize};
use super::dispatch::{respond, Outcome};
use super::metadata::{CLUSTER_DENIED, GROUP_DENIED, TOPIC_DENIED};
use crate::authz::{Operation, ResourceType};
use crate::protocol::{decode_request, decode_response_frame, encode_request_frame};
use crate::security::Session;
use crate::shard::ShardCtx;

/// Rewrites the controller's encoded answer (adds the refused items).
pub type Merge = Box<dyn FnOnce(Bytes) -> Outcome>;

/// Adds the refused items' answers to a response.
type Finish<Resp> = Option<Box<dyn FnOnce(&mut Resp)>>;

/// What the connection does with a controller request.
pub enum Gate {
    /// Send this frame; pass the answer through the merge, if any.
    Forward(Bytes, Option<Merge>),
    /// Answer this, sending nothing to the controller.
    Answer(Outcome),
}

const CLUSTER: ResponseError = ResponseError::ClusterAuthorizationFailed;

fn msg(text: &'static str) -> Option<StrBytes> {
    Some(StrBytes::from_static_str(text))
}

/// Checks one controller request. Without an authorizer everything passes unchanged.
pub fn gate(
    ctx: &Rc<ShardCtx>,
    api: ApiKey,
    version: i16,
    frame: Bytes,
    session: &Rc<Session>,
) -> Result<Gate, String> {
    let auth = Auth::new(ctx, session);
    let call = Call { api, version, frame };
    // Config alters are checked with or without an authorizer: a broker loads the TLS stores
    // a change of its own dynamic configs names before the change is stored.
    match api {
        ApiKey::AlterConfigs => return alter_configs(ctx, call, &auth),
        ApiKey::IncrementalAlterConfigs => return incremental_alter_configs(ctx, call, &auth),
        _ if !auth.enabled() => return Ok(Gate::Forward(call.frame, None)),
        _ => {}
    }
    match api {
        ApiKey::CreateTopics => create_topics(call, &auth),
        ApiKey::DeleteTopics => delete_topics(ctx, call, &auth),
        ApiKey::CreatePartitions => create_partitions(call, &auth),
        ApiKey::InitProducerId => {
            let allowed =
                auth.visible(Operation::IdempotentWrite, ResourceType::Cluster, CLUSTER_NAME)
                    || auth.by_resource_type(Operation::Write, ResourceType::Topic);
            call.whole::<InitProducerIdRequest, _>(allowed, |_| {
                InitProducerIdResponse::default()
                    .with_error_code(CLUSTER.code())
                    .with_producer_id((-1).into())
                    .with_producer_epoch(-1)
            })
        }
        ApiKey::AlterClientQuotas => {
            let allowed = auth.cluster(Operation::AlterConfigs);
            call.whole::<AlterClientQuotasRequest, _>(allowed, alter_client_quotas_denied)
        }
        ApiKey::ElectLeaders => {
            let allowed = auth.cluster(Operation::Alter);
            call.whole::<ElectLeadersRequest, _>(allowed, |r| elect_leaders_denied(r, version))
        }
        ApiKey::AlterPartitionReassignments => {
            let allowed = auth.cluster(Operation::Alter);
            call.whole::<AlterPartitionReassignmentsRequest, _>(allowed, reassignments_denied)
        }
        ApiKey::ListPartitionReassignments => {
            let allowed = auth.cluster(Operation::Describe);
            call.whole::<ListPartitionReassignmentsRequest, _>(allowed, |_| {
                ListPartitionReassignmentsResponse::default()
                    .with_error_code(CLUSTER.code())
                    .with_error_message(msg(CLUSTER_DENIED))
            })
        }
        ApiKey::AlterUserScramCredentials => {
            let allowed = auth.cluster(Operation::Alter);
            call.whole::<AlterUserScramCredentialsRequest, _>(allowed, scram_denied)
        }
        ApiKey::DescribeQuorum => {
            let allowed = auth.cluster(Operation::Describe);
            call.whole::<DescribeQuorumRequest, _>(allowed, |_| {
                let r = DescribeQuorumResponse::default().with_error_code(CLUSTER.code());
                if version >= 2 {
                    r.with_error_message(msg(CLUSTER_DENIED))
                } else {
                    r
                }
            })
        }
        _ => Ok(Gate::Forward(call.frame, None)),
    }
}

use crate::authz::CLUSTER_NAME;

/// One request on its way to the controller.
struct Call {
    api: ApiKey,
    version: i16,
    frame: Bytes,
}

impl Call {
    fn decode<Req: Decodable>(&self) -> Result<(RequestHeader, Req), String> {
        decode_request::<Req>(self.frame.clone(), self.api, self.version).map_err(|e| e.to_string())
    }

    /// A whole-request check: forward unchanged, or answer `refusal`.
    fn whole<Req: Decodable, Resp: Encodable>(
        self,
        allowed: bool,
        refusal: impl FnOnce(&Req) -> Resp,
    ) -> Result<Gate, String> {
        if allowed {
            return Ok(Gate::Forward(self.frame, None));
        }
        let (header, req) = self.decode::<Req>()?;
        let response = refusal(&req);
        Ok(Gate::Answer(respond(self.api, self.version, header.correlation_id, &response)))
    }

    /// A per-item check: `request` is the original without the refused items (`removed` of
    /// them); `finish` adds their answers to a response (the controller's, or an empty one
    /// when nothing is left to send).
    fn rewritten<Req: Encodable, Resp: Decodable + Encodable + Default + 'static>(
        self,
        (header, request): (RequestHeader, Req),
        (removed, left): (usize, usize),
        finish: Finish<Resp>,
    ) -> Result<Gate, String> {
        let (api, version) = (self.api, self.version);
        let Some(finish) = finish else { return Ok(Gate::Forward(self.frame, None)) };
        if left == 0 {
            let mut response = Resp::default();
            finish(&mut response);
            return Ok(Gate::Answer(respond(api, version, header.correlation_id, &response)));
        }
        let frame = if removed == 0 {
            self.frame
        } else {
            encode_request_frame(&header, api, version, &request).map_err(|e| e.to_string())?
        };
        let merge: Merge = Box::new(move |answer: Bytes| {
            match decode_response_frame::<Resp>(answer, api, version) {
                Ok((correlation_id, mut response)) => {
                    finish(&mut response);
                    respond(api, version, correlation_id, &response)
                }
                Err(e) => Outcome::Close(format!("controller answer: {e}")),
            }
        });
        Ok(Gate::Forward(frame, Some(merge)))
    }
}

/// Names that occur once (Kafka leaves duplicates to the controller's INVALID_REQUEST).
fn singles<'a>(names: impl Iterator<Item = &'a str>) -> HashMap<&'a str, usize> {
    let mut counts: HashMap<&str, usize> = HashMap::new();
    for n in names {
        *counts.entry(n).or_default() += 1;
    }
    counts.retain(|_, c| *c == 1);
    counts
}

fn create_topics(call: Call, auth: &Auth) -> Result<Gate, String> {
    let (header, mut req) = call.decode::<CreateTopicsRequest>()?;
    let version = call.version;
    let cluster = auth.visible(Operation::Create, ResourceType::Cluster, CLUSTER_NAME);
    let names: Vec<String> = req.topics.iter().map(|t| t.name.0.to_string()).collect();
    let once = singles(names.iter().map(String::as_str));
    let mut denied: Vec<TopicName> = Vec::new();
    req.topics.retain(|t| {
        let name = t.name.0.as_str();
        let ok = !once.contains_key(name)
            || cluster
            || auth.allowed(Operation::Create, ResourceType::Topic, name);
        if !ok {
            denied.push(t.name.clone());
        }
        ok
    });
    let hidden: Vec<String> = names
        .iter()
        .filter(|n| !auth.visible(Operation::DescribeConfigs, ResourceType::Topic, n))
        .cloned()
        .collect();
    let (removed, left) = (denied.len(), req.topics.len());
    let finish: Finish<CreateTopicsResponse> = if denied.is_empty() && hidden.is_empty() {
        None
    } else {
        Some(Box::new(move |r: &mut CreateTopicsResponse| {
            for t in &mut r.topics {
                if version >= 5 && t.error_code == 0 && hidden.contains(&t.name.0.to_string()) {
                    t.configs = Some(Vec::new());
                    t.topic_config_error_code = ResponseError::TopicAuthorizationFailed.code();
                }
            }
            r.topics.extend(denied.into_iter().map(|name| {
                let mut t = create_topics_response::CreatableTopicResult::default()
                    .with_name(name)
                    .with_error_code(ResponseError::TopicAuthorizationFailed.code())
                    .with_error_message(msg("Authorization failed."));
                if version >= 5 {
                    t = t.with_num_partitions(-1).with_replication_factor(-1);
                }
                t
            }));
        }))
    };
    call.rewritten((header, req), (removed, left), finish)
}

fn delete_topics(ctx: &ShardCtx, call: Call, auth: &Auth) -> Result<Gate, String> {
    use delete_topics_response::DeletableTopicResult;
    let (header, mut req) = call.decode::<DeleteTopicsRequest>()?;
    let image = ctx.image();
    let cluster = auth.visible(Operation::Delete, ResourceType::Cluster, CLUSTER_NAME);
    let describable =
        |n: &str| cluster || auth.allowed(Operation::Describe, ResourceType::Topic, n);
    let deletable = |n: &str| cluster || auth.allowed(Operation::Delete, ResourceType::Topic, n);
    let mut denied: Vec<(Option<TopicName>, Uuid)> = Vec::new();
    // By name: without DESCRIBE nothing is said about the topic; an existing one needs DELETE.
    let by_name = |name: &TopicName, denied: &mut Vec<(Option<TopicName>, Uuid)>| {
        let n = name.0.as_str();
        let ok = describable(n) && (image.topic(n).is_none() || deletable(n));
        if !ok {
            denied.push((Some(name.clone()), Uuid::nil()));
        }
        ok
    };
    let mut left = 0;
    req.topic_names.retain(|name| {
        let ok = by_name(name, &mut denied);
        left += usize::from(ok);
        ok
    });
    req.topics.retain(|t| {
        let ok = match (&t.name, image.topic_by_id(&t.topic_id)) {
            (Some(name), _) if t.topic_id.is_nil() => by_name(name, &mut denied),
            // Unknown ids, and a name with an id: the controller's answer.
            (Some(_), _) | (None, None) => true,
            (None, Some(topic)) => {
                let ok = deletable(&topic.name);
                if !ok {
                    let shown = describable(&topic.name).then(|| TopicName(sb(&topic.name)));
                    denied.push((shown, t.topic_id));
                }
                ok
            }
        };
        left += usize::from(ok);
        ok
    });
    let removed = denied.len();
    let version = call.version;
    let finish: Finish<DeleteTopicsResponse> = (!denied.is_empty()).then(|| {
        Box::new(move |r: &mut DeleteTopicsResponse| {
            r.responses.extend(denied.into_iter().map(|(name, id)| {
                let mut t = DeletableTopicResult::default()
                    .with_error_code(ResponseError::TopicAuthorizationFailed.code());
                if version >= 6 {
                    t = t.with_topic_id(id).with_name(name);
                } else {
                    t = t.with_name(name.or_else(|| Some(TopicName(sb("")))));
                }
                t
            }));
        }) as Box<dyn FnOnce(&mut DeleteTopicsResponse)>
    });
    call.rewritten((header, req), (removed, left), finish)
}

fn sb(s: &str) -> StrBytes {
    StrBytes::from_string(s.to_string())
}

fn create_partitions(call: Call, auth: &Auth) -> Result<Gate, String> {
    use create_partitions_response::CreatePartitionsTopicResult;
    let (header, mut req) = call.decode::<CreatePartitionsRequest>()?;
    let names: Vec<String> = req.topics.iter().map(|t| t.name.0.to_string()).collect();
    let once = singles(names.iter().map(String::as_str));
    let mut denied = Vec::new();
    req.topics.retain(|t| {
        let n = t.name.0.as_str();
        let ok = !once.contains_key(n) || auth.allowed(Operation::Alter, ResourceType::Topic, n);
        if !ok {
            denied.push(t.name.clone());
        }
        ok
    });
    let (removed, left) = (denied.len(), req.topics.len());
    let finish: Finish<CreatePartitionsResponse> = (!denied.is_empty()).then(|| {
        Box::new(move |r: &mut CreatePartitionsResponse| {
            r.results.extend(denied.into_iter().map(|name| {
                CreatePartitionsTopicResult::default()
                    .with_name(name)
                    .with_error_code(ResponseError::TopicAuthorizationFailed.code())
                    .with_error_message(msg("The topic authorization is failed."))
            }));
        }) as Box<dyn FnOnce(&mut CreatePartitionsResponse)>
    });
    call.rewritten((header, req), (removed, left), finish)
}

/// The check and the refusal of one config resource (Kafka's `authorizeAlterResource`);
/// `None`: an unknown type, answered by the controller.
fn config_resource_allowed(
    auth: &Auth,
    resource_type: i8,
    name: &str,
) -> Option<(bool, i16, &'static str)> {
    let (rt, name, code, message) = match resource_type {
        2 => (ResourceType::Topic, name, ResponseError::TopicAuthorizationFailed, TOPIC_DENIED),
        32 => (ResourceType::Group, name, ResponseError::GroupAuthorizationFailed, GROUP_DENIED),
        4 | 8 => (ResourceType::Cluster, CLUSTER_NAME, CLUSTER, CLUSTER_DENIED),
        _ => return None,
    };
    Some((auth.allowed(Operation::AlterConfigs, rt, name), code.code(), message))
}

/// A refused config resource: (type, name, code, message).
type RefusedResource = (i8, StrBytes, i16, StrBytes);

/// Removes the config resources `auth` may not alter (AlterConfigs and its incremental
/// form share the rule) and returns them, to be answered with their refusal.
fn refuse_config_resources<R>(
    auth: &Auth,
    resources: &mut Vec<R>,
    key: impl Fn(&R) -> (i8, &StrBytes),
) -> Vec<RefusedResource> {
    let mut denied = Vec::new();
    if !auth.enabled() {
        return denied;
    }
    resources.retain(|r| {
        let (rt, name) = key(r);
        match config_resource_allowed(auth, rt, name) {
            Some((false, code, message)) => {
                denied.push((rt, name.clone(), code, sb(message)));
                false
            }
            _ => true,
        }
    });
    denied
}

/// Removes the BROKER resources naming this broker whose new dynamic configs name TLS stores
/// that do not load (`tls_reload::validate`); `layer` gives a resource's new per-broker layer.
fn refuse_unloadable_stores<R>(
    ctx: &ShardCtx,
    resources: &mut Vec<R>,
    key: impl Fn(&R) -> (i8, &StrBytes),
    layer: impl Fn(&R, &BTreeMap<String, String>) -> BTreeMap<String, String>,
) -> Vec<RefusedResource> {
    let mut refused = Vec::new();
    let image = ctx.image();
    if ctx.config.listener_security.iter().all(|l| l.tls.is_none()) {
        return refused;
    }
    let me = image.node_id.0.to_string();
    resources.retain(|r| {
        let (rt, name) = key(r);
        if rt != RESOURCE_BROKER || name.as_str() != me {
            return true;
        }
        let new_layer = layer(r, &image.broker_defaults.dynamic_broker);
        match super::tls_reload::validate(ctx, &new_layer) {
            Ok(()) => true,
            Err(e) => {
                let message = format!(
                    "Invalid config value for resource ConfigResource(type=BROKER, name='{me}'): {e}"
                );
                tracing::info!(shard = %ctx.id, "{message}");
                refused.push((rt, name.clone(), ResponseError::InvalidRequest.code(), sb(&message)));
                false
            }
        }
    });
    refused
}

/// The answer's entries for the refused config resources (AlterConfigs and its incremental
/// form have the same entry shape under different types).
macro_rules! refused_configs {
    ($denied:expr, $resp:ty, $entry:ty) => {{
        let denied: Vec<RefusedResource> = $denied;
        (!denied.is_empty()).then(|| {
            Box::new(move |r: &mut $resp| {
                r.responses.extend(denied.into_iter().map(|(rt, name, code, message)| {
                    <$entry>::default()
                        .with_resource_type(rt)
                        .with_resource_name(name)
                        .with_error_code(code)
                        .with_error_message(Some(message))
                }));
            }) as Box<dyn FnOnce(&mut $resp)>
        })
    }};
}

fn alter_configs(ctx: &ShardCtx, call: Call, auth: &Auth) -> Result<Gate, String> {
    use alter_configs_response::AlterConfigsResourceResponse;
    let (header, mut req) = call.decode::<AlterConfigsRequest>()?;
    fn key(r: &alter_configs_request::AlterConfigsResource) -> (i8, &StrBytes) {
        (r.resource_type, &r.resource_name)
    }
    let mut denied = refuse_config_resources(auth, &mut req.resources, key);
    // AlterConfigs replaces the resource's whole dynamic set.
    denied.extend(refuse_unloadable_stores(ctx, &mut req.resources, key, |r, _| {
        r.configs
            .iter()
            .filter_map(|c| Some((c.name.to_string(), c.value.as_ref()?.to_string())))
            .collect()
    }));
    let (removed, left) = (denied.len(), req.resources.len());
    let finish: Finish<AlterConfigsResponse> =
        refused_configs!(denied, AlterConfigsResponse, AlterConfigsResourceResponse);
    call.rewritten((header, req), (removed, left), finish)
}

fn incremental_alter_configs(ctx: &ShardCtx, call: Call, auth: &Auth) -> Result<Gate, String> {
    use incremental_alter_configs_request::AlterConfigsResource;
    use incremental_alter_configs_response::AlterConfigsResourceResponse;
    let (header, mut req) = call.decode::<IncrementalAlterConfigsRequest>()?;
    fn key(r: &AlterConfigsResource) -> (i8, &StrBytes) {
        (r.resource_type, &r.resource_name)
    }
    let mut denied = refuse_config_resources(auth, &mut req.resources, key);
    // SET and DELETE on the current layer (APPEND and SUBTRACT edit lists, which no store
    // setting is; the controller validates those).
    denied.extend(refuse_unloadable_stores(ctx, &mut req.resources, key, |r, current| {
        let mut layer = current.clone();
        for c in &r.configs {
            match (c.config_operation, &c.value) {
                (0, Some(v)) => {
                    layer.insert(c.name.to_string(), v.to_string());
                }
                (1, _) => {
                    layer.remove(c.name.as_str());
                }
                _ => {}
            }
        }
        layer
    }));
    let (removed, left) = (denied.len(), req.resources.len());
    let finish: Finish<IncrementalAlterConfigsResponse> =
        refused_configs!(denied, IncrementalAlterConfigsResponse, AlterConfigsResourceResponse);
    call.rewritten((header, req), (removed, left), finish)
}

/// Kafka's `AlterClientQuotasRequest.getErrorResponse`: the error on every entry.
fn alter_client_quotas_denied(req: &AlterClientQuotasRequest) -> AlterClientQuotasResponse {
    use alter_client_quotas_response::{EntityData, EntryData};
    let entries = req
        .entries
        .iter()
        .map(|e| {
            EntryData::default()
                .with_error_code(CLUSTER.code())
                .with_error_message(msg(CLUSTER_DENIED))
                .with_entity(
                    e.entity
                        .iter()
                        .map(|x| {
                            EntityData::default()
                                .with_entity_type(x.entity_type.clone())
                                .with_entity_name(x.entity_name.clone())
                        })
                        .collect(),
                )
        })
        .collect();
    AlterClientQuotasResponse::default().with_entries(entries)
}

/// Kafka's `ElectLeadersRequest.getErrorResponse`: the error on every partition named (and
/// at the top from v1).
fn elect_leaders_denied(req: &ElectLeadersRequest, version: i16) -> ElectLeadersResponse {
    use elect_leaders_response::{PartitionResult, ReplicaElectionResult};
    let results = req
        .topic_partitions
        .iter()
        .flatten()
        .map(|t| {
            ReplicaElectionResult::default().with_topic(t.topic.clone()).with_partition_result(
                t.partitions
                    .iter()
                    .map(|p| {
                        PartitionResult::default()
                            .with_partition_id(*p)
                            .with_error_code(CLUSTER.code())
                            .with_error_message(msg(CLUSTER_DENIED))
                    })
                    .collect(),
            )
        })
        .collect();
    let r = ElectLeadersResponse::default().with_replica_election_results(results);
    if version >= 1 {
        r.with_error_code(CLUSTER.code())
    } else {
        r
    }
}

/// Kafka's `AlterPartitionReassignmentsRequest.getErrorResponse`.
fn reassignments_denied(
    req: &AlterPartitionReassignmentsRequest,
) -> AlterPartitionReassignmentsResponse {
    use alter_partition_reassignments_response::{
        ReassignablePartitionResponse, ReassignableTopicResponse,
    };
    let responses = req
        .topics
        .iter()
        .map(|t| {
            ReassignableTopicResponse::default().with_name(t.name.clone()).with_partitions(
                t.partitions
                    .iter()
                    .map(|p| {
                        ReassignablePartitionResponse::default()
                            .with_partition_index(p.partition_index)
                            .with_error_code(CLUSTER.code())
                            .with_error_message(msg(CLUSTER_DENIED))
                    })
                    .collect(),
            )
        })
        .collect();
    AlterPartitionReassignmentsResponse::default()
        .with_error_code(CLUSTER.code())
        .with_error_message(msg(CLUSTER_DENIED))
        .with_responses(responses)
}

/// Kafka's `AlterUserScramCredentialsRequest.getErrorResponse`: one result per user named.
fn scram_denied(req: &AlterUserScramCredentialsRequest) -> AlterUserScramCredentialsResponse {
    use alter_user_scram_credentials_response::AlterUserScramCredentialsResult;
    let mut users: Vec<StrBytes> = Vec::new();
    let named = req.deletions.iter().map(|d| &d.name).chain(req.upsertions.iter().map(|u| &u.name));
    for name in named {
        if !users.contains(name) {
            users.push(name.clone());
        }
    }
    AlterUserScramCredentialsResponse::default().with_results(
        users
            .into_iter()
            .map(|user| {
                AlterUserScramCredentialsResult::default()
                    .with_user(user)
                    .with_error_code(CLUSTER.code())
                    .with_error_message(msg(CLUSTER_DENIED))
            })
            .collect(),
    )
}
