//! A blocking connection over a TCP or Unix socket that the store holds itself
//! (with TLS on it under feature `redis-tls`, see [`tls`](super::tls)), so that it
//! can tell, before writing a call, whether the server closed the connection while
//! it sat idle in the pool.
//!
//! Why not redis-rs's own blocking connection: it hides its socket, so a server
//! restart between two calls shows only after the next call is written (its reply
//! never comes), and a call written to a dead socket cannot be told from one whose
//! reply was lost: the store would have to answer [`Applied::Unknown`] for a call
//! that never reached a server. Here [`SocketConnection::closed_while_idle`] reads
//! the socket without blocking first: an end of stream (or any byte nobody asked
//! for) means the connection is finished, and the call goes out on a fresh one.
//! That costs one non-blocking read per call.
//!
//! It speaks RESP2 (every reply a step gives is an array of integers either way),
//! authenticates and selects the database as the client's URL says, and applies the
//! URL's TCP settings that redis-rs exposes (no-delay, keep-alive, user timeout).
//!
//! [`Applied::Unknown`]: crate::Applied::Unknown

#[cfg(feature = "redis-tls")]
use super::tls;
use redis::{ConnectionAddr, ConnectionInfo, ConnectionLike, Parser, RedisResult, Value};
use socket2::{Domain, Socket, Type};
use std::io::{self, Read, Write};
use std::net::ToSocketAddrs;
use std::time::Duration;

/// One blocking connection on a socket of our own (see the module docs).
pub(super) struct SocketConnection {
    stream: Stream,
    parser: Parser,
    db: i64,
    /// False once a read or write failed: the connection may be out of step.
    open: bool,
}

impl SocketConnection {
    /// Connects as `info` says, or `Ok(None)` for an address this type does not
    /// serve (TLS without feature `redis-tls`, or with settings only redis-rs
    /// holds: see [`tls`](super::tls)). Connecting, a TLS handshake, `AUTH` and
    /// `SELECT` included, is bounded by `connect_timeout` (as redis-rs bounds its
    /// own connections), each read and write after that by `response_timeout`.
    pub(super) fn open(
        info: &ConnectionInfo,
        connect_timeout: Duration,
        response_timeout: Duration,
    ) -> RedisResult<Option<Self>> {
        let (socket, tls_host): (Socket, Option<&String>) = match info.addr() {
            #[cfg(unix)]
            ConnectionAddr::Unix(path) => {
                let socket = Socket::new(Domain::UNIX, Type::STREAM, None)?;
                socket.connect_timeout(&socket2::SockAddr::unix(path)?, connect_timeout)?;
                (socket, None)
            }
            addr
            @ (ConnectionAddr::Tcp(host, port) | ConnectionAddr::TcpTls { host, port, .. }) => {
                let Some(tls) = tcp_kind(addr) else {
                    return Ok(None);
                };
                let socket = connect_tcp(host, *port, info, connect_timeout)?;
                (socket, tls.then_some(host))
            }
            _ => return Ok(None),
        };
        socket.set_read_timeout(Some(connect_timeout))?;
        socket.set_write_timeout(Some(connect_timeout))?;
        let stream = match tls_host {
            #[cfg(feature = "redis-tls")]
            Some(host) => Stream::Tls(Box::new(tls::connect(host, socket)?)),
            _ => Stream::Plain(socket),
        };
        let settings = info.redis_settings();
        let mut conn = SocketConnection {
            stream,
            parser: Parser::new(),
            db: settings.db(),
            open: true,
        };
        if let Some(password) = settings.password() {
            // A user always named, `default` unless the URL names one, as the
            // async connection's `HELLO 3 AUTH` does: the one-argument form fails
            // on a server that has no password where that one connects.
            let user = settings.username().unwrap_or("default");
            let auth = redis::cmd("AUTH").arg(user).arg(password).clone();
            auth.query::<()>(&mut conn)?;
        }
        if conn.db != 0 {
            redis::cmd("SELECT").arg(conn.db).query::<()>(&mut conn)?;
        }
        conn.stream
            .socket()
            .set_read_timeout(Some(response_timeout))?;
        conn.stream
            .socket()
            .set_write_timeout(Some(response_timeout))?;
        Ok(Some(conn))
    }

    /// Whether this idle connection can no longer carry a call: the server closed
    /// it (a restart, an idle timeout, `CLIENT KILL`) or sent something unasked.
    /// A non-blocking read finds out without waiting; whatever it finds, nothing
    /// has been written, so a fresh connection can carry the call instead.
    pub(super) fn closed_while_idle(&mut self) -> bool {
        if !self.open || self.stream.socket().set_nonblocking(true).is_err() {
            return true;
        }
        let closed = match &mut self.stream {
            Stream::Plain(socket) => {
                let read = (&*socket).read(&mut [0u8; 1]);
                !matches!(read, Err(e) if e.kind() == io::ErrorKind::WouldBlock)
            }
            #[cfg(feature = "redis-tls")]
            Stream::Tls(stream) => tls::closed_while_idle(stream),
        };
        self.stream.socket().set_nonblocking(false).is_err() || closed
    }

    fn write_all(&mut self, bytes: &[u8]) -> RedisResult<()> {
        let written = self.stream.write_all(bytes).map_err(Into::into);
        self.failed(written)
    }

    fn read_value(&mut self) -> RedisResult<Value> {
        let value = self.parser.parse_value(&mut self.stream);
        self.failed(value)
    }

    /// Marks the connection out of step after any failure, so it is not reused.
    fn failed<T>(&mut self, result: RedisResult<T>) -> RedisResult<T> {
        if result.is_err() {
            self.open = false;
        }
        result
    }
}

/// How this type reaches a TCP address: `Some(false)` plain, `Some(true)` over
/// TLS, `None` if it leaves the address to redis-rs. TLS is served with feature
/// `redis-tls` only, and only with certificate verification and no certificates of
/// the client's own (settings only redis-rs holds).
pub(super) fn tcp_kind(addr: &ConnectionAddr) -> Option<bool> {
    match addr {
        ConnectionAddr::Tcp(..) => Some(false),
        #[cfg(feature = "redis-tls")]
        ConnectionAddr::TcpTls {
            insecure: false,
            tls_params: None,
            ..
        } => Some(true),
        _ => None,
    }
}

/// A socket, with or without TLS on it.
enum Stream {
    Plain(Socket),
    #[cfg(feature = "redis-tls")]
    Tls(Box<tls::TlsStream>),
}

impl Stream {
    fn socket(&self) -> &Socket {
        match self {
            Stream::Plain(socket) => socket,
            #[cfg(feature = "redis-tls")]
            Stream::Tls(stream) => &stream.sock,
        }
    }
}

impl Read for Stream {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        match self {
            Stream::Plain(socket) => (&*socket).read(buf),
            #[cfg(feature = "redis-tls")]
            Stream::Tls(stream) => stream.read(buf),
        }
    }
}

impl Write for Stream {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        match self {
            Stream::Plain(socket) => (&*socket).write(buf),
            #[cfg(feature = "redis-tls")]
            Stream::Tls(stream) => stream.write(buf),
        }
    }

    fn flush(&mut self) -> io::Result<()> {
        match self {
            Stream::Plain(socket) => (&*socket).flush(),
            #[cfg(feature = "redis-tls")]
            Stream::Tls(stream) => stream.flush(),
        }
    }
}

/// The first of `host`'s addresses that accepts within `timeout`, with the TCP
/// settings of `info` that redis-rs exposes.
fn connect_tcp(
    host: &str,
    port: u16,
    info: &ConnectionInfo,
    timeout: Duration,
) -> io::Result<Socket> {
    let mut last = io::Error::new(io::ErrorKind::NotFound, "the host resolved to no address");
    for addr in (host, port).to_socket_addrs()? {
        let socket = Socket::new(Domain::for_address(addr), Type::STREAM, None)?;
        match socket.connect_timeout(&addr.into(), timeout) {
            Ok(()) => {
                let settings = info.tcp_settings();
                socket.set_tcp_nodelay(settings.nodelay())?;
                if let Some(keepalive) = settings.keepalive() {
                    socket.set_tcp_keepalive(keepalive)?;
                }
                #[cfg(any(target_os = "android", target_os = "fuchsia", target_os = "linux"))]
                socket.set_tcp_user_timeout(settings.user_timeout())?;
                return Ok(socket);
            }
            Err(e) => last = e,
        }
    }
    Err(last)
}

impl ConnectionLike for SocketConnection {
    fn req_packed_command(&mut self, cmd: &[u8]) -> RedisResult<Value> {
        self.write_all(cmd)?;
        self.read_value()
    }

    fn req_packed_commands(
        &mut self,
        cmd: &[u8],
        offset: usize,
        count: usize,
    ) -> RedisResult<Vec<Value>> {
        self.write_all(cmd)?;
        let mut values = Vec::with_capacity(count);
        for i in 0..offset + count {
            let value = self.read_value()?;
            if i >= offset {
                values.push(value);
            }
        }
        Ok(values)
    }

    fn get_db(&self) -> i64 {
        self.db
    }

    fn check_connection(&mut self) -> bool {
        redis::cmd("PING").query::<String>(self).is_ok()
    }

    fn is_open(&self) -> bool {
        self.open
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use redis::IntoConnectionInfo;
    use std::net::{TcpListener, TcpStream};
    use std::time::Instant;

    /// A connection to a bare loopback listener, and the listener's end of it.
    fn connected() -> (SocketConnection, TcpStream) {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let info = format!("redis://{}", listener.local_addr().unwrap())
            .into_connection_info()
            .unwrap();
        let second = Duration::from_secs(1);
        let conn = SocketConnection::open(&info, second, second)
            .unwrap()
            .expect("a plain TCP address");
        (conn, listener.accept().unwrap().0)
    }

    /// Whether the check finds `conn` closed within five seconds (a peer's close
    /// reaches this end asynchronously). It checks at least once, however late a
    /// loaded machine runs it.
    fn seen_closed(conn: &mut SocketConnection) -> bool {
        let deadline = Instant::now() + Duration::from_secs(5);
        loop {
            if conn.closed_while_idle() {
                return true;
            }
            if Instant::now() >= deadline {
                return false;
            }
            std::thread::yield_now();
        }
    }

    #[test]
    fn an_idle_connection_the_peer_keeps_is_usable_and_blocks_again() {
        let (mut conn, mut server) = connected();
        assert!(!conn.closed_while_idle());
        assert!(!conn.closed_while_idle(), "the check consumes nothing");
        // The reply comes late: a read that did not block again would fail at once.
        let replier = std::thread::spawn(move || {
            let mut request = [0u8; 14];
            server.read_exact(&mut request).unwrap();
            std::thread::sleep(Duration::from_millis(50));
            server.write_all(b"+PONG\r\n").unwrap();
            (request, server)
        });
        let reply = conn.req_packed_command(b"*1\r\n$4\r\nPING\r\n").unwrap();
        assert_eq!(reply, Value::SimpleString("PONG".to_owned()));
        let (request, _server) = replier.join().unwrap();
        assert_eq!(&request, b"*1\r\n$4\r\nPING\r\n");
        assert!(conn.is_open());
    }

    #[test]
    fn a_connection_the_peer_closed_is_seen_before_writing() {
        let (mut conn, server) = connected();
        drop(server);
        assert!(seen_closed(&mut conn));
    }

    #[test]
    fn bytes_nobody_asked_for_finish_the_connection() {
        let (mut conn, mut server) = connected();
        server.write_all(b"+OK\r\n").unwrap();
        assert!(seen_closed(&mut conn));
    }

    #[cfg(unix)]
    #[test]
    fn a_unix_socket_connects_and_a_close_on_it_is_seen() {
        use std::os::unix::net::UnixListener;
        let dir = std::env::temp_dir().join(format!("sluicegate-plain-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("redis.sock");
        let _ = std::fs::remove_file(&path);
        let listener = UnixListener::bind(&path).unwrap();
        let info = format!("redis+unix://{}", path.display())
            .into_connection_info()
            .unwrap();
        let second = Duration::from_secs(1);
        let mut conn = SocketConnection::open(&info, second, second)
            .unwrap()
            .expect("a Unix socket address");
        let (server, _) = listener.accept().unwrap();
        assert!(!conn.closed_while_idle());
        drop(server);
        assert!(seen_closed(&mut conn));
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn tls_this_type_cannot_honour_is_left_to_redis_rs() {
        let tls = |insecure| {
            "redis://127.0.0.1:1"
                .into_connection_info()
                .unwrap()
                .set_addr(ConnectionAddr::TcpTls {
                    host: "127.0.0.1".to_owned(),
                    port: 1,
                    insecure,
                    tls_params: None,
                })
        };
        let second = Duration::from_secs(1);
        // Verification turned off is a setting only redis-rs honours: nothing is
        // connected (port 1 would refuse).
        assert!(SocketConnection::open(&tls(true), second, second)
            .unwrap()
            .is_none());
        let verified = SocketConnection::open(&tls(false), second, second);
        if cfg!(feature = "redis-tls") {
            assert!(verified.is_err(), "this type's to connect: refused");
        } else {
            assert!(verified.unwrap().is_none());
        }
    }
}
