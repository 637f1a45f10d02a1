//! A loopback TCP proxy that can go silent: a network cut with neither end told (no FIN, no RST).
//!
//! It forwards every connection to its target. [`Proxy::cut`] stops it: from then on it reads
//! nothing and writes nothing on either socket of any connection, and accepts no new one — but it
//! closes nothing, so both peers see a path that simply stopped answering, as with a blackhole
//! route. [`Proxy::resume`] forwards again whatever was held, and whatever ends came meanwhile.
//!
//! A user-space proxy cannot make its kernel silent: the kernel still acknowledges what reaches
//! its sockets, and TCP keepalive probes with it. So the server's keepalives never give up a
//! cut connection through this proxy; what frees the locks of a process cut off through it is
//! the product's ownership lease.

use std::net::SocketAddr;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;

/// A running proxy; stops accepting when dropped (connections already open go on until an end
/// closes).
pub struct Proxy {
    addr: SocketAddr,
    cut: watch::Sender<bool>,
    acceptor: tokio::task::JoinHandle<()>,
}

impl Proxy {
    /// Listens on a free loopback port and forwards each connection to `target`.
    pub async fn start(target: SocketAddr) -> std::io::Result<Proxy> {
        let listener = TcpListener::bind("127.0.0.1:0").await?;
        let addr = listener.local_addr()?;
        let (cut, _) = watch::channel(false);
        let acceptor = tokio::spawn(accept(listener, target, cut.subscribe()));
        Ok(Proxy {
            addr,
            cut,
            acceptor,
        })
    }

    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// Stops forwarding, closing nothing.
    pub fn cut(&self) {
        self.cut.send_replace(true);
    }

    /// Forwards again.
    pub fn resume(&self) {
        self.cut.send_replace(false);
    }
}

impl Drop for Proxy {
    fn drop(&mut self) {
        self.acceptor.abort();
    }
}

async fn accept(listener: TcpListener, target: SocketAddr, mut cut: watch::Receiver<bool>) {
    loop {
        if cut.wait_for(|c| !*c).await.is_err() {
            return;
        }
        let Ok((client, _)) = listener.accept().await else {
            return;
        };
        let cut = cut.clone();
        tokio::spawn(async move {
            if let Ok(server) = TcpStream::connect(target).await {
                forward(client, server, cut).await;
            }
        });
    }
}

/// Copies both ways until both ends closed, holding every byte while cut.
async fn forward(client: TcpStream, server: TcpStream, cut: watch::Receiver<bool>) {
    let (client_read, client_write) = client.into_split();
    let (server_read, server_write) = server.into_split();
    tokio::join!(
        copy(client_read, server_write, cut.clone()),
        copy(server_read, client_write, cut),
    );
}

/// One direction: waits while cut before each read and before each write; on an end (or an
/// error) shuts the other side's writing down, as the peer did.
async fn copy(
    mut from: tokio::net::tcp::OwnedReadHalf,
    mut to: tokio::net::tcp::OwnedWriteHalf,
    mut cut: watch::Receiver<bool>,
) {
    let mut buf = vec![0u8; 16 * 1024];
    loop {
        if cut.wait_for(|c| !*c).await.is_err() {
            return;
        }
        let n = tokio::select! {
            read = from.read(&mut buf) => match read {
                Ok(0) | Err(_) => 0,
                Ok(n) => n,
            },
            // Cut while waiting to read: stop reading at once.
            _ = cut.wait_for(|c| *c) => continue,
        };
        if cut.wait_for(|c| !*c).await.is_err() {
            return;
        }
        if n == 0 || to.write_all(&buf[..n]).await.is_err() {
            let _ = to.shutdown().await;
            return;
        }
    }
}
