//! The slowest a client may read a response: while the server waits on it, a client must take
//! at least [`MIN_BYTES`] every `[limits] write_timeout_ms`, or its connection is closed.
//!
//! A limit on each write alone (the clock reset by any progress) let a client that read a few
//! KiB every twenty seconds hold its connection, one of `max_connections`, for as long as it
//! liked: a handful of addresses doing so kept everyone else out.

use std::future::Future;
use std::io;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::time::{Instant, Sleep};

/// What a client must take of a response per window while the server waits on it: about
/// 2 KiB/s at the default 30 s, which any connection that can load the page manages.
pub const MIN_BYTES: usize = 64 << 10;

/// `inner` with the minimum reading speed on its writes.
pub struct MinimumSendRate<T> {
    inner: T,
    /// The window (`None`: no limit).
    window: Option<Duration>,
    /// While the client is behind: when its window ends, and what it took in it so far.
    behind: Option<(Pin<Box<Sleep>>, usize)>,
}

impl<T> MinimumSendRate<T> {
    /// `inner`, held to [`MIN_BYTES`] per `window` (`None`: no limit).
    pub fn new(inner: T, window: Option<Duration>) -> Self {
        MinimumSendRate {
            inner,
            window,
            behind: None,
        }
    }

    /// The client took `n` bytes of the `offered`.
    fn took(&mut self, n: usize, offered: usize) {
        let Some(window) = self.window else { return };
        if n >= offered {
            // It keeps up: no clock runs until it falls behind again.
            self.behind = None;
            return;
        }
        match &mut self.behind {
            None => self.behind = Some((Box::pin(tokio::time::sleep(window)), n)),
            Some((ends, taken)) => {
                *taken += n;
                if *taken >= MIN_BYTES {
                    ends.as_mut().reset(Instant::now() + window);
                    *taken = 0;
                }
            }
        }
    }

    /// The write waits on the client: the error that closes the connection once its window
    /// ended without enough taken, or else `None` (woken when the window ends).
    fn waited_too_long(&mut self, cx: &mut Context<'_>) -> Option<io::Error> {
        let window = self.window?;
        let (ends, _) = self
            .behind
            .get_or_insert_with(|| (Box::pin(tokio::time::sleep(window)), 0));
        ends.as_mut().poll(cx).is_ready().then(|| {
            io::Error::new(
                io::ErrorKind::TimedOut,
                "the client read its response too slowly ([limits] write_timeout_ms)",
            )
        })
    }
}

impl<T: AsyncRead + Unpin> AsyncRead for MinimumSendRate<T> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_read(cx, buf)
    }
}

impl<T: AsyncWrite + Unpin> AsyncWrite for MinimumSendRate<T> {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        match Pin::new(&mut self.inner).poll_write(cx, buf) {
            Poll::Ready(Ok(n)) => {
                self.took(n, buf.len());
                Poll::Ready(Ok(n))
            }
            Poll::Pending => match self.waited_too_long(cx) {
                Some(e) => Poll::Ready(Err(e)),
                None => Poll::Pending,
            },
            other => other,
        }
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        let offered = bufs.iter().map(|b| b.len()).sum();
        match Pin::new(&mut self.inner).poll_write_vectored(cx, bufs) {
            Poll::Ready(Ok(n)) => {
                self.took(n, offered);
                Poll::Ready(Ok(n))
            }
            Poll::Pending => match self.waited_too_long(cx) {
                Some(e) => Poll::Ready(Err(e)),
                None => Poll::Pending,
            },
            other => other,
        }
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match Pin::new(&mut self.inner).poll_flush(cx) {
            Poll::Pending => match self.waited_too_long(cx) {
                Some(e) => Poll::Ready(Err(e)),
                None => Poll::Pending,
            },
            other => other,
        }
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    /// Writes `total` bytes through the limit to a reader taking `chunk` bytes every `every`;
    /// what was written before the end or the cut.
    async fn send(total: usize, chunk: usize, every: Duration, window: Duration) -> io::Result<()> {
        let (server, mut client) = tokio::io::duplex(4096);
        let reader = tokio::spawn(async move {
            let mut buf = vec![0u8; chunk];
            loop {
                tokio::time::sleep(every).await;
                match client.read(&mut buf).await {
                    Ok(0) | Err(_) => return,
                    Ok(_) => {}
                }
            }
        });
        let mut io = MinimumSendRate::new(server, Some(window));
        let sent = io.write_all(&vec![7u8; total]).await;
        reader.abort();
        sent
    }

    #[tokio::test(start_paused = true)]
    async fn a_client_reading_too_slowly_is_cut_off_and_one_keeping_up_is_not() {
        let window = Duration::from_secs(30);
        // 4 KiB every 20 s: far below 64 KiB per 30 s, however long it goes on.
        let slow = send(1 << 20, 4096, Duration::from_secs(20), window).await;
        assert_eq!(slow.unwrap_err().kind(), io::ErrorKind::TimedOut);
        // 4 KiB a second (128 KiB per window): the whole megabyte arrives.
        send(1 << 20, 4096, Duration::from_millis(250), window)
            .await
            .unwrap();
        // No limit: the slow client is waited for.
        let (server, mut client) = tokio::io::duplex(4096);
        let mut io = MinimumSendRate::new(server, None);
        let reader = tokio::spawn(async move {
            let mut buf = vec![0u8; 4096];
            for _ in 0..8 {
                tokio::time::sleep(Duration::from_secs(20)).await;
                let _ = client.read(&mut buf).await;
            }
        });
        io.write_all(&vec![7u8; 4096 * 8]).await.unwrap();
        reader.await.unwrap();
    }
}
