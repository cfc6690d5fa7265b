//! Authorization: Kafka's ACL model ([`model`]), the cluster's ACLs indexed for fast checks
//! ([`set::AclSet`]), Kafka's `StandardAuthorizer` decision ([`authorizer::Authorizer`]) and a
//! connection's decision cache ([`cache::DecisionCache`]).
//!
//! Pure and runtime-free (the lowest layer: the controller stores the set, the server
//! checks requests against it). Which shard: the ACL set is built on the controller shard
//! (metadata records) and published read-only in every shard's metadata image; checks run on
//! the connection's shard. Invariants: decisions follow Kafka's `StandardAuthorizerData`
//! exactly (DENY wins, ALLOW implications, `User:*`, host `*`, super users,
//! `allow.everyone.if.no.acl.found` only when no ACL names the resource); Kafka error codes
//! are chosen by the server, not here.

pub mod authorizer;
pub mod cache;
pub mod model;
pub mod set;

#[cfg(test)]
mod tests;

pub use authorizer::{Authorizer, Decision, Rule, Who, AUTHORIZER_CLASS_NAMES};
pub use cache::DecisionCache;
pub use model::{
    host_text, Acl, AclError, AclFilter, Operation, PatternType, Permission, ResourceType,
    CLUSTER_NAME,
};
pub use set::AclSet;
