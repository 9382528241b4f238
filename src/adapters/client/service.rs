//! The client service: wraps an inner service, waits in the response future.

use super::future::ResponseFuture;
use crate::adapters::{HoldBack, Jitter, Permits, Weigh};
use http::{HeaderMap, StatusCode};
use std::hash::Hash;
use std::task::{Context, Poll};
use std::time::Duration;
use tower_service::Service;

/// Reads the status and headers of a response, for the back-off to observe:
/// [`HttpResponses`] for `http::Response<B>`, [`Unobserved`] for any response (no
/// back-off), and any closure `|response: &T| (status, &headers)` given to
/// [`honour_server_with`](super::ClientLayer::honour_server_with). Crate-private:
/// those three are every reader a client needs.
pub(crate) trait ReadResponse<T> {
    /// The response's status and headers, or `None` to observe nothing.
    fn read<'a>(&self, response: &'a T) -> Option<(StatusCode, &'a HeaderMap)>;
}

/// Observes nothing: the reader of a [`ClientLayer`](super::ClientLayer) that does
/// not honour the server (the default), so no response holds a key back.
///
/// ```
/// use sluicegate::adapters::client::{ClientLayer, Unobserved};
/// use sluicegate::adapters::Each;
/// use sluicegate::RateLimiter;
/// let layer: ClientLayer<_, Each, Unobserved> = ClientLayer::new(RateLimiter::bursty(10.0).unwrap());
/// ```
#[derive(Clone, Copy, Debug, Default)]
pub struct Unobserved;

impl<T> ReadResponse<T> for Unobserved {
    fn read<'a>(&self, _response: &'a T) -> Option<(StatusCode, &'a HeaderMap)> {
        None
    }
}

/// Reads `http::Response<B>` (hyper, axum, most tower stacks): the reader of a
/// [`ClientLayer`](super::ClientLayer) that
/// [honours the server](super::ClientLayer::honour_server).
///
/// ```
/// use sluicegate::adapters::client::{ClientLayer, HttpResponses};
/// use sluicegate::adapters::{Each, HoldBack};
/// use sluicegate::{clock::ManualClock, RateLimiter};
/// let clock = ManualClock::new();
/// let limiter = RateLimiter::bursty_with_clock(10.0, clock.clone()).unwrap();
/// let layer: ClientLayer<_, Each, HttpResponses> =
///     ClientLayer::new(limiter).honour_server(HoldBack::new(clock));
/// ```
#[derive(Clone, Copy, Debug, Default)]
pub struct HttpResponses;

impl<B> ReadResponse<http::Response<B>> for HttpResponses {
    fn read<'a>(&self, response: &'a http::Response<B>) -> Option<(StatusCode, &'a HeaderMap)> {
        Some((response.status(), response.headers()))
    }
}

impl<T, F> ReadResponse<T> for F
where
    F: for<'a> Fn(&'a T) -> (StatusCode, &'a HeaderMap),
{
    fn read<'a>(&self, response: &'a T) -> Option<(StatusCode, &'a HeaderMap)> {
        Some(self(response))
    }
}

/// The service of a [`ClientLayer`](super::ClientLayer): each request waits for its
/// permits, then goes to the inner service. See the [module docs](super).
///
/// Cloning is cheap when the inner service's is; clones share the limiter, the
/// jitter sequence and the back-off holds. It is always ready (`poll_ready` answers
/// at once): the wait is in the [`ResponseFuture`], which readies its own clone of
/// the inner service, so `call` needs no `poll_ready` first.
///
/// ```
/// use sluicegate::adapters::client::{Client, ClientLayer};
/// use sluicegate::adapters::Each;
/// use sluicegate::algorithms::FixedWindow;
/// use sluicegate::clock::{Clock, ManualClock};
/// use sluicegate::RateLimiter;
/// use std::time::Duration;
/// use tower::{service_fn, Layer, Service};
///
/// let clock = ManualClock::new();
/// let window = FixedWindow::new(2, Duration::from_secs(1)).unwrap();
/// let limiter = RateLimiter::with_clock(window, clock.clone());
/// let inner = service_fn(|n: u32| async move { Ok::<_, std::convert::Infallible>(n + 1) });
/// let mut a: Client<_, _, Each, _> = ClientLayer::new(limiter).layer(inner);
/// let mut b = a.clone();
/// futures::executor::block_on(async {
///     assert_eq!(a.call(1).await.unwrap(), 2);
///     assert_eq!(b.call(2).await.unwrap(), 3);
///     // The clones share one window of 2: the third request waits for the next.
///     assert_eq!(a.call(3).await.unwrap(), 4);
/// });
/// assert_eq!(clock.now(), 1_000_000_000);
/// ```
#[derive(Clone, Debug)]
pub struct Client<S, P: Permits, W, R> {
    pub(super) inner: S,
    pub(super) permits: P,
    pub(super) weigher: W,
    pub(super) max_wait: Option<Duration>,
    pub(super) jitter: Option<Jitter>,
    pub(super) hold: Option<HoldBack<P::Key, P::Clock>>,
    pub(super) read: R,
}

impl<S, P: Permits, W, R> Client<S, P, W, R> {
    /// The inner service. A request sent to it directly (a clone of it) goes
    /// around the limiter: it waits for nothing and takes no permits.
    ///
    /// ```
    /// use sluicegate::adapters::client::ClientLayer;
    /// use sluicegate::algorithms::FixedWindow;
    /// use sluicegate::{clock::ManualClock, RateLimiter};
    /// use std::time::Duration;
    /// use tower::{service_fn, Layer, ServiceExt};
    ///
    /// let window = FixedWindow::new(1, Duration::from_secs(60)).unwrap();
    /// let limiter = RateLimiter::with_clock(window, ManualClock::new());
    /// let inner = service_fn(|n: u32| async move { Ok::<_, std::convert::Infallible>(n * 10) });
    /// let client = ClientLayer::new(limiter.clone()).layer(inner);
    /// let direct = futures::executor::block_on(client.get_ref().clone().oneshot(4));
    /// assert_eq!(direct.unwrap(), 40);
    /// assert!(limiter.peek(1).unwrap().is_allowed()); // the permit is still there
    /// ```
    pub fn get_ref(&self) -> &S {
        &self.inner
    }

    /// The limiter: a handle sharing its state with the layer's and every clone's,
    /// so what the requests took shows in it.
    ///
    /// ```
    /// use sluicegate::adapters::client::ClientLayer;
    /// use sluicegate::algorithms::FixedWindow;
    /// use sluicegate::{clock::ManualClock, RateLimiter};
    /// use std::time::Duration;
    /// use tower::{service_fn, Layer, ServiceExt};
    ///
    /// let window = FixedWindow::new(3, Duration::from_secs(60)).unwrap();
    /// let limiter = RateLimiter::with_clock(window, ManualClock::new());
    /// let inner = service_fn(|()| async { Ok::<_, std::convert::Infallible>(()) });
    /// let client = ClientLayer::new(limiter).layer(inner);
    /// futures::executor::block_on(client.clone().oneshot(())).unwrap();
    /// // 2 of the window's 3 permits are left.
    /// assert!(client.permits().peek(2).unwrap().is_allowed());
    /// assert!(!client.permits().peek(3).unwrap().is_allowed());
    /// ```
    pub fn permits(&self) -> &P {
        &self.permits
    }
}

impl<S, Req, P, W, R> Service<Req> for Client<S, P, W, R>
where
    S: Service<Req> + Clone,
    P: Permits,
    P::Key: Clone + Hash + Eq,
    W: Weigh<Req, P::Key>,
    R: ReadResponse<S::Response> + Clone,
{
    type Response = S::Response;
    type Error = super::ClientError<S::Error>;
    type Future = ResponseFuture<S, Req, P, R>;

    /// Always ready: the response future waits for the permits and then readies its
    /// own clone of the inner service, so calling without `poll_ready` is fine too.
    fn poll_ready(&mut self, _cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, request: Req) -> Self::Future {
        let (key, cost) = self.weigher.weigh(&request);
        // The future readies and calls its own clone; `self.inner` stays as it was.
        let service = self.inner.clone();
        ResponseFuture::new(
            service,
            request,
            key,
            cost,
            self.permits.clone(),
            self.max_wait,
            self.jitter.clone(),
            self.hold.clone(),
            self.read.clone(),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::{HttpResponses, ReadResponse, Unobserved};
    use http::{Response, StatusCode};

    #[test]
    fn each_reader_reads_what_it_says() {
        let response = Response::builder()
            .status(429)
            .header("retry-after", "3")
            .body(())
            .unwrap();
        let (status, headers) = HttpResponses.read(&response).unwrap();
        assert_eq!((status, headers.len()), (StatusCode::TOO_MANY_REQUESTS, 1));
        assert!(Unobserved.read(&response).is_none());
        assert!(Unobserved.read(&"anything").is_none());
    }
}
