//! The process-wide list of shard slots a scrape reads.
//!
//! Written when a shard starts ([`register`]) and by each shard's publisher (its own slot
//! only); read by scrapes on whatever shard runs the admin listener. One mutex per slot,
//! never taken on a request's path. Invariant: at most one slot per shard id (a shard
//! started again in the same process replaces its slot).

use std::sync::{Arc, Mutex};

use parking_lot::Mutex as SlotLock;

use super::snapshot::{Merged, Merger, ShardSnapshot};

/// One shard's published snapshot.
#[derive(Debug, Default)]
pub struct Slot {
    pub snapshot: SlotLock<ShardSnapshot>,
}

static SLOTS: Mutex<Vec<(u32, Arc<Slot>)>> = Mutex::new(Vec::new());

/// Creates (or replaces) the slot of `shard` and returns it.
pub fn register(shard: u32) -> Arc<Slot> {
    let slot = Arc::new(Slot::default());
    slot.snapshot.lock().shard = shard;
    let mut slots = SLOTS.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
    slots.retain(|(id, _)| *id != shard);
    slots.push((shard, slot.clone()));
    slot
}

/// Every registered slot.
#[must_use]
pub fn slots() -> Vec<Arc<Slot>> {
    let slots = SLOTS.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
    slots.iter().map(|(_, s)| s.clone()).collect()
}

/// Merges every registered shard's snapshot.
#[must_use]
pub fn merged() -> Merged {
    let mut m = Merger::default();
    for slot in slots() {
        m.add(&slot.snapshot.lock());
    }
    m.finish()
}
