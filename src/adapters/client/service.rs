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
/// jitter sequence and the back-off holds.
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
    /// The inner service.
    pub fn get_ref(&self) -> &S {
        &self.inner
    }

    /// The limiter.
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
