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
        session.complete_io(&mut socket)?;
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
