//! Every call of the direct and async limiters, fed hostile input as their docs
//! describe it: cost 0 (`Error::ZeroCost`, nothing changes), costs above capacity
//! and `u64::MAX` (never: tries answer `false`, acquires fail at once with
//! `Error::Never`), timeouts of zero and `Duration::MAX`, a `ManualClock` at its
//! zero and at its last reading (`u64::MAX` ns, which "stands for for ever"), and
//! time that appears to go backwards under each algorithm ("grants nothing").

use sluicegate::algorithms::{
    Algorithm, FixedWindow, LeakyBucket, Limits, SlidingLog, SlidingWindowBuckets,
    SlidingWindowCounter, SmoothBursty, SmoothWarmingUp,
};
use sluicegate::clock::{Clock, ManualClock};
use sluicegate::{CellAlgorithm, Decision, Error, RateLimiter};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::mpsc;
use std::time::Duration;

const SECOND: Duration = Duration::from_secs(1);
const S: u64 = 1_000_000_000;

/// Runs `f` on a thread of its own; fails the test, naming `input`, if it panics
/// or has not answered within 10 s of real time (a wait on a manual clock takes
/// none).
fn answers<T: Send + 'static>(input: &str, f: impl FnOnce() -> T + Send + 'static) -> T {
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let out = catch_unwind(AssertUnwindSafe(f));
        let _ = tx.send(out);
    });
    match rx.recv_timeout(Duration::from_secs(10)) {
        Ok(Ok(value)) => value,
        Ok(Err(_)) => panic!("{input}: panicked"),
        Err(_) => panic!("{input}: no answer within 10 s (a wait that never ends)"),
    }
}

/// Each algorithm with a capacity of 3 (or its nearest notion), by name, as a
/// builder so each test gets fresh limiters.
/// An algorithm's name, its capacity and how to build its limiter on a clock.
type Case = (&'static str, u64, Box<dyn Fn(ManualClock) -> Dyn>);

fn algorithms() -> Vec<Case> {
    let minute = Duration::from_secs(60);
    vec![
        (
            "bursty 3/s",
            3,
            Box::new(|c| Dyn::new(SmoothBursty::new(3.0).unwrap(), c)),
        ),
        (
            "warming up 3/s",
            3,
            Box::new(|c| Dyn::new(SmoothWarmingUp::new(3.0, SECOND).unwrap(), c)),
        ),
        (
            "leaky meter 3 per 3/s",
            3,
            Box::new(|c| Dyn::new(LeakyBucket::meter(3, 3, SECOND).unwrap(), c)),
        ),
        (
            "leaky queue 3 per 3/s",
            3,
            Box::new(|c| Dyn::new(LeakyBucket::queue(3, 3, SECOND).unwrap(), c)),
        ),
        (
            "fixed window 3/min",
            3,
            Box::new(move |c| Dyn::new(FixedWindow::new(3, minute).unwrap(), c)),
        ),
        (
            "sliding counter 3/min",
            3,
            Box::new(move |c| Dyn::new(SlidingWindowCounter::new(3, minute).unwrap(), c)),
        ),
        (
            "buckets 3/min in 7 s",
            3,
            Box::new(move |c| {
                let w = SlidingWindowBuckets::weighted(3, minute, Duration::from_secs(7)).unwrap();
                Dyn::new(w, c)
            }),
        ),
        (
            "sliding log 3/min",
            3,
            Box::new(move |c| Dyn::new(SlidingLog::new(3, minute).unwrap(), c)),
        ),
        (
            "limits of a window",
            3,
            Box::new(move |c| {
                let set = Limits::new()
                    .with(FixedWindow::new(3, minute).unwrap())
                    .with(SlidingLog::new(5, minute).unwrap());
                Dyn::new(set, c)
            }),
        ),
    ]
}

type Step<T> = Box<dyn Fn(u64) -> Result<T, Error> + Send + Sync>;

/// A limiter of any algorithm behind closures, so one table drives every kind.
struct Dyn {
    check: Step<Decision>,
    peek: Step<Decision>,
    try_n: Step<bool>,
    try_timeout: Box<dyn Fn(u64, Duration) -> Result<bool, Error> + Send + Sync>,
    acquire: Step<Duration>,
    reserve_ok: Step<bool>,
    async_acquire: Step<Duration>,
    async_try: Box<dyn Fn(u64, Duration) -> Result<bool, Error> + Send + Sync>,
    clock: ManualClock,
}

impl Dyn {
    fn new<A: CellAlgorithm + Send + Sync + 'static>(a: A, clock: ManualClock) -> Dyn {
        let l = RateLimiter::with_clock(a, clock.clone());
        let (l1, l2, l3, l4, l5, l6) = (
            l.clone(),
            l.clone(),
            l.clone(),
            l.clone(),
            l.clone(),
            l.clone(),
        );
        let a1 = l.to_async();
        let a2 = l.to_async();
        Dyn {
            check: Box::new(move |n| l1.check(n)),
            peek: Box::new(move |n| l2.peek(n)),
            try_n: Box::new(move |n| l3.try_acquire_n(n)),
            try_timeout: Box::new(move |n, t| l4.try_acquire_n_timeout(n, t)),
            acquire: Box::new(move |n| l5.acquire_n(n)),
            reserve_ok: Box::new(move |n| l6.reserve(n).map(|r| r.is_ok())),
            async_acquire: Box::new(move |n| futures::executor::block_on(a1.acquire_n(n))),
            async_try: Box::new(move |n, t| {
                futures::executor::block_on(a2.try_acquire_n_timeout(n, t))
            }),
            clock,
        }
    }
}

#[test]
fn a_cost_of_zero_is_zero_cost_on_every_call_and_changes_nothing() {
    for (name, _, build) in algorithms() {
        let l = build(ManualClock::new());
        let before = (l.peek)(1).unwrap();
        let zero: Vec<(&str, Result<(), Error>)> = vec![
            ("check", (l.check)(0).map(drop)),
            ("peek", (l.peek)(0).map(drop)),
            ("try_acquire_n", (l.try_n)(0).map(drop)),
            (
                "try_acquire_n_timeout 0",
                (l.try_timeout)(0, Duration::ZERO).map(drop),
            ),
            (
                "try_acquire_n_timeout MAX",
                (l.try_timeout)(0, Duration::MAX).map(drop),
            ),
            ("acquire_n", (l.acquire)(0).map(drop)),
            ("reserve", (l.reserve_ok)(0).map(drop)),
            ("async acquire_n", (l.async_acquire)(0).map(drop)),
            (
                "async try_acquire_n_timeout",
                (l.async_try)(0, Duration::MAX).map(drop),
            ),
        ];
        for (call, result) in zero {
            let err = result.expect_err(&format!("{name}: {call}(0) accepted"));
            assert_eq!(err, Error::ZeroCost, "{name}: {call}(0)");
            assert_eq!(err.to_string(), "requested permits must be positive, got 0");
        }
        assert_eq!(
            (l.peek)(1).unwrap(),
            before,
            "{name}: a cost of 0 changed the limit"
        );
        assert!(
            l.clock.sleeps().is_empty(),
            "{name}: a cost of 0 slept {:?}",
            l.clock.sleeps()
        );
    }
}

#[test]
fn costs_a_window_can_never_hold_are_never_and_fail_at_once() {
    // The windows, the log, the leaky bucket and sets of them: "A cost above the
    // capacity is answered Verdict::Never"; tries answer false, acquires
    // Error::Never "at once instead of hanging".
    for (name, capacity, build) in algorithms() {
        if name.starts_with("bursty") || name.starts_with("warming") {
            continue; // pay later: any cost goes once
        }
        for cost in [capacity + 1, 1 << 53, u64::MAX] {
            let l = build(ManualClock::new());
            let input = format!("{name}, cost {cost}");
            let d = (l.check)(cost).unwrap();
            assert!(d.is_never(), "{input}: check {d:?}");
            assert_eq!(
                d.retry_after_nanos(),
                u64::MAX,
                "{input}: never's retry_after"
            );
            assert!((l.peek)(cost).unwrap().is_never(), "{input}: peek");
            assert!(!(l.try_n)(cost).unwrap(), "{input}: try_acquire_n");
            for timeout in [Duration::ZERO, SECOND, Duration::MAX] {
                assert!(
                    !(l.try_timeout)(cost, timeout).unwrap(),
                    "{input}: timed try {timeout:?}"
                );
                assert!(
                    !(l.async_try)(cost, timeout).unwrap(),
                    "{input}: async timed try"
                );
            }
            assert!(!(l.reserve_ok)(cost).unwrap(), "{input}: reserve");
            let l = std::sync::Arc::new(l);
            let (a, b) = (l.clone(), l.clone());
            let blocking = answers(&input, move || (a.acquire)(cost));
            assert_eq!(blocking, Err(Error::Never { cost }), "{input}: acquire_n");
            let non_blocking = answers(&input, move || (b.async_acquire)(cost));
            assert_eq!(
                non_blocking,
                Err(Error::Never { cost }),
                "{input}: async acquire_n"
            );
            assert!(
                l.clock.sleeps().iter().all(|s| s.is_zero()),
                "{input}: slept {:?}",
                l.clock.sleeps()
            );
            // Nothing was taken: the whole capacity is still there.
            assert!(
                (l.try_n)(capacity).unwrap(),
                "{input}: the capacity was touched"
            );
        }
    }
}

#[test]
fn a_pay_later_limit_takes_u64_max_once_and_a_cancel_gives_back_at_most_a_burst() {
    // Guava's pay later: "on an idle limiter acquire(1000) returns at once and the
    // following call waits"; a cancel "until its time to act, that instant
    // included" gives back the grant's charge (never more than a full burst).
    let limiter = RateLimiter::bursty_with_clock(2.0, ManualClock::new()).unwrap();
    let r = answers("bursty", {
        let limiter = limiter.clone();
        move || limiter.reserve(u64::MAX).map(|r| (r.is_ok(), r.delay(), r))
    });
    let (ok, delay, reservation) = r.unwrap();
    assert!(
        ok && delay.is_zero(),
        "bursty: u64::MAX reserved with delay {delay:?}"
    );
    let after = limiter.check(1).unwrap();
    assert!(
        !after.is_allowed(),
        "bursty: the next call pays for u64::MAX: {after:?}"
    );
    // The cancel gives back "never more than a full burst": the debt stays.
    answers("cancel of u64::MAX", move || reservation.cancel());
    assert!(
        !limiter.try_acquire(),
        "bursty: a cancel gave back more than a burst"
    );
    let small = limiter.clone();
    let _ = answers("check after the cancel", move || small.check(1).unwrap());
    let warm = RateLimiter::warming_up_with_clock(2.0, SECOND, ManualClock::new()).unwrap();
    let first = answers("warming up", {
        let warm = warm.clone();
        move || warm.acquire_n(u64::MAX)
    });
    assert_eq!(
        first,
        Ok(Duration::ZERO),
        "warming up: the first call goes at once"
    );
    let next = answers("warming up, after u64::MAX", {
        let warm = warm.clone();
        move || warm.acquire()
    });
    assert!(
        matches!(next, Err(Error::Never { cost: 1 }))
            || matches!(next, Ok(d) if d > Duration::from_secs(1 << 40)),
        "warming up: after u64::MAX the next call waits for ever or fails: {next:?}"
    );
}

#[test]
fn timeouts_of_zero_and_duration_max_on_an_exhausted_limit() {
    for (name, _, build) in algorithms() {
        let l = build(ManualClock::new());
        while (l.try_n)(1).unwrap() {}
        let _ = l.clock.take_sleeps();
        let input = format!("{name}, exhausted");
        // Zero: "answers false at once, without waiting".
        assert!(
            !(l.try_timeout)(1, Duration::ZERO).unwrap(),
            "{input}: zero timeout"
        );
        assert!(
            !(l.async_try)(1, Duration::ZERO).unwrap(),
            "{input}: async zero timeout"
        );
        assert!(
            l.clock.sleeps().is_empty(),
            "{input}: a refused timed try slept"
        );
        assert_eq!(l.clock.now(), 0, "{input}");
        // Duration::MAX: "no limit (it saturates)": granted once the limit allows.
        let l = std::sync::Arc::new(l);
        let l2 = l.clone();
        let got = answers(&input, move || (l2.try_timeout)(1, Duration::MAX));
        assert_eq!(got, Ok(true), "{input}: timeout Duration::MAX");
        assert!(l.clock.now() > 0, "{input}: granted without waiting");
        // "retry_after is exact ... at most two windows away" (the counter).
        assert!(
            l.clock.now() <= 120 * S,
            "{input}: waited {} ns",
            l.clock.now()
        );
    }
}

#[test]
fn at_the_clocks_last_reading_a_limit_grants_its_capacity_and_then_never() {
    // ManualClock: "Time saturates at u64::MAX"; the last reading "stands for 'for
    // ever'" (SlidingLog::with_min_spacing). There no later instant comes, so an
    // exhausted limit can never grant again: acquires fail at once with
    // Error::Never rather than sleeping (a sleep there moves nothing) and retrying.
    // Every algorithm is run, and every wrong answer listed.
    let mut wrong = Vec::new();
    for (name, capacity, build) in algorithms() {
        let clock = ManualClock::new();
        let l = std::sync::Arc::new(build(clock.clone()));
        clock.advance(Duration::MAX);
        assert_eq!(clock.now(), u64::MAX);
        let mut granted = 0;
        for _ in 0..10 {
            granted += u64::from((l.try_n)(1).unwrap());
        }
        // Pay later lets one call past the stored permits. The clock module's
        // horizons: a warming-up limiter grants nothing from 2^63 - 1 ns on, and a
        // leaky bucket nothing whose drain would end past its last tick.
        let beyond_horizon = name.starts_with("warming up") || name.starts_with("leaky");
        let (least, bound) = if beyond_horizon {
            (0, 0)
        } else {
            (1, capacity + 1)
        };
        if granted < least || granted > bound {
            wrong.push(format!(
                "{name}: {granted} of 10 tries granted, expected {least}..={bound}"
            ));
        }
        let d = (l.check)(1).unwrap();
        if d.is_allowed() {
            wrong.push(format!("{name}: check after exhaustion allowed: {d:?}"));
        }
        let input = format!("{name} at u64::MAX ns");
        let l2 = l.clone();
        let acquired = answers(&input, move || (l2.acquire)(1));
        if acquired != Err(Error::Never { cost: 1 }) {
            wrong.push(format!("{input}: acquire answered {acquired:?}, not Never"));
        }
        let l3 = l.clone();
        let timed = answers(&input, move || (l3.try_timeout)(1, Duration::MAX));
        if timed != Ok(false) {
            wrong.push(format!(
                "{input}: try_acquire_n_timeout(1, MAX) answered {timed:?}"
            ));
        }
        let l4 = l.clone();
        let async_acquired = answers(&input, move || (l4.async_acquire)(1));
        if async_acquired != Err(Error::Never { cost: 1 }) {
            wrong.push(format!(
                "{input}: async acquire answered {async_acquired:?}, not Never"
            ));
        }
    }
    assert!(
        wrong.is_empty(),
        "at the clock's last reading:\n{}",
        wrong.join("\n")
    );
}

/// Drives `a` at `at` until it refuses, then at each of `earlier`: nothing more may
/// be granted ("time that appears to go backwards grants nothing"). A limit that
/// granted nothing at `at` has nothing to be exceeded (what a limit answers at the
/// last readings is the test above's).
fn backwards<A: Algorithm>(name: &str, a: &A, at: u64, earlier: &[u64], wrong: &mut Vec<String>) {
    let mut state = a.initial_state(0);
    let mut granted = 0;
    while a.reserve::<Decision>(&mut state, at, 1, 0).is_allowed() {
        granted += 1;
        assert!(granted < 1000, "{name}: grants without end at {at}");
    }
    if granted == 0 {
        return;
    }
    for &now in earlier {
        let d = catch_unwind(AssertUnwindSafe(|| {
            a.reserve::<Decision>(&mut state, now, 1, 0)
        }));
        let d = d.unwrap_or_else(|_| panic!("{name}: panicked at {now} after {at}"));
        if d.is_allowed() {
            wrong.push(format!(
                "{name}: granted at {now} ns after exhausting at {at} ns: {d:?}"
            ));
            return;
        }
        for cost in [2, u64::MAX] {
            let big = catch_unwind(AssertUnwindSafe(|| {
                a.reserve::<Decision>(&mut state, now, cost, u64::MAX)
            }));
            let big = big.unwrap_or_else(|_| panic!("{name}: cost {cost} panicked at {now}"));
            if big.is_allowed() && big.wait_nanos() == 0 {
                wrong.push(format!(
                    "{name}: cost {cost} at {now} ns granted at once: {big:?}"
                ));
                return;
            }
        }
    }
}

#[test]
fn time_that_goes_backwards_grants_nothing_under_any_algorithm() {
    let minute = Duration::from_secs(60);
    let mut wrong = Vec::new();
    for at in [100 * S, 1 << 62, u64::MAX - 1, u64::MAX] {
        let earlier = [0, 1, at / 2, at - 1];
        let w = &mut wrong;
        backwards("bursty", &SmoothBursty::new(3.0).unwrap(), at, &earlier, w);
        backwards(
            "warming up",
            &SmoothWarmingUp::new(3.0, SECOND).unwrap(),
            at,
            &earlier,
            w,
        );
        backwards(
            "meter",
            &LeakyBucket::meter(3, 3, SECOND).unwrap(),
            at,
            &earlier,
            w,
        );
        backwards(
            "queue",
            &LeakyBucket::queue(3, 3, SECOND).unwrap(),
            at,
            &earlier,
            w,
        );
        backwards(
            "fixed",
            &FixedWindow::new(3, minute).unwrap(),
            at,
            &earlier,
            w,
        );
        backwards(
            "counter",
            &SlidingWindowCounter::new(3, minute).unwrap(),
            at,
            &earlier,
            w,
        );
        let buckets = SlidingWindowBuckets::dropping(3, minute, Duration::from_secs(7)).unwrap();
        backwards("buckets", &buckets, at, &earlier, w);
        backwards("log", &SlidingLog::new(3, minute).unwrap(), at, &earlier, w);
        let spaced = SlidingLog::new(3, minute).unwrap().with_min_spacing(SECOND);
        backwards("spaced log", &spaced, at, &earlier, w);
    }
    assert!(
        wrong.is_empty(),
        "time going backwards granted:\n{}",
        wrong.join("\n")
    );
}

#[test]
fn a_limiter_made_at_the_last_reading_answers_never_and_takes_any_rate() {
    // The clock module: a bursty limiter whose state starts at 2^63 - 1 ns or
    // later answers every call never; `set_rate` at the edges is as `new`.
    let clock = ManualClock::new();
    clock.advance_nanos(u64::MAX);
    let limiter = RateLimiter::bursty_with_clock(1.0, clock.clone()).unwrap();
    let first = answers("made at u64::MAX", {
        let limiter = limiter.clone();
        move || limiter.check(1).unwrap()
    });
    assert!(first.is_never(), "made at the last reading: {first:?}");
    for bad in [0.0, -1.0, f64::NAN, f64::NEG_INFINITY] {
        let err = limiter.set_rate(bad).unwrap_err();
        assert!(err.to_string().contains("rate"), "set_rate({bad}): {err}");
    }
    for good in [f64::MIN_POSITIVE, f64::MAX, f64::INFINITY, 1.0] {
        limiter
            .set_rate(good)
            .unwrap_or_else(|e| panic!("set_rate({good}): {e}"));
        let l = limiter.clone();
        let _ = answers(&format!("check after set_rate({good})"), move || {
            l.check(1).unwrap()
        });
    }
}

#[test]
fn guavas_limiters_reach_2_63_nanoseconds_as_the_clock_module_says() {
    // The clock module: Guava's limiters keep signed nanoseconds, so from 2^63 - 1
    // ns on a warming-up limiter, and a bursty one whose state starts there,
    // answer every call never; below it, and for a bursty limiter made earlier,
    // the first call goes.
    let horizon = (1u64 << 63) - 1;
    let mut wrong = Vec::new();
    for at in [horizon - 1, horizon, 1 << 63, u64::MAX - 1] {
        for made_then in [false, true] {
            let clock = ManualClock::new();
            if made_then {
                clock.advance_nanos(at);
            }
            let bursty = RateLimiter::bursty_with_clock(3.0, clock.clone()).unwrap();
            let warm = RateLimiter::warming_up_with_clock(3.0, SECOND, clock.clone()).unwrap();
            if !made_then {
                clock.advance_nanos(at);
            }
            let made = if made_then { "made there" } else { "made at 0" };
            let beyond = at >= horizon;
            for (name, d, never) in [
                ("bursty", bursty.check(1), beyond && made_then),
                ("warming up", warm.check(1), beyond),
            ] {
                let d = d.unwrap();
                if (never && !d.is_never()) || (!never && !d.is_allowed()) {
                    wrong.push(format!("{name} {made}, first call at {at} ns: {d:?}"));
                }
            }
        }
    }
    assert!(wrong.is_empty(), "at 2^63 ns:\n{}", wrong.join("\n"));
}
