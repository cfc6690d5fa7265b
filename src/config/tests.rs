use super::*;

#[test]
fn defaults_without_flags() {
    let cfg = ServeConfig::resolve(&ServeArgs::default(), 2).expect("defaults resolve");
    assert_eq!(cfg.listen, "127.0.0.1:9092".parse().expect("addr"));
    assert_eq!(cfg.advertised_host, "127.0.0.1");
    assert_eq!(cfg.advertised_port, 9092);
    assert_eq!(cfg.data_dir, PathBuf::from("shardlog-data"));
    assert_eq!(cfg.shards, 2);
    assert!(cfg.auto_create_topics);
    assert!(cfg.broker_settings.is_empty(), "nothing set explicitly");
    let d = GroupConfig::default();
    assert_eq!(cfg.group.min_session_timeout_ms, d.min_session_timeout_ms);
    assert_eq!(cfg.group.max_session_timeout_ms, d.max_session_timeout_ms);
    assert_eq!(cfg.group.initial_rebalance_delay_ms, d.initial_rebalance_delay_ms);
    assert_eq!(cfg.group.group_max_size, d.group_max_size);
    assert_eq!(cfg.group.offsets_retention_ms, d.offsets_retention_ms);
    assert_eq!(cfg.group.offset_metadata_bytes_max, d.offset_metadata_bytes_max);
    assert_eq!(
        cfg.offsets_topic_num_partitions,
        crate::constants::OFFSETS_TOPIC_PARTITIONS_DEFAULT
    );
    assert_eq!(
        cfg.connections_max_idle_ms,
        Some(crate::constants::CONNECTIONS_MAX_IDLE_MS_DEFAULT)
    );
    assert_eq!(cfg.socket_request_max_bytes, crate::constants::SOCKET_REQUEST_MAX_BYTES_DEFAULT);
    assert_eq!(cfg.log_cleaner_io_max_bytes_per_second, None);
    assert_eq!((cfg.min_insync_replicas, cfg.default_replication_factor), (1, 1));
}

#[test]
fn flags_override_file_which_overrides_defaults() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("shardlog.toml");
    std::fs::write(&path, "shards = 3\nnode_id = 7\nlisten = \"127.0.0.1:19092\"\n")
        .expect("write");
    let args = ServeArgs { config: Some(path), shards: Some(1), ..ServeArgs::default() };
    let cfg = ServeConfig::resolve(&args, 2).expect("resolve");
    assert_eq!(cfg.shards, 1);
    assert_eq!(cfg.node_id, NodeId(7));
    assert_eq!(cfg.advertised_port, 19092);
}

fn with_file(text: &str, flags: &[(&str, &str)]) -> Result<ServeConfig, ConfigError> {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("shardlog.toml");
    std::fs::write(&path, text).expect("write");
    let mut args = ServeArgs { config: Some(path), ..ServeArgs::default() };
    for (k, v) in flags {
        args.kafka.values.insert((*k).to_string(), (*v).to_string());
    }
    ServeConfig::resolve(&args, 1)
}

#[test]
fn kafka_names_in_the_file_quoted_or_bare_and_as_flags() {
    let cfg = with_file(
        "\"group.min.session.timeout.ms\" = 1000\n\
         group.initial.rebalance.delay.ms = 0\n\
         [log]\nretention.hours = 24\ncleanup.policy = [\"compact\", \"delete\"]\n",
        &[],
    )
    .expect("resolve");
    assert_eq!(cfg.group.min_session_timeout_ms, 1000);
    assert_eq!(cfg.group.initial_rebalance_delay_ms, 0);
    assert_eq!(cfg.broker_settings["log.retention.hours"], "24");
    assert_eq!(cfg.broker_settings["log.cleanup.policy"], "compact,delete");
    let topic = crate::controller::TopicConfig::resolve(&BTreeMap::new(), &cfg.broker_defaults());
    assert_eq!(topic.retention_ms, 24 * 3_600_000);
    // A flag beats the file.
    let cfg = with_file(
        "\"group.min.session.timeout.ms\" = 1000\n",
        &[("group.min.session.timeout.ms", "2000")],
    )
    .expect("resolve");
    assert_eq!(cfg.group.min_session_timeout_ms, 2000);
    assert_eq!(cfg.broker_settings["group.min.session.timeout.ms"], "2000");
}

#[test]
fn every_setting_drives_its_typed_field() {
    let cfg = with_file(
        "",
        &[
            ("group.max.session.timeout.ms", "60000"),
            ("group.max.size", "5"),
            ("offsets.retention.minutes", "2"),
            ("offsets.retention.check.interval.ms", "1000"),
            ("offset.metadata.max.bytes", "10"),
            ("offsets.topic.num.partitions", "3"),
            ("connections.max.idle.ms", "-1"),
            ("min.insync.replicas", "2"),
            ("default.replication.factor", "3"),
            ("num.partitions", "4"),
            ("socket.request.max.bytes", "1000"),
            ("log.cleaner.io.max.bytes.per.second", "1000000"),
            ("auto.create.topics.enable", "false"),
        ],
    )
    .expect("resolve");
    assert_eq!(cfg.group.max_session_timeout_ms, 60_000);
    assert_eq!(cfg.group.group_max_size, 5);
    assert_eq!(cfg.group.offsets_retention_ms, 120_000);
    assert_eq!(cfg.group.offset_metadata_bytes_max, 10);
    assert_eq!(cfg.offsets_retention_check_interval_ms, 1000);
    assert_eq!(cfg.offsets_topic_num_partitions, 3);
    assert_eq!(cfg.connections_max_idle_ms, None);
    assert_eq!((cfg.min_insync_replicas, cfg.default_replication_factor), (2, 3));
    assert_eq!(cfg.num_partitions, 4);
    assert_eq!(cfg.socket_request_max_bytes, 1000);
    assert_eq!(cfg.log_cleaner_io_max_bytes_per_second, Some(1e6));
    assert!(!cfg.auto_create_topics);
    let broker = cfg.broker_defaults();
    assert_eq!(broker.value_of("min.insync.replicas"), Some(("2".into(), true)));
    assert_eq!(broker.value_of("num.partitions"), Some(("4".into(), true)));
}

#[test]
fn bad_values_and_unknown_names_are_rejected() {
    assert!(matches!(with_file("shardz = 3\n", &[]), Err(ConfigError::UnknownSetting(_))));
    assert!(matches!(with_file("group.bogus = 3\n", &[]), Err(ConfigError::UnknownSetting(_))));
    assert!(with_file("\"group.max.size\" = 0\n", &[]).is_err());
    assert!(with_file("", &[("group.min.session.timeout.ms", "abc")]).is_err());
    // Bounds out of order.
    assert!(with_file("", &[("group.min.session.timeout.ms", "2000000")]).is_err());
    // The same setting under the old and the Kafka spelling.
    assert!(with_file("num_partitions = 2\n\"num.partitions\" = 3\n", &[]).is_err());
    let args = ServeArgs { shards: Some(0), ..ServeArgs::default() };
    assert!(matches!(ServeConfig::resolve(&args, 1), Err(ConfigError::Invalid { .. })));
    let args = ServeArgs { advertised_listener: Some("nohost".into()), ..ServeArgs::default() };
    assert!(ServeConfig::resolve(&args, 1).is_err());
    assert!(with_file("", &[("listeners", "SSL://127.0.0.1:9093")]).is_err());
}

#[test]
fn old_snake_case_keys_still_read() {
    let cfg =
        with_file("num_partitions = 3\nlog_cleaner_backoff_ms = 700\n", &[]).expect("resolve");
    assert_eq!(cfg.num_partitions, 3);
    assert_eq!(cfg.log_cleaner_backoff_ms, 700);
    assert_eq!(cfg.broker_settings["num.partitions"], "3");
}

#[test]
fn listeners_accept_kafka_syntax_and_alias_listen() {
    let cfg = with_file(
        "",
        &[
            ("listeners", "PLAINTEXT://127.0.0.1:19093"),
            ("advertised.listeners", "PLAINTEXT://broker1:29093"),
        ],
    )
    .expect("resolve");
    assert_eq!(cfg.listen, "127.0.0.1:19093".parse().expect("addr"));
    assert_eq!((cfg.advertised_host.as_str(), cfg.advertised_port), ("broker1", 29093));
    let broker = cfg.broker_defaults();
    assert_eq!(broker.settings["listeners"], "PLAINTEXT://127.0.0.1:19093");
    assert_eq!(broker.settings["advertised.listeners"], "PLAINTEXT://broker1:29093");
    // An empty host binds every interface, as in Kafka.
    let cfg = with_file("listeners = \"PLAINTEXT://:19094\"\n", &[]).expect("resolve");
    assert_eq!(cfg.listen, "0.0.0.0:19094".parse().expect("addr"));
    // --listen and listeners together are refused; the flag beats the file.
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("f.toml");
    std::fs::write(&path, "listeners = \"PLAINTEXT://127.0.0.1:1\"\n").expect("write");
    let args = ServeArgs {
        config: Some(path),
        listen: Some("127.0.0.1:2".parse().expect("addr")),
        ..ServeArgs::default()
    };
    assert_eq!(ServeConfig::resolve(&args, 1).expect("resolve").listen.port(), 2);
    let mut args =
        ServeArgs { listen: Some("127.0.0.1:2".parse().expect("addr")), ..ServeArgs::default() };
    args.kafka.values.insert("listeners".into(), "PLAINTEXT://127.0.0.1:3".into());
    assert!(ServeConfig::resolve(&args, 1).is_err());
}

#[test]
fn advertised_listener_parses_ipv6() {
    let parse = |text| listeners::parse_list("advertised.listeners", text).expect("parse");
    assert_eq!(parse("[::1]:9093"), vec![("PLAINTEXT".to_string(), "::1".to_string(), 9093)]);
    assert_eq!(
        parse("PLAINTEXT://[::1]:9093"),
        vec![("PLAINTEXT".to_string(), "::1".to_string(), 9093)]
    );
}

/// The registry's default strings are the typed constants of `constants.rs` (one place).
#[test]
fn registry_defaults_match_constants() {
    use crate::constants as c;
    use crate::controller::configs::broker_config_def;
    let default = |name: &str| broker_config_def(name).and_then(|d| d.2).expect(name).to_string();
    let g = GroupConfig::default();
    assert_eq!(
        default("group.min.session.timeout.ms"),
        c::GROUP_MIN_SESSION_TIMEOUT_MS_DEFAULT.to_string()
    );
    assert_eq!(
        default("group.max.session.timeout.ms"),
        c::GROUP_MAX_SESSION_TIMEOUT_MS_DEFAULT.to_string()
    );
    assert_eq!(
        default("group.initial.rebalance.delay.ms"),
        c::GROUP_INITIAL_REBALANCE_DELAY_MS_DEFAULT.to_string()
    );
    assert_eq!(default("group.max.size"), c::GROUP_MAX_SIZE_DEFAULT.to_string());
    assert_eq!(
        default("offset.metadata.max.bytes"),
        c::OFFSET_METADATA_BYTES_MAX_DEFAULT.to_string()
    );
    assert_eq!(
        default("offsets.retention.minutes"),
        c::OFFSETS_RETENTION_MINUTES_DEFAULT.to_string()
    );
    assert_eq!(g.offsets_retention_ms, c::OFFSETS_RETENTION_MINUTES_DEFAULT * 60_000);
    assert_eq!(
        default("offsets.retention.check.interval.ms"),
        c::OFFSETS_RETENTION_CHECK_INTERVAL_MS_DEFAULT.to_string()
    );
    assert_eq!(
        default("offsets.topic.num.partitions"),
        c::OFFSETS_TOPIC_PARTITIONS_DEFAULT.to_string()
    );
    assert_eq!(
        default("offsets.topic.segment.bytes"),
        c::OFFSETS_TOPIC_SEGMENT_BYTES_DEFAULT.to_string()
    );
    assert_eq!(default("connections.max.idle.ms"), c::CONNECTIONS_MAX_IDLE_MS_DEFAULT.to_string());
    assert_eq!(default("log.dir.reserved.bytes"), c::LOG_DIR_RESERVED_BYTES_DEFAULT.to_string());
    assert_eq!(default("shard.balance.enable"), c::SHARD_BALANCE_ENABLE_DEFAULT.to_string());
    assert_eq!(
        default("shard.balance.interval.ms"),
        c::SHARD_BALANCE_INTERVAL_MS_DEFAULT.to_string()
    );
    assert_eq!(
        default("shard.balance.margin.percent"),
        c::SHARD_BALANCE_MARGIN_PERCENT_DEFAULT.to_string()
    );
    for name in ["max.connections", "max.connections.per.ip", "max.connection.creation.rate"] {
        assert_eq!(default(name), c::MAX_CONNECTIONS_DEFAULT.to_string(), "{name}");
    }
    assert_eq!(
        default("queued.max.request.bytes"),
        c::QUEUED_MAX_REQUEST_BYTES_DEFAULT.to_string()
    );
    assert_eq!(
        default("request.receive.timeout.ms"),
        c::REQUEST_RECEIVE_TIMEOUT_MS_DEFAULT.to_string()
    );
    assert_eq!(
        default("socket.request.max.bytes"),
        c::SOCKET_REQUEST_MAX_BYTES_DEFAULT.to_string()
    );
    assert_eq!(
        default("log.retention.check.interval.ms"),
        c::RETENTION_CHECK_INTERVAL_MS_DEFAULT.to_string()
    );
    assert_eq!(default("log.cleaner.backoff.ms"), c::LOG_CLEANER_BACKOFF_MS_DEFAULT.to_string());
    assert_eq!(
        default("log.cleaner.dedupe.buffer.size"),
        c::LOG_CLEANER_DEDUPE_BUFFER_BYTES_DEFAULT.to_string()
    );
    assert_eq!(default("num.partitions"), c::NUM_PARTITIONS_DEFAULT.to_string());
    assert_eq!(
        default("default.replication.factor"),
        c::DEFAULT_REPLICATION_FACTOR_DEFAULT.to_string()
    );
    assert_eq!(default("min.insync.replicas"), c::MIN_INSYNC_REPLICAS_DEFAULT.to_string());
    assert_eq!(default("message.max.bytes"), c::MAX_MESSAGE_BYTES_DEFAULT.to_string());
    assert_eq!(default("log.segment.bytes"), c::SEGMENT_BYTES_DEFAULT.to_string());
    assert_eq!(default("log.index.interval.bytes"), c::INDEX_INTERVAL_BYTES_DEFAULT.to_string());
    assert_eq!(default("listeners"), format!("PLAINTEXT://127.0.0.1:{}", c::KAFKA_PORT_DEFAULT));
}

#[test]
fn every_setting_is_a_flag() {
    use clap::CommandFactory as _;
    #[derive(clap::Parser)]
    struct Cli {
        #[command(flatten)]
        serve: ServeArgs,
    }
    let cmd = Cli::command();
    for name in crate::controller::configs::broker_setting_names() {
        let flag = flag_name(name);
        assert!(cmd.get_arguments().any(|a| a.get_long() == Some(flag.as_str())), "--{flag}");
    }
    use clap::Parser as _;
    let cli = Cli::try_parse_from([
        "serve",
        "--group-min-session-timeout-ms",
        "3000",
        "--listeners",
        "PLAINTEXT://127.0.0.1:0",
        "--auto-create-topics",
        "false",
        "--log-retention-hours",
        "-1",
    ])
    .expect("parse");
    assert_eq!(cli.serve.kafka.values["group.min.session.timeout.ms"], "3000");
    assert_eq!(cli.serve.kafka.values["log.retention.hours"], "-1");
    let cfg = ServeConfig::resolve(&cli.serve, 1).expect("resolve");
    assert_eq!(cfg.group.min_session_timeout_ms, 3000);
    assert!(!cfg.auto_create_topics);
    assert_eq!(cfg.listen.port(), 0);
}

/// `serve`'s flags parsed as the command line would.
fn parse_serve(argv: &[&str]) -> Result<ServeArgs, clap::Error> {
    use clap::Parser as _;
    #[derive(clap::Parser)]
    struct Cli {
        #[command(flatten)]
        serve: ServeArgs,
    }
    let argv = std::iter::once("serve").chain(argv.iter().copied());
    Cli::try_parse_from(argv).map(|c| c.serve)
}

#[test]
fn unit_flags_take_plain_numbers_and_units() {
    let parse = parse_serve;
    let args = parse(&["--log-cleaner-backoff-ms", "15000", "--spin-before-park-us", "50"])
        .expect("plain numbers");
    assert_eq!(args.kafka.values["log.cleaner.backoff.ms"], "15000");
    assert_eq!(args.spin_before_park_us, Some(50));
    let args = parse(&[
        "--log-cleaner-backoff-ms",
        "15s",
        "--log-retention-check-interval-ms",
        "5m",
        "--spin-before-park-us",
        "1ms",
        "--socket-request-max-bytes",
        "100MiB",
        "--log-cleaner-dedupe-buffer-size",
        "64MiB",
        "--log-retention-bytes",
        "-1",
    ])
    .expect("units");
    let v = &args.kafka.values;
    assert_eq!(v["log.cleaner.backoff.ms"], "15000");
    assert_eq!(v["log.retention.check.interval.ms"], "300000");
    assert_eq!(args.spin_before_park_us, Some(1000));
    assert_eq!(v["socket.request.max.bytes"], (100u64 << 20).to_string());
    assert_eq!(v["log.cleaner.dedupe.buffer.size"], (64u64 << 20).to_string());
    assert_eq!(v["log.retention.bytes"], "-1");
    let err = parse(&["--log-cleaner-backoff-ms", "15x"]).expect_err("bad unit");
    assert_eq!(err.exit_code(), 2);
    assert!(err.to_string().contains("unknown duration unit 'x'"), "{err}");
}

#[test]
fn file_errors_are_one_line_with_the_line_number() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("bad.toml");
    std::fs::write(&path, "shards = 1\nshards = 3\n").expect("write");
    let args = ServeArgs { config: Some(path), ..ServeArgs::default() };
    let err = ServeConfig::resolve(&args, 1).expect_err("duplicate key").to_string();
    assert!(!err.contains('\n') && err.contains("line 2"), "{err}");
}

#[test]
fn cpu_lists_parse_like_taskset() {
    assert_eq!(parse_cpu_list("1"), Ok(CpuList(vec![1])));
    assert_eq!(parse_cpu_list("0,2-4"), Ok(CpuList(vec![0, 2, 3, 4])));
    assert_eq!(parse_cpu_list(" 3 , 1 "), Ok(CpuList(vec![3, 1])));
    for bad in ["", "a", "1-", "3-1", "1,1", "0-99999999", "-1"] {
        assert!(parse_cpu_list(bad).is_err(), "{bad:?} accepted");
    }
    // --cpus sets the default shard count; --shards still wins.
    let args = ServeArgs { cpus: Some(CpuList(vec![0, 1, 2])), ..ServeArgs::default() };
    let cfg = ServeConfig::resolve(&args, 8).expect("resolve");
    assert_eq!((cfg.shards, cfg.cpus), (3, Some(vec![0, 1, 2])));
    let args = ServeArgs { cpus: Some(CpuList(vec![1])), shards: Some(2), ..args };
    assert_eq!(ServeConfig::resolve(&args, 8).expect("resolve").shards, 2);
}

/// `max.connections*`, `queued.max.request.bytes` and `request.receive.timeout.ms` resolve
/// from their Kafka names, with IP overrides; a host name override is refused.
#[test]
fn connection_limits_resolve() {
    let defaults = with_file("", &[]).expect("defaults").connection_limits;
    assert_eq!(defaults, ConnectionLimits::default());
    assert_eq!(defaults.queued_request_bytes_per_shard(2), Some(256 * 1024 * 1024));
    let cfg = with_file(
        "",
        &[
            ("max.connections", "10"),
            ("max.connections.per.ip", "3"),
            ("max.connections.per.ip.overrides", "127.0.0.1:5, [::1]:0"),
            ("max.connection.creation.rate", "8"),
            ("queued.max.request.bytes", "-1"),
            ("request.receive.timeout.ms", "2500"),
        ],
    )
    .expect("resolve");
    let l = cfg.connection_limits;
    assert_eq!(l.max_connections, 10);
    assert_eq!(l.per_ip_limit("127.0.0.1".parse().expect("ip")), 5);
    assert_eq!(l.per_ip_limit("::1".parse().expect("ip")), 0);
    assert_eq!(l.per_ip_limit("10.0.0.1".parse().expect("ip")), 3);
    assert!((l.max_connection_creation_rate_per_shard(2) - 4.0).abs() < f64::EPSILON);
    assert_eq!(l.queued_request_bytes_per_shard(2), None);
    assert_eq!(l.request_receive_timeout_ms, 2500);
    let host = [("max.connections.per.ip.overrides", "broker.example:4")];
    assert!(with_file("", &host).is_err());
}

#[test]
fn cache_bytes_takes_units_and_refuses_a_cache_too_small_for_a_read_ahead() {
    let parse = |argv: &[&str]| parse_serve(argv).expect("parse");
    let cfg = ServeConfig::resolve(&ServeArgs::default(), 1).expect("defaults");
    assert_eq!(cfg.cache_bytes, 64 << 20);
    let cfg = ServeConfig::resolve(&parse(&["--cache-bytes", "3GiB"]), 1).expect("resolve");
    assert_eq!(cfg.cache_bytes, 3 << 30);
    let err = ServeConfig::resolve(&parse(&["--cache-bytes", "4096"]), 1).expect_err("too small");
    assert!(err.to_string().contains("cache_bytes"), "{err}");
}

#[test]
fn the_default_cache_is_an_eighth_of_memory_over_the_shards_and_at_least_64_mib() {
    let on = |argv: &[&str], cores, mem| {
        ServeConfig::resolve_on(&parse_serve(argv).expect("parse"), cores, mem).expect("resolve")
    };
    assert_eq!(on(&[], 2, Some(24 << 30)).cache_bytes, 3 << 29, "24 GiB / 8 / 2 shards");
    assert_eq!(on(&["--shards", "4"], 2, Some(32 << 30)).cache_bytes, 1 << 30);
    assert_eq!(on(&[], 4, Some(1 << 30)).cache_bytes, 64 << 20, "the floor");
    assert_eq!(on(&[], 1, None).cache_bytes, 64 << 20, "memory unknown");
    assert_eq!(on(&["--cache-bytes", "8MiB"], 1, Some(24 << 30)).cache_bytes, 8 << 20);
}

/// A development CA and a broker key store (key then chain) for `localhost`/127.0.0.1, as
/// PEM files in `dir`: (key store path, trust store path).
fn pem_files(dir: &std::path::Path) -> (String, String) {
    let ca_key = rcgen::KeyPair::generate().expect("key");
    let mut ca_params = rcgen::CertificateParams::new(Vec::new()).expect("params");
    ca_params.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
    let ca = ca_params.self_signed(&ca_key).expect("ca");
    let key = rcgen::KeyPair::generate().expect("key");
    let params = rcgen::CertificateParams::new(vec!["localhost".into()]).expect("params");
    let leaf = params.signed_by(&key, &ca, &ca_key).expect("leaf");
    let (ks, ts) = (dir.join("broker.pem"), dir.join("ca.pem"));
    std::fs::write(&ks, format!("{}{}", key.serialize_pem(), leaf.pem())).expect("write");
    std::fs::write(&ts, ca.pem()).expect("write");
    (ks.display().to_string(), ts.display().to_string())
}

/// A node of a three-voter cluster whose inter-broker listener is SASL_SSL, with `more`
/// settings appended.
fn sasl_ssl_cluster(dir: &std::path::Path, more: &str) -> Result<ServeConfig, ConfigError> {
    let (ks, ts) = pem_files(dir);
    with_file(
        &format!(
            "node_id = 1\ncontroller_listen = \"127.0.0.1:19193\"\n\
             \"controller.quorum.voters\" = \"1@127.0.0.1:19193,2@127.0.0.1:19293\"\n\
             listeners = \"CLIENT://127.0.0.1:0,BROKER://127.0.0.1:0\"\n\
             \"listener.security.protocol.map\" = \"CLIENT:PLAINTEXT,BROKER:SASL_SSL\"\n\
             \"inter.broker.listener.name\" = \"BROKER\"\n\
             \"ssl.keystore.location\" = \"{ks}\"\n\"ssl.truststore.location\" = \"{ts}\"\n{more}"
        ),
        &[],
    )
}

#[test]
fn an_inter_broker_listener_with_tls_and_sasl_gives_a_secured_client() {
    let dir = tempfile::tempdir().expect("tempdir");
    let jaas = "\"listener.name.broker.scram-sha-512.sasl.jaas.config\" = 'org.apache.kafka.\
                common.security.scram.ScramLoginModule required username=\"broker\" \
                password=\"s3cret\";'\n";
    let mechanism = "\"sasl.mechanism.inter.broker.protocol\" = \"SCRAM-SHA-512\"\n";
    let cfg = sasl_ssl_cluster(dir.path(), &format!("{mechanism}{jaas}")).expect("resolve");
    let client = &cfg.inter_broker_client;
    assert_eq!(client.listener, "BROKER");
    assert!(client.tls.is_some());
    let login = client.sasl.as_ref().expect("sasl");
    assert_eq!((login.mechanism, login.user.as_str()), ("SCRAM-SHA-512", "broker"));
    assert!(!format!("{client:?}").contains("s3cret"), "no password in Debug");

    // Each missing piece is an error naming the setting to fix.
    let err = |more: &str| sasl_ssl_cluster(dir.path(), more).expect_err(more).to_string();
    assert!(err(jaas).contains("sasl.mechanism.inter.broker.protocol"), "GSSAPI default");
    let disabled = "\"listener.name.broker.sasl.enabled.mechanisms\" = \"PLAIN\"\n";
    assert!(err(&format!("{mechanism}{jaas}{disabled}")).contains("sasl.enabled.mechanisms"));
    assert!(err(mechanism).contains("listener.name.broker.scram-sha-512.sasl.jaas.config"));
    let no_password = "\"listener.name.broker.scram-sha-512.sasl.jaas.config\" = \
                       'M required username=\"broker\";'\n";
    assert!(err(&format!("{mechanism}{no_password}")).contains("password"));
    let algorithm = "\"ssl.endpoint.identification.algorithm\" = \"dns\"\n";
    assert!(err(&format!("{mechanism}{jaas}{algorithm}")).contains("ssl.endpoint"));
    let oauth = "\"sasl.mechanism.inter.broker.protocol\" = \"OAUTHBEARER\"\n";
    assert!(err(oauth).contains("OAUTHBEARER is not served between brokers"));
}

#[test]
fn a_tls_inter_broker_listener_needs_a_trust_store_and_a_single_node_dials_nobody() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (ks, _) = pem_files(dir.path());
    let listeners =
        format!("listeners = \"SSL://127.0.0.1:0\"\n\"ssl.keystore.location\" = \"{ks}\"\n");
    let single = with_file(&listeners, &[]).expect("a single node needs no trust store");
    assert!(single.inter_broker_client.tls.is_none());
    let cluster = format!(
        "node_id = 1\ncontroller_listen = \"127.0.0.1:19193\"\n\
         \"controller.quorum.voters\" = \"1@127.0.0.1:19193,2@127.0.0.1:19293\"\n{listeners}"
    );
    let err = with_file(&cluster, &[]).expect_err("no trust store").to_string();
    assert!(err.contains("ssl.truststore.location"), "{err}");
}

#[test]
fn an_ssl_controller_listener_secures_the_quorum_and_gives_its_address() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (ks, ts) = pem_files(dir.path());
    let base = format!(
        "node_id = 1\n\"controller.quorum.voters\" = \"1@localhost:19193,2@127.0.0.1:19293\"\n\
         listeners = \"PLAINTEXT://127.0.0.1:0,CONTROLLER://127.0.0.1:19193\"\n\
         \"controller.listener.names\" = \"CONTROLLER\"\n\
         \"listener.security.protocol.map\" = \"PLAINTEXT:PLAINTEXT,CONTROLLER:SSL\"\n\
         \"ssl.keystore.location\" = \"{ks}\"\n"
    );
    let err = with_file(&base, &[]).expect_err("no trust store").to_string();
    assert!(err.contains("controller.listener.names") && err.contains("truststore"), "{err}");
    let cfg = with_file(&format!("{base}\"ssl.truststore.location\" = \"{ts}\"\n"), &[])
        .expect("resolve");
    let tls = cfg.controller_tls.as_ref().expect("quorum TLS");
    assert_eq!(tls.voter_hosts[&1], "localhost");
    assert_eq!(cfg.cluster.controller_listen, Some("127.0.0.1:19193".parse().expect("addr")));
    assert_eq!(cfg.listeners.all.len(), 1, "CONTROLLER is not a Kafka listener");
    let sasl = base.replace("CONTROLLER:SSL", "CONTROLLER:SASL_SSL");
    assert!(with_file(&sasl, &[]).expect_err("sasl").to_string().contains("no SASL"));
}
