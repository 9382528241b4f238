//! The server layer's setup shared by `benches/adapters.rs` and
//! `examples/server_instructions.rs`, so that the criterion figures and the
//! instruction counts measure the same thing: one hot peer IP, an inner service
//! that answers at once, and every future ready on its first poll.
#![allow(dead_code)]

use axum::body::Body;
use axum::extract::ConnectInfo;
use futures::FutureExt;
use http::{Request, Response};
use std::convert::Infallible;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use tower::{service_fn, Service};

/// A request from the one hot client, 10.0.0.7, as axum's `ConnectInfo` carries it.
pub fn request() -> Request<Body> {
    let mut request = Request::new(Body::empty());
    let peer = SocketAddr::new(IpAddr::V4(Ipv4Addr::new(10, 0, 0, 7)), 40_000);
    request.extensions_mut().insert(ConnectInfo(peer));
    request
}

/// The server layer's meter: the peer IP, each request costing 1.
pub fn peer_ip(request: &Request<Body>) -> (IpAddr, u64) {
    let ip = request
        .extensions()
        .get::<ConnectInfo<SocketAddr>>()
        .map_or(IpAddr::V4(Ipv4Addr::UNSPECIFIED), |info| info.0.ip());
    (ip, 1)
}

/// The inner service: an empty 200 at once.
pub fn app(
) -> impl Service<Request<Body>, Response = Response<Body>, Error = Infallible, Future = impl Send> + Clone
{
    service_fn(|_: Request<Body>| async { Ok::<_, Infallible>(Response::new(Body::empty())) })
}

/// One request through `service`, which must answer at once: the response status.
pub fn once<S: Service<Request<Body>, Response = Response<Body>>>(
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
