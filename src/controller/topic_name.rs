//! Kafka's topic name rules: `[a-zA-Z0-9._-]`, 1 to 249 characters, not `.` or `..`, and no
//! two topics differing only by `.` versus `_` (their metric names would collide).
//!
//! Pure functions, used on every shard (Metadata) and on the controller shard (CreateTopics).

use crate::constants::TOPIC_NAME_CHARS_MAX;

/// Names Kafka treats as internal topics.
pub const INTERNAL_TOPICS: [&str; 2] = ["__consumer_offsets", "__transaction_state"];

/// Checks a topic name; the error text is Kafka's `InvalidTopicException` message.
pub fn validate_topic_name(name: &str) -> Result<(), String> {
    if name.is_empty() {
        return Err("Topic name is illegal, it can't be empty".into());
    }
    if name == "." || name == ".." {
        return Err("Topic name cannot be \".\" or \"..\"".into());
    }
    if name.len() > TOPIC_NAME_CHARS_MAX {
        return Err(format!(
            "Topic name is illegal, it can't be longer than {TOPIC_NAME_CHARS_MAX} characters, \
             topic name: {name}"
        ));
    }
    if !name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'.' || b == b'_' || b == b'-') {
        return Err(format!(
            "Topic name \"{name}\" is illegal, it contains a character other than ASCII \
             alphanumerics, '.', '_' and '-'"
        ));
    }
    Ok(())
}

/// The name with `.` replaced by `_`: two topics with the same key collide.
#[must_use]
pub fn collision_key(name: &str) -> String {
    name.replace('.', "_")
}

/// Whether Kafka treats the topic as internal.
#[must_use]
pub fn is_internal(name: &str) -> bool {
    INTERNAL_TOPICS.contains(&name)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kafka_rules() {
        assert!(validate_topic_name("orders.v1_x-2").is_ok());
        assert!(validate_topic_name(&"a".repeat(249)).is_ok());
        assert!(validate_topic_name(&"a".repeat(250)).is_err());
        assert!(validate_topic_name("").is_err());
        assert!(validate_topic_name(".").is_err());
        assert!(validate_topic_name("..").is_err());
        assert!(validate_topic_name("...").is_ok());
        assert!(validate_topic_name("a b").is_err());
        assert!(validate_topic_name("a/b").is_err());
        assert!(validate_topic_name("tópico").is_err());
        assert_eq!(collision_key("a.b_c"), "a_b_c");
        assert!(is_internal("__consumer_offsets"));
    }
}
