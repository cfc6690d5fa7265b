//! raft-rs logs through `slog`; the crate logs through `tracing`. [`TracingDrain`] forwards
//! each slog record as a `tracing` event (target `shardlog::quorum::raft`, level mapped,
//! key-values appended to the message), so raft-rs's logs obey the broker's `RUST_LOG` filter.
//! The record is formatted only if `tracing` would keep it: raft-rs logs at debug level on
//! every election and snapshot, and the simulator runs thousands of those.

use std::fmt::{self, Write as _};

use slog::{Drain, Key, Level, OwnedKVList, Record, Serializer, KV};

/// A `slog` drain that re-emits records as `tracing` events.
pub struct TracingDrain;

/// The logger to hand raft-rs for node `id`.
pub fn raft_logger(id: u64) -> slog::Logger {
    slog::Logger::root(TracingDrain, slog::o!("raft_id" => id))
}

struct KvText(String);

impl Serializer for KvText {
    fn emit_arguments(&mut self, key: Key, val: &fmt::Arguments<'_>) -> slog::Result {
        // Writing to a String cannot fail.
        let _ = write!(self.0, " {key}={val}");
        Ok(())
    }
}

fn text(record: &Record<'_>, values: &OwnedKVList) -> String {
    let mut kv = KvText(record.msg().to_string());
    let _ = record.kv().serialize(record, &mut kv);
    let _ = values.serialize(record, &mut kv);
    kv.0
}

macro_rules! forward {
    ($level:expr, $record:expr, $values:expr) => {
        if tracing::enabled!(target: "shardlog::quorum::raft", $level) {
            let msg = text($record, $values);
            tracing::event!(target: "shardlog::quorum::raft", $level, "{msg}");
        }
    };
}

impl Drain for TracingDrain {
    type Ok = ();
    type Err = slog::Never;

    fn log(&self, record: &Record<'_>, values: &OwnedKVList) -> Result<(), slog::Never> {
        match record.level() {
            Level::Critical | Level::Error => forward!(tracing::Level::ERROR, record, values),
            Level::Warning => forward!(tracing::Level::WARN, record, values),
            Level::Info => forward!(tracing::Level::INFO, record, values),
            Level::Debug => forward!(tracing::Level::DEBUG, record, values),
            Level::Trace => forward!(tracing::Level::TRACE, record, values),
        }
        Ok(())
    }
}
