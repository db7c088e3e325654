//! The sandbox side: TCP on the sandbox's 127.0.0.1, relayed to the proxy's unix socket.
//!
//! Proxy-aware programs are pointed at the listen port through `HTTP_PROXY`/`HTTPS_PROXY`
//! and speak proxy HTTP themselves; the bridge does not look at what they send (the proxy
//! judges it). A forward port is for a program that cannot use a proxy and is told to talk
//! to `127.0.0.1:P` instead: the bridge asks the proxy for a tunnel to its one fixed target
//! first, so the program's bytes still pass the same policy. The bridge holds no policy and
//! no credentials: everything it could be tricked into, the proxy would refuse anyway.

use std::convert::Infallible;
use std::io::{self, Write};
use std::net::Ipv4Addr;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream, UnixStream};

/// The proxy's answer to the bridge's own CONNECT is expected within this.
const ANSWER_TIMEOUT: Duration = Duration::from_secs(30);
/// A longer answer head than this is not the proxy's.
const MAX_HEAD: usize = 16 * 1024;

/// Runs inside a sandbox: listens on 127.0.0.1:P for each P in `raw` (the proxy port the
/// proxy variables name, and each credential gateway's port) and for each `(P, target)` in
/// `forwards`; relays every connection to the unix socket at `socket`. A connection on a
/// raw port is relayed as it is (the client speaks proxy HTTP, or plain HTTP to a gateway). A connection on a forward port P is relayed after the bridge
/// itself sends `CONNECT <target> HTTP/1.1\r\nHost: <target>\r\n\r\n` and reads the proxy's
/// answer head: on 200 it relays the bytes; on anything else it closes the connection. Once
/// every listener is bound it writes exactly the line `stet-bridge: ready\n` to stdout and
/// flushes. Never returns unless binding fails (or a target holds a space or control
/// character, which could not be sent as one request line).
pub fn run(socket: &Path, raw: &[u16], forwards: &[(u16, String)]) -> io::Result<Infallible> {
    if let Some((_, bad)) = forwards.iter().find(|(_, t)| {
        t.is_empty()
            || t.bytes()
                .any(|b| b.is_ascii_whitespace() || b.is_ascii_control())
    }) {
        let message = format!("forward target {bad:?} is not a host:port");
        return Err(io::Error::new(io::ErrorKind::InvalidInput, message));
    }
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    runtime.block_on(async {
        let socket: Arc<Path> = socket.into();
        let mut listeners = Vec::new();
        for port in raw {
            listeners.push((TcpListener::bind((Ipv4Addr::LOCALHOST, *port)).await?, None));
        }
        for (port, target) in forwards {
            let listener = TcpListener::bind((Ipv4Addr::LOCALHOST, *port)).await?;
            listeners.push((listener, Some(Arc::<str>::from(target.as_str()))));
        }
        {
            // Whoever started the bridge waits for this line; if nobody reads it, the
            // bridge serves all the same.
            let mut out = io::stdout().lock();
            let _ = out
                .write_all(b"stet-bridge: ready\n")
                .and_then(|()| out.flush());
        }
        for (listener, target) in listeners {
            tokio::spawn(accept(listener, socket.clone(), target));
        }
        Ok(std::future::pending::<Infallible>().await)
    })
}

async fn accept(listener: TcpListener, socket: Arc<Path>, target: Option<Arc<str>>) {
    loop {
        match listener.accept().await {
            Ok((client, _)) => {
                // One connection's failure closes that connection only.
                tokio::spawn(relay(client, socket.clone(), target.clone()));
            }
            // Out of descriptors, most likely: pause rather than spin; keep listening.
            Err(_) => tokio::time::sleep(Duration::from_millis(100)).await,
        }
    }
}

async fn relay(
    mut client: TcpStream,
    socket: Arc<Path>,
    target: Option<Arc<str>>,
) -> io::Result<()> {
    let mut proxy = UnixStream::connect(&*socket).await?;
    if let Some(target) = target {
        let head = format!("CONNECT {target} HTTP/1.1\r\nHost: {target}\r\n\r\n");
        proxy.write_all(head.as_bytes()).await?;
        let early = tokio::time::timeout(ANSWER_TIMEOUT, answer(&mut proxy)).await??;
        client.write_all(&early).await?;
    }
    tokio::io::copy_bidirectional(&mut client, &mut proxy).await?;
    Ok(())
}

/// Reads the proxy's answer head to the bridge's CONNECT. On 200, the bytes read past the
/// head (the target's first bytes, if they came in the same read); otherwise an error.
async fn answer(proxy: &mut UnixStream) -> io::Result<Vec<u8>> {
    let mut head = Vec::with_capacity(256);
    let mut chunk = [0u8; 1024];
    loop {
        if let Some(end) = head.windows(4).position(|w| w == b"\r\n\r\n") {
            let line = head.split(|&b| b == b'\r').next().unwrap_or_default();
            return match line.split(|&b| b == b' ').nth(1) {
                Some(b"200") => Ok(head.split_off(end + 4)),
                _ => Err(io::Error::other(String::from_utf8_lossy(line).into_owned())),
            };
        }
        if head.len() > MAX_HEAD {
            return Err(io::Error::other("the proxy's answer head is too long"));
        }
        let n = proxy.read(&mut chunk).await?;
        if n == 0 {
            return Err(io::ErrorKind::UnexpectedEof.into());
        }
        head.extend_from_slice(&chunk[..n]);
    }
}
