//! The table of broker-only configs Shardlog knows ([`BROKER_ONLY_CONFIGS`]): name, type,
//! default, validator, dynamic update mode and doc of each, as Kafka's broker config docs
//! give them. Data only; `super::broker` resolves and validates values against it.
//! Invariant: sorted by name (a test checks the order), one entry per name.

use super::broker::{BrokerOnlyConfig, UpdateMode};
use super::{ConfigType, Validator};

const fn only(
    name: &'static str,
    kind: ConfigType,
    default: Option<&'static str>,
    validator: Validator,
    update: UpdateMode,
    doc: &'static str,
) -> BrokerOnlyConfig {
    BrokerOnlyConfig { name, kind, default, validator, doc, update }
}

use ConfigType::{Boolean as B, Double as D, Int as I, Long as L, String as S};
use UpdateMode::{ClusterWide as DYNAMIC, PerBroker as PER_BROKER, ReadOnly as READ_ONLY};
use Validator::{AtLeast, Between, ListOf, None as Any, OneOf};

/// Kafka's default of the replication throttles, `Long.MAX_VALUE` bytes/s (no throttle).
const THROTTLE_DEFAULT: &str = "9223372036854775807";

/// Broker-only configs Shardlog knows, sorted by name (a test checks the order).
pub static BROKER_ONLY_CONFIGS: &[BrokerOnlyConfig] = &[
    only(
        "advertised.listeners",
        S,
        None,
        Any,
        UpdateMode::StartOnly("the advertised listener is read at start (Kafka: per-broker)"),
        "Listeners to publish to clients, as NAME://host:port,... (alias of \
         --advertised-listener); null means the listeners value. Metadata answers each client \
         with the endpoints of the listener it connected to.",
    ),
    only(
        "allow.everyone.if.no.acl.found",
        B,
        Some("false"),
        Any,
        READ_ONLY,
        "With an authorizer (authorizer.class.name): whether a resource that no ACL names is \
         open to every principal. Once any ACL names a resource (LITERAL, PREFIXED or the * \
         wildcard), only matching ACLs decide, as Kafka's StandardAuthorizer.",
    ),
    only(
        "authorizer.class.name",
        S,
        Some(""),
        OneOf(&[
            "",
            "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
            "kafka.security.authorizer.AclAuthorizer",
        ]),
        READ_ONLY,
        "The authorizer: Kafka's StandardAuthorizer (or the legacy AclAuthorizer name, which \
         means the same ACL semantics here) turns authorization on: every request is checked \
         against the ACLs in the metadata log, super.users and \
         allow.everyone.if.no.acl.found. Empty (the default): no authorization, and the ACL \
         APIs answer SECURITY_DISABLED.",
    ),
    only(
        "auto.create.topics.enable",
        B,
        Some("true"),
        Any,
        READ_ONLY,
        "Enable auto creation of topic on the server.",
    ),
    only(
        "auto.leader.rebalance.enable",
        B,
        Some("true"),
        Any,
        READ_ONLY,
        "Enables auto leader balancing: the active controller checks the leadership balance \
         every leader.imbalance.check.interval.seconds and runs a preferred-leader election \
         for every partition not led by its preferred replica (first in the assignment) while \
         that replica is live and in the ISR (Kafka 4.x: no percentage threshold).",
    ),
    only(
        "broker.heartbeat.interval.ms",
        I,
        Some("2000"),
        AtLeast(1),
        READ_ONLY,
        "The length of time in milliseconds between broker heartbeats.",
    ),
    only(
        "broker.session.timeout.ms",
        I,
        Some("9000"),
        AtLeast(1),
        READ_ONLY,
        "The length of time in milliseconds that a broker lease lasts if no heartbeats are \
         made: the active controller then fences the broker.",
    ),
    only(
        "connection.failed.authentication.delay.ms",
        I,
        Some("100"),
        AtLeast(0),
        READ_ONLY,
        "Connection close delay on failed authentication: the time (in milliseconds) by which \
         connection close is delayed on authentication failure, against password guessing.",
    ),
    only(
        "connections.max.idle.ms",
        L,
        Some("600000"),
        Any,
        READ_ONLY,
        "Idle connections timeout: the server closes a connection that has had no request \
         and no response for this many milliseconds. Negative disables the timeout.",
    ),
    only(
        "connections.max.reauth.ms",
        L,
        Some("0"),
        Any,
        READ_ONLY,
        "KIP-368: when positive, the longest a SASL session lasts (an OAUTHBEARER session also \
         ends at its token's exp). SaslAuthenticate v1+ tells the client (session_lifetime_ms), \
         which re-authenticates on the open connection before then; a request other than the \
         re-authentication after it closes the connection. Per listener and mechanism as \
         listener.name.<listener>.<mechanism lower-case>.connections.max.reauth.ms.",
    ),
    only(
        "controlled.shutdown.enable",
        B,
        Some("true"),
        Any,
        READ_ONLY,
        "Enable controlled shutdown of the broker: on SIGTERM a clustered broker asks the \
         active controller (BrokerHeartbeat want_shut_down) to move its leaderships to other \
         ISR members and take it out of the ISRs, and keeps serving until it is told to go.",
    ),
    only(
        "controlled.shutdown.timeout.ms",
        I,
        Some("30000"),
        Between(0, 40_000),
        READ_ONLY,
        "Shardlog's own: how long a clustered broker's controlled shutdown may take before the \
         broker logs it and stops anyway (then its leaderships move when its session expires). \
         At most 40000, so it fits inside the 60 s hard shutdown limit with the 10 s drain.",
    ),
    only(
        "controller.listener.names",
        S,
        None,
        Any,
        READ_ONLY,
        "A comma-separated list of the names of the listeners used by the controller; the \
         first is the controller quorum's. Its entry in listeners (if any) is the quorum's \
         listen address, not a Kafka listener; mapped to SSL in \
         listener.security.protocol.map, every quorum connection is TLS (mutual unless \
         listener.name.<name>.ssl.client.auth says otherwise). PLAINTEXT when unmapped; SASL is \
         not served on the quorum.",
    ),
    only(
        "controller.quorum.election.timeout.ms",
        I,
        Some("1000"),
        AtLeast(100),
        READ_ONLY,
        "Maximum time in milliseconds without fetching from the leader before triggering a new \
         election. Shardlog rounds it to whole quorum ticks (controller.quorum.tick.ms).",
    ),
    only(
        "controller.quorum.voters",
        S,
        None,
        Any,
        READ_ONLY,
        "Map of id/endpoint information for the set of voters in a comma-separated list of \
         {id}@{host}:{port} entries, e.g. 1@127.0.0.1:9093,2@127.0.0.1:9193,3@127.0.0.1:9293. \
         The endpoints are the voters' --controller-listen addresses, which speak Shardlog's \
         Raft framing, not the Kafka protocol. Unset: a single node that is its own quorum.",
    ),
    only(
        "default.replication.factor",
        I,
        Some("1"),
        AtLeast(1),
        READ_ONLY,
        "The replication factor for automatically created topics, and for topics created \
         with -1 as the replication factor",
    ),
    only(
        "delete.topic.enable",
        B,
        Some("true"),
        Any,
        READ_ONLY,
        "When set to false, deleting topics through the admin API has no effect.",
    ),
    only(
        "follower.replication.throttled.rate",
        L,
        Some(THROTTLE_DEFAULT),
        AtLeast(0),
        DYNAMIC,
        "A long representing the upper bound (bytes/sec) on replication traffic for followers \
         enumerated in the property follower.replication.throttled.replicas (for each topic). \
         It is suggested that the limit be kept above 1MB/s for accurate behaviour. Honoured by \
         each shard's replica traffic (`replication::throttle`).",
    ),
    only(
        "group.initial.rebalance.delay.ms",
        I,
        Some("3000"),
        AtLeast(0),
        READ_ONLY,
        "The amount of time the group coordinator will wait for more consumers to join a new \
         group before performing the first rebalance. A longer delay means potentially fewer \
         rebalances, but increases the time until processing begins.",
    ),
    only(
        "group.max.session.timeout.ms",
        I,
        Some("1800000"),
        AtLeast(1),
        READ_ONLY,
        "The maximum allowed session timeout for registered consumers. Longer timeouts give \
         consumers more time to process messages in between heartbeats at the cost of a longer \
         time to detect failures.",
    ),
    only(
        "group.max.size",
        I,
        Some("10000"),
        AtLeast(1),
        READ_ONLY,
        "The maximum number of consumers that a single consumer group can accommodate. \
         Shardlog's default is 10000 (Kafka's is unbounded) so one group cannot take \
         unbounded coordinator memory.",
    ),
    only(
        "group.min.session.timeout.ms",
        I,
        Some("6000"),
        AtLeast(1),
        READ_ONLY,
        "The minimum allowed session timeout for registered consumers. Shorter timeouts result \
         in quicker failure detection at the cost of more frequent consumer heartbeating, \
         which can overwhelm broker resources.",
    ),
    only(
        "inter.broker.listener.name",
        S,
        None,
        Any,
        READ_ONLY,
        "Name of listener used for communication between brokers. If this is unset, the \
         listener name is defined by security.inter.broker.protocol (a broker without a \
         PLAINTEXT listener uses its first). Replica fetches and transaction markers dial \
         the other brokers' endpoints of this listener with its TLS (trust store, key store) \
         and SASL (sasl.mechanism.inter.broker.protocol, with the username and password of \
         listener.name.<listener>.<mechanism>.sasl.jaas.config).",
    ),
    only(
        "leader.imbalance.check.interval.seconds",
        L,
        Some("300"),
        AtLeast(1),
        READ_ONLY,
        "The frequency with which the partition rebalance check is triggered by the controller.",
    ),
    only(
        "leader.replication.throttled.rate",
        L,
        Some(THROTTLE_DEFAULT),
        AtLeast(0),
        DYNAMIC,
        "A long representing the upper bound (bytes/sec) on replication traffic for leaders \
         enumerated in the property leader.replication.throttled.replicas (for each topic). \
         It is suggested that the limit be kept above 1MB/s for accurate behaviour. Honoured by \
         each shard's replica traffic (`replication::throttle`).",
    ),
    only(
        "listener.security.protocol.map",
        S,
        Some(crate::constants::LISTENER_SECURITY_PROTOCOL_MAP_DEFAULT),
        Any,
        READ_ONLY,
        "Map between listener names and security protocols, as NAME:PROTOCOL,... Each \
         listener's own settings take Kafka's prefix listener.name.<lower-case name>.",
    ),
    only(
        "listeners",
        S,
        Some("PLAINTEXT://127.0.0.1:9092"),
        Any,
        READ_ONLY,
        "Comma-separated list of listeners, NAME://host:port (alias of --listen for one \
         PLAINTEXT listener). Names are security protocols or names given in \
         listener.security.protocol.map; an empty host binds every interface.",
    ),
    only(
        "log.cleaner.backoff.ms",
        L,
        Some("15000"),
        AtLeast(1),
        DYNAMIC,
        "The amount of time to sleep when there are no logs to clean",
    ),
    only(
        "log.cleaner.dedupe.buffer.size",
        L,
        Some("134217728"),
        AtLeast(1024 * 1024),
        DYNAMIC,
        "The total memory used for log deduplication across all cleaner threads (here: split \
         evenly across shards)",
    ),
    only(
        "log.cleaner.io.max.bytes.per.second",
        D,
        Some("1.7976931348623157E308"),
        Validator::DoubleBetween(f64::MIN_POSITIVE, f64::MAX),
        DYNAMIC,
        "The log cleaner will be throttled so that the sum of its read and write i/o will be \
         less than this value on average (here: for the whole broker, split across shards)",
    ),
    only(
        "log.dir.reserved.bytes",
        L,
        Some("67108864"),
        AtLeast(0),
        READ_ONLY,
        "Shardlog's own: free space of the data directory kept for the broker's own writes \
         (consumer offsets, group metadata, the metadata log). Below it, produce answers \
         KAFKA_STORAGE_ERROR until space is freed. 0: produce until the disk is full.",
    ),
    only(
        "log.retention.check.interval.ms",
        L,
        Some("300000"),
        AtLeast(1),
        READ_ONLY,
        "The frequency in milliseconds that the log cleaner checks whether any log is \
         eligible for deletion",
    ),
    only(
        "max.connection.creation.rate",
        I,
        Some("2147483647"),
        AtLeast(0),
        READ_ONLY,
        "The maximum connection creation rate the broker allows, connections/s; each shard \
         holds an equal share and delays accepts beyond it.",
    ),
    only(
        "max.connections",
        I,
        Some("2147483647"),
        AtLeast(0),
        READ_ONLY,
        "The maximum number of connections the broker allows; at the limit new connections \
         wait in the kernel's accept queue until one closes.",
    ),
    only(
        "max.connections.per.ip",
        I,
        Some("2147483647"),
        AtLeast(0),
        READ_ONLY,
        "The maximum number of connections from each IP address; a connection over it is \
         closed at once.",
    ),
    only(
        "max.connections.per.ip.overrides",
        S,
        Some(""),
        Any,
        READ_ONLY,
        "A comma-separated list of per-IP overrides of max.connections.per.ip, as IP:count \
         (IP addresses only, unlike Kafka which also takes host names).",
    ),
    only(
        "num.partitions",
        I,
        Some("1"),
        AtLeast(1),
        READ_ONLY,
        "The default number of log partitions per topic",
    ),
    only(
        "offset.metadata.max.bytes",
        I,
        Some("4096"),
        AtLeast(0),
        READ_ONLY,
        "The maximum size for a metadata entry associated with an offset commit.",
    ),
    only(
        "offsets.retention.check.interval.ms",
        L,
        Some("600000"),
        AtLeast(1),
        READ_ONLY,
        "Frequency at which to check for stale offsets",
    ),
    only(
        "offsets.retention.minutes",
        I,
        Some("10080"),
        AtLeast(1),
        READ_ONLY,
        "For subscribed consumers, committed offset of a specific partition will be expired \
         and discarded after this period of time once the group is empty; for standalone \
         consumers (manual assignment) after this period from the last commit.",
    ),
    only(
        "offsets.topic.num.partitions",
        I,
        Some("50"),
        AtLeast(1),
        READ_ONLY,
        "The number of partitions for the offset commit topic (should not change after \
         deployment: it only applies when __consumer_offsets is created).",
    ),
    only(
        "offsets.topic.replication.factor",
        I,
        Some("3"),
        AtLeast(1),
        READ_ONLY,
        "The replication factor for the offsets topic, capped by the number of live \
         unfenced brokers when __consumer_offsets is created.",
    ),
    only(
        "offsets.topic.segment.bytes",
        I,
        Some("104857600"),
        AtLeast(1024 * 1024),
        READ_ONLY,
        "The offsets topic segment bytes should be kept relatively small in order to \
         facilitate faster log compaction and cache loads.",
    ),
    only(
        "process.roles",
        ConfigType::List,
        Some("broker,controller"),
        Validator::ListOf(&["broker", "controller"]),
        READ_ONLY,
        "The roles this process plays: 'broker', 'controller', or 'broker,controller' if it \
         is both (Shardlog's default, so a single node needs no setting).",
    ),
    only(
        "producer.id.expiration.ms",
        L,
        Some("86400000"),
        AtLeast(1),
        DYNAMIC,
        "The time in ms that a topic partition leader will wait before expiring producer IDs. \
         Producer IDs will not expire while a transaction associated to them is still ongoing.",
    ),
    only(
        "queued.max.request.bytes",
        L,
        Some("536870912"),
        AtLeast(-1),
        READ_ONLY,
        "Bytes of requests read but not yet answered, for the whole broker (each shard holds \
         an equal share); when spent, connections stop reading until answers free it. -1: \
         unbounded (Kafka's default; Shardlog's is 512 MiB).",
    ),
    only(
        "quota.window.num",
        I,
        Some("11"),
        AtLeast(1),
        READ_ONLY,
        "The number of samples to retain in memory for client quotas",
    ),
    only(
        "quota.window.size.seconds",
        I,
        Some("1"),
        AtLeast(1),
        READ_ONLY,
        "The time span of each sample for client quotas",
    ),
    only(
        "replica.alter.log.dirs.io.max.bytes.per.second",
        L,
        Some(THROTTLE_DEFAULT),
        AtLeast(0),
        DYNAMIC,
        "A long representing the upper bound (bytes/sec) on disk IO used for moving replica \
         between log directories on the same broker. Accepted, validated, stored and \
         described; Shardlog has one log directory per broker, so nothing moves between them \
         (kafka-reassign-partitions.sh sets and removes it with its throttles).",
    ),
    only(
        "replica.lag.time.max.ms",
        L,
        Some("30000"),
        Any,
        READ_ONLY,
        "If a follower hasn't sent any fetch requests or hasn't consumed up to the leaders \
         log end offset for at least this time, the leader will remove the follower from isr",
    ),
    only(
        "request.receive.timeout.ms",
        L,
        Some("30000"),
        AtLeast(1),
        READ_ONLY,
        "Shardlog's own (Kafka has no such bound): a request whose first byte arrived must be \
         received whole within this many milliseconds, or the connection is closed.",
    ),
    only(
        "sasl.enabled.mechanisms",
        ConfigType::List,
        Some("PLAIN,SCRAM-SHA-256,SCRAM-SHA-512"),
        ListOf(&["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512", "OAUTHBEARER"]),
        READ_ONLY,
        "The list of SASL mechanisms enabled in the server (per listener with the \
         listener.name prefix). Kafka's default, GSSAPI, is not served: Shardlog enables the \
         mechanisms it serves with passwords; OAUTHBEARER is enabled by naming it.",
    ),
    only(
        "sasl.jaas.config",
        ConfigType::Password,
        None,
        Any,
        READ_ONLY,
        "JAAS login context parameters, only as listener.name.<listener>.<mechanism \
         lower-case>.sasl.jaas.config. For PLAIN: org.apache.kafka.common.security.plain.\
         PlainLoginModule required user_<name>=\"<password>\" ...; the users it lists. For \
         OAUTHBEARER: org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule \
         required [unsecuredValidator...=...];",
    ),
    only(
        "sasl.mechanism.inter.broker.protocol",
        S,
        Some("GSSAPI"),
        Any,
        READ_ONLY,
        "SASL mechanism used for inter-broker communication. Kafka's default, GSSAPI, is not \
         served: a cluster whose inter-broker listener is SASL_PLAINTEXT or SASL_SSL sets \
         PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512 (one the listener enables).",
    ),
    only(
        "sasl.oauthbearer.clock.skew.seconds",
        I,
        Some("30"),
        AtLeast(0),
        READ_ONLY,
        "OAUTHBEARER with OAuthBearerValidatorCallbackHandler: the allowable clock skew, in \
         seconds, between the broker and the token's issuer when checking exp and nbf.",
    ),
    only(
        "sasl.oauthbearer.expected.audience",
        ConfigType::List,
        None,
        Any,
        READ_ONLY,
        "OAUTHBEARER with OAuthBearerValidatorCallbackHandler: the audiences the broker accepts; \
         a token's aud must name one. Unset: a token naming an audience is refused (jose4j's \
         rule, as in Kafka).",
    ),
    only(
        "sasl.oauthbearer.expected.issuer",
        S,
        None,
        Any,
        READ_ONLY,
        "OAUTHBEARER with OAuthBearerValidatorCallbackHandler: the issuer a token's iss must be \
         (unset: not checked).",
    ),
    only(
        "sasl.oauthbearer.jwks.endpoint.url",
        S,
        None,
        Any,
        READ_ONLY,
        "OAUTHBEARER with OAuthBearerValidatorCallbackHandler: the JSON Web Key Set whose keys \
         sign the tokens (RS256, RS384, RS512, ES256, by kid). Only file: URLs (a local file, \
         reloaded when its modification time changes); an http(s) URL fails the start.",
    ),
    only(
        "sasl.oauthbearer.scope.claim.name",
        S,
        Some("scope"),
        Any,
        READ_ONLY,
        "OAUTHBEARER with OAuthBearerValidatorCallbackHandler: the claim holding the token's \
         scope (a string or a list of strings).",
    ),
    only(
        "sasl.oauthbearer.sub.claim.name",
        S,
        Some("sub"),
        Any,
        READ_ONLY,
        "OAUTHBEARER with OAuthBearerValidatorCallbackHandler: the claim naming the principal \
         (User:<value>).",
    ),
    only(
        "sasl.server.callback.handler.class",
        ConfigType::Class,
        None,
        Any,
        READ_ONLY,
        "As listener.name.<listener>.oauthbearer.sasl.server.callback.handler.class: \
         org.apache.kafka.common.security.oauthbearer.OAuthBearerValidatorCallbackHandler (or \
         its older ...oauthbearer.secured. name) verifies signed tokens against \
         sasl.oauthbearer.jwks.endpoint.url; unset, OAUTHBEARER takes Kafka's unsecured \
         validator (development only). Other classes fail the start.",
    ),
    only(
        "security.inter.broker.protocol",
        S,
        Some("PLAINTEXT"),
        Any,
        READ_ONLY,
        "Security protocol used to communicate between brokers (names the listener when \
         inter.broker.listener.name is unset): PLAINTEXT, SSL, SASL_PLAINTEXT or SASL_SSL.",
    ),
    only(
        "shard.balance.enable",
        B,
        Some("true"),
        Any,
        READ_ONLY,
        "Shardlog's own: whether shard 0 of this broker moves partitions between its shards \
         when one shard carries more bytes in+out per second than the coolest by \
         shard.balance.margin.percent (one move at a time; see tuning.md).",
    ),
    only(
        "shard.balance.interval.ms",
        L,
        Some("300000"),
        AtLeast(1000),
        READ_ONLY,
        "Shardlog's own: the window over which the shard balancer measures per-partition \
         byte rates; an imbalance must last a whole window, and a move is followed by a \
         window without moves (cooldown).",
    ),
    only(
        "shard.balance.margin.percent",
        I,
        Some("50"),
        AtLeast(1),
        READ_ONLY,
        "Shardlog's own: how much hotter (bytes in+out per second, percent) the hottest shard \
         must be than the coolest before the balancer moves a partition.",
    ),
    only(
        "socket.request.max.bytes",
        I,
        Some("104857600"),
        AtLeast(64),
        READ_ONLY,
        "The maximum number of bytes in a socket request",
    ),
    only(
        "ssl.cipher.suites",
        ConfigType::List,
        Some(""),
        Any,
        READ_ONLY,
        "A list of cipher suites, by their IANA names (TLS_AES_128_GCM_SHA256, \
         TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384, ...), in order of preference. Empty: rustls' \
         defaults. rustls offers only AEAD suites with forward secrecy; another name fails the \
         start, as does an enabled protocol left without a suite.",
    ),
    only(
        "ssl.client.auth",
        S,
        Some("none"),
        OneOf(&["none", "requested", "required"]),
        READ_ONLY,
        "Whether the broker asks for client certificates (mutual TLS): required, requested \
         or none. An authenticated certificate's subject DN is the principal (User:<DN>).",
    ),
    only(
        "ssl.enabled.protocols",
        ConfigType::List,
        Some("TLSv1.2,TLSv1.3"),
        ListOf(&["TLSv1.2", "TLSv1.3"]),
        READ_ONLY,
        "The list of protocols enabled for TLS connections.",
    ),
    only(
        "ssl.endpoint.identification.algorithm",
        S,
        Some("https"),
        OneOf(&["https", "HTTPS", ""]),
        READ_ONLY,
        "The endpoint identification algorithm to validate server hostname using server \
         certificate: https checks that a broker's certificate names the host it is dialled \
         on (between brokers and in the quorum); empty checks only that it chains to the trust \
         store.",
    ),
    only(
        "ssl.key.password",
        ConfigType::Password,
        None,
        Any,
        PER_BROKER,
        "The password of the private key in the key store file; a PKCS12 key store is opened \
         with ssl.keystore.password, or this when that is unset.",
    ),
    only(
        "ssl.keystore.certificate.chain",
        ConfigType::Password,
        None,
        Any,
        PER_BROKER,
        "Certificate chain in PEM format (ssl.keystore.type=PEM), with ssl.keystore.key.",
    ),
    only(
        "ssl.keystore.key",
        ConfigType::Password,
        None,
        Any,
        PER_BROKER,
        "Private key in PEM format (PKCS#8, PKCS#1 or SEC1, not encrypted), with \
         ssl.keystore.certificate.chain.",
    ),
    only(
        "ssl.keystore.location",
        S,
        None,
        Any,
        PER_BROKER,
        "The location of the key store file: a PEM file holding the private key and the \
         certificate chain (ssl.keystore.type=PEM).",
    ),
    only(
        "ssl.keystore.password",
        ConfigType::Password,
        None,
        Any,
        PER_BROKER,
        "The store password for the key store file (PKCS12).",
    ),
    only(
        "ssl.keystore.type",
        S,
        Some("PEM"),
        OneOf(&["PEM", "PKCS12", "JKS"]),
        PER_BROKER,
        "The file format of the key store file: PEM or PKCS12 (password-protected, \
         ssl.keystore.password). Kafka's default, JKS, is Java's own format: convert it with \
         keytool -importkeystore -deststoretype PKCS12.",
    ),
    only(
        "ssl.principal.mapping.rules",
        S,
        Some("DEFAULT"),
        Any,
        READ_ONLY,
        "A list of rules for mapping from distinguished name from the client certificate to \
         short name: RULE:pattern/replacement/[L|U] (the first rule whose pattern matches the \
         whole DN applies), DEFAULT (the DN itself). A DN no rule applies to fails the \
         authentication.",
    ),
    only(
        "ssl.truststore.certificates",
        ConfigType::Password,
        None,
        Any,
        PER_BROKER,
        "Trusted certificates in PEM format, the CAs client certificates must chain to.",
    ),
    only(
        "ssl.truststore.location",
        S,
        None,
        Any,
        PER_BROKER,
        "The location of the trust store file: PEM certificates of the CAs client \
         certificates must chain to.",
    ),
    only(
        "ssl.truststore.password",
        ConfigType::Password,
        None,
        Any,
        PER_BROKER,
        "The password for the trust store file (PKCS12; needed when the file carries a MAC).",
    ),
    only(
        "ssl.truststore.type",
        S,
        Some("PEM"),
        OneOf(&["PEM", "PKCS12", "JKS"]),
        PER_BROKER,
        "The file format of the trust store file: PEM or PKCS12 (ssl.truststore.password).",
    ),
    only(
        "super.users",
        S,
        None,
        Any,
        READ_ONLY,
        "Principals allowed everything by the authorizer whatever the ACLs say, separated by \
         semicolons (User:admin;User:CN=broker,O=example). Brokers of a cluster must be \
         super users or hold CLUSTER_ACTION on the cluster to replicate.",
    ),
    only(
        "transaction.abort.timed.out.transaction.cleanup.interval.ms",
        I,
        Some("10000"),
        AtLeast(1),
        READ_ONLY,
        "The interval at which to rollback transactions that have timed out",
    ),
    only(
        "transaction.max.timeout.ms",
        I,
        Some("900000"),
        AtLeast(1),
        READ_ONLY,
        "The maximum allowed timeout for transactions. If a client's requested transaction \
         time exceed this, then the broker will return an error in InitProducerIdRequest.",
    ),
    only(
        "transaction.partition.verification.enable",
        B,
        Some("true"),
        Any,
        READ_ONLY,
        "Enable verification that checks that the partition has been added to the \
         transaction before writing transactional records to the partition (KIP-890).",
    ),
    only(
        "transaction.remove.expired.transaction.cleanup.interval.ms",
        I,
        Some("3600000"),
        AtLeast(1),
        READ_ONLY,
        "The interval at which to remove transactions that have expired due to \
         transactional.id.expiration.ms passing",
    ),
    only(
        "transaction.state.log.min.isr",
        I,
        Some("2"),
        AtLeast(1),
        READ_ONLY,
        "The minimum number of replicas that must acknowledge a write to the transaction \
         topic (its min.insync.replicas, capped by its replication factor).",
    ),
    only(
        "transaction.state.log.num.partitions",
        I,
        Some("50"),
        AtLeast(1),
        READ_ONLY,
        "The number of partitions for the transaction topic (should not change after \
         deployment: it only applies when __transaction_state is created).",
    ),
    only(
        "transaction.state.log.replication.factor",
        I,
        Some("3"),
        AtLeast(1),
        READ_ONLY,
        "The replication factor for the transaction topic, capped by the number of live \
         unfenced brokers when __transaction_state is created.",
    ),
    only(
        "transaction.state.log.segment.bytes",
        I,
        Some("104857600"),
        AtLeast(1024 * 1024),
        READ_ONLY,
        "The transaction topic segment bytes should be kept relatively small in order to \
         facilitate faster log compaction and cache loads",
    ),
    only(
        "transactional.id.expiration.ms",
        I,
        Some("604800000"),
        AtLeast(1),
        READ_ONLY,
        "The time in ms that the transaction coordinator will wait without receiving any \
         transaction status updates for the current transaction before expiring its \
         transactional id.",
    ),
];
