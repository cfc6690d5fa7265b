//! Connection limits against a real broker process, each hit and checked for its
//! Kafka-visible behaviour, with another client served meanwhile:
//! - `max.connections`: a connection over the cap is not accepted (it waits in the kernel's
//!   accept queue: connect succeeds, no answer) until another closes, then it is served;
//! - `max.connections.per.ip` (+ overrides): a connection over its address's limit is
//!   closed at once;
//! - `max.connection.creation.rate`: accepts are paced (figure printed);
//! - `request.receive.timeout.ms`: a client that sends a frame's size and trickles the rest
//!   is disconnected;
//! - `queued.max.request.bytes`: with the budget held by a parked request, a request that
//!   does not fit is read only after the parked one is answered, while small ones still are.
//!
//! `connections.max.idle.ms` is tested in `broker_settings.rs`. Waits are bounded and loose.

mod common;

use std::io::{ErrorKind, Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

use common::{Broker, Wire};
use kafka_protocol::messages::fetch_request::{FetchPartition, FetchTopic, ForgottenTopic};
use kafka_protocol::messages::produce_request::{PartitionProduceData, TopicProduceData};
use kafka_protocol::messages::{
    ApiKey, ApiVersionsRequest, ApiVersionsResponse, FetchRequest, FetchResponse, ProduceRequest,
    ProduceResponse, TopicName,
};
use kafka_protocol::protocol::StrBytes;

/// An ApiVersions v0 request frame (header v1, empty body).
fn api_versions_frame(correlation_id: i32) -> Vec<u8> {
    let client = b"limits";
    let mut body = Vec::new();
    body.extend_from_slice(&18i16.to_be_bytes());
    body.extend_from_slice(&0i16.to_be_bytes());
    body.extend_from_slice(&correlation_id.to_be_bytes());
    body.extend_from_slice(&(client.len() as i16).to_be_bytes());
    body.extend_from_slice(client);
    let mut frame = (body.len() as i32).to_be_bytes().to_vec();
    frame.extend_from_slice(&body);
    frame
}

/// Sends an ApiVersions request and waits up to `wait` for the answer's correlation id.
/// `Ok(true)`: answered; `Ok(false)`: no answer yet; `Err`: the broker closed the connection.
fn ask(stream: &mut TcpStream, wait: Duration) -> Result<bool, String> {
    stream.write_all(&api_versions_frame(7)).map_err(|e| e.to_string())?;
    answered(stream, wait)
}

fn answered(stream: &mut TcpStream, wait: Duration) -> Result<bool, String> {
    stream.set_read_timeout(Some(wait)).expect("timeout");
    let mut head = [0u8; 8];
    match stream.read_exact(&mut head) {
        Ok(()) => {
            assert_eq!(i32::from_be_bytes(head[4..8].try_into().unwrap()), 7);
            let size = i32::from_be_bytes(head[..4].try_into().unwrap()) as usize;
            let mut rest = vec![0u8; size - 4];
            stream.read_exact(&mut rest).map_err(|e| e.to_string())?;
            Ok(true)
        }
        Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => Ok(false),
        Err(e) => Err(e.to_string()),
    }
}

/// Whether the broker closes `stream` within `wait` (EOF or reset).
fn closed_within(stream: &mut TcpStream, wait: Duration) -> bool {
    stream.set_read_timeout(Some(wait)).expect("timeout");
    let mut buf = [0u8; 64];
    match stream.read(&mut buf) {
        Ok(0) => true,
        Ok(_) => false,
        Err(e) => !matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut),
    }
}

fn served(addr: &str) -> bool {
    let mut other = TcpStream::connect(addr).expect("connect");
    ask(&mut other, Duration::from_secs(10)) == Ok(true)
}

#[test]
fn max_connections_holds_new_connections_in_the_accept_queue() {
    // With two shards the count is the broker's: a close on one shard frees the other.
    for shards in ["1", "2"] {
        let dir = tempfile::tempdir().expect("tempdir");
        let broker =
            Broker::start_with(dir.path(), &["--shards", shards, "--max-connections", "2"]);
        let mut a = TcpStream::connect(&broker.addr).expect("connect");
        let mut b = TcpStream::connect(&broker.addr).expect("connect");
        assert_eq!(ask(&mut a, Duration::from_secs(10)), Ok(true));
        assert_eq!(ask(&mut b, Duration::from_secs(10)), Ok(true));
        // The third connects (kernel backlog) but is not accepted: its request waits.
        let mut c = TcpStream::connect(&broker.addr).expect("connect: the kernel queues it");
        assert_eq!(ask(&mut c, Duration::from_millis(1_500)), Ok(false), "not served at the cap");
        // The open connections keep being served.
        assert_eq!(ask(&mut b, Duration::from_secs(10)), Ok(true));
        let started = Instant::now();
        drop(a);
        assert_eq!(answered(&mut c, Duration::from_secs(10)), Ok(true), "served once one closed");
        eprintln!(
            "{shards} shard(s): queued connection served {:?} after a close",
            started.elapsed()
        );
    }
}

#[test]
fn max_connections_per_ip_closes_the_connection_over_the_limit() {
    let dir = tempfile::tempdir().expect("tempdir");
    let broker =
        Broker::start_with(dir.path(), &["--shards", "1", "--max-connections-per-ip", "2"]);
    let mut a = TcpStream::connect(&broker.addr).expect("connect");
    let mut b = TcpStream::connect(&broker.addr).expect("connect");
    assert_eq!(ask(&mut a, Duration::from_secs(10)), Ok(true));
    assert_eq!(ask(&mut b, Duration::from_secs(10)), Ok(true));
    let mut c = TcpStream::connect(&broker.addr).expect("connect");
    assert!(closed_within(&mut c, Duration::from_secs(10)), "third connection closed");
    assert_eq!(ask(&mut a, Duration::from_secs(10)), Ok(true), "the others are served");
    drop(b);
    // Room again once one closed (the close is counted when the broker sees it).
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let mut d = TcpStream::connect(&broker.addr).expect("connect");
        if ask(&mut d, Duration::from_secs(2)) == Ok(true) {
            break;
        }
        assert!(Instant::now() < deadline, "no room after a close");
        std::thread::sleep(Duration::from_millis(100));
    }

    // An override raises the limit for its address.
    let dir = tempfile::tempdir().expect("tempdir");
    let flags = [
        "--shards",
        "1",
        "--max-connections-per-ip",
        "1",
        "--max-connections-per-ip-overrides",
        "127.0.0.1:3",
    ];
    let broker = Broker::start_with(dir.path(), &flags);
    let mut open: Vec<TcpStream> =
        (0..3).map(|_| TcpStream::connect(&broker.addr).unwrap()).collect();
    for s in &mut open {
        assert_eq!(ask(s, Duration::from_secs(10)), Ok(true), "within the override");
    }
    let mut over = TcpStream::connect(&broker.addr).expect("connect");
    assert!(closed_within(&mut over, Duration::from_secs(10)), "fourth closed");
}

#[test]
fn max_connection_creation_rate_paces_accepts() {
    let dir = tempfile::tempdir().expect("tempdir");
    let flags = ["--shards", "1", "--max-connection-creation-rate", "5"];
    let broker = Broker::start_with(dir.path(), &flags);
    // One second's worth (5) is accepted at once, then 5/s: 20 connections take ~3 s.
    let started = Instant::now();
    let mut conns: Vec<TcpStream> = Vec::new();
    for _ in 0..20 {
        let mut s = TcpStream::connect(&broker.addr).expect("connect");
        assert_eq!(ask(&mut s, Duration::from_secs(20)), Ok(true));
        conns.push(s);
    }
    let took = started.elapsed();
    eprintln!("20 connections at max.connection.creation.rate=5 took {took:?}");
    assert!(took >= Duration::from_millis(2_000), "not paced: {took:?}");
}

#[test]
fn a_frame_trickled_past_the_receive_timeout_is_disconnected() {
    let dir = tempfile::tempdir().expect("tempdir");
    let flags = ["--shards", "1", "--request-receive-timeout-ms", "1000"];
    let broker = Broker::start_with(dir.path(), &flags);
    let mut slow = TcpStream::connect(&broker.addr).expect("connect");
    slow.write_all(&100i32.to_be_bytes()).expect("size");
    let started = Instant::now();
    let mut disconnected = false;
    while started.elapsed() < Duration::from_secs(10) {
        if slow.write_all(&[0]).is_err() || closed_within(&mut slow, Duration::from_millis(300)) {
            disconnected = true;
            break;
        }
        assert!(served(&broker.addr), "another client is served meanwhile");
    }
    eprintln!("trickling client disconnected after {:?}", started.elapsed());
    assert!(disconnected, "a trickling client is disconnected");
    assert!(started.elapsed() >= Duration::from_millis(900), "not before the bound");
}

fn s(v: &str) -> StrBytes {
    StrBytes::from_string(v.to_string())
}

#[test]
fn queued_max_request_bytes_stops_reading_until_answers_free_it() {
    let dir = tempfile::tempdir().expect("tempdir");
    let flags = ["--shards", "1", "--queued-max-request-bytes", "1048576"];
    let broker = Broker::start_with(dir.path(), &flags);
    Wire::connect(&broker.addr).create_topic("q", 1, &[]);
    // A long-poll fetch of ~800 KiB (padded with forgotten topics, which a sessionless fetch
    // ignores) holds most of the 1 MiB budget for its 3 s wait.
    let addr = broker.addr.clone();
    let parked = std::thread::spawn(move || {
        let part = FetchPartition::default().with_partition(0).with_fetch_offset(0);
        let topic = FetchTopic::default().with_topic(TopicName(s("q"))).with_partitions(vec![part]);
        let padding = ForgottenTopic::default()
            .with_topic(TopicName(s("padding")))
            .with_partitions(vec![0; 200_000]);
        let req = FetchRequest::default()
            .with_max_wait_ms(3_000)
            .with_min_bytes(1)
            .with_max_bytes(1 << 20)
            .with_session_epoch(-1)
            .with_topics(vec![topic])
            .with_forgotten_topics_data(vec![padding]);
        let resp: FetchResponse = Wire::connect(&addr).call(ApiKey::Fetch, 11, &req);
        assert_eq!(resp.error_code, 0);
        let p = &resp.responses[0].partitions[0];
        assert_eq!(p.error_code, 0);
        p.records.as_ref().map_or(0, bytes::Bytes::len)
    });
    std::thread::sleep(Duration::from_millis(500));
    // Small requests still fit: served at once.
    let mut small = Wire::connect(&broker.addr);
    let started = Instant::now();
    let _: ApiVersionsResponse = small.call(ApiKey::ApiVersions, 3, &ApiVersionsRequest::default());
    eprintln!("small request served in {:?} while the budget is held", started.elapsed());
    // A 300 KiB produce does not fit: read only once the parked fetch is answered.
    let value = vec![7u8; 300 * 1024];
    let batch = shardlog::storage::records::build_batch(
        &[shardlog::storage::records::NewRecord {
            key: None,
            value: Some(&value),
            timestamp_ms: -1,
            headers: vec![],
        }],
        shardlog::storage::batch::Compression::None,
    );
    let part = PartitionProduceData::default().with_index(0).with_records(Some(batch));
    let topic =
        TopicProduceData::default().with_name(TopicName(s("q"))).with_partition_data(vec![part]);
    let req =
        ProduceRequest::default().with_acks(1).with_timeout_ms(10_000).with_topic_data(vec![topic]);
    let started = Instant::now();
    let resp: ProduceResponse = Wire::connect(&broker.addr).call(ApiKey::Produce, 9, &req);
    eprintln!("the 300 KiB produce was answered after {:?}", started.elapsed());
    assert_eq!(resp.responses[0].partition_responses[0].error_code, 0);
    // Had the produce been read before the fetch was answered, its record would have woken
    // the fetch: the fetch timed out empty, so the produce waited for the budget.
    assert_eq!(parked.join().expect("parked fetch"), 0, "the parked fetch saw no record");
}
