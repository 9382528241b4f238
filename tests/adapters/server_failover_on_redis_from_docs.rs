//! The server layer over a failover store on a Redis server the test starts itself,
//! as the README's table and the failover docs describe it: each failure policy
//! while the server is paused and after it resumes, callers kept to the policy
//! while one probes, sixteen clients meeting a paused server, and each failed probe
//! doubling the back-off the `503` announces.
#![cfg(all(feature = "redis", feature = "tower"))]

use super::server_http::{get, hammer, Seen};
use super::server_redis_common::{minute, options, TIMEOUT};
use crate::support::adapters::{client_of, counted_app, serve};
use crate::support::redis::RedisServer;
use sluicegate::adapters::server::ServerLayer;
use sluicegate::algorithms::FixedWindow;
use sluicegate::clock::{Clock, ManualClock};
use sluicegate::stores::failover::{Backoff, FailoverStore, FailurePolicy};
use sluicegate::stores::redis::RedisStore;
use sluicegate::KeyedRateLimiter;
use std::sync::atomic::Ordering;
use std::time::Duration;
use std::time::Instant;

/// What a request answered "within the timeout" may take beyond it on a
/// loaded machine (a bound on hanging, not a measure of speed).
const MARGIN: Duration = Duration::from_secs(3);

/// A request, timed: it must come back within `bound`.
async fn within(
    bound: Duration,
    client: &reqwest::Client,
    base: &str,
    headers: &[(&str, &str)],
) -> Seen {
    let started = Instant::now();
    let seen = get(client, base, headers).await;
    let took = started.elapsed();
    assert!(
        took < bound,
        "answered after {took:?}, bound {bound:?}: {seen:?}"
    );
    seen
}

/// A keyed limiter over a failover store on Redis, the back-off on `clock`.
type Failover = FailoverStore<RedisStore<String, FixedWindow>, String, FixedWindow, ManualClock>;

fn failover(
    redis: &RedisServer,
    test: &str,
    policy: FailurePolicy<FixedWindow>,
    backoff: Duration,
    clock: &ManualClock,
) -> Failover {
    let store: RedisStore<String, FixedWindow> =
        RedisStore::open_with(redis.url(), options(test)).unwrap();
    FailoverStore::new(store, policy)
        .with_clock(clock.clone())
        .with_backoff(Backoff::fixed(backoff))
}

/// README table, `Closed`: "every call refused (`Source::FailedClosed`);
/// `ServerLayer` answers `503` with the back-off as `Retry-After`". Module docs:
/// "a failed-closed refusal ... is a `503` whose `Retry-After` is how long the
/// store is left alone, never held back"; no `RateLimit` field. Failover docs:
/// a failed call "waited at most the inner store's own timeouts"; "no later
/// call waits at all until the back-off ends"; a probe that is answered ends
/// the degradation. README: "calls that time out while Redis is paused are not
/// granted when it resumes".
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fail_closed_behind_the_layer_is_503_with_the_back_off_then_redis_decides_again() {
    let mut redis = RedisServer::start_own();
    let clock = ManualClock::new();
    let store = failover(
        &redis,
        "srv-docs-closed",
        FailurePolicy::Closed,
        Duration::from_secs(4),
        &clock,
    );
    let limiter = KeyedRateLimiter::with_store(minute(3), store, clock.clone());
    let layer = ServerLayer::keyed(limiter.clone(), client_of).delay_up_to(Duration::from_secs(10));
    let (router, runs) = counted_app();
    let base = serve(router.layer(layer)).await;
    let client = reqwest::Client::new();
    let ann = [("x-client", "ann")];

    let first = get(&client, &base, &ann).await;
    assert_eq!(
        (first.status, first.field("ratelimit")),
        (200, r#""default";r=2;t=60"#.to_owned())
    );

    redis.pause();
    let failed = within(TIMEOUT + MARGIN, &client, &base, &ann).await;
    assert_eq!(failed.status, 503);
    assert_eq!(failed.present(), ["retry-after"]);
    assert_eq!(failed.field("retry-after"), "4");
    clock.advance(Duration::from_millis(1_500));
    let backed_off = within(MARGIN, &client, &base, &ann).await;
    assert_eq!(
        (backed_off.status, backed_off.present()),
        (503, vec!["retry-after"])
    );
    assert_eq!(backed_off.field("retry-after"), "3"); // 2.5 s left, rounded up
    assert_eq!(clock.now(), 1_500_000_000, "a 503 was held back");
    assert_eq!(runs.load(Ordering::SeqCst), 1);

    redis.resume();
    clock.advance(Duration::from_secs(3)); // 4.5 s: the back-off is over
    let probe = within(TIMEOUT + MARGIN, &client, &base, &ann).await;
    // Redis's count: the first request, and this one; the call that timed out
    // while it was paused never landed.
    assert_eq!(
        (probe.status, probe.field("ratelimit")),
        (200, r#""default";r=1;t=56"#.to_owned())
    );
    assert_eq!(get(&client, &base, &ann).await.status, 200);
    let refused = get(&client, &base, &ann).await;
    assert_eq!(
        (refused.status, refused.field("retry-after")),
        (429, "56".to_owned())
    );
    assert_eq!(refused.field("ratelimit"), r#""default";r=0;t=56"#);
    assert_eq!(runs.load(Ordering::SeqCst), 3);
    let stats = limiter.store().stats();
    assert_eq!(
        (stats.failed_closed, stats.probes, stats.recoveries),
        (2, 1, 1)
    );
    assert!(!limiter.store().is_degraded());
}

/// README table, `Open`: "every call allowed (`Source::Unchecked`);
/// `ServerLayer` lets it through without rate-limit fields". Those grants were
/// counted by no limit, so once Redis decides again its count goes on from
/// where it was.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fail_open_behind_the_layer_lets_requests_through_bare_and_redis_counts_none_of_them() {
    let mut redis = RedisServer::start_own();
    let clock = ManualClock::new();
    let store = failover(
        &redis,
        "srv-docs-open",
        FailurePolicy::Open,
        Duration::from_secs(2),
        &clock,
    );
    let limiter = KeyedRateLimiter::with_store(minute(3), store, clock.clone());
    let (router, runs) = counted_app();
    let base = serve(router.layer(ServerLayer::keyed(limiter.clone(), client_of))).await;
    let client = reqwest::Client::new();
    let ann = [("x-client", "ann")];

    assert_eq!(
        get(&client, &base, &ann).await.field("ratelimit"),
        r#""default";r=2;t=60"#
    );
    redis.pause();
    for i in 0..4 {
        let bound = if i == 0 { TIMEOUT + MARGIN } else { MARGIN };
        let through = within(bound, &client, &base, &ann).await;
        assert_eq!(
            (through.status, through.present()),
            (200, vec![]),
            "request {i} while paused"
        );
    }
    assert_eq!(runs.load(Ordering::SeqCst), 5);

    redis.resume();
    clock.advance(Duration::from_millis(2_500));
    let again = within(TIMEOUT + MARGIN, &client, &base, &ann).await;
    assert_eq!(
        (again.status, again.field("ratelimit")),
        (200, r#""default";r=1;t=58"#.to_owned())
    );
    assert_eq!(limiter.store().stats().unchecked, 4);
}

/// README table, `Local(a)`: "this process's share `a` decides, in memory
/// (`Source::Local`); `ServerLayer`'s fields describe that share". Once a probe
/// finds Redis answering, the shared limit decides again, its count untouched
/// by the share's grants ("nothing is merged back into the store").
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_local_share_behind_the_layer_is_described_by_the_share_then_redis_resumes_its_count() {
    let mut redis = RedisServer::start_own();
    let clock = ManualClock::new();
    let share = FailurePolicy::Local(minute(2));
    let store = failover(
        &redis,
        "srv-docs-local",
        share,
        Duration::from_secs(2),
        &clock,
    );
    let limiter = KeyedRateLimiter::with_store(minute(6), store, clock.clone());
    let (router, runs) = counted_app();
    let base = serve(router.layer(ServerLayer::keyed(limiter, client_of))).await;
    let client = reqwest::Client::new();
    let ann = [("x-client", "ann")];

    let shared = get(&client, &base, &ann).await;
    assert_eq!(shared.field("ratelimit"), r#""default";r=5;t=60"#);
    assert_eq!(shared.field("ratelimit-policy"), r#""default";q=6"#);

    redis.pause();
    let local = within(TIMEOUT + MARGIN, &client, &base, &ann).await;
    assert_eq!(
        (local.status, local.field("ratelimit")),
        (200, r#""default";r=1;t=60"#.to_owned())
    );
    assert_eq!(local.field("ratelimit-policy"), r#""default";q=2"#);
    let last = within(MARGIN, &client, &base, &ann).await;
    assert_eq!(
        (last.status, last.field("ratelimit")),
        (200, r#""default";r=0;t=60"#.to_owned())
    );
    let refused = within(MARGIN, &client, &base, &ann).await;
    assert_eq!(
        (refused.status, refused.field("retry-after")),
        (429, "60".to_owned())
    );
    assert_eq!(refused.field("ratelimit"), r#""default";r=0;t=60"#);
    assert_eq!(refused.field("ratelimit-policy"), r#""default";q=2"#);
    assert_eq!(runs.load(Ordering::SeqCst), 3);

    redis.resume();
    clock.advance(Duration::from_millis(2_500));
    let again = within(TIMEOUT + MARGIN, &client, &base, &ann).await;
    assert_eq!(
        (again.status, again.field("ratelimit")),
        (200, r#""default";r=4;t=58"#.to_owned())
    );
    assert_eq!(again.field("ratelimit-policy"), r#""default";q=6"#);

    // FailurePolicy docs: "what one outage spends stays spent in the next
    // while its window or bucket says so".
    redis.pause();
    let second_outage = within(TIMEOUT + MARGIN, &client, &base, &ann).await;
    assert_eq!(
        (second_outage.status, second_outage.field("retry-after")),
        (429, "58".to_owned())
    );
    assert_eq!(second_outage.field("ratelimit-policy"), r#""default";q=2"#);
    redis.resume();
}

/// FailurePolicy table, `Closed`: "`retry_after` the rest of the back-off (the
/// initial back-off while another caller probes)"; backoff docs: "the first
/// caller probes it with its own call while every other caller keeps to the
/// policy", and a failed probe doubles the period.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn while_one_caller_probes_the_others_get_the_initial_back_off_at_once() {
    let mut redis = RedisServer::start_own();
    let clock = ManualClock::new();
    let slow = options("srv-docs-probing").response_timeout(Duration::from_secs(2));
    let store: RedisStore<String, FixedWindow> = RedisStore::open_with(redis.url(), slow).unwrap();
    let store = FailoverStore::new(store, FailurePolicy::Closed)
        .with_clock(clock.clone())
        .with_backoff(Backoff::new(
            Duration::from_secs(5),
            Duration::from_secs(60),
        ));
    let limiter = KeyedRateLimiter::with_store(minute(3), store, clock.clone());
    let (router, _) = counted_app();
    let base = serve(router.layer(ServerLayer::keyed(limiter.clone(), client_of))).await;
    let client = reqwest::Client::new();
    assert_eq!(get(&client, &base, &[]).await.status, 200);

    redis.pause();
    let first = within(Duration::from_secs(2) + MARGIN, &client, &base, &[]).await;
    assert_eq!(
        (first.status, first.field("retry-after")),
        (503, "5".to_owned())
    );
    clock.advance(Duration::from_secs(7)); // the back-off is over: 2 s past it
    let probe = tokio::spawn({
        let (client, base) = (client.clone(), base.clone());
        async move { get(&client, &base, &[]).await }
    });
    while limiter.store().stats().probes == 0 {
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let meanwhile = within(MARGIN, &client, &base, &[]).await;
    assert!(
        !probe.is_finished(),
        "the probe ended before the other caller was answered"
    );
    assert_eq!(
        (meanwhile.status, meanwhile.field("retry-after")),
        (503, "5".to_owned())
    );
    let probe = probe.await.unwrap();
    assert_eq!(
        (probe.status, probe.field("retry-after")),
        (503, "10".to_owned())
    );
    redis.resume();
}

/// Sixteen concurrent clients meet a Redis that was just paused: each is
/// answered within the timeouts ("A failed call ... waited at most the inner
/// store's own timeouts") with the policy's `503` and the initial back-off
/// ("concurrent failures of calls sent together extend it, they do not
/// double it": a probe failing later doubles it once).
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn sixteen_clients_meeting_a_paused_redis_all_get_the_initial_back_off() {
    let mut redis = RedisServer::start_own();
    let clock = ManualClock::new();
    let store: RedisStore<String, FixedWindow> =
        RedisStore::open_with(redis.url(), options("srv-docs-16-paused")).unwrap();
    let store = FailoverStore::new(store, FailurePolicy::Closed)
        .with_clock(clock.clone())
        .with_backoff(Backoff::new(
            Duration::from_secs(2),
            Duration::from_secs(60),
        ));
    let limiter = KeyedRateLimiter::with_store(minute(3), store, clock.clone());
    let (router, runs) = counted_app();
    let base = serve(router.layer(ServerLayer::keyed(limiter.clone(), client_of))).await;
    let client = reqwest::Client::new();
    assert_eq!(get(&client, &base, &[]).await.status, 200);

    redis.pause();
    let started = Instant::now();
    let seen = hammer(&base, 16, 1, |i| format!("client{i}")).await;
    let took = started.elapsed();
    assert!(
        took < TIMEOUT * 2 + MARGIN,
        "sixteen requests took {took:?}"
    );
    for (key, answer) in &seen {
        assert_eq!(
            (answer.status, answer.present()),
            (503, vec!["retry-after"]),
            "{key}"
        );
        assert_eq!(answer.field("retry-after"), "2", "{key}");
    }
    assert_eq!(runs.load(Ordering::SeqCst), 1);
    clock.advance(Duration::from_secs(2));
    let probe = within(TIMEOUT * 2 + MARGIN, &client, &base, &[]).await;
    assert_eq!(
        (probe.status, probe.field("retry-after")),
        (503, "4".to_owned())
    );
    redis.resume();
}

/// Backoff docs: "doubled after each failed probe up to `max`"; module docs:
/// the `503`'s "`Retry-After` is how long the store is left alone".
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_failed_probe_doubles_the_back_off_the_503_announces() {
    let mut redis = RedisServer::start_own();
    let clock = ManualClock::new();
    let store: RedisStore<String, FixedWindow> =
        RedisStore::open_with(redis.url(), options("srv-docs-double")).unwrap();
    let store = FailoverStore::new(store, FailurePolicy::Closed)
        .with_clock(clock.clone())
        .with_backoff(Backoff::new(Duration::from_secs(1), Duration::from_secs(3)));
    let limiter = KeyedRateLimiter::with_store(minute(3), store, clock.clone());
    let (router, _) = counted_app();
    let base = serve(router.layer(ServerLayer::keyed(limiter.clone(), client_of))).await;
    let client = reqwest::Client::new();
    assert_eq!(get(&client, &base, &[]).await.status, 200);

    redis.pause();
    let mut announced = Vec::new();
    for _ in 0..4 {
        let failed = within(TIMEOUT + MARGIN, &client, &base, &[]).await;
        assert_eq!(
            (failed.status, failed.present()),
            (503, vec!["retry-after"])
        );
        let secs: u64 = failed.field("retry-after").parse().unwrap();
        announced.push(secs);
        clock.advance(Duration::from_secs(secs)); // the next call probes
    }
    // 1 s, then each failed probe doubles it, up to the 3 s maximum.
    assert_eq!(announced, [1, 2, 3, 3]);
    redis.resume();
    let again = within(TIMEOUT + MARGIN, &client, &base, &[]).await;
    assert_eq!(
        (again.status, again.field("ratelimit")),
        (200, r#""default";r=1;t=51"#.to_owned())
    );
    let stats = limiter.store().stats();
    assert_eq!((stats.probes, stats.recoveries), (4, 1));
}
