//! The one place requests are authorized: every handler asks [`allowed`] (or a variant)
//! before any side effect, with Kafka's operation and resource for its API, and turns a
//! `false` into Kafka's error code for that API. Without `authorizer.class.name` every
//! check passes (Kafka's `AuthHelper` with no authorizer).
//!
//! Runs on the connection's shard. A check reads the ACLs of this shard's metadata image and
//! the connection's [`Session`]: its principal, its host and its decision cache, keyed by
//! the ACL set's stamp, so a produce or fetch of a topic already decided is one hash lookup
//! with no allocation. Denials are counted (`shardlog_authorization_denials`) and logged at
//! most `AUTHZ_DENIAL_LOGS_PER_SECOND_MAX` times a second per shard (principal, operation,
//! resource, host); [`filter`] checks (listing what a principal may see, Kafka's
//! `logIfDenied = false`) are neither counted nor logged.

use std::cell::Cell;
use std::rc::Rc;
use std::sync::Arc;

use crate::authz::{AclSet, Operation, ResourceType, Who, CLUSTER_NAME};
use crate::constants::AUTHZ_DENIAL_LOGS_PER_SECOND_MAX;
use crate::controller::MetadataImage;
use crate::security::Session;
use crate::shard::ShardCtx;

/// Whether an authorizer is configured (the ACL APIs answer SECURITY_DISABLED without one).
#[must_use]
pub fn enabled(ctx: &ShardCtx) -> bool {
    ctx.config.authorizer.is_some()
}

/// May the connection do `op` on resource `name` of type `rt`, by the ACLs of this shard's
/// image? A denial is counted and logged.
#[must_use]
pub fn allowed(
    ctx: &ShardCtx,
    session: &Session,
    op: Operation,
    rt: ResourceType,
    name: &str,
) -> bool {
    if ctx.config.authorizer.is_none() {
        return true;
    }
    let image = ctx.image();
    check(ctx, session, &image.acls, (op, rt, name), true)
}

/// [`allowed`] against the ACLs of an image the caller holds (one image per request).
#[must_use]
pub fn allowed_in(
    ctx: &ShardCtx,
    session: &Session,
    acls: &AclSet,
    (op, rt, name): (Operation, ResourceType, &str),
) -> bool {
    ctx.config.authorizer.is_none() || check(ctx, session, acls, (op, rt, name), true)
}

/// May the connection do `op` on the cluster?
#[must_use]
pub fn cluster(ctx: &ShardCtx, session: &Session, op: Operation) -> bool {
    allowed(ctx, session, op, ResourceType::Cluster, CLUSTER_NAME)
}

/// As [`allowed_in`] for deciding what a listing shows: a denial is neither counted nor
/// logged (Kafka's `logIfDenied = false`).
#[must_use]
pub fn filter(
    ctx: &ShardCtx,
    session: &Session,
    acls: &AclSet,
    (op, rt, name): (Operation, ResourceType, &str),
) -> bool {
    ctx.config.authorizer.is_none() || check(ctx, session, acls, (op, rt, name), false)
}

/// May the connection do `op` on some resource of type `rt` (Kafka's
/// `authorizeByResourceType`; InitProducerId of an idempotent producer)?
#[must_use]
pub fn by_resource_type(
    ctx: &ShardCtx,
    session: &Session,
    op: Operation,
    rt: ResourceType,
) -> bool {
    let Some(authorizer) = ctx.config.authorizer.as_deref() else { return true };
    let image = ctx.image();
    let principal = session.acl_principal();
    let who = Who { principal: &principal, host: session.host() };
    authorizer.authorize_by_resource_type(&image.acls, who, op, rt)
}

/// The `*_authorized_operations` field for a resource: what the connection may do on it
/// (every supported operation without an authorizer).
#[must_use]
pub fn operations(
    ctx: &ShardCtx,
    session: &Session,
    acls: &AclSet,
    rt: ResourceType,
    name: &str,
) -> i32 {
    let Some(authorizer) = ctx.config.authorizer.as_deref() else {
        return crate::authz::authorizer::all_operations(rt);
    };
    let principal = session.acl_principal();
    let who = Who { principal: &principal, host: session.host() };
    authorizer.authorized_operations(acls, who, rt, name)
}

/// What the pure handlers (`server::admin`, `server::group`) ask of the authorizer: the
/// server's [`Auth`], or [`AllowAll`] (tests; no authorizer configured).
pub trait Authorize {
    /// A check whose denial is counted and logged.
    fn allowed(&self, op: Operation, rt: ResourceType, name: &str) -> bool;
    /// A check deciding what a listing shows: a denial is neither counted nor logged.
    fn visible(&self, op: Operation, rt: ResourceType, name: &str) -> bool;
    /// The `*_authorized_operations` field of a resource.
    fn operations(&self, rt: ResourceType, name: &str) -> i32;
    /// A check on the cluster resource.
    fn cluster(&self, op: Operation) -> bool {
        self.allowed(op, ResourceType::Cluster, CLUSTER_NAME)
    }
}

/// Everything allowed (what Kafka does without an authorizer).
pub struct AllowAll;

impl Authorize for AllowAll {
    fn allowed(&self, _: Operation, _: ResourceType, _: &str) -> bool {
        true
    }
    fn visible(&self, _: Operation, _: ResourceType, _: &str) -> bool {
        true
    }
    fn operations(&self, rt: ResourceType, _: &str) -> i32 {
        crate::authz::authorizer::all_operations(rt)
    }
}

/// One request's authorization: the connection's session and the image the request is
/// answered from, owned so a handler's future may keep it.
#[derive(Clone)]
pub struct Auth {
    ctx: Rc<ShardCtx>,
    session: Rc<Session>,
    image: Arc<MetadataImage>,
}

impl Auth {
    /// Against this shard's image now.
    #[must_use]
    pub fn new(ctx: &Rc<ShardCtx>, session: &Rc<Session>) -> Self {
        Self { ctx: ctx.clone(), session: session.clone(), image: ctx.image() }
    }

    /// Whether an authorizer is configured.
    #[must_use]
    pub fn enabled(&self) -> bool {
        enabled(&self.ctx)
    }

    /// Kafka's `authorizeByResourceType`.
    #[must_use]
    pub fn by_resource_type(&self, op: Operation, rt: ResourceType) -> bool {
        by_resource_type(&self.ctx, &self.session, op, rt)
    }
}

impl Authorize for Auth {
    fn allowed(&self, op: Operation, rt: ResourceType, name: &str) -> bool {
        allowed_in(&self.ctx, &self.session, &self.image.acls, (op, rt, name))
    }
    fn visible(&self, op: Operation, rt: ResourceType, name: &str) -> bool {
        filter(&self.ctx, &self.session, &self.image.acls, (op, rt, name))
    }
    fn operations(&self, rt: ResourceType, name: &str) -> i32 {
        operations(&self.ctx, &self.session, &self.image.acls, rt, name)
    }
}

fn check(
    ctx: &ShardCtx,
    session: &Session,
    acls: &AclSet,
    (op, rt, name): (Operation, ResourceType, &str),
    log_denial: bool,
) -> bool {
    let Some(authorizer) = ctx.config.authorizer.as_deref() else { return true };
    let stamp = acls.stamp();
    let cached = session.authz_cache.borrow_mut().get(stamp, rt, name, op);
    let allowed = match cached {
        Some(allowed) => allowed,
        None => {
            let principal = session.acl_principal();
            let who = Who { principal: &principal, host: session.host() };
            let decision = authorizer.authorize(acls, who, op, rt, name);
            session.authz_cache.borrow_mut().put(stamp, rt, name, op, decision.allowed);
            decision.allowed
        }
    };
    if !allowed && log_denial {
        denied(ctx, session, (op, rt, name));
    }
    allowed
}

/// Counts a denial and logs it unless this second's log budget is spent.
fn denied(ctx: &ShardCtx, session: &Session, (op, rt, name): (Operation, ResourceType, &str)) {
    crate::metrics::count(crate::metrics::Count::AuthorizationDenials, 1);
    let broker = super::broker::of(ctx);
    let Some(suppressed) = broker.denial_log.take_turn(ctx.quota_clock_ms()) else { return };
    tracing::info!(
        shard = %ctx.id,
        principal = %session.acl_principal(),
        host = session.host(),
        operation = %op,
        resource = %format_args!("{rt}:{name}"),
        suppressed,
        "authorization denied"
    );
}

/// A per-shard budget of denial log lines: at most `AUTHZ_DENIAL_LOGS_PER_SECOND_MAX` per
/// second; the denials not logged are counted and reported with the next line.
#[derive(Debug, Default)]
pub struct DenialLog {
    second: Cell<u64>,
    logged: Cell<u32>,
    suppressed: Cell<u64>,
}

impl DenialLog {
    /// `Some(denials suppressed since the last line)` if this denial may be logged now.
    pub fn take_turn(&self, now_ms: u64) -> Option<u64> {
        let second = now_ms / 1000;
        if second != self.second.get() {
            self.second.set(second);
            self.logged.set(0);
        }
        if self.logged.get() >= AUTHZ_DENIAL_LOGS_PER_SECOND_MAX {
            self.suppressed.set(self.suppressed.get() + 1);
            return None;
        }
        self.logged.set(self.logged.get() + 1);
        Some(self.suppressed.replace(0))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn denial_logs_are_rate_limited() {
        let log = DenialLog::default();
        let turns: Vec<_> = (0..15).map(|_| log.take_turn(5_000)).collect();
        let logged = turns.iter().filter(|t| t.is_some()).count();
        assert_eq!(logged, AUTHZ_DENIAL_LOGS_PER_SECOND_MAX as usize);
        assert_eq!(log.take_turn(6_001), Some(5));
        assert_eq!(log.take_turn(6_002), Some(0));
    }
}
