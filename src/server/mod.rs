//! The Kafka-facing server: the per-connection pipeline, one handler per Kafka API, the
//! owner-shard side of partition work, and the wiring of metadata operations to the
//! controller shard. Admin handlers themselves live in [`admin`] (controller work).
//!
//! Runs on every shard: a connection is served entirely by the shard that accepted it;
//! partition work runs on each partition's owner shard.

pub mod admin;
mod admin_wiring;
pub mod api_versions;
pub mod connection;
pub mod control;
pub mod delete_records;
pub mod dispatch;
pub mod fetch;
pub mod group;
pub mod list_offsets;
pub mod metadata;
pub mod offset_for_leader_epoch;
pub mod owner;
pub mod produce;
pub mod route;

use std::rc::Rc;

use crate::shard::{ShardCtx, ShardReply, ShardRequest};

/// Executes a request addressed to this shard (from the mesh or from a local caller).
pub async fn execute(ctx: &Rc<ShardCtx>, req: ShardRequest) -> ShardReply {
    match req {
        ShardRequest::Partitions(ops) => owner::run_ops(ctx, ops).await,
        ShardRequest::WaitForData(spec) => owner::wait_for_data(ctx, spec).await,
        ShardRequest::Controller(req) => ShardReply::Controller(control::execute(ctx, req).await),
        ShardRequest::ApplyImage(image) => control::apply_image(ctx, image).await,
        ShardRequest::Group(call) => ShardReply::Group(group::execute(ctx, call).await),
    }
}
