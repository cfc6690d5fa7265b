//! Registry tests: Kafka defaults, validation wording, unknown names, synonyms in priority
//! order, and that `docs/topic-configs.md` matches the registry.

use std::collections::BTreeMap;

use super::*;

fn map(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
    pairs.iter().map(|(k, v)| ((*k).to_string(), (*v).to_string())).collect()
}

#[test]
fn broker_registry_is_sorted_unique_and_its_defaults_valid() {
    let names: Vec<_> = BROKER_ONLY_CONFIGS.iter().map(|c| c.name).collect();
    let mut sorted = names.clone();
    sorted.sort_unstable();
    sorted.dedup();
    assert_eq!(names, sorted);
    for name in broker_setting_names() {
        let (kind, validator, default, _) = broker_config_def(name).expect(name);
        if let Some(default) = default {
            validate_value(name, kind, validator, default)
                .unwrap_or_else(|e| panic!("default of {name} invalid: {e}"));
        }
    }
    // A broker-only name never shadows a topic config's synonym (one definition per name).
    for c in BROKER_ONLY_CONFIGS {
        let synonym = TOPIC_CONFIGS.iter().any(|d| d.synonyms.iter().any(|s| s.name == c.name));
        assert!(!synonym, "{} defined twice", c.name);
    }
}

#[test]
fn registry_is_sorted_and_unique() {
    let names: Vec<_> = TOPIC_CONFIGS.iter().map(|d| d.name).collect();
    let mut sorted = names.clone();
    sorted.sort_unstable();
    sorted.dedup();
    assert_eq!(names, sorted);
    // Every default must pass its own validation (except compression, checked below).
    for d in TOPIC_CONFIGS {
        if let Some(default) = d.default {
            validate_topic_config(d.name, default)
                .unwrap_or_else(|e| panic!("default of {} invalid: {e}", d.name));
        }
    }
}

#[test]
fn good_values_are_normalized() {
    assert_eq!(validate_topic_config("retention.ms", " 1000 ").unwrap(), "1000");
    assert_eq!(validate_topic_config("retention.ms", "-1").unwrap(), "-1");
    assert_eq!(validate_topic_config("preallocate", "TRUE").unwrap(), "true");
    assert_eq!(
        validate_topic_config("cleanup.policy", "compact, delete").unwrap(),
        "compact,delete"
    );
    assert_eq!(validate_topic_config("min.cleanable.dirty.ratio", "0.1").unwrap(), "0.1");
    assert_eq!(validate_topic_config("leader.replication.throttled.replicas", "*").unwrap(), "*");
    assert_eq!(
        validate_topic_config("follower.replication.throttled.replicas", "0:1,1:1").unwrap(),
        "0:1,1:1"
    );
    assert_eq!(validate_topic_config("compression.type", "producer").unwrap(), "producer");
    assert_eq!(validate_topic_config("compression.gzip.level", "-1").unwrap(), "-1");
}

#[test]
fn bad_values_are_rejected_with_kafka_wording() {
    let err = validate_topic_config("retention.ms", "abc").unwrap_err();
    assert_eq!(
        err.to_string(),
        "Invalid value abc for configuration retention.ms: Not a number of type LONG"
    );
    let err = validate_topic_config("retention.ms", "-2").unwrap_err();
    assert!(err.to_string().ends_with("Value must be at least -1"), "{err}");
    let err = validate_topic_config("segment.bytes", "1000").unwrap_err();
    assert!(err.to_string().contains("Value must be at least 1048576"), "{err}");
    let err = validate_topic_config("segment.bytes", "99999999999").unwrap_err();
    assert!(err.to_string().contains("Not a number of type INT"), "{err}");
    let err = validate_topic_config("message.timestamp.type", "createtime").unwrap_err();
    assert!(err.to_string().contains("String must be one of: CreateTime, LogAppendTime"));
    assert!(validate_topic_config("cleanup.policy", "forever").is_err());
    assert!(validate_topic_config("cleanup.policy", "").is_err());
    assert!(validate_topic_config("min.cleanable.dirty.ratio", "1.5").is_err());
    assert!(validate_topic_config("min.cleanable.dirty.ratio", "NaN").is_err());
    assert!(validate_topic_config("preallocate", "yes").is_err());
    assert!(validate_topic_config("compression.gzip.level", "0").is_err());
    assert!(validate_topic_config("compression.lz4.level", "18").is_err());
    assert!(validate_topic_config("leader.replication.throttled.replicas", "a:b").is_err());
}

#[test]
fn unknown_names_are_rejected() {
    let err = validate_topic_config("retention.millis", "1").unwrap_err();
    assert_eq!(err.to_string(), "Unknown topic config name: retention.millis");
    // Broker names are not topic names.
    assert!(validate_topic_config("log.retention.hours", "1").is_err());
}

#[test]
fn compression_other_than_producer_is_rejected_clearly() {
    for codec in ["gzip", "snappy", "lz4", "zstd", "uncompressed"] {
        let err = validate_topic_config("compression.type", codec).unwrap_err().to_string();
        assert!(err.contains("recompressing batches on append is not implemented"), "{err}");
    }
    let err = validate_topic_config("compression.type", "brotli").unwrap_err().to_string();
    assert!(err.contains("String must be one of"), "{err}");
}

#[test]
fn cross_config_rules() {
    let broker = BrokerDefaults::default();
    let bad = map(&[("min.compaction.lag.ms", "10"), ("max.compaction.lag.ms", "5")]);
    let err = validate_topic_configs(&bad, &broker).unwrap_err().to_string();
    assert!(err.contains("min.compaction.lag.ms (10) > max.compaction.lag.ms (5)"), "{err}");
    let tiered = map(&[("remote.storage.enable", "true")]);
    assert!(validate_topic_configs(&tiered, &broker).is_err());
    let ok = map(&[("remote.storage.enable", "false"), ("retention.ms", "1000")]);
    assert_eq!(validate_topic_configs(&ok, &broker).unwrap().len(), 2);
}

#[test]
fn defaults_resolve_to_kafka_values() {
    let c = TopicConfig::default();
    assert_eq!(c.segment_bytes, 1 << 30);
    assert_eq!(c.segment_ms, 604_800_000);
    assert_eq!(c.retention_ms, 604_800_000);
    assert_eq!(c.retention_bytes, -1);
    assert_eq!(c.max_message_bytes, 1_048_588);
    assert_eq!(c.index_interval_bytes, 4096);
    assert_eq!(c.segment_index_bytes, 10 * 1024 * 1024);
    assert_eq!(c.message_timestamp_type, TimestampType::CreateTime);
    assert_eq!(c.cleanup_policy, CleanupPolicy { delete: true, compact: false });
    assert_eq!(c.flush_messages, i64::MAX);
    assert_eq!(c.min_insync_replicas, 1);
}

#[test]
fn synonyms_resolve_in_kafka_priority_order() {
    let broker = BrokerDefaults::from_settings([("log.retention.hours", "1")]).unwrap();
    assert_eq!(TopicConfig::resolve(&BTreeMap::new(), &broker).retention_ms, 3_600_000);
    let broker = BrokerDefaults::from_settings([
        ("log.retention.hours", "1"),
        ("log.retention.minutes", "2"),
    ])
    .unwrap();
    assert_eq!(TopicConfig::resolve(&BTreeMap::new(), &broker).retention_ms, 120_000);
    let broker = BrokerDefaults::from_settings([
        ("log.retention.ms", "5"),
        ("log.retention.minutes", "2"),
        ("message.max.bytes", "2000"),
        ("log.segment.bytes", "2097152"),
        ("log.cleanup.policy", "compact"),
    ])
    .unwrap();
    let c = TopicConfig::resolve(&BTreeMap::new(), &broker);
    assert_eq!(c.retention_ms, 5);
    assert_eq!(c.max_message_bytes, 2000);
    assert_eq!(c.segment_bytes, 2_097_152);
    assert!(c.cleanup_policy.compact && !c.cleanup_policy.delete);
    // A topic override beats every broker synonym.
    let c = TopicConfig::resolve(&map(&[("retention.ms", "7")]), &broker);
    assert_eq!(c.retention_ms, 7);
    // Unlimited retention stays -1 through the unit conversion.
    let broker = BrokerDefaults::from_settings([("log.retention.hours", "-1")]).unwrap();
    assert_eq!(TopicConfig::resolve(&BTreeMap::new(), &broker).retention_ms, -1);
}

#[test]
fn internal_segment_bytes_allows_small_test_segments() {
    let c = TopicConfig::resolve(
        &map(&[("internal.segment.bytes", "4096")]),
        &BrokerDefaults::default(),
    );
    assert_eq!(c.segment_bytes, 4096);
}

#[test]
fn broker_settings_are_validated() {
    assert!(BrokerDefaults::from_settings([("log.retention.bogus", "1")]).is_err());
    assert!(BrokerDefaults::from_settings([("num.partitions", "0")]).is_err());
    assert!(BrokerDefaults::from_settings([("log.segment.bytes", "12")]).is_err());
    assert!(BrokerDefaults::from_settings([("compression.type", "gzip")]).is_err());
    let b = BrokerDefaults::from_settings([
        ("num.partitions", "3"),
        ("default.replication.factor", "1"),
        ("auto.create.topics.enable", "false"),
    ])
    .unwrap();
    assert_eq!(b.num_partitions, 3);
    assert!(!b.auto_create_topics_enable);
}

/// The table in `docs/topic-configs.md`; regenerate with
/// `cargo test --lib print_topic_config_table -- --ignored --nocapture`.
fn config_table() -> String {
    let mut out = String::from(
        "| config | type | default | broker synonyms | effect in Shardlog |\n|---|---|---|---|---|\n",
    );
    for d in TOPIC_CONFIGS {
        let synonyms: Vec<&str> = d.synonyms.iter().map(|s| s.name).collect();
        let effect = match d.effect {
            Effect::Active => "acts".to_string(),
            Effect::NotYet(why) => format!("**no effect yet**: {why}"),
        };
        out.push_str(&format!(
            "| `{}`{} | {:?} | {} | {} | {} |\n",
            d.name,
            if d.internal { " (internal)" } else { "" },
            d.kind,
            d.default.map_or("null".to_string(), |v| format!("`{v}`")),
            if synonyms.is_empty() {
                "-".to_string()
            } else {
                format!("`{}`", synonyms.join("`, `"))
            },
            effect
        ));
    }
    out
}

#[test]
#[ignore = "prints the docs table"]
fn print_topic_config_table() {
    println!("{}", config_table());
}

#[test]
fn docs_table_is_current() {
    let doc =
        std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/docs/topic-configs.md"))
            .expect("docs/topic-configs.md exists");
    assert!(
        doc.contains(&config_table()),
        "docs/topic-configs.md is stale: regenerate the table with \
         cargo test --lib print_topic_config_table -- --ignored --nocapture"
    );
}

#[test]
fn update_modes_follow_kafkas_dynamic_broker_config() {
    let mode = |n: &str| update_mode(n).unwrap_or_else(|| panic!("{n} known"));
    for dynamic in [
        "log.retention.ms",
        "log.retention.bytes",
        "log.segment.bytes",
        "log.roll.ms",
        "log.cleanup.policy",
        "log.flush.interval.messages",
        "log.flush.interval.ms",
        "message.max.bytes",
        "min.insync.replicas",
        "log.cleaner.backoff.ms",
        "log.cleaner.io.max.bytes.per.second",
        "log.cleaner.dedupe.buffer.size",
        "leader.replication.throttled.rate",
        "follower.replication.throttled.rate",
    ] {
        assert_eq!(mode(dynamic), UpdateMode::ClusterWide, "{dynamic}");
    }
    for read_only in [
        "log.retention.hours",
        "log.retention.minutes",
        "log.roll.hours",
        "log.flush.scheduler.interval.ms",
        "num.partitions",
        "log.retention.check.interval.ms",
        "group.min.session.timeout.ms",
    ] {
        assert_eq!(mode(read_only), UpdateMode::ReadOnly, "{read_only}");
    }
    assert!(!mode("advertised.listeners").is_dynamic());
    assert!(update_mode("no.such.setting").is_none());
    // Every broker setting has a mode.
    for name in broker_setting_names() {
        assert!(update_mode(name).is_some(), "{name}");
    }
}

#[test]
fn dynamic_layers_resolve_in_kafkas_order() {
    let mut b = BrokerDefaults::from_settings([("log.retention.ms", "1000")]).unwrap();
    b.dynamic_default = map(&[("log.retention.hours", "2"), ("log.retention.bytes", "5")]);
    b.dynamic_broker = map(&[("log.retention.bytes", "6")]);
    let topic = TopicConfig::resolve(&BTreeMap::new(), &b);
    // The most precise synonym set anywhere wins over a coarser one in a higher layer.
    assert_eq!(topic.retention_ms, 1000);
    assert_eq!(topic.retention_bytes, 6);
    let def = topic_config_def("retention.bytes").unwrap();
    assert_eq!(
        effective_value(def, &BTreeMap::new(), &b).1,
        ValueSource::DynamicBroker("log.retention.bytes")
    );
    let layers: Vec<BrokerSource> =
        b.layers_of("log.retention.bytes").into_iter().map(|(_, l)| l).collect();
    assert_eq!(layers, [BrokerSource::DynamicBroker, BrokerSource::DynamicDefault]);
    assert_eq!(b.long("log.cleaner.backoff.ms"), 15_000, "registry default");
}

#[test]
fn dynamic_validation_uses_kafkas_wording() {
    let err =
        validate_dynamic_configs(&map(&[("num.partitions", "2"), ("group.max.size", "3")]), true)
            .unwrap_err();
    assert_eq!(
        err.to_string(),
        "Cannot update these configs dynamically: Set(group.max.size, num.partitions)"
    );
    let err = validate_dynamic_configs(&map(&[("log.retention.ms", "x")]), false).unwrap_err();
    assert_eq!(
        err.to_string(),
        "Invalid value x for configuration log.retention.ms: Not a number of type LONG"
    );
    let ok = validate_dynamic_configs(&map(&[("log.cleanup.policy", "compact, delete")]), false);
    assert_eq!(ok.unwrap(), map(&[("log.cleanup.policy", "compact,delete")]));
}

/// `tuning.md`'s broker-settings table says which settings are dynamic: every row whose
/// update cell is plainly `read-only` or `cluster-wide` agrees with the registry.
#[test]
fn tuning_md_update_column_matches_the_registry() {
    let text = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/tuning.md"))
        .expect("tuning.md exists");
    let mut checked = 0;
    for line in text.lines().filter(|l| l.starts_with("| `")) {
        let cells: Vec<&str> = line.split(" | ").map(str::trim).collect();
        let Some(&update) = cells.get(3) else { continue };
        let want = match update {
            "read-only" => UpdateMode::ReadOnly,
            "cluster-wide" => UpdateMode::ClusterWide,
            _ => continue,
        };
        for name in cells[0].split('`').skip(1).step_by(2) {
            if let Some(mode) = update_mode(name) {
                assert_eq!(mode, want, "tuning.md says {name} is {update}");
                checked += 1;
            }
        }
    }
    assert!(checked > 20, "the update column was found ({checked} names)");
}

/// Per-listener names stand for their base setting: `listener.name.<l>.<setting>`, and
/// `listener.name.<l>.<mechanism>.<setting>` for the SASL mechanism settings of a mechanism
/// Shardlog serves.
#[test]
fn listener_and_mechanism_prefixed_names() {
    for (name, base) in [
        ("listener.name.sasl_ssl.ssl.keystore.location", Some("ssl.keystore.location")),
        ("listener.name.ext.plain.sasl.jaas.config", Some("sasl.jaas.config")),
        ("listener.name.ext.oauthbearer.sasl.jaas.config", Some("sasl.jaas.config")),
        (
            "listener.name.ext.oauthbearer.sasl.oauthbearer.jwks.endpoint.url",
            Some("sasl.oauthbearer.jwks.endpoint.url"),
        ),
        (
            "listener.name.ext.scram-sha-512.connections.max.reauth.ms",
            Some("connections.max.reauth.ms"),
        ),
        ("listener.name.ext.connections.max.reauth.ms", Some("connections.max.reauth.ms")),
        ("listener.name.ext.gssapi.sasl.jaas.config", None),
        ("listener.name.ext.oauthbearer.ssl.keystore.location", None),
        ("listener.name..ssl.keystore.location", None),
    ] {
        assert_eq!(broker::listener_base(name), base, "{name}");
    }
    let (kind, ..) =
        broker_config_def("listener.name.x.oauthbearer.connections.max.reauth.ms").expect("known");
    assert_eq!(kind, ConfigType::Long);
}
