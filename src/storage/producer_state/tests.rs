//! Every transition and error of the producer window, then a property test against a simple
//! model that keeps each producer's whole history (not just the retained window).

use std::collections::HashMap;

use proptest::prelude::*;

use super::*;

fn pb(producer_id: i64, epoch: i16, first_seq: i32, records: i32) -> ProducerBatch {
    ProducerBatch { producer_id, epoch, first_seq, offset_delta: records - 1, transactional: false }
}

/// Checks and, if accepted, applies at `*end`, advancing it like a log.
fn produce(
    m: &mut ProducerStateMap,
    b: &ProducerBatch,
    end: &mut i64,
) -> Result<Verdict, SequenceError> {
    let v = m.check(b)?;
    if v == Verdict::Append {
        let last = *end + i64::from(b.offset_delta);
        m.apply(b, last, 1000);
        *end = last + 1;
    }
    Ok(v)
}

#[test]
fn unknown_producer_accepted_at_any_sequence() {
    let mut m = ProducerStateMap::default();
    let mut end = 0;
    assert_eq!(produce(&mut m, &pb(7, 3, 42, 2), &mut end), Ok(Verdict::Append));
    assert_eq!(m.get(7).unwrap().last_seq(), 43);
    assert_eq!(produce(&mut m, &pb(7, 3, 44, 1), &mut end), Ok(Verdict::Append));
}

#[test]
fn duplicates_of_the_last_five_batches_return_their_offsets() {
    let mut m = ProducerStateMap::default();
    let mut end = 100;
    let mut seq = 0;
    let mut sent = Vec::new();
    for n in [1, 3, 2, 5, 1, 4] {
        let b = pb(1, 0, seq, n);
        let first = end;
        assert_eq!(produce(&mut m, &b, &mut end), Ok(Verdict::Append));
        sent.push((b, first, end - 1));
        seq += n;
    }
    // The oldest batch fell out of the window: its retry is now out of order.
    assert!(matches!(m.check(&sent[0].0), Err(SequenceError::OutOfOrder { .. })));
    for (b, first, last) in &sent[1..] {
        let Ok(Verdict::Duplicate(d)) = m.check(b) else { panic!("duplicate expected") };
        assert_eq!((d.first_offset(), d.last_offset, d.first_seq()), (*first, *last, b.first_seq));
    }
    // Same first sequence, different length: not a duplicate, and out of order.
    assert!(m.check(&pb(1, 0, sent[5].0.first_seq, 1)).is_err());
}

#[test]
fn gaps_and_old_epochs_are_refused() {
    let mut m = ProducerStateMap::default();
    let mut end = 0;
    produce(&mut m, &pb(1, 5, 0, 2), &mut end).unwrap();
    let gap = m.check(&pb(1, 5, 3, 1)).unwrap_err();
    assert!(matches!(gap, SequenceError::OutOfOrder { last_seq: 1, first_seq: 3, .. }), "{gap}");
    assert!(matches!(m.check(&pb(1, 5, 1, 1)), Err(SequenceError::OutOfOrder { .. })));
    let old = m.check(&pb(1, 4, 2, 1)).unwrap_err();
    assert_eq!(old, SequenceError::InvalidEpoch { producer_id: 1, epoch: 4, current: 5 });
    // An old epoch is refused even at sequence 0 or as a "duplicate" of its old batches.
    assert!(matches!(m.check(&pb(1, 4, 0, 2)), Err(SequenceError::InvalidEpoch { .. })));
    assert_eq!(m.check(&pb(1, 5, 2, 1)), Ok(Verdict::Append));
}

#[test]
fn epoch_bump_must_start_at_zero_and_resets_the_window() {
    let mut m = ProducerStateMap::default();
    let mut end = 0;
    produce(&mut m, &pb(1, 0, 0, 3), &mut end).unwrap();
    assert!(matches!(m.check(&pb(1, 1, 3, 1)), Err(SequenceError::OutOfOrder { .. })));
    assert_eq!(produce(&mut m, &pb(1, 1, 0, 1), &mut end), Ok(Verdict::Append));
    let e = m.get(1).unwrap();
    assert_eq!((e.epoch, e.batches().len(), e.last_seq()), (1, 1, 0));
    // The old epoch's batch is no duplicate any more, its epoch is fenced.
    assert!(matches!(m.check(&pb(1, 0, 0, 3)), Err(SequenceError::InvalidEpoch { .. })));
}

#[test]
fn sequences_wrap_at_i32_max() {
    assert_eq!(increment_sequence(i32::MAX, 1), 0);
    assert_eq!(increment_sequence(i32::MAX - 1, 3), 1);
    assert_eq!(decrement_sequence(1, 3), i32::MAX - 1);
    let mut m = ProducerStateMap::default();
    let mut end = 0;
    produce(&mut m, &pb(1, 0, i32::MAX - 1, 3), &mut end).unwrap();
    // MAX-1, MAX, 0.
    assert_eq!(m.get(1).unwrap().last_seq(), 0);
    let Ok(Verdict::Duplicate(d)) = m.check(&pb(1, 0, i32::MAX - 1, 3)) else { panic!("dup") };
    assert_eq!(d.first_seq(), i32::MAX - 1);
    assert!(matches!(m.check(&pb(1, 0, 2, 1)), Err(SequenceError::OutOfOrder { .. })));
    assert_eq!(produce(&mut m, &pb(1, 0, 1, 1), &mut end), Ok(Verdict::Append));
    let mut m = ProducerStateMap::default();
    produce(&mut m, &pb(1, 0, i32::MAX, 1), &mut end).unwrap();
    assert_eq!(m.check(&pb(1, 0, 0, 1)), Ok(Verdict::Append));
}

#[test]
fn expiration_and_replay_of_other_epochs() {
    let mut m = ProducerStateMap::default();
    m.apply(&pb(1, 0, 0, 1), 0, 1_000);
    m.apply(&pb(2, 0, 0, 1), 1, 5_000);
    assert_eq!(m.remove_expired(6_000, 5_000), 1);
    assert!(m.get(1).is_none() && m.get(2).is_some());
    // Replay applies without checks; a lower epoch in the log resets the window to it.
    m.apply(&pb(2, 3, 9, 1), 2, 5_000);
    m.apply(&pb(2, 2, 0, 1), 3, 5_000);
    assert_eq!((m.get(2).unwrap().epoch, m.get(2).unwrap().batches().len()), (2, 1));
    m.apply(&pb(NO_PRODUCER_ID, -1, -1, 1), 4, 5_000);
    assert_eq!(m.len(), 1);
}

#[test]
fn snapshot_round_trips_and_rejects_damage() {
    let mut m = ProducerStateMap::default();
    let mut end = 0;
    for i in 0..7 {
        produce(&mut m, &pb(1, 2, i * 2, 2), &mut end).unwrap();
        produce(&mut m, &pb(9, 0, i, 1), &mut end).unwrap();
    }
    let bytes = m.encode(end);
    assert_eq!(ProducerStateMap::decode(&bytes), Ok((end, m.clone())));
    for at in [0, 5, 7, 12, bytes.len() - 1] {
        let mut bad = bytes.clone();
        bad[at] ^= 0x10;
        assert!(ProducerStateMap::decode(&bad).is_err(), "flip at {at}");
    }
    assert!(ProducerStateMap::decode(&bytes[..bytes.len() - 3]).is_err());
    let empty = ProducerStateMap::default().encode(3);
    assert_eq!(ProducerStateMap::decode(&empty), Ok((3, ProducerStateMap::default())));
}

#[test]
fn entry_memory_is_bounded() {
    // Fixed-size entries: the map's slot is all a tracked producer costs.
    // 128 B for issue 14's window, plus the open transaction's first offset (issue 17).
    assert!(std::mem::size_of::<ProducerEntry>() <= 136);
    assert_eq!(std::mem::size_of::<BatchMeta>(), 24);
}

/// (first sequence, last sequence, first offset, last offset) of an appended batch.
type Appended = (i32, i32, i64, i64);

/// The model: every producer's whole history in its current epoch.
#[derive(Default)]
struct Model {
    producers: HashMap<i64, (i16, Vec<Appended>)>,
}

impl Model {
    fn check(&self, b: &ProducerBatch) -> Result<Option<(i64, i64)>, &'static str> {
        let Some((epoch, hist)) = self.producers.get(&b.producer_id) else { return Ok(None) };
        let window = &hist[hist.len().saturating_sub(5)..];
        if b.epoch == *epoch {
            if let Some(h) = window.iter().find(|h| h.0 == b.first_seq && h.1 == b.last_seq()) {
                return Ok(Some((h.2, h.3)));
            }
        }
        if b.epoch < *epoch {
            return Err("epoch");
        }
        if b.epoch > *epoch {
            return if b.first_seq == 0 { Ok(None) } else { Err("sequence") };
        }
        let last = hist.last().map_or(-1, |h| h.1);
        let next = if last == i32::MAX { 0 } else { last + 1 };
        if b.first_seq == next {
            Ok(None)
        } else {
            Err("sequence")
        }
    }

    fn apply(&mut self, b: &ProducerBatch, first: i64, last: i64) {
        let e = self.producers.entry(b.producer_id).or_insert((b.epoch, Vec::new()));
        if e.0 != b.epoch {
            *e = (b.epoch, Vec::new());
        }
        e.1.push((b.first_seq, b.last_seq(), first, last));
    }

    fn next_seq(&self, id: i64) -> (i16, i32) {
        self.producers
            .get(&id)
            .map_or((0, 0), |(e, h)| (*e, h.last().map_or(0, |x| increment_sequence(x.1, 1))))
    }
}

#[derive(Clone, Debug)]
enum Op {
    Next { id: i64, records: i32 },
    Retry { id: i64, back: usize },
    Gap { id: i64, skip: i32 },
    Bump { id: i64, zero: bool },
    OldEpoch { id: i64 },
    NearWrap { id: i64 },
    Restore,
}

fn op() -> impl Strategy<Value = Op> {
    // Ids 10..13 start near i32::MAX (NearWrap) so their sequences wrap.
    let id = prop_oneof![0i64..3, 10i64..13];
    prop_oneof![
        4 => (id.clone(), 1i32..4).prop_map(|(id, records)| Op::Next { id, records }),
        3 => (id.clone(), 0usize..8).prop_map(|(id, back)| Op::Retry { id, back }),
        1 => (id.clone(), 1i32..3).prop_map(|(id, skip)| Op::Gap { id, skip }),
        1 => (id.clone(), any::<bool>()).prop_map(|(id, zero)| Op::Bump { id, zero }),
        1 => id.clone().prop_map(|id| Op::OldEpoch { id }),
        1 => id.prop_map(|id| Op::NearWrap { id }),
        1 => Just(Op::Restore),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]
    #[test]
    fn window_matches_the_model(ops in proptest::collection::vec(op(), 1..120)) {
        let mut m = ProducerStateMap::default();
        let mut model = Model::default();
        let mut end = 0i64;
        let mut history: Vec<(i64, ProducerBatch)> = Vec::new();
        for op in ops {
            let b = match op {
                Op::Next { id, records } => {
                    let (e, s) = model.next_seq(id);
                    pb(id, e, s, records)
                }
                Op::Retry { id, back } => {
                    let Some((_, b)) = history.iter().rev().filter(|(i, _)| *i == id).nth(back)
                    else { continue };
                    *b
                }
                Op::Gap { id, skip } => {
                    let (e, s) = model.next_seq(id);
                    pb(id, e, increment_sequence(s, skip), 1)
                }
                Op::Bump { id, zero } => {
                    let (e, s) = model.next_seq(id);
                    pb(id, e.saturating_add(1), if zero { 0 } else { s.max(1) }, 1)
                }
                Op::OldEpoch { id } => {
                    // Clients never send a negative epoch with a producer id.
                    let (e, _) = model.next_seq(id);
                    if e == 0 {
                        continue;
                    }
                    pb(id, e - 1, 0, 1)
                }
                Op::NearWrap { id } => pb(id, 0, i32::MAX - 2, 2),
                Op::Restore => {
                    // A snapshot round trip (restart) changes nothing.
                    let (off, back) = ProducerStateMap::decode(&m.encode(end)).unwrap();
                    prop_assert_eq!(off, end);
                    prop_assert_eq!(&back, &m);
                    m = back;
                    continue;
                }
            };
            let want = model.check(&b);
            let got = m.check(&b);
            match (&want, &got) {
                (Ok(None), Ok(Verdict::Append)) => {
                    let first = end;
                    end += i64::from(b.offset_delta) + 1;
                    m.apply(&b, end - 1, 0);
                    model.apply(&b, first, end - 1);
                    history.push((b.producer_id, b));
                }
                (Ok(Some((f, l))), Ok(Verdict::Duplicate(d))) => {
                    prop_assert_eq!((*f, *l), (d.first_offset(), d.last_offset));
                }
                (Err("epoch"), Err(SequenceError::InvalidEpoch { .. }))
                | (Err("sequence"), Err(SequenceError::OutOfOrder { .. })) => {}
                _ => prop_assert!(false, "{:?}: model {:?}, state {:?}", b, want, got),
            }
        }
    }
}

proptest! {
    /// The snapshot decoder (what recovery reads from disk) never panics: arbitrary bytes,
    /// and arbitrary bodies behind a valid header and CRC (so the structure checks run).
    #[test]
    fn snapshot_decoder_never_panics(
        raw in proptest::collection::vec(any::<u8>(), 0..300),
        body in proptest::collection::vec(any::<u8>(), 0..300),
    ) {
        let _ = ProducerStateMap::decode(&raw);
        let mut framed = SNAPSHOT_MAGIC.to_vec();
        framed.extend_from_slice(&SNAPSHOT_VERSION.to_be_bytes());
        framed.extend_from_slice(&crc32fast::hash(&body).to_be_bytes());
        framed.extend_from_slice(&body);
        if let Ok((_, m)) = ProducerStateMap::decode(&framed) {
            // Whatever decodes re-encodes to a state that decodes the same.
            let again = ProducerStateMap::decode(&m.encode(0)).expect("re-decode");
            prop_assert_eq!(again.1, m);
        }
    }
}
