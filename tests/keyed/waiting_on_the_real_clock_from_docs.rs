//! Waiting on the real clock, in memory, as the docs describe it: eight threads
//! blocking, and sixteen tasks awaiting (some of them blocking calls on the
//! runtime's blocking pool), on one limit over a bounded run, are admitted no more
//! than its rate allows; and after an idle, eight threads get no more than the
//! saved burst (bursty) or the cold rate (warming up). Counts only: each bound is
//! what the algorithm admits over the span, and the lower bounds only show that
//! the waiters made progress.

use crate::support::waiting::{eight_threads_until_the_end, hammer, sixteen_tasks_until_the_end};

use sluicegate::algorithms::SmoothBursty;
use sluicegate::{KeyedRateLimiter, RateLimiter};
use std::thread;
use std::time::{Duration, Instant};

const RATE: f64 = 50.0;
const RUN: Duration = Duration::from_millis(400);
/// What a loaded machine may add to a run by starting its waiters late.
const STALLS: Duration = Duration::from_secs(5);

/// `RATE` a second with no saved burst.
fn unbursting() -> SmoothBursty {
    SmoothBursty::new(RATE)
        .unwrap()
        .with_max_burst(Duration::ZERO)
        .unwrap()
}

/// What an unbursting limit created at `started` or later admits by `RUN` after
/// it: one at once, then one per interval (pay later).
fn bound() -> usize {
    1 + (RATE * RUN.as_secs_f64()).floor() as usize
}

/// No more admitted by the run's end than the rate allows, and the waiters made
/// progress: the loops, which go on until a few calls have returned, stopped
/// well within a loaded machine's delays of the run's end.
#[track_caller]
fn assert_within_the_rate((admitted, took): (usize, Duration), what: &str) {
    assert!(
        admitted <= bound(),
        "{what}: {admitted} admitted in {RUN:?} at {RATE}/s, bound {}",
        bound()
    );
    assert!(
        took < RUN + STALLS,
        "{what}: the loops stopped after {took:?}"
    );
}

#[test]
fn eight_threads_blocking_on_the_real_clock_are_admitted_no_more_than_the_rate_allows() {
    let started = Instant::now();
    let direct = RateLimiter::new(unbursting());
    let admitted = eight_threads_until_the_end(started, RUN, &|| {
        direct.acquire().unwrap();
    });
    assert_within_the_rate(admitted, "direct acquire");

    let started = Instant::now();
    let keyed = KeyedRateLimiter::new(unbursting());
    let admitted = eight_threads_until_the_end(started, RUN, &|| {
        keyed.acquire(&"k").unwrap();
    });
    assert_within_the_rate(admitted, "keyed acquire");

    let started = Instant::now();
    let keyed = KeyedRateLimiter::new(unbursting());
    let admitted = eight_threads_until_the_end(started, RUN, &|| {
        keyed.acquire_all(&["ip", "user"], 1).unwrap();
    });
    assert_within_the_rate(admitted, "acquire_all");
}

#[test]
fn sixteen_tasks_awaiting_and_blocking_on_the_real_clock_are_admitted_no_more_than_the_rate_allows()
{
    // "blocking and async callers can mix on one limit" (AsyncRateLimiter), and
    // on the same keys (AsyncKeyedRateLimiter): one rate for all of them.
    let started = Instant::now();
    let direct = RateLimiter::new(unbursting());
    let handle = direct.to_async();
    let admitted = sixteen_tasks_until_the_end(
        started,
        RUN,
        move || {
            let wait = handle.acquire();
            async move {
                wait.await.unwrap();
            }
        },
        move || {
            direct.acquire().unwrap();
        },
    );
    assert_within_the_rate(admitted, "direct, async and blocking");

    let started = Instant::now();
    let keyed = KeyedRateLimiter::new(unbursting());
    let handle = keyed.to_async();
    let admitted = sixteen_tasks_until_the_end(
        started,
        RUN,
        move || {
            let wait = handle.acquire(&"k");
            async move {
                wait.await.unwrap();
            }
        },
        move || {
            keyed.acquire(&"k").unwrap();
        },
    );
    assert_within_the_rate(admitted, "keyed, async and blocking");

    let started = Instant::now();
    let keyed = KeyedRateLimiter::new(unbursting());
    let handle = keyed.to_async();
    let admitted = sixteen_tasks_until_the_end(
        started,
        RUN,
        move || {
            let wait = handle.acquire_all(&["ip", "user"], 1);
            async move {
                wait.await.unwrap();
            }
        },
        move || {
            keyed.acquire_all(&["ip", "user"], 1).unwrap();
        },
    );
    assert_within_the_rate(admitted, "key lists, async and blocking");
}

#[test]
fn after_an_idle_on_the_real_clock_eight_threads_get_the_saved_burst_and_no_more() {
    // 40 a second saving at most 0.5 s: after 0.7 s idle, 20 saved permits and
    // one more at once (pay later), then 40 a second. A warming-up limit idle past
    // its warm-up is cold: one at once, then the cold interval (150 ms at 20 a
    // second, 1 s warm-up, cold factor 3) for the next.
    let burst = SmoothBursty::new(40.0)
        .unwrap()
        .with_max_burst(Duration::from_millis(500))
        .unwrap();
    let direct = RateLimiter::new(burst);
    let keyed = KeyedRateLimiter::new(burst);
    let warming = RateLimiter::warming_up(20.0, Duration::from_secs(1)).unwrap();
    thread::sleep(Duration::from_millis(1200));

    for (what, attempt) in [
        (
            "direct",
            &(|| direct.try_acquire()) as &(dyn Fn() -> bool + Sync),
        ),
        ("keyed", &|| keyed.try_acquire(&"k")),
    ] {
        let (granted, took) = hammer(Duration::from_millis(100), attempt);
        let most = 21 + (40.0 * took.as_secs_f64()).ceil() as usize;
        assert!(
            (21..=most).contains(&granted),
            "{what}: {granted} granted in {took:?} after the idle, at most {most}"
        );
    }

    let (granted, took) = hammer(Duration::from_millis(100), &|| warming.try_acquire());
    let most = 1 + (took.as_secs_f64() / 0.140).floor() as usize;
    assert!(
        (1..=most).contains(&granted),
        "warming up: {granted} granted in {took:?} from cold, at most {most}"
    );
}
