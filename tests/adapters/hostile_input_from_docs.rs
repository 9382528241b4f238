//! The tower layers and `HoldBack` fed hostile input as their docs describe the
//! answer: costs no wait can grant (`400`, or the status set with `never_status`),
//! zero and `Duration::MAX` delays and waits, policy names and units holding
//! quotes, backslashes and non-ASCII text ("characters outside printable ASCII
//! become `?`"), and servers that send malformed or absurd `Retry-After` and
//! `RateLimit` fields ("Malformed fields are ignored", every pause capped).
#![cfg(feature = "tower")]

use crate::support::adapters as adapters_common;

use adapters_common::sf_list;
use http::{HeaderMap, Request, Response, StatusCode};
use sluicegate::adapters::client::{ClientError, ClientLayer};
use sluicegate::adapters::server::{Policy, RateLimitHeaders, ServerLayer};
use sluicegate::adapters::{HoldBack, Weighed};
use sluicegate::algorithms::FixedWindow;
use sluicegate::clock::{Clock, ManualClock};
use sluicegate::{Decision, Error, RateLimiter};
use std::convert::Infallible;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::time::{Duration, UNIX_EPOCH};
use tower::{service_fn, Layer, ServiceExt};

const SECOND: Duration = Duration::from_secs(1);

fn window(limit: u64, clock: &ManualClock) -> RateLimiter<FixedWindow, ManualClock> {
    RateLimiter::with_clock(FixedWindow::new(limit, SECOND).unwrap(), clock.clone())
}

/// A server over a direct window of 3 a second whose requests cost what their
/// `x-cost` header says.
fn costed_server(
    clock: &ManualClock,
    configure: impl FnOnce(
        ServerLayer<RateLimiter<FixedWindow, ManualClock>, Weighed<fn(&Request<()>) -> u64>>,
    ) -> ServerLayer<
        RateLimiter<FixedWindow, ManualClock>,
        Weighed<fn(&Request<()>) -> u64>,
    >,
) -> impl Fn(u64) -> Response<()> {
    fn cost(r: &Request<()>) -> u64 {
        r.headers()["x-cost"].to_str().unwrap().parse().unwrap()
    }
    let layer = configure(ServerLayer::with_weigher(
        window(3, clock),
        Weighed(cost as fn(&Request<()>) -> u64),
    ));
    let app = service_fn(|_: Request<()>| async { Ok::<_, Infallible>(Response::new(())) });
    let server = layer.layer(app);
    move |c: u64| {
        let request = Request::builder()
            .header("x-cost", c.to_string())
            .body(())
            .unwrap();
        futures::executor::block_on(server.clone().oneshot(request)).unwrap()
    }
}

#[test]
fn a_cost_no_wait_can_grant_is_400_or_the_never_status_even_when_delayed() {
    let clock = ManualClock::new();
    for (label, expected, delay) in [
        ("default", StatusCode::BAD_REQUEST, None),
        ("413", StatusCode::PAYLOAD_TOO_LARGE, None),
        (
            "delayed for ever",
            StatusCode::BAD_REQUEST,
            Some(Duration::MAX),
        ),
        (
            "delayed zero",
            StatusCode::BAD_REQUEST,
            Some(Duration::ZERO),
        ),
    ] {
        let start = clock.now();
        let ask = costed_server(&clock, |layer| {
            let layer = if label == "413" {
                layer.never_status(StatusCode::PAYLOAD_TOO_LARGE)
            } else {
                layer
            };
            match delay {
                Some(max) => layer.delay_up_to(max),
                None => layer,
            }
        });
        for cost in [4, u64::MAX] {
            let response = catch_unwind(AssertUnwindSafe(|| ask(cost)))
                .unwrap_or_else(|_| panic!("{label}, cost {cost}: panicked"));
            assert_eq!(response.status(), expected, "{label}, cost {cost}");
            assert!(
                !response.headers().contains_key("retry-after"),
                "{label}, cost {cost}: a never answer names no time to retry"
            );
        }
        // Nothing was counted: the whole window is still there.
        assert_eq!(
            ask(3).status(),
            StatusCode::OK,
            "{label}: the never costs took permits"
        );
        assert_eq!(clock.now(), start, "{label}: a never answer waited");
        clock.advance(SECOND);
    }
}

#[test]
fn a_zero_delay_holds_nothing_back_and_a_free_request_passes_uncounted() {
    let clock = ManualClock::new();
    let ask = costed_server(&clock, |layer| layer.delay_up_to(Duration::ZERO));
    assert_eq!(ask(3).status(), StatusCode::OK);
    let refused = ask(1);
    assert_eq!(
        refused.status(),
        StatusCode::TOO_MANY_REQUESTS,
        "a zero delay held it"
    );
    assert_eq!(refused.headers()["retry-after"], "1");
    assert_eq!(clock.now(), 0);
    // "A cost of 0 is free: the request passes at once, uncounted and without fields."
    let free = ask(0);
    assert_eq!(free.status(), StatusCode::OK);
    assert!(
        !free.headers().contains_key("ratelimit"),
        "{:?}",
        free.headers()
    );
}

#[test]
fn policy_names_and_units_with_quotes_backslashes_and_non_ascii_stay_one_sf_string() {
    // policies: "Names are sent as sf-strings; characters outside printable ASCII
    // become `?`"; quota_unit likewise.
    for (name, sent) in [
        ("a\"b", "a\"b"),
        ("back\\slash", "back\\slash"),
        ("line\nbreak", "line?break"),
        ("tab\there", "tab?here"),
        ("naïve", "na?ve"),
        ("\u{7f}", "?"),
        ("", ""),
        ("\"\\\"", "\"\\\""),
    ] {
        let headers =
            RateLimitHeaders::new().policies([Policy::new(name, 10, SECOND).quota_unit(name)]);
        let mut out = HeaderMap::new();
        catch_unwind(AssertUnwindSafe(|| {
            headers.write(&Decision::allowed(10, 9, 500_000_000), &mut out)
        }))
        .unwrap_or_else(|_| panic!("policy {name:?}: write panicked"));
        let policy = out
            .get("ratelimit-policy")
            .unwrap_or_else(|| panic!("{name:?}: no policy"));
        let parsed = sfv::Parser::new(policy.as_bytes()).parse::<sfv::List>();
        let parsed = parsed.unwrap_or_else(|e| panic!("{name:?}: {policy:?} is no sf-list: {e}"));
        assert_eq!(parsed.len(), 1, "{name:?}: {policy:?}");
        let sfv::ListEntry::Item(item) = &parsed[0] else {
            panic!("{name:?}: an inner list");
        };
        let got = item.bare_item.as_string();
        let got = got.unwrap_or_else(|| panic!("{name:?}: not an sf-string: {policy:?}"));
        assert_eq!(got.as_str(), sent, "{name:?}: {policy:?}");
        let unit = item.params.iter().find(|(k, _)| k.as_str() == "qu");
        if sent.is_empty() {
            assert!(unit.is_none(), "an empty unit sends no qu: {policy:?}");
        } else {
            let unit = unit.and_then(|(_, v)| v.as_string());
            let unit = unit.unwrap_or_else(|| panic!("{name:?}: no sf-string qu in {policy:?}"));
            assert_eq!(unit.as_str(), sent, "{name:?}: {policy:?}");
        }
        let rate = out.get("ratelimit").unwrap();
        assert_eq!(sf_list(rate).len(), 1, "{name:?}: {rate:?}");
    }
}

#[test]
fn a_policy_of_u64_max_permits_over_a_window_of_duration_max_is_written_as_a_field() {
    for (quota, window) in [
        (u64::MAX, Duration::MAX),
        (0, Duration::ZERO),
        (1, Duration::from_nanos(1)),
    ] {
        let headers = RateLimitHeaders::new().policies([Policy::new("p", quota, window)]);
        let mut out = HeaderMap::new();
        let decision = Decision::denied(u64::MAX, 0, u64::MAX, u64::MAX);
        catch_unwind(AssertUnwindSafe(|| headers.write(&decision, &mut out)))
            .unwrap_or_else(|_| panic!("q={quota}, w={window:?}: write panicked"));
        let policy = out.get("ratelimit-policy").expect("a policy field");
        // sf-integers stop at 999,999,999,999,999: a field past them is no sf-list.
        let parsed = sfv::Parser::new(policy.as_bytes()).parse::<sfv::List>();
        assert!(
            parsed.is_ok(),
            "q={quota}, w={window:?}: {policy:?} is no sf-list"
        );
        let rate = out.get("ratelimit").expect("a RateLimit field");
        let parsed = sfv::Parser::new(rate.as_bytes()).parse::<sfv::List>();
        assert!(
            parsed.is_ok(),
            "q={quota}, w={window:?}: {rate:?} is no sf-list"
        );
        let retry = out
            .get("retry-after")
            .expect("a refusal carries Retry-After");
        let retry: u64 = retry.to_str().unwrap().parse().expect("delay-seconds");
        assert!(
            retry >= 18_446_744_073,
            "Retry-After {retry} for u64::MAX ns"
        );
    }
}

#[test]
fn an_unlimited_limiter_behind_the_server_sends_fields_that_parse() {
    // SmoothBursty: +inf "means unlimited"; its limit reads u64::MAX. The server's
    // fields are structured fields (draft-ietf-httpapi-ratelimit-headers-10).
    let limiter = RateLimiter::bursty_with_clock(f64::INFINITY, ManualClock::new()).unwrap();
    let app = service_fn(|_: Request<()>| async { Ok::<_, Infallible>(Response::new(())) });
    let server = ServerLayer::new(limiter).layer(app);
    let response = futures::executor::block_on(server.oneshot(Request::new(()))).unwrap();
    assert_eq!(response.status(), StatusCode::OK);
    for name in ["ratelimit", "ratelimit-policy"] {
        let value = response
            .headers()
            .get(name)
            .unwrap_or_else(|| panic!("no {name}"));
        let parsed = sfv::Parser::new(value.as_bytes()).parse::<sfv::List>();
        assert!(parsed.is_ok(), "{name}: {value:?} is no sf-list");
    }
}

#[test]
fn malformed_retry_after_and_ratelimit_fields_are_ignored_and_pauses_are_capped() {
    let wall = UNIX_EPOCH + Duration::from_secs(1_700_000_000);
    let fallback = Duration::from_millis(250);
    let cap = Duration::from_secs(60);
    for (field, value) in [
        ("retry-after", "-1"),
        ("retry-after", "abc"),
        ("retry-after", "1.5"),
        ("retry-after", "3, 4"),
        ("retry-after", ""),
        ("retry-after", "Thu, 31 Feb 2023 99:99:99 GMT"),
        ("ratelimit", "\"p\";r=0;t=-5"),
        ("ratelimit", "\"p\";r=0;t=1.5e9"),
        ("ratelimit", "\"p\";r=;t="),
        ("ratelimit", "((("),
    ] {
        let hold = HoldBack::new(ManualClock::new()).with_fallback(fallback);
        let mut headers = HeaderMap::new();
        headers.insert(field, value.parse().unwrap());
        let input = format!("429 with {field}: {value:?}");
        let pause = catch_unwind(AssertUnwindSafe(|| {
            hold.observe_at("k", StatusCode::TOO_MANY_REQUESTS, &headers, wall)
        }))
        .unwrap_or_else(|_| panic!("{input}: panicked"));
        // Ignored: the 429 is then one "with neither", held for the fallback.
        assert_eq!(pause, Some(fallback), "{input}");
        assert_eq!(hold.remaining(&"k"), fallback, "{input}");
    }
    for (field, value) in [
        ("retry-after", "99999999999999999999999999"),
        ("retry-after", "18446744073709551616"),
        ("retry-after", "Fri, 31 Dec 9999 23:59:59 GMT"),
        ("ratelimit", "\"p\";r=0;t=999999999999999"),
    ] {
        let hold = HoldBack::new(ManualClock::new()).with_fallback(fallback);
        let mut headers = HeaderMap::new();
        headers.insert(field, value.parse().unwrap());
        let input = format!("503 with {field}: {value:?}");
        let pause = catch_unwind(AssertUnwindSafe(|| {
            hold.observe_at("k", StatusCode::SERVICE_UNAVAILABLE, &headers, wall)
        }))
        .unwrap_or_else(|_| panic!("{input}: panicked"));
        // A hostile server "cannot stall the client": held at most the cap.
        assert!(pause.is_none_or(|p| p <= cap), "{input}: {pause:?}");
        assert!(
            hold.remaining(&"k") <= cap,
            "{input}: {:?}",
            hold.remaining(&"k")
        );
    }
    // A date in the past asks for no pause; a zero cap disables holding.
    let mut past = HeaderMap::new();
    past.insert(
        "retry-after",
        "Thu, 01 Jan 1970 00:00:01 GMT".parse().unwrap(),
    );
    let hold = HoldBack::new(ManualClock::new());
    let pause = hold.observe_at("k", StatusCode::TOO_MANY_REQUESTS, &past, wall);
    assert!(pause.is_none_or(|p| p.is_zero()), "{pause:?}");
    assert_eq!(hold.remaining(&"k"), Duration::ZERO);
    let off = HoldBack::new(ManualClock::new()).with_cap(Duration::ZERO);
    let mut long = HeaderMap::new();
    long.insert("retry-after", "30".parse().unwrap());
    let pause = off.observe("k", StatusCode::TOO_MANY_REQUESTS, &long);
    assert!(pause.is_none_or(|p| p.is_zero()), "{pause:?}");
    assert_eq!(
        off.remaining(&"k"),
        Duration::ZERO,
        "a zero cap held the key"
    );
}

#[test]
fn a_client_with_a_zero_max_wait_fails_a_waiting_request_unsent_and_a_never_cost_at_once() {
    let clock = ManualClock::new();
    let sent = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let counter = sent.clone();
    let inner = service_fn(move |_: u64| {
        counter.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        async { Ok::<_, Infallible>(()) }
    });
    let client = ClientLayer::with_weigher(window(2, &clock), Weighed(|c: &u64| *c))
        .with_max_wait(Duration::ZERO)
        .layer(inner);
    let call = |cost: u64| futures::executor::block_on(client.clone().oneshot(cost));
    assert!(call(2).is_ok());
    match call(1) {
        Err(ClientError::Throttled(Error::Timeout { needed })) => {
            assert_eq!(needed, SECOND, "the next window is 1 s away");
        }
        other => panic!("a request that must wait, max wait zero: {other:?}"),
    }
    for cost in [3, u64::MAX] {
        match call(cost) {
            Err(ClientError::Throttled(Error::Never { cost: got })) => assert_eq!(got, cost),
            other => panic!("cost {cost} above the window: {other:?}"),
        }
    }
    assert_eq!(
        sent.load(std::sync::atomic::Ordering::SeqCst),
        1,
        "a refused request was sent"
    );
    assert_eq!(clock.now(), 0, "a refused request waited");
    // Duration::MAX: wait as long as needed.
    let patient = ClientLayer::with_weigher(window(2, &clock), Weighed(|c: &u64| *c))
        .with_max_wait(Duration::MAX)
        .layer(service_fn(|_: u64| async { Ok::<_, Infallible>(()) }));
    let ask = |cost: u64| futures::executor::block_on(patient.clone().oneshot(cost));
    assert!(ask(2).is_ok() && ask(2).is_ok());
    assert_eq!(clock.now(), SECOND.as_nanos() as u64);
}
