//! Shared by the tests of sets nested in sets: three limits, a script of calls on
//! three keys in which each limit in turn refuses a call alone, and the checks of
//! what that script must show. The same three limits nest in several shapes; each
//! shape must answer and report as the flat set `AllOf((ten, minute, log))`.
#![allow(dead_code)]

use sluicegate::algorithms::{Algorithm, FixedWindow, SlidingLog};
use sluicegate::clock::{Clock, ManualClock, Nanos};
use sluicegate::stores::Store;
use sluicegate::{Decision, KeyedRateLimiter, Verdict};
use std::time::Duration;

const SECOND: Nanos = 1_000_000_000;

/// Leaf limit 0: 2 per aligned 10 s.
pub fn ten() -> FixedWindow {
    FixedWindow::new(2, Duration::from_secs(10)).unwrap()
}

/// Leaf limit 1: 4 per aligned minute.
pub fn minute() -> FixedWindow {
    FixedWindow::new(4, Duration::from_secs(60)).unwrap()
}

/// Leaf limit 2: 6 in any 90 s.
pub fn log() -> SlidingLog {
    SlidingLog::new(6, Duration::from_secs(90)).unwrap()
}

/// The leaves' names, in the order every shape counts them.
pub const NAMES: [&str; 3] = ["ten", "minute", "log"];

/// One call of the script: seconds after the start (a whole minute), the key,
/// and the leaf that refuses it alone (with its `retry_after` in seconds), if any.
pub struct Call {
    pub at: u64,
    pub key: &'static str,
    pub refused_by: Option<(u32, u64)>,
}

const fn call(at: u64, key: &'static str) -> Call {
    Call {
        at,
        key,
        refused_by: None,
    }
}

const fn refused(at: u64, key: &'static str, leaf: u32, retry: u64) -> Call {
    Call {
        at,
        key,
        refused_by: Some((leaf, retry)),
    }
}

/// Key `a` spends the 10 s window (the minute and the log have room); `b` the
/// minute over two windows of 10 s (the log has room); `c` the log over two
/// minutes (the minute and the window have room when it refuses).
pub const SCRIPT: [Call; 17] = [
    call(0, "a"),
    call(0, "a"),
    refused(0, "a", 0, 10),
    call(0, "b"),
    call(0, "b"),
    call(0, "c"),
    call(0, "c"),
    call(10, "b"),
    call(10, "b"),
    call(10, "c"),
    call(10, "c"),
    refused(20, "b", 1, 40),
    call(60, "c"),
    call(60, "c"),
    refused(70, "c", 2, 20),
    // The window and the minute have room again for `a` and `b`.
    call(70, "a"),
    call(70, "b"),
];

/// Each call's decision and reports (`check_each`), in the script's order.
pub type Seen = Vec<(Decision, Vec<Decision>)>;

/// Runs the script on `limiter`, whose clock is `clock`: first moved on to the
/// next whole minute, so that the windows start with the script.
pub fn run<A, S>(
    limiter: &KeyedRateLimiter<&'static str, A, S, ManualClock>,
    clock: &ManualClock,
) -> Seen
where
    A: Algorithm,
    S: Store<&'static str, A>,
{
    let minute = 60 * SECOND;
    let start = clock.now().div_ceil(minute) * minute;
    SCRIPT
        .iter()
        .map(|step| {
            let at = start + step.at * SECOND;
            clock.advance_nanos(at - clock.now());
            let mut reports = Vec::new();
            let decision = limiter
                .check_each(&step.key, 1, &mut |d| reports.push(d))
                .unwrap();
            (decision, reports)
        })
        .collect()
}

/// What the script must show on any shape: one report per leaf on every call, a
/// grant everywhere the script expects none refused, and each refusal by its
/// leaf alone, named by that leaf's index, which reports the refusal.
pub fn assert_each_leaf_refuses_alone(seen: &Seen, shape: &str) {
    for (index, (step, (decision, reports))) in SCRIPT.iter().zip(seen).enumerate() {
        let at = format!("{shape}, call {index} ({} at {} s)", step.key, step.at);
        assert_eq!(reports.len(), NAMES.len(), "{at}: one report per leaf");
        match step.refused_by {
            None => assert!(decision.is_allowed(), "{at}: {decision:?}"),
            Some((leaf, retry)) => {
                assert_eq!(decision.verdict(), Verdict::Denied, "{at}");
                assert_eq!(decision.limit_index(), leaf, "{at}: the refusing leaf");
                assert_eq!(decision.retry_after(), Duration::from_secs(retry), "{at}");
                for (other, report) in reports.iter().enumerate() {
                    if other == leaf as usize {
                        assert_eq!(report.verdict(), Verdict::Denied, "{at}: {report:?}");
                        assert_eq!(report.retry_after(), decision.retry_after(), "{at}");
                    } else {
                        assert!(report.is_allowed(), "{at}: leaf {other}: {report:?}");
                    }
                }
            }
        }
    }
    // A grant's reports name each leaf's own limit, in order.
    let limits: Vec<u64> = seen[0].1.iter().map(Decision::limit).collect();
    assert_eq!(limits, [2, 4, 6], "{shape}");
}
