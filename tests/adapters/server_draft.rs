//! The server's fields as draft-ietf-httpapi-ratelimit-headers-10 defines them, on
//! virtual time: `t` is the time until more quota than `r` is there, a refusal's
//! item says `r=0` (a queue's included), and the quota unit `qu` and partition key
//! `pk` can be sent (the key itself never is).
#![cfg(feature = "tower")]

use futures::executor::block_on;
use http::{HeaderMap, Request, Response, StatusCode};
use sluicegate::adapters::server::{Policy, RateLimitHeaders, ServerLayer};
use sluicegate::algorithms::{Algorithm, LeakyBucket, SlidingLog, SlidingWindowCounter};
use sluicegate::clock::ManualClock;
use sluicegate::{KeyedRateLimiter, RateLimiter};
use std::convert::Infallible;
use std::time::Duration;
use tower::{service_fn, Layer, Service, ServiceExt};

fn app() -> impl Service<Request<String>, Response = Response<()>, Error = Infallible> + Clone {
    service_fn(|_: Request<String>| async { Ok::<_, Infallible>(Response::new(())) })
}

/// A request from the client named in its body.
fn from(client: &str) -> Request<String> {
    Request::new(client.to_owned())
}

fn send<S>(server: &S, request: Request<String>) -> Response<()>
where
    S: Service<Request<String>, Response = Response<()>, Error = Infallible> + Clone,
{
    block_on(server.clone().oneshot(request)).unwrap()
}

/// `RateLimit` after a call a second from 0 s to 30 s (31 calls) against `limit`,
/// 100 a minute, named `"minute"`.
fn after_thirty_seconds<A: Algorithm>(limit: A) -> String {
    let clock = ManualClock::new();
    let limiter = KeyedRateLimiter::with_clock(limit, clock.clone());
    let server = ServerLayer::keyed(limiter, |r: &Request<String>| r.body().clone())
        .headers(RateLimitHeaders::new().policies([Policy::new(
            "minute",
            100,
            Duration::from_secs(60),
        )]))
        .layer(app());
    let mut last = None;
    for second in 0..=30 {
        if second > 0 {
            clock.advance(Duration::from_secs(1));
        }
        last = Some(send(&server, from("ann")));
    }
    last.unwrap().headers()["ratelimit"]
        .to_str()
        .unwrap()
        .to_owned()
}

#[test]
fn t_is_when_more_quota_comes_not_when_the_limit_is_whole() {
    // The call of 0 s leaves the window at 60 s: quota comes back in 30 s.
    let log = SlidingLog::new(100, Duration::from_secs(60)).unwrap();
    assert_eq!(after_thirty_seconds(log), r#""minute";r=69;t=30"#);
    // The counter's estimate lets a 70th through 60/31 s into the next window.
    let counter = SlidingWindowCounter::new(100, Duration::from_secs(60)).unwrap();
    assert_eq!(after_thirty_seconds(counter), r#""minute";r=69;t=32"#);
}

#[test]
fn a_queue_refuses_with_r_0_not_the_room_left_in_it() {
    let clock = ManualClock::new();
    // A queue of 4 at 1 a second: a server that does not wait passes a call only
    // when the queue is idle.
    let queue = LeakyBucket::queue(4, 1, Duration::from_secs(1)).unwrap();
    let server = ServerLayer::new(RateLimiter::with_clock(queue, clock)).layer(app());
    let first = send(&server, from("ann"));
    assert_eq!(first.status(), StatusCode::OK);
    assert_eq!(first.headers()["ratelimit"], r#""default";r=3;t=1"#);
    for _ in 0..2 {
        let refused = send(&server, from("ann"));
        assert_eq!(refused.status(), StatusCode::TOO_MANY_REQUESTS);
        assert_eq!(refused.headers()["ratelimit"], r#""default";r=0;t=1"#);
        assert_eq!(refused.headers()["retry-after"], "1");
    }
}

/// The `RateLimit` items and `RateLimit-Policy` of a response, parsed by `sfv`:
/// each item's name and its parameters as text.
fn parsed(headers: &HeaderMap, name: &str) -> Vec<(String, Vec<(String, String)>)> {
    let list: sfv::List = sfv::Parser::new(headers[name].as_bytes()).parse().unwrap();
    list.into_iter()
        .map(|entry| {
            let sfv::ListEntry::Item(item) = entry else {
                panic!("an inner list")
            };
            let params = item
                .params
                .iter()
                .map(|(k, v)| (k.as_str().to_owned(), format!("{v:?}")))
                .collect();
            (
                item.bare_item.as_string().unwrap().as_str().to_owned(),
                params,
            )
        })
        .collect()
}

#[test]
fn a_policy_states_its_quota_unit() {
    let clock = ManualClock::new();
    let bytes = LeakyBucket::meter(65_535, 6_553, Duration::from_secs(1)).unwrap();
    let limiter = RateLimiter::with_clock(bytes, clock);
    let policy = Policy::new("upload", 65_535, Duration::from_secs(10)).quota_unit("content-bytes");
    let server =
        ServerLayer::with_weigher(limiter, |r: &Request<String>| ((), r.body().len() as u64))
            .headers(RateLimitHeaders::new().policies([policy]))
            .layer(app());
    let response = send(&server, from("some bytes"));
    assert_eq!(
        response.headers()["ratelimit-policy"],
        r#""upload";q=65535;qu="content-bytes";w=10"#
    );
    let policy = parsed(response.headers(), "ratelimit-policy");
    assert_eq!(policy[0].1[1].0, "qu");
}

#[test]
fn partition_keys_are_a_keyed_hash_of_the_key_never_the_key() {
    let clock = ManualClock::new();
    let minute = SlidingLog::new(10, Duration::from_secs(60)).unwrap();
    let limiter = KeyedRateLimiter::with_clock(minute, clock);
    let layer = ServerLayer::keyed(limiter.clone(), |r: &Request<String>| r.body().clone());
    let server = layer
        .clone()
        .partition_keys(*b"0123456789abcdef")
        .layer(app());
    let pk = |response: &Response<()>| {
        let items = parsed(response.headers(), "ratelimit");
        assert_eq!(items.len(), 1);
        let (name, value) = items[0].1.last().unwrap().clone();
        assert_eq!(name, "pk");
        value
    };
    let ann = send(&server, from("ann"));
    let text = ann.headers()["ratelimit"].to_str().unwrap();
    assert!(!text.contains("ann"), "{text}");
    // SipHash-2-4 under that secret of "ann" as `str` hashes it: the same value in
    // every process, release and platform.
    assert!(text.ends_with(";pk=:e9nPZL1BgDo=:"), "{text}");
    assert!(pk(&ann).starts_with("ByteSequence"));
    assert_eq!(pk(&send(&server, from("ann"))), pk(&ann));
    assert_ne!(pk(&send(&server, from("bo"))), pk(&ann));
    // Refusals carry it too; the policy never does.
    for _ in 0..10 {
        send(&server, from("cy"));
    }
    let refused = send(&server, from("cy"));
    assert_eq!(refused.status(), StatusCode::TOO_MANY_REQUESTS);
    assert_eq!(pk(&refused), pk(&send(&server, from("cy"))));
    assert!(!refused.headers()["ratelimit-policy"]
        .to_str()
        .unwrap()
        .contains("pk"));
    // Another secret, another value for the same key.
    let other = layer.partition_keys([7; 16]).layer(app());
    assert_ne!(pk(&send(&other, from("ann"))), pk(&ann));
}
