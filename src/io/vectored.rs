//! A socket stream whose vectored writes are one `sendmsg` with every buffer: the small
//! pieces of a Fetch response (`protocol::fetch_encode`, `storage::SendRecords`) leave in
//! one system call instead of one `send` each (glommio 0.9's streams write only the first
//! buffer of a vectored write). `server::connection::write_frame` decides what to gather.
//!
//! Lives on the connection's shard, wrapping the stream the runtime accepted. Invariants:
//! reads, flush and close go to the inner stream unchanged; a vectored write that would
//! block falls back to the inner stream's own write of the first non-empty buffer, which
//! registers the task for writability, so the caller's loop (`write_all` style, advancing by
//! what each call wrote) sees the same progress semantics as any `AsyncWrite`.

use std::io::{self, IoSlice};
use std::os::fd::{AsRawFd, RawFd};
use std::pin::Pin;
use std::task::{Context, Poll};

use futures::io::{AsyncRead, AsyncWrite};

/// At most this many buffers per `sendmsg` (Linux's `IOV_MAX`).
pub const IOVECS_MAX: usize = 1024;

pub struct VectoredStream<S> {
    inner: S,
}

impl<S: AsRawFd> VectoredStream<S> {
    #[must_use]
    pub fn new(inner: S) -> Self {
        Self { inner }
    }

    fn fd(&self) -> RawFd {
        self.inner.as_raw_fd()
    }
}

impl<S: AsyncRead + Unpin> AsyncRead for VectoredStream<S> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut [u8],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.inner).poll_read(cx, buf)
    }
}

impl<S: AsyncWrite + AsRawFd + Unpin> AsyncWrite for VectoredStream<S> {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.inner).poll_write(cx, buf)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        let bufs = &bufs[..bufs.len().min(IOVECS_MAX)];
        if bufs.len() > 1 {
            match send_vectored(self.fd(), bufs) {
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                done => return Poll::Ready(done),
            }
        }
        let first = bufs.iter().find(|b| !b.is_empty()).map_or(&[][..], |b| &**b);
        Pin::new(&mut self.inner).poll_write(cx, first)
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_flush(cx)
    }

    fn poll_close(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_close(cx)
    }
}

/// One non-blocking `sendmsg` of `bufs` on `fd`: the bytes sent.
fn send_vectored(fd: RawFd, bufs: &[IoSlice<'_>]) -> io::Result<usize> {
    // SAFETY: a zeroed msghdr is valid (no name, no control data); `IoSlice` is guaranteed
    // ABI-compatible with `iovec`, and `bufs` outlives the call, which only reads them.
    let sent = unsafe {
        let mut msg: libc::msghdr = std::mem::zeroed();
        msg.msg_iov = bufs.as_ptr().cast_mut().cast::<libc::iovec>();
        msg.msg_iovlen = bufs.len();
        libc::sendmsg(fd, &msg, libc::MSG_DONTWAIT | libc::MSG_NOSIGNAL)
    };
    usize::try_from(sent).map_err(|_| io::Error::last_os_error())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Read;
    use std::os::unix::net::UnixStream;

    /// A blocking std socket as an `AsyncWrite`, enough to drive `poll_write_vectored`.
    struct Std(UnixStream);

    impl AsRawFd for Std {
        fn as_raw_fd(&self) -> RawFd {
            self.0.as_raw_fd()
        }
    }

    impl AsyncWrite for Std {
        fn poll_write(
            self: Pin<&mut Self>,
            _: &mut Context<'_>,
            b: &[u8],
        ) -> Poll<io::Result<usize>> {
            Poll::Ready(io::Write::write(&mut &self.0, b))
        }
        fn poll_flush(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<io::Result<()>> {
            Poll::Ready(Ok(()))
        }
        fn poll_close(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<io::Result<()>> {
            Poll::Ready(Ok(()))
        }
    }

    #[test]
    fn a_vectored_write_sends_every_buffer_in_one_call() {
        let (a, mut b) = UnixStream::pair().unwrap();
        let mut s = VectoredStream::new(Std(a));
        let bufs = [
            IoSlice::new(b"head"),
            IoSlice::new(b""),
            IoSlice::new(b"-body-"),
            IoSlice::new(b"tail"),
        ];
        let waker = futures::task::noop_waker();
        let mut cx = Context::from_waker(&waker);
        let n = match Pin::new(&mut s).poll_write_vectored(&mut cx, &bufs) {
            Poll::Ready(r) => r.unwrap(),
            Poll::Pending => panic!("pending"),
        };
        assert_eq!(n, 14);
        drop(s);
        let mut got = String::new();
        b.read_to_string(&mut got).unwrap();
        assert_eq!(got, "head-body-tail");
    }
}
