//! The `produce`, `consume` and `e2e` runs: discover the topic, plan lanes, start the
//! executors and the controller thread, then print and write the summary.
//!
//! Runs on the main thread; the lanes run on the bench executors
//! ([`super::runtime::run_executors`]). Invariant: the summary is built only after every
//! executor has returned, so it sees every recorded acknowledgement.

use std::future::Future;
use std::sync::atomic::Ordering;
use std::sync::Arc;

use super::cli::{CommonArgs, ConsumeArgs, E2eArgs, ProduceArgs, StartFrom};
use super::client::{discover, Layout, TopicWanted};
use super::consumer::{self, ConsumerPlan};
use super::group::Timeouts;
use super::member::{self, GroupPlan};
use super::producer::{self, ProducerPlan};
use super::rate::now_ns;
use super::runtime::{self, plan_lanes, Lane};
use super::stats::{self, cpu_times_s, spawn_controller, RunClock, Shared, Summary, SummaryInput};
use crate::cli::UsageError;

/// Runs without `--duration` or `--records` last this long.
const DEFAULT_DURATION_S: f64 = 10.0;
/// How long the e2e consumer may keep reading after its producer finished.
const E2E_CONSUMER_GRACE: std::time::Duration = std::time::Duration::from_secs(5);
/// Head start given to lanes to connect before the open-loop schedule begins.
const CONNECT_ALLOWANCE_NS: u64 = 200_000_000;
/// Session timeout of group members (Kafka's default range is 6 s..30 min).
const GROUP_SESSION_TIMEOUT_MS: i32 = 10_000;
/// How long the coordinator waits for members to rejoin.
const GROUP_REBALANCE_TIMEOUT_MS: i32 = 30_000;

fn discover_topic(common: &CommonArgs) -> anyhow::Result<Layout> {
    super::client::set_security(common)?;
    let bootstrap = common.client.bootstrap().to_string();
    let want = TopicWanted {
        topic: common.topic.clone(),
        partitions: common.partitions,
        replication_factor: common.replication_factor,
        configs: common.topic_configs.clone(),
    };
    runtime::block_on(move || async move { discover(&bootstrap, &want).await })?
}

fn clock(common: &CommonArgs, start_ns: u64) -> RunClock {
    let duration_s = match (common.duration, common.records) {
        (None, None) => Some(DEFAULT_DURATION_S),
        (d, _) => d,
    };
    RunClock { start_ns, warmup_s: common.warmup, duration_s }
}

/// Runs `lane_fn` for every lane on its executor and returns the first lane error.
fn run_lanes<F, Fut>(cpus: usize, lanes: Vec<Lane>, lane_fn: F) -> anyhow::Result<()>
where
    F: Fn(Lane) -> Fut + Send + Sync + Clone + 'static,
    Fut: Future<Output = anyhow::Result<()>> + 'static,
{
    let lanes = Arc::new(lanes);
    let results = runtime::run_executors(cpus, move |i| {
        let mine: Vec<Lane> = lanes.iter().filter(|l| l.executor == i).cloned().collect();
        let lane_fn = lane_fn.clone();
        async move {
            let tasks: Vec<_> =
                mine.into_iter().map(|l| glommio::spawn_local(lane_fn(l))).collect();
            let mut first_err = None;
            for t in tasks {
                if let Err(e) = t.await {
                    first_err.get_or_insert(e.to_string());
                }
            }
            first_err
        }
    })?;
    match results.into_iter().flatten().next() {
        Some(e) => Err(anyhow::anyhow!(e)),
        None => Ok(()),
    }
}

fn finish(
    shared: &Shared,
    common: &CommonArgs,
    mode: &str,
    rate: Option<f64>,
    cpu_start: (f64, f64),
) -> anyhow::Result<Summary> {
    let rec = shared.rec.lock();
    let summary = stats::summarize(
        &rec,
        &SummaryInput {
            mode,
            label: common.label.as_deref(),
            bootstrap: common.client.bootstrap(),
            topic: &common.topic,
            rate,
            end_ns: now_ns(),
            cpu_start,
        },
    );
    summary.print(&mut std::io::stdout().lock())?;
    if let Some(p) = &common.hgrm {
        stats::write_hgrm(&rec.latency_us, p)
            .map_err(|e| anyhow::anyhow!("cannot write {}: {e}", p.display()))?;
    }
    if let Some(p) = &common.json {
        stats::write_json(&summary, p)?;
    }
    Ok(summary)
}

fn stop_all(shareds: &[Arc<Shared>], controller: std::thread::JoinHandle<()>) {
    shareds.iter().for_each(|s| s.stop.store(true, Ordering::Relaxed));
    let _ = controller.join();
}

pub fn produce(a: ProduceArgs) -> anyhow::Result<()> {
    a.common.validate()?;
    a.producer.validate()?;
    runtime::raise_memlock()?;
    let cpu_start = cpu_times_s();
    let layout = discover_topic(&a.common)?;
    let mut plan = ProducerPlan::new(
        a.producer.clone(),
        &layout.topic,
        layout.versions.produce,
        layout.leaders.len(),
    );
    plan.start_ns = now_ns() + CONNECT_ALLOWANCE_NS;
    let plan = Arc::new(plan);
    let lanes = plan_lanes(&layout.leaders, a.common.cpus, a.common.connections);
    let shared = Shared::new(a.common.records);
    let controller =
        spawn_controller(vec![shared.clone()], clock(&a.common, plan.start_ns), a.common.quiet);
    let s2 = shared.clone();
    let result =
        run_lanes(a.common.cpus, lanes, move |l| producer::run_lane(plan.clone(), l, s2.clone()));
    stop_all(std::slice::from_ref(&shared), controller);
    let summary = finish(&shared, &a.common, "produce", a.producer.rate, cpu_start)?;
    result?;
    check_errors(&summary, &shared)
}

pub fn consume(a: ConsumeArgs) -> anyhow::Result<()> {
    a.common.validate()?;
    runtime::raise_memlock()?;
    let cpu_start = cpu_times_s();
    let layout = discover_topic(&a.common)?;
    let plan = ConsumerPlan {
        topic: layout.topic.clone(),
        versions: layout.versions,
        from: a.consumer.from,
        to_end: a.consumer.to_end,
        fetch_max_bytes: a.consumer.fetch_max_bytes,
        fetch_max_wait_ms: a.consumer.fetch_max_wait_ms,
        e2e: false,
    };
    if let Some(group) = a.consumer.group.clone() {
        return consume_group(a, layout, plan, group, cpu_start);
    }
    let plan = Arc::new(plan);
    let lanes = plan_lanes(&layout.leaders, a.common.cpus, a.common.connections);
    let shared = Shared::new(a.common.records);
    let mut clk = clock(&a.common, now_ns());
    if a.consumer.to_end && a.common.duration.is_none() {
        clk.duration_s = None;
    }
    let controller = spawn_controller(vec![shared.clone()], clk, a.common.quiet);
    let s2 = shared.clone();
    let result =
        run_lanes(a.common.cpus, lanes, move |l| consumer::run_lane(plan.clone(), l, s2.clone()));
    stop_all(std::slice::from_ref(&shared), controller);
    let summary = finish(&shared, &a.common, "consume", None, cpu_start)?;
    result?;
    check_errors(&summary, &shared)
}

/// `consume --group G`: `--cpus × --connections` members (at most one per partition),
/// spread over the executors, join G and share the topic's partitions.
fn consume_group(
    a: ConsumeArgs,
    layout: Layout,
    consumer: ConsumerPlan,
    group: String,
    cpu_start: (f64, f64),
) -> anyhow::Result<()> {
    let members = (a.common.cpus * a.common.connections).min(layout.leaders.len()).max(1);
    let plan = Arc::new(GroupPlan {
        consumer,
        group,
        bootstrap: a.common.client.bootstrap().to_string(),
        leaders: layout.leaders,
        timeouts: Timeouts {
            session_ms: GROUP_SESSION_TIMEOUT_MS,
            rebalance_ms: GROUP_REBALANCE_TIMEOUT_MS,
        },
    });
    let lanes: Vec<Lane> = (0..members)
        .map(|i| Lane {
            executor: i % a.common.cpus,
            addr: a.common.client.bootstrap().to_string(),
            partitions: Vec::new(),
        })
        .collect();
    let shared = Shared::new(a.common.records);
    let mut clk = clock(&a.common, now_ns());
    if a.consumer.to_end && a.common.duration.is_none() {
        clk.duration_s = None;
    }
    let controller = spawn_controller(vec![shared.clone()], clk, a.common.quiet);
    let s2 = shared.clone();
    let result =
        run_lanes(a.common.cpus, lanes, move |_| member::run_member(plan.clone(), s2.clone()));
    stop_all(std::slice::from_ref(&shared), controller);
    let summary = finish(&shared, &a.common, "consume", None, cpu_start)?;
    result?;
    if a.consumer.to_end && summary.records == 0 && summary.errors.is_empty() {
        // The group's committed offsets were already at the end: a valid, empty run.
        return Ok(());
    }
    check_errors(&summary, &shared)
}

pub fn e2e(a: E2eArgs) -> anyhow::Result<()> {
    a.common.validate()?;
    a.producer.validate()?;
    if a.producer.record_size < super::batch::VALUE_STAMP_BYTES {
        let stamp = super::batch::VALUE_STAMP_BYTES;
        let msg = format!("e2e needs --record-size >= {stamp} (the value carries its send time)");
        return Err(UsageError(msg).into());
    }
    if a.producer.acks == 0 && a.producer.rate.is_none() {
        return Err(UsageError("e2e with --acks 0 needs --rate".into()).into());
    }
    runtime::raise_memlock()?;
    let cpu_start = cpu_times_s();
    let layout = discover_topic(&a.common)?;
    let mut plan = ProducerPlan::new(
        a.producer.clone(),
        &layout.topic,
        layout.versions.produce,
        layout.leaders.len(),
    );
    // Consumers list their start offsets during the connect allowance, before any record.
    plan.start_ns = now_ns() + 2 * CONNECT_ALLOWANCE_NS;
    let pplan = Arc::new(plan);
    let cplan = Arc::new(ConsumerPlan {
        topic: layout.topic.clone(),
        versions: layout.versions,
        from: StartFrom::Latest,
        to_end: false,
        fetch_max_bytes: 8 * 1024 * 1024,
        fetch_max_wait_ms: a.fetch_max_wait_ms,
        e2e: true,
    });
    let lanes = plan_lanes(&layout.leaders, a.common.cpus, a.common.connections);
    let (e2e_shared, prod_shared) = (Shared::new(a.common.records), Shared::new(a.common.records));
    let all = vec![e2e_shared.clone(), prod_shared.clone()];
    let controller =
        spawn_controller(all.clone(), clock(&a.common, pplan.start_ns), a.common.quiet);
    let (es, ps) = (e2e_shared.clone(), prod_shared.clone());
    let result = run_lanes(a.common.cpus, lanes, move |l| {
        let (pplan, cplan, es, ps) = (pplan.clone(), cplan.clone(), es.clone(), ps.clone());
        async move {
            let consumer = glommio::spawn_local(consumer::run_lane(cplan, l.clone(), es.clone()));
            let produced = producer::run_lane(pplan, l, ps).await;
            // Records lost or never fetched must not keep the consumer waiting forever.
            let grace = async {
                glommio::timer::sleep(E2E_CONSUMER_GRACE).await;
                es.stop.store(true, Ordering::Relaxed);
                glommio::timer::sleep(E2E_CONSUMER_GRACE).await;
                Err(anyhow::anyhow!("e2e consumer did not stop"))
            };
            let consumed = futures_lite::future::or(consumer, grace).await;
            produced.and(consumed)
        }
    });
    stop_all(&all, controller);
    let mut produce_common = a.common.clone();
    produce_common.json = None;
    produce_common.hgrm = None;
    produce_common.label = Some("produce side of e2e".into());
    finish(&prod_shared, &produce_common, "produce", a.producer.rate, cpu_start)?;
    let summary = finish(&e2e_shared, &a.common, "e2e", a.producer.rate, cpu_start)?;
    result?;
    check_errors(&summary, &e2e_shared)
}

/// A run whose every record failed, or that stalled, is a failed run (non-zero exit).
fn check_errors(s: &Summary, shared: &Shared) -> anyhow::Result<()> {
    if shared.stalled.load(Ordering::Relaxed) {
        anyhow::bail!("the broker stopped acknowledging; the run was cut short");
    }
    let errors: u64 = s.errors.values().sum();
    if s.records == 0 && errors > 0 {
        let names: Vec<&str> = s.errors.keys().map(String::as_str).collect();
        anyhow::bail!("no record succeeded; errors: {}", names.join(", "));
    }
    if s.records == 0 {
        anyhow::bail!(
            "no record was measured (is --duration shorter than the warm-up or the topic empty?)"
        );
    }
    Ok(())
}
