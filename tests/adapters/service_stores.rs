//! The server layer over every store a service runs it on, over a real loopback
//! connection: the Redis store on the server's clock, with Redis paused (a request
//! that gave up never lands later), `FailoverStore` under each policy with Redis
//! killed and paused, `DenyCache` answering a hammered key without round trips,
//! `LeasedStore` granting from leases, and eight concurrent clients on each, never
//! granted more than the limit. Every Redis server is this test's own.
#![cfg(all(feature = "redis", feature = "tower"))]

use super::service_memory::{hammer, lines, present, rounds};
use crate::support::adapters::serve;
use crate::support::redis::trace::caller_time_options;
use crate::support::redis::{calls, unique_prefix, RedisServer};
use axum::body::Body;
use axum::routing::get;
use axum::Router;
use http::{Request, StatusCode};
use sluicegate::adapters::server::{Policy, RateLimitHeaders, ServerLayer};
use sluicegate::algorithms::{Algorithm, AllOf, FixedWindow, SlidingLog};
use sluicegate::clock::{DefaultClock, ManualClock};
use sluicegate::stores::deny_cache::DenyCache;
use sluicegate::stores::failover::{FailoverStore, FailurePolicy};
use sluicegate::stores::lease::LeasedStore;
use sluicegate::stores::redis::{RedisAlgorithm, RedisOptions, RedisStore};
use sluicegate::stores::Store;
use sluicegate::KeyedRateLimiter;
use std::time::{Duration, Instant};

const TIMEOUT: Duration = Duration::from_millis(300);
const MARGIN: Duration = Duration::from_secs(3);

fn hello() -> Router {
    Router::new()
        .route("/", get(|| async { "hello" }))
        .route("/health", get(|| async { "ok" }))
}

/// One client; `/health` is free.
fn one_key(request: &Request<Body>) -> (String, u64) {
    let cost = u64::from(request.uri().path() != "/health");
    ("everyone".to_owned(), cost)
}

/// Server time, short timeouts, a prefix of its own.
fn short_timeouts(name: &str) -> RedisOptions {
    RedisOptions::default()
        .prefix(unique_prefix(name))
        .unwrap()
        .connect_timeout(TIMEOUT)
        .response_timeout(TIMEOUT)
}

/// Serves the app behind a server layer over `store`, keyed by `one_key`.
async fn serve_over<A, S>(algorithm: A, store: S, headers: RateLimitHeaders) -> String
where
    A: Algorithm,
    S: Store<String, A> + 'static,
{
    let limiter = KeyedRateLimiter::with_store(algorithm, store, DefaultClock::new());
    let layer = ServerLayer::with_weigher(limiter, one_key).headers(headers);
    serve(hello().layer(layer)).await
}

/// `clients` clients each send `each` requests at once; each response's status,
/// rate-limit field names and `RateLimit-Policy`, checked to come back within
/// the store's timeout and a margin.
async fn timed_round(
    base: &str,
    clients: usize,
    each: usize,
) -> Vec<(u16, Vec<String>, Vec<String>)> {
    rounds(base, clients, each, |response, took| {
        assert!(took < TIMEOUT + MARGIN, "a request took {took:?}");
        let h = response.headers();
        (
            response.status().as_u16(),
            present(h),
            lines(h, "ratelimit-policy"),
        )
    })
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn on_the_servers_clock_retry_after_matches_t_and_is_never_early() {
    let server = RedisServer::start_own();
    let window = FixedWindow::new(3, Duration::from_secs(2)).unwrap();
    let redis: RedisStore<String, FixedWindow> =
        RedisStore::open_with(server.url(), short_timeouts("server-time")).unwrap();
    let base = serve_over(window, redis, RateLimitHeaders::new()).await;
    let http = reqwest::Client::new();
    // Start just after a window begins, so that three grants share one window.
    let mut refused = None;
    for _ in 0..10 {
        let response = http.get(&base).send().await.unwrap();
        let h = response.headers().clone();
        let items = crate::support::adapters::sf_list(&h["ratelimit"]);
        assert_eq!(items.len(), 1, "{h:?}");
        let (name, params) = &items[0];
        assert_eq!(name, "default");
        let t = params.iter().find(|(k, _)| k == "t").unwrap().1;
        assert!((1..=2).contains(&t), "{h:?}");
        assert_eq!(h["ratelimit-policy"], r#""default";q=3"#);
        if response.status() == StatusCode::TOO_MANY_REQUESTS {
            assert_eq!(params[0], ("r".to_owned(), 0));
            assert_eq!(h["retry-after"].to_str().unwrap(), t.to_string());
            refused = Some(t);
            break;
        }
        assert_eq!(response.status(), StatusCode::OK);
    }
    let retry = refused.expect("a refusal within 10 requests");
    // A client that waits Retry-After out is let through.
    tokio::time::sleep(Duration::from_secs(retry as u64)).await;
    assert_eq!(
        http.get(&base).send().await.unwrap().status(),
        StatusCode::OK
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_redis_paused_requests_that_gave_up_are_503_and_never_land_later() {
    let mut server = RedisServer::start_own();
    // 10 in any ten minutes: the test runs within one.
    let log = SlidingLog::new(10, Duration::from_secs(600)).unwrap();
    let redis: RedisStore<String, SlidingLog> =
        RedisStore::open_with(server.url(), short_timeouts("paused-plain")).unwrap();
    let base = serve_over(log, redis, RateLimitHeaders::new()).await;
    let up = timed_round(&base, 1, 3).await;
    assert!(up.iter().all(|s| s.0 == 200), "{up:?}");

    server.pause();
    let down = timed_round(&base, 8, 2).await;
    assert!(down.iter().all(|s| s.0 == 503), "{down:?}");
    // A free request does not ask the store: it passes at once.
    let started = Instant::now();
    let health = reqwest::get(format!("{base}health")).await.unwrap();
    assert_eq!(health.status(), StatusCode::OK);
    assert!(started.elapsed() < TIMEOUT, "{:?}", started.elapsed());
    tokio::time::sleep(Duration::from_millis(200)).await;
    server.resume();

    // The 16 calls sent while paused reached Redis on resume, past their
    // deadlines: none was applied, so 7 of the 10 are still there.
    let after = timed_round(&base, 1, 9).await;
    let statuses: Vec<u16> = after.iter().map(|s| s.0).collect();
    assert_eq!(statuses, [200, 200, 200, 200, 200, 200, 200, 429, 429]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_redis_paused_fail_open_lets_requests_through_bare_and_in_time() {
    let mut server = RedisServer::start_own();
    let window = FixedWindow::new(100, Duration::from_secs(60)).unwrap();
    let redis: RedisStore<String, FixedWindow> =
        RedisStore::open_with(server.url(), short_timeouts("paused-open")).unwrap();
    let limiter = KeyedRateLimiter::with_store(window, redis, DefaultClock::new());
    let layer = ServerLayer::with_weigher(limiter, one_key).fail_open(true);
    let base = serve(hello().layer(layer)).await;
    server.pause();
    let down = timed_round(&base, 8, 2).await;
    server.resume();
    assert!(
        down.iter().all(|s| s.0 == 200 && s.1.is_empty()),
        "{down:?}"
    );
}

/// What a degraded round is expected to give under a policy.
enum Expect {
    /// Every response 503 with `Retry-After` only, at most the back-off's cap.
    Closed,
    /// Every response 200 without fields.
    Open,
    /// `share` grants described by the share (`q=share`), the rest 429s.
    Local(u64),
}

/// A fault Redis meets.
#[derive(Clone, Copy, Debug)]
enum Fault {
    Kill,
    Pause,
}

async fn degraded(policy: FailurePolicy<FixedWindow>, fault: Fault, expect: Expect) {
    let mut server = RedisServer::start_own();
    let redis: RedisStore<String, FixedWindow> =
        RedisStore::open_with(server.url(), short_timeouts("failover")).unwrap();
    let store = FailoverStore::new(redis, policy);
    let window = FixedWindow::new(1_000, Duration::from_secs(60)).unwrap();
    let base = serve_over(window, store, RateLimitHeaders::new()).await;
    let healthy = |s: &(u16, Vec<String>, Vec<String>)| {
        s.0 == 200 && s.1 == ["ratelimit", "ratelimit-policy"] && s.2 == [r#""default";q=1000"#]
    };
    let up = timed_round(&base, 8, 2).await;
    assert!(up.iter().all(healthy), "{up:?}");

    match fault {
        Fault::Kill => server.kill(),
        Fault::Pause => server.pause(),
    }
    let down = timed_round(&base, 8, 5).await;
    match expect {
        Expect::Closed => {
            for s in &down {
                assert_eq!((s.0, &s.1[..]), (503, &["retry-after".to_owned()][..]));
            }
        }
        Expect::Open => assert!(
            down.iter().all(|s| s.0 == 200 && s.1.is_empty()),
            "{fault:?}: {down:?}"
        ),
        Expect::Local(share) => {
            let granted = down.iter().filter(|s| s.0 == 200).count() as u64;
            assert_eq!(granted, share, "{fault:?}: {down:?}");
            for s in &down {
                assert!(s.0 == 200 || s.0 == 429, "{s:?}");
                assert_eq!(s.2, [format!(r#""default";q={share}"#)], "{s:?}");
            }
        }
    }
    match fault {
        Fault::Kill => server.restart(),
        Fault::Pause => server.resume(),
    }
    // The back-off (1 s doubling; a few seconds at most here) ends, a probe
    // succeeds, and Redis decides again.
    let deadline = Instant::now() + Duration::from_secs(8) + MARGIN;
    loop {
        let back = timed_round(&base, 1, 1).await;
        if back.iter().all(healthy) {
            break;
        }
        assert!(Instant::now() < deadline, "{fault:?}: not back: {back:?}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

fn share() -> FixedWindow {
    FixedWindow::new(3, Duration::from_secs(60)).unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn failover_closed_answers_503_with_retry_after_when_redis_is_paused() {
    degraded(FailurePolicy::Closed, Fault::Pause, Expect::Closed).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn failover_open_answers_bare_200s_when_redis_is_paused() {
    degraded(FailurePolicy::Open, Fault::Pause, Expect::Open).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn failover_closed_answers_503_with_retry_after_when_redis_is_killed() {
    degraded(FailurePolicy::Closed, Fault::Kill, Expect::Closed).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn failover_open_answers_bare_200s_when_redis_is_killed() {
    degraded(FailurePolicy::Open, Fault::Kill, Expect::Open).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn failover_local_is_described_by_its_share_when_redis_is_paused() {
    degraded(
        FailurePolicy::Local(share()),
        Fault::Pause,
        Expect::Local(3),
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn failover_local_is_described_by_its_share_when_redis_is_killed() {
    degraded(FailurePolicy::Local(share()), Fault::Kill, Expect::Local(3)).await;
}

/// The Redis store at the caller's (virtual) time, for exact values.
pub fn caller_time<A: RedisAlgorithm>(server: &RedisServer, name: &str) -> RedisStore<String, A> {
    RedisStore::open_with(server.url(), caller_time_options(&unique_prefix(name))).unwrap()
}

/// Serves the app over `store` on `clock`, keyed by `one_key`.
pub async fn serve_at<A, S>(
    algorithm: A,
    store: S,
    clock: &ManualClock,
    headers: RateLimitHeaders,
) -> String
where
    A: Algorithm,
    S: Store<String, A> + 'static,
{
    let limiter = KeyedRateLimiter::with_store(algorithm, store, clock.clone());
    let layer = ServerLayer::with_weigher(limiter, one_key).headers(headers);
    serve(hello().layer(layer)).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hammered_key_behind_a_deny_cache_is_refused_with_the_same_fields_and_no_round_trip() {
    let server = RedisServer::start_own();
    let mut conn = server.connection();
    let set = AllOf::new((
        FixedWindow::new(2, Duration::from_secs(10)).unwrap(),
        FixedWindow::new(50, Duration::from_secs(3600)).unwrap(),
    ));
    let store = DenyCache::new(caller_time(&server, "deny-cache"), &set).unwrap();
    let clock = ManualClock::new();
    clock.advance(Duration::from_millis(500));
    let policies = Policy::describe(&set, ["burst", "hourly"]);
    let base = serve_at(
        set,
        store,
        &clock,
        RateLimitHeaders::new().policies(policies),
    )
    .await;
    let http = reqwest::Client::new();
    for _ in 0..2 {
        assert_eq!(
            http.get(&base).send().await.unwrap().status(),
            StatusCode::OK
        );
    }
    let first = http.get(&base).send().await.unwrap();
    assert_eq!(first.status(), StatusCode::TOO_MANY_REQUESTS);
    let expected_policy = [r#""burst";q=2;w=10, "hourly";q=50;w=3600"#];
    assert_eq!(lines(first.headers(), "ratelimit"), [r#""burst";r=0;t=10"#]);
    assert_eq!(first.headers()["retry-after"], "10");
    assert_eq!(lines(first.headers(), "ratelimit-policy"), expected_policy);

    let before = calls(&mut conn, "fcall");
    for (advance, t) in [(1_000, 9), (3_000, 6), (4_000, 2)] {
        clock.advance(Duration::from_millis(advance));
        let cached = http.get(&base).send().await.unwrap();
        assert_eq!(cached.status(), StatusCode::TOO_MANY_REQUESTS);
        let h = cached.headers();
        assert_eq!(lines(h, "ratelimit"), [format!(r#""burst";r=0;t={t}"#)]);
        assert_eq!(h["retry-after"].to_str().unwrap(), t.to_string());
        assert_eq!(lines(h, "ratelimit-policy"), expected_policy);
    }
    assert_eq!(
        calls(&mut conn, "fcall"),
        before,
        "a cached refusal made a round trip"
    );
    // The next window: Redis grants again.
    clock.advance(Duration::from_secs(2));
    let h = http.get(&base).send().await.unwrap().headers().clone();
    assert_eq!(
        lines(&h, "ratelimit"),
        [r#""burst";r=1;t=10, "hourly";r=47;t=3590"#]
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn behind_leases_a_server_layer_without_fields_makes_one_round_trip_per_lease() {
    let server = RedisServer::start_own();
    let mut conn = server.connection();
    let window = FixedWindow::new(20, Duration::from_secs(60)).unwrap();
    let store = LeasedStore::new(
        caller_time(&server, "leased-bare"),
        5,
        Duration::from_secs(60),
    )
    .unwrap();
    let clock = ManualClock::new();
    let base = serve_at(window, store, &clock, RateLimitHeaders::none()).await;
    let http = reqwest::Client::new();
    let before = calls(&mut conn, "fcall");
    for _ in 0..20 {
        let response = http.get(&base).send().await.unwrap();
        assert_eq!(response.status(), StatusCode::OK);
        assert!(present(response.headers()).is_empty());
    }
    let trips = calls(&mut conn, "fcall") - before;
    assert!(
        trips <= 5,
        "20 grants from leases of 5 took {trips} round trips"
    );
    let refused = http.get(&base).send().await.unwrap();
    assert_eq!(refused.status(), StatusCode::TOO_MANY_REQUESTS);
    assert_eq!(present(refused.headers()), ["retry-after"]);
}

/// 8 clients × 10 requests at once against 25 in any minute: the grants.
async fn concurrent_grants<S>(store: S) -> usize
where
    S: Store<String, SlidingLog> + 'static,
{
    let log = SlidingLog::new(25, Duration::from_secs(60)).unwrap();
    let base = serve_over(log, store, RateLimitHeaders::new()).await;
    let statuses = hammer(&base, 8, 10).await;
    assert!(
        statuses.iter().all(|s| *s == 200 || *s == 429),
        "{statuses:?}"
    );
    statuses.iter().filter(|s| **s == 200).count()
}

fn redis_log(server: &RedisServer, name: &str) -> RedisStore<String, SlidingLog> {
    let options = RedisOptions::default().prefix(unique_prefix(name)).unwrap();
    RedisStore::open_with(server.url(), options).unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn eight_concurrent_clients_over_each_redis_store_never_exceed_the_limit() {
    let server = RedisServer::start_own();
    assert_eq!(
        concurrent_grants(redis_log(&server, "many-plain")).await,
        25
    );
    let log = SlidingLog::new(25, Duration::from_secs(60)).unwrap();
    let cached = DenyCache::new(redis_log(&server, "many-cached"), &log).unwrap();
    assert_eq!(concurrent_grants(cached).await, 25);
    let failover = FailoverStore::new(
        redis_log(&server, "many-failover"),
        FailurePolicy::Local(SlidingLog::new(5, Duration::from_secs(60)).unwrap()),
    );
    assert_eq!(concurrent_grants(failover).await, 25);
    // One process with leases of 5: at most the limit, at least limit − (L − 1).
    let leased = LeasedStore::new(
        redis_log(&server, "many-leased"),
        5,
        Duration::from_secs(60),
    )
    .unwrap();
    let granted = concurrent_grants(leased).await;
    assert!((21..=25).contains(&granted), "{granted}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn behind_leases_the_server_layer_makes_one_round_trip_per_lease_with_the_plain_fields() {
    let server = RedisServer::start_own();
    let mut conn = server.connection();
    let window = FixedWindow::new(20, Duration::from_secs(60)).unwrap();
    let store =
        LeasedStore::new(caller_time(&server, "leased"), 5, Duration::from_secs(60)).unwrap();
    let clock = ManualClock::new();
    clock.advance(Duration::from_secs(10));
    let base = serve_at(window, store, &clock, RateLimitHeaders::new()).await;
    let http = reqwest::Client::new();
    let before = calls(&mut conn, "fcall");
    for left in (0..20).rev() {
        let response = http.get(&base).send().await.unwrap();
        assert_eq!(response.status(), StatusCode::OK);
        // One process: the plain store's values.
        assert_eq!(
            lines(response.headers(), "ratelimit"),
            [format!(r#""default";r={left};t=50"#)]
        );
    }
    let trips = calls(&mut conn, "fcall") - before;
    assert!(
        trips <= 5,
        "20 grants from leases of 5 took {trips} round trips"
    );
    let refused = http.get(&base).send().await.unwrap();
    assert_eq!(refused.status(), StatusCode::TOO_MANY_REQUESTS);
    assert_eq!(refused.headers()["retry-after"], "50");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn behind_a_deny_cache_a_set_without_policies_keeps_its_fields() {
    let server = RedisServer::start_own();
    let set = AllOf::new((
        FixedWindow::new(2, Duration::from_secs(10)).unwrap(),
        FixedWindow::new(50, Duration::from_secs(3600)).unwrap(),
    ));
    let store = DenyCache::new(caller_time(&server, "deny-cache-bare"), &set).unwrap();
    let clock = ManualClock::new();
    let base = serve_at(set, store, &clock, RateLimitHeaders::new()).await;
    let http = reqwest::Client::new();
    let mut seen = Vec::new();
    for _ in 0..4 {
        let response = http.get(&base).send().await.unwrap();
        let h = response.headers();
        seen.push((
            response.status().as_u16(),
            lines(h, "ratelimit"),
            lines(h, "ratelimit-policy"),
        ));
    }
    let policy = vec![r#""limit0";q=2, "limit1";q=50"#.to_owned()];
    let refusal = vec![r#""limit0";r=0;t=10"#.to_owned()];
    // The store's refusal, then the cache's: the same fields.
    assert_eq!(seen[2], (429, refusal.clone(), policy.clone()), "{seen:?}");
    assert_eq!(seen[3], (429, refusal, policy), "{seen:?}");
}
