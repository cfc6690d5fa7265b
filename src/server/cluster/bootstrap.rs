//! The first SCRAM credentials of a cluster (`shardlog format --add-scram`, Kafka's
//! `kafka-storage.sh format --add-scram`): the data directory's `bootstrap-scram` file is
//! written to the metadata log by the first active controller that finds its credentials
//! missing, then removed on every node once its committed state holds them, since it keeps
//! salted passwords.
//!
//! Runs on the controller shard (shard 0) of every node, one task at start-up, ending once
//! the file is gone (or at shutdown). Invariant: a credential is proposed only while the
//! committed state lacks it, through the same operation as AlterUserScramCredentials.

use std::rc::Rc;
use std::time::Duration;

use super::ClusterNode;
use crate::controller::scram::{parse_bootstrap, ScramChange, BOOTSTRAP_SCRAM_FILE};
use crate::quorum::QuorumRole;
use crate::shard::ShardCtx;

/// How often the task looks again while the credentials are not committed yet.
const BOOTSTRAP_RETRY_MS: u64 = 500;

/// Writes the bootstrap credentials once (see the module docs).
pub async fn apply_scram(node: Rc<ClusterNode>, ctx: Rc<ShardCtx>) {
    let path = ctx.config.data_dir.join(BOOTSTRAP_SCRAM_FILE);
    let Ok(text) = std::fs::read_to_string(&path) else { return };
    let changes = match parse_bootstrap(&text) {
        Ok(changes) => changes,
        Err(e) => {
            tracing::error!("{}: not applied: {e}", path.display());
            return;
        }
    };
    while !ctx.is_shutting_down() {
        let missing: Vec<ScramChange> = {
            let committed = node.committed.borrow();
            let credentials = committed.scram_credentials();
            changes
                .iter()
                .filter(|c| match c {
                    ScramChange::Upsert { user, mechanism, .. } => {
                        credentials.get(user, *mechanism).is_none()
                    }
                    ScramChange::Delete { .. } => false,
                })
                .cloned()
                .collect()
        };
        if missing.is_empty() {
            match std::fs::remove_file(&path) {
                Ok(()) => tracing::info!(
                    credentials = changes.len(),
                    "the bootstrap SCRAM credentials are in the metadata log; removed {}",
                    path.display()
                ),
                Err(e) => tracing::warn!("cannot remove {}: {e}", path.display()),
            }
            return;
        }
        let st = node.quorum.status();
        if st.role == QuorumRole::Leader && st.leader_ready {
            let outcome = node
                .run_op(&ctx, |w, _, _| {
                    for c in &missing {
                        w.check_scram_change(c).map_err(|e| e.to_string())?;
                    }
                    w.alter_scram_credentials(&missing).map_err(|e| e.to_string())
                })
                .await;
            match outcome {
                Ok((Ok(_), _)) => {
                    tracing::info!(
                        credentials = missing.len(),
                        "bootstrap SCRAM credentials written"
                    );
                }
                Ok((Err(e), _)) => {
                    tracing::error!("bootstrap SCRAM credentials refused: {e}");
                    return;
                }
                Err(e) => tracing::debug!("bootstrap SCRAM credentials not written yet: {e:?}"),
            }
        }
        crate::shard::sleep(Duration::from_millis(BOOTSTRAP_RETRY_MS)).await;
    }
}
