//! Cluster membership settings of `serve`, under Kafka's names: `process.roles`,
//! `controller.quorum.voters` (`--controller-quorum-voters 1@127.0.0.1:9093,...`), the node id,
//! and Shardlog's `--controller-listen HOST:PORT`, the quorum's own port (it speaks Shardlog's
//! Raft framing, not the Kafka protocol).
//!
//! Resolved once on the main thread at start-up. Invariants after [`ClusterConfig::resolve`]:
//! voter ids are unique and positive; a node with the controller role is one of the voters and
//! listens on its voter port; a broker-only node is not a voter and has voters to reach; no
//! voters at all means a single node that is its own one-voter quorum (today's default).

use std::net::{SocketAddr, ToSocketAddrs};

use super::{invalid, ConfigError};
use crate::types::NodeId;

/// One member of `controller.quorum.voters`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Voter {
    pub id: NodeId,
    pub host: String,
    pub port: u16,
    /// `host:port` resolved at start.
    pub addr: SocketAddr,
}

/// The roles and quorum of this process. See the module docs.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ClusterConfig {
    /// Serves Kafka clients and hosts partition replicas.
    pub broker: bool,
    /// Votes in the metadata quorum (and may become the active controller).
    pub controller: bool,
    /// Sorted by id; empty: a single node, its own quorum.
    pub voters: Vec<Voter>,
    /// Where the quorum listens (a voter's own `controller.quorum.voters` port).
    pub controller_listen: Option<SocketAddr>,
    /// `controller.quorum.election.timeout.ms`.
    pub election_timeout_ms: u64,
}

impl Default for ClusterConfig {
    fn default() -> Self {
        Self {
            broker: true,
            controller: true,
            voters: Vec::new(),
            controller_listen: None,
            election_timeout_ms: 1000,
        }
    }
}

/// What [`ClusterConfig::resolve`] reads.
pub struct ClusterInput<'a> {
    pub roles: &'a str,
    pub voters: Option<&'a str>,
    pub controller_listen: Option<SocketAddr>,
    /// The node id as given explicitly (flag or file), if it was.
    pub node_id_given: Option<i32>,
    pub election_timeout_ms: u64,
}

impl ClusterConfig {
    /// Whether this node is a one-voter quorum of its own (no voters configured).
    #[must_use]
    pub fn is_single_node(&self) -> bool {
        self.voters.is_empty()
    }

    /// The voter set as every node must agree on it: `id@host:port`, sorted by id.
    #[must_use]
    pub fn voters_text(&self) -> String {
        let parts: Vec<String> =
            self.voters.iter().map(|v| format!("{}@{}:{}", v.id, v.host, v.port)).collect();
        parts.join(",")
    }

    /// Checks the combination. `node` is the node id in force.
    pub fn resolve(input: &ClusterInput<'_>, node: NodeId) -> Result<Self, ConfigError> {
        let roles: Vec<&str> =
            input.roles.split(',').map(str::trim).filter(|r| !r.is_empty()).collect();
        let broker = roles.contains(&"broker");
        let controller = roles.contains(&"controller");
        if !broker && !controller {
            return Err(invalid("process.roles", "must name broker, controller or both"));
        }
        let voters = match input.voters.map(str::trim).filter(|v| !v.is_empty()) {
            Some(text) => parse_voters(text)?,
            None => Vec::new(),
        };
        let election_timeout_ms = input.election_timeout_ms;
        if voters.is_empty() {
            if !controller {
                return Err(invalid(
                    "process.roles",
                    "a broker-only node (process.roles=broker) needs controller.quorum.voters \
                     to find the controllers",
                ));
            }
            if !broker {
                return Err(invalid(
                    "process.roles",
                    "a controller-only node needs controller.quorum.voters (without voters a \
                     node is a single broker and controller: process.roles=broker,controller)",
                ));
            }
            return Ok(Self {
                broker,
                controller,
                voters,
                controller_listen: input.controller_listen,
                election_timeout_ms,
            });
        }
        if input.node_id_given.is_none() {
            return Err(invalid(
                "node.id",
                "--node-id (node_id in the file) is required when controller.quorum.voters is \
                 set",
            ));
        }
        if node.0 <= 0 {
            return Err(invalid("node.id", "must be at least 1 in a cluster (Raft reserves 0)"));
        }
        let mine = voters.iter().find(|v| v.id == node);
        let controller_listen = match (controller, mine) {
            (true, None) => {
                return Err(invalid(
                    "controller.quorum.voters",
                    &format!(
                        "node {node} has the controller role but is not among the voters \
                         ({})",
                        input.voters.unwrap_or_default()
                    ),
                ))
            }
            (false, Some(_)) => {
                return Err(invalid(
                    "process.roles",
                    &format!(
                        "node {node} is listed in controller.quorum.voters but its roles lack \
                         controller"
                    ),
                ))
            }
            (true, Some(v)) => match input.controller_listen {
                Some(listen) if listen.port() != v.port => {
                    return Err(invalid(
                        "controller_listen",
                        &format!(
                            "--controller-listen {listen} does not use port {} that \
                             controller.quorum.voters gives node {node}",
                            v.port
                        ),
                    ))
                }
                Some(listen) => Some(listen),
                None => Some(v.addr),
            },
            (false, None) => None,
        };
        Ok(Self { broker, controller, voters, controller_listen, election_timeout_ms })
    }
}

/// Parses `1@host:port,2@host:port`.
pub fn parse_voters(text: &str) -> Result<Vec<Voter>, ConfigError> {
    let name = "controller.quorum.voters";
    let mut voters: Vec<Voter> = Vec::new();
    for part in text.split(',').map(str::trim).filter(|p| !p.is_empty()) {
        let bad =
            |why: &str| invalid(name, &format!("bad entry {part:?}: {why} (want id@host:port)"));
        let (id, endpoint) = part.split_once('@').ok_or_else(|| bad("no '@'"))?;
        let id: i32 = id.trim().parse().map_err(|_| bad("the id is not an integer"))?;
        if id <= 0 {
            return Err(bad("ids start at 1"));
        }
        let (host, port) = endpoint.rsplit_once(':').ok_or_else(|| bad("no port"))?;
        let host = host.trim_start_matches('[').trim_end_matches(']').to_string();
        let port: u16 = port.parse().map_err(|_| bad("bad port"))?;
        if host.is_empty() || port == 0 {
            return Err(bad("needs a host and a non-zero port"));
        }
        let addr = (host.as_str(), port)
            .to_socket_addrs()
            .ok()
            .and_then(|mut a| a.next())
            .ok_or_else(|| bad("cannot resolve the host"))?;
        if voters.iter().any(|v| v.id.0 == id) {
            return Err(bad("the id is listed twice"));
        }
        voters.push(Voter { id: NodeId(id), host, port, addr });
    }
    if voters.is_empty() {
        return Err(invalid(name, "no voters listed"));
    }
    voters.sort_by_key(|v| v.id);
    Ok(voters)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn input<'a>(roles: &'a str, voters: Option<&'a str>, node: Option<i32>) -> ClusterInput<'a> {
        ClusterInput {
            roles,
            voters,
            controller_listen: None,
            node_id_given: node,
            election_timeout_ms: 1000,
        }
    }

    const VOTERS: &str = "3@127.0.0.1:9293,1@127.0.0.1:9093,2@localhost:9193";

    #[test]
    fn single_node_default() {
        let c = ClusterConfig::resolve(&input("broker,controller", None, None), NodeId(0)).unwrap();
        assert!(c.is_single_node() && c.broker && c.controller);
    }

    #[test]
    fn voters_sorted_and_listen_defaults_to_own_entry() {
        let c =
            ClusterConfig::resolve(&input("broker,controller", Some(VOTERS), Some(2)), NodeId(2))
                .unwrap();
        assert_eq!(c.voters.iter().map(|v| v.id.0).collect::<Vec<_>>(), vec![1, 2, 3]);
        assert_eq!(c.controller_listen.unwrap().port(), 9193);
        assert_eq!(c.voters_text(), "1@127.0.0.1:9093,2@localhost:9193,3@127.0.0.1:9293");
    }

    #[test]
    fn refusals_name_the_setting() {
        let err = |i: ClusterInput<'_>, n: i32| {
            ClusterConfig::resolve(&i, NodeId(n)).unwrap_err().to_string()
        };
        assert!(err(input("broker,controller", Some(VOTERS), None), 1).contains("--node-id"));
        assert!(err(input("broker,controller", Some(VOTERS), Some(4)), 4).contains("not among"));
        assert!(err(input("broker", Some(VOTERS), Some(1)), 1).contains("lack"));
        assert!(err(input("broker", None, Some(1)), 1).contains("broker-only"));
        assert!(err(input("controller", None, None), 0).contains("controller-only"));
        assert!(err(input("broker,controller", Some("1@h"), Some(1)), 1).contains("no port"));
        assert!(err(input("broker,controller", Some("1@127.0.0.1:1,1@127.0.0.1:2"), Some(1)), 1)
            .contains("twice"));
        assert!(err(input("broker,controller", Some("0@127.0.0.1:1"), Some(1)), 1)
            .contains("start at 1"));
        let mut i = input("broker,controller", Some(VOTERS), Some(1));
        i.controller_listen = Some("127.0.0.1:9999".parse().unwrap());
        assert!(err(i, 1).contains("does not use port 9093"));
    }

    #[test]
    fn broker_only_node_is_not_a_voter() {
        let c = ClusterConfig::resolve(&input("broker", Some(VOTERS), Some(4)), NodeId(4)).unwrap();
        assert!(c.broker && !c.controller && c.controller_listen.is_none());
    }
}
