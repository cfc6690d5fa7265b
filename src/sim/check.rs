//! The simulator's oracle: global records that outlive every node (crashes included) and the
//! invariants checked against them after every step.
//!
//! - at most one leader per term ([`Checker::leader`]);
//! - committed entries never change: the first node to apply index `i` fixes `i`'s entry, and
//!   every later application of `i`, on any node, must be the same ([`Checker::applied`]);
//! - a node's applied sequence is a prefix of that committed log: it applies `1, 2, 3, …`
//!   without gaps, and a snapshot it restores holds exactly the committed entries it covers;
//! - a node applies only entries it has durably persisted (checked by [`super::node`]
//!   against its record of acknowledged writes).

use std::collections::BTreeMap;

use bytes::Bytes;

/// One applied entry: (index, term, data).
pub type Applied = (u64, u64, Bytes);

/// Global records; see the module docs.
#[derive(Default)]
pub struct Checker {
    leaders: BTreeMap<u64, u64>,
    committed: BTreeMap<u64, (u64, Bytes)>,
}

impl Checker {
    /// Node `id` is leader of `term`.
    pub fn leader(&mut self, term: u64, id: u64) -> Result<(), String> {
        match self.leaders.insert(term, id) {
            Some(other) if other != id => {
                Err(format!("two leaders in term {term}: nodes {other} and {id}"))
            }
            _ => Ok(()),
        }
    }

    /// Node `id`, whose last applied index was `last`, applies `e`.
    pub fn applied(&mut self, id: u64, last: u64, e: &Applied) -> Result<(), String> {
        let (index, term, data) = e;
        if *index != last + 1 {
            return Err(format!("node {id} applied {index} after {last}"));
        }
        match self.committed.get(index) {
            Some((t, d)) if (t, d) != (term, data) => Err(format!(
                "committed entry {index} changed: was term {t} {d:?}, node {id} applied term \
                 {term} {data:?}"
            )),
            Some(_) => Ok(()),
            None => {
                self.committed.insert(*index, (*term, data.clone()));
                Ok(())
            }
        }
    }

    /// Node `id` restores a snapshot holding `state`: it must be the committed log's prefix.
    pub fn restored(&self, id: u64, state: &[Applied]) -> Result<(), String> {
        for (pos, (index, term, data)) in state.iter().enumerate() {
            if *index != pos as u64 + 1 {
                return Err(format!("node {id}: snapshot holds {index} at position {pos}"));
            }
            if self.committed.get(index) != Some(&(*term, data.clone())) {
                return Err(format!("node {id}: snapshot entry {index} is not the committed one"));
            }
        }
        Ok(())
    }

    /// The committed entry at `index` (term, data), once some node applied it.
    #[must_use]
    pub fn entry(&self, index: u64) -> Option<&(u64, Bytes)> {
        self.committed.get(&index)
    }

    /// Entries applied by some node so far.
    #[must_use]
    pub fn committed_len(&self) -> usize {
        self.committed.len()
    }

    /// Terms that had a leader.
    #[must_use]
    pub fn terms_with_leader(&self) -> usize {
        self.leaders.len()
    }

    /// A digest of everything committed and every leader (FNV-1a), to compare two runs.
    #[must_use]
    pub fn digest(&self) -> u64 {
        let mut h: u64 = 0xcbf2_9ce4_8422_2325;
        let mut eat = |bytes: &[u8]| {
            for b in bytes {
                h = (h ^ u64::from(*b)).wrapping_mul(0x0100_0000_01b3);
            }
        };
        for (index, (term, data)) in &self.committed {
            eat(&index.to_be_bytes());
            eat(&term.to_be_bytes());
            eat(data);
        }
        for (term, id) in &self.leaders {
            eat(&term.to_be_bytes());
            eat(&id.to_be_bytes());
        }
        h
    }
}
