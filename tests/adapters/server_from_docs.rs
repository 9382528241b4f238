//! The server layer as its public docs describe it, checked over real HTTP: an axum
//! server on 127.0.0.1 and reqwest clients on loopback. Each test states the doc
//! text it holds the layer to: the fields at known instants (a `ManualClock` where
//! the limiter takes one), keys and costs, what reaches the application, the
//! bound under sixteen concurrent clients on the real clock, and, over a Redis
//! server the test starts itself, each failure policy while that server is paused
//! and after it resumes.
#![cfg(feature = "tower")]

use crate::support::adapters::{client_of, counted_app, serve};
use axum::body::Body;
use http::{HeaderMap, Request};
use sluicegate::adapters::server::{Legacy, Policy, RateLimitHeaders, ServerLayer};
use sluicegate::adapters::Weighed;
use sluicegate::algorithms::{AllOf, FixedWindow, LeakyBucket, SlidingLog};
use sluicegate::clock::{Clock, ManualClock};
use sluicegate::{KeyedRateLimiter, RateLimiter};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

/// Every field the layer may write.
const FIELDS: [&str; 9] = [
    "ratelimit",
    "ratelimit-policy",
    "retry-after",
    "x-ratelimit-limit",
    "x-ratelimit-remaining",
    "x-ratelimit-reset",
    "x-rate-limit-limit",
    "x-rate-limit-remaining",
    "x-rate-limit-reset",
];

/// The `x-cost` header, 1 without one.
fn cost_of(request: &Request<Body>) -> u64 {
    request
        .headers()
        .get("x-cost")
        .and_then(|v| v.to_str().ok())
        .map_or(1, |v| v.parse().unwrap())
}

/// What came back: the status and the rate-limit fields (several lines of one
/// field joined with ", ", as a list spanning lines reads).
#[derive(Debug)]
struct Seen {
    status: u16,
    fields: HeaderMap,
}

impl Seen {
    fn get(&self, name: &str) -> Option<String> {
        let lines: Vec<&str> = self
            .fields
            .get_all(name)
            .iter()
            .map(|v| v.to_str().unwrap())
            .collect();
        (!lines.is_empty()).then(|| lines.join(", "))
    }

    fn field(&self, name: &str) -> String {
        self.get(name)
            .unwrap_or_else(|| panic!("no {name} in {:?}", self.fields))
    }

    /// The rate-limit fields present, in the order of [`FIELDS`].
    fn present(&self) -> Vec<&'static str> {
        FIELDS
            .into_iter()
            .filter(|name| self.fields.contains_key(*name))
            .collect()
    }
}

/// Sends one request to `url` with the given headers.
async fn send(client: &reqwest::Client, method: &str, url: &str, headers: &[(&str, &str)]) -> Seen {
    let mut builder = client.request(method.parse().unwrap(), url);
    for (name, value) in headers {
        builder = builder.header(*name, *value);
    }
    let response = builder.send().await.unwrap();
    Seen {
        status: response.status().as_u16(),
        fields: response.headers().clone(),
    }
}

async fn get(client: &reqwest::Client, url: &str, headers: &[(&str, &str)]) -> Seen {
    send(client, "GET", url, headers).await
}

/// Layer docs: an allowed response carries `RateLimit` and `RateLimit-Policy`; a
/// refused one is `429` with `Retry-After` and the fields, "without reaching the
/// inner service". RateLimitHeaders docs: without policies the policy is
/// `"default";q=<limit>`; on a grant `t` is "the whole seconds, rounded up, until
/// more than `r` are there (... a fixed window's end ...)"; a refusal lists
/// `r=0` and `t` its `retry_after`; `Retry-After` is `retry_after` in whole
/// seconds, rounded up.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fixed_window_fields_over_http_follow_the_window_end_at_known_instants() {
    let clock = ManualClock::new();
    let window = FixedWindow::new(3, Duration::from_secs(60)).unwrap();
    let limiter = KeyedRateLimiter::with_clock(window, clock.clone());
    let (router, runs) = counted_app();
    let base = serve(router.layer(ServerLayer::keyed(limiter, client_of))).await;
    let client = reqwest::Client::new();
    let ann = [("x-client", "ann")];

    let first = get(&client, &base, &ann).await;
    assert_eq!(first.status, 200);
    assert_eq!(first.field("ratelimit"), r#""default";r=2;t=60"#);
    assert_eq!(first.field("ratelimit-policy"), r#""default";q=3"#);
    assert_eq!(first.present(), ["ratelimit", "ratelimit-policy"]);

    clock.advance(Duration::from_millis(20_200)); // 39.8 s to the window's end
    let second = get(&client, &base, &ann).await;
    assert_eq!(
        (second.status, second.field("ratelimit")),
        (200, r#""default";r=1;t=40"#.to_owned())
    );
    let third = get(&client, &base, &ann).await;
    assert_eq!(
        (third.status, third.field("ratelimit")),
        (200, r#""default";r=0;t=40"#.to_owned())
    );

    let refused = get(&client, &base, &ann).await;
    assert_eq!(refused.status, 429);
    assert_eq!(refused.field("retry-after"), "40");
    assert_eq!(refused.field("ratelimit"), r#""default";r=0;t=40"#);
    assert_eq!(refused.field("ratelimit-policy"), r#""default";q=3"#);
    assert_eq!(
        runs.load(Ordering::SeqCst),
        3,
        "the refused request reached the app"
    );

    clock.advance(Duration::from_millis(39_800)); // exactly the next window
    let next = get(&client, &base, &ann).await;
    assert_eq!(
        (next.status, next.field("ratelimit")),
        (200, r#""default";r=2;t=60"#.to_owned())
    );
    assert_eq!(runs.load(Ordering::SeqCst), 4);
}

/// `ServerLayer::keyed`: "One permit of the keyed limiter per request, charged to
/// the key `key` gives it". A key exhausted refuses only itself.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn keys_from_a_header_are_limited_apart_and_refusals_never_reach_the_app() {
    let window = FixedWindow::new(2, Duration::from_secs(60)).unwrap();
    let limiter = KeyedRateLimiter::with_clock(window, ManualClock::new());
    let (router, runs) = counted_app();
    let base = serve(router.layer(ServerLayer::keyed(limiter.clone(), client_of))).await;
    let client = reqwest::Client::new();

    let mut statuses = Vec::new();
    for who in ["ann", "ann", "ann", "ann", "bob"] {
        statuses.push(get(&client, &base, &[("x-client", who)]).await.status);
    }
    let anonymous = get(&client, &base, &[]).await;
    assert_eq!(statuses, [200, 200, 429, 429, 200]);
    assert_eq!(
        (anonymous.status, anonymous.field("ratelimit")),
        (200, r#""default";r=1;t=60"#.to_owned())
    );
    assert_eq!(
        runs.load(Ordering::SeqCst),
        4,
        "only the granted requests ran"
    );
    // What the limiter holds: bob and anon each spent one, ann both.
    assert_eq!(limiter.peek("bob", 1).map(|d| d.remaining()), Ok(0));
    assert_eq!(limiter.peek("ann", 1).map(|d| d.is_allowed()), Ok(false));
}

/// `with_weigher`: "Charges each request what `weigher` says: a closure
/// `|request| (key, cost)`" (its example: writes cost twice what reads do); README:
/// "a rejected call changes no state".
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn posts_cost_two_and_a_refused_post_takes_nothing() {
    let window = FixedWindow::new(5, Duration::from_secs(60)).unwrap();
    let limiter = KeyedRateLimiter::with_clock(window, ManualClock::new());
    let by_path = |r: &Request<Body>| {
        let cost = if r.method() == http::Method::POST {
            2
        } else {
            1
        };
        (r.uri().path().to_owned(), cost)
    };
    let (router, runs) = counted_app();
    let base = serve(router.layer(ServerLayer::with_weigher(limiter, by_path))).await;
    let client = reqwest::Client::new();
    let a = format!("{base}a");
    let b = format!("{base}b");

    let post = |url: String| {
        let client = client.clone();
        async move { send(&client, "POST", &url, &[]).await }
    };
    assert_eq!(
        post(a.clone()).await.field("ratelimit"),
        r#""default";r=3;t=60"#
    );
    assert_eq!(
        post(a.clone()).await.field("ratelimit"),
        r#""default";r=1;t=60"#
    );
    let refused = post(a.clone()).await;
    assert_eq!(refused.status, 429);
    assert_eq!(refused.field("ratelimit"), r#""default";r=0;t=60"#);
    assert_eq!(refused.field("retry-after"), "60");
    let read = get(&client, &a, &[]).await;
    assert_eq!(
        (read.status, read.field("ratelimit")),
        (200, r#""default";r=0;t=60"#.to_owned())
    );
    let other = get(&client, &b, &[]).await;
    assert_eq!(
        (other.status, other.field("ratelimit")),
        (200, r#""default";r=4;t=60"#.to_owned())
    );
    assert_eq!(runs.load(Ordering::SeqCst), 4);
}

/// Module docs: a cost above capacity "is answered `400 Bad Request` by default
/// ..., without `Retry-After`, with the policy fields showing the quota the
/// request exceeds"; `never_status` picks another. RateLimitHeaders: "A cost that
/// can never be granted has no `t`, and `r` what is left." The diagram: the
/// inner service is not called.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cost_above_the_quota_gets_the_never_status_and_what_is_left() {
    let window = FixedWindow::new(4, Duration::from_secs(60)).unwrap();
    let limiter = RateLimiter::with_clock(window, ManualClock::new());
    let (router, runs) = counted_app();
    let as_413 = ServerLayer::with_weigher(limiter.clone(), Weighed(cost_of))
        .never_status(http::StatusCode::PAYLOAD_TOO_LARGE);
    let base_413 = serve(router.clone().layer(as_413)).await;
    let base_400 = serve(router.layer(ServerLayer::with_weigher(limiter, Weighed(cost_of)))).await;
    let client = reqwest::Client::new();

    assert_eq!(
        get(&client, &base_413, &[("x-cost", "1")]).await.status,
        200
    );
    let too_big = get(&client, &base_413, &[("x-cost", "5")]).await;
    assert_eq!(too_big.status, 413);
    assert_eq!(too_big.present(), ["ratelimit", "ratelimit-policy"]);
    assert_eq!(too_big.field("ratelimit"), r#""default";r=3"#);
    assert_eq!(too_big.field("ratelimit-policy"), r#""default";q=4"#);
    let by_default = get(&client, &base_400, &[("x-cost", "5")]).await;
    assert_eq!(
        (by_default.status, by_default.get("retry-after")),
        (400, None)
    );
    // Neither took anything: the 3 left are still there.
    let rest = get(&client, &base_400, &[("x-cost", "3")]).await;
    assert_eq!(
        (rest.status, rest.field("ratelimit")),
        (200, r#""default";r=0;t=60"#.to_owned())
    );
    assert_eq!(runs.load(Ordering::SeqCst), 2);
}

/// Module docs: "A cost of 0 is free: let through at once, uncounted, without
/// fields" (the diagram: cost 0 goes to the inner service, whatever the limit).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_free_request_passes_an_exhausted_limit_without_fields() {
    let window = FixedWindow::new(1, Duration::from_secs(60)).unwrap();
    let limiter = RateLimiter::with_clock(window, ManualClock::new());
    let (router, runs) = counted_app();
    let base = serve(router.layer(ServerLayer::with_weigher(limiter, Weighed(cost_of)))).await;
    let client = reqwest::Client::new();

    assert_eq!(get(&client, &base, &[]).await.status, 200);
    assert_eq!(get(&client, &base, &[]).await.status, 429);
    let free = get(&client, &base, &[("x-cost", "0")]).await;
    assert_eq!(free.status, 200);
    assert!(
        free.present().is_empty(),
        "a free request got {:?}",
        free.present()
    );
    assert_eq!(get(&client, &base, &[]).await.status, 429);
    assert_eq!(runs.load(Ordering::SeqCst), 2);
}

/// RateLimitHeaders: "A refused call lists only the limits that refused it, each
/// with `r=0` ... and `t` its `retry_after`"; "`Retry-After` ... equals the `t` of
/// the refusing item whose retry is longest". `Policy::describe` names a set's
/// limits from their quotas.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn when_both_limits_of_a_set_refuse_retry_after_is_the_longer_t() {
    let clock = ManualClock::new();
    let set = AllOf::new((
        FixedWindow::new(2, Duration::from_secs(10)).unwrap(),
        FixedWindow::new(2, Duration::from_secs(60)).unwrap(),
    ));
    let policies = Policy::describe(&set, ["ten", "minute"]);
    let limiter = RateLimiter::with_clock(set, clock.clone());
    let layer = ServerLayer::new(limiter).headers(RateLimitHeaders::new().policies(policies));
    let (router, _) = counted_app();
    let base = serve(router.layer(layer)).await;
    let client = reqwest::Client::new();

    let first = get(&client, &base, &[]).await;
    assert_eq!(
        first.field("ratelimit-policy"),
        r#""ten";q=2;w=10, "minute";q=2;w=60"#
    );
    assert_eq!(
        first.field("ratelimit"),
        r#""ten";r=1;t=10, "minute";r=1;t=60"#
    );
    get(&client, &base, &[]).await;
    let both = get(&client, &base, &[]).await;
    assert_eq!(both.status, 429);
    assert_eq!(
        both.field("ratelimit"),
        r#""ten";r=0;t=10, "minute";r=0;t=60"#
    );
    assert_eq!(both.field("retry-after"), "60");

    clock.advance(Duration::from_secs(10)); // the ten-second window turned
    let minute_only = get(&client, &base, &[]).await;
    assert_eq!(minute_only.status, 429);
    assert_eq!(minute_only.field("ratelimit"), r#""minute";r=0;t=50"#);
    assert_eq!(minute_only.field("retry-after"), "50");
}

/// `RateLimitHeaders::none`: "No rate-limit fields at all: a refusal still
/// carries `Retry-After`."
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_fields_a_refusal_carries_retry_after_alone() {
    let clock = ManualClock::new();
    clock.advance(Duration::from_millis(500));
    let window = FixedWindow::new(1, Duration::from_secs(60)).unwrap();
    let layer =
        ServerLayer::new(RateLimiter::with_clock(window, clock)).headers(RateLimitHeaders::none());
    let (router, runs) = counted_app();
    let base = serve(router.layer(layer)).await;
    let client = reqwest::Client::new();

    let granted = get(&client, &base, &[]).await;
    assert_eq!((granted.status, granted.present()), (200, vec![]));
    let refused = get(&client, &base, &[]).await;
    assert_eq!(
        (refused.status, refused.present()),
        (429, vec!["retry-after"])
    );
    assert_eq!(refused.field("retry-after"), "60"); // 59.5 s, rounded up
    assert_eq!(runs.load(Ordering::SeqCst), 1);
}

/// `legacy_only`: "Sends only the legacy fields ..., not the IETF ones.
/// `Retry-After` is sent on a refusal either way"; `-Reset` is "seconds until that
/// limit is whole again, rounded up", on a refusal "`-Remaining` is 0 and `-Reset`
/// is never earlier than `Retry-After`".
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn legacy_only_fields_over_http_count_down_to_the_window_end() {
    let clock = ManualClock::new();
    clock.advance(Duration::from_millis(10_500)); // 19.5 s to the window's end
    let window = FixedWindow::new(2, Duration::from_secs(30)).unwrap();
    let layer = ServerLayer::new(RateLimiter::with_clock(window, clock))
        .headers(RateLimitHeaders::new().legacy_only(Legacy::XRateDashLimit));
    let (router, _) = counted_app();
    let base = serve(router.layer(layer)).await;
    let client = reqwest::Client::new();
    let trio = |seen: &Seen| {
        [
            "x-rate-limit-limit",
            "x-rate-limit-remaining",
            "x-rate-limit-reset",
        ]
        .map(|name| seen.field(name))
    };

    let first = get(&client, &base, &[]).await;
    assert_eq!(
        first.present(),
        [
            "x-rate-limit-limit",
            "x-rate-limit-remaining",
            "x-rate-limit-reset"
        ]
    );
    assert_eq!(trio(&first), ["2", "1", "20"]);
    assert_eq!(trio(&get(&client, &base, &[]).await), ["2", "0", "20"]);
    let refused = get(&client, &base, &[]).await;
    assert_eq!(refused.status, 429);
    assert_eq!(trio(&refused), ["2", "0", "20"]);
    assert_eq!(refused.field("retry-after"), "20");
    assert!(
        !refused.fields.contains_key("ratelimit")
            && !refused.fields.contains_key("ratelimit-policy")
    );
}

/// SipHash-2-4 of `bytes` under the 16-byte key, by std's own (deprecated, but
/// SipHash-2-4) hasher: the reference algorithm, keyed as the reference keys it
/// (two little-endian words), its 64-bit result as little-endian bytes.
#[allow(deprecated)]
fn reference_siphash(secret: [u8; 16], bytes: &[u8]) -> [u8; 8] {
    use std::hash::Hasher;
    let k0 = u64::from_le_bytes(secret[..8].try_into().unwrap());
    let k1 = u64::from_le_bytes(secret[8..].try_into().unwrap());
    let mut hasher = std::hash::SipHasher::new_with_keys(k0, k1);
    hasher.write(bytes);
    hasher.finish().to_le_bytes()
}

/// The `pk` parameter of every item in a `RateLimit` field.
fn partition_keys(value: &str) -> Vec<Vec<u8>> {
    let list: sfv::List = sfv::Parser::new(value.as_bytes()).parse().unwrap();
    list.into_iter()
        .map(|entry| {
            let sfv::ListEntry::Item(item) = entry else {
                panic!("an inner list in {value}")
            };
            let (_, pk) = item
                .params
                .iter()
                .find(|(k, _)| k.as_str() == "pk")
                .expect("a pk");
            pk.as_byte_sequence().expect("pk is an sf-binary").to_vec()
        })
        .collect()
}

/// `partition_keys`: "8 bytes (an sf-binary, `pk=:…:`) that are the SipHash-2-4
/// of the request's limiter key under the 128-bit `secret`, never the key itself
/// ... the key is hashed as its `Hash` implementation writes it, integers in
/// little-endian on every platform. `RateLimit-Policy` carries no `pk`".
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn partition_keys_are_the_siphash_of_the_key_under_the_secret() {
    // The reference's own test vector (key 00..0f, message 00..07), so that the
    // oracle is the reference algorithm.
    let secret: [u8; 16] = std::array::from_fn(|i| i as u8);
    let message: [u8; 8] = std::array::from_fn(|i| i as u8);
    assert_eq!(
        reference_siphash(secret, &message),
        [0x62, 0x24, 0x93, 0x9a, 0x79, 0xf5, 0xf5, 0x93]
    );

    let window = FixedWindow::new(10, Duration::from_secs(60)).unwrap();
    let limiter: KeyedRateLimiter<u64, FixedWindow, _, _> =
        KeyedRateLimiter::with_clock(window, ManualClock::new());
    let by_id =
        |r: &Request<Body>| -> u64 { r.headers()["x-id"].to_str().unwrap().parse().unwrap() };
    let layer = ServerLayer::keyed(limiter, by_id).partition_keys(secret);
    let (router, _) = counted_app();
    let base = serve(router.layer(layer)).await;
    let client = reqwest::Client::new();

    let key = u64::from_le_bytes(message); // written as the bytes 00..07
    let seen = get(&client, &base, &[("x-id", &key.to_string())]).await;
    assert_eq!(
        partition_keys(&seen.field("ratelimit")),
        [reference_siphash(secret, &message).to_vec()]
    );
    assert!(!seen.field("ratelimit-policy").contains("pk"));
    let other = get(&client, &base, &[("x-id", "7")]).await;
    assert_eq!(
        partition_keys(&other.field("ratelimit")),
        [reference_siphash(secret, &7u64.to_le_bytes()).to_vec()]
    );
}

/// `delay_up_to`: one that "has to wait and can within `max` is let through once
/// its permits are granted; its response carries `RateLimit-Policy` but no
/// `RateLimit` item ... and no legacy fields"; one whose wait "would exceed `max`
/// is refused at once, consuming nothing, with `429` and the fields of a refusal
/// (its `Retry-After` says when a request would pass without waiting)".
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_held_request_carries_the_policy_alone_and_one_past_the_maximum_is_refused_at_once() {
    let clock = ManualClock::new();
    let queue = LeakyBucket::queue(4, 2, Duration::from_secs(1)).unwrap(); // 500 ms apart
    let layer = ServerLayer::new(RateLimiter::with_clock(queue, clock.clone()))
        .delay_up_to(Duration::from_millis(450))
        .headers(RateLimitHeaders::new().legacy(Legacy::XRateLimit));
    let (router, runs) = counted_app();
    let base = serve(router.layer(layer)).await;
    let client = reqwest::Client::new();

    let first = get(&client, &base, &[]).await;
    assert_eq!(first.status, 200);
    assert!(first.fields.contains_key("ratelimit"));
    let too_long = get(&client, &base, &[]).await; // would wait 500 ms > 450 ms
    assert_eq!(too_long.status, 429);
    assert_eq!(too_long.field("retry-after"), "1");
    assert!(too_long.fields.contains_key("ratelimit"));
    assert_eq!(clock.now(), 0, "the refused request was held");

    clock.advance(Duration::from_millis(100)); // now a wait of 400 ms
    let held = get(&client, &base, &[]).await;
    assert_eq!(held.status, 200);
    assert_eq!(held.present(), ["ratelimit-policy"]);
    assert_eq!(
        clock.now(),
        500_000_000,
        "held until its turn, 500 ms after the first"
    );
    assert_eq!(runs.load(Ordering::SeqCst), 2);
}

/// Sends `per_client` requests from each of `clients` concurrent clients, each
/// with its own connection, keyed by `key(i)`; answers every (key, response).
async fn hammer(
    base: &str,
    clients: usize,
    per_client: usize,
    key: fn(usize) -> String,
) -> Vec<(String, Seen)> {
    let mut tasks = Vec::new();
    for i in 0..clients {
        let base = base.to_owned();
        tasks.push(tokio::spawn(async move {
            let client = reqwest::Client::new();
            let mut seen = Vec::new();
            for _ in 0..per_client {
                seen.push((key(i), get(&client, &base, &[("x-client", &key(i))]).await));
            }
            seen
        }));
    }
    let mut all = Vec::new();
    for task in tasks {
        all.extend(task.await.unwrap());
    }
    all
}

/// README: `SlidingLog` is "exact": at most `limit` per `window` on each key. With
/// sixteen concurrent clients on the real clock, each key grants exactly its limit
/// within the window, and every refusal says `r=0` with a `Retry-After` within the
/// window.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn sixteen_concurrent_clients_get_exactly_each_keys_sliding_log_limit() {
    let log = SlidingLog::new(10, Duration::from_secs(60)).unwrap();
    let limiter = KeyedRateLimiter::new(log);
    let (router, runs) = counted_app();
    let base = serve(router.layer(ServerLayer::keyed(limiter, client_of))).await;

    let seen = hammer(&base, 16, 4, |i| {
        if i % 2 == 0 {
            "even".into()
        } else {
            "odd".into()
        }
    })
    .await;
    for key in ["even", "odd"] {
        let of_key: Vec<&Seen> = seen
            .iter()
            .filter(|(k, _)| k == key)
            .map(|(_, s)| s)
            .collect();
        let granted = of_key.iter().filter(|s| s.status == 200).count();
        assert_eq!((of_key.len(), granted), (32, 10), "key {key}");
        for refused in of_key.iter().filter(|s| s.status != 200) {
            assert_eq!(refused.status, 429);
            let retry: u64 = refused.field("retry-after").parse().unwrap();
            assert!((1..=60).contains(&retry), "Retry-After {retry}");
            assert!(refused
                .field("ratelimit")
                .starts_with(r#""default";r=0;t="#));
        }
    }
    assert_eq!(runs.load(Ordering::SeqCst), 20);
}

/// README: `LeakyBucket::meter` admits "at most `b + r·t` over any span `t`".
/// Sixteen concurrent clients through one direct limiter on the real clock.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn sixteen_concurrent_clients_through_a_meter_stay_within_b_plus_rt() {
    let meter = LeakyBucket::meter(5, 1, Duration::from_secs(10)).unwrap();
    let (router, runs) = counted_app();
    let base = serve(router.layer(ServerLayer::new(RateLimiter::new(meter)))).await;

    let started = std::time::Instant::now();
    let seen = hammer(&base, 16, 3, |_| "all".into()).await;
    let span = started.elapsed();
    let granted = seen.iter().filter(|(_, s)| s.status == 200).count() as u64;
    let bound = 5 + span.as_secs() / 10;
    assert!(
        (1..=bound).contains(&granted),
        "{granted} granted in {span:?}"
    );
    assert_eq!(runs.load(Ordering::SeqCst) as u64, granted);
    assert!(seen.iter().all(|(_, s)| s.status == 200 || s.status == 429));
}

/// `partition_keys`: "the key is hashed as its `Hash` implementation writes it":
/// a `String` writes its bytes and then `0xff` (`Hasher::write_str`).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_string_keys_partition_key_is_the_siphash_of_what_its_hash_writes() {
    let secret = *b"a secret of 16 b";
    let window = FixedWindow::new(10, Duration::from_secs(60)).unwrap();
    let limiter = KeyedRateLimiter::with_clock(window, ManualClock::new());
    let layer = ServerLayer::keyed(limiter, client_of).partition_keys(secret);
    let (router, _) = counted_app();
    let base = serve(router.layer(layer)).await;
    let client = reqwest::Client::new();

    let seen = get(&client, &base, &[("x-client", "user-42")]).await;
    assert_eq!(
        partition_keys(&seen.field("ratelimit")),
        [reference_siphash(secret, b"user-42\xff").to_vec()]
    );
}

/// `RateLimitHeaders::policies`: "Names are sent as sf-strings; characters outside
/// printable ASCII become `?`"; `Policy::quota_unit`: "Sent as an sf-string". An
/// sf-string escapes `"` and `\`, so a structured-field parser reads the names
/// back as they were given (but for the `?`).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn policy_names_and_units_are_valid_sf_strings_whatever_their_characters() {
    let window = FixedWindow::new(4, Duration::from_secs(60)).unwrap();
    let policy =
        Policy::new(r#"say "hi" \ bye"#, 4, Duration::from_secs(60)).quota_unit("caf\u{e9} \"x\"");
    let layer = ServerLayer::new(RateLimiter::with_clock(window, ManualClock::new()))
        .headers(RateLimitHeaders::new().policies([policy]));
    let (router, _) = counted_app();
    let base = serve(router.layer(layer)).await;
    let client = reqwest::Client::new();

    let seen = get(&client, &base, &[]).await;
    for name in ["ratelimit", "ratelimit-policy"] {
        let value = seen.field(name);
        let list: sfv::List = sfv::Parser::new(value.as_bytes())
            .parse()
            .unwrap_or_else(|e| panic!("{name}: {value} is no structured field: {e}"));
        let sfv::ListEntry::Item(item) = &list[0] else {
            panic!("{value}")
        };
        assert_eq!(
            item.bare_item.as_string().unwrap().as_str(),
            r#"say "hi" \ bye"#,
            "{name}: {value}"
        );
        if name == "ratelimit-policy" {
            let (_, unit) = item
                .params
                .iter()
                .find(|(k, _)| k.as_str() == "qu")
                .expect("qu");
            assert_eq!(unit.as_string().unwrap().as_str(), "caf? \"x\"");
        }
    }
}

/// The fields are structured-field Lists (draft-10), whose Integers have at most
/// 15 digits: a limit beyond that still gives fields a parser reads, stating at
/// least that many.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_limit_beyond_fifteen_digits_still_gives_fields_that_parse() {
    let huge = 10_000_000_000_000_000; // 17 digits
    let window = FixedWindow::new(huge, Duration::from_secs(365 * 86_400)).unwrap();
    let layer = ServerLayer::new(RateLimiter::with_clock(window, ManualClock::new()));
    let (router, _) = counted_app();
    let base = serve(router.layer(layer)).await;
    let client = reqwest::Client::new();

    let seen = get(&client, &base, &[]).await;
    assert_eq!(seen.status, 200);
    for name in ["ratelimit", "ratelimit-policy"] {
        let value = seen.field(name);
        let list = sfv::Parser::new(value.as_bytes()).parse::<sfv::List>();
        assert!(list.is_ok(), "{name}: {value} is no structured field");
    }
    let items = crate::support::adapters::sf_list(&seen.fields["ratelimit"]);
    let r = items[0].1.iter().find(|(k, _)| k == "r").unwrap().1;
    assert_eq!(r, 999_999_999_999_999);
}

/// `RateLimitHeaders::write_each`: "Item `i` is named by policy `i`"; `policies`:
/// "A decision whose `limit_index` has no policy is named `"limit<index>"`". With
/// a policy for the first limit only, the second limit's item is `"limit1"`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_limit_without_a_policy_is_named_by_its_index() {
    let clock = ManualClock::new();
    let set = AllOf::new((
        FixedWindow::new(5, Duration::from_secs(10)).unwrap(),
        FixedWindow::new(1, Duration::from_secs(60)).unwrap(),
    ));
    let headers =
        RateLimitHeaders::new().policies([Policy::new("ten", 5, Duration::from_secs(10))]);
    let layer = ServerLayer::new(RateLimiter::with_clock(set, clock)).headers(headers);
    let (router, _) = counted_app();
    let base = serve(router.layer(layer)).await;
    let client = reqwest::Client::new();

    let granted = get(&client, &base, &[]).await;
    assert_eq!(
        granted.field("ratelimit"),
        r#""ten";r=4;t=10, "limit1";r=0;t=60"#
    );
    assert_eq!(granted.field("ratelimit-policy"), r#""ten";q=5;w=10"#);
    let refused = get(&client, &base, &[]).await;
    assert_eq!(refused.status, 429);
    assert_eq!(refused.field("ratelimit"), r#""limit1";r=0;t=60"#);
}

/// `delay_up_to`: "A cost above capacity is answered as without a delay": the
/// never status at once, nothing held.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_a_delay_a_cost_above_capacity_is_still_answered_at_once() {
    let clock = ManualClock::new();
    let window = FixedWindow::new(2, Duration::from_secs(1)).unwrap();
    let layer = ServerLayer::with_weigher(
        RateLimiter::with_clock(window, clock.clone()),
        Weighed(cost_of),
    )
    .delay_up_to(Duration::from_secs(30));
    let (router, runs) = counted_app();
    let base = serve(router.layer(layer)).await;
    let client = reqwest::Client::new();

    let never = get(&client, &base, &[("x-cost", "3")]).await;
    assert_eq!((never.status, never.get("retry-after")), (400, None));
    assert_eq!((clock.now(), runs.load(Ordering::SeqCst)), (0, 0));
    // A cost that fits but must wait is held (up to 30 s) instead.
    assert_eq!(get(&client, &base, &[("x-cost", "2")]).await.status, 200);
    let held = get(&client, &base, &[("x-cost", "2")]).await;
    assert_eq!(
        (held.status, held.present()),
        (200, vec!["ratelimit-policy"])
    );
    assert_eq!(clock.now(), 1_000_000_000);
}

/// Two limits, one a second and one a minute, on a manual clock, and the server
/// over them charging each request its `x-cost`.
async fn second_and_minute(minute_limit: u64) -> (String, ManualClock, Arc<AtomicUsize>) {
    let clock = ManualClock::new();
    let set = AllOf::new((
        FixedWindow::new(2, Duration::from_secs(1)).unwrap(),
        FixedWindow::new(minute_limit, Duration::from_secs(60)).unwrap(),
    ));
    let limiter = RateLimiter::with_clock(set, clock.clone());
    let (router, runs) = counted_app();
    let base = serve(router.layer(ServerLayer::with_weigher(limiter, Weighed(cost_of)))).await;
    (base, clock, runs)
}

/// A cost one limit of a set can never grant: "`400` ... without `Retry-After`",
/// the policies of a set without names `"limit<i>";q=<its limit>`, the never
/// limit's item with "no `t`, and `r` what is left"; a limit that would have
/// granted is not listed ("A refused call lists only the limits that refused
/// it").
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_set_answering_never_lists_the_never_limit_without_t() {
    let (base, _, runs) = second_and_minute(10).await;
    let client = reqwest::Client::new();

    let never = get(&client, &base, &[("x-cost", "3")]).await;
    assert_eq!((never.status, never.get("retry-after")), (400, None));
    assert_eq!(
        never.field("ratelimit-policy"),
        r#""limit0";q=2, "limit1";q=10"#
    );
    assert_eq!(never.field("ratelimit"), r#""limit0";r=2"#);
    assert_eq!(runs.load(Ordering::SeqCst), 0);
}

/// RateLimitHeaders docs: "A refused call lists only the limits that refused
/// it, each with `r=0` (nothing is left for this request) and `t` its
/// `retry_after`"; `write_each`: "its `r` is that limit's `remaining` (0 on a
/// denial), its `t` its `retry_after` if it refuses". When one limit can never
/// grant the cost and another refuses it for now, the refusing limit's item
/// states `r=0` with its `t`, as the same limit refusing the request alone does;
/// the never limit states what is left, without `t`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_never_answer_lists_a_refusing_limit_with_r_0_and_a_never_limit_with_what_is_left() {
    let (base, clock, _) = second_and_minute(3).await;
    let client = reqwest::Client::new();
    // Two spent at 0 s; at 1 s the first limit is whole again, the minute has 1
    // of its 3 left: a cost of 3 is never for the first, refused by the minute.
    for _ in 0..2 {
        assert_eq!(get(&client, &base, &[]).await.status, 200);
    }
    clock.advance(Duration::from_secs(1));
    let alone = get(&client, &base, &[("x-cost", "2")]).await; // refused by the minute only
    assert_eq!(
        (alone.status, alone.field("ratelimit")),
        (429, r#""limit1";r=0;t=59"#.to_owned())
    );
    let both = get(&client, &base, &[("x-cost", "3")]).await;
    assert_eq!((both.status, both.get("retry-after")), (400, None));
    assert_eq!(
        both.field("ratelimit"),
        r#""limit0";r=2, "limit1";r=0;t=59"#
    );
}

#[cfg(feature = "redis")]
mod on_redis {
    //! The layer over a Redis server this module starts itself, at the caller's
    //! (virtual) time, with and without a failover store, the server paused and
    //! resumed.

    use super::*;
    use crate::support::redis::trace::caller_time_options;
    use crate::support::redis::{unique_prefix, RedisServer};
    use sluicegate::stores::failover::{Backoff, FailoverStore, FailurePolicy};
    use sluicegate::stores::redis::{RedisOptions, RedisStore};
    use std::time::Instant;

    /// The connect and response timeouts the stores here are given.
    const TIMEOUT: Duration = Duration::from_millis(300);
    /// What a request answered "within the timeout" may take beyond it on a
    /// loaded machine (a bound on hanging, not a measure of speed).
    const MARGIN: Duration = Duration::from_secs(3);

    fn options(test: &str) -> RedisOptions {
        caller_time_options(&unique_prefix(test))
            .connect_timeout(TIMEOUT)
            .response_timeout(TIMEOUT)
    }

    fn minute(limit: u64) -> FixedWindow {
        FixedWindow::new(limit, Duration::from_secs(60)).unwrap()
    }

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

    /// README: with Redis the layer "awaits the store, blocking no thread". On a
    /// single-threaded runtime, a request waiting for a paused Redis must not stop
    /// a free request (which needs no store) from being served meanwhile.
    #[tokio::test(flavor = "current_thread")]
    async fn a_request_waiting_on_a_paused_redis_blocks_no_thread() {
        let mut redis = RedisServer::start_own();
        let slow = caller_time_options(&unique_prefix("srv-docs-no-block"));
        let store: RedisStore<String, FixedWindow> =
            RedisStore::open_with(redis.url(), slow).unwrap();
        let limiter = KeyedRateLimiter::with_store(minute(5), store, ManualClock::new());
        let weigher = |r: &Request<Body>| (client_of(r), cost_of(r));
        let (router, runs) = counted_app();
        let base = serve(router.layer(ServerLayer::with_weigher(limiter, weigher))).await;
        let client = reqwest::Client::new();
        assert_eq!(get(&client, &base, &[]).await.status, 200); // connected

        redis.pause();
        let waiting = tokio::spawn({
            let (client, base) = (client.clone(), base.clone());
            async move { get(&client, &base, &[]).await }
        });
        tokio::time::sleep(Duration::from_millis(200)).await;
        let free = get(&client, &base, &[("x-cost", "0")]).await;
        assert_eq!(free.status, 200);
        assert!(
            !waiting.is_finished(),
            "the paused round trip was answered before the free request"
        );
        redis.resume();
        // Resumed well within its 5 s response timeout: Redis answers it.
        let answered = waiting.await.unwrap();
        assert_eq!(
            (answered.status, answered.field("ratelimit")),
            (200, r#""default";r=3;t=60"#.to_owned())
        );
        assert_eq!(runs.load(Ordering::SeqCst), 3);
    }

    /// Keys and costs over Redis give the fields the docs give them in memory
    /// (README: "the same decisions as the in-memory store").
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn over_redis_keys_and_costs_get_the_documented_fields_at_known_instants() {
        let redis = RedisServer::start_own();
        let clock = ManualClock::new();
        clock.advance(Duration::from_millis(15_250));
        let store: RedisStore<String, FixedWindow> =
            RedisStore::open_with(redis.url(), options("srv-docs-costs")).unwrap();
        let limiter = KeyedRateLimiter::with_store(minute(5), store, clock.clone());
        let weigher = |r: &Request<Body>| (client_of(r), cost_of(r));
        let (router, runs) = counted_app();
        let base = serve(router.layer(ServerLayer::with_weigher(limiter, weigher))).await;
        let client = reqwest::Client::new();
        let ann = |cost: &'static str| [("x-client", "ann"), ("x-cost", cost)];

        let three = get(&client, &base, &ann("3")).await;
        assert_eq!(
            (three.status, three.field("ratelimit")),
            (200, r#""default";r=2;t=45"#.to_owned())
        );
        let refused = get(&client, &base, &ann("3")).await;
        assert_eq!(
            (refused.status, refused.field("retry-after")),
            (429, "45".to_owned())
        );
        assert_eq!(refused.field("ratelimit"), r#""default";r=0;t=45"#);
        let never = get(&client, &base, &ann("6")).await;
        assert_eq!(
            (
                never.status,
                never.field("ratelimit"),
                never.get("retry-after")
            ),
            (400, r#""default";r=2"#.to_owned(), None)
        );
        let bob = get(&client, &base, &[("x-client", "bob"), ("x-cost", "5")]).await;
        assert_eq!(
            (bob.status, bob.field("ratelimit")),
            (200, r#""default";r=0;t=45"#.to_owned())
        );
        let two = get(&client, &base, &ann("2")).await;
        assert_eq!(
            (two.status, two.field("ratelimit")),
            (200, r#""default";r=0;t=45"#.to_owned())
        );
        assert_eq!(runs.load(Ordering::SeqCst), 3);
    }

    /// Sixteen concurrent clients over HTTP, the limit kept in Redis at the
    /// server's time: a sliding log grants exactly its limit per key.
    #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
    async fn sixteen_concurrent_clients_over_redis_get_exactly_the_limit() {
        let redis = RedisServer::start_own();
        let options = RedisOptions::default()
            .prefix(unique_prefix("srv-docs-16"))
            .unwrap();
        let store: RedisStore<String, SlidingLog> =
            RedisStore::open_with(redis.url(), options).unwrap();
        let log = SlidingLog::new(10, Duration::from_secs(60)).unwrap();
        let limiter = KeyedRateLimiter::with_store(log, store, sluicegate::DefaultClock::new());
        let (router, runs) = counted_app();
        let base = serve(router.layer(ServerLayer::keyed(limiter, client_of))).await;

        let seen = hammer(&base, 16, 3, |i| format!("k{}", i % 2)).await;
        for key in ["k0", "k1"] {
            let statuses: Vec<u16> = seen
                .iter()
                .filter(|(k, _)| k == key)
                .map(|(_, s)| s.status)
                .collect();
            let granted = statuses.iter().filter(|s| **s == 200).count();
            assert_eq!(
                (statuses.len(), granted),
                (24, 10),
                "key {key}: {statuses:?}"
            );
            assert!(
                statuses.iter().all(|s| *s == 200 || *s == 429),
                "{statuses:?}"
            );
        }
        assert_eq!(runs.load(Ordering::SeqCst), 20);
    }

    /// A keyed limiter over a failover store on Redis, the back-off on `clock`.
    type Failover =
        FailoverStore<RedisStore<String, FixedWindow>, String, FixedWindow, ManualClock>;

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
        let layer =
            ServerLayer::keyed(limiter.clone(), client_of).delay_up_to(Duration::from_secs(10));
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
    async fn a_local_share_behind_the_layer_is_described_by_the_share_then_redis_resumes_its_count()
    {
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
        let store: RedisStore<String, FixedWindow> =
            RedisStore::open_with(redis.url(), slow).unwrap();
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

    /// `delay_up_to` over Redis: the held request waits in its response future
    /// ("the limiter's async acquire ... on the limiter's clock"), and "over a
    /// `LeakyBucket::queue` with room, requests leave one interval apart".
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn over_redis_a_queue_with_a_delay_spaces_requests_one_interval_apart() {
        let redis = RedisServer::start_own();
        let clock = ManualClock::new();
        let store: RedisStore<String, LeakyBucket> =
            RedisStore::open_with(redis.url(), options("srv-docs-queue")).unwrap();
        let queue = LeakyBucket::queue(4, 2, Duration::from_secs(1)).unwrap();
        let limiter = KeyedRateLimiter::with_store(queue, store, clock.clone());
        let layer = ServerLayer::keyed(limiter, client_of).delay_up_to(Duration::from_secs(1));
        let (router, runs) = counted_app();
        let base = serve(router.layer(layer)).await;
        let client = reqwest::Client::new();

        let mut sent = Vec::new();
        for _ in 0..4 {
            let seen = get(&client, &base, &[]).await;
            sent.push((seen.status, clock.now() / 1_000_000, seen.present()));
        }
        let all = vec!["ratelimit", "ratelimit-policy"];
        let policy = vec!["ratelimit-policy"];
        assert_eq!(
            sent,
            [
                (200, 0, all),
                (200, 500, policy.clone()),
                (200, 1000, policy.clone()),
                (200, 1500, policy)
            ]
        );
        assert_eq!(runs.load(Ordering::SeqCst), 4);
    }
}

/// `client_ip`: behind trusted proxies "the walk goes from the right (the last
/// hop) leftwards, skipping trusted addresses, and stops at the first untrusted
/// one"; "An entry that is not an address ... stops the walk at the trusted hop
/// that wrote it, which is then the key"; "If every hop is trusted, the left-most
/// is the answer. Every line of the field counts, in order, as one list."
#[test]
fn client_ip_walks_forwarded_lines_from_the_right_as_documented() {
    use sluicegate::adapters::server::{client_ip, Forwarding};
    use std::net::IpAddr;
    let ip = |text: &str| text.parse::<IpAddr>().unwrap();
    let ours = |address: IpAddr| matches!(address, IpAddr::V4(v4) if v4.octets()[0] == 10);
    let proxy = ip("10.0.0.2");
    let field = |name: &str, lines: &[&str]| {
        let mut headers = HeaderMap::new();
        for line in lines {
            headers.append(
                http::HeaderName::from_bytes(name.as_bytes()).unwrap(),
                line.parse().unwrap(),
            );
        }
        headers
    };

    let rfc7239 = field(
        "forwarded",
        &[
            r#"for=192.0.2.60;proto=http, for="[2001:db8::1]:4711""#,
            "for=10.0.0.5",
        ],
    );
    assert_eq!(
        client_ip(proxy, &rfc7239, Forwarding::Forwarded, ours),
        ip("2001:db8::1")
    );
    let unknown = field(
        "forwarded",
        &["for=198.51.100.1, for=unknown, for=10.0.0.7"],
    );
    assert_eq!(
        client_ip(proxy, &unknown, Forwarding::Forwarded, ours),
        ip("10.0.0.7")
    );
    let written_by_peer = field("x-forwarded-for", &["1.2.3.4, garbage"]);
    assert_eq!(
        client_ip(proxy, &written_by_peer, Forwarding::XForwardedFor, ours),
        proxy
    );
    let all_ours = field("x-forwarded-for", &["10.0.0.9, 10.0.0.8"]);
    assert_eq!(
        client_ip(proxy, &all_ours, Forwarding::XForwardedFor, ours),
        ip("10.0.0.9")
    );
    let two_lines = field(
        "x-forwarded-for",
        &["198.51.100.4, 203.0.113.1", "10.0.0.3"],
    );
    assert_eq!(
        client_ip(proxy, &two_lines, Forwarding::XForwardedFor, ours),
        ip("203.0.113.1")
    );
    // The wrong field is ignored: the peer's own field names no one.
    assert_eq!(
        client_ip(proxy, &two_lines, Forwarding::Forwarded, ours),
        proxy
    );
}
