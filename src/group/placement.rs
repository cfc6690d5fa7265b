//! Where a group lives: the `__consumer_offsets` partition chosen the way Kafka does it,
//! `Utils.abs(groupId.hashCode()) % offsets.topic.num.partitions`, with Java's
//! `String.hashCode` over UTF-16 code units. Matching Kafka matters: Kafka's tools that
//! read `__consumer_offsets` expect a group's records in that partition.
//!
//! Pure code, used on every shard (to route a group request to its coordinator shard).

/// Kafka's internal topic holding group metadata and committed offsets.
pub use crate::constants::OFFSETS_TOPIC;

/// Java's `String.hashCode`: `s[0]*31^(n-1) + ... + s[n-1]` over UTF-16 units, wrapping.
#[must_use]
pub fn java_string_hash(s: &str) -> i32 {
    s.encode_utf16().fold(0i32, |h, unit| h.wrapping_mul(31).wrapping_add(i32::from(unit)))
}

/// The `__consumer_offsets` partition of a group.
#[must_use]
pub fn partition_for(group_id: &str, partition_count: i32) -> i32 {
    // Kafka's Utils.abs maps i32::MIN to 0, where Math.abs would stay negative.
    let hash = java_string_hash(group_id).checked_abs().unwrap_or(0);
    if partition_count <= 0 {
        0
    } else {
        hash % partition_count
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn matches_java_hash_code() {
        assert_eq!(java_string_hash(""), 0);
        assert_eq!(java_string_hash("a"), 97);
        // "hello".hashCode() == 99162322 in Java.
        assert_eq!(java_string_hash("hello"), 99_162_322);
        // A negative hash is made positive by abs, not by masking the sign bit.
        let negative = "my-group";
        assert_eq!(java_string_hash(negative), -1_906_497_762);
        let expected = 1_906_497_762 % 50;
        assert_eq!(partition_for(negative, 50), expected);
        // "polygenelubricants".hashCode() == Integer.MIN_VALUE.
        assert_eq!(java_string_hash("polygenelubricants"), i32::MIN);
        assert_eq!(partition_for("polygenelubricants", 50), 0);
    }

    #[test]
    fn spreads_over_partitions() {
        let p = partition_for("my-group", 50);
        assert!((0..50).contains(&p));
        assert_eq!(partition_for("my-group", 1), 0);
    }
}
