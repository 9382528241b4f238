//! The server layer's fields as its public docs describe them, checked over real
//! HTTP (an axum server on 127.0.0.1, reqwest clients on loopback) at known
//! instants of a `ManualClock`: a window's fields counting down to its end, costs,
//! free requests and costs that can never be granted, both limits of a set
//! refusing, refusals without fields, the legacy fields alone, a held request's
//! policy, policy names and units as valid structured-field strings, limits beyond
//! fifteen digits or without a policy, and a delay over a cost above capacity.
#![cfg(feature = "tower")]

use super::server_http::{cost_of, get, send, Seen};
use crate::support::adapters::{client_of, counted_app, serve};
use axum::body::Body;
use http::Request;
use sluicegate::adapters::server::{Legacy, Policy, RateLimitHeaders, ServerLayer};
use sluicegate::adapters::Weighed;
use sluicegate::algorithms::{AllOf, FixedWindow, LeakyBucket};
use sluicegate::clock::{Clock, ManualClock};
use sluicegate::{KeyedRateLimiter, RateLimiter};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

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
