//! The high-watermark checkpoint (Kafka's `replication-offset-checkpoint`): every
//! `replica.high.watermark.checkpoint.interval.ms` and at clean shutdown each shard writes
//! the high watermark of every partition it owns, so a restarted leader or follower starts
//! from what was committed instead of from its log start (where consumers would see
//! nothing until the ISR re-formed).
//!
//! Format (Kafka's text checkpoint, see `docs/format.md`): a version line `0`, a count line,
//! then one `topic partition offset` line per partition. Shards share the data directory,
//! so each shard writes its own file, `replication-offset-checkpoint.<shard>`; a partition
//! opening takes the largest offset any file holds for it, capped at its log end (a stale
//! entry from a shard that owned it before is older, hence smaller, or gets capped).
//! Written atomically through [`FileSystem::write_file_atomic`] (temp, fsync, rename, dir
//! fsync). A bad file is a WARN naming the file and line and counts as absent: the
//! partition falls back to the safe start (its log start offset), never a panic.
//!
//! Used on every shard; pure apart from the two async file functions.

use std::collections::HashMap;
use std::path::Path;

use crate::io::FileSystem;
use crate::types::{Offset, TopicPartition};

/// The file name prefix; each shard appends `.<shard id>`.
pub const HW_CHECKPOINT_PREFIX: &str = "replication-offset-checkpoint";
/// Kafka's checkpoint format version.
const VERSION: &str = "0";

/// A malformed checkpoint: the 1-based line and why.
#[derive(Debug, PartialEq, Eq, thiserror::Error)]
#[error("line {line}: {reason}")]
pub struct ParseError {
    pub line: usize,
    pub reason: String,
}

/// The checkpoint text for `entries` (sorted, so the file is deterministic).
#[must_use]
pub fn encode(entries: &[(TopicPartition, Offset)]) -> String {
    let mut sorted: Vec<&(TopicPartition, Offset)> = entries.iter().collect();
    sorted.sort_by(|a, b| (&a.0.topic, a.0.partition).cmp(&(&b.0.topic, b.0.partition)));
    let mut out = format!("{VERSION}\n{}\n", sorted.len());
    for (tp, offset) in sorted {
        out.push_str(&format!("{} {} {}\n", tp.topic, tp.partition, offset.0));
    }
    out
}

/// Parses a checkpoint. Topic names never contain spaces (Kafka's legal characters), so
/// each entry line is exactly three fields.
pub fn decode(text: &[u8]) -> Result<HashMap<TopicPartition, Offset>, ParseError> {
    let bad = |line: usize, reason: &str| ParseError { line, reason: reason.to_string() };
    let text = std::str::from_utf8(text).map_err(|_| bad(1, "not UTF-8"))?;
    let mut lines = text.lines();
    if lines.next().map(str::trim) != Some(VERSION) {
        return Err(bad(1, "unknown version (expected 0)"));
    }
    let count: usize = lines
        .next()
        .and_then(|l| l.trim().parse().ok())
        .ok_or_else(|| bad(2, "bad entry count"))?;
    let mut out = HashMap::new();
    for i in 0..count {
        let line = i + 3;
        let text = lines.next().ok_or_else(|| bad(line, "fewer entries than the count"))?;
        let fields: Vec<&str> = text.split_whitespace().collect();
        let [topic, partition, offset] = fields[..] else {
            return Err(bad(line, "expected `topic partition offset`"));
        };
        let partition: i32 = partition.parse().map_err(|_| bad(line, "bad partition"))?;
        let offset: i64 = offset.parse().map_err(|_| bad(line, "bad offset"))?;
        if partition < 0 || offset < 0 {
            return Err(bad(line, "negative partition or offset"));
        }
        out.insert(TopicPartition::new(topic.to_string(), partition), Offset(offset));
    }
    if lines.any(|l| !l.trim().is_empty()) {
        return Err(bad(count + 3, "more entries than the count"));
    }
    Ok(out)
}

/// Writes this shard's checkpoint in `dir`.
pub async fn write<F: FileSystem>(
    fs: &F,
    dir: &Path,
    shard: u32,
    entries: &[(TopicPartition, Offset)],
) -> std::io::Result<()> {
    let path = dir.join(format!("{HW_CHECKPOINT_PREFIX}.{shard}"));
    fs.write_file_atomic(&path, encode(entries).as_bytes()).await
}

/// Reads every shard's checkpoint in `dir` and keeps each partition's largest offset. A
/// file that cannot be read or parsed is logged (file and line) and skipped.
pub async fn read_all<F: FileSystem>(fs: &F, dir: &Path) -> HashMap<TopicPartition, Offset> {
    let mut merged: HashMap<TopicPartition, Offset> = HashMap::new();
    let names = match fs.list_dir(dir).await {
        Ok(names) => names,
        Err(err) => {
            tracing::warn!(dir = %dir.display(), "cannot list high-watermark checkpoints: {err}");
            return merged;
        }
    };
    let prefix = format!("{HW_CHECKPOINT_PREFIX}.");
    for name in names.iter().filter(|n| n.starts_with(&prefix) && !n.ends_with(".tmp")) {
        let path = dir.join(name);
        let parsed = match fs.read_file(&path).await {
            Ok(Some(data)) => decode(&data).map_err(|e| e.to_string()),
            Ok(None) => continue,
            Err(err) => Err(err.to_string()),
        };
        match parsed {
            Ok(entries) => {
                for (tp, offset) in entries {
                    let slot = merged.entry(tp).or_insert(offset);
                    *slot = (*slot).max(offset);
                }
            }
            Err(reason) => tracing::warn!(
                file = %path.display(),
                "ignoring a bad high-watermark checkpoint ({reason}); its partitions start \
                 from their log start offset"
            ),
        }
    }
    merged
}

#[cfg(test)]
mod tests {
    use std::rc::Rc;

    use super::*;
    use crate::io::mem::MemFileSystem;

    fn tp(t: &str, p: i32) -> TopicPartition {
        TopicPartition::new(t.to_string(), p)
    }

    #[test]
    fn kafka_text_format_round_trips() {
        let entries = vec![(tp("orders", 1), Offset(42)), (tp("a", 0), Offset(0))];
        let text = encode(&entries);
        assert_eq!(text, "0\n2\na 0 0\norders 1 42\n");
        let back = decode(text.as_bytes()).unwrap();
        assert_eq!(back.len(), 2);
        assert_eq!(back[&tp("orders", 1)], Offset(42));
        assert_eq!(decode(b"0\n0\n").unwrap().len(), 0);
    }

    #[test]
    fn bad_files_name_the_line() {
        let cases: [(&[u8], usize); 8] = [
            (b"", 1),
            (b"1\n0\n", 1),
            (b"0\nx\n", 2),
            (b"0\n2\na 0 1\n", 4),
            (b"0\n1\na 0\n", 3),
            (b"0\n1\na x 1\n", 3),
            (b"0\n1\na 0 -5\n", 3),
            (b"0\n1\na 0 1\nb 0 2\n", 4),
        ];
        for (text, line) in cases {
            let err = decode(text).unwrap_err();
            assert_eq!(err.line, line, "{:?}", String::from_utf8_lossy(text));
        }
        assert!(decode(&[0xff, 0xfe]).is_err());
    }

    #[test]
    fn shards_files_merge_and_bad_ones_are_skipped() {
        crate::io::run_local(async {
            let fs = Rc::new(MemFileSystem::new());
            let dir = Path::new("/data");
            fs.create_dir_all(dir).await.unwrap();
            write(&*fs, dir, 0, &[(tp("t", 0), Offset(5)), (tp("t", 1), Offset(9))]).await.unwrap();
            write(&*fs, dir, 1, &[(tp("t", 0), Offset(7))]).await.unwrap();
            let bad = dir.join(format!("{HW_CHECKPOINT_PREFIX}.2"));
            fs.write_file_atomic(&bad, b"0\n3\nt 0 100\n").await.unwrap();
            let merged = read_all(&*fs, dir).await;
            assert_eq!(merged.len(), 2);
            assert_eq!(merged[&tp("t", 0)], Offset(7), "largest of the good files");
            assert_eq!(merged[&tp("t", 1)], Offset(9));
            // Rewritten, the file replaces the old one entirely.
            write(&*fs, dir, 0, &[]).await.unwrap();
            let merged = read_all(&*fs, dir).await;
            assert_eq!(merged.get(&tp("t", 1)), None);
        });
    }
}
