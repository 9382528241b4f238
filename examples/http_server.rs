//! The server layer on an axum app, keyed per client IP.
//!
//! 1. Directly: the key is the TCP peer, from axum's `ConnectInfo<SocketAddr>`
//!    (serve with `into_make_service_with_connect_info`). A set of two limits (a
//!    burst of 3 draining at 2 per second, and 5 per minute); writes cost 2; every
//!    response carries `RateLimit` / `RateLimit-Policy` and the legacy
//!    `X-RateLimit-*`; refusals are `429` with `Retry-After`, and a request heavier
//!    than the whole quota is `400`.
//! 2. Behind a proxy you control: the peer is the proxy, so the key is the client
//!    the proxy saw, the right-most `X-Forwarded-For` address that is not the
//!    proxy's (`client_ip`). What a client writes to the left of it is not
//!    believed, so it cannot escape its limit by changing it.
//!
//! A plain client on the same machine fires requests at both and prints what comes
//! back. Runs on 127.0.0.1 and ends by itself.
//!
//! `cargo run --example http_server --features tower`

use axum::body::Body;
use axum::extract::ConnectInfo;
use axum::routing::get;
use axum::Router;
use http::{Method, Request};
use sluicegate::adapters::server::{
    client_ip, Forwarding, Legacy, Policy, RateLimitHeaders, ServerLayer,
};
use sluicegate::algorithms::{AllOf, FixedWindow, LeakyBucket};
use sluicegate::KeyedRateLimiter;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::time::Duration;

/// The TCP peer's IP (`ConnectInfo` is there when the app is served with
/// `into_make_service_with_connect_info`).
fn peer(request: &Request<Body>) -> IpAddr {
    request
        .extensions()
        .get::<ConnectInfo<SocketAddr>>()
        .map_or(IpAddr::V4(Ipv4Addr::UNSPECIFIED), |info| info.0.ip())
}

/// Whom and how much a request is charged: the peer's IP; POST costs 2, a request
/// marked `x-weight` costs what it says.
fn weigh(request: &Request<Body>) -> (IpAddr, u64) {
    let weight = request
        .headers()
        .get("x-weight")
        .and_then(|v| v.to_str().ok()?.parse().ok());
    let cost = weight.unwrap_or(if request.method() == Method::POST {
        2
    } else {
        1
    });
    (peer(request), cost)
}

/// The client behind our proxy (here the proxy is whoever connects from
/// 127.0.0.1): the right-most forwarded address that is not the proxy's.
fn behind_proxy(request: &Request<Body>) -> IpAddr {
    let ours = |ip: IpAddr| ip == IpAddr::V4(Ipv4Addr::LOCALHOST);
    client_ip(
        peer(request),
        request.headers(),
        Forwarding::XForwardedFor,
        ours,
    )
}

/// Serves `app` on a free loopback port; answers its base URL.
async fn serve(app: Router) -> String {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}/", listener.local_addr().unwrap());
    let service = app.into_make_service_with_connect_info::<SocketAddr>();
    tokio::spawn(async move { axum::serve(listener, service).await });
    base
}

fn print(label: &str, response: &reqwest::Response) {
    println!("{label}\n  -> {}", response.status());
    for name in [
        "retry-after",
        "ratelimit",
        "ratelimit-policy",
        "x-ratelimit-limit",
        "x-ratelimit-remaining",
        "x-ratelimit-reset",
    ] {
        for value in response.headers().get_all(name) {
            println!("     {name}: {}", value.to_str().unwrap_or("?"));
        }
    }
}

#[tokio::main(flavor = "current_thread")]
async fn main() {
    let burst = LeakyBucket::meter(3, 2, Duration::from_secs(1)).unwrap();
    let per_minute = FixedWindow::new(5, Duration::from_secs(60)).unwrap();
    let set = AllOf::new((burst, per_minute));
    // One RateLimit-Policy item per limit of the set, stated by the set itself.
    let headers = RateLimitHeaders::new()
        .policies(Policy::describe(&set, ["burst", "minute"]))
        .legacy(Legacy::XRateLimit);
    let direct = Router::new()
        .route("/", get(|| async { "read" }).post(|| async { "written" }))
        .layer(ServerLayer::with_weigher(KeyedRateLimiter::new(set), weigh).headers(headers));
    let base = serve(direct).await;
    println!("1. keyed by the peer address, serving on {base}\n");

    let http = reqwest::Client::new();
    let plan = [
        ("GET", None),
        ("POST", None),
        ("GET", None),
        ("GET", Some("9")),
        ("GET", None),
        ("GET", None),
    ];
    for (method, weight) in plan {
        let mut request = http.request(method.parse().unwrap(), &base);
        if let Some(weight) = weight {
            request = request.header("x-weight", weight);
        }
        let response = request.send().await.expect("loopback request");
        let label = weight.map_or(String::new(), |w| format!(" (weight {w})"));
        print(&format!("{method}{label}"), &response);
    }
    tokio::time::sleep(Duration::from_millis(600)).await;
    let after = http.get(&base).send().await.expect("loopback request");
    print("GET after 0.6 s", &after);

    // 2 a minute per client, the client read from X-Forwarded-For behind our proxy.
    let per_client = KeyedRateLimiter::new(FixedWindow::new(2, Duration::from_secs(60)).unwrap());
    let proxied = Router::new()
        .route("/", get(|| async { "read" }))
        .layer(ServerLayer::keyed(per_client, behind_proxy));
    let base = serve(proxied).await;
    println!("\n2. behind a proxy (127.0.0.1), keyed by X-Forwarded-For, serving on {base}\n");
    for chain in [
        "203.0.113.9",
        "1.1.1.1, 203.0.113.9", // the client's own claim on the left is ignored
        "2.2.2.2, 203.0.113.9",
        "198.51.100.4", // another client behind the proxy
    ] {
        let response = http
            .get(&base)
            .header("x-forwarded-for", chain)
            .send()
            .await
            .expect("loopback request");
        print(&format!("GET x-forwarded-for: {chain}"), &response);
    }
}
