//! A real `shardlog serve` process on free 127.0.0.1 ports (Kafka and admin), with a temp
//! data directory; killed when dropped.

use std::net::{TcpListener, TcpStream};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

pub const BIN: &str = env!("CARGO_BIN_EXE_shardlog");

pub struct Broker {
    child: Child,
    pub addr: String,
    pub admin: String,
    _dir: tempfile::TempDir,
}

impl Drop for Broker {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0").expect("bind").local_addr().expect("addr").port()
}

/// Starts a broker with `shards` shards and waits until both ports answer.
pub fn start(shards: u32) -> Broker {
    let dir = tempfile::tempdir().expect("tempdir");
    let addr = format!("127.0.0.1:{}", free_port());
    let admin = format!("127.0.0.1:{}", free_port());
    let child = Command::new(BIN)
        .args(["serve", "--shards", &shards.to_string(), "--listen", &addr])
        .args(["--admin-listen", &admin, "--spin-before-park-us", "0", "--data-dir"])
        .arg(dir.path().join("data"))
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("spawn shardlog serve");
    let deadline = Instant::now() + Duration::from_secs(20);
    while TcpStream::connect(&addr).is_err() || TcpStream::connect(&admin).is_err() {
        assert!(Instant::now() < deadline, "broker did not listen on {addr} and {admin}");
        std::thread::sleep(Duration::from_millis(50));
    }
    Broker { child, addr, admin, _dir: dir }
}
