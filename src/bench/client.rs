//! Control-plane calls of the load generator: bootstrap, topic metadata, topic creation
//! and partition offsets.
//!
//! Runs on a bench executor before (or beside) the load; every call is one request on a
//! [`Conn`]. Invariant: the layout returned by [`discover`] names a leader for every
//! partition, or discovery fails with a clear message.

use std::collections::BTreeMap;
use std::time::Duration;

use kafka_protocol::messages::create_topics_request::{CreatableTopic, CreatableTopicConfig};
use kafka_protocol::messages::list_offsets_request::{ListOffsetsPartition, ListOffsetsTopic};
use kafka_protocol::messages::metadata_request::MetadataRequestTopic;
use kafka_protocol::messages::{
    BrokerId, CreateTopicsRequest, ListOffsetsRequest, MetadataRequest, MetadataResponse, TopicName,
};
use kafka_protocol::protocol::StrBytes;

use super::stats::error_name;
use super::wire::{Conn, Versions};

/// Kafka's UNKNOWN_TOPIC_OR_PARTITION.
const UNKNOWN_TOPIC: i16 = 3;
/// Kafka's TOPIC_ALREADY_EXISTS (a concurrent creator won).
const TOPIC_EXISTS: i16 = 36;
/// Retries (100 ms apart) while a fresh topic's partitions get leaders: Kafka on a busy
/// 2-core machine needs more than 10 s to serve 1,000 new partitions.
const LEADER_WAIT_ROUNDS: u32 = 600;

/// Where each partition of the topic lives.
#[derive(Debug, Clone)]
pub struct Layout {
    pub topic: String,
    pub versions: Versions,
    /// Partition index → leader address (host:port).
    pub leaders: BTreeMap<i32, String>,
}

/// What to do when the topic is missing.
pub struct TopicWanted {
    pub topic: String,
    pub partitions: Option<i32>,
    pub replication_factor: i16,
    /// KEY=VALUE topic configs (validated at the CLI).
    pub configs: Vec<String>,
}

pub fn topic_name(t: &str) -> TopicName {
    TopicName(StrBytes::from_string(t.to_string()))
}

/// How this process reaches the brokers (`--security-protocol` and friends), set once before
/// the first connection; plain TCP when never set.
static SECURITY: std::sync::OnceLock<crate::protocol::client_auth::ClientSecurity> =
    std::sync::OnceLock::new();

/// Sets the connections' security from the command line (first call wins).
pub fn set_security(common: &super::cli::CommonArgs) -> anyhow::Result<()> {
    use crate::config::SecurityProtocol;
    use crate::protocol::client_auth::ClientSecurity;
    let protocol = SecurityProtocol::parse(&common.security_protocol).ok_or_else(|| {
        anyhow::anyhow!(
            "--security-protocol {}: PLAINTEXT, SSL, SASL_PLAINTEXT or SASL_SSL",
            common.security_protocol
        )
    })?;
    let mut security = ClientSecurity::default();
    if protocol.tls() {
        let ca = common.ssl_ca.as_ref().ok_or_else(|| {
            anyhow::anyhow!("--security-protocol {} needs --ssl-ca", protocol.name())
        })?;
        security.tls = Some(crate::security::client::trust_only_config(ca)?);
    }
    if protocol.sasl() {
        let unknown = || {
            anyhow::anyhow!(
                "--sasl-mechanism {}: PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512",
                common.sasl_mechanism
            )
        };
        let mechanism =
            crate::security::sasl::Mechanism::parse(&common.sasl_mechanism).ok_or_else(unknown)?;
        let (Some(user), Some(password)) = (&common.sasl_username, &common.sasl_password) else {
            anyhow::bail!(
                "--security-protocol {} needs --sasl-username and --sasl-password",
                protocol.name()
            );
        };
        let login = crate::security::client::login(mechanism, user, password);
        security.sasl = Some(login.ok_or_else(unknown)?);
    }
    let _ = SECURITY.set(security);
    Ok(())
}

/// A connection to `addr`, secured as `--security-protocol` says.
pub async fn connect(addr: &str) -> Result<Conn, super::wire::ClientError> {
    match SECURITY.get() {
        Some(security) => Conn::connect_secure(addr, security).await,
        None => Conn::connect(addr).await,
    }
}

/// Connects to the bootstrap broker, creates the topic if asked and missing, and
/// returns the leader of every partition.
pub async fn discover(bootstrap: &str, want: &TopicWanted) -> anyhow::Result<Layout> {
    let mut conn = connect(bootstrap).await?;
    let versions = conn.negotiate().await?;
    let mut created = false;
    for _ in 0..LEADER_WAIT_ROUNDS {
        let md = metadata(&mut conn, &versions, &want.topic).await?;
        let topic = md.topics.first().ok_or_else(|| anyhow::anyhow!("empty metadata reply"))?;
        match topic.error_code {
            0 => {}
            UNKNOWN_TOPIC if !created => {
                let Some(partitions) = want.partitions else {
                    anyhow::bail!(
                        "topic '{}' does not exist on {bootstrap} (pass --partitions N to create it)",
                        want.topic
                    );
                };
                create_topic(&mut conn, &versions, want, partitions).await?;
                created = true;
                continue;
            }
            UNKNOWN_TOPIC | 5 => {
                // Freshly created, or leaders not yet elected (LEADER_NOT_AVAILABLE).
                glommio::timer::sleep(Duration::from_millis(100)).await;
                continue;
            }
            code => anyhow::bail!("metadata for topic '{}': {}", want.topic, error_name(code)),
        }
        if let Some(layout) = layout_of(&md, &want.topic, versions) {
            check_partition_count(&layout, want)?;
            wait_until_served(&layout).await?;
            return Ok(layout);
        }
        glommio::timer::sleep(Duration::from_millis(100)).await;
    }
    anyhow::bail!("topic '{}' has partitions without a leader on {bootstrap}", want.topic)
}

fn check_partition_count(layout: &Layout, want: &TopicWanted) -> anyhow::Result<()> {
    if let Some(p) = want.partitions {
        let have = layout.leaders.len() as i32;
        if have != p {
            eprintln!("note: topic '{}' exists with {have} partitions (asked for {p})", want.topic);
        }
    }
    Ok(())
}

async fn metadata(conn: &mut Conn, v: &Versions, topic: &str) -> anyhow::Result<MetadataResponse> {
    let req = MetadataRequest::default()
        .with_topics(Some(vec![MetadataRequestTopic::default().with_name(Some(topic_name(topic)))]))
        .with_allow_auto_topic_creation(false);
    Ok(conn.call(&req, v.metadata).await?)
}

/// Leaders of all partitions, or None while some partition has no leader yet.
fn layout_of(md: &MetadataResponse, topic: &str, versions: Versions) -> Option<Layout> {
    let brokers: BTreeMap<BrokerId, String> =
        md.brokers.iter().map(|b| (b.node_id, format!("{}:{}", b.host.as_str(), b.port))).collect();
    let t = md.topics.first()?;
    if t.partitions.is_empty() {
        return None;
    }
    let mut leaders = BTreeMap::new();
    for p in &t.partitions {
        if p.error_code != 0 && p.error_code != 9 {
            // 9 = REPLICA_NOT_AVAILABLE: the leader is still usable.
            return None;
        }
        leaders.insert(p.partition_index, brokers.get(&p.leader_id)?.clone());
    }
    Some(Layout { topic: topic.to_string(), versions, leaders })
}

async fn create_topic(
    conn: &mut Conn,
    v: &Versions,
    want: &TopicWanted,
    partitions: i32,
) -> anyhow::Result<()> {
    let configs = want
        .configs
        .iter()
        .filter_map(|c| c.split_once('='))
        .map(|(k, v)| {
            CreatableTopicConfig::default()
                .with_name(StrBytes::from_string(k.to_string()))
                .with_value(Some(StrBytes::from_string(v.to_string())))
        })
        .collect();
    let req = CreateTopicsRequest::default()
        .with_topics(vec![CreatableTopic::default()
            .with_name(topic_name(&want.topic))
            .with_num_partitions(partitions)
            .with_replication_factor(want.replication_factor)
            .with_configs(configs)])
        .with_timeout_ms(30_000);
    let resp = conn.call(&req, v.create_topics).await?;
    for t in &resp.topics {
        if t.error_code != 0 && t.error_code != TOPIC_EXISTS {
            let msg = t.error_message.as_ref().map(|m| m.as_str().to_string()).unwrap_or_default();
            anyhow::bail!(
                "cannot create topic '{}': {} {msg}",
                want.topic,
                error_name(t.error_code)
            );
        }
    }
    Ok(())
}

/// Errors a leader answers while a fresh partition is still being set up on it.
fn is_settling(code: i16) -> bool {
    // UNKNOWN_TOPIC_OR_PARTITION, LEADER_NOT_AVAILABLE, NOT_LEADER_OR_FOLLOWER
    matches!(code, 3 | 5 | 6)
}

/// Waits until every leader answers ListOffsets for its partitions: Kafka reports a new
/// topic's leaders in Metadata before the leaders accept requests for it.
async fn wait_until_served(layout: &Layout) -> anyhow::Result<()> {
    let mut by_leader: BTreeMap<&str, Vec<i32>> = BTreeMap::new();
    for (p, addr) in &layout.leaders {
        by_leader.entry(addr).or_default().push(*p);
    }
    for (addr, parts) in by_leader {
        let mut conn = connect(addr).await?;
        let mut rounds = 0;
        loop {
            let codes: Vec<i16> =
                list_offsets_raw(&mut conn, &layout.versions, &layout.topic, &parts, LATEST)
                    .await?
                    .into_values()
                    .filter_map(Result::err)
                    .collect();
            let Some(first) = codes.first() else { break };
            if let Some(c) = codes.iter().find(|c| !is_settling(**c)) {
                anyhow::bail!("topic '{}' on {addr}: {}", layout.topic, error_name(*c));
            }
            rounds += 1;
            if rounds >= LEADER_WAIT_ROUNDS {
                anyhow::bail!(
                    "topic '{}' not served by {addr}: {}",
                    layout.topic,
                    error_name(*first)
                );
            }
            glommio::timer::sleep(Duration::from_millis(100)).await;
        }
    }
    Ok(())
}

/// Kafka's ListOffsets timestamps: latest (-1) and earliest (-2).
pub const LATEST: i64 = -1;
pub const EARLIEST: i64 = -2;

/// Offsets of `partitions` at `timestamp` (LATEST/EARLIEST), asked of their leader.
pub async fn list_offsets(
    conn: &mut Conn,
    v: &Versions,
    topic: &str,
    partitions: &[i32],
    timestamp: i64,
) -> anyhow::Result<BTreeMap<i32, i64>> {
    let mut out = BTreeMap::new();
    for (p, r) in list_offsets_raw(conn, v, topic, partitions, timestamp).await? {
        let offset =
            r.map_err(|c| anyhow::anyhow!("list offsets of {topic}-{p}: {}", error_name(c)))?;
        out.insert(p, offset);
    }
    Ok(out)
}

/// Like [`list_offsets`], with each partition's error code kept.
async fn list_offsets_raw(
    conn: &mut Conn,
    v: &Versions,
    topic: &str,
    partitions: &[i32],
    timestamp: i64,
) -> anyhow::Result<BTreeMap<i32, Result<i64, i16>>> {
    let parts = partitions
        .iter()
        .map(|p| ListOffsetsPartition::default().with_partition_index(*p).with_timestamp(timestamp))
        .collect();
    let req = ListOffsetsRequest::default().with_replica_id(BrokerId(-1)).with_topics(vec![
        ListOffsetsTopic::default().with_name(topic_name(topic)).with_partitions(parts),
    ]);
    let resp = conn.call(&req, v.list_offsets).await?;
    let mut out = BTreeMap::new();
    for t in &resp.topics {
        for p in &t.partitions {
            let r = if p.error_code == 0 { Ok(p.offset) } else { Err(p.error_code) };
            out.insert(p.partition_index, r);
        }
    }
    Ok(out)
}
