//! The admin endpoint's shard-move actions (`POST /v1/shards/move`, `GET
//! /v1/shards/partitions`), served on the shard that runs the endpoint; the move itself
//! runs on shard 0.

use std::collections::HashMap;
use std::rc::Rc;

use super::{step, MoveAnswer, MoveCall, MoveError, PartitionBytes, Trigger};
use crate::shard::ShardCtx;
use crate::types::{ShardId, TopicPartition};

/// `POST /v1/shards/move?partition=TOPIC-P&to=N`: runs the move on shard 0 and answers
/// 200 with a line of text, 400/404/409 with the reason. `GET /v1/shards/partitions`: the
/// JSON list of hosted partitions with their owner shard and byte counters.
pub async fn admin_post(ctx: Rc<ShardCtx>, method: String, target: String) -> (u16, String) {
    let (path, query) = target.split_once('?').unwrap_or((&target, ""));
    match (method.as_str(), path) {
        ("GET", "/v1/shards/partitions") => return (200, partitions_json(&ctx).await),
        ("POST", "/v1/shards/move") => {}
        _ => return (404, format!("no {method} action at {path}\n")),
    }
    let (topic, partition, to) = match parse_move_query(query) {
        Ok(v) => v,
        Err(reason) => return (400, format!("{reason}\n")),
    };
    let call = MoveCall::Move { topic, partition, to, trigger: Trigger::Manual };
    match step(&ctx, ShardId(0), call).await {
        MoveAnswer::Moved(Ok(r)) if r.unchanged => {
            (200, format!("{} is already on shard {}\n", r.tp, r.to.0))
        }
        MoveAnswer::Moved(Ok(r)) => (
            200,
            format!(
                "moved {} from shard {} to shard {} in {} ms\n",
                r.tp, r.from.0, r.to.0, r.elapsed_ms
            ),
        ),
        MoveAnswer::Moved(Err(err)) => {
            let status = match err {
                MoveError::Unknown(_) | MoveError::NotHosted(_) => 404,
                MoveError::NoSuchShard { .. } | MoveError::Coordinator(_) => 400,
                MoveError::Busy | MoveError::Failed { .. } => 409,
            };
            (status, format!("{err}\n"))
        }
        _ => (409, "shard 0 did not answer the move\n".into()),
    }
}

/// One hosted partition as `GET /v1/shards/partitions` lists it.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct PartitionPlacement {
    pub topic: String,
    pub partition: i32,
    pub shard: u32,
    pub leader: bool,
    /// Cumulative record bytes since the partition opened on its shard (0 for followers).
    pub bytes_in: u64,
    pub bytes_out: u64,
}

async fn partitions_json(ctx: &Rc<ShardCtx>) -> String {
    let mut counters: HashMap<TopicPartition, PartitionBytes> = HashMap::new();
    for shard in (0..ctx.shard_count).map(ShardId) {
        if let MoveAnswer::Load(list) = step(ctx, shard, MoveCall::Load).await {
            counters.extend(list.into_iter().map(|p| (p.tp.clone(), p)));
        }
    }
    let image = ctx.image();
    let mut out = Vec::new();
    for (name, t) in &image.topics {
        for p in t.partitions.iter().filter(|p| p.hosted) {
            let c = counters.get(&TopicPartition::new(name.clone(), p.index));
            out.push(PartitionPlacement {
                topic: name.clone(),
                partition: p.index,
                shard: p.owner_shard.0,
                leader: p.leader == image.node_id,
                bytes_in: c.map_or(0, |c| c.bytes_in),
                bytes_out: c.map_or(0, |c| c.bytes_out),
            });
        }
    }
    out.sort_by(|a, b| (&a.topic, a.partition).cmp(&(&b.topic, b.partition)));
    serde_json::to_string(&out).unwrap_or_else(|_| "[]".into())
}

/// `partition=TOPIC-P&to=N` (percent-encoding of the topic is not needed: Kafka topic
/// names are `[a-zA-Z0-9._-]`).
pub fn parse_move_query(query: &str) -> Result<(String, i32, ShardId), String> {
    let mut tp = None;
    let mut to = None;
    for pair in query.split('&').filter(|p| !p.is_empty()) {
        match pair.split_once('=') {
            Some(("partition", v)) => tp = Some(parse_topic_partition(v)?),
            Some(("to", v)) => {
                to = Some(v.parse::<u32>().map_err(|_| format!("bad shard {v:?}"))?);
            }
            _ => return Err(format!("unknown parameter {pair:?}")),
        }
    }
    let (topic, partition) = tp.ok_or("missing partition=TOPIC-PARTITION")?;
    let to = to.ok_or("missing to=SHARD")?;
    Ok((topic, partition, ShardId(to)))
}

/// `TOPIC-PARTITION` (the topic may contain dashes: the partition is after the last one).
pub fn parse_topic_partition(s: &str) -> Result<(String, i32), String> {
    let (topic, p) = s.rsplit_once('-').ok_or_else(|| format!("{s:?} is not TOPIC-PARTITION"))?;
    let p = p.parse::<i32>().map_err(|_| format!("{s:?} is not TOPIC-PARTITION"))?;
    if topic.is_empty() || p < 0 {
        return Err(format!("{s:?} is not TOPIC-PARTITION"));
    }
    Ok((topic.to_string(), p))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn query_parsing() {
        assert_eq!(
            parse_move_query("partition=my-topic-3&to=1").unwrap(),
            ("my-topic".to_string(), 3, ShardId(1))
        );
        assert!(parse_move_query("partition=t&to=1").is_err());
        assert!(parse_move_query("partition=t-1").is_err());
        assert!(parse_move_query("partition=t-1&to=x").is_err());
        assert!(parse_move_query("partition=t-x&to=0").is_err());
        assert!(parse_move_query("partition=-1&to=0").is_err());
        assert!(parse_move_query("what=1").is_err());
    }
}
