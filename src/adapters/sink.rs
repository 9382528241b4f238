//! A sink whose items are sent on at a limiter's pace.

use super::{Acquiring, Each, Permits, Rejected, Weigh};
use futures::Sink;
use pin_project_lite::pin_project;
use std::fmt;
use std::pin::Pin;
use std::task::{ready, Context, Poll};
use std::time::Duration;

/// The error of a [`ThrottledSink`]: the limiter refused an item, or the inner sink
/// failed.
///
/// ```
/// use sluicegate::adapters::{sink::SinkError, Rejected};
/// use sluicegate::Error;
/// let e: SinkError<&str, std::io::Error> = SinkError::Refused(Rejected { item: "m", error: Error::Never { cost: 9 } });
/// assert!(e.to_string().starts_with("item refused by the rate limiter: a cost of 9"));
/// ```
#[derive(Debug)]
pub enum SinkError<T, E> {
    /// The limiter would not let the item through (timeout, never, store error); the
    /// sink is still usable.
    Refused(Rejected<T>),
    /// The inner sink's error.
    Inner(E),
}

impl<T, E: fmt::Display> fmt::Display for SinkError<T, E> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SinkError::Refused(rejected) => rejected.fmt(f),
            SinkError::Inner(error) => error.fmt(f),
        }
    }
}

impl<T: fmt::Debug, E: std::error::Error + 'static> std::error::Error for SinkError<T, E> {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            SinkError::Refused(rejected) => Some(&rejected.error),
            SinkError::Inner(error) => Some(error),
        }
    }
}

pin_project! {
    /// A [`Sink`] that sends each item on to the inner sink once a limiter grants it
    /// (its key and cost from a [weigher](super#weighers)).
    ///
    /// `start_send` holds the item; the next `poll_ready`, `poll_flush` or
    /// `poll_close` charges it, waits, and sends it on when it is granted. So `send(item).await` (which flushes) returns once the item has been
    /// paced and passed on, and `send_all` / `feed` pace a whole stream. A refused
    /// item (past the maximum wait, a cost above capacity) is returned in
    /// [`SinkError::Refused`] and the sink stays usable. An item that costs 0 is
    /// free: sent on at once, uncounted.
    ///
    /// The adapter owns a [`Permits`] handle. Dropping it while an item waits gives
    /// that item's permits back (the item is dropped, never sent).
    ///
    /// ```
    /// use futures::{channel::mpsc, SinkExt, StreamExt};
    /// use sluicegate::adapters::ThrottledSink;
    /// use sluicegate::{clock::{Clock, ManualClock}, RateLimiter};
    ///
    /// let clock = ManualClock::new();
    /// let limiter = RateLimiter::bursty_with_clock(4.0, clock.clone()).unwrap();
    /// let (tx, rx) = mpsc::unbounded();
    /// let mut paced = ThrottledSink::new(tx, limiter);
    /// let sent_at: Vec<u64> = futures::executor::block_on(async {
    ///     let mut at = Vec::new();
    ///     for n in 0..3 {
    ///         paced.send(n).await.unwrap();
    ///         at.push(clock.now());
    ///     }
    ///     at
    /// });
    /// assert_eq!(sent_at, [0, 250_000_000, 500_000_000]);
    /// drop(paced);
    /// assert_eq!(futures::executor::block_on(rx.collect::<Vec<_>>()), [0, 1, 2]);
    /// ```
    #[must_use = "sinks do nothing unless polled"]
    pub struct ThrottledSink<Si, T, P, W = Each>
    where
        P: Permits,
    {
        #[pin]
        inner: Si,
        permits: P,
        weigher: W,
        max_wait: Option<Duration>,
        held: Option<T>,
        // The held item's key and cost, until it is charged (when it is sent on).
        charge: Option<(P::Key, u64)>,
        waiting: Option<Acquiring>,
    }
}

impl<Si: Sink<T>, T, P: Permits<Key = ()>> ThrottledSink<Si, T, P, Each> {
    /// Paces `sink` at one permit of the direct limiter `permits` per item.
    ///
    /// ```
    /// use futures::{channel::mpsc, SinkExt};
    /// use sluicegate::adapters::ThrottledSink;
    /// use sluicegate::{clock::ManualClock, RateLimiter};
    /// let limiter = RateLimiter::bursty_with_clock(10.0, ManualClock::new()).unwrap();
    /// let (tx, _rx) = mpsc::unbounded::<u8>();
    /// let mut paced = ThrottledSink::new(tx, limiter);
    /// futures::executor::block_on(paced.send(1)).unwrap();
    /// ```
    pub fn new(sink: Si, permits: P) -> Self {
        ThrottledSink::with_weigher(sink, permits, Each)
    }
}

impl<Si: Sink<T>, T, P: Permits, W: Weigh<T, P::Key>> ThrottledSink<Si, T, P, W> {
    /// Paces `sink`, charging each item what `weigher` says (a
    /// [`Weighed`](super::Weighed) cost, or `|item| (key, cost)` for a keyed limiter).
    ///
    /// ```
    /// use futures::{channel::mpsc, SinkExt};
    /// use sluicegate::adapters::{ThrottledSink, Weighed};
    /// use sluicegate::{clock::{Clock, ManualClock}, RateLimiter};
    /// let clock = ManualClock::new();
    /// // 1000 bytes per second.
    /// let limiter = RateLimiter::bursty_with_clock(1000.0, clock.clone()).unwrap();
    /// let (tx, _rx) = mpsc::unbounded::<Vec<u8>>();
    /// let mut paced = ThrottledSink::with_weigher(tx, limiter, Weighed(|chunk: &Vec<u8>| chunk.len() as u64));
    /// futures::executor::block_on(async {
    ///     paced.send(vec![0; 500]).await.unwrap(); // free (pay later)...
    ///     paced.send(vec![0; 10]).await.unwrap(); // ...this one pays 0.5 s for it
    /// });
    /// assert_eq!(clock.now(), 500_000_000);
    /// ```
    pub fn with_weigher(sink: Si, permits: P, weigher: W) -> Self {
        ThrottledSink {
            inner: sink,
            permits,
            weigher,
            max_wait: None,
            held: None,
            charge: None,
            waiting: None,
        }
    }

    /// Refuses an item at once, in [`SinkError::Refused`] with
    /// [`Error::Timeout`](crate::Error::Timeout), when it would wait longer than
    /// `max_wait`; nothing is consumed for it and the sink stays usable.
    ///
    /// ```
    /// use futures::{channel::mpsc, SinkExt};
    /// use sluicegate::adapters::{sink::SinkError, ThrottledSink};
    /// use sluicegate::{clock::ManualClock, Error, RateLimiter};
    /// use std::time::Duration;
    /// let limiter = RateLimiter::bursty_with_clock(1.0, ManualClock::new()).unwrap();
    /// let (tx, _rx) = mpsc::unbounded::<u8>();
    /// let mut paced = ThrottledSink::new(tx, limiter).with_max_wait(Duration::ZERO);
    /// futures::executor::block_on(async {
    ///     paced.send(1).await.unwrap();
    ///     let Err(SinkError::Refused(r)) = paced.send(2).await else { panic!() };
    ///     assert_eq!((r.item, r.error), (2, Error::Timeout { needed: Duration::from_secs(1) }));
    /// });
    /// ```
    pub fn with_max_wait(mut self, max_wait: Duration) -> Self {
        self.max_wait = Some(max_wait);
        self
    }

    /// The inner sink.
    ///
    /// ```
    /// use futures::channel::mpsc;
    /// use sluicegate::adapters::ThrottledSink;
    /// use sluicegate::{clock::ManualClock, RateLimiter};
    /// let limiter = RateLimiter::bursty_with_clock(1.0, ManualClock::new()).unwrap();
    /// let (tx, _rx) = mpsc::unbounded::<u8>();
    /// let paced = ThrottledSink::new(tx, limiter);
    /// assert!(!paced.get_ref().is_closed());
    /// ```
    pub fn get_ref(&self) -> &Si {
        &self.inner
    }

    /// Gives back the inner sink. An item waiting for its permits is dropped, never
    /// sent, and its permits given back.
    ///
    /// ```
    /// use futures::channel::mpsc;
    /// use sluicegate::adapters::ThrottledSink;
    /// use sluicegate::{clock::ManualClock, RateLimiter};
    /// let limiter = RateLimiter::bursty_with_clock(1.0, ManualClock::new()).unwrap();
    /// let (tx, _rx) = mpsc::unbounded::<u8>();
    /// let tx = ThrottledSink::new(tx, limiter).into_inner();
    /// assert!(!tx.is_closed());
    /// ```
    pub fn into_inner(self) -> Si {
        self.inner
    }
}

impl<Si, T, P, W> ThrottledSink<Si, T, P, W>
where
    Si: Sink<T>,
    P: Permits,
    W: Weigh<T, P::Key>,
{
    /// Drives the held item, if any, through its wait and into the inner sink.
    fn poll_send_held(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Result<(), SinkError<T, Si::Error>>> {
        let mut this = self.project();
        if let Some((key, cost)) = this.charge.take() {
            // Charged when it is about to go: at once if the limiter lets it through
            // without a wait, else through a (boxed) wait; a free item not at all.
            if cost != 0 && this.permits.try_now(&key, cost) != Some(true) {
                *this.waiting = Some(this.permits.acquire(&key, cost, *this.max_wait));
            }
        }
        if let Some(waiting) = this.waiting.as_mut() {
            let granted = ready!(waiting.as_mut().poll(cx));
            *this.waiting = None;
            if let Err(error) = granted {
                return Poll::Ready(match this.held.take() {
                    Some(item) => Err(SinkError::Refused(Rejected { item, error })),
                    None => Ok(()),
                });
            }
        }
        // Granted (or nothing held): the item goes on as soon as the inner sink
        // takes it. Its permits are spent even if the inner sink then fails.
        if this.held.is_some() {
            ready!(this.inner.as_mut().poll_ready(cx)).map_err(SinkError::Inner)?;
            if let Some(item) = this.held.take() {
                this.inner
                    .as_mut()
                    .start_send(item)
                    .map_err(SinkError::Inner)?;
            }
        }
        Poll::Ready(Ok(()))
    }

    /// Sends the held item first, then answers `step` (the inner sink's
    /// `poll_ready`, `poll_flush` or `poll_close`): nothing goes past an item
    /// still waiting for its permits.
    fn then_inner(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        step: impl FnOnce(Pin<&mut Si>, &mut Context<'_>) -> Poll<Result<(), Si::Error>>,
    ) -> Poll<Result<(), SinkError<T, Si::Error>>> {
        ready!(self.as_mut().poll_send_held(cx))?;
        step(self.project().inner, cx).map_err(SinkError::Inner)
    }
}

impl<Si, T, P, W> Sink<T> for ThrottledSink<Si, T, P, W>
where
    Si: Sink<T>,
    P: Permits,
    W: Weigh<T, P::Key>,
{
    type Error = SinkError<T, Si::Error>;

    fn poll_ready(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.then_inner(cx, Si::poll_ready)
    }

    fn start_send(self: Pin<&mut Self>, item: T) -> Result<(), Self::Error> {
        let this = self.project();
        *this.charge = Some(this.weigher.weigh(&item));
        *this.held = Some(item);
        Ok(())
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.then_inner(cx, Si::poll_flush)
    }

    fn poll_close(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.then_inner(cx, Si::poll_close)
    }
}

impl<Si: fmt::Debug, T, P: Permits, W> fmt::Debug for ThrottledSink<Si, T, P, W> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let waiting = self.waiting.is_some();
        super::stream::debug_adapter(f, "ThrottledSink", &self.inner, self.max_wait, waiting)
    }
}
