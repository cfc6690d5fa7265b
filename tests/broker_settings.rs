//! Issue 12, broker settings with Kafka's names, against the real broker process: a
//! setting drives the behaviour (a 3 s session timeout is refused under the default
//! `group.min.session.timeout.ms` of 6000 and accepted once the operator lowers it, by flag
//! or by TOML key); DescribeConfigs of the BROKER resource shows a set value as
//! STATIC_BROKER_CONFIG and an untouched one as DEFAULT_CONFIG; `connections.max.idle.ms`
//! closes idle connections and leaves busy ones open. Bounded waits only.

mod common;

use std::io::Read;
use std::time::{Duration, Instant};

use common::{Broker, Wire};
use kafka_protocol::messages::describe_configs_request::DescribeConfigsResource;
use kafka_protocol::messages::join_group_request::JoinGroupRequestProtocol;
use kafka_protocol::messages::*;
use kafka_protocol::protocol::StrBytes;

const INVALID_SESSION_TIMEOUT: i16 = 26;
const SOURCE_STATIC_BROKER: i8 = 4;
const SOURCE_DEFAULT: i8 = 5;

fn s(v: &str) -> StrBytes {
    StrBytes::from_string(v.to_string())
}

/// A JoinGroup (v3: no MEMBER_ID_REQUIRED round) with this session timeout; its error code.
fn join_code(addr: &str, group: &str, session_ms: i32) -> i16 {
    let mut wire = Wire::connect(addr);
    let find = FindCoordinatorRequest::default().with_key(s(group));
    let found: FindCoordinatorResponse = wire.call(ApiKey::FindCoordinator, 3, &find);
    assert_eq!(found.error_code, 0, "FindCoordinator");
    let join = JoinGroupRequest::default()
        .with_group_id(GroupId(s(group)))
        .with_session_timeout_ms(session_ms)
        .with_rebalance_timeout_ms(10_000)
        .with_member_id(s(""))
        .with_protocol_type(s("consumer"))
        .with_protocols(vec![JoinGroupRequestProtocol::default().with_name(s("range"))]);
    let joined: JoinGroupResponse = wire.call(ApiKey::JoinGroup, 3, &join);
    joined.error_code
}

/// DescribeConfigs of broker `node`: name → (value, source).
fn describe_broker(addr: &str, node: &str) -> Vec<(String, Option<String>, i8)> {
    let mut wire = Wire::connect(addr);
    let resource = DescribeConfigsResource::default()
        .with_resource_type(4)
        .with_resource_name(s(node))
        .with_configuration_keys(None);
    let req = DescribeConfigsRequest::default().with_resources(vec![resource]);
    let resp: DescribeConfigsResponse = wire.call(ApiKey::DescribeConfigs, 4, &req);
    let result = &resp.results[0];
    assert_eq!(result.error_code, 0, "{:?}", result.error_message);
    result
        .configs
        .iter()
        .map(|c| (c.name.to_string(), c.value.as_ref().map(ToString::to_string), c.config_source))
        .collect()
}

fn entry(configs: &[(String, Option<String>, i8)], name: &str) -> (Option<String>, i8) {
    let (_, value, source) =
        configs.iter().find(|(n, _, _)| n == name).unwrap_or_else(|| panic!("{name} listed"));
    (value.clone(), *source)
}

#[test]
fn session_timeout_floor_is_a_setting_by_flag_and_by_toml_key() {
    let fast = ["--shards", "1", "--group-initial-rebalance-delay-ms", "0"];
    // Kafka's default floor, 6000 ms: a 3 s session is refused.
    let dir = tempfile::tempdir().expect("tempdir");
    let broker = Broker::start_with(dir.path(), &fast);
    assert_eq!(join_code(&broker.addr, "st-default", 3_000), INVALID_SESSION_TIMEOUT);
    assert_eq!(join_code(&broker.addr, "st-default", 6_000), 0);
    let configs = describe_broker(&broker.addr, "0");
    assert_eq!(
        entry(&configs, "group.min.session.timeout.ms"),
        (Some("6000".into()), SOURCE_DEFAULT)
    );
    drop(broker);

    // Lowered by the flag.
    let dir = tempfile::tempdir().expect("tempdir");
    let mut args = fast.to_vec();
    args.extend(["--group-min-session-timeout-ms", "1000"]);
    let broker = Broker::start_with(dir.path(), &args);
    assert_eq!(join_code(&broker.addr, "st-flag", 3_000), 0);
    assert_eq!(join_code(&broker.addr, "st-flag-low", 500), INVALID_SESSION_TIMEOUT);
    drop(broker);

    // Lowered by the TOML key (Kafka's dotted name); DescribeConfigs shows where each comes
    // from.
    let dir = tempfile::tempdir().expect("tempdir");
    let file = dir.path().join("shardlog.toml");
    std::fs::write(
        &file,
        "node_id = 3\n\"group.min.session.timeout.ms\" = 2000\nlog.retention.hours = 24\n",
    )
    .expect("write config");
    let data = dir.path().join("data");
    let mut args = fast.to_vec();
    let file_arg = file.to_str().expect("utf-8 path").to_string();
    args.extend(["--config", &file_arg]);
    let broker = Broker::start_with(&data, &args);
    assert_eq!(join_code(&broker.addr, "st-toml", 3_000), 0);
    let configs = describe_broker(&broker.addr, "3");
    let static_ = |v: &str| (Some(v.to_string()), SOURCE_STATIC_BROKER);
    let default = |v: &str| (Some(v.to_string()), SOURCE_DEFAULT);
    assert_eq!(entry(&configs, "group.min.session.timeout.ms"), static_("2000"));
    assert_eq!(entry(&configs, "log.retention.hours"), static_("24"));
    assert_eq!(entry(&configs, "group.initial.rebalance.delay.ms"), static_("0"));
    assert_eq!(entry(&configs, "group.max.session.timeout.ms"), default("1800000"));
    assert_eq!(entry(&configs, "offsets.retention.minutes"), default("10080"));
    assert_eq!(entry(&configs, "offsets.topic.num.partitions"), default("50"));
    assert_eq!(entry(&configs, "connections.max.idle.ms"), default("600000"));
    assert_eq!(entry(&configs, "min.insync.replicas"), default("1"));
    assert_eq!(entry(&configs, "default.replication.factor"), default("1"));
    assert_eq!(entry(&configs, "message.max.bytes"), default("1048588"));
    assert_eq!(entry(&configs, "log.segment.bytes"), default("1073741824"));
    let listeners = entry(&configs, "listeners");
    assert_eq!(listeners.1, SOURCE_STATIC_BROKER);
    let bound = format!("PLAINTEXT://{}", broker.addr);
    assert_eq!(listeners.0.as_deref(), Some(bound.as_str()), "the bound address");
}

#[test]
fn idle_connections_are_closed_after_connections_max_idle_ms() {
    let dir = tempfile::tempdir().expect("tempdir");
    let broker =
        Broker::start_with(dir.path(), &["--shards", "1", "--connections-max-idle-ms", "700"]);
    // A connection that sends nothing is closed after ~700 ms.
    let mut idle = std::net::TcpStream::connect(&broker.addr).expect("connect");
    idle.set_read_timeout(Some(Duration::from_secs(10))).expect("timeout");
    let started = Instant::now();
    let mut buf = [0u8; 1];
    let n = idle.read(&mut buf).expect("read");
    let took = started.elapsed();
    assert_eq!(n, 0, "closed by the broker");
    assert!(took >= Duration::from_millis(600), "closed too early: {took:?}");
    assert!(took < Duration::from_secs(5), "closed too late: {took:?}");
    // A connection that keeps asking survives well past the limit.
    let mut busy = Wire::connect(&broker.addr);
    let started = Instant::now();
    while started.elapsed() < Duration::from_millis(2_000) {
        let _: ApiVersionsResponse =
            busy.call(ApiKey::ApiVersions, 3, &ApiVersionsRequest::default());
        std::thread::sleep(Duration::from_millis(200));
    }
}
