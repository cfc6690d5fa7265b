//! `shardlog` command line: parse, load the configuration, start. No logic lives here.

use clap::{Parser, Subcommand};
use shardlog::config::{ServeArgs, ServeConfig};

#[derive(Parser, Debug)]
#[command(name = "shardlog", version, about = "A Kafka-compatible streaming broker")]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Run a broker.
    Serve(ServeArgs),
    /// Check the host (kernel, io_uring, limits, data directory) before serving.
    Doctor(shardlog::doctor::DoctorArgs),
    /// Live per-shard load and latency view of a running broker's admin endpoint.
    Top(shardlog::top::TopArgs),
    /// Drive load at any Kafka-compatible broker and report latency percentiles.
    Bench(shardlog::bench::BenchArgs),
    /// List consumer groups, or describe one with its committed offsets and lag.
    Groups(shardlog::group::cli::GroupsArgs),
    /// Describe or alter topic and broker configs (like kafka-configs.sh).
    Configs(shardlog::controller::cli::ConfigsArgs),
}

fn main() {
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Serve(args) => serve(&args),
        Command::Doctor(args) => shardlog::doctor::run(&args),
        Command::Top(args) => shardlog::top::run(&args),
        Command::Bench(args) => shardlog::bench::run(args),
        Command::Groups(args) => shardlog::group::cli::run(args),
        Command::Configs(args) => shardlog::controller::cli::run(args),
    };
    if let Err(err) = result {
        eprintln!("shardlog: {err:#}");
        std::process::exit(1);
    }
}

fn serve(args: &ServeArgs) -> anyhow::Result<()> {
    let cores = shardlog::shard::runtime::allowed_cores().len();
    let config = ServeConfig::resolve(args, u32::try_from(cores).unwrap_or(1))?;
    init_logging(config.log_level.as_deref());
    shardlog::doctor::serve_preflight(&config.data_dir, config.shards)?;
    shardlog::shard::runtime::serve(config)
}

fn init_logging(level: Option<&str>) {
    use tracing_subscriber::EnvFilter;
    let filter = match level {
        Some(level) => EnvFilter::new(level),
        // glommio's reactor logs an ERROR for the deliberate iopoll probe of every data
        // directory (the probe exists to turn the poll ring off, see design.md §5); silence
        // that target by default so a normal start logs no error. `--log-level` overrides.
        None => EnvFilter::try_from_default_env()
            .unwrap_or_else(|_| EnvFilter::new("info,glommio::reactor=off")),
    };
    use std::io::IsTerminal;
    let ansi = std::io::stderr().is_terminal();
    tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_target(false)
        .with_ansi(ansi)
        .with_writer(std::io::stderr)
        .init();
}
