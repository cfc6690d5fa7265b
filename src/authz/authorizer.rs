//! [`Authorizer`]: Kafka's `StandardAuthorizer` decision over an [`AclSet`]: super users are
//! allowed everything; otherwise every ACL covering the resource (LITERAL name, PREFIXED
//! prefixes, LITERAL `*`) whose principal (or `User:*`) and host (or `*`) match is weighed:
//! a matching DENY wins, then a matching ALLOW; with no ACL on the resource at all the
//! answer is `allow.everyone.if.no.acl.found`, and with ACLs on it but none matching, deny.
//!
//! Pure; every shard holds the same read-only authorizer (built from the broker settings at
//! start) and reads the ACLs from its metadata image. No allocation per check.

use std::collections::HashSet;

use super::model::{
    Operation, PatternType, Permission, ResourceType, WILDCARD, WILDCARD_PRINCIPAL,
};
use super::set::{AclSet, Entry};

/// `authorizer.class.name` values that turn authorization on: KRaft's and ZooKeeper-era
/// Kafka's (both mean Kafka's ACL semantics here).
pub const AUTHORIZER_CLASS_NAMES: [&str; 2] = [
    "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
    "kafka.security.authorizer.AclAuthorizer",
];

/// Who asks: the connection's principal (`User:alice`) and its address as Kafka prints it.
#[derive(Clone, Copy, Debug)]
pub struct Who<'a> {
    pub principal: &'a str,
    pub host: &'a str,
}

/// Why a decision came out as it did (for the denial log).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Rule {
    SuperUser,
    /// A matching ACL decided.
    MatchingAcl(Permission),
    /// No ACL names the resource: `allow.everyone.if.no.acl.found`.
    NoAclOnResource,
    /// ACLs name the resource, none matches this principal, host and operation.
    NoMatchingAcl,
}

/// A decision and its rule.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Decision {
    pub allowed: bool,
    pub rule: Rule,
}

/// Kafka's `StandardAuthorizer` settings. See the module docs.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Authorizer {
    super_users: HashSet<String>,
    allow_if_no_acl: bool,
}

/// Why `super.users` cannot be read.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("expected a string in format principalType:principalName but got {0}")]
pub struct BadPrincipal(pub String);

impl Authorizer {
    /// From `super.users` (principals separated by `;`, Kafka's format) and
    /// `allow.everyone.if.no.acl.found`.
    pub fn new(super_users: &str, allow_if_no_acl: bool) -> Result<Self, BadPrincipal> {
        let mut set = HashSet::new();
        for p in super_users.split(';').map(str::trim).filter(|p| !p.is_empty()) {
            match p.split_once(':') {
                Some((kind, _)) if !kind.is_empty() => set.insert(p.to_string()),
                _ => return Err(BadPrincipal(p.to_string())),
            };
        }
        Ok(Self { super_users: set, allow_if_no_acl })
    }

    #[must_use]
    pub fn is_super_user(&self, principal: &str) -> bool {
        self.super_users.contains(principal)
    }

    #[must_use]
    pub fn allow_if_no_acl(&self) -> bool {
        self.allow_if_no_acl
    }

    /// May `who` do `op` on resource `name` of type `resource_type`?
    #[must_use]
    pub fn authorize(
        &self,
        acls: &AclSet,
        who: Who<'_>,
        op: Operation,
        resource_type: ResourceType,
        name: &str,
    ) -> Decision {
        if self.is_super_user(who.principal) {
            return Decision { allowed: true, rule: Rule::SuperUser };
        }
        let (mut on_resource, mut allow, mut deny) = (false, false, false);
        acls.for_each_covering(resource_type, name, |e| {
            on_resource = true;
            match entry_result(e, who, op) {
                Some(Permission::Deny) => {
                    deny = true;
                    false
                }
                Some(_) => {
                    allow = true;
                    true
                }
                None => true,
            }
        });
        let rule = if deny {
            Rule::MatchingAcl(Permission::Deny)
        } else if allow {
            Rule::MatchingAcl(Permission::Allow)
        } else if on_resource {
            Rule::NoMatchingAcl
        } else {
            Rule::NoAclOnResource
        };
        let allowed = match rule {
            Rule::MatchingAcl(p) => p == Permission::Allow,
            Rule::NoAclOnResource => self.allow_if_no_acl,
            Rule::SuperUser => true,
            Rule::NoMatchingAcl => false,
        };
        Decision { allowed, rule }
    }

    /// Kafka's `Authorizer.authorizeByResourceType` (its default method, which the
    /// `StandardAuthorizer` keeps): may `who` do `op` on *some* resource of this type? Allowed
    /// if the hard-coded name `hardcode` is allowed (super users, the no-ACL default), or an
    /// ALLOW ACL (operation `op` or ALL, no implications) names a resource that no DENY
    /// covers: a LITERAL `*` DENY denies all, a LITERAL allow is dominated by an equal
    /// LITERAL deny or a PREFIXED deny of any of its prefixes, a PREFIXED allow by a PREFIXED
    /// deny of any of its prefixes.
    #[must_use]
    pub fn authorize_by_resource_type(
        &self,
        acls: &AclSet,
        who: Who<'_>,
        op: Operation,
        resource_type: ResourceType,
    ) -> bool {
        if self.authorize(acls, who, op, resource_type, "hardcode").allowed {
            return true;
        }
        let mut deny: [HashSet<&str>; 2] = [HashSet::new(), HashSet::new()];
        let mut allow: [HashSet<&str>; 2] = [HashSet::new(), HashSet::new()];
        let kind = |p: PatternType| usize::from(p == PatternType::Prefixed);
        // A LITERAL `*` DENY anywhere denies, even after a LITERAL `*` ALLOW.
        let mut wildcard_allow = false;
        for acl in acls.of_type(resource_type) {
            let host_ok = acl.host == who.host || acl.host == WILDCARD;
            let principal_ok =
                acl.principal == who.principal || acl.principal == WILDCARD_PRINCIPAL;
            let op_ok = acl.operation == op || acl.operation == Operation::All;
            if !(host_ok && principal_ok && op_ok) {
                continue;
            }
            let name = acl.resource_name.as_str();
            let wildcard = acl.pattern == PatternType::Literal && name == WILDCARD;
            match acl.permission {
                Permission::Deny if wildcard => return false,
                Permission::Deny => {
                    deny[kind(acl.pattern)].insert(name);
                }
                Permission::Allow if wildcard => wildcard_allow = true,
                Permission::Allow => {
                    allow[kind(acl.pattern)].insert(name);
                }
                _ => {}
            }
        }
        if wildcard_allow {
            return true;
        }
        let dominated = |name: &str| {
            name.char_indices()
                .map(|(i, c)| &name[..i + c.len_utf8()])
                .any(|prefix| deny[1].contains(prefix))
        };
        allow[0].iter().any(|n| !deny[0].contains(n) && !dominated(n))
            || allow[1].iter().any(|n| !dominated(n))
    }

    /// The operations `who` may do on the resource, as a 32-bit field (bit = operation
    /// code) of the type's supported operations (Kafka's `authorizedOperations`).
    #[must_use]
    pub fn authorized_operations(
        &self,
        acls: &AclSet,
        who: Who<'_>,
        resource_type: ResourceType,
        name: &str,
    ) -> i32 {
        resource_type
            .supported_operations()
            .iter()
            .filter(|op| self.authorize(acls, who, **op, resource_type, name).allowed)
            .fold(0, |bits, op| bits | op.bit())
    }
}

/// Kafka's `findResult`: what one ACL entry on the resource says about `op` for `who`
/// (`None`: it does not apply). ALLOW entries grant their implications; DENY entries deny
/// only their own operation (or ALL).
fn entry_result(e: &Entry, who: Who<'_>, op: Operation) -> Option<Permission> {
    if *e.principal != *who.principal && &*e.principal != WILDCARD_PRINCIPAL {
        return None;
    }
    if &*e.host != WILDCARD && *e.host != *who.host {
        return None;
    }
    let applies = match e.permission {
        Permission::Allow => e.operation.allow_implies(op),
        _ => e.operation == op || e.operation == Operation::All,
    };
    applies.then_some(e.permission)
}

/// The per-type bit field of every supported operation (what Kafka reports without an
/// authorizer).
#[must_use]
pub fn all_operations(resource_type: ResourceType) -> i32 {
    resource_type.supported_operations().iter().fold(0, |bits, op| bits | op.bit())
}
