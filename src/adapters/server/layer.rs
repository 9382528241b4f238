//! The server layer: configuration, and `Layer` to wrap a service.

use super::headers::RateLimitHeaders;
use super::service::{Config, Server};
use crate::adapters::{Each, Permits};
use http::StatusCode;
use std::sync::Arc;
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
/// let server = ServerLayer::with_meter(limiter, |r: &Request<()>| {
///     (r.headers().get("x-client").and_then(|v| v.to_str().ok()).unwrap_or("anon").to_owned(), 1)
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
#[derive(Clone, Debug)]
pub struct ServerLayer<P, M = Each> {
    permits: P,
    meter: M,
    config: Arc<Config>,
}

impl<P: Permits<Key = ()>> ServerLayer<P, Each> {
    /// One permit of the direct limiter `permits` per request: one limit for the
    /// whole service.
    ///
    /// ```
    /// use sluicegate::adapters::server::ServerLayer;
    /// use sluicegate::RateLimiter;
    /// let layer = ServerLayer::new(RateLimiter::bursty(100.0).unwrap());
    /// ```
    pub fn new(permits: P) -> Self {
        ServerLayer::with_meter(permits, Each)
    }
}

impl<P: Permits, M> ServerLayer<P, M> {
    /// Charges each request what `meter` says: a closure `|request| (key, cost)` for
    /// a keyed limiter (the key from the peer address, a token, the path...), or a
    /// [`Weighed`](crate::adapters::Weighed) cost for a direct one.
    ///
    /// ```
    /// use sluicegate::adapters::server::ServerLayer;
    /// use sluicegate::{algorithms::SmoothBursty, KeyedRateLimiter};
    /// // Per path; writes cost twice what reads do.
    /// let limiter = KeyedRateLimiter::<String, SmoothBursty>::bursty(10.0).unwrap();
    /// let layer = ServerLayer::with_meter(limiter, |r: &http::Request<()>| {
    ///     (r.uri().path().to_owned(), if r.method() == http::Method::POST { 2 } else { 1 })
    /// });
    /// ```
    pub fn with_meter(permits: P, meter: M) -> Self {
        ServerLayer {
            permits,
            meter,
            config: Arc::new(Config {
                headers: RateLimitHeaders::new(),
                never_status: StatusCode::PAYLOAD_TOO_LARGE,
                fail_open: false,
            }),
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
    /// `413 Content Too Large`; see the [module docs](super)).
    ///
    /// ```
    /// use http::StatusCode;
    /// use sluicegate::adapters::server::ServerLayer;
    /// use sluicegate::RateLimiter;
    /// let layer = ServerLayer::new(RateLimiter::bursty(10.0).unwrap()).never_status(StatusCode::BAD_REQUEST);
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
}

impl<S, P: Permits, M: Clone> Layer<S> for ServerLayer<P, M> {
    type Service = Server<S, P, M>;

    fn layer(&self, inner: S) -> Self::Service {
        Server {
            inner,
            permits: self.permits.clone(),
            meter: self.meter.clone(),
            config: self.config.clone(),
        }
    }
}
