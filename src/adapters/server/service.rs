//! The server service: decide, then answer or call the inner service.

use super::headers::RateLimitHeaders;
use crate::adapters::{Checking, CheckingEach, Meter, Permits};
use crate::algorithms::{Decision, Verdict};
use crate::error::Error;
use http::{Request, Response, StatusCode};
use pin_project_lite::pin_project;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{ready, Context, Poll};
use tower_service::Service;

/// What an allowed response is to carry.
#[derive(Debug)]
struct Described {
    config: Arc<Config>,
    decision: Decision,
    each: Each,
}

/// How many limits' decisions are kept inline (an `AllOf` has at most three
/// members); a set with more spills into a vector.
const INLINE_ITEMS: usize = 4;

/// How every limit stands after a check, as it reported them.
#[derive(Clone, Debug)]
struct Each {
    inline: [Decision; INLINE_ITEMS],
    len: usize,
    spilled: Vec<Decision>,
}

impl Each {
    fn new() -> Self {
        Each {
            inline: [Decision::never(0, 0, 0); INLINE_ITEMS],
            len: 0,
            spilled: Vec::new(),
        }
    }

    fn push(&mut self, decision: Decision) {
        if self.len < INLINE_ITEMS {
            self.inline[self.len] = decision;
        } else {
            if self.spilled.is_empty() {
                self.spilled.extend_from_slice(&self.inline);
            }
            self.spilled.push(decision);
        }
        self.len += 1;
    }

    /// The reported items, or `decision` alone if there were none.
    fn items<'a>(&'a self, decision: &'a Decision) -> &'a [Decision] {
        match self.len {
            0 => std::slice::from_ref(decision),
            len if len <= INLINE_ITEMS => &self.inline[..len],
            _ => &self.spilled,
        }
    }
}

/// What every service of one layer shares.
#[derive(Clone, Debug)]
pub(super) struct Config {
    pub(super) headers: RateLimitHeaders,
    pub(super) never_status: StatusCode,
    pub(super) fail_open: bool,
}

/// The service of a [`ServerLayer`](super::ServerLayer). See the
/// [module docs](super).
///
/// Readiness is the inner service's: a refused request is answered without calling
/// it. When the limiter's check [answers at once](Permits::checks_at_once) (a direct
/// limiter, the in-memory store) it runs in `call`; otherwise (a remote store) the
/// response future awaits it, carrying the readied inner service and the request
/// (tower's pattern: `call` leaves a fresh clone in its place), so no thread blocks
/// on a round trip.
#[derive(Clone, Debug)]
pub struct Server<S, P, M> {
    pub(super) inner: S,
    pub(super) permits: P,
    pub(super) meter: M,
    pub(super) config: Arc<Config>,
}

impl<S, P, M> Server<S, P, M> {
    /// The inner service.
    pub fn get_ref(&self) -> &S {
        &self.inner
    }
}

impl<S, P, M, B, RB> Service<Request<B>> for Server<S, P, M>
where
    S: Service<Request<B>, Response = Response<RB>> + Clone,
    P: Permits,
    M: Meter<Request<B>, P::Key>,
    RB: Default,
{
    type Response = Response<RB>;
    type Error = S::Error;
    type Future = ResponseFuture<S, B, RB>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, request: Request<B>) -> Self::Future {
        let (key, cost) = self.meter.meter(&request);
        if !self.permits.checks_at_once() {
            // Only the `RateLimit` field lists every limit; without it the plain check.
            let checking = if self.config.headers.lists_limits() {
                Pending::Each(self.permits.check_each_async(&key, cost))
            } else {
                Pending::Plain(self.permits.check_async(&key, cost))
            };
            // The readied service goes with its request; a fresh clone stays.
            let fresh = self.inner.clone();
            let inner = std::mem::replace(&mut self.inner, fresh);
            // Boxed, as the check is: the future stays small for the paths without.
            let awaiting = Box::new(Awaiting {
                checking,
                called: Some((inner, request)),
                config: self.config.clone(),
            });
            return ResponseFuture {
                state: State::Checking { awaiting },
            };
        }
        // Without fields on grants, the lean check: a grant is all it needs to know.
        let decided = if self.config.headers.describes_grants() {
            self.decide(&key, cost)
        } else {
            match self.permits.try_take(&key, cost) {
                Ok(None) => Outcome::Call(None),
                Ok(Some(refused)) => refusal(&self.config, Ok(refused)),
                Err(error) => refusal(&self.config, Err(error)),
            }
        };
        match decided {
            Outcome::Call(described) => ResponseFuture::called(self.inner.call(request), described),
            Outcome::Answer(response) => ResponseFuture::answered(response),
        }
    }
}

impl<S, P: Permits, M> Server<S, P, M> {
    /// The full check, for a layer that describes grants. Out of line: the lean
    /// path stays small enough for the compiler to inline what it calls.
    #[inline(never)]
    fn decide<RB: Default>(&self, key: &P::Key, cost: u64) -> Outcome<RB> {
        let (config, permits) = (&self.config, &self.permits);
        // Only the `RateLimit` field lists every limit; without it the plain check.
        let (checked, each) = if config.headers.lists_limits() {
            let mut each = Each::new();
            let checked = permits.check_each(key, cost, &mut |decision| each.push(decision));
            (checked, Some(each))
        } else {
            (permits.check(key, cost), None)
        };
        // A limiter that reported the deciding limit alone, granting its last
        // permit: say when the next one comes (one more look). Limits that report
        // each member say so themselves.
        outcome(config, checked, each, || permits.peek(key, 1).ok())
    }
}

/// The outcome of a lean check that did not grant: a refusal or an error. Out of
/// line, as the rarer path.
#[inline(never)]
fn refusal<RB: Default>(config: &Arc<Config>, checked: Result<Decision, Error>) -> Outcome<RB> {
    outcome(config, checked, None, || None)
}

/// What the check decided for a request.
enum Outcome<RB> {
    /// Call the inner service; describe the grant if boxed here.
    Call(Option<Box<Described>>),
    /// Answer with this (a refusal, or a failed store).
    Answer(Response<RB>),
}

/// The one place a check's result becomes a response: `each` is how the limits
/// reported they stand, `next` peeks for the next permit when a lone deciding
/// limit granted its last one.
#[inline]
fn outcome<RB: Default>(
    config: &Arc<Config>,
    checked: Result<Decision, Error>,
    each: Option<Each>,
    next: impl FnOnce() -> Option<Decision>,
) -> Outcome<RB> {
    let decision = match checked {
        Ok(decision) => decision,
        // A free request is not counted and carries no fields.
        Err(Error::ZeroCost) => return Outcome::Call(None),
        Err(_) if config.fail_open => return Outcome::Call(None),
        Err(_) => return Outcome::Answer(status(StatusCode::SERVICE_UNAVAILABLE)),
    };
    let headers = &config.headers;
    match decision.verdict() {
        Verdict::Allowed if !headers.describes_grants() => Outcome::Call(None),
        Verdict::Allowed => {
            let mut each = each.unwrap_or_else(Each::new);
            let lone = each.len <= 1;
            if headers.lists_limits() && lone && decision.remaining() == 0 {
                let last = each.items(&decision)[0];
                if last.is_allowed() {
                    if let Some(next) = next().filter(|n| n.verdict() == Verdict::Denied) {
                        each = Each::new();
                        each.push(next);
                    }
                }
            }
            // Boxed: a grant with fields allocates its values anyway, and the
            // future stays small for the paths without.
            Outcome::Call(Some(Box::new(Described {
                config: config.clone(),
                decision,
                each,
            })))
        }
        Verdict::Denied | Verdict::Never => {
            let code = if decision.is_never() {
                config.never_status
            } else {
                StatusCode::TOO_MANY_REQUESTS
            };
            let mut response = status(code);
            let each = each.unwrap_or_else(Each::new);
            let items = each.items(&decision);
            headers.write_each(&decision, items, response.headers_mut());
            Outcome::Answer(response)
        }
    }
}

fn status<RB: Default>(status: StatusCode) -> Response<RB> {
    let mut response = Response::new(RB::default());
    *response.status_mut() = status;
    response
}

pin_project! {
    /// The future of [`Server::call`]: the inner service's response with the
    /// rate-limit fields added, or the refusal; first, with a limiter that does not
    /// check at once, the check itself.
    pub struct ResponseFuture<S, B, RB>
    where
        S: Service<Request<B>>,
    {
        #[pin]
        state: State<S, B, RB>,
    }
}

pin_project! {
    #[project = StateProj]
    enum State<S, B, RB>
    where
        S: Service<Request<B>>,
    {
        // Awaiting the store's answer; then the readied inner service and the
        // request, to call if allowed.
        Checking { awaiting: Box<Awaiting<S, B>> },
        // Allowed: the inner call, and the decision to describe.
        Called {
            #[pin]
            future: S::Future,
            described: Option<Box<Described>>,
        },
        // Refused (or failed closed): the answer, boxed so that the future stays
        // small for the allowed path, which moves it.
        Answered { response: Option<Box<Response<RB>>> },
    }
}

impl<S, B, RB> ResponseFuture<S, B, RB>
where
    S: Service<Request<B>>,
{
    fn called(future: S::Future, described: Option<Box<Described>>) -> Self {
        ResponseFuture {
            state: State::Called { future, described },
        }
    }

    fn answered(response: Response<RB>) -> Self {
        ResponseFuture {
            state: State::Answered {
                response: Some(Box::new(response)),
            },
        }
    }
}

impl<S, B, RB> Future for ResponseFuture<S, B, RB>
where
    S: Service<Request<B>, Response = Response<RB>>,
    RB: Default,
{
    type Output = Result<Response<RB>, S::Error>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let mut state = self.project().state;
        if let StateProj::Checking { awaiting } = state.as_mut().project() {
            let next = ready!(awaiting.poll_checked(cx));
            state.set(next);
        }
        match state.project() {
            // Nothing to add: the inner poll as it is, moving nothing.
            StateProj::Called { future, described } if described.is_none() => future.poll(cx),
            StateProj::Called { future, described } => {
                let mut response = ready!(future.poll(cx))?;
                if let Some(d) = described.take() {
                    let items = d.each.items(&d.decision);
                    let headers = response.headers_mut();
                    d.config.headers.write_each(&d.decision, items, headers);
                }
                Poll::Ready(Ok(response))
            }
            // Polled again after answering: there is nothing left to give.
            StateProj::Answered { response } => match response.take() {
                Some(response) => Poll::Ready(Ok(*response)),
                None => Poll::Pending,
            },
            // Polled again after the check's outcome was taken.
            StateProj::Checking { .. } => Poll::Pending,
        }
    }
}

/// A remote check: the plain one, or one that reports every limit.
enum Pending {
    Plain(Checking),
    Each(CheckingEach),
}

impl Pending {
    fn poll(&mut self, cx: &mut Context<'_>) -> Poll<(Result<Decision, Error>, Option<Each>)> {
        Poll::Ready(match self {
            Pending::Plain(checking) => (ready!(checking.as_mut().poll(cx)), None),
            Pending::Each(checking) => match ready!(checking.as_mut().poll(cx)) {
                Ok((decision, reported)) => {
                    let mut each = Each::new();
                    reported.into_iter().for_each(|d| each.push(d));
                    (Ok(decision), Some(each))
                }
                Err(e) => (Err(e), None),
            },
        })
    }
}

/// A check awaiting a remote store's reply, and what to call once it allows.
struct Awaiting<S, B> {
    checking: Pending,
    called: Option<(S, Request<B>)>,
    config: Arc<Config>,
}

impl<S, B> Awaiting<S, B> {
    /// The state to go on in once the reply came: the inner call, or the answer.
    /// Out of line: the memory store's path never comes here.
    #[inline(never)]
    fn poll_checked<RB>(&mut self, cx: &mut Context<'_>) -> Poll<State<S, B, RB>>
    where
        S: Service<Request<B>, Response = Response<RB>>,
        RB: Default,
    {
        let (checked, each) = ready!(self.checking.poll(cx));
        let Some((mut inner, request)) = self.called.take() else {
            // Polled again after completing: nothing left to give.
            return Poll::Pending;
        };
        // A remote store reports each limit's standing in the same round trip; no
        // second one for the next permit.
        Poll::Ready(match outcome(&self.config, checked, each, || None) {
            Outcome::Call(described) => State::Called {
                future: inner.call(request),
                described,
            },
            Outcome::Answer(response) => State::Answered {
                response: Some(Box::new(response)),
            },
        })
    }
}
