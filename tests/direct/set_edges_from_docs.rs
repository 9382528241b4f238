//! Sets of limits at their documented edges, read from the public docs alone, on
//! virtual time (`ManualClock`): reservations on a set cancelled latest first and
//! abandoned async waits on a set give everything back, a set admits exactly what
//! its tightest member allows, and answers never for a cost any member can never
//! grant.

use super::edges_common::{FOREVER, SECOND};
use futures::task::noop_waker_ref;
use sluicegate::algorithms::{AllOf, FixedWindow, Limits, SlidingLog, SmoothBursty};
use sluicegate::clock::{Clock, ManualClock};
use sluicegate::{Error, KeyedRateLimiter, RateLimiter};
use std::future::Future;
use std::task::Context;
use std::time::Duration;

#[test]
fn reservations_on_a_set_cancelled_latest_first_give_everything_back() {
    // The set docs: "Cancelling it hands each member its receipt with the set's time
    // to act, so each gives back what Go's rule lets it, for any grant of the set,
    // not only its latest".
    let members = || {
        (
            SmoothBursty::new(1.0).unwrap(),
            SmoothBursty::new(4.0).unwrap(),
        )
    };
    let direct = RateLimiter::with_clock(AllOf::new(members()), ManualClock::new());
    let taken: Vec<_> = (0..3).map(|_| direct.reserve(1).unwrap()).collect();
    let delays: Vec<_> = taken.iter().map(|r| r.delay()).collect();
    assert_eq!(delays, [0, 1, 2].map(Duration::from_secs));
    for r in taken.into_iter().rev() {
        r.cancel();
    }
    assert_eq!(direct.reserve(1).unwrap().delay(), Duration::ZERO, "AllOf");
    let (a, b) = members();
    let dynamic = RateLimiter::with_clock(Limits::new().with(a).with(b), ManualClock::new());
    let taken: Vec<_> = (0..3).map(|_| dynamic.reserve(1).unwrap()).collect();
    for r in taken.into_iter().rev() {
        r.cancel();
    }
    assert_eq!(
        dynamic.reserve(1).unwrap().delay(),
        Duration::ZERO,
        "Limits"
    );
    // Keyed, on one key: the same rule, key by key.
    let keyed = KeyedRateLimiter::with_clock(AllOf::new(members()), ManualClock::new());
    let taken: Vec<_> = (0..3).map(|_| keyed.reserve(&"k", 1).unwrap()).collect();
    assert_eq!(taken[2].delay(), Duration::from_secs(2));
    for r in taken.into_iter().rev() {
        r.cancel().unwrap();
    }
    assert_eq!(
        keyed.reserve(&"k", 1).unwrap().delay(),
        Duration::ZERO,
        "keyed AllOf"
    );
}

#[test]
fn abandoned_async_waits_on_a_set_give_back_their_turns() {
    // The set docs: "waits abandoned together, cancelled latest first, give all
    // their permits back, as they do on one limit". One permit every 100 s (and
    // every 50 s): after a first request each wait sleeps far beyond this test,
    // on the real clock.
    let set = AllOf::new((
        SmoothBursty::new(0.01).unwrap(),
        SmoothBursty::new(0.02).unwrap(),
    ));
    let limiter = RateLimiter::new(set);
    limiter.acquire().unwrap();
    let handle = limiter.to_async();
    let mut waits: Vec<_> = (0..5).map(|_| Box::pin(handle.acquire())).collect();
    for wait in &mut waits {
        let polled = wait
            .as_mut()
            .poll(&mut Context::from_waker(noop_waker_ref()));
        assert!(polled.is_pending());
    }
    drop(waits);
    let next = limiter.reserve(1).unwrap().delay();
    assert!(
        next <= Duration::from_secs(100),
        "{next:?}: the turns stayed taken"
    );
}

#[test]
fn a_set_admits_exactly_what_its_tightest_member_allows() {
    let s = Duration::from_secs(1);
    let window = || FixedWindow::new(3, s).unwrap();
    let log = || SlidingLog::new(4, Duration::from_secs(10)).unwrap();
    // A set, named, with (the window's index, the log's index) in it.
    type Named = (&'static str, RateLimiter<Limits, ManualClock>, (u32, u32));
    let sets: Vec<Named> = vec![
        (
            "window, log",
            RateLimiter::with_clock(Limits::new().with(window()).with(log()), ManualClock::new()),
            (0, 1),
        ),
        (
            "log, window",
            RateLimiter::with_clock(Limits::new().with(log()).with(window()), ManualClock::new()),
            (1, 0),
        ),
    ];
    for (label, limiter, (w, l)) in sets {
        let clock = limiter.clock().clone();
        let hammer = |n: usize| (0..n).filter(|_| limiter.try_acquire()).count();
        // 0 s: the window (3) is tightest; the first grant names it.
        let first = limiter.check(1).unwrap();
        assert_eq!(
            (first.remaining(), first.limit(), first.limit_index()),
            (2, 3, w),
            "{label}"
        );
        assert_eq!(hammer(20), 2, "{label}");
        let refused = limiter.check(1).unwrap();
        assert_eq!(refused.limit_index(), w, "{label}");
        assert_eq!(refused.retry_after(), s, "{label}");
        // 1 s: the window has 3 again, the log 1 left.
        clock.advance(s);
        assert_eq!(hammer(20), 1, "{label}");
        let refused = limiter.check(1).unwrap();
        assert_eq!(refused.limit_index(), l, "{label}");
        assert_eq!(refused.retry_after(), Duration::from_secs(9), "{label}");
        // Refused calls are counted by none, however many.
        for _ in 0..5 {
            clock.advance(Duration::from_millis(1_700));
            assert_eq!(hammer(50), 0, "{label}");
        }
        // 10 s: the three entries of 0 s have left the log; the window is fresh.
        clock.advance(Duration::from_millis(10_000 - 1_000 - 5 * 1_700));
        assert_eq!(clock.now(), 10 * SECOND);
        assert_eq!(hammer(20), 3, "{label}");
        // Both are spent, both for a second: the first on a tie.
        let refused = limiter.check(1).unwrap();
        assert_eq!(refused.limit_index(), 0, "{label}");
        assert_eq!(refused.retry_after(), s, "{label}");
    }
    // AllOf decides as Limits does.
    let all = RateLimiter::with_clock(AllOf::new((window(), log())), ManualClock::new());
    let granted = (0..20).filter(|_| all.try_acquire()).count();
    assert_eq!(granted, 3);
}

#[test]
fn a_set_answers_never_for_a_cost_any_member_can_never_grant() {
    let s = Duration::from_secs(1);
    let limiter = RateLimiter::with_clock(
        AllOf::new((
            FixedWindow::new(3, s).unwrap(),
            SlidingLog::new(10, s).unwrap(),
        )),
        ManualClock::new(),
    );
    let never = limiter.check(5).unwrap();
    assert!(never.is_never(), "{never:?}");
    assert_eq!((never.limit_index(), never.limit()), (0, 3));
    assert_eq!(never.retry_after(), FOREVER);
    // check_each: the window says never, the log what it would have granted.
    let mut each = Vec::new();
    let decision = limiter.check_each(5, &mut |d| each.push(d)).unwrap();
    assert!(decision.is_never());
    assert_eq!(each.len(), 2);
    assert!(each[0].is_never(), "{:?}", each[0]);
    assert!(
        each[1].is_allowed() && each[1].remaining() == 5,
        "{:?}",
        each[1]
    );
    assert_eq!(limiter.acquire_n(5), Err(Error::Never { cost: 5 }));
    // Above both: the first limit that answered never.
    let both = limiter.check(11).unwrap();
    assert!(both.is_never() && both.limit_index() == 0, "{both:?}");
    // Nothing was taken from either member.
    assert!(limiter.try_acquire_n(3).unwrap());
    // The other order names the other index.
    let reversed = RateLimiter::with_clock(
        Limits::new()
            .with(SlidingLog::new(10, s).unwrap())
            .with(FixedWindow::new(3, s).unwrap()),
        ManualClock::new(),
    );
    assert_eq!(reversed.check(5).unwrap().limit_index(), 1);
    // An empty set limits nothing, at any cost.
    let empty = RateLimiter::with_clock(Limits::new(), ManualClock::new());
    for _ in 0..3 {
        assert_eq!(empty.acquire_n(u64::MAX), Ok(Duration::ZERO));
        let d = empty.check(u64::MAX).unwrap();
        assert!(d.is_allowed() && d.remaining() == u64::MAX && d.limit() == u64::MAX);
    }
}
