//! Every transition and error of the coordinator, then a property test against a small model
//! (a sequence of random requests, each transition persisted or abandoned).

use proptest::prelude::*;

use super::*;

const MAX_TIMEOUT: i32 = 60_000;

fn p(t: &str, n: i32) -> (String, i32) {
    (t.to_string(), n)
}

/// Runs InitProducerId and applies its transition; returns (pid, epoch).
fn init(c: &mut Coordinator, id: &str, pid: i64, now: i64) -> (i64, i16) {
    match c.init_producer_id(id, 10_000, Some(pid), None, now).expect("init") {
        InitOutcome::Ready(t) => {
            c.apply(&t);
            (t.next.producer_id, t.next.producer_epoch)
        }
        InitOutcome::AbortFirst(_) => panic!("no open transaction expected"),
    }
}

fn persist(c: &mut Coordinator, t: Option<Transition>) -> Option<Then> {
    t.map(|t| {
        c.apply(&t);
        t.then
    })
}

#[test]
fn a_commit_goes_through_every_state() {
    let mut c = Coordinator::new(MAX_TIMEOUT);
    assert!(c.needs_producer_id("tx"));
    let (pid, epoch) = init(&mut c, "tx", 100, 1);
    assert_eq!((pid, epoch), (100, 0));
    assert_eq!(c.get("tx").map(|m| m.state), Some(TxnState::Empty));
    let t = c.add_partitions("tx", pid, epoch, &[p("a", 0), p("b", 1)], 2).unwrap();
    assert_eq!(persist(&mut c, t), Some(Then::Reply));
    let m = c.get("tx").unwrap();
    assert_eq!((m.state, m.start_ms, m.partitions.len()), (TxnState::Ongoing, 2, 2));
    // Adding what is already there changes nothing.
    assert_eq!(c.add_partitions("tx", pid, epoch, &[p("a", 0)], 3), Ok(None));
    let t = c.end_txn("tx", pid, epoch, true, 4).unwrap();
    assert_eq!(persist(&mut c, t), Some(Then::WriteMarkers { commit: true }));
    assert_eq!(c.get("tx").unwrap().state, TxnState::PrepareCommit);
    assert_eq!(c.incomplete(), vec![("tx".to_string(), true)]);
    // A retry while markers are written.
    assert_eq!(c.end_txn("tx", pid, epoch, true, 5), Err(TxnError::ConcurrentTransactions));
    assert_eq!(
        c.add_partitions("tx", pid, epoch, &[p("a", 0)], 5),
        Err(TxnError::ConcurrentTransactions)
    );
    let t = c.complete("tx", 6);
    assert_eq!(persist(&mut c, t), Some(Then::Reply));
    let m = c.get("tx").unwrap();
    assert_eq!((m.state, m.partitions.len()), (TxnState::CompleteCommit, 0));
    // A retried commit after completion succeeds; an abort is a state error.
    assert_eq!(c.end_txn("tx", pid, epoch, true, 7), Ok(None));
    assert_eq!(c.end_txn("tx", pid, epoch, false, 7), Err(TxnError::InvalidTxnState));
    // The next transaction starts afresh.
    let t = c.add_partitions("tx", pid, epoch, &[p("c", 0)], 8).unwrap();
    persist(&mut c, t);
    let m = c.get("tx").unwrap();
    assert_eq!(
        (m.start_ms, m.partitions.iter().cloned().collect::<Vec<_>>()),
        (8, vec![p("c", 0)])
    );
}

#[test]
fn errors_of_each_request() {
    let mut c = Coordinator::new(MAX_TIMEOUT);
    assert_eq!(
        c.init_producer_id("tx", MAX_TIMEOUT + 1, Some(1), None, 0),
        Err(TxnError::InvalidTransactionTimeout)
    );
    assert_eq!(
        c.init_producer_id("tx", 0, Some(1), None, 0),
        Err(TxnError::InvalidTransactionTimeout)
    );
    assert_eq!(
        c.add_partitions("tx", 1, 0, &[p("a", 0)], 0),
        Err(TxnError::InvalidProducerIdMapping)
    );
    let (pid, epoch) = init(&mut c, "tx", 1, 0);
    assert_eq!(
        c.add_partitions("tx", pid + 1, epoch, &[p("a", 0)], 0),
        Err(TxnError::InvalidProducerIdMapping)
    );
    assert_eq!(
        c.add_partitions("tx", pid, epoch + 1, &[p("a", 0)], 0),
        Err(TxnError::ProducerFenced)
    );
    assert_eq!(c.end_txn("tx", pid, epoch, true, 0), Err(TxnError::InvalidTxnState));
    assert_eq!(c.end_txn("tx", pid, epoch, false, 0), Err(TxnError::InvalidTxnState));
    // A transition in flight blocks the next request.
    let t = c.add_partitions("tx", pid, epoch, &[p("a", 0)], 0).unwrap().unwrap();
    assert_eq!(c.end_txn("tx", pid, epoch, true, 0), Err(TxnError::ConcurrentTransactions));
    assert_eq!(
        c.init_producer_id("tx", 1000, None, None, 0),
        Err(TxnError::ConcurrentTransactions)
    );
    c.abandon(&t);
    assert_eq!(c.get("tx").unwrap().state, TxnState::Empty);
    // A new id whose first record fails leaves nothing behind.
    let InitOutcome::Ready(t) = c.init_producer_id("new", 1000, Some(9), None, 0).unwrap() else {
        panic!()
    };
    c.abandon(&t);
    assert!(c.get("new").is_none());
    // Without a fresh producer id a new id cannot start.
    assert_eq!(
        c.init_producer_id("other", 1000, None, None, 0),
        Err(TxnError::CoordinatorNotAvailable)
    );
}

#[test]
fn a_new_instance_fences_the_old_and_aborts_its_transaction() {
    let mut c = Coordinator::new(MAX_TIMEOUT);
    let (pid, e0) = init(&mut c, "tx", 7, 0);
    let t = c.add_partitions("tx", pid, e0, &[p("a", 0)], 1).unwrap();
    persist(&mut c, t);
    let InitOutcome::AbortFirst(t) = c.init_producer_id("tx", 1000, None, None, 2).unwrap() else {
        panic!("abort expected")
    };
    assert_eq!((t.next.state, t.next.producer_epoch), (TxnState::PrepareAbort, e0 + 1));
    assert_eq!(t.then, Then::WriteMarkers { commit: false });
    c.apply(&t);
    // The old instance is fenced; the new one retries until the abort completes.
    assert_eq!(c.end_txn("tx", pid, e0, true, 3), Err(TxnError::ProducerFenced));
    assert_eq!(
        c.init_producer_id("tx", 1000, None, None, 3),
        Err(TxnError::ConcurrentTransactions)
    );
    let t = c.complete("tx", 4);
    persist(&mut c, t);
    let (pid2, e2) = init(&mut c, "tx", 99, 5);
    assert_eq!((pid2, e2), (pid, e0 + 2));
    assert_eq!(c.add_partitions("tx", pid, e0 + 1, &[p("a", 0)], 6), Err(TxnError::ProducerFenced));
    // KIP-360: a stranger's epoch is fenced, the current one may bump.
    assert_eq!(
        c.init_producer_id("tx", 1000, None, Some((pid, 0)), 7),
        Err(TxnError::ProducerFenced)
    );
    assert!(c.init_producer_id("tx", 1000, None, Some((pid, e2)), 7).is_ok());
}

#[test]
fn exhausted_epochs_take_a_new_producer_id() {
    let mut c = Coordinator::new(MAX_TIMEOUT);
    init(&mut c, "tx", 1, 0);
    let mut m = c.get("tx").unwrap().clone();
    m.producer_epoch = i16::MAX - 1;
    c.replay(crate::txn::records::TxnRecord { transactional_id: "tx".into(), meta: Some(m) });
    assert!(c.needs_producer_id("tx"));
    assert_eq!(init(&mut c, "tx", 2, 1), (2, 0));
}

#[test]
fn timeouts_abort_with_a_bumped_epoch_and_idle_ids_expire() {
    let mut c = Coordinator::new(MAX_TIMEOUT);
    let (pid, e) = init(&mut c, "tx", 1, 0);
    let t = c.add_partitions("tx", pid, e, &[p("a", 0)], 100).unwrap();
    persist(&mut c, t);
    assert!(c.timed_out(100 + 9_999).is_empty());
    let due = c.timed_out(100 + 10_000);
    assert_eq!(due.len(), 1);
    assert_eq!((due[0].next.state, due[0].next.producer_epoch), (TxnState::PrepareAbort, e + 1));
    assert!(c.timed_out(200_000).is_empty(), "pending transitions are not retried");
    c.apply(&due[0]);
    assert_eq!(c.end_txn("tx", pid, e, false, 1), Err(TxnError::ProducerFenced));
    let t = c.complete("tx", 20_000);
    persist(&mut c, t);
    assert!(c.expired(20_000 + 999, 1000).is_empty());
    assert_eq!(c.expired(20_000 + 1000, 1000), vec!["tx".to_string()]);
    assert_eq!(
        c.init_producer_id("tx", 1000, None, None, 0),
        Err(TxnError::ConcurrentTransactions)
    );
    c.remove("tx");
    assert!(c.get("tx").is_none());
}

#[test]
fn replay_keeps_the_latest_record_and_finds_incomplete_transactions() {
    let mut c = Coordinator::new(MAX_TIMEOUT);
    let (pid, e) = init(&mut c, "a", 1, 0);
    let t = c.add_partitions("a", pid, e, &[p("t", 0)], 1).unwrap();
    persist(&mut c, t);
    let t = c.end_txn("a", pid, e, false, 2).unwrap().unwrap();
    let mut r = Coordinator::new(MAX_TIMEOUT);
    for rec in [c.get("a").unwrap().clone(), t.next.clone()] {
        r.replay(crate::txn::records::TxnRecord { transactional_id: "a".into(), meta: Some(rec) });
    }
    assert_eq!(r.incomplete(), vec![("a".to_string(), false)]);
    assert_eq!(r.get("a").unwrap().partitions.len(), 1);
    r.replay(crate::txn::records::TxnRecord { transactional_id: "a".into(), meta: None });
    assert!(r.get("a").is_none());
}

#[derive(Clone, Debug)]
enum Op {
    Init,
    Add(u8),
    End(bool),
    Complete,
    Tick(u16),
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        Just(Op::Init),
        (0u8..3).prop_map(Op::Add),
        any::<bool>().prop_map(Op::End),
        Just(Op::Complete),
        (0u16..20_000).prop_map(Op::Tick),
    ]
}

proptest! {
    /// Against a model: the epoch never goes down, a fenced epoch stays fenced, the state
    /// follows the diagram, and an abandoned transition leaves the state as it was.
    #[test]
    fn random_requests_keep_the_invariants(ops in prop::collection::vec((op(), any::<bool>()), 1..60)) {
        let mut c = Coordinator::new(MAX_TIMEOUT);
        let mut now = 0i64;
        let mut next_pid = 1;
        let mut current: Option<(i64, i16)> = None;
        let mut fenced: Vec<(i64, i16)> = Vec::new();
        for (op, durable) in ops {
            now += 1;
            let before = c.get("tx").cloned();
            let transitions: Vec<Transition> = match op {
                Op::Init => {
                    let fresh = c.needs_producer_id("tx").then(|| { next_pid += 1; next_pid });
                    match c.init_producer_id("tx", 5_000, fresh, None, now) {
                        Ok(InitOutcome::Ready(t)) | Ok(InitOutcome::AbortFirst(t)) => vec![t],
                        Err(e) => {
                            prop_assert_eq!(e, TxnError::ConcurrentTransactions);
                            vec![]
                        }
                    }
                }
                Op::Add(n) => match current {
                    Some((pid, e)) => {
                        let r = c.add_partitions("tx", pid, e, &[p("t", i32::from(n))], now);
                        if fenced.contains(&(pid, e)) { prop_assert!(r.is_err()); }
                        r.ok().flatten().into_iter().collect()
                    }
                    None => vec![],
                },
                Op::End(commit) => match current {
                    Some((pid, e)) => {
                        let r = c.end_txn("tx", pid, e, commit, now);
                        if fenced.contains(&(pid, e)) { prop_assert!(r.is_err()); }
                        r.ok().flatten().into_iter().collect()
                    }
                    None => vec![],
                },
                Op::Complete => c.complete("tx", now).into_iter().collect(),
                Op::Tick(ms) => { now += i64::from(ms); c.timed_out(now) }
            };
            for t in transitions {
                if durable {
                    let old = c.get("tx").map(|m| (m.producer_id, m.producer_epoch));
                    if let Some(old) = old {
                        if old.0 == t.next.producer_id {
                            prop_assert!(t.next.producer_epoch >= old.1);
                        }
                        if (t.next.producer_id, t.next.producer_epoch) != old {
                            fenced.push(old);
                        }
                    }
                    c.apply(&t);
                    if matches!(op, Op::Init) && t.then == Then::Reply {
                        current = Some((t.next.producer_id, t.next.producer_epoch));
                    }
                } else {
                    c.abandon(&t);
                    let after = c.get("tx").cloned().map(|m| TxnMeta { pending: None, ..m });
                    let before = before.clone().map(|m| TxnMeta { pending: None, ..m });
                    prop_assert_eq!(after, before);
                }
            }
            if let Some(m) = c.get("tx") {
                prop_assert!(m.pending.is_none(), "no transition left in flight");
                let open = matches!(m.state, TxnState::Ongoing | TxnState::PrepareCommit | TxnState::PrepareAbort);
                prop_assert_eq!(open, !m.partitions.is_empty());
            }
        }
    }
}
