//! Cancelling a grant that acts at once, under the crate's one cancel rule (Go's
//! `Reservation.Cancel`): at the grant's own instant it comes back, as far as later
//! grants allow; a nanosecond later nothing does. For the fixed window, the bucketed
//! window, the sliding log and the sliding window counter, through a direct limiter's reservation and on the
//! pure steps; and a property per algorithm that the receipt-taking reserve decides
//! exactly as the plain one.

use proptest::prelude::*;
use sluicegate::algorithms::Decision;
use sluicegate::algorithms::{
    Algorithm, AllOf, Counting, FixedWindow, Receipt, SlidingLog, SlidingWindowBuckets,
    SlidingWindowCounter,
};
use sluicegate::clock::ManualClock;
use sluicegate::CellAlgorithm;
use sluicegate::RateLimiter;
use std::time::Duration;

const SEC: u64 = 1_000_000_000;

fn secs(n: u64) -> Duration {
    Duration::from_secs(n)
}

fn fixed(limit: u64) -> FixedWindow {
    FixedWindow::new(limit, secs(60)).unwrap()
}

/// `limit` per 60 s in 15 s buckets (B = 4, a ring of 8 slots).
fn buckets(limit: u64) -> SlidingWindowBuckets {
    SlidingWindowBuckets::dropping(limit, secs(60), secs(15)).unwrap()
}

fn log(limit: u64) -> SlidingLog {
    SlidingLog::new(limit, secs(60)).unwrap()
}

fn counter(limit: u64) -> SlidingWindowCounter {
    SlidingWindowCounter::new(limit, secs(60)).unwrap()
}

fn limiter<A: CellAlgorithm>(algorithm: A) -> (RateLimiter<A, ManualClock>, ManualClock) {
    let clock = ManualClock::new();
    clock.advance(secs(5)); // inside the first window and bucket, not at its edge
    (RateLimiter::with_clock(algorithm, clock.clone()), clock)
}

/// A limit of one: reserved, the next call is refused; cancelled at once, it passes.
fn cancelled_at_once_comes_back<A: CellAlgorithm>(algorithm: A) {
    let (limiter, _clock) = limiter(algorithm);
    let r = limiter.reserve(1).unwrap();
    assert!(r.is_ok());
    assert_eq!(r.delay(), Duration::ZERO);
    assert!(!limiter.peek(1).unwrap().is_allowed());
    r.cancel();
    assert!(limiter.try_acquire());
    assert!(!limiter.try_acquire());
}

/// A limit of one: cancelled a nanosecond after its instant, the grant is used.
fn cancelled_a_nanosecond_late_is_used<A: CellAlgorithm>(algorithm: A) {
    let (limiter, clock) = limiter(algorithm);
    let r = limiter.reserve(1).unwrap();
    clock.advance(Duration::from_nanos(1));
    r.cancel();
    assert!(!limiter.try_acquire());
}

/// Grants of `older` then `later` permits, and the older one cancelled at once:
/// the limiter, to see what came back.
fn older_cancelled_at_once<A: CellAlgorithm>(
    algorithm: A,
    older: u64,
    later: u64,
) -> RateLimiter<A, ManualClock> {
    let (limiter, _clock) = limiter(algorithm);
    let first = limiter.reserve(older).unwrap();
    assert!(limiter.reserve(later).unwrap().is_ok());
    first.cancel();
    limiter
}

#[test]
fn a_window_or_log_grant_cancelled_at_once_comes_back() {
    cancelled_at_once_comes_back(fixed(1));
    cancelled_at_once_comes_back(buckets(1));
    cancelled_at_once_comes_back(SlidingWindowBuckets::weighted(1, secs(60), secs(15)).unwrap());
    // One bucket: a state of 4 words, which the cell steps on a copy.
    cancelled_at_once_comes_back(SlidingWindowBuckets::dropping(1, secs(60), secs(60)).unwrap());
    cancelled_at_once_comes_back(log(1));
    cancelled_at_once_comes_back(log(1).with_rejected_recorded());
}

#[test]
fn a_window_or_log_grant_cancelled_a_nanosecond_late_is_used() {
    cancelled_a_nanosecond_late_is_used(fixed(1));
    cancelled_a_nanosecond_late_is_used(buckets(1));
    cancelled_a_nanosecond_late_is_used(log(1));
}

#[test]
fn a_set_of_a_window_and_a_log_cancelled_at_once_restores_both() {
    cancelled_at_once_comes_back(AllOf::new((fixed(1), log(5))));
    cancelled_at_once_comes_back(AllOf::new((fixed(5), log(1))));
    cancelled_a_nanosecond_late_is_used(AllOf::new((fixed(1), log(1))));
}

#[test]
fn a_fixed_window_gives_back_an_older_grant_and_keeps_the_later_ones() {
    // Its window still counts: 1 back, the later 2 stay.
    let limiter = older_cancelled_at_once(fixed(3), 1, 2);
    assert!(limiter.try_acquire());
    assert!(!limiter.try_acquire());
}

#[test]
fn a_fixed_window_gives_nothing_back_once_the_state_counts_in_a_later_window() {
    let window = fixed(2);
    let mut state = window.initial_state(0);
    let (grant, receipt) = window.reserve::<(Decision, Receipt)>(&mut state, 5 * SEC, 1, 0);
    assert!(grant.is_allowed());
    assert_eq!((receipt.mark(), receipt.charge()), (0, 1));
    // A caller whose clock is ahead counts in window 1 before the cancel arrives.
    assert!(window
        .reserve::<Decision>(&mut state, 61 * SEC, 1, 0)
        .is_allowed());
    let before = state;
    window.cancel(&mut state, 5 * SEC, &receipt, 5 * SEC);
    assert_eq!(state, before);
    // A receipt of another window gives nothing back either; one of this window
    // gives back at most what it counts.
    window.cancel(&mut state, 5 * SEC, &Receipt::new(2, 1), 5 * SEC);
    assert_eq!(state, before);
    window.cancel(&mut state, 61 * SEC, &Receipt::new(1, 5), 61 * SEC);
    assert_eq!(window.count(&state, 61 * SEC), 0);
}

#[test]
fn a_bucketed_window_gives_back_from_a_bucket_the_ring_still_holds() {
    let window = buckets(3);
    let mut state = window.initial_state(0);
    let (_, older) = window.reserve::<(Decision, Receipt)>(&mut state, 5 * SEC, 1, 0);
    assert_eq!((older.mark(), older.charge()), (0, 1));
    // A later grant, in a later bucket (a clock ahead of the canceller's).
    assert!(window
        .reserve::<Decision>(&mut state, 20 * SEC, 2, 0)
        .is_allowed());
    assert!(!window.peek(&state, 20 * SEC, 1).is_allowed());
    window.cancel(&mut state, 5 * SEC, &older, 5 * SEC);
    let counted: Vec<_> = window.counted_buckets(&state, 20 * SEC).collect();
    assert_eq!(counted, vec![(15 * SEC, 2)]); // the later grant stays
    assert!(window.peek(&state, 20 * SEC, 1).is_allowed());
    // Cancelling the same way after its instant gives nothing.
    let (_, later) = window.reserve::<(Decision, Receipt)>(&mut state, 20 * SEC, 1, 0);
    let before = state.clone();
    window.cancel(&mut state, 20 * SEC + 1, &later, 20 * SEC);
    assert_eq!(state, before);
}

#[test]
fn a_bucketed_window_gives_nothing_back_from_a_slot_a_later_bucket_reuses() {
    let window = buckets(3);
    let mut state = window.initial_state(0);
    let (_, older) = window.reserve::<(Decision, Receipt)>(&mut state, 5 * SEC, 1, 0);
    // Bucket 8 (120 s) takes bucket 0's slot in the ring of 8.
    assert!(window
        .reserve::<Decision>(&mut state, 125 * SEC, 2, 0)
        .is_allowed());
    let before = state.clone();
    window.cancel(&mut state, 5 * SEC, &older, 5 * SEC);
    assert_eq!(state, before);
    assert_eq!(
        window
            .counted_buckets(&state, 125 * SEC)
            .collect::<Vec<_>>(),
        vec![(120 * SEC, 2)]
    );
}

#[test]
fn a_sliding_log_removes_only_its_newest_entry() {
    let (limiter, _clock) = limiter(log(3));
    let older = limiter.reserve(1).unwrap();
    let later = limiter.reserve(1).unwrap();
    older.cancel(); // behind a later entry: nothing comes back
    later.cancel(); // the newest: removed
    assert!(limiter.try_acquire());
    assert!(limiter.try_acquire());
    assert!(!limiter.try_acquire());
}

#[test]
fn a_sliding_log_cancel_gives_the_spacing_back() {
    let spaced = log(5).with_min_spacing(secs(1));
    let (limiter, clock) = limiter(spaced);
    limiter.acquire().unwrap();
    clock.advance(secs(2));
    let r = limiter.reserve(1).unwrap();
    r.cancel();
    // Spaced from the first call again, which was 2 s ago.
    assert!(limiter.try_acquire());
    assert!(!limiter.try_acquire());
}

#[test]
fn a_sliding_log_keeps_a_refusal_recorded_after_the_grant() {
    let recording = log(1).with_rejected_recorded();
    let mut state = recording.initial_state(0);
    let (grant, receipt) = recording.reserve::<(Decision, Receipt)>(&mut state, 0, 1, 0);
    assert!(grant.is_allowed());
    let (refused, none) = recording.reserve::<(Decision, Receipt)>(&mut state, 0, 1, 0);
    assert!(!refused.is_allowed());
    assert!(none.is_none()); // a refusal has nothing to give back
    let before = state.clone();
    recording.cancel(&mut state, 0, &receipt, 0);
    assert_eq!(state, before); // the recorded attempt is newer: nothing comes back
    assert_eq!(recording.live_entries(&state, 0).count(), 2);
}

#[test]
fn a_sliding_log_receipt_of_another_entry_gives_nothing_back() {
    let log = log(3);
    let mut state = log.initial_state(0);
    let (_, receipt) = log.reserve::<(Decision, Receipt)>(&mut state, 0, 2, 0);
    let before = state.clone();
    for other in [
        Receipt::new(receipt.mark(), 1),
        Receipt::new(receipt.mark() + 1, 2),
        Receipt::NONE,
    ] {
        log.cancel(&mut state, 0, &other, 0);
        assert_eq!(state, before);
    }
    log.cancel(&mut state, 0, &receipt, 0);
    assert!(state.is_empty());
}

#[test]
fn a_sliding_window_counter_grant_cancelled_at_once_comes_back() {
    cancelled_at_once_comes_back(counter(1));
    cancelled_at_once_comes_back(counter(1).with_counting(Counting::Attempts));
}

#[test]
fn a_sliding_window_counter_grant_cancelled_a_nanosecond_late_is_used() {
    cancelled_a_nanosecond_late_is_used(counter(1));
}

#[test]
fn a_sliding_window_counter_gives_back_an_older_grant_and_keeps_the_later_ones() {
    let limiter = older_cancelled_at_once(counter(3), 2, 1);
    assert!(limiter.try_acquire_n(2).unwrap());
    assert!(!limiter.try_acquire());
}

#[test]
fn a_sliding_window_counter_gives_back_from_the_previous_window_and_no_older() {
    let counter = counter(4);
    let mut state = counter.initial_state(0);
    let (_, receipt) = counter.reserve::<(Decision, Receipt)>(&mut state, 5 * SEC, 3, 0);
    assert_eq!((receipt.mark(), receipt.charge()), (0, 3));
    // A caller whose clock is ahead moves the state into window 1.
    assert!(counter
        .reserve::<Decision>(&mut state, 61 * SEC, 1, 0)
        .is_allowed());
    counter.cancel(&mut state, 5 * SEC, &receipt, 5 * SEC);
    assert_eq!(counter.counts(&state, 61 * SEC), (0, 1)); // the later grant stays
                                                          // Two windows on, the grant's window no longer counts: nothing to give back.
    let (_, receipt) = counter.reserve::<(Decision, Receipt)>(&mut state, 61 * SEC, 2, 0);
    assert!(counter
        .reserve::<Decision>(&mut state, 181 * SEC, 1, 0)
        .is_allowed());
    let before = state;
    counter.cancel(&mut state, 61 * SEC, &receipt, 61 * SEC);
    assert_eq!(state, before);
}

#[test]
fn a_sliding_window_counter_counting_attempts_gives_back_the_grant_only() {
    let attempts = counter(2).with_counting(Counting::Attempts);
    let mut state = attempts.initial_state(0);
    let (_, receipt) = attempts.reserve::<(Decision, Receipt)>(&mut state, 0, 2, 0);
    assert!(!attempts
        .reserve::<Decision>(&mut state, 0, 1, 0)
        .is_allowed()); // counted: 3
    attempts.cancel(&mut state, 0, &receipt, 0);
    assert_eq!(attempts.counts(&state, 0), (0, 1)); // the refused attempt stays
                                                    // A count saturated by hammering may have forgotten more than the grant: kept.
    let mut state = attempts.initial_state(0);
    let (_, receipt) = attempts.reserve::<(Decision, Receipt)>(&mut state, 0, 1, 0);
    for _ in 0..2000 {
        attempts.reserve::<Decision>(&mut state, 0, 2, 0);
    }
    let saturated = state;
    attempts.cancel(&mut state, 0, &receipt, 0);
    assert_eq!(state, saturated);
}

/// Steps of a random trace: a gap (possibly backwards), a cost, and whether the
/// step's grant is then cancelled at once (on both states alike).
fn trace() -> impl Strategy<Value = Vec<(i64, u64, bool)>> {
    prop::collection::vec(
        (-3 * SEC as i64..40 * SEC as i64, 1u64..6, any::<bool>()),
        1..80,
    )
}

/// The step's decision is the same whether its report keeps the receipt or not,
/// and both leave the same state.
fn receipts_change_no_decision<A>(
    algorithm: &A,
    steps: &[(i64, u64, bool)],
) -> Result<(), TestCaseError>
where
    A: Algorithm,
    A::State: PartialEq + std::fmt::Debug,
{
    let mut now: u64 = 100 * SEC;
    let mut plain = algorithm.initial_state(now);
    let mut with = algorithm.initial_state(now);
    for &(gap, cost, cancel) in steps {
        now = now.saturating_add_signed(gap);
        let decision = algorithm.reserve::<Decision>(&mut plain, now, cost, 0);
        let (same, receipt) = algorithm.reserve::<(Decision, Receipt)>(&mut with, now, cost, 0);
        prop_assert_eq!(decision, same);
        prop_assert_eq!(&plain, &with);
        prop_assert_eq!(receipt.is_none(), !decision.is_allowed());
        if cancel {
            algorithm.cancel(&mut plain, now, &receipt, now);
            algorithm.cancel(&mut with, now, &receipt, now);
        }
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    #[test]
    fn fixed_window_receipts_change_no_decision(limit in 1u64..8, steps in trace()) {
        receipts_change_no_decision(&fixed(limit), &steps)?;
    }

    #[test]
    fn bucketed_window_receipts_change_no_decision(
        limit in 1u64..8,
        weighted in any::<bool>(),
        steps in trace(),
    ) {
        let window = if weighted {
            SlidingWindowBuckets::weighted(limit, secs(60), secs(15)).unwrap()
        } else {
            buckets(limit)
        };
        receipts_change_no_decision(&window, &steps)?;
    }

    #[test]
    fn sliding_window_counter_receipts_change_no_decision(
        limit in 1u64..8,
        attempts in any::<bool>(),
        steps in trace(),
    ) {
        let counting = if attempts { Counting::Attempts } else { Counting::Admitted };
        receipts_change_no_decision(&counter(limit).with_counting(counting), &steps)?;
    }

    #[test]
    fn sliding_log_receipts_change_no_decision(
        limit in 1u64..8,
        recorded in any::<bool>(),
        spacing in 0u64..3,
        steps in trace(),
    ) {
        let mut log = log(limit).with_min_spacing(secs(spacing));
        if recorded {
            log = log.with_rejected_recorded();
        }
        receipts_change_no_decision(&log, &steps)?;
    }
}
