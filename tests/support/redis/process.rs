//! Starting `redis-server` processes for the harness: a free port, a temporary
//! directory, the server's command line, the wait for its first `PONG`, a restart on
//! the same port once it is free, and signals to a running server.

use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

/// How long a started server has to answer `PING` before the harness gives up.
pub(super) const START_TIMEOUT: Duration = Duration::from_secs(20);

/// A port nothing listens on right now (the OS picks it; a race with another
/// process taking it before the server binds is caught by the start retry).
pub(super) fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|listener| listener.local_addr())
        .map(|addr| addr.port())
        .unwrap_or_else(|e| panic!("redis test harness: cannot find a free port: {e}"))
}

pub(super) fn temp_dir(tag: &str) -> PathBuf {
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

pub(super) fn spawn_server(port: u16, dir: &Path, extra: &[impl AsRef<std::ffi::OsStr>]) -> Child {
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

/// Waits until the server on `port` answers, or the child exits. The server that
/// answers must be the child: a port found free may be taken by another test's
/// server before the child binds it, and the child then exits while the other
/// answers for it (and is gone when that test ends).
pub(super) fn wait_ready(port: u16, child: &mut Child) -> Result<(), String> {
    let deadline = Instant::now() + START_TIMEOUT;
    let url = format!("redis://127.0.0.1:{port}/");
    let own = format!("process_id:{}", child.id());
    loop {
        if let Ok(Some(status)) = child.try_wait() {
            return Err(format!("redis-server exited at start with {status}"));
        }
        let info = redis::Client::open(url.as_str())
            .and_then(|client| client.get_connection_with_timeout(Duration::from_millis(200)))
            .and_then(|mut conn| redis::cmd("INFO").arg("server").query::<String>(&mut conn));
        if let Ok(info) = info {
            if info.lines().any(|line| line.trim() == own) {
                return Ok(());
            }
            return Err(format!("port {port} is another redis-server's"));
        }
        if Instant::now() > deadline {
            return Err(format!(
                "no answer from port {port} within {START_TIMEOUT:?}"
            ));
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Starts a server again on `port` (by `spawn`) once it is free: the killed one's
/// socket may linger for a moment, so it tries until [`START_TIMEOUT`].
pub(super) fn respawn(port: u16, spawn: impl Fn() -> Child) -> Child {
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

pub(super) fn signal(pid: u32, signal: &str) {
    let status = Command::new("kill")
        .args([signal, &pid.to_string()])
        .status()
        .unwrap_or_else(|e| panic!("redis test harness: cannot run kill: {e}"));
    assert!(status.success(), "kill {signal} {pid} failed");
}
