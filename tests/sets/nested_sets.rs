//! Sets nested in sets, in memory, held to the docs: "a nested set decides as one
//! member, and its limits are counted and reported in its place" (`multi`),
//! `limit_index` "counting the set's leaf limits depth first", and `reserve_each`
//! reporting "each of its leaf limits, depth first". However the same limits nest
//! (`AllOf` in `AllOf`, `Limits` in `Limits`, either in the other, three levels,
//! a nested set of one limit or of none), the set answers and reports as the
//! flat set of its leaves.

use crate::support::nested_sets::{self, log, minute, ten, Seen};
use sluicegate::algorithms::{Algorithm, AllOf, FixedWindow, Limits};
use sluicegate::clock::ManualClock;
use sluicegate::KeyedRateLimiter;
use std::time::Duration;

fn seen<A: Algorithm>(set: A) -> Seen {
    assert_eq!(set.limit_count(), 3, "three leaf limits");
    let clock = ManualClock::new();
    let limiter = KeyedRateLimiter::with_clock(set, clock.clone());
    nested_sets::run(&limiter, &clock)
}

/// A refusal by each leaf, in every shape, names that leaf (`limit_index`) and is
/// reported by it, among one report per leaf; every call answers and reports as
/// on the flat set.
#[test]
fn each_leaf_refuses_alone_and_is_named_by_its_place_in_every_shape() {
    let flat = seen(AllOf::new((ten(), minute(), log())));
    nested_sets::assert_each_leaf_refuses_alone(&flat, "flat");
    let shapes: [(&str, Seen); 6] = [
        (
            "AllOf((AllOf((ten, minute)), log))",
            seen(AllOf::new((AllOf::new((ten(), minute())), log()))),
        ),
        (
            "AllOf((ten, AllOf((minute, log))))",
            seen(AllOf::new((ten(), AllOf::new((minute(), log()))))),
        ),
        (
            "Limits[Limits[ten, minute], log]",
            seen(
                Limits::new()
                    .with(Limits::new().with(ten()).with(minute()))
                    .with(log()),
            ),
        ),
        (
            "Limits[ten, AllOf((minute, Limits[log]))]",
            seen(
                Limits::new()
                    .with(ten())
                    .with(AllOf::new((minute(), Limits::new().with(log())))),
            ),
        ),
        (
            "AllOf((Limits[], AllOf((ten, minute)), log))",
            seen(AllOf::new((
                Limits::new(),
                AllOf::new((ten(), minute())),
                log(),
            ))),
        ),
        (
            "AllOf((AllOf((AllOf((ten, minute)), log)), Limits[]))",
            seen(AllOf::new((
                AllOf::new((AllOf::new((ten(), minute())), log())),
                Limits::new(),
            ))),
        ),
    ];
    for (shape, seen) in &shapes {
        nested_sets::assert_each_leaf_refuses_alone(seen, shape);
        assert_eq!(seen, &flat, "{shape}: as the flat set");
    }
}

/// `limit_count`: "a set counts its leaf limits, a nested set's in its place (an
/// empty `Limits` has none)"; a refusal by a limit after an empty nested set is
/// numbered as if it were not there.
#[test]
fn an_empty_nested_set_counts_no_limit() {
    let window = |limit| FixedWindow::new(limit, Duration::from_secs(1)).unwrap();
    let set = AllOf::new((window(5), Limits::new(), window(1)));
    assert_eq!(set.limit_count(), 2);
    let mut state = set.initial_state(0);
    let mut each = Vec::new();
    let (grant, _) = set.reserve_each(&mut state, 0, 1, 0, &mut |d| each.push(d));
    assert_eq!((grant.limit_index(), each.len()), (1, 2));
    each.clear();
    let (refusal, _) = set.reserve_each(&mut state, 0, 1, 0, &mut |d| each.push(d));
    assert_eq!((refusal.limit_index(), each.len()), (1, 2));
    assert!(each[0].is_allowed() && !each[1].is_allowed(), "{each:?}");
}
