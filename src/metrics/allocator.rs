//! Gauges of the process's memory allocator: bytes the program holds (`allocated`), the
//! pages those bytes sit in (`active`), what the allocator has resident (`resident`, its
//! metadata and dirty pages included) and address space it keeps but returned to the OS
//! (`retained`). With RSS beside them a scrape tells live heap, fragmentation and pages
//! not yet purged apart (issue 19's soak).
//!
//! The library does not know the allocator: the binary installs a reader with
//! [`set_reader`] (jemalloc's counters in `src/main.rs`); without one nothing is rendered.
//! The reader runs on the thread that serves the scrape, never on a shard's hot path.

use std::fmt;
use std::sync::OnceLock;

use prometheus_client::encoding::DescriptorEncoder;
use prometheus_client::metrics::MetricType;

/// One reading of the allocator's counters, in bytes.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct AllocatorStats {
    pub allocated_bytes: u64,
    pub active_bytes: u64,
    pub resident_bytes: u64,
    pub mapped_bytes: u64,
    pub retained_bytes: u64,
    /// Allocator metadata (part of `resident_bytes`).
    pub metadata_bytes: u64,
}

/// Reads the allocator's counters; `None` when they cannot be read now.
pub type Reader = fn() -> Option<AllocatorStats>;

static READER: OnceLock<Reader> = OnceLock::new();

/// Installs the reader (once per process; later calls are ignored).
pub fn set_reader(reader: Reader) {
    let _ = READER.set(reader);
}

/// The counters now, if a reader is installed and succeeds.
#[must_use]
pub fn read() -> Option<AllocatorStats> {
    READER.get().and_then(|r| r())
}

pub(super) fn encode(enc: &mut DescriptorEncoder) -> fmt::Result {
    let Some(s) = read() else {
        return Ok(());
    };
    let gauges = [
        ("shardlog_allocator_allocated_bytes", "Heap bytes allocated by the program", s.allocated_bytes),
        (
            "shardlog_allocator_active_bytes",
            "Bytes in the allocator's active pages (allocated plus the free space inside them)",
            s.active_bytes,
        ),
        (
            "shardlog_allocator_resident_bytes",
            "Bytes the allocator holds resident: active pages, metadata, dirty pages not yet purged",
            s.resident_bytes,
        ),
        ("shardlog_allocator_mapped_bytes", "Bytes in the allocator's mapped extents", s.mapped_bytes),
        (
            "shardlog_allocator_retained_bytes",
            "Address space the allocator keeps but returned to the OS (not resident)",
            s.retained_bytes,
        ),
        ("shardlog_allocator_metadata_bytes", "The allocator's own metadata", s.metadata_bytes),
    ];
    for (name, help, value) in gauges {
        let value = i64::try_from(value).unwrap_or(i64::MAX);
        enc.encode_descriptor(name, help, None, MetricType::Gauge)?.encode_gauge(&value)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn renders_the_installed_readers_counters() {
        set_reader(|| {
            Some(AllocatorStats { allocated_bytes: 7, resident_bytes: 11, ..Default::default() })
        });
        let text = super::super::prom::render(super::super::snapshot::Merged::default());
        assert!(text.contains("shardlog_allocator_allocated_bytes 7"), "{text}");
        assert!(text.contains("shardlog_allocator_resident_bytes 11"), "{text}");
    }
}
