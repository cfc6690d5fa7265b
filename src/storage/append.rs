//! The append path of a partition log: validate (client batches) or trust (coordinator
//! batches), check the idempotent producer's sequence, assign offsets and the leader epoch,
//! stage the stored batch for the writer and the batch cache, and wake the writer.
//!
//! Runs on the partition's owner shard, under the log's append ticket lock, so appends take
//! effect in call order. Invariant kept here: `unwritten` holds exactly the batches at
//! offsets `written..log_end`, bounded by `LOG_UNWRITTEN_BYTES_MAX` (an append waits for the
//! writer past it). Writing is in `storage::writer`; replicated appends in
//! `storage::replicated`.

use std::rc::Rc;

use bytes::Bytes;

use super::error::StorageError;
use super::log::LogInner;
use super::producer_state::Verdict;
use super::producers::producer_batch;
use super::validate::{assign, validate};
use super::{AppendInfo, TimestampType};
use crate::constants::LOG_UNWRITTEN_BYTES_MAX;
use crate::io::FileSystem;
use crate::types::{Epoch, Offset};

/// A coordinator append's marker type (`Some(commit)` for a marker) and where the closed
/// transaction is reported.
type CoordinatorAppend<'a> =
    (Option<bool>, &'a std::cell::Cell<Option<super::producer_state::CompletedTxn>>);

impl<F: FileSystem> LogInner<F> {
    pub(super) async fn wait_for_space(
        self: &Rc<Self>,
        batch_bytes: usize,
    ) -> Result<(), StorageError> {
        loop {
            self.check_writable()?;
            let unwritten = self.st.borrow().unwritten_bytes;
            if unwritten == 0 || unwritten + batch_bytes <= LOG_UNWRITTEN_BYTES_MAX {
                return Ok(());
            }
            let wait = self.progress.wait();
            self.kick_writer();
            wait.await;
        }
    }

    pub async fn append(
        self: &Rc<Self>,
        batch: Bytes,
        leader_epoch: Epoch,
        now_ms: i64,
    ) -> Result<AppendInfo, StorageError> {
        let v = validate(&batch, &self.cfg(), now_ms)?;
        self.append_validated(batch, v, leader_epoch, now_ms, None).await
    }

    /// Appends a batch a coordinator wrote (a transaction marker, or transactional offset
    /// commits): no client validation, no sequence check (Kafka's `AppendOrigin.COORDINATOR`).
    /// A marker closes its producer's open transaction; the returned transaction says which.
    pub async fn append_coordinator(
        self: &Rc<Self>,
        batch: Bytes,
        leader_epoch: Epoch,
        now_ms: i64,
    ) -> Result<(AppendInfo, Option<super::producer_state::CompletedTxn>), StorageError> {
        let v = super::validate::validate_coordinator(&batch)?;
        let marker = if v.header.is_control() {
            let commit = super::producer_state::control_batch_commit(&batch)
                .ok_or_else(|| StorageError::invalid_record("a control batch that is no marker"))?;
            Some(commit)
        } else {
            None
        };
        let done = std::cell::Cell::new(None);
        let info =
            self.append_validated(batch, v, leader_epoch, now_ms, Some((marker, &done))).await?;
        Ok((info, done.get()))
    }

    async fn append_validated(
        self: &Rc<Self>,
        batch: Bytes,
        v: super::validate::Validated,
        leader_epoch: Epoch,
        now_ms: i64,
        coordinator: Option<CoordinatorAppend<'_>>,
    ) -> Result<AppendInfo, StorageError> {
        let config = self.cfg();
        let producer = producer_batch(&v.header);
        let _turn = self.append_lock.acquire().await;
        self.wait_for_space(batch.len()).await?;
        let seg_base = self.st.borrow().active().base;
        let rel_last =
            self.st.borrow().log_end.0 - seg_base.0 + i64::from(v.header.last_offset_delta);
        if self.needs_roll(batch.len(), rel_last, now_ms) {
            self.roll().await?;
        }
        self.check_writable()?;
        // Checked under the append lock, and applied below before it is released: two
        // in-flight copies of one batch cannot both pass.
        if let Some(p) = producer.as_ref().filter(|_| coordinator.is_none()) {
            if let Verdict::Duplicate(d) = self.st.borrow().producers.check(p)? {
                return Ok(self.duplicate_info(&d, &config));
            }
        }
        if let Some((Some(_), _)) = coordinator {
            let h = &v.header;
            self.st.borrow().producers.check_marker(h.producer_id, h.producer_epoch).map_err(
                |super::producer_state::MarkerError::StaleEpoch { producer_id, epoch, current }| {
                    super::producer_state::SequenceError::InvalidEpoch {
                        producer_id,
                        epoch,
                        current,
                    }
                },
            )?;
        }
        let base = self.st.borrow().log_end;
        if self.st.borrow_mut().epochs.assign(leader_epoch, base) {
            self.write_epochs().await?;
        }
        let stored = assign(batch, base.0, leader_epoch.0, &config, now_ms);
        let mut h = v.header;
        h.base_offset = base.0;
        let last = Offset(h.last_offset());
        let max_ts = (v.max_timestamp_ms, Offset(base.0 + i64::from(v.max_timestamp_delta)));
        let mut st = self.st.borrow_mut();
        let seg = st.active_mut();
        seg.first_append_ms.get_or_insert(now_ms);
        seg.track_batch(&h, max_ts, config.index_interval_bytes);
        seg.staged.push_back((stored.clone(), Some(last.next())));
        seg.staged_end = last.next();
        if st.first_staged_at.is_none() {
            st.first_staged_at = Some(self.fs.monotonic());
        }
        st.unwritten_bytes += stored.len();
        st.unwritten.push_back((base.0, last.0, stored.clone()));
        st.log_end = last.next();
        if let Some(p) = &producer {
            // Kafka's lastTimestamp is the batch's max timestamp (expiration measures from it).
            let ts = if v.max_timestamp_ms >= 0 { v.max_timestamp_ms } else { now_ms };
            if st.producers.apply(p, last.0, ts) {
                crate::metrics::producers_tracked(1);
            }
        }
        if let Some((Some(commit), done)) = coordinator {
            let completed =
                st.producers.apply_marker(h.producer_id, h.producer_epoch, commit, last.0);
            done.set(Some(completed));
        }
        if st.max_timestamp.is_none_or(|(t, _)| max_ts.0 > t) {
            st.max_timestamp = Some(max_ts);
        }
        let info = AppendInfo {
            base_offset: base,
            last_offset: last,
            log_end_offset: st.log_end,
            log_append_time_ms: if config.timestamp_type == TimestampType::LogAppendTime {
                now_ms
            } else {
                -1
            },
            log_start_offset: st.log_start,
            duplicate: false,
        };
        drop(st);
        self.cache.insert(self.log_id, base.0, last.0, stored);
        self.kick_writer();
        Ok(info)
    }
}
