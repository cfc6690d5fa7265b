//! What every `shardlog` subcommand shares on the command line: the broker address flags
//! ([`ClientArgs`] for the Kafka port, [`AdminArgs`] for the admin/metrics endpoint), the
//! duration and size parsers ([`units`]), and how an error becomes one line and an exit
//! status (2 for usage errors, 1 for runtime failures); and the admin subcommands over
//! the Kafka protocol, one file each ([`configs`], [`topics`], [`elect_leaders`],
//! [`groups`], [`quotas`], [`acls`] (with [`sasl`] logins), [`transactions`], [`log_dirs`],
//! [`shards`]), above the subsystems
//! they speak to so that no subsystem imports the command line.
//!
//! Runs on the main thread of the CLI process before anything else. Invariant: both
//! address flags are `global`, so they are accepted anywhere on the line (before the
//! subcommand, after it, after its sub-subcommand); [`check_placement`] then refuses one
//! given to a subcommand that does not read it, instead of ignoring it.

pub mod acls;
pub mod certs;
pub mod configs;
pub mod elect_leaders;
pub mod format;
pub mod groups;
pub mod log_dirs;
pub mod quotas;
pub mod sasl;
pub mod shards;
pub mod topics;
pub mod transactions;
/// Unit parsing lives with the config it serves first; the subcommands share it.
pub use crate::config::units;

use clap::error::ErrorKind;

/// Where the client subcommands find a broker when no flag names one.
pub const BOOTSTRAP_DEFAULT: &str = "127.0.0.1:9092";
/// Where `top` finds the admin endpoint when no flag names one.
pub const ADMIN_DEFAULT: &str = "127.0.0.1:9644";

/// The Kafka address of a client subcommand (`groups`, `configs`, `bench`), under Kafka's
/// name. Flattened into each of them and into the top level, all `global`.
#[derive(clap::Args, Debug, Clone, Default)]
pub struct ClientArgs {
    /// host:port of a broker's Kafka listener [default: 127.0.0.1:9092].
    #[arg(
        long = "bootstrap-server",
        visible_alias = "bootstrap",
        short = 'b',
        value_name = "HOST:PORT",
        global = true
    )]
    pub bootstrap_server: Option<String>,
}

impl ClientArgs {
    /// The address to connect to: the flag's, else [`BOOTSTRAP_DEFAULT`].
    #[must_use]
    pub fn bootstrap(&self) -> &str {
        self.bootstrap_server.as_deref().unwrap_or(BOOTSTRAP_DEFAULT)
    }
}

/// The admin/metrics endpoint of `top` (a broker's `--admin-listen`, not its Kafka port).
#[derive(clap::Args, Debug, Clone, Default)]
pub struct AdminArgs {
    /// host:port of the broker's admin endpoint (its --admin-listen) [default: 127.0.0.1:9644].
    #[arg(long = "admin", value_name = "HOST:PORT", global = true)]
    pub admin: Option<String>,
}

impl AdminArgs {
    /// The address to poll: the flag's, else [`ADMIN_DEFAULT`].
    #[must_use]
    pub fn admin(&self) -> &str {
        self.admin.as_deref().unwrap_or(ADMIN_DEFAULT)
    }
}

/// Which address flags a subcommand reads, for [`check_placement`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Uses {
    Bootstrap,
    Admin,
    Neither,
}

/// Refuses an address flag given to a subcommand that does not read it: a Kafka address
/// must not silently become an admin address (or be ignored by `serve`).
pub fn check_placement(
    command: &str,
    uses: Uses,
    client: &ClientArgs,
    admin: &AdminArgs,
) -> Result<(), UsageError> {
    if let (Some(addr), false) = (&client.bootstrap_server, uses == Uses::Bootstrap) {
        let hint = match uses {
            Uses::Admin => format!(
                "{command} reads the admin endpoint, not the Kafka port: give --admin HOST:PORT \
                 (the broker's --admin-listen)"
            ),
            _ => format!("{command} takes no broker address"),
        };
        return Err(UsageError(format!("--bootstrap-server {addr} is not an option here: {hint}")));
    }
    if let (Some(addr), false) = (&admin.admin, uses == Uses::Admin) {
        let hint = match uses {
            Uses::Bootstrap => format!(
                "{command} speaks Kafka: give --bootstrap-server HOST:PORT (the Kafka listener)"
            ),
            _ => format!("{command} takes no admin address"),
        };
        return Err(UsageError(format!("--admin {addr} is not an option here: {hint}")));
    }
    Ok(())
}

/// An argument our own validation refused (clap's parser accepted it): exit status 2, like
/// clap's usage errors. The message is one line and says what to give instead.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct UsageError(pub String);

/// The exit status of a failed command: 2 when any error in the chain is a
/// [`UsageError`], 1 for runtime failures.
#[must_use]
pub fn exit_status(err: &anyhow::Error) -> i32 {
    if err.chain().any(|e| e.downcast_ref::<UsageError>().is_some()) {
        2
    } else {
        1
    }
}

/// An error as one line: its chain joined with `: `, a cause skipped when the message
/// before it already quotes it (errors that print their source), line breaks folded.
#[must_use]
pub fn one_line(err: &anyhow::Error) -> String {
    let mut line = String::new();
    for cause in err.chain() {
        let text = cause.to_string();
        if line.contains(&text) {
            continue;
        }
        if !line.is_empty() {
            line.push_str(": ");
        }
        line.push_str(&text);
    }
    fold(&line)
}

fn fold(text: &str) -> String {
    text.lines().map(str::trim).filter(|l| !l.is_empty()).collect::<Vec<_>>().join("; ")
}

/// The subcommand path of `argv` (e.g. `shardlog groups describe`), found by walking
/// `command`'s subcommands; used to point at the right `--help`.
#[must_use]
pub fn command_path(command: &clap::Command, argv: &[String]) -> String {
    let mut path = vec![command.get_name().to_string()];
    let mut current = command;
    for arg in argv.iter().skip(1) {
        if let Some(sub) = current.find_subcommand(arg) {
            path.push(sub.get_name().to_string());
            current = sub;
        }
    }
    path.join(" ")
}

/// A clap error as our one line (message, clap's tips, and which `--help` to read) and
/// its exit status. Help and version requests are not errors: `None`, clap prints them.
#[must_use]
pub fn render_clap_error(err: &clap::Error, path: &str) -> Option<(String, i32)> {
    // A subcommand given without its sub-subcommand prints its help (exit 2): the list
    // of what may follow is the hint.
    let help_kinds = [
        ErrorKind::DisplayHelp,
        ErrorKind::DisplayVersion,
        ErrorKind::DisplayHelpOnMissingArgumentOrSubcommand,
    ];
    if help_kinds.contains(&err.kind()) || !err.use_stderr() {
        return None;
    }
    let text = err.render().to_string();
    let mut lines = text.lines().map(str::trim).filter(|l| !l.is_empty());
    let first = lines.next().unwrap_or("invalid arguments");
    let mut line = first.strip_prefix("error: ").unwrap_or(first).to_string();
    for extra in lines {
        if extra.starts_with("Usage:") || extra.starts_with("For more information") {
            continue;
        }
        line.push_str("; ");
        line.push_str(extra);
    }
    line.push_str(&format!(" (see '{path} --help')"));
    Some((line, err.exit_code()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::{CommandFactory, Parser, Subcommand};

    #[derive(Parser, Debug)]
    #[command(name = "t")]
    struct Top {
        #[command(flatten)]
        client: ClientArgs,
        #[command(subcommand)]
        command: Cmd,
    }

    #[derive(Subcommand, Debug)]
    enum Cmd {
        Groups(Groups),
        Serve,
    }

    #[derive(clap::Args, Debug)]
    struct Groups {
        #[command(flatten)]
        client: ClientArgs,
        #[command(subcommand)]
        command: GroupsCmd,
    }

    #[derive(Subcommand, Debug)]
    enum GroupsCmd {
        Describe { group: String },
    }

    fn bootstrap_of(argv: &[&str]) -> String {
        let top = Top::try_parse_from(argv).expect("parses");
        let Cmd::Groups(g) = top.command else { panic!("groups") };
        assert_eq!(top.client.bootstrap(), g.client.bootstrap(), "one value at every level");
        g.client.bootstrap().to_string()
    }

    #[test]
    fn bootstrap_is_accepted_anywhere_under_three_names() {
        for argv in [
            &["t", "--bootstrap-server", "h:1", "groups", "describe", "g"][..],
            &["t", "groups", "--bootstrap-server", "h:1", "describe", "g"],
            &["t", "groups", "describe", "g", "--bootstrap-server", "h:1"],
            &["t", "groups", "describe", "--bootstrap", "h:1", "g"],
            &["t", "groups", "describe", "g", "-b", "h:1"],
            &["t", "-b", "h:1", "groups", "describe", "g"],
        ] {
            assert_eq!(bootstrap_of(argv), "h:1", "{argv:?}");
        }
        assert_eq!(bootstrap_of(&["t", "groups", "describe", "g"]), BOOTSTRAP_DEFAULT);
    }

    #[test]
    fn a_misplaced_address_is_a_usage_error() {
        let given = ClientArgs { bootstrap_server: Some("h:9092".into()) };
        let none = AdminArgs::default();
        let err = check_placement("top", Uses::Admin, &given, &none).expect_err("refused");
        assert!(err.0.contains("--admin HOST:PORT"), "{err}");
        assert!(check_placement("serve", Uses::Neither, &given, &none).is_err());
        assert!(check_placement("groups", Uses::Bootstrap, &given, &none).is_ok());
        let admin = AdminArgs { admin: Some("h:9644".into()) };
        let err = check_placement("groups", Uses::Bootstrap, &ClientArgs::default(), &admin)
            .expect_err("refused");
        assert!(err.0.contains("--bootstrap-server HOST:PORT"), "{err}");
        let err = anyhow::Error::new(err).context("while parsing");
        assert_eq!(exit_status(&err), 2);
        assert_eq!(exit_status(&anyhow::anyhow!("connection refused")), 1);
    }

    #[test]
    fn one_line_skips_a_cause_its_error_already_quotes() {
        #[derive(Debug, thiserror::Error)]
        #[error("connecting to h:1: {source}")]
        struct Quoting {
            source: std::io::Error,
        }
        let refused = || std::io::Error::new(std::io::ErrorKind::ConnectionRefused, "refused");
        let err = anyhow::Error::new(Quoting { source: refused() }).context("listing groups");
        assert_eq!(one_line(&err), "listing groups: connecting to h:1: refused");
        let err = anyhow::Error::new(refused()).context("line one\nline two");
        assert_eq!(one_line(&err), "line one; line two: refused");
    }

    #[test]
    fn clap_errors_become_one_line_naming_the_help_to_read() {
        let argv: Vec<String> =
            ["t", "groups", "describe", "--bogus"].iter().map(|s| (*s).to_string()).collect();
        let err = Top::try_parse_from(&argv).expect_err("unknown flag");
        let path = command_path(&Top::command(), &argv);
        assert_eq!(path, "t groups describe");
        let (line, status) = render_clap_error(&err, &path).expect("an error");
        assert_eq!(status, 2);
        assert!(!line.contains('\n'), "{line}");
        assert!(line.contains("'--bogus'") && line.ends_with("(see 't groups describe --help')"));
        let help = Top::try_parse_from(["t", "--help"]).expect_err("help");
        assert!(render_clap_error(&help, "t").is_none());
    }
}
