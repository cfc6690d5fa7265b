//! KIP-226 for TLS: a key or trust store changed through a dynamic broker config
//! (`kafka-configs.sh --entity-type brokers --entity-name <id> --alter --add-config
//! listener.name.<l>.ssl.keystore.location=...`) serves new connections without a restart,
//! and connections already open keep the session they have.
//!
//! Runs on every shard, after each image it installs ([`on_image`]) and on the accept path of
//! a TLS listener: the listener's TLS settings are the static ones with this broker's dynamic
//! layers on top (per-broker > cluster default > static, `controller::configs`), read from
//! the shard's metadata image; when the image's broker defaults changed, they are compared
//! with what the shard's config was built from (the settings and the store files'
//! modification times, so a store replaced in place and re-altered to the same path is
//! reloaded, as Kafka does) and the rustls config is rebuilt once. Nothing crosses shards:
//! each shard builds its own copy (a few KiB, rarely).
//!
//! Before a change is stored, the broker the resource names loads the new stores
//! ([`validate`], called on the connection's shard by `server::controller_authz`) and refuses
//! the alter with Kafka's INVALID_REQUEST if they do not load, as Kafka's
//! `DynamicBrokerConfig.validate` does. Invariant: a store that cannot be loaded never
//! replaces a working config; if one becomes unloadable after it was accepted (a file removed
//! before the shard got to it) it is logged (ERROR, naming the listener and why) and the
//! previous config keeps serving.

use std::cell::RefCell;
use std::collections::BTreeMap;
use std::sync::Arc;

use crate::config::security as sec;
use crate::controller::configs::BrokerDefaults;
use crate::security::ListenerSecurity;
use crate::shard::ShardCtx;

/// The settings KIP-226 lets change at runtime (Kafka's `SslConfigs.RECONFIGURABLE_CONFIGS`).
pub const RELOADABLE: &[&str] = &[
    "ssl.key.password",
    "ssl.keystore.certificate.chain",
    "ssl.keystore.key",
    "ssl.keystore.location",
    "ssl.keystore.password",
    "ssl.keystore.type",
    "ssl.truststore.certificates",
    "ssl.truststore.location",
    "ssl.truststore.password",
    "ssl.truststore.type",
];

/// What one listener's current rustls config was built from.
struct Built {
    /// The reloadable settings in force (static and dynamic, prefixed or not).
    settings: BTreeMap<String, String>,
    /// Modification times of the store files named in `settings`.
    mtimes: Vec<Option<std::time::SystemTime>>,
    /// `None`: the static config (nothing dynamic applies).
    config: Option<Arc<rustls::ServerConfig>>,
}

/// The broker defaults last looked at, and each listener's build.
type Seen = (Arc<BrokerDefaults>, BTreeMap<usize, Built>);

/// A shard's reloaded TLS configs (in `ShardBroker`).
#[derive(Default)]
pub struct ShardTls {
    state: RefCell<Option<Seen>>,
}

/// The security of listener `listener` for a new connection: its static TLS and SASL, with the
/// key and trust stores the dynamic broker configs name now.
pub fn listener_security(ctx: &ShardCtx, listener: usize) -> ListenerSecurity {
    let mut security = ctx.config.listener_security.get(listener).cloned().unwrap_or_default();
    if security.tls.is_none() {
        return security;
    }
    let broker = super::broker::of(ctx);
    let mut state = broker.tls.state.borrow_mut();
    let builds = sync(ctx, &mut state);
    if !builds.contains_key(&listener) {
        let defaults = Arc::clone(&ctx.image().broker_defaults);
        refresh(ctx, listener, &defaults, builds);
    }
    if let Some(config) = builds.get(&listener).and_then(|b| b.config.clone()) {
        security.tls = Some(config);
    }
    security
}

/// Called after every image this shard installs: when the broker defaults changed, every TLS
/// listener is rebuilt now rather than at its next accept, so each shard walks through the
/// same sequence of stores. (Rebuilding lazily let a shard that accepted nothing in between
/// skip a good store; when the next one failed to load it kept the older, static one while
/// its neighbour served the good one.)
pub fn on_image(ctx: &ShardCtx) {
    if ctx.config.listener_security.iter().all(|l| l.tls.is_none()) {
        return;
    }
    let broker = super::broker::of(ctx);
    let mut state = broker.tls.state.borrow_mut();
    sync(ctx, &mut state);
}

/// Brings every TLS listener's build up to the image's broker defaults if they changed.
fn sync<'a>(ctx: &ShardCtx, state: &'a mut Option<Seen>) -> &'a mut BTreeMap<usize, Built> {
    let defaults = Arc::clone(&ctx.image().broker_defaults);
    let (seen, builds) = state.get_or_insert_with(|| (Arc::clone(&defaults), BTreeMap::new()));
    if !Arc::ptr_eq(seen, &defaults) {
        *seen = Arc::clone(&defaults);
        let tls = ctx.config.listener_security.iter().enumerate().filter(|(_, l)| l.tls.is_some());
        for (listener, _) in tls {
            refresh(ctx, listener, &defaults, builds);
        }
    }
    builds
}

/// Kafka's check before a per-broker dynamic config is stored (`DynamicBrokerConfig.validate`
/// on the broker the resource names): with `dynamic_broker` as this broker's new dynamic
/// layer, every TLS listener whose key or trust store settings change must load them.
/// `Err` is Kafka's message, answered as INVALID_REQUEST; nothing is stored then.
pub fn validate(ctx: &ShardCtx, dynamic_broker: &BTreeMap<String, String>) -> Result<(), String> {
    let defaults = ctx.image().broker_defaults.clone();
    let layers = |broker: &BTreeMap<String, String>| {
        let mut merged = ctx.config.broker_settings.clone();
        for layer in [&defaults.dynamic_default, broker] {
            merged.extend(layer.iter().map(|(k, v)| (k.clone(), v.clone())));
        }
        merged
    };
    let (before, after) = (layers(&defaults.dynamic_broker), layers(dynamic_broker));
    for (i, l) in ctx.config.listeners.all.iter().enumerate() {
        let tls = ctx.config.listener_security.get(i).is_some_and(|s| s.tls.is_some());
        if !tls || reloadable(&before, &l.prefix()) == reloadable(&after, &l.prefix()) {
            continue;
        }
        let s = crate::config::KafkaSettings(&after);
        sec::tls_settings(&s, l)
            .map_err(|e| e.to_string())
            .and_then(|t| crate::security::tls::server_config(&t).map_err(|e| e.to_string()))
            .map_err(|e| {
                format!("Validation of dynamic config update of SSLFactory failed: {e}")
            })?;
    }
    Ok(())
}

/// The settings among `map` that KIP-226 reloads for the listener whose prefix is `prefix`.
fn reloadable(map: &BTreeMap<String, String>, prefix: &str) -> BTreeMap<String, String> {
    map.iter()
        .filter(|(k, _)| RELOADABLE.contains(&k.strip_prefix(prefix).unwrap_or(k)))
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect()
}

/// Rebuilds `listener`'s config if its settings or store files changed.
fn refresh(
    ctx: &ShardCtx,
    listener: usize,
    defaults: &BrokerDefaults,
    builds: &mut BTreeMap<usize, Built>,
) {
    let Some(l) = ctx.config.listeners.all.get(listener) else { return };
    let statics = &ctx.config.broker_settings;
    let mut merged = statics.clone();
    for layer in [&defaults.dynamic_default, &defaults.dynamic_broker] {
        merged.extend(layer.iter().map(|(k, v)| (k.clone(), v.clone())));
    }
    let prefix = l.prefix();
    let settings = reloadable(&merged, &prefix);
    let mtimes = store_mtimes(&settings);
    if let Some(b) = builds.get(&listener) {
        if b.settings == settings && b.mtimes == mtimes {
            return;
        }
    }
    let dynamic = settings != reloadable(statics, &prefix);
    let first = !builds.contains_key(&listener);
    let config = if dynamic || !first {
        let s = crate::config::KafkaSettings(&merged);
        let built = sec::tls_settings(&s, l)
            .map_err(|e| e.to_string())
            .and_then(|t| crate::security::tls::server_config(&t).map_err(|e| e.to_string()));
        match built {
            Ok(config) => {
                tracing::info!(shard = %ctx.id, listener = %l.name, "TLS key and trust stores reloaded: new connections use them");
                Some(config)
            }
            Err(e) => {
                tracing::error!(shard = %ctx.id, listener = %l.name, "TLS stores not reloaded, the previous ones keep serving: {e}");
                // Keep what served before; try again on the next change.
                let previous = builds.get(&listener).and_then(|b| b.config.clone());
                builds.insert(listener, Built { settings, mtimes, config: previous });
                return;
            }
        }
    } else {
        None
    };
    builds.insert(listener, Built { settings, mtimes, config });
}

/// The modification times of the store files the settings name.
fn store_mtimes(settings: &BTreeMap<String, String>) -> Vec<Option<std::time::SystemTime>> {
    settings
        .iter()
        .filter(|(k, _)| k.ends_with("store.location"))
        .map(|(_, path)| std::fs::metadata(path).and_then(|m| m.modified()).ok())
        .collect()
}
