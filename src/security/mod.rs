//! Encryption and authentication of Kafka connections: TLS ([`tls`], rustls) and SASL
//! ([`sasl`]: the mechanism negotiation and KIP-368's session lifetime; [`plain`], [`scram`]
//! and [`oauthbearer`]: the mechanisms, with OAUTHBEARER's tokens in [`jwt`] and their keys in
//! [`jwks`]), plus what a listener needs of them ([`ListenerSecurity`]) and who a connection
//! is ([`Session`]); the client side of both for connections to other brokers ([`client`]).
//!
//! What it owns: the per-listener TLS server configs and SASL settings, built once on the
//! main thread at start-up (bad material fails the start) and then shared read-only; the
//! SCRAM exchange state of each authenticating connection; an OAUTHBEARER listener's key set
//! (shared by the shards, reloaded when its file changes). Which shard: every shard; a
//! handshake and a SASL exchange run entirely on the shard that accepted the connection,
//! nothing about them crosses shards (SCRAM credentials come from that shard's metadata
//! image). Invariants: a connection on a SASL listener reaches no request handler before it
//! authenticated; the principal of a connection is set once, by its authentication (a
//! KIP-368 re-authentication may not change it), and every request handler sees it
//! ([`Session`]). Kafka error codes are chosen at the protocol
//! boundary (`server::sasl_gate`), not here.

pub mod client;
pub mod jwks;
pub mod jwt;
pub mod oauthbearer;
pub mod plain;
pub mod principal;
pub mod sasl;
pub mod scram;
pub mod tls;

use std::cell::RefCell;
use std::rc::Rc;
use std::sync::Arc;

use crate::quota::Principal;

/// What a listener asks of its connections beyond TCP.
#[derive(Clone, Debug, Default)]
pub struct ListenerSecurity {
    /// TLS (SSL, SASL_SSL listeners).
    pub tls: Option<Arc<rustls::ServerConfig>>,
    /// SASL (SASL_PLAINTEXT, SASL_SSL listeners).
    pub sasl: Option<Arc<sasl::SaslConfig>>,
    /// `ssl.principal.mapping.rules`: a client certificate's DN to its principal.
    pub principal_mapping: Arc<principal::PrincipalMapper>,
}

/// One connection's identity as its request handlers see it: the listener it came in on,
/// the principal it authenticated as (`User:ANONYMOUS` until then, and on PLAINTEXT), the
/// client's address as ACL hosts name it, and the authorizer's decisions for it so far.
#[derive(Debug)]
pub struct Session {
    /// The listener's name (upper case), e.g. to answer Metadata with its endpoints.
    pub listener: Rc<str>,
    principal: RefCell<Principal>,
    /// `User:<name>`, as ACLs and `super.users` name the principal.
    acl_principal: RefCell<Rc<str>>,
    /// The client's IP address as Kafka prints it (ACL host matching); empty if unknown.
    host: Rc<str>,
    /// Authorization decisions of this connection (`server::authz`), reset when the ACLs
    /// change or the principal does.
    pub authz_cache: RefCell<crate::authz::DecisionCache>,
}

impl Session {
    #[must_use]
    pub fn new(listener: Rc<str>, principal: Principal) -> Self {
        let acl_principal = RefCell::new(acl_name(&principal));
        Self {
            listener,
            principal: RefCell::new(principal),
            acl_principal,
            host: "".into(),
            authz_cache: RefCell::default(),
        }
    }

    /// The same session for a client at `peer`.
    #[must_use]
    pub fn with_peer(mut self, peer: Option<std::net::IpAddr>) -> Self {
        self.host = peer.map_or_else(String::new, crate::authz::host_text).into();
        self
    }

    /// The principal now (cloned: cheap, an `Rc`).
    #[must_use]
    pub fn principal(&self) -> Principal {
        self.principal.borrow().clone()
    }

    /// The principal as ACLs name it (`User:alice`).
    #[must_use]
    pub fn acl_principal(&self) -> Rc<str> {
        self.acl_principal.borrow().clone()
    }

    /// The client's address as ACL hosts name it.
    #[must_use]
    pub fn host(&self) -> &str {
        &self.host
    }

    /// Set by a successful authentication.
    pub fn authenticated(&self, principal: Principal) {
        *self.acl_principal.borrow_mut() = acl_name(&principal);
        *self.principal.borrow_mut() = principal;
        *self.authz_cache.borrow_mut() = crate::authz::DecisionCache::default();
    }
}

/// Kafka's principal type of every authenticated (and anonymous) connection here is `User`.
fn acl_name(principal: &Principal) -> Rc<str> {
    format!("User:{}", principal.name()).into()
}
