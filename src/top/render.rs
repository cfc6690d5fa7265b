//! Rendering of one `shardlog top` frame from two successive views (rates are their
//! difference over the time between them). Pure functions, tested without a broker.

use std::fmt::Write as _;

use crate::metrics::snapshot::ShardLoad;
use crate::metrics::view::View;

/// A shard this much busier than the mean is marked hot.
const HOT_FACTOR: f64 = 1.5;
/// Below this busy ratio nothing is called hot (an idle broker has noise only).
const HOT_BUSY_MIN: f64 = 0.2;

/// Per-shard rates between two views.
#[derive(Debug, Clone, PartialEq)]
pub struct ShardRates {
    pub shard: u32,
    pub busy_pct: f64,
    pub requests_per_s: f64,
    pub in_mib_per_s: f64,
    pub out_mib_per_s: f64,
    /// Record bytes into / out of the partitions this shard owns (what the shard balancer
    /// evens out), MiB/s; the two above count on the connection's shard.
    pub owned_in_mib_per_s: f64,
    pub owned_out_mib_per_s: f64,
    pub load: ShardLoad,
}

/// Rates of `now` against `before` (or since start when there is no earlier view).
#[must_use]
pub fn rates(before: Option<&View>, now: &View) -> Vec<ShardRates> {
    let elapsed_s = match before {
        Some(b) if now.uptime_ms > b.uptime_ms => (now.uptime_ms - b.uptime_ms) as f64 / 1e3,
        _ => (now.uptime_ms as f64 / 1e3).max(1e-3),
    };
    now.shards
        .iter()
        .map(|s| {
            let prev = before.and_then(|b| b.shards.iter().find(|p| p.shard == s.shard));
            let d = |f: fn(&ShardLoad) -> u64| {
                let base = prev.map_or(0, f);
                f(s).saturating_sub(base) as f64 / elapsed_s
            };
            ShardRates {
                shard: s.shard,
                busy_pct: s.busy_ratio * 100.0,
                requests_per_s: d(|l| l.requests),
                in_mib_per_s: d(|l| l.request_bytes) / (1024.0 * 1024.0),
                out_mib_per_s: d(|l| l.response_bytes) / (1024.0 * 1024.0),
                owned_in_mib_per_s: d(|l| l.owned_bytes_in) / (1024.0 * 1024.0),
                owned_out_mib_per_s: d(|l| l.owned_bytes_out) / (1024.0 * 1024.0),
                load: s.clone(),
            }
        })
        .collect()
}

/// One frame of text: header, one line per shard (hot shards marked `*`), then the
/// latency percentiles per API.
#[must_use]
pub fn frame(source: &str, before: Option<&View>, now: &View) -> String {
    let rows = rates(before, now);
    let mut out = String::new();
    let _ = writeln!(
        out,
        "shardlog top  {source}  uptime {:.1} s  {} shards",
        now.uptime_ms as f64 / 1e3,
        rows.len()
    );
    let _ = writeln!(
        out,
        "{:>6} {:>6} {:>10} {:>9} {:>9} {:>9} {:>9} {:>6} {:>5} {:>6} {:>7} {:>5}",
        "SHARD",
        "BUSY%",
        "REQ/s",
        "IN MiB/s",
        "OUT MiB/s",
        "P-IN MiB",
        "P-OUT MiB",
        "CONNS",
        "INFL",
        "PARTS",
        "LEADERS",
        "MESHQ"
    );
    let mean_busy = rows.iter().map(|r| r.busy_pct).sum::<f64>() / rows.len().max(1) as f64;
    for r in &rows {
        let hot = rows.len() > 1
            && r.busy_pct >= HOT_BUSY_MIN * 100.0
            && r.busy_pct > mean_busy * HOT_FACTOR;
        let _ = writeln!(
            out,
            "{:>5}{} {:>6.1} {:>10.0} {:>9.2} {:>9.2} {:>9.2} {:>9.2} {:>6} {:>5} {:>6} {:>7} {:>5}",
            r.shard,
            if hot { "*" } else { " " },
            r.busy_pct,
            r.requests_per_s,
            r.in_mib_per_s,
            r.out_mib_per_s,
            r.owned_in_mib_per_s,
            r.owned_out_mib_per_s,
            r.load.connections,
            r.load.in_flight,
            r.load.partitions,
            r.load.leaders,
            r.load.mesh_queue_depth
        );
    }
    let _ = writeln!(
        out,
        "(IN/OUT: request/response bytes on the connection's shard; P-IN/P-OUT: record bytes \
         of the partitions each shard owns, MiB/s)"
    );
    let _ = writeln!(out);
    let _ = writeln!(
        out,
        "{:<22} {:>12} {:>10} {:>10} {:>10} {:>10}",
        "API (latency, ms)", "REQUESTS", "p50", "p99", "p99.9", "max"
    );
    for a in &now.apis {
        let ms = |us: u64| us as f64 / 1e3;
        let _ = writeln!(
            out,
            "{:<22} {:>12} {:>10.3} {:>10.3} {:>10.3} {:>10.3}",
            a.api,
            a.count,
            ms(a.p50_us),
            ms(a.p99_us),
            ms(a.p999_us),
            ms(a.max_us)
        );
    }
    if !now.produce_stages.is_empty() {
        let _ = writeln!(out);
        let _ = writeln!(
            out,
            "{:<22} {:>12} {:>10} {:>10} {:>10} {:>10}",
            "Produce stage (ms)", "SAMPLES", "p50", "p99", "p99.9", "max"
        );
        for s in &now.produce_stages {
            let ms = |us: u64| us as f64 / 1e3;
            let _ = writeln!(
                out,
                "{:<22} {:>12} {:>10.3} {:>10.3} {:>10.3} {:>10.3}",
                s.stage,
                s.count,
                ms(s.p50_us),
                ms(s.p99_us),
                ms(s.p999_us),
                ms(s.max_us)
            );
        }
    }
    let clients = super::clients::section(before, now);
    if !clients.is_empty() {
        let _ = writeln!(out);
        out.push_str(&clients);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::metrics::view::ApiLatency;

    fn view(uptime_ms: u64, reqs: [u64; 2], busy: [f64; 2]) -> View {
        View {
            uptime_ms,
            shards: (0..2)
                .map(|i| ShardLoad {
                    shard: i as u32,
                    busy_ratio: busy[i],
                    requests: reqs[i],
                    request_bytes: reqs[i] * 1024 * 1024,
                    owned_bytes_in: reqs[i] * 2 * 1024 * 1024,
                    partitions: 3 - i as i64,
                    ..ShardLoad::default()
                })
                .collect(),
            apis: vec![ApiLatency {
                api: "Produce".into(),
                count: 10,
                p50_us: 250,
                p99_us: 1_500,
                p999_us: 2_000,
                max_us: 9_000,
            }],
            clients: Vec::new(),
            produce_stages: vec![crate::metrics::view::StageLatency {
                stage: "fdatasync".into(),
                count: 4,
                p50_us: 41,
                p99_us: 290,
                p999_us: 290,
                max_us: 300,
            }],
        }
    }

    #[test]
    fn rates_are_differences_over_elapsed_time() {
        let a = view(1_000, [100, 10], [0.1, 0.1]);
        let b = view(3_000, [300, 50], [0.9, 0.1]);
        let r = rates(Some(&a), &b);
        assert!((r[0].requests_per_s - 100.0).abs() < 1e-9);
        assert!((r[1].in_mib_per_s - 20.0).abs() < 1e-9);
        assert!((r[0].owned_in_mib_per_s - 200.0).abs() < 1e-9);
        let text = frame("127.0.0.1:9644", Some(&a), &b);
        assert!(text.contains("    0*   90.0"), "{text}");
        assert!(text.contains("    1    10.0"), "{text}");
        assert!(text.contains("Produce"), "{text}");
        assert!(text.contains("1.500"), "{text}");
        assert!(text.contains("fdatasync") && text.contains("0.041"), "{text}");
    }
}
