//! AlterPartition through the cluster: a partition leader's ISR change, sent from its shard
//! to this node's shard 0 (`server::isr`), forwarded to the active controller with the other
//! cluster calls and run there on the working state (`ControllerState::alter_partition`).
//! The caller waits (bounded) until its own image holds the change, as other forwarded
//! operations do.
//!
//! Runs on the controller shard (shard 0) of every node.

use std::rc::Rc;
use std::time::{Duration, Instant};

use super::rpc::{Call, Reply};
use super::{ClusterNode, OpError, CONTROLLER_REQUEST_TIMEOUT_MS, READ_YOUR_WRITES_WAIT_MS};
use crate::controller::AlterPartitionRequest;
use crate::shard::ShardCtx;

impl ClusterNode {
    /// On the active controller: runs the change and answers with the ISR in force.
    pub(super) async fn alter_partition_local(
        &self,
        ctx: &Rc<ShardCtx>,
        req: AlterPartitionRequest,
    ) -> Result<Reply, OpError> {
        match self.run_op(ctx, |w, _, _| w.alter_partition(&req)).await? {
            (Ok(isr), applied_index) => Ok(Reply::PartitionAltered { isr, applied_index }),
            (Err(err), _) => Ok(Reply::Error { code: err.kafka_code(), message: err.to_string() }),
        }
    }

    /// From this node's shard 0: to the active controller, then waits for the image.
    pub async fn alter_partition(
        self: &Rc<Self>,
        ctx: &Rc<ShardCtx>,
        req: AlterPartitionRequest,
    ) -> Reply {
        let deadline = Instant::now() + Duration::from_millis(CONTROLLER_REQUEST_TIMEOUT_MS);
        let reply = self.to_controller(ctx, Call::AlterPartition(req), deadline).await;
        if let Reply::PartitionAltered { applied_index, .. } = &reply {
            let limit = Duration::from_millis(READ_YOUR_WRITES_WAIT_MS);
            self.wait_published(ctx, *applied_index, limit).await;
        }
        reply
    }
}
