//! The server layer's recipes: a keyed limiter by `ServerLayer::keyed` (cost 1),
//! per-client-IP limits from axum's `ConnectInfo` over real loopback connections
//! from two addresses, and the client behind a trusted proxy by `client_ip`.
#![cfg(feature = "tower")]

use crate::support::adapters::serve;
use axum::body::Body;
use axum::extract::ConnectInfo;
use axum::routing::get;
use axum::Router;
use futures::executor::block_on;
use http::{Request, Response, StatusCode};
use sluicegate::adapters::server::{client_ip, Forwarding, ServerLayer};
use sluicegate::algorithms::FixedWindow;
use sluicegate::clock::ManualClock;
use sluicegate::KeyedRateLimiter;
use std::convert::Infallible;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::time::Duration;
use tower::{service_fn, Layer, ServiceExt};

/// 2 a minute per key, on virtual time.
fn two_a_minute<K: std::hash::Hash + Eq + Clone + Send + Sync + 'static>(
) -> KeyedRateLimiter<K, FixedWindow, sluicegate::stores::MemoryStore<K, FixedWindow>, ManualClock>
{
    let window = FixedWindow::new(2, Duration::from_secs(60)).unwrap();
    KeyedRateLimiter::with_clock(window, ManualClock::new())
}

#[test]
fn a_keyed_limiter_takes_a_key_per_request_at_cost_one() {
    let per_ip = two_a_minute::<IpAddr>();
    let app = service_fn(|_: Request<IpAddr>| async { Ok::<_, Infallible>(Response::new(())) });
    let server = ServerLayer::keyed(per_ip, |r: &Request<IpAddr>| *r.body()).layer(app);
    let from = |ip: [u8; 4]| {
        let request = Request::new(IpAddr::from(ip));
        block_on(server.clone().oneshot(request)).unwrap().status()
    };
    assert_eq!(from([192, 0, 2, 1]), StatusCode::OK);
    assert_eq!(from([192, 0, 2, 1]), StatusCode::OK);
    assert_eq!(from([192, 0, 2, 1]), StatusCode::TOO_MANY_REQUESTS);
    assert_eq!(from([192, 0, 2, 2]), StatusCode::OK);
}

/// The TCP peer's IP, from axum's `ConnectInfo`.
fn peer(request: &Request<Body>) -> IpAddr {
    request
        .extensions()
        .get::<ConnectInfo<SocketAddr>>()
        .map_or(IpAddr::V4(Ipv4Addr::UNSPECIFIED), |info| info.0.ip())
}

fn hello() -> Router {
    Router::new().route("/", get(|| async { "hello" }))
}

/// A client whose connections leave from `local`.
fn client_from(local: [u8; 4]) -> reqwest::Client {
    reqwest::Client::builder()
        .local_address(IpAddr::from(local))
        .build()
        .unwrap()
}

async fn statuses(client: &reqwest::Client, base: &str, n: usize) -> Vec<u16> {
    let mut out = Vec::new();
    for _ in 0..n {
        out.push(client.get(base).send().await.unwrap().status().as_u16());
    }
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_peer_ip_has_its_own_limit_over_loopback() {
    let base = serve(hello().layer(ServerLayer::keyed(two_a_minute(), peer))).await;
    // Two clients on two loopback addresses: one spends its limit, the other
    // still has its own.
    let (ann, bo) = (client_from([127, 0, 0, 1]), client_from([127, 0, 0, 2]));
    assert_eq!(statuses(&ann, &base, 3).await, [200, 200, 429]);
    assert_eq!(statuses(&bo, &base, 3).await, [200, 200, 429]);
}

/// Behind our proxy at 127.0.0.1: the client is the right-most address in
/// `X-Forwarded-For` that is not the proxy's; a request from anywhere else is its
/// peer.
fn behind_the_proxy(request: &Request<Body>) -> IpAddr {
    let ours = |ip: IpAddr| ip == IpAddr::V4(Ipv4Addr::LOCALHOST);
    client_ip(
        peer(request),
        request.headers(),
        Forwarding::XForwardedFor,
        ours,
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn behind_a_trusted_proxy_the_forwarded_client_is_the_key() {
    let limiter = two_a_minute::<IpAddr>();
    let base = serve(hello().layer(ServerLayer::keyed(limiter, behind_the_proxy))).await;
    let proxy = client_from([127, 0, 0, 1]);
    let forwarded = |chain: &'static str| {
        let (proxy, base) = (proxy.clone(), base.clone());
        async move {
            let response = proxy
                .get(&base)
                .header("x-forwarded-for", chain)
                .send()
                .await;
            response.unwrap().status().as_u16()
        }
    };
    // 203.0.113.9 reached the proxy; what it wrote to the left of itself is not
    // believed, so changing it does not escape the limit.
    assert_eq!(forwarded("203.0.113.9").await, 200);
    assert_eq!(forwarded("1.1.1.1, 203.0.113.9").await, 200);
    assert_eq!(forwarded("2.2.2.2, 203.0.113.9").await, 429);
    // Another client behind the proxy has its own limit.
    assert_eq!(forwarded("198.51.100.4").await, 200);
    // Not through the proxy: the peer is the key, whatever the field says.
    let direct = client_from([127, 0, 0, 3]);
    for expected in [200, 200, 429] {
        let response = direct
            .get(&base)
            .header("x-forwarded-for", "198.51.100.77")
            .send()
            .await
            .unwrap();
        assert_eq!(response.status().as_u16(), expected);
    }
}
