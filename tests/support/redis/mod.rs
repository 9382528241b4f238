//! A real Redis for the Redis store's tests: a `redis-server` the harness starts
//! itself (on a free port, no persistence, its own temporary directory), or the one
//! `REDIS_URL` names. Nothing here skips: a test that cannot get a server panics and
//! says why.
//!
//! Fault helpers (kill, pause, resume, restart) act only on a server this harness
//! started, never on one it was given: [`RedisServer::start_own`] always starts one.
//! [`RedisCluster::start`] starts three Cluster masters and joins them.
#![allow(dead_code)]

pub mod trace;

use sluicegate::algorithms::{Decision, Receipt};
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

/// How long a started server has to answer `PING` before the harness gives up.
const START_TIMEOUT: Duration = Duration::from_secs(20);

/// A key prefix no other test in this process (or another process) uses, so that
/// tests sharing a `REDIS_URL` server never see each other's keys.
pub fn unique_prefix(test: &str) -> String {
    static NEXT: AtomicU64 = AtomicU64::new(0);
    format!(
        "t{}-{}-{}:",
        std::process::id(),
        NEXT.fetch_add(1, Ordering::Relaxed),
        test
    )
}

/// A port nothing listens on right now (the OS picks it; a race with another
/// process taking it before the server binds is caught by the start retry).
fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|listener| listener.local_addr())
        .map(|addr| addr.port())
        .unwrap_or_else(|e| panic!("redis test harness: cannot find a free port: {e}"))
}

/// A store whose server never answers, for the tests of what a failed store does:
/// its URL names a port nothing listens on, and a connection gives up after
/// 200 ms. Its keys are under a prefix made unique from `tag`.
pub fn unreachable_store<K, A>(tag: &str) -> sluicegate::stores::redis::RedisStore<K, A> {
    let options = sluicegate::stores::redis::RedisOptions::default()
        .prefix(unique_prefix(tag))
        .unwrap()
        .connect_timeout(std::time::Duration::from_millis(200));
    let url = format!("redis://127.0.0.1:{}/", free_port());
    sluicegate::stores::redis::RedisStore::open_with(&url, options).unwrap()
}

fn temp_dir(tag: &str) -> PathBuf {
    static NEXT: AtomicU64 = AtomicU64::new(0);
    let dir = std::env::temp_dir().join(format!(
        "sluicegate-redis-{}-{}-{}",
        std::process::id(),
        NEXT.fetch_add(1, Ordering::Relaxed),
        tag
    ));
    std::fs::create_dir_all(&dir)
        .unwrap_or_else(|e| panic!("redis test harness: cannot create {}: {e}", dir.display()));
    dir
}

fn spawn_server(port: u16, dir: &Path, extra: &[impl AsRef<std::ffi::OsStr>]) -> Child {
    let mut command = Command::new("redis-server");
    command
        .args(["--port", &port.to_string()])
        .args(["--bind", "127.0.0.1"])
        .args(["--save", ""])
        .args(["--appendonly", "no"])
        .args(["--dir", &dir.display().to_string()])
        .args(["--protected-mode", "no"])
        .args(extra)
        .stdout(Stdio::null())
        .stderr(Stdio::null());
    command.spawn().unwrap_or_else(|e| {
        panic!(
            "redis test harness: cannot run `redis-server` ({e}). Install it (Debian: \
             `apt-get install -y redis-server`, which .ci/run does) or set REDIS_URL to a \
             server the tests may use."
        )
    })
}

/// Waits until the server on `port` answers PING, or the child exits.
fn wait_ready(port: u16, child: &mut Child) -> Result<(), String> {
    let deadline = Instant::now() + START_TIMEOUT;
    let url = format!("redis://127.0.0.1:{port}/");
    loop {
        if let Ok(Some(status)) = child.try_wait() {
            return Err(format!("redis-server exited at start with {status}"));
        }
        let ping = redis::Client::open(url.as_str())
            .and_then(|client| client.get_connection_with_timeout(Duration::from_millis(200)))
            .and_then(|mut conn| redis::cmd("PING").query::<String>(&mut conn));
        if ping.is_ok() {
            return Ok(());
        }
        if Instant::now() > deadline {
            return Err(format!("no PONG from port {port} within {START_TIMEOUT:?}"));
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Makes this process trust the test CA ([`test_ca`]) through `SSL_CERT_FILE`,
/// which rustls-native-certs reads for the store's sockets and redis-rs's alike,
/// with ring as rustls's crypto provider (the crate leaves that choice to the
/// application). Once per process: every TLS test calls it before it connects.
#[cfg(feature = "redis-tls")]
pub fn trust_test_ca() {
    static TRUSTED: std::sync::Once = std::sync::Once::new();
    TRUSTED.call_once(|| {
        // A provider installed already (by the application, here none) is kept.
        let _ = rustls::crypto::ring::default_provider().install_default();
        let file = test_ca().join("ca.crt");
        // SAFETY: every reader of the environment in the test binaries goes through
        // std (`env::var`, `Command::spawn`: rustls-native-certs, this harness),
        // which holds the lock `set_var` takes; no C code in them reads it.
        unsafe { std::env::set_var("SSL_CERT_FILE", file) };
    });
}

/// The tests' certificate authority (`ca.crt` and `ca.key`), whose certificate the
/// TLS tests trust: its directory. Made once and kept in the temporary directory
/// for later runs (valid ten years), so that test processes leave nothing behind;
/// processes that make it at once keep whichever lands first, whole (a rename).
pub fn test_ca() -> &'static Path {
    static CA: std::sync::OnceLock<PathBuf> = std::sync::OnceLock::new();
    CA.get_or_init(|| {
        let shared = std::env::temp_dir().join("sluicegate-redis-test-ca");
        if shared.join("ca.crt").exists() && shared.join("ca.key").exists() {
            return shared;
        }
        let dir = temp_dir("ca");
        new_key(&dir, "ca.key");
        let subject = "/CN=sluicegate test CA";
        let args = [
            "-x509", "-new", "-key", "ca.key", "-out", "ca.crt", "-subj", subject,
        ];
        openssl(&dir, &[&["req", "-days", "3650"][..], &args].concat());
        if std::fs::rename(&dir, &shared).is_err() {
            let _ = std::fs::remove_dir_all(&dir);
        }
        shared
    })
}

/// Arguments that make a server serve TLS on `tls_port` too, with a key and a
/// certificate for `localhost` (signed by [`test_ca`]) written into `dir`.
fn tls_arguments(tls_port: u16, dir: &Path) -> Vec<String> {
    let ca = test_ca();
    std::fs::write(
        dir.join("server.ext"),
        // Client authentication too: Cluster nodes present it to each other.
        "subjectAltName=DNS:localhost,IP:127.0.0.1\nextendedKeyUsage=serverAuth,clientAuth\n",
    )
    .unwrap();
    new_key(dir, "server.key");
    openssl(
        dir,
        &[
            "req",
            "-new",
            "-key",
            "server.key",
            "-out",
            "server.csr",
            "-subj",
            "/CN=localhost",
        ],
    );
    let (ca_crt, ca_key) = (ca.join("ca.crt"), ca.join("ca.key"));
    let serial = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(1, |t| t.as_nanos())
        .to_string();
    openssl(
        dir,
        &[
            "x509",
            "-req",
            "-in",
            "server.csr",
            "-CA",
            &ca_crt.display().to_string(),
            "-CAkey",
            &ca_key.display().to_string(),
            // A serial of its own: nothing is written beside the shared CA.
            "-set_serial",
            &serial,
            "-out",
            "server.crt",
            "-days",
            "2",
            "-extfile",
            "server.ext",
        ],
    );
    let path = |name: &str| dir.join(name).display().to_string();
    vec![
        "--tls-port".to_owned(),
        tls_port.to_string(),
        "--tls-cert-file".to_owned(),
        path("server.crt"),
        "--tls-key-file".to_owned(),
        path("server.key"),
        "--tls-ca-cert-file".to_owned(),
        ca_crt.display().to_string(),
        "--tls-auth-clients".to_owned(),
        "no".to_owned(),
    ]
}

/// Writes a new P-256 private key to `name` in `dir`.
fn new_key(dir: &Path, name: &str) {
    openssl(
        dir,
        &[
            "ecparam",
            "-name",
            "prime256v1",
            "-genkey",
            "-noout",
            "-out",
            name,
        ],
    );
}

fn openssl(dir: &Path, args: &[&str]) {
    let output = Command::new("openssl")
        .args(args)
        .current_dir(dir)
        .output()
        .unwrap_or_else(|e| {
            panic!(
                "redis test harness: cannot run `openssl` ({e}) to make test certificates; \
                 install it (Debian: `apt-get install -y openssl`, which .ci/run does)"
            )
        });
    assert!(
        output.status.success(),
        "redis test harness: openssl {args:?} failed: {}",
        String::from_utf8_lossy(&output.stderr)
    );
}

fn signal(pid: u32, signal: &str) {
    let status = Command::new("kill")
        .args([signal, &pid.to_string()])
        .status()
        .unwrap_or_else(|e| panic!("redis test harness: cannot run kill: {e}"));
    assert!(status.success(), "kill {signal} {pid} failed");
}

/// A Redis server for one test: started here (killed on drop) or given by `REDIS_URL`.
pub struct RedisServer {
    url: String,
    port: u16,
    dir: Option<PathBuf>,
    child: Option<Child>,
    paused: bool,
    /// Arguments it was started with beyond the harness's own (TLS), for restarts.
    extra: Vec<String>,
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

    fn own_child(&mut self) -> &mut Child {
        self.child
            .as_mut()
            .expect("fault helpers act only on a server the harness started (use start_own)")
    }

    /// Kills the server (SIGKILL): connections drop, state is gone.
    pub fn kill(&mut self) {
        self.resume_if_paused();
        let child = self.own_child();
        let _ = child.kill();
        let _ = child.wait();
    }

    /// Freezes the server (SIGSTOP): connections stay open, nothing answers.
    pub fn pause(&mut self) {
        let pid = self.own_child().id();
        signal(pid, "-STOP");
        self.paused = true;
    }

    /// Thaws a paused server (SIGCONT).
    pub fn resume(&mut self) {
        let pid = self.own_child().id();
        signal(pid, "-CONT");
        self.paused = false;
    }

    fn resume_if_paused(&mut self) {
        if self.paused {
            self.resume();
        }
    }

    /// Kills the server and starts a new, empty one on the same port.
    pub fn restart(&mut self) {
        self.kill();
        let dir = self.dir.clone().expect("own server has a directory");
        let (port, extra) = (self.port, &self.extra);
        self.child = Some(respawn(port, || spawn_server(port, &dir, extra)));
    }
}

/// Starts a server again on `port` (by `spawn`) once it is free: the killed one's
/// socket may linger for a moment, so it tries until [`START_TIMEOUT`].
fn respawn(port: u16, spawn: impl Fn() -> Child) -> Child {
    let deadline = Instant::now() + START_TIMEOUT;
    loop {
        let mut child = spawn();
        match wait_ready(port, &mut child) {
            Ok(()) => return child,
            Err(why) => {
                let _ = child.kill();
                let _ = child.wait();
                assert!(
                    Instant::now() < deadline,
                    "redis test harness: could not restart on port {port}: {why}"
                );
                std::thread::sleep(Duration::from_millis(50));
            }
        }
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

/// Three Redis Cluster masters started here, joined with `redis-cli --cluster
/// create`, killed on drop.
pub struct RedisCluster {
    ports: Vec<u16>,
    children: Vec<Child>,
    dirs: Vec<PathBuf>,
    /// Each node's TLS port and arguments, for a cluster started with TLS.
    tls: Vec<(u16, Vec<String>)>,
}

impl RedisCluster {
    /// Starts three masters and waits until every node says `cluster_state:ok`.
    pub fn start() -> Self {
        Self::start_with(false)
    }

    /// [`start`](Self::start), each node also serving TLS on a second port (the
    /// cluster bus too), with certificates as [`RedisServer::start_own_tls`]'s.
    pub fn start_tls() -> Self {
        Self::start_with(true)
    }

    fn start_with(tls: bool) -> Self {
        let mut cluster = RedisCluster {
            ports: Vec::new(),
            children: Vec::new(),
            dirs: Vec::new(),
            tls: Vec::new(),
        };
        for _ in 0..3 {
            let (port, child, dir, tls) = Self::start_node(tls);
            cluster.ports.push(port);
            cluster.children.push(child);
            cluster.dirs.push(dir);
            cluster.tls.extend(tls);
        }
        // With TLS the nodes meet over their TLS ports: the cluster bus speaks TLS.
        let mut create = Command::new("redis-cli");
        let ports = if tls {
            let ca = test_ca().join("ca.crt");
            create.arg("--tls").arg("--cacert").arg(ca);
            cluster.tls.iter().map(|(port, _)| *port).collect()
        } else {
            cluster.ports.clone()
        };
        create.arg("--cluster").arg("create");
        for port in ports {
            create.arg(format!("127.0.0.1:{port}"));
        }
        // redis-cli waits for the nodes to join for as long as it takes: bounded
        // here, so that a cluster that cannot form fails the test instead of
        // hanging it. Its output goes to a file, read when it ends either way.
        let log = cluster.dirs[0].join("create.log");
        let file = std::fs::File::create(&log).unwrap();
        let mut child = create
            .args(["--cluster-replicas", "0", "--cluster-yes"])
            .stdout(file.try_clone().unwrap())
            .stderr(file)
            .spawn()
            .unwrap_or_else(|e| {
                panic!(
                    "redis test harness: cannot run `redis-cli` ({e}); install it (Debian: \
                     `apt-get install -y redis-tools`, which .ci/run does)"
                )
            });
        let deadline = Instant::now() + START_TIMEOUT;
        let status = loop {
            if let Some(status) = child.try_wait().unwrap() {
                break Some(status);
            }
            if Instant::now() > deadline {
                let _ = child.kill();
                let _ = child.wait();
                break None;
            }
            std::thread::sleep(Duration::from_millis(50));
        };
        assert!(
            status.is_some_and(|status| status.success()),
            "redis test harness: redis-cli --cluster create {}: {}",
            if status.is_some() {
                "failed"
            } else {
                "did not finish within the start timeout"
            },
            std::fs::read_to_string(&log).unwrap_or_default()
        );
        cluster.wait_ok();
        cluster
    }

    fn start_node(tls: bool) -> (u16, Child, PathBuf, Option<(u16, Vec<String>)>) {
        let dir = temp_dir("cluster");
        let mut last = String::new();
        for _ in 0..5 {
            let port = free_port();
            let tls = tls.then(|| {
                let tls_port = free_port();
                let mut extra = tls_arguments(tls_port, &dir);
                // The bus port is named: the default (the port + 10000) would be
                // the plain port's, while the nodes meet over their TLS ports.
                let bus = free_port().to_string();
                extra.extend(["--tls-cluster", "yes", "--cluster-port", &bus].map(String::from));
                (tls_port, extra)
            });
            let extra = tls.as_ref().map_or(&[][..], |(_, extra)| extra);
            let mut child = Self::spawn_node(port, &dir, extra);
            match wait_ready(port, &mut child) {
                Ok(()) => return (port, child, dir, tls),
                Err(why) => {
                    let _ = child.kill();
                    let _ = child.wait();
                    last = why;
                }
            }
        }
        panic!("redis test harness: could not start a cluster node: {last}");
    }

    fn spawn_node(port: u16, dir: &Path, extra: &[String]) -> Child {
        let config = format!("nodes-{port}.conf");
        let mut args = vec![
            "--cluster-enabled",
            "yes",
            "--cluster-config-file",
            &config,
            "--cluster-node-timeout",
            "5000",
        ];
        args.extend(extra.iter().map(String::as_str));
        spawn_server(port, dir, &args)
    }

    /// Kills node `index` and starts it again on its port with its cluster config
    /// (its slots, no data), then waits until the cluster is ok again.
    pub fn restart_node(&mut self, index: usize) {
        let child = &mut self.children[index];
        let _ = child.kill();
        let _ = child.wait();
        let (port, dir) = (self.ports[index], self.dirs[index].clone());
        let extra = self.tls.get(index).map_or(&[][..], |(_, extra)| extra);
        self.children[index] = respawn(port, || Self::spawn_node(port, &dir, extra));
        self.wait_ok();
    }

    /// Kills node `index` (SIGKILL) and leaves it down: its port refuses
    /// connections. The others serve their slots until they agree the node
    /// failed (the cluster node timeout, 5 s).
    pub fn kill_node(&mut self, index: usize) {
        let child = &mut self.children[index];
        let _ = child.kill();
        let _ = child.wait();
    }

    /// Freezes node `index` (SIGSTOP): its connections stay open, nothing answers.
    pub fn pause_node(&mut self, index: usize) {
        signal(self.children[index].id(), "-STOP");
    }

    /// Thaws a node [`pause_node`](Self::pause_node) froze (SIGCONT).
    pub fn resume_node(&mut self, index: usize) {
        signal(self.children[index].id(), "-CONT");
    }

    fn wait_ok(&self) {
        let deadline = Instant::now() + START_TIMEOUT;
        loop {
            let all_ok = self.ports.iter().all(|port| {
                let url = format!("redis://127.0.0.1:{port}/");
                redis::Client::open(url.as_str())
                    .and_then(|c| c.get_connection_with_timeout(Duration::from_millis(500)))
                    .and_then(|mut conn| {
                        redis::cmd("CLUSTER").arg("INFO").query::<String>(&mut conn)
                    })
                    .is_ok_and(|info| info.contains("cluster_state:ok"))
            });
            if all_ok {
                return;
            }
            assert!(
                Instant::now() < deadline,
                "redis test harness: the cluster did not reach cluster_state:ok within {START_TIMEOUT:?}"
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// An admin connection to node `index`.
    pub fn connection(&self, index: usize) -> redis::Connection {
        let url = format!("redis://127.0.0.1:{}/", self.ports[index]);
        redis::Client::open(url).unwrap().get_connection().unwrap()
    }

    /// Node `index`'s port.
    pub fn port(&self, index: usize) -> u16 {
        self.ports[index]
    }

    /// The nodes' TLS URLs (a cluster from [`start_tls`](Self::start_tls)).
    pub fn tls_urls(&self) -> Vec<String> {
        assert!(!self.tls.is_empty(), "a cluster started with TLS");
        self.tls
            .iter()
            .map(|(port, _)| format!("rediss://127.0.0.1:{port}/"))
            .collect()
    }

    /// The nodes' URLs, to build a cluster client from.
    pub fn urls(&self) -> Vec<String> {
        self.ports
            .iter()
            .map(|port| format!("redis://127.0.0.1:{port}/"))
            .collect()
    }
}

impl Drop for RedisCluster {
    fn drop(&mut self) {
        for child in &mut self.children {
            let _ = child.kill();
            let _ = child.wait();
        }
        for dir in &self.dirs {
            let _ = std::fs::remove_dir_all(dir);
        }
    }
}

/// One second, in the nanoseconds a store's steps take.
pub const SECOND: u64 = 1_000_000_000;

/// A reserve of `cost` that does not wait.
pub fn take(cost: u64) -> sluicegate::stores::Operation<'static> {
    sluicegate::stores::Operation::Reserve { cost, max_wait: 0 }
}

/// A keyed `try_acquire`'s question to a store: a [`take`] of `cost` in the lean
/// report, `None` if granted, else the refusal.
pub fn try_take<K, A: sluicegate::algorithms::Algorithm>(
    store: &impl sluicegate::stores::Store<K, A>,
    algorithm: &A,
    key: &K,
    now: u64,
    cost: u64,
) -> Option<Decision> {
    let taken: Result<(), Decision> = store.apply_key(algorithm, key, now, take(cost)).unwrap();
    taken.err()
}

/// A fixed window of `limit` per minute.
pub fn window(limit: u64) -> sluicegate::algorithms::FixedWindow {
    sluicegate::algorithms::FixedWindow::new(limit, Duration::from_secs(60)).unwrap()
}

/// `name` in `INFO commandstats`: how many times the server ran it.
pub fn calls(conn: &mut redis::Connection, name: &str) -> u64 {
    let info: String = redis::cmd("INFO").arg("commandstats").query(conn).unwrap();
    info.lines()
        .find_map(|line| line.strip_prefix(&format!("cmdstat_{name}:calls=")))
        .map_or(0, |rest| rest.split(',').next().unwrap().parse().unwrap())
}

/// A tokio runtime on this thread, for the async side of a store.
pub fn current_thread_runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
}

/// One reserve of 1 (10 a minute) on each of 30 identities, spread over the
/// cluster's masters; node 0 restarted; and again. Asserts that every call
/// succeeds, and that identities on the restarted node start afresh (it keeps its
/// slots, not its data) while the others count on.
pub fn a_restarted_node_loses_no_call(
    cluster: &mut RedisCluster,
    store: &sluicegate::stores::redis::RedisStore<String, sluicegate::algorithms::FixedWindow>,
) {
    use sluicegate::stores::Store;
    let keys: Vec<String> = (0..30).map(|i| format!("user:{i}")).collect();
    let remaining = || -> Vec<u64> {
        keys.iter()
            .map(|key| {
                let (d, _) = store
                    .apply_key::<(Decision, Receipt)>(&window(10), key, SECOND, take(1))
                    .unwrap();
                d.remaining()
            })
            .collect()
    };
    assert!(remaining().iter().all(|&r| r == 9));
    cluster.restart_node(0);
    let after = remaining();
    assert!(after.iter().all(|&r| r == 9 || r == 8), "{after:?}");
    assert!(after.contains(&9) && after.contains(&8), "{after:?}");
}

/// Asserts that `result` is a typed store error that certainly applied nothing
/// and whose message says `says`.
pub fn assert_unapplied_error<T: std::fmt::Debug>(
    result: Result<T, sluicegate::Error>,
    says: &str,
) {
    match result {
        Err(sluicegate::Error::Store(e)) => {
            assert_eq!(e.applied(), sluicegate::Applied::No);
            assert!(e.to_string().contains(says), "{e}");
        }
        other => panic!("expected a typed store error, got {other:?}"),
    }
}
