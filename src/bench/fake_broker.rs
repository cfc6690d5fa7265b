//! Test-only fake Kafka broker: answers ApiVersions, Metadata (one topic, one broker:
//! itself), ListOffsets (empty partitions) and Produce, each Produce after a fixed delay,
//! one request at a time per connection. Used to show coordinated-omission correction
//! against a slow broker.
//!
//! Runs on plain std threads (one per connection), outside any glommio executor.

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::time::Duration;

use bytes::{Bytes, BytesMut};
use kafka_protocol::messages::api_versions_response::ApiVersion;
use kafka_protocol::messages::list_offsets_response::{
    ListOffsetsPartitionResponse, ListOffsetsTopicResponse,
};
use kafka_protocol::messages::metadata_response::{
    MetadataResponseBroker, MetadataResponsePartition, MetadataResponseTopic,
};
use kafka_protocol::messages::produce_response::{PartitionProduceResponse, TopicProduceResponse};
use kafka_protocol::messages::{
    ApiKey, ApiVersionsResponse, BrokerId, ListOffsetsRequest, ListOffsetsResponse,
    MetadataRequest, MetadataResponse, ProduceRequest, ProduceResponse, ResponseHeader,
};
use kafka_protocol::protocol::{decode_request_header_from_buffer, Decodable, Encodable, StrBytes};

/// Starts the fake broker on an ephemeral port; returns "127.0.0.1:port".
pub fn start(produce_delay: Duration, partitions: i32) -> String {
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind fake broker");
    let addr = listener.local_addr().expect("local addr");
    std::thread::spawn(move || {
        for conn in listener.incoming().flatten() {
            std::thread::spawn(move || serve(conn, addr.port(), produce_delay, partitions));
        }
    });
    addr.to_string()
}

fn serve(mut conn: TcpStream, port: u16, delay: Duration, partitions: i32) {
    loop {
        let mut len = [0u8; 4];
        if conn.read_exact(&mut len).is_err() {
            return;
        }
        let mut body = vec![0u8; u32::from_be_bytes(len) as usize];
        if conn.read_exact(&mut body).is_err() {
            return;
        }
        let mut buf = Bytes::from(body);
        let header = decode_request_header_from_buffer(&mut buf).expect("request header");
        let (key, version) = (header.request_api_key, header.request_api_version);
        let api = ApiKey::try_from(key).expect("known api");
        let mut out = BytesMut::new();
        let resp_header = ResponseHeader::default().with_correlation_id(header.correlation_id);
        let hv = if api == ApiKey::ApiVersions { 0 } else { api.response_header_version(version) };
        resp_header.encode(&mut out, hv).expect("encode header");
        match api {
            ApiKey::ApiVersions => api_versions().encode(&mut out, version),
            ApiKey::Metadata => {
                MetadataRequest::decode(&mut buf, version).expect("metadata request");
                metadata(port, partitions).encode(&mut out, version)
            }
            ApiKey::Produce => {
                let req = ProduceRequest::decode(&mut buf, version).expect("produce request");
                std::thread::sleep(delay);
                produce_ok(&req).encode(&mut out, version)
            }
            ApiKey::ListOffsets => {
                let req = ListOffsetsRequest::decode(&mut buf, version).expect("list offsets");
                list_offsets(&req).encode(&mut out, version)
            }
            other => panic!("fake broker got unexpected {other:?}"),
        }
        .expect("encode response");
        let mut frame = (out.len() as u32).to_be_bytes().to_vec();
        frame.extend_from_slice(&out);
        if conn.write_all(&frame).is_err() {
            return;
        }
    }
}

fn api_versions() -> ApiVersionsResponse {
    let v = |k: ApiKey, min, max| {
        ApiVersion::default().with_api_key(k as i16).with_min_version(min).with_max_version(max)
    };
    ApiVersionsResponse::default().with_api_keys(vec![
        v(ApiKey::Produce, 3, 9),
        v(ApiKey::Fetch, 4, 12),
        v(ApiKey::Metadata, 1, 12),
        v(ApiKey::ListOffsets, 1, 7),
        v(ApiKey::CreateTopics, 2, 7),
        v(ApiKey::ApiVersions, 0, 3),
    ])
}

fn metadata(port: u16, partitions: i32) -> MetadataResponse {
    let parts = (0..partitions)
        .map(|p| {
            MetadataResponsePartition::default()
                .with_partition_index(p)
                .with_leader_id(BrokerId(1))
                .with_replica_nodes(vec![BrokerId(1)])
                .with_isr_nodes(vec![BrokerId(1)])
        })
        .collect();
    MetadataResponse::default()
        .with_brokers(vec![MetadataResponseBroker::default()
            .with_node_id(BrokerId(1))
            .with_host(StrBytes::from_static_str("127.0.0.1"))
            .with_port(i32::from(port))])
        .with_topics(vec![MetadataResponseTopic::default()
            .with_name(Some(super::client::topic_name("slow")))
            .with_partitions(parts)])
}

fn produce_ok(req: &ProduceRequest) -> ProduceResponse {
    let topics = req
        .topic_data
        .iter()
        .map(|t| {
            TopicProduceResponse::default().with_name(t.name.clone()).with_partition_responses(
                t.partition_data
                    .iter()
                    .map(|p| PartitionProduceResponse::default().with_index(p.index))
                    .collect(),
            )
        })
        .collect();
    ProduceResponse::default().with_responses(topics)
}

/// Every partition is empty: offset 0.
fn list_offsets(req: &ListOffsetsRequest) -> ListOffsetsResponse {
    let topics = req
        .topics
        .iter()
        .map(|t| {
            ListOffsetsTopicResponse::default().with_name(t.name.clone()).with_partitions(
                t.partitions
                    .iter()
                    .map(|p| {
                        ListOffsetsPartitionResponse::default()
                            .with_partition_index(p.partition_index)
                    })
                    .collect(),
            )
        })
        .collect();
    ListOffsetsResponse::default().with_topics(topics)
}
