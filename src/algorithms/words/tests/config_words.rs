//! `WordEncoded::from_config_words` must not panic on any words, and must give a
//! configuration whose steps do not panic either, nor loop for ever: words that no
//! constructor made (a user's own, or a corrupted copy) are clamped. Random words,
//! rich in the edges (0, 1, `u64::MAX`, one bit set, float bits of ±1, infinity,
//! NaN and the tiniest double), then every step at random times and costs.

use crate::algorithms::words::WordEncoded;
use crate::algorithms::{Decision, Receipt};
use crate::algorithms::{
    FixedWindow, LeakyBucket, SlidingLog, SlidingWindowBuckets, SlidingWindowCounter, SmoothBursty,
    SmoothWarmingUp,
};
use proptest::prelude::*;

/// Decodes the first words as `A`'s configuration and runs every step on it.
fn steps<A: WordEncoded>(words: &[u64], nows: &[u64], cost: u64) {
    let mut config = A::Config::default();
    let n = config.as_ref().len();
    config.as_mut().copy_from_slice(&words[..n]);
    let algorithm = A::from_config_words(config);
    if algorithm.state_words() > 1 << 16 {
        // A ring that large is a question of memory, not of panics.
        return;
    }
    let mut state = algorithm.initial_state(nows[0]);
    for &now in nows {
        let _ = algorithm.peek(&state, now, cost);
        let (_, receipt) = algorithm.reserve::<(Decision, Receipt)>(&mut state, now, cost, 0);
        let _ = algorithm.reserve::<Decision>(&mut state, now, cost, u64::MAX);
        algorithm.cancel(&mut state, now, &receipt, now);
        let _ = algorithm.is_replenished(&state, now);
    }
}

fn word() -> impl Strategy<Value = u64> {
    prop_oneof![
        Just(0u64),
        Just(1),
        Just(u64::MAX),
        any::<u64>(),
        0u64..10,
        Just(1u64 << 63),
        Just(1u64 << 32),
        Just((1u64 << 32) | 3),
        Just(f64::INFINITY.to_bits()),
        Just(f64::NAN.to_bits()),
        Just(1.0f64.to_bits()),
        Just((-1.0f64).to_bits()),
        Just(5e-324f64.to_bits()),
    ]
}

fn now() -> impl Strategy<Value = u64> {
    prop_oneof![any::<u64>(), 0u64..1000, Just(u64::MAX)]
}

fn cost() -> impl Strategy<Value = u64> {
    prop_oneof![Just(1u64), Just(u64::MAX), any::<u64>(), 1u64..5]
}

macro_rules! any_words_step_without_panicking {
    ($($name:ident: $algorithm:ty),+) => {
        proptest! {
            #![proptest_config(ProptestConfig::with_cases(500))]
            $(
                #[test]
                fn $name(
                    words in prop::collection::vec(word(), 6),
                    nows in prop::collection::vec(now(), 1..6),
                    cost in cost(),
                ) {
                    steps::<$algorithm>(&words, &nows, cost);
                }
            )+
        }
    };
}

any_words_step_without_panicking!(
    leaky_bucket: LeakyBucket,
    fixed_window: FixedWindow,
    sliding_window_counter: SlidingWindowCounter,
    smooth_bursty: SmoothBursty,
    smooth_warming_up: SmoothWarmingUp,
    sliding_log: SlidingLog,
    sliding_window_buckets: SlidingWindowBuckets
);
