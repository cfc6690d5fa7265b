//! Broker-to-broker Kafka requests of the transaction machinery: the coordinator's
//! WriteTxnMarkers to the leaders of a transaction's partitions on other brokers, and a
//! partition leader's AddPartitionsToTxn v4 `verify_only` to a coordinator on another broker
//! (KIP-890 part 1). Both go over a client connection to the other broker's endpoint of the
//! inter-broker listener, with that listener's TLS and SASL, as Kafka's inter-broker channel
//! does.
//!
//! Runs on whichever shard sends. One cached connection per (shard, address), taken out of
//! its cell for a call and put back only after a success, so no borrow is held across
//! `.await` and a broken connection is never reused. Every call is bounded
//! (`BROKER_CALL_TIMEOUT_MS`).

use std::cell::RefCell;
use std::collections::HashMap;
use std::time::Duration;

use kafka_protocol::messages::add_partitions_to_txn_request::{
    AddPartitionsToTxnTopic, AddPartitionsToTxnTransaction,
};
use kafka_protocol::messages::write_txn_markers_request::{
    WritableTxnMarker, WritableTxnMarkerTopic,
};
use kafka_protocol::messages::{
    AddPartitionsToTxnRequest, ProducerId, TopicName, TransactionalId, WriteTxnMarkersRequest,
};
use kafka_protocol::protocol::{Request, StrBytes};

use crate::constants::{BROKER_CALL_TIMEOUT_MS, BROKER_CONNECTIONS_PER_SHARD_MAX};
use crate::protocol::client::Conn;
use crate::protocol::client_auth::ClientSecurity;

/// WriteTxnMarkers version sent (Kafka 4 serves v1 only).
const WRITE_TXN_MARKERS_VERSION: i16 = 1;
/// AddPartitionsToTxn version of broker-to-broker verification (KIP-890).
const VERIFY_VERSION: i16 = 4;

thread_local! {
    static CONNECTIONS: RefCell<HashMap<String, Conn>> = RefCell::new(HashMap::new());
}

/// Sends `req` to the broker at `addr` (connecting as `security` says) and waits (bounded)
/// for its answer.
pub async fn call<R: Request>(
    addr: &str,
    security: &ClientSecurity,
    req: &R,
    version: i16,
) -> Result<R::Response, String> {
    let cached = CONNECTIONS.with(|c| c.borrow_mut().remove(addr));
    let attempt = async {
        let mut conn = match cached {
            Some(conn) => conn,
            None => Conn::connect_secure(addr, security).await.map_err(|e| e.to_string())?,
        };
        let resp = conn.call(req, version).await.map_err(|e| e.to_string())?;
        Ok::<_, String>((conn, resp))
    };
    let timeout = Duration::from_millis(BROKER_CALL_TIMEOUT_MS);
    let (conn, resp) = crate::shard::with_timeout(timeout, attempt)
        .await
        .ok_or_else(|| format!("no answer from {addr} within {BROKER_CALL_TIMEOUT_MS} ms"))??;
    CONNECTIONS.with(|c| {
        let mut c = c.borrow_mut();
        if c.len() < BROKER_CONNECTIONS_PER_SHARD_MAX {
            c.insert(addr.to_string(), conn);
        }
    });
    Ok(resp)
}

/// One transaction's marker for partitions led by one other broker.
pub struct RemoteMarker<'a> {
    pub producer_id: i64,
    pub producer_epoch: i16,
    pub commit: bool,
    pub coordinator_epoch: i32,
    pub partitions: &'a [(String, i32)],
}

/// WriteTxnMarkers to the broker at `addr`: each partition with its error code (0: written).
pub async fn write_markers(
    addr: &str,
    security: &ClientSecurity,
    m: &RemoteMarker<'_>,
) -> Result<Vec<((String, i32), i16)>, String> {
    let mut topics: Vec<WritableTxnMarkerTopic> = Vec::new();
    for (topic, partition) in m.partitions {
        match topics.iter_mut().find(|t| t.name.0.as_str() == topic) {
            Some(t) => t.partition_indexes.push(*partition),
            None => topics.push(
                WritableTxnMarkerTopic::default()
                    .with_name(TopicName(StrBytes::from_string(topic.clone())))
                    .with_partition_indexes(vec![*partition]),
            ),
        }
    }
    let marker = WritableTxnMarker::default()
        .with_producer_id(ProducerId(m.producer_id))
        .with_producer_epoch(m.producer_epoch)
        .with_transaction_result(m.commit)
        .with_coordinator_epoch(m.coordinator_epoch)
        .with_topics(topics);
    let req = WriteTxnMarkersRequest::default().with_markers(vec![marker]);
    let resp = call(addr, security, &req, WRITE_TXN_MARKERS_VERSION).await?;
    let mut out = Vec::new();
    for marker in resp.markers {
        for topic in marker.topics {
            for p in topic.partitions {
                out.push(((topic.name.0.to_string(), p.partition_index), p.error_code));
            }
        }
    }
    Ok(out)
}

/// AddPartitionsToTxn v4 `verify_only` at the coordinator at `addr`: each partition with
/// its error code (0: it is in the producer's ongoing transaction).
pub async fn verify_partitions(
    addr: &str,
    security: &ClientSecurity,
    transactional_id: &str,
    producer_id: i64,
    producer_epoch: i16,
    partitions: &[(String, i32)],
) -> Result<Vec<((String, i32), i16)>, String> {
    let mut topics: Vec<AddPartitionsToTxnTopic> = Vec::new();
    for (topic, partition) in partitions {
        match topics.iter_mut().find(|t| t.name.0.as_str() == topic) {
            Some(t) => t.partitions.push(*partition),
            None => topics.push(
                AddPartitionsToTxnTopic::default()
                    .with_name(TopicName(StrBytes::from_string(topic.clone())))
                    .with_partitions(vec![*partition]),
            ),
        }
    }
    let txn = AddPartitionsToTxnTransaction::default()
        .with_transactional_id(TransactionalId(StrBytes::from_string(transactional_id.into())))
        .with_producer_id(ProducerId(producer_id))
        .with_producer_epoch(producer_epoch)
        .with_verify_only(true)
        .with_topics(topics);
    let req = AddPartitionsToTxnRequest::default().with_transactions(vec![txn]);
    let resp = call(addr, security, &req, VERIFY_VERSION).await?;
    let mut out = Vec::new();
    for t in resp.results_by_transaction {
        for topic in t.topic_results {
            for p in topic.results_by_partition {
                let code =
                    if resp.error_code != 0 { resp.error_code } else { p.partition_error_code };
                out.push(((topic.name.0.to_string(), p.partition_index), code));
            }
        }
    }
    if out.is_empty() && resp.error_code != 0 {
        out = partitions.iter().map(|tp| (tp.clone(), resp.error_code)).collect();
    }
    Ok(out)
}
