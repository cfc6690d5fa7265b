//! Security between brokers on three real broker processes (issue 34): the inter-broker
//! listener is SASL_SSL (mutual TLS and SCRAM-SHA-512, certificates from `shardlog certs`),
//! so every replica fetch runs a TLS handshake and a SCRAM login; a topic at RF 3 takes
//! acks=all writes; a broker restarted with a wrong inter-broker password is refused by the
//! leader, logs why, and stays out of the ISR while acks=all goes on; given the right password
//! again it rejoins. The controller quorum over mutual TLS (`controller.listener.names` naming
//! an SSL listener): it forms, forwards, fails over; a voter refuses a certificate of another
//! CA and a plaintext peer, naming why; the brokers' credential comes from `format --add-scram`. Controller ports come from this file's block,
//! 127.0.0.1:26500-26799 (bases 26420 and 26450: ports base + 100 × id).

use crate::common;

use std::path::Path;
use std::time::{Duration, Instant};

use bytes::Bytes;
use common::cluster::Cluster;
use common::Wire;
use kafka_protocol::messages::alter_user_scram_credentials_request::ScramCredentialUpsertion;
use kafka_protocol::messages::{
    AlterUserScramCredentialsRequest, AlterUserScramCredentialsResponse, ApiKey, MetadataRequest,
    MetadataResponse,
};
use kafka_protocol::protocol::StrBytes;
use shardlog::controller::scram::ScramMechanism;

use super::replication_cluster::{
    create, expected, leader_isr, produce_acked, read_offsets, wait_partition,
};

const LIMIT: Duration = Duration::from_secs(30);
/// The Kafka listeners: clients (and this test) on PLAINTEXT, brokers on BROKER.
const LISTENERS: &str = "PLAINTEXT://127.0.0.1:0,BROKER://127.0.0.1:0";
const BROKER_PASSWORD: &str = "broker-secret";

/// Development certificates in `dir` (`shardlog certs`): `ca.pem`, `broker.pem`.
pub(crate) fn certificates(dir: &Path) {
    let status = std::process::Command::new(env!("CARGO_BIN_EXE_shardlog"))
        .arg("certs")
        .arg("--out")
        .arg(dir)
        .stdout(std::process::Stdio::null())
        .status()
        .expect("shardlog certs");
    assert!(status.success());
}

/// A node's config file: the BROKER listener is SASL_SSL with mutual TLS and SCRAM-SHA-512,
/// this broker logging in as `broker` with `password`.
fn config(dir: &Path, certs: &Path, name: &str, password: &str) -> String {
    let text = format!(
        "\"listener.security.protocol.map\" = \"PLAINTEXT:PLAINTEXT,BROKER:SASL_SSL\"\n\
         \"inter.broker.listener.name\" = \"BROKER\"\n\
         \"sasl.mechanism.inter.broker.protocol\" = \"SCRAM-SHA-512\"\n\
         \"listener.name.broker.sasl.enabled.mechanisms\" = \"SCRAM-SHA-512\"\n\
         \"listener.name.broker.scram-sha-512.sasl.jaas.config\" = 'org.apache.kafka.common.\
         security.scram.ScramLoginModule required username=\"broker\" password=\"{password}\";'\n\
         \"listener.name.broker.ssl.client.auth\" = \"required\"\n\
         \"ssl.keystore.location\" = \"{ks}\"\n\
         \"ssl.truststore.location\" = \"{ts}\"\n\
         \"replica.lag.time.max.ms\" = 3000\n\
         \"connection.failed.authentication.delay.ms\" = 100\n",
        ks = certs.join("broker.pem").display(),
        ts = certs.join("ca.pem").display(),
    );
    let path = dir.join(name);
    std::fs::write(&path, text).expect("write config");
    path.to_str().expect("utf-8 path").to_string()
}

/// AlterUserScramCredentials: `user`'s SCRAM-SHA-512 credential for `password`.
pub(crate) fn add_scram_user(w: &mut Wire, user: &str, password: &str) {
    let m = ScramMechanism::Sha512;
    let salt = b"shardlog-test-salt".to_vec();
    let salted = m.salted_password(password.as_bytes(), &salt, 4096);
    let req = AlterUserScramCredentialsRequest::default().with_upsertions(vec![
        ScramCredentialUpsertion::default()
            .with_name(StrBytes::from_string(user.to_string()))
            .with_mechanism(m.code())
            .with_iterations(4096)
            .with_salt(Bytes::from(salt))
            .with_salted_password(Bytes::from(salted)),
    ]);
    let r: AlterUserScramCredentialsResponse = w.call(ApiKey::AlterUserScramCredentials, 0, &req);
    assert_eq!(r.results[0].error_code, 0, "{:?}", r.results[0].error_message);
}

/// Whether `broker`'s log gets a line with every one of `needles` within `LIMIT`.
fn logs_line(c: &Cluster, i: usize, needles: &[&str]) -> bool {
    let deadline = Instant::now() + LIMIT;
    loop {
        let lines = c.broker(i).log_lines(needles[0]);
        if lines.iter().any(|l| needles.iter().all(|n| l.contains(n))) {
            return true;
        }
        if Instant::now() > deadline {
            return false;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

#[test]
fn sasl_ssl_between_brokers_replicates_and_refuses_a_wrong_password() {
    let topic = "secured";
    let dir = tempfile::tempdir().expect("tempdir");
    let certs = dir.path().join("certs");
    certificates(&certs);
    let good = config(dir.path(), &certs, "good.toml", BROKER_PASSWORD);
    let wrong = config(dir.path(), &certs, "wrong.toml", "not-the-password");
    let mut c = Cluster::start_with(3, 26420, &["--listeners", LISTENERS, "--config", &good]);
    c.wait_brokers(3, Duration::from_secs(60));
    // The brokers' SCRAM credential, through the quorum (not the inter-broker listener).
    add_scram_user(&mut Wire::connect(&c.broker(0).addr), "broker", BROKER_PASSWORD);
    c.wait_for(LIMIT, "CreateTopics", |w| matches!(create(w, topic), 0 | 36).then_some(()));
    let (leader, isr) = wait_partition(&c, 0, topic, "a leader", |l, _| l > 0);
    eprintln!("[security] leader {leader}, ISR {isr:?}");
    let li = c.index_of(leader);
    let mut lw = Wire::connect(&c.broker(li).addr);

    // acks=all completes only once both followers fetched over TLS + SCRAM.
    let started = Instant::now();
    let mut acked = produce_acked(&mut lw, topic, -1, 10);
    eprintln!("[security] 10 acks=all batches over SASL_SSL in {:?}", started.elapsed());
    let want = expected(&acked);
    assert_eq!(read_offsets(&mut lw, topic, want.last().unwrap() + 1), want);
    assert_eq!(leader_isr(&mut lw, topic).expect("partition").1.len(), 3);
    assert!(
        logs_line(&c, li, &["SASL authentication succeeded", "User:broker", "BROKER"]),
        "the leader logs the followers' logins"
    );
    let (fa, fb) = {
        let mut f = (0..3).filter(|i| *i != li);
        (f.next().unwrap(), f.next().unwrap())
    };

    // A follower (not the active controller) restarted with a wrong password.
    let req = MetadataRequest::default().with_topics(None);
    let controller = lw.call::<_, MetadataResponse>(ApiKey::Metadata, 12, &req).controller_id.0;
    let vi = [fa, fb].into_iter().find(|i| c.nodes[*i].id != controller).unwrap_or(fa);
    let victim = c.nodes[vi].id;
    c.terminate(vi);
    wait_partition(&c, li, topic, "the stopped follower out of the ISR", |_, isr| {
        !isr.contains(&victim)
    });
    c.nodes[vi].extra = vec!["--listeners".into(), LISTENERS.into(), "--config".into(), wrong];
    c.start_node(vi);
    c.wait_brokers(3, Duration::from_secs(60));
    assert!(
        logs_line(&c, vi, &["replica fetch failed", "SASL SCRAM-SHA-512 as broker refused"]),
        "the refused follower logs why"
    );
    assert!(
        logs_line(&c, li, &["SASL authentication failed", "invalid credentials"]),
        "the leader logs the refused login"
    );
    // acks=all goes on with two in-sync replicas, and the refused one never rejoins.
    let watched = Instant::now();
    while watched.elapsed() < Duration::from_secs(8) {
        acked.extend(produce_acked(&mut lw, topic, -1, 1));
        let (_, isr) = leader_isr(&mut lw, topic).expect("partition");
        assert!(!isr.contains(&victim), "a broker with a wrong password joined the ISR {isr:?}");
        std::thread::sleep(Duration::from_millis(300));
    }

    // The right password again: it catches up and rejoins.
    c.terminate(vi);
    c.nodes[vi].extra = vec!["--listeners".into(), LISTENERS.into(), "--config".into(), good];
    c.start_node(vi);
    let (_, isr) = wait_partition(&c, li, topic, "the fixed broker in the ISR", |_, isr| {
        isr.contains(&victim)
    });
    eprintln!("[security] broker {victim} back in the ISR {isr:?}");
    acked.extend(produce_acked(&mut lw, topic, -1, 3));
    let want = expected(&acked);
    assert_eq!(read_offsets(&mut lw, topic, want.last().unwrap() + 1), want);
}

/// A blocking TLS client of a quorum port presenting `keystore` (trusting `ca`): whether the
/// port accepted the handshake and our certificate. Under TLS 1.3 a refused client
/// certificate shows only after the client's side of the handshake finished, as an alert on
/// the first read; an accepted one leaves the voter waiting for our hello (the read times out).
fn quorum_accepts(port: u16, ca: &Path, keystore: &Path) -> bool {
    use shardlog::security::tls::{Pem, TlsSettings};
    use std::io::Read;
    let settings = TlsSettings::pem(
        Pem::File(keystore.display().to_string()),
        None,
        Some(Pem::File(ca.display().to_string())),
    );
    let config = shardlog::security::client::client_config(&settings, true).expect("client");
    let name = rustls::pki_types::ServerName::try_from("127.0.0.1").expect("name");
    let conn = rustls::ClientConnection::new(config, name).expect("connection");
    let tcp = std::net::TcpStream::connect(("127.0.0.1", port)).expect("connect");
    tcp.set_read_timeout(Some(Duration::from_millis(1000))).expect("timeout");
    let mut tls = rustls::StreamOwned::new(conn, tcp);
    let mut byte = [0u8; 1];
    match tls.read_exact(&mut byte) {
        Err(e) => matches!(e.kind(), std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut),
        // The voter speaks only after our hello: a byte is not an acceptance.
        Ok(()) => false,
    }
}

/// Three voters whose controller listener is SSL (mutual TLS), with SASL_SSL between brokers
/// whose SCRAM credential comes from `shardlog format --add-scram`: the quorum forms, the
/// credential is committed (and its file removed), a CreateTopics forwarded over the quorum
/// commits, acks=all replicates; the
/// active controller is SIGKILLed, a new one is elected over TLS and the killed node rejoins.
/// A client with a certificate of another CA, and a plaintext one, are refused by a voter with
/// a log line naming why; one with the cluster's certificate is accepted.
#[test]
fn the_controller_quorum_runs_over_mutual_tls() {
    let topic = "quorum-tls";
    let dir = tempfile::tempdir().expect("tempdir");
    let certs = dir.path().join("certs");
    certificates(&certs);
    let other_ca = dir.path().join("other");
    certificates(&other_ca);
    let good = config(dir.path(), &certs, "good.toml", BROKER_PASSWORD);
    let quorum = "\"controller.listener.names\" = \"CONTROLLER\"\n\
                  \"listener.security.protocol.map\" = \
                  \"PLAINTEXT:PLAINTEXT,BROKER:SASL_SSL,CONTROLLER:SSL\"\n";
    let text = std::fs::read_to_string(&good).expect("read").replace(
        "\"listener.security.protocol.map\" = \"PLAINTEXT:PLAINTEXT,BROKER:SASL_SSL\"\n",
        quorum,
    );
    std::fs::write(&good, text).expect("write");
    // The brokers' credential from `shardlog format --add-scram`, as Kafka's storage tool.
    let scram = format!("SCRAM-SHA-512=[name=broker,password={BROKER_PASSWORD}]");
    let mut c = Cluster::formatted_with(3, 26450, &[], &["--add-scram", &scram]);
    assert!(c.nodes[0].data_dir.join("bootstrap-scram").exists());
    for node in &mut c.nodes {
        let listeners = format!("{LISTENERS},CONTROLLER://127.0.0.1:{}", node.controller_port);
        node.extra = vec!["--listeners".into(), listeners, "--config".into(), good.clone()];
    }
    c.start_nodes(&[0, 1, 2]);
    c.wait_brokers(3, Duration::from_secs(60));
    for i in 0..3 {
        assert!(logs_line(&c, i, &["connected to quorum node"]), "node {i} joined the quorum");
    }
    let port = c.nodes[0].controller_port;
    let started = Instant::now();
    assert!(quorum_accepts(port, &certs.join("ca.pem"), &certs.join("broker.pem")));
    assert!(!quorum_accepts(port, &certs.join("ca.pem"), &other_ca.join("broker.pem")));
    assert!(logs_line(&c, 0, &["refusing quorum connection", "TLS handshake failed"]));
    let mut plain = std::net::TcpStream::connect(("127.0.0.1", port)).expect("connect");
    std::io::Write::write_all(&mut plain, b"\0\0\0\x10shardlog hello!!").expect("write");
    plain.set_read_timeout(Some(Duration::from_secs(5))).expect("timeout");
    let mut buf = [0u8; 64];
    let read = std::io::Read::read(&mut plain, &mut buf);
    assert!(!matches!(read, Ok(n) if n > 0 && buf[0] != 0x15), "plaintext answered: {read:?}");
    eprintln!("[security] quorum port checks in {:?}", started.elapsed());

    // A topic through the quorum; acks=all over SASL_SSL with the bootstrap credential,
    // whose file every node removes once the credential is committed.
    c.wait_for(LIMIT, "CreateTopics", |w| matches!(create(w, topic), 0 | 36).then_some(()));
    let (leader, _) = wait_partition(&c, 0, topic, "a leader", |l, _| l > 0);
    let mut lw = Wire::connect(&c.broker(c.index_of(leader)).addr);
    let acked = produce_acked(&mut lw, topic, -1, 5);
    let want = expected(&acked);
    assert_eq!(read_offsets(&mut lw, topic, want.last().unwrap() + 1), want);
    for node in &c.nodes {
        assert!(!node.data_dir.join("bootstrap-scram").exists(), "node {} kept it", node.id);
    }

    // Kill the active controller: the survivors elect another over TLS; it comes back.
    let req = MetadataRequest::default().with_topics(None);
    let controller = lw.call::<_, MetadataResponse>(ApiKey::Metadata, 12, &req).controller_id.0;
    let ci = c.index_of(controller);
    c.kill(ci);
    let other = format!("{topic}-after");
    c.wait_for(LIMIT, "CreateTopics after the kill", |w| {
        matches!(create(w, &other), 0 | 36).then_some(())
    });
    c.start_node(ci);
    c.wait_brokers(3, Duration::from_secs(60));
    assert!(logs_line(&c, ci, &["connected to quorum node"]), "the killed voter rejoined");
}
