//! `shardlog transactions`: the open transactions of a broker (any Kafka-compatible one),
//! their age and partitions, over the Kafka protocol: ListTransactions, then
//! DescribeTransactions of the ids it lists (single node: this broker coordinates every id).
//! `--all` lists completed and empty ids too.
//!
//! Runs in the CLI process (blocking sockets through [`crate::protocol::blocking`]), never
//! inside the broker.

use std::io::Write;

use anyhow::anyhow;
use clap::Args;
use kafka_protocol::messages::{
    ApiKey, DescribeTransactionsRequest, DescribeTransactionsResponse, ListTransactionsRequest,
    ListTransactionsResponse, TransactionalId,
};

use crate::cli::ClientArgs;
use crate::protocol::blocking::BlockingConn;

const CLIENT_ID: &str = "shardlog-transactions";
/// Transactions still open (what `shardlog transactions` lists by default).
const OPEN_STATES: [&str; 3] = ["Ongoing", "PrepareCommit", "PrepareAbort"];

#[derive(Args, Debug, Clone)]
pub struct TransactionsArgs {
    /// The broker (`--bootstrap-server`, `--bootstrap`, `-b`), accepted anywhere on the line.
    #[command(flatten)]
    pub client: ClientArgs,
    /// `--user`, `--password`, `--sasl-mechanism`: log in on a SASL listener.
    #[command(flatten)]
    pub sasl: super::sasl::SaslArgs,
    /// Every transactional id, not only those with an open transaction.
    #[arg(long)]
    pub all: bool,
}

/// One row of the report.
#[derive(Debug, PartialEq, Eq)]
pub struct Row {
    pub transactional_id: String,
    pub producer_id: i64,
    pub epoch: i16,
    pub state: String,
    /// Milliseconds since the transaction started (-1: none open).
    pub age_ms: i64,
    pub partitions: Vec<String>,
}

/// Runs the command and prints its report on stdout.
pub fn run(args: &TransactionsArgs) -> anyhow::Result<()> {
    args.sasl.install();
    let addr = args.client.bootstrap();
    let mut conn = super::sasl::connect(addr, CLIENT_ID).map_err(|e| anyhow!("{addr}: {e}"))?;
    let rows = collect(&mut conn, args.all)?;
    let mut out = std::io::stdout().lock();
    writeln!(out, "{}", render(&rows))?;
    Ok(())
}

fn collect(conn: &mut BlockingConn, all: bool) -> anyhow::Result<Vec<Row>> {
    let mut req = ListTransactionsRequest::default().with_duration_filter(-1);
    if !all {
        req.state_filters = OPEN_STATES.iter().map(|s| (*s).into()).collect();
    }
    let listed: ListTransactionsResponse =
        conn.call(ApiKey::ListTransactions, 1, &req).map_err(|e| anyhow!("{e}"))?;
    let ids: Vec<TransactionalId> =
        listed.transaction_states.iter().map(|t| t.transactional_id.clone()).collect();
    if ids.is_empty() {
        return Ok(Vec::new());
    }
    let described: DescribeTransactionsResponse = conn
        .call(
            ApiKey::DescribeTransactions,
            0,
            &DescribeTransactionsRequest::default().with_transactional_ids(ids),
        )
        .map_err(|e| anyhow!("{e}"))?;
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX));
    let mut rows: Vec<Row> = described
        .transaction_states
        .into_iter()
        .filter(|t| t.error_code == 0)
        .map(|t| {
            let open = OPEN_STATES.contains(&t.transaction_state.as_str());
            Row {
                transactional_id: t.transactional_id.0.to_string(),
                producer_id: t.producer_id.0,
                epoch: t.producer_epoch,
                state: t.transaction_state.to_string(),
                age_ms: if open && t.transaction_start_time_ms >= 0 {
                    now.saturating_sub(t.transaction_start_time_ms)
                } else {
                    -1
                },
                partitions: t
                    .topics
                    .iter()
                    .flat_map(|tp| tp.partitions.iter().map(move |p| format!("{}-{p}", tp.topic.0)))
                    .collect(),
            }
        })
        .collect();
    rows.sort_by(|a, b| b.age_ms.cmp(&a.age_ms).then(a.transactional_id.cmp(&b.transactional_id)));
    Ok(rows)
}

/// The report: one line per id, oldest open transaction first.
#[must_use]
pub fn render(rows: &[Row]) -> String {
    let mut s = format!(
        "{:<32} {:>11} {:>6} {:<15} {:>10} PARTITIONS",
        "TRANSACTIONAL-ID", "PRODUCER-ID", "EPOCH", "STATE", "AGE-MS"
    );
    for r in rows {
        let age = if r.age_ms >= 0 { r.age_ms.to_string() } else { "-".into() };
        s.push_str(&format!(
            "\n{:<32} {:>11} {:>6} {:<15} {:>10} {}",
            r.transactional_id,
            r.producer_id,
            r.epoch,
            r.state,
            age,
            r.partitions.join(",")
        ));
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn renders_one_line_per_id() {
        let rows = vec![Row {
            transactional_id: "tx".into(),
            producer_id: 7,
            epoch: 2,
            state: "Ongoing".into(),
            age_ms: 1500,
            partitions: vec!["t-0".into(), "t-1".into()],
        }];
        let text = render(&rows);
        assert!(text.starts_with("TRANSACTIONAL-ID"));
        assert!(text
            .lines()
            .nth(1)
            .is_some_and(|l| l.contains("Ongoing") && l.ends_with("t-0,t-1")));
    }
}
