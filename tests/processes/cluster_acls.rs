//! ACLs in a three-node cluster of real processes (issue 35): written through one node they
//! reach every broker through the quorum and apply there (a SASL user refused, then allowed,
//! on another node); they survive a SIGKILL of the active controller (the next one deletes
//! and adds ACLs), the killed node applies on return what it missed, and every node has the
//! same ACLs after a full cluster restart. Brokers reach each other as `User:ANONYMOUS` on
//! PLAINTEXT, so that principal is the super user, as Kafka's documentation prescribes for a
//! PLAINTEXT inter-broker listener. Controller ports 127.0.0.1:26420-26422.

use crate::common;

use std::time::{Duration, Instant};

use bytes::Bytes;
use common::cluster::Cluster;
use common::{Broker, Wire};
use kafka_protocol::messages::create_acls_request::AclCreation;
use kafka_protocol::messages::delete_acls_request::DeleteAclsFilter;
use kafka_protocol::messages::metadata_request::MetadataRequestTopic;
use kafka_protocol::messages::*;
use kafka_protocol::protocol::StrBytes;
use shardlog::authz::{Operation, PatternType, Permission, ResourceType};
use shardlog::protocol::blocking::BlockingConn;

const PORTS: [u16; 3] = [26420, 26421, 26422];
const LIMIT: Duration = Duration::from_secs(60);
const JAAS: &str = "org.apache.kafka.common.security.plain.PlainLoginModule required \
                    user_alice=\"alice-secret\";";

fn s(text: &str) -> StrBytes {
    StrBytes::from_string(text.to_string())
}

fn allow(rt: ResourceType, name: &str, pattern: PatternType, op: Operation) -> AclCreation {
    AclCreation::default()
        .with_resource_type(rt.code())
        .with_resource_name(s(name))
        .with_resource_pattern_type(pattern.code())
        .with_principal(s("User:alice"))
        .with_host(s("*"))
        .with_operation(op.code())
        .with_permission_type(Permission::Allow.code())
}

/// The (resource name, operation) of every ACL one node describes.
fn acls_on(b: &Broker) -> Option<Vec<(String, i8)>> {
    let mut w = Wire::try_connect(&b.addr)?;
    std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        let req = DescribeAclsRequest::default()
            .with_resource_type_filter(ResourceType::Any.code())
            .with_resource_name_filter(None)
            .with_pattern_type_filter(PatternType::Any.code())
            .with_principal_filter(None)
            .with_host_filter(None)
            .with_operation(Operation::Any.code())
            .with_permission_type(Permission::Any.code());
        let r: DescribeAclsResponse = w.call(ApiKey::DescribeAcls, 3, &req);
        assert_eq!(r.error_code, 0);
        let mut out: Vec<(String, i8)> = r
            .resources
            .iter()
            .flat_map(|x| x.acls.iter().map(|a| (x.resource_name.to_string(), a.operation)))
            .collect();
        out.sort();
        out
    }))
    .ok()
}

/// Waits until every running node describes exactly `want`.
fn wait_everywhere(c: &Cluster, want: &[(&str, Operation)], what: &str) {
    let mut want: Vec<(String, i8)> = want.iter().map(|(n, o)| ((*n).into(), o.code())).collect();
    want.sort();
    let deadline = Instant::now() + LIMIT;
    loop {
        let views: Vec<_> = c.running().map(|(_, b)| acls_on(b)).collect();
        if views.iter().all(|v| v.as_ref() == Some(&want)) {
            return;
        }
        assert!(Instant::now() < deadline, "{what}: nodes describe {views:?}, want {want:?}");
        std::thread::sleep(Duration::from_millis(200));
    }
}

fn port_of(b: &Broker, name: &str) -> String {
    let needle = format!("listener {name} listening on ");
    let line = b.log_lines(&needle).pop().expect("listener line");
    line.split(&needle).nth(1).and_then(|r| r.split_whitespace().next()).expect("addr").into()
}

/// Metadata's error code for topic `t` asked for by alice on node `b` (SASL PLAIN).
fn alice_sees(b: &Broker, topic: &str) -> Option<i16> {
    let mut c = BlockingConn::open(&port_of(b, "SASL_PLAINTEXT"), "acl-cluster").ok()?;
    let hs = SaslHandshakeRequest::default().with_mechanism(s("PLAIN"));
    let _: SaslHandshakeResponse = c.call(ApiKey::SaslHandshake, 1, &hs).ok()?;
    let auth = SaslAuthenticateRequest::default()
        .with_auth_bytes(Bytes::from_static(b"\0alice\0alice-secret"));
    let r: SaslAuthenticateResponse = c.call(ApiKey::SaslAuthenticate, 2, &auth).ok()?;
    (r.error_code == 0).then_some(())?;
    let req = MetadataRequest::default()
        .with_topics(Some(vec![
            MetadataRequestTopic::default().with_name(Some(TopicName(s(topic))))
        ]))
        .with_allow_auto_topic_creation(false);
    let m: MetadataResponse = c.call(ApiKey::Metadata, 12, &req).ok()?;
    Some(m.topics[0].error_code)
}

fn controller_of(c: &Cluster) -> i32 {
    c.wait_for(LIMIT, "a controller", |w| {
        let m: MetadataResponse =
            w.call(ApiKey::Metadata, 12, &MetadataRequest::default().with_topics(Some(Vec::new())));
        (m.controller_id.0 > 0).then_some(m.controller_id.0)
    })
}

#[test]
fn acls_replicate_survive_failover_and_restart() {
    let extra = [
        "--listeners",
        "PLAINTEXT://127.0.0.1:0,SASL_PLAINTEXT://127.0.0.1:0",
        "--sasl-jaas-config",
        JAAS,
        "--authorizer-class-name",
        "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
        "--super-users",
        "User:ANONYMOUS",
    ];
    let mut c = Cluster::start_at(&PORTS, &extra);
    c.wait_brokers(3, LIMIT);
    c.create_rf3("orders", 1, LIMIT);
    assert_eq!(alice_sees(c.broker(2), "orders"), Some(29), "no ACL yet");

    // Written through one node, applied on every node.
    c.wait_for(LIMIT, "CreateAcls", |w| {
        let req = CreateAclsRequest::default().with_creations(vec![
            allow(ResourceType::Topic, "orders", PatternType::Literal, Operation::Read),
            allow(ResourceType::Topic, "pay-", PatternType::Prefixed, Operation::Write),
        ]);
        let r: CreateAclsResponse = w.call(ApiKey::CreateAcls, 3, &req);
        r.results.iter().all(|x| x.error_code == 0).then_some(())
    });
    let both = [("orders", Operation::Read), ("pay-", Operation::Write)];
    wait_everywhere(&c, &both, "after CreateAcls");
    assert_eq!(alice_sees(c.broker(2), "orders"), Some(0), "READ implies DESCRIBE, node 3");

    // SIGKILL the active controller; the next one changes the ACLs.
    let victim = c.index_of(controller_of(&c));
    c.kill(victim);
    c.wait_for(LIMIT, "DeleteAcls and CreateAcls after the failover", |w| {
        let del = DeleteAclsRequest::default().with_filters(vec![DeleteAclsFilter::default()
            .with_resource_type_filter(ResourceType::Topic.code())
            .with_resource_name_filter(Some(s("pay-")))
            .with_pattern_type_filter(PatternType::Prefixed.code())
            .with_principal_filter(None)
            .with_host_filter(None)
            .with_operation(Operation::Any.code())
            .with_permission_type(Permission::Any.code())]);
        let r: DeleteAclsResponse = w.call(ApiKey::DeleteAcls, 3, &del);
        (r.filter_results[0].error_code == 0).then_some(())?;
        let add = CreateAclsRequest::default().with_creations(vec![allow(
            ResourceType::Group,
            "g1",
            PatternType::Literal,
            Operation::Read,
        )]);
        let r: CreateAclsResponse = w.call(ApiKey::CreateAcls, 3, &add);
        (r.results[0].error_code == 0).then_some(())
    });
    let after = [("g1", Operation::Read), ("orders", Operation::Read)];
    wait_everywhere(&c, &after, "after the failover");

    // The killed node returns and applies what it missed.
    c.start_node(victim);
    wait_everywhere(&c, &after, "the returning node");
    assert_eq!(alice_sees(c.broker(victim), "orders"), Some(0));

    // A full restart: every node reads the ACLs back from its metadata log.
    for i in 0..3 {
        c.terminate(i);
    }
    c.start_nodes(&[0, 1, 2]);
    c.wait_brokers(3, LIMIT);
    wait_everywhere(&c, &after, "after a full restart");
    assert_eq!(alice_sees(c.broker(0), "orders"), Some(0));
    assert_eq!(alice_sees(c.broker(0), "pay-eu"), Some(29), "the deleted prefixed ACL stays gone");
}
