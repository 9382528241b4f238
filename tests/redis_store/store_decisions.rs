//! What the Redis store decides on a real server: configurations it cannot hold
//! exactly refused before sending, async calls deciding like blocking ones, the
//! keyed limiters over it, a cancel at the server's time, long durations coming
//! back exact in either reply form, and durations past and just below 2^53
//! microseconds deciding as in memory.
#![cfg(feature = "redis")]

use crate::support::redis as redis_support;

use redis_support::trace::caller_time_options;
use redis_support::{current_thread_runtime, take, unique_prefix, window, RedisServer, SECOND};
use sluicegate::algorithms::FixedWindow;
use sluicegate::algorithms::Receipt;
use sluicegate::stores::redis::{RedisOptions, RedisStore};
use sluicegate::stores::{Operation, Store};
use sluicegate::{Decision, Error};
use std::time::Duration;

#[test]
fn configurations_the_server_cannot_hold_exactly_are_refused_before_sending() {
    // No server at all: the error comes before any connection is tried.
    let store: RedisStore<&str, FixedWindow> =
        RedisStore::open_with("redis://127.0.0.1:1/", caller_time_options("cfg:")).unwrap();
    let odd = FixedWindow::new(1, Duration::from_nanos(1_500)).unwrap();
    assert!(matches!(
        store
            .apply_key::<(Decision, Receipt)>(&odd, &"k", 0, take(1))
            .map(|(d, _)| d),
        Err(Error::InvalidDuration { .. })
    ));
}

#[test]
fn async_calls_decide_like_blocking_ones_and_lose_no_update() {
    let server = RedisServer::start();
    let prefix = unique_prefix("async");
    let fw = window(100);
    let store: RedisStore<String, FixedWindow> =
        RedisStore::open_with(server.url(), caller_time_options(&prefix)).unwrap();
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let granted = runtime.block_on(async {
        let calls: Vec<_> = (0..300)
            .map(|_| {
                let pending = store.apply_async(&fw, &["hot".to_owned()], SECOND, take(1));
                tokio::spawn(pending)
            })
            .collect();
        let mut granted = 0;
        for call in calls {
            let decisions = call.await.unwrap().unwrap();
            granted += u64::from(decisions[0].0.is_allowed());
        }
        granted
    });
    assert_eq!(granted, 100);
    // The blocking side sees the same state.
    let d = store
        .apply_key::<(Decision, Receipt)>(
            &fw,
            &"hot".to_owned(),
            SECOND,
            Operation::Peek { cost: 1 },
        )
        .map(|(d, _)| d)
        .unwrap();
    assert!(!d.is_allowed());
    assert_eq!(d.remaining(), 0);
}

#[test]
fn the_keyed_limiters_run_over_the_redis_store() {
    use sluicegate::algorithms::{AllOf, LeakyBucket, SmoothBursty};
    use sluicegate::{KeyedRateLimiter, ManualClock};
    let server = RedisServer::start();
    let clock = ManualClock::new();
    clock.advance(Duration::from_secs(5));
    // Blocking acquire over a queue: the caller sleeps (virtually) for its turn.
    let queue = LeakyBucket::queue(3, 1, Duration::from_secs(1)).unwrap();
    let store =
        RedisStore::open_with(server.url(), caller_time_options(&unique_prefix("kl"))).unwrap();
    let limiter = KeyedRateLimiter::with_store(queue, store, clock.clone());
    for _ in 0..3 {
        limiter.acquire(&"job").unwrap();
    }
    assert_eq!(
        clock.sleeps(),
        [
            Duration::ZERO,
            Duration::from_secs(1),
            Duration::from_secs(1)
        ]
    );
    // All-or-nothing over two keys, and a set per key, on one store each.
    let set = AllOf::new((window(2), SmoothBursty::new(100.0).unwrap()));
    let store =
        RedisStore::open_with(server.url(), caller_time_options(&unique_prefix("kl"))).unwrap();
    let limiter = KeyedRateLimiter::with_store(set, store, clock.clone());
    assert!(limiter
        .check_all(&["ip:1", "user:a"], 2)
        .unwrap()
        .is_allowed());
    let refused = limiter.check_all(&["ip:2", "user:a"], 1).unwrap();
    assert!(!refused.is_allowed());
    // ip:2 was not charged by the refused call.
    assert_eq!(limiter.peek(&"ip:2", 2).unwrap().remaining(), 0);
    assert!(limiter.peek(&"ip:2", 2).unwrap().is_allowed());
    // The async front end under tokio: 5 acquires of a 1-per-second queue, each
    // sleeping (virtually) for its turn; a dropped wait gives its turn back.
    let queue = LeakyBucket::queue(10, 1, Duration::from_secs(1)).unwrap();
    let store =
        RedisStore::open_with(server.url(), caller_time_options(&unique_prefix("kl"))).unwrap();
    let handle = KeyedRateLimiter::with_store(queue, store, clock.clone()).to_async();
    let runtime = current_thread_runtime();
    let waited = runtime.block_on(async {
        let mut waited = Vec::new();
        for _ in 0..5 {
            waited.push(handle.acquire(&"k").await.unwrap());
        }
        waited
    });
    assert_eq!(waited[0], Duration::ZERO);
    assert!(
        waited[1..].iter().all(|w| *w > Duration::ZERO),
        "{waited:?}"
    );
}

#[test]
fn a_cancel_at_the_servers_time_gives_the_turn_back() {
    use sluicegate::algorithms::LeakyBucket;
    let server = RedisServer::start();
    let queue = LeakyBucket::queue(5, 1, Duration::from_secs(10)).unwrap();
    let store: RedisStore<String, LeakyBucket> = RedisStore::open_with(
        server.url(),
        RedisOptions::default()
            .prefix(unique_prefix("cancel-server"))
            .unwrap(),
    )
    .unwrap();
    let key = ["turns".to_owned()];
    let reserve = Operation::Reserve {
        cost: 1,
        max_wait: u64::MAX,
    };
    // The caller's clock is unrelated to the server's: only differences matter.
    let now = 42;
    let blank = [(Decision::never(0, 0, 0), Receipt::NONE)];
    let mut first = blank.clone();
    store.apply(&queue, &key, now, reserve, &mut first).unwrap();
    let mut second = blank.clone();
    store
        .apply(&queue, &key, now, reserve, &mut second)
        .unwrap();
    // About 10 s, less the server's time between the calls: well over 5 s even
    // when a loaded machine stalls between them.
    let wait = second[0].0.wait_nanos();
    assert!(wait > 5_000_000_000, "{wait}");
    // Cancel the second turn (it acts ~10 s from now): the next caller gets it.
    let cancel = Operation::Cancel {
        receipts: std::slice::from_ref(&second[0].1),
        acts_at: now + wait,
    };
    let mut out = blank.clone();
    store.apply(&queue, &key, now, cancel, &mut out).unwrap();
    assert_eq!(out, blank); // a cancel answers nothing
    let mut third = blank;
    store.apply(&queue, &key, now, reserve, &mut third).unwrap();
    let third = third[0].0;
    assert!(third.wait_nanos() <= wait, "{third:?} vs {wait}");
    assert!(third.wait_nanos() > 5_000_000_000, "{third:?}");
}

#[test]
fn long_durations_come_back_exact_in_either_reply_form() {
    // A lone key's reply carries durations as whole ns while they fit a double
    // exactly (the short form) and falls back to microseconds and a remainder past
    // 9 x 10^12 us (the full form): both must decode to the memory store's answer.
    use sluicegate::algorithms::LeakyBucket;
    use sluicegate::stores::MemoryStore;
    let server = RedisServer::start();
    let day = Duration::from_secs(86_400);
    let check = |limit: u64, period: Duration, at: u64| {
        let fw = FixedWindow::new(limit, period).unwrap();
        let store: RedisStore<&str, FixedWindow> =
            RedisStore::open_with(server.url(), caller_time_options(&unique_prefix("long")))
                .unwrap();
        let memory: MemoryStore<&str, FixedWindow> = MemoryStore::new();
        for step in [take(1), take(1), take(limit + 1)] {
            let on_redis = store.apply_key::<Decision>(&fw, &"k", at, step).unwrap();
            let in_memory = memory.apply_key::<Decision>(&fw, &"k", at, step).unwrap();
            assert_eq!(on_redis, in_memory, "{period:?}");
        }
    };
    // Reset 30 days away (short form), then 300 days and 142 years away (full form,
    // the latter's ns beyond what a double holds exactly); the server counts whole
    // microseconds, so both sides run at one.
    check(1, 30 * day, SECOND + 1_234_000);
    check(1, 300 * day, SECOND + 1_234_000);
    check(1, Duration::from_micros((1 << 52) - 1), SECOND + 1_234_000);
    // The leaky bucket's own short replies (built by its step), at 3 per second:
    // waits and resets with a nanosecond remainder.
    let lb = LeakyBucket::queue(2, 3, Duration::from_secs(1)).unwrap();
    let store: RedisStore<&str, LeakyBucket> =
        RedisStore::open_with(server.url(), caller_time_options(&unique_prefix("lb"))).unwrap();
    let memory: MemoryStore<&str, LeakyBucket> = MemoryStore::new();
    let wait = Operation::Reserve {
        cost: 1,
        max_wait: 10 * SECOND,
    };
    for step in [wait, wait, wait] {
        let on_redis = store
            .apply_key::<(Decision, Receipt)>(&lb, &"k", SECOND + 7_000, step)
            .unwrap();
        let in_memory = memory
            .apply_key::<(Decision, Receipt)>(&lb, &"k", SECOND + 7_000, step)
            .unwrap();
        assert_eq!(on_redis, in_memory);
    }
}

#[test]
fn durations_past_2_53_microseconds_come_back_as_in_memory() {
    // A tiny rate saturates Guava's state on the first grant: its reset_after is
    // then about i64::MAX ns (292 years), past the 2^53 us (285 years) a Lua double
    // counts exactly, and it must still come back as the memory store's value, for
    // a single algorithm and inside a set.
    use sluicegate::algorithms::{AllOf, SmoothBursty, SmoothWarmingUp};
    use sluicegate::stores::redis::RedisAlgorithm;
    use sluicegate::stores::MemoryStore;
    fn check<A: RedisAlgorithm + Send + Sync>(url: &str, algorithm: &A, name: &str)
    where
        A::State: Send,
    {
        let store: RedisStore<&str, A> =
            RedisStore::open_with(url, caller_time_options(&unique_prefix("huge"))).unwrap();
        let memory: MemoryStore<&str, A> = MemoryStore::new();
        let forever = Operation::Reserve {
            cost: 1,
            max_wait: u64::MAX,
        };
        let mut past_2_53 = false;
        for step in [
            Operation::Peek { cost: 1 },
            take(1),
            take(1),
            forever,
            take(5),
        ] {
            let on_redis = store
                .apply_key::<Decision>(algorithm, &"k", SECOND, step)
                .unwrap();
            let in_memory = memory
                .apply_key::<Decision>(algorithm, &"k", SECOND, step)
                .unwrap();
            assert_eq!(on_redis, in_memory, "{name}, {step:?}");
            past_2_53 |= in_memory.reset_after_nanos() > (1 << 53) * 1_000;
        }
        assert!(past_2_53, "{name}: no duration past 2^53 us was compared");
    }
    let server = RedisServer::start();
    let bursty = SmoothBursty::new(1e-10).unwrap();
    let warming = SmoothWarmingUp::new(1e-10, Duration::from_secs(10)).unwrap();
    check(server.url(), &bursty, "bursty");
    check(
        server.url(),
        &SmoothBursty::new(5e-324).unwrap(),
        "bursty, 5e-324",
    );
    check(server.url(), &warming, "warming up");
    check(server.url(), &AllOf::new((bursty, window(3))), "a set");
}

#[test]
fn windows_just_below_2_53_microseconds_decide_as_in_memory() {
    // A window just below the longest the server holds (2^53 us): the end of an
    // entry's or a window's span, an absolute time plus the window, passes 2^53 us,
    // where a double skips odd integers; durations must still come out exact.
    use sluicegate::algorithms::sliding_window_buckets::OldestBucket;
    use sluicegate::algorithms::{SlidingLog, SlidingWindowBuckets};
    use sluicegate::stores::redis::RedisAlgorithm;
    use sluicegate::stores::MemoryStore;
    fn check<A: RedisAlgorithm + Send + Sync>(url: &str, algorithm: &A, name: &str)
    where
        A::State: Send,
    {
        for at in [4_000, 5_000, SECOND, 3 * SECOND + 7_000] {
            let store: RedisStore<&str, A> =
                RedisStore::open_with(url, caller_time_options(&unique_prefix("edge"))).unwrap();
            let memory: MemoryStore<&str, A> = MemoryStore::new();
            for step in [
                Operation::Peek { cost: 1 },
                take(1),
                take(1),
                take(1),
                take(3),
            ] {
                let on_redis = store
                    .apply_key::<Decision>(algorithm, &"k", at, step)
                    .unwrap();
                let in_memory = memory
                    .apply_key::<Decision>(algorithm, &"k", at, step)
                    .unwrap();
                assert_eq!(on_redis, in_memory, "{name} at {at} ns, {step:?}");
            }
        }
    }
    let server = RedisServer::start();
    for micros in [(1u64 << 53) - 1, (1 << 53) - 3, (1 << 53) - 1_000_001] {
        let long = Duration::from_micros(micros);
        check(server.url(), &SlidingLog::new(2, long).unwrap(), "log");
        let log = SlidingLog::new(2, long).unwrap();
        let spaced = log.with_min_spacing(Duration::from_micros(micros - 2));
        check(server.url(), &spaced, "spaced log");
        check(
            server.url(),
            &log.with_rejected_recorded(),
            "log recording refusals",
        );
        check(
            server.url(),
            &FixedWindow::new(2, long).unwrap(),
            "fixed window",
        );
        let buckets = SlidingWindowBuckets::new(2, long, long, OldestBucket::Drop).unwrap();
        check(server.url(), &buckets, "buckets");
    }
}
