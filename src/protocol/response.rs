//! A response frame as the connection writes it: one buffer (every response but large
//! Fetch responses), or pieces written back to back, so a Fetch response references the
//! record bytes it carries instead of copying them into the frame (`fetch_encode`).
//!
//! Pure data; lives wherever the response was encoded and moves to the connection's writer.
//! Invariants: the pieces' concatenation is the whole frame, length prefix first; the first
//! piece holds at least the length prefix, the response header and the body's first field
//! (where `throttle_time_ms` sits when a response has it).

use bytes::Bytes;

/// A whole response frame (length prefix, header, body).
#[derive(Debug, Clone)]
pub enum ResponseFrame {
    /// The frame in one buffer.
    One(Bytes),
    /// The frame in pieces, in order.
    Pieces(Vec<Bytes>),
}

impl ResponseFrame {
    /// The frame's size in bytes, length prefix included.
    #[must_use]
    pub fn len(&self) -> usize {
        match self {
            Self::One(b) => b.len(),
            Self::Pieces(p) => p.iter().map(Bytes::len).sum(),
        }
    }

    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The pieces to write, in order.
    #[must_use]
    pub fn pieces(&self) -> &[Bytes] {
        match self {
            Self::One(b) => std::slice::from_ref(b),
            Self::Pieces(p) => p,
        }
    }

    /// The first piece (see the module's invariant on what it holds).
    #[must_use]
    pub fn first(&self) -> &Bytes {
        static EMPTY: Bytes = Bytes::new();
        self.pieces().first().unwrap_or(&EMPTY)
    }

    /// The same frame with its first piece replaced by `first` (of the same length).
    #[must_use]
    pub fn with_first(self, first: Bytes) -> Self {
        match self {
            Self::One(_) => Self::One(first),
            Self::Pieces(mut p) => {
                if let Some(head) = p.first_mut() {
                    *head = first;
                }
                Self::Pieces(p)
            }
        }
    }

    /// The frame in one buffer (copies a frame in pieces).
    #[cfg(test)]
    #[must_use]
    pub fn to_bytes(&self) -> Bytes {
        match self {
            Self::One(b) => b.clone(),
            Self::Pieces(p) => {
                let mut out = Vec::with_capacity(self.len());
                for piece in p {
                    out.extend_from_slice(piece);
                }
                Bytes::from(out)
            }
        }
    }
}

impl From<Bytes> for ResponseFrame {
    fn from(b: Bytes) -> Self {
        Self::One(b)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pieces_concatenate_to_the_frame() {
        let f = ResponseFrame::Pieces(vec![
            Bytes::from_static(b"\0\0\0\x05ab"),
            Bytes::from_static(b"c"),
            Bytes::from_static(b"de"),
        ]);
        assert_eq!(f.len(), 9);
        assert_eq!(&f.to_bytes()[..], b"\0\0\0\x05abcde");
        let f = f.with_first(Bytes::from_static(b"\0\0\0\x05xy"));
        assert_eq!(&f.to_bytes()[..], b"\0\0\0\x05xycde");
        assert_eq!(ResponseFrame::from(Bytes::from_static(b"abc")).pieces().len(), 1);
    }
}
