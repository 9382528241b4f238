//! Sets whose members' refusals count on their own (a sliding log recording
//! rejected attempts, a sliding window counter counting attempts). A refused set
//! records nothing in any member, so such a member answers the set as the same
//! limit without recorded refusals would: the set's `retry_after` is the first
//! instant the call succeeds, and a set of recording members decides exactly as
//! the same set of non-recording ones.

use crate::support::rng::Rng;
use sluicegate::algorithms::{
    Algorithm, AllOf, Counting, Decision, FixedWindow, Limits, Receipt, SlidingLog,
    SlidingWindowCounter, SmoothBursty, Verdict,
};
use sluicegate::clock::Nanos;
use std::time::Duration;

const MS: Nanos = 1_000_000;
const SEC: Nanos = 1_000_000_000;

fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}

/// One call of a trace: reserve (with a receipt, or reporting each limit), or
/// peek.
#[derive(Clone, Copy, Debug)]
enum Call {
    Reserve { cost: u64, max_wait: Nanos },
    Each { cost: u64 },
    Peek { cost: u64 },
}

/// A random trace: calls at non-decreasing instants, gaps up to `max_gap`, costs
/// 1..=3, hammering stretches of zero gap.
fn trace(seed: u64, calls: usize, max_gap: Nanos) -> Vec<(Nanos, Call)> {
    let mut rng = Rng::new(seed);
    let mut now = 0;
    (0..calls)
        .map(|_| {
            if !rng.chance(40) {
                now += rng.below(max_gap + 1);
            }
            let cost = 1 + rng.below(3);
            let call = match rng.below(10) {
                0 => Call::Peek { cost },
                1 => Call::Each { cost },
                2 => Call::Reserve {
                    cost,
                    max_wait: rng.below(max_gap),
                },
                _ => Call::Reserve { cost, max_wait: 0 },
            };
            (now, call)
        })
        .collect()
}

/// Every answer of `algorithm` to `calls`: each decision, the receipt of a
/// reserve, and each limit's report.
fn answers<A: Algorithm>(algorithm: &A, calls: &[(Nanos, Call)]) -> Vec<(Decision, Receipt)> {
    let mut state = algorithm.initial_state(0);
    let mut out = Vec::new();
    for &(now, call) in calls {
        match call {
            Call::Reserve { cost, max_wait } => {
                out.push(algorithm.reserve(&mut state, now, cost, max_wait));
            }
            Call::Each { cost } => {
                let mut each = Vec::new();
                out.push(algorithm.reserve_each(&mut state, now, cost, 0, &mut |d| each.push(d)));
                out.extend(each.into_iter().map(|d| (d, Receipt::NONE)));
            }
            Call::Peek { cost } => out.push((algorithm.peek(&state, now, cost), Receipt::NONE)),
        }
    }
    out
}

fn denied(decision: &Decision) -> bool {
    decision.verdict() == Verdict::Denied
}

fn refusals(answers: &[(Decision, Receipt)]) -> usize {
    answers.iter().filter(|(d, _)| denied(d)).count()
}

/// The log and counter of the traces below, recording their refusals or not.
fn log(record: bool) -> SlidingLog {
    let log = SlidingLog::new(5, ms(100)).unwrap().with_min_spacing(ms(3));
    if record {
        log.with_rejected_recorded()
    } else {
        log
    }
}

fn counter(record: bool) -> SlidingWindowCounter {
    let counting = if record {
        Counting::Attempts
    } else {
        Counting::Admitted
    };
    SlidingWindowCounter::new(4, ms(60))
        .unwrap()
        .with_counting(counting)
}

#[test]
fn a_set_of_recording_members_decides_as_the_same_set_without_recording() {
    let calls = trace(1, 4_000, 12 * MS);
    // On its own, a recording member answers otherwise: the traces' refusals
    // are recorded, and matter.
    assert_ne!(answers(&log(true), &calls), answers(&log(false), &calls));
    assert_ne!(
        answers(&counter(true), &calls),
        answers(&counter(false), &calls)
    );
    let bursty = SmoothBursty::new(200.0).unwrap();
    let pairs = [
        (
            answers(&AllOf::new((log(true), counter(true))), &calls),
            answers(&AllOf::new((log(false), counter(false))), &calls),
        ),
        (
            answers(&AllOf::new((bursty, log(true), counter(true))), &calls),
            answers(&AllOf::new((bursty, log(false), counter(false))), &calls),
        ),
        (
            answers(
                &Limits::new()
                    .with(counter(true))
                    .with(bursty)
                    .with(log(true)),
                &calls,
            ),
            answers(
                &Limits::new()
                    .with(counter(false))
                    .with(bursty)
                    .with(log(false)),
                &calls,
            ),
        ),
        // Nested: the inner set's members answer the outer set as members too.
        (
            answers(
                &AllOf::new((AllOf::new((log(true), bursty)), counter(true))),
                &calls,
            ),
            answers(
                &AllOf::new((AllOf::new((log(false), bursty)), counter(false))),
                &calls,
            ),
        ),
    ];
    for (recording, plain) in pairs {
        assert!(refusals(&plain) > 500, "{} refusals", refusals(&plain));
        assert_eq!(recording, plain);
    }
}

/// Each refusal's `retry_after` is exact: the set refuses one nanosecond before
/// it and grants at it, as the state stands (nothing else happens between).
#[test]
fn a_refused_sets_retry_after_is_the_first_instant_it_grants() {
    fn check<A: Algorithm>(set: &A, seed: u64) -> usize {
        let mut state = set.initial_state(0);
        let mut checked = 0;
        for (now, call) in trace(seed, 3_000, 12 * MS) {
            let (cost, max_wait) = match call {
                Call::Reserve { cost, max_wait } => (cost, max_wait),
                Call::Each { cost } | Call::Peek { cost } => (cost, 0),
            };
            let decision: Decision = set.reserve(&mut state, now, cost, max_wait);
            if !denied(&decision) {
                continue;
            }
            // Asked again at now + s with what is left of the deadline (see
            // Decision::retry_after).
            let retry = decision.retry_after_nanos();
            let mut before = state.clone();
            let left = max_wait.saturating_sub(retry - 1);
            let refused: Decision = set.reserve(&mut before, now + retry - 1, cost, left);
            assert!(denied(&refused), "{now}: {decision:?} then {refused:?}");
            let mut after = state.clone();
            let left = max_wait.saturating_sub(retry);
            let granted: Decision = set.reserve(&mut after, now + retry, cost, left);
            assert!(granted.is_allowed(), "{now}: {decision:?} then {granted:?}");
            checked += 1;
        }
        checked
    }
    let window = FixedWindow::new(50, ms(1_000)).unwrap();
    assert!(check(&AllOf::new((log(true), window)), 2) > 500);
    assert!(check(&AllOf::new((window, counter(true))), 3) > 500);
    assert!(check(&Limits::new().with(log(true)).with(counter(true)), 4) > 500);
}

/// The documented case: a log of 3 in 10 s recording refusals, inside a set,
/// hammered while full, grants again when its first entry leaves at 10 s; on its
/// own it would not, its refusals being logged.
#[test]
fn hammering_a_set_does_not_extend_a_recording_members_ban() {
    let window = FixedWindow::new(100, Duration::from_secs(1)).unwrap();
    let log = SlidingLog::new(3, Duration::from_secs(10))
        .unwrap()
        .with_rejected_recorded();
    let set = AllOf::new((window, log));
    let mut state = set.initial_state(0);
    let mut alone = log.initial_state(0);
    for t in [0, SEC, 2 * SEC] {
        assert!(set.reserve::<Decision>(&mut state, t, 1, 0).is_allowed());
        assert!(log.reserve::<Decision>(&mut alone, t, 1, 0).is_allowed());
    }
    for t in (4..10).map(|s| s * SEC) {
        let refusal: Decision = set.reserve(&mut state, t, 1, 0);
        assert_eq!(refusal.limit_index(), 1);
        assert_eq!(refusal.retry_after_nanos(), 10 * SEC - t);
        assert_eq!(set.peek(&state, t, 1), refusal);
        assert!(log.reserve::<Decision>(&mut alone, t, 1, 0).verdict() == Verdict::Denied);
    }
    assert!(set
        .reserve::<Decision>(&mut state, 10 * SEC, 1, 0)
        .is_allowed());
    assert!(
        log.reserve::<Decision>(&mut alone, 10 * SEC, 1, 0)
            .verdict()
            == Verdict::Denied
    );
}
