//! What the tests ask of a store on the harness's servers and check in its answers: a
//! key prefix of their own, a store that cannot be reached, a reserve that does not
//! wait (and a keyed `try_acquire`'s question), a window of a minute, a year for
//! fixed windows on the server's clock that must not turn, how many times
//! the server ran a command, a runtime for a store's async side, and a typed store
//! error that applied nothing.

use super::process::free_port;
use sluicegate::algorithms::Decision;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

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

/// A year (365 days), the length of fixed windows on the server's clock that must
/// keep their count for a whole test. There a fixed window is aligned to the Unix
/// epoch and turns, counting afresh from zero, at every multiple of its length: a
/// minute-long one at every minute, a day-long one at every midnight (UTC), whenever
/// a test runs across it. A year-long one turns once a year, which a test of seconds
/// all but never runs across.
pub const YEAR: Duration = Duration::from_secs(365 * 24 * 3600);

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
