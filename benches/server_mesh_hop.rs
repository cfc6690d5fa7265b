//! The cost of a cross-shard hop: a request/reply round trip over the glommio channel mesh
//! between two executors pinned to different cores (what a request for a partition owned
//! by another shard pays on top of local execution), with and without `spin_before_park`.
//! Prints p50/p99/p99.9/max in µs. Run: `cargo bench --bench server_mesh_hop`
//! (`-- --quick` for a short run). Not a criterion bench: the point is the latency
//! distribution of one hop, which criterion's mean hides.

use std::time::{Duration, Instant};

use glommio::channels::channel_mesh::MeshBuilder;
use glommio::{CpuSet, LocalExecutorPoolBuilder, PoolPlacement};
use hdrhistogram::Histogram;

fn raise_memlock() {
    let lim = libc::rlimit { rlim_cur: 512 << 20, rlim_max: 512 << 20 };
    // SAFETY: plain syscall on a stack struct.
    unsafe {
        libc::setrlimit(libc::RLIMIT_MEMLOCK, &lim);
    }
}

fn run(spin: Duration, round_trips: u64) -> Histogram<u64> {
    let mesh = MeshBuilder::<(u64, Instant), _>::full(2, 1024);
    let online = CpuSet::online().expect("cpu topology");
    let sets = (0..2).map(|cpu| online.clone().filter(|l| l.cpu == cpu)).collect();
    let handles = LocalExecutorPoolBuilder::new(PoolPlacement::Custom(sets))
        .spin_before_park(spin)
        .on_all_shards(move || async move {
            let (senders, mut receivers) = mesh.join().await.expect("join");
            let me = senders.peer_id();
            let other = 1 - me;
            let (_, rx) = receivers.streams().pop().expect("one peer");
            let mut hist = Histogram::<u64>::new(3).expect("histogram");
            if me == 0 {
                for i in 0..round_trips {
                    let start = Instant::now();
                    senders.send_to(other, (i, start)).await.expect("send");
                    let (_, sent) = rx.recv().await.expect("reply");
                    hist.record(sent.elapsed().as_nanos() as u64).expect("record");
                }
                senders.send_to(other, (u64::MAX, Instant::now())).await.expect("stop");
            } else {
                while let Some((i, sent)) = rx.recv().await {
                    if i == u64::MAX {
                        break;
                    }
                    senders.send_to(other, (i, sent)).await.expect("echo");
                }
            }
            hist
        })
        .expect("executors");
    let mut total = Histogram::<u64>::new(3).expect("histogram");
    for h in handles.join_all() {
        total.add(h.expect("executor")).expect("merge");
    }
    total
}

fn main() {
    raise_memlock();
    let quick = std::env::args().any(|a| a == "--quick" || a == "--test");
    let round_trips = if quick { 2_000 } else { 50_000 };
    for spin_us in [0u64, 50] {
        let h = run(Duration::from_micros(spin_us), round_trips);
        let us = |q: f64| h.value_at_quantile(q) as f64 / 1000.0;
        println!(
            "mesh round trip, spin_before_park={spin_us}us, n={round_trips}: p50 {:.1}us p99 {:.1}us \
             p99.9 {:.1}us max {:.1}us",
            us(0.5),
            us(0.99),
            us(0.999),
            h.max() as f64 / 1000.0
        );
    }
}
