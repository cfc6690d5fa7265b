//! The table of Kafka 4.x topic configs (from Kafka's `LogConfig`, `TopicConfig`,
//! `ServerLogConfigs` and `ServerTopicConfigSynonyms`): names, types, defaults, validators,
//! broker synonyms in Kafka's priority order, and documentation.
//!
//! Static data shared by every shard. Keep it sorted by name: DescribeConfigs lists in this
//! order, and a test checks the order.

use super::{BrokerSynonym, ConfigDef, ConfigType as T, Effect, SynonymUnit, Validator as V};

const fn syn(name: &'static str, kind: T, default: Option<&'static str>) -> BrokerSynonym {
    BrokerSynonym { name, unit: SynonymUnit::Same, default, kind }
}

const fn syn_unit(
    name: &'static str,
    unit: SynonymUnit,
    kind: T,
    default: Option<&'static str>,
) -> BrokerSynonym {
    BrokerSynonym { name, unit, default, kind }
}

const LONG_MAX: &str = "9223372036854775807";
const NO_AUTO_UNCLEAN: Effect = Effect::NotYet(
    "the controller never elects an out-of-sync replica by itself; ElectLeaders UNCLEAN \
     (kafka-leader-election.sh --election-type unclean) does it by hand",
);
const NO_TIERED: Effect = Effect::NotYet("tiered storage is not implemented");

const fn def(
    name: &'static str,
    kind: T,
    default: Option<&'static str>,
    validator: V,
    synonyms: &'static [BrokerSynonym],
    doc: &'static str,
    effect: Effect,
) -> ConfigDef {
    ConfigDef { name, kind, default, validator, synonyms, doc, effect, internal: false }
}

/// Every topic config Kafka 4.x defines, sorted by name.
pub static TOPIC_CONFIGS: &[ConfigDef] = &[
    def(
        "cleanup.policy",
        T::List,
        Some("delete"),
        V::ListOf(&["compact", "delete"]),
        &[syn("log.cleanup.policy", T::List, Some("delete"))],
        "This config designates the retention policy to use on log segments. The \"delete\" \
         policy (which is the default) will discard old segments when their retention time or \
         size limit has been reached. The \"compact\" policy will enable log compaction, which \
         retains the latest value for each key. It is also possible to specify both policies in \
         a comma-separated list (e.g. \"delete,compact\"). In this case, old segments will be \
         discarded per the retention time and size configuration, while retained segments will \
         be compacted.",
        Effect::Active,
    ),
    def(
        "compression.gzip.level",
        T::Int,
        Some("-1"),
        V::GzipLevel,
        &[syn("compression.gzip.level", T::Int, Some("-1"))],
        "The compression level to use if compression.type is set to gzip.",
        Effect::NotYet("recompression is not implemented (compression.type must be producer)"),
    ),
    def(
        "compression.lz4.level",
        T::Int,
        Some("9"),
        V::Between(1, 17),
        &[syn("compression.lz4.level", T::Int, Some("9"))],
        "The compression level to use if compression.type is set to lz4.",
        Effect::NotYet("recompression is not implemented (compression.type must be producer)"),
    ),
    def(
        "compression.type",
        T::String,
        Some("producer"),
        V::CompressionType,
        &[syn("compression.type", T::String, Some("producer"))],
        "Specify the final compression type for a given topic. This configuration accepts the \
         standard compression codecs ('gzip', 'snappy', 'lz4', 'zstd'). It additionally accepts \
         'uncompressed' which is equivalent to no compression; and 'producer' which means retain \
         the original compression codec set by the producer. Shardlog accepts only 'producer' \
         for now: batches are stored as the producer sent them.",
        Effect::Active,
    ),
    def(
        "compression.zstd.level",
        T::Int,
        Some("3"),
        V::Between(-131_072, 22),
        &[syn("compression.zstd.level", T::Int, Some("3"))],
        "The compression level to use if compression.type is set to zstd.",
        Effect::NotYet("recompression is not implemented (compression.type must be producer)"),
    ),
    def(
        "delete.retention.ms",
        T::Long,
        Some("86400000"),
        V::AtLeast(0),
        &[syn("log.cleaner.delete.retention.ms", T::Long, Some("86400000"))],
        "The amount of time to retain delete tombstone markers for log compacted topics. This \
         setting also gives a bound on the time in which a consumer must complete a read if they \
         begin from offset 0 to ensure that they get a valid snapshot of the final stage \
         (otherwise delete tombstones may be collected before they complete their scan).",
        Effect::Active,
    ),
    def(
        "file.delete.delay.ms",
        T::Long,
        Some("60000"),
        V::AtLeast(0),
        &[syn("log.segment.delete.delay.ms", T::Long, Some("60000"))],
        "The time to wait before deleting a file from the filesystem",
        Effect::Active,
    ),
    def(
        "flush.messages",
        T::Long,
        Some(LONG_MAX),
        V::AtLeast(1),
        &[syn("log.flush.interval.messages", T::Long, Some(LONG_MAX))],
        "This setting allows specifying an interval at which we will force an fsync of data \
         written to the log. For example if this was set to 1 we would fsync after every message; \
         if it were 5 we would fsync after every five messages. In general we recommend you not \
         set this and use replication for durability and allow the operating system's background \
         flush capabilities as it is more efficient.",
        Effect::Active,
    ),
    def(
        "flush.ms",
        T::Long,
        Some(LONG_MAX),
        V::AtLeast(0),
        &[
            syn("log.flush.interval.ms", T::Long, None),
            syn("log.flush.scheduler.interval.ms", T::Long, Some(LONG_MAX)),
        ],
        "This setting allows specifying a time interval at which we will force an fsync of data \
         written to the log. For example if this was set to 1000 we would fsync after 1000 ms had \
         passed. In general we recommend you not set this and use replication for durability and \
         allow the operating system's background flush capabilities as it is more efficient.",
        Effect::Active,
    ),
    def(
        "follower.replication.throttled.replicas",
        T::List,
        Some(""),
        V::ThrottledReplicas,
        &[],
        "A list of replicas for which log replication should be throttled on the follower side. \
         The list should describe a set of replicas in the form \
         [PartitionId]:[BrokerId],[PartitionId]:[BrokerId]:... or alternatively the wildcard '*' \
         can be used to throttle all replicas for this topic.",
        Effect::Active,
    ),
    def(
        "index.interval.bytes",
        T::Int,
        Some("4096"),
        V::AtLeast(0),
        &[syn("log.index.interval.bytes", T::Int, Some("4096"))],
        "This setting controls how frequently Kafka adds entries to its offset index and, \
         conditionally, to its time index. The default setting ensures that we index a message \
         roughly every 4096 bytes. More frequent indexing allows reads to jump closer to the \
         exact position in the log but results in larger index files. You probably don't need to \
         change this.",
        Effect::Active,
    ),
    ConfigDef {
        name: "internal.segment.bytes",
        kind: T::Int,
        default: None,
        validator: V::AtLeast(1),
        synonyms: &[],
        doc: "The maximum size of a single log file. This should be used for testing only.",
        effect: Effect::Active,
        internal: true,
    },
    def(
        "leader.replication.throttled.replicas",
        T::List,
        Some(""),
        V::ThrottledReplicas,
        &[],
        "A list of replicas for which log replication should be throttled on the leader side. \
         The list should describe a set of replicas in the form \
         [PartitionId]:[BrokerId],[PartitionId]:[BrokerId]:... or alternatively the wildcard '*' \
         can be used to throttle all replicas for this topic.",
        Effect::Active,
    ),
    def(
        "local.retention.bytes",
        T::Long,
        Some("-2"),
        V::AtLeast(-2),
        &[syn("log.local.retention.bytes", T::Long, Some("-2"))],
        "The maximum size of local log segments that can grow for a partition before it deletes \
         the old segments. Default value is -2, it represents retention.bytes value to be used. \
         The effective value should always be less than or equal to retention.bytes value.",
        NO_TIERED,
    ),
    def(
        "local.retention.ms",
        T::Long,
        Some("-2"),
        V::AtLeast(-2),
        &[syn("log.local.retention.ms", T::Long, Some("-2"))],
        "The number of milliseconds to keep the local log segment before it gets deleted. \
         Default value is -2, it represents retention.ms value is to be used. The effective value \
         should always be less than or equal to retention.ms value.",
        NO_TIERED,
    ),
    def(
        "max.compaction.lag.ms",
        T::Long,
        Some(LONG_MAX),
        V::AtLeast(1),
        &[syn("log.cleaner.max.compaction.lag.ms", T::Long, Some(LONG_MAX))],
        "The maximum time a message will remain ineligible for compaction in the log. Only \
         applicable for logs that are being compacted.",
        Effect::Active,
    ),
    def(
        "max.message.bytes",
        T::Int,
        Some("1048588"),
        V::AtLeast(0),
        &[syn("message.max.bytes", T::Int, Some("1048588"))],
        "The largest record batch size allowed by Kafka (after compression if compression is \
         enabled).",
        Effect::Active,
    ),
    def(
        "message.downconversion.enable",
        T::Boolean,
        Some("true"),
        V::None,
        &[],
        "Down-conversion is not possible in Apache Kafka 4.0 and newer, hence this configuration \
         is no-op and it is deprecated for removal in Apache Kafka 5.0.",
        Effect::NotYet("a no-op in Kafka 4.x as well"),
    ),
    def(
        "message.timestamp.after.max.ms",
        T::Long,
        Some(LONG_MAX),
        V::AtLeast(0),
        &[syn("log.message.timestamp.after.max.ms", T::Long, Some(LONG_MAX))],
        "This configuration sets the allowable timestamp difference between the message \
         timestamp and the broker's timestamp. The message timestamp can be later than or equal \
         to the broker's timestamp, with the maximum allowable difference determined by the \
         value set in this configuration. If message.timestamp.type=CreateTime, the message will \
         be rejected if the difference in timestamps exceeds this specified threshold. This \
         configuration is ignored if message.timestamp.type=LogAppendTime.",
        Effect::Active,
    ),
    def(
        "message.timestamp.before.max.ms",
        T::Long,
        Some(LONG_MAX),
        V::AtLeast(0),
        &[syn("log.message.timestamp.before.max.ms", T::Long, Some(LONG_MAX))],
        "This configuration sets the allowable timestamp difference between the broker's \
         timestamp and the message timestamp. The message timestamp can be earlier than or equal \
         to the broker's timestamp, with the maximum allowable difference determined by the \
         value set in this configuration. If message.timestamp.type=CreateTime, the message will \
         be rejected if the difference in timestamps exceeds this specified threshold. This \
         configuration is ignored if message.timestamp.type=LogAppendTime.",
        Effect::Active,
    ),
    def(
        "message.timestamp.type",
        T::String,
        Some("CreateTime"),
        V::OneOf(&["CreateTime", "LogAppendTime"]),
        &[syn("log.message.timestamp.type", T::String, Some("CreateTime"))],
        "Define whether the timestamp in the message is message create time or log append time.",
        Effect::Active,
    ),
    def(
        "min.cleanable.dirty.ratio",
        T::Double,
        Some("0.5"),
        V::DoubleBetween(0.0, 1.0),
        &[syn("log.cleaner.min.cleanable.ratio", T::Double, Some("0.5"))],
        "This configuration controls how frequently the log compactor will attempt to clean the \
         log (assuming log compaction is enabled). By default we will avoid cleaning a log where \
         more than 50% of the log has been compacted. This ratio bounds the maximum space wasted \
         in the log by duplicates (at 50% at most 50% of the log could be duplicates). A higher \
         ratio will mean fewer, more efficient cleanings but will mean more wasted space in the \
         log.",
        Effect::Active,
    ),
    def(
        "min.compaction.lag.ms",
        T::Long,
        Some("0"),
        V::AtLeast(0),
        &[syn("log.cleaner.min.compaction.lag.ms", T::Long, Some("0"))],
        "The minimum time a message will remain uncompacted in the log. Only applicable for logs \
         that are being compacted.",
        Effect::Active,
    ),
    def(
        "min.insync.replicas",
        T::Int,
        Some("1"),
        V::AtLeast(1),
        &[syn("min.insync.replicas", T::Int, Some("1"))],
        "Specifies the minimum number of in-sync replicas (including the leader) required for a \
         write to succeed when a producer sets acks to \"all\" (or \"-1\"). If acks=all and the \
         current ISR set contains fewer than min.insync.replicas members, then the producer will \
         raise an exception (either NotEnoughReplicas or NotEnoughReplicasAfterAppend).",
        Effect::Active,
    ),
    def(
        "preallocate",
        T::Boolean,
        Some("false"),
        V::None,
        &[syn("log.preallocate", T::Boolean, Some("false"))],
        "True if we should preallocate the file on disk when creating a new log segment.",
        Effect::NotYet("segments are written with O_DIRECT appends; no preallocation"),
    ),
    def(
        "remote.log.copy.disable",
        T::Boolean,
        Some("false"),
        V::None,
        &[],
        "Determines whether tiered data for a topic should become read only, and no more data \
         uploading on a topic. Once this config is set to true, the local retention configuration \
         (i.e. local.retention.ms/bytes) becomes irrelevant, and all data expiration follows the \
         topic-wide retention configuration (i.e. retention.ms/bytes).",
        NO_TIERED,
    ),
    def(
        "remote.log.delete.on.disable",
        T::Boolean,
        Some("false"),
        V::None,
        &[],
        "Determines whether tiered data for a topic should be deleted after tiered storage is \
         disabled on a topic. This configuration should be enabled when trying to set \
         remote.storage.enable from true to false",
        NO_TIERED,
    ),
    def(
        "remote.storage.enable",
        T::Boolean,
        Some("false"),
        V::None,
        &[],
        "To enable tiered storage for a topic, set this configuration to true. To disable tiered \
         storage for a topic that has it enabled, set this configuration to false. When \
         disabling, you must also set remote.log.delete.on.disable to true. Shardlog has no \
         tiered storage: true is rejected, as Kafka does when the broker disables it.",
        NO_TIERED,
    ),
    def(
        "retention.bytes",
        T::Long,
        Some("-1"),
        V::None,
        &[syn("log.retention.bytes", T::Long, Some("-1"))],
        "This configuration controls the maximum size a partition (which consists of log \
         segments) can grow to before we will discard old log segments to free up space if we \
         are using the \"delete\" retention policy. By default there is no size limit only a time \
         limit. Since this limit is enforced at the partition level, multiply it by the number of \
         partitions to compute the topic retention in bytes.",
        Effect::Active,
    ),
    def(
        "retention.ms",
        T::Long,
        Some("604800000"),
        V::AtLeast(-1),
        &[
            syn("log.retention.ms", T::Long, None),
            syn_unit("log.retention.minutes", SynonymUnit::MinutesToMs, T::Int, None),
            syn_unit("log.retention.hours", SynonymUnit::HoursToMs, T::Int, Some("168")),
        ],
        "This configuration controls the maximum time we will retain a log before we will \
         discard old log segments to free up space if we are using the \"delete\" retention \
         policy. This represents an SLA on how soon consumers must read their data. If set to -1, \
         no time limit is applied.",
        Effect::Active,
    ),
    def(
        "segment.bytes",
        T::Int,
        Some("1073741824"),
        V::AtLeast(1024 * 1024),
        &[syn("log.segment.bytes", T::Int, Some("1073741824"))],
        "This configuration controls the segment file size for the log. Retention and cleaning \
         is always done a file at a time so a larger segment size means fewer files but less \
         granular control over retention.",
        Effect::Active,
    ),
    def(
        "segment.index.bytes",
        T::Int,
        Some("10485760"),
        V::AtLeast(4),
        &[syn("log.index.size.max.bytes", T::Int, Some("10485760"))],
        "This configuration controls the size of the index that maps offsets to file positions. \
         We preallocate this index file and shrink it only after log rolls. You generally should \
         not need to change this setting.",
        Effect::Active,
    ),
    def(
        "segment.jitter.ms",
        T::Long,
        Some("0"),
        V::AtLeast(0),
        &[
            syn("log.roll.jitter.ms", T::Long, None),
            syn_unit("log.roll.jitter.hours", SynonymUnit::HoursToMs, T::Int, Some("0")),
        ],
        "The maximum random jitter subtracted from the scheduled segment roll time to avoid \
         thundering herds of segment rolling",
        Effect::NotYet("segments roll exactly at segment.ms"),
    ),
    def(
        "segment.ms",
        T::Long,
        Some("604800000"),
        V::AtLeast(1),
        &[
            syn("log.roll.ms", T::Long, None),
            syn_unit("log.roll.hours", SynonymUnit::HoursToMs, T::Int, Some("168")),
        ],
        "This configuration controls the period of time after which Kafka will force the log to \
         roll even if the segment file isn't full to ensure that retention can delete or compact \
         old data.",
        Effect::Active,
    ),
    def(
        "unclean.leader.election.enable",
        T::Boolean,
        Some("false"),
        V::None,
        &[syn("unclean.leader.election.enable", T::Boolean, Some("false"))],
        "Indicates whether to enable replicas not in the ISR set to be elected as leader as a \
         last resort, even though doing so may result in data loss.",
        NO_AUTO_UNCLEAN,
    ),
];
