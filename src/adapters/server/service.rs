//! The server service: decide, then answer, hold the request back, or call the
//! inner service.

use super::future::{Awaiting, Hold, Holding, Pending, ResponseFuture};
use super::headers::{write_retry_after, RateLimitHeaders};
use super::partition::Partition;
use crate::adapters::{Permits, Weigh};
use crate::algorithms::{standing_with, Decision, Source, Verdict};
use crate::clock::duration_to_nanos;
use crate::error::Error;
use http::{Request, Response, StatusCode};
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;
use tower_service::Service;

/// How many limits' decisions are kept inline (an `AllOf` has at most three
/// members); a set with more spills into a vector.
const INLINE_ITEMS: usize = 4;

/// How every limit stands after a check, as it reported them.
#[derive(Clone, Debug)]
pub(super) struct Each {
    inline: [Decision; INLINE_ITEMS],
    len: usize,
    spilled: Vec<Decision>,
}

impl Each {
    pub(super) fn new() -> Self {
        Each {
            inline: [Decision::never(0, 0, 0); INLINE_ITEMS],
            len: 0,
            spilled: Vec::new(),
        }
    }

    pub(super) fn push(&mut self, decision: Decision) {
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

/// A check's result as the fields describe it: the combined decision, how each
/// limit reported it stands, and the request's partition key.
#[derive(Debug)]
pub(super) struct Fields {
    pub(super) decision: Decision,
    pub(super) each: Each,
    pub(super) partition: Option<[u8; 8]>,
}

impl Fields {
    /// Writes every configured field into `response`'s headers, keeping what is
    /// there (the inner service's response).
    pub(super) fn write(&self, headers: &RateLimitHeaders, response: &mut http::HeaderMap) {
        let items = self.each.items(&self.decision);
        let partition = self.partition.as_ref();
        headers.write_with(&self.decision, items, partition, false, response);
    }

    /// Writes only `RateLimit-Policy`: what a request that was held back carries.
    pub(super) fn write_policy(&self, headers: &RateLimitHeaders, response: &mut http::HeaderMap) {
        let items = self.each.items(&self.decision);
        headers.write_policy(&self.decision, items, response);
    }
}

/// What every service of one layer shares.
#[derive(Clone, Debug)]
pub(super) struct Config {
    pub(super) headers: RateLimitHeaders,
    pub(super) never_status: StatusCode,
    pub(super) fail_open: bool,
    /// The longest a request is held back for its permits, if it may be.
    pub(super) delay: Option<Duration>,
}

impl Config {
    /// The response to a refusal or a never answer: its status and fields.
    pub(super) fn refusal<RB: Default>(
        &self,
        decision: &Decision,
        each: &Each,
        partition: Option<&[u8; 8]>,
    ) -> Response<RB> {
        let code = if decision.is_never() {
            self.never_status
        } else {
            StatusCode::TOO_MANY_REQUESTS
        };
        let mut response = status(code);
        let items = each.items(decision);
        let out = response.headers_mut();
        self.headers
            .write_with(decision, items, partition, true, out);
        response
    }

    /// [`refusal`](Config::refusal) of `fields`.
    pub(super) fn refuse<RB: Default>(&self, fields: &Fields) -> Response<RB> {
        self.refusal(&fields.decision, &fields.each, fields.partition.as_ref())
    }

    /// Whether a request refused with `fields` is held back for its permits: only
    /// a denial (never a cost above capacity) whose retry is within the delay.
    pub(super) fn holds(&self, fields: &Fields) -> bool {
        let within = |max: Duration| fields.decision.retry_after_nanos() <= duration_to_nanos(max);
        fields.decision.verdict() == Verdict::Denied && self.delay.is_some_and(within)
    }
}

pub(super) fn status<RB: Default>(status: StatusCode) -> Response<RB> {
    let mut response = Response::new(RB::default());
    *response.status_mut() = status;
    response
}

/// The service of a [`ServerLayer`](super::ServerLayer). See the
/// [module docs](super).
///
/// Readiness is the inner service's: a refused request is answered without calling
/// it. When the limiter's check [answers at once](Permits::checks_at_once) (a direct
/// limiter, the in-memory store) it runs in `call`; otherwise (a remote store) the
/// response future awaits it, carrying the readied inner service and the request
/// (tower's pattern: `call` leaves a fresh clone in its place), so no thread blocks
/// on a round trip. A request held back
/// ([`delay_up_to`](super::ServerLayer::delay_up_to)) waits in the response future
/// the same way.
///
/// Clones share the limiter and the layer's configuration.
///
/// ```
/// use http::{Request, Response, StatusCode};
/// use sluicegate::adapters::server::{Server, ServerLayer};
/// use sluicegate::algorithms::FixedWindow;
/// use sluicegate::{clock::ManualClock, RateLimiter};
/// use std::sync::atomic::{AtomicUsize, Ordering};
/// use std::sync::Arc;
/// use std::time::Duration;
/// use tower::{service_fn, Layer, ServiceExt};
///
/// let window = FixedWindow::new(1, Duration::from_secs(60)).unwrap();
/// let limiter = RateLimiter::with_clock(window, ManualClock::new());
/// let reached = Arc::new(AtomicUsize::new(0));
/// let counted = reached.clone();
/// let app = service_fn(move |_: Request<()>| {
///     counted.fetch_add(1, Ordering::Relaxed);
///     async { Ok::<_, std::convert::Infallible>(Response::new(())) }
/// });
/// let server: Server<_, _, _> = ServerLayer::new(limiter).layer(app);
/// let (first, second) = futures::executor::block_on(async {
///     let first = server.clone().oneshot(Request::new(())).await.unwrap();
///     (first, server.clone().oneshot(Request::new(())).await.unwrap())
/// });
/// assert_eq!(first.status(), StatusCode::OK);
/// assert_eq!(first.headers()["ratelimit"], r#""default";r=0;t=60"#);
/// assert_eq!(second.status(), StatusCode::TOO_MANY_REQUESTS);
/// assert_eq!(second.headers()["retry-after"], "60");
/// assert_eq!(reached.load(Ordering::Relaxed), 1); // the refused one never reached the app
/// ```
#[derive(Clone, Debug)]
pub struct Server<S, P: Permits, W> {
    pub(super) inner: S,
    pub(super) permits: P,
    pub(super) weigher: W,
    pub(super) config: Arc<Config>,
    pub(super) partition: Option<Partition<P::Key>>,
}

impl<S, P: Permits, W> Server<S, P, W> {
    /// The inner service. A request sent to it directly (a clone of it) goes
    /// around the limiter: it is not counted and its response carries no fields.
    ///
    /// ```
    /// use http::{Request, Response};
    /// use sluicegate::adapters::server::ServerLayer;
    /// use sluicegate::algorithms::FixedWindow;
    /// use sluicegate::{clock::ManualClock, RateLimiter};
    /// use std::time::Duration;
    /// use tower::{service_fn, Layer, ServiceExt};
    ///
    /// let window = FixedWindow::new(1, Duration::from_secs(60)).unwrap();
    /// let limiter = RateLimiter::with_clock(window, ManualClock::new());
    /// let app = service_fn(|_: Request<()>| async { Ok::<_, std::convert::Infallible>(Response::new(())) });
    /// let server = ServerLayer::new(limiter.clone()).layer(app);
    /// let direct = futures::executor::block_on(server.get_ref().clone().oneshot(Request::new(())));
    /// assert!(!direct.unwrap().headers().contains_key("ratelimit"));
    /// assert!(limiter.peek(1).unwrap().is_allowed()); // the permit is still there
    /// ```
    pub fn get_ref(&self) -> &S {
        &self.inner
    }
}

impl<S, P, W, B, RB> Service<Request<B>> for Server<S, P, W>
where
    S: Service<Request<B>, Response = Response<RB>> + Clone,
    P: Permits,
    W: Weigh<Request<B>, P::Key>,
    RB: Default,
{
    type Response = Response<RB>;
    type Error = S::Error;
    type Future = ResponseFuture<S, B, RB>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, request: Request<B>) -> Self::Future {
        let (key, cost) = self.weigher.weigh(&request);
        if cost == 0 {
            // A free request is not counted and carries no fields.
            return ResponseFuture::called(self.inner.call(request), None);
        }
        if !self.permits.checks_at_once() {
            return self.check_remotely(key, cost, request);
        }
        // Without fields on grants, the lean check: a grant is all it needs to know.
        let decided = if self.config.headers.describes_grants() {
            self.decide(&key, cost)
        } else {
            match self.permits.try_take(&key, cost) {
                Ok(None) => Outcome::Call(None),
                Ok(Some(refused)) => refusal(&self.config, refused, self.partition(&key)),
                Err(error) => failed(&self.config, error),
            }
        };
        match decided {
            Outcome::Call(described) => ResponseFuture::called(self.inner.call(request), described),
            Outcome::Answer(response) => ResponseFuture::answered(response),
            Outcome::Refused(held) if self.config.holds(&held.fields) => {
                let acquiring = self.permits.acquire(&key, cost, self.config.delay);
                let inner = self.take_inner();
                ResponseFuture::holding(Box::new(Holding {
                    acquiring,
                    called: Some((inner, request, held)),
                    config: self.config.clone(),
                }))
            }
            Outcome::Refused(held) => ResponseFuture::answered(self.config.refuse(&held.fields)),
        }
    }
}

impl<S: Clone, P: Permits, W> Server<S, P, W> {
    /// The readied inner service, to go with its request into the response future;
    /// a fresh clone stays.
    fn take_inner(&mut self) -> S {
        let fresh = self.inner.clone();
        std::mem::replace(&mut self.inner, fresh)
    }

    /// The check over a limiter that does not answer at once (a remote store): the
    /// response future awaits it.
    #[inline(never)]
    fn check_remotely<B, RB>(
        &mut self,
        key: P::Key,
        cost: u64,
        request: Request<B>,
    ) -> ResponseFuture<S, B, RB>
    where
        S: Service<Request<B>>,
    {
        // Only the fields need every limit's report; without them the plain check.
        let checking = if self.config.headers.describes_grants() {
            Pending::Each(self.permits.check_each_async(&key, cost))
        } else {
            Pending::Plain(self.permits.check_async(&key, cost))
        };
        let partition = self.partition(&key);
        let hold: Option<Hold> = self.config.delay.map(|max| {
            let permits = self.permits.clone();
            Box::new(move || permits.acquire(&key, cost, Some(max))) as Hold
        });
        let inner = self.take_inner();
        // Boxed, as the check is: the future stays small for the paths without.
        ResponseFuture::checking(Box::new(Awaiting {
            checking,
            called: Some((inner, request)),
            config: self.config.clone(),
            partition,
            hold,
        }))
    }
}

impl<S, P: Permits, W> Server<S, P, W> {
    /// The partition key of `key`, if the layer sends them.
    fn partition(&self, key: &P::Key) -> Option<[u8; 8]> {
        self.partition.as_ref().map(|partition| partition.of(key))
    }

    /// The full check, for a layer that describes grants: every limit reports how
    /// it stands. Out of line: the lean path stays small enough for the compiler
    /// to inline what it calls.
    #[inline(never)]
    fn decide<RB: Default>(&self, key: &P::Key, cost: u64) -> Outcome<RB> {
        let (config, permits) = (&self.config, &self.permits);
        let mut each = Each::new();
        let checked = permits.check_each(key, cost, &mut |decision| each.push(decision));
        // A limiter that reported only the combined grant (a store keeping the
        // default report) gets its standing by a look at the next permits.
        let standing = |lone: Decision| {
            standing_with(lone, &mut |more| permits.peek(key, more).unwrap_or(lone))
        };
        outcome(config, checked, &mut each, self.partition(key), standing)
    }
}

/// What the check decided for a request.
pub(super) enum Outcome<RB> {
    /// Call the inner service; describe the grant if boxed here.
    Call(Option<Box<Described>>),
    /// Answer with this (a refusal, a cost above capacity, or a failed store).
    Answer(Response<RB>),
    /// Refused for now, by a layer that may hold requests back: answer `429`, or
    /// hold this one back. (Without a delay a refusal is answered in `outcome`.)
    Refused(Box<Described>),
}

/// What an allowed response is to carry, or a held request's refusal.
#[derive(Debug)]
pub(super) struct Described {
    pub(super) config: Arc<Config>,
    pub(super) fields: Fields,
    /// Held back and then let through: only the policy is sent.
    pub(super) held: bool,
}

impl Described {
    /// The description of `decision` and the limits' reports `each`, in its box.
    fn boxed(
        config: &Arc<Config>,
        decision: Decision,
        each: &Each,
        partition: Option<[u8; 8]>,
    ) -> Box<Described> {
        Box::new(Described {
            config: config.clone(),
            fields: Fields {
                decision,
                each: each.clone(),
                partition,
            },
            held: false,
        })
    }
}

/// The outcome of a lean check that refused. Out of line, as the rarer path.
#[inline(never)]
fn refusal<RB: Default>(
    config: &Arc<Config>,
    refused: Decision,
    partition: Option<[u8; 8]>,
) -> Outcome<RB> {
    outcome(config, Ok(refused), &mut Each::new(), partition, |lone| {
        lone
    })
}

/// The outcome of a check that failed: through when failing open, else `503`.
#[inline(never)]
fn failed<RB: Default>(config: &Config, _error: Error) -> Outcome<RB> {
    if config.fail_open {
        Outcome::Call(None)
    } else {
        Outcome::Answer(status(StatusCode::SERVICE_UNAVAILABLE))
    }
}

/// `503 Service Unavailable` for a failed-closed refusal, with its `Retry-After`.
#[inline(never)]
fn unavailable<RB: Default>(decision: &Decision) -> Response<RB> {
    let mut response = status(StatusCode::SERVICE_UNAVAILABLE);
    write_retry_after(decision, true, response.headers_mut());
    response
}

/// The one place a check's result becomes an outcome: `each` is how the limits
/// reported they stand, `standing` how a lone reported grant stands.
#[inline]
pub(super) fn outcome<RB: Default>(
    config: &Arc<Config>,
    checked: Result<Decision, Error>,
    each: &mut Each,
    partition: Option<[u8; 8]>,
    standing: impl FnOnce(Decision) -> Decision,
) -> Outcome<RB> {
    let decision = match checked {
        Ok(decision) => decision,
        Err(error) => return failed(config, error),
    };
    // A failure policy's answer consulted no limit, so the fields would have
    // nothing true to say: an unchecked call goes through bare, as a failed check
    // does under `fail_open`, and a failed-closed refusal is the failed check's
    // `503`, with the time the store is left alone as its `Retry-After`.
    match decision.source() {
        Source::Unchecked => return Outcome::Call(None),
        Source::FailedClosed => return Outcome::Answer(unavailable(&decision)),
        _ => {}
    }
    match decision.verdict() {
        Verdict::Allowed if !config.headers.describes_grants() => Outcome::Call(None),
        Verdict::Allowed => {
            if each.len <= 1 {
                let lone = each.items(&decision)[0];
                let stands = standing(lone);
                if stands != lone {
                    *each = Each::new();
                    each.push(stands);
                }
            }
            Outcome::Call(Some(Described::boxed(config, decision, each, partition)))
        }
        Verdict::Denied if config.delay.is_some() => {
            Outcome::Refused(Described::boxed(config, decision, each, partition))
        }
        Verdict::Denied | Verdict::Never => {
            Outcome::Answer(config.refusal(&decision, each, partition.as_ref()))
        }
    }
}
