//! A call while Redis is down, with and without the failover store's back-off,
//! against a `redis-server` this bench starts itself (on a free port, no
//! persistence) and freezes (SIGSTOP): the plain Redis store waits its response
//! timeout on every call; a backed-off failover store answers by its policy with
//! no round trip.
//!
//! `cargo bench --bench redis_failover --features redis`

use sluicegate::algorithms::FixedWindow;
use sluicegate::stores::failover::{Backoff, FailoverStore, FailurePolicy};
use sluicegate::stores::redis::{RedisOptions, RedisStore};
use sluicegate::stores::{Step, Store};
use std::net::TcpListener;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

const TIMEOUT: Duration = Duration::from_millis(50);
/// Calls timed on the frozen plain store (each takes the timeout).
const PLAIN_CALLS: u32 = 10;
/// Calls timed on the backed-off failover store.
const BACKED_OFF_CALLS: u32 = 1_000_000;

/// The server, killed (and thawed first) on drop.
struct Server {
    child: Child,
    url: String,
}

impl Server {
    fn signal(&self, signal: &str) {
        let status = Command::new("kill")
            .args([signal, &self.child.id().to_string()])
            .status()
            .expect("kill runs");
        assert!(status.success(), "kill {signal} failed");
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = Command::new("kill")
            .args(["-CONT", &self.child.id().to_string()])
            .status();
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn start_server() -> Server {
    let port = TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("a free port")
        .port();
    let dir = std::env::temp_dir().join(format!(
        "sluicegate-redis-failover-bench-{}",
        std::process::id()
    ));
    std::fs::create_dir_all(&dir).expect("a temporary directory");
    let child = Command::new("redis-server")
        .args(["--port", &port.to_string(), "--bind", "127.0.0.1"])
        .args(["--save", "", "--appendonly", "no"])
        .args(["--dir", &dir.display().to_string()])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("redis-server must be installed (apt-get install -y redis-server)");
    let server = Server {
        child,
        url: format!("redis://127.0.0.1:{port}/"),
    };
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let ping = redis::Client::open(server.url.as_str())
            .and_then(|c| c.get_connection_with_timeout(Duration::from_millis(200)))
            .and_then(|mut c| redis::cmd("PING").query::<String>(&mut c));
        if ping.is_ok() {
            return server;
        }
        assert!(Instant::now() < deadline, "redis-server did not start");
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn redis_store(server: &Server) -> RedisStore<String, FixedWindow> {
    let options = RedisOptions::default()
        .connect_timeout(TIMEOUT)
        .response_timeout(TIMEOUT);
    RedisStore::open_with(&server.url, options).expect("a valid URL")
}

/// The mean time of `calls` calls of `call`.
fn mean(calls: u32, mut call: impl FnMut()) -> Duration {
    let started = Instant::now();
    for _ in 0..calls {
        call();
    }
    started.elapsed() / calls
}

fn main() {
    let server = start_server();
    let window = FixedWindow::new(100, Duration::from_secs(60)).unwrap();
    let key = "k".to_owned();
    let step = Step::Reserve {
        cost: 1,
        max_wait: 0,
    };
    let plain = redis_store(&server);
    let failover = FailoverStore::new(redis_store(&server), FailurePolicy::Closed)
        .with_backoff(Backoff::fixed(Duration::from_secs(3600)));
    // Both connected and the step library loaded before the freeze.
    plain
        .apply_key(&window, &key, 0, step)
        .expect("Redis answers");
    failover
        .apply_key(&window, &key, 0, step)
        .expect("Redis answers");
    server.signal("-STOP");
    let down = mean(PLAIN_CALLS, || {
        assert!(plain.apply_key(&window, &key, 0, step).is_err());
    });
    // The first call meets the frozen server and starts the back-off.
    failover
        .apply_key(&window, &key, 0, step)
        .expect("the policy answers");
    assert!(failover.is_degraded());
    let backed_off = mean(BACKED_OFF_CALLS, || {
        let (decision, _) = failover.apply_key(&window, &key, 0, step).unwrap();
        std::hint::black_box(decision);
    });
    println!("a call while Redis is frozen (response timeout {TIMEOUT:?}):");
    println!("  redis store, no back-off:   {down:>12.2?} per call");
    println!("  failover store, backed off: {backed_off:>12.2?} per call (fail closed)");
}
