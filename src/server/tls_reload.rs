//! KIP-226 for TLS: a key or trust store changed through a dynamic broker config
//! (`kafka-configs.sh --entity-type brokers --entity-name <id> --alter --add-config
//! listener.name.<l>.ssl.keystore.location=...`) serves new connections without a restart,
//! and connections already open keep the session they have.
//!
//! Runs on every shard, on the accept path of a TLS listener: the listener's TLS settings are
//! the static ones with this broker's dynamic layers on top (per-broker > cluster default >
//! static, `controller::configs`), read from the shard's metadata image; when the image's
//! broker defaults changed, they are compared with what the shard's config was built from
//! (the settings and the store files' modification times, so a store replaced in place and
//! re-altered to the same path is reloaded, as Kafka does) and the rustls config is rebuilt
//! once. Nothing crosses shards: each shard builds its own copy (a few KiB, rarely).
//! Invariant: a store that cannot be loaded never replaces a working config; it is logged
//! (ERROR, naming the listener and why) and the previous config keeps serving.

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
    let defaults = Arc::clone(&ctx.image().broker_defaults);
    let broker = super::broker::of(ctx);
    let mut state = broker.tls.state.borrow_mut();
    let (seen, builds) = state.get_or_insert_with(|| (Arc::clone(&defaults), BTreeMap::new()));
    let fresh = !Arc::ptr_eq(seen, &defaults) || !builds.contains_key(&listener);
    if fresh {
        *seen = Arc::clone(&defaults);
        refresh(ctx, listener, &defaults, builds);
    }
    if let Some(config) = builds.get(&listener).and_then(|b| b.config.clone()) {
        security.tls = Some(config);
    }
    security
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
    let reloadable = |map: &BTreeMap<String, String>| -> BTreeMap<String, String> {
        map.iter()
            .filter(|(k, _)| {
                let base = k.strip_prefix(&l.prefix()).unwrap_or(k);
                RELOADABLE.contains(&base)
            })
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect()
    };
    let settings = reloadable(&merged);
    let mtimes = store_mtimes(&settings);
    if let Some(b) = builds.get(&listener) {
        if b.settings == settings && b.mtimes == mtimes {
            return;
        }
    }
    let dynamic = settings != reloadable(statics);
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
