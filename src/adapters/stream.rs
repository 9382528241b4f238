//! A stream whose items are released at a limiter's pace.

use super::{Acquiring, Each, Permits, Weigh};
use crate::error::Error;
use futures::Stream;
use pin_project_lite::pin_project;
use std::fmt;
use std::pin::Pin;
use std::task::{ready, Context, Poll};
use std::time::Duration;

/// An item the limiter would not let through, with why: [`Error::Timeout`] past the
/// maximum wait, [`Error::Never`] for a cost above capacity, or a store's error. The
/// item comes back so that nothing is lost.
///
/// ```
/// use sluicegate::adapters::Rejected;
/// use sluicegate::Error;
/// let r = Rejected { item: "job", error: Error::Never { cost: 9 } };
/// assert!(r.to_string().starts_with("item refused by the rate limiter: a cost of 9"));
/// ```
#[derive(Clone, Debug, PartialEq)]
pub struct Rejected<T> {
    /// The item that was not let through.
    pub item: T,
    /// Why.
    pub error: Error,
}

impl<T> fmt::Display for Rejected<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "item refused by the rate limiter: {}", self.error)
    }
}

impl<T: fmt::Debug> std::error::Error for Rejected<T> {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        Some(&self.error)
    }
}

pin_project! {
    /// A [`Stream`] whose items are released at a limiter's pace: each item is taken
    /// from the inner stream, charged (its key and cost from a
    /// [weigher](super#weighers)), and yielded once the limiter grants it, as
    /// `Ok(item)`; an item the limiter refuses is yielded as `Err(`[`Rejected`]`)`
    /// and the stream goes on with the next.
    ///
    /// The adapter owns a [`Permits`] handle (a clone of the limiter), so it is
    /// `'static` when the inner stream is, and several adapters, or other callers, can
    /// share one limit. Waiting is the limiter's async acquire on its clock (virtual
    /// under a [`ManualClock`](crate::ManualClock)). One item waits at a time: the
    /// next is pulled from the inner stream only after the previous one was yielded.
    /// An item that costs 0 is free: yielded at once, uncounted.
    ///
    /// Dropping the adapter while an item waits gives that item's permits back (the
    /// item is dropped with it). An item that must wait costs one small allocation
    /// (its boxed acquire); one a direct limiter lets through at once costs none.
    ///
    /// ```
    /// use futures::{stream, StreamExt};
    /// use sluicegate::adapters::Throttled;
    /// use sluicegate::{clock::{Clock, ManualClock}, RateLimiter};
    ///
    /// let clock = ManualClock::new();
    /// let limiter = RateLimiter::bursty_with_clock(5.0, clock.clone()).unwrap();
    /// let mut paced = Throttled::new(stream::iter(1..=3), limiter);
    /// let mut released = Vec::new();
    /// futures::executor::block_on(async {
    ///     while let Some(item) = paced.next().await {
    ///         released.push((item.unwrap(), clock.now()));
    ///     }
    /// });
    /// // 5 per second: one item every 200 ms, the first at once.
    /// assert_eq!(released, [(1, 0), (2, 200_000_000), (3, 400_000_000)]);
    /// ```
    #[must_use = "streams do nothing unless polled"]
    pub struct Throttled<St, P, W = Each>
    where
        St: Stream,
    {
        #[pin]
        inner: St,
        permits: P,
        weigher: W,
        max_wait: Option<Duration>,
        held: Option<St::Item>,
        waiting: Option<Acquiring>,
    }
}

impl<St: Stream, P: Permits<Key = ()>> Throttled<St, P, Each> {
    /// Paces `stream` at one permit of the direct limiter `permits` per item.
    ///
    /// ```
    /// use futures::{stream, StreamExt};
    /// use sluicegate::adapters::Throttled;
    /// use sluicegate::{clock::ManualClock, RateLimiter};
    /// let limiter = RateLimiter::bursty_with_clock(100.0, ManualClock::new()).unwrap();
    /// let all: Vec<_> = futures::executor::block_on(Throttled::new(stream::iter(0..4), limiter).collect());
    /// assert_eq!(all.len(), 4);
    /// ```
    pub fn new(stream: St, permits: P) -> Self {
        Throttled::with_weigher(stream, permits, Each)
    }
}

impl<St: Stream, P: Permits, W: Weigh<St::Item, P::Key>> Throttled<St, P, W> {
    /// Paces `stream`, charging each item what `weigher` says: a cost
    /// ([`Weighed`](super::Weighed)) or a key and a cost (a closure
    /// `|item| (key, cost)`, for a keyed limiter).
    ///
    /// Items keep their order and wait one at a time, whatever their keys: an item
    /// whose own key has permits to spare still waits behind the one before it
    /// (head-of-line blocking), as `b.test/1` does below. For keys that should not
    /// wait for one another, throttle each key's items in a stream of their own
    /// and merge the streams (e.g. `futures::stream::select_all`).
    ///
    /// ```
    /// use futures::{stream, StreamExt};
    /// use sluicegate::adapters::Throttled;
    /// use sluicegate::{algorithms::SmoothBursty, clock::{Clock, ManualClock}, KeyedRateLimiter};
    /// let clock = ManualClock::new();
    /// let per_host = KeyedRateLimiter::with_clock(SmoothBursty::new(1.0).unwrap(), clock.clone());
    /// let urls = stream::iter(["a.test/1", "a.test/2", "b.test/1"]);
    /// let host = |url: &&str| (url.split('/').next().unwrap_or("").to_owned(), 1);
    /// let mut paced = Throttled::with_weigher(urls, per_host, host);
    /// let mut log = Vec::new();
    /// futures::executor::block_on(async {
    ///     while let Some(url) = paced.next().await {
    ///         log.push((url.unwrap(), clock.now() / 1_000_000_000));
    ///     }
    /// });
    /// // Each host has its own 1 per second, so b.test/1 could go at 0 s; it waits
    /// // behind a.test/2 all the same, which waits for a.test's next permit.
    /// assert_eq!(log, [("a.test/1", 0), ("a.test/2", 1), ("b.test/1", 1)]);
    /// ```
    pub fn with_weigher(stream: St, permits: P, weigher: W) -> Self {
        Throttled {
            inner: stream,
            permits,
            weigher,
            max_wait: None,
            held: None,
            waiting: None,
        }
    }

    /// Refuses an item at once, as `Err(Rejected { error: Error::Timeout { .. }, .. })`,
    /// when it would have to wait longer than `max_wait`; nothing is consumed for it.
    /// A zero `max_wait` lets through only what needs no wait.
    ///
    /// ```
    /// use futures::{stream, StreamExt};
    /// use sluicegate::adapters::Throttled;
    /// use sluicegate::{clock::ManualClock, Error, RateLimiter};
    /// use std::time::Duration;
    /// let limiter = RateLimiter::bursty_with_clock(1.0, ManualClock::new()).unwrap();
    /// let paced = Throttled::new(stream::iter([1, 2]), limiter).with_max_wait(Duration::from_millis(500));
    /// let out: Vec<_> = futures::executor::block_on(paced.collect());
    /// assert_eq!(out[0], Ok(1));
    /// let Err(refused) = &out[1] else { panic!() };
    /// assert_eq!((refused.item, &refused.error), (2, &Error::Timeout { needed: Duration::from_secs(1) }));
    /// ```
    pub fn with_max_wait(mut self, max_wait: Duration) -> Self {
        self.max_wait = Some(max_wait);
        self
    }

    /// The inner stream.
    ///
    /// ```
    /// use futures::{stream, Stream};
    /// use sluicegate::adapters::Throttled;
    /// use sluicegate::{clock::ManualClock, RateLimiter};
    /// let limiter = RateLimiter::bursty_with_clock(1.0, ManualClock::new()).unwrap();
    /// let paced = Throttled::new(stream::iter([7]), limiter);
    /// assert_eq!(paced.get_ref().size_hint(), (1, Some(1)));
    /// ```
    pub fn get_ref(&self) -> &St {
        &self.inner
    }

    /// Gives back the inner stream. An item waiting for its permits is dropped and
    /// its permits given back.
    ///
    /// ```
    /// use futures::stream;
    /// use sluicegate::adapters::Throttled;
    /// use sluicegate::{clock::ManualClock, RateLimiter};
    /// let limiter = RateLimiter::bursty_with_clock(1.0, ManualClock::new()).unwrap();
    /// let inner = Throttled::new(stream::iter([7]), limiter).into_inner();
    /// assert_eq!(futures::executor::block_on_stream(inner).collect::<Vec<_>>(), [7]);
    /// ```
    pub fn into_inner(self) -> St {
        self.inner
    }
}

impl<St, P, W> Stream for Throttled<St, P, W>
where
    St: Stream,
    P: Permits,
    W: Weigh<St::Item, P::Key>,
{
    type Item = Result<St::Item, Rejected<St::Item>>;

    fn poll_next(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        let mut this = self.project();
        loop {
            if let Some(waiting) = this.waiting.as_mut() {
                let granted = ready!(waiting.as_mut().poll(cx));
                *this.waiting = None;
                // `held` is always set while `waiting` is; a missing item yields nothing.
                if let Some(item) = this.held.take() {
                    return Poll::Ready(Some(match granted {
                        Ok(_) => Ok(item),
                        Err(error) => Err(Rejected { item, error }),
                    }));
                }
            }
            match ready!(this.inner.as_mut().poll_next(cx)) {
                None => return Poll::Ready(None),
                Some(item) => {
                    let (key, cost) = this.weigher.weigh(&item);
                    // A free item, or one the limiter lets through without a wait.
                    if cost == 0 || this.permits.try_now(&key, cost) == Some(true) {
                        return Poll::Ready(Some(Ok(item)));
                    }
                    *this.waiting = Some(this.permits.acquire(&key, cost, *this.max_wait));
                    *this.held = Some(item);
                }
            }
        }
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        let held = usize::from(self.held.is_some());
        let (low, high) = self.inner.size_hint();
        (
            low.saturating_add(held),
            high.and_then(|h| h.checked_add(held)),
        )
    }
}

impl<St, P, W> fmt::Debug for Throttled<St, P, W>
where
    St: Stream + fmt::Debug,
{
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        debug_adapter(
            f,
            "Throttled",
            &self.inner,
            self.max_wait,
            self.waiting.is_some(),
        )
    }
}

/// What both adapters show of themselves: the inner stream or sink, the maximum
/// wait, and whether an item is waiting for its permits (the wait itself is opaque).
pub(super) fn debug_adapter(
    f: &mut fmt::Formatter<'_>,
    name: &str,
    inner: &dyn fmt::Debug,
    max_wait: Option<Duration>,
    waiting: bool,
) -> fmt::Result {
    f.debug_struct(name)
        .field("inner", inner)
        .field("max_wait", &max_wait)
        .field("waiting", &waiting)
        .finish_non_exhaustive()
}
