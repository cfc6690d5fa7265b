//! Leader-epoch cache of one partition (epoch -> first offset of that epoch) and its
//! `leader-epoch-checkpoint` file in Kafka's text format: `0\n<count>\n<epoch> <offset>\n...`.
//!
//! Owned by the partition log on its owner shard. Invariant: epochs and start offsets both
//! strictly increase; entries at or past the log end are dropped on truncation/recovery.

use crate::types::{Epoch, Offset};

#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct EpochCache {
    pub entries: Vec<(Epoch, Offset)>,
}

impl EpochCache {
    /// Records that `epoch` starts at `start`; true if this added an entry.
    pub fn assign(&mut self, epoch: Epoch, start: Offset) -> bool {
        if epoch.0 < 0 || self.latest().is_some_and(|e| e >= epoch) {
            return false;
        }
        self.entries.retain(|(_, o)| *o < start);
        self.entries.push((epoch, start));
        true
    }

    #[must_use]
    pub fn latest(&self) -> Option<Epoch> {
        self.entries.last().map(|(e, _)| *e)
    }

    /// Drops entries starting at or after `end`; true if any was dropped.
    pub fn truncate_from_end(&mut self, end: Offset) -> bool {
        let before = self.entries.len();
        self.entries.retain(|(_, o)| *o < end);
        before != self.entries.len()
    }

    /// Kafka's `endOffsetFor`: for the requested epoch, the largest epoch <= it and the start
    /// offset of the next higher epoch (or the log end if it is the latest).
    #[must_use]
    pub fn end_offset_for(&self, epoch: Epoch, log_end: Offset) -> Option<(Epoch, Offset)> {
        let latest = self.latest()?;
        if epoch == latest {
            return Some((latest, log_end));
        }
        let higher = self.entries.iter().find(|(e, _)| *e > epoch)?;
        let floor = self.entries.iter().rev().find(|(e, _)| *e <= epoch);
        Some((floor.map_or(epoch, |(e, _)| *e), higher.1))
    }

    #[must_use]
    pub fn to_text(&self) -> String {
        let mut s = format!("0\n{}\n", self.entries.len());
        for (e, o) in &self.entries {
            s.push_str(&format!("{} {}\n", e.0, o.0));
        }
        s
    }

    pub fn from_text(text: &str) -> Result<EpochCache, String> {
        let mut lines = text.lines();
        if lines.next() != Some("0") {
            return Err("unknown leader-epoch-checkpoint version".into());
        }
        let count: usize =
            lines.next().and_then(|l| l.trim().parse().ok()).ok_or("bad entry count")?;
        let mut cache = EpochCache::default();
        for _ in 0..count {
            let line = lines.next().ok_or("missing entry")?;
            let mut parts = line.split_whitespace();
            let e: i32 = parts.next().and_then(|p| p.parse().ok()).ok_or("bad epoch")?;
            let o: i64 = parts.next().and_then(|p| p.parse().ok()).ok_or("bad offset")?;
            if !cache.assign(Epoch(e), Offset(o)) {
                return Err(format!("entry {e} {o} is not increasing"));
            }
        }
        Ok(cache)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn end_offset_for_follows_kafka() {
        let mut c = EpochCache::default();
        assert!(c.end_offset_for(Epoch(0), Offset(0)).is_none());
        c.assign(Epoch(1), Offset(0));
        c.assign(Epoch(3), Offset(10));
        c.assign(Epoch(5), Offset(20));
        assert_eq!(c.end_offset_for(Epoch(5), Offset(30)), Some((Epoch(5), Offset(30))));
        assert_eq!(c.end_offset_for(Epoch(3), Offset(30)), Some((Epoch(3), Offset(20))));
        assert_eq!(c.end_offset_for(Epoch(4), Offset(30)), Some((Epoch(3), Offset(20))));
        assert_eq!(c.end_offset_for(Epoch(0), Offset(30)), Some((Epoch(0), Offset(0))));
        assert_eq!(c.end_offset_for(Epoch(9), Offset(30)), None);
        assert_eq!(EpochCache::from_text(&c.to_text()).unwrap(), c);
        c.truncate_from_end(Offset(10));
        assert_eq!(c.latest(), Some(Epoch(1)));
    }
}
