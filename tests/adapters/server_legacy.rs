//! The legacy `X-RateLimit-Limit`, `-Remaining` and `-Reset` describe one limit of
//! a set: on a refusal the one that refused (its reset never earlier than
//! `Retry-After`), on a grant the tightest, on virtual time.
#![cfg(feature = "tower")]

use futures::executor::block_on;
use http::{Request, Response};
use sluicegate::adapters::server::{Legacy, RateLimitHeaders, ServerLayer};
use sluicegate::adapters::Weighed;
use sluicegate::algorithms::{AllOf, FixedWindow, LeakyBucket, Limits, SlidingLog};
use sluicegate::clock::ManualClock;
use sluicegate::CellAlgorithm;
use sluicegate::{KeyedRateLimiter, RateLimiter};
use std::convert::Infallible;
use std::time::Duration;
use tower::{service_fn, Layer, Service, ServiceExt};

fn app() -> impl Service<Request<u64>, Response = Response<()>, Error = Infallible> + Clone {
    service_fn(|_: Request<u64>| async { Ok::<_, Infallible>(Response::new(())) })
}

/// A request whose body is its cost.
fn request(cost: u64) -> Request<u64> {
    Request::new(cost)
}

/// Status, `Retry-After` and the legacy trio of one answer.
fn trio<S>(server: &S, cost: u64) -> (u16, Option<String>, [String; 3])
where
    S: Service<Request<u64>, Response = Response<()>, Error = Infallible> + Clone,
{
    let response = block_on(server.clone().oneshot(request(cost))).unwrap();
    let h = response.headers();
    let text = |name: &str| h[name].to_str().unwrap().to_owned();
    let retry = h.get("retry-after").map(|v| v.to_str().unwrap().to_owned());
    let fields = [
        text("x-ratelimit-limit"),
        text("x-ratelimit-remaining"),
        text("x-ratelimit-reset"),
    ];
    (response.status().as_u16(), retry, fields)
}

fn strings(values: [&str; 3]) -> [String; 3] {
    values.map(str::to_owned)
}

/// 10 a second and 100 a minute.
fn second_and_minute() -> (FixedWindow, FixedWindow) {
    (
        FixedWindow::new(10, Duration::from_secs(1)).unwrap(),
        FixedWindow::new(100, Duration::from_secs(60)).unwrap(),
    )
}

/// The server of `set` on a direct limiter and on a keyed one, each with the legacy
/// fields alone and with the IETF ones too: the same trio from all four.
fn every_server_of<A: CellAlgorithm>(
    set: A,
    run: impl Fn(&dyn Fn(u64) -> (u16, Option<String>, [String; 3]), &ManualClock),
) {
    for legacy_only in [true, false] {
        let headers = if legacy_only {
            RateLimitHeaders::new().legacy_only(Legacy::XRateLimit)
        } else {
            RateLimitHeaders::new().legacy(Legacy::XRateLimit)
        };
        let clock = ManualClock::new();
        let direct = RateLimiter::with_clock(set.clone(), clock.clone());
        let server = ServerLayer::with_weigher(direct, Weighed(|r: &Request<u64>| *r.body()))
            .headers(headers.clone())
            .layer(app());
        run(&|cost| trio(&server, cost), &clock);
        let clock = ManualClock::new();
        let keyed = KeyedRateLimiter::with_clock(set.clone(), clock.clone());
        let server = ServerLayer::with_weigher(keyed, |r: &Request<u64>| ("k", *r.body()))
            .headers(headers)
            .layer(app());
        run(&|cost| trio(&server, cost), &clock);
    }
}

/// Ten calls in the first second (0.25 s in): the second's limit is spent, the
/// minute has 90 left. The eleventh is refused by the second, for 0.75 s.
fn eleven_calls(send: &dyn Fn(u64) -> (u16, Option<String>, [String; 3]), clock: &ManualClock) {
    clock.advance(Duration::from_millis(250));
    // A grant: the tightest limit is the second (5 left of 10, its window ends in
    // 0.75 s), not the minute (95 of 100, 59.75 s).
    assert_eq!(send(5), (200, None, strings(["10", "5", "1"])));
    send(5);
    // Refused by the second: its own trio, as Retry-After says: 1 s, not 60.
    assert_eq!(
        send(1),
        (429, Some("1".to_owned()), strings(["10", "0", "1"]))
    );
}

#[test]
fn all_of_refusal_and_grant_each_name_one_limit() {
    every_server_of(AllOf::new(second_and_minute()), eleven_calls);
}

#[test]
fn limits_refusal_and_grant_each_name_one_limit() {
    let (second, minute) = second_and_minute();
    every_server_of(Limits::new().with(second).with(minute), eleven_calls);
}

#[test]
fn the_minute_refusing_names_the_minute() {
    every_server_of(AllOf::new(second_and_minute()), |send, clock| {
        for _ in 0..10 {
            assert_eq!(send(10).0, 200);
            clock.advance(Duration::from_secs(1));
        }
        // 100 spent in the minute's window [0 s, 60 s), 10 s in; the second would
        // grant.
        assert_eq!(
            send(1),
            (429, Some("50".to_owned()), strings(["100", "0", "50"]))
        );
    });
}

#[test]
fn a_refusals_reset_is_never_earlier_than_retry_after() {
    // A log of 3 a second whose refusals are recorded (a hammering client stays
    // banned), beside a leaky bucket of 5 draining 1 a second: over a trace of
    // costs and pauses every 429's legacy reset is at least its Retry-After, and
    // its remaining 0.
    let set = AllOf::new((
        SlidingLog::new(3, Duration::from_secs(1))
            .unwrap()
            .with_rejected_recorded(),
        LeakyBucket::meter(5, 1, Duration::from_secs(1)).unwrap(),
    ));
    every_server_of(set, |send, clock| {
        let mut x: u64 = 0x9E37_79B9;
        let mut refused = 0;
        for _ in 0..200 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            clock.advance(Duration::from_millis(
                [0, 0, 100, 300, 900][(x % 5) as usize],
            ));
            let (status, retry, [_, remaining, reset]) = send(1 + (x >> 8) % 3);
            if status == 429 {
                refused += 1;
                let retry: u64 = retry.unwrap().parse().unwrap();
                assert!(reset.parse::<u64>().unwrap() >= retry);
                assert_eq!(remaining, "0");
            }
        }
        assert!(refused > 10, "the trace refused only {refused}");
    });
}
