//! The lean zero-wait step (`Algorithm::try_take`, `Store::try_take_key`, a keyed
//! `try_acquire`, the server layer without fields) is a shortcut of the full one,
//! so it must never answer or change anything differently: a grant where the
//! zero-wait reserve grants (and the same state after it), that reserve's refusal
//! in full otherwise, a recorded refusal recorded once.

use proptest::prelude::*;
use sluicegate::algorithms::{
    Algorithm, AllOf, Counting, FixedWindow, LeakyBucket, Limits, SlidingLog, SlidingWindowBuckets,
    SlidingWindowCounter, SmoothBursty, SmoothWarmingUp,
};
use sluicegate::stores::{MemoryStore, Operation, Store};
use sluicegate::{Decision, Error};
use std::fmt::Debug;
use std::time::Duration;

fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}

/// One algorithm's check of a trace: how many calls it refused.
type Case = Box<dyn Fn(&[(u64, u64)]) -> Result<usize, TestCaseError>>;

/// Every algorithm, option and set the crate ships, each small enough that a
/// trace of a few dozen calls refuses some.
fn every_algorithm() -> Vec<Case> {
    fn case<A: Algorithm + Debug>(algorithm: A) -> Case {
        Box::new(move |trace| lean_matches_full(&algorithm, trace))
    }
    vec![
        case(SmoothBursty::new(5.0).unwrap()),
        case(SmoothBursty::new(f64::INFINITY).unwrap()),
        case(SmoothWarmingUp::new(5.0, ms(2_000)).unwrap()),
        case(LeakyBucket::meter(3, 1, ms(200)).unwrap()),
        case(LeakyBucket::meter(4, 3, Duration::from_secs(1)).unwrap()),
        case(LeakyBucket::queue(3, 1, ms(200)).unwrap()),
        case(LeakyBucket::meter(2, 1, ms(20)).unwrap()),
        case(LeakyBucket::queue(2, 1, ms(20)).unwrap()),
        case(FixedWindow::new(4, ms(500)).unwrap()),
        case(SlidingWindowCounter::new(4, ms(500)).unwrap()),
        case(
            SlidingWindowCounter::new(4, ms(500))
                .unwrap()
                .with_counting(Counting::Attempts),
        ),
        case(SlidingWindowBuckets::dropping(5, ms(600), ms(200)).unwrap()),
        case(SlidingWindowBuckets::weighted(5, ms(600), ms(200)).unwrap()),
        case(
            SlidingLog::new(3, ms(400))
                .unwrap()
                .with_min_spacing(ms(20)),
        ),
        case(
            SlidingLog::new(3, ms(400))
                .unwrap()
                .with_rejected_recorded(),
        ),
        case(AllOf::new((
            SmoothBursty::new(8.0).unwrap(),
            FixedWindow::new(5, ms(1_000)).unwrap(),
        ))),
        case(
            Limits::new()
                .with(LeakyBucket::meter(3, 1, ms(100)).unwrap())
                .with(
                    SlidingLog::new(6, ms(1_000))
                        .unwrap()
                        .with_rejected_recorded(),
                ),
        ),
    ]
}

/// Runs `trace` (idle ms before the call, cost) on two states of `algorithm`: one
/// takes through `try_take`, the other through `reserve(now, cost, 0)`. Their
/// answers must agree, and so must everything the states would answer next.
/// Returns how many calls were refused.
fn lean_matches_full<A: Algorithm + Debug>(
    algorithm: &A,
    trace: &[(u64, u64)],
) -> Result<usize, TestCaseError> {
    let mut now = 1_000_000_000;
    let mut lean = algorithm.initial_state(now);
    let mut full = algorithm.initial_state(now);
    let mut refused = 0;
    for &(idle, cost) in trace {
        now += idle * 1_000_000;
        let reserved = algorithm.reserve(&mut full, now, cost, 0);
        let taken = algorithm.try_take(&mut lean, now, cost);
        match taken {
            None => prop_assert!(reserved.is_allowed(), "{algorithm:?}: {reserved:?}"),
            Some(refusal) => {
                prop_assert!(!refusal.is_allowed(), "{algorithm:?}: a grant as a refusal");
                prop_assert_eq!(refusal, reserved, "{:?}", algorithm);
                refused += 1;
            }
        }
        for probe in [1, 2, 7] {
            prop_assert_eq!(
                algorithm.peek(&lean, now, probe),
                algorithm.peek(&full, now, probe),
                "{:?} after cost {} at {}",
                algorithm,
                cost,
                now
            );
        }
    }
    Ok(refused)
}

fn trace() -> impl Strategy<Value = Vec<(u64, u64)>> {
    // Whole multiples of 20 ms land on the instants where a limit frees up.
    let idle = prop_oneof![
        4 => Just(0u64),
        3 => 0u64..60,
        2 => (1u64..10).prop_map(|k| k * 20),
        1 => 60u64..2_000
    ];
    let cost = prop_oneof![6 => Just(1u64), 3 => 2u64..4, 1 => 4u64..12];
    prop::collection::vec((idle, cost), 20..80)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    #[test]
    fn try_take_is_the_zero_wait_reserve_without_the_grants_description(trace in trace()) {
        let mut never_refused = 0;
        for case in every_algorithm() {
            never_refused += usize::from(case(&trace)? == 0);
        }
        // Only the unlimited limiter may never refuse: the refusal half is tested.
        prop_assert!(never_refused <= 1, "{} cases never refused", never_refused);
    }

    /// The in-memory store's lean step against its full one, over several keys
    /// and a cap on keys, so that new keys, forgotten keys and a full store are
    /// all crossed.
    #[test]
    fn the_stores_lean_step_is_its_full_step(
        calls in prop::collection::vec((0u64..40, 0u8..4, 1u64..4), 40..120)
    ) {
        let algorithm = AllOf::new((
            LeakyBucket::meter(3, 1, ms(100)).unwrap(),
            SlidingLog::new(4, ms(300)).unwrap().with_rejected_recorded(),
        ));
        // One hasher for both, so that keys sit (and are swept) alike.
        let hasher = std::hash::RandomState::new();
        let store = || MemoryStore::with_hasher(hasher.clone()).with_max_keys(2).unwrap();
        let (lean, full): (MemoryStore<u8, _>, MemoryStore<u8, _>) = (store(), store());
        let mut now = 0;
        for (idle, key, cost) in calls {
            now += idle * 1_000_000;
            let step = Operation::Reserve { cost, max_wait: 0 };
            let reserved = full.apply_key(&algorithm, &key, now, step).map(|(d, _)| d);
            let taken = lean.try_take_key(&algorithm, &key, now, cost);
            match (taken, reserved) {
                (Ok(None), Ok(decision)) => prop_assert!(decision.is_allowed()),
                (Ok(Some(refusal)), Ok(decision)) => {
                    prop_assert!(!refusal.is_allowed());
                    prop_assert_eq!(refusal, decision);
                }
                (Err(Error::StoreFull { .. }), Err(Error::StoreFull { .. })) => {}
                (taken, reserved) => {
                    prop_assert!(false, "lean {taken:?} against full {reserved:?}")
                }
            }
            for probe in 0..4u8 {
                let peek = Operation::Peek { cost: 1 };
                let seen = |store: &MemoryStore<u8, _>| -> Decision {
                    store.apply_key(&algorithm, &probe, now, peek).unwrap().0
                };
                prop_assert_eq!(seen(&lean), seen(&full));
            }
            prop_assert_eq!(lean.live_keys(), full.live_keys());
        }
    }
}
