//! Cost of one authorization check on the request path (issue 35), with 10,000 ACLs
//! (5,000 LITERAL topics and 5,000 PREFIXED prefixes of varied lengths, other principals'):
//! the decision itself (a connection's first request for a topic, or the first after an
//! ACL change) for an allowed and a denied topic, and a connection's cached decision (every
//! later produce or fetch of that topic).

use std::hint::black_box;

use criterion::{criterion_group, criterion_main, Criterion};
use shardlog::authz::{
    Acl, AclSet, Authorizer, DecisionCache, Operation, PatternType, Permission, ResourceType, Who,
};
use uuid::Uuid;

fn acls() -> AclSet {
    let mut set = AclSet::default();
    let mut id = 0u128;
    let mut add = |name: String, pattern, principal: &str, op| {
        id += 1;
        let acl = Acl {
            resource_type: ResourceType::Topic,
            resource_name: name,
            pattern,
            principal: principal.into(),
            host: "*".into(),
            operation: op,
            permission: Permission::Allow,
        };
        set.insert(Uuid::from_u128(id), acl).expect("distinct");
    };
    for i in 0..5000 {
        add(format!("t{i}"), PatternType::Literal, &format!("User:u{i}"), Operation::Read);
        add(format!("p{i}-"), PatternType::Prefixed, &format!("User:u{i}"), Operation::Write);
    }
    add("bench".into(), PatternType::Literal, "User:alice", Operation::Write);
    set
}

fn check(c: &mut Criterion) {
    let set = acls();
    let authorizer = Authorizer::new("User:admin", false).expect("super users");
    let alice = Who { principal: "User:alice", host: "127.0.0.1" };
    let (w, t) = (Operation::Write, ResourceType::Topic);
    c.bench_function("authz_decide_allowed_10k_acls", |b| {
        b.iter(|| authorizer.authorize(&set, alice, w, t, black_box("bench")).allowed);
    });
    c.bench_function("authz_decide_denied_prefix_walk_10k_acls", |b| {
        b.iter(|| authorizer.authorize(&set, alice, w, t, black_box("p4999-orders-eu")).allowed);
    });
    let mut cache = DecisionCache::default();
    cache.put(set.stamp(), t, "bench", w, true);
    c.bench_function("authz_cached_decision", |b| {
        b.iter(|| cache.get(set.stamp(), t, black_box("bench"), w));
    });
}

criterion_group!(benches, check);
criterion_main!(benches);
