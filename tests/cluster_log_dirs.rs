//! DescribeLogDirs and AlterReplicaLogDirs on a three-node cluster of real processes
//! (issue 16, "Describing the cluster"): after an acks=all produce to a topic with three
//! replicas, every broker reports its data directory (absolute) with the topic's
//! partitions, leader and follower alike, sizes equal across replicas and to the `.log`
//! files on disk once the brokers stopped cleanly; Kafka's `LogDirsCommand --describe` prints
//! the same; the Java Admin client's `alterReplicaLogDirs` to the data directory succeeds and
//! to another path fails with LogDirNotFoundException. The Java parts are skipped, said on
//! stderr, when `.interop-cache` lacks Kafka's jars (`tests/interop/install.sh`). Controller
//! ports come from this file's block, 127.0.0.1:30700-30999.

mod common;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use common::cluster::Cluster;
use common::Wire;
use kafka_protocol::messages::alter_replica_log_dirs_request::{
    AlterReplicaLogDir, AlterReplicaLogDirTopic,
};
use kafka_protocol::messages::create_topics_request::CreatableTopic;
use kafka_protocol::messages::describe_log_dirs_request::DescribableLogDirTopic;
use kafka_protocol::messages::produce_request::{PartitionProduceData, TopicProduceData};
use kafka_protocol::messages::{
    AlterReplicaLogDirsRequest, AlterReplicaLogDirsResponse, ApiKey, CreateTopicsRequest,
    CreateTopicsResponse, DescribeLogDirsRequest, DescribeLogDirsResponse, MetadataRequest,
    MetadataResponse, ProduceRequest, ProduceResponse, TopicName,
};
use kafka_protocol::protocol::StrBytes;

const LIMIT: Duration = Duration::from_secs(90);
const TOPIC: &str = "sizes";
const PARTITIONS: i32 = 3;
/// Batches produced to partition `p`: `10 + 5 * p`, so each partition has its own size.
const BATCHES_BASE: usize = 10;
/// One test's brokers at a time: this machine has two cores.
static SERIAL: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn name(s: &str) -> TopicName {
    TopicName(StrBytes::from_string(s.to_string()))
}

fn create(w: &mut Wire) {
    let topic = CreatableTopic::default()
        .with_name(name(TOPIC))
        .with_num_partitions(PARTITIONS)
        .with_replication_factor(3);
    let req = CreateTopicsRequest::default().with_topics(vec![topic]).with_timeout_ms(10_000);
    let resp: CreateTopicsResponse = w.call(ApiKey::CreateTopics, 5, &req);
    assert_eq!(resp.topics[0].error_code, 0, "{:?}", resp.topics[0].error_message);
}

/// Each partition's leader once every replica is in the ISR.
fn leaders(c: &Cluster) -> BTreeMap<i32, i32> {
    c.wait_for(LIMIT, "every replica in the ISR", |w| {
        let m: MetadataResponse =
            w.call(ApiKey::Metadata, 12, &MetadataRequest::default().with_topics(None));
        let t = m.topics.iter().find(|t| t.name.as_ref().is_some_and(|n| n.0.as_str() == TOPIC))?;
        let full = t.partitions.len() == PARTITIONS as usize
            && t.partitions.iter().all(|p| p.isr_nodes.len() == 3 && p.leader_id.0 > 0);
        full.then(|| t.partitions.iter().map(|p| (p.partition_index, p.leader_id.0)).collect())
    })
}

/// acks=all batches of a few hundred bytes to every partition, each to its leader.
fn produce(c: &Cluster, leaders: &BTreeMap<i32, i32>) {
    for (&partition, &leader) in leaders {
        let mut w = Wire::connect(&c.broker(c.index_of(leader)).addr);
        for i in 0..BATCHES_BASE + 5 * partition as usize {
            let batch = shardlog::storage::records::build_simple_batch(5, 100 + i, 1_000);
            let data =
                TopicProduceData::default().with_name(name(TOPIC)).with_partition_data(vec![
                    PartitionProduceData::default().with_index(partition).with_records(Some(batch)),
                ]);
            let req = ProduceRequest::default()
                .with_acks(-1)
                .with_timeout_ms(10_000)
                .with_topic_data(vec![data]);
            let resp: ProduceResponse = w.call(ApiKey::Produce, 9, &req);
            let code = resp.responses[0].partition_responses[0].error_code;
            assert_eq!(code, 0, "produce to {TOPIC}-{partition} on {leader}");
        }
    }
}

/// Partition → (size, offset lag).
type Sizes = BTreeMap<i32, (i64, i64)>;

/// One broker's answer: (log dir, total bytes, usable bytes, partition → (size, lag)).
struct Described {
    dir: String,
    total_bytes: i64,
    usable_bytes: i64,
    sizes: Sizes,
}

fn describe(w: &mut Wire, version: i16, filter: Option<Vec<i32>>) -> Described {
    let topics = filter.map(|parts| {
        vec![DescribableLogDirTopic::default().with_topic(name(TOPIC)).with_partitions(parts)]
    });
    let resp: DescribeLogDirsResponse = w.call(
        ApiKey::DescribeLogDirs,
        version,
        &DescribeLogDirsRequest::default().with_topics(topics),
    );
    assert_eq!(resp.error_code, 0);
    assert_eq!(resp.results.len(), 1, "one log dir per broker");
    let r = &resp.results[0];
    assert_eq!(r.error_code, 0);
    let mut sizes = BTreeMap::new();
    for t in r.topics.iter().filter(|t| t.name.0.as_str() == TOPIC) {
        for p in &t.partitions {
            assert!(!p.is_future_key);
            sizes.insert(p.partition_index, (p.partition_size, p.offset_lag));
        }
    }
    Described {
        dir: r.log_dir.to_string(),
        total_bytes: r.total_bytes,
        usable_bytes: r.usable_bytes,
        sizes,
    }
}

/// Sum of the `.log` files of `TOPIC`-`partition` in `data_dir`.
fn files_bytes(data_dir: &Path, partition: i32) -> i64 {
    let dir = data_dir.join(format!("{TOPIC}-{partition}"));
    std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .filter_map(Result::ok)
        .filter(|e| e.file_name().to_string_lossy().ends_with(".log"))
        .map(|e| i64::try_from(e.metadata().expect("metadata").len()).expect("size"))
        .sum()
}

fn kafka_libs() -> Option<PathBuf> {
    let libs = Path::new(env!("CARGO_MANIFEST_DIR")).join(".interop-cache/kafka-4.1.2/libs");
    libs.join("kafka-tools-4.1.2.jar").exists().then_some(libs)
}

/// Runs a Java main class (or a source file) with Kafka's jars; (success, stdout, stderr).
fn java(libs: &Path, main: &str, args: &[&str]) -> (bool, String, String) {
    let out = Command::new("java")
        .args(["-Xmx256m", "-cp"])
        .arg(format!("{}/*", libs.display()))
        .arg(main)
        .args(args)
        .output()
        .expect("run java");
    let (stdout, stderr) = (
        String::from_utf8_lossy(&out.stdout).to_string(),
        String::from_utf8_lossy(&out.stderr).to_string(),
    );
    eprintln!("[{main} {args:?}] stdout: {stdout}\nstderr (tail): {}", tail(&stderr));
    (out.status.success(), stdout, stderr)
}

fn tail(s: &str) -> String {
    let lines: Vec<&str> = s.lines().collect();
    lines[lines.len().saturating_sub(15)..].join("\n")
}

/// `LogDirsCommand --describe`: broker id → (log dir, partition → size, offset lag).
fn log_dirs_command(libs: &Path, bootstrap: &str) -> BTreeMap<i64, (String, Sizes)> {
    let args = ["--bootstrap-server", bootstrap, "--describe", "--broker-list", "1,2,3"];
    let (ok, stdout, stderr) = java(
        libs,
        "org.apache.kafka.tools.LogDirsCommand",
        &[&args[..], &["--topic-list", TOPIC]].concat(),
    );
    assert!(ok, "LogDirsCommand failed: {stdout}{stderr}");
    let json = stdout.lines().find(|l| l.starts_with('{')).expect("a JSON line");
    let v: serde_json::Value = serde_json::from_str(json).expect("JSON");
    let mut out = BTreeMap::new();
    for b in v["brokers"].as_array().expect("brokers") {
        let dirs = b["logDirs"].as_array().expect("logDirs");
        assert_eq!(dirs.len(), 1, "{b}");
        assert!(dirs[0]["error"].is_null(), "{b}");
        let mut parts = BTreeMap::new();
        for p in dirs[0]["partitions"].as_array().expect("partitions") {
            let tp = p["partition"].as_str().expect("partition");
            let index: i32 = tp.strip_prefix("sizes-").expect("the topic").parse().expect("index");
            assert_eq!(p["isFuture"], false);
            parts.insert(
                index,
                (p["size"].as_i64().expect("size"), p["offsetLag"].as_i64().expect("lag")),
            );
        }
        let dir = dirs[0]["logDir"].as_str().expect("logDir").to_string();
        out.insert(b["broker"].as_i64().expect("broker"), (dir, parts));
    }
    out
}

/// Runs `shardlog log-dirs` with `args`; its stdout (panics on failure).
fn shardlog_log_dirs(args: &[&str]) -> String {
    let out = Command::new(env!("CARGO_BIN_EXE_shardlog"))
        .arg("log-dirs")
        .args(args)
        .output()
        .expect("run shardlog log-dirs");
    let stdout = String::from_utf8_lossy(&out.stdout).to_string();
    eprintln!("[shardlog log-dirs {args:?}]\n{stdout}{}", String::from_utf8_lossy(&out.stderr));
    assert!(out.status.success(), "shardlog log-dirs {args:?} failed");
    stdout
}

fn alter(w: &mut Wire, path: &str, topic: &str, partitions: Vec<i32>) -> Vec<(i32, i16)> {
    let req = AlterReplicaLogDirsRequest::default().with_dirs(vec![AlterReplicaLogDir::default()
        .with_path(StrBytes::from_string(path.to_string()))
        .with_topics(vec![AlterReplicaLogDirTopic::default()
            .with_name(name(topic))
            .with_partitions(partitions)])]);
    let resp: AlterReplicaLogDirsResponse = w.call(ApiKey::AlterReplicaLogDirs, 2, &req);
    resp.results
        .iter()
        .flat_map(|t| t.partitions.iter().map(|p| (p.partition_index, p.error_code)))
        .collect()
}

#[test]
fn log_dirs_describe_sizes_and_refuse_other_dirs() {
    let _serial = SERIAL.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
    let mut c = Cluster::start(3, 30600);
    create(&mut Wire::connect(&c.broker(0).addr));
    let leaders = leaders(&c);
    produce(&c, &leaders);

    // Followers copy the leader's batches as they are: once caught up, every replica has
    // the same size (polled: the last acks=all batch may still be on its way to one).
    let started = Instant::now();
    let deadline = Instant::now() + LIMIT;
    let answers = loop {
        let answers: Vec<Described> =
            (0..3).map(|i| describe(&mut Wire::connect(&c.broker(i).addr), 4, None)).collect();
        let same = answers
            .iter()
            .all(|a| a.sizes.len() == PARTITIONS as usize && a.sizes == answers[0].sizes);
        if same {
            break answers;
        }
        assert!(Instant::now() < deadline, "replica sizes never agreed");
        std::thread::sleep(Duration::from_millis(200));
    };
    eprintln!("[figure] replica sizes agreed {:?} after the last ack", started.elapsed());
    for (i, a) in answers.iter().enumerate() {
        let data_dir = std::path::absolute(&c.nodes[i].data_dir).expect("absolute");
        assert_eq!(Path::new(&a.dir), data_dir, "broker {} reports its data dir", c.nodes[i].id);
        assert!(a.total_bytes > 0 && a.usable_bytes > 0 && a.usable_bytes <= a.total_bytes);
        for (p, (size, lag)) in &a.sizes {
            assert!(*size > 0, "partition {p} has bytes");
            if *p > 0 {
                assert!(*size > a.sizes[&(p - 1)].0, "more batches, more bytes: {:?}", a.sizes);
            }
            assert_eq!(*lag, 0, "Kafka's lag of a current log");
        }
        eprintln!("[figure] broker {}: {:?} (partition: size, lag)", c.nodes[i].id, a.sizes);
    }
    // v1 has no volume sizes; a topic filter keeps only the named partitions.
    let mut w = Wire::connect(&c.broker(0).addr);
    let v1 = describe(&mut w, 1, Some(vec![1, 7]));
    assert_eq!((v1.total_bytes, v1.usable_bytes), (-1, -1));
    assert_eq!(v1.sizes.keys().copied().collect::<Vec<_>>(), [1]);
    let timed = Instant::now();
    for _ in 0..20 {
        describe(&mut w, 4, None);
    }
    eprintln!("[figure] DescribeLogDirs round trip (debug build): {:?}", timed.elapsed() / 20);

    // AlterReplicaLogDirs on the wire: the data dir is a no-op success; elsewhere not found.
    let dir0 = answers[0].dir.clone();
    assert_eq!(alter(&mut w, &dir0, TOPIC, vec![0, 1, 2]), [(0, 0), (1, 0), (2, 0)]);
    assert_eq!(alter(&mut w, "/no/such/dir", TOPIC, vec![0]), [(0, 57)], "LOG_DIR_NOT_FOUND");
    assert_eq!(alter(&mut w, &dir0, "nope", vec![0]), [(0, 3)], "UNKNOWN_TOPIC_OR_PARTITION");

    if let Some(libs) = kafka_libs() {
        let tool = log_dirs_command(&libs, &c.bootstrap());
        assert_eq!(tool.len(), 3, "every broker answered");
        for (i, a) in answers.iter().enumerate() {
            let (dir, parts) = &tool[&i64::from(c.nodes[i].id)];
            assert_eq!(dir, &a.dir);
            assert_eq!(parts, &a.sizes, "LogDirsCommand shows the sizes of the wire");
        }
        let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/cluster/LogDirsAdmin.java");
        let script = script.to_str().expect("utf-8");
        let broker = c.nodes[1].id.to_string();
        let dir1 = answers[1].dir.clone();
        let (ok, out, err) =
            java(&libs, script, &[&c.bootstrap(), TOPIC, "0", &broker, &dir1, "/no/such/dir"]);
        assert!(ok, "{out}{err}");
        assert!(out.contains(&format!("alter {dir1} ok")), "{out}");
        assert!(out.contains("alter /no/such/dir error LogDirNotFoundException"), "{out}");
        assert!(out.contains(&format!("current {dir1} future null")), "{out}");
    } else {
        eprintln!("[skip] Kafka jars not installed: LogDirsCommand and the Admin client not run");
    }

    // `shardlog log-dirs`: Kafka's JSON with the same figures, and the tables.
    let first = c.broker(0).addr.clone();
    let json = shardlog_log_dirs(&["--bootstrap-server", &first, "--topic-list", TOPIC, "--json"]);
    let v: serde_json::Value = serde_json::from_str(json.trim()).expect("JSON");
    let brokers = v["brokers"].as_array().expect("brokers");
    assert_eq!(brokers.len(), 3, "{v}");
    for (i, a) in answers.iter().enumerate() {
        let b = brokers.iter().find(|b| b["broker"] == c.nodes[i].id).expect("the broker");
        assert_eq!(b["logDirs"][0]["logDir"], a.dir.as_str());
        for (p, (size, _)) in &a.sizes {
            let entry = &b["logDirs"][0]["partitions"][usize::try_from(*p).expect("index")];
            assert_eq!(entry["partition"], format!("{TOPIC}-{p}"));
            assert_eq!(entry["size"], *size);
        }
    }
    let table = shardlog_log_dirs(&["--bootstrap-server", &first, "--broker-list", "2"]);
    assert!(table.contains(&answers[1].dir) && !table.contains(&answers[0].dir), "{table}");
    assert!(table.contains(&format!("{TOPIC}-2")), "{table}");

    // The reported sizes are the `.log` files once the brokers closed their logs cleanly
    // (while open, the active segment's file is padded and preallocated past its data).
    for i in 0..3 {
        c.terminate(i);
    }
    for (i, a) in answers.iter().enumerate() {
        for (p, (size, _)) in &a.sizes {
            assert_eq!(
                files_bytes(&c.nodes[i].data_dir, *p),
                *size,
                "broker {} partition {p}",
                c.nodes[i].id
            );
        }
    }
}

/// One broker with two shards: the partitions live on both, and DescribeLogDirs gathers
/// them all (the connection's shard asks the other one over the mesh).
#[test]
fn log_dirs_gather_every_shard() {
    let _serial = SERIAL.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
    let dir = tempfile::tempdir().expect("temp dir");
    let broker = common::Broker::start(dir.path());
    let mut w = Wire::connect(&broker.addr);
    w.create_topic(TOPIC, 4, &[]);
    let mut expected = BTreeMap::new();
    for partition in 0..4 {
        let batch = shardlog::storage::records::build_simple_batch(2, 50 * (partition + 1), 1_000);
        expected.insert(i32::try_from(partition).expect("index"), batch.len() as i64);
        let data = TopicProduceData::default().with_name(name(TOPIC)).with_partition_data(vec![
            PartitionProduceData::default()
                .with_index(i32::try_from(partition).expect("index"))
                .with_records(Some(batch)),
        ]);
        let req = ProduceRequest::default()
            .with_acks(-1)
            .with_timeout_ms(10_000)
            .with_topic_data(vec![data]);
        let resp: ProduceResponse = w.call(ApiKey::Produce, 9, &req);
        assert_eq!(resp.responses[0].partition_responses[0].error_code, 0);
    }
    let placement = http_get(&broker.admin_addr(), "/v1/shards/partitions");
    let shards: std::collections::BTreeSet<u64> =
        serde_json::from_str::<serde_json::Value>(&placement)
            .expect("JSON")
            .as_array()
            .expect("list")
            .iter()
            .filter(|p| p["topic"] == TOPIC)
            .map(|p| p["shard"].as_u64().expect("shard"))
            .collect();
    assert_eq!(shards.len(), 2, "the partitions are spread over both shards: {placement}");
    // Several connections: whichever shard accepted each, the answer is the same.
    for _ in 0..4 {
        let got = describe(&mut Wire::connect(&broker.addr), 4, None);
        let sizes: BTreeMap<i32, i64> = got.sizes.iter().map(|(p, (s, _))| (*p, *s)).collect();
        assert_eq!(sizes, expected, "one batch each, as produced");
    }
}

/// A plain HTTP/1.0 GET of the admin endpoint; the body.
fn http_get(addr: &str, path: &str) -> String {
    use std::io::{Read, Write};
    let mut s = std::net::TcpStream::connect(addr).expect("connect admin");
    write!(s, "GET {path} HTTP/1.0\r\nHost: {addr}\r\n\r\n").expect("request");
    let mut text = String::new();
    s.read_to_string(&mut text).expect("response");
    text.split_once("\r\n\r\n").map(|(_, body)| body.to_string()).unwrap_or_default()
}
