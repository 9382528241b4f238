//! The server layer on virtual time: 429 with exact `Retry-After`, `RateLimit` and
//! `RateLimit-Policy` values, the legacy fields, never-grantable costs, free
//! requests, store failures, and the client's back-off reading the server's fields.
#![cfg(feature = "tower")]

use crate::support::adapters as adapters_common;

use adapters_common::{poll_once, unbursting, Remote};
use futures::executor::block_on;
use http::{HeaderMap, Request, Response, StatusCode};
use sluicegate::adapters::server::{Legacy, Policy, RateLimitHeaders, ServerLayer};
use sluicegate::adapters::{HoldBack, Weighed};
use sluicegate::algorithms::{AllOf, FixedWindow, LeakyBucket, Limits, SlidingLog, SmoothBursty};
use sluicegate::clock::ManualClock;
use sluicegate::stores::MemoryStore;
use sluicegate::CellAlgorithm;
use sluicegate::{KeyedRateLimiter, RateLimiter};
use std::convert::Infallible;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::task::Poll;
use std::time::Duration;
use tower::{service_fn, Layer, Service, ServiceExt};

/// The application behind the layer: counts its calls, answers 200 "ok".
fn app() -> (
    impl Service<Request<u64>, Response = Response<String>, Error = Infallible> + Clone,
    Arc<AtomicUsize>,
) {
    let calls = Arc::new(AtomicUsize::new(0));
    let seen = calls.clone();
    let service = service_fn(move |_: Request<u64>| {
        seen.fetch_add(1, Ordering::Relaxed);
        async { Ok::<_, Infallible>(Response::new("ok".to_owned())) }
    });
    (service, calls)
}

/// A request whose body is its cost, from the client named in `x-client`.
fn request(client: &str, cost: u64) -> Request<u64> {
    Request::builder()
        .header("x-client", client)
        .body(cost)
        .unwrap()
}

/// Asserts a response's status and body, and that its fields are exactly `expected`.
fn assert_answer(
    response: &Response<String>,
    (status, body): (StatusCode, &str),
    expected: &[(&str, &str)],
) {
    assert_eq!(response.status(), status);
    assert_eq!(response.body(), body);
    assert_eq!(fields(response), pairs(expected));
}

/// A direct limiter of `limit` permits per fixed window of `secs` seconds, on a
/// manual clock.
fn windowed(limit: u64, secs: u64) -> (RateLimiter<FixedWindow, ManualClock>, ManualClock) {
    let clock = ManualClock::new();
    let window = FixedWindow::new(limit, Duration::from_secs(secs)).unwrap();
    (RateLimiter::with_clock(window, clock.clone()), clock)
}

fn client_and_cost(r: &Request<u64>) -> (String, u64) {
    let client = r.headers()["x-client"].to_str().unwrap_or("").to_owned();
    (client, *r.body())
}

fn send<S>(service: &S, r: Request<u64>) -> Response<String>
where
    S: Service<Request<u64>, Response = Response<String>, Error = Infallible> + Clone,
{
    block_on(service.clone().oneshot(r)).unwrap()
}

fn fields(response: &Response<String>) -> Vec<(String, String)> {
    let mut out: Vec<(String, String)> = response
        .headers()
        .iter()
        .map(|(k, v)| (k.as_str().to_owned(), v.to_str().unwrap().to_owned()))
        .collect();
    out.sort();
    out
}

fn pairs(expected: &[(&str, &str)]) -> Vec<(String, String)> {
    let mut out: Vec<(String, String)> = expected
        .iter()
        .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
        .collect();
    out.sort();
    out
}

#[test]
fn allowed_and_refused_responses_carry_exact_fields() {
    let clock = ManualClock::new();
    let window = FixedWindow::new(3, Duration::from_secs(10)).unwrap();
    let limiter = KeyedRateLimiter::with_clock(window, clock.clone());
    let (app, calls) = app();
    let server = ServerLayer::with_weigher(limiter, client_and_cost)
        .headers(RateLimitHeaders::new().policies([Policy::new(
            "ten-seconds",
            3,
            Duration::from_secs(10),
        )]))
        .layer(app);
    clock.advance(Duration::from_millis(2_500));
    assert_answer(
        &send(&server, request("ann", 2)),
        (StatusCode::OK, "ok"),
        &[
            ("ratelimit", r#""ten-seconds";r=1;t=8"#), // the window ends at 10 s: 7.5 s, rounded up
            ("ratelimit-policy", r#""ten-seconds";q=3;w=10"#),
        ],
    );
    // One permit is left, but not the two this request asks: nothing for it until
    // the window ends.
    assert_answer(
        &send(&server, request("ann", 2)),
        (StatusCode::TOO_MANY_REQUESTS, ""),
        &[
            ("retry-after", "8"),
            ("ratelimit", r#""ten-seconds";r=0;t=8"#),
            ("ratelimit-policy", r#""ten-seconds";q=3;w=10"#),
        ],
    );
    assert_eq!(
        calls.load(Ordering::Relaxed),
        1,
        "the refused request never reached the app"
    );
    // Another client has its own limit.
    assert_eq!(send(&server, request("bo", 3)).status(), StatusCode::OK);
}

#[test]
fn retry_after_is_whole_seconds_rounded_up_never_early() {
    let clock = ManualClock::new();
    // 3 per second, no saved burst: the next permit is 1/3 s away.
    let limiter = RateLimiter::with_clock(unbursting(3.0), clock);
    let (app, _) = app();
    let server = ServerLayer::new(limiter).layer(app);
    assert_eq!(send(&server, request("x", 1)).status(), StatusCode::OK);
    let refused = send(&server, request("x", 1));
    assert_eq!(refused.status(), StatusCode::TOO_MANY_REQUESTS);
    assert_eq!(refused.headers()["retry-after"], "1");
    assert_eq!(refused.headers()["ratelimit"], r#""default";r=0;t=1"#);
}

#[test]
fn a_set_lists_one_item_per_limit_and_every_policy() {
    let clock = ManualClock::new();
    // 2 per second (bursty, 1 s saved) and 5 per minute.
    let set = AllOf::new((
        SmoothBursty::new(2.0).unwrap(),
        FixedWindow::new(5, Duration::from_secs(60)).unwrap(),
    ));
    let limiter = KeyedRateLimiter::with_clock(set, clock.clone());
    let (app, _) = app();
    // The set states its own quotas (bursty 2/s saves 2 over 1 s).
    let policies = RateLimitHeaders::new()
        .policies(Policy::describe(limiter.algorithm(), ["second", "minute"]));
    let server = ServerLayer::with_weigher(limiter, client_and_cost)
        .headers(policies)
        .layer(app);
    let policy = r#""second";q=2;w=1, "minute";q=5;w=60"#;
    clock.advance(Duration::from_secs(1)); // a new key starts with its burst saved
    let mut statuses = Vec::new();
    let mut limits = Vec::new();
    for _ in 0..4 {
        let response = send(&server, request("ann", 1));
        assert_eq!(response.headers()["ratelimit-policy"], policy);
        statuses.push(response.status().as_u16());
        limits.push(response.headers()["ratelimit"].to_str().unwrap().to_owned());
    }
    assert_eq!(statuses, [200, 200, 200, 429]);
    // Every grant lists both limits: the bucket's remaining and when it is full again
    // (0.5 s per permit spent, rounded up), the minute's window ending at 60 s. The
    // second grant spends the bucket, but pay later would still let one more through
    // (so its `t` stays the refill); after the third one more would be refused, so
    // `t` is when the next permit comes (0.5 s). The fourth is refused by the bucket
    // alone, the only limit listed then.
    assert_eq!(
        limits,
        [
            r#""second";r=1;t=1, "minute";r=4;t=59"#,
            r#""second";r=0;t=1, "minute";r=3;t=59"#,
            r#""second";r=0;t=1, "minute";r=2;t=59"#,
            r#""second";r=0;t=1"#,
        ]
    );
    // After the minute's 5 are spent, the minute refuses (the longest retry).
    clock.advance(Duration::from_secs(2));
    send(&server, request("ann", 1));
    clock.advance(Duration::from_secs(2));
    send(&server, request("ann", 1));
    clock.advance(Duration::from_secs(2));
    let refused = send(&server, request("ann", 1));
    assert_eq!(refused.status(), StatusCode::TOO_MANY_REQUESTS);
    assert_eq!(refused.headers()["ratelimit"], r#""minute";r=0;t=53"#);
    assert_eq!(refused.headers()["retry-after"], "53");
}

/// A bucket of 2 draining 1 per second, 3 per minute, 100 per hour.
fn three_limits() -> (LeakyBucket, FixedWindow, FixedWindow) {
    (
        LeakyBucket::meter(2, 1, Duration::from_secs(1)).unwrap(),
        FixedWindow::new(3, Duration::from_secs(60)).unwrap(),
        FixedWindow::new(100, Duration::from_secs(3600)).unwrap(),
    )
}

/// Status, `RateLimit` and `Retry-After` of four requests of cost 1 from one
/// client (2.5 s in; the third a second after the second), checking the
/// `RateLimit-Policy` of each.
fn four_requests<S>(server: S, clock: &ManualClock) -> Vec<(u16, String, Option<String>)>
where
    S: Service<Request<u64>, Response = Response<String>, Error = Infallible> + Clone,
{
    let policy = r#""limit0";q=2, "limit1";q=3, "limit2";q=100"#;
    clock.advance(Duration::from_millis(2_500));
    let mut seen = Vec::new();
    for advance in [0, 0, 1_000, 0] {
        clock.advance(Duration::from_millis(advance));
        let response = send(&server, request("ann", 1));
        assert_eq!(response.headers()["ratelimit-policy"], policy);
        let retry = response
            .headers()
            .get("retry-after")
            .map(|v| v.to_str().unwrap().to_owned());
        let items = response.headers()["ratelimit"].to_str().unwrap().to_owned();
        seen.push((response.status().as_u16(), items, retry));
    }
    seen
}

/// A direct limiter's weigher: the request's body is its cost.
fn body_cost(r: &Request<u64>) -> ((), u64) {
    ((), *r.body())
}

#[test]
fn every_limit_of_a_set_gets_its_own_item_with_its_own_next_permit() {
    // No policies named, so the items and policies are "limit<i>".
    let expected = [
        // The bucket is full again 1 s after one permit; the windows end at 60 s and
        // 3600 s (2.5 s in).
        (
            200,
            r#""limit0";r=1;t=1, "limit1";r=2;t=58, "limit2";r=99;t=3598"#,
            None,
        ),
        // The bucket's last permit went: its next one drains in 1 s (it is whole
        // only in 2 s).
        (
            200,
            r#""limit0";r=0;t=1, "limit1";r=1;t=58, "limit2";r=98;t=3598"#,
            None,
        ),
        // A second later: the bucket's last permit again, and the minute's, whose
        // next permit is the next window, 56.5 s away.
        (
            200,
            r#""limit0";r=0;t=1, "limit1";r=0;t=57, "limit2";r=97;t=3597"#,
            None,
        ),
        // Refused by both (the hour would have allowed and is left out); Retry-After
        // is the longer.
        (429, r#""limit0";r=0;t=1, "limit1";r=0;t=57"#, Some("57")),
    ];
    let expected: Vec<(u16, String, Option<String>)> = expected
        .iter()
        .map(|(status, items, retry)| (*status, (*items).to_owned(), retry.map(str::to_owned)))
        .collect();
    let (bucket, minute, hour) = three_limits();
    let limits = || Limits::new().with(bucket).with(minute).with(hour);
    let all_of = || AllOf::new((bucket, minute, hour));
    // Both kinds of set.
    four_requests_keyed_and_direct(all_of(), &expected, "AllOf");
    four_requests_keyed_and_direct(limits(), &expected, "Limits");
}

/// [`four_requests`] through a keyed limiter of `set` (the in-memory store reports
/// each member) and a direct one, each answering `expected`.
fn four_requests_keyed_and_direct<A: CellAlgorithm>(
    set: A,
    expected: &[(u16, String, Option<String>)],
    kind: &str,
) {
    let clock = ManualClock::new();
    let keyed = KeyedRateLimiter::with_clock(set.clone(), clock.clone());
    let server = ServerLayer::with_weigher(keyed, client_and_cost).layer(app().0);
    assert_eq!(four_requests(server, &clock), expected, "keyed {kind}");
    let clock = ManualClock::new();
    let direct = RateLimiter::with_clock(set, clock.clone());
    let server = ServerLayer::with_weigher(direct, body_cost).layer(app().0);
    assert_eq!(four_requests(server, &clock), expected, "direct {kind}");
}

#[test]
fn a_set_of_more_than_four_limits_lists_every_one() {
    let clock = ManualClock::new();
    let limits = (1..=6).fold(Limits::new(), |set, n| {
        set.with(FixedWindow::new(n * 10, Duration::from_secs(n * 60)).unwrap())
    });
    let limiter = RateLimiter::with_clock(limits, clock);
    let server = ServerLayer::with_weigher(limiter, body_cost).layer(app().0);
    let response = send(&server, request("ann", 3));
    let items: Vec<String> = (0..6u64)
        .map(|i| {
            let n = i + 1;
            format!("\"limit{i}\";r={};t={}", n * 10 - 3, n * 60)
        })
        .collect();
    assert_eq!(response.headers()["ratelimit"], items.join(", ").as_str());
    let policies: Vec<String> = (0..6u64)
        .map(|i| format!("\"limit{i}\";q={}", (i + 1) * 10))
        .collect();
    assert_eq!(
        response.headers()["ratelimit-policy"],
        policies.join(", ").as_str()
    );
}

#[test]
fn over_a_remote_store_the_check_is_awaited_and_never_blocks() {
    let clock = ManualClock::new();
    let round_trips = Arc::new(AtomicUsize::new(0));
    let store = Remote::new(round_trips.clone());
    let blocking = store.blocking.clone();
    let window = FixedWindow::new(2, Duration::from_secs(10)).unwrap();
    let limiter = KeyedRateLimiter::with_store(window, store, clock.clone());
    let (app, calls) = app();
    let mut server = ServerLayer::with_weigher(limiter, client_and_cost).layer(app);
    clock.advance(Duration::from_millis(2_500));
    let mut answers = Vec::new();
    for _ in 0..3 {
        let mut response = std::pin::pin!(server.call(request("ann", 1)));
        assert!(
            poll_once(response.as_mut()).is_pending(),
            "the store's reply is in flight"
        );
        let Poll::Ready(Ok(response)) = poll_once(response.as_mut()) else {
            panic!("answered once the reply came")
        };
        answers.push((response.status().as_u16(), fields(&response)));
    }
    // A remote store answers the combined decision: one item, and no second round
    // trip after the last permit (its `t` is the window's end, 7.5 s away).
    assert_eq!(
        answers,
        [
            (
                200,
                pairs(&[
                    ("ratelimit", r#""default";r=1;t=8"#),
                    ("ratelimit-policy", r#""default";q=2"#)
                ])
            ),
            (
                200,
                pairs(&[
                    ("ratelimit", r#""default";r=0;t=8"#),
                    ("ratelimit-policy", r#""default";q=2"#)
                ])
            ),
            (
                429,
                pairs(&[
                    ("retry-after", "8"),
                    ("ratelimit", r#""default";r=0;t=8"#),
                    ("ratelimit-policy", r#""default";q=2"#)
                ])
            ),
        ]
    );
    assert_eq!(round_trips.load(Ordering::Relaxed), 3, "one per request");
    assert_eq!(blocking.load(Ordering::Relaxed), 0, "no thread waited");
    assert_eq!(calls.load(Ordering::Relaxed), 2);
}

#[test]
fn legacy_fields_in_both_spellings() {
    let (limiter, clock) = windowed(2, 60);
    let (app, _) = app();
    let both = ServerLayer::new(limiter.clone())
        .headers(RateLimitHeaders::new().legacy(Legacy::XRateLimit))
        .layer(app.clone());
    let response = send(&both, request("x", 1));
    assert_eq!(
        fields(&response),
        pairs(&[
            ("ratelimit", r#""default";r=1;t=60"#),
            ("ratelimit-policy", r#""default";q=2"#),
            ("x-ratelimit-limit", "2"),
            ("x-ratelimit-remaining", "1"),
            ("x-ratelimit-reset", "60"),
        ])
    );
    let seed = ServerLayer::new(limiter)
        .headers(RateLimitHeaders::new().legacy_only(Legacy::XRateDashLimit))
        .layer(app);
    clock.advance(Duration::from_secs(30));
    send(&seed, request("x", 1));
    let refused = send(&seed, request("x", 1));
    assert_eq!(refused.status(), StatusCode::TOO_MANY_REQUESTS);
    assert_eq!(
        fields(&refused),
        pairs(&[
            ("retry-after", "30"),
            ("x-rate-limit-limit", "2"),
            ("x-rate-limit-remaining", "0"),
            ("x-rate-limit-reset", "30"),
        ])
    );
}

#[test]
fn a_cost_that_can_never_be_granted_is_400_without_retry_after() {
    let clock = ManualClock::new();
    let limiter =
        KeyedRateLimiter::with_clock(FixedWindow::new(5, Duration::from_secs(1)).unwrap(), clock);
    let (app, calls) = app();
    let layer = ServerLayer::with_weigher(limiter, client_and_cost);
    let server = layer.clone().layer(app.clone());
    let huge = send(&server, request("ann", 6));
    assert_eq!(huge.status(), StatusCode::BAD_REQUEST);
    assert_eq!(
        fields(&huge),
        pairs(&[
            ("ratelimit", r#""default";r=5"#),
            ("ratelimit-policy", r#""default";q=5"#),
        ])
    );
    let as_413 = layer.never_status(StatusCode::PAYLOAD_TOO_LARGE).layer(app);
    assert_eq!(
        send(&as_413, request("ann", 6)).status(),
        StatusCode::PAYLOAD_TOO_LARGE
    );
    assert_eq!(calls.load(Ordering::Relaxed), 0);
    // The refusals took nothing: the whole quota is still there.
    assert_eq!(send(&server, request("ann", 5)).status(), StatusCode::OK);
}

#[test]
fn a_free_request_passes_uncounted_without_fields() {
    let (limiter, _) = windowed(1, 1);
    let (app, calls) = app();
    let server =
        ServerLayer::with_weigher(limiter, Weighed(|r: &Request<u64>| *r.body())).layer(app);
    let free = send(&server, request("x", 0));
    assert_eq!(free.status(), StatusCode::OK);
    assert!(free.headers().is_empty());
    assert_eq!(send(&server, request("x", 1)).status(), StatusCode::OK);
    assert_eq!(
        send(&server, request("x", 1)).status(),
        StatusCode::TOO_MANY_REQUESTS
    );
    assert_eq!(calls.load(Ordering::Relaxed), 2);
}

#[test]
fn a_failing_store_fails_closed_unless_told_to_fail_open() {
    let clock = ManualClock::new();
    // A store that holds one key: a second client's request cannot be decided.
    let store = MemoryStore::new().with_max_keys(1).unwrap();
    let limiter = KeyedRateLimiter::with_store(SmoothBursty::new(10.0).unwrap(), store, clock);
    let (app, calls) = app();
    let closed = ServerLayer::with_weigher(limiter.clone(), client_and_cost).layer(app.clone());
    assert_eq!(send(&closed, request("ann", 1)).status(), StatusCode::OK);
    let full = send(&closed, request("bo", 1));
    assert_eq!(full.status(), StatusCode::SERVICE_UNAVAILABLE);
    assert!(full.headers().is_empty());
    let open = ServerLayer::with_weigher(limiter, client_and_cost)
        .fail_open(true)
        .layer(app);
    let through = send(&open, request("bo", 1));
    assert_eq!(through.status(), StatusCode::OK);
    assert!(through.headers().is_empty());
    assert_eq!(calls.load(Ordering::Relaxed), 2);
}

/// Without fields the layer takes the lean check (`Permits::try_take`): it must
/// decide every request as the full check does, a refusal the log records
/// recorded once, and answer a refusal with `Retry-After` alone.
#[test]
fn without_fields_the_lean_check_decides_as_the_full_one() {
    let clock = ManualClock::new();
    let log = SlidingLog::new(2, Duration::from_secs(1))
        .unwrap()
        .with_rejected_recorded();
    let keyed = || KeyedRateLimiter::with_clock(log, clock.clone());
    let (app, _) = app();
    let lean = ServerLayer::with_weigher(keyed(), client_and_cost)
        .headers(RateLimitHeaders::none())
        .layer(app.clone());
    let full = ServerLayer::with_weigher(keyed(), client_and_cost).layer(app.clone());
    let direct = || RateLimiter::with_clock(log, clock.clone());
    let cost = |r: &Request<u64>| *r.body();
    let lean_direct = ServerLayer::with_weigher(direct(), Weighed(cost))
        .headers(RateLimitHeaders::none())
        .layer(app.clone());
    let full_direct = ServerLayer::with_weigher(direct(), Weighed(cost)).layer(app);
    let mut seen = Vec::new();
    let mut x: u64 = 0x2545_F491;
    for _ in 0..300 {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        clock.advance(Duration::from_millis(
            [0, 0, 90, 400, 1_000][(x % 5) as usize],
        ));
        let client = ["ann", "bo"][(x >> 8) as usize % 2];
        let cost = [1, 1, 1, 2, 3][(x >> 16) as usize % 5];
        seen.push(same_answer(
            &lean,
            &full,
            request(client, cost),
            request(client, cost),
        ));
        seen.push(same_answer(
            &lean_direct,
            &full_direct,
            request(client, cost),
            request(client, cost),
        ));
    }
    for status in [
        StatusCode::OK,
        StatusCode::TOO_MANY_REQUESTS,
        StatusCode::BAD_REQUEST,
    ] {
        assert!(seen.contains(&status), "no {status} in the trace");
    }
}

/// Sends `r` to a layer without fields and `twin` to one with them: the same
/// status, and only `Retry-After` (the same) or nothing on the former.
fn same_answer<L, F>(lean: &L, full: &F, r: Request<u64>, twin: Request<u64>) -> StatusCode
where
    L: Service<Request<u64>, Response = Response<String>, Error = Infallible> + Clone,
    F: Service<Request<u64>, Response = Response<String>, Error = Infallible> + Clone,
{
    let answered = send(lean, r);
    let expected = send(full, twin);
    assert_eq!(answered.status(), expected.status());
    match expected.headers().get("retry-after") {
        Some(retry) => assert_eq!(
            fields(&answered),
            pairs(&[("retry-after", retry.to_str().unwrap())])
        ),
        None => assert!(answered.headers().is_empty()),
    }
    answered.status()
}

#[test]
fn without_fields_a_failing_store_fails_closed_unless_told_to_fail_open() {
    let store = MemoryStore::new().with_max_keys(1).unwrap();
    let window = FixedWindow::new(1, Duration::from_secs(1)).unwrap();
    let limiter = KeyedRateLimiter::with_store(window, store, ManualClock::new());
    let (app, calls) = app();
    let layer =
        ServerLayer::with_weigher(limiter, client_and_cost).headers(RateLimitHeaders::none());
    let closed = layer.clone().layer(app.clone());
    assert_eq!(send(&closed, request("ann", 1)).status(), StatusCode::OK);
    let full = send(&closed, request("bo", 1));
    assert_eq!(full.status(), StatusCode::SERVICE_UNAVAILABLE);
    assert!(full.headers().is_empty());
    let open = layer.fail_open(true).layer(app);
    assert_eq!(send(&open, request("bo", 1)).status(), StatusCode::OK);
    assert_eq!(send(&open, request("bo", 0)).status(), StatusCode::OK);
    assert_eq!(calls.load(Ordering::Relaxed), 3);
}

#[test]
fn the_clients_back_off_reads_the_servers_refusal() {
    let (limiter, clock) = windowed(1, 10);
    let (app, _) = app();
    let server = ServerLayer::new(limiter).layer(app);
    let hold = HoldBack::new(clock.clone());
    clock.advance(Duration::from_millis(3_200));
    // The grant already says the quota is spent until the window ends (r=0;t=7), so
    // the client holds back after it, as after the 429 that follows.
    for expected in [Some(Duration::from_secs(7)), Some(Duration::from_secs(7))] {
        let response = send(&server, request("x", 1));
        let headers: &HeaderMap = response.headers();
        assert_eq!(hold.observe((), response.status(), headers), expected);
    }
    assert_eq!(hold.remaining(&()), Duration::from_secs(7));
}
