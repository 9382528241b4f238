//! One Redis server for a test: the one `REDIS_URL` names, or one the harness starts
//! itself (on a free port, no persistence, its own temporary directory, TLS on a
//! second port if asked), killed on drop. Its fault control is in `faults`.

use super::process::{free_port, spawn_server, temp_dir, wait_ready};
use super::tls::tls_arguments;
use std::path::PathBuf;
use std::process::Child;
use std::time::Duration;

/// A Redis server for one test: started here (killed on drop) or given by `REDIS_URL`.
pub struct RedisServer {
    url: String,
    pub(super) port: u16,
    pub(super) dir: Option<PathBuf>,
    pub(super) child: Option<Child>,
    pub(super) paused: bool,
    /// Arguments it was started with beyond the harness's own (TLS), for restarts.
    pub(super) extra: Vec<String>,
    tls_url: Option<String>,
}

impl RedisServer {
    /// The server `REDIS_URL` names, or one started here.
    pub fn start() -> Self {
        match std::env::var("REDIS_URL") {
            Ok(url) if !url.is_empty() => {
                let server = RedisServer {
                    url,
                    port: 0,
                    dir: None,
                    child: None,
                    paused: false,
                    extra: Vec::new(),
                    tls_url: None,
                };
                server.require_functions();
                server
            }
            _ => Self::start_own(),
        }
    }

    /// Fails loudly on a server older than 7.0: the store runs its steps as
    /// Redis Functions (`FUNCTION LOAD`, `FCALL`).
    fn require_functions(&self) {
        let info: String = redis::cmd("INFO")
            .arg("server")
            .query(&mut self.connection())
            .unwrap_or_else(|e| panic!("redis test harness: INFO server failed: {e}"));
        let version = info
            .lines()
            .find_map(|line| line.strip_prefix("redis_version:"))
            .unwrap_or("unknown");
        let major: u32 = version
            .split('.')
            .next()
            .and_then(|m| m.trim().parse().ok())
            .unwrap_or(0);
        assert!(
            major >= 7,
            "redis test harness: the server at {} is Redis {version}; the Redis store needs \
             7.0 or later (Redis Functions). Install a newer redis-server or set REDIS_URL.",
            self.url
        );
    }

    /// A server started here, whatever `REDIS_URL` says: for tests that kill, pause
    /// or restart it, or that need an empty database (`DBSIZE`).
    pub fn start_own() -> Self {
        Self::start_own_with(false)
    }

    /// A server started here that also serves TLS, on a second port, with a
    /// certificate for `localhost` that [`test_ca`] signed.
    pub fn start_own_tls() -> Self {
        Self::start_own_with(true)
    }

    fn start_own_with(tls: bool) -> Self {
        let dir = temp_dir("server");
        let mut last = String::new();
        for _ in 0..5 {
            let port = free_port();
            let tls_port = tls.then(free_port);
            let extra = match tls_port {
                Some(tls_port) => tls_arguments(tls_port, &dir),
                None => Vec::new(),
            };
            let mut child = spawn_server(port, &dir, &extra);
            match wait_ready(port, &mut child) {
                Ok(()) => {
                    let server = RedisServer {
                        url: format!("redis://127.0.0.1:{port}/"),
                        port,
                        dir: Some(dir),
                        child: Some(child),
                        paused: false,
                        extra,
                        tls_url: tls_port.map(|port| format!("rediss://localhost:{port}/")),
                    };
                    server.require_functions();
                    return server;
                }
                Err(why) => {
                    let _ = child.kill();
                    let _ = child.wait();
                    last = why;
                }
            }
        }
        panic!("redis test harness: could not start redis-server: {last}");
    }

    /// The URL to connect to.
    pub fn url(&self) -> &str {
        &self.url
    }

    /// The URL of its TLS port (a server from [`start_own_tls`](Self::start_own_tls)).
    pub fn tls_url(&self) -> &str {
        self.tls_url.as_deref().expect("a server started with TLS")
    }

    /// A fresh blocking connection, for setting up and inspecting the server.
    pub fn connection(&self) -> redis::Connection {
        redis::Client::open(self.url.as_str())
            .and_then(|client| client.get_connection_with_timeout(Duration::from_secs(5)))
            .unwrap_or_else(|e| panic!("redis test harness: cannot connect to {}: {e}", self.url))
    }

    /// True if this harness started the server (so faults may be injected).
    pub fn is_own(&self) -> bool {
        self.child.is_some()
    }
}

impl Drop for RedisServer {
    fn drop(&mut self) {
        if self.child.is_some() {
            self.kill();
        }
        if let Some(dir) = &self.dir {
            let _ = std::fs::remove_dir_all(dir);
        }
    }
}
