//! How each algorithm reports it stands after a grant (`Algorithm::reserve_each`,
//! what the server sends as `RateLimit`'s `r` and `t`), on virtual time: `t` is the
//! time until more than `r` permits are there (draft-ietf-httpapi-ratelimit-headers
//! -10: "until additional quota ... is made available"), not until the limit is
//! whole again. Each case states its exact `t`, and checks it by the definition: a
//! call for `r + 1` permits is refused a nanosecond before `t` and granted at `t`
//! (for Guava's bursty limiter, which grants any cost at once by pay later, its
//! stored permits read `r` before and `r + 1` at `t`).

use sluicegate::algorithms::{
    Algorithm, FixedWindow, LeakyBucket, SlidingLog, SlidingWindowBuckets, SlidingWindowCounter,
    SmoothBursty, SmoothWarmingUp,
};
use sluicegate::clock::Nanos;
use sluicegate::Decision;
use std::time::Duration;

const S: Nanos = 1_000_000_000;
const MS: Nanos = 1_000_000;

/// Grants `cost` at `now` through `reserve_each`: the grant and how the one limit
/// reports it stands.
fn grant<A: Algorithm>(
    limit: &A,
    state: &mut A::State,
    now: Nanos,
    cost: u64,
) -> (Decision, Decision) {
    let mut each = Vec::new();
    let (decision, _) = limit.reserve_each(state, now, cost, 0, &mut |d| each.push(d));
    assert!(decision.is_allowed(), "{decision:?}");
    assert_eq!(each.len(), 1);
    (decision, each[0])
}

/// Asserts the standing after a grant at `now`: `remaining` and `t` as expected,
/// the grant's `limit` and `reset_after` kept, and `t` the first instant at which
/// `r + 1` permits pass.
fn assert_standing<A: Algorithm>(
    limit: &A,
    state: &A::State,
    now: Nanos,
    (decision, standing): (Decision, Decision),
    (remaining, t): (u64, Nanos),
) {
    assert_eq!(
        (standing.remaining(), standing.retry_after_nanos()),
        (remaining, t),
        "{standing:?}"
    );
    assert_eq!(standing.remaining(), decision.remaining());
    assert_eq!(standing.limit(), decision.limit());
    assert_eq!(standing.reset_after_nanos(), decision.reset_after_nanos());
    let more = remaining + 1;
    assert!(!limit.peek(state, now + t - 1, more).is_allowed());
    assert!(limit.peek(state, now + t, more).is_allowed());
}

/// One call of 1 per second from 0 s to 30 s inclusive (31 permits) against a limit
/// of 100 a minute; answers the last grant and its standing.
fn a_call_a_second_for_thirty_seconds<A: Algorithm>(
    limit: &A,
    state: &mut A::State,
) -> (Decision, Decision) {
    let mut last = None;
    for second in 0..=30 {
        last = Some(grant(limit, state, second * S, 1));
    }
    last.unwrap()
}

fn minute() -> Duration {
    Duration::from_secs(60)
}

#[test]
fn fixed_window_more_comes_when_the_window_ends() {
    let window = FixedWindow::new(5, Duration::from_secs(10)).unwrap();
    let mut state = window.initial_state(0);
    let reported = grant(&window, &mut state, 4 * S, 2);
    assert_standing(&window, &state, 4 * S, reported, (3, 6 * S));
}

#[test]
fn sliding_log_more_comes_when_the_oldest_permit_leaves() {
    // The permit of 0 s leaves at 60 s: 30 s on, not 60 (when the log is empty).
    let log = SlidingLog::new(100, minute()).unwrap();
    let mut state = log.initial_state(0);
    let reported = a_call_a_second_for_thirty_seconds(&log, &mut state);
    assert_eq!(reported.0.reset_after_nanos(), 60 * S);
    assert_standing(&log, &state, 30 * S, reported, (69, 30 * S));
}

#[test]
fn sliding_window_counter_more_comes_as_the_last_window_weighs_less() {
    // All 31 in the window [0 s, 60 s): 70 fit once that window, weighed by what
    // is left of it, counts 30: 60/31 s into the next one, 31.94 s on.
    let counter = SlidingWindowCounter::new(100, minute()).unwrap();
    let mut state = counter.initial_state(0);
    let reported = a_call_a_second_for_thirty_seconds(&counter, &mut state);
    let t = 30 * S + (60 * S).div_ceil(31);
    assert_standing(&counter, &state, 30 * S, reported, (69, t));
}

#[test]
fn sliding_buckets_more_comes_when_the_oldest_bucket_leaves() {
    // Buckets of 10 s: [0, 10) holds 10 permits and leaves the window at 60 s.
    let dropping = SlidingWindowBuckets::dropping(100, minute(), Duration::from_secs(10)).unwrap();
    let mut state = dropping.initial_state(0);
    let reported = a_call_a_second_for_thirty_seconds(&dropping, &mut state);
    assert_standing(&dropping, &state, 30 * S, reported, (69, 30 * S));
    // Weighted, that bucket counts the part of it still inside the window: one
    // permit's worth has left it 1 s after 60 s.
    let weighted = SlidingWindowBuckets::weighted(100, minute(), Duration::from_secs(10)).unwrap();
    let mut state = weighted.initial_state(0);
    let reported = a_call_a_second_for_thirty_seconds(&weighted, &mut state);
    assert_standing(&weighted, &state, 30 * S, reported, (69, 31 * S));
}

#[test]
fn leaky_meter_more_comes_with_the_next_drained_permit() {
    // 3 of 10 poured in at 0 s, draining 1 a second: the 8th fits at 1 s, though
    // the bucket is empty only at 3 s.
    let meter = LeakyBucket::meter(10, 1, Duration::from_secs(1)).unwrap();
    let mut state = meter.initial_state(0);
    let reported = grant(&meter, &mut state, 0, 3);
    assert_eq!(reported.0.reset_after_nanos(), 3 * S);
    assert_standing(&meter, &state, 0, reported, (7, S));
    // At a rate whose interval is no whole number of nanoseconds: 1/3 s.
    let thirds = LeakyBucket::meter(2, 3, Duration::from_secs(1)).unwrap();
    let mut state = thirds.initial_state(0);
    let reported = grant(&thirds, &mut state, 0, 1);
    assert_standing(&thirds, &state, 0, reported, (1, S / 3 + 1));
}

#[test]
fn leaky_queue_more_comes_when_a_caller_would_not_wait() {
    // A server does not wait: 8 pass at once only once the queue is idle again.
    let queue = LeakyBucket::queue(10, 1, Duration::from_secs(1)).unwrap();
    let mut state = queue.initial_state(0);
    let reported = grant(&queue, &mut state, 0, 3);
    assert_standing(&queue, &state, 0, reported, (7, 3 * S));
}

#[test]
fn bursty_more_comes_with_the_next_stored_permit() {
    // 2 a second saving up to 3 s: 6 stored by 3 s. Taking 3 leaves 3; the 4th is
    // stored 0.5 s later (the bucket is full again only 1.5 s later).
    let bursty = SmoothBursty::new(2.0)
        .unwrap()
        .with_max_burst(Duration::from_secs(3))
        .unwrap();
    let mut state = bursty.initial_state(0);
    let now = 3 * S;
    let reported = grant(&bursty, &mut state, now, 3);
    assert_eq!(reported.0.reset_after_nanos(), 1_500 * MS);
    assert_eq!(
        (reported.1.remaining(), reported.1.retry_after_nanos()),
        (3, 500 * MS)
    );
    let stored = |at: Nanos| bursty.peek(&state, at, 1).remaining() + 1;
    assert_eq!((stored(now + 500 * MS - 1), stored(now + 500 * MS)), (3, 4));
    // Pay later: 4 more go at once, a debt of half a second the next call waits
    // out, which is when more comes.
    let reported = grant(&bursty, &mut state, now, 4);
    assert_standing(&bursty, &state, now, reported, (0, 500 * MS));
}

#[test]
fn warming_up_more_comes_when_the_next_call_may_go() {
    // 2 a second warming up over 4 s: the first permit from cold costs 1.375 s.
    let warming = SmoothWarmingUp::new(2.0, Duration::from_secs(4)).unwrap();
    let mut state = warming.initial_state(0);
    let reported = grant(&warming, &mut state, 0, 1);
    assert_standing(&warming, &state, 0, reported, (0, 1_375 * MS));
}

/// The default rule of `Algorithm::standing`, by its peek: what the leaky bucket's
/// own (peek-free) rule must answer too, the Redis store running this one.
fn by_peek<A: Algorithm>(limit: &A, state: &A::State, now: Nanos, answer: Decision) -> Decision {
    if !answer.is_allowed() || answer.remaining() >= answer.limit() {
        return answer;
    }
    let next = limit.peek(state, now, answer.remaining() + 1);
    if next.verdict() != sluicegate::Verdict::Denied {
        return answer;
    }
    Decision::denied(
        answer.limit(),
        answer.remaining(),
        next.retry_after_nanos(),
        answer.reset_after_nanos(),
    )
}

proptest::proptest! {
    /// The leaky bucket reports its standing without a peek; it is the peek's.
    #[test]
    fn the_leaky_buckets_own_rule_is_the_peeks(
        capacity in 1u64..20,
        count in 1u64..4,
        period_ms in 1u64..3_000,
        queue in proptest::bool::ANY,
        calls in proptest::collection::vec((0u64..2_000, 1u64..6), 1..40),
    ) {
        let period = Duration::from_millis(period_ms);
        let bucket = if queue {
            LeakyBucket::queue(capacity, count, period)
        } else {
            LeakyBucket::meter(capacity, count, period)
        }
        .unwrap();
        let mut state = bucket.initial_state(0);
        let mut now = 0;
        for (advance, cost) in calls {
            now += advance * MS;
            let answer = bucket.reserve::<Decision>(&mut state, now, cost, 0);
            let own = bucket.standing(answer, &mut |n| bucket.peek(&state, now, n));
            proptest::prop_assert_eq!(own, by_peek(&bucket, &state, now, answer));
        }
    }
}
