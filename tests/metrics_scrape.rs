//! Scrapes `/metrics` of a real two-shard broker during and after a produce/consume run
//! (rskafka as the client) and checks that counters match what was sent, that histogram
//! counts match the number of requests, and that the text parses with a Prometheus
//! parser. Also reads the `.hgrm` histogram and the JSON view of the same run.
#![cfg(feature = "metrics")]

mod metrics_support;

use std::time::{Duration, Instant};

use metrics_support::{broker, parse_prometheus, value, Sample};
use rskafka::client::partition::{Compression, UnknownTopicHandling};
use rskafka::client::ClientBuilder;
use rskafka::record::Record;
use shardlog::top::http_get;

const TOPIC: &str = "scrape";
const PARTITIONS: i32 = 4;
const REQUESTS_PER_PARTITION: usize = 5;
const RECORDS_PER_REQUEST: usize = 10;
const VALUE_BYTES: usize = 100;

fn record(i: usize) -> Record {
    Record {
        key: Some(format!("k{i}").into_bytes()),
        value: Some(vec![b'v'; VALUE_BYTES]),
        headers: Default::default(),
        timestamp: chrono_now(),
    }
}

fn chrono_now() -> rskafka::chrono::DateTime<rskafka::chrono::Utc> {
    let ms = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(0));
    rskafka::chrono::DateTime::from_timestamp_millis(ms).expect("valid timestamp")
}

/// Produces and consumes everything; returns the number of Fetch calls made.
async fn run_load(addr: &str) -> usize {
    let client = ClientBuilder::new(vec![addr.to_owned()]).build().await.expect("client");
    client
        .controller_client()
        .expect("controller")
        .create_topic(TOPIC, PARTITIONS, 1, 5_000)
        .await
        .expect("create topic");
    let mut fetches = 0;
    for p in 0..PARTITIONS {
        let pc = client
            .partition_client(TOPIC, p, UnknownTopicHandling::Retry)
            .await
            .expect("partition client");
        for r in 0..REQUESTS_PER_PARTITION {
            let records = (0..RECORDS_PER_REQUEST).map(|i| record(r * 100 + i)).collect();
            pc.produce(records, Compression::NoCompression).await.expect("produce");
        }
        let mut offset = 0;
        let want = (REQUESTS_PER_PARTITION * RECORDS_PER_REQUEST) as i64;
        while offset < want {
            let (recs, _hw) = pc.fetch_records(offset, 1..1_000_000, 100).await.expect("fetch");
            fetches += 1;
            offset = recs.last().map_or(offset, |r| r.offset + 1);
        }
    }
    fetches
}

fn scrape(admin: &str) -> (String, Vec<Sample>) {
    let text = http_get(admin, "/metrics").expect("GET /metrics");
    let samples = parse_prometheus(&text);
    (text, samples)
}

#[test]
fn scrape_matches_a_produce_consume_run() {
    let b = broker::start(2);
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().expect("rt");
    let fetches = rt.block_on(run_load(&b.addr));
    let produced = PARTITIONS as usize * REQUESTS_PER_PARTITION;
    let records = produced * RECORDS_PER_REQUEST;
    // Shards publish every 200 ms: poll until the last figures are in.
    let deadline = Instant::now() + Duration::from_secs(10);
    let produce_total = [("api", "Produce"), ("stage", "total")];
    let (text, samples) = loop {
        let (text, samples) = scrape(&b.admin);
        let count = value(&samples, "shardlog_request_latency_seconds_count", &produce_total);
        let recs = value(&samples, "shardlog_topic_records_in_total", &[("topic", TOPIC)]);
        // Each shard publishes its figures every 200 ms: wait until the fetch count (recorded
        // on another shard, maybe) has arrived too, not only the produce figures.
        let fetched = value(
            &samples,
            "shardlog_request_latency_seconds_count",
            &[("api", "Fetch"), ("stage", "total")],
        );
        if count == Some(produced as f64)
            && recs == Some(records as f64)
            && fetched == Some(fetches as f64)
        {
            break (text, samples);
        }
        assert!(Instant::now() < deadline, "figures never matched the run:\n{text}");
        std::thread::sleep(Duration::from_millis(100));
    };
    let get = |name: &str, labels: &[(&str, &str)]| value(&samples, name, labels);
    let fetch_total = [("api", "Fetch"), ("stage", "total")];
    assert_eq!(get("shardlog_request_latency_seconds_count", &fetch_total), Some(fetches as f64));
    for stage in ["queue", "send"] {
        let labels = [("api", "Produce"), ("stage", stage)];
        assert_eq!(get("shardlog_request_latency_seconds_count", &labels), Some(produced as f64));
    }
    let storage = [("api", "Produce"), ("stage", "storage")];
    assert_eq!(get("shardlog_request_latency_seconds_count", &storage), Some(produced as f64));
    let inf = [("api", "Produce"), ("stage", "total"), ("le", "+Inf")];
    assert_eq!(get("shardlog_request_latency_seconds_bucket", &inf), Some(produced as f64));
    let bytes_in = get("shardlog_topic_bytes_in_total", &[("topic", TOPIC)]).expect("bytes in");
    assert!(bytes_in >= (records * VALUE_BYTES) as f64, "{bytes_in}");
    assert_eq!(get("shardlog_topic_records_out_total", &[("topic", TOPIC)]), Some(records as f64));
    assert_eq!(get("shardlog_partitions", &[]), Some(f64::from(PARTITIONS)));
    let requests = get("shardlog_requests_total", &[]).expect("requests");
    assert!(requests >= (produced + fetches) as f64, "{requests}");
    assert_eq!(get("shardlog_requests_in_flight", &[]), Some(0.0), "{text}");
    let p99 = [("api", "Produce"), ("stage", "total"), ("quantile", "0.99")];
    assert!(get("shardlog_request_latency_percentile_seconds", &p99).expect("p99") > 0.0);
    assert!(get("shardlog_storage_flush_latency_seconds_count", &[]).expect("flushes") >= 1.0);

    let hgrm = http_get(&b.admin, "/v1/histograms/Produce").expect("hgrm");
    let points = shardlog::metrics::hgrm::parse(&hgrm).expect("hgrm parses");
    assert!(!points.is_empty());
    assert!(hgrm.contains(&format!("Total count    = {produced:>12}")), "{hgrm}");
    let view = shardlog::top::fetch_view(&b.admin).expect("view");
    assert_eq!(view.shards.len(), 2);
    assert_eq!(
        view.apis.iter().find(|a| a.api == "Produce").map(|a| a.count),
        Some(produced as u64)
    );
}
