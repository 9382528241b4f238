//! The measurement harness for the server layer's cost per request, in
//! instructions (repeatable on a loaded machine, unlike wall-clock time):
//!
//! ```text
//! cargo build --release --example server_instructions --features tower
//! valgrind --tool=callgrind --toggle-collect='*measured*' \
//!     target/release/examples/server_instructions sluicegate 100000
//! ```
//!
//! `sluicegate` or `tower_governor`: the same setup as `benches/adapters.rs`'s
//! `server/allowed` no-fields pair (one hot peer IP, every request allowed, an
//! inner service that answers at once). Only `measured` (one request through
//! the service, its response dropped) is counted; divide by the request count.

use axum::body::Body;
use axum::extract::ConnectInfo;
use futures::FutureExt;
use http::{Request, Response};
use sluicegate::adapters::server::{RateLimitHeaders, ServerLayer};
use sluicegate::algorithms::LeakyBucket;
use sluicegate::KeyedRateLimiter;
use std::convert::Infallible;
use std::hint::black_box;
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

#[inline(never)]
fn measured<S>(service: &mut S, request: Request<Body>) -> u16
where
    S: Service<Request<Body>, Response = Response<Body>>,
    S::Error: std::fmt::Debug,
{
    let response = service
        .call(request)
        .now_or_never()
        .expect("ready")
        .unwrap();
    response.status().as_u16()
}

fn run<S>(mut service: S, count: usize)
where
    S: Service<Request<Body>, Response = Response<Body>>,
    S::Error: std::fmt::Debug,
{
    assert_eq!(measured(&mut service, request()), 200);
    let requests: Vec<_> = (0..count).map(|_| request()).collect();
    let mut ok = 0;
    for r in requests {
        ok += usize::from(black_box(measured(&mut service, r)) == 200);
    }
    assert_eq!(ok, count);
}

fn main() {
    let mut args = std::env::args().skip(1);
    let which = args.next().unwrap_or_else(|| "sluicegate".into());
    let count: usize = args.next().map_or(100_000, |n| n.parse().expect("a count"));
    let app =
        service_fn(|_: Request<Body>| async { Ok::<_, Infallible>(Response::new(Body::empty())) });
    let period = Duration::from_nanos(1);
    match which.as_str() {
        "sluicegate" => {
            let limiter = KeyedRateLimiter::new(LeakyBucket::meter(1_000_000, 1, period).unwrap());
            let layer =
                ServerLayer::with_weigher(limiter, peer_ip).headers(RateLimitHeaders::none());
            run(layer.layer(app), count);
        }
        "tower_governor" => {
            let mut builder = GovernorConfigBuilder::default();
            builder
                .period(period)
                .burst_size(1_000_000)
                .key_extractor(PeerIpKeyExtractor);
            let layer = GovernorLayer::new(builder.finish().unwrap());
            run(layer.layer(app), count);
        }
        other => panic!("sluicegate or tower_governor, not {other}"),
    }
}
