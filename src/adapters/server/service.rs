//! The server service: decide, then answer or call the inner service.

use super::headers::RateLimitHeaders;
use crate::adapters::{Meter, Permits};
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

/// How many limits a response lists one `RateLimit` item for (an `AllOf` has at
/// most three members); a step reporting more is described by its combined
/// decision alone.
const MAX_ITEMS: usize = 4;

/// How every limit stands after a check, as it reported them, kept inline.
#[derive(Clone, Copy, Debug)]
struct Each {
    items: [Decision; MAX_ITEMS],
    len: usize,
}

impl Each {
    fn new() -> Self {
        Each {
            items: [Decision::never(0, 0, 0); MAX_ITEMS],
            len: 0,
        }
    }

    fn push(&mut self, decision: Decision) {
        if let Some(slot) = self.items.get_mut(self.len) {
            *slot = decision;
        }
        self.len += 1;
    }

    /// The reported items, or `decision` alone if there were none or too many.
    fn items<'a>(&'a self, decision: &'a Decision) -> &'a [Decision] {
        if (1..=MAX_ITEMS).contains(&self.len) {
            &self.items[..self.len]
        } else {
            std::slice::from_ref(decision)
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
/// it.
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
    S: Service<Request<B>, Response = Response<RB>>,
    P: Permits,
    M: Meter<Request<B>, P::Key>,
    RB: Default,
{
    type Response = Response<RB>;
    type Error = S::Error;
    type Future = ResponseFuture<S::Future, RB>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, request: Request<B>) -> Self::Future {
        let (key, cost) = self.meter.meter(&request);
        let config = &*self.config;
        let mut each = Each::new();
        // Only the `RateLimit` field lists every limit; without it the plain check.
        let checked = if config.headers.lists_limits() {
            self.permits
                .check_each(&key, cost, &mut |decision| each.push(decision))
        } else {
            self.permits.check(&key, cost)
        };
        let decision = match checked {
            Ok(decision) => decision,
            // A free request is not counted and carries no fields.
            Err(Error::ZeroCost) => return ResponseFuture::called(self.inner.call(request), None),
            Err(_) if config.fail_open => {
                return ResponseFuture::called(self.inner.call(request), None)
            }
            Err(_) => return ResponseFuture::answered(status(StatusCode::SERVICE_UNAVAILABLE)),
        };
        match decision.verdict() {
            Verdict::Allowed if !config.headers.describes_grants() => {
                ResponseFuture::called(self.inner.call(request), None)
            }
            Verdict::Allowed => {
                // A limiter that reported the deciding limit alone, granting its last
                // permit: say when the next one comes (one more look). Limits that
                // report each member say so themselves.
                if config.headers.lists_limits()
                    && each.len == 1
                    && each.items[0].is_allowed()
                    && each.items[0].remaining() == 0
                {
                    if let Ok(next) = self.permits.peek(&key, 1) {
                        if next.verdict() == Verdict::Denied {
                            each.items[0] = next;
                        }
                    }
                }
                // Boxed: a grant with fields allocates its values anyway, and the
                // future stays small for the paths without.
                let described = Box::new(Described {
                    config: self.config.clone(),
                    decision,
                    each,
                });
                ResponseFuture::called(self.inner.call(request), Some(described))
            }
            Verdict::Denied => {
                let mut response = status(StatusCode::TOO_MANY_REQUESTS);
                let items = each.items(&decision);
                config
                    .headers
                    .write_each(&decision, items, response.headers_mut());
                ResponseFuture::answered(response)
            }
            Verdict::Never => {
                let mut response = status(config.never_status);
                let items = each.items(&decision);
                config
                    .headers
                    .write_each(&decision, items, response.headers_mut());
                ResponseFuture::answered(response)
            }
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
    /// rate-limit fields added, or the refusal built at once.
    pub struct ResponseFuture<F, RB> {
        #[pin]
        state: State<F, RB>,
    }
}

pin_project! {
    #[project = StateProj]
    enum State<F, RB> {
        // Allowed: the inner call, and the decision to describe.
        Called {
            #[pin]
            future: F,
            described: Option<Box<Described>>,
        },
        // Refused (or failed closed): the answer.
        Answered { response: Option<Response<RB>> },
    }
}

impl<F, RB> ResponseFuture<F, RB> {
    fn called(future: F, described: Option<Box<Described>>) -> Self {
        ResponseFuture {
            state: State::Called { future, described },
        }
    }

    fn answered(response: Response<RB>) -> Self {
        ResponseFuture {
            state: State::Answered {
                response: Some(response),
            },
        }
    }
}

impl<F, RB, E> Future for ResponseFuture<F, RB>
where
    F: Future<Output = Result<Response<RB>, E>>,
{
    type Output = Result<Response<RB>, E>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        match self.project().state.project() {
            StateProj::Called { future, described } => {
                let mut response = ready!(future.poll(cx))?;
                if let Some(d) = described.take() {
                    let headers = response.headers_mut();
                    let items = d.each.items(&d.decision);
                    d.config.headers.write_each(&d.decision, items, headers);
                }
                Poll::Ready(Ok(response))
            }
            // Polled again after answering: there is nothing left to give.
            StateProj::Answered { response } => match response.take() {
                Some(response) => Poll::Ready(Ok(response)),
                None => Poll::Pending,
            },
        }
    }
}
