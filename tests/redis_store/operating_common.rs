//! What the tests of operating the Redis store share (and `outages_and_leases`):
//! the stores' timeout and the margin a loaded machine may add, a window of a year,
//! stores with those timeouts, a bound on a call's time, what a key has left on the
//! server, the server's `FCALL` count once it has taken in what reached it while
//! paused, a typed store error, a keyed limiter over a failover store recording
//! every degraded decision, and a set of two windows.
#![cfg(feature = "redis")]

use crate::support::redis as redis_support;
use redis_support::{calls, RedisServer, YEAR};
use sluicegate::algorithms::{AllOf, FixedWindow};
use sluicegate::clock::ManualClock;
use sluicegate::stores::failover::{Backoff, Event, FailoverStore, FailurePolicy};
use sluicegate::stores::redis::{RedisAlgorithm, RedisOptions, RedisStore};
use sluicegate::{Applied, DefaultClock, Error, KeyedRateLimiter, Source};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// The connect and response timeout of every store here.
pub(crate) const TIMEOUT: Duration = Duration::from_millis(200);
/// What a call may take beyond its timeout on a loaded two-core machine.
pub(crate) const MARGIN: Duration = Duration::from_millis(1500);

pub(crate) type Fw = FixedWindow;
pub(crate) type Redis<A = Fw> = RedisStore<String, A>;

/// A fixed window of `limit` per [`YEAR`].
pub(crate) fn year_window(limit: u64) -> Fw {
    FixedWindow::new(limit, YEAR).unwrap()
}

pub(crate) fn options(prefix: &str) -> RedisOptions {
    RedisOptions::default()
        .prefix(prefix)
        .unwrap()
        .connect_timeout(TIMEOUT)
        .response_timeout(TIMEOUT)
}

pub(crate) fn redis<A: RedisAlgorithm>(server: &RedisServer, prefix: &str) -> Redis<A> {
    RedisStore::open_with(server.url(), options(prefix)).unwrap()
}

/// Runs `f`, asserting it returned within the timeout plus the margin.
pub(crate) fn bounded<T>(what: &str, timeout: Duration, f: impl FnOnce() -> T) -> T {
    let start = Instant::now();
    let out = f();
    let took = start.elapsed();
    assert!(
        took <= timeout + MARGIN,
        "{what} took {took:?}, over the timeout {timeout:?} plus {MARGIN:?}"
    );
    out
}

/// What a plain store on `prefix` says is left of `key`. A peek changes nothing
/// and answers what a reserve of 1 would: the permits left after that one.
pub(crate) fn remaining_on_redis(server: &RedisServer, prefix: &str, limit: u64, key: &str) -> u64 {
    let plain: Redis = redis(server, prefix);
    let limiter = KeyedRateLimiter::with_store(year_window(limit), plain, DefaultClock::new());
    let d = limiter.peek(key, 1).unwrap();
    assert_eq!(d.source(), Source::Store);
    assert!(d.is_allowed(), "{key} is spent: {d:?}");
    d.remaining() + 1
}

/// The number of `FCALL`s the server ran, waiting first for it to take in what
/// reached it while it was paused.
pub(crate) fn fcalls_settled(admin: &mut redis::Connection) -> u64 {
    std::thread::sleep(Duration::from_millis(300));
    let _: String = redis::cmd("PING").query(admin).unwrap();
    calls(admin, "fcall")
}

/// Asserts that `err` is a store error saying `applied`, whose source is an
/// I/O error of kind `TimedOut` when `timed_out`.
pub(crate) fn assert_store_error(err: &Error, applied: Applied, timed_out: bool) {
    match err {
        Error::Store(e) => assert_eq!(e.applied(), applied, "{err}"),
        other => panic!("expected Error::Store, got {other:?}"),
    }
    if timed_out {
        let source = std::error::Error::source(err).expect("a store error has a source");
        let io = source
            .downcast_ref::<std::io::Error>()
            .unwrap_or_else(|| panic!("source is not an io::Error: {source}"));
        assert_eq!(io.kind(), std::io::ErrorKind::TimedOut, "{io}");
    }
}

type Seen = Arc<Mutex<Vec<(Source, Option<Error>)>>>;
pub(crate) type Failover<C = ManualClock> = FailoverStore<Redis, String, Fw, C>;

/// A limiter of 10 a year on Redis, failing over by `policy` with the default
/// back-off (1 s doubling) on `clock`, recording every degraded decision.
pub(crate) fn failover_limiter(
    server: &RedisServer,
    prefix: &str,
    policy: FailurePolicy<Fw>,
    clock: &ManualClock,
) -> (KeyedRateLimiter<String, Fw, Failover, ManualClock>, Seen) {
    let seen: Seen = Arc::default();
    let log = Arc::clone(&seen);
    let store = FailoverStore::new(redis(server, prefix), policy)
        .with_clock(clock.clone())
        .on_degraded(move |event: &Event<'_>| {
            log.lock()
                .unwrap()
                .push((event.source, event.error.cloned()));
        });
    assert_eq!(store.backoff(), Backoff::default());
    let limiter = KeyedRateLimiter::with_store(year_window(10), store, clock.clone());
    (limiter, seen)
}

pub(crate) type Pair = AllOf<(Fw, Fw)>;
