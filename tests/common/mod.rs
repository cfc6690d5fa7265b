//! Shared harness of the `server_*` integration tests: starts the real `shardlog`
//! binary on an ephemeral 127.0.0.1 port with `--shards 2` and a temp data dir, finds
//! the port from its "listening on" log line, and stops it with SIGTERM or SIGKILL.
#![allow(dead_code)]

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

pub struct Broker {
    child: Option<Child>,
    pub addr: String,
    pub data_dir: PathBuf,
}

impl Broker {
    /// Starts a broker with two shards on `data_dir`.
    pub fn start(data_dir: &Path) -> Broker {
        Self::start_with(data_dir, &["--shards", "2"])
    }

    pub fn start_with(data_dir: &Path, extra: &[&str]) -> Broker {
        let mut child = Command::new(env!("CARGO_BIN_EXE_shardlog"))
            .arg("serve")
            .args(["--listen", "127.0.0.1:0", "--admin-listen", "127.0.0.1:0"])
            .args(["--log-level", &std::env::var("SHARDLOG_TEST_LOG").unwrap_or("info".into())])
            .arg("--data-dir")
            .arg(data_dir)
            .args(extra)
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn shardlog");
        let stderr = child.stderr.take().expect("stderr");
        let (tx, rx) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stderr).lines().map_while(Result::ok) {
                // "shardlog listening on": the admin HTTP endpoint logs "listening on" too.
                if let Some(rest) = line.split("shardlog listening on ").nth(1) {
                    let addr = rest.split_whitespace().next().unwrap_or_default().to_string();
                    let _ = tx.send(addr);
                }
                eprintln!("[broker] {line}");
            }
        });
        let addr = rx.recv_timeout(Duration::from_secs(30)).expect("broker did not start in 30 s");
        Broker { child: Some(child), addr, data_dir: data_dir.to_path_buf() }
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
