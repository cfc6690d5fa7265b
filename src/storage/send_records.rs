//! The record bytes of one partition's Fetch answer: whole batches in one buffer or in
//! several pieces, in offset order, each piece a slice of a cache chunk, a read-ahead buffer
//! or a disk read. The pieces are written back to back into the response
//! (`protocol::fetch_encode`, then one `sendmsg` per frame), so batches gathered from
//! several cache chunks are not copied into one buffer first: on a read from the cache of
//! produced batches (small batches of many partitions interleaved in shard-wide chunks)
//! that copy was over a third of the broker's CPU.
//!
//! Pure data, built and dropped on the partition's shard or the connection's. Invariants:
//! no piece is empty; every piece holds whole batches; `len` is the pieces' total. A holder
//! keeps whole cache chunks alive, so it is sent and dropped, never kept (see
//! `PartitionLog::read_to_send`).

use bytes::{Bytes, BytesMut};

#[derive(Clone, Debug, Default)]
pub struct SendRecords {
    pieces: Vec<Bytes>,
    len: usize,
}

impl SendRecords {
    /// The records in one buffer (none when `bytes` is empty).
    #[must_use]
    pub fn one(bytes: Bytes) -> Self {
        Self::from_pieces(vec![bytes])
    }

    /// The records in `pieces`, in order (empty pieces dropped).
    #[must_use]
    pub fn from_pieces(mut pieces: Vec<Bytes>) -> Self {
        pieces.retain(|p| !p.is_empty());
        let len = pieces.iter().map(Bytes::len).sum();
        Self { pieces, len }
    }

    #[must_use]
    pub fn len(&self) -> usize {
        self.len
    }

    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The pieces, in order.
    #[must_use]
    pub fn pieces(&self) -> &[Bytes] {
        &self.pieces
    }

    #[must_use]
    pub fn into_pieces(self) -> Vec<Bytes> {
        self.pieces
    }

    /// The records in one buffer: the piece itself when there is one, else a copy.
    #[must_use]
    pub fn to_bytes(&self) -> Bytes {
        match self.pieces.as_slice() {
            [] => Bytes::new(),
            [one] => one.clone(),
            many => {
                let mut out = BytesMut::with_capacity(self.len);
                for p in many {
                    out.extend_from_slice(p);
                }
                out.freeze()
            }
        }
    }
}

impl From<Bytes> for SendRecords {
    fn from(bytes: Bytes) -> Self {
        Self::one(bytes)
    }
}

/// Equal when the bytes are, however they are cut into pieces.
impl PartialEq for SendRecords {
    fn eq(&self, other: &Self) -> bool {
        self.len == other.len
            && self
                .pieces
                .iter()
                .flat_map(|p| p.iter())
                .eq(other.pieces.iter().flat_map(|p| p.iter()))
    }
}

impl Eq for SendRecords {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pieces_join_and_compare_by_content() {
        let a = SendRecords::from_pieces(vec![
            Bytes::from_static(b"ab"),
            Bytes::new(),
            Bytes::from_static(b"cde"),
        ]);
        assert_eq!(a.len(), 5);
        assert_eq!(a.pieces().len(), 2, "the empty piece is dropped");
        assert_eq!(a.to_bytes(), Bytes::from_static(b"abcde"));
        assert_eq!(a, SendRecords::one(Bytes::from_static(b"abcde")));
        assert_ne!(a, SendRecords::one(Bytes::from_static(b"abcdf")));
        assert!(SendRecords::one(Bytes::new()).is_empty());
        assert!(SendRecords::one(Bytes::new()).pieces().is_empty());
    }
}
