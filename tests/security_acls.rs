//! Authorization at the wire (issue 35), against the real broker binary with a PLAINTEXT and
//! a SASL_PLAINTEXT listener, Kafka's StandardAuthorizer configured and `super.users =
//! User:admin`: the ACL APIs (CreateAcls, DescribeAcls with ANY and MATCH filters, DeleteAcls)
//! with Kafka's error codes for a principal without the cluster permission
//! (CLUSTER_AUTHORIZATION_FAILED) and bad creations (INVALID_REQUEST); ACLs surviving a
//! restart; and the checks of produce, fetch, metadata, groups and transactions for a user
//! with and without the ACLs Kafka's documentation lists; `shardlog acls`; and quotas per
//! authenticated user (`users/alice` and `users/alice/clients/fast`).

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
         \"listener.name.sasl_plaintext.sasl.enabled.mechanisms\" = \"PLAIN,SCRAM-SHA-256\"\n"
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

/// A connection authenticated with PLAIN as `user`.
fn login(addr: &str, user: &str) -> BlockingConn {
    login_as(addr, user, "acl-test")
}

/// [`login`] with a client id of its own.
fn login_as(addr: &str, user: &str, client_id: &'static str) -> BlockingConn {
    let mut c = BlockingConn::open(addr, client_id).expect("connect");
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
    let mut c =
        BlockingConn::open(&broker.listener_addr("PLAINTEXT"), "acl-test").expect("connect");
    assert_eq!(describe_all(&mut c).error_code, 54, "SECURITY_DISABLED");
    let op = creation(ResourceType::Topic, "t", PatternType::Literal, "User:a", Operation::Read);
    assert_eq!(create_acls(&mut c, vec![op]), [54]);
}

#[test]
fn acl_apis_with_the_standard_authorizer() {
    let dir = tempfile::tempdir().expect("tempdir");
    let config = write_config(dir.path(), true);
    let mut broker = start(dir.path(), &config);
    let sasl = broker.listener_addr("SASL_PLAINTEXT");
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
    let mut admin = login(&broker.listener_addr("SASL_PLAINTEXT"), "admin");
    assert_eq!(acl_count(&describe_all(&mut admin)), 2, "after a restart");
}

fn acl(
    rt: ResourceType,
    name: &str,
    pattern: PatternType,
    principal: &str,
    op: Operation,
    permission: Permission,
) -> AclCreation {
    creation(rt, name, pattern, principal, op).with_permission_type(permission.code())
}

fn create_topic(c: &mut BlockingConn, name: &str) -> i16 {
    use kafka_protocol::messages::create_topics_request::CreatableTopic;
    let req = CreateTopicsRequest::default().with_timeout_ms(10_000).with_topics(vec![
        CreatableTopic::default()
            .with_name(TopicName(s(name)))
            .with_num_partitions(1)
            .with_replication_factor(1),
    ]);
    let r: CreateTopicsResponse = c.call(ApiKey::CreateTopics, 7, &req).expect("CreateTopics");
    r.topics[0].error_code
}

/// CreateTopics of several topics: (name, error code) sorted by name.
fn create_topics(c: &mut BlockingConn, names: &[&str]) -> Vec<(String, i16)> {
    use kafka_protocol::messages::create_topics_request::CreatableTopic;
    let topics = names
        .iter()
        .map(|n| {
            CreatableTopic::default()
                .with_name(TopicName(s(n)))
                .with_num_partitions(1)
                .with_replication_factor(1)
        })
        .collect();
    let req = CreateTopicsRequest::default().with_timeout_ms(10_000).with_topics(topics);
    let r: CreateTopicsResponse = c.call(ApiKey::CreateTopics, 7, &req).expect("CreateTopics");
    let mut out: Vec<(String, i16)> =
        r.topics.iter().map(|t| (t.name.0.to_string(), t.error_code)).collect();
    out.sort();
    out
}

/// DeleteTopics (v6, by name): (name, error code) sorted by name.
fn delete_topics(c: &mut BlockingConn, names: &[&str]) -> Vec<(String, i16)> {
    use kafka_protocol::messages::delete_topics_request::DeleteTopicState;
    let topics = names
        .iter()
        .map(|n| DeleteTopicState::default().with_name(Some(TopicName(s(n)))))
        .collect();
    let req = DeleteTopicsRequest::default().with_timeout_ms(10_000).with_topics(topics);
    let r: DeleteTopicsResponse = c.call(ApiKey::DeleteTopics, 6, &req).expect("DeleteTopics");
    let mut out: Vec<(String, i16)> = r
        .responses
        .iter()
        .map(|t| (t.name.as_ref().map(|n| n.0.to_string()).unwrap_or_default(), t.error_code))
        .collect();
    out.sort();
    out
}

fn produce(c: &mut BlockingConn, topic: &str) -> i16 {
    use kafka_protocol::messages::produce_request::{PartitionProduceData, TopicProduceData};
    let batch = shardlog::storage::records::build_simple_batch(1, 16, 1_700_000_000_000);
    let part = PartitionProduceData::default().with_index(0).with_records(Some(batch));
    let data =
        TopicProduceData::default().with_name(TopicName(s(topic))).with_partition_data(vec![part]);
    let req =
        ProduceRequest::default().with_acks(-1).with_timeout_ms(10_000).with_topic_data(vec![data]);
    let r: ProduceResponse = c.call(ApiKey::Produce, 9, &req).expect("Produce");
    r.responses[0].partition_responses[0].error_code
}

fn fetch(c: &mut BlockingConn, topic: &str) -> i16 {
    use kafka_protocol::messages::fetch_request::{FetchPartition, FetchTopic};
    let part = FetchPartition::default().with_partition(0).with_partition_max_bytes(1 << 20);
    let t = FetchTopic::default().with_topic(TopicName(s(topic))).with_partitions(vec![part]);
    let req = FetchRequest::default()
        .with_replica_id(BrokerId(-1))
        .with_max_bytes(1 << 20)
        .with_topics(vec![t]);
    let r: FetchResponse = c.call(ApiKey::Fetch, 11, &req).expect("Fetch");
    r.responses[0].partitions[0].error_code
}

/// (name, error code) of each topic Metadata answers (`None`: every topic).
fn metadata(c: &mut BlockingConn, topics: Option<&[&str]>) -> Vec<(String, i16)> {
    use kafka_protocol::messages::metadata_request::MetadataRequestTopic;
    let topics = topics.map(|ts| {
        ts.iter()
            .map(|t| MetadataRequestTopic::default().with_name(Some(TopicName(s(t)))))
            .collect()
    });
    let req = MetadataRequest::default().with_topics(topics).with_allow_auto_topic_creation(false);
    let r: MetadataResponse = c.call(ApiKey::Metadata, 12, &req).expect("Metadata");
    let mut out: Vec<(String, i16)> = r
        .topics
        .iter()
        .map(|t| (t.name.as_ref().map(|n| n.0.to_string()).unwrap_or_default(), t.error_code))
        .collect();
    out.sort();
    out
}

fn find_coordinator(c: &mut BlockingConn, key: &str, key_type: i8) -> i16 {
    let req = FindCoordinatorRequest::default()
        .with_key_type(key_type)
        .with_coordinator_keys(vec![s(key)]);
    let r: FindCoordinatorResponse = c.call(ApiKey::FindCoordinator, 4, &req).expect("FindCoord");
    r.coordinators[0].error_code
}

fn join_group(c: &mut BlockingConn, group: &str) -> i16 {
    use kafka_protocol::messages::join_group_request::JoinGroupRequestProtocol;
    let req = JoinGroupRequest::default()
        .with_group_id(GroupId(s(group)))
        .with_session_timeout_ms(10_000)
        .with_rebalance_timeout_ms(10_000)
        .with_member_id(s(""))
        .with_protocol_type(s("consumer"))
        .with_protocols(vec![JoinGroupRequestProtocol::default()
            .with_name(s("range"))
            .with_metadata(Bytes::from_static(&[0, 1, 0, 0, 0, 0, 0, 0, 0, 0]))]);
    let r: JoinGroupResponse = c.call(ApiKey::JoinGroup, 5, &req).expect("JoinGroup");
    r.error_code
}

fn offset_commit(c: &mut BlockingConn, group: &str, topic: &str) -> i16 {
    use kafka_protocol::messages::offset_commit_request::{
        OffsetCommitRequestPartition, OffsetCommitRequestTopic,
    };
    let req = OffsetCommitRequest::default()
        .with_group_id(GroupId(s(group)))
        .with_generation_id_or_member_epoch(-1)
        .with_member_id(s(""))
        .with_topics(vec![OffsetCommitRequestTopic::default()
            .with_name(TopicName(s(topic)))
            .with_partitions(vec![OffsetCommitRequestPartition::default()
                .with_partition_index(0)
                .with_committed_offset(1)])]);
    let r: OffsetCommitResponse = c.call(ApiKey::OffsetCommit, 8, &req).expect("OffsetCommit");
    r.topics[0].partitions[0].error_code
}

fn init_producer_id(c: &mut BlockingConn, txn: Option<&str>) -> i16 {
    let req = InitProducerIdRequest::default()
        .with_transactional_id(txn.map(|t| TransactionalId(s(t))))
        .with_transaction_timeout_ms(30_000)
        .with_producer_id(ProducerId(-1))
        .with_producer_epoch(-1);
    let r: InitProducerIdResponse =
        c.call(ApiKey::InitProducerId, 4, &req).expect("InitProducerId");
    r.error_code
}

/// A user with and without the ACLs Kafka's documentation lists for a producer (WRITE on
/// the topic; IDEMPOTENT_WRITE or WRITE on some topic for an idempotent one; WRITE on the
/// transactional id) and a consumer (READ on the topic and the group), with Kafka's codes
/// for each refusal, and a DENY taking effect on a connection that was allowed before.
#[test]
fn requests_are_authorized_as_kafka_does() {
    let dir = tempfile::tempdir().expect("tempdir");
    let config = write_config(dir.path(), true);
    let broker = start(dir.path(), &config);
    let sasl = broker.listener_addr("SASL_PLAINTEXT");
    let mut admin = login(&sasl, "admin");
    let mut alice = login(&sasl, "alice");
    let mut anonymous =
        BlockingConn::open(&broker.listener_addr("PLAINTEXT"), "acl-test").expect("connect");
    assert_eq!(create_topic(&mut admin, "orders"), 0, "a super user creates");
    assert_eq!(create_topic(&mut admin, "secret"), 0);
    assert_eq!(produce(&mut admin, "orders"), 0);

    // No ACLs: refused with Kafka's code for each API.
    assert_eq!(metadata(&mut alice, None), [], "a listing hides what alice may not see");
    assert_eq!(metadata(&mut alice, Some(&["orders"])), [("orders".into(), 29)]);
    assert_eq!(metadata(&mut anonymous, Some(&["orders"])), [("orders".into(), 29)]);
    assert_eq!(produce(&mut alice, "orders"), 29, "TOPIC_AUTHORIZATION_FAILED");
    assert_eq!(fetch(&mut alice, "orders"), 29);
    assert_eq!(create_topic(&mut alice, "alice-topic"), 29);
    assert_eq!(find_coordinator(&mut alice, "g1", 0), 30, "GROUP_AUTHORIZATION_FAILED");
    assert_eq!(join_group(&mut alice, "g1"), 30);
    assert_eq!(offset_commit(&mut alice, "g1", "orders"), 30);
    assert_eq!(find_coordinator(&mut alice, "tx1", 1), 53, "TRANSACTIONAL_ID_AUTHORIZATION_FAILED");
    assert_eq!(init_producer_id(&mut alice, Some("tx1")), 53);
    assert_eq!(init_producer_id(&mut alice, None), 31, "CLUSTER_AUTHORIZATION_FAILED");

    // Kafka's documented ACLs for a producer and a consumer of "orders" in group g1.
    let alice_acls = vec![
        acl(
            ResourceType::Topic,
            "orders",
            PatternType::Literal,
            "User:alice",
            Operation::Write,
            Permission::Allow,
        ),
        acl(
            ResourceType::Topic,
            "ord",
            PatternType::Prefixed,
            "User:alice",
            Operation::Read,
            Permission::Allow,
        ),
        acl(
            ResourceType::Group,
            "g",
            PatternType::Prefixed,
            "User:alice",
            Operation::Read,
            Permission::Allow,
        ),
        acl(
            ResourceType::TransactionalId,
            "tx1",
            PatternType::Literal,
            "User:alice",
            Operation::Write,
            Permission::Allow,
        ),
    ];
    assert_eq!(create_acls(&mut admin, alice_acls), [0, 0, 0, 0]);
    assert_eq!(metadata(&mut alice, None), [("orders".into(), 0)], "WRITE implies DESCRIBE");
    assert_eq!(
        metadata(&mut alice, Some(&["orders", "secret"])),
        [("orders".into(), 0), ("secret".into(), 29)]
    );
    assert_eq!(produce(&mut alice, "orders"), 0);
    assert_eq!(fetch(&mut alice, "orders"), 0);
    assert_eq!(produce(&mut alice, "secret"), 29);
    assert_eq!(find_coordinator(&mut alice, "g1", 0), 0);
    assert_eq!(join_group(&mut alice, "g1"), 79, "MEMBER_ID_REQUIRED: past the check");
    assert_eq!(offset_commit(&mut alice, "g1", "secret"), 29);
    assert_eq!(init_producer_id(&mut alice, None), 0, "WRITE on a topic allows idempotence");
    assert_eq!(init_producer_id(&mut alice, Some("tx1")), 0);
    assert_eq!(metadata(&mut anonymous, Some(&["orders"])), [("orders".into(), 29)]);

    // Controller requests partly allowed: the refused topics are answered on this broker, the
    // others go to the controller (KRaft's ControllerApis does the same).
    let own = [
        acl(
            ResourceType::Topic,
            "alice-",
            PatternType::Prefixed,
            "User:alice",
            Operation::Create,
            Permission::Allow,
        ),
        acl(
            ResourceType::Topic,
            "alice-",
            PatternType::Prefixed,
            "User:alice",
            Operation::Delete,
            Permission::Allow,
        ),
    ];
    assert_eq!(create_acls(&mut admin, own.to_vec()), [0, 0]);
    let created = create_topics(&mut alice, &["alice-1", "bob-1"]);
    assert_eq!(created, [("alice-1".into(), 0), ("bob-1".into(), 29)]);
    let deleted = delete_topics(&mut alice, &["alice-1", "orders", "secret"]);
    assert_eq!(
        deleted,
        [("alice-1".into(), 0), ("orders".into(), 29), ("secret".into(), 29)],
        "DELETE on alice-*, DESCRIBE (from WRITE) but no DELETE on orders, nothing on secret"
    );
    assert_eq!(metadata(&mut admin, Some(&["orders"])), [("orders".into(), 0)], "not deleted");

    // A DENY wins over the prefixed ALLOW, on the connection that read before.
    let deny = acl(
        ResourceType::Topic,
        "orders",
        PatternType::Literal,
        "User:alice",
        Operation::Read,
        Permission::Deny,
    );
    assert_eq!(create_acls(&mut admin, vec![deny]), [0]);
    assert_eq!(fetch(&mut alice, "orders"), 29, "the connection's cached decision is gone");
    assert_eq!(produce(&mut alice, "orders"), 0, "a DENY of READ does not deny WRITE");
    assert!(broker.log_contains("authorization denied"), "denials are logged");
}

/// `shardlog acls` as `kafka-acls.sh`: add (literal and prefixed), list in Kafka's format,
/// remove; SCRAM and PLAIN logins; a user without ALTER on the cluster refused.
#[test]
fn acls_cli() {
    let dir = tempfile::tempdir().expect("tempdir");
    let config = write_config(dir.path(), true);
    let broker = start(dir.path(), &config);
    let sasl = broker.listener_addr("SASL_PLAINTEXT");
    let run = |user: &str, args: &[&str]| {
        let out = std::process::Command::new(env!("CARGO_BIN_EXE_shardlog"))
            .arg("acls")
            .args(args)
            .args(["-b", &sasl, "--user", user, "--password", &format!("{user}-secret")])
            .output()
            .expect("run shardlog acls");
        let text = String::from_utf8_lossy(&out.stdout).to_string()
            + &String::from_utf8_lossy(&out.stderr);
        (out.status.code(), text)
    };
    let (code, text) = run(
        "admin",
        &[
            "add",
            "--allow-principal",
            "User:alice",
            "--operation",
            "Read,Describe",
            "--topic",
            "t1",
        ],
    );
    assert_eq!(code, Some(0), "{text}");
    assert!(text.contains("Added (principal=User:alice, host=*, operation=READ"), "{text}");
    let (code, text) = run(
        "admin",
        &[
            "add",
            "--deny-principal",
            "User:bob",
            "--operation",
            "write",
            "--topic",
            "pay-",
            "--resource-pattern-type",
            "prefixed",
        ],
    );
    assert_eq!(code, Some(0), "{text}");
    // A SCRAM login: the super user's credential, written with AlterUserScramCredentials.
    scram_credential(&mut login(&sasl, "admin"), "admin");
    let (code, text) = run("admin", &["list", "--sasl-mechanism", "SCRAM-SHA-256"]);
    assert_eq!(code, Some(0), "{text}");
    assert!(
        text.contains(
            "Current ACLs for resource `ResourcePattern(resourceType=TOPIC, name=pay-, \
             patternType=PREFIXED)`: \n\t(principal=User:bob, host=*, operation=WRITE, \
             permissionType=DENY)"
        ),
        "{text}"
    );
    let (_, text) =
        run("admin", &["list", "--topic", "pay-eu", "--resource-pattern-type", "match"]);
    assert!(text.contains("name=pay-") && !text.contains("name=t1"), "{text}");
    let (code, text) = run("alice", &["add", "--allow-principal", "User:alice", "--cluster"]);
    assert_eq!(code, Some(1), "{text}");
    assert!(text.contains("CLUSTER_AUTHORIZATION_FAILED"), "{text}");
    let (code, text) = run(
        "admin",
        &["remove", "--allow-principal", "User:alice", "--operation", "read", "--topic", "t1"],
    );
    assert_eq!((code, text.trim()), (Some(0), "Removed 1 ACL(s)."));
    let (_, text) = run("admin", &["list", "--topic", "t1"]);
    assert!(text.contains("operation=DESCRIBE") && !text.contains("operation=READ"), "{text}");
    let (code, text) =
        run("admin", &["remove", "--topic", "pay-", "--resource-pattern-type", "prefixed"]);
    assert_eq!((code, text.trim()), (Some(0), "Removed 1 ACL(s)."));
}

fn scram_credential(c: &mut BlockingConn, user: &str) {
    use kafka_protocol::messages::alter_user_scram_credentials_request::ScramCredentialUpsertion;
    use shardlog::controller::scram::ScramMechanism;
    let m = ScramMechanism::Sha256;
    let salt = b"0123456789abcdef".to_vec();
    let salted = m.salted_password(format!("{user}-secret").as_bytes(), &salt, 4096);
    let req = AlterUserScramCredentialsRequest::default().with_upsertions(vec![
        ScramCredentialUpsertion::default()
            .with_name(s(user))
            .with_mechanism(m.code())
            .with_iterations(4096)
            .with_salt(Bytes::from(salt))
            .with_salted_password(Bytes::from(salted)),
    ]);
    let r: AlterUserScramCredentialsResponse =
        c.call(ApiKey::AlterUserScramCredentials, 0, &req).expect("alter");
    assert_eq!(r.results[0].error_code, 0);
}

/// The throttle time of a produce of `bytes` record bytes to `topic`.
fn produce_throttle(c: &mut BlockingConn, topic: &str, bytes: usize) -> i32 {
    use kafka_protocol::messages::produce_request::{PartitionProduceData, TopicProduceData};
    let batch = shardlog::storage::records::build_simple_batch(1, bytes, 1_700_000_000_000);
    let part = PartitionProduceData::default().with_index(0).with_records(Some(batch));
    let data =
        TopicProduceData::default().with_name(TopicName(s(topic))).with_partition_data(vec![part]);
    let req =
        ProduceRequest::default().with_acks(1).with_timeout_ms(10_000).with_topic_data(vec![data]);
    let r: ProduceResponse = c.call(ApiKey::Produce, 9, &req).expect("Produce");
    assert_eq!(r.responses[0].partition_responses[0].error_code, 0);
    r.throttle_time_ms
}

fn set_quota(c: &mut BlockingConn, entity: &[(&str, Option<&str>)], rate: f64) {
    use kafka_protocol::messages::alter_client_quotas_request::{EntityData, EntryData, OpData};
    let entity = entity
        .iter()
        .map(|(kind, name)| {
            EntityData::default().with_entity_type(s(kind)).with_entity_name(name.map(s))
        })
        .collect();
    let op = OpData::default().with_key(s("producer_byte_rate")).with_value(rate);
    let req = AlterClientQuotasRequest::default()
        .with_entries(vec![EntryData::default().with_entity(entity).with_ops(vec![op])]);
    let r: AlterClientQuotasResponse = c.call(ApiKey::AlterClientQuotas, 1, &req).expect("quota");
    assert_eq!(r.entries[0].error_code, 0);
}

/// Quotas per authenticated user (issue 35): `users/alice` throttles alice's produce and not
/// bob's; `users/alice/clients/fast` wins over `users/alice` for that client id (KIP-55's
/// order), with the principal from SASL rather than ANONYMOUS.
#[test]
fn quotas_follow_the_authenticated_user() {
    let dir = tempfile::tempdir().expect("tempdir");
    let config = write_config(dir.path(), true);
    let broker = start(dir.path(), &config);
    let sasl = broker.listener_addr("SASL_PLAINTEXT");
    let mut admin = login(&sasl, "admin");
    assert_eq!(create_topic(&mut admin, "q"), 0);
    let all = acl(
        ResourceType::Topic,
        "q",
        PatternType::Literal,
        "User:*",
        Operation::Write,
        Permission::Allow,
    );
    assert_eq!(create_acls(&mut admin, vec![all]), [0]);
    set_quota(&mut admin, &[("user", Some("alice"))], 1024.0);
    set_quota(&mut admin, &[("user", Some("alice")), ("client-id", Some("fast"))], 1e9);
    let mut alice = login(&sasl, "alice");
    let mut bob = login(&sasl, "bob");
    let mut alice_fast = login_as(&sasl, "alice", "fast");
    // The first throttled answer ends a client's turn: its connection is muted after it.
    let throttled = |c: &mut BlockingConn| {
        (0..3).map(|_| produce_throttle(c, "q", 64 * 1024)).find(|t| *t > 0).unwrap_or(0)
    };
    assert!(throttled(&mut alice) > 0, "alice is over users/alice");
    assert_eq!(throttled(&mut bob), 0, "bob has no quota");
    assert_eq!(throttled(&mut alice_fast), 0, "users/alice/clients/fast wins");
}

/// OffsetFetch without DESCRIBE on the group, as Kafka answers it: v2+ at the top level;
/// v1, which has no top-level error, on every partition the request named.
#[test]
fn offset_fetch_v1_reports_a_group_refusal_on_each_partition() {
    use kafka_protocol::messages::offset_fetch_request::OffsetFetchRequestTopic;
    let dir = tempfile::tempdir().expect("tempdir");
    let config = write_config(dir.path(), true);
    let broker = start(dir.path(), &config);
    let mut bob = login(&broker.listener_addr("SASL_PLAINTEXT"), "bob");
    let req =
        OffsetFetchRequest::default().with_group_id(GroupId(s("billing"))).with_topics(Some(vec![
            OffsetFetchRequestTopic::default()
                .with_name(TopicName(s("orders")))
                .with_partition_indexes(vec![0, 1]),
        ]));
    let r: OffsetFetchResponse = bob.call(ApiKey::OffsetFetch, 1, &req).expect("v1");
    let codes: Vec<(i32, i16)> = r
        .topics
        .iter()
        .flat_map(|t| t.partitions.iter().map(|p| (p.partition_index, p.error_code)))
        .collect();
    assert_eq!(codes, [(0, 30), (1, 30)], "GROUP_AUTHORIZATION_FAILED on each partition");
    let r: OffsetFetchResponse = bob.call(ApiKey::OffsetFetch, 2, &req).expect("v2");
    assert_eq!(r.error_code, 30);
    assert!(r.topics.is_empty());
}
