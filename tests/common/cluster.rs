//! A cluster of real `shardlog` processes on loopback for the multi-broker tests: each node
//! is formatted with one cluster id (`shardlog format`), then started with its own node id,
//! data dir, Kafka port (ephemeral), controller port (from the test's port block, since
//! every node must know the voters before it starts), one shard on a chosen core and no
//! spinning, so three nodes share this machine's two cores without starving each other.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use super::{Broker, Wire};

/// One node's fixed identity; its process comes and goes.
pub struct Node {
    pub id: i32,
    pub controller_port: u16,
    pub data_dir: PathBuf,
    /// Extra `serve` arguments (roles, shards).
    pub extra: Vec<String>,
    /// Extra environment of its next starts (e.g. `SHARDLOG_CRASH_AT`).
    pub env: Vec<(String, String)>,
    pub broker: Option<Broker>,
}

pub struct Cluster {
    pub cluster_id: String,
    /// `controller.quorum.voters`.
    pub voters: String,
    pub nodes: Vec<Node>,
    /// Extra `shardlog format` arguments of every node (e.g. `--add-scram ...`).
    pub format_extra: Vec<String>,
    _dir: tempfile::TempDir,
}

/// Runs `shardlog format` for `data_dir`.
pub fn format(data_dir: &Path, cluster_id: &str, node_id: i32) {
    format_with(data_dir, cluster_id, node_id, &[]);
}

/// Runs `shardlog format` for `data_dir` with `extra` arguments.
pub fn format_with(data_dir: &Path, cluster_id: &str, node_id: i32, extra: &[String]) {
    let out = Command::new(env!("CARGO_BIN_EXE_shardlog"))
        .args(["format", &format!("--cluster-id={cluster_id}"), "--node-id", &node_id.to_string()])
        .arg("--data-dir")
        .arg(data_dir)
        .args(extra)
        .output()
        .expect("run shardlog format");
    assert!(out.status.success(), "format failed: {}", String::from_utf8_lossy(&out.stderr));
}

/// A new random cluster id from `shardlog format --print-random-uuid`.
pub fn random_cluster_id() -> String {
    let out = Command::new(env!("CARGO_BIN_EXE_shardlog"))
        .args(["format", "--print-random-uuid"])
        .output()
        .expect("run shardlog format");
    String::from_utf8_lossy(&out.stdout).trim().to_string()
}

fn cores() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get())
}

impl Cluster {
    /// Formats and starts `voters` combined broker+controller nodes (ids 1..=voters) whose
    /// controller ports are `base_port + 100 * id`.
    pub fn start(voters: usize, base_port: u16) -> Cluster {
        Cluster::start_with(voters, base_port, &[])
    }

    /// As [`Cluster::start`], every node with `extra` `serve` arguments.
    pub fn start_with(voters: usize, base_port: u16, extra: &[&str]) -> Cluster {
        let mut cluster = Cluster::formatted(voters, base_port, extra);
        let all: Vec<usize> = (0..cluster.nodes.len()).collect();
        cluster.start_nodes(&all);
        cluster
    }

    /// As [`Cluster::start_with`], formatted but not started (a test may prepare a node's
    /// data dir first).
    pub fn formatted(voters: usize, base_port: u16, extra: &[&str]) -> Cluster {
        Cluster::formatted_with(voters, base_port, extra, &[])
    }

    /// As [`Cluster::formatted`], each node formatted with `format_extra` too.
    pub fn formatted_with(
        voters: usize,
        base_port: u16,
        extra: &[&str],
        format_extra: &[&str],
    ) -> Cluster {
        let ports: Vec<u16> = (1..=voters as u16).map(|id| base_port + 100 * id).collect();
        Cluster::formatted_at(&ports, extra, format_extra)
    }

    /// As [`Cluster::start_with`], node `i + 1`'s controller port `ports[i]` (a test whose
    /// port range is narrower than `base + 100 * id` allows).
    pub fn start_at(ports: &[u16], extra: &[&str]) -> Cluster {
        let mut cluster = Cluster::formatted_at(ports, extra, &[]);
        let all: Vec<usize> = (0..cluster.nodes.len()).collect();
        cluster.start_nodes(&all);
        cluster
    }

    fn formatted_at(ports: &[u16], extra: &[&str], format_extra: &[&str]) -> Cluster {
        let dir = tempfile::tempdir().expect("temp dir");
        let cluster_id = random_cluster_id();
        let ports: Vec<(i32, u16)> =
            ports.iter().enumerate().map(|(i, p)| (i as i32 + 1, *p)).collect();
        let voters_text: Vec<String> =
            ports.iter().map(|(id, port)| format!("{id}@127.0.0.1:{port}")).collect();
        let mut cluster = Cluster {
            cluster_id,
            voters: voters_text.join(","),
            nodes: Vec::new(),
            format_extra: format_extra.iter().map(|s| (*s).to_string()).collect(),
            _dir: dir,
        };
        for (id, port) in ports {
            cluster.add_node(id, port, extra);
        }
        cluster
    }

    /// Starts several nodes at once: a node of a cluster waits (bounded) for a quorum before
    /// it listens, and the quorum needs the others running.
    pub fn start_nodes(&mut self, which: &[usize]) {
        type Start = (usize, PathBuf, Vec<String>, Vec<(String, String)>);
        let args: Vec<Start> = which
            .iter()
            .map(|i| {
                let node = &self.nodes[*i];
                (*i, node.data_dir.clone(), self.args(*i), node.env.clone())
            })
            .collect();
        let started: Vec<(usize, Broker)> = std::thread::scope(|s| {
            let handles: Vec<_> = args
                .iter()
                .map(|(i, dir, a, env)| {
                    s.spawn(move || {
                        let refs: Vec<&str> = a.iter().map(String::as_str).collect();
                        let env: Vec<(&str, &str)> =
                            env.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
                        // A node given its listeners (`--listeners`) is started without
                        // the harness's `--listen 127.0.0.1:0`.
                        let listen: &[&str] = if refs.contains(&"--listeners") {
                            &[]
                        } else {
                            &["--listen", "127.0.0.1:0"]
                        };
                        (*i, Broker::start_listening(dir, listen, &refs, &env))
                    })
                })
                .collect();
            handles.into_iter().map(|h| h.join().expect("start thread")).collect()
        });
        for (i, b) in started {
            self.nodes[i].broker = Some(b);
        }
    }

    /// Adds (formats, does not start) a node.
    pub fn add_node(&mut self, id: i32, controller_port: u16, extra: &[&str]) -> usize {
        let data_dir = self._dir.path().join(format!("node-{id}"));
        format_with(&data_dir, &self.cluster_id, id, &self.format_extra);
        self.nodes.push(Node {
            id,
            controller_port,
            data_dir,
            extra: extra.iter().map(|s| (*s).to_string()).collect(),
            env: Vec::new(),
            broker: None,
        });
        self.nodes.len() - 1
    }

    /// Starts node `i` (index in `nodes`), waiting for its Kafka listener.
    pub fn start_node(&mut self, i: usize) {
        self.start_nodes(&[i]);
    }

    fn args(&self, i: usize) -> Vec<String> {
        let node = &self.nodes[i];
        let id = node.id.to_string();
        let cpu = (node.id as usize % cores()).to_string();
        let mut args: Vec<String> = vec![
            "--node-id".into(),
            id,
            "--controller-quorum-voters".into(),
            self.voters.clone(),
            "--spin-before-park-us".into(),
            "0".into(),
        ];
        // One shard on its own core unless the node's extra arguments choose.
        if !node.extra.iter().any(|a| a == "--shards" || a == "--cpus") {
            args.extend(["--shards".into(), "1".into(), "--cpus".into(), cpu]);
        }
        let is_voter = self.voters.split(',').any(|v| v.starts_with(&format!("{}@", node.id)));
        if is_voter {
            args.push("--controller-listen".into());
            args.push(format!("127.0.0.1:{}", node.controller_port));
        }
        args.extend(node.extra.iter().cloned());
        args
    }

    pub fn broker(&self, i: usize) -> &Broker {
        self.nodes[i].broker.as_ref().expect("node running")
    }

    pub fn running(&self) -> impl Iterator<Item = (usize, &Broker)> {
        self.nodes.iter().enumerate().filter_map(|(i, n)| n.broker.as_ref().map(|b| (i, b)))
    }

    /// Kafka addresses of the running nodes, comma-separated (a bootstrap list).
    pub fn bootstrap(&self) -> String {
        self.running().map(|(_, b)| b.addr.clone()).collect::<Vec<_>>().join(",")
    }

    pub fn kill(&mut self, i: usize) {
        if let Some(mut b) = self.nodes[i].broker.take() {
            b.kill();
        }
    }

    pub fn terminate(&mut self, i: usize) {
        if let Some(mut b) = self.nodes[i].broker.take() {
            b.terminate();
        }
    }

    pub fn signal(&self, i: usize, sig: i32) {
        // SAFETY: a signal to our own child process.
        unsafe {
            libc::kill(self.broker(i).pid(), sig);
        }
    }

    /// Index of the node with id `id`.
    pub fn index_of(&self, id: i32) -> usize {
        self.nodes.iter().position(|n| n.id == id).expect("node id")
    }

    /// Waits (bounded by `limit`) until every running node's Metadata lists `n` brokers.
    pub fn wait_brokers(&self, n: usize, limit: Duration) {
        use kafka_protocol::messages::{ApiKey, MetadataRequest, MetadataResponse};
        let deadline = Instant::now() + limit;
        let brokers = |w: &mut Wire| {
            let req = MetadataRequest::default().with_topics(None);
            let m: MetadataResponse = w.call(ApiKey::Metadata, 12, &req);
            m.brokers.len()
        };
        while !self
            .running()
            .all(|(_, b)| Wire::try_connect(&b.addr).is_some_and(|mut w| brokers(&mut w) == n))
        {
            assert!(Instant::now() < deadline, "brokers did not register");
            std::thread::sleep(Duration::from_millis(200));
        }
    }

    /// Creates `topic` with `partitions` partitions at replication factor 3 through any
    /// running node, retried until created (or already there) within `limit`.
    pub fn create_rf3(&self, topic: &str, partitions: i32, limit: Duration) {
        use kafka_protocol::messages::create_topics_request::CreatableTopic;
        use kafka_protocol::messages::{
            ApiKey, CreateTopicsRequest, CreateTopicsResponse, TopicName,
        };
        use kafka_protocol::protocol::StrBytes;
        self.wait_for(limit, "CreateTopics", |w| {
            let t = CreatableTopic::default()
                .with_name(TopicName(StrBytes::from_string(topic.to_string())))
                .with_num_partitions(partitions)
                .with_replication_factor(3);
            let req = CreateTopicsRequest::default().with_topics(vec![t]).with_timeout_ms(10_000);
            let resp: CreateTopicsResponse = w.call(ApiKey::CreateTopics, 5, &req);
            matches!(resp.topics[0].error_code, 0 | 36).then_some(())
        });
    }

    /// Polls `check` on a fresh connection to any running node until it returns `Some`, or
    /// panics after `limit` with `what`.
    pub fn wait_for<T>(
        &self,
        limit: Duration,
        what: &str,
        mut check: impl FnMut(&mut Wire) -> Option<T>,
    ) -> T {
        let deadline = Instant::now() + limit;
        loop {
            for (_, b) in self.running() {
                if let Ok(conn) =
                    shardlog::protocol::blocking::BlockingConn::open(&b.addr, "cluster-test")
                {
                    let mut wire = Wire(conn);
                    if let Ok(Some(v)) =
                        std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| check(&mut wire)))
                    {
                        return v;
                    }
                }
            }
            assert!(Instant::now() < deadline, "timed out after {limit:?} waiting for {what}");
            std::thread::sleep(Duration::from_millis(200));
        }
    }
}
