//! The per-client section of `shardlog top`: each client id's produce and fetch byte rates
//! and how much it was throttled over the last interval (Kafka's per-client quota metrics:
//! byte rate, throttle time, throttled requests), busiest first.
//!
//! Pure: rates are differences of two views' cumulative counters over their uptimes.

use std::collections::HashMap;
use std::fmt::Write as _;

use crate::metrics::snapshot::ClientTotals;
use crate::metrics::view::View;

/// Clients shown; the rest are summed into one line.
pub const CLIENT_ROWS_MAX: usize = 10;

/// One client's rates over the interval.
#[derive(Clone, Debug, PartialEq)]
pub struct ClientRates {
    pub client_id: String,
    pub produce_mib_per_s: f64,
    pub fetch_mib_per_s: f64,
    /// Milliseconds of throttle given per second of wall time (both directions).
    pub throttle_ms_per_s: f64,
    /// Throttled requests per second (both directions).
    pub throttled_per_s: f64,
}

/// Rates per client between `before` and `now` (from the start when `before` is `None`),
/// busiest (bytes) first; clients idle over the interval are left out.
#[must_use]
pub fn rates(before: Option<&View>, now: &View) -> Vec<ClientRates> {
    let zero = ClientTotals::default();
    let earlier: HashMap<&str, &ClientTotals> = before
        .map(|b| b.clients.iter().map(|c| (c.client_id.as_str(), &c.totals)).collect())
        .unwrap_or_default();
    let secs =
        (now.uptime_ms.saturating_sub(before.map_or(0, |b| b.uptime_ms)) as f64 / 1e3).max(1e-3);
    let mib = 1024.0 * 1024.0;
    let mut rows: Vec<ClientRates> = now
        .clients
        .iter()
        .filter_map(|c| {
            let b = earlier.get(c.client_id.as_str()).copied().unwrap_or(&zero);
            let t = &c.totals;
            let d = |now: u64, then: u64| now.saturating_sub(then) as f64;
            let row = ClientRates {
                client_id: c.client_id.clone(),
                produce_mib_per_s: d(t.produce_bytes, b.produce_bytes) / mib / secs,
                fetch_mib_per_s: d(t.fetch_bytes, b.fetch_bytes) / mib / secs,
                throttle_ms_per_s: (d(t.produce_throttle_ms, b.produce_throttle_ms)
                    + d(t.fetch_throttle_ms, b.fetch_throttle_ms))
                    / secs,
                throttled_per_s: (d(t.produce_throttled, b.produce_throttled)
                    + d(t.fetch_throttled, b.fetch_throttled))
                    / secs,
            };
            let active = row.produce_mib_per_s + row.fetch_mib_per_s + row.throttled_per_s > 0.0;
            active.then_some(row)
        })
        .collect();
    rows.sort_by(|a, b| {
        let load = |r: &ClientRates| r.produce_mib_per_s + r.fetch_mib_per_s;
        load(b).total_cmp(&load(a)).then_with(|| a.client_id.cmp(&b.client_id))
    });
    rows
}

/// The section's text: a header and one line per active client (at most
/// `CLIENT_ROWS_MAX`, then one line for the others); nothing when no client was active.
#[must_use]
pub fn section(before: Option<&View>, now: &View) -> String {
    let rows = rates(before, now);
    let mut out = String::new();
    if rows.is_empty() {
        return out;
    }
    let _ = writeln!(
        out,
        "{:<28} {:>11} {:>11} {:>12} {:>11}",
        "CLIENT", "PROD MiB/s", "FETCH MiB/s", "THROTTLE ms/s", "THROTTLED/s"
    );
    let line = |out: &mut String, r: &ClientRates| {
        let _ = writeln!(
            out,
            "{:<28} {:>11.2} {:>11.2} {:>12.0} {:>11.1}",
            truncate(&r.client_id, 28),
            r.produce_mib_per_s,
            r.fetch_mib_per_s,
            r.throttle_ms_per_s,
            r.throttled_per_s
        );
    };
    for r in rows.iter().take(CLIENT_ROWS_MAX) {
        line(&mut out, r);
    }
    if rows.len() > CLIENT_ROWS_MAX {
        let rest = &rows[CLIENT_ROWS_MAX..];
        let sum = |f: fn(&ClientRates) -> f64| rest.iter().map(f).sum::<f64>();
        let others = ClientRates {
            client_id: format!("({} more)", rest.len()),
            produce_mib_per_s: sum(|r| r.produce_mib_per_s),
            fetch_mib_per_s: sum(|r| r.fetch_mib_per_s),
            throttle_ms_per_s: sum(|r| r.throttle_ms_per_s),
            throttled_per_s: sum(|r| r.throttled_per_s),
        };
        line(&mut out, &others);
    }
    let _ = writeln!(
        out,
        "(per client id over the interval; THROTTLE: quota throttle time given per second)"
    );
    out
}

fn truncate(s: &str, max_chars: usize) -> String {
    if s.chars().count() <= max_chars {
        return s.to_string();
    }
    let mut t: String = s.chars().take(max_chars.saturating_sub(1)).collect();
    t.push('…');
    t
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::metrics::view::ClientView;

    fn client(id: &str, produce_bytes: u64, throttle_ms: u64, throttled: u64) -> ClientView {
        ClientView {
            client_id: id.into(),
            totals: ClientTotals {
                produce_bytes,
                produce_throttle_ms: throttle_ms,
                produce_throttled: throttled,
                ..ClientTotals::default()
            },
        }
    }

    fn view(uptime_ms: u64, clients: Vec<ClientView>) -> View {
        View { uptime_ms, clients, ..View::default() }
    }

    #[test]
    fn rates_are_per_client_differences_busiest_first() {
        let mib = 1024 * 1024;
        let before = view(1_000, vec![client("slow", mib, 0, 0), client("fast", mib, 0, 0)]);
        let now = view(
            3_000,
            vec![
                client("slow", 3 * mib, 1_500, 2),
                client("fast", 9 * mib, 0, 0),
                client("idle", 0, 0, 0),
            ],
        );
        let rows = rates(Some(&before), &now);
        assert_eq!(rows.len(), 2, "the idle client is left out");
        assert_eq!(rows[0].client_id, "fast");
        assert!((rows[0].produce_mib_per_s - 4.0).abs() < 1e-9);
        assert_eq!(rows[1].client_id, "slow");
        assert!((rows[1].produce_mib_per_s - 1.0).abs() < 1e-9);
        assert!((rows[1].throttle_ms_per_s - 750.0).abs() < 1e-9);
        assert!((rows[1].throttled_per_s - 1.0).abs() < 1e-9);
        let text = section(Some(&before), &now);
        assert!(text.contains("THROTTLE ms/s"), "{text}");
        assert!(text.lines().nth(2).unwrap().starts_with("slow"), "{text}");
    }

    #[test]
    fn many_clients_fold_into_one_line_and_no_clients_print_nothing() {
        assert!(section(None, &view(1_000, Vec::new())).is_empty());
        let clients = (0..15).map(|i| client(&format!("c{i:02}"), 1024 * (i + 1), 0, 0)).collect();
        let text = section(None, &view(1_000, clients));
        assert_eq!(text.lines().count(), 1 + CLIENT_ROWS_MAX + 1 + 1, "{text}");
        assert!(text.contains("(5 more)"), "{text}");
    }
}
