//! The sliding window counter's one-word state: the packed counter against a plain
//! reference model (unpacked counts and window start), in both index modes; its
//! lock-free cell publishing counted refusals; and its keys in the in-memory store.

use proptest::prelude::*;
use sluicegate::algorithms::Decision;
use sluicegate::algorithms::{Algorithm, Counting, Rounding, SlidingWindowCounter, Verdict};
use sluicegate::clock::ManualClock;
use sluicegate::stores::MemoryStore;
use sluicegate::{KeyedRateLimiter, RateLimiter};
use std::time::Duration;

const SECOND: u64 = 1_000_000_000;

/// The model the module docs describe, with the window start and both counts kept
/// whole: the packed counter must decide exactly as this does while fewer than 2ᵏ⁻¹
/// windows pass after the state was last written (and time steps back by fewer).
#[derive(Clone, Copy, Debug)]
struct Reference {
    len: u64,
    limit: u64,
    floor: bool,
    attempts: bool,
}

#[derive(Clone, Copy, Debug)]
struct RefState {
    start: u64,
    previous: u64,
    current: u64,
}

/// A reference view: the state as of now, the elapsed part of its window, and how
/// far now lies before that point.
type RefView = (RefState, u64, u64);

impl Reference {
    /// Counts saturate at 2ᵇ − 1: b = the limit's bits, plus 8 (at most 24) when
    /// counting attempts.
    fn saturation(&self) -> u64 {
        let bits = u64::BITS - self.limit.leading_zeros();
        let bits = if self.attempts {
            (bits + 8).min(24)
        } else {
            bits
        };
        (1 << bits) - 1
    }

    fn fresh(&self, now: u64) -> RefView {
        let start = now - now % self.len;
        let state = RefState {
            start,
            previous: 0,
            current: 0,
        };
        (state, now - start, 0)
    }

    fn view(&self, state: &RefState, now: u64) -> RefView {
        if now < state.start {
            if state.previous == 0 && state.current == 0 {
                return self.fresh(now);
            }
            return (*state, 0, state.start - now);
        }
        if now - state.start < self.len {
            return (*state, now - state.start, 0);
        }
        let (mut rolled, elapsed, _) = self.fresh(now);
        if rolled.start - state.start == self.len {
            rolled.previous = state.current;
        }
        (rolled, elapsed, 0)
    }

    fn used(&self, view: &RefView) -> u64 {
        let (state, elapsed, _) = view;
        let weighted = u128::from(state.previous) * u128::from(self.len - elapsed);
        let len = u128::from(self.len);
        let weighted = if self.floor {
            weighted / len
        } else {
            weighted.div_ceil(len)
        };
        weighted as u64 + state.current
    }

    fn reset(&self, view: &RefView) -> u64 {
        let (state, elapsed, behind) = view;
        let to_next = self.len - elapsed;
        behind
            + if state.current > 0 {
                to_next + self.len
            } else if state.previous > 0 {
                to_next
            } else {
                0
            }
    }

    fn passes(&self, state: &RefState, now: u64, cost: u64) -> bool {
        self.used(&self.view(state, now)) + cost <= self.limit
    }

    /// (verdict, remaining, reset_after) and the state after the call.
    fn reserve(&self, state: &mut RefState, now: u64, cost: u64) -> (Verdict, u64, u64) {
        let mut view = self.view(state, now);
        let used = self.used(&view);
        let remaining = self.limit.saturating_sub(used);
        if cost > self.limit {
            return (Verdict::Never, remaining, self.reset(&view));
        }
        if used + cost > self.limit {
            if self.attempts {
                view.0.current = (view.0.current + cost).min(self.saturation());
                *state = view.0;
            }
            return (Verdict::Denied, remaining, self.reset(&view));
        }
        view.0.current += cost;
        *state = view.0;
        (Verdict::Allowed, remaining - cost, self.reset(&view))
    }
}

/// One call: how far time moves (in nanoseconds, possibly back) and the cost.
fn step(len: u64, limit: u64) -> impl Strategy<Value = (i64, u64)> {
    let len = len as i64;
    let moves = prop_oneof![
        4 => 0..len,
        2 => 0..3 * len,
        1 => -2 * len..0,
        // Far forward. A whole trace (under 60 calls) spans fewer than 2¹⁵ windows,
        // the horizon of the smallest index, counted from the state's last write.
        1 => (len * 100)..(len * 400),
    ];
    let costs = prop_oneof![3 => 1..=limit.div_ceil(4), 2 => 1..=limit, 1 => Just(limit + 1)];
    (moves, costs)
}

fn check_against_reference(
    limit: u64,
    len: u64,
    floor: bool,
    attempts: bool,
    origin: u64,
    calls: Vec<(i64, u64)>,
) -> Result<(), TestCaseError> {
    let reference = Reference {
        len,
        limit,
        floor,
        attempts,
    };
    let counter = SlidingWindowCounter::new(limit, Duration::from_nanos(len))
        .unwrap()
        .with_rounding(if floor {
            Rounding::Floor
        } else {
            Rounding::Exact
        })
        .with_counting(if attempts {
            Counting::Attempts
        } else {
            Counting::Admitted
        });
    let mut now = origin;
    let mut state = counter.initial_state(now);
    let mut model = reference.fresh(now).0;
    for (movement, cost) in calls {
        now = now.saturating_add_signed(movement);
        let decision = counter.reserve::<Decision>(&mut state, now, cost, 0);
        let (verdict, remaining, reset) = reference.reserve(&mut model, now, cost);
        prop_assert_eq!(decision.verdict(), verdict, "at {}", now);
        prop_assert_eq!(decision.remaining(), remaining, "at {}", now);
        prop_assert_eq!(decision.reset_after_nanos(), reset, "at {}", now);
        let (view, ..) = reference.view(&model, now);
        prop_assert_eq!(
            counter.counts(&state, now),
            (view.previous, view.current),
            "at {}",
            now
        );
        prop_assert_eq!(
            counter.is_replenished(&state, now),
            view.previous == 0 && view.current == 0
        );
        if verdict == Verdict::Denied {
            // Exact by the reference: the call passes at the retry, not a nanosecond
            // before it.
            let retry = decision.retry_after_nanos();
            prop_assert!(reference.passes(&model, now + retry, cost), "at {}", now);
            prop_assert!(
                retry == 0 || !reference.passes(&model, now + retry - 1, cost),
                "at {}",
                now
            );
        }
    }
    Ok(())
}

/// A configuration and a trace of calls for it.
fn case(
    limits: std::ops::RangeInclusive<u64>,
    lens: std::ops::RangeInclusive<u64>,
) -> impl Strategy<Value = (u64, u64, Vec<(i64, u64)>)> {
    (limits, lens).prop_flat_map(|(limit, len)| {
        (
            Just(limit),
            Just(len),
            proptest::collection::vec(step(len, limit), 1..60),
        )
    })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(96))]

    /// Everyday limits and windows (the index is stored whole in most, and wraps in
    /// some with attempts counted over short windows).
    #[test]
    fn the_packed_counter_matches_the_reference(
        (limit, len, calls) in case(1..=200, 1_000..=100_000_000_000),
        floor in any::<bool>(),
        attempts in any::<bool>(),
        origin in 0u64..1 << 50,
    ) {
        check_against_reference(limit, len, floor, attempts, origin, calls)?;
    }

    /// Limits near the maximum over windows of nanoseconds: 16 to 22 index bits,
    /// which wrap many times over the clock's range.
    #[test]
    fn the_packed_counter_matches_the_reference_when_indices_wrap(
        (limit, len, calls) in case(1 << 20..=(1 << 24) - 1, 1..=5_000),
        floor in any::<bool>(),
        attempts in any::<bool>(),
        origin in 0u64..1 << 63,
    ) {
        check_against_reference(limit, len, floor, attempts, origin, calls)?;
    }
}

#[test]
fn the_lock_free_cell_publishes_counted_refusals() {
    // Through the direct limiter (a lock-free word cell): refused calls count under
    // Counting::Attempts and not under the default.
    let admitted = SlidingWindowCounter::new(3, Duration::from_secs(60)).unwrap();
    for (counting, passes_at_90_s) in [(Counting::Admitted, true), (Counting::Attempts, false)] {
        let clock = ManualClock::new();
        let limiter = RateLimiter::with_clock(admitted.with_counting(counting), clock.clone());
        assert!(limiter.try_acquire_n(3).unwrap());
        for _ in 1..60 {
            clock.advance(Duration::from_secs(1));
            assert!(!limiter.try_acquire());
        }
        clock.advance(Duration::from_secs(31));
        // Admitted: previous = 3 weighs ⌈1.5⌉ = 2, so one more passes. Attempts:
        // previous = 62 weighs 31.
        assert_eq!(limiter.try_acquire(), passes_at_90_s, "{counting:?}");
    }
}

#[test]
fn keyed_counters_are_forgotten_two_windows_after_their_last_count() {
    let clock = ManualClock::new();
    let counter = SlidingWindowCounter::new(2, Duration::from_secs(1)).unwrap();
    let store: MemoryStore<u32, SlidingWindowCounter> = MemoryStore::new().with_shards(1).unwrap();
    let limiter = KeyedRateLimiter::with_store(counter, store, clock.clone());
    for key in 0..100u32 {
        assert!(limiter.check(&key, 2).unwrap().is_allowed());
    }
    assert_eq!(limiter.store().live_keys(), 100);
    // One window on, the previous count still weighs: nothing is forgotten.
    clock.advance(Duration::from_millis(1_999));
    for _ in 0..1000 {
        limiter.check(&0u32, 1).unwrap();
    }
    // (⌈2 × 1 ms / 1 s⌉ = 1 of key 7's previous 2 still counts.)
    assert!(!limiter.check(&7u32, 2).unwrap().is_allowed());
    assert_eq!(limiter.store().live_keys(), 100);
    // Two windows after their window began, the idle keys are replenished and
    // ordinary calls on other keys forget them.
    clock.advance(Duration::from_millis(1));
    for key in 1000..1300u32 {
        limiter.check(&key, 1).unwrap();
    }
    // Key 0 counted 1 in the window just ended, so it stays.
    assert_eq!(
        limiter.store().live_keys(),
        300 + 1,
        "idle keys not forgotten"
    );
    // A forgotten key comes back fresh.
    let back = limiter.check(&5u32, 1).unwrap();
    assert!(back.is_allowed());
    assert_eq!(back.remaining(), 1);
}

#[test]
fn keyed_attempts_count_refusals_per_key() {
    let clock = ManualClock::new();
    let counter = SlidingWindowCounter::new(10, Duration::from_secs(10))
        .unwrap()
        .with_counting(Counting::Attempts);
    let limiter = KeyedRateLimiter::with_clock(counter, clock.clone());
    assert!(limiter.check(&"hammer", 10).unwrap().is_allowed());
    assert!(limiter.check(&"polite", 10).unwrap().is_allowed());
    for _ in 0..40 {
        assert!(!limiter.try_acquire(&"hammer"));
    }
    // Half-way into the next window: "polite"'s previous 10 weigh 5, so it passes;
    // "hammer"'s 50 weigh 25. Its refusal would count too, so the retry must fit
    // both: 50 × (10 s − e)/10 s + 1 + 1 ≤ 10 needs e ≥ 8.4 s.
    clock.advance(Duration::from_secs(15));
    assert!(limiter.peek(&"polite", 1).unwrap().is_allowed());
    let hammer = limiter.peek(&"hammer", 1).unwrap();
    assert!(!hammer.is_allowed());
    assert_eq!(hammer.retry_after_nanos(), 3 * SECOND + 400_000_000);
}
