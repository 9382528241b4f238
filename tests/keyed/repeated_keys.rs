//! A key listed twice in a multi-key call is charged twice. Where its limit could
//! never grant the doubled charge at once, the call is never: every multi-key
//! front end answers so (a never decision, `Error::Never`, a never reservation)
//! instead of a denial whose retry would be refused again, and an acquire fails
//! at once instead of sleeping for ever. Where the doubled charge fits, a
//! denial's `retry_after` holds its rule.

use sluicegate::algorithms::{AllOf, FixedWindow, SlidingLog};
use sluicegate::clock::ManualClock;
use sluicegate::stores::Store;
use sluicegate::{Error, KeyedRateLimiter, Verdict};
use std::time::Duration;

fn secs(s: u64) -> Duration {
    Duration::from_secs(s)
}

/// Every multi-key call on `limiter`, whose limit holds 3 at once, with `a`
/// listed twice at 2 (4 permits) and three times at 1 (3 permits).
fn assert_repeats_are_never_when_they_cannot_fit<S>(
    limiter: KeyedRateLimiter<&'static str, FixedWindow, S, ManualClock>,
) where
    S: Store<&'static str, FixedWindow> + 'static,
{
    let twice = ["a", "a"];
    let check = limiter.check_all(&twice, 2).unwrap();
    assert_eq!(check.verdict(), Verdict::Never, "{check:?}");
    assert_eq!((check.limit(), check.remaining()), (3, 1));
    assert_eq!(
        limiter.peek_all(&twice, 2).unwrap().verdict(),
        Verdict::Never
    );
    assert!(matches!(
        limiter.acquire_all(&twice, 2),
        Err(Error::Never { cost: 2 })
    ));
    let reservation = limiter.reserve_all(&twice, 2).unwrap();
    assert!(!reservation.is_ok());
    assert_eq!(reservation.decision().verdict(), Verdict::Never);
    let handle = limiter.to_async();
    futures::executor::block_on(async {
        assert!(matches!(
            handle.acquire_all(&twice, 2).await,
            Err(Error::Never { cost: 2 })
        ));
        let reservation = handle.reserve_all(&twice, 2).await.unwrap();
        assert_eq!(reservation.decision().verdict(), Verdict::Never);
    });
    // Three times at 1 fits: granted, and nothing was charged before it.
    assert!(limiter.check_all(&["a", "a", "a"], 1).unwrap().is_allowed());
    assert!(!limiter.check(&"a", 1).unwrap().is_allowed());
}

#[test]
fn every_multi_key_call_is_never_when_a_repeated_key_cannot_fit_in_memory() {
    let window = FixedWindow::new(3, secs(1)).unwrap();
    assert_repeats_are_never_when_they_cannot_fit(KeyedRateLimiter::with_clock(
        window,
        ManualClock::new(),
    ));
}

#[cfg(feature = "redis")]
#[test]
fn every_multi_key_call_is_never_when_a_repeated_key_cannot_fit_on_redis() {
    use crate::support::redis::trace::caller_time_options;
    use crate::support::redis::{unique_prefix, RedisServer};
    use sluicegate::stores::redis::RedisStore;
    let server = RedisServer::start();
    let options = caller_time_options(&unique_prefix("repeated-keys"));
    let store = RedisStore::open_with(server.url(), options).unwrap();
    let window = FixedWindow::new(3, secs(1)).unwrap();
    assert_repeats_are_never_when_they_cannot_fit(KeyedRateLimiter::with_store(
        window,
        store,
        ManualClock::new(),
    ));
}

/// A doubled charge that fits is denied only while the key is short of it, and
/// granted at the denial's `retry_after`.
#[test]
fn a_repeated_key_that_fits_is_denied_until_its_retry_after() {
    let window = FixedWindow::new(4, secs(1)).unwrap();
    let limiter = KeyedRateLimiter::with_clock(window, ManualClock::new());
    assert!(limiter.check(&"a", 1).unwrap().is_allowed());
    let refused = limiter.check_all(&["a", "b", "a"], 2).unwrap();
    assert_eq!(refused.verdict(), Verdict::Denied);
    assert_eq!(refused.retry_after(), secs(1));
    limiter.clock().advance(refused.retry_after());
    assert!(limiter.check_all(&["a", "b", "a"], 2).unwrap().is_allowed());
}

/// The rule holds for any algorithm that can answer never, sets included: a log
/// of 3 takes `a` three times, not four.
#[test]
fn a_log_and_a_set_are_never_for_a_key_listed_past_their_limit() {
    let log = SlidingLog::new(3, secs(10)).unwrap();
    let set = AllOf::new((FixedWindow::new(10, secs(1)).unwrap(), log));
    let logged = KeyedRateLimiter::with_clock(log, ManualClock::new());
    let both = KeyedRateLimiter::with_clock(set, ManualClock::new());
    let four = ["a", "a", "a", "a"];
    assert_eq!(
        logged.check_all(&four, 1).unwrap().verdict(),
        Verdict::Never
    );
    let d = both.check_all(&four, 1).unwrap();
    assert_eq!((d.verdict(), d.limit_index()), (Verdict::Never, 1));
    assert!(logged.check_all(&four[..3], 1).unwrap().is_allowed());
    assert!(both.check_all(&four[..3], 1).unwrap().is_allowed());
}
