//! The tower layers' cost, in the same run as their peers:
//!
//! * the server layer per request against `tower_governor`'s, both keyed by the
//!   peer IP (axum's `ConnectInfo`, one hot client), both allowing every request, an
//!   inner service that answers at once: without fields (sluicegate
//!   `RateLimitHeaders::none()` / governor's default), with the legacy
//!   `X-RateLimit-*` fields (sluicegate `legacy_only` / governor's `use_headers`), and
//!   sluicegate's default IETF `RateLimit` / `RateLimit-Policy` fields;
//! * the server layer refusing (429), both sides;
//! * the client layer's overhead on an allowed request against a bare call of the
//!   same inner service, alone and honouring the server (a hold looked up before
//!   and the response read after every request).
//!
//! Each request is built outside the measured part (`iter_batched`); futures are
//! polled once with a no-op waker (every one here is ready at once).
//!
//! `cargo bench --bench adapters --features tower`

mod common;

use axum::body::Body;
use axum::extract::ConnectInfo;
use criterion::{black_box, BatchSize, Criterion};
use futures::FutureExt;
use http::{Request, Response};
use sluicegate::adapters::client::ClientLayer;
use sluicegate::adapters::server::{Legacy, RateLimitHeaders, ServerLayer};
use sluicegate::adapters::HoldBack;
use sluicegate::algorithms::LeakyBucket;
use sluicegate::{KeyedRateLimiter, RateLimiter};
use std::convert::Infallible;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::time::Duration;
use tower::{service_fn, Layer, Service};
use tower_governor::governor::GovernorConfigBuilder;
use tower_governor::key_extractor::PeerIpKeyExtractor;
use tower_governor::GovernorLayer;

fn request() -> Request<Body> {
    let mut request = Request::new(Body::empty());
    let peer = SocketAddr::new(IpAddr::V4(Ipv4Addr::new(10, 0, 0, 7)), 40_000);
    request.extensions_mut().insert(ConnectInfo(peer));
    request
}

fn peer_ip(request: &Request<Body>) -> (IpAddr, u64) {
    let ip = request
        .extensions()
        .get::<ConnectInfo<SocketAddr>>()
        .map_or(IpAddr::V4(Ipv4Addr::UNSPECIFIED), |info| info.0.ip());
    (ip, 1)
}

fn app(
) -> impl Service<Request<Body>, Response = Response<Body>, Error = Infallible, Future = impl Send> + Clone
{
    service_fn(|_: Request<Body>| async { Ok::<_, Infallible>(Response::new(Body::empty())) })
}

/// One request through `service`, which must answer at once.
fn once<S: Service<Request<Body>, Response = Response<Body>>>(
    service: &mut S,
    request: Request<Body>,
) -> u16
where
    S::Error: std::fmt::Debug,
{
    let response = service
        .call(request)
        .now_or_never()
        .expect("ready at once")
        .unwrap();
    response.status().as_u16()
}

fn bench_server(c: &mut Criterion, name: &str, allow: bool) {
    // Allowing: a meter of a million permits draining one per nanosecond; refusing:
    // one permit a day, spent before measuring. Governor's GCRA alike.
    let (capacity, count, period) = if allow {
        (1_000_000, 1, Duration::from_nanos(1))
    } else {
        (1, 1, Duration::from_secs(86_400))
    };
    let ours = || KeyedRateLimiter::new(LeakyBucket::meter(capacity, count, period).unwrap());
    let theirs = || {
        let mut builder = GovernorConfigBuilder::default();
        builder
            .period(period)
            .burst_size(u32::try_from(capacity).unwrap())
            .key_extractor(PeerIpKeyExtractor);
        builder
    };
    let mut group = c.benchmark_group(format!("server/{name}"));
    let expected = if allow { 200 } else { 429 };
    let mut bench = |label: &str, mut service: Box<dyn FnMut(Request<Body>) -> u16>| {
        service(request()); // spends the refusing quota, warms the key
        assert_eq!(service(request()), expected, "{label}");
        group.bench_function(label, |b| {
            b.iter_batched(request, |r| black_box(service(r)), BatchSize::SmallInput)
        });
    };

    let mut plain = ServerLayer::with_weigher(ours(), peer_ip)
        .headers(RateLimitHeaders::none())
        .layer(app());
    bench(
        "sluicegate/no-fields",
        Box::new(move |r| once(&mut plain, r)),
    );
    let config = theirs().finish().unwrap();
    let mut governor = GovernorLayer::new(config).layer(app());
    bench(
        "tower_governor/no-fields",
        Box::new(move |r| once(&mut governor, r)),
    );

    let mut legacy = ServerLayer::with_weigher(ours(), peer_ip)
        .headers(RateLimitHeaders::none().legacy_only(Legacy::XRateLimit))
        .layer(app());
    bench(
        "sluicegate/x-ratelimit",
        Box::new(move |r| once(&mut legacy, r)),
    );
    let config = theirs().use_headers().finish().unwrap();
    let mut governor_headers = GovernorLayer::new(config).layer(app());
    bench(
        "tower_governor/x-ratelimit",
        Box::new(move |r| once(&mut governor_headers, r)),
    );

    let mut ietf = ServerLayer::with_weigher(ours(), peer_ip).layer(app());
    bench("sluicegate/ietf", Box::new(move |r| once(&mut ietf, r)));
    group.finish();
}

fn bench_client(c: &mut Criterion) {
    let inner = service_fn(|_: u64| async { Ok::<_, Infallible>(Response::new(())) });
    let allowed =
        || RateLimiter::new(LeakyBucket::meter(1_000_000, 1, Duration::from_nanos(1)).unwrap());
    let mut group = c.benchmark_group("client/allowed");
    let mut bare = inner;
    group.bench_function("bare", |b| {
        b.iter(|| bare.call(black_box(7)).now_or_never().unwrap().unwrap())
    });
    let mut layered = ClientLayer::new(allowed()).layer(inner);
    group.bench_function("client-layer", |b| {
        b.iter(|| layered.call(black_box(7)).now_or_never().unwrap().unwrap())
    });
    // Honouring the server: its holds are looked up before every request and every
    // response is read (a 200 without fields asks for nothing).
    let limiter = allowed();
    let hold = HoldBack::new(limiter.clock().clone());
    let mut honouring = ClientLayer::new(limiter).honour_server(hold).layer(inner);
    group.bench_function("client-layer/honouring", |b| {
        b.iter(|| {
            honouring
                .call(black_box(7))
                .now_or_never()
                .unwrap()
                .unwrap()
        })
    });
    group.finish();
}

/// The allowed server pairs again, interleaved (see `common::fastest_batches`):
/// the ratio that stands up to a noisy machine.
fn interleaved_server(_: &mut Criterion) {
    let ours = || {
        KeyedRateLimiter::new(LeakyBucket::meter(1_000_000, 1, Duration::from_nanos(1)).unwrap())
    };
    let theirs = || {
        let mut builder = GovernorConfigBuilder::default();
        builder
            .period(Duration::from_nanos(1))
            .burst_size(1_000_000)
            .key_extractor(PeerIpKeyExtractor);
        builder
    };
    let mut plain = ServerLayer::with_weigher(ours(), peer_ip)
        .headers(RateLimitHeaders::none())
        .layer(app());
    let mut governor = GovernorLayer::new(theirs().finish().unwrap()).layer(app());
    let mut legacy = ServerLayer::with_weigher(ours(), peer_ip)
        .headers(RateLimitHeaders::none().legacy_only(Legacy::XRateLimit))
        .layer(app());
    let mut governor_headers =
        GovernorLayer::new(theirs().use_headers().finish().unwrap()).layer(app());
    let names = [
        "sluicegate/no-fields",
        "tower_governor/no-fields",
        "sluicegate/x-ratelimit",
        "tower_governor/x-ratelimit",
    ];
    let mut cases: Vec<Box<dyn FnMut(Request<Body>) -> bool>> = vec![
        Box::new(move |r| once(&mut plain, r) == 200),
        Box::new(move |r| once(&mut governor, r) == 200),
        Box::new(move |r| once(&mut legacy, r) == 200),
        Box::new(move |r| once(&mut governor_headers, r) == 200),
    ];
    let best = common::fastest_batches_on(&mut cases, 40, request);
    println!(
        "server/allowed, interleaved, fastest batch of {} requests:",
        common::BATCH
    );
    for (index, name) in names.iter().enumerate() {
        let peer = best[index - index % 2 + 1];
        println!(
            "  {name:28} {:7.1} ns  {:4.2}x tower_governor",
            best[index],
            best[index] / peer
        );
    }
}

fn benches(c: &mut Criterion) {
    interleaved_server(c);
    bench_server(c, "allowed", true);
    bench_server(c, "refused", false);
    bench_client(c);
}

criterion::criterion_group!(adapters, benches);
criterion::criterion_main!(adapters);
