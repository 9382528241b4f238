//! Every algorithm's `Decision` at the exact instants its docs name, read from the
//! public docs alone: a window's last nanosecond and its end, a log entry's expiry
//! at `t + window`, the minimum spacing, recorded refusals, the counter's two
//! roundings and its counted attempts, dropped and weighted buckets, the driftless
//! leaky bucket's instants, the queue's turns, Guava's `limit` and `reset_after`,
//! and a spacing at the ends of what it and the clock can count. Sets, paces and
//! whole traces are in `algorithm_edges_from_docs_sets`.
//!
//! All on virtual time (`ManualClock`) or on the caller's time (`Algorithm::reserve`).

use sluicegate::algorithms::{
    Algorithm, AllOf, Counting, FixedWindow, LeakyBucket, Rounding, SlidingLog,
    SlidingWindowBuckets, SlidingWindowCounter, SmoothBursty, SmoothWarmingUp,
};
use sluicegate::clock::{Clock, ManualClock, Nanos};
use sluicegate::{CellAlgorithm, Decision, Error, RateLimiter, Verdict};
use std::time::Duration;

const S: Nanos = 1_000_000_000;
const MS: Nanos = 1_000_000;

fn secs(n: u64) -> Duration {
    Duration::from_secs(n)
}

/// The fields a decision answers, as one comparable value.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Fields {
    verdict: Verdict,
    limit: u64,
    remaining: u64,
    wait: Nanos,
    retry_after: Nanos,
    reset_after: Nanos,
}

fn fields(d: Decision) -> Fields {
    Fields {
        verdict: d.verdict(),
        limit: d.limit(),
        remaining: d.remaining(),
        wait: d.wait_nanos(),
        retry_after: d.retry_after_nanos(),
        reset_after: d.reset_after_nanos(),
    }
}

fn allowed(limit: u64, remaining: u64, reset_after: Nanos) -> Fields {
    Fields {
        verdict: Verdict::Allowed,
        limit,
        remaining,
        wait: 0,
        retry_after: 0,
        reset_after,
    }
}

fn denied(limit: u64, remaining: u64, retry_after: Nanos, reset_after: Nanos) -> Fields {
    Fields {
        verdict: Verdict::Denied,
        limit,
        remaining,
        wait: 0,
        retry_after,
        reset_after,
    }
}

fn never(limit: u64, remaining: u64, reset_after: Nanos) -> Fields {
    Fields {
        verdict: Verdict::Never,
        limit,
        remaining,
        wait: 0,
        retry_after: u64::MAX,
        reset_after,
    }
}

/// Moves `clock` forward to the reading `t`.
fn to(clock: &ManualClock, t: Nanos) {
    let now = clock.now();
    assert!(t >= now, "the test moves time forward only ({now} -> {t})");
    clock.advance_nanos(t - now);
}

/// A direct limiter of `algorithm` on a fresh virtual clock, and the clock.
fn direct<A: CellAlgorithm>(algorithm: A) -> (RateLimiter<A, ManualClock>, ManualClock) {
    let clock = ManualClock::new();
    (RateLimiter::with_clock(algorithm, clock.clone()), clock)
}

fn check<A: CellAlgorithm>(limiter: &RateLimiter<A, ManualClock>, cost: u64) -> Fields {
    fields(limiter.check(cost).unwrap())
}

#[test]
fn a_fixed_window_answers_exact_fields_up_to_its_last_nanosecond() {
    // FixedWindow's example: 3 per 60 s, calls 5 s into the window.
    let (limiter, clock) = direct(FixedWindow::new(3, secs(60)).unwrap());
    to(&clock, 5 * S);
    assert_eq!(check(&limiter, 1), allowed(3, 2, 55 * S));
    assert_eq!(check(&limiter, 2), allowed(3, 0, 55 * S));
    assert_eq!(check(&limiter, 1), denied(3, 0, 55 * S, 55 * S));
    // Above the limit: never, nothing taken, the window's fields kept.
    assert_eq!(check(&limiter, 4), never(3, 0, 55 * S));
    assert_eq!(check(&limiter, u64::MAX), never(3, 0, 55 * S));
    // The window's last nanosecond still refuses, 1 ns from its end.
    to(&clock, 60 * S - 1);
    assert_eq!(check(&limiter, 1), denied(3, 0, 1, 1));
    // At its end the next window starts from zero: all 3 at once.
    to(&clock, 60 * S);
    assert_eq!(fields(limiter.peek(3).unwrap()), allowed(3, 0, 60 * S));
    assert_eq!(check(&limiter, 3), allowed(3, 0, 60 * S));
    assert_eq!(
        fields(limiter.peek(1).unwrap()),
        denied(3, 0, 60 * S, 60 * S)
    );
    // A window of 2 ns, the smallest that fits a limit of 1 beside its index.
    let (tiny, clock) = direct(FixedWindow::new(1, Duration::from_nanos(2)).unwrap());
    assert_eq!(check(&tiny, 1), allowed(1, 0, 2));
    assert_eq!(check(&tiny, 1), denied(1, 0, 2, 2));
    to(&clock, 1);
    assert_eq!(check(&tiny, 1), denied(1, 0, 1, 1));
    to(&clock, 2);
    assert_eq!(check(&tiny, 1), allowed(1, 0, 2));
}

#[test]
fn the_counter_refuses_until_the_first_instant_its_estimate_admits_in_both_roundings() {
    let exact = SlidingWindowCounter::new(3, secs(60)).unwrap();
    let (limiter, clock) = direct(exact);
    assert_eq!(check(&limiter, 3), allowed(3, 0, 120 * S));
    // 3 × (1 − f) ≤ 2 first holds at f = 1/3 of the next window: 80 s.
    assert_eq!(check(&limiter, 1), denied(3, 0, 80 * S, 120 * S));
    to(&clock, 60 * S);
    assert_eq!(check(&limiter, 1), denied(3, 0, 20 * S, 60 * S));
    to(&clock, 80 * S - 1);
    assert_eq!(check(&limiter, 1), denied(3, 0, 1, 40 * S + 1));
    to(&clock, 80 * S);
    assert_eq!(check(&limiter, 1).verdict, Verdict::Allowed);
    // Rounded down, the weighted 3 reads 2 one nanosecond into the next window.
    let (floor, clock) = direct(exact.with_rounding(Rounding::Floor));
    assert!(floor.try_acquire_n(3).unwrap());
    assert_eq!(check(&floor, 1).retry_after, 60 * S + 1);
    to(&clock, 60 * S);
    assert_eq!(check(&floor, 1).retry_after, 1);
    to(&clock, 60 * S + 1);
    assert_eq!(check(&floor, 1).verdict, Verdict::Allowed);
    // "at most two windows away": the whole limit again only once the previous
    // window weighs nothing.
    let (late, clock) = direct(SlidingWindowCounter::new(2, secs(60)).unwrap());
    to(&clock, 59 * S);
    assert!(late.try_acquire_n(2).unwrap());
    assert_eq!(check(&late, 1).retry_after, 31 * S); // 2 × (1 − f) ≤ 1 at 90 s
    assert_eq!(check(&late, 2).retry_after, 61 * S); // at 120 s
}

#[test]
fn counted_attempts_extend_the_ban_but_not_inside_a_set_and_never_is_not_counted() {
    let counter = SlidingWindowCounter::new(2, secs(60))
        .unwrap()
        .with_counting(Counting::Attempts);
    let mut state = counter.initial_state(0);
    assert!(counter
        .reserve::<Decision>(&mut state, 0, 2, 0)
        .is_allowed());
    let refused: Decision = counter.reserve(&mut state, 0, 1, 0);
    assert_eq!(counter.counts(&state, 0), (0, 3), "the refusal counts");
    // With 3 counted, 3 × (1 − f) + 1 ≤ 2 first holds at f = 2/3: 100 s.
    assert_eq!(fields(refused), denied(2, 0, 100 * S, 120 * S));
    // A cost above the limit is never, and not counted.
    assert_eq!(
        counter.reserve::<Decision>(&mut state, 0, 3, 0).verdict(),
        Verdict::Never
    );
    assert_eq!(counter.counts(&state, 0), (0, 3));
    // A further refusal that recorded nothing would find the same 3 counted.
    let unrecorded = counter.peek_unrecorded(&state, 0, 1).unwrap();
    assert_eq!(unrecorded.retry_after_nanos(), 100 * S);
    // Inside a set a refusal records nothing: the member answers as admitted
    // counting does.
    let set = AllOf::new((counter, FixedWindow::new(100, secs(3600)).unwrap()));
    let (limiter, clock) = direct(set);
    assert!(limiter.try_acquire_n(2).unwrap());
    for _ in 0..5 {
        let refused = limiter.check(1).unwrap();
        assert_eq!(
            (refused.limit_index(), refused.retry_after_nanos()),
            (0, 90 * S)
        );
    }
    to(&clock, 90 * S);
    assert!(limiter.try_acquire());
}

#[test]
fn a_log_entry_counts_until_t_plus_window_and_spacing_runs_to_the_nanosecond() {
    let (limiter, clock) = direct(SlidingLog::new(1, secs(10)).unwrap());
    assert_eq!(check(&limiter, 1), allowed(1, 0, 10 * S));
    to(&clock, 10 * S - 1);
    assert_eq!(check(&limiter, 1), denied(1, 0, 1, 1));
    to(&clock, 10 * S);
    assert_eq!(check(&limiter, 1), allowed(1, 0, 10 * S));
    // Minimum spacing: refused until exactly 500 ms after the previous entry.
    let spaced = SlidingLog::new(100, secs(60))
        .unwrap()
        .with_min_spacing(Duration::from_millis(500));
    let (limiter, clock) = direct(spaced);
    assert_eq!(check(&limiter, 1), allowed(100, 99, 60 * S));
    to(&clock, 500 * MS - 1);
    assert_eq!(check(&limiter, 1).retry_after, 1);
    to(&clock, 500 * MS);
    assert_eq!(check(&limiter, 1), allowed(100, 98, 60 * S));
}

#[test]
fn recorded_refusals_count_and_space_from_the_attempt_but_never_inside_a_set() {
    // SlidingLog::with_rejected_recorded's example, with its instants' fields.
    let (limiter, clock) = direct(
        SlidingLog::new(1, secs(10))
            .unwrap()
            .with_rejected_recorded(),
    );
    assert!(limiter.try_acquire());
    to(&clock, 9 * S);
    // Recorded at 9 s: the attempt counts until 19 s.
    assert_eq!(check(&limiter, 1), denied(1, 0, 10 * S, 10 * S));
    to(&clock, 19 * S - 1);
    assert!(!limiter.peek(1).unwrap().is_allowed());
    to(&clock, 19 * S); // the peek recorded nothing
    assert!(limiter.try_acquire());
    // The spacing runs from the last attempt, granted or not.
    let log = SlidingLog::new(10, secs(60))
        .unwrap()
        .with_rejected_recorded()
        .with_min_spacing(secs(1));
    let (limiter, clock) = direct(log);
    assert!(limiter.try_acquire());
    to(&clock, 500 * MS);
    assert_eq!(check(&limiter, 1).retry_after, S); // from the attempt at 0.5 s
    to(&clock, 1_500 * MS - 1);
    assert!(!limiter.peek(1).unwrap().is_allowed());
    to(&clock, 1_500 * MS);
    assert!(limiter.try_acquire());
    // In a set nothing is recorded: the spacing runs from the grant.
    let (limiter, clock) = direct(AllOf::new((
        log,
        FixedWindow::new(100, secs(3600)).unwrap(),
    )));
    assert!(limiter.try_acquire());
    to(&clock, 500 * MS);
    let refused = limiter.check(1).unwrap();
    assert_eq!(
        (refused.limit_index(), refused.retry_after_nanos()),
        (0, 500 * MS)
    );
    to(&clock, S);
    assert!(limiter.try_acquire());
}

#[test]
fn a_spacing_of_duration_max_grants_one_call_ever_and_acquire_fails_at_once() {
    // "a spacing beyond 584 years saturates (one call, ever)"; a limit "exhausted
    // forever" answers `Verdict::Never`, and acquires then "fail at once with
    // `Error::Never`"; a timeout of `Duration::MAX` "means no limit".
    let once = || {
        SlidingLog::new(100, secs(1))
            .unwrap()
            .with_min_spacing(Duration::MAX)
    };
    let mut broken = Vec::new();
    let (limiter, _) = direct(once());
    assert!(limiter.try_acquire());
    let after = limiter.check(1).unwrap();
    if after.verdict() != Verdict::Never {
        broken.push(format!("after the one call, check answers {after:?}"));
    }
    let (limiter, clock) = direct(once());
    assert!(limiter.try_acquire());
    if limiter.try_acquire_n_timeout(1, Duration::MAX).unwrap() {
        broken.push(format!(
            "a timed try of Duration::MAX granted a second call at {} ns",
            clock.now()
        ));
    }
    let (limiter, clock) = direct(once());
    assert!(limiter.try_acquire());
    let acquired = limiter.acquire();
    if !matches!(acquired, Err(Error::Never { .. })) {
        broken.push(format!(
            "acquire answered {acquired:?} after sleeping {:?}",
            clock.sleeps()
        ));
    }
    assert!(broken.is_empty(), "{broken:#?}");
}

#[test]
fn the_minimum_spacing_holds_at_the_clocks_last_reading() {
    // "a call is also refused while less than `min_spacing` has passed since the
    // previous entry", at any reading of the clock, its last (`u64::MAX`) included.
    for at in [i64::MAX as u64, u64::MAX - 1, u64::MAX] {
        let (limiter, clock) = direct(
            SlidingLog::new(100, secs(60))
                .unwrap()
                .with_min_spacing(secs(1)),
        );
        to(&clock, at);
        assert!(limiter.try_acquire(), "{at}");
        let second = limiter.check(1).unwrap();
        assert!(
            !second.is_allowed(),
            "a second call at the same instant {at} ns: {second:?}"
        );
    }
}

#[test]
fn dropped_and_weighted_buckets_admit_at_the_exact_instants_of_their_model() {
    // SlidingWindowBuckets's example: 3 per 60 s in 15 s buckets.
    let dropping = SlidingWindowBuckets::dropping(3, secs(60), secs(15)).unwrap();
    let (limiter, clock) = direct(dropping);
    for t in [5, 15, 20] {
        to(&clock, t * S);
        assert!(limiter.try_acquire(), "{t} s");
    }
    to(&clock, 21 * S);
    // The 0-15 s bucket leaves at 60 s; the 15-30 s one at 75 s.
    assert_eq!(check(&limiter, 1), denied(3, 0, 39 * S, 54 * S));
    to(&clock, 60 * S - 1);
    assert_eq!(check(&limiter, 1).retry_after, 1);
    to(&clock, 60 * S);
    assert_eq!(check(&limiter, 1), allowed(3, 0, 60 * S));
    // 100 per minute in 30 s buckets, the oldest weighted.
    let weighted = SlidingWindowBuckets::weighted(100, secs(60), secs(30)).unwrap();
    let (limiter, clock) = direct(weighted);
    assert_eq!(check(&limiter, 100), allowed(100, 0, 90 * S));
    // At 60 s + x the 0-30 s bucket weighs (30 s − x) / 30 s: 100 × that ≤ 99 from
    // x = 0.3 s.
    to(&clock, 60 * S);
    assert_eq!(check(&limiter, 1).retry_after, 300 * MS);
    to(&clock, 60_300 * MS - 1);
    assert_eq!(check(&limiter, 1).retry_after, 1);
    to(&clock, 60_300 * MS);
    assert_eq!(check(&limiter, 1).verdict, Verdict::Allowed);
    to(&clock, 90 * S);
    assert_eq!(check(&limiter, 99), allowed(100, 0, 90 * S));
}

#[test]
fn the_meter_grants_at_exact_instants_without_drift() {
    // LeakyBucket's example: a bucket of 3 draining 1 per 20 s.
    let (limiter, clock) = direct(LeakyBucket::meter(3, 1, secs(20)).unwrap());
    assert_eq!(check(&limiter, 1), allowed(3, 2, 20 * S));
    assert_eq!(check(&limiter, 1), allowed(3, 1, 40 * S));
    assert_eq!(check(&limiter, 1), allowed(3, 0, 60 * S));
    assert_eq!(check(&limiter, 1), denied(3, 0, 20 * S, 60 * S));
    assert_eq!(check(&limiter, 4), never(3, 0, 60 * S));
    to(&clock, 20 * S - 1);
    assert_eq!(check(&limiter, 1), denied(3, 0, 1, 40 * S + 1));
    to(&clock, 20 * S);
    assert_eq!(check(&limiter, 1), allowed(3, 0, 60 * S));
    // 3 per second: the k-th permit after the first is due at ⌈k × 10⁹ / 3⌉ ns,
    // and each refusal's retry_after lands on it, for 3 000 permits.
    let (limiter, clock) = direct(LeakyBucket::meter(1, 3, secs(1)).unwrap());
    assert!(limiter.try_acquire());
    for k in 1..=3_000u64 {
        let due = (k * S).div_ceil(3);
        let refused = limiter.check(1).unwrap();
        assert_eq!(clock.now() + refused.retry_after_nanos(), due, "permit {k}");
        to(&clock, due);
        assert!(limiter.try_acquire(), "permit {k} at {due} ns");
    }
    assert_eq!(clock.now(), 1_000 * S);
}

#[test]
fn the_queue_hands_out_turns_and_refuses_by_the_deadline_rule() {
    // LeakyBucket::queue's example: 3 turns, 1 s apart.
    let (limiter, clock) = direct(LeakyBucket::queue(3, 1, secs(1)).unwrap());
    let delays: Vec<Duration> = (0..3)
        .map(|_| limiter.reserve(1).unwrap().delay())
        .collect();
    assert_eq!(delays, [Duration::ZERO, secs(1), secs(2)]);
    // A caller who does not wait gets in once the queue is idle: at 3 s.
    assert_eq!(check(&limiter, 1), denied(3, 0, 3 * S, 3 * S));
    // One willing to wait for ever gets a turn once the queue has room: at 1 s.
    let full = limiter.reserve(1).unwrap();
    assert!(!full.is_ok());
    assert_eq!(full.decision().retry_after_nanos(), S);
    drop(full);
    // A deadline of 1.5 s: a turn taken at s ≥ 1 s acts at 3 s, past it, so the
    // answer is the non-waiting caller's 3 s, beyond the 1.5 s.
    let queue = LeakyBucket::queue(3, 1, secs(1)).unwrap();
    let mut state = queue.initial_state(0);
    for _ in 0..3 {
        assert!(queue
            .reserve::<Decision>(&mut state, 0, 1, u64::MAX)
            .is_allowed());
    }
    let refused: Decision = queue.reserve(&mut state, 0, 1, 1_500 * MS);
    assert_eq!(refused.retry_after_nanos(), 3 * S);
    assert!(!limiter
        .try_acquire_n_timeout(1, Duration::from_millis(1_500))
        .unwrap());
    assert_eq!(clock.now(), 0, "a refusal does not wait");
    // A blocking acquire waits 1 s for room, then 2 s for its turn.
    assert_eq!(limiter.acquire().unwrap(), secs(3));
    assert_eq!(clock.now(), 3 * S);
    // A whole queue at once acts at once; a cost above the queue is never.
    let (limiter, _) = direct(LeakyBucket::queue(3, 1, secs(1)).unwrap());
    assert_eq!(check(&limiter, 4), never(3, 3, 0));
    let all = limiter.check(3).unwrap();
    assert_eq!(
        (all.verdict(), all.wait_nanos(), all.remaining()),
        (Verdict::Allowed, 0, 0)
    );
}

#[test]
fn guava_limits_report_a_full_burst_at_least_one_and_reset_when_full_again() {
    let bursty = |rate: f64| SmoothBursty::new(rate).unwrap();
    let limits = [
        ("bursty 5/s", Some(bursty(5.0)), None, 5),
        (
            "bursty 10/s, 2 s",
            Some(bursty(10.0).with_max_burst(secs(2)).unwrap()),
            None,
            20,
        ),
        ("bursty 2.5/s", Some(bursty(2.5)), None, 2),
        ("bursty 0.5/s", Some(bursty(0.5)), None, 1),
        (
            "bursty, no burst",
            Some(bursty(5.0).with_max_burst(Duration::ZERO).unwrap()),
            None,
            1,
        ),
        ("bursty +inf", Some(bursty(f64::INFINITY)), None, u64::MAX),
        (
            "warming 2/s, 4 s",
            None,
            Some(SmoothWarmingUp::new(2.0, secs(4)).unwrap()),
            8,
        ),
        (
            "warming 5/s, 4 s, cold 10",
            None,
            Some(
                SmoothWarmingUp::new(5.0, secs(4))
                    .unwrap()
                    .with_cold_factor(10.0)
                    .unwrap(),
            ),
            13,
        ),
        (
            "warming, no warm-up",
            None,
            Some(SmoothWarmingUp::new(2.0, Duration::ZERO).unwrap()),
            1,
        ),
    ];
    for (label, b, w, limit) in limits {
        let got = match (b, w) {
            (Some(b), _) => direct(b).0.check(1).unwrap(),
            (_, Some(w)) => direct(w).0.check(1).unwrap(),
            _ => unreachable!(),
        };
        assert_eq!(got.limit(), limit, "{label}: {got:?}");
    }
    // 5 per second from empty: T moves to 0.2 s, full again a burst (1 s) later.
    let (limiter, clock) = direct(bursty(5.0));
    assert_eq!(check(&limiter, 1), allowed(5, 0, 1_200 * MS));
    assert_eq!(check(&limiter, 1), denied(5, 0, 200 * MS, 1_200 * MS));
    to(&clock, 1_200 * MS);
    assert_eq!(check(&limiter, 5), allowed(5, 0, S));
    assert_eq!(check(&limiter, 1), allowed(5, 0, 1_200 * MS)); // pay later
    assert_eq!(check(&limiter, 1), denied(5, 0, 200 * MS, 1_200 * MS));
    // A zero warm-up keeps limiting after idle time: every permit pays 0.5 s.
    let (flat, clock) = direct(SmoothWarmingUp::new(2.0, Duration::ZERO).unwrap());
    to(&clock, 10 * S);
    assert_eq!(flat.acquire().unwrap(), Duration::ZERO);
    assert_eq!(flat.acquire().unwrap(), Duration::from_millis(500));
    to(&clock, 20 * S);
    assert_eq!(flat.acquire().unwrap(), Duration::ZERO);
    assert_eq!(flat.acquire().unwrap(), Duration::from_millis(500));
}

#[test]
fn a_bursty_limiter_made_late_in_time_still_starts_with_no_stored_permits() {
    // "Starts with no stored permits, as Guava does", and a direct limiter's
    // "state starts at the clock's current reading": made at 10 s, it paces as one
    // made at 0.
    let clock = ManualClock::new();
    clock.advance(secs(10));
    let limiter = RateLimiter::bursty_with_clock(5.0, clock.clone()).unwrap();
    for _ in 0..3 {
        limiter.acquire().unwrap();
    }
    assert_eq!(clock.take_sleeps_secs(), vec![0.0, 0.2, 0.2]);
    let limiter = RateLimiter::warming_up_with_clock(2.0, secs(4), clock.clone()).unwrap();
    for _ in 0..3 {
        limiter.acquire().unwrap();
    }
    assert_eq!(clock.take_sleeps_secs(), vec![0.0, 1.38, 1.13]);
}
