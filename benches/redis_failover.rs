//! A call while Redis is down, with and without the failover store's back-off,
//! against a `redis-server` this bench starts itself (on a free port, no
//! persistence) and freezes (SIGSTOP): the plain Redis store waits its response
//! timeout on every call; a backed-off failover store answers by its policy with
//! no round trip.
//!
//! `cargo bench --bench redis_failover --features redis`

use sluicegate::algorithms::{Decision, FixedWindow, Receipt};
use sluicegate::stores::failover::{Backoff, FailoverStore, FailurePolicy};
use sluicegate::stores::redis::{RedisOptions, RedisStore};
use sluicegate::stores::{Operation, Store};
use std::time::{Duration, Instant};

mod redis_server;

use redis_server::Server;

const TIMEOUT: Duration = Duration::from_millis(50);
/// Calls timed on the frozen plain store (each takes the timeout).
const PLAIN_CALLS: u32 = 10;
/// Calls timed on the backed-off failover store.
const BACKED_OFF_CALLS: u32 = 1_000_000;

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
    let server = Server::start("redis-failover-bench", &[]);
    let window = FixedWindow::new(100, Duration::from_secs(60)).unwrap();
    let key = "k".to_owned();
    let step = Operation::Reserve {
        cost: 1,
        max_wait: 0,
    };
    let plain = redis_store(&server);
    let failover = FailoverStore::new(redis_store(&server), FailurePolicy::Closed)
        .with_backoff(Backoff::fixed(Duration::from_secs(3600)));
    // Both connected and the step library loaded before the freeze.
    plain
        .apply_key::<(Decision, Receipt)>(&window, &key, 0, step)
        .expect("Redis answers");
    failover
        .apply_key::<(Decision, Receipt)>(&window, &key, 0, step)
        .expect("Redis answers");
    server.signal("-STOP");
    let down = mean(PLAIN_CALLS, || {
        assert!(plain
            .apply_key::<(Decision, Receipt)>(&window, &key, 0, step)
            .is_err());
    });
    // The first call meets the frozen server and starts the back-off.
    failover
        .apply_key::<(Decision, Receipt)>(&window, &key, 0, step)
        .expect("the policy answers");
    assert!(failover.is_degraded());
    let backed_off = mean(BACKED_OFF_CALLS, || {
        let (decision, _) = failover
            .apply_key::<(Decision, Receipt)>(&window, &key, 0, step)
            .unwrap();
        std::hint::black_box(decision);
    });
    println!("a call while Redis is frozen (response timeout {TIMEOUT:?}):");
    println!("  redis store, no back-off:   {down:>12.2?} per call");
    println!("  failover store, backed off: {backed_off:>12.2?} per call (fail closed)");
}
