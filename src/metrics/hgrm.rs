//! HdrHistogram percentile-distribution text (`.hgrm`), as written by HdrHistogram's
//! `outputPercentileDistribution` and wrk2, and as `shardlog bench` writes it: values in
//! milliseconds, five ticks per half-distance, a summary footer.
//!
//! Pure functions, any thread. [`parse`] reads the same format back (our own and
//! HdrHistogram's), so a scraped histogram can be plotted beside bench results.

use std::fmt::Write as _;

use hdrhistogram::Histogram;

/// Renders `h` (recorded in microseconds) as `.hgrm` text with values in milliseconds.
#[must_use]
pub fn render(h: &Histogram<u64>) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "{:>12} {:>14} {:>10} {:>14}\n",
        "Value", "Percentile", "TotalCount", "1/(1-Percentile)"
    );
    if !h.is_empty() {
        let mut total = 0u64;
        for v in h.iter_quantiles(5) {
            let q = v.quantile_iterated_to();
            total += v.count_since_last_iteration();
            let inv = if q < 1.0 { format!("{:>14.2}", 1.0 / (1.0 - q)) } else { String::new() };
            let ms = v.value_iterated_to() as f64 / 1000.0;
            let _ = writeln!(out, "{ms:>12.3} {q:>14.12} {total:>10} {inv}");
        }
    }
    let _ = writeln!(
        out,
        "#[Mean    = {:>12.3}, StdDeviation   = {:>12.3}]",
        h.mean() / 1000.0,
        h.stdev() / 1000.0
    );
    let _ = writeln!(
        out,
        "#[Max     = {:>12.3}, Total count    = {:>12}]",
        h.max() as f64 / 1000.0,
        h.len()
    );
    let _ = writeln!(
        out,
        "#[Buckets = {:>12}, SubBuckets     = {:>12}]",
        h.buckets(),
        h.distinct_values()
    );
    out
}

/// Reads the (percentile %, value µs) points of `.hgrm` text; header, footer and blank
/// lines are skipped. Errors name the first line that is none of those.
pub fn parse(text: &str) -> Result<Vec<(f64, u64)>, String> {
    let mut points = Vec::new();
    for (i, line) in text.lines().enumerate() {
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') || line.starts_with("Value") {
            continue;
        }
        let mut fields = line.split_whitespace();
        let value_ms = fields.next().and_then(|f| f.parse::<f64>().ok());
        let quantile = fields.next().and_then(|f| f.parse::<f64>().ok());
        match (value_ms, quantile) {
            (Some(ms), Some(q)) if (0.0..=1.0).contains(&q) && ms >= 0.0 => {
                points.push((q * 100.0, (ms * 1000.0).round() as u64));
            }
            _ => return Err(format!("line {}: not an .hgrm row: {line:?}", i + 1)),
        }
    }
    Ok(points)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn render_then_parse_keeps_percentiles_and_total() {
        let mut h = Histogram::<u64>::new_with_bounds(1, 60_000_000, 3).expect("bounds");
        for v in 1..=1000u64 {
            h.record(v * 10).expect("in range");
        }
        let text = render(&h);
        assert!(text.contains("Total count    =         1000"), "{text}");
        let points = parse(&text).expect("parses");
        let (last_pct, last_us) = *points.last().expect("points");
        assert!((last_pct - 100.0).abs() < 1e-9);
        assert_eq!(last_us, h.max());
        let median = points.iter().find(|(p, _)| *p >= 50.0).expect("median").1;
        assert!((4990..=5010).contains(&median), "{median}");
        assert!(parse("Value Percentile\n1.0 oops\n").is_err());
    }

    #[test]
    fn empty_histogram_renders_header_and_footer_only() {
        let h = Histogram::<u64>::new_with_bounds(1, 60_000_000, 3).expect("bounds");
        let text = render(&h);
        assert!(parse(&text).expect("parses").is_empty());
        assert!(text.contains("Total count    =            0"));
    }
}
