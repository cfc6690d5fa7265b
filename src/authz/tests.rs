//! The authorizer's decisions: Kafka's cases one by one, then a property test against a
//! plain model that walks every ACL (what `StandardAuthorizerData` computes, written the
//! simple way).

use proptest::prelude::*;
use uuid::Uuid;

use super::*;

const ALICE: Who<'static> = Who { principal: "User:alice", host: "10.0.0.1" };

fn acl(
    rt: ResourceType,
    name: &str,
    pattern: PatternType,
    principal: &str,
    op: Operation,
    permission: Permission,
) -> Acl {
    Acl {
        resource_type: rt,
        resource_name: name.into(),
        pattern,
        principal: principal.into(),
        host: "*".into(),
        operation: op,
        permission,
    }
}

fn set_of(acls: Vec<Acl>) -> AclSet {
    let mut set = AclSet::default();
    for (i, a) in acls.into_iter().enumerate() {
        set.insert(Uuid::from_u128(i as u128 + 1), a).expect("distinct ACLs");
    }
    set
}

fn topic(name: &str, pattern: PatternType, principal: &str, op: Operation, p: Permission) -> Acl {
    acl(ResourceType::Topic, name, pattern, principal, op, p)
}

use Operation as O;
use PatternType::{Literal as LIT, Prefixed as PRE};
use Permission::{Allow as ALLOW, Deny as DENY};

fn allowed(a: &Authorizer, set: &AclSet, who: Who<'_>, op: Operation, name: &str) -> bool {
    a.authorize(set, who, op, ResourceType::Topic, name).allowed
}

#[test]
fn no_acl_means_the_default_and_super_users_pass() {
    let deny_default = Authorizer::new("User:admin; User:CN=broker,O=x", false).unwrap();
    let allow_default = Authorizer::new("", true).unwrap();
    let empty = AclSet::default();
    assert!(!allowed(&deny_default, &empty, ALICE, O::Read, "t"));
    assert!(allowed(&allow_default, &empty, ALICE, O::Read, "t"));
    let admin = Who { principal: "User:admin", host: "1.2.3.4" };
    let deny_all = set_of(vec![topic("*", LIT, "User:*", O::All, DENY)]);
    assert!(allowed(&deny_default, &deny_all, admin, O::Write, "t"));
    assert!(deny_default.is_super_user("User:CN=broker,O=x"));
    // ACLs on the resource for someone else: no longer "no ACL found".
    let bobs = set_of(vec![topic("t", LIT, "User:bob", O::Read, ALLOW)]);
    let d = allow_default.authorize(&bobs, ALICE, O::Read, ResourceType::Topic, "t");
    assert_eq!(d, Decision { allowed: false, rule: Rule::NoMatchingAcl });
    assert!(allowed(&allow_default, &bobs, ALICE, O::Read, "other"));
    assert!(Authorizer::new("admin", false).is_err());
}

#[test]
fn deny_wins_and_allow_implies_describe() {
    let a = Authorizer::new("", false).unwrap();
    let set = set_of(vec![
        topic("orders", LIT, "User:alice", O::Read, ALLOW),
        topic("ord", PRE, "User:alice", O::Write, DENY),
        topic("ord", PRE, "User:*", O::Write, ALLOW),
        topic("cfg", LIT, "User:alice", O::AlterConfigs, ALLOW),
        topic("logs", LIT, "User:alice", O::Read, DENY),
        topic("logs", LIT, "User:alice", O::Describe, ALLOW),
    ]);
    assert!(allowed(&a, &set, ALICE, O::Read, "orders"));
    assert!(allowed(&a, &set, ALICE, O::Describe, "orders"), "READ implies DESCRIBE");
    assert!(!allowed(&a, &set, ALICE, O::Write, "orders"), "a DENY prefix beats User:*");
    let bob = Who { principal: "User:bob", host: "10.0.0.2" };
    assert!(allowed(&a, &set, bob, O::Write, "ordinal"));
    assert!(allowed(&a, &set, bob, O::Describe, "ordinal"), "WRITE implies DESCRIBE");
    assert!(allowed(&a, &set, ALICE, O::DescribeConfigs, "cfg"));
    assert!(!allowed(&a, &set, ALICE, O::Describe, "cfg"));
    // A DENY of READ does not deny DESCRIBE.
    assert!(allowed(&a, &set, ALICE, O::Describe, "logs"));
    assert!(!allowed(&a, &set, ALICE, O::Read, "logs"));
}

#[test]
fn hosts_must_match_exactly_or_be_wildcards() {
    let a = Authorizer::new("", false).unwrap();
    let mut on_host = topic("t", LIT, "User:alice", O::Read, ALLOW);
    on_host.host = "10.0.0.9".into();
    let set = set_of(vec![on_host]);
    assert!(!allowed(&a, &set, ALICE, O::Read, "t"));
    assert!(allowed(&a, &set, Who { host: "10.0.0.9", ..ALICE }, O::Read, "t"));
}

#[test]
fn other_resource_types_are_separate() {
    let a = Authorizer::new("", false).unwrap();
    let set = set_of(vec![
        acl(ResourceType::Group, "g", LIT, "User:alice", O::Read, ALLOW),
        acl(ResourceType::Cluster, CLUSTER_NAME, LIT, "User:alice", O::IdempotentWrite, ALLOW),
    ]);
    assert!(a.authorize(&set, ALICE, O::Read, ResourceType::Group, "g").allowed);
    assert!(!a.authorize(&set, ALICE, O::Read, ResourceType::Topic, "g").allowed);
    let cluster = a.authorized_operations(&set, ALICE, ResourceType::Cluster, CLUSTER_NAME);
    assert_eq!(cluster, O::IdempotentWrite.bit());
    let group = a.authorized_operations(&set, ALICE, ResourceType::Group, "g");
    assert_eq!(group, O::Read.bit() | O::Describe.bit());
}

#[test]
fn by_resource_type_follows_kafka() {
    let a = Authorizer::new("", false).unwrap();
    let write =
        |set: &AclSet| a.authorize_by_resource_type(set, ALICE, O::Write, ResourceType::Topic);
    assert!(!write(&AclSet::default()));
    assert!(write(&set_of(vec![topic("t", LIT, "User:alice", O::Write, ALLOW)])));
    assert!(!write(&set_of(vec![topic("t", LIT, "User:alice", O::Read, ALLOW)])));
    assert!(!write(&set_of(vec![
        topic("t", LIT, "User:alice", O::Write, ALLOW),
        topic("t", LIT, "User:*", O::Write, DENY),
    ])));
    assert!(!write(&set_of(vec![
        topic("tea", LIT, "User:alice", O::Write, ALLOW),
        topic("te", PRE, "User:alice", O::All, DENY),
    ])));
    assert!(write(&set_of(vec![
        topic("tea", LIT, "User:alice", O::Write, ALLOW),
        topic("te", LIT, "User:alice", O::Write, DENY),
    ])));
    assert!(!write(&set_of(vec![
        topic("*", LIT, "User:alice", O::Write, ALLOW),
        topic("*", LIT, "User:alice", O::Write, DENY),
    ])));
    assert!(Authorizer::new("", true).unwrap().authorize_by_resource_type(
        &AclSet::default(),
        ALICE,
        O::Write,
        ResourceType::Topic
    ));
}

/// The model: every ACL, walked plainly.
fn model(
    a: &Authorizer,
    acls: &[Acl],
    who: Who<'_>,
    op: Operation,
    rt: ResourceType,
    name: &str,
) -> bool {
    if a.is_super_user(who.principal) {
        return true;
    }
    let covering: Vec<&Acl> = acls
        .iter()
        .filter(|x| x.resource_type == rt)
        .filter(|x| match x.pattern {
            PatternType::Literal => x.resource_name == name || x.resource_name == "*",
            PatternType::Prefixed => name.starts_with(x.resource_name.as_str()),
            _ => false,
        })
        .collect();
    let applies = |x: &&&Acl| {
        (x.principal == who.principal || x.principal == "User:*")
            && (x.host == "*" || x.host == who.host)
            && match x.permission {
                Permission::Allow => {
                    x.operation == Operation::All
                        || x.operation == op
                        || (op == Operation::Describe
                            && matches!(
                                x.operation,
                                Operation::Read
                                    | Operation::Write
                                    | Operation::Delete
                                    | Operation::Alter
                            ))
                        || (op == Operation::DescribeConfigs
                            && x.operation == Operation::AlterConfigs)
                }
                _ => x.operation == Operation::All || x.operation == op,
            }
    };
    let matching: Vec<&&Acl> = covering.iter().filter(applies).collect();
    if matching.iter().any(|x| x.permission == Permission::Deny) {
        return false;
    }
    if matching.iter().any(|x| x.permission == Permission::Allow) {
        return true;
    }
    covering.is_empty() && a.allow_if_no_acl()
}

fn arb_acl() -> impl Strategy<Value = Acl> {
    let names = prop::sample::select(vec!["*", "a", "ab", "abc", "b", "ba", "é", "éa"]);
    let principals = prop::sample::select(vec!["User:alice", "User:bob", "User:*"]);
    let hosts = prop::sample::select(vec!["*", "10.0.0.1", "10.0.0.2"]);
    let ops = prop::sample::select(vec![
        O::All,
        O::Read,
        O::Write,
        O::Describe,
        O::Delete,
        O::Alter,
        O::AlterConfigs,
        O::DescribeConfigs,
        O::Create,
    ]);
    let types = prop::sample::select(vec![ResourceType::Topic, ResourceType::Group]);
    (types, names, any::<bool>(), principals, hosts, ops, any::<bool>()).prop_map(
        |(rt, name, prefixed, principal, host, op, allow)| Acl {
            resource_type: rt,
            resource_name: name.into(),
            pattern: if prefixed { PRE } else { LIT },
            principal: principal.into(),
            host: host.into(),
            operation: op,
            permission: if allow { ALLOW } else { DENY },
        },
    )
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]
    #[test]
    fn authorizer_agrees_with_the_model(
        acls in prop::collection::vec(arb_acl(), 0..24),
        removals in prop::collection::vec(any::<prop::sample::Index>(), 0..4),
        default_allow in any::<bool>(),
        super_bob in any::<bool>(),
    ) {
        let mut distinct: Vec<Acl> = Vec::new();
        for a in acls {
            if !distinct.contains(&a) {
                distinct.push(a);
            }
        }
        let mut set = set_of(distinct.clone());
        // Remove some by id, as DeleteAcls would.
        for r in removals {
            if distinct.is_empty() {
                break;
            }
            let i = r.index(distinct.len());
            let gone = distinct.remove(i);
            let id = set.id_of(&gone).expect("present");
            prop_assert_eq!(set.remove(&id), Some(gone));
        }
        let a = Authorizer::new(if super_bob { "User:bob" } else { "" }, default_allow).unwrap();
        for principal in ["User:alice", "User:bob", "User:carol"] {
            for host in ["10.0.0.1", "10.0.0.2"] {
                let who = Who { principal, host };
                for rt in [ResourceType::Topic, ResourceType::Group] {
                    for name in ["a", "ab", "abc", "abd", "b", "ba", "z", "*", "é", "éab"] {
                        for op in [O::Read, O::Write, O::Describe, O::DescribeConfigs, O::AlterConfigs, O::Delete] {
                            let got = a.authorize(&set, who, op, rt, name).allowed;
                            let want = model(&a, &distinct, who, op, rt, name);
                            prop_assert_eq!(got, want, "{} {} {:?} {} {}", principal, host, rt, name, op);
                        }
                    }
                }
            }
        }
    }
}
