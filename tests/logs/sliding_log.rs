//! The seeds' sliding-log examples replayed step by step on virtual time. The clock's
//! origin stands for 12:00:00 in seed 001's table.

use sluicegate::algorithms::{Algorithm, Decision, SlidingLog};
use sluicegate::clock::ManualClock;
use sluicegate::{Clock, Error, RateLimiter, Verdict};
use std::time::Duration;

const S: u64 = 1_000_000_000;

fn secs(s: u64) -> Duration {
    Duration::from_secs(s)
}

fn live(log: &SlidingLog, state: &<SlidingLog as Algorithm>::State, at: u64) -> Vec<u64> {
    log.live_entries(state, at).map(|(t, _)| t / S).collect()
}

/// Reserves one permit at each step's time (in seconds) on a new log's state,
/// asserting the step's verdict, remaining count and live set; answers the decisions.
fn replay(log: &SlidingLog, steps: &[(u64, bool, u64, &[u64])]) -> Vec<Decision> {
    let mut state = log.initial_state(0);
    let mut decisions = Vec::new();
    for &(t, allowed, remaining, set) in steps {
        let d = log.reserve::<Decision>(&mut state, t * S, 1, 0);
        assert_eq!(d.is_allowed(), allowed, "at {t} s");
        assert_eq!(d.remaining(), remaining, "remaining at {t} s");
        assert_eq!(live(log, &state, t * S), set, "set at {t} s");
        decisions.push(d);
    }
    decisions
}

/// Seed 001, "Sliding Log": 3 requests per 60 s, up to 12:01:40, where nothing
/// has been refused yet and both logs below answer alike: (time, allowed,
/// remaining, the set after the call).
const SEED_001_UNTIL_THE_REFUSAL: [(u64, bool, u64, &[u64]); 5] = [
    (5, true, 2, &[5]),
    (15, true, 1, &[5, 15]),
    (61, true, 0, &[5, 15, 61]),
    // 12:01:10: "the initial request was more than 60 seconds ago".
    (70, true, 0, &[15, 61, 70]),
    (100, true, 0, &[61, 70, 100]),
];

/// The seed's table adds the refused 12:01:50 request to the set ("failed
/// requests may still be added to the set", its own listed con), which is this
/// crate's recording option; the default log keeps only granted calls. Both
/// replays below.
#[test]
fn seed_001_sliding_log_table_recording_refusals_as_the_seed_does() {
    let log = SlidingLog::new(3, secs(60))
        .unwrap()
        .with_rejected_recorded();
    let steps = [
        &SEED_001_UNTIL_THE_REFUSAL[..],
        &[
            // 12:01:50: rejected, "4 requests in the last 60 seconds", yet added.
            (110, false, 0, &[61, 70, 100, 110]),
            // 12:02:20: allowed, {12:01:40, 12:01:50, 12:02:20}, exactly as the table.
            (140, true, 0, &[100, 110, 140]),
        ],
    ]
    .concat();
    for d in replay(&log, &steps) {
        assert_eq!(d.limit(), 3);
    }
}

#[test]
fn seed_001_sliding_log_table_counting_only_granted_calls() {
    let log = SlidingLog::new(3, secs(60)).unwrap();
    let steps = [
        &SEED_001_UNTIL_THE_REFUSAL[..],
        &[
            (110, false, 0, &[61, 70, 100]),
            // Without the refused 12:01:50 entry, only 12:01:40 is left: 1 remains.
            (140, true, 1, &[100, 140]),
        ],
    ]
    .concat();
    replay(&log, &steps);
}

/// The refusal at 12:01:50: the granted-only log frees room when 12:01:01 expires
/// (12:02:01); the recording log must also wait out 12:01:10 (12:02:10), because
/// the refused attempt itself now counts.
#[test]
fn seed_001_retry_after_is_exact_in_both_modes() {
    for (log, retry) in [
        (SlidingLog::new(3, secs(60)).unwrap(), 11),
        (
            SlidingLog::new(3, secs(60))
                .unwrap()
                .with_rejected_recorded(),
            20,
        ),
    ] {
        let mut state = log.initial_state(0);
        for t in [5, 15, 61, 70, 100] {
            assert!(log
                .reserve::<Decision>(&mut state, t * S, 1, 0)
                .is_allowed());
        }
        let peeked = log.peek(&state, 110 * S, 1);
        let d = log.reserve::<Decision>(&mut state, 110 * S, 1, 0);
        assert_eq!(peeked, d, "peek answers what reserve does");
        assert_eq!(d.verdict(), Verdict::Denied);
        assert_eq!(d.retry_after(), secs(retry));
        let at = (110 + retry) * S;
        assert!(!log.peek(&state, at - 1, 1).is_allowed());
        assert!(log.reserve::<Decision>(&mut state, at, 1, 0).is_allowed());
    }
}

/// Seed 004: "if a user is continually attempting actions more quickly than the
/// allowed rate, all of their actions will be blocked until they pause".
#[test]
fn seed_004_hammering_client_stays_blocked_until_it_pauses() {
    let log = SlidingLog::new(3, secs(10))
        .unwrap()
        .with_rejected_recorded();
    let mut state = log.initial_state(0);
    let mut granted = vec![];
    for t in 0..=60 {
        if log
            .reserve::<Decision>(&mut state, t * S, 1, 0)
            .is_allowed()
        {
            granted.push(t);
        }
        assert!(
            state.entry_count() <= 4,
            "the log holds at most limit + 1 entries"
        );
    }
    assert_eq!(granted, vec![0, 1, 2]);
    // It pauses. The log holds the attempts at 57..=60; a call fits once two of
    // them have expired, at 68 s. (A peek: a refused attempt would be recorded.)
    assert!(!log.peek(&state, 68 * S - 1, 1).is_allowed());
    // A peek answers what a reserve would: one more attempt at 60 s would itself be
    // recorded, pushing the end of the ban to 69 s.
    assert_eq!(log.peek(&state, 60 * S, 1).retry_after(), secs(9));
    assert!(log
        .reserve::<Decision>(&mut state, 68 * S, 1, 0)
        .is_allowed());

    // The default log lets a hammering client through 3 times every 10 s.
    let plain = SlidingLog::new(3, secs(10)).unwrap();
    let mut state = plain.initial_state(0);
    let granted: Vec<u64> = (0..=30)
        .filter(|&t| {
            plain
                .reserve::<Decision>(&mut state, t * S, 1, 0)
                .is_allowed()
        })
        .collect();
    assert_eq!(granted, vec![0, 1, 2, 10, 11, 12, 20, 21, 22, 30]);
}

/// Seed 004's "minimum difference" (seed 000's "minimum distance"): a call is also
/// refused while the previous one is too recent.
#[test]
fn seed_004_minimum_spacing() {
    let clock = ManualClock::new();
    let log = SlidingLog::new(10, secs(60))
        .unwrap()
        .with_min_spacing(Duration::from_millis(500));
    let limiter = RateLimiter::with_clock(log, clock.clone());
    assert!(limiter.try_acquire());
    let d = limiter.check(1).unwrap();
    assert_eq!(d.verdict(), Verdict::Denied);
    assert_eq!(d.remaining(), 9);
    assert_eq!(d.retry_after(), Duration::from_millis(500));
    clock.advance(Duration::from_millis(499));
    assert!(!limiter.try_acquire());
    clock.advance(Duration::from_millis(1));
    assert!(limiter.try_acquire());
    // Blocking acquires space themselves out.
    for _ in 0..3 {
        limiter.acquire().unwrap();
    }
    assert_eq!(clock.take_sleeps_secs(), vec![0.5, 0.0, 0.5, 0.0, 0.5, 0.0]);
}

/// With recorded refusals, the spacing runs from the last attempt, granted or not.
#[test]
fn recorded_refusals_restart_the_spacing() {
    let log = SlidingLog::new(10, secs(60))
        .unwrap()
        .with_min_spacing(secs(1))
        .with_rejected_recorded();
    let mut state = log.initial_state(0);
    assert!(log.reserve::<Decision>(&mut state, 0, 1, 0).is_allowed());
    let d = log.reserve::<Decision>(&mut state, S / 2, 1, 0);
    assert_eq!(d.retry_after(), secs(1)); // from the refused attempt at 0.5 s
    assert!(!log.reserve::<Decision>(&mut state, S, 1, 0).is_allowed());
    assert!(log
        .reserve::<Decision>(&mut state, 2 * S, 1, 0)
        .is_allowed());
}

#[test]
fn variable_cost_never_and_decision_fields() {
    let clock = ManualClock::new();
    let log = SlidingLog::new(5, secs(10)).unwrap();
    let limiter = RateLimiter::with_clock(log, clock.clone());
    assert_eq!(limiter.check(6).unwrap().verdict(), Verdict::Never);
    assert_eq!(limiter.acquire_n(6), Err(Error::Never { cost: 6 }));
    assert_eq!(
        futures::executor::block_on(limiter.to_async().acquire_n(6)),
        Err(Error::Never { cost: 6 })
    );
    let d = limiter.check(2).unwrap(); // POST /user costs 2 (seed 001)
    assert!(d.is_allowed());
    assert_eq!(
        (d.limit(), d.remaining(), d.reset_after()),
        (5, 3, secs(10))
    );
    clock.advance(secs(3));
    assert!(limiter.try_acquire_n(3).unwrap());
    clock.advance(secs(1));
    let d = limiter.check(2).unwrap();
    assert_eq!(d.verdict(), Verdict::Denied);
    assert_eq!(
        (d.remaining(), d.retry_after(), d.reset_after()),
        (0, secs(6), secs(9))
    );
    // The cost-2 entry leaves at 10 s: a blocking acquire of 2 waits exactly that.
    assert_eq!(limiter.acquire_n(2).unwrap(), secs(6));
    assert_eq!(clock.now(), 10 * S);
}

#[test]
fn replenishment_and_exact_expiry_boundary() {
    let log = SlidingLog::new(1, secs(10))
        .unwrap()
        .with_min_spacing(secs(15));
    let mut state = log.initial_state(0);
    assert!(log.is_replenished(&state, 0));
    assert!(log.reserve::<Decision>(&mut state, S, 1, 0).is_allowed());
    // The entry stops counting at exactly 11 s, but the spacing runs to 16 s.
    assert!(!log.is_replenished(&state, 11 * S));
    assert_eq!(log.peek(&state, 11 * S, 1).retry_after(), secs(5));
    assert!(log.is_replenished(&state, 16 * S));
    let plain = SlidingLog::new(1, secs(10)).unwrap();
    let mut state = plain.initial_state(0);
    assert!(plain.reserve::<Decision>(&mut state, S, 1, 0).is_allowed());
    assert!(!plain
        .reserve::<Decision>(&mut state, 11 * S - 1, 1, 0)
        .is_allowed());
    assert!(plain.is_replenished(&state, 11 * S));
    assert!(plain
        .reserve::<Decision>(&mut state, 11 * S, 1, 0)
        .is_allowed());
}

#[test]
fn time_going_backwards_grants_nothing_extra() {
    let log = SlidingLog::new(2, secs(10)).unwrap();
    let mut state = log.initial_state(0);
    assert!(log
        .reserve::<Decision>(&mut state, 20 * S, 2, 0)
        .is_allowed());
    assert!(!log
        .reserve::<Decision>(&mut state, 5 * S, 1, 0)
        .is_allowed());
    assert!(!log.reserve::<Decision>(&mut state, 0, 1, 0).is_allowed());
    assert_eq!(live(&log, &state, 20 * S), vec![20]);
}

#[test]
fn bad_parameters_are_typed_errors() {
    assert!(matches!(
        SlidingLog::new(0, secs(1)),
        Err(sluicegate::ConfigError::InvalidCount { what: "limit", .. })
    ));
    assert!(matches!(
        SlidingLog::new((1 << 20) + 1, secs(1)),
        Err(sluicegate::ConfigError::InvalidCount { what: "limit", .. })
    ));
    assert!(SlidingLog::new(1 << 20, secs(1)).is_ok());
    assert!(matches!(
        SlidingLog::new(1, Duration::ZERO),
        Err(sluicegate::ConfigError::InvalidDuration { what: "window", .. })
    ));
    assert!(matches!(
        SlidingLog::new(1, Duration::MAX),
        Err(sluicegate::ConfigError::InvalidDuration { .. })
    ));
}

#[test]
fn the_log_allocates_once_for_its_slots() {
    let log = SlidingLog::new(100, secs(1)).unwrap();
    let mut state = log.initial_state(0);
    let bytes = state.heap_bytes();
    assert!(bytes >= 100 * 16);
    for t in 0..1000u64 {
        log.reserve::<Decision>(&mut state, t * 7_000_000, 1, 0);
        assert!(state.entry_count() <= 100);
    }
    assert_eq!(state.heap_bytes(), bytes, "no growth on the hot path");
    let recording = log.with_rejected_recorded();
    let mut state = recording.initial_state(0);
    let bytes = state.heap_bytes();
    for t in 0..1000u64 {
        recording.reserve::<Decision>(&mut state, t * 7_000_000, 1, 0);
        assert!(state.entry_count() <= 101);
    }
    assert_eq!(state.heap_bytes(), bytes);
}

#[test]
fn extreme_times_and_costs_do_not_panic() {
    let log = SlidingLog::new(3, secs(200 * 365 * 86_400))
        .unwrap()
        .with_min_spacing(Duration::MAX)
        .with_rejected_recorded();
    let mut state = log.initial_state(u64::MAX);
    for now in [u64::MAX - 5, u64::MAX, 0] {
        for cost in [1, 3, 4, u64::MAX] {
            let d = log.reserve::<Decision>(&mut state, now, cost, 0);
            let _ = (d.retry_after(), d.reset_after(), d.remaining());
            let _ = log.peek(&state, now, cost);
            let _ = log.is_replenished(&state, now);
        }
    }
    assert!(state.entry_count() <= 4);
}

/// Many threads at one virtual instant: the cell serialises them, so exactly the
/// limit is granted: the log in both modes and the bucketed window.
#[test]
fn concurrent_callers_get_exactly_the_limit() {
    let clock = ManualClock::new();
    let log = RateLimiter::with_clock(SlidingLog::new(50, secs(60)).unwrap(), clock.clone());
    let recording = RateLimiter::with_clock(
        SlidingLog::new(50, secs(60))
            .unwrap()
            .with_rejected_recorded(),
        clock.clone(),
    );
    let window = RateLimiter::with_clock(
        sluicegate::algorithms::SlidingWindowBuckets::weighted(50, secs(60), secs(1)).unwrap(),
        clock.clone(),
    );
    let granted = std::thread::scope(|scope| {
        let handles: Vec<_> = (0..4)
            .map(|_| {
                let (log, recording, window) = (&log, &recording, &window);
                scope.spawn(move || {
                    let mut granted = [0u32; 3];
                    for _ in 0..100 {
                        granted[0] += u32::from(log.try_acquire());
                        granted[1] += u32::from(recording.try_acquire());
                        granted[2] += u32::from(window.try_acquire());
                    }
                    granted
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().unwrap())
            .fold([0u32; 3], |a, b| [a[0] + b[0], a[1] + b[1], a[2] + b[2]])
    });
    assert_eq!(granted, [50, 50, 50]);
}
