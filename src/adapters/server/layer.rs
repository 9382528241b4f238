//! The server layer: configuration, and `Layer` to wrap a service.

use super::headers::RateLimitHeaders;
use super::partition::Partition;
use super::service::{Config, Server};
use crate::adapters::{Each, Permits, Weigh};
use http::StatusCode;
use std::hash::Hash;
use std::sync::Arc;
use std::time::Duration;
use tower_layer::Layer;

/// A tower [`Layer`] that rate-limits an HTTP service: each request is charged to
/// its key (an IP, a user, a path, any mix) at its cost, over any limiter
/// (direct or keyed, any algorithm, set and store); a refused request is answered
/// `429` with `Retry-After` and the `RateLimit` fields without reaching the inner
/// service, and an allowed response carries the fields too. See the
/// [module docs](super) for every outcome and [`RateLimitHeaders`] for the fields.
///
/// The layer and its services share the one limiter: clone them freely.
///
/// ```
/// use http::{Request, Response, StatusCode};
/// use sluicegate::adapters::server::ServerLayer;
/// use sluicegate::algorithms::FixedWindow;
/// use sluicegate::{clock::ManualClock, KeyedRateLimiter};
/// use std::time::Duration;
/// use tower::{service_fn, Layer, ServiceExt};
///
/// // 2 requests per minute per client, the client named by a header here.
/// let limiter = KeyedRateLimiter::with_clock(FixedWindow::new(2, Duration::from_secs(60)).unwrap(), ManualClock::new());
/// let app = service_fn(|_: Request<()>| async { Ok::<_, std::convert::Infallible>(Response::new(())) });
/// let server = ServerLayer::keyed(limiter, |r: &Request<()>| {
///     r.headers().get("x-client").and_then(|v| v.to_str().ok()).unwrap_or("anon").to_owned()
/// })
/// .layer(app);
/// let ask = || Request::builder().header("x-client", "ann").body(()).unwrap();
/// futures::executor::block_on(async {
///     assert_eq!(server.clone().oneshot(ask()).await.unwrap().headers()["ratelimit"], r#""default";r=1;t=60"#);
///     server.clone().oneshot(ask()).await.unwrap();
///     let refused = server.clone().oneshot(ask()).await.unwrap();
///     assert_eq!(refused.status(), StatusCode::TOO_MANY_REQUESTS);
///     assert_eq!(refused.headers()["retry-after"], "60");
/// });
/// ```
///
/// # Per client IP
///
/// With axum, serve the app with
/// `into_make_service_with_connect_info::<SocketAddr>()` and key each request by
/// the peer address in its `ConnectInfo<SocketAddr>` extension. Behind proxies you
/// control (a load balancer, a CDN) the peer is the proxy: read the client from the
/// field the proxy writes with [`client_ip`](super::client_ip), which trusts only
/// the entries your proxies appended (the right-most address that is not one of
/// them). Never key by the left-most `X-Forwarded-For` entry, nor by any field
/// without such a proxy in front: the client writes those, and a key it chooses
/// escapes its limit. (`examples/http_server.rs` runs both.)
///
/// ```
/// use axum::extract::ConnectInfo;
/// use http::Request;
/// use sluicegate::adapters::server::{client_ip, Forwarding, ServerLayer};
/// use sluicegate::algorithms::SmoothBursty;
/// use sluicegate::KeyedRateLimiter;
/// use std::net::{IpAddr, Ipv4Addr, SocketAddr};
///
/// // Behind our load balancer at 10.0.0.2; direct requests are keyed by their peer.
/// fn client<B>(request: &Request<B>) -> IpAddr {
///     let peer = request
///         .extensions()
///         .get::<ConnectInfo<SocketAddr>>()
///         .map_or(IpAddr::V4(Ipv4Addr::UNSPECIFIED), |info| info.0.ip());
///     let ours = |ip: IpAddr| ip == IpAddr::V4(Ipv4Addr::new(10, 0, 0, 2));
///     client_ip(peer, request.headers(), Forwarding::XForwardedFor, ours)
/// }
/// let per_ip = KeyedRateLimiter::<IpAddr, _>::new(SmoothBursty::new(5.0).unwrap());
/// let layer = ServerLayer::keyed(per_ip, client::<axum::body::Body>);
/// // axum::Router::new().route(...).layer(layer)
/// //     .into_make_service_with_connect_info::<SocketAddr>()
/// ```
#[derive(Clone, Debug)]
pub struct ServerLayer<P: Permits, W = Each> {
    permits: P,
    weigher: W,
    config: Arc<Config>,
    partition: Option<Partition<P::Key>>,
}

impl<P: Permits<Key = ()>> ServerLayer<P, Each> {
    /// One permit of the direct limiter `permits` per request: one limit for the
    /// whole service. A keyed limiter takes [`keyed`](ServerLayer::keyed) (a key
    /// per request) or [`with_weigher`](ServerLayer::with_weigher) (a key and a cost).
    ///
    /// ```
    /// use sluicegate::adapters::server::ServerLayer;
    /// use sluicegate::RateLimiter;
    /// let layer = ServerLayer::new(RateLimiter::bursty(100.0).unwrap());
    /// ```
    pub fn new(permits: P) -> Self {
        ServerLayer::with_weigher(permits, Each)
    }
}

/// The weigher of [`ServerLayer::keyed`]: the key from a closure, every request
/// costing one permit.
///
/// ```
/// use http::{Request, Response};
/// use sluicegate::adapters::server::{KeyOnly, ServerLayer};
/// use sluicegate::{algorithms::FixedWindow, clock::ManualClock, KeyedRateLimiter};
/// use std::time::Duration;
/// use tower::{service_fn, Layer, ServiceExt};
///
/// let window = FixedWindow::new(5, Duration::from_secs(60)).unwrap();
/// let per_path = KeyedRateLimiter::with_clock(window, ManualClock::new());
/// let by_path = KeyOnly(|r: &Request<()>| r.uri().path().to_owned());
/// let app = service_fn(|_: Request<()>| async { Ok::<_, std::convert::Infallible>(Response::new(())) });
/// let server = ServerLayer::with_weigher(per_path.clone(), by_path).layer(app);
/// futures::executor::block_on(async {
///     for path in ["/a", "/a", "/b"] {
///         server.clone().oneshot(Request::get(path).body(()).unwrap()).await.unwrap();
///     }
/// });
/// // One permit a request, charged to its path: "/a" has 3 of its 5 left.
/// assert_eq!(per_path.peek(&"/a".to_owned(), 3).map(|d| d.is_allowed()), Ok(true));
/// assert_eq!(per_path.peek(&"/a".to_owned(), 4).map(|d| d.is_allowed()), Ok(false));
/// assert_eq!(per_path.peek(&"/b".to_owned(), 4).map(|d| d.is_allowed()), Ok(true));
/// ```
#[derive(Clone, Copy, Debug)]
pub struct KeyOnly<F>(pub F);

impl<T, K, F: FnMut(&T) -> K> Weigh<T, K> for KeyOnly<F> {
    #[inline]
    fn weigh(&mut self, item: &T) -> (K, u64) {
        ((self.0)(item), 1)
    }
}

impl<P: Permits, F> ServerLayer<P, KeyOnly<F>> {
    /// One permit of the keyed limiter `permits` per request, charged to the key
    /// `key` gives it (the client's IP, a token, the path...).
    ///
    /// ```
    /// use sluicegate::adapters::server::ServerLayer;
    /// use sluicegate::{algorithms::SmoothBursty, KeyedRateLimiter};
    /// let per_path = KeyedRateLimiter::<String, SmoothBursty>::bursty(10.0).unwrap();
    /// let layer = ServerLayer::keyed(per_path, |r: &http::Request<()>| r.uri().path().to_owned());
    /// ```
    pub fn keyed(permits: P, key: F) -> Self {
        ServerLayer::with_weigher(permits, KeyOnly(key))
    }
}

impl<P: Permits, W> ServerLayer<P, W> {
    /// Charges each request what `weigher` says: a closure `|request| (key, cost)` for
    /// a keyed limiter (the key from the peer address, a token, the path...), or a
    /// [`Weighed`](crate::adapters::Weighed) cost for a direct one. A cost of 0 is
    /// free: the request passes at once, uncounted and without fields.
    ///
    /// ```
    /// use sluicegate::adapters::server::ServerLayer;
    /// use sluicegate::{algorithms::SmoothBursty, KeyedRateLimiter};
    /// // Per path; writes cost twice what reads do.
    /// let limiter = KeyedRateLimiter::<String, SmoothBursty>::bursty(10.0).unwrap();
    /// let layer = ServerLayer::with_weigher(limiter, |r: &http::Request<()>| {
    ///     (r.uri().path().to_owned(), if r.method() == http::Method::POST { 2 } else { 1 })
    /// });
    /// ```
    pub fn with_weigher(permits: P, weigher: W) -> Self {
        ServerLayer {
            permits,
            weigher,
            config: Arc::new(Config {
                headers: RateLimitHeaders::new(),
                never_status: StatusCode::BAD_REQUEST,
                fail_open: false,
                delay: None,
            }),
            partition: None,
        }
    }

    /// The fields sent (default: the IETF `RateLimit` and `RateLimit-Policy` with a
    /// `"default"` policy): name the limits, add or switch to the legacy
    /// `X-RateLimit-*`.
    ///
    /// ```
    /// use sluicegate::adapters::server::{Legacy, Policy, RateLimitHeaders, ServerLayer};
    /// use sluicegate::RateLimiter;
    /// use std::time::Duration;
    /// let layer = ServerLayer::new(RateLimiter::bursty(10.0).unwrap()).headers(
    ///     RateLimitHeaders::new()
    ///         .policies([Policy::new("api", 10, Duration::from_secs(1))])
    ///         .legacy(Legacy::XRateLimit),
    /// );
    /// ```
    pub fn headers(mut self, headers: RateLimitHeaders) -> Self {
        Arc::make_mut(&mut self.config).headers = headers;
        self
    }

    /// The status for a request whose cost can never be granted (default
    /// `400 Bad Request`; see the [module docs](super) for why). A weigher that
    /// charges content bytes (a policy with `qu="content-bytes"`) may prefer
    /// `413 Content Too Large`, which is about exactly that.
    ///
    /// ```
    /// use http::StatusCode;
    /// use sluicegate::adapters::server::ServerLayer;
    /// use sluicegate::RateLimiter;
    /// let layer = ServerLayer::new(RateLimiter::bursty(10.0).unwrap()).never_status(StatusCode::PAYLOAD_TOO_LARGE);
    /// ```
    pub fn never_status(mut self, status: StatusCode) -> Self {
        Arc::make_mut(&mut self.config).never_status = status;
        self
    }

    /// Lets requests through, uncounted and without fields, when the limiter fails
    /// (a remote store is unreachable); by default they are answered `503`.
    ///
    /// ```
    /// use sluicegate::adapters::server::ServerLayer;
    /// use sluicegate::RateLimiter;
    /// let layer = ServerLayer::new(RateLimiter::bursty(10.0).unwrap()).fail_open(true);
    /// ```
    pub fn fail_open(mut self, open: bool) -> Self {
        Arc::make_mut(&mut self.config).fail_open = open;
        self
    }

    /// Holds a refused request back for its permits, for at most `max`, instead of
    /// refusing it: nginx's `limit_req` with a `burst` and without `nodelay`. The
    /// request waits in its response future (the limiter's async acquire,
    /// [`Permits::acquire`], on the limiter's clock; no thread blocks) and then
    /// reaches the inner service, so the limit shapes traffic instead of cutting
    /// it: over a [`LeakyBucket::queue`](crate::algorithms::LeakyBucket::queue)
    /// with room, requests leave one interval apart, in the order they came.
    ///
    /// * A request the limiter lets through at once is answered as without a delay,
    ///   fields and all.
    /// * One that has to wait and can within `max` is let through once its permits
    ///   are granted; its response carries `RateLimit-Policy` but no `RateLimit`
    ///   item (what stood when it arrived is stale once it is sent) and no legacy
    ///   fields.
    /// * One whose wait, as the limiter stands when it arrives, would exceed `max`
    ///   is refused at once, consuming nothing, with `429` and the fields of a
    ///   refusal (its `Retry-After` says when a request would pass without
    ///   waiting).
    /// * Held requests compete for turns the limiter cannot book: a full queue's
    ///   slots, a window counter's next window. One whose turn another took
    ///   sleeps until the next and asks again, and is refused with `429` when
    ///   `max` has passed without one. No request is held longer than `max`.
    /// * A cost above capacity is answered as without a delay; a zero `max` holds
    ///   nothing back.
    ///
    /// Dropping the response future while it waits (the client went away) gives
    /// the permits back. The readied inner service waits with the request (tower's
    /// pattern for a call made later), so a concurrency limit inside this layer
    /// counts held requests. Waiters that sleep and ask again (above) may see a
    /// newcomer pass first (see the [adapters docs](crate::adapters)).
    ///
    /// ```
    /// use http::{Request, Response, StatusCode};
    /// use sluicegate::adapters::server::ServerLayer;
    /// use sluicegate::algorithms::LeakyBucket;
    /// use sluicegate::clock::{Clock, ManualClock};
    /// use sluicegate::RateLimiter;
    /// use std::time::Duration;
    /// use tower::{service_fn, Layer, ServiceExt};
    ///
    /// // 2 per second, at most 4 queued: requests leave 500 ms apart.
    /// let clock = ManualClock::new();
    /// let queue = RateLimiter::with_clock(LeakyBucket::queue(4, 2, Duration::from_secs(1)).unwrap(), clock.clone());
    /// let app = service_fn(|_: Request<()>| async { Ok::<_, std::convert::Infallible>(Response::new(())) });
    /// let server = ServerLayer::new(queue).delay_up_to(Duration::from_secs(1)).layer(app);
    /// let mut sent = Vec::new();
    /// futures::executor::block_on(async {
    ///     for _ in 0..4 {
    ///         let response = server.clone().oneshot(Request::new(())).await.unwrap();
    ///         sent.push((response.status().as_u16(), clock.now() / 1_000_000));
    ///     }
    /// });
    /// // None refused: each waited its turn, 500 ms after the one before (under a
    /// // manual clock a wait moves virtual time at once).
    /// assert_eq!(sent, [(200, 0), (200, 500), (200, 1000), (200, 1500)]);
    /// ```
    pub fn delay_up_to(mut self, max: Duration) -> Self {
        Arc::make_mut(&mut self.config).delay = (!max.is_zero()).then_some(max);
        self
    }

    /// Sends the partition key `pk` on every `RateLimit` item: 8 bytes (an
    /// sf-binary, `pk=:…:`) that are the SipHash-2-4 of the request's limiter key
    /// under the 128-bit `secret`, never the key itself. A client can tell by it
    /// which of its requests share a quota, without learning what the key is (an
    /// IP, a user id, a token). The same secret gives the same value for a key in
    /// every process and release, so keep it fixed (and secret) across a
    /// service's replicas; the key is hashed as its `Hash` implementation writes it,
    /// integers in little-endian on every platform. `RateLimit-Policy` carries no
    /// `pk`: the draft asks that it stay the same from response to response.
    ///
    /// ```
    /// use http::{Request, Response};
    /// use sluicegate::adapters::server::ServerLayer;
    /// use sluicegate::{algorithms::FixedWindow, KeyedRateLimiter};
    /// use std::time::Duration;
    /// use tower::{service_fn, Layer, ServiceExt};
    /// let limiter = KeyedRateLimiter::new(FixedWindow::new(10, Duration::from_secs(60)).unwrap());
    /// let app = service_fn(|_: Request<()>| async { Ok::<_, std::convert::Infallible>(Response::new(())) });
    /// let server = ServerLayer::keyed(limiter, |_: &Request<()>| "user-42".to_owned())
    ///     .partition_keys(*b"a secret of 16 b")
    ///     .layer(app);
    /// let response = futures::executor::block_on(server.oneshot(Request::new(()))).unwrap();
    /// let item = response.headers()["ratelimit"].to_str().unwrap().to_owned();
    /// assert!(item.contains(";pk=:") && !item.contains("user-42"));
    /// ```
    pub fn partition_keys(mut self, secret: [u8; 16]) -> Self
    where
        P::Key: Hash,
    {
        self.partition = Some(Partition::new(secret));
        self
    }
}

impl<S, P: Permits, W: Clone> Layer<S> for ServerLayer<P, W> {
    type Service = Server<S, P, W>;

    fn layer(&self, inner: S) -> Self::Service {
        Server {
            inner,
            permits: self.permits.clone(),
            weigher: self.weigher.clone(),
            config: self.config.clone(),
            partition: self.partition.clone(),
        }
    }
}
