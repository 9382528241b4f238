//! Sets nested in sets, in memory, held to the docs: "a nested set decides as one
//! member, and its limits are counted and reported in its place" (`multi`),
//! `limit_index` "counting the set's leaf limits depth first", and `reserve_each`
//! reporting "each of its leaf limits, depth first". However the same limits nest
//! (`AllOf` in `AllOf`, `Limits` in `Limits`, either in the other, three levels,
//! a nested set of one limit or of none), the set answers and reports as the
//! flat set of its leaves.

use crate::support::nested_sets::{self, log, minute, ten, Seen};
use proptest::prelude::*;
use sluicegate::algorithms::{
    Algorithm, AllOf, Counting, FixedWindow, Limits, SlidingLog, SlidingWindowCounter, SmoothBursty,
};
use sluicegate::clock::{ManualClock, Nanos};
use sluicegate::{Decision, KeyedRateLimiter};
use std::time::Duration;

const MS: Nanos = 1_000_000;

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

/// `multi`'s table: a never's `reset_after` is the "longest of all members"; a
/// nested set that can never grant a caller willing to wait answers with its
/// other limits' answers to that caller (their grants), as the flat set does.
#[test]
fn a_nested_set_that_can_never_grant_a_waiting_caller_answers_as_the_flat_set() {
    let (a, b, c, d) = leaves();
    let flat = Limits::new().with(a).with(b).with(c).with(d);
    let nested = AllOf::new((AllOf::new((a, b)), c, d));
    let (mut flat_state, mut nested_state) = (flat.initial_state(0), nested.initial_state(0));
    for (cost, max_wait) in [(1, 0), (4, u64::MAX), (4, 30 * MS)] {
        let expected = flat.reserve::<Decision>(&mut flat_state, 0, cost, max_wait);
        let got = nested.reserve::<Decision>(&mut nested_state, 0, cost, max_wait);
        assert_eq!(got, expected, "cost {cost}, max_wait {max_wait}");
        // The log of 3 can never grant 4.
        assert_eq!(expected.is_never(), cost == 4, "{expected:?}");
    }
}

/// Four leaves of four kinds: a recording log (its state owns heap memory, its
/// refusals count alone), Guava's pay-later bucket (its own standing), a window
/// and a counter of attempts.
fn leaves() -> (SlidingLog, SmoothBursty, FixedWindow, SlidingWindowCounter) {
    (
        SlidingLog::new(3, Duration::from_millis(100))
            .unwrap()
            .with_rejected_recorded(),
        SmoothBursty::new(20.0).unwrap(),
        FixedWindow::new(4, Duration::from_millis(50)).unwrap(),
        SlidingWindowCounter::new(5, Duration::from_millis(80))
            .unwrap()
            .with_counting(Counting::Attempts),
    )
}

/// A set and its state, stepped by every shape alike.
struct Stepped<A: Algorithm> {
    set: A,
    state: A::State,
}

impl<A: Algorithm> Stepped<A> {
    fn new(set: A) -> Self {
        let state = set.initial_state(0);
        Stepped { set, state }
    }

    /// One step: a reserve, a reporting reserve or a peek; its decision and
    /// reports.
    fn step(
        &mut self,
        op: u8,
        now: Nanos,
        cost: u64,
        max_wait: Nanos,
    ) -> (Decision, Vec<Decision>) {
        let mut each = Vec::new();
        let decision = match op {
            0 => self
                .set
                .reserve::<Decision>(&mut self.state, now, cost, max_wait),
            1 => {
                let reports = &mut |d| each.push(d);
                self.set
                    .reserve_each(&mut self.state, now, cost, max_wait, reports)
                    .0
            }
            _ => self.set.peek(&self.state, now, cost),
        };
        (decision, each)
    }
}

fn max_wait(choice: u8) -> Nanos {
    match choice {
        0 => 0,
        1 => 30 * MS,
        _ => u64::MAX,
    }
}

proptest! {
    /// Random traces of reserves (with and without a wait), reporting reserves and
    /// peeks: every nested shape decides, `limit_index` included, and reports as
    /// the flat set of the same four leaves.
    #[test]
    fn every_nested_shape_decides_and_reports_as_the_flat_set(
        calls in proptest::collection::vec((0u64..40, 1u64..5, 0u8..3, 0u8..3), 1..60),
    ) {
        let (a, b, c, d) = leaves();
        let mut flat = Stepped::new(Limits::new().with(a).with(b).with(c).with(d));
        let mut first_pair = Stepped::new(AllOf::new((AllOf::new((a, b)), c, d)));
        let mut mixed = Stepped::new(AllOf::new((
            a,
            Limits::new().with(b).with(AllOf::new((c, d))),
        )));
        let mut three_levels =
            Stepped::new(AllOf::new((AllOf::new((a, AllOf::new((b, c)))), d)));
        let mut one_and_none = Stepped::new(
            Limits::new()
                .with(Limits::new().with(a))
                .with(Limits::new())
                .with(AllOf::new((b, c)))
                .with(d),
        );
        let mut now = 0;
        for (i, (advance, cost, op, wait)) in calls.into_iter().enumerate() {
            now += advance * MS;
            let wait = max_wait(wait);
            let expected = flat.step(op, now, cost, wait);
            if op == 1 {
                prop_assert_eq!(expected.1.len(), 4);
            }
            let shapes = [
                ("AllOf((AllOf((a, b)), c, d))", first_pair.step(op, now, cost, wait)),
                ("AllOf((a, Limits[b, AllOf((c, d))]))", mixed.step(op, now, cost, wait)),
                (
                    "AllOf((AllOf((a, AllOf((b, c)))), d))",
                    three_levels.step(op, now, cost, wait),
                ),
                (
                    "Limits[Limits[a], Limits[], AllOf((b, c)), d]",
                    one_and_none.step(op, now, cost, wait),
                ),
            ];
            for (shape, got) in shapes {
                prop_assert_eq!(&got, &expected, "call {} ({}) on {}", i, op, shape);
            }
        }
    }
}
