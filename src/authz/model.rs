//! Kafka's ACL vocabulary: resource types, pattern types, operations and permission types
//! with Kafka's wire codes (`ResourceType`, `PatternType`, `AclOperation`,
//! `AclPermissionType`), one ACL ([`Acl`], Kafka's `StandardAcl`) and the filters of
//! DescribeAcls/DeleteAcls ([`AclFilter`], Kafka's `AclBindingFilter`).
//!
//! Pure values, used on every shard. Invariants: an [`Acl`] that passed [`Acl::validate`]
//! has a concrete resource type, a LITERAL or PREFIXED pattern, a concrete operation, ALLOW or
//! DENY, a non-empty resource name and a `Type:name` principal; codes that Kafka does not
//! define decode as `Unknown`, never as a panic.

use std::fmt;

/// Kafka's literal resource name of the cluster.
pub const CLUSTER_NAME: &str = "kafka-cluster";
/// A LITERAL ACL with this name matches every resource of its type; as a host, any host.
pub const WILDCARD: &str = "*";
/// The principal that matches every user (`User:*`).
pub const WILDCARD_PRINCIPAL: &str = "User:*";

macro_rules! coded_enum {
    ($(#[$doc:meta])* $name:ident { $($variant:ident = $code:literal : $text:literal),+ $(,)? }) => {
        $(#[$doc])*
        #[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
        pub enum $name {
            $($variant),+
        }

        impl $name {
            pub const ALL: &'static [$name] = &[$($name::$variant),+];

            /// Kafka's wire code.
            #[must_use]
            pub fn code(self) -> i8 {
                match self {
                    $($name::$variant => $code),+
                }
            }

            /// The value of a wire code; a code Kafka does not define is `Unknown`.
            #[must_use]
            pub fn from_code(code: i8) -> Self {
                match code {
                    $($code => $name::$variant,)+
                    _ => $name::Unknown,
                }
            }

            /// Kafka's name (`TOPIC`, `PREFIXED`, `IDEMPOTENT_WRITE`, `ALLOW`).
            #[must_use]
            pub fn name(self) -> &'static str {
                match self {
                    $($name::$variant => $text),+
                }
            }

            /// Parses Kafka's name, case-insensitively, `-` or `_` alike (`TransactionalId`,
            /// `transactional-id`, `TRANSACTIONAL_ID`).
            #[must_use]
            pub fn parse(text: &str) -> Option<Self> {
                let norm: String = text
                    .chars()
                    .filter(|c| *c != '_' && *c != '-')
                    .map(|c| c.to_ascii_uppercase())
                    .collect();
                Self::ALL.iter().copied().find(|v| v.name().replace('_', "") == norm)
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(self.name())
            }
        }
    };
}

coded_enum!(
    /// Kafka's `ResourceType`.
    ResourceType {
        Unknown = 0: "UNKNOWN",
        Any = 1: "ANY",
        Topic = 2: "TOPIC",
        Group = 3: "GROUP",
        Cluster = 4: "CLUSTER",
        TransactionalId = 5: "TRANSACTIONAL_ID",
        DelegationToken = 6: "DELEGATION_TOKEN",
        User = 7: "USER",
    }
);

coded_enum!(
    /// Kafka's `PatternType`: ACLs are LITERAL or PREFIXED; filters may also say ANY (either,
    /// by exact name) or MATCH (every ACL that would apply to the named resource).
    PatternType {
        Unknown = 0: "UNKNOWN",
        Any = 1: "ANY",
        Match = 2: "MATCH",
        Literal = 3: "LITERAL",
        Prefixed = 4: "PREFIXED",
    }
);

coded_enum!(
    /// Kafka's `AclOperation`.
    Operation {
        Unknown = 0: "UNKNOWN",
        Any = 1: "ANY",
        All = 2: "ALL",
        Read = 3: "READ",
        Write = 4: "WRITE",
        Create = 5: "CREATE",
        Delete = 6: "DELETE",
        Alter = 7: "ALTER",
        Describe = 8: "DESCRIBE",
        ClusterAction = 9: "CLUSTER_ACTION",
        DescribeConfigs = 10: "DESCRIBE_CONFIGS",
        AlterConfigs = 11: "ALTER_CONFIGS",
        IdempotentWrite = 12: "IDEMPOTENT_WRITE",
        CreateTokens = 13: "CREATE_TOKENS",
        DescribeTokens = 14: "DESCRIBE_TOKENS",
        TwoPhaseCommit = 15: "TWO_PHASE_COMMIT",
    }
);

coded_enum!(
    /// Kafka's `AclPermissionType`.
    Permission {
        Unknown = 0: "UNKNOWN",
        Any = 1: "ANY",
        Deny = 2: "DENY",
        Allow = 3: "ALLOW",
    }
);

/// The concrete resource types, in the order of [`ResourceType::slot`].
pub const CONCRETE_TYPES: [ResourceType; 6] = [
    ResourceType::Topic,
    ResourceType::Group,
    ResourceType::Cluster,
    ResourceType::TransactionalId,
    ResourceType::DelegationToken,
    ResourceType::User,
];

impl ResourceType {
    /// Index of a concrete type (`None` for UNKNOWN and ANY).
    #[must_use]
    pub fn slot(self) -> Option<usize> {
        CONCRETE_TYPES.iter().position(|t| *t == self)
    }

    /// The operations that apply to resources of this type (Kafka's
    /// `AclEntry.supportedOperations`): what `*_authorized_operations` fields report.
    #[must_use]
    pub fn supported_operations(self) -> &'static [Operation] {
        use Operation as O;
        match self {
            Self::Topic => &[
                O::Read,
                O::Write,
                O::Create,
                O::Describe,
                O::Delete,
                O::Alter,
                O::DescribeConfigs,
                O::AlterConfigs,
            ],
            Self::Group => &[O::Read, O::Describe, O::Delete, O::DescribeConfigs, O::AlterConfigs],
            Self::Cluster => &[
                O::Create,
                O::ClusterAction,
                O::DescribeConfigs,
                O::AlterConfigs,
                O::IdempotentWrite,
                O::Alter,
                O::Describe,
            ],
            Self::TransactionalId => &[O::Describe, O::Write],
            Self::DelegationToken => &[O::Describe],
            Self::User => &[O::CreateTokens, O::DescribeTokens],
            Self::Unknown | Self::Any => &[],
        }
    }
}

impl Operation {
    /// Bit of this operation in a 32-bit `*_authorized_operations` field (Kafka's
    /// `Utils.to32BitField`: bit = the operation's code).
    #[must_use]
    pub fn bit(self) -> i32 {
        1 << self.code()
    }

    /// Whether an ALLOW ACL for `self` grants `wanted` (Kafka's implications: READ, WRITE,
    /// DELETE and ALTER imply DESCRIBE; ALTER_CONFIGS implies DESCRIBE_CONFIGS; ALL implies
    /// everything). A DENY ACL denies only its own operation (or ALL).
    #[must_use]
    pub fn allow_implies(self, wanted: Operation) -> bool {
        use Operation as O;
        match (self, wanted) {
            (O::All, _) => true,
            (have, O::Describe) => {
                matches!(have, O::Describe | O::Read | O::Write | O::Delete | O::Alter)
            }
            (have, O::DescribeConfigs) => matches!(have, O::DescribeConfigs | O::AlterConfigs),
            (have, wanted) => have == wanted,
        }
    }
}

/// One ACL (Kafka's `StandardAcl`): who (`principal`, from `host`) may or may not
/// (`permission`) do `operation` on the resources `pattern` names.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Acl {
    pub resource_type: ResourceType,
    pub resource_name: String,
    pub pattern: PatternType,
    /// `Type:name`, e.g. `User:alice`; `User:*` is every user.
    pub principal: String,
    /// An IP address as Kafka prints it, or `*`.
    pub host: String,
    pub operation: Operation,
    pub permission: Permission,
}

/// Why an ACL cannot be created (Kafka answers each with INVALID_REQUEST).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum AclError {
    #[error("Invalid resourceType {0}")]
    ResourceType(ResourceType),
    #[error("Invalid patternType {0}")]
    PatternType(PatternType),
    #[error("Invalid operation {0}")]
    Operation(Operation),
    #[error("Invalid permissionType {0}")]
    Permission(Permission),
    #[error("Resource name should not be empty")]
    EmptyName,
    #[error("The only valid name for the CLUSTER resource is {CLUSTER_NAME}")]
    ClusterName,
    #[error("Could not parse principal from `{0}` (no colon is present separating the principal type from the principal name)")]
    Principal(String),
    #[error("Invalid empty host")]
    EmptyHost,
}

impl Acl {
    /// Kafka's checks of a new ACL (`AclControlManager.validateNewAcl` and `AclApis`'s
    /// cluster-name check), plus a `Type:name` principal and a non-empty host, without which
    /// Kafka stores an ACL its authorizer then fails on.
    pub fn validate(&self) -> Result<(), AclError> {
        if self.resource_type.slot().is_none() {
            return Err(AclError::ResourceType(self.resource_type));
        }
        if !matches!(self.pattern, PatternType::Literal | PatternType::Prefixed) {
            return Err(AclError::PatternType(self.pattern));
        }
        if matches!(self.operation, Operation::Unknown | Operation::Any) {
            return Err(AclError::Operation(self.operation));
        }
        if !matches!(self.permission, Permission::Allow | Permission::Deny) {
            return Err(AclError::Permission(self.permission));
        }
        if self.resource_name.is_empty() {
            return Err(AclError::EmptyName);
        }
        if self.resource_type == ResourceType::Cluster && self.resource_name != CLUSTER_NAME {
            return Err(AclError::ClusterName);
        }
        if self.principal.split_once(':').is_none() {
            return Err(AclError::Principal(self.principal.clone()));
        }
        if self.host.is_empty() {
            return Err(AclError::EmptyHost);
        }
        Ok(())
    }
}

impl fmt::Display for Acl {
    /// Kafka's `kafka-acls.sh` wording.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "(principal={}, host={}, operation={}, permissionType={}) on \
             ResourcePattern(resourceType={}, name={}, patternType={})",
            self.principal,
            self.host,
            self.operation,
            self.permission,
            self.resource_type,
            self.resource_name,
            self.pattern
        )
    }
}

/// A DescribeAcls/DeleteAcls filter (Kafka's `AclBindingFilter`): `None` fields match
/// anything, as do the ANY values.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AclFilter {
    pub resource_type: ResourceType,
    pub resource_name: Option<String>,
    pub pattern: PatternType,
    pub principal: Option<String>,
    pub host: Option<String>,
    pub operation: Operation,
    pub permission: Permission,
}

impl AclFilter {
    /// The filter that matches every ACL.
    #[must_use]
    pub fn any() -> Self {
        Self {
            resource_type: ResourceType::Any,
            resource_name: None,
            pattern: PatternType::Any,
            principal: None,
            host: None,
            operation: Operation::Any,
            permission: Permission::Any,
        }
    }

    /// Kafka's `validateFilter`: a filter with an UNKNOWN element is INVALID_REQUEST.
    #[must_use]
    pub fn unknown_element(&self) -> Option<&'static str> {
        if self.resource_type == ResourceType::Unknown || self.pattern == PatternType::Unknown {
            Some("Unknown patternFilter.")
        } else if self.operation == Operation::Unknown || self.permission == Permission::Unknown {
            Some("Unknown entryFilter.")
        } else {
            None
        }
    }

    /// Kafka's `AclBindingFilter.matches`: `ResourcePatternFilter.matches` (MATCH: every
    /// ACL that applies to the named resource, LITERAL `*` and PREFIXED ones included) and
    /// `AccessControlEntryFilter.matches`.
    #[must_use]
    pub fn matches(&self, acl: &Acl) -> bool {
        self.matches_pattern(acl) && self.matches_entry(acl)
    }

    fn matches_pattern(&self, acl: &Acl) -> bool {
        if self.resource_type != ResourceType::Any && self.resource_type != acl.resource_type {
            return false;
        }
        if !matches!(self.pattern, PatternType::Any | PatternType::Match)
            && self.pattern != acl.pattern
        {
            return false;
        }
        let Some(name) = &self.resource_name else { return true };
        if self.pattern == PatternType::Any || self.pattern == acl.pattern {
            return *name == acl.resource_name;
        }
        match acl.pattern {
            PatternType::Literal => *name == acl.resource_name || acl.resource_name == WILDCARD,
            PatternType::Prefixed => name.starts_with(acl.resource_name.as_str()),
            _ => false,
        }
    }

    fn matches_entry(&self, acl: &Acl) -> bool {
        self.principal.as_ref().is_none_or(|p| *p == acl.principal)
            && self.host.as_ref().is_none_or(|h| *h == acl.host)
            && (self.operation == Operation::Any || self.operation == acl.operation)
            && (self.permission == Permission::Any || self.permission == acl.permission)
    }
}

/// Kafka's text of a client address for host matching (`InetAddress.getHostAddress`):
/// dotted IPv4, and IPv6 as eight hex groups without zero compression (`0:0:0:0:0:0:0:1`).
#[must_use]
pub fn host_text(addr: std::net::IpAddr) -> String {
    match addr {
        std::net::IpAddr::V4(v4) => v4.to_string(),
        std::net::IpAddr::V6(v6) => match v6.to_ipv4_mapped() {
            // Java answers a mapped address as the IPv4 one.
            Some(v4) => v4.to_string(),
            None => {
                let groups: Vec<String> = v6.segments().iter().map(|g| format!("{g:x}")).collect();
                groups.join(":")
            }
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn acl(rt: ResourceType, name: &str, pattern: PatternType) -> Acl {
        Acl {
            resource_type: rt,
            resource_name: name.into(),
            pattern,
            principal: "User:alice".into(),
            host: "*".into(),
            operation: Operation::Read,
            permission: Permission::Allow,
        }
    }

    #[test]
    fn codes_round_trip_and_unknown_codes_are_unknown() {
        for t in ResourceType::ALL {
            assert_eq!(ResourceType::from_code(t.code()), *t);
        }
        for o in Operation::ALL {
            assert_eq!(Operation::from_code(o.code()), *o);
        }
        assert_eq!(ResourceType::from_code(99), ResourceType::Unknown);
        assert_eq!(Operation::from_code(-3), Operation::Unknown);
        assert_eq!(PatternType::from_code(4), PatternType::Prefixed);
        assert_eq!(Permission::from_code(3), Permission::Allow);
        assert_eq!(Operation::parse("idempotent-write"), Some(Operation::IdempotentWrite));
        assert_eq!(ResourceType::parse("TransactionalId"), Some(ResourceType::TransactionalId));
        assert_eq!(Operation::parse("nope"), None);
    }

    #[test]
    fn implications_follow_kafka() {
        use Operation as O;
        for have in [O::Read, O::Write, O::Delete, O::Alter, O::Describe, O::All] {
            assert!(have.allow_implies(O::Describe), "{have}");
        }
        for have in [O::Create, O::ClusterAction, O::DescribeConfigs, O::AlterConfigs] {
            assert!(!have.allow_implies(O::Describe), "{have}");
        }
        assert!(O::AlterConfigs.allow_implies(O::DescribeConfigs));
        assert!(!O::DescribeConfigs.allow_implies(O::AlterConfigs));
        assert!(!O::Describe.allow_implies(O::Read));
    }

    #[test]
    fn validation_matches_kafka() {
        assert_eq!(acl(ResourceType::Topic, "t", PatternType::Literal).validate(), Ok(()));
        let bad = [
            (acl(ResourceType::Any, "t", PatternType::Literal), "Invalid resourceType ANY"),
            (acl(ResourceType::Topic, "t", PatternType::Match), "Invalid patternType MATCH"),
            (acl(ResourceType::Topic, "", PatternType::Literal), "Resource name should"),
            (acl(ResourceType::Cluster, "c", PatternType::Literal), "The only valid name"),
        ];
        for (a, text) in bad {
            let err = a.validate().expect_err(text).to_string();
            assert!(err.starts_with(text), "{err}");
        }
        let mut a = acl(ResourceType::Topic, "t", PatternType::Literal);
        a.principal = "alice".into();
        assert!(a.validate().is_err());
        a.principal = "User:alice".into();
        a.operation = Operation::Any;
        assert!(a.validate().is_err());
    }

    #[test]
    fn filters_match_as_kafka_does() {
        let lit = acl(ResourceType::Topic, "orders", PatternType::Literal);
        let star = acl(ResourceType::Topic, "*", PatternType::Literal);
        let pre = acl(ResourceType::Topic, "ord", PatternType::Prefixed);
        let f = |pattern, name: &str| AclFilter {
            resource_type: ResourceType::Topic,
            resource_name: Some(name.into()),
            pattern,
            ..AclFilter::any()
        };
        let matched =
            |filter: &AclFilter| [&lit, &star, &pre].iter().filter(|a| filter.matches(a)).count();
        assert_eq!(matched(&f(PatternType::Match, "orders")), 3);
        assert_eq!(matched(&f(PatternType::Any, "orders")), 1);
        assert_eq!(matched(&f(PatternType::Literal, "orders")), 1);
        assert_eq!(matched(&f(PatternType::Prefixed, "orders")), 0);
        assert_eq!(matched(&f(PatternType::Prefixed, "ord")), 1);
        assert_eq!(matched(&f(PatternType::Match, "x")), 1);
        assert_eq!(matched(&AclFilter::any()), 3);
        let by_principal = AclFilter { principal: Some("User:bob".into()), ..AclFilter::any() };
        assert_eq!(matched(&by_principal), 0);
    }

    #[test]
    fn host_text_is_javas() {
        use std::net::IpAddr;
        assert_eq!(host_text("127.0.0.1".parse::<IpAddr>().unwrap()), "127.0.0.1");
        assert_eq!(host_text("::1".parse::<IpAddr>().unwrap()), "0:0:0:0:0:0:0:1");
        assert_eq!(host_text("::ffff:10.0.0.1".parse::<IpAddr>().unwrap()), "10.0.0.1");
    }
}
