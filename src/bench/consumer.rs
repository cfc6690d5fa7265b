//! The consuming lane: assigns its partitions directly, fetches them in a loop on one
//! connection and counts records (or, in `e2e`, measures produce-to-consume latency
//! from the stamp each record value carries).
//!
//! Each lane runs on one bench executor as one task with one fetch in flight. Invariant:
//! a partition's fetch offset only moves forward, to one past the last offset of a
//! whole batch received; records below the requested offset (a batch may start earlier)
//! and control batches are not counted.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use kafka_protocol::messages::fetch_request::{FetchPartition, FetchTopic};
use kafka_protocol::messages::{BrokerId, FetchRequest, TopicName};

use super::batch::{for_each_record, scan_batches, value_stamp};
use super::cli::StartFrom;
use super::client::{list_offsets, EARLIEST, LATEST};
use super::rate::{latency_us, now_ns};
use super::runtime::Lane;
use super::stats::Shared;
use super::wire::{Conn, Versions};
use crate::constants::BENCH_STALL_TIMEOUT_MS;

/// Largest per-partition share of a fetch (Kafka's max.partition.fetch.bytes is 1 MiB).
const PARTITION_MAX_BYTES_FLOOR: i32 = 1024 * 1024;

/// Everything a consuming lane needs, shared read-only by all lanes of a run.
pub struct ConsumerPlan {
    pub topic: String,
    pub versions: Versions,
    pub from: StartFrom,
    pub to_end: bool,
    pub fetch_max_bytes: i32,
    pub fetch_max_wait_ms: i32,
    /// Measure produce-to-consume latency from value stamps instead of fetch time.
    pub e2e: bool,
}

/// Where a partition is read next.
pub struct PartitionCursor {
    pub offset: i64,
    /// Stop offset under `--to-end` (high watermark at start).
    pub end: Option<i64>,
}

/// Runs one consuming lane until the run stops (or, with `--to-end`, every partition of
/// the lane reached the end it had at start).
pub async fn run_lane(
    plan: Arc<ConsumerPlan>,
    lane: Lane,
    shared: Arc<Shared>,
) -> anyhow::Result<()> {
    let mut conn = super::client::connect(&lane.addr).await?;
    let v = plan.versions;
    let ts = if plan.from == StartFrom::Earliest { EARLIEST } else { LATEST };
    let starts = list_offsets(&mut conn, &v, &plan.topic, &lane.partitions, ts).await?;
    let ends = if plan.to_end {
        Some(list_offsets(&mut conn, &v, &plan.topic, &lane.partitions, LATEST).await?)
    } else {
        None
    };
    let mut cursors: BTreeMap<i32, PartitionCursor> = starts
        .into_iter()
        .map(|(p, offset)| (p, PartitionCursor { offset, end: ends.as_ref().map(|e| e[&p]) }))
        .collect();
    let topic = super::client::topic_name(&plan.topic);
    let mut lat = Vec::new();
    while !shared.stopped() {
        cursors.retain(|_, c| c.end.is_none_or(|e| c.offset < e));
        if cursors.is_empty() {
            break;
        }
        fetch_round(&plan, &mut conn, &topic, &mut cursors, &shared, &mut lat).await?;
    }
    Ok(())
}

/// Sends one fetch for every cursor on `conn`, counts what came back and moves the
/// cursors past it.
pub async fn fetch_round(
    plan: &ConsumerPlan,
    conn: &mut Conn,
    topic: &TopicName,
    cursors: &mut BTreeMap<i32, PartitionCursor>,
    shared: &Shared,
    lat: &mut Vec<(u64, u64)>,
) -> anyhow::Result<()> {
    let v = plan.versions;
    let req = fetch_request(plan, topic, cursors);
    let sent_ns = now_ns();
    let addr = conn.addr().to_string();
    let fetch = async { Some(conn.call(&req, v.fetch).await) };
    let timeout = async {
        glommio::timer::sleep(Duration::from_millis(BENCH_STALL_TIMEOUT_MS)).await;
        None
    };
    let resp = futures_lite::future::or(fetch, timeout).await.ok_or_else(|| {
        anyhow::anyhow!("no fetch response from {addr} in {} ms", BENCH_STALL_TIMEOUT_MS)
    })??;
    let ack_ns = now_ns();
    if resp.error_code != 0 {
        shared.record_error(shared.is_measuring(), resp.error_code, 1);
        return Ok(());
    }
    let (mut records, mut bytes) = (0u64, 0u64);
    lat.clear();
    for t in resp.responses {
        for pd in t.partitions {
            let measured = shared.is_measuring();
            let Some(cur) = cursors.get_mut(&pd.partition_index) else { continue };
            if pd.error_code != 0 {
                shared.record_error(measured, pd.error_code, 1);
                continue;
            }
            let Some(data) = pd.records else { continue };
            for b in scan_batches(data) {
                if b.last_offset < cur.offset {
                    continue;
                }
                let from = b.base_offset.max(cur.offset);
                if !b.control {
                    records += (b.last_offset - from + 1).min(i64::from(b.record_count)) as u64;
                    bytes += b.bytes.len() as u64;
                    if plan.e2e {
                        for_each_record(&b, |off, value| {
                            if let (true, Some(stamp)) = (off >= from, value_stamp(value)) {
                                lat.push((latency_us(stamp, ack_ns), 1));
                            }
                        })?;
                    }
                }
                cur.offset = b.last_offset + 1;
            }
        }
    }
    if records > 0 {
        if !plan.e2e {
            lat.push((latency_us(sent_ns, ack_ns), 1));
        }
        shared.record(shared.is_measuring(), records, bytes, lat.drain(..), None);
    }
    Ok(())
}

fn fetch_request(
    plan: &ConsumerPlan,
    topic: &TopicName,
    cursors: &BTreeMap<i32, PartitionCursor>,
) -> FetchRequest {
    let per_partition =
        (plan.fetch_max_bytes / cursors.len().max(1) as i32).max(PARTITION_MAX_BYTES_FLOOR);
    let partitions = cursors
        .iter()
        .map(|(p, c)| {
            FetchPartition::default()
                .with_partition(*p)
                .with_fetch_offset(c.offset)
                .with_partition_max_bytes(per_partition)
        })
        .collect();
    FetchRequest::default()
        .with_replica_id(BrokerId(-1))
        .with_max_wait_ms(plan.fetch_max_wait_ms)
        .with_min_bytes(1)
        .with_max_bytes(plan.fetch_max_bytes)
        .with_topics(vec![FetchTopic::default()
            .with_topic(topic.clone())
            .with_partitions(partitions)])
}
