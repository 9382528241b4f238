//! Unit tests of the warming-up bucket: its resync, whose shortcut skips a
//! division, is bit for bit Guava's formula.

use super::*;
use proptest::prelude::*;

/// The resync formula as Guava writes it, with no shortcut.
fn reference(config: &SmoothWarmingUp, state: &WarmingUpState, now: i64) -> WarmingUpState {
    if now > state.next_free {
        let fresh = now.abs_diff(state.next_free) as f64 / config.cool_down_nanos();
        WarmingUpState {
            stored: config.max_permits.min(state.stored + fresh),
            next_free: now,
        }
    } else {
        *state
    }
}

fn config(rate: f64, warmup_ms: u64, cold_factor: f64) -> SmoothWarmingUp {
    SmoothWarmingUp::new(rate, Duration::from_millis(warmup_ms))
        .unwrap()
        .with_cold_factor(cold_factor)
        .unwrap()
}

fn same(a: WarmingUpState, b: WarmingUpState) -> bool {
    a.stored.to_bits() == b.stored.to_bits() && a.next_free == b.next_free
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(400))]

    /// The skipped division never changes a bit, in particular for idle times
    /// right at the edge of filling the bucket.
    #[test]
    fn resync_is_bit_exact(
        rate in prop_oneof![1e-3..1e9f64, Just(f64::INFINITY), Just(1e-300)],
        warmup_ms in prop_oneof![Just(0u64), 1u64..100_000_000],
        cold_factor in 1.0..10.0f64,
        fill in prop_oneof![0.0..=1.0f64, Just(0.0), Just(1.0)],
        next_free in 0i64..1 << 62,
        scale in prop_oneof![-1e-9..1e-9f64, -0.5..0.5f64, Just(0.0)],
        idle_raw in 1i64..1 << 62,
    ) {
        let config = config(rate, warmup_ms, cold_factor);
        let stored = config.max_permits * fill;
        let state = WarmingUpState { stored, next_free };
        // Idle time close to what fills the bucket, or arbitrary.
        let edge = (config.max_permits - stored) * config.cool_down_nanos() * (1.0 + scale);
        for idle in [edge as i64, (edge as i64).saturating_add(1), edge as i64 - 1, idle_raw] {
            let now = next_free.saturating_add(idle.max(1));
            let got = config.resync(&state, now);
            let want = reference(&config, &state, now);
            prop_assert!(same(got, want), "{:?} {:?} now {}: {:?} != {:?}", config, state, now, got, want);
        }
    }
}

#[test]
fn resync_edges_are_bit_exact() {
    let configs = [
        config(2.0, 4_000, 3.0),
        config(1e9, 1_000, 3.0),
        config(f64::INFINITY, 1_000, 3.0),
        config(5.0, 0, 3.0),
        config(f64::MIN_POSITIVE, 1_000, 3.0),
    ];
    for config in configs {
        for stored in [
            0.0,
            -0.0,
            config.max_permits,
            config.max_permits / 3.0,
            f64::NAN,
            f64::INFINITY,
        ] {
            for idle in [1i64, 2, 1_000, 1 << 40, i64::MAX] {
                let state = WarmingUpState {
                    stored,
                    next_free: 0,
                };
                let got = config.resync(&state, idle);
                let want = reference(&config, &state, idle);
                assert!(
                    same(got, want),
                    "{config:?} {state:?} {idle}: {got:?} != {want:?}"
                );
            }
        }
    }
}
