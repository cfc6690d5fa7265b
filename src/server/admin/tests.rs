//! Handler tests: error paths with Kafka's codes, and every response encoded at every
//! declared version (the codec refuses fields a version lacks, so this catches them).

use bytes::BytesMut;
use kafka_protocol::messages::create_partitions_request::{
    CreatePartitionsAssignment, CreatePartitionsTopic,
};
use kafka_protocol::messages::create_topics_request::{CreatableTopic, CreatableTopicConfig};
use kafka_protocol::messages::delete_topics_request::DeleteTopicState;
use kafka_protocol::messages::describe_configs_request::DescribeConfigsResource;
use kafka_protocol::messages::metadata_request::MetadataRequestTopic;
use kafka_protocol::messages::*;
use kafka_protocol::protocol::{Encodable, StrBytes};
use uuid::Uuid;

use super::*;
use crate::controller::{BrokerDefaults, Controller, ControllerState};
use crate::server::authz::AllowAll;
use crate::types::NodeId;

/// A working controller state, as the active controller runs handlers on it (the records
/// they queue are what would be proposed; here they stay applied, as once committed).
fn controller(_dir: &std::path::Path) -> ControllerState {
    let defaults = BrokerDefaults::from_settings([("log.retention.hours", "24")]).unwrap();
    ControllerState::new("test-cluster".into(), NodeId(1), 2, defaults).unwrap()
}

fn s(v: &str) -> StrBytes {
    StrBytes::from_string(v.to_string())
}

fn tn(v: &str) -> TopicName {
    TopicName(s(v))
}

fn encodes<T: Encodable>(msg: &T, version: i16) {
    let mut buf = BytesMut::new();
    msg.encode(&mut buf, version).unwrap_or_else(|e| panic!("encode v{version}: {e}"));
}

fn advertised() -> Vec<Advertised> {
    vec![(NodeId(1), "127.0.0.1".to_string(), 9092)]
}

fn creatable(name: &str, partitions: i32, rf: i16) -> CreatableTopic {
    CreatableTopic::default()
        .with_name(tn(name))
        .with_num_partitions(partitions)
        .with_replication_factor(rf)
}

fn create(
    c: &mut ControllerState,
    topics: Vec<CreatableTopic>,
    v: i16,
) -> Mutation<CreateTopicsResponse> {
    let req = CreateTopicsRequest::default().with_topics(topics);
    create_topics::handle(c, &req, v)
}

#[test]
fn create_topics_success_and_errors_at_every_version() {
    let (lo, hi) = create_topics::VERSIONS;
    for v in lo..=hi {
        let dir = tempfile::tempdir().unwrap();
        let mut c = controller(dir.path());
        let cfg = CreatableTopicConfig::default()
            .with_name(s("retention.ms"))
            .with_value(Some(s("1000")));
        let topics = vec![
            creatable("ok", 3, -1).with_configs(vec![cfg]),
            creatable("bad name", 1, 1),
            creatable("zero", 0, 1),
            creatable("huge", crate::constants::TOPIC_PARTITIONS_MAX + 1, 1),
            creatable("rf", 1, 3),
            creatable("cfg", 1, 1).with_configs(vec![CreatableTopicConfig::default()
                .with_name(s("compression.type"))
                .with_value(Some(s("gzip")))]),
            creatable("dup", 1, 1),
            creatable("dup", 1, 1),
        ];
        let m = create(&mut c, topics, v);
        assert!(m.image_changed);
        encodes(&m.response, v);
        let codes: Vec<i16> = m.response.topics.iter().map(|t| t.error_code).collect();
        assert_eq!(codes, vec![0, 17, 37, 37, 38, 40, 42, 42], "v{v}");
        let ok = &m.response.topics[0];
        if v >= 5 {
            assert_eq!((ok.num_partitions, ok.replication_factor), (3, 1));
            let configs = ok.configs.as_ref().unwrap();
            let retention = configs.iter().find(|c| c.name.as_str() == "retention.ms").unwrap();
            assert_eq!(retention.value.as_ref().unwrap().as_str(), "1000");
            assert_eq!(retention.config_source, describe_configs::SOURCE_TOPIC);
        }
        if v >= 7 {
            assert_eq!(ok.topic_id, c.image().topic("ok").unwrap().topic_id);
        }
        let msg = m.response.topics[5].error_message.as_ref().unwrap().as_str().to_string();
        assert!(msg.contains("recompressing"), "{msg}");
        let m = create(&mut c, vec![creatable("ok", 1, 1)], v);
        assert_eq!(m.response.topics[0].error_code, 36);
        assert!(!m.image_changed);
    }
}

#[test]
fn create_topics_validate_only_changes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let mut c = controller(dir.path());
    let req = CreateTopicsRequest::default()
        .with_topics(vec![creatable("v", 2, 1)])
        .with_validate_only(true);
    let m = create_topics::handle(&mut c, &req, 7);
    assert!(!m.image_changed);
    assert_eq!(m.response.topics[0].error_code, 0);
    assert_eq!(m.response.topics[0].num_partitions, 2);
    assert!(c.image().topic("v").is_none());
}

#[test]
fn delete_topics_by_name_and_by_id() {
    let (lo, hi) = delete_topics::VERSIONS;
    for v in lo..=hi {
        let dir = tempfile::tempdir().unwrap();
        let mut c = controller(dir.path());
        create(&mut c, vec![creatable("a", 1, 1), creatable("b", 1, 1)], 7);
        let id_b = c.image().topic("b").unwrap().topic_id;
        let req = if v >= 6 {
            DeleteTopicsRequest::default().with_topics(vec![
                DeleteTopicState::default().with_name(Some(tn("a"))),
                DeleteTopicState::default().with_topic_id(id_b),
                DeleteTopicState::default().with_name(Some(tn("missing"))),
                DeleteTopicState::default().with_topic_id(Uuid::new_v4()),
            ])
        } else {
            DeleteTopicsRequest::default().with_topic_names(vec![tn("a"), tn("b"), tn("missing")])
        };
        let m = delete_topics::handle(&mut c, &req, v);
        encodes(&m.response, v);
        assert!(m.image_changed);
        let codes: Vec<i16> = m.response.responses.iter().map(|r| r.error_code).collect();
        let expected = if v >= 6 { vec![0, 0, 3, 100] } else { vec![0, 0, 3] };
        assert_eq!(codes, expected, "v{v}");
        assert!(c.image().topics.is_empty());
        if v >= 6 {
            assert_eq!(m.response.responses[1].name.as_ref().unwrap().0.as_str(), "b");
            assert_eq!(m.response.responses[1].topic_id, id_b);
        }
    }
}

#[test]
fn create_partitions_grow_only() {
    let dir = tempfile::tempdir().unwrap();
    let mut c = controller(dir.path());
    create(&mut c, vec![creatable("p", 2, 1)], 7);
    let topic = |name: &str, count: i32| {
        CreatePartitionsTopic::default()
            .with_name(tn(name))
            .with_count(count)
            .with_assignments(None)
    };
    let (lo, hi) = create_partitions::VERSIONS;
    for v in lo..=hi {
        let req = CreatePartitionsRequest::default().with_topics(vec![
            topic("p", 1),
            topic("missing", 3),
            topic("p", 2),
        ]);
        let m = create_partitions::handle(&mut c, &req, v);
        encodes(&m.response, v);
        let codes: Vec<i16> = m.response.results.iter().map(|r| r.error_code).collect();
        assert_eq!(codes, vec![42, 3, 42]);
    }
    let req =
        CreatePartitionsRequest::default().with_topics(vec![topic("p", 1), topic("missing", 3)]);
    let codes: Vec<i16> = create_partitions::handle(&mut c, &req, 3)
        .response
        .results
        .iter()
        .map(|r| r.error_code)
        .collect();
    assert_eq!(codes, vec![37, 3]);
    let req = CreatePartitionsRequest::default()
        .with_topics(vec![topic("p", 4)])
        .with_validate_only(true);
    let m = create_partitions::handle(&mut c, &req, 3);
    assert_eq!((m.response.results[0].error_code, m.image_changed), (0, false));
    let bad = topic("p", 3).with_assignments(Some(vec![
        CreatePartitionsAssignment::default().with_broker_ids(vec![BrokerId(9)])
    ]));
    let m = create_partitions::handle(
        &mut c,
        &CreatePartitionsRequest::default().with_topics(vec![bad]),
        3,
    );
    assert_eq!(m.response.results[0].error_code, 39);
    let m = create_partitions::handle(
        &mut c,
        &CreatePartitionsRequest::default().with_topics(vec![topic("p", 4)]),
        3,
    );
    assert_eq!((m.response.results[0].error_code, m.image_changed), (0, true));
    assert_eq!(c.image().topic("p").unwrap().partitions.len(), 4);
}

fn describe_req(resources: Vec<(i8, &str, Option<Vec<&str>>)>) -> DescribeConfigsRequest {
    DescribeConfigsRequest::default()
        .with_resources(
            resources
                .into_iter()
                .map(|(t, n, keys)| {
                    DescribeConfigsResource::default()
                        .with_resource_type(t)
                        .with_resource_name(s(n))
                        .with_configuration_keys(keys.map(|k| k.into_iter().map(s).collect()))
                })
                .collect(),
        )
        .with_include_synonyms(true)
        .with_include_documentation(true)
}

#[test]
fn describe_configs_sources_synonyms_and_errors() {
    let dir = tempfile::tempdir().unwrap();
    let mut c = controller(dir.path());
    let cfg =
        CreatableTopicConfig::default().with_name(s("segment.ms")).with_value(Some(s("5000")));
    create(&mut c, vec![creatable("t", 1, 1).with_configs(vec![cfg])], 7);
    let image = c.image();
    let (lo, hi) = describe_configs::VERSIONS;
    for v in lo..=hi {
        let req = describe_req(vec![
            (2, "t", None),
            (2, "missing", None),
            (2, "bad name", None),
            (4, "1", Some(vec!["log.retention.hours", "num.partitions", "node.id"])),
            (4, "2", None),
            (4, "", None),
            (8, "1", None),
        ]);
        let resp = describe_configs::handle(&image, &req, v);
        encodes(&resp, v);
        let codes: Vec<i16> = resp.results.iter().map(|r| r.error_code).collect();
        assert_eq!(codes, vec![0, 3, 17, 0, 42, 0, 42]);
        let topic = &resp.results[0].configs;
        let get = |n: &str| topic.iter().find(|c| c.name.as_str() == n).unwrap();
        let seg = get("segment.ms");
        assert_eq!((seg.value.as_ref().unwrap().as_str(), seg.config_source), ("5000", 1));
        assert_eq!(seg.synonyms[0].source, 1);
        assert_eq!(seg.synonyms.last().unwrap().name.as_str(), "log.roll.hours");
        let ret = get("retention.ms");
        assert_eq!((ret.value.as_ref().unwrap().as_str(), ret.config_source), ("86400000", 4));
        assert_eq!(ret.synonyms[0].name.as_str(), "log.retention.hours");
        assert_eq!(ret.synonyms[0].value.as_ref().unwrap().as_str(), "24");
        let max = get("max.message.bytes");
        assert_eq!((max.value.as_ref().unwrap().as_str(), max.config_source), ("1048588", 5));
        assert!(topic.iter().all(|c| c.name.as_str() != "internal.segment.bytes"));
        if v >= 3 {
            assert_eq!(max.config_type, 3);
            assert!(max.documentation.is_some());
        }
        let broker: Vec<_> = resp.results[3].configs.iter().map(|c| c.name.as_str()).collect();
        assert_eq!(broker, vec!["log.retention.hours", "node.id", "num.partitions"]);
        assert_eq!(resp.results[3].configs[0].config_source, 4);
        assert_eq!(resp.results[3].configs[2].config_source, 5);
        assert!(resp.results[5].configs.is_empty());
    }
    // Without synonyms requested, none are returned.
    let req = describe_req(vec![(2, "t", Some(vec!["retention.ms"]))]).with_include_synonyms(false);
    let resp = describe_configs::handle(&image, &req, 4);
    assert_eq!(resp.results[0].configs.len(), 1);
    assert!(resp.results[0].configs[0].synonyms.is_empty());
    // The full broker list encodes too.
    let resp = describe_configs::handle(&image, &describe_req(vec![(4, "1", None)]), 4);
    assert!(resp.results[0].configs.len() > 30);
}

#[test]
fn init_producer_id_unique_and_transactional_refused() {
    let dir = tempfile::tempdir().unwrap();
    let mut c = controller(dir.path());
    let (lo, hi) = init_producer_id::VERSIONS;
    let mut ids = Vec::new();
    for v in lo..=hi {
        let idempotent = InitProducerIdRequest::default().with_transactional_id(None);
        let m = init_producer_id::handle(&mut c, &idempotent, v);
        encodes(&m.response, v);
        assert_eq!((m.response.error_code, m.response.producer_epoch), (0, 0));
        ids.push(m.response.producer_id.0);
        let req =
            InitProducerIdRequest::default().with_transactional_id(Some(TransactionalId(s("tx"))));
        let m = init_producer_id::handle(&mut c, &req, v);
        encodes(&m.response, v);
        assert_eq!(m.response.error_code, 53);
        assert_eq!(m.response.producer_id.0, -1);
        let m = init_producer_id::handle(&mut c, &InitProducerIdRequest::default(), v);
        assert_eq!(m.response.error_code, 42);
    }
    let mut unique = ids.clone();
    unique.dedup();
    assert_eq!(unique, ids);
}

#[test]
fn describe_cluster_lists_this_broker() {
    let dir = tempfile::tempdir().unwrap();
    let c = controller(dir.path());
    let image = c.image();
    let (lo, hi) = describe_cluster::VERSIONS;
    for v in lo..=hi {
        let req =
            DescribeClusterRequest::default().with_include_cluster_authorized_operations(true);
        let resp = describe_cluster::handle(&image, &req, v, (&advertised(), "PLAINTEXT"));
        encodes(&resp, v);
        assert_eq!(resp.error_code, 0);
        assert_eq!(resp.cluster_id.as_str(), image.cluster_id);
        assert_eq!(resp.controller_id.0, 1);
        assert_eq!(resp.brokers.len(), 1);
        assert_eq!((resp.brokers[0].host.as_str(), resp.brokers[0].port), ("127.0.0.1", 9092));
    }
    let req = DescribeClusterRequest::default().with_endpoint_type(2);
    let resp = describe_cluster::handle(&image, &req, 1, (&advertised(), "PLAINTEXT"));
    encodes(&resp, 1);
    assert_eq!(resp.error_code, 115);
}

fn md_request(names: Option<Vec<&str>>) -> MetadataRequest {
    MetadataRequest::default()
        .with_topics(names.map(|n| {
            n.into_iter().map(|x| MetadataRequestTopic::default().with_name(Some(tn(x)))).collect()
        }))
        .with_allow_auto_topic_creation(true)
}

#[test]
fn metadata_every_version_with_auto_create_and_errors() {
    let dir = tempfile::tempdir().unwrap();
    let mut c = controller(dir.path());
    create(&mut c, vec![creatable("t", 3, 1), creatable("__consumer_offsets", 1, 1)], 7);
    let image = c.image();
    let (lo, hi) = metadata::VERSIONS;
    for v in lo..=hi {
        let all = if v == 0 { md_request(Some(vec![])) } else { md_request(None) };
        let (resp, create) =
            metadata::build_metadata(&image, &all, v, (&advertised(), "PLAINTEXT"), &AllowAll);
        encodes(&resp, v);
        assert!(create.is_empty());
        assert_eq!(resp.topics.len(), 2);
        assert_eq!(resp.brokers.len(), 1);
        let t = resp.topics.iter().find(|t| t.name.as_ref().unwrap().0.as_str() == "t").unwrap();
        assert_eq!(t.partitions.len(), 3);
        assert_eq!(t.partitions[2].leader_id.0, 1);
        assert_eq!(t.partitions[2].isr_nodes, vec![BrokerId(1)]);
        if v >= 1 {
            assert_eq!(resp.controller_id.0, 1);
            let internal = resp.topics.iter().find(|t| t.is_internal);
            assert_eq!(internal.unwrap().name.as_ref().unwrap().0.as_str(), "__consumer_offsets");
        }
        if v >= 2 {
            assert_eq!(resp.cluster_id.as_ref().unwrap().as_str(), image.cluster_id);
        }
        if v >= 7 {
            assert_eq!(t.partitions[0].leader_epoch, 0);
        }
        if v >= 10 {
            assert_eq!(t.topic_id, image.topic("t").unwrap().topic_id);
        }
        let req = md_request(Some(vec!["t", "new", "bad name", "__transaction_state", "new"]));
        let (resp, create) =
            metadata::build_metadata(&image, &req, v, (&advertised(), "PLAINTEXT"), &AllowAll);
        encodes(&resp, v);
        assert_eq!(create, vec!["new".to_string()]);
        let codes: Vec<i16> = resp.topics.iter().map(|t| t.error_code).collect();
        assert_eq!(codes, vec![0, 5, 17, 3], "v{v}");
        if v >= 4 {
            let req = md_request(Some(vec!["new"])).with_allow_auto_topic_creation(false);
            let (resp, create) =
                metadata::build_metadata(&image, &req, v, (&advertised(), "PLAINTEXT"), &AllowAll);
            assert!(create.is_empty());
            assert_eq!(resp.topics[0].error_code, 3);
        }
        if v >= 8 {
            let req = md_request(Some(vec!["t"])).with_include_topic_authorized_operations(true);
            let (resp, _) =
                metadata::build_metadata(&image, &req, v, (&advertised(), "PLAINTEXT"), &AllowAll);
            encodes(&resp, v);
            assert_eq!(resp.topics[0].topic_authorized_operations, metadata::TOPIC_OPERATIONS);
        }
    }
    let id = image.topic("t").unwrap().topic_id;
    let unknown = Uuid::new_v4();
    let req = MetadataRequest::default().with_topics(Some(vec![
        MetadataRequestTopic::default().with_name(None).with_topic_id(id),
        MetadataRequestTopic::default().with_name(None).with_topic_id(unknown),
    ]));
    let (resp, _) =
        metadata::build_metadata(&image, &req, 12, (&advertised(), "PLAINTEXT"), &AllowAll);
    encodes(&resp, 12);
    assert_eq!(resp.topics[0].name.as_ref().unwrap().0.as_str(), "t");
    assert_eq!((resp.topics[1].error_code, resp.topics[1].topic_id), (100, unknown));
}

#[test]
fn auto_create_disabled_by_the_broker() {
    let dir = tempfile::tempdir().unwrap();
    let defaults = BrokerDefaults::from_settings([("auto.create.topics.enable", "false")]).unwrap();
    let c = Controller::open(dir.path(), NodeId(1), 1, defaults).unwrap();
    let (resp, create) = metadata::build_metadata(
        &c.image(),
        &md_request(Some(vec!["x"])),
        12,
        (&advertised(), "PLAINTEXT"),
        &AllowAll,
    );
    assert!(create.is_empty());
    assert_eq!(resp.topics[0].error_code, 3);
}

#[test]
fn storage_failures_map_to_kafka_storage_error() {
    let err = crate::controller::ControllerError::ReadOnly("disk".into());
    assert_eq!(error_code(&err).0, 56);
}

#[test]
fn broker_describe_reflects_typed_defaults_set_directly() {
    let dir = tempfile::tempdir().unwrap();
    let defaults = BrokerDefaults { num_partitions: 6, ..BrokerDefaults::default() };
    let c = Controller::open(dir.path(), NodeId(1), 1, defaults).unwrap();
    let req =
        describe_req(vec![(4, "1", Some(vec!["num.partitions", "auto.create.topics.enable"]))]);
    let resp = describe_configs::handle(&c.image(), &req, 4);
    let entries: Vec<_> = resp.results[0]
        .configs
        .iter()
        .map(|e| (e.name.as_str(), e.value.as_ref().unwrap().as_str(), e.config_source))
        .collect();
    assert_eq!(entries, vec![("auto.create.topics.enable", "true", 5), ("num.partitions", "6", 4)]);
}

fn inc_op(
    name: &str,
    op: i8,
    value: Option<&str>,
) -> incremental_alter_configs_request::AlterableConfig {
    incremental_alter_configs_request::AlterableConfig::default()
        .with_name(s(name))
        .with_config_operation(op)
        .with_value(value.map(s))
}

fn inc_req(
    resources: Vec<(i8, &str, Vec<incremental_alter_configs_request::AlterableConfig>)>,
) -> IncrementalAlterConfigsRequest {
    IncrementalAlterConfigsRequest::default().with_resources(
        resources
            .into_iter()
            .map(|(t, n, configs)| {
                incremental_alter_configs_request::AlterConfigsResource::default()
                    .with_resource_type(t)
                    .with_resource_name(s(n))
                    .with_configs(configs)
            })
            .collect(),
    )
}

#[test]
fn incremental_alter_configs_operations_and_errors() {
    let dir = tempfile::tempdir().unwrap();
    let mut c = controller(dir.path());
    create(&mut c, vec![creatable("t", 1, 1), creatable("u", 1, 1)], 7);
    let (lo, hi) = incremental_alter_configs::VERSIONS;
    for v in lo..=hi {
        let req = inc_req(vec![
            (
                2,
                "t",
                vec![
                    inc_op("retention.ms", 0, Some("1000")),
                    inc_op("cleanup.policy", 2, Some("compact")),
                ],
            ),
            (2, "missing", vec![inc_op("retention.ms", 0, Some("1"))]),
            (2, "u", vec![inc_op("retention.ms", 0, Some("abc"))]),
            (2, "u", vec![]),
            (4, "1", vec![inc_op("log.retention.hours", 0, Some("1"))]),
        ]);
        let m = incremental_alter_configs::handle(&mut c, &req, v);
        encodes(&m.response, v);
        let codes: Vec<i16> = m.response.responses.iter().map(|r| r.error_code).collect();
        assert_eq!(codes, vec![0, 3, 42, 42, 42], "v{v}");
        let t = c.image().topic("t").unwrap().clone();
        assert_eq!(t.configs.get("cleanup.policy").map(String::as_str), Some("delete,compact"));
        assert_eq!(t.config.retention_ms, 1000);
    }
    let req = inc_req(vec![(2, "u", vec![inc_op("retention.ms", 0, Some("abc"))])]);
    let m = incremental_alter_configs::handle(&mut c, &req, 1);
    assert_eq!(m.response.responses[0].error_code, 40);
    assert!(!m.image_changed);
    let req = inc_req(vec![(2, "t", vec![inc_op("retention.ms", 2, Some("5"))])]);
    assert_eq!(
        incremental_alter_configs::handle(&mut c, &req, 1).response.responses[0].error_code,
        42
    );
    let req = inc_req(vec![(
        2,
        "t",
        vec![inc_op("retention.ms", 1, None), inc_op("cleanup.policy", 3, Some("delete"))],
    )]);
    let m = incremental_alter_configs::handle(&mut c, &req, 1);
    assert_eq!((m.response.responses[0].error_code, m.image_changed), (0, true));
    let t = c.image().topic("t").unwrap().clone();
    assert_eq!(t.configs.get("cleanup.policy").map(String::as_str), Some("compact"));
    assert!(!t.configs.contains_key("retention.ms"));
    // What the handlers proposed rebuilds the same state on a node that only applies
    // committed entries.
    let mut replay = controller(dir.path());
    for (i, frame) in c.take_proposals().into_iter().enumerate() {
        replay.apply_entry(i as u64 + 1, &frame).unwrap();
    }
    assert_eq!(replay.image().topic("t").unwrap().configs.len(), 1);
}

#[test]
fn alter_configs_replaces_the_whole_set() {
    let dir = tempfile::tempdir().unwrap();
    let mut c = controller(dir.path());
    let cfg = CreatableTopicConfig::default().with_name(s("retention.ms")).with_value(Some(s("5")));
    create(&mut c, vec![creatable("t", 1, 1).with_configs(vec![cfg])], 7);
    let resource = |configs: Vec<(&str, Option<&str>)>| {
        alter_configs_request::AlterConfigsResource::default()
            .with_resource_type(2)
            .with_resource_name(s("t"))
            .with_configs(
                configs
                    .into_iter()
                    .map(|(n, v)| {
                        alter_configs_request::AlterableConfig::default()
                            .with_name(s(n))
                            .with_value(v.map(s))
                    })
                    .collect(),
            )
    };
    let (lo, hi) = alter_configs::VERSIONS;
    for v in lo..=hi {
        let req = AlterConfigsRequest::default()
            .with_resources(vec![resource(vec![("segment.ms", Some("100"))])])
            .with_validate_only(true);
        let m = alter_configs::handle(&mut c, &req, v);
        encodes(&m.response, v);
        assert_eq!((m.response.responses[0].error_code, m.image_changed), (0, false));
    }
    let req = AlterConfigsRequest::default()
        .with_resources(vec![resource(vec![("segment.ms", Some("100"))])]);
    let m = alter_configs::handle(&mut c, &req, 2);
    assert_eq!((m.response.responses[0].error_code, m.image_changed), (0, true));
    let t = c.image().topic("t").unwrap().clone();
    assert_eq!(t.configs.keys().collect::<Vec<_>>(), vec!["segment.ms"]);
    let req =
        AlterConfigsRequest::default().with_resources(vec![resource(vec![("segment.ms", None)])]);
    assert_eq!(alter_configs::handle(&mut c, &req, 2).response.responses[0].error_code, 42);
    let req =
        AlterConfigsRequest::default().with_resources(vec![resource(vec![("nope", Some("1"))])]);
    let m = alter_configs::handle(&mut c, &req, 2);
    assert_eq!(m.response.responses[0].error_code, 40);
    let msg = m.response.responses[0].error_message.as_ref().unwrap().to_string();
    assert_eq!(msg, "Unknown topic config name: nope");
}

#[test]
fn broker_resources_alter_and_describe_dynamic_configs() {
    let dir = tempfile::tempdir().unwrap();
    let mut c = controller(dir.path());
    create(&mut c, vec![creatable("t", 1, 1)], 7);
    // One resource per request: a name twice in one request is refused as a duplicate.
    let cases = [
        ("", inc_op("log.cleanup.policy", 2, Some("compact")), 0),
        ("1", inc_op("log.retention.ms", 0, Some("1000")), 0),
        ("2", inc_op("log.retention.ms", 0, Some("1")), 42),
        ("x", inc_op("log.retention.ms", 0, Some("1")), 42),
        ("", inc_op("no.such.setting", 0, Some("1")), 40),
        ("", inc_op("log.retention.ms", 2, Some("1")), 40),
        ("", inc_op("num.partitions", 0, Some("3")), 42),
        ("", inc_op("log.segment.bytes", 0, Some("1")), 42),
    ];
    let (lo, hi) = incremental_alter_configs::VERSIONS;
    for (name, op, code) in cases {
        for v in lo..=hi {
            let req = inc_req(vec![(4, name, vec![op.clone()])]);
            let m = incremental_alter_configs::handle(&mut c, &req, v);
            encodes(&m.response, v);
            let r = &m.response.responses[0];
            assert_eq!(r.error_code, code, "{name:?} {:?} v{v}: {:?}", op.name, r.error_message);
        }
    }
    let t = c.image().topic("t").unwrap().clone();
    assert_eq!(t.config.retention_ms, 1000, "the per-broker value beats the static hours");
    assert!(t.config.cleanup_policy.compact && t.config.cleanup_policy.delete);

    let image = c.image();
    let req = describe_req(vec![(4, "", None), (4, "1", Some(vec!["log.retention.ms"]))]);
    let resp = describe_configs::handle(&image, &req, 4);
    encodes(&resp, 4);
    let default = &resp.results[0].configs;
    assert_eq!(default.len(), 1);
    assert_eq!(default[0].name.as_str(), "log.cleanup.policy");
    assert_eq!(default[0].value.as_deref(), Some("delete,compact"));
    assert_eq!(default[0].config_source, 3);
    let mine = &resp.results[1].configs[0];
    assert_eq!((mine.config_source, mine.read_only), (2, false));
    let req = describe_req(vec![(2, "t", Some(vec!["retention.ms"]))]);
    let resp = describe_configs::handle(&image, &req, 4);
    let synonyms: Vec<(&str, i8)> =
        resp.results[0].configs[0].synonyms.iter().map(|y| (y.name.as_str(), y.source)).collect();
    assert_eq!(
        synonyms,
        [("log.retention.ms", 2), ("log.retention.hours", 4), ("log.retention.hours", 5)]
    );
    // Legacy AlterConfigs replaces the default's set: log.cleanup.policy goes back.
    let req = AlterConfigsRequest::default().with_resources(vec![
        alter_configs_request::AlterConfigsResource::default()
            .with_resource_type(4)
            .with_resource_name(s(""))
            .with_configs(vec![alter_configs_request::AlterableConfig::default()
                .with_name(s("log.cleaner.backoff.ms"))
                .with_value(Some(s("1000")))]),
    ]);
    let m = alter_configs::handle(&mut c, &req, 2);
    assert_eq!(m.response.responses[0].error_code, 0);
    assert!(m.image_changed);
    let t = c.image().topic("t").unwrap().clone();
    assert!(!t.config.cleanup_policy.compact);
    assert_eq!(c.image().broker_defaults.long("log.cleaner.backoff.ms"), 1000);
}
