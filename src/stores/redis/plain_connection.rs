//! A blocking connection over a plain TCP or Unix socket that the store holds
//! itself, so that it can tell, before writing a call, whether the server closed
//! the connection while it sat idle in the pool.
//!
//! Why not redis-rs's own blocking connection: it hides its socket, so a server
//! restart between two calls shows only after the next call is written (its reply
//! never comes), and a call written to a dead socket cannot be told from one whose
//! reply was lost: the store would have to answer [`Applied::Unknown`] for a call
//! that never reached a server. Here [`PlainConnection::closed_while_idle`] reads
//! the socket without blocking first: an end of stream (or any byte nobody asked
//! for) means the connection is finished, and the call goes out on a fresh one.
//! That costs one non-blocking read per call.
//!
//! It speaks RESP2 (every reply a step gives is an array of integers either way),
//! authenticates and selects the database as the client's URL says, and applies the
//! URL's TCP settings that redis-rs exposes (no-delay, keep-alive, user timeout).
//! TLS stays with redis-rs, which holds the TLS state.
//!
//! [`Applied::Unknown`]: crate::Applied::Unknown

use redis::{ConnectionAddr, ConnectionInfo, ConnectionLike, Parser, RedisResult, Value};
use std::io::{self, Read, Write};
use std::net::{TcpStream, ToSocketAddrs};
#[cfg(unix)]
use std::os::unix::net::UnixStream;
use std::time::Duration;

enum Socket {
    Tcp(TcpStream),
    #[cfg(unix)]
    Unix(UnixStream),
}

/// One blocking connection on a socket of our own (see the module docs).
pub(super) struct PlainConnection {
    socket: Socket,
    parser: Parser,
    db: i64,
    /// False once a read or write failed: the connection may be out of step.
    open: bool,
}

impl PlainConnection {
    /// Connects as `info` says, or `Ok(None)` for an address this type does not
    /// serve (TLS). Connecting and each reply are bounded by the timeouts.
    pub(super) fn open(
        info: &ConnectionInfo,
        connect_timeout: Duration,
        response_timeout: Duration,
    ) -> RedisResult<Option<Self>> {
        let socket = match info.addr() {
            ConnectionAddr::Tcp(host, port) => {
                Socket::Tcp(connect_tcp(host, *port, info, connect_timeout)?)
            }
            #[cfg(unix)]
            ConnectionAddr::Unix(path) => Socket::Unix(UnixStream::connect(path)?),
            _ => return Ok(None),
        };
        let timeout = Some(response_timeout);
        match &socket {
            Socket::Tcp(s) => {
                s.set_read_timeout(timeout)?;
                s.set_write_timeout(timeout)?;
            }
            #[cfg(unix)]
            Socket::Unix(s) => {
                s.set_read_timeout(timeout)?;
                s.set_write_timeout(timeout)?;
            }
        }
        let settings = info.redis_settings();
        let mut conn = PlainConnection {
            socket,
            parser: Parser::new(),
            db: settings.db(),
            open: true,
        };
        if let Some(password) = settings.password() {
            let mut auth = redis::cmd("AUTH");
            if let Some(user) = settings.username() {
                auth.arg(user);
            }
            auth.arg(password).query::<()>(&mut conn)?;
        }
        if conn.db != 0 {
            redis::cmd("SELECT").arg(conn.db).query::<()>(&mut conn)?;
        }
        Ok(Some(conn))
    }

    /// Whether this idle connection can no longer carry a call: the server closed
    /// it (a restart, an idle timeout, `CLIENT KILL`) or sent something unasked.
    /// A non-blocking read finds out without waiting; whatever it finds, nothing
    /// has been written, so a fresh connection can carry the call instead.
    pub(super) fn closed_while_idle(&self) -> bool {
        if !self.open || self.set_nonblocking(true).is_err() {
            return true;
        }
        let mut byte = [0u8; 1];
        let read = match &self.socket {
            Socket::Tcp(s) => (&*s).read(&mut byte),
            #[cfg(unix)]
            Socket::Unix(s) => (&*s).read(&mut byte),
        };
        let healthy = matches!(read, Err(e) if e.kind() == io::ErrorKind::WouldBlock);
        !(self.set_nonblocking(false).is_ok() && healthy)
    }

    fn set_nonblocking(&self, on: bool) -> io::Result<()> {
        match &self.socket {
            Socket::Tcp(s) => s.set_nonblocking(on),
            #[cfg(unix)]
            Socket::Unix(s) => s.set_nonblocking(on),
        }
    }

    fn write_all(&mut self, bytes: &[u8]) -> RedisResult<()> {
        let written = self.socket.write_all(bytes).map_err(Into::into);
        self.failed(written)
    }

    fn read_value(&mut self) -> RedisResult<Value> {
        let value = self.parser.parse_value(&mut self.socket);
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

fn connect_tcp(
    host: &str,
    port: u16,
    info: &ConnectionInfo,
    timeout: Duration,
) -> io::Result<TcpStream> {
    let mut last = io::Error::new(io::ErrorKind::NotFound, "the host resolved to no address");
    for addr in (host, port).to_socket_addrs()? {
        match TcpStream::connect_timeout(&addr, timeout) {
            Ok(stream) => {
                let settings = info.tcp_settings();
                stream.set_nodelay(settings.nodelay())?;
                let socket = socket2::SockRef::from(&stream);
                if let Some(keepalive) = settings.keepalive() {
                    socket.set_tcp_keepalive(keepalive)?;
                }
                #[cfg(any(target_os = "android", target_os = "fuchsia", target_os = "linux"))]
                socket.set_tcp_user_timeout(settings.user_timeout())?;
                return Ok(stream);
            }
            Err(e) => last = e,
        }
    }
    Err(last)
}

impl Read for Socket {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        match self {
            Socket::Tcp(s) => s.read(buf),
            #[cfg(unix)]
            Socket::Unix(s) => s.read(buf),
        }
    }
}

impl Write for Socket {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        match self {
            Socket::Tcp(s) => s.write(buf),
            #[cfg(unix)]
            Socket::Unix(s) => s.write(buf),
        }
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

impl ConnectionLike for PlainConnection {
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
    use std::net::TcpListener;
    use std::time::Instant;

    /// A connection to a bare loopback listener, and the listener's end of it.
    fn connected() -> (PlainConnection, TcpStream) {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let info = format!("redis://{}", listener.local_addr().unwrap())
            .into_connection_info()
            .unwrap();
        let second = Duration::from_secs(1);
        let conn = PlainConnection::open(&info, second, second)
            .unwrap()
            .expect("a plain TCP address");
        (conn, listener.accept().unwrap().0)
    }

    /// Whether the check finds `conn` closed within a second (a peer's close
    /// reaches this end asynchronously).
    fn seen_closed(conn: &PlainConnection) -> bool {
        let deadline = Instant::now() + Duration::from_secs(1);
        while Instant::now() < deadline {
            if conn.closed_while_idle() {
                return true;
            }
            std::thread::yield_now();
        }
        false
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
        let (conn, server) = connected();
        drop(server);
        assert!(seen_closed(&conn));
    }

    #[test]
    fn bytes_nobody_asked_for_finish_the_connection() {
        let (conn, mut server) = connected();
        server.write_all(b"+OK\r\n").unwrap();
        assert!(seen_closed(&conn));
    }

    #[test]
    fn an_address_over_tls_is_left_to_redis_rs() {
        let info = "redis://127.0.0.1:1"
            .into_connection_info()
            .unwrap()
            .set_addr(ConnectionAddr::TcpTls {
                host: "127.0.0.1".to_owned(),
                port: 1,
                insecure: false,
                tls_params: None,
            });
        let second = Duration::from_secs(1);
        // Nothing is connected: the address is simply not this type's.
        assert!(PlainConnection::open(&info, second, second)
            .unwrap()
            .is_none());
    }
}
