//! The server's response future: a remote check awaited, a request held back for
//! its permits, the inner call with the fields added, or the answer.

use super::service::{outcome, status, Config, Described, Each, Outcome};
use crate::adapters::{Acquiring, Checking, CheckingEach};
use crate::algorithms::Decision;
use crate::error::Error;
use http::{Request, Response, StatusCode};
use pin_project_lite::pin_project;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{ready, Context, Poll};
use tower_service::Service;

pin_project! {
    /// The future of [`Server::call`](super::Server): the inner service's response
    /// with the rate-limit fields added, or the refusal; first, with a limiter that
    /// does not check at once, the check itself, and for a request held back
    /// ([`delay_up_to`](super::ServerLayer::delay_up_to)), its wait.
    ///
    /// With a limiter that checks at once (a direct one, the in-memory store) the
    /// check runs in `call`, before this future is polled: requests are granted or
    /// refused in the order of their `call`s, and a granted one has taken its
    /// permits even if its future is dropped unpolled.
    ///
    /// ```
    /// use http::{Request, Response, StatusCode};
    /// use sluicegate::adapters::server::{ResponseFuture, ServerLayer};
    /// use sluicegate::algorithms::FixedWindow;
    /// use sluicegate::{clock::ManualClock, RateLimiter};
    /// use std::time::Duration;
    /// use tower::{service_fn, Layer, Service, ServiceExt};
    ///
    /// let window = FixedWindow::new(1, Duration::from_secs(60)).unwrap();
    /// let limiter = RateLimiter::with_clock(window, ManualClock::new());
    /// let app = service_fn(|_: Request<()>| async { Ok::<_, std::convert::Infallible>(Response::new(())) });
    /// let mut server = ServerLayer::new(limiter.clone()).layer(app);
    /// futures::executor::block_on(async {
    ///     let first: ResponseFuture<_, (), ()> = server.ready().await.unwrap().call(Request::new(()));
    ///     assert!(!limiter.peek(1).unwrap().is_allowed()); // taken in `call`
    ///     let second = server.ready().await.unwrap().call(Request::new(()));
    ///     assert_eq!(second.await.unwrap().status(), StatusCode::TOO_MANY_REQUESTS);
    ///     assert_eq!(first.await.unwrap().status(), StatusCode::OK);
    /// });
    /// ```
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
        // Held back: waiting for the permits, then the inner call.
        Holding { holding: Box<Holding<S, B>> },
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
    pub(super) fn called(future: S::Future, described: Option<Box<Described>>) -> Self {
        ResponseFuture {
            state: State::Called { future, described },
        }
    }

    pub(super) fn answered(response: Response<RB>) -> Self {
        ResponseFuture {
            state: State::Answered {
                response: Some(Box::new(response)),
            },
        }
    }

    pub(super) fn checking(awaiting: Box<Awaiting<S, B>>) -> Self {
        ResponseFuture {
            state: State::Checking { awaiting },
        }
    }

    pub(super) fn holding(holding: Box<Holding<S, B>>) -> Self {
        ResponseFuture {
            state: State::Holding { holding },
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
        if let StateProj::Holding { holding } = state.as_mut().project() {
            let next = ready!(holding.poll_held(cx));
            state.set(next);
        }
        match state.project() {
            // Nothing to add: the inner poll as it is, moving nothing.
            StateProj::Called { future, described } if described.is_none() => future.poll(cx),
            StateProj::Called { future, described } => {
                let mut response = ready!(future.poll(cx))?;
                if let Some(d) = described.take() {
                    let (headers, out) = (&d.config.headers, response.headers_mut());
                    if d.held {
                        d.fields.write_policy(headers, out);
                    } else {
                        d.fields.write(headers, out);
                    }
                }
                Poll::Ready(Ok(response))
            }
            // Polled again after answering: there is nothing left to give.
            StateProj::Answered { response } => match response.take() {
                Some(response) => Poll::Ready(Ok(*response)),
                None => Poll::Pending,
            },
            // Polled again after the check's or the wait's outcome was taken.
            StateProj::Checking { .. } | StateProj::Holding { .. } => Poll::Pending,
        }
    }
}

/// A remote check: the plain one, or one that reports every limit.
pub(super) enum Pending {
    Plain(Checking),
    Each(CheckingEach),
}

impl Pending {
    /// The check's decision once the reply came, every limit's report pushed into
    /// `each`.
    fn poll(&mut self, cx: &mut Context<'_>, each: &mut Each) -> Poll<Result<Decision, Error>> {
        Poll::Ready(match self {
            Pending::Plain(checking) => ready!(checking.as_mut().poll(cx)),
            Pending::Each(checking) => {
                ready!(checking.as_mut().poll(cx)).map(|(decision, reported)| {
                    reported.into_iter().for_each(|d| each.push(d));
                    decision
                })
            }
        })
    }
}

/// Starts a held request's wait for its permits (its key and cost inside).
pub(super) type Hold = Box<dyn FnOnce() -> Acquiring + Send>;

/// A check awaiting a remote store's reply, and what to call once it allows.
pub(super) struct Awaiting<S, B> {
    pub(super) checking: Pending,
    pub(super) called: Option<(S, Request<B>)>,
    pub(super) config: Arc<Config>,
    pub(super) partition: Option<[u8; 8]>,
    /// With a delay configured: how to wait for the permits if refused.
    pub(super) hold: Option<Hold>,
}

impl<S, B> Awaiting<S, B> {
    /// The state to go on in once the reply came: the inner call, a wait, or the
    /// answer. Out of line: the memory store's path never comes here.
    #[inline(never)]
    fn poll_checked<RB>(&mut self, cx: &mut Context<'_>) -> Poll<State<S, B, RB>>
    where
        S: Service<Request<B>, Response = Response<RB>>,
        RB: Default,
    {
        let mut each = Each::new();
        let checked = ready!(self.checking.poll(cx, &mut each));
        let Some((mut inner, request)) = self.called.take() else {
            // Polled again after completing: nothing left to give.
            return Poll::Pending;
        };
        // A remote store reports each limit's standing in the same round trip; no
        // second one for the next permit.
        let config = &self.config;
        Poll::Ready(
            match outcome(config, checked, &mut each, self.partition, |lone| lone) {
                Outcome::Call(described) => State::Called {
                    future: inner.call(request),
                    described,
                },
                Outcome::Answer(response) => answer(response),
                Outcome::Refused(held) => match self.hold.take() {
                    Some(hold) if config.holds(&held.fields) => State::Holding {
                        holding: Box::new(Holding {
                            acquiring: hold(),
                            called: Some((inner, request, held)),
                            config: config.clone(),
                        }),
                    },
                    _ => answer(config.refuse(&held.fields)),
                },
            },
        )
    }
}

fn answer<S, B, RB>(response: Response<RB>) -> State<S, B, RB>
where
    S: Service<Request<B>>,
{
    State::Answered {
        response: Some(Box::new(response)),
    }
}

/// A request held back for its permits, and the refusal it was first answered, to
/// send if the wait would exceed the maximum.
pub(super) struct Holding<S, B> {
    pub(super) acquiring: Acquiring,
    pub(super) called: Option<(S, Request<B>, Box<Described>)>,
    pub(super) config: Arc<Config>,
}

impl<S, B> Holding<S, B> {
    /// The state to go on in once the wait ended: the inner call (its response
    /// carrying the policy), or the refusal.
    #[inline(never)]
    fn poll_held<RB>(&mut self, cx: &mut Context<'_>) -> Poll<State<S, B, RB>>
    where
        S: Service<Request<B>, Response = Response<RB>>,
        RB: Default,
    {
        let waited = ready!(self.acquiring.as_mut().poll(cx));
        let Some((mut inner, request, mut held)) = self.called.take() else {
            // Polled again after completing: nothing left to give.
            return Poll::Pending;
        };
        let config = &self.config;
        let call = |described| State::Called {
            future: inner.call(request),
            described,
        };
        Poll::Ready(match waited {
            Ok(_) => call(config.headers.describes_grants().then(|| {
                held.held = true;
                held
            })),
            // Past the maximum wait (or never, should the limit have changed).
            Err(Error::Timeout { .. } | Error::Never { .. }) => answer(config.refuse(&held.fields)),
            Err(_) if config.fail_open => call(None),
            Err(_) => answer(status(StatusCode::SERVICE_UNAVAILABLE)),
        })
    }
}
