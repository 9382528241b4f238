//! The client layer: configuration, and `Layer` to wrap a service.

use super::service::{Client, HttpResponses, Unobserved};
use crate::adapters::{Each, HoldBack, Jitter, Permits};
use std::time::Duration;
use tower_layer::Layer;

/// A tower [`Layer`] that makes every request wait for its permits before it is
/// sent: the outbound half of rate limiting (a crawler, a webhook sender, a client
/// of a rate-limited API). See the [module docs](super) for the whole path of a
/// request.
///
/// Built from any [`Permits`] (a direct or keyed limiter, any algorithm, set and
/// store, memory or remote): [`new`](ClientLayer::new) charges one permit of a
/// direct limiter per request; [`with_weigher`](ClientLayer::with_weigher) takes the key
/// and cost from the request (per host, per route, heavier writes). Options:
/// [`with_max_wait`](ClientLayer::with_max_wait) (fail fast instead of waiting
/// longer), [`with_jitter`](ClientLayer::with_jitter) (spread callers that woke
/// together) and [`honour_server`](ClientLayer::honour_server) (hold a key back
/// after a `429`/`503` with `Retry-After` or `RateLimit` fields).
///
/// The layer and every service it makes share the one limiter, jitter sequence and
/// back-off: clone them freely.
///
/// ```
/// use sluicegate::adapters::client::ClientLayer;
/// use sluicegate::clock::{Clock, ManualClock};
/// use sluicegate::RateLimiter;
/// use tower::{service_fn, Layer, ServiceExt};
///
/// let clock = ManualClock::new();
/// let limiter = RateLimiter::bursty_with_clock(2.0, clock.clone()).unwrap();
/// let inner = service_fn(|n: u32| async move { Ok::<_, std::convert::Infallible>(n * 10) });
/// let client = ClientLayer::new(limiter).layer(inner);
/// let sent_at: Vec<(u32, u64)> = futures::executor::block_on(async {
///     let mut out = Vec::new();
///     for n in 0..3 {
///         let answer = client.clone().oneshot(n).await.unwrap();
///         out.push((answer, clock.now() / 1_000_000));
///     }
///     out
/// });
/// assert_eq!(sent_at, [(0, 0), (10, 500), (20, 1000)]); // 2 per second
/// ```
#[derive(Clone, Debug)]
pub struct ClientLayer<P: Permits, W = Each, R = Unobserved> {
    permits: P,
    weigher: W,
    max_wait: Option<Duration>,
    jitter: Option<Jitter>,
    hold: Option<HoldBack<P::Key, P::Clock>>,
    read: R,
}

impl<P: Permits<Key = ()>> ClientLayer<P, Each, Unobserved> {
    /// One permit of the direct limiter `permits` per request.
    ///
    /// ```
    /// use sluicegate::adapters::client::ClientLayer;
    /// use sluicegate::RateLimiter;
    /// let layer = ClientLayer::new(RateLimiter::bursty(10.0).unwrap());
    /// ```
    pub fn new(permits: P) -> Self {
        ClientLayer::with_weigher(permits, Each)
    }
}

impl<P: Permits, W> ClientLayer<P, W, Unobserved> {
    /// Charges each request what `weigher` says: a [`Weighed`](crate::adapters::Weighed)
    /// cost from a direct limiter, or a closure `|request| (key, cost)` for a keyed one.
    ///
    /// ```
    /// use sluicegate::adapters::client::ClientLayer;
    /// use sluicegate::{algorithms::SmoothBursty, KeyedRateLimiter};
    /// let per_host = KeyedRateLimiter::<String, SmoothBursty>::bursty(5.0).unwrap();
    /// let layer = ClientLayer::with_weigher(per_host, |request: &http::Request<()>| {
    ///     let host = request.uri().host().unwrap_or_default().to_owned();
    ///     let cost = if request.method() == http::Method::POST { 2 } else { 1 };
    ///     (host, cost)
    /// });
    /// ```
    pub fn with_weigher(permits: P, weigher: W) -> Self {
        ClientLayer {
            permits,
            weigher,
            max_wait: None,
            jitter: None,
            hold: None,
            read: Unobserved,
        }
    }
}

impl<P: Permits, W, R> ClientLayer<P, W, R> {
    /// A request that would wait longer than `max_wait` (held back by the server and
    /// waiting for permits together) fails at once with
    /// [`ClientError::Throttled`](super::ClientError)`(`[`Error::Timeout`](crate::Error::Timeout)`)`,
    /// unsent, consuming nothing.
    ///
    /// ```
    /// use sluicegate::adapters::client::{ClientError, ClientLayer};
    /// use sluicegate::{clock::ManualClock, Error, RateLimiter};
    /// use std::time::Duration;
    /// use tower::{service_fn, Layer, ServiceExt};
    /// let limiter = RateLimiter::bursty_with_clock(1.0, ManualClock::new()).unwrap();
    /// let inner = service_fn(|()| async { Ok::<_, std::convert::Infallible>(()) });
    /// let client = ClientLayer::new(limiter).with_max_wait(Duration::from_millis(100)).layer(inner);
    /// futures::executor::block_on(async {
    ///     client.clone().oneshot(()).await.unwrap();
    ///     let late = client.clone().oneshot(()).await;
    ///     assert!(matches!(late, Err(ClientError::Throttled(Error::Timeout { .. }))));
    /// });
    /// ```
    pub fn with_max_wait(mut self, max_wait: Duration) -> Self {
        self.max_wait = Some(max_wait);
        self
    }

    /// Adds a [`Jitter`] delay to every request that had to wait (not to one that
    /// went at once), after its wait: callers that woke together spread out.
    ///
    /// ```
    /// use sluicegate::adapters::{client::ClientLayer, Jitter};
    /// use sluicegate::RateLimiter;
    /// use std::time::Duration;
    /// let layer = ClientLayer::new(RateLimiter::bursty(10.0).unwrap())
    ///     .with_jitter(Jitter::new(Duration::from_millis(20), 7));
    /// ```
    pub fn with_jitter(mut self, jitter: Jitter) -> Self {
        self.jitter = Some(jitter);
        self
    }

    /// Honours the server: every `http::Response` is read by `hold`
    /// ([`HoldBack::observe`]) and a key the server asked to pause waits it out
    /// before its next request. Use
    /// [`honour_server_with`](ClientLayer::honour_server_with) for other response
    /// types (reqwest's).
    ///
    /// ```
    /// use sluicegate::adapters::{client::ClientLayer, HoldBack};
    /// use sluicegate::{clock::ManualClock, RateLimiter};
    /// let clock = ManualClock::new();
    /// let limiter = RateLimiter::bursty_with_clock(10.0, clock.clone()).unwrap();
    /// let layer = ClientLayer::new(limiter).honour_server(HoldBack::new(clock));
    /// ```
    pub fn honour_server(
        self,
        hold: HoldBack<P::Key, P::Clock>,
    ) -> ClientLayer<P, W, HttpResponses> {
        self.reading(hold, HttpResponses)
    }

    /// [`honour_server`](ClientLayer::honour_server) for any response type, read by
    /// `read`, a closure from the response to its status and headers, e.g.
    /// `|r: &reqwest::Response| (r.status(), r.headers())`.
    ///
    /// ```
    /// use http::{HeaderMap, StatusCode};
    /// use sluicegate::adapters::{client::ClientLayer, HoldBack};
    /// use sluicegate::{clock::ManualClock, RateLimiter};
    /// struct MyResponse { status: StatusCode, headers: HeaderMap }
    /// let clock = ManualClock::new();
    /// let limiter = RateLimiter::bursty_with_clock(10.0, clock.clone()).unwrap();
    /// let layer = ClientLayer::new(limiter)
    ///     .honour_server_with(HoldBack::new(clock), |r: &MyResponse| (r.status, &r.headers));
    /// ```
    pub fn honour_server_with<T, F>(
        self,
        hold: HoldBack<P::Key, P::Clock>,
        read: F,
    ) -> ClientLayer<P, W, F>
    where
        F: for<'a> Fn(&'a T) -> (http::StatusCode, &'a http::HeaderMap),
    {
        self.reading(hold, read)
    }

    fn reading<R2>(self, hold: HoldBack<P::Key, P::Clock>, read: R2) -> ClientLayer<P, W, R2> {
        ClientLayer {
            permits: self.permits,
            weigher: self.weigher,
            max_wait: self.max_wait,
            jitter: self.jitter,
            hold: Some(hold),
            read,
        }
    }

    /// The limiter.
    ///
    /// ```
    /// use sluicegate::adapters::client::ClientLayer;
    /// use sluicegate::RateLimiter;
    /// let layer = ClientLayer::new(RateLimiter::bursty(10.0).unwrap());
    /// assert!(layer.permits().try_acquire());
    /// ```
    pub fn permits(&self) -> &P {
        &self.permits
    }
}

impl<S, P: Permits, W: Clone, R: Clone> Layer<S> for ClientLayer<P, W, R> {
    type Service = Client<S, P, W, R>;

    fn layer(&self, inner: S) -> Self::Service {
        Client {
            inner,
            permits: self.permits.clone(),
            weigher: self.weigher.clone(),
            max_wait: self.max_wait,
            jitter: self.jitter.clone(),
            hold: self.hold.clone(),
            read: self.read.clone(),
        }
    }
}
