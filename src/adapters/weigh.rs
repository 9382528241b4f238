//! What an item or a request is charged: its key and its cost.
//!
//! Every adapter takes a *weigher*, in one of three shapes, so that the common
//! cases need no closure:
//! * [`Each`]: every item costs 1, key `()` (a direct limiter);
//! * [`Weighed`]: a cost per item from a closure, key `()`;
//! * any closure `FnMut(&T) -> (K, u64)`: a key and a cost per item (a keyed
//!   limiter, e.g. per target host).
//!
//! The server layer adds a fourth, `KeyOnly` (a key per request, each costing 1),
//! built by `ServerLayer::keyed`.
//!
//! The trait that reads a weigher, [`Weigh`], is public in this private module: the
//! adapters' bounds name it, and no other crate can, so the shapes above are every
//! weigher there is and the adapters are the only callers.

/// Reads a weigher: the key and the cost of one item (or request). Implemented by
/// [`Each`], [`Weighed`], every closure `FnMut(&T) -> (K, u64)` and the server
/// layer's `KeyOnly`; unnameable outside the crate, so not implementable there.
pub trait Weigh<T, K> {
    /// The key and the cost of `item`.
    fn weigh(&mut self, item: &T) -> (K, u64);
}

/// Every item costs one permit of a direct limiter: the weigher of the adapters'
/// `new`.
///
/// ```
/// use futures::{stream, StreamExt};
/// use sluicegate::adapters::{Each, Throttled};
/// use sluicegate::{algorithms::FixedWindow, clock::ManualClock, RateLimiter};
/// use std::time::Duration;
/// let window = FixedWindow::new(10, Duration::from_secs(60)).unwrap();
/// let limiter = RateLimiter::with_clock(window, ManualClock::new());
/// let items = stream::iter(["a", "bb", "ccc"]);
/// let paced = Throttled::with_weigher(items, limiter.clone(), Each);
/// assert_eq!(futures::executor::block_on(paced.collect::<Vec<_>>()).len(), 3);
/// // Three items, three permits: 7 of the 10 are left.
/// assert_eq!(limiter.peek(7).map(|d| d.is_allowed()), Ok(true));
/// assert_eq!(limiter.peek(8).map(|d| d.is_allowed()), Ok(false));
/// ```
#[derive(Clone, Copy, Debug, Default)]
pub struct Each;

impl<T> Weigh<T, ()> for Each {
    #[inline]
    fn weigh(&mut self, _item: &T) -> ((), u64) {
        ((), 1)
    }
}

/// Each item costs what the closure says, from a direct limiter (e.g. the bytes of
/// a chunk, or writes that cost more than reads). A cost of 0 is free: the item
/// passes at once, uncounted (see [`adapters`](crate::adapters)).
///
/// ```
/// use futures::{stream, StreamExt};
/// use sluicegate::adapters::{Throttled, Weighed};
/// use sluicegate::{algorithms::FixedWindow, clock::ManualClock, RateLimiter};
/// use std::time::Duration;
/// let window = FixedWindow::new(10, Duration::from_secs(60)).unwrap();
/// let limiter = RateLimiter::with_clock(window, ManualClock::new());
/// let chunks = stream::iter([vec![0u8; 3], vec![], vec![0u8; 4]]);
/// let by_len = Weighed(|chunk: &Vec<u8>| chunk.len() as u64);
/// let paced = Throttled::with_weigher(chunks, limiter.clone(), by_len);
/// assert_eq!(futures::executor::block_on(paced.collect::<Vec<_>>()).len(), 3);
/// // 3 + 0 (free) + 4 bytes: 3 of the 10 permits are left.
/// assert_eq!(limiter.peek(3).map(|d| d.is_allowed()), Ok(true));
/// assert_eq!(limiter.peek(4).map(|d| d.is_allowed()), Ok(false));
/// ```
///
/// For a keyed limiter, pass a closure giving the key and the cost:
///
/// ```
/// use futures::{stream, StreamExt};
/// use sluicegate::adapters::Throttled;
/// use sluicegate::{algorithms::FixedWindow, clock::ManualClock, KeyedRateLimiter};
/// use std::time::Duration;
/// let window = FixedWindow::new(10, Duration::from_secs(60)).unwrap();
/// let per_host = KeyedRateLimiter::with_clock(window, ManualClock::new());
/// let urls = stream::iter(["a.test/1", "a.test/22", "b.test/333"]);
/// let host_and_len = |url: &&str| {
///     let (host, path) = url.split_once('/').unwrap_or((url, ""));
///     (host.to_owned(), path.len() as u64)
/// };
/// let paced = Throttled::with_weigher(urls, per_host.clone(), host_and_len);
/// assert_eq!(futures::executor::block_on(paced.collect::<Vec<_>>()).len(), 3);
/// // a.test paid 1 + 2, b.test 3.
/// assert_eq!(per_host.peek(&"a.test".to_owned(), 7).map(|d| d.is_allowed()), Ok(true));
/// assert_eq!(per_host.peek(&"a.test".to_owned(), 8).map(|d| d.is_allowed()), Ok(false));
/// assert_eq!(per_host.peek(&"b.test".to_owned(), 8).map(|d| d.is_allowed()), Ok(false));
/// ```
#[derive(Clone, Copy, Debug)]
pub struct Weighed<F>(pub F);

impl<T, F: FnMut(&T) -> u64> Weigh<T, ()> for Weighed<F> {
    #[inline]
    fn weigh(&mut self, item: &T) -> ((), u64) {
        ((), (self.0)(item))
    }
}

impl<T, K, F: FnMut(&T) -> (K, u64)> Weigh<T, K> for F {
    #[inline]
    fn weigh(&mut self, item: &T) -> (K, u64) {
        self(item)
    }
}
