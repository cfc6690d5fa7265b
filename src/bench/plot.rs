//! `bench plot`: latency-by-percentile curves of one or more `--json` results drawn as
//! one SVG chart, with the log-scale percentile axis of HdrHistogram's plotter.
//!
//! Runs on the main thread (no executor, no network). Invariant: the x axis is
//! `log10(1 / (1 - percentile))`, so 90%, 99%, 99.9%... are evenly spaced; points at
//! 100% are clamped to the last decade shown.

use std::fmt::Write as _;
use std::path::Path;

use super::cli::PlotArgs;
use super::stats::{Percentiles, Summary};

const WIDTH: f64 = 900.0;
const HEIGHT: f64 = 520.0;
const MARGIN_LEFT: f64 = 80.0;
const MARGIN_RIGHT: f64 = 220.0;
const MARGIN_TOP: f64 = 50.0;
const MARGIN_BOTTOM: f64 = 60.0;
/// Decades on the percentile axis: 0% .. 99.9999%.
const DECADES: f64 = 6.0;
const COLORS: [&str; 8] =
    ["#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#e377c2", "#17becf"];

pub fn run(a: PlotArgs) -> anyhow::Result<()> {
    let mut series = Vec::new();
    for p in &a.inputs {
        series.push(load(p)?);
    }
    let svg = render(&a.title, &series);
    std::fs::write(&a.output, svg)
        .map_err(|e| anyhow::anyhow!("cannot write {}: {e}", a.output.display()))?;
    println!("wrote {}", a.output.display());
    Ok(())
}

fn load(p: &Path) -> anyhow::Result<Summary> {
    let text = std::fs::read_to_string(p)
        .map_err(|e| anyhow::anyhow!("cannot read {}: {e}", p.display()))?;
    if p.extension().is_some_and(|e| e == "hgrm") {
        let label = p.file_stem().map_or_else(String::new, |s| s.to_string_lossy().into_owned());
        return hgrm_summary(&label, &text).map_err(|e| anyhow::anyhow!("{}: {e}", p.display()));
    }
    serde_json::from_str(&text)
        .map_err(|e| anyhow::anyhow!("{} is not a bench --json result: {e}", p.display()))
}

/// A bench result holding only the distribution of `.hgrm` text, so `shardlog bench plot`
/// draws a scraped broker histogram beside client-side results.
pub fn hgrm_summary(label: &str, text: &str) -> Result<Summary, String> {
    let points = crate::metrics::hgrm::parse(text)?;
    let at = |pct: f64| points.iter().find(|(p, _)| *p >= pct).map_or(0, |(_, v)| *v);
    let latency_us = Percentiles {
        p50: at(50.0),
        p90: at(90.0),
        p99: at(99.0),
        p999: at(99.9),
        p9999: at(99.99),
        max: points.last().map_or(0, |(_, v)| *v),
        mean: 0.0,
    };
    Ok(Summary {
        mode: "hgrm".into(),
        label: label.into(),
        bootstrap: String::new(),
        topic: String::new(),
        load: "broker-side".into(),
        target_rate: None,
        duration_s: 0.0,
        records: 0,
        bytes: 0,
        requests: 0,
        records_per_s: 0.0,
        mib_per_s: 0.0,
        errors: std::collections::BTreeMap::new(),
        latency_us,
        distribution: points,
        cpu_user_s: 0.0,
        cpu_sys_s: 0.0,
        cpu_pct_of_core: 0.0,
        send_lag_us: None,
        round_trip_us: None,
    })
}

fn x_of(percentile: f64) -> f64 {
    let q = (percentile / 100.0).min(1.0 - 10f64.powf(-DECADES));
    let decades = (1.0 / (1.0 - q)).log10();
    MARGIN_LEFT + decades / DECADES * (WIDTH - MARGIN_LEFT - MARGIN_RIGHT)
}

/// A "nice" axis maximum and tick step for `max` milliseconds.
fn y_axis(max_ms: f64) -> (f64, f64) {
    let raw = (max_ms * 1.05).max(0.001);
    let mag = 10f64.powf(raw.log10().floor());
    let step = [0.1, 0.2, 0.25, 0.5, 1.0, 2.0, 2.5, 5.0, 10.0]
        .iter()
        .map(|m| m * mag)
        .find(|s| raw / s <= 8.0)
        .unwrap_or(mag * 10.0);
    ((raw / step).ceil() * step, step)
}

/// Renders the chart; latencies are shown in milliseconds.
pub fn render(title: &str, series: &[Summary]) -> String {
    let max_ms = series
        .iter()
        .flat_map(|s| s.distribution.iter().map(|(_, v)| *v as f64 / 1000.0))
        .fold(0.0, f64::max);
    let (y_max, y_step) = y_axis(max_ms);
    let plot_h = HEIGHT - MARGIN_TOP - MARGIN_BOTTOM;
    let y_of = |ms: f64| MARGIN_TOP + plot_h * (1.0 - ms / y_max);
    let mut s = String::new();
    let _ = writeln!(
        s,
        r#"<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" height="{HEIGHT}" font-family="sans-serif" font-size="12">"#
    );
    let _ = writeln!(s, r#"<rect width="100%" height="100%" fill="white"/>"#);
    let _ = writeln!(
        s,
        r#"<text x="{}" y="25" font-size="16" text-anchor="middle">{}</text>"#,
        (WIDTH - MARGIN_RIGHT + MARGIN_LEFT) / 2.0,
        escape(title)
    );
    for (i, label) in
        ["0%", "90%", "99%", "99.9%", "99.99%", "99.999%", "99.9999%"].iter().enumerate()
    {
        let x = MARGIN_LEFT + i as f64 / DECADES * (WIDTH - MARGIN_LEFT - MARGIN_RIGHT);
        let _ = writeln!(
            s,
            r##"<line x1="{x:.1}" y1="{MARGIN_TOP}" x2="{x:.1}" y2="{:.1}" stroke="#ddd"/><text x="{x:.1}" y="{:.1}" text-anchor="middle">{label}</text>"##,
            HEIGHT - MARGIN_BOTTOM,
            HEIGHT - MARGIN_BOTTOM + 18.0
        );
    }
    let mut y = 0.0;
    while y <= y_max + y_step / 2.0 {
        let py = y_of(y);
        let _ = writeln!(
            s,
            r##"<line x1="{MARGIN_LEFT}" y1="{py:.1}" x2="{:.1}" y2="{py:.1}" stroke="#eee"/><text x="{:.1}" y="{:.1}" text-anchor="end">{}</text>"##,
            WIDTH - MARGIN_RIGHT,
            MARGIN_LEFT - 6.0,
            py + 4.0,
            fmt_ms(y)
        );
        y += y_step;
    }
    let _ = writeln!(
        s,
        r#"<text x="{:.1}" y="{:.1}" text-anchor="middle">percentile</text><text x="18" y="{:.1}" transform="rotate(-90 18 {:.1})" text-anchor="middle">latency (ms)</text>"#,
        (WIDTH - MARGIN_RIGHT + MARGIN_LEFT) / 2.0,
        HEIGHT - 15.0,
        MARGIN_TOP + plot_h / 2.0,
        MARGIN_TOP + plot_h / 2.0
    );
    for (i, ser) in series.iter().enumerate() {
        let color = COLORS[i % COLORS.len()];
        let points: Vec<String> = ser
            .distribution
            .iter()
            .map(|(p, v)| format!("{:.1},{:.1}", x_of(*p), y_of(*v as f64 / 1000.0)))
            .collect();
        let _ = writeln!(
            s,
            r#"<polyline fill="none" stroke="{color}" stroke-width="2" points="{}"/>"#,
            points.join(" ")
        );
        let ly = MARGIN_TOP + 10.0 + i as f64 * 36.0;
        let lx = WIDTH - MARGIN_RIGHT + 12.0;
        let _ = writeln!(
            s,
            r##"<rect x="{lx}" y="{:.1}" width="14" height="4" fill="{color}"/><text x="{:.1}" y="{:.1}">{}</text><text x="{:.1}" y="{:.1}" font-size="10" fill="#555">p99 {} ms, {:.0} rec/s</text>"##,
            ly - 4.0,
            lx + 20.0,
            ly,
            escape(&ser.label),
            lx + 20.0,
            ly + 14.0,
            fmt_ms(ser.latency_us.p99 as f64 / 1000.0),
            ser.records_per_s
        );
    }
    s.push_str("</svg>\n");
    s
}

fn fmt_ms(ms: f64) -> String {
    if ms >= 10.0 {
        format!("{ms:.0}")
    } else if ms >= 0.1 {
        format!("{ms:.2}")
    } else {
        format!("{ms:.3}")
    }
}

fn escape(t: &str) -> String {
    t.replace('&', "&amp;").replace('<', "&lt;").replace('>', "&gt;")
}

#[cfg(test)]
mod tests {

    #[test]
    fn an_hgrm_file_becomes_a_summary_of_its_distribution() {
        let mut h = hdrhistogram::Histogram::<u64>::new_with_bounds(1, 60_000_000, 3).unwrap();
        for v in 1..=1000u64 {
            h.record(v * 10).unwrap();
        }
        let summary = hgrm_summary("broker", &crate::metrics::hgrm::render(&h)).unwrap();
        assert_eq!(summary.latency_us.max, h.max());
        assert!((4990..=5010).contains(&summary.latency_us.p50));
    }
    use super::*;

    fn summary(label: &str, scale: u64) -> Summary {
        let json = format!(
            r#"{{"mode":"produce","label":"{label}","bootstrap":"b","topic":"t","load":"closed-loop",
            "target_rate":null,"duration_s":1.0,"records":10,"bytes":10,"requests":1,
            "records_per_s":10.0,"mib_per_s":0.1,"errors":{{}},
            "latency_us":{{"p50":1,"p90":2,"p99":3,"p999":4,"p9999":5,"max":6,"mean":1.0}},
            "distribution":[[0.0,{a}],[90.0,{b}],[99.0,{c}],[100.0,{d}]],
            "cpu_user_s":0.1,"cpu_sys_s":0.1,"cpu_pct_of_core":20.0}}"#,
            a = 100 * scale,
            b = 200 * scale,
            c = 900 * scale,
            d = 5000 * scale
        );
        serde_json::from_str(&json).unwrap()
    }

    #[test]
    fn percentile_axis_is_logarithmic() {
        let x0 = x_of(0.0);
        let x90 = x_of(90.0);
        let x99 = x_of(99.0);
        assert!((x99 - x90 - (x90 - x0)).abs() < 1e-6);
        assert!(x_of(100.0).is_finite());
    }

    #[test]
    fn renders_one_curve_per_result() {
        let svg = render("t <1>", &[summary("kafka", 1), summary("shardlog", 2)]);
        assert_eq!(svg.matches("<polyline").count(), 2);
        assert!(svg.contains("t &lt;1&gt;"));
        assert!(svg.contains(">shardlog<"));
        let (max, step) = y_axis(10.0);
        assert!(max >= 10.0 && step > 0.0 && max / step <= 8.0);
    }
}
