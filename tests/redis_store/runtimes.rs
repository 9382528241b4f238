//! Async calls on one server from several tokio runtimes, and from outside any:
//! each runtime that calls gets a connection of its own, so that a call never
//! waits on a runtime that is idle or gone. (The Cluster's twins are in
//! `cluster_from_docs`.)

use crate::support::redis::{current_thread_runtime, unique_prefix, RedisServer};
use sluicegate::algorithms::SlidingLog;
use sluicegate::stores::redis::{RedisOptions, RedisStore};
use sluicegate::{AsyncKeyedRateLimiter, DefaultClock, KeyedRateLimiter};
use std::time::Duration;

/// 100 a minute, on `server`, calls waiting at most 1 s.
fn limiter(
    server: &RedisServer,
    test: &str,
) -> AsyncKeyedRateLimiter<String, SlidingLog, RedisStore<String, SlidingLog>, DefaultClock> {
    let options = RedisOptions::default()
        .prefix(unique_prefix(test))
        .unwrap()
        .connect_timeout(Duration::from_secs(1))
        .response_timeout(Duration::from_secs(1));
    let store = RedisStore::open_with(server.url(), options).unwrap();
    let log = SlidingLog::new(100, Duration::from_secs(60)).unwrap();
    KeyedRateLimiter::with_store(log, store, DefaultClock::new()).to_async()
}

#[test]
fn a_call_in_a_second_runtime_is_answered_after_the_first_runtime_is_dropped() {
    let server = RedisServer::start();
    let handle = limiter(&server, "runtimes-dropped");
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

#[test]
fn a_call_outside_tokio_is_answered_while_the_runtime_that_called_first_is_idle() {
    let server = RedisServer::start();
    let handle = limiter(&server, "runtimes-idle");
    let key = "k".to_owned();
    let runtime = current_thread_runtime();
    assert_eq!(
        runtime.block_on(handle.check(&key, 1)).unwrap().remaining(),
        99
    );
    // Outside tokio the call runs on the store's own runtime, while the first
    // runtime runs nothing.
    let answered = futures::executor::block_on(handle.check(&key, 1));
    assert_eq!(answered.map(|d| d.remaining()), Ok(98));
    assert_eq!(
        runtime.block_on(handle.check(&key, 1)).unwrap().remaining(),
        97
    );
}
