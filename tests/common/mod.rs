//! Shared harness of the `server_*` integration tests: starts the real `shardlog`
//! binary on an ephemeral 127.0.0.1 port with `--shards 2` and a temp data dir, finds
//! the port from its "listening on" log line, and stops it with SIGTERM or SIGKILL.
//! Crash tests also start it with extra environment (`SHARDLOG_CRASH_AT`), wait for it to
//! die by itself, search its last log lines, and speak raw Kafka protocol ([`Wire`]).
#![allow(dead_code)]

pub mod cluster;

use std::collections::VecDeque;
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::{mpsc, Arc, Mutex};
use std::time::{Duration, Instant};

/// How many of a broker's stderr lines [`Broker::log_contains`] searches.
pub const LOG_LINES_KEPT_MAX: usize = 10_000;

pub struct Broker {
    child: Option<Child>,
    pub addr: String,
    pub data_dir: PathBuf,
    /// The broker's last stderr lines (bounded).
    log: Arc<Mutex<VecDeque<String>>>,
}

impl Broker {
    /// Starts a broker with two shards on `data_dir`.
    pub fn start(data_dir: &Path) -> Broker {
        Self::start_with(data_dir, &["--shards", "2"])
    }

    pub fn start_with(data_dir: &Path, extra: &[&str]) -> Broker {
        Self::start_env(data_dir, extra, &[])
    }

    /// Starts a broker with `extra` arguments and `env` added to its environment (e.g.
    /// `SHARDLOG_CRASH_AT`); its stderr lines are kept (see [`Broker::log_contains`]).
    /// A start the broker itself reports as stalled ("start-up stalled", its watchdog) is
    /// tried once more, said on stderr; any other failure to start panics with the log.
    pub fn start_env(data_dir: &Path, extra: &[&str], env: &[(&str, &str)]) -> Broker {
        Self::start_listening(data_dir, &["--listen", "127.0.0.1:0"], extra, env)
    }

    /// [`Broker::start_env`] with `listen` in place of `--listen 127.0.0.1:0` (e.g. a
    /// `--config` file naming several listeners); `addr` is the first listener's.
    pub fn start_listening(
        data_dir: &Path,
        listen: &[&str],
        extra: &[&str],
        env: &[(&str, &str)],
    ) -> Broker {
        match Self::try_start(data_dir, listen, extra, env) {
            Ok(broker) => broker,
            Err(log) if log.iter().any(|l| l.contains("start-up stalled")) => {
                eprintln!("[harness] the broker's start stalled; starting it once more");
                Self::try_start(data_dir, listen, extra, env)
                    .unwrap_or_else(|log| panic!("broker did not start twice: {log:?}"))
            }
            Err(log) => panic!("broker did not start: last lines {log:?}"),
        }
    }

    fn try_start(
        data_dir: &Path,
        listen: &[&str],
        extra: &[&str],
        env: &[(&str, &str)],
    ) -> Result<Broker, Vec<String>> {
        let mut child = Command::new(env!("CARGO_BIN_EXE_shardlog"))
            .arg("serve")
            .args(listen)
            .args(["--admin-listen", "127.0.0.1:0"])
            .args(["--log-level", &std::env::var("SHARDLOG_TEST_LOG").unwrap_or("info".into())])
            .arg("--data-dir")
            .arg(data_dir)
            .args(extra)
            .envs(env.iter().copied())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn shardlog");
        let stderr = child.stderr.take().expect("stderr");
        let (tx, rx) = mpsc::channel();
        let log = Arc::new(Mutex::new(VecDeque::new()));
        let kept = log.clone();
        std::thread::spawn(move || {
            for line in BufReader::new(stderr).lines().map_while(Result::ok) {
                // "shardlog listening on": the admin HTTP endpoint logs "listening on" too.
                if let Some(rest) = line.split("shardlog listening on ").nth(1) {
                    let addr = rest.split_whitespace().next().unwrap_or_default().to_string();
                    let _ = tx.send(addr);
                }
                eprintln!("[broker] {line}");
                let mut kept = kept.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
                if kept.len() == LOG_LINES_KEPT_MAX {
                    kept.pop_front();
                }
                kept.push_back(line);
            }
        });
        // The broker's own watchdog ends a stalled start after 60 s (its stderr closes and
        // the channel disconnects); this bound is only for a broker that cannot even do that.
        match rx.recv_timeout(Duration::from_secs(90)) {
            Ok(addr) => {
                Ok(Broker { child: Some(child), addr, data_dir: data_dir.to_path_buf(), log })
            }
            Err(_) => {
                // Never leave a broker running behind a failed test.
                let _ = child.kill();
                let _ = child.wait();
                let kept = log.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
                Err(kept.iter().rev().take(20).rev().cloned().collect())
            }
        }
    }

    /// The admin endpoint's address, from its "admin HTTP (metrics) listening on" line
    /// (bounded wait: it binds in the background right after start).
    pub fn admin_addr(&self) -> String {
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            {
                let kept = self.log.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
                let found = kept.iter().find_map(|l| {
                    l.split("admin HTTP (metrics) listening on ")
                        .nth(1)
                        .map(|rest| rest.split_whitespace().next().unwrap_or_default().to_string())
                });
                if let Some(addr) = found {
                    return addr;
                }
            }
            assert!(Instant::now() < deadline, "the admin endpoint did not start");
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// Whether one of the broker's last [`LOG_LINES_KEPT_MAX`] stderr lines contains `needle`.
    /// The bound address of listener `name`, from its "listener NAME listening on" line
    /// (logged right after the "shardlog listening on" line `start` waits for; bounded wait).
    pub fn listener_addr(&self, name: &str) -> String {
        let needle = format!("listener {name} listening on ");
        let deadline = Instant::now() + Duration::from_secs(10);
        let line = loop {
            match self.log_lines(&needle).pop() {
                Some(line) => break line,
                None if Instant::now() < deadline => std::thread::sleep(Duration::from_millis(20)),
                None => panic!("no line for listener {name}"),
            }
        };
        line.split(&needle).nth(1).and_then(|r| r.split_whitespace().next()).expect("addr").into()
    }

    /// Whether the broker logs a line with `needle` within a few seconds (its stderr is read
    /// by another thread).
    pub fn logs_within(&self, needle: &str) -> bool {
        let deadline = Instant::now() + Duration::from_secs(10);
        while !self.log_contains(needle) {
            if Instant::now() > deadline {
                return false;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        true
    }

    /// The broker's kept stderr lines containing `needle`.
    pub fn log_lines(&self, needle: &str) -> Vec<String> {
        let kept = self.log.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        kept.iter().filter(|l| l.contains(needle)).cloned().collect()
    }

    pub fn log_contains(&self, needle: &str) -> bool {
        let kept = self.log.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        kept.iter().any(|l| l.contains(needle))
    }

    /// Waits (bounded) for a broker expected to die by itself, e.g. at a crash point; kills it
    /// and panics if it is still running after `limit`.
    pub fn wait_for_exit(&mut self, limit: Duration) -> ExitStatus {
        self.wait(limit)
    }

    pub fn pid(&self) -> i32 {
        self.child.as_ref().map(|c| c.id() as i32).unwrap_or(-1)
    }

    /// SIGTERM, then wait (bounded) for a clean exit.
    pub fn terminate(&mut self) -> ExitStatus {
        self.signal(libc::SIGTERM);
        self.wait(Duration::from_secs(30))
    }

    pub fn kill(&mut self) {
        self.signal(libc::SIGKILL);
        self.wait(Duration::from_secs(30));
    }

    fn signal(&self, sig: i32) {
        // SAFETY: sending a signal to our own child process.
        unsafe {
            libc::kill(self.pid(), sig);
        }
    }

    fn wait(&mut self, limit: Duration) -> ExitStatus {
        let mut child = self.child.take().expect("broker running");
        let deadline = Instant::now() + limit;
        loop {
            if let Some(status) = child.try_wait().expect("wait") {
                return status;
            }
            if Instant::now() > deadline {
                let _ = child.kill();
                panic!("broker did not exit within {limit:?}");
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    pub async fn client(&self) -> rskafka::client::Client {
        if std::env::var("SHARDLOG_TEST_CLIENT_LOG").is_ok() {
            let _ = tracing_subscriber::fmt().with_env_filter("debug").try_init();
        }
        rskafka::client::ClientBuilder::new(vec![self.addr.clone()])
            .build()
            .await
            .expect("rskafka client")
    }
}

impl Drop for Broker {
    fn drop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

pub fn record(value: &str) -> rskafka::record::Record {
    rskafka::record::Record {
        key: Some(format!("k-{value}").into_bytes()),
        value: Some(value.as_bytes().to_vec()),
        headers: std::collections::BTreeMap::from([("h".to_string(), b"v".to_vec())]),
        timestamp: now(),
    }
}

/// Wall-clock now (rskafka's chrono is built without its clock feature).
pub fn now() -> rskafka::chrono::DateTime<rskafka::chrono::Utc> {
    use rskafka::chrono::TimeZone;
    let ms = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .expect("clock after 1970")
        .as_millis() as i64;
    rskafka::chrono::Utc.timestamp_millis_opt(ms).single().expect("valid timestamp")
}

/// Whether `status` is a death by SIGKILL.
pub fn killed_by_sigkill(status: &ExitStatus) -> bool {
    use std::os::unix::process::ExitStatusExt;
    status.signal() == Some(libc::SIGKILL)
}

/// A blocking Kafka-protocol connection (the `kafka-protocol` codec) for what rskafka cannot
/// send: CreateTopics with configs, and Fetch answers kept as raw batches (rskafka drops
/// empty batches, which compaction leaves, so a reader could not step over them).
pub struct Wire(shardlog::protocol::blocking::BlockingConn);

impl Wire {
    pub fn connect(addr: &str) -> Wire {
        Wire::connect_as(addr, "test-wire")
    }

    /// Connects, or `None` when the broker does not answer (it may be down).
    pub fn try_connect(addr: &str) -> Option<Wire> {
        shardlog::protocol::blocking::BlockingConn::open(addr, "test-wire").ok().map(Wire)
    }

    /// Connects with `client_id` in every request header (quotas are per client id).
    pub fn connect_as(addr: &str, client_id: &'static str) -> Wire {
        Wire(shardlog::protocol::blocking::BlockingConn::open(addr, client_id).expect("connect"))
    }

    /// Sends `body` as `api` v`version` and decodes the answer.
    pub fn call<Q, R>(&mut self, api: kafka_protocol::messages::ApiKey, version: i16, body: &Q) -> R
    where
        Q: kafka_protocol::protocol::Encodable,
        R: kafka_protocol::protocol::Decodable,
    {
        self.0.call(api, version, body).unwrap_or_else(|e| panic!("{e}"))
    }

    /// Creates a topic with `configs`; panics with the broker's message if refused.
    pub fn create_topic(&mut self, name: &str, partitions: i32, configs: &[(&str, &str)]) {
        use kafka_protocol::messages::create_topics_request::{
            CreatableTopic, CreatableTopicConfig,
        };
        use kafka_protocol::messages::{
            ApiKey, CreateTopicsRequest, CreateTopicsResponse, TopicName,
        };
        use kafka_protocol::protocol::StrBytes;
        let configs = configs
            .iter()
            .map(|(k, v)| {
                CreatableTopicConfig::default()
                    .with_name(StrBytes::from_string((*k).to_string()))
                    .with_value(Some(StrBytes::from_string((*v).to_string())))
            })
            .collect();
        let topic = CreatableTopic::default()
            .with_name(TopicName(StrBytes::from_string(name.to_string())))
            .with_num_partitions(partitions)
            .with_replication_factor(1)
            .with_configs(configs);
        let request =
            CreateTopicsRequest::default().with_topics(vec![topic]).with_timeout_ms(30_000);
        let answer: CreateTopicsResponse = self.call(ApiKey::CreateTopics, 5, &request);
        for t in &answer.topics {
            assert_eq!(t.error_code, 0, "create topic {name}: {:?}", t.error_message);
        }
    }

    /// One Fetch (v11) of `topic`/`partition` from `offset`: (error code, high watermark,
    /// log start offset, the record bytes as stored).
    pub fn fetch(&mut self, topic: &str, partition: i32, offset: i64) -> FetchAnswer {
        use kafka_protocol::messages::fetch_request::{FetchPartition, FetchTopic};
        use kafka_protocol::messages::{ApiKey, FetchRequest, FetchResponse, TopicName};
        use kafka_protocol::protocol::StrBytes;
        let part = FetchPartition::default()
            .with_partition(partition)
            .with_fetch_offset(offset)
            .with_partition_max_bytes(1 << 20);
        let request = FetchRequest::default()
            .with_max_wait_ms(0)
            .with_min_bytes(1)
            .with_max_bytes(1 << 20)
            .with_topics(vec![FetchTopic::default()
                .with_topic(TopicName(StrBytes::from_string(topic.to_string())))
                .with_partitions(vec![part])]);
        let answer: FetchResponse = self.call(ApiKey::Fetch, 11, &request);
        let p = answer
            .responses
            .first()
            .and_then(|t| t.partitions.first())
            .expect("fetch answer for the partition");
        FetchAnswer {
            error_code: p.error_code,
            high_watermark: p.high_watermark,
            log_start_offset: p.log_start_offset,
            records: p.records.clone().unwrap_or_default(),
        }
    }
}

pub struct FetchAnswer {
    pub error_code: i16,
    pub high_watermark: i64,
    pub log_start_offset: i64,
    pub records: bytes::Bytes,
}

/// One record read back: its offset, key and value (`None`: a tombstone).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ReadRecord {
    pub offset: i64,
    pub key: Option<Vec<u8>>,
    pub value: Option<Vec<u8>>,
}

/// Splits stored record bytes into whole v2 batches (a fetch may end with a partial one):
/// each batch's records (control batches skipped) and the offset after its last offset.
pub fn split_batches(mut bytes: bytes::Bytes) -> Vec<(Vec<ReadRecord>, i64)> {
    use kafka_protocol::records::RecordBatchDecoder;
    // baseOffset i64, batchLength i32, partitionLeaderEpoch i32, magic i8, crc u32,
    // attributes i16, lastOffsetDelta i32.
    const LENGTH_AT: usize = 8;
    const LAST_OFFSET_DELTA_AT: usize = 23;
    let mut out = Vec::new();
    while bytes.len() >= LAST_OFFSET_DELTA_AT + 4 {
        let field = |at: usize, n: usize| bytes[at..at + n].to_vec();
        let base = i64::from_be_bytes(field(0, 8).try_into().expect("8 bytes"));
        let length = i32::from_be_bytes(field(LENGTH_AT, 4).try_into().expect("4 bytes"));
        let total = LENGTH_AT + 4 + usize::try_from(length).expect("batch length >= 0");
        if bytes.len() < total {
            break;
        }
        let delta = i32::from_be_bytes(field(LAST_OFFSET_DELTA_AT, 4).try_into().expect("4"));
        let mut batch = bytes.split_to(total);
        let set = RecordBatchDecoder::decode(&mut batch).expect("a valid batch");
        let records = set
            .records
            .into_iter()
            .filter(|r| !r.control)
            .map(|r| ReadRecord {
                offset: r.offset,
                key: r.key.map(|k| k.to_vec()),
                value: r.value.map(|v| v.to_vec()),
            })
            .collect();
        out.push((records, base + i64::from(delta) + 1));
    }
    out
}

/// A transactional batch of `count` 16-byte records from `pid`/`epoch` at sequence `seq`,
/// stamped now (Kafka timestamps), as a transactional producer would send it.
pub fn txn_batch(pid: i64, epoch: i16, seq: i32, count: usize) -> bytes::Bytes {
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .expect("clock")
        .as_millis() as i64;
    let mut b =
        bytes::BytesMut::from(&shardlog::storage::records::build_simple_batch(count, 16, now)[..]);
    shardlog::storage::batch::set_transactional_producer(&mut b, pid, epoch, seq);
    b.freeze()
}
