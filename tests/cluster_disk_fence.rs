//! A broker whose data directory fills up leaves the ISRs and hands its leaderships over,
//! then comes back by itself when space returns (`server::cluster::disk_fence`, Shardlog's
//! counterpart of Kafka's offline log directory). Three real processes; node 3's data dir is
//! a loop-mounted ext4 image (root only; skipped, saying why, otherwise). A ballast file
//! takes node 3 below `log.dir.reserved.bytes`: within a few heartbeats it is fenced (gone
//! from Metadata's brokers), out of the RF 3 topic's ISR, and acks=all produce goes on at
//! once; the ballast removed, node 3 is unfenced and rejoins the ISR. Figures are printed.
//! Controller ports: this file's block, 127.0.0.1:28000-28399.

mod common;

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use bytes::Bytes;
use common::cluster::Cluster;
use common::Wire;
use kafka_protocol::messages::create_topics_request::{CreatableTopic, CreatableTopicConfig};
use kafka_protocol::messages::produce_request::{PartitionProduceData, TopicProduceData};
use kafka_protocol::messages::{
    ApiKey, CreateTopicsRequest, CreateTopicsResponse, MetadataRequest, MetadataResponse,
    ProduceRequest, ProduceResponse, TopicName,
};
use kafka_protocol::protocol::StrBytes;
use shardlog::storage::batch::Compression;
use shardlog::storage::records::{build_batch, NewRecord};

const TOPIC: &str = "fenced";
const LIMIT: Duration = Duration::from_secs(60);
/// Above the broker's start-up check (256 MiB free).
const IMAGE_MIB: u64 = 512;
/// `log.dir.reserved.bytes`' default.
const RESERVE_MIB: u64 = 64;

fn run(cmd: &mut Command) -> Result<(), String> {
    let out = cmd.output().map_err(|e| format!("{cmd:?}: {e}"))?;
    if out.status.success() {
        Ok(())
    } else {
        Err(format!("{cmd:?}: {}", String::from_utf8_lossy(&out.stderr).trim()))
    }
}

/// A loop-mounted ext4 image over `dir` (its formatted content copied in), unmounted on drop.
struct Ext4 {
    img: PathBuf,
    mnt: PathBuf,
}

impl Ext4 {
    fn mount_over(dir: &Path) -> Result<Ext4, String> {
        let img = dir.with_extension("img");
        std::fs::File::create(&img)
            .and_then(|f| f.set_len(IMAGE_MIB << 20))
            .map_err(|e| e.to_string())?;
        run(Command::new("mkfs.ext4").args(["-q", "-F", "-m", "0"]).arg(&img))?;
        let saved = dir.with_extension("formatted");
        std::fs::rename(dir, &saved).map_err(|e| e.to_string())?;
        std::fs::create_dir(dir).map_err(|e| e.to_string())?;
        if let Err(e) = run(Command::new("mount").args(["-o", "loop"]).arg(&img).arg(dir)) {
            let _ = std::fs::remove_dir(dir);
            let _ = std::fs::rename(&saved, dir);
            return Err(e);
        }
        let disk = Ext4 { img, mnt: dir.to_path_buf() };
        run(Command::new("cp").arg("-a").arg(saved.join(".")).arg(dir))?;
        Ok(disk)
    }
}

impl Drop for Ext4 {
    fn drop(&mut self) {
        if run(Command::new("umount").arg(&self.mnt)).is_err() {
            let _ = run(Command::new("umount").arg("-l").arg(&self.mnt));
        }
        let _ = std::fs::remove_file(&self.img);
    }
}

fn free_mib(path: &Path) -> u64 {
    let out = Command::new("df").args(["-B1M", "--output=avail"]).arg(path).output();
    let text = String::from_utf8_lossy(&out.expect("df").stdout).to_string();
    text.lines().nth(1).and_then(|l| l.trim().parse().ok()).unwrap_or(0)
}

fn s(v: &str) -> StrBytes {
    StrBytes::from_string(v.to_string())
}

fn metadata(w: &mut Wire) -> MetadataResponse {
    w.call(ApiKey::Metadata, 12, &MetadataRequest::default().with_topics(None))
}

/// (registered unfenced brokers, leader, ISR) of partition 0 of [`TOPIC`] as `w` sees it.
fn state(w: &mut Wire) -> Option<(Vec<i32>, i32, Vec<i32>)> {
    let m = metadata(w);
    let mut brokers: Vec<i32> = m.brokers.iter().map(|b| b.node_id.0).collect();
    brokers.sort_unstable();
    let t = m.topics.iter().find(|t| t.name.as_ref().is_some_and(|n| n.0.as_str() == TOPIC))?;
    let p = t.partitions.iter().find(|p| p.partition_index == 0)?;
    let mut isr: Vec<i32> = p.isr_nodes.iter().map(|b| b.0).collect();
    isr.sort_unstable();
    Some((brokers, p.leader_id.0, isr))
}

fn create(w: &mut Wire) -> i16 {
    let configs = vec![CreatableTopicConfig::default()
        .with_name(s("min.insync.replicas"))
        .with_value(Some(s("2")))];
    let topic = CreatableTopic::default()
        .with_name(TopicName(s(TOPIC)))
        .with_num_partitions(1)
        .with_replication_factor(3)
        .with_configs(configs);
    let req = CreateTopicsRequest::default().with_topics(vec![topic]).with_timeout_ms(10_000);
    let resp: CreateTopicsResponse = w.call(ApiKey::CreateTopics, 5, &req);
    resp.topics[0].error_code
}

/// One acks=all record to partition 0 through `w` (which must reach the leader).
fn produce(w: &mut Wire, value: &str) -> i16 {
    let recs =
        [NewRecord { key: None, value: Some(value.as_bytes()), timestamp_ms: 0, headers: vec![] }];
    let batch: Bytes = build_batch(&recs, Compression::None);
    let part = PartitionProduceData::default().with_index(0).with_records(Some(batch));
    let topic =
        TopicProduceData::default().with_name(TopicName(s(TOPIC))).with_partition_data(vec![part]);
    let req =
        ProduceRequest::default().with_acks(-1).with_timeout_ms(5_000).with_topic_data(vec![topic]);
    let resp: ProduceResponse = w.call(ApiKey::Produce, 9, &req);
    resp.responses[0].partition_responses[0].error_code
}

/// Produces one acks=all record to the current leader; true once it is acknowledged.
fn produce_to_leader(c: &Cluster, value: &str) -> bool {
    let Some(leader) = c.running().find_map(|(_, b)| {
        let mut w = Wire::try_connect(&b.addr)?;
        state(&mut w).map(|(_, l, _)| l).filter(|l| *l > 0)
    }) else {
        return false;
    };
    let Some((_, b)) = c.running().find(|(i, _)| c.nodes[*i].id == leader) else { return false };
    Wire::try_connect(&b.addr).is_some_and(|mut w| produce(&mut w, value) == 0)
}

#[test]
fn a_broker_out_of_disk_leaves_the_isr_and_returns_when_space_does() {
    let mut c = Cluster::formatted(3, 28000, &[]);
    let dir = c.nodes[2].data_dir.clone();
    let disk = match Ext4::mount_over(&dir) {
        Ok(d) => d,
        Err(e) => {
            eprintln!("skipped: cannot loop-mount an ext4 image ({e})");
            return;
        }
    };
    c.start_nodes(&[0, 1, 2]);
    c.wait_for(LIMIT, "CreateTopics", |w| (create(w) == 0).then_some(()));
    c.wait_for(LIMIT, "full ISR", |w| state(w).filter(|(_, _, isr)| isr.len() == 3));
    let deadline = Instant::now() + LIMIT;
    while !produce_to_leader(&c, "before") {
        assert!(Instant::now() < deadline, "no acks=all produce before the fill");
        std::thread::sleep(Duration::from_millis(200));
    }

    // Leave half the reserve free on node 3.
    let ballast = dir.join("ballast");
    let fill_mib = free_mib(&dir).saturating_sub(RESERVE_MIB / 2);
    run(Command::new("fallocate").args(["-l", &format!("{fill_mib}M")]).arg(&ballast))
        .expect("fallocate the ballast");
    let filled = Instant::now();
    let (brokers, leader, isr) = c.wait_for(LIMIT, "node 3 fenced and out of the ISR", |w| {
        state(w).filter(|(b, l, isr)| !b.contains(&3) && *l != 3 && !isr.contains(&3))
    });
    let fenced_after = filled.elapsed();
    assert_eq!(brokers, vec![1, 2]);
    assert_eq!(isr.len(), 2, "the other two stay in sync: {isr:?}");
    let before_ack = Instant::now();
    let deadline = Instant::now() + LIMIT;
    while !produce_to_leader(&c, "while-full") {
        assert!(Instant::now() < deadline, "acks=all produce stalled while node 3 was full");
        std::thread::sleep(Duration::from_millis(100));
    }
    eprintln!(
        "[figure] node 3 fenced and out of the ISR {fenced_after:?} after its disk filled \
         (leader {leader}, ISR {isr:?}); next acks=all ack {:?} later",
        before_ack.elapsed()
    );
    assert!(c.broker(2).log_contains("asking the controller to fence this broker"));

    std::fs::remove_file(&ballast).expect("remove the ballast");
    let freed = Instant::now();
    c.wait_for(LIMIT, "node 3 unfenced and back in the ISR", |w| {
        state(w).filter(|(b, _, isr)| b.contains(&3) && isr.len() == 3)
    });
    eprintln!("[figure] node 3 back in the ISR {:?} after space returned", freed.elapsed());
    let deadline = Instant::now() + LIMIT;
    while !produce_to_leader(&c, "after") {
        assert!(Instant::now() < deadline, "no acks=all produce after space returned");
        std::thread::sleep(Duration::from_millis(200));
    }
    for i in 0..3 {
        c.terminate(i);
    }
    drop(disk);
}
