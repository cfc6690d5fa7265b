//! A deterministic simulation of one pipelining client on one connection against Kafka's
//! windowed rate ([`super::rate`]), the case of issue 32: the client keeps requests queued on
//! its connection (librdkafka keeps up to `queue.buffering.max.kbytes` in flight), the
//! reader reads and records one whenever the connection is not muted and fewer than
//! `CONNECTION_IN_FLIGHT_MAX` are in flight, and each response leaves `SERVICE_MS` after its
//! request was read. Compares where the mute of a throttled request starts:
//! - when its response leaves (the writer), as before issue 32: the reader goes on reading
//!   and recording the requests queued behind it for `SERVICE_MS`, their throttles grow past
//!   the span the rate remembers, and the bytes that outlive their samples are never paid
//!   for;
//! - when it is recorded (`server::produce` mutes the connection before the reader reads the
//!   next frame), which gives Kafka's one-request-at-a-time bound.
//!
//! With more than one shard a throttle is capped at the span the rate remembers
//! (`ShardQuotas::throttle_cap_ms`): the runs with `cap_ms` = that span model it. The cap
//! made the mute from the response far worse (the oversized throttles ended sooner) and does
//! not change the mute from the record.

use super::rate::{record_and_throttle_ms, QuotaWindow, SampledRate};
use crate::constants::CONNECTION_IN_FLIGHT_MAX;

const QUOTA: f64 = 1_048_576.0;
/// The time between reading two queued requests.
const READ_MS: u64 = 1;

#[derive(Clone, Copy, PartialEq, Eq)]
enum MuteStart {
    AtResponse,
    AtRecord,
}

/// Bytes acknowledged per second from `from_ms` to `end_ms`, as a fraction of the quota, with
/// every throttle capped at `cap_ms`.
fn run(
    w: QuotaWindow,
    start: MuteStart,
    (request_bytes, service_ms): (u64, u64),
    cap_ms: u64,
) -> f64 {
    let (from_ms, end_ms) = (10_000, 70_000);
    let mut rate = SampledRate::default();
    let (mut now, mut muted_until) = (0u64, 0u64);
    // (response time, throttle ms) of the requests in flight, oldest first.
    let mut in_flight: std::collections::VecDeque<(u64, u64)> = Default::default();
    let mut acked = 0u64;
    while now < end_ms {
        while let Some(&(done, throttle)) = in_flight.front().filter(|(d, _)| *d <= now) {
            in_flight.pop_front();
            if start == MuteStart::AtResponse {
                muted_until = muted_until.max(done + throttle);
            }
            if (from_ms..end_ms).contains(&done) {
                acked += request_bytes;
            }
        }
        if now < muted_until {
            now = muted_until;
            continue;
        }
        if in_flight.len() >= CONNECTION_IN_FLIGHT_MAX {
            now = in_flight.front().map_or(now, |(d, _)| *d);
            continue;
        }
        #[allow(clippy::cast_precision_loss)]
        let ms = record_and_throttle_ms(&mut rate, w, QUOTA, request_bytes as f64, now).min(cap_ms);
        if start == MuteStart::AtRecord {
            muted_until = muted_until.max(now + ms);
        }
        in_flight.push_back((now + service_ms, ms));
        now += READ_MS;
    }
    #[allow(clippy::cast_precision_loss)]
    let per_s = acked as f64 / ((end_ms - from_ms) as f64 / 1000.0);
    per_s / QUOTA
}

const TEST_WINDOW: QuotaWindow = QuotaWindow { samples: 2, window_ms: 1000 };
/// The cap of a shared quota's throttle under `TEST_WINDOW`.
const SHARED_CAP_MS: u64 = 2000;
/// Request sizes and response latencies of a pipelining producer.
const CASES: [(u64, u64); 8] = [
    (4_096, 5),
    (16_384, 50),
    (65_536, 5),
    (65_536, 50),
    (65_536, 200),
    (262_144, 50),
    (1_048_576, 5),
    (1_048_576, 50),
];

#[test]
fn a_mute_from_the_response_lets_pipelined_requests_through() {
    // 64 KiB requests answered after 50 ms: ~1.5x the quota (issue 32's 1.5-2.1x on a real
    // broker).
    let ratio = run(TEST_WINDOW, MuteStart::AtResponse, (65_536, 50), u64::MAX);
    assert!(ratio > 1.3, "{ratio}");
    // Capped as on several shards, 256 KiB requests answered after 20 ms: ~3x.
    let ratio = run(TEST_WINDOW, MuteStart::AtResponse, (262_144, 20), SHARED_CAP_MS);
    assert!(ratio > 2.0, "{ratio}");
}

#[test]
fn a_mute_from_the_record_holds_the_quota_whatever_the_pipelining() {
    for case in CASES {
        for cap_ms in [u64::MAX, SHARED_CAP_MS] {
            let ratio = run(TEST_WINDOW, MuteStart::AtRecord, case, cap_ms);
            assert!((0.9..=1.05).contains(&ratio), "{case:?}, cap {cap_ms} ms: {ratio}");
        }
    }
}

#[test]
fn with_kafkas_default_window_too() {
    // 11 samples: a new client's 10 s burst and the sawtooth when its first sample expires
    // add up to 10 % here, as they do in Kafka (1.14x measured on Kafka 4.1.2 over 30 s).
    for case in CASES {
        let ratio = run(QuotaWindow::KAFKA_DEFAULT, MuteStart::AtRecord, case, u64::MAX);
        assert!((0.9..=1.12).contains(&ratio), "{case:?}: {ratio}");
    }
}
