//! The server layer's fields for sets nested in sets, over real HTTP, held to the
//! docs: `Policy::describe` lists "a set nested in a set ... in its place, depth
//! first: the order in which the set reports its limits ... and in which a
//! decision's `limit_index` counts them, on every store. So `RateLimit` item `i`
//! is named by policy `i` however the set nests". Each limit in turn refuses a
//! request alone (the script of `support::nested_sets`): the refusal's item is
//! named after it, in memory and over a Redis server the test starts itself.
#![cfg(feature = "tower")]

use crate::support::adapters::{client_of, counted_app, serve};
use crate::support::nested_sets::{log, minute, ten, NAMES, SCRIPT};
use sluicegate::adapters::server::{Policy, Quotas, RateLimitHeaders, ServerLayer};
use sluicegate::algorithms::{AllOf, Limits};
use sluicegate::clock::{Clock, ManualClock};
use sluicegate::KeyedRateLimiter;
use std::time::Duration;

/// A response's status, `RateLimit` and `Retry-After`.
#[derive(Debug, PartialEq)]
struct Fields {
    status: u16,
    ratelimit: String,
    retry_after: Option<String>,
}

async fn get(client: &reqwest::Client, base: &str, who: &str) -> Fields {
    let response = client
        .get(base)
        .header("x-client", who)
        .send()
        .await
        .unwrap();
    let text = |name| {
        let lines: Vec<&str> = response
            .headers()
            .get_all(name)
            .iter()
            .map(|v| v.to_str().unwrap())
            .collect();
        (!lines.is_empty()).then(|| lines.join(", "))
    };
    Fields {
        status: response.status().as_u16(),
        ratelimit: text("ratelimit").unwrap_or_default(),
        retry_after: text("retry-after"),
    }
}

/// The script's requests to the server at `base`, on `clock` (moved on to the
/// next whole minute first): each response's fields.
async fn run_script(base: &str, clock: &ManualClock) -> Vec<Fields> {
    let client = reqwest::Client::new();
    let minute = 60_000_000_000;
    let start = clock.now().div_ceil(minute) * minute;
    let mut seen = Vec::new();
    for step in &SCRIPT {
        clock.advance_nanos(start + step.at * 1_000_000_000 - clock.now());
        seen.push(get(&client, base, step.key).await);
    }
    seen
}

/// Every refusal is `"<the refusing limit>";r=0;t=<its retry>`, with that
/// `Retry-After`; every grant lists the three limits by name, in order.
fn assert_named_after_the_limit(seen: &[Fields], shape: &str) {
    for (step, fields) in SCRIPT.iter().zip(seen) {
        let at = format!("{shape}: {} at {} s", step.key, step.at);
        match step.refused_by {
            Some((leaf, retry)) => {
                assert_eq!(fields.status, 429, "{at}");
                let item = format!("\"{}\";r=0;t={retry}", NAMES[leaf as usize]);
                assert_eq!(fields.ratelimit, item, "{at}");
                assert_eq!(fields.retry_after, Some(retry.to_string()), "{at}");
            }
            None => {
                assert_eq!(fields.status, 200, "{at}");
                let names: Vec<&str> = fields
                    .ratelimit
                    .split(", ")
                    .map(|item| item.split(';').next().unwrap())
                    .collect();
                assert_eq!(names, ["\"ten\"", "\"minute\"", "\"log\""], "{at}");
            }
        }
    }
}

fn policies() -> Vec<Policy> {
    let secs = Duration::from_secs;
    vec![
        Policy::new("ten", 2, secs(10)),
        Policy::new("minute", 4, secs(60)),
        Policy::new("log", 6, secs(90)),
    ]
}

/// The script through the server layer on the in-memory store, the set's
/// policies as `Policy::describe` lists them.
async fn described_in_memory<A: Quotas>(shape: &str, set: A) {
    // Described, the nested set's limits are listed in its place.
    let described = Policy::describe(&set, NAMES);
    assert_eq!(described, policies(), "{shape}");
    let clock = ManualClock::new();
    let limiter = KeyedRateLimiter::with_clock(set, clock.clone());
    let headers = RateLimitHeaders::new().policies(described);
    let (router, _) = counted_app();
    let base = serve(router.layer(ServerLayer::keyed(limiter, client_of).headers(headers))).await;
    assert_named_after_the_limit(&run_script(&base, &clock).await, shape);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refusal_by_each_limit_of_a_nested_all_of_is_named_after_it() {
    described_in_memory(
        "AllOf((AllOf((ten, minute)), log))",
        AllOf::new((AllOf::new((ten(), minute())), log())),
    )
    .await;
    described_in_memory(
        "AllOf((ten, AllOf((minute, log))))",
        AllOf::new((ten(), AllOf::new((minute(), log())))),
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refusal_by_each_limit_of_a_nested_limits_is_named_after_it() {
    let set = Limits::new()
        .with(Limits::new().with(ten()).with(minute()))
        .with(log());
    let clock = ManualClock::new();
    let limiter = KeyedRateLimiter::with_clock(set, clock.clone());
    let headers = RateLimitHeaders::new().policies(policies());
    let (router, _) = counted_app();
    let base = serve(router.layer(ServerLayer::keyed(limiter, client_of).headers(headers))).await;
    assert_named_after_the_limit(
        &run_script(&base, &clock).await,
        "Limits[Limits[ten, minute], log]",
    );
}

/// The same script over the Redis store at the caller's time: the same fields as
/// in memory, for a nested `AllOf` and a nested `Limits`.
#[cfg(feature = "redis")]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn over_redis_a_nested_sets_refusals_are_named_as_in_memory() {
    use crate::support::redis::trace::{caller_time_options, NOV_2025};
    use crate::support::redis::{unique_prefix, RedisServer};
    use sluicegate::algorithms::Algorithm;
    use sluicegate::stores::redis::{RedisAlgorithm, RedisStore};

    async fn on_redis<A: RedisAlgorithm + Algorithm + Clone>(
        url: &str,
        test: &str,
        set: A,
    ) -> Vec<Fields> {
        let clock = ManualClock::new();
        clock.advance_nanos(NOV_2025);
        let store = RedisStore::open_with(url, caller_time_options(&unique_prefix(test))).unwrap();
        let limiter = KeyedRateLimiter::with_store(set, store, clock.clone());
        let headers = RateLimitHeaders::new().policies(policies());
        let (router, _) = counted_app();
        let base =
            serve(router.layer(ServerLayer::keyed(limiter, client_of).headers(headers))).await;
        run_script(&base, &clock).await
    }

    async fn in_memory<A: Algorithm>(set: A) -> Vec<Fields> {
        let clock = ManualClock::new();
        clock.advance_nanos(NOV_2025);
        let limiter = KeyedRateLimiter::with_clock(set, clock.clone());
        let headers = RateLimitHeaders::new().policies(policies());
        let (router, _) = counted_app();
        let base =
            serve(router.layer(ServerLayer::keyed(limiter, client_of).headers(headers))).await;
        run_script(&base, &clock).await
    }

    let server = tokio::task::spawn_blocking(RedisServer::start)
        .await
        .unwrap();
    let all_of = || AllOf::new((AllOf::new((ten(), minute())), log()));
    let redis = on_redis(server.url(), "nested-hdr-all-of", all_of()).await;
    assert_named_after_the_limit(&redis, "AllOf over Redis");
    assert_eq!(redis, in_memory(all_of()).await, "AllOf: Redis as memory");
    let limits = || {
        Limits::new()
            .with(Limits::new().with(ten()).with(minute()))
            .with(log())
    };
    let redis = on_redis(server.url(), "nested-hdr-limits", limits()).await;
    assert_named_after_the_limit(&redis, "Limits over Redis");
    assert_eq!(redis, in_memory(limits()).await, "Limits: Redis as memory");
}
