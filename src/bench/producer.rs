//! The producing lane: builds Produce requests from virtual record sequences, pipelines
//! them on one connection (`--in-flight`) and records acknowledgement latencies.
//!
//! Each lane runs on one bench executor as two tasks: the writer (batching, rate
//! schedule, sending) and the reader (responses in request order). Records are virtual:
//! record `seq` of a lane goes to lane partition `(seq / records_per_batch) % n`
//! (sticky batches, like Kafka's default partitioner) and, under `--rate`, is due at
//! `Schedule::intended_ns(seq)`. Invariants: a request holds at most one batch per
//! partition (Kafka rejects more for v2 records); in-flight requests never exceed
//! `--in-flight`; latency is from intended time (open loop) or send time (closed loop).

use std::cell::RefCell;
use std::collections::VecDeque;
use std::rc::Rc;
use std::sync::Arc;
use std::time::Duration;

use bytes::{Bytes, BytesMut};
use glommio::sync::Semaphore;
use kafka_protocol::messages::produce_request::{PartitionProduceData, TopicProduceData};
use kafka_protocol::messages::{InitProducerIdRequest, ProduceRequest, TopicName};

use super::batch::{encode_batch, RecordSpec};
use super::cli::ProducerArgs;
use super::rate::{latency_us, now_ns, Schedule};
use super::runtime::Lane;
use super::stats::{RequestStages, Shared, CLIENT_ERROR_TIMEOUT};
use super::wire::{decode_response, encode_request, Conn, ConnReader, ConnWriter};
use crate::storage::producer_state::increment_sequence;

/// Target bytes of one produce request (Kafka's max.request.size default is 1 MiB).
const REQUEST_TARGET_BYTES: u64 = 1024 * 1024;
/// Shortest sleep of an open-loop writer: records due within it are sent together.
const TICK: Duration = Duration::from_micros(50);
/// How long in-flight requests may take to complete once the run stops.
const DRAIN_GRACE: Duration = Duration::from_secs(10);
/// Broker-side timeout of acks=all produce requests.
const PRODUCE_TIMEOUT_MS: i32 = 30_000;

/// Everything a producing lane needs, shared read-only by all lanes of a run.
pub struct ProducerPlan {
    pub args: ProducerArgs,
    pub topic: TopicName,
    pub produce_version: i16,
    pub total_partitions: usize,
    /// The record value template (random letters, like kafka-producer-perf-test).
    pub value: Vec<u8>,
    pub records_per_batch: u64,
    /// Schedule anchor of every lane (bench clock ns).
    pub start_ns: u64,
}

impl ProducerPlan {
    pub fn new(args: ProducerArgs, topic: &str, produce_version: i16, partitions: usize) -> Self {
        use rand::Rng;
        let mut rng = rand::thread_rng();
        let value = (0..args.record_size).map(|_| rng.gen_range(b'A'..=b'Z')).collect();
        let record_bytes = (args.record_size + args.key_size + 8) as u64;
        let records_per_batch = (args.batch_bytes as u64 / record_bytes).max(1);
        ProducerPlan {
            args,
            topic: super::client::topic_name(topic),
            produce_version,
            total_partitions: partitions,
            value,
            records_per_batch,
            start_ns: now_ns(),
        }
    }

    fn record_bytes(&self) -> u64 {
        (self.args.record_size + self.args.key_size) as u64
    }
}

/// A request sent and not yet answered.
struct Pending {
    correlation_id: i32,
    seq_start: u64,
    count: u64,
    send_ns: u64,
    measured: bool,
}

/// Per-lane state of the writer.
struct LaneState {
    plan: Arc<ProducerPlan>,
    partitions: Vec<i32>,
    /// Records per request when records are plentiful (closed loop, backlog).
    full_count: u64,
    schedule: Option<Schedule>,
    groups: Vec<Vec<u64>>,
    keys: Vec<u8>,
    batch_buf: BytesMut,
    scratch: BytesMut,
    frame_buf: BytesMut,
    /// `--idempotent`: this lane's producer id and epoch, and the next sequence of each of
    /// its partitions (by index).
    producer: Option<(i64, i16)>,
    next_sequence: Vec<i32>,
}

impl LaneState {
    fn new(plan: Arc<ProducerPlan>, partitions: Vec<i32>) -> Self {
        let n = partitions.len() as u64;
        let rpb = plan.records_per_batch;
        let batches_per_request =
            (REQUEST_TARGET_BYTES / (rpb * plan.record_bytes()).max(1)).clamp(1, n);
        let schedule = plan
            .args
            .rate
            .map(|r| Schedule::new(plan.start_ns, r * n as f64 / plan.total_partitions as f64));
        LaneState {
            full_count: rpb * batches_per_request,
            schedule,
            groups: vec![Vec::new(); partitions.len()],
            keys: Vec::new(),
            batch_buf: BytesMut::new(),
            scratch: BytesMut::new(),
            frame_buf: BytesMut::new(),
            producer: None,
            next_sequence: vec![0; partitions.len()],
            plan,
            partitions,
        }
    }

    fn partition_index(&self, seq: u64) -> usize {
        ((seq / self.plan.records_per_batch) % self.partitions.len() as u64) as usize
    }

    /// Fills `self.keys` with the key of every record in `seqs` (key_size bytes each).
    fn fill_keys(&mut self, p: i32, seqs: &[u64]) {
        let a = &self.plan.args;
        self.keys.clear();
        let total = self.plan.total_partitions as u64;
        for &seq in seqs {
            // With --keys N the key number maps to this partition (key mod partitions).
            let key_no =
                if a.keys > 0 { p as u64 + total * (seq % (a.keys / total).max(1)) } else { seq };
            let start = self.keys.len();
            self.keys.resize(start + a.key_size, b'k');
            let n = a.key_size.min(8);
            self.keys[start..start + n].copy_from_slice(&key_no.to_be_bytes()[8 - n..]);
        }
    }

    /// Builds the produce request frame for records `seq_start..seq_start + count`.
    fn build(
        &mut self,
        seq_start: u64,
        count: u64,
        send_ns: u64,
        corr: i32,
    ) -> anyhow::Result<Bytes> {
        for g in &mut self.groups {
            g.clear();
        }
        for seq in seq_start..seq_start + count {
            let idx = self.partition_index(seq);
            self.groups[idx].push(seq);
        }
        let ts_ms = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_millis() as i64);
        let mut parts = Vec::new();
        let groups = std::mem::take(&mut self.groups);
        for (idx, seqs) in groups.iter().enumerate().filter(|(_, g)| !g.is_empty()) {
            let p = self.partitions[idx];
            let key_size = self.plan.args.key_size;
            if key_size > 0 {
                self.fill_keys(p, seqs);
            }
            let keys = &self.keys;
            let specs: Vec<RecordSpec<'_>> = seqs
                .iter()
                .enumerate()
                .map(|(i, &seq)| RecordSpec {
                    key: (key_size > 0).then(|| &keys[i * key_size..(i + 1) * key_size]),
                    stamp: self.schedule.map_or(send_ns, |s| s.intended_ns(seq)),
                })
                .collect();
            let comp = self.plan.args.compression;
            let value = &self.plan.value;
            let fields = self.producer.map(|(id, epoch)| {
                let seq = self.next_sequence[idx];
                self.next_sequence[idx] = increment_sequence(seq, specs.len() as i32);
                (id, epoch, seq)
            });
            encode_batch(
                &mut self.batch_buf,
                &mut self.scratch,
                &specs,
                value,
                ts_ms,
                comp,
                fields,
            )?;
            let batch = self.batch_buf.split().freeze();
            parts.push(PartitionProduceData::default().with_index(p).with_records(Some(batch)));
        }
        self.groups = groups;
        let req = ProduceRequest::default()
            .with_acks(self.plan.args.acks)
            .with_timeout_ms(PRODUCE_TIMEOUT_MS)
            .with_topic_data(vec![TopicProduceData::default()
                .with_name(self.plan.topic.clone())
                .with_partition_data(parts)]);
        self.frame_buf.clear();
        self.frame_buf.reserve((count * (self.plan.record_bytes() + 16)) as usize + 256);
        encode_request(&mut self.frame_buf, &req, self.plan.produce_version, corr)?;
        Ok(self.frame_buf.split().freeze())
    }
}

type PendingQueue = Rc<RefCell<VecDeque<Pending>>>;

/// Runs one producing lane until the run stops or the record budget is spent.
pub async fn run_lane(
    plan: Arc<ProducerPlan>,
    lane: Lane,
    shared: Arc<Shared>,
) -> anyhow::Result<()> {
    let mut conn = super::client::connect(&lane.addr).await?;
    let producer =
        if plan.args.idempotent { Some(init_producer_id(&mut conn).await?) } else { None };
    let Conn { writer, reader, .. } = conn;
    let in_flight = Rc::new(Semaphore::new(plan.args.in_flight as u64));
    let pending: PendingQueue = Rc::new(RefCell::new(VecDeque::new()));
    let failure: Rc<RefCell<Option<anyhow::Error>>> = Rc::new(RefCell::new(None));
    let mut state = LaneState::new(plan.clone(), lane.partitions.clone());
    state.producer = producer;
    let reader_task = (plan.args.acks != 0).then(|| {
        let ctx = ReaderCtx {
            plan: plan.clone(),
            schedule: state.schedule,
            partitions: lane.partitions.clone(),
            shared: shared.clone(),
            pending: pending.clone(),
            in_flight: in_flight.clone(),
        };
        let failure = failure.clone();
        glommio::spawn_local(async move {
            if let Err(e) = read_responses(reader, &ctx).await {
                ctx.shared.stop.store(true, std::sync::atomic::Ordering::Relaxed);
                *failure.borrow_mut() = Some(e);
            }
        })
    });
    let writer_fut = write_requests(&mut state, writer, &shared, &pending, &in_flight);
    let watchdog = async {
        while !shared.stopped() {
            glommio::timer::sleep(Duration::from_millis(10)).await;
        }
        glommio::timer::sleep(DRAIN_GRACE).await;
        Ok(())
    };
    let written = futures_lite::future::or(writer_fut, watchdog).await;
    drain(&pending, &shared).await;
    drop(reader_task);
    if let Some(e) = failure.borrow_mut().take() {
        return Err(e);
    }
    written
}

/// `--idempotent`: a producer id and epoch for this lane's connection (InitProducerId v4,
/// no transactional id).
async fn init_producer_id(conn: &mut Conn) -> anyhow::Result<(i64, i16)> {
    let req = InitProducerIdRequest::default()
        .with_transactional_id(None)
        .with_transaction_timeout_ms(60_000);
    let resp = conn.call(&req, 4).await?;
    anyhow::ensure!(
        resp.error_code == 0,
        "InitProducerId to {} failed with error {}",
        conn.addr(),
        resp.error_code
    );
    Ok((resp.producer_id.0, resp.producer_epoch))
}

/// Waits for in-flight requests; those still unanswered after the grace period count
/// as client timeouts.
async fn drain(pending: &PendingQueue, shared: &Shared) {
    let deadline = now_ns() + DRAIN_GRACE.as_nanos() as u64;
    while !pending.borrow().is_empty() && now_ns() < deadline {
        glommio::timer::sleep(Duration::from_millis(1)).await;
    }
    for p in pending.borrow_mut().drain(..) {
        shared.record_error(p.measured, CLIENT_ERROR_TIMEOUT, p.count);
    }
}

async fn write_requests(
    st: &mut LaneState,
    mut writer: ConnWriter,
    shared: &Shared,
    pending: &PendingQueue,
    in_flight: &Semaphore,
) -> anyhow::Result<()> {
    let mut next_seq = 0u64;
    let mut corr = 1i32;
    let linger_ns = (st.plan.args.linger_ms * 1e6) as u64;
    let acks = st.plan.args.acks;
    // Every lane starts at the common start time, so nothing is sent unaccounted
    // before the controller begins measuring.
    let start_ns = st.plan.start_ns;
    glommio::timer::sleep(Duration::from_nanos(start_ns.saturating_sub(now_ns()))).await;
    while !shared.stopped() {
        if let Some(s) = st.schedule {
            // Open loop: wait until a full request is due or the oldest due record has
            // lingered long enough.
            let now = now_ns();
            let due = s.due_count(now).saturating_sub(next_seq);
            let first_ns = s.intended_ns(next_seq);
            if due == 0 || (due < st.full_count && now < first_ns + linger_ns) {
                let full_ns = s.intended_ns(next_seq + st.full_count - 1);
                let wake = if due == 0 { first_ns } else { (first_ns + linger_ns).min(full_ns) };
                glommio::timer::sleep(Duration::from_nanos(wake.saturating_sub(now)).max(TICK))
                    .await;
                continue;
            }
        }
        if acks != 0 {
            // The reader gives the unit back when the response arrives.
            in_flight.acquire(1).await.map_err(|e| anyhow::anyhow!("in-flight window: {e}"))?;
        }
        let send_ns = now_ns();
        let mut count = match st.schedule {
            Some(s) => s.due_count(send_ns).saturating_sub(next_seq).clamp(1, st.full_count),
            None => st.full_count,
        };
        let measured = shared.is_measuring();
        if measured {
            count = shared.claim(count);
            if count == 0 {
                break;
            }
        }
        let frame = st.build(next_seq, count, send_ns, corr)?;
        if acks != 0 {
            pending.borrow_mut().push_back(Pending {
                correlation_id: corr,
                seq_start: next_seq,
                count,
                send_ns,
                measured,
            });
        }
        writer.send(&frame).await?;
        if acks == 0 {
            let bytes = count * st.plan.record_bytes();
            shared.record(measured, count, bytes, [(latency_us(send_ns, now_ns()), count)], None);
        }
        next_seq += count;
        corr = corr.wrapping_add(1);
    }
    Ok(())
}

struct ReaderCtx {
    plan: Arc<ProducerPlan>,
    schedule: Option<Schedule>,
    partitions: Vec<i32>,
    shared: Arc<Shared>,
    pending: PendingQueue,
    in_flight: Rc<Semaphore>,
}

async fn read_responses(mut reader: ConnReader, ctx: &ReaderCtx) -> anyhow::Result<()> {
    let mut failed: Vec<bool> = vec![false; ctx.partitions.len()];
    let mut lat: Vec<(u64, u64)> = Vec::new();
    loop {
        let body = reader.recv().await?;
        let ack_ns = now_ns();
        let p = ctx.pending.borrow_mut().pop_front().ok_or_else(|| {
            anyhow::anyhow!("unexpected response from {} with nothing in flight", reader.addr)
        })?;
        ctx.in_flight.signal(1);
        let resp = decode_response::<ProduceRequest>(
            body,
            ctx.plan.produce_version,
            p.correlation_id,
            &reader.addr,
        )?;
        failed.iter_mut().for_each(|f| *f = false);
        let rpb = ctx.plan.records_per_batch;
        let n = ctx.partitions.len() as u64;
        let idx_of = |seq: u64| ((seq / rpb) % n) as usize;
        let mut any_failed = false;
        for t in &resp.responses {
            for pr in &t.partition_responses {
                if pr.error_code != 0 {
                    if let Some(i) = ctx.partitions.iter().position(|x| *x == pr.index) {
                        failed[i] = true;
                        any_failed = true;
                        let cnt = (p.seq_start..p.seq_start + p.count)
                            .filter(|s| idx_of(*s) == i)
                            .count() as u64;
                        ctx.shared.record_error(p.measured, pr.error_code, cnt);
                    }
                }
            }
        }
        let seqs = p.seq_start..p.seq_start + p.count;
        let ok = if any_failed {
            seqs.clone().filter(|s| !failed[idx_of(*s)]).count() as u64
        } else {
            p.count
        };
        lat.clear();
        match ctx.schedule {
            Some(s) => lat.extend(
                seqs.filter(|s| !any_failed || !failed[idx_of(*s)])
                    .map(|seq| (latency_us(s.intended_ns(seq), ack_ns), 1)),
            ),
            None => lat.push((latency_us(p.send_ns, ack_ns), ok)),
        }
        if ok > 0 {
            let bytes = ok * ctx.plan.record_bytes();
            let stages = RequestStages {
                send_lag_us: ctx
                    .schedule
                    .map(|s| latency_us(s.intended_ns(p.seq_start), p.send_ns)),
                round_trip_us: latency_us(p.send_ns, ack_ns),
            };
            ctx.shared.record(p.measured, ok, bytes, lat.drain(..), Some(stages));
        }
    }
}

/// Only for tests: how many records one full request of a lane carries.
#[cfg(test)]
pub fn full_count_for(plan: Arc<ProducerPlan>, partitions: usize) -> u64 {
    LaneState::new(plan, (0..partitions as i32).collect()).full_count
}
