//! Small per-partition checkpoint files: `recovery-point`, `log-start-offset` and the
//! `clean-shutdown` marker. Each holds one offset as `v0 <offset> <crc32 hex>\n`, the CRC-32
//! (IEEE, our own format) covering `v0 <offset>`; each is replaced atomically (write temp,
//! sync, rename, sync dir) through [`FileSystem::write_file_atomic`].
//!
//! Used by the partition log on its owner shard.

use std::path::Path;

use super::error::StorageError;
use crate::io::FileSystem;
use crate::types::Offset;

pub const RECOVERY_POINT_FILE: &str = "recovery-point";
pub const LOG_START_FILE: &str = "log-start-offset";
pub const CLEAN_SHUTDOWN_FILE: &str = "clean-shutdown";
pub const LEADER_EPOCH_FILE: &str = "leader-epoch-checkpoint";
/// The log cleaner's end of the clean section (Kafka keeps one `cleaner-offset-checkpoint`
/// per log dir; ours is per partition, like the other checkpoints).
pub const CLEANER_CHECKPOINT_FILE: &str = "cleaner-offset-checkpoint";

#[must_use]
pub fn encode(offset: Offset) -> String {
    let body = format!("v0 {}", offset.0);
    format!("{body} {:08x}\n", crc32fast::hash(body.as_bytes()))
}

#[must_use]
pub fn decode(text: &[u8]) -> Option<Offset> {
    let text = std::str::from_utf8(text).ok()?.trim_end();
    let (body, crc) = text.rsplit_once(' ')?;
    if u32::from_str_radix(crc, 16).ok()? != crc32fast::hash(body.as_bytes()) {
        return None;
    }
    body.strip_prefix("v0 ")?.parse().ok().map(Offset)
}

/// Reads an offset checkpoint; `Ok(None)` if missing, `Corrupt` if unreadable.
pub async fn read<F: FileSystem>(
    fs: &F,
    dir: &Path,
    name: &str,
) -> Result<Option<Offset>, StorageError> {
    let path = dir.join(name);
    let Some(data) = fs.read_file(&path).await.map_err(StorageError::io("read", &path, 0))? else {
        return Ok(None);
    };
    decode(&data).map(Some).ok_or_else(|| StorageError::Corrupt {
        path,
        position: 0,
        reason: "checkpoint fails its checksum".into(),
    })
}

pub async fn write<F: FileSystem>(
    fs: &F,
    dir: &Path,
    name: &str,
    offset: Offset,
) -> Result<(), StorageError> {
    let path = dir.join(name);
    fs.write_file_atomic(&path, encode(offset).as_bytes()).await.map_err(StorageError::io(
        "checkpoint",
        &path,
        0,
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn roundtrip_and_reject_damage() {
        let t = encode(Offset(1234));
        assert_eq!(decode(t.as_bytes()), Some(Offset(1234)));
        assert_eq!(decode(t.replace("1234", "1235").as_bytes()), None);
        assert_eq!(decode(b""), None);
    }
}
