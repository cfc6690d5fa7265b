//! `<data>/meta.properties`, in Kafka's format (`version=1`, `cluster.id`, `node.id`,
//! `directory.id`): the stable identity of the cluster and of this node's data directory.
//!
//! Read or created once at start on the controller shard. Invariants: the cluster id never
//! changes once written; a data directory formatted for another node id is refused rather
//! than silently adopted (as Kafka refuses it).

use std::collections::BTreeMap;
use std::io::Write;
use std::path::{Path, PathBuf};

use base64::Engine;

use super::log::sync_dir;
use super::ControllerError;
use crate::types::NodeId;

/// File name under the data directory.
pub const META_PROPERTIES_FILE: &str = "meta.properties";

/// The identity stored in `meta.properties`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MetaProperties {
    pub cluster_id: String,
    pub node_id: NodeId,
    pub directory_id: String,
}

/// A random UUID in Kafka's textual form: URL-safe base64 without padding, 22 characters.
/// Like Kafka's `Uuid.randomUuid`, never one starting with `-`, which a command line would
/// take for an option (`--cluster-id -v…`).
#[must_use]
pub fn random_kafka_uuid() -> String {
    loop {
        let id = base64::engine::general_purpose::URL_SAFE_NO_PAD
            .encode(uuid::Uuid::new_v4().as_bytes());
        if !id.starts_with('-') {
            return id;
        }
    }
}

#[cfg(test)]
#[test]
fn random_ids_never_start_with_a_dash() {
    assert!((0..2_000)
        .map(|_| random_kafka_uuid())
        .all(|id| id.len() == 22 && !id.starts_with('-')));
}

fn bad(path: &Path, reason: impl Into<String>) -> ControllerError {
    ControllerError::MetaProperties { path: path.to_path_buf(), reason: reason.into() }
}

impl MetaProperties {
    /// Reads `meta.properties` under `data_dir`, or creates it (fsynced) with a new cluster id.
    pub fn load_or_create(data_dir: &Path, node_id: NodeId) -> Result<Self, ControllerError> {
        let path = data_dir.join(META_PROPERTIES_FILE);
        match std::fs::read_to_string(&path) {
            Ok(text) => {
                let props = Self::parse(&text, &path)?;
                if props.node_id != node_id {
                    return Err(bad(
                        &path,
                        format!(
                            "this data directory belongs to node.id {}, but the broker was \
                             started with node.id {node_id}",
                            props.node_id
                        ),
                    ));
                }
                Ok(props)
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                let props = Self {
                    cluster_id: random_kafka_uuid(),
                    node_id,
                    directory_id: random_kafka_uuid(),
                };
                props.write(data_dir)?;
                Ok(props)
            }
            Err(source) => Err(ControllerError::Io { op: "read", path, source }),
        }
    }

    /// Parses Java-properties-style `key=value` lines (comments start with `#` or `!`).
    pub fn parse(text: &str, path: &Path) -> Result<Self, ControllerError> {
        let map: BTreeMap<&str, &str> = text
            .lines()
            .map(str::trim)
            .filter(|l| !l.is_empty() && !l.starts_with('#') && !l.starts_with('!'))
            .filter_map(|l| l.split_once('=').map(|(k, v)| (k.trim(), v.trim())))
            .collect();
        let get = |k: &str| map.get(k).copied().ok_or_else(|| bad(path, format!("missing {k}")));
        if get("version")? != "1" {
            return Err(bad(path, format!("unsupported version {}", get("version")?)));
        }
        let node_text = get("node.id")?;
        let node_id = node_text
            .parse::<i32>()
            .map_err(|_| bad(path, format!("node.id {node_text} is not an integer")))?;
        let cluster_id = get("cluster.id")?.to_string();
        if cluster_id.is_empty() {
            return Err(bad(path, "empty cluster.id"));
        }
        Ok(Self {
            cluster_id,
            node_id: NodeId(node_id),
            directory_id: get("directory.id").map(str::to_string).unwrap_or_default(),
        })
    }

    /// Writes the file through a temporary file and a rename, fsyncing both and the directory.
    pub fn write(&self, data_dir: &Path) -> Result<(), ControllerError> {
        std::fs::create_dir_all(data_dir).map_err(|source| ControllerError::Io {
            op: "create directory",
            path: data_dir.to_path_buf(),
            source,
        })?;
        let path = data_dir.join(META_PROPERTIES_FILE);
        let tmp: PathBuf = data_dir.join(format!("{META_PROPERTIES_FILE}.tmp"));
        let text = format!(
            "#\n#Written by Shardlog\nnode.id={}\ndirectory.id={}\nversion=1\ncluster.id={}\n",
            self.node_id, self.directory_id, self.cluster_id
        );
        let io = |op: &'static str, p: &Path| {
            let p = p.to_path_buf();
            move |source| ControllerError::Io { op, path: p, source }
        };
        let mut f = std::fs::File::create(&tmp).map_err(io("create", &tmp))?;
        f.write_all(text.as_bytes()).map_err(io("write", &tmp))?;
        f.sync_all().map_err(io("fsync", &tmp))?;
        std::fs::rename(&tmp, &path).map_err(io("rename", &path))?;
        sync_dir(data_dir)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn created_once_then_read_back() {
        let dir = tempfile::tempdir().unwrap();
        let a = MetaProperties::load_or_create(dir.path(), NodeId(1)).unwrap();
        assert_eq!(a.cluster_id.len(), 22);
        assert!(!a.cluster_id.contains('='));
        let b = MetaProperties::load_or_create(dir.path(), NodeId(1)).unwrap();
        assert_eq!(a, b);
        let text = std::fs::read_to_string(dir.path().join(META_PROPERTIES_FILE)).unwrap();
        assert!(text.contains("version=1") && text.contains("node.id=1"));
    }

    #[test]
    fn another_node_id_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        MetaProperties::load_or_create(dir.path(), NodeId(1)).unwrap();
        let err = MetaProperties::load_or_create(dir.path(), NodeId(2)).unwrap_err();
        assert!(err.to_string().contains("node.id 1"), "{err}");
    }

    #[test]
    fn reads_kafka_written_files_and_rejects_broken_ones() {
        let p = Path::new("meta.properties");
        let kafka =
            "#\n#Tue Nov 18 10:00:00 UTC 2025\nnode.id=3\ndirectory.id=AAAAAAAAAAAAAAAAAAAAAQ\n\
                     version=1\ncluster.id=MkU3OEVBNTcwNTJENDM2Qk\n";
        let m = MetaProperties::parse(kafka, p).unwrap();
        assert_eq!(m.node_id, NodeId(3));
        assert_eq!(m.cluster_id, "MkU3OEVBNTcwNTJENDM2Qk");
        assert!(MetaProperties::parse("version=0\nnode.id=1\ncluster.id=x", p).is_err());
        assert!(MetaProperties::parse("version=1\nnode.id=x\ncluster.id=x", p).is_err());
        assert!(MetaProperties::parse("version=1\nnode.id=1", p).is_err());
    }
}
