//! What an item or a request is charged: its key and its cost.

/// Says what one item (or request) is charged: the key it counts against and its
/// cost in permits.
///
/// Three shapes, so that the common cases need no closure:
/// * [`Each`]: every item costs 1, key `()` (a direct limiter);
/// * [`Weighed`]: a cost per item from a closure, key `()`;
/// * any closure `FnMut(&T) -> (K, u64)`: a key and a cost per item (a keyed limiter,
///   e.g. per target host).
///
/// A cost of 0 is free: every adapter lets that item (or request) through at once,
/// uncounted (see [`adapters`](crate::adapters)).
///
/// ```
/// use sluicegate::adapters::{Each, Weigh, Weighed};
/// assert_eq!(Each.weigh(&"anything"), ((), 1));
/// assert_eq!(Weighed(|s: &&str| s.len() as u64).weigh(&"four"), ((), 4));
/// let mut per_host = |url: &&str| (url.split('/').nth(2).unwrap_or("").to_owned(), 1);
/// assert_eq!(per_host.weigh(&"https://example.com/a"), ("example.com".to_owned(), 1));
/// ```
pub trait Weigh<T, K> {
    /// The key and the cost of `item`.
    fn weigh(&mut self, item: &T) -> (K, u64);
}

/// Every item costs one permit of a direct limiter.
///
/// ```
/// use sluicegate::adapters::{Each, Weigh};
/// assert_eq!(Each.weigh(&42), ((), 1));
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
/// a chunk, or writes that cost more than reads).
///
/// ```
/// use sluicegate::adapters::{Weigh, Weighed};
/// let mut by_len = Weighed(|v: &Vec<u8>| v.len() as u64);
/// assert_eq!(by_len.weigh(&vec![0; 3]), ((), 3));
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
