//! Length-prefixed frames: a 4-byte big-endian size, then the request. Frames above the
//! configured maximum are refused before any allocation of their size.

use bytes::{Bytes, BytesMut};
use futures::io::{AsyncRead, AsyncReadExt};
use thiserror::Error;

#[derive(Debug, Error)]
pub enum FrameError {
    #[error("frame of {size_bytes} bytes exceeds socket.request.max.bytes={max_bytes}")]
    TooLarge { size_bytes: i64, max_bytes: u32 },
    #[error("connection closed in the middle of a frame")]
    Truncated,
    #[error("read failed: {0}")]
    Io(#[from] std::io::Error),
}

/// Reads one frame. `Ok(None)` on a clean end of stream between frames.
pub async fn read_frame<R: AsyncRead + Unpin>(
    reader: &mut R,
    max_bytes: u32,
) -> Result<Option<Bytes>, FrameError> {
    let mut size = [0u8; 4];
    let mut filled = 0;
    while filled < size.len() {
        let n = reader.read(&mut size[filled..]).await?;
        if n == 0 {
            return if filled == 0 { Ok(None) } else { Err(FrameError::Truncated) };
        }
        filled += n;
    }
    let size_bytes = i32::from_be_bytes(size);
    if size_bytes < 0 || size_bytes as u32 > max_bytes {
        return Err(FrameError::TooLarge { size_bytes: i64::from(size_bytes), max_bytes });
    }
    let mut body = BytesMut::zeroed(size_bytes as usize);
    reader.read_exact(&mut body).await.map_err(|err| match err.kind() {
        std::io::ErrorKind::UnexpectedEof => FrameError::Truncated,
        _ => FrameError::Io(err),
    })?;
    Ok(Some(body.freeze()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn read(bytes: &[u8], max: u32) -> Result<Option<Bytes>, FrameError> {
        futures::executor::block_on(read_frame(&mut &bytes[..], max))
    }

    #[test]
    fn frames_eof_truncation_and_limit() {
        assert_eq!(read(&[0, 0, 0, 2, 7, 8], 10).expect("ok").expect("frame"), &[7u8, 8][..]);
        assert!(read(&[], 10).expect("ok").is_none());
        assert!(matches!(read(&[0, 0], 10), Err(FrameError::Truncated)));
        assert!(matches!(read(&[0, 0, 0, 5, 1], 10), Err(FrameError::Truncated)));
        assert!(matches!(read(&[0, 0, 0, 11], 10), Err(FrameError::TooLarge { .. })));
        assert!(matches!(read(&[0xff, 0, 0, 0], 10), Err(FrameError::TooLarge { .. })));
    }
}
