//! Regression tests for three defects once known:
//!
//! 1. A timed try that could not succeed slept first: a denial's `retry_after` was
//!    measured against a `max_wait` that stays the same, while a waiting caller's
//!    budget shrinks as it sleeps, so it slept towards a retry that could never fit.
//!    Now `retry_after` is measured against the caller's deadline (the rule of
//!    `Decision::retry_after`), and the waiting loop gives up at once when it does
//!    not fit in what is left.
//! 2. Cancelling at the very instant of acting gave nothing back for the leaky
//!    bucket and for sets; now they follow Go's rule (`now <= acts_at` restores), as
//!    Guava's limiters did, sets for every member.
//! 3. A leaky bucket whose full capacity its state could not hold was accepted, then
//!    refused its own capacity; now that is a typed error at construction.

use futures::executor::block_on;
use proptest::prelude::*;
use sluicegate::algorithms::{
    smooth_bursty::BurstyState, Algorithm, AllOf, FixedWindow, LeakyBucket, Limits, SlidingLog,
    SlidingWindowBuckets, SlidingWindowCounter, SmoothBursty, SmoothWarmingUp,
};
use sluicegate::algorithms::{Decision, Receipt};
use sluicegate::clock::{Clock, ManualClock, Nanos};
use sluicegate::stores::MemoryStore;
use sluicegate::CellAlgorithm;
use sluicegate::{KeyedRateLimiter, RateLimiter};
use std::time::Duration;

const SEC: Nanos = 1_000_000_000;

fn secs(n: u64) -> Duration {
    Duration::from_secs(n)
}

fn queue(capacity: u64) -> LeakyBucket {
    LeakyBucket::queue(capacity, 1, secs(1)).unwrap()
}

fn meter(capacity: u64) -> LeakyBucket {
    LeakyBucket::meter(capacity, capacity, secs(1)).unwrap()
}

fn bursty(rate: f64) -> SmoothBursty {
    SmoothBursty::new(rate).unwrap()
}

fn direct<A: CellAlgorithm>(algorithm: A) -> (RateLimiter<A, ManualClock>, ManualClock) {
    let clock = ManualClock::new();
    (RateLimiter::with_clock(algorithm, clock.clone()), clock)
}

type Keyed<A> = KeyedRateLimiter<u32, A, MemoryStore<u32, A>, ManualClock>;

fn keyed<A: Algorithm>(algorithm: A) -> (Keyed<A>, ManualClock) {
    let clock = ManualClock::new();
    (
        KeyedRateLimiter::with_clock(algorithm, clock.clone()),
        clock,
    )
}

// ---- 1. A timed try that cannot succeed answers at once ----------------------------

/// The case: queue(4, 1 s) with turns at 0, 1 s and 2 s; the next turn is at
/// 3 s, past a 2 s timeout, so the try answers false without sleeping and takes
/// nothing.
#[test]
fn direct_timed_try_on_a_queue_whose_turn_is_too_far_answers_at_once() {
    let (limiter, clock) = direct(queue(4));
    let waits: Vec<_> = (0..3)
        .map(|_| limiter.reserve(1).unwrap().delay())
        .collect();
    assert_eq!(waits, [secs(0), secs(1), secs(2)]);
    assert!(!limiter.try_acquire_n_timeout(1, secs(2)).unwrap());
    assert!(clock.take_sleeps().is_empty());
    assert_eq!(clock.now(), 0);
    assert_eq!(limiter.reserve(1).unwrap().delay(), secs(3)); // nothing was taken
}

/// Guava's limiters already measured a refusal against the deadline (their
/// `retry_after` is the whole wait): they answer at once too.
#[test]
fn guava_limiters_answer_a_timed_try_that_cannot_succeed_at_once() {
    let (limiter, clock) = direct(bursty(1.0));
    limiter.reserve(3).unwrap(); // pay later: the next caller waits 3 s
    assert!(!limiter.try_acquire_n_timeout(1, secs(2)).unwrap());
    let warming = SmoothWarmingUp::new(1.0, secs(2)).unwrap();
    let (warm, warm_clock) = direct(warming);
    warm.reserve(3).unwrap();
    assert!(!warm.try_acquire_n_timeout(1, secs(2)).unwrap());
    assert!(clock.take_sleeps().is_empty() && warm_clock.take_sleeps().is_empty());
    assert!(limiter.try_acquire_n_timeout(1, secs(3)).unwrap());
    assert_eq!(clock.take_sleeps(), [secs(3)]);
}

#[test]
fn async_timed_try_on_a_queue_whose_turn_is_too_far_answers_at_once() {
    let (limiter, clock) = direct(queue(4));
    for _ in 0..3 {
        limiter.reserve(1).unwrap();
    }
    let handle = limiter.to_async();
    assert!(!block_on(handle.try_acquire_n_timeout(1, secs(2))).unwrap());
    assert!(clock.take_sleeps().is_empty());
    assert_eq!(clock.now(), 0);
}

#[test]
fn keyed_timed_try_on_a_queue_whose_turn_is_too_far_answers_at_once() {
    let (limiter, clock) = keyed(queue(4));
    assert_eq!(limiter.acquire_n(&7, 3).unwrap(), Duration::ZERO); // turns to 3 s
    clock.take_sleeps();
    assert!(!limiter.try_acquire_n_timeout(&7, 1, secs(2)).unwrap());
    assert!(clock.take_sleeps().is_empty());
    assert_eq!(clock.now(), 0);
    // Another key is not held up.
    assert!(limiter.try_acquire_n_timeout(&8, 1, secs(2)).unwrap());
}

#[test]
fn keyed_async_timed_try_on_a_queue_whose_turn_is_too_far_answers_at_once() {
    let (limiter, clock) = keyed(queue(4));
    limiter.acquire_n(&7, 3).unwrap();
    clock.take_sleeps();
    let handle = limiter.to_async();
    assert!(!block_on(handle.try_acquire_n_timeout(&7, 1, secs(2))).unwrap());
    assert!(clock.take_sleeps().is_empty());
    assert_eq!(clock.now(), 0);
}

/// A set holding a queue (queue(3, 1/s) with a meter of 10) whose next grant is
/// 2 s away answers a timed try of 1 s at once, without sleeping out the timeout.
#[test]
fn sets_holding_a_queue_answer_a_timed_try_at_once() {
    let all_of = AllOf::new((queue(3), meter(10)));
    let limits = Limits::new().with(queue(3)).with(meter(10));
    fn check<A: CellAlgorithm>(set: A) {
        let (limiter, clock) = direct(set);
        assert_eq!(limiter.reserve(2).unwrap().delay(), Duration::ZERO); // turns to 2 s
        assert!(!limiter.try_acquire_n_timeout(1, secs(1)).unwrap());
        assert!(clock.take_sleeps().is_empty());
        // Async and keyed alike.
        assert!(!block_on(limiter.to_async().try_acquire_n_timeout(1, secs(1))).unwrap());
        assert!(clock.take_sleeps().is_empty());
        assert_eq!(clock.now(), 0);
        // A budget that reaches the turn gets it.
        assert!(limiter.try_acquire_n_timeout(1, secs(2)).unwrap());
        assert_eq!(clock.take_sleeps(), [secs(2)]);
    }
    check(all_of);
    check(limits);
    let (limiter, clock) = keyed(AllOf::new((queue(3), meter(10))));
    limiter.acquire_n(&1, 2).unwrap();
    assert!(!limiter.try_acquire_n_timeout(&1, 1, secs(1)).unwrap());
    assert!(!block_on(limiter.to_async().try_acquire_n_timeout(&1, 1, secs(1))).unwrap());
    assert_eq!(clock.take_sleeps(), [Duration::ZERO]); // only the first acquire's
}

/// A full queue must drain before it takes a newcomer: that refusal can be cured
/// by waiting, so a caller whose budget reaches the turn still sleeps, retries and
/// acts; one whose budget does not is refused at once.
#[test]
fn a_full_queue_is_still_waited_for_when_the_turn_fits() {
    let (limiter, clock) = direct(queue(3));
    for _ in 0..3 {
        limiter.reserve(1).unwrap(); // full: turns at 0, 1 s, 2 s
    }
    assert!(!limiter
        .try_acquire_n_timeout(1, Duration::from_millis(2_999))
        .unwrap());
    assert!(clock.take_sleeps().is_empty());
    // Drains a slot in 1 s, then the turn is at 3 s: 1 s asleep, 2 s waiting.
    assert!(limiter.try_acquire_n_timeout(1, secs(3)).unwrap());
    assert_eq!(clock.take_sleeps(), [secs(1), secs(2)]);
    assert_eq!(clock.now(), 3 * SEC);
}

/// Windows cannot reserve the future: a refusal whose `retry_after` fits the
/// budget is slept and retried, direct and keyed, blocking and async.
#[test]
fn windows_still_sleep_and_retry_when_the_retry_fits() {
    let window = FixedWindow::new(1, secs(1)).unwrap();
    let (limiter, clock) = direct(window);
    assert!(limiter.try_acquire());
    assert!(!limiter
        .try_acquire_n_timeout(1, Duration::from_millis(999))
        .unwrap());
    assert!(clock.take_sleeps().is_empty());
    // Sleeps the refusal's 1 s, then acts with no wait.
    let slept = [secs(1), Duration::ZERO];
    assert!(limiter.try_acquire_n_timeout(1, secs(1)).unwrap());
    assert_eq!(clock.take_sleeps(), slept);
    assert!(block_on(limiter.to_async().try_acquire_n_timeout(1, secs(1))).unwrap());
    assert_eq!(clock.take_sleeps(), slept);

    let (limiter, clock) = keyed(SlidingWindowCounter::new(1, secs(1)).unwrap());
    assert!(limiter.try_acquire(&3));
    assert!(!limiter
        .try_acquire_n_timeout(&3, 1, Duration::from_millis(999))
        .unwrap());
    assert!(clock.take_sleeps().is_empty());
    // The weighted count of the previous window fades by 2 s.
    let slept = [secs(2), Duration::ZERO];
    assert!(limiter.try_acquire_n_timeout(&3, 1, secs(2)).unwrap());
    assert_eq!(clock.take_sleeps(), slept);
    assert!(block_on(limiter.to_async().try_acquire_n_timeout(&3, 1, secs(2))).unwrap());
    assert_eq!(clock.take_sleeps(), slept);
}

/// A set whose window refuses while its queue could grant: the window's retry fits,
/// so the caller sleeps it, and the queue's turn is still within the deadline then.
#[test]
fn a_set_sleeps_a_windows_retry_when_its_queue_turn_still_fits() {
    let set = AllOf::new((queue(3), FixedWindow::new(1, secs(1)).unwrap()));
    let (limiter, clock) = direct(set);
    assert!(limiter.try_acquire()); // queue turns to 1 s, window full until 1 s
    assert!(limiter.try_acquire_n_timeout(1, secs(1)).unwrap());
    assert_eq!(clock.take_sleeps(), [secs(1), Duration::ZERO]);
}

/// The rule of `Decision::retry_after`, for every algorithm: a denial asked with
/// `max_wait` is retried by the same caller at `now + s` with `max_wait − s` (0
/// once past); `retry_after` is exactly the first `s` at which that is granted.
fn retry_after_keeps_the_deadline<A: Algorithm>(
    algorithm: &A,
    calls: &[(u64, u64, Option<u64>)],
) -> Result<(), TestCaseError> {
    let mut state = algorithm.initial_state(0);
    let mut now: Nanos = 0;
    for &(gap, cost, max_wait) in calls {
        now += gap;
        let max_wait = max_wait.unwrap_or(u64::MAX);
        let before = state.clone();
        let decision = algorithm.reserve::<Decision>(&mut state, now, cost, max_wait);
        if decision.is_allowed() || decision.is_never() {
            continue;
        }
        let retry = decision.retry_after_nanos();
        let left = |s: Nanos| max_wait.saturating_sub(s);
        let at = |s: Nanos| {
            let mut probe = before.clone();
            algorithm
                .reserve::<Decision>(&mut probe, now + s, cost, left(s))
                .is_allowed()
        };
        prop_assert!(at(retry), "{} ns after {}: not granted", retry, now);
        prop_assert!(!at(retry - 1), "{} ns after {}: granted", retry - 1, now);
        if retry > max_wait {
            // No retry before the deadline, the deadline itself included.
            prop_assert!(!at(max_wait));
        }
    }
    Ok(())
}

fn calls() -> impl Strategy<Value = Vec<(u64, u64, Option<u64>)>> {
    // Gaps and waits in ms-sized steps, so that windows of a few seconds roll.
    prop::collection::vec(
        (
            (0u64..1_500).prop_map(|ms| ms * 1_000_000),
            1u64..4,
            prop::option::of((0u64..4_000).prop_map(|ms| ms * 1_000_000)),
        ),
        1..60,
    )
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(48))]

    #[test]
    fn every_algorithm_measures_retry_after_against_the_deadline(calls in calls()) {
        let s = secs(1);
        retry_after_keeps_the_deadline(&queue(4), &calls)?;
        retry_after_keeps_the_deadline(&LeakyBucket::queue(5, 3, s).unwrap(), &calls)?;
        retry_after_keeps_the_deadline(&meter(3), &calls)?;
        retry_after_keeps_the_deadline(&bursty(2.0), &calls)?;
        retry_after_keeps_the_deadline(&SmoothWarmingUp::new(2.0, secs(2)).unwrap(), &calls)?;
        retry_after_keeps_the_deadline(&FixedWindow::new(4, secs(2)).unwrap(), &calls)?;
        retry_after_keeps_the_deadline(&SlidingWindowCounter::new(4, secs(2)).unwrap(), &calls)?;
        retry_after_keeps_the_deadline(
            &SlidingWindowBuckets::dropping(4, secs(2), Duration::from_millis(500)).unwrap(),
            &calls,
        )?;
        retry_after_keeps_the_deadline(&SlidingLog::new(4, secs(2)).unwrap(), &calls)?;
        retry_after_keeps_the_deadline(&AllOf::new((queue(3), meter(2))), &calls)?;
        retry_after_keeps_the_deadline(
            &AllOf::new((queue(4), FixedWindow::new(3, secs(2)).unwrap())),
            &calls,
        )?;
        retry_after_keeps_the_deadline(
            &Limits::new().with(bursty(1.0)).with(queue(2)).with(SlidingLog::new(3, s).unwrap()),
            &calls,
        )?;
    }
}

// ---- 2. Cancelling at the instant of acting gives the permits back -----------------

#[test]
fn a_queue_grant_with_no_delay_cancelled_at_once_comes_back() {
    let (limiter, _clock) = direct(queue(3));
    let r = limiter.reserve(1).unwrap();
    assert_eq!(r.delay(), Duration::ZERO);
    r.cancel();
    assert_eq!(limiter.reserve(1).unwrap().delay(), Duration::ZERO);
}

/// Reserves twice (the second a turn 1 s away), cancels the turn `late` after its
/// time to act, and answers the next reservation's delay.
fn next_delay_after_cancelling_a_turn<A: CellAlgorithm>(algorithm: A, late: Duration) -> Duration {
    let (limiter, clock) = direct(algorithm);
    limiter.reserve(1).unwrap();
    let turn = limiter.reserve(1).unwrap();
    assert_eq!(turn.delay(), secs(1));
    clock.advance(secs(1) + late);
    turn.cancel();
    limiter.reserve(1).unwrap().delay()
}

#[test]
fn a_queue_turn_cancelled_at_exactly_its_time_comes_back_and_not_a_moment_later() {
    assert_eq!(
        next_delay_after_cancelling_a_turn(queue(3), Duration::ZERO),
        Duration::ZERO
    );

    let (limiter, clock) = direct(queue(3));
    limiter.reserve(1).unwrap();
    let turn = limiter.reserve(1).unwrap();
    clock.advance(secs(1) + Duration::from_nanos(1));
    turn.cancel();
    assert_eq!(
        limiter.reserve(1).unwrap().delay(),
        secs(1) - Duration::from_nanos(1)
    );
}

#[test]
fn a_meter_grant_cancelled_at_once_comes_back() {
    let (limiter, clock) = direct(meter(2));
    limiter.reserve(2).unwrap().cancel();
    assert!(limiter.try_acquire_n(2).unwrap());
    clock.advance(secs(1)); // drained again
    let r = limiter.reserve(2).unwrap();
    clock.advance(Duration::from_nanos(1));
    r.cancel(); // acted a nanosecond ago: used
    assert!(!limiter.try_acquire_n(2).unwrap());
}

/// The set case: two bursty limiters, reserved and cancelled at once, now
/// give the permit back from every member, as a lone bursty limiter does.
#[test]
fn sets_of_bursty_limiters_cancelled_at_once_restore_every_member() {
    let (lone, _) = direct(bursty(1.0));
    lone.reserve(1).unwrap().cancel();
    assert!(lone.check(1).unwrap().is_allowed());

    let all_of = AllOf::new((bursty(1.0), bursty(2.0)));
    let (limiter, _) = direct(all_of);
    limiter.reserve(1).unwrap().cancel();
    assert!(limiter.check(1).unwrap().is_allowed());

    let (limiter, _) = direct(Limits::new().with(bursty(1.0)).with(bursty(2.0)));
    limiter.reserve(1).unwrap().cancel();
    assert!(limiter.check(1).unwrap().is_allowed());

    // On the bare states: both members are back where they started.
    let set = AllOf::new((bursty(1.0), bursty(2.0)));
    let mut state = set.initial_state(0);
    let fresh = *state.members();
    let (_, receipt) = set.reserve::<(Decision, Receipt)>(&mut state, 0, 1, 0);
    set.cancel(&mut state, 0, &receipt, 0);
    assert_eq!(*state.members(), fresh);

    let set = Limits::new().with(bursty(1.0)).with(bursty(2.0));
    let mut state = set.initial_state(0);
    let members = |s: &sluicegate::algorithms::LimitsState| {
        [0, 1].map(|i| *s.member::<BurstyState>(i).unwrap())
    };
    let fresh = members(&state);
    let (_, receipt) = set.reserve::<(Decision, Receipt)>(&mut state, 0, 1, 0);
    set.cancel(&mut state, 0, &receipt, 0);
    assert_eq!(members(&state), fresh);
}

#[test]
fn a_sets_turn_cancelled_at_exactly_its_time_comes_back_from_every_member() {
    let set = AllOf::new((queue(3), bursty(1.0)));
    // Both the queue's slot and the bursty limiter's second are free again.
    assert_eq!(
        next_delay_after_cancelling_a_turn(set, Duration::ZERO),
        Duration::ZERO
    );
}

// ---- 3. A leaky bucket can always hold its own capacity ----------------------------

#[test]
fn a_leaky_bucket_whose_capacity_the_state_cannot_hold_is_a_typed_error() {
    let cases = [
        (3, Duration::from_nanos(i64::MAX as u64)),
        (40, Duration::from_nanos(1 << 59)),
        (1000, Duration::from_nanos(1 << 55)),
    ];
    for (capacity, period) in cases {
        for bucket in [
            LeakyBucket::meter(capacity, 1, period),
            LeakyBucket::queue(capacity, 1, period),
        ] {
            assert!(
                matches!(
                    bucket,
                    Err(sluicegate::ConfigError::InvalidCount {
                        what: "capacity",
                        ..
                    })
                ),
                "{capacity} per {period:?}: {bucket:?}"
            );
        }
    }
    // The largest accepted: a full bucket drains in i64::MAX ns.
    let edge = LeakyBucket::meter(1, 1, Duration::from_nanos(i64::MAX as u64)).unwrap();
    assert!(edge.peek(&edge.initial_state(0), 0, 1).is_allowed());
    let edge = LeakyBucket::meter(7, 1, Duration::from_nanos(i64::MAX as u64 / 7)).unwrap();
    assert!(edge.peek(&edge.initial_state(0), 0, 7).is_allowed());
    assert!(LeakyBucket::meter(7, 1, Duration::from_nanos(i64::MAX as u64 / 7 + 1)).is_err());
}

/// A number between 1 and `2^63`, spread over every magnitude.
fn magnitude() -> impl Strategy<Value = u64> {
    (0u32..64, any::<u64>()).prop_map(|(bits, x)| 1 + (x >> (64 - bits.max(1))) % (1 << 62))
}

/// Can `algorithm`, fresh at `now`, grant the capacity it states (the `limit` of
/// its decisions) at once?
fn grants_its_capacity<A: Algorithm>(algorithm: &A, now: Nanos) -> bool {
    let mut state = algorithm.initial_state(now);
    let limit = algorithm.peek(&state, now, 1).limit();
    algorithm
        .reserve::<Decision>(&mut state, now, limit, 0)
        .is_allowed()
}

/// Instants a fresh state may start at: the clock's origin, a day, and 146 years.
const STARTS: [Nanos; 3] = [0, 86_400 * SEC, 1 << 62];

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn every_accepted_leaky_bucket_grants_its_capacity_at_once(
        capacity in prop_oneof![1u64..10, magnitude(), Just(u64::from(u32::MAX))],
        count in prop_oneof![1u64..10, magnitude()],
        period in prop_oneof![magnitude(), Just(i64::MAX as u64)],
    ) {
        let period = Duration::from_nanos(period);
        for bucket in [
            LeakyBucket::meter(capacity, count, period),
            LeakyBucket::queue(capacity, count, period),
        ] {
            let Ok(bucket) = bucket else { continue };
            for now in STARTS {
                prop_assert!(grants_its_capacity(&bucket, now), "{:?} at {}", bucket, now);
            }
        }
    }

    /// The same guard for the other constructors: whatever they accept, a fresh
    /// state grants its stated capacity at once.
    #[test]
    fn every_other_accepted_algorithm_grants_its_capacity_at_once(
        limit in prop_oneof![1u64..10, magnitude()],
        len in prop_oneof![magnitude(), Just(i64::MAX as u64)],
        precision in magnitude(),
        rate in prop_oneof![1e-9f64..1e9, Just(f64::MIN_POSITIVE), Just(f64::INFINITY)],
    ) {
        let len_d = Duration::from_nanos(len);
        for now in STARTS {
            if let Ok(window) = FixedWindow::new(limit, len_d) {
                prop_assert!(grants_its_capacity(&window, now), "{:?} at {}", window, now);
            }
            if let Ok(counter) = SlidingWindowCounter::new(limit, len_d) {
                prop_assert!(grants_its_capacity(&counter, now), "{:?} at {}", counter, now);
            }
            let precision = Duration::from_nanos(precision.min(len));
            if let Ok(buckets) = SlidingWindowBuckets::weighted(limit, len_d, precision) {
                prop_assert!(grants_its_capacity(&buckets, now), "{:?} at {}", buckets, now);
            }
            if let Ok(buckets) = SlidingWindowBuckets::dropping(limit, len_d, precision) {
                prop_assert!(grants_its_capacity(&buckets, now), "{:?} at {}", buckets, now);
            }
            // (A log keeps an entry per permit: its limit is capped to keep this quick;
            // its constructor allows 2^20.)
            if let Ok(log) = SlidingLog::new(limit.min(1 << 12), len_d) {
                prop_assert!(grants_its_capacity(&log, now), "{:?} at {}", log, now);
            }
            let burst = Duration::from_nanos(len.min(i64::MAX as u64));
            if let Ok(b) = SmoothBursty::new(rate).and_then(|b| b.with_max_burst(burst)) {
                prop_assert!(grants_its_capacity(&b, now), "{:?} at {}", b, now);
            }
            if let Ok(w) = SmoothWarmingUp::new(rate, burst) {
                prop_assert!(grants_its_capacity(&w, now), "{:?} at {}", w, now);
            }
        }
    }
}
