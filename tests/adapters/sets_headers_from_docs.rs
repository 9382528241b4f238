//! The server layer's fields for sets of limits (`AllOf`, `Limits`, nested), as
//! `RateLimitHeaders`, `Policy::describe` and `Quotas` document them, over real
//! HTTP: an axum server on 127.0.0.1 and reqwest clients on loopback; in memory on
//! a `ManualClock` for exact fields, on the real clock under concurrent clients,
//! and over a Redis server the test starts itself.
#![cfg(feature = "tower")]

use crate::support::adapters::{client_of, counted_app, serve};
use http::HeaderMap;
use sluicegate::adapters::server::{Policy, RateLimitHeaders, ServerLayer};
use sluicegate::algorithms::{AllOf, FixedWindow, LeakyBucket, Limits, SlidingLog};
use sluicegate::clock::ManualClock;
use sluicegate::{KeyedRateLimiter, RateLimiter};
use std::sync::atomic::Ordering;
use std::time::Duration;

fn secs(n: u64) -> Duration {
    Duration::from_secs(n)
}

/// The status and the fields; several lines of one field joined with ", ", as a
/// list spanning lines reads.
#[derive(Debug, PartialEq)]
struct Seen {
    status: u16,
    ratelimit: Option<String>,
    policy: Option<String>,
    retry_after: Option<String>,
}

fn joined(fields: &HeaderMap, name: &str) -> Option<String> {
    let lines: Vec<&str> = fields
        .get_all(name)
        .iter()
        .map(|v| v.to_str().unwrap())
        .collect();
    (!lines.is_empty()).then(|| lines.join(", "))
}

async fn get(client: &reqwest::Client, base: &str, who: &str) -> Seen {
    let response = client
        .get(base)
        .header("x-client", who)
        .send()
        .await
        .unwrap();
    let fields = response.headers();
    Seen {
        status: response.status().as_u16(),
        ratelimit: joined(fields, "ratelimit"),
        policy: joined(fields, "ratelimit-policy"),
        retry_after: joined(fields, "retry-after"),
    }
}

fn some(s: &str) -> Option<String> {
    Some(s.to_owned())
}

/// `RateLimitHeaders`: "`RateLimit` has one item per limit ... in the set's order.
/// On a grant each item is that limit's standing: `r` its remaining permits, `t`
/// the whole seconds, rounded up, until more than `r` are there"; "A refused call
/// lists only the limits that refused it, each with `r=0` ... and `t` its
/// `retry_after`"; `Retry-After` "equals the `t` of the refusing item whose retry
/// is longest". `Policy::describe` names the members and states their quotas.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sets_grants_list_every_member_and_its_refusals_only_the_refusers() {
    let clock = ManualClock::new();
    let set = AllOf::new((
        FixedWindow::new(2, secs(10)).unwrap(),
        SlidingLog::new(5, secs(60)).unwrap(),
    ));
    let policies = Policy::describe(&set, ["ten", "minute"]);
    let limiter = KeyedRateLimiter::with_clock(set, clock.clone());
    let layer =
        ServerLayer::keyed(limiter, client_of).headers(RateLimitHeaders::new().policies(policies));
    let (router, runs) = counted_app();
    let base = serve(router.layer(layer)).await;
    let client = reqwest::Client::new();
    let policy = some(r#""ten";q=2;w=10, "minute";q=5;w=60"#);
    let expect = |status, ratelimit: &str, retry: Option<&str>| Seen {
        status,
        ratelimit: some(ratelimit),
        policy: policy.clone(),
        retry_after: retry.map(str::to_owned),
    };

    let steps: [(u64, Seen); 6] = [
        (0, expect(200, r#""ten";r=1;t=10, "minute";r=4;t=60"#, None)),
        (0, expect(200, r#""ten";r=0;t=10, "minute";r=3;t=60"#, None)),
        (0, expect(429, r#""ten";r=0;t=10"#, Some("10"))),
        (4, expect(429, r#""ten";r=0;t=6"#, Some("6"))),
        // At 10 s the window turned; the log's calls at 0 s leave it at 60 s.
        (6, expect(200, r#""ten";r=1;t=10, "minute";r=2;t=50"#, None)),
        (0, expect(200, r#""ten";r=0;t=10, "minute";r=1;t=50"#, None)),
    ];
    for (i, (advance, want)) in steps.into_iter().enumerate() {
        clock.advance(secs(advance));
        assert_eq!(get(&client, &base, "ann").await, want, "request {i}");
    }
    // Two refused requests: neither reached the application, nor was counted.
    assert_eq!(runs.load(Ordering::SeqCst), 4);
    // Another client has limits of its own.
    let other = get(&client, &base, "bob").await;
    assert_eq!(
        other.ratelimit,
        some(r#""ten";r=1;t=10, "minute";r=4;t=60"#)
    );
}

/// `RateLimitHeaders`: without policies, "for a set reporting each member,
/// `"limit<i>";q=<its limit>` per member"; a `Limits` set "cannot say" its quotas
/// (`Quotas`), "the server layer runs either all the same". When both members
/// refuse, both are listed and `Retry-After` is the longer `t`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unnamed_limits_set_names_each_member_by_its_index_with_its_own_quota() {
    let clock = ManualClock::new();
    let limits = Limits::new()
        .with(FixedWindow::new(3, secs(60)).unwrap())
        .with(LeakyBucket::meter(2, 1, secs(4)).unwrap());
    let layer = ServerLayer::new(RateLimiter::with_clock(limits, clock.clone()));
    let (router, _) = counted_app();
    let base = serve(router.layer(layer)).await;
    let client = reqwest::Client::new();

    let first = get(&client, &base, "ann").await;
    assert_eq!(first.status, 200);
    assert_eq!(first.policy, some(r#""limit0";q=3, "limit1";q=2"#));
    // The meter has 1 left; its next permit comes in 4 s.
    assert_eq!(
        first.ratelimit,
        some(r#""limit0";r=2;t=60, "limit1";r=1;t=4"#)
    );
    get(&client, &base, "ann").await;
    let refused = get(&client, &base, "ann").await;
    assert_eq!(refused.status, 429);
    assert_eq!(refused.ratelimit, some(r#""limit1";r=0;t=4"#));
    assert_eq!(refused.retry_after, some("4"));
    clock.advance(secs(4));
    get(&client, &base, "ann").await; // the window's third
    let both = get(&client, &base, "ann").await;
    assert_eq!(both.status, 429);
    assert_eq!(
        both.ratelimit,
        some(r#""limit0";r=0;t=56, "limit1";r=0;t=4"#)
    );
    assert_eq!(both.retry_after, some("56"));
}

/// `Quotas`: a set's quotas are "one per member for a set, a nested set's members
/// in place", and `Policy::describe` gives "One policy per limit of `algorithm`";
/// `RateLimitHeaders`: a refused call "lists only the limits that refused it",
/// so "a client sees every limit that applies and which one refused (`r=0`, its
/// `t` the `Retry-After`)". With a nested set described so, a refusal by the outer
/// log must be named as the log, not as a limit that did not refuse.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_nested_sets_refusal_is_named_after_the_limit_that_refused() {
    let clock = ManualClock::new();
    let set = AllOf::new((
        AllOf::new((
            FixedWindow::new(2, secs(10)).unwrap(),
            FixedWindow::new(10, secs(60)).unwrap(),
        )),
        SlidingLog::new(3, secs(30)).unwrap(),
    ));
    let policies = Policy::describe(&set, ["ten", "minute", "log"]);
    assert_eq!(policies.len(), 3, "a nested set's members in place");
    let limiter = KeyedRateLimiter::with_clock(set, clock.clone());
    let layer =
        ServerLayer::keyed(limiter, client_of).headers(RateLimitHeaders::new().policies(policies));
    let (router, _) = counted_app();
    let base = serve(router.layer(layer)).await;
    let client = reqwest::Client::new();

    for _ in 0..2 {
        assert_eq!(get(&client, &base, "ann").await.status, 200);
    }
    clock.advance(secs(10));
    // The third call fills the log.
    assert_eq!(get(&client, &base, "ann").await.status, 200);
    // The ten-second window and the minute would grant; the log frees at 30 s.
    let refused = get(&client, &base, "ann").await;
    assert_eq!(refused.status, 429);
    assert_eq!(refused.retry_after, some("20"));
    assert_eq!(
        refused.policy,
        some(r#""ten";q=2;w=10, "minute";q=10;w=60, "log";q=3;w=30"#)
    );
    assert_eq!(refused.ratelimit, some(r#""log";r=0;t=20"#));
}

/// Sixteen concurrent clients on the real clock, all charged to one key of a
/// `Limits` set: exactly the tightest member's limit is served, every refusal
/// names that member with `r=0`, and the application runs once per grant.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn sixteen_concurrent_clients_get_exactly_the_tightest_member_of_a_set() {
    let hour = secs(3600);
    let limits = Limits::new()
        .with(SlidingLog::new(500, hour).unwrap())
        .with(FixedWindow::new(20, hour).unwrap());
    let limiter = KeyedRateLimiter::<String, _>::new(limits);
    let layer = ServerLayer::keyed(limiter, client_of).headers(RateLimitHeaders::new().policies([
        Policy::new("log", 500, hour),
        Policy::new("hourly", 20, hour),
    ]));
    let (router, runs) = counted_app();
    let base = serve(router.layer(layer)).await;
    let tasks: Vec<_> = (0..16)
        .map(|_| {
            let base = base.clone();
            tokio::spawn(async move {
                let client = reqwest::Client::new();
                let mut seen = Vec::new();
                for _ in 0..4 {
                    seen.push(get(&client, &base, "shared").await);
                }
                seen
            })
        })
        .collect();
    let mut all = Vec::new();
    for task in tasks {
        all.extend(task.await.unwrap());
    }
    let served = all.iter().filter(|s| s.status == 200).count();
    assert_eq!(served, 20);
    assert_eq!(runs.load(Ordering::SeqCst), 20);
    for refused in all.iter().filter(|s| s.status != 200) {
        assert_eq!(refused.status, 429);
        let item = refused.ratelimit.as_deref().unwrap();
        assert!(item.starts_with(r#""hourly";r=0;t="#), "{item}");
        assert!(!item.contains("log"), "{item}");
    }
}

/// The same requests at the same (caller's) times over the in-memory store and
/// over Redis get the same fields: `KeyedRateLimiter::check_each` reports every
/// member "when the store can say so in the same step (the in-memory store can,
/// ... and the Redis store, in the same round trip)".
#[cfg(feature = "redis")]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn over_redis_a_sets_fields_are_those_of_the_memory_store() {
    use crate::support::redis::trace::caller_time_options;
    use crate::support::redis::{unique_prefix, RedisServer};
    use sluicegate::stores::redis::RedisStore;

    let server = tokio::task::spawn_blocking(RedisServer::start)
        .await
        .unwrap();
    let set = || {
        AllOf::new((
            FixedWindow::new(3, secs(10)).unwrap(),
            LeakyBucket::meter(4, 1, secs(2)).unwrap(),
            SlidingLog::new(6, secs(30)).unwrap(),
        ))
    };
    let policies = Policy::describe(&set(), ["ten", "meter", "log"]);
    let clock = ManualClock::new();
    clock.advance(secs(1_764_000_000)); // caller time: November 2025, in Unix seconds
    let memory = KeyedRateLimiter::with_clock(set(), clock.clone());
    let store = RedisStore::open_with(
        server.url(),
        caller_time_options(&unique_prefix("sets-hdr")),
    )
    .unwrap();
    let redis = KeyedRateLimiter::with_store(set(), store, clock.clone());
    let headers = RateLimitHeaders::new().policies(policies);
    let (router, _) = counted_app();
    let on_memory = serve(
        router
            .clone()
            .layer(ServerLayer::keyed(memory, client_of).headers(headers.clone())),
    )
    .await;
    let on_redis = serve(router.layer(ServerLayer::keyed(redis, client_of).headers(headers))).await;
    let client = reqwest::Client::new();
    let gaps_ms = [
        0, 0, 0, 300, 0, 1_700, 0, 0, 2_500, 0, 4_000, 0, 0, 0, 9_000, 0,
    ];
    let mut refused = 0;
    for (i, gap) in gaps_ms.into_iter().enumerate() {
        clock.advance(Duration::from_millis(gap));
        for who in ["ann", "bob"] {
            let m = get(&client, &on_memory, who).await;
            let r = get(&client, &on_redis, who).await;
            assert_eq!(r, m, "request {i} of {who}");
            refused += usize::from(m.status == 429);
        }
    }
    assert!(refused >= 4, "{refused}");
}
