//! Connections that make no progress are closed: a stalled client (slowloris-style: nothing sent, half a
//! request line, unfinished headers, a body that stops) must not hold a connection and its task forever.

use std::future::Future;
use std::io;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::{TcpListener, TcpStream};
use tokio::time::{Instant, Sleep};

/// A TCP listener whose connections fail with `TimedOut` once neither a read nor a write has completed for
/// `idle` while the server waits on one. Any completed read or write restarts the clock, so a slow but
/// moving transfer is never cut; an idle keep-alive connection is closed after `idle` too.
pub struct IdleTimeoutListener {
    inner: TcpListener,
    idle: Duration,
}

impl IdleTimeoutListener {
    pub fn new(inner: TcpListener, idle: Duration) -> Self {
        IdleTimeoutListener { inner, idle }
    }
}

impl axum::serve::Listener for IdleTimeoutListener {
    type Io = IdleTimeoutStream<TcpStream>;
    type Addr = std::net::SocketAddr;

    async fn accept(&mut self) -> (Self::Io, Self::Addr) {
        let (stream, addr) = axum::serve::Listener::accept(&mut self.inner).await;
        (IdleTimeoutStream::new(stream, self.idle), addr)
    }

    fn local_addr(&self) -> io::Result<Self::Addr> {
        self.inner.local_addr()
    }
}

pub struct IdleTimeoutStream<S> {
    inner: S,
    idle: Duration,
    deadline: Pin<Box<Sleep>>,
}

impl<S> IdleTimeoutStream<S> {
    pub fn new(inner: S, idle: Duration) -> Self {
        let deadline = Box::pin(tokio::time::sleep(idle));
        IdleTimeoutStream {
            inner,
            idle,
            deadline,
        }
    }

    /// Pass a completed operation through and restart the clock; on `Pending`, fail once the clock runs out.
    fn track<T>(&mut self, cx: &mut Context<'_>, poll: Poll<io::Result<T>>) -> Poll<io::Result<T>> {
        match poll {
            Poll::Ready(result) => {
                let next = Instant::now() + self.idle;
                self.deadline.as_mut().reset(next);
                Poll::Ready(result)
            }
            Poll::Pending => match self.deadline.as_mut().poll(cx) {
                Poll::Ready(()) => Poll::Ready(Err(io::Error::new(
                    io::ErrorKind::TimedOut,
                    format!("connection made no progress for {:?}", self.idle),
                ))),
                Poll::Pending => Poll::Pending,
            },
        }
    }
}

impl<S: AsyncRead + Unpin> AsyncRead for IdleTimeoutStream<S> {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        let poll = Pin::new(&mut this.inner).poll_read(cx, buf);
        this.track(cx, poll)
    }
}

impl<S: AsyncWrite + Unpin> AsyncWrite for IdleTimeoutStream<S> {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        let poll = Pin::new(&mut this.inner).poll_write(cx, buf);
        this.track(cx, poll)
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        let poll = Pin::new(&mut this.inner).poll_flush(cx);
        this.track(cx, poll)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().inner).poll_shutdown(cx)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    #[tokio::test(start_paused = true)]
    async fn a_stalled_peer_times_out_and_a_moving_one_does_not() {
        let (client, server) = tokio::io::duplex(64);
        let mut server = IdleTimeoutStream::new(server, Duration::from_secs(30));
        let mut client = client;
        // Bytes every 20 s keep the connection: each completed read restarts the 30 s clock.
        for _ in 0..3 {
            tokio::time::sleep(Duration::from_secs(20)).await;
            client.write_all(b"x").await.unwrap();
            let mut byte = [0u8; 1];
            server.read_exact(&mut byte).await.unwrap();
        }
        // Then nothing: the pending read fails once 30 s pass.
        let started = Instant::now();
        let mut buf = [0u8; 1];
        let err = server.read(&mut buf).await.unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::TimedOut);
        assert_eq!(started.elapsed(), Duration::from_secs(30));
    }
}
