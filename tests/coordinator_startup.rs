//! Issue 12, coordinator start-up: on a fresh broker, clients that send FindCoordinator
//! and JoinGroup at once, on many connections, while `__consumer_offsets` is being created
//! never see NOT_COORDINATOR (which sends them back to FindCoordinator and shows in their
//! logs). The only acceptable errors are the retriable ones Kafka gives in that window:
//! COORDINATOR_NOT_AVAILABLE (FindCoordinator) and COORDINATOR_LOAD_IN_PROGRESS (group
//! requests). Raw requests, real broker process, bounded waits.

mod common;

use std::time::{Duration, Instant};

use common::{Broker, Wire};
use kafka_protocol::messages::join_group_request::JoinGroupRequestProtocol;
use kafka_protocol::messages::*;
use kafka_protocol::protocol::StrBytes;

const NOT_COORDINATOR: i16 = 16;
const COORDINATOR_NOT_AVAILABLE: i16 = 15;
const COORDINATOR_LOAD_IN_PROGRESS: i16 = 14;
const CONNECTIONS: usize = 12;

fn s(v: &str) -> StrBytes {
    StrBytes::from_string(v.to_string())
}

/// FindCoordinator then JoinGroup until the join succeeds; returns every error code seen.
fn find_and_join(addr: &str, group: &str) -> Vec<(&'static str, i16)> {
    let mut wire = Wire::connect(addr);
    let mut seen = Vec::new();
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        assert!(Instant::now() < deadline, "{group}: no successful join in 30 s: {seen:?}");
        let find = FindCoordinatorRequest::default().with_key(s(group)).with_key_type(0);
        let found: FindCoordinatorResponse = wire.call(ApiKey::FindCoordinator, 3, &find);
        if found.error_code != 0 {
            seen.push(("FindCoordinator", found.error_code));
            std::thread::sleep(Duration::from_millis(20));
            continue;
        }
        let join = JoinGroupRequest::default()
            .with_group_id(GroupId(s(group)))
            .with_session_timeout_ms(10_000)
            .with_rebalance_timeout_ms(10_000)
            .with_member_id(s(""))
            .with_protocol_type(s("consumer"))
            .with_protocols(vec![JoinGroupRequestProtocol::default().with_name(s("range"))]);
        // v3: no MEMBER_ID_REQUIRED round, so the first join completes the group.
        let joined: JoinGroupResponse = wire.call(ApiKey::JoinGroup, 3, &join);
        if joined.error_code == 0 {
            return seen;
        }
        seen.push(("JoinGroup", joined.error_code));
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn first_group_requests_on_a_fresh_broker_never_get_not_coordinator() {
    let dir = tempfile::tempdir().expect("tempdir");
    let broker = Broker::start_with(
        dir.path(),
        &["--shards", "2", "--group-initial-rebalance-delay-ms", "0"],
    );
    let addr = broker.addr.clone();
    let workers: Vec<_> = (0..CONNECTIONS)
        .map(|i| {
            let addr = addr.clone();
            std::thread::spawn(move || find_and_join(&addr, &format!("fresh-group-{i}")))
        })
        .collect();
    for worker in workers {
        let seen = worker.join().expect("worker");
        for (api, code) in seen {
            assert_ne!(code, NOT_COORDINATOR, "{api} answered NOT_COORDINATOR");
            assert!(
                [COORDINATOR_NOT_AVAILABLE, COORDINATOR_LOAD_IN_PROGRESS].contains(&code),
                "{api} answered {code}, not a coordinator-loading error"
            );
        }
    }
}
