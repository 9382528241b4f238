//! The client's response future: held back, acquire, jitter, ready, call, observe.

use super::service::ReadResponse;
use crate::adapters::backoff::{Gate, Turn};
use crate::adapters::{Acquiring, HoldBack, Jitter, Permits};
use crate::clock::{duration_to_nanos, nanos_to_duration, Clock, Nanos};
use crate::error::Error;
use pin_project_lite::pin_project;
use std::fmt;
use std::future::Future;
use std::hash::Hash;
use std::pin::Pin;
use std::task::{ready, Context, Poll};
use std::time::{Duration, SystemTime};
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
    /// never be granted ([`Error::Never`]), or a store's error.
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
        Paced { #[pin] sleep: Sleep },
        Acquiring { waiting: Acquiring },
        Jitter { #[pin] sleep: Sleep },
        Ready,
        Calling { #[pin] future: F },
        Done,
    }
}

pin_project! {
    /// The future of [`Client::call`](super::Client): waits until the request may
    /// go, then readies and calls its clone of the inner service, and lets the
    /// back-off read the response.
    ///
    /// A request goes only when both its permits and every hold of its key allow it: it
    /// waits out a server's hold on the key (and any longer hold another response sets
    /// meanwhile), then its turn at the limiter's steady pace if the key was held
    /// ([`HoldBack`]), then its permits; a hold that began before it is sent (while it
    /// waited for its permits, its jitter or the inner service's readiness) sends it
    /// back to wait the hold out and take fresh permits after it, dropping the clone of
    /// the inner service readied for it. All of this counts against the maximum wait;
    /// the jitter (only after a wait) does not. A cost of 0 is free: it honours the
    /// holds but takes no permits and no turn.
    ///
    /// Dropped while waiting for its permits, it gives them back. Dropped while
    /// waiting for its turn after a hold, it gives the turn back: if no later turn
    /// is booked, the key's pace resumes from it (and from any turn given back just
    /// before it), so the next request goes as if the dropped ones had never
    /// asked; otherwise the next request whose turn fits in it takes it. A turn is
    /// never shared: requests still go at most one per turn.
    ///
    /// Nothing happens until it is polled: `call` only weighs the request and
    /// clones the inner service, and a future dropped unpolled takes nothing.
    ///
    /// ```
    /// use http::{Request, Response};
    /// use sluicegate::adapters::client::{ClientLayer, ResponseFuture};
    /// use sluicegate::adapters::HoldBack;
    /// use sluicegate::algorithms::FixedWindow;
    /// use sluicegate::clock::{Clock, ManualClock};
    /// use sluicegate::RateLimiter;
    /// use std::time::Duration;
    /// use tower::{service_fn, Layer, Service};
    ///
    /// let clock = ManualClock::new();
    /// let window = FixedWindow::new(10, Duration::from_secs(1)).unwrap();
    /// let limiter = RateLimiter::with_clock(window, clock.clone());
    /// // The server asks for a 2 s pause on every answer.
    /// let inner = service_fn(|_: Request<()>| async {
    ///     let response = Response::builder().status(429).header("retry-after", "2").body(());
    ///     Ok::<_, http::Error>(response?)
    /// });
    /// let mut client = ClientLayer::new(limiter.clone())
    ///     .honour_server(HoldBack::new(clock.clone()))
    ///     .layer(inner);
    /// let first: ResponseFuture<_, Request<()>, _, _> = client.call(Request::new(()));
    /// drop(client.call(Request::new(()))); // never polled: took nothing
    /// assert!(limiter.peek(10).unwrap().is_allowed());
    /// let answer = futures::executor::block_on(first).unwrap();
    /// assert_eq!(answer.status(), 429);
    /// assert_eq!(clock.now(), 0); // sent at once
    /// // The next request waits the server's pause out before it is sent.
    /// futures::executor::block_on(client.call(Request::new(()))).unwrap();
    /// assert_eq!(clock.now(), 2_000_000_000);
    /// ```
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
        // The turn after a hold this request waits for, if it waits for one: kept
        // out of `state`, whose every change would otherwise check for it.
        turn: Option<Turn>,
        read: R,
        // Time spent held back, paced and waiting for permits so far.
        waited: Nanos,
        // The inner service was not ready at a poll since the holds were last read.
        unready: bool,
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
            turn: None,
            read,
            waited: 0,
            unready: false,
        }
    }
}

impl<S, Req, P, R> Future for ResponseFuture<S, Req, P, R>
where
    S: Service<Req> + Clone,
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
                    let gate = match (this.hold.as_ref(), this.key.as_ref()) {
                        (Some(hold), Some(key)) if *this.cost == 0 => {
                            match hold.remaining_nanos(key, this.permits.clock().now()) {
                                0 => Gate::Open,
                                held => Gate::Held(held),
                            }
                        }
                        (Some(hold), Some(key)) => {
                            let now = this.permits.clock().now();
                            let left = budget_left(*this.max_wait, *this.waited);
                            let permits = &*this.permits;
                            hold.gate(key, now, *this.cost, left, || permits.pace())
                        }
                        _ => Gate::Open,
                    };
                    match gate {
                        Gate::Open => {
                            let next = ask_limiter(&mut this);
                            this.state.set(next);
                        }
                        Gate::Held(held) => {
                            let sleep = wait_for(&mut this, held)?;
                            this.state.set(State::Held { sleep });
                        }
                        Gate::Paced { wait, turn } => {
                            // A future dropped before its turn comes gives it back.
                            *this.turn = Some(turn);
                            let sleep = wait_for(&mut this, wait)?;
                            this.state.set(State::Paced { sleep });
                        }
                        Gate::TooLate(turn) => {
                            this.state.set(State::Done);
                            return Poll::Ready(Err(timeout(*this.waited, turn)));
                        }
                    }
                }
                StateProj::Held { sleep } => {
                    ready!(sleep.poll(cx));
                    // Look again: another response may have lengthened the hold.
                    this.state.set(State::Start);
                }
                StateProj::Paced { sleep } => {
                    ready!(sleep.poll(cx));
                    if let Some(mut turn) = this.turn.take() {
                        turn.came();
                    }
                    // The turn is booked: only a hold that began meanwhile stops it.
                    match held_now(&this) {
                        0 => {
                            let next = ask_limiter(&mut this);
                            this.state.set(next);
                        }
                        held => {
                            let sleep = wait_for(&mut this, held)?;
                            this.state.set(State::Held { sleep });
                        }
                    }
                }
                StateProj::Acquiring { waiting } => {
                    let granted = ready!(waiting.as_mut().poll(cx));
                    let slept = match granted {
                        Err(error) => {
                            this.state.set(State::Done);
                            return Poll::Ready(Err(ClientError::Throttled(error)));
                        }
                        Ok(slept) => duration_to_nanos(slept),
                    };
                    *this.waited = this.waited.saturating_add(slept);
                    // A hold that began while this request waited for its permits
                    // stops it too: it waits the hold out and takes fresh permits.
                    if slept > 0 {
                        let held = held_now(&this);
                        if held > 0 {
                            let sleep = wait_for(&mut this, held)?;
                            this.state.set(State::Held { sleep });
                            continue;
                        }
                    }
                    let next = after_wait(&mut this);
                    this.state.set(next);
                }
                StateProj::Jitter { sleep } => {
                    ready!(sleep.poll(cx));
                    this.state.set(State::Ready);
                }
                StateProj::Ready => {
                    let Poll::Ready(readied) = this.service.poll_ready(cx) else {
                        *this.unready = true;
                        return Poll::Pending;
                    };
                    if let Err(error) = readied {
                        this.state.set(State::Done);
                        return Poll::Ready(Err(ClientError::Service(error)));
                    }
                    // The last look before sending, for a request that waited (its
                    // permits, a hold, its jitter) or found the inner service not
                    // ready: a hold that began meanwhile stops it too. The clone
                    // readied for it is dropped (a fresh one takes its place), so
                    // that waiting out the hold keeps no slot of the inner service.
                    // A request that went straight through has nothing to look at
                    // again: its gate was read in this same poll.
                    let held = if *this.waited > 0 || *this.unready {
                        held_now(&this)
                    } else {
                        0
                    };
                    if held > 0 {
                        *this.unready = false;
                        let fresh = this.service.clone();
                        *this.service = fresh;
                        let sleep = wait_for(&mut this, held)?;
                        this.state.set(State::Held { sleep });
                        continue;
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
                    if let (Some(hold), Some(key)) = (this.hold.as_ref(), this.key.take())
                        && let Some((status, headers)) = this.read.read(&response)
                    {
                        let permits = &*this.permits;
                        let now = SystemTime::now();
                        hold.observe_paced(key, status, headers, now, || permits.pace());
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

/// What is left of the maximum wait after `waited` (all of time without one).
fn budget_left(max_wait: Option<Duration>, waited: Nanos) -> Nanos {
    max_wait.map_or(Nanos::MAX, |max| {
        duration_to_nanos(max).saturating_sub(waited)
    })
}

/// The refusal of a request that would have waited `waited` plus `more`.
fn timeout<E>(waited: Nanos, more: Nanos) -> ClientError<E> {
    let needed = nanos_to_duration(waited.saturating_add(more));
    ClientError::Throttled(Error::Timeout { needed })
}

/// How long the request's key is held back now (0 if it is not, or nothing holds).
fn held_now<S, Req, P, R>(this: &ResponseFutureProj<'_, S, Req, P, R>) -> Nanos
where
    S: Service<Req>,
    P: Permits,
    P::Key: Hash + Eq,
{
    match (this.hold.as_ref(), this.key.as_ref()) {
        (Some(hold), Some(key)) => hold.remaining_nanos(key, this.permits.clock().now()),
        _ => 0,
    }
}

/// A sleep of `nanos` counted against the maximum wait, or the timeout (the future
/// done) if it would pass it.
fn wait_for<S, Req, P, R>(
    this: &mut ResponseFutureProj<'_, S, Req, P, R>,
    nanos: Nanos,
) -> Result<<P::Clock as Clock>::Sleep, ClientError<S::Error>>
where
    S: Service<Req>,
    P: Permits,
{
    if nanos > budget_left(*this.max_wait, *this.waited) {
        let error = timeout(*this.waited, nanos);
        this.state.set(State::Done);
        return Err(error);
    }
    *this.waited = this.waited.saturating_add(nanos);
    Ok(this.permits.clock().sleep_async(nanos_to_duration(nanos)))
}

/// The state that asks the limiter: ready at once when a local limiter grants
/// without waiting (no allocation), free for a cost of 0, otherwise the wait.
/// Inlined, so that the state is built where it is stored, not moved there.
#[inline(always)]
fn ask_limiter<S, Req, P, R>(
    this: &mut ResponseFutureProj<'_, S, Req, P, R>,
) -> State<S::Future, <P::Clock as Clock>::Sleep>
where
    S: Service<Req>,
    P: Permits,
    P::Key: Clone,
{
    if *this.cost == 0 {
        return after_wait(this);
    }
    let now = match this.key.as_ref() {
        Some(key) => this.permits.try_now(key, *this.cost),
        None => None,
    };
    if now == Some(true) {
        return after_wait(this);
    }
    State::Acquiring {
        waiting: start_acquire(this),
    }
}

/// The state after the waits: the jitter if the request waited at all (only a
/// caller that waited can have woken with others), else ready. Inlined, as
/// [`ask_limiter`] is.
#[inline(always)]
fn after_wait<S, Req, P, R>(
    this: &mut ResponseFutureProj<'_, S, Req, P, R>,
) -> State<S::Future, <P::Clock as Clock>::Sleep>
where
    S: Service<Req>,
    P: Permits,
{
    let extra = match this.jitter.as_ref() {
        Some(jitter) if *this.waited > 0 => jitter.draw_nanos(),
        _ => 0,
    };
    if extra == 0 {
        State::Ready
    } else {
        let sleep = this.permits.clock().sleep_async(nanos_to_duration(extra));
        State::Jitter { sleep }
    }
}

/// Starts the limiter's acquire with what is left of the maximum wait after the
/// hold. The key is kept only when the back-off needs it afterwards.
fn start_acquire<S, Req, P, R>(this: &mut ResponseFutureProj<'_, S, Req, P, R>) -> Acquiring
where
    S: Service<Req>,
    P: Permits,
    P::Key: Clone,
{
    let left = this
        .max_wait
        .map(|_| nanos_to_duration(budget_left(*this.max_wait, *this.waited)));
    let acquiring = match this.key.as_ref() {
        Some(key) => this.permits.acquire(key, *this.cost, left),
        // Unreachable: the key is taken only here or after the response.
        None => Box::pin(std::future::ready(Err(Error::ZeroCost))),
    };
    if this.hold.is_none() {
        *this.key = None;
    }
    acquiring
}
