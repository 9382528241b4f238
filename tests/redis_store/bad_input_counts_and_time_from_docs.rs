//! The Redis store's documented answers to counts, durations and times past what
//! the server counts exactly, huge costs and costs of 0, and the caller's clock
//! without an expiry grace: typed errors before sending, or memory's decision.
#![cfg(feature = "redis")]

use super::bad_input_connections_from_docs::{apply_async_one, secs, Store1};
use crate::support::redis as redis_support;

use redis_support::trace::caller_time_options;
use redis_support::{take, unique_prefix, window, RedisServer, SECOND};
use sluicegate::algorithms::{
    AllOf, FixedWindow, LeakyBucket, SlidingLog, SlidingWindowBuckets, SlidingWindowCounter,
    SmoothBursty, SmoothWarmingUp,
};
use sluicegate::clock::ManualClock;
use sluicegate::stores::redis::{RedisAlgorithm, RedisOptions, RedisStore, TimeSource};
use sluicegate::stores::{MemoryStore, Operation, Store};
use sluicegate::{ConfigError, Decision, Error, KeyedRateLimiter};
use std::time::Duration;

/// A store that can reach no server: an answer from it other than a connection
/// failure was decided before anything was sent.
fn nowhere<A>() -> RedisStore<&'static str, A> {
    RedisStore::open_with("redis://127.0.0.1:1/", caller_time_options("nowhere:")).unwrap()
}

#[test]
fn counts_and_durations_the_server_cannot_count_exactly_are_typed_errors_before_sending() {
    let big = 1u64 << 53;
    let day = secs(86_400);
    // Counts from 2^53 up.
    let e = nowhere::<FixedWindow>()
        .apply_key::<Decision>(
            &FixedWindow::new(big, 300 * day).unwrap(),
            &"k",
            SECOND,
            take(1),
        )
        .unwrap_err();
    assert!(matches!(e, Error::InvalidCount { .. }), "{e:?}");
    assert!(!e.to_string().is_empty());
    if let Ok(log) = SlidingLog::new(big, secs(60)) {
        let e = nowhere::<SlidingLog>()
            .apply_key::<Decision>(&log, &"k", SECOND, take(1))
            .unwrap_err();
        assert!(matches!(e, Error::InvalidCount { .. }), "{e:?}");
    }
    // (A sliding window counter packs its count beside a window index in 64 bits,
    // so memory refuses such limits itself.)
    assert!(SlidingWindowCounter::new(big, 300 * day).is_err());
    // Durations that are not whole microseconds, for each algorithm that has one.
    let odd = Duration::from_nanos(1_500_000_500);
    let dur = |e: Error| assert!(matches!(e, Error::InvalidDuration { .. }), "{e:?}");
    dur(nowhere::<FixedWindow>()
        .apply_key::<Decision>(&FixedWindow::new(1, odd).unwrap(), &"k", SECOND, take(1))
        .unwrap_err());
    dur(nowhere::<SlidingWindowCounter>()
        .apply_key::<Decision>(
            &SlidingWindowCounter::new(1, odd).unwrap(),
            &"k",
            SECOND,
            take(1),
        )
        .unwrap_err());
    dur(nowhere::<SlidingLog>()
        .apply_key::<Decision>(&SlidingLog::new(1, odd).unwrap(), &"k", SECOND, take(1))
        .unwrap_err());
    dur(nowhere::<SlidingLog>()
        .apply_key::<Decision>(
            &SlidingLog::new(5, secs(10)).unwrap().with_min_spacing(odd),
            &"k",
            SECOND,
            take(1),
        )
        .unwrap_err());
    dur(nowhere::<SlidingWindowBuckets>()
        .apply_key::<Decision>(
            &SlidingWindowBuckets::dropping(5, secs(10), odd).unwrap(),
            &"k",
            SECOND,
            take(1),
        )
        .unwrap_err());
    // A window at 2^53 us, which memory keeps (292 years), is past the server's.
    let e = nowhere::<FixedWindow>()
        .apply_key::<Decision>(
            &FixedWindow::new(1, Duration::from_micros(big)).unwrap(),
            &"k",
            SECOND,
            take(1),
        )
        .unwrap_err();
    assert!(
        matches!(
            e,
            Error::InvalidDuration { .. } | Error::InvalidCount { .. }
        ),
        "{e:?}"
    );
    // A leaky bucket whose full span, and a bursty limiter whose burst, reach
    // 2^53 ns (104 days).
    let e = nowhere::<LeakyBucket>()
        .apply_key::<Decision>(
            &LeakyBucket::meter(105, 1, day).unwrap(),
            &"k",
            SECOND,
            take(1),
        )
        .unwrap_err();
    assert!(
        matches!(
            e,
            Error::InvalidDuration { .. } | Error::InvalidCount { .. }
        ),
        "{e:?}"
    );
    let e = nowhere::<SmoothBursty>()
        .apply_key::<Decision>(
            &SmoothBursty::new(1.0)
                .unwrap()
                .with_max_burst(105 * day)
                .unwrap(),
            &"k",
            SECOND,
            take(1),
        )
        .unwrap_err();
    assert!(
        matches!(
            e,
            Error::InvalidDuration { .. } | Error::InvalidCount { .. }
        ),
        "{e:?}"
    );
    // Cost 0 is refused by the limiters before anything is sent, blocking and async.
    let limiter =
        KeyedRateLimiter::with_store(window(5), nowhere::<FixedWindow>(), ManualClock::new());
    assert_eq!(limiter.check(&"k", 0), Err(Error::ZeroCost));
    assert_eq!(
        futures::executor::block_on(limiter.to_async().check(&"k", 0)),
        Err(Error::ZeroCost)
    );
    // No keys at all.
    assert!(matches!(
        limiter.check_all(&[], 1),
        Err(Error::InvalidCount { .. })
    ));
}

/// Runs `steps` on `algorithm` on Redis and in memory, at the caller's time `at`,
/// and asserts the decisions agree field by field.
fn agrees_with_memory<A: RedisAlgorithm + Send + Sync>(
    url: &str,
    algorithm: &A,
    name: &str,
    at: u64,
    steps: &[Operation<'static>],
) where
    A::State: Send,
{
    let store: RedisStore<&str, A> =
        RedisStore::open_with(url, caller_time_options(&unique_prefix("edge"))).unwrap();
    let memory: MemoryStore<&str, A> = MemoryStore::new();
    for step in steps {
        let on_redis = store.apply_key::<Decision>(algorithm, &"k", at, *step);
        let in_memory = memory.apply_key::<Decision>(algorithm, &"k", at, *step);
        assert_eq!(on_redis, in_memory, "{name}, {step:?}");
    }
}

#[test]
fn limits_just_inside_the_servers_range_and_huge_costs_decide_as_in_memory() {
    let server = RedisServer::start();
    let url = server.url();
    let big = (1u64 << 53) - 1;
    let day = secs(86_400);
    let huge = [
        take(u64::MAX),
        take((1 << 53) + 1),
        take(1 << 53),
        take(big),
        take(1),
        take(2),
    ];
    agrees_with_memory(
        url,
        &FixedWindow::new(big, 300 * day).unwrap(),
        "window 2^53-1",
        SECOND,
        &huge,
    );
    agrees_with_memory(url, &window(3), "window 3", SECOND, &huge);
    agrees_with_memory(
        url,
        &SlidingWindowCounter::new(3, secs(60)).unwrap(),
        "counter 3",
        SECOND,
        &huge,
    );
    agrees_with_memory(
        url,
        &SlidingLog::new(3, secs(60)).unwrap(),
        "log",
        SECOND,
        &huge,
    );
    agrees_with_memory(
        url,
        &SlidingWindowBuckets::dropping(3, secs(60), secs(1)).unwrap(),
        "buckets",
        SECOND,
        &huge,
    );
    agrees_with_memory(
        url,
        &LeakyBucket::meter(104, 1, day).unwrap(),
        "meter of 104 days",
        SECOND,
        &huge,
    );
    agrees_with_memory(
        url,
        &LeakyBucket::queue(3, 1, secs(1)).unwrap(),
        "queue",
        SECOND,
        &huge,
    );
    // Cost 0 is outside the store contract ("at least 1"), but bad input never
    // panics: each store answers it with a decision or a typed error.
    for step in [take(0), Operation::Peek { cost: 0 }] {
        let store: RedisStore<&str, FixedWindow> =
            RedisStore::open_with(url, caller_time_options(&unique_prefix("zero"))).unwrap();
        let _ = store.apply_key::<Decision>(&window(3), &"k", SECOND, step);
        let _ = apply_async_one(&store, &window(3), &"k", SECOND, step);
    }
    let forever = Operation::Reserve {
        cost: u64::MAX,
        max_wait: u64::MAX,
    };
    let bursty_steps = [
        take(u64::MAX),
        forever,
        take(1),
        Operation::Peek { cost: u64::MAX },
        take(1),
    ];
    agrees_with_memory(
        url,
        &SmoothBursty::new(5.0).unwrap(),
        "bursty",
        SECOND,
        &bursty_steps,
    );
    agrees_with_memory(
        url,
        &SmoothBursty::new(1.0)
            .unwrap()
            .with_max_burst(104 * day)
            .unwrap(),
        "bursty, 104 days' burst",
        SECOND,
        &bursty_steps,
    );
    agrees_with_memory(
        url,
        &SmoothWarmingUp::new(5.0, secs(10)).unwrap(),
        "warming up",
        SECOND,
        &bursty_steps,
    );
    agrees_with_memory(
        url,
        &AllOf::new((window(3), SmoothBursty::new(5.0).unwrap())),
        "a set",
        SECOND,
        &huge,
    );
}

#[test]
fn the_callers_time_past_2_53_microseconds_is_capped_and_still_decides() {
    let server = RedisServer::start();
    let store: RedisStore<&str, FixedWindow> =
        RedisStore::open_with(server.url(), caller_time_options(&unique_prefix("late"))).unwrap();
    let fw = window(1);
    for at in [
        u64::MAX,
        u64::MAX - 1,
        (1 << 53) * 1_000,
        (1 << 53) * 1_000 - 1,
    ] {
        let key: &'static str = Box::leak(format!("k{at}").into_boxed_str());
        let first = store.apply_key::<Decision>(&fw, &key, at, take(1)).unwrap();
        assert!(first.is_allowed(), "{at}: {first:?}");
        let second = store.apply_key::<Decision>(&fw, &key, at, take(1)).unwrap();
        assert!(!second.is_allowed(), "{at}: {second:?}");
        assert!(second.retry_after() <= secs(60), "{at}: {second:?}");
    }
}

#[test]
fn the_callers_clock_needs_a_grace_from_every_constructor() {
    let caller = RedisOptions::default().time_source(TimeSource::Caller);
    let missing = |r: Result<Store1, ConfigError>| {
        assert!(
            matches!(
                r,
                Err(ConfigError::MissingSetting {
                    what: "expiry_grace",
                    ..
                })
            ),
            "{:?}",
            r.err()
        )
    };
    missing(Store1::open_with("redis://127.0.0.1/", caller.clone()));
    missing(Store1::open_cluster(
        ["redis://127.0.0.1:7000/"],
        caller.clone(),
    ));
    let cluster = redis::cluster::ClusterClient::builder(["redis://127.0.0.1:7000/"])
        .retries(0)
        .build()
        .unwrap();
    missing(Store1::from_cluster_client(cluster, caller.clone()));
    // The message says what to set.
    let Err(e) = Store1::open_with("redis://127.0.0.1/", caller) else {
        unreachable!()
    };
    assert!(e.to_string().contains("expiry_grace"), "{e}");
}
