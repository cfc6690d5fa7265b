//! The JSON view `GET /v1/shards` serves and `shardlog top` reads: per-shard load
//! counters and per-API latency percentiles of the merged histograms.
//!
//! Pure data, any thread. Counters are cumulative; the reader derives rates by diffing
//! two views and their `uptime_ms`.

use serde::{Deserialize, Serialize};

use super::snapshot::{ClientTotals, Merged, ShardLoad};
use super::{api_name, Stage};

/// Latency percentiles of one API's `total` stage, microseconds.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct ApiLatency {
    pub api: String,
    pub count: u64,
    pub p50_us: u64,
    pub p99_us: u64,
    pub p999_us: u64,
    pub max_us: u64,
}

/// Latency percentiles of one stage of Produce (request stages and the log writer's
/// stages), microseconds: where a durable acknowledgement spends its time.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct StageLatency {
    pub stage: String,
    pub count: u64,
    pub p50_us: u64,
    pub p99_us: u64,
    pub p999_us: u64,
    pub max_us: u64,
}

/// What `GET /v1/shards` returns.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct View {
    /// Milliseconds since the metrics of this process started (rate denominator).
    pub uptime_ms: u64,
    pub shards: Vec<ShardLoad>,
    pub apis: Vec<ApiLatency>,
    /// Produce's stages other than `total`, those with samples (older brokers: empty).
    #[serde(default)]
    pub produce_stages: Vec<StageLatency>,
    /// Per-client byte and throttle totals, by client id (at most `METRICS_CLIENTS_MAX`
    /// ids per shard, the rest as `_other`). Absent in views of older brokers.
    #[serde(default)]
    pub clients: Vec<ClientView>,
}

/// One client's cumulative quota counters, summed over the shards.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct ClientView {
    pub client_id: String,
    #[serde(flatten)]
    pub totals: ClientTotals,
}

impl View {
    #[must_use]
    pub fn of(m: &Merged, uptime_ms: u64) -> Self {
        let apis = m
            .total
            .apis
            .iter()
            .filter_map(|(key, api)| {
                let h = api.stages[Stage::Total as usize].as_ref()?;
                let q = |x: f64| h.hist.value_at_quantile(x);
                Some(ApiLatency {
                    api: api_name(*key),
                    count: h.count(),
                    p50_us: q(0.5),
                    p99_us: q(0.99),
                    p999_us: q(0.999),
                    max_us: h.hist.max(),
                })
            })
            .collect();
        let produce_stages = m
            .total
            .apis
            .get(&0)
            .map(|api| {
                Stage::ALL[1..]
                    .iter()
                    .filter_map(|stage| {
                        let h = api.stages[*stage as usize].as_ref()?;
                        let q = |x: f64| h.hist.value_at_quantile(x);
                        Some(StageLatency {
                            stage: stage.name().to_owned(),
                            count: h.count(),
                            p50_us: q(0.5),
                            p99_us: q(0.99),
                            p999_us: q(0.999),
                            max_us: h.hist.max(),
                        })
                    })
                    .collect()
            })
            .unwrap_or_default();
        let clients = m
            .total
            .clients
            .iter()
            .map(|(id, t)| ClientView { client_id: id.clone(), totals: *t })
            .collect();
        Self { uptime_ms, shards: m.shards.clone(), apis, produce_stages, clients }
    }
}
