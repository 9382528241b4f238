//! Paces, sets of limits and whole traces, read from the public docs alone: each
//! algorithm's `Pace` as its table gives it, what a set answers (the table in `algorithms::multi`: never beats denied, the longest
//! `retry_after`, the fewest `remaining`, first on a tie, the longest wait and
//! `reset_after`), how each member stands after a step (`check_each`), an empty
//! set; and, on a trace of every algorithm, that a refusal's `retry_after` is the
//! first instant that passes and a decision's `reset_after` the first instant at
//! which the limit reads replenished; and that a keyed limiter decides as a direct
//! one while its peeks create no key.

use sluicegate::algorithms::{
    Algorithm, AllOf, Counting, FixedWindow, LeakyBucket, Limits, Pace, Rounding, SlidingLog,
    SlidingWindowBuckets, SlidingWindowCounter, SmoothBursty, SmoothWarmingUp,
};
use sluicegate::clock::{Clock, ManualClock, Nanos};
use sluicegate::{CellAlgorithm, Decision, KeyedRateLimiter, RateLimiter, Verdict};
use std::time::Duration;

const S: Nanos = 1_000_000_000;
const MS: Nanos = 1_000_000;

fn secs(n: u64) -> Duration {
    Duration::from_secs(n)
}

/// A decision's fields a set's table names: verdict, limit index, limit,
/// remaining, retry_after and reset_after (ns).
fn row(d: &Decision) -> (Verdict, u32, u64, u64, Nanos, Nanos) {
    (
        d.verdict(),
        d.limit_index(),
        d.limit(),
        d.remaining(),
        d.retry_after_nanos(),
        d.reset_after_nanos(),
    )
}

fn to(clock: &ManualClock, t: Nanos) {
    let now = clock.now();
    assert!(t >= now, "the test moves time forward only ({now} -> {t})");
    clock.advance_nanos(t - now);
}

/// A pace's `(interval, refill)`, or `None` for no steady rate.
type Expected = Option<(Duration, Duration)>;

#[test]
fn every_algorithm_answers_the_pace_its_table_gives() {
    let pace = |p: Option<Pace>| p.map(|p| (p.interval(), p.refill()));
    let ns = Duration::from_nanos;
    let ms = Duration::from_millis;
    let third = ns(333_333_334); // 1/3 s, rounded up: never early
    let cases: [(&str, Option<Pace>, Expected); 16] = [
        (
            "bursty 5/s",
            SmoothBursty::new(5.0).unwrap().pace(),
            Some((ms(200), secs(1))),
        ),
        (
            "bursty 4/s, 3 s burst",
            SmoothBursty::new(4.0)
                .unwrap()
                .with_max_burst(secs(3))
                .unwrap()
                .pace(),
            Some((ms(250), secs(3))),
        ),
        // A zero burst's refill is shorter than the interval: raised to it.
        (
            "bursty, no burst",
            SmoothBursty::new(4.0)
                .unwrap()
                .with_max_burst(Duration::ZERO)
                .unwrap()
                .pace(),
            Some((ms(250), ms(250))),
        ),
        (
            "bursty 3/s",
            SmoothBursty::new(3.0).unwrap().pace(),
            Some((third, secs(1))),
        ),
        (
            "bursty +inf",
            SmoothBursty::new(f64::INFINITY).unwrap().pace(),
            None,
        ),
        (
            "warming 2/s over 4 s",
            SmoothWarmingUp::new(2.0, secs(4)).unwrap().pace(),
            Some((ms(500), secs(4))),
        ),
        (
            "warming, no warm-up",
            SmoothWarmingUp::new(2.0, Duration::ZERO).unwrap().pace(),
            Some((ms(500), ms(500))),
        ),
        (
            "meter 3 per 1/20 s",
            LeakyBucket::meter(3, 1, secs(20)).unwrap().pace(),
            Some((secs(20), secs(60))),
        ),
        (
            "fixed 3/s",
            FixedWindow::new(3, secs(1)).unwrap().pace(),
            Some((third, secs(1))),
        ),
        (
            "counter 100/min",
            SlidingWindowCounter::new(100, secs(60)).unwrap().pace(),
            Some((ms(600), secs(60))),
        ),
        (
            "buckets 240/h",
            SlidingWindowBuckets::weighted(240, secs(3600), secs(60))
                .unwrap()
                .pace(),
            Some((secs(15), secs(3600))),
        ),
        (
            "log 3/min, 30 s apart",
            SlidingLog::new(3, secs(60))
                .unwrap()
                .with_min_spacing(secs(30))
                .pace(),
            Some((secs(30), secs(60))),
        ),
        // A spacing longer than the window: the refill is raised to it.
        (
            "log 3/s, 2 s apart",
            SlidingLog::new(3, secs(1))
                .unwrap()
                .with_min_spacing(secs(2))
                .pace(),
            Some((secs(2), secs(2))),
        ),
        (
            "a set: the longest of each",
            AllOf::new((
                FixedWindow::new(10, secs(1)).unwrap(),
                FixedWindow::new(60, secs(60)).unwrap(),
            ))
            .pace(),
            Some((secs(1), secs(60))),
        ),
        (
            "a set with an unlimited member",
            AllOf::new((
                SmoothBursty::new(f64::INFINITY).unwrap(),
                FixedWindow::new(4, secs(2)).unwrap(),
            ))
            .pace(),
            Some((ms(500), secs(2))),
        ),
        ("an empty set", Limits::new().pace(), None),
    ];
    for (label, got, expected) in cases {
        assert_eq!(pace(got), expected, "{label}");
    }
    // A drain interval of 1/3 s, rounded up.
    let queue = LeakyBucket::queue(2, 3, secs(1)).unwrap().pace().unwrap();
    assert_eq!(queue.interval(), third);
    // Durations beyond u64 nanoseconds saturate; a spacing beyond them too.
    let forever = ns(u64::MAX);
    assert_eq!(
        pace(Some(Pace::new(Duration::MAX, Duration::ZERO))),
        Some((forever, forever))
    );
    assert_eq!(pace(Pace::per(1, Duration::MAX)), Some((forever, forever)));
    assert_eq!(pace(Pace::per(u64::MAX, ns(1))), Some((ns(1), ns(1))));
    let once = SlidingLog::new(3, secs(60))
        .unwrap()
        .with_min_spacing(Duration::MAX);
    assert_eq!(pace(once.pace()), Some((forever, forever)));
}

#[test]
fn a_set_answers_by_its_table_at_every_verdict() {
    use Verdict::*;
    let clock = ManualClock::new();
    let set = AllOf::new((
        FixedWindow::new(2, secs(1)).unwrap(),
        FixedWindow::new(10, secs(60)).unwrap(),
        SlidingLog::new(2, secs(10)).unwrap(),
    ));
    let limiter = RateLimiter::with_clock(set, clock.clone());
    let check = |cost| row(&limiter.check(cost).unwrap());
    // Allowed: the fewest remaining, the first on a tie (#0 and #2 both at 1);
    // reset_after the longest of all members (the minute).
    assert_eq!(check(1), (Allowed, 0, 2, 1, 0, 60 * S));
    assert_eq!(check(1), (Allowed, 0, 2, 0, 0, 60 * S));
    // Denied by #0 (1 s) and #2 (10 s): the longest retry_after.
    assert_eq!(check(1), (Denied, 2, 2, 0, 10 * S, 60 * S));
    // Never by #0 and #2: the first that answered never.
    assert_eq!(check(3), (Never, 0, 2, 0, u64::MAX, 60 * S));
    assert_eq!(check(u64::MAX), (Never, 0, 2, 0, u64::MAX, 60 * S));
    to(&clock, S);
    assert_eq!(check(1), (Denied, 2, 2, 0, 9 * S, 59 * S));
    // Never beats denied: #0 refuses 3 of its last 2, #1 can never grant 3.
    let set = AllOf::new((
        FixedWindow::new(10, secs(60)).unwrap(),
        FixedWindow::new(2, secs(1)).unwrap(),
    ));
    let clock = ManualClock::new();
    let limiter = RateLimiter::with_clock(set, clock.clone());
    for t in 0..4 {
        to(&clock, t * S);
        assert!(limiter.try_acquire_n(2).unwrap(), "{t} s");
    }
    let d = limiter.check(3).unwrap();
    assert_eq!(
        (d.verdict(), d.limit_index(), d.limit()),
        (Never, 1, 2),
        "{d:?}"
    );
    // The wait of a grant is the longest of the members' turns.
    let queues = AllOf::new((
        LeakyBucket::queue(3, 1, secs(1)).unwrap(),
        LeakyBucket::queue(2, 2, secs(1)).unwrap(),
    ));
    let limiter = RateLimiter::with_clock(queues, ManualClock::new());
    let delays: Vec<Duration> = (0..2)
        .map(|_| limiter.reserve(1).unwrap().delay())
        .collect();
    assert_eq!(delays, [Duration::ZERO, secs(1)]);
    // An empty set admits any cost, with u64::MAX limit and remaining.
    let limiter = RateLimiter::with_clock(Limits::new(), ManualClock::new());
    let all = limiter.check(u64::MAX).unwrap();
    assert_eq!(
        (all.verdict(), all.limit(), all.remaining()),
        (Allowed, u64::MAX, u64::MAX)
    );
    assert_eq!(limiter.acquire_n(u64::MAX).unwrap(), Duration::ZERO);
    assert!(limiter.try_acquire_n(u64::MAX).unwrap());
}

#[test]
fn check_each_reports_how_every_member_stands_at_exact_instants() {
    use Verdict::*;
    let limits = Limits::new()
        .with(FixedWindow::new(2, secs(1)).unwrap())
        .with(SlidingLog::new(3, secs(10)).unwrap())
        .with(LeakyBucket::meter(2, 1, secs(1)).unwrap());
    let clock = ManualClock::new();
    let limiter = RateLimiter::with_clock(limits, clock.clone());
    let step = |cost| {
        let mut each = Vec::new();
        let d = limiter
            .check_each(cost, &mut |d| each.push(row(&d)))
            .unwrap();
        (row(&d), each)
    };
    // Each member left short of whole reports when more than its remaining are
    // there: the window's end, the log's oldest entry leaving, the bucket draining.
    let (d, each) = step(1);
    assert_eq!(d, (Allowed, 0, 2, 1, 0, 10 * S));
    assert_eq!(
        each,
        [
            (Denied, 0, 2, 1, S, S),
            (Denied, 0, 3, 2, 10 * S, 10 * S),
            (Denied, 0, 2, 1, S, S)
        ]
    );
    to(&clock, 500 * MS);
    let (d, each) = step(1);
    assert_eq!(d, (Allowed, 0, 2, 0, 0, 10 * S));
    assert_eq!(
        each,
        [
            (Denied, 0, 2, 0, 500 * MS, 500 * MS),
            (Denied, 0, 3, 1, 9_500 * MS, 10 * S),
            (Denied, 0, 2, 0, 500 * MS, 1_500 * MS),
        ]
    );
    // Refused by the window and the bucket (0.5 s each: the first); the log
    // reports the grant it would have made.
    let (d, each) = step(1);
    assert_eq!((d.0, d.1, d.4), (Denied, 0, 500 * MS));
    assert_eq!((each[0].0, each[0].4), (Denied, 500 * MS));
    assert_eq!((each[1].0, each[1].3), (Allowed, 0));
    assert_eq!((each[2].0, each[2].4), (Denied, 500 * MS));
    // A cost above a member's capacity: that member reports never.
    let (d, each) = step(3);
    assert_eq!(d.0, Never);
    assert_eq!((each[0].0, each[2].0), (Never, Never));
}

/// Runs `calls` (`(now, cost)`, zero-wait) on `algorithm` from its initial state at
/// the first call, and checks each answer's two durations against the state it
/// left: a refusal fails 1 ns before `now + retry_after` and passes at it; the
/// limit reads replenished at `now + reset_after` and not 1 ns before.
fn durations_are_exact<A: Algorithm>(label: &str, algorithm: &A, calls: &[(Nanos, u64)])
where
    A::State: Clone,
{
    let mut state = algorithm.initial_state(calls[0].0);
    let mut refusals = 0;
    for &(now, cost) in calls {
        let d: Decision = algorithm.reserve(&mut state, now, cost, 0);
        let at = format!("{label}: cost {cost} at {now} ns: {d:?}");
        let reset = now.saturating_add(d.reset_after_nanos());
        assert!(
            algorithm.is_replenished(&state, reset),
            "not replenished at reset_after; {at}"
        );
        if d.reset_after_nanos() > 0 {
            assert!(
                !algorithm.is_replenished(&state, reset - 1),
                "replenished before reset_after; {at}"
            );
        }
        if d.verdict() == Verdict::Denied {
            refusals += 1;
            let retry = now + d.retry_after_nanos();
            let mut early = state.clone();
            assert!(
                !algorithm
                    .reserve::<Decision>(&mut early, retry - 1, cost, 0)
                    .is_allowed(),
                "passes 1 ns early; {at}"
            );
            let mut on_time = state.clone();
            let then: Decision = algorithm.reserve(&mut on_time, retry, cost, 0);
            assert!(then.is_allowed(), "refused at retry_after: {then:?}; {at}");
        }
    }
    assert!(
        refusals >= 3,
        "{label}: the trace refuses only {refusals} times"
    );
}

/// A trace that hammers, idles and comes back near window edges (20 s windows).
fn trace() -> Vec<(Nanos, u64)> {
    let mut calls = Vec::new();
    let instants = [
        0,
        1,
        2 * S,
        5 * S - 1,
        5 * S,
        7 * S,
        19 * S + 999,
        20 * S,
        21 * S,
        33 * S,
        40 * S,
        40 * S + 1,
        61 * S,
    ];
    for (i, &t) in instants.iter().enumerate() {
        let t = t + 3 * S;
        for k in 0..4 {
            calls.push((t, 1 + ((i + k) % 3) as u64));
        }
    }
    calls
}

#[test]
fn retry_after_and_reset_after_are_the_first_instants_on_a_trace_of_every_algorithm() {
    let calls = trace();
    let w = secs(20);
    durations_are_exact("fixed", &FixedWindow::new(4, w).unwrap(), &calls);
    durations_are_exact("counter", &SlidingWindowCounter::new(4, w).unwrap(), &calls);
    durations_are_exact(
        "counter, floor",
        &SlidingWindowCounter::new(4, w)
            .unwrap()
            .with_rounding(Rounding::Floor),
        &calls,
    );
    durations_are_exact(
        "counter, attempts",
        &SlidingWindowCounter::new(4, w)
            .unwrap()
            .with_counting(Counting::Attempts),
        &calls,
    );
    durations_are_exact(
        "buckets, dropped",
        &SlidingWindowBuckets::dropping(4, w, secs(5)).unwrap(),
        &calls,
    );
    durations_are_exact(
        "buckets, weighted",
        &SlidingWindowBuckets::weighted(4, w, secs(5)).unwrap(),
        &calls,
    );
    durations_are_exact(
        "buckets, weighted 7 s",
        &SlidingWindowBuckets::weighted(4, w, secs(7)).unwrap(),
        &calls,
    );
    durations_are_exact("log", &SlidingLog::new(4, w).unwrap(), &calls);
    durations_are_exact(
        "log, spaced",
        &SlidingLog::new(4, w).unwrap().with_min_spacing(secs(2)),
        &calls,
    );
    durations_are_exact(
        "log, recorded",
        &SlidingLog::new(4, w).unwrap().with_rejected_recorded(),
        &calls,
    );
    durations_are_exact(
        "log, recorded and spaced",
        &SlidingLog::new(4, w)
            .unwrap()
            .with_rejected_recorded()
            .with_min_spacing(secs(2)),
        &calls,
    );
    durations_are_exact("meter", &LeakyBucket::meter(4, 1, secs(5)).unwrap(), &calls);
    durations_are_exact(
        "meter, 1/3 s",
        &LeakyBucket::meter(3, 3, secs(1)).unwrap(),
        &calls,
    );
    durations_are_exact("queue", &LeakyBucket::queue(4, 1, secs(5)).unwrap(), &calls);
    durations_are_exact("bursty", &SmoothBursty::new(0.5).unwrap(), &calls);
    durations_are_exact(
        "warming up",
        &SmoothWarmingUp::new(0.5, secs(8)).unwrap(),
        &calls,
    );
    durations_are_exact(
        "a set",
        &AllOf::new((
            FixedWindow::new(4, w).unwrap(),
            SlidingLog::new(3, secs(10))
                .unwrap()
                .with_rejected_recorded(),
        )),
        &calls,
    );
}

#[test]
fn a_keyed_limiter_decides_as_a_direct_one_and_its_peeks_create_no_key() {
    fn same<A: CellAlgorithm + Clone>(label: &str, algorithm: A) {
        let clock = ManualClock::new();
        let direct = RateLimiter::with_clock(algorithm.clone(), clock.clone());
        let keyed = KeyedRateLimiter::with_clock(algorithm, clock.clone());
        for (t, cost) in trace() {
            to(&clock, t);
            let peeked = keyed.peek(&"k", cost).unwrap();
            assert_eq!(
                peeked,
                direct.peek(cost).unwrap(),
                "{label}: peek {cost} at {t}"
            );
            let (d, k) = (
                direct.check(cost).unwrap(),
                keyed.check(&"k", cost).unwrap(),
            );
            assert_eq!(d, k, "{label}: check {cost} at {t}");
        }
        let before = keyed.live_keys();
        assert!(keyed.peek(&"never-charged", 1).unwrap().is_allowed());
        assert_eq!(keyed.live_keys(), before, "{label}: a peek created a key");
    }
    let w = secs(20);
    same("fixed", FixedWindow::new(4, w).unwrap());
    same("counter", SlidingWindowCounter::new(4, w).unwrap());
    same(
        "buckets",
        SlidingWindowBuckets::weighted(4, w, secs(5)).unwrap(),
    );
    same(
        "log",
        SlidingLog::new(4, w).unwrap().with_min_spacing(secs(2)),
    );
    same("meter", LeakyBucket::meter(4, 1, secs(5)).unwrap());
    same(
        "a set",
        AllOf::new((
            FixedWindow::new(4, w).unwrap(),
            LeakyBucket::meter(3, 1, secs(2)).unwrap(),
        )),
    );
}
