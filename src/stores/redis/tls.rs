//! TLS on the store's own sockets (feature `redis-tls`), with rustls and the
//! system's roots, as redis-rs's own `tls-rustls` does: a `rediss://` URL is then
//! served by a [`SocketConnection`](super::socket_connection::SocketConnection) like
//! a plain one, checked before every call.
//!
//! Served here: a URL's TLS address with certificate verification (redis-rs's
//! `TcpTls` with `insecure` unset and no certificates of the client's own). A
//! client built with its own certificates or with verification off stays with
//! redis-rs, which holds those settings.
//!
//! rustls needs a crypto provider; like redis-rs's, this one uses the process's
//! default, which the application installs (e.g.
//! `rustls::crypto::ring::default_provider().install_default()`). Without one a
//! connection fails with a typed error saying so, never a panic.

use parking_lot::Mutex;
use rustls::crypto::CryptoProvider;
use rustls::pki_types::ServerName;
use rustls::{ClientConfig, ClientConnection, RootCertStore, StreamOwned};
use socket2::Socket;
use std::io;
use std::sync::Arc;

/// A TLS session over one of the store's sockets.
pub(super) type TlsStream = StreamOwned<ClientConnection, Socket>;

/// Starts TLS to `host` on `socket` and completes the handshake (bounded by the
/// socket's timeouts), so that a failure is a failure to connect.
pub(super) fn connect(host: &str, mut socket: Socket) -> io::Result<TlsStream> {
    let name = ServerName::try_from(host.to_owned()).map_err(io::Error::other)?;
    let mut session = ClientConnection::new(config()?, name).map_err(io::Error::other)?;
    while session.is_handshaking() {
        // Each round moves bytes or fails (a timeout, an end of stream); one that
        // moved none would loop for ever.
        if session.complete_io(&mut socket)? == (0, 0) {
            let why = "the TLS handshake stalled";
            return Err(io::Error::new(io::ErrorKind::UnexpectedEof, why));
        }
    }
    Ok(StreamOwned::new(session, socket))
}

/// Whether the server closed this idle session or sent something unasked: reads
/// what the (non-blocking) socket holds into the session without waiting. Records
/// that carry no data (a TLS 1.3 session ticket, say) leave it usable.
pub(super) fn closed_while_idle(stream: &mut TlsStream) -> bool {
    loop {
        match stream.conn.read_tls(&mut stream.sock) {
            Ok(0) => return true,
            Ok(_) => match stream.conn.process_new_packets() {
                Ok(io) if io.peer_has_closed() || io.plaintext_bytes_to_read() > 0 => return true,
                Ok(_) => continue,
                Err(_) => return true,
            },
            Err(e) => return e.kind() != io::ErrorKind::WouldBlock,
        }
    }
}

/// The client configuration every session shares, built at the first connection
/// (reading the system's roots once) and kept once built.
fn config() -> io::Result<Arc<ClientConfig>> {
    static BUILT: Mutex<Option<Arc<ClientConfig>>> = Mutex::new(None);
    let mut built = BUILT.lock();
    if let Some(config) = built.as_ref() {
        return Ok(config.clone());
    }
    let Some(provider) = CryptoProvider::get_default() else {
        return Err(io::Error::other(
            "no rustls crypto provider is installed: call e.g. \
             `rustls::crypto::ring::default_provider().install_default()` at startup",
        ));
    };
    let mut roots = RootCertStore::empty();
    let native = rustls_native_certs::load_native_certs();
    if let Some(error) = native.errors.into_iter().next() {
        return Err(io::Error::other(error));
    }
    for cert in native.certs {
        roots.add(cert).map_err(io::Error::other)?;
    }
    let config = ClientConfig::builder_with_provider(provider.clone())
        .with_safe_default_protocol_versions()
        .map_err(io::Error::other)?
        .with_root_certificates(roots)
        .with_no_client_auth();
    Ok(built.insert(Arc::new(config)).clone())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::{TcpListener, TcpStream};
    use std::time::{Duration, Instant};

    /// A socket connected to `listener`, reads and writes bounded by 200 ms.
    fn socket_to(listener: &TcpListener) -> Socket {
        let socket = Socket::from(TcpStream::connect(listener.local_addr().unwrap()).unwrap());
        socket
            .set_read_timeout(Some(Duration::from_millis(200)))
            .unwrap();
        socket
            .set_write_timeout(Some(Duration::from_millis(200)))
            .unwrap();
        socket
    }

    #[test]
    fn a_handshake_with_a_peer_that_never_answers_or_hangs_up_fails_in_time() {
        let _ = rustls::crypto::ring::default_provider().install_default();
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        // A peer that accepts and says nothing: the read timeout ends it.
        let started = Instant::now();
        let silent = connect("localhost", socket_to(&listener))
            .map(|_| ())
            .unwrap_err();
        assert!(
            matches!(
                silent.kind(),
                io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut
            ),
            "{silent}"
        );
        assert!(started.elapsed() < Duration::from_secs(5));
        // A peer that hangs up.
        let socket = socket_to(&listener);
        for _ in 0..2 {
            drop(listener.accept().unwrap());
        }
        let closed = connect("localhost", socket).map(|_| ()).unwrap_err();
        assert!(
            matches!(
                closed.kind(),
                io::ErrorKind::UnexpectedEof | io::ErrorKind::ConnectionReset
            ),
            "{closed}"
        );
    }
}
