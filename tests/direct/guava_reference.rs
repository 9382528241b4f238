//! Property: the crate's Guava limiters wait what Guava waits. A literal
//! transcription of guava-semantics.md (i64 microseconds, f64 permits, Java's NaN-
//! propagating `Math.min`, truncating casts) is run side by side with the crate on
//! random schedules of `acquire(n)`, idle gaps and rate changes; every wait must
//! agree to within the documented sub-microsecond difference per reservation.

use proptest::prelude::*;
use sluicegate::algorithms::{SmoothBursty, SmoothWarmingUp};
use sluicegate::clock::ManualClock;
use sluicegate::CellAlgorithm;
use sluicegate::RateLimiter;
use std::time::Duration;

/// Java's `Math.min(double, double)`: NaN if either is NaN.
fn java_min(a: f64, b: f64) -> f64 {
    if a.is_nan() || b.is_nan() {
        f64::NAN
    } else {
        a.min(b)
    }
}

#[derive(Clone, Copy, Debug)]
enum Kind {
    Bursty {
        max_burst_seconds: f64,
    },
    Warm {
        warmup_micros: f64,
        cold_factor: f64,
        threshold: f64,
        slope: f64,
    },
}

/// Guava's SmoothRateLimiter, as guava-semantics.md §3–§8 describes it.
#[derive(Debug)]
struct Guava {
    kind: Kind,
    stored: f64,
    max: f64,
    stable: f64,
    next_free: i64,
}

impl Guava {
    fn new(kind: Kind, rate: f64) -> Self {
        let mut g = Guava {
            kind,
            stored: 0.0,
            max: 0.0,
            stable: 0.0,
            next_free: 0,
        };
        g.set_rate(rate, 0);
        g
    }

    fn cool_down(&self) -> f64 {
        match self.kind {
            Kind::Bursty { .. } => self.stable,
            Kind::Warm { warmup_micros, .. } => warmup_micros / self.max,
        }
    }

    fn resync(&mut self, now: i64) {
        if now > self.next_free {
            let fresh = (now - self.next_free) as f64 / self.cool_down();
            self.stored = java_min(self.max, self.stored + fresh);
            self.next_free = now;
        }
    }

    fn set_rate(&mut self, rate: f64, now: i64) {
        self.resync(now);
        self.stable = 1e6 / rate;
        let old_max = self.max;
        match &mut self.kind {
            Kind::Bursty { max_burst_seconds } => {
                self.max = *max_burst_seconds * rate;
                self.stored = if old_max == f64::INFINITY {
                    self.max
                } else if old_max == 0.0 {
                    0.0
                } else {
                    self.stored * self.max / old_max
                };
            }
            Kind::Warm {
                warmup_micros,
                cold_factor,
                threshold,
                slope,
            } => {
                let cold = self.stable * *cold_factor;
                *threshold = 0.5 * *warmup_micros / self.stable;
                self.max = *threshold + 2.0 * *warmup_micros / (self.stable + cold);
                *slope = (cold - self.stable) / (self.max - *threshold);
                self.stored = if old_max == f64::INFINITY {
                    0.0
                } else if old_max == 0.0 {
                    self.max
                } else {
                    self.stored * self.max / old_max
                };
            }
        }
    }

    fn stored_to_wait(&self, stored: f64, mut take: f64) -> i64 {
        match self.kind {
            Kind::Bursty { .. } => 0,
            Kind::Warm {
                threshold, slope, ..
            } => {
                let to_time = |p: f64| self.stable + p * slope;
                let above = stored - threshold;
                let mut micros = 0i64;
                if above > 0.0 {
                    let t = java_min(above, take);
                    let length = to_time(above) + to_time(above - t);
                    micros = (t * length / 2.0) as i64;
                    take -= t;
                }
                micros + (self.stable * take) as i64
            }
        }
    }

    /// reserveAndGetWaitLength.
    fn acquire(&mut self, n: u64, now: i64) -> i64 {
        self.resync(now);
        let ret = self.next_free;
        let n = n as f64;
        let spend = java_min(n, self.stored);
        let fresh = n - spend;
        let wait = self.stored_to_wait(self.stored, spend) + (fresh * self.stable) as i64;
        self.next_free = self.next_free.saturating_add(wait);
        self.stored -= spend;
        (ret - now).max(0)
    }
}

#[derive(Clone, Debug)]
enum Op {
    Gap(u64),
    Acquire(u64),
    SetRate(f64),
    /// `set_rate(+inf)` then `acquire(n)`, which pays any debt reserved before.
    /// (Leaving +inf while old debt is still unpaid is the one place where the
    /// bursty limiter's one-word state cannot follow Guava exactly: see the
    /// `leaving_infinity_with_unpaid_debt` note in the report / module docs.)
    EnterInfinity(u64),
}

fn ops() -> impl Strategy<Value = Vec<Op>> {
    prop::collection::vec(
        prop_oneof![
            3 => (0u64..6_000).prop_map(Op::Gap),
            6 => (1u64..12).prop_map(Op::Acquire),
            1 => (0.2f64..200.0).prop_map(Op::SetRate),
            1 => prop::sample::select(vec![1.0, 2.0, 5.0, 7.0, 10.0, 0.5]).prop_map(Op::SetRate),
            1 => (1u64..1_000_000).prop_map(Op::EnterInfinity),
        ],
        1..40,
    )
}

fn compare<A: CellAlgorithm + sluicegate::algorithms::AdjustableRate>(
    limiter: &RateLimiter<A, ManualClock>,
    clock: &ManualClock,
    mut guava: Guava,
    ops: &[Op],
) -> Result<(), TestCaseError> {
    let mut guava_now: i64 = 0;
    let mut grants = 0i128;
    for (i, op) in ops.iter().enumerate() {
        match *op {
            Op::Gap(ms) => {
                clock.advance(Duration::from_millis(ms));
                guava_now += ms as i64 * 1000;
            }
            Op::SetRate(rate) => {
                limiter.set_rate(rate).unwrap();
                guava.set_rate(rate, guava_now);
            }
            Op::EnterInfinity(n) | Op::Acquire(n) => {
                if let Op::EnterInfinity(_) = op {
                    limiter.set_rate(f64::INFINITY).unwrap();
                    guava.set_rate(f64::INFINITY, guava_now);
                }
                let ours = limiter.acquire_n(n).unwrap().as_nanos() as i128;
                let theirs = guava.acquire(n, guava_now);
                guava_now += theirs;
                grants += 1;
                // Each reservation truncates to whole µs in Guava (twice for warm-up:
                // the trapezoid and the flat part) and to ns here.
                let tolerance = 2_000 * grants + 1_000;
                prop_assert!(
                    (ours - theirs as i128 * 1000).abs() <= tolerance,
                    "op {i} {op:?}: waited {ours} ns, Guava {theirs} µs\n{guava:?}"
                );
            }
        }
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(128))]

    #[test]
    fn bursty_waits_what_guava_waits(
        initial in 0.2f64..200.0,
        // Not 0: Guava (whose public API always uses 1 s) computes 0 × inf = NaN
        // for a zero burst at an infinite rate and stops limiting afterwards; the
        // crate keeps limiting (tests/direct/bad_input.rs covers a zero burst).
        burst_ms in prop::sample::select(vec![1u64, 250, 1_000, 1_000, 3_000]),
        ops in ops(),
    ) {
        let clock = ManualClock::new();
        let algorithm = SmoothBursty::new(initial).unwrap()
            .with_max_burst(Duration::from_millis(burst_ms)).unwrap();
        let limiter = RateLimiter::with_clock(algorithm, clock.clone());
        let guava = Guava::new(Kind::Bursty { max_burst_seconds: burst_ms as f64 / 1000.0 }, initial);
        compare(&limiter, &clock, guava, &ops)?;
    }

    #[test]
    fn warming_up_waits_what_guava_waits(
        initial in 0.2f64..200.0,
        warmup_ms in 1u64..6_000,
        cold_factor in prop::sample::select(vec![1.0, 2.0, 3.0, 3.0, 10.0]),
        ops in ops(),
    ) {
        let clock = ManualClock::new();
        let algorithm = SmoothWarmingUp::new(initial, Duration::from_millis(warmup_ms)).unwrap()
            .with_cold_factor(cold_factor).unwrap();
        let limiter = RateLimiter::with_clock(algorithm, clock.clone());
        let kind = Kind::Warm {
            warmup_micros: warmup_ms as f64 * 1000.0,
            cold_factor,
            threshold: 0.0,
            slope: 0.0,
        };
        compare(&limiter, &clock, Guava::new(kind, initial), &ops)?;
    }
}
