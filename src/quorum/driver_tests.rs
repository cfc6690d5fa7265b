//! The driver without sockets: three drivers on one executor over a [`LocalNet`], on the
//! in-memory file system.

use std::cell::RefCell;
use std::path::PathBuf;
use std::rc::Rc;
use std::time::{Duration, Instant};

use super::driver::{DriverConfig, ProposeError, QuorumDriver, QuorumHandle, StateMachine};
use super::transport::{LocalNet, Transport};
use crate::io::mem::MemFileSystem;

type Log = Rc<RefCell<Vec<Vec<u8>>>>;

struct Machine {
    log: Log,
    /// Applying an entry with this payload fails.
    poison: &'static [u8],
}

impl StateMachine for Machine {
    fn apply(&mut self, _index: u64, data: &[u8]) -> Result<(), String> {
        if data == self.poison {
            return Err("poisoned".to_string());
        }
        self.log.borrow_mut().push(data.to_vec());
        Ok(())
    }
    fn restore(&mut self, _index: u64, data: &[u8]) -> Result<(), String> {
        *self.log.borrow_mut() =
            data.split(|b| *b == b',').filter(|s| !s.is_empty()).map(<[u8]>::to_vec).collect();
        Ok(())
    }
    fn snapshot(&self) -> Vec<u8> {
        self.log.borrow().join(&b","[..])
    }
}

async fn start(net: &LocalNet, id: u64) -> (QuorumHandle, Log) {
    let mut cfg = DriverConfig::new(id, vec![1, 2, 3], PathBuf::from(format!("/q{id}")));
    cfg.tick_ms = 10;
    cfg.jitter_seed = Some(id);
    cfg.snapshot_every_entries = 4;
    let log = Log::default();
    let t: Rc<dyn Transport> = net.endpoint(id);
    let sm = Machine { log: log.clone(), poison: b"poison" };
    let h = QuorumDriver::start(cfg, MemFileSystem::new(), sm, t).await.unwrap();
    (h, log)
}

async fn leader(nodes: &[&QuorumHandle]) -> usize {
    let start = Instant::now();
    loop {
        if let Some(i) = nodes.iter().position(|h| h.status().leader_ready) {
            return i;
        }
        assert!(start.elapsed() < Duration::from_secs(10), "no leader");
        glommio::timer::sleep(Duration::from_millis(10)).await;
    }
}

#[test]
fn elects_replicates_fails_over_and_stops_applying_on_error() {
    crate::io::run_local(async {
        let net = LocalNet::new();
        let mut nodes = Vec::new();
        for id in 1..=3 {
            nodes.push(start(&net, id).await);
        }
        let hs: Vec<&QuorumHandle> = nodes.iter().map(|n| &n.0).collect();
        let seen = hs[0].changed().version();
        let l = leader(&hs).await;
        assert_ne!(hs[0].changed().version(), seen, "an election changes the status");
        let other = (l + 1) % 3;
        let err = hs[other].propose(b"x".to_vec()).await.unwrap_err();
        assert!(matches!(err, ProposeError::NotLeader { leader: Some(_) }), "{err:?}");
        for i in 0..10 {
            hs[l].propose(format!("e{i}").into_bytes()).await.unwrap();
        }
        let want: Vec<Vec<u8>> = (0..10).map(|i| format!("e{i}").into_bytes()).collect();
        for _ in 0..200 {
            if nodes.iter().all(|n| *n.1.borrow() == want) {
                break;
            }
            glommio::timer::sleep(Duration::from_millis(10)).await;
        }
        assert!(nodes.iter().all(|n| *n.1.borrow() == want));
        assert!(hs[l].counters().snapshots_taken.get() >= 2);
        let m = hs[l].metrics();
        assert_eq!(m.role, super::driver::QuorumRole::Leader);
        assert_eq!(m.lag_by_voter.len(), 3, "{m:?}");
        assert!(m.applied_index >= 11 && m.messages_sent > 0, "{m:?}");

        // Cut the leader off: the other two elect one of theirs and go on.
        net.set_cut(l as u64 + 1, true);
        let rest: Vec<&QuorumHandle> = (0..3).filter(|i| *i != l).map(|i| &nodes[i].0).collect();
        let start = Instant::now();
        let nl = loop {
            if let Some(h) = rest.iter().find(|h| h.status().leader_ready) {
                break *h;
            }
            assert!(start.elapsed() < Duration::from_secs(10), "no new leader");
            glommio::timer::sleep(Duration::from_millis(10)).await;
        };
        nl.propose(b"after".to_vec()).await.unwrap();
        // The old leader cannot commit alone: its proposal fails, it never hangs.
        let r = hs[l].propose(b"lost".to_vec()).await;
        assert!(r.is_err(), "{r:?}");
        net.set_cut(l as u64 + 1, false);

        // An entry the state machine refuses: applying stops, nothing panics, and the
        // state stays what it was.
        let idx = nl.status().applied_index;
        let r = nl.propose(b"poison".to_vec()).await;
        assert!(r.is_err(), "{r:?}");
        assert_eq!(nl.status().applied_index, idx);
        assert!(!nl.status().leader_ready);
        for n in &nodes {
            n.0.shutdown();
        }
    });
}

#[test]
fn bootstrap_data_and_restart_restore_the_state() {
    crate::io::run_local(async {
        let fs = MemFileSystem::new();
        let open = |fs: MemFileSystem| async move {
            let net = LocalNet::new();
            let mut cfg = DriverConfig::new(1, vec![1], PathBuf::from("/q"));
            cfg.tick_ms = 5;
            cfg.snapshot_every_entries = 3;
            cfg.bootstrap_data = bytes::Bytes::from_static(b"boot");
            let log = Log::default();
            let sm = Machine { log: log.clone(), poison: b"poison" };
            let t: Rc<dyn Transport> = net.endpoint(1);
            let h = QuorumDriver::start(cfg, fs, sm, t).await.unwrap();
            (h, log)
        };
        let t = Instant::now();
        let (h, log) = open(fs.clone()).await;
        assert_eq!(*log.borrow(), vec![b"boot".to_vec()], "bootstrap data restored at start");
        leader(&[&h]).await;
        // A lone voter campaigns at once instead of after an election timeout (50 ms here).
        println!("single voter ready after {:?}", t.elapsed());
        let mut want = vec![b"boot".to_vec()];
        for i in 0..5 {
            let d = format!("e{i}").into_bytes();
            h.propose(d.clone()).await.unwrap();
            want.push(d);
        }
        assert_eq!(*log.borrow(), want);
        h.shutdown();
        glommio::timer::sleep(Duration::from_millis(20)).await;
        // Restart from the same disk: the snapshot (taken at 3 entries) plus the log after it.
        let (h2, log2) = open(fs.clone()).await;
        leader(&[&h2]).await;
        assert_eq!(*log2.borrow(), want);
        let st = h2.status();
        assert!(st.applied_index >= 6, "{st:?}");
        assert_eq!(h2.counters().snapshots_restored.get(), 0);
        h2.propose(b"more".to_vec()).await.unwrap();
        assert_eq!(log2.borrow().last().map(Vec::as_slice), Some(&b"more"[..]));
        h2.shutdown();
    });
}
