//! The client's response future: held back, acquire, jitter, ready, call, observe.

use super::service::ReadResponse;
use crate::adapters::{Acquiring, HoldBack, Jitter, Permits};
use crate::clock::{duration_to_nanos, nanos_to_duration, Clock, Nanos};
use crate::error::Error;
use pin_project_lite::pin_project;
use std::fmt;
use std::future::Future;
use std::hash::Hash;
use std::pin::Pin;
use std::task::{ready, Context, Poll};
use std::time::Duration;
use tower_service::Service;

/// The error of a [`Client`](super::Client): the limiter refused the request
/// (never sent), or the inner service failed.
///
/// ```
/// use sluicegate::adapters::client::ClientError;
/// use sluicegate::Error;
/// use std::time::Duration;
/// let e: ClientError<std::io::Error> = ClientError::Throttled(Error::Timeout { needed: Duration::from_secs(2) });
/// assert_eq!(e.to_string(), "request not sent: could not acquire within the timeout: would have needed 2s");
/// ```
#[derive(Debug)]
pub enum ClientError<E> {
    /// Not sent: the wait would pass the maximum ([`Error::Timeout`]), the cost can
    /// never be granted ([`Error::Never`]), a cost of 0, or a store's error.
    Throttled(Error),
    /// The inner service's error.
    Service(E),
}

impl<E: fmt::Display> fmt::Display for ClientError<E> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ClientError::Throttled(error) => write!(f, "request not sent: {error}"),
            ClientError::Service(error) => error.fmt(f),
        }
    }
}

impl<E: std::error::Error + 'static> std::error::Error for ClientError<E> {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            ClientError::Throttled(error) => Some(error),
            ClientError::Service(error) => Some(error),
        }
    }
}

pin_project! {
    #[project = StateProj]
    enum State<F, Sleep> {
        Start,
        Held { #[pin] sleep: Sleep },
        Acquiring { waiting: Acquiring },
        Jitter { #[pin] sleep: Sleep },
        Ready,
        Calling { #[pin] future: F },
        Done,
    }
}

pin_project! {
    /// The future of [`Client::call`](super::Client): waits out a server's hold on
    /// the key (and any longer hold another response set meanwhile), then for the
    /// permits (at most the maximum wait, both together), then
    /// the jitter if it had to wait at all; then readies and calls its clone of the
    /// inner service, and lets the back-off read the response.
    ///
    /// Dropped while waiting for its permits, it gives them back. Jitter is not
    /// counted against the maximum wait.
    #[must_use = "futures do nothing unless polled"]
    #[project = ResponseFutureProj]
    pub struct ResponseFuture<S, Req, P, R>
    where
        S: Service<Req>,
        P: Permits,
    {
        #[pin]
        state: State<S::Future, <P::Clock as Clock>::Sleep>,
        service: S,
        request: Option<Req>,
        key: Option<P::Key>,
        cost: u64,
        permits: P,
        max_wait: Option<Duration>,
        jitter: Option<Jitter>,
        hold: Option<HoldBack<P::Key, P::Clock>>,
        read: R,
        // Time spent held back and waiting for permits so far.
        waited: Nanos,
    }
}

impl<S, Req, P, R> ResponseFuture<S, Req, P, R>
where
    S: Service<Req>,
    P: Permits,
{
    #[allow(clippy::too_many_arguments)] // built in one place, by Client::call
    pub(super) fn new(
        service: S,
        request: Req,
        key: P::Key,
        cost: u64,
        permits: P,
        max_wait: Option<Duration>,
        jitter: Option<Jitter>,
        hold: Option<HoldBack<P::Key, P::Clock>>,
        read: R,
    ) -> Self {
        ResponseFuture {
            state: State::Start,
            service,
            request: Some(request),
            key: Some(key),
            cost,
            permits,
            max_wait,
            jitter,
            hold,
            read,
            waited: 0,
        }
    }
}

impl<S, Req, P, R> Future for ResponseFuture<S, Req, P, R>
where
    S: Service<Req>,
    P: Permits,
    P::Key: Clone + Hash + Eq,
    R: ReadResponse<S::Response>,
{
    type Output = Result<S::Response, ClientError<S::Error>>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        loop {
            let mut this = self.as_mut().project();
            match this.state.as_mut().project() {
                StateProj::Start => {
                    let held = match (this.hold.as_ref(), this.key.as_ref()) {
                        (Some(hold), Some(key)) => {
                            hold.remaining_nanos(key, this.permits.clock().now())
                        }
                        _ => 0,
                    };
                    if held == 0 {
                        // Allowed at once by a local limiter: no wait to set up.
                        let now = match this.key.as_ref() {
                            Some(key) => this.permits.try_now(key, *this.cost),
                            None => None,
                        };
                        if now == Some(true) {
                            this.state.set(State::Ready);
                            continue;
                        }
                        let waiting = start_acquire(&mut this);
                        this.state.set(State::Acquiring { waiting });
                        continue;
                    }
                    let total = this.waited.saturating_add(held);
                    if this
                        .max_wait
                        .is_some_and(|max| duration_to_nanos(max) < total)
                    {
                        this.state.set(State::Done);
                        let needed = nanos_to_duration(total);
                        return Poll::Ready(Err(ClientError::Throttled(Error::Timeout { needed })));
                    }
                    *this.waited = total;
                    let sleep = this.permits.clock().sleep_async(nanos_to_duration(held));
                    this.state.set(State::Held { sleep });
                }
                StateProj::Held { sleep } => {
                    ready!(sleep.poll(cx));
                    // Look again: another response may have lengthened the hold.
                    this.state.set(State::Start);
                }
                StateProj::Acquiring { waiting } => {
                    let granted = ready!(waiting.as_mut().poll(cx));
                    match granted {
                        Err(error) => {
                            this.state.set(State::Done);
                            return Poll::Ready(Err(ClientError::Throttled(error)));
                        }
                        Ok(waited) => {
                            *this.waited = this.waited.saturating_add(duration_to_nanos(waited));
                        }
                    }
                    // Only a caller that had to wait can have woken with others.
                    let extra = match this.jitter.as_ref() {
                        Some(jitter) if *this.waited > 0 => jitter.draw_nanos(),
                        _ => 0,
                    };
                    if extra == 0 {
                        this.state.set(State::Ready);
                    } else {
                        let sleep = this.permits.clock().sleep_async(nanos_to_duration(extra));
                        this.state.set(State::Jitter { sleep });
                    }
                }
                StateProj::Jitter { sleep } => {
                    ready!(sleep.poll(cx));
                    this.state.set(State::Ready);
                }
                StateProj::Ready => {
                    if let Err(error) = ready!(this.service.poll_ready(cx)) {
                        this.state.set(State::Done);
                        return Poll::Ready(Err(ClientError::Service(error)));
                    }
                    let Some(request) = this.request.take() else {
                        this.state.set(State::Done);
                        continue;
                    };
                    let future = this.service.call(request);
                    this.state.set(State::Calling { future });
                }
                StateProj::Calling { future } => {
                    let outcome = ready!(future.poll(cx));
                    this.state.set(State::Done);
                    let response = outcome.map_err(ClientError::Service)?;
                    if let (Some(hold), Some(key)) = (this.hold.as_ref(), this.key.take()) {
                        if let Some((status, headers)) = this.read.read(&response) {
                            hold.observe(key, status, headers);
                        }
                    }
                    return Poll::Ready(Ok(response));
                }
                StateProj::Done => {
                    // Polled after completion (or a lost request): nothing more to do.
                    return Poll::Pending;
                }
            }
        }
    }
}

/// Starts the limiter's acquire with what is left of the maximum wait after the
/// hold. The key is kept (cloned) only when the back-off needs it afterwards.
fn start_acquire<S, Req, P, R>(this: &mut ResponseFutureProj<'_, S, Req, P, R>) -> Acquiring
where
    S: Service<Req>,
    P: Permits,
    P::Key: Clone,
{
    let key = if this.hold.is_some() {
        this.key.clone()
    } else {
        this.key.take()
    };
    let left = this
        .max_wait
        .map(|max| max.saturating_sub(nanos_to_duration(*this.waited)));
    match key {
        Some(key) => this.permits.acquire(key, *this.cost, left),
        // Unreachable: the key is taken only here or after the response.
        None => Box::pin(std::future::ready(Err(Error::ZeroCost))),
    }
}
