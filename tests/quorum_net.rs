//! The quorum driver over real TCP: several nodes in this one process, each on its own glommio
//! executor thread, talking over 127.0.0.1 (ports 20100-20199 of this suite's block), storing
//! on DMA files in temp dirs. Covers election, replication, fail-over after an executor is
//! dropped, a learner catching up from a snapshot, refused mis-configured nodes, and RPC.
//! Bounds are loose (seconds); the figures measured are printed.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::rc::Rc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::{channel, Sender};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use bytes::Bytes;
use futures::FutureExt;
use shardlog::io::dma::DmaFileSystem;
use shardlog::quorum::{
    DriverConfig, NetConfig, QuorumDriver, QuorumRole, QuorumStatus, StateMachine, TcpTransport,
    Transport,
};

type Log = Arc<Mutex<Vec<Vec<u8>>>>;

/// The test's state machine: the list of applied payloads.
struct ListMachine(Log);

impl StateMachine for ListMachine {
    fn apply(&mut self, _index: u64, data: &[u8]) -> Result<(), String> {
        self.0.lock().unwrap().push(data.to_vec());
        Ok(())
    }
    fn restore(&mut self, _index: u64, data: &[u8]) -> Result<(), String> {
        let mut out = Vec::new();
        let mut rest = data;
        while rest.len() >= 4 {
            let len = u32::from_be_bytes(rest[..4].try_into().unwrap()) as usize;
            let item = rest.get(4..4 + len).ok_or("truncated")?;
            out.push(item.to_vec());
            rest = &rest[4 + len..];
        }
        *self.0.lock().unwrap() = out;
        Ok(())
    }
    fn snapshot(&self) -> Vec<u8> {
        let mut b = Vec::new();
        for item in self.0.lock().unwrap().iter() {
            b.extend_from_slice(&(item.len() as u32).to_be_bytes());
            b.extend_from_slice(item);
        }
        b
    }
}

type Reply<T> = Sender<Result<T, String>>;

enum Cmd {
    Propose(Vec<u8>, Reply<u64>),
    AddLearner(u64, Reply<()>),
    Call(u64, Vec<u8>, u64, Reply<Vec<u8>>),
    /// `n` sequential proposals, timed on the executor: (p50, max) in µs.
    ProposeBench(usize, Reply<(u64, u64)>),
    /// `n` sequential calls to a node, timed on the executor: (p50, max) in µs.
    Bench(u64, usize, Reply<(u64, u64)>),
    /// Shuts the node's driver and transport down and returns from the executor's main
    /// future: the node stops answering at once, its sockets close, its executor ends.
    Drop,
}

struct Node {
    id: u64,
    tx: Sender<Cmd>,
    status: Arc<Mutex<Option<QuorumStatus>>>,
    log: Log,
    refused: Arc<AtomicU64>,
    restored: Arc<AtomicU64>,
    thread: Option<JoinHandle<()>>,
    _dir: Option<tempfile::TempDir>,
}

struct Spec {
    id: u64,
    cluster: &'static str,
    voters: BTreeMap<u64, SocketAddr>,
    listen: Option<SocketAddr>,
    snapshot_every: u64,
    /// Restart on this data dir (`None`: a fresh temp dir).
    dir: Option<tempfile::TempDir>,
}

fn addr(port: u16) -> SocketAddr {
    SocketAddr::from(([127, 0, 0, 1], port))
}

fn voters(ports: &[u16]) -> BTreeMap<u64, SocketAddr> {
    ports.iter().enumerate().map(|(i, p)| (i as u64 + 1, addr(*p))).collect()
}

fn spawn(spec: Spec) -> Node {
    let dir = match spec.dir {
        Some(d) => d,
        None => tempfile::tempdir().unwrap(),
    };
    let path: PathBuf = dir.path().to_path_buf();
    let (tx, rx) = channel::<Cmd>();
    let status = Arc::new(Mutex::new(None));
    let log: Log = Arc::default();
    let refused = Arc::new(AtomicU64::new(0));
    let restored = Arc::new(AtomicU64::new(0));
    let (st, lg, rf, rs) = (status.clone(), log.clone(), refused.clone(), restored.clone());
    let id = spec.id;
    let _ = shardlog::io::raise_memlock_limit(512 * 1024 * 1024);
    let (cluster, voters, listen, snapshot_every) =
        (spec.cluster, spec.voters, spec.listen, spec.snapshot_every);
    let thread = std::thread::spawn(move || {
        let ex = glommio::LocalExecutorBuilder::default().make().expect("executor");
        ex.run(async move {
            shardlog::io::probe_data_dir(&path).await.expect("probe");
            let net = NetConfig {
                cluster_id: cluster.to_string(),
                node_id: id,
                listen,
                voters: voters.clone(),
                tls: None,
            };
            let transport = TcpTransport::start(net).expect("transport");
            let mut cfg =
                DriverConfig::new(id, voters.keys().copied().collect(), path.join("quorum"));
            cfg.snapshot_every_entries = snapshot_every;
            cfg.jitter_seed = Some(id);
            let dyn_t: Rc<dyn Transport> = Rc::new(transport.clone());
            let handle = QuorumDriver::start(cfg, DmaFileSystem, ListMachine(lg), dyn_t)
                .await
                .expect("driver");
            handle.set_rpc_handler(Rc::new(|from, body: Bytes| {
                async move {
                    if body.as_ref() == b"sleep" {
                        glommio::timer::sleep(Duration::from_secs(3)).await;
                    }
                    let mut v = format!("{from}:").into_bytes();
                    v.extend_from_slice(&body);
                    Bytes::from(v)
                }
                .boxed_local()
            }));
            loop {
                while let Ok(cmd) = rx.try_recv() {
                    let h = handle.clone();
                    match cmd {
                        Cmd::Drop => {
                            // glommio leaks detached tasks (and their sockets) when the
                            // executor's main future returns, so stop them first.
                            handle.shutdown();
                            glommio::timer::sleep(Duration::from_millis(50)).await;
                            return;
                        }
                        Cmd::Propose(d, reply) => {
                            glommio::spawn_local(async move {
                                let r = h.propose(d).await;
                                let _ = reply.send(r.map_err(|e| format!("{e:?}")));
                            })
                            .detach();
                        }
                        Cmd::AddLearner(l, reply) => {
                            glommio::spawn_local(async move {
                                let r = h.add_learner(l).await;
                                let _ = reply.send(r.map_err(|e| format!("{e:?}")));
                            })
                            .detach();
                        }
                        Cmd::ProposeBench(n, reply) => {
                            glommio::spawn_local(async move {
                                let mut us = Vec::with_capacity(n);
                                for i in 0..n {
                                    let t = Instant::now();
                                    if let Err(e) = h.propose(format!("p{i}").into_bytes()).await {
                                        let _ = reply.send(Err(format!("{e:?}")));
                                        return;
                                    }
                                    us.push(t.elapsed().as_micros() as u64);
                                }
                                us.sort_unstable();
                                let _ = reply.send(Ok((us[n / 2], us[n - 1])));
                            })
                            .detach();
                        }
                        Cmd::Bench(to, n, reply) => {
                            glommio::spawn_local(async move {
                                let mut us = Vec::with_capacity(n);
                                for _ in 0..n {
                                    let t = Instant::now();
                                    if let Err(e) = h.call(to, Bytes::from_static(b"x"), 1000).await
                                    {
                                        let _ = reply.send(Err(format!("{e:?}")));
                                        return;
                                    }
                                    us.push(t.elapsed().as_micros() as u64);
                                }
                                us.sort_unstable();
                                let _ = reply.send(Ok((us[n / 2], us[n - 1])));
                            })
                            .detach();
                        }
                        Cmd::Call(to, body, t, reply) => {
                            glommio::spawn_local(async move {
                                let r = h.call(to, Bytes::from(body), t).await;
                                let _ =
                                    reply.send(r.map(|b| b.to_vec()).map_err(|e| format!("{e:?}")));
                            })
                            .detach();
                        }
                    }
                }
                *st.lock().unwrap() = Some(handle.status());
                rf.store(transport.counters().refused.get(), Ordering::Relaxed);
                rs.store(handle.counters().snapshots_restored.get(), Ordering::Relaxed);
                glommio::timer::sleep(Duration::from_millis(5)).await;
            }
        });
    });
    Node { id, tx, status, log, refused, restored, thread: Some(thread), _dir: Some(dir) }
}

impl Node {
    fn status(&self) -> Option<QuorumStatus> {
        self.status.lock().unwrap().clone()
    }
    fn log(&self) -> Vec<Vec<u8>> {
        self.log.lock().unwrap().clone()
    }
    fn ask<T>(&self, make: impl FnOnce(Reply<T>) -> Cmd) -> Result<T, String> {
        let (tx, rx) = channel();
        self.tx.send(make(tx)).unwrap();
        rx.recv_timeout(Duration::from_secs(20)).expect("no answer from node")
    }
    fn propose(&self, d: &[u8]) -> Result<u64, String> {
        self.ask(|r| Cmd::Propose(d.to_vec(), r))
    }
    fn kill(&mut self) {
        let _ = self.tx.send(Cmd::Drop);
        if let Some(t) = self.thread.take() {
            // A node thread that panicked already failed the test; do not panic again here.
            let _ = t.join();
        }
    }
}

impl Drop for Node {
    fn drop(&mut self) {
        self.kill();
    }
}

fn wait_for<T>(what: &str, limit: Duration, mut f: impl FnMut() -> Option<T>) -> T {
    let start = Instant::now();
    loop {
        if let Some(v) = f() {
            return v;
        }
        assert!(start.elapsed() < limit, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// The id of a ready leader every live node agrees on.
fn agreed_leader(nodes: &[&Node]) -> Option<u64> {
    let st: Vec<QuorumStatus> = nodes.iter().map(|n| n.status()).collect::<Option<_>>()?;
    let leader = st.iter().find(|s| s.role == QuorumRole::Leader && s.leader_ready)?;
    st.iter().all(|s| s.leader_id == Some(leader.node_id)).then_some(leader.node_id)
}

fn three(ports: [u16; 3], snapshot_every: u64) -> Vec<Node> {
    let v = voters(&ports);
    (1..=3)
        .map(|id| {
            spawn(Spec {
                id,
                cluster: "qn",
                voters: v.clone(),
                listen: Some(v[&id]),
                snapshot_every,
                dir: None,
            })
        })
        .collect()
}

#[test]
fn three_voters_elect_replicate_and_fail_over() {
    let mut nodes = three([20101, 20102, 20103], 10_000);
    let t0 = Instant::now();
    let refs: Vec<&Node> = nodes.iter().collect();
    let leader = wait_for("a leader", Duration::from_secs(15), || agreed_leader(&refs));
    println!("first election: {:?}", t0.elapsed());
    let li = usize::try_from(leader - 1).unwrap();
    let t1 = Instant::now();
    let index = nodes[li].propose(b"a").expect("propose on the leader");
    println!("propose applied on the leader: {:?} (index {index})", t1.elapsed());
    let follower = &nodes[(li + 1) % 3];
    assert!(matches!(follower.propose(b"x"), Err(e) if e.contains("NotLeader")));
    wait_for("'a' on all three", Duration::from_secs(10), || {
        nodes.iter().all(|n| n.log() == vec![b"a".to_vec()]).then_some(())
    });
    // The status is published by the node's loop: wait for it to show the followers' acks.
    wait_for("the leader's view of its followers", Duration::from_secs(5), || {
        let st = nodes[li].status().unwrap();
        assert_eq!(st.voters, vec![1, 2, 3]);
        st.replicas
            .iter()
            .all(|r| r.log_end_offset >= index && r.last_fetch_ms > 0 && r.last_caught_up_ms > 0)
            .then_some(())
    });

    let t2 = Instant::now();
    nodes[li].kill();
    let rest: Vec<&Node> = nodes.iter().filter(|n| n.id != leader).collect();
    let new_leader = wait_for("a new leader", Duration::from_secs(15), || agreed_leader(&rest));
    println!("fail-over: {:?} (leader {leader} -> {new_leader})", t2.elapsed());
    assert_ne!(new_leader, leader);
    let n = rest.iter().find(|n| n.id == new_leader).unwrap();
    n.propose(b"b").expect("propose on the new leader");
    wait_for("'b' on both survivors", Duration::from_secs(10), || {
        rest.iter().all(|n| n.log() == vec![b"a".to_vec(), b"b".to_vec()]).then_some(())
    });
    // A second node cannot take a live node's controller address (no SO_REUSEPORT).
    let v = voters(&[20101, 20102, 20103]);
    assert!(std::net::TcpListener::bind(v[&new_leader]).is_err());

    // The old leader comes back on its own data dir and port, and catches up.
    let old_dir = nodes[li]._dir.take();
    let t3 = Instant::now();
    nodes[li] = spawn(Spec {
        id: leader,
        cluster: "qn",
        voters: v.clone(),
        listen: Some(v[&leader]),
        snapshot_every: 10_000,
        dir: old_dir,
    });
    wait_for("the restarted node caught up", Duration::from_secs(15), || {
        let st = nodes[li].status()?;
        let caught_up = nodes[li].log() == vec![b"a".to_vec(), b"b".to_vec()];
        (caught_up && st.leader_id == Some(new_leader)).then_some(())
    });
    println!("restarted node caught up in {:?}", t3.elapsed());
}

#[test]
fn learner_catches_up_from_a_snapshot() {
    let nodes = three([20111, 20112, 20113], 5);
    let refs: Vec<&Node> = nodes.iter().collect();
    let leader = wait_for("a leader", Duration::from_secs(15), || agreed_leader(&refs));
    let l = &nodes[usize::try_from(leader - 1).unwrap()];
    let want: Vec<Vec<u8>> = (0..20).map(|i| format!("e{i}").into_bytes()).collect();
    for d in &want {
        l.propose(d).expect("propose");
    }
    // Node 4: not a voter, no listen address; it dials the voters.
    let learner = spawn(Spec {
        id: 4,
        cluster: "qn",
        voters: voters(&[20111, 20112, 20113]),
        listen: None,
        snapshot_every: 5,
        dir: None,
    });
    let t = Instant::now();
    l.ask(|r| Cmd::AddLearner(4, r)).expect("add learner");
    l.ask(|r| Cmd::AddLearner(4, r)).expect("add learner again (idempotent)");
    wait_for("the learner caught up", Duration::from_secs(15), || {
        (learner.log() == want).then_some(())
    });
    println!("learner caught up in {:?}", t.elapsed());
    wait_for("the learner's status", Duration::from_secs(5), || {
        let st = learner.status().unwrap();
        let used_snapshot = learner.restored.load(Ordering::Relaxed) >= 1;
        (used_snapshot && st.role == QuorumRole::Learner && st.learners == vec![4]).then_some(())
    });
    l.propose(b"after").expect("propose");
    wait_for("the learner follows", Duration::from_secs(10), || {
        (learner.log().last().map(Vec::as_slice) == Some(b"after".as_slice())).then_some(())
    });
    wait_for("the leader's view of the learner", Duration::from_secs(5), || {
        let st = l.status().unwrap();
        st.replicas.iter().any(|r| r.id == 4 && r.last_fetch_ms > 0).then_some(())
    });
}

#[test]
fn misconfigured_nodes_are_refused() {
    let ports = [20121, 20122];
    let good = voters(&ports);
    let nodes: Vec<Node> = (1..=2)
        .map(|id| {
            spawn(Spec {
                id,
                cluster: "qn",
                voters: good.clone(),
                listen: Some(good[&id]),
                snapshot_every: 100,
                dir: None,
            })
        })
        .collect();
    // Wrong cluster id, same voters.
    let stranger = spawn(Spec {
        id: 9,
        cluster: "other",
        voters: good.clone(),
        listen: None,
        snapshot_every: 100,
        dir: None,
    });
    // Right cluster id, a voter set with one more member.
    let mut more = good.clone();
    more.insert(3, addr(20123));
    let odd = spawn(Spec {
        id: 8,
        cluster: "qn",
        voters: more,
        listen: None,
        snapshot_every: 100,
        dir: None,
    });
    wait_for("refusals on both sides", Duration::from_secs(10), || {
        let theirs =
            stranger.refused.load(Ordering::Relaxed) > 0 && odd.refused.load(Ordering::Relaxed) > 0;
        let ours = nodes.iter().map(|n| n.refused.load(Ordering::Relaxed)).sum::<u64>() >= 2;
        (theirs && ours).then_some(())
    });
    let refs: Vec<&Node> = nodes.iter().collect();
    wait_for("a leader among the good nodes", Duration::from_secs(15), || agreed_leader(&refs));

    // Raw sockets: a wrong hello gets the node's own hello back, then the connection
    // closes; garbage closes it at once. The node keeps serving either way.
    use shardlog::quorum::frame::{self, Frame, Hello};
    use std::io::{Read, Write};
    let raw = |bytes: &[u8]| -> Vec<u8> {
        let mut s = std::net::TcpStream::connect(good[&1]).unwrap();
        s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
        s.write_all(bytes).unwrap();
        let mut got = Vec::new();
        let _ = s.read_to_end(&mut got); // ends at the node's close
        got
    };
    let wrong = Hello { cluster_id: "nope".into(), node_id: 5, voters: vec![] };
    let got = raw(&frame::encode(&Frame::Hello(wrong)).unwrap());
    match frame::decode(&got) {
        Ok(Some((Frame::Hello(h), used))) => {
            assert_eq!((h.cluster_id.as_str(), h.node_id, used), ("qn", 1, got.len()));
        }
        other => panic!("expected the node's hello, got {other:?}"),
    }
    assert!(raw(b"GET / HTTP/1.1\r\n\r\n").is_empty());
    let leader = wait_for("a leader", Duration::from_secs(15), || agreed_leader(&refs));
    let li = usize::try_from(leader - 1).unwrap();
    nodes[li].propose(b"still serving").expect("propose after bad peers");
    for n in [&stranger, &odd] {
        assert_eq!(n.status().unwrap().leader_id, None, "node {} joined", n.id);
        assert!(n.log().is_empty());
    }
}

#[test]
fn rpc_round_trip_timeout_and_unreachable() {
    let ports = [20131, 20132];
    let v = voters(&ports);
    let nodes: Vec<Node> = (1..=2)
        .map(|id| {
            spawn(Spec {
                id,
                cluster: "qn",
                voters: v.clone(),
                listen: Some(v[&id]),
                snapshot_every: 100,
                dir: None,
            })
        })
        .collect();
    let answer = wait_for("an RPC answer", Duration::from_secs(10), || {
        nodes[0].ask(|r| Cmd::Call(2, b"hi".to_vec(), 1000, r)).ok()
    });
    assert_eq!(answer, b"1:hi");
    let t = Instant::now();
    let e = nodes[1].ask(|r| Cmd::Call(1, b"sleep".to_vec(), 300, r)).unwrap_err();
    assert!(e.contains("Timeout"), "{e}");
    println!("timed-out call returned after {:?}", t.elapsed());
    assert!(t.elapsed() < Duration::from_secs(2));
    let e = nodes[0].ask(|r| Cmd::Call(7, b"hi".to_vec(), 300, r)).unwrap_err();
    assert!(e.contains("Unreachable"), "{e}");
    let (p50, max) = nodes[0].ask(|r| Cmd::Bench(2, 1000, r)).unwrap();
    println!("1000 sequential RPC round trips over loopback: p50 {p50} µs, max {max} µs");
    let refs: Vec<&Node> = nodes.iter().collect();
    let leader = wait_for("a leader", Duration::from_secs(15), || agreed_leader(&refs));
    let l = &nodes[usize::try_from(leader - 1).unwrap()];
    let (p50, max) = l.ask(|r| Cmd::ProposeBench(200, r)).unwrap();
    println!("200 sequential proposals (2 voters, DMA fsync): p50 {p50} µs, max {max} µs");
}
