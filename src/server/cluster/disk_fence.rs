//! A broker whose data directory runs out of space asks the controller to fence it, and
//! asks to be unfenced once space returns: Shardlog's counterpart of Kafka's offline log
//! directory (KIP-858: a failed directory reported in BrokerHeartbeat takes the broker's
//! replicas out of the ISRs and moves its leaderships). Kafka's directory stays offline until
//! a restart; here the fence lifts by itself. Meanwhile acks=all produce does not wait
//! `replica.lag.time.max.ms` on a follower that cannot write, and clients move to leaders
//! that can.
//!
//! The trigger is `log.dir.reserved.bytes` (the reserve below which client produce is
//! refused, `server::limits`); 0 turns this off. The fence lifts once free space is a
//! quarter of the reserve above it, so a follower that catches up and fills the disk again
//! does not flap at every heartbeat. A broker never fences itself when no other unfenced
//! broker is registered: alone it still serves reads and consumer groups (the single-node
//! behaviour of `server::limits`).
//!
//! Runs on the controller shard, inside the heartbeat loop (`lifecycle`); one statvfs per
//! heartbeat.

use std::path::Path;

/// Whether the broker should ask to be fenced now. `was_asking`: it asked at the last
/// heartbeat (the hysteresis).
#[must_use]
pub fn wants_fence(
    free_bytes: u64,
    reserved_bytes: u64,
    was_asking: bool,
    others_live: bool,
) -> bool {
    if reserved_bytes == 0 || !others_live {
        return false;
    }
    let resume_at = reserved_bytes.saturating_add(reserved_bytes / 4);
    if was_asking {
        free_bytes < resume_at
    } else {
        free_bytes < reserved_bytes
    }
}

/// Measures `data_dir` and applies [`wants_fence`], logging each change of mind. A failed
/// statvfs keeps the previous answer.
pub fn check(data_dir: &Path, reserved_bytes: u64, was_asking: bool, others_live: bool) -> bool {
    let free_bytes = match crate::io::host::space(data_dir) {
        Ok(space) => space.free_bytes,
        Err(err) => {
            tracing::debug!("statvfs of the data directory failed: {err}");
            return was_asking;
        }
    };
    let asking = wants_fence(free_bytes, reserved_bytes, was_asking, others_live);
    if asking && !was_asking {
        tracing::warn!(
            free_bytes,
            reserved_bytes,
            "data directory below log.dir.reserved.bytes: asking the controller to fence this \
             broker (its ISR places and leaderships move to brokers with space) until space \
             returns"
        );
    } else if was_asking && !asking {
        tracing::info!(
            free_bytes,
            "space returned (or no other broker is live): asking to be unfenced"
        );
    }
    asking
}

#[cfg(test)]
mod tests {
    use super::*;

    const MIB: u64 = 1 << 20;

    #[test]
    fn fences_below_the_reserve_and_lifts_a_quarter_above_it() {
        assert!(!wants_fence(100 * MIB, 64 * MIB, false, true));
        assert!(wants_fence(63 * MIB, 64 * MIB, false, true));
        // Hysteresis: still asking just above the reserve, not past reserve + 1/4.
        assert!(wants_fence(70 * MIB, 64 * MIB, true, true));
        assert!(!wants_fence(80 * MIB, 64 * MIB, true, true));
    }

    #[test]
    fn never_when_off_or_alone() {
        assert!(!wants_fence(0, 0, false, true));
        assert!(!wants_fence(0, 64 * MIB, false, false));
        assert!(!wants_fence(0, 64 * MIB, true, false));
    }
}
