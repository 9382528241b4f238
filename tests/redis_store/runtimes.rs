//! Async calls on one server from several tokio runtimes, and from outside any:
//! each runtime that calls gets a connection of its own, so that a call never
//! waits on a runtime that is idle or gone. The scenarios are shared with the
//! Cluster's tests (`cluster_from_docs`).

use crate::support::redis::{current_thread_runtime, unique_prefix, RedisServer};
use sluicegate::algorithms::SlidingLog;
use sluicegate::stores::redis::{RedisOptions, RedisStore};
use sluicegate::{AsyncKeyedRateLimiter, DefaultClock, KeyedRateLimiter};
use std::time::Duration;

/// 100 a minute, on `server`, calls waiting at most 1 s.
fn limiter(server: &RedisServer, test: &str) -> Handle {
    let options = RedisOptions::default()
        .prefix(unique_prefix(test))
        .unwrap()
        .connect_timeout(Duration::from_secs(1))
        .response_timeout(Duration::from_secs(1));
    let store = RedisStore::open_with(server.url(), options).unwrap();
    let log = SlidingLog::new(100, Duration::from_secs(60)).unwrap();
    KeyedRateLimiter::with_store(log, store, DefaultClock::new()).to_async()
}

/// The async limiter over a store at 100 a minute, fresh.
pub type Handle =
    AsyncKeyedRateLimiter<String, SlidingLog, RedisStore<String, SlidingLog>, DefaultClock>;

/// A call from a second runtime, after the runtime of the first call is dropped,
/// is answered and counted.
pub fn second_runtime_after_the_first_is_dropped(handle: &Handle) {
    let key = "k".to_owned();
    {
        let first = current_thread_runtime();
        assert_eq!(
            first.block_on(handle.check(&key, 1)).unwrap().remaining(),
            99
        );
    }
    let second = current_thread_runtime();
    let answered = second.block_on(handle.check(&key, 1));
    assert_eq!(answered.map(|d| d.remaining()), Ok(98));
}

/// A call outside tokio (on the store's own runtime), while the runtime of the
/// first call runs nothing, is answered and counted.
pub fn outside_tokio_while_the_first_runtime_is_idle(handle: &Handle) {
    let key = "k".to_owned();
    let runtime = current_thread_runtime();
    assert_eq!(
        runtime.block_on(handle.check(&key, 1)).unwrap().remaining(),
        99
    );
    let answered = futures::executor::block_on(handle.check(&key, 1));
    assert_eq!(answered.map(|d| d.remaining()), Ok(98));
    assert_eq!(
        runtime.block_on(handle.check(&key, 1)).unwrap().remaining(),
        97
    );
}

#[test]
fn a_call_in_a_second_runtime_is_answered_after_the_first_runtime_is_dropped() {
    let server = RedisServer::start();
    second_runtime_after_the_first_is_dropped(&limiter(&server, "runtimes-dropped"));
}

#[test]
fn a_call_outside_tokio_is_answered_while_the_runtime_that_called_first_is_idle() {
    let server = RedisServer::start();
    outside_tokio_while_the_first_runtime_is_idle(&limiter(&server, "runtimes-idle"));
}
