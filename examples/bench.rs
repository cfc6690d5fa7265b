//! Development driver of `shardlog bench` (the real binary wires the same `BenchArgs`):
//! `cargo run --example bench -- produce --bootstrap 127.0.0.1:9092 --topic t --partitions 8`.

use clap::Parser;

#[derive(Parser)]
#[command(name = "bench", about = "Shardlog's Kafka-protocol load generator")]
struct Cli {
    #[command(flatten)]
    args: shardlog::bench::BenchArgs,
}

fn main() {
    let cli = Cli::parse();
    if let Err(e) = shardlog::bench::run(cli.args) {
        eprintln!("error: {e:#}");
        std::process::exit(1);
    }
}
