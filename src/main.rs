//! `shardlog` command line: parse, load the configuration, start. No logic lives here.

use clap::{CommandFactory, Parser, Subcommand};

/// jemalloc, not glibc malloc: the batch cache frees its oldest batches while the newest are
/// allocated (sizes from 100 B to MiBs), and glibc's arenas fragmented under that churn, RSS
/// growing ~50 MiB past live memory over 17 minutes of soak; jemalloc's size-class slabs and
/// decay-based purging kept RSS within a few MiB of live memory (perf/results/2026-12-02-rss.md).
#[cfg(all(target_os = "linux", not(target_env = "musl")))]
#[global_allocator]
static ALLOCATOR: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

use shardlog::cli::{AdminArgs, ClientArgs, Uses};
use shardlog::config::{ServeArgs, ServeConfig};

/// jemalloc's start-up options (read once, before the first allocation; `_RJEM_MALLOC_CONF`
/// in the environment still overrides them, e.g. perf/heap_profile.sh's `prof:true`).
/// By default jemalloc purges freed pages only when the freeing thread allocates again, over
/// a 10 s decay, so RSS swung 10–40 MiB above the live heap with the load's phases (issue
/// 19's soak). One background thread purges them on a 1 s decay instead, off the shards'
/// threads, and skips the second (muzzy) stage: RSS stays within ~15 MiB of the live heap
/// (perf/results/2026-12-02-allocator.md).
#[cfg(all(target_os = "linux", not(target_env = "musl")))]
#[allow(non_upper_case_globals)]
#[export_name = "_rjem_malloc_conf"]
pub static malloc_conf: Option<&'static u8> = Some(
    &b"background_thread:true,max_background_threads:1,dirty_decay_ms:1000,muzzy_decay_ms:0\0"[0],
);

/// jemalloc's counters for `/metrics` (`shardlog_allocator_*_bytes`). They are cached by
/// jemalloc until the epoch is advanced, so each reading advances it first.
#[cfg(all(target_os = "linux", not(target_env = "musl")))]
fn jemalloc_stats() -> Option<shardlog::metrics::allocator::AllocatorStats> {
    use tikv_jemalloc_ctl::{epoch, stats};
    epoch::advance().ok()?;
    Some(shardlog::metrics::allocator::AllocatorStats {
        allocated_bytes: stats::allocated::read().ok()? as u64,
        active_bytes: stats::active::read().ok()? as u64,
        resident_bytes: stats::resident::read().ok()? as u64,
        mapped_bytes: stats::mapped::read().ok()? as u64,
        retained_bytes: stats::retained::read().ok()? as u64,
        metadata_bytes: stats::metadata::read().ok()? as u64,
    })
}

/// `--version`: the crate version and the commit it was built from (see build.rs).
const VERSION: &str =
    concat!(env!("CARGO_PKG_VERSION"), " (commit ", env!("SHARDLOG_GIT_COMMIT"), ")");

#[derive(Parser, Debug)]
#[command(name = "shardlog", version = VERSION, about = "A Kafka-compatible streaming broker")]
// The address flags are defined here only so that they may come before the subcommand;
// each subcommand that reads one shows it in its own help.
#[command(mut_arg("bootstrap_server", |a| a.hide(true)), mut_arg("admin", |a| a.hide(true)))]
struct Cli {
    #[command(flatten)]
    client: ClientArgs,
    #[command(flatten)]
    admin: AdminArgs,
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Run a broker.
    Serve(ServeArgs),
    /// Give a data directory its cluster id and node id before the first start of a cluster
    /// node (like kafka-storage.sh format).
    Format(shardlog::cli::format::FormatArgs),
    /// Write a development CA and PEM certificates for a broker and clients (TLS tests).
    Certs(shardlog::cli::certs::CertsArgs),
    /// Check the host (kernel, io_uring, limits, data directory) before serving.
    Doctor(shardlog::doctor::DoctorArgs),
    /// Live per-shard load and latency view of a running broker's admin endpoint.
    Top(shardlog::top::TopArgs),
    /// Drive load at any Kafka-compatible broker and report latency percentiles.
    Bench(shardlog::bench::BenchArgs),
    /// List consumer groups, or describe one with its committed offsets and lag.
    Groups(shardlog::cli::groups::GroupsArgs),
    /// Describe or alter topic and broker configs (like kafka-configs.sh).
    Configs(shardlog::cli::configs::ConfigsArgs),
    /// List, describe (leader, AR, ISR, OSR, preferred leader), create or delete topics.
    Topics(shardlog::cli::topics::TopicsArgs),
    /// Preferred or unclean leader election (like kafka-leader-election.sh).
    ElectLeaders(shardlog::cli::elect_leaders::ElectLeadersArgs),
    /// Open transactions with their age and partitions (`--all`: every transactional id).
    Transactions(shardlog::cli::transactions::TransactionsArgs),
    /// Describe or alter client quotas (user / client-id entities, like kafka-configs.sh).
    Quotas(shardlog::cli::quotas::QuotasArgs),
    /// List, add or remove ACLs (like kafka-acls.sh).
    Acls(shardlog::cli::acls::AclsArgs),
    /// Which shard owns each partition; move a partition to another shard, online.
    Shards(shardlog::cli::shards::ShardsArgs),
    /// Each broker's log directory with the size and lag of its replicas (like
    /// kafka-log-dirs.sh --describe).
    LogDirs(shardlog::cli::log_dirs::LogDirsArgs),
}

impl Command {
    /// The subcommand's name and which address flag it reads.
    fn uses(&self) -> (&'static str, Uses) {
        use shardlog::bench::cli::BenchCommand;
        match self {
            Command::Serve(_) => ("serve", Uses::Neither),
            Command::Format(_) => ("format", Uses::Neither),
            Command::Certs(_) => ("certs", Uses::Neither),
            Command::Doctor(_) => ("doctor", Uses::Neither),
            Command::Top(_) => ("top", Uses::Admin),
            Command::Bench(b) if matches!(b.command, BenchCommand::Plot(_)) => {
                ("bench plot", Uses::Neither)
            }
            Command::Bench(_) => ("bench", Uses::Bootstrap),
            Command::Groups(_) => ("groups", Uses::Bootstrap),
            Command::Configs(_) => ("configs", Uses::Bootstrap),
            Command::Topics(_) => ("topics", Uses::Bootstrap),
            Command::ElectLeaders(_) => ("elect-leaders", Uses::Bootstrap),
            Command::Transactions(_) => ("transactions", Uses::Bootstrap),
            Command::Quotas(_) => ("quotas", Uses::Bootstrap),
            Command::Acls(_) => ("acls", Uses::Bootstrap),
            Command::Shards(_) => ("shards", Uses::Admin),
            Command::LogDirs(_) => ("log-dirs", Uses::Bootstrap),
        }
    }
}

fn main() {
    #[cfg(all(target_os = "linux", not(target_env = "musl")))]
    shardlog::metrics::allocator::set_reader(jemalloc_stats);
    let argv: Vec<String> = std::env::args().collect();
    let path = || shardlog::cli::command_path(&Cli::command(), &argv);
    let cli = match Cli::try_parse_from(&argv) {
        Ok(cli) => cli,
        Err(err) => match shardlog::cli::render_clap_error(&err, &path()) {
            Some((line, status)) => fail(&line, status),
            None => err.exit(),
        },
    };
    let (name, uses) = cli.command.uses();
    if let Err(err) = shardlog::cli::check_placement(name, uses, &cli.client, &cli.admin) {
        fail(&format!("{err} (see '{} --help')", path()), 2);
    }
    let result = match cli.command {
        Command::Serve(args) => serve(&args),
        Command::Format(args) => shardlog::cli::format::run(&args),
        Command::Certs(args) => shardlog::cli::certs::run(&args),
        Command::Doctor(args) => shardlog::doctor::run(&args),
        Command::Top(args) => shardlog::top::run(&args),
        Command::Bench(args) => shardlog::bench::run(args),
        Command::Groups(args) => shardlog::cli::groups::run(args),
        Command::Configs(args) => shardlog::cli::configs::run(args),
        Command::Topics(args) => shardlog::cli::topics::run(args),
        Command::ElectLeaders(args) => shardlog::cli::elect_leaders::run(args),
        Command::Transactions(args) => shardlog::cli::transactions::run(&args),
        Command::Quotas(args) => shardlog::cli::quotas::run(args),
        Command::Acls(args) => shardlog::cli::acls::run(args),
        Command::Shards(args) => shardlog::cli::shards::run(&args),
        Command::LogDirs(args) => shardlog::cli::log_dirs::run(args),
    };
    if let Err(err) = result {
        let status = shardlog::cli::exit_status(&err);
        let mut line = shardlog::cli::one_line(&err);
        if status == 2 {
            line.push_str(&format!(" (see '{} --help')", path()));
        }
        fail(&line, status);
    }
}

/// Prints `shardlog: <line>` on stderr and exits with `status`.
fn fail(line: &str, status: i32) -> ! {
    eprintln!("shardlog: {line}");
    std::process::exit(status);
}

fn serve(args: &ServeArgs) -> anyhow::Result<()> {
    let cores = shardlog::shard::runtime::allowed_cores().len();
    // A bad setting (flag or --config file) is a usage error (exit 2), like a bad flag.
    let memory = shardlog::doctor::memory_bytes();
    let config = ServeConfig::resolve_on(args, u32::try_from(cores).unwrap_or(1), memory)
        .map_err(|e| shardlog::cli::UsageError(e.to_string()))?;
    init_logging(config.log_level.as_deref());
    shardlog::doctor::serve_preflight(&config.data_dir, config.shards, config.cache_bytes as u64)?;
    shardlog::server::serve(config)
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

#[cfg(test)]
mod tests {
    use clap::CommandFactory;

    /// clap's own consistency checks over every subcommand (flags defined twice, a global
    /// flag's short name taken by a subcommand, ...).
    #[test]
    fn the_command_tree_is_consistent() {
        super::Cli::command().debug_assert();
    }
}
