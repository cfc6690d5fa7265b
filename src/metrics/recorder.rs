//! One shard's recorder: latency histograms by API and stage, counters, gauges, per-topic
//! totals, storage flush figures and consumer lag, kept in plain cells.
//!
//! Lives on one shard thread (thread-local, installed by [`install`]); never shared. The
//! hot path only touches this thread's memory. [`ShardRecorder::publish`] moves the
//! recordings into the shard's [`ShardSnapshot`] (histograms added then reset, counters
//! copied), which is what other threads read.

use std::cell::{Cell, OnceCell, RefCell};
use std::collections::HashMap;
use std::rc::Rc;
use std::time::Duration;

use hdrhistogram::Histogram;

use super::snapshot::{ClientTotals, LagKey, ShardSnapshot, TopicTotals};
use super::{micros, Count, Level, Stage};
use crate::constants::{
    METRICS_CLIENTS_MAX, METRICS_HISTOGRAM_SIGFIG, METRICS_LAG_SERIES_MAX, METRICS_LATENCY_US_MAX,
    METRICS_TOPICS_MAX,
};
use crate::types::QuotaKind;

/// Highest Kafka API key tracked with its own histograms; higher keys share the last slot.
pub const API_KEY_MAX: i16 = 127;
/// Topic name under which topics past [`METRICS_TOPICS_MAX`] are counted.
pub const OTHER_TOPICS: &str = "_other";

/// A microsecond HDR histogram with the exact sum of its samples (Prometheus wants one).
#[derive(Clone, Debug)]
pub struct LatencyHist {
    pub hist: Histogram<u64>,
    pub sum_us: u64,
}

impl Default for LatencyHist {
    fn default() -> Self {
        Self::new()
    }
}

impl LatencyHist {
    #[must_use]
    pub fn new() -> Self {
        // Valid bounds (1 <= low, high >= 2 * low, sigfig <= 5) cannot fail to build.
        let hist = Histogram::new_with_bounds(1, METRICS_LATENCY_US_MAX, METRICS_HISTOGRAM_SIGFIG)
            .expect("constant histogram bounds are valid");
        Self { hist, sum_us: 0 }
    }

    pub fn record_us(&mut self, us: u64) {
        self.hist.saturating_record(us.max(1));
        self.sum_us = self.sum_us.saturating_add(us);
    }

    /// Adds another histogram's samples (same bounds, so it cannot overflow the range).
    pub fn add(&mut self, other: &LatencyHist) {
        if let Err(err) = self.hist.add(&other.hist) {
            tracing::debug!("histogram add failed: {err:?}");
        }
        self.sum_us = self.sum_us.saturating_add(other.sum_us);
    }

    pub fn reset(&mut self) {
        self.hist.reset();
        self.sum_us = 0;
    }

    #[must_use]
    pub fn count(&self) -> u64 {
        self.hist.len()
    }
}

/// Recordings of one API since the last publish.
#[derive(Default)]
struct ApiRecorder {
    stages: [Option<LatencyHist>; Stage::COUNT],
    dirty: bool,
}

#[derive(Default, Clone, Copy)]
struct TopicCell {
    totals: TopicTotals,
    dirty: bool,
}

/// One shard's recordings. See the module doc.
pub struct ShardRecorder {
    shard: u32,
    apis: RefCell<Vec<ApiRecorder>>,
    counts: [Cell<u64>; Count::COUNT],
    levels: [Cell<i64>; Level::COUNT],
    topics: RefCell<HashMap<String, TopicCell>>,
    clients: RefCell<HashMap<String, (ClientTotals, bool)>>,
    flush_us: RefCell<LatencyHist>,
    group_commit: RefCell<LatencyHist>,
    lag: RefCell<HashMap<LagKey, i64>>,
    lag_dirty: Cell<bool>,
}

impl ShardRecorder {
    #[must_use]
    pub fn new(shard: u32) -> Self {
        Self {
            shard,
            apis: RefCell::new((0..=API_KEY_MAX).map(|_| ApiRecorder::default()).collect()),
            counts: Default::default(),
            levels: Default::default(),
            topics: RefCell::new(HashMap::new()),
            clients: RefCell::new(HashMap::new()),
            flush_us: RefCell::new(LatencyHist::new()),
            group_commit: RefCell::new(LatencyHist::new()),
            lag: RefCell::new(HashMap::new()),
            lag_dirty: Cell::new(false),
        }
    }

    #[must_use]
    pub fn shard(&self) -> u32 {
        self.shard
    }

    pub fn record(&self, api_key: i16, stage: Stage, elapsed: Duration) {
        let slot = usize::try_from(api_key.clamp(0, API_KEY_MAX)).unwrap_or(0);
        let mut apis = self.apis.borrow_mut();
        let api = &mut apis[slot];
        api.dirty = true;
        api.stages[stage as usize].get_or_insert_with(LatencyHist::new).record_us(micros(elapsed));
    }

    pub fn count(&self, counter: Count, n: u64) {
        let cell = &self.counts[counter as usize];
        cell.set(cell.get().wrapping_add(n));
    }

    pub fn adjust(&self, level: Level, delta: i64) {
        let cell = &self.levels[level as usize];
        cell.set(cell.get().saturating_add(delta));
    }

    pub fn set(&self, level: Level, value: i64) {
        self.levels[level as usize].set(value);
    }

    pub fn topic_in(&self, topic: &str, bytes: u64, records: u64) {
        self.with_topic(topic, |t| {
            t.bytes_in += bytes;
            t.records_in += records;
        });
    }

    pub fn topic_out(&self, topic: &str, bytes: u64, records: u64) {
        self.with_topic(topic, |t| {
            t.bytes_out += bytes;
            t.records_out += records;
        });
    }

    fn with_topic(&self, topic: &str, f: impl FnOnce(&mut TopicTotals)) {
        let mut topics = self.topics.borrow_mut();
        let key = if topics.contains_key(topic) || topics.len() < METRICS_TOPICS_MAX {
            topic
        } else {
            OTHER_TOPICS
        };
        if let Some(cell) = topics.get_mut(key) {
            f(&mut cell.totals);
            cell.dirty = true;
            return;
        }
        let mut cell = TopicCell { dirty: true, ..TopicCell::default() };
        f(&mut cell.totals);
        topics.insert(key.to_owned(), cell);
    }

    /// Bytes moved for a client and the throttle time its request got (see
    /// [`super::client_quota`]); client ids past [`METRICS_CLIENTS_MAX`] fold into `_other`.
    pub fn client_quota(&self, kind: QuotaKind, client: &str, bytes: u64, throttle_ms: u64) {
        let mut clients = self.clients.borrow_mut();
        let key = if clients.contains_key(client) || clients.len() < METRICS_CLIENTS_MAX {
            client
        } else {
            OTHER_TOPICS
        };
        if !clients.contains_key(key) {
            clients.insert(key.to_owned(), (ClientTotals::default(), true));
        }
        let Some((t, dirty)) = clients.get_mut(key) else { return };
        *dirty = true;
        let throttled = u64::from(throttle_ms > 0);
        match kind {
            QuotaKind::Produce => {
                t.produce_bytes += bytes;
                t.produce_throttle_ms += throttle_ms;
                t.produce_throttled += throttled;
            }
            QuotaKind::Fetch => {
                t.fetch_bytes += bytes;
                t.fetch_throttle_ms += throttle_ms;
                t.fetch_throttled += throttled;
            }
        }
    }

    pub fn flush(&self, elapsed: Duration, appends: u64) {
        self.count(Count::StorageFlushes, 1);
        self.count(Count::GroupCommitAppends, appends);
        self.flush_us.borrow_mut().record_us(micros(elapsed));
        self.group_commit.borrow_mut().record_us(appends);
    }

    pub fn consumer_lag(&self, group: &str, topic: &str, partition: i32, lag: i64) {
        let mut map = self.lag.borrow_mut();
        let key = LagKey { group: group.to_owned(), topic: topic.to_owned(), partition };
        if map.len() < METRICS_LAG_SERIES_MAX || map.contains_key(&key) {
            map.insert(key, lag);
            self.lag_dirty.set(true);
        }
    }

    /// Moves this shard's recordings into `snap` (see the module doc). `busy_ratio` and
    /// `busy_ns` come from the runtime and are stored as given.
    pub fn publish(&self, snap: &mut ShardSnapshot) {
        snap.shard = self.shard;
        for (key, api) in self.apis.borrow_mut().iter_mut().enumerate() {
            if !api.dirty {
                continue;
            }
            api.dirty = false;
            let key = i16::try_from(key).unwrap_or(API_KEY_MAX);
            let out = snap.apis.entry(key).or_default();
            for (i, local) in api.stages.iter_mut().enumerate() {
                if let Some(local) = local.as_mut().filter(|h| h.count() > 0) {
                    out.stages[i].get_or_insert_with(LatencyHist::new).add(local);
                    local.reset();
                }
            }
        }
        for (i, c) in self.counts.iter().enumerate() {
            snap.counts[i] = c.get();
        }
        for (i, l) in self.levels.iter().enumerate() {
            snap.levels[i] = l.get();
        }
        for (name, cell) in self.topics.borrow_mut().iter_mut().filter(|(_, c)| c.dirty) {
            cell.dirty = false;
            snap.topics.insert(name.clone(), cell.totals);
        }
        for (name, (totals, dirty)) in self.clients.borrow_mut().iter_mut().filter(|(_, c)| c.1) {
            *dirty = false;
            snap.clients.insert(name.clone(), *totals);
        }
        publish_hist(&self.flush_us, &mut snap.flush_us);
        publish_hist(&self.group_commit, &mut snap.group_commit);
        if self.lag_dirty.replace(false) {
            snap.lag = self.lag.borrow().iter().map(|(k, v)| (k.clone(), *v)).collect();
        }
    }
}

fn publish_hist(local: &RefCell<LatencyHist>, out: &mut LatencyHist) {
    let mut local = local.borrow_mut();
    if local.count() > 0 {
        out.add(&local);
        local.reset();
    }
}

thread_local! {
    static LOCAL: OnceCell<Rc<ShardRecorder>> = const { OnceCell::new() };
}

/// Makes `recorder` this thread's recorder (once per thread; later calls are ignored and
/// return the recorder already installed).
pub fn install(recorder: ShardRecorder) -> Rc<ShardRecorder> {
    LOCAL.with(|cell| cell.get_or_init(|| Rc::new(recorder)).clone())
}

/// Runs `f` on this thread's recorder, if one is installed.
#[inline]
pub fn with_local<F: FnOnce(&ShardRecorder)>(f: F) {
    LOCAL.with(|cell| {
        if let Some(r) = cell.get() {
            f(r);
        }
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn publish_moves_histograms_and_copies_counters() {
        let r = ShardRecorder::new(3);
        r.record(0, Stage::Total, Duration::from_micros(120));
        r.record(0, Stage::Total, Duration::from_micros(80));
        r.record(1, Stage::Send, Duration::from_micros(5));
        r.count(Count::Requests, 3);
        r.adjust(Level::ConnectionsActive, 2);
        r.adjust(Level::ConnectionsActive, -1);
        r.topic_in("t", 100, 4);
        r.flush(Duration::from_micros(40), 7);
        let mut snap = ShardSnapshot::default();
        r.publish(&mut snap);
        assert_eq!(snap.shard, 3);
        let total = snap.apis[&0].stages[Stage::Total as usize].as_ref().expect("total");
        assert_eq!((total.count(), total.sum_us), (2, 200));
        assert_eq!(snap.counts[Count::Requests as usize], 3);
        assert_eq!(snap.counts[Count::GroupCommitAppends as usize], 7);
        assert_eq!(snap.levels[Level::ConnectionsActive as usize], 1);
        assert_eq!(snap.topics["t"].records_in, 4);
        // A second publish adds only what was recorded since.
        r.record(0, Stage::Total, Duration::from_micros(10));
        r.publish(&mut snap);
        let total = snap.apis[&0].stages[Stage::Total as usize].as_ref().expect("total");
        assert_eq!(total.count(), 3);
        assert_eq!(snap.flush_us.count(), 1);
    }

    #[test]
    fn topics_past_the_limit_fold_into_other() {
        let r = ShardRecorder::new(0);
        for i in 0..METRICS_TOPICS_MAX {
            r.topic_in(&format!("t{i}"), 1, 1);
        }
        r.topic_in("one-too-many", 5, 1);
        r.topic_in("t0", 1, 1);
        let mut snap = ShardSnapshot::default();
        r.publish(&mut snap);
        assert_eq!(snap.topics[OTHER_TOPICS].bytes_in, 5);
        assert_eq!(snap.topics["t0"].bytes_in, 2);
        assert!(!snap.topics.contains_key("one-too-many"));
    }

    #[test]
    fn latencies_saturate_at_the_histogram_bound() {
        let r = ShardRecorder::new(0);
        r.record(1, Stage::Total, Duration::from_secs(100_000));
        r.record(-5, Stage::Total, Duration::ZERO);
        let mut snap = ShardSnapshot::default();
        r.publish(&mut snap);
        let h = snap.apis[&1].stages[0].as_ref().expect("fetch");
        assert!(h.hist.max() >= METRICS_LATENCY_US_MAX * 999 / 1000);
        assert_eq!(snap.apis[&0].stages[0].as_ref().expect("clamped").count(), 1);
    }
}
