//! The store contract: where the state of each key lives, and how one algorithm step
//! is applied to it.
//!
//! # The model
//!
//! A keyed limiter is one [algorithm](crate::algorithms) (a configuration) applied
//! to many states, one per key. A [`Store`] owns those states and applies one
//! [`Operation`] to the states of one call's keys *as one atomic action*:
//!
//! ```text
//!   caller ──(algorithm, [key₁, key₂], now, Reserve{cost, max_wait})──▶ store
//!                                                                       │ atomically:
//!            state(key₁) ─reserve─▶ d₁      all allowed?  yes: commit both states
//!            state(key₂) ─reserve─▶ d₂                    no:  change nothing
//!   caller ◀──────────────────────────[d₁, d₂]─────────────┘
//! ```
//!
//! The trait passes *what to do* (the algorithm's configuration, the keys, the
//! step), never a closure over the store's memory, so a store can run the step
//! wherever its states are:
//!
//! * [`MemoryStore`](super::MemoryStore) runs the algorithm's Rust step functions on
//!   its own sharded table, under the shard's lock.
//! * A remote store (Redis) runs the same step *server-side*, in one round trip: a
//!   script per algorithm (its implementation bound, e.g. `A: RedisAlgorithm`, is the
//!   remote store's business, not this trait's), called with every key of the call in
//!   `KEYS` and the configuration, step and time in `ARGV`. A multi-limit set is one
//!   algorithm, so one call is one round trip whatever the number of limits and keys.
//!
//! # The contract
//!
//! * **Atomicity.** [`Store::apply`] is linearizable per call: no other step on any
//!   of the call's keys interleaves with it. An [`Operation::Reserve`] commits the new
//!   state of *every* key if the algorithm allows the call for every key, and
//!   changes *nothing* otherwise (all-or-nothing across keys; across limits it is the
//!   algorithm's own rule, which a multi-limit set also makes all-or-nothing). A key
//!   that appears twice in one call is charged twice, in order.
//! * **Now.** `now` is the caller's reading of its [`Clock`](crate::clock::Clock), in
//!   nanoseconds since that clock's origin. A store runs the step at `now` unless it
//!   documents its own time source: a remote store shared by many machines should
//!   read the server's clock instead by default (Redis `TIME`), so that clients with
//!   skewed clocks agree, and accept the caller's `now` only when configured to (for
//!   tests). Either way, every duration in the returned decisions is *relative* to the
//!   time the step ran, so callers never mix the two timelines, and a time that
//!   appears to go backwards never grants permits (the algorithms' own rule).
//! * **New keys.** A key the store holds no state for starts from
//!   [`initial_state(0)`](crate::algorithms::Algorithm::initial_state): as if it had
//!   existed, untouched, since the origin of the store's time. For every algorithm
//!   whose initial state is also its fully replenished state (windows, logs, leaky
//!   bucket, the warming-up limiter's cold start) that is the same as starting at
//!   `now`. For [`SmoothBursty`](crate::algorithms::SmoothBursty), whose Guava
//!   initial state is *empty* while its replenished state is *full*, it means a new
//!   key gets the full burst an idle client would have saved (once the clock has run
//!   for `max_burst`). That is what per-client limiting wants, and it is what makes
//!   forgetting idle keys invisible (next point). The direct limiter keeps Guava's
//!   empty start.
//! * **Expiry.** A store may forget the state of a key at `now` once
//!   [`is_replenished`](crate::algorithms::Algorithm::is_replenished) holds: starting
//!   again from the new-key state changes no later decision. A remote store expresses
//!   the same thing as a key expiry equal to the decision's
//!   [`reset_after`](crate::Decision::reset_after). Forgetting is never required for
//!   correctness, only for memory.
//! * **Failures.** A store that can fail (network, capacity) returns a typed
//!   [`Error`] and never panics. A failed step says whether it may have been applied
//!   ([`Error::Store`] carries an [`Applied`](crate::Applied): `No` when the request
//!   was never sent or was refused before running, `Unknown` when it was sent and no
//!   answer came back) and keeps the underlying error as its
//!   [`source`](std::error::Error::source). A remote store never retries a step
//!   whose outcome is unknown (the call could count twice).
//!   [`MemoryStore`](super::MemoryStore) fails only when given a key cap and full
//!   ([`Error::StoreFull`], nothing applied).
//! * **Keys.** The in-memory store takes any `Hash + Eq + Clone` key. A remote
//!   store needs text: keys render with [`RenderKey`] (every `Display` type does),
//!   and a remote store must keep the states of one key under one hash tag (Redis
//!   Cluster places keys by the text inside `{…}`), e.g. `rl:{user:42}:<limit>`.
//!   A store of keys `K` is a `Store<Q, A>` for `K` itself and for the form `K`
//!   borrows as (`Q: ToOwned<Owned = K>`: `str` for `String`), naming one state
//!   for both (they hash, compare and render alike), so a single-key call takes
//!   either; a multi-key call takes sized keys (`apply` and its kin require
//!   `K: Sized`).

use crate::algorithms::{Algorithm, Decision, Receipt, Report};
use crate::clock::Nanos;
use crate::error::Error;
use std::fmt::{self, Write};
use std::future::Future;
use std::pin::Pin;

/// What a [`Store`] does to the state of every key of a call: one algorithm step
/// (reserve, peek or cancel).
///
/// ```
/// use sluicegate::stores::Operation;
/// let step = Operation::Reserve { cost: 2, max_wait: 0 };
/// assert!(matches!(step, Operation::Reserve { cost: 2, .. }));
/// ```
#[derive(Clone, Copy, Debug)]
pub enum Operation<'a> {
    /// [`Algorithm::reserve`] on every key; committed only if allowed for all.
    Reserve {
        /// Permits asked for (at least 1).
        cost: u64,
        /// How long the caller is willing to wait, in nanoseconds (`u64::MAX`: for
        /// ever; 0: not at all).
        max_wait: Nanos,
    },
    /// [`Algorithm::peek`]: the decisions a zero-wait reserve would give, changing
    /// nothing and creating no state.
    Peek {
        /// Permits asked for (at least 1).
        cost: u64,
    },
    /// [`Algorithm::cancel`]: gives back the grants of an earlier reserve whose
    /// caller never acted (one receipt per key, in the same order). Keys the store
    /// no longer holds have nothing to give back. Answers nothing: the output is
    /// left as it was.
    Cancel {
        /// The per-key receipts the reserve returned.
        receipts: &'a [Receipt],
        /// When the caller would have acted, in the same time as `now`.
        acts_at: Nanos,
    },
}

/// The future of [`Store::apply_key_each_async`]: the key's decision and receipt,
/// and how every limit stands after the step (one decision per limit, in order),
/// or the step's error. Boxed, `Send` and `'static`: it borrows neither the store
/// nor the key, so it may be moved to another thread or task.
///
/// ```
/// use sluicegate::algorithms::FixedWindow;
/// use sluicegate::stores::{MemoryStore, Operation, Reporting, Store};
/// use std::time::Duration;
/// let window = FixedWindow::new(1, Duration::from_secs(1)).unwrap();
/// let store: MemoryStore<&str, FixedWindow> = MemoryStore::new();
/// let take = Operation::Reserve { cost: 1, max_wait: 0 };
/// let reporting: Reporting = store.apply_key_each_async(&window, &"k", 0, take);
/// let reported = std::thread::spawn(move || futures::executor::block_on(reporting));
/// let ((decision, _receipt), each) = reported.join().unwrap().unwrap();
/// assert!(decision.is_allowed());
/// assert_eq!(each.len(), 1); // one limit
/// assert_eq!(each[0].remaining(), 0);
/// ```
pub type Reporting =
    Pin<Box<dyn Future<Output = Result<((Decision, Receipt), Vec<Decision>), Error>> + Send>>;

/// Where the per-key states of a keyed limiter live. See the [module docs](self) for
/// the contract (atomicity, time, new keys, expiry, failures).
///
/// `K` is the key type, `A` the algorithm. A store implements this for the keys and
/// algorithms it can handle: the in-memory store for any `Hash + Eq` key and any
/// algorithm; a remote store for keys that [render](RenderKey) and algorithms it has a
/// server-side script for.
///
/// ```
/// use sluicegate::algorithms::{Decision, Receipt, SmoothBursty};
/// use sluicegate::stores::{MemoryStore, Operation, Store};
/// let bursty = SmoothBursty::new(1.0).unwrap();
/// let store: MemoryStore<&str, SmoothBursty> = MemoryStore::new();
/// let mut out = [(Decision::never(0, 0, 0), Receipt::NONE)];
/// store.apply(&bursty, &["a"], 0, Operation::Reserve { cost: 1, max_wait: 0 }, &mut out).unwrap();
/// assert!(out[0].0.is_allowed());
/// ```
pub trait Store<K: ?Sized, A: Algorithm>: Send + Sync {
    /// The future of [`apply_async`](Store::apply_async). A store that never waits
    /// (in memory) answers with a ready future.
    type Pending: Future<Output = Result<Vec<(Decision, Receipt)>, Error>> + Send + 'static;

    /// Applies `step` to the states of `keys` at `now`, atomically, writing one
    /// decision and its [`Receipt`] per key into `out` (same order; `out.len()` must
    /// equal `keys.len()`). An empty `keys` does nothing. A reserve that any key
    /// refuses commits no key's state (see the [contract](self)).
    ///
    /// # Errors
    /// A store-specific typed error ([`Error::StoreFull`], [`Error::Store`]); the
    /// states are then unchanged, or, for an [`Error::Store`] whose
    /// [`applied`](crate::StoreError::applied) is `Unknown`, possibly changed. The
    /// crate's stores refuse an `out` of another length with
    /// [`Error::InvalidCount`], before running anything.
    ///
    /// ```
    /// use sluicegate::algorithms::{Decision, FixedWindow, Receipt};
    /// use sluicegate::stores::{MemoryStore, Operation, Store};
    /// use sluicegate::Error;
    /// use std::time::Duration;
    /// let window = FixedWindow::new(1, Duration::from_secs(1)).unwrap();
    /// let store: MemoryStore<&str, FixedWindow> = MemoryStore::new();
    /// let take = Operation::Reserve { cost: 1, max_wait: 0 };
    /// let mut out = vec![(Decision::never(0, 0, 0), Receipt::NONE); 2];
    /// store.apply(&window, &["a", "b"], 0, take, &mut out).unwrap();
    /// assert!(out.iter().all(|(d, _)| d.is_allowed()));
    /// store.apply(&window, &["b", "c"], 0, take, &mut out).unwrap();
    /// assert!(!out[0].0.is_allowed()); // "b" is spent, so nothing is committed...
    /// store.apply(&window, &["c"], 0, take, &mut out[..1]).unwrap();
    /// assert!(out[0].0.is_allowed()); // ...and "c" still has its permit
    /// let wrong = store.apply(&window, &["d"], 0, take, &mut out); // 2 slots, 1 key
    /// assert!(matches!(wrong, Err(Error::InvalidCount { .. })));
    /// ```
    fn apply(
        &self,
        algorithm: &A,
        keys: &[K],
        now: Nanos,
        step: Operation<'_>,
        out: &mut [(Decision, Receipt)],
    ) -> Result<(), Error>
    where
        K: Sized;

    /// [`apply`](Store::apply) for a single key, answered in the caller's
    /// [`Report`]: the hot path of a keyed limiter. A try reads
    /// `Result<(), Decision>` (`Ok` if granted, otherwise the refusal in full; a
    /// cost above what the limit can ever hold is refused as never), a check the
    /// [`Decision`], a reservation the decision with its [`Receipt`]; the state
    /// changes the same way whatever the report, and a new key is kept only if
    /// granted. The in-memory store runs the algorithm's step in the caller's
    /// report, so that a try does not describe its grant.
    ///
    /// `key` may be a borrowed form of the keys a store holds (`str` for `String`
    /// keys, as with `HashMap::get`), which is why this method takes no slice and
    /// [`apply`](Store::apply) is for sized keys only. A store of sized keys can
    /// answer it by `apply` on `std::slice::from_ref(key)` with a one-slot
    /// output, reporting the slot with [`Report::decided`].
    ///
    /// # Errors
    /// As [`apply`](Store::apply).
    ///
    /// ```
    /// use sluicegate::algorithms::FixedWindow;
    /// use sluicegate::stores::{MemoryStore, Operation, Store};
    /// use sluicegate::Decision;
    /// use std::time::Duration;
    /// let window = FixedWindow::new(1, Duration::from_secs(1)).unwrap();
    /// let store: MemoryStore<&str, FixedWindow> = MemoryStore::new();
    /// let take = Operation::Reserve { cost: 1, max_wait: 0 };
    /// let taken: Result<(), Decision> = store.apply_key(&window, &"k", 0, take).unwrap();
    /// assert!(taken.is_ok());
    /// let refusal: Decision = store.apply_key(&window, &"k", 0, take).unwrap();
    /// assert_eq!(refusal.retry_after(), Duration::from_secs(1));
    /// ```
    fn apply_key<R: Report>(
        &self,
        algorithm: &A,
        key: &K,
        now: Nanos,
        step: Operation<'_>,
    ) -> Result<R, Error>;

    /// [`apply_key`](Store::apply_key) of an [`Operation::Reserve`], also telling `each`
    /// how every limit of the algorithm stands after the step, as
    /// [`Algorithm::reserve_each`] does (one decision per limit of a set, a nested
    /// set's limits in its place). The
    /// in-memory store reports every limit under the same lock as the step, the
    /// Redis store in the same round trip; the default, for a store that cannot,
    /// reports the combined decision once. Any other step reports its one
    /// decision.
    ///
    /// # Errors
    /// As [`apply`](Store::apply). A step that fails with [`Error::Store`] has
    /// reported nothing (a remote store reports from the reply it got), so a
    /// caller that answers such a failure some other way reports only its own
    /// answer; after any other error, what was reported is to be ignored.
    ///
    /// ```
    /// use sluicegate::algorithms::{AllOf, FixedWindow};
    /// use sluicegate::stores::{MemoryStore, Operation, Store};
    /// use std::time::Duration;
    /// let set = AllOf::new((
    ///     FixedWindow::new(5, Duration::from_secs(1)).unwrap(),
    ///     FixedWindow::new(50, Duration::from_secs(60)).unwrap(),
    /// ));
    /// let store: MemoryStore<&str, _> = MemoryStore::new();
    /// let mut left = Vec::new();
    /// let step = Operation::Reserve { cost: 1, max_wait: 0 };
    /// store.apply_key_each(&set, &"k", 0, step, &mut |d| left.push(d.remaining())).unwrap();
    /// assert_eq!(left, [4, 49]);
    /// ```
    fn apply_key_each(
        &self,
        algorithm: &A,
        key: &K,
        now: Nanos,
        step: Operation<'_>,
        each: &mut dyn FnMut(Decision),
    ) -> Result<(Decision, Receipt), Error> {
        let answer: (Decision, Receipt) = self.apply_key(algorithm, key, now, step)?;
        each(answer.0);
        Ok(answer)
    }

    /// [`apply_key_each`](Store::apply_key_each) without blocking the calling
    /// task, as [`apply_async`](Store::apply_async) is `apply`: the future, which
    /// borrows nothing, resolves with the key's decision and receipt and how every
    /// limit stands, in order. A remote store runs the step and the report in the
    /// same round trip (the Redis store does). The default reports the combined
    /// decision once.
    ///
    /// # Errors
    /// As [`apply`](Store::apply), when the future resolves.
    ///
    /// ```
    /// use sluicegate::algorithms::{AllOf, FixedWindow};
    /// use sluicegate::stores::{MemoryStore, Operation, Store};
    /// use std::time::Duration;
    /// let set = AllOf::new((
    ///     FixedWindow::new(5, Duration::from_secs(1)).unwrap(),
    ///     FixedWindow::new(50, Duration::from_secs(60)).unwrap(),
    /// ));
    /// let store: MemoryStore<&str, _> = MemoryStore::new();
    /// let step = Operation::Reserve { cost: 1, max_wait: 0 };
    /// let reporting = store.apply_key_each_async(&set, &"k", 0, step);
    /// let (answer, each) = futures::executor::block_on(reporting).unwrap();
    /// assert!(answer.0.is_allowed());
    /// assert_eq!(each.iter().map(|d| d.remaining()).collect::<Vec<_>>(), [4, 49]);
    /// ```
    fn apply_key_each_async(
        &self,
        algorithm: &A,
        key: &K,
        now: Nanos,
        step: Operation<'_>,
    ) -> Reporting
    where
        K: Sized,
    {
        let pending = self.apply_async(algorithm, std::slice::from_ref(key), now, step);
        Box::pin(async move {
            let answer = pending.await?.into_iter().next().unwrap_or_else(blank);
            let decision = answer.0;
            Ok((answer, vec![decision]))
        })
    }

    /// True if [`apply`](Store::apply) answers at once, waiting on nothing but
    /// locks in this process (the in-memory store), so that an async caller may
    /// call it on its task instead of going through
    /// [`apply_async`](Store::apply_async)'s future. The default, `false`, is right
    /// for a store that waits on a network (Redis) and for any store that does not
    /// say; a store that wraps another answers as the inner one does.
    ///
    /// ```
    /// use sluicegate::algorithms::SmoothBursty;
    /// use sluicegate::stores::{MemoryStore, Store};
    /// assert!(<MemoryStore<u64, SmoothBursty> as Store<u64, SmoothBursty>>::ANSWERS_AT_ONCE);
    /// ```
    const ANSWERS_AT_ONCE: bool = false;

    /// [`apply`](Store::apply) without blocking the calling task: a remote store
    /// sends its request at once and the future resolves with the reply, one
    /// decision and receipt per key. Everything the future needs is taken
    /// (rendered, copied) before this returns, so it borrows nothing.
    ///
    /// # Errors
    /// As [`apply`](Store::apply), when the future resolves.
    ///
    /// ```
    /// use sluicegate::algorithms::FixedWindow;
    /// use sluicegate::stores::{MemoryStore, Operation, Store};
    /// use std::time::Duration;
    /// let window = FixedWindow::new(1, Duration::from_secs(1)).unwrap();
    /// let store: MemoryStore<String, FixedWindow> = MemoryStore::new();
    /// let keys = vec!["a".to_owned(), "b".to_owned()];
    /// let pending = store.apply_async(&window, &keys, 0, Operation::Reserve { cost: 1, max_wait: 0 });
    /// drop(keys); // the future borrows nothing
    /// let answers = futures::executor::block_on(pending).unwrap();
    /// assert_eq!(answers.len(), 2);
    /// assert!(answers.iter().all(|(d, _)| d.is_allowed()));
    /// // A cost above what the limit can ever hold is answered never.
    /// let peek = store.apply_async(&window, &["c".to_owned()], 0, Operation::Peek { cost: 2 });
    /// assert!(futures::executor::block_on(peek).unwrap()[0].0.is_never());
    /// ```
    fn apply_async(
        &self,
        algorithm: &A,
        keys: &[K],
        now: Nanos,
        step: Operation<'_>,
    ) -> Self::Pending
    where
        K: Sized;

    /// Gives back the grants behind `receipts` (one per key, as
    /// [`Operation::Cancel`]) *without blocking the caller*: it may be called from
    /// `Drop`, on an executor thread. A store that never waits (in memory) applies
    /// it at once. A remote store starts the request and returns; its outcome is
    /// not reported, and should it fail, the permits simply stay taken (the safe
    /// direction: a lost cancel never grants more than the limit). Cancels reach
    /// the states in the order they were given: by the cancel rule a grant gives
    /// back only what later grants leave, so the async keyed limiter gives back the
    /// latest of several abandoned grants first (see
    /// [`AsyncKeyedRateLimiter`](crate::AsyncKeyedRateLimiter)), and a store that
    /// reordered them would keep permits taken. For the same reason a later call of
    /// the same store must not overtake them: a request made right after others
    /// were abandoned would count as a grant after theirs and leave them nothing
    /// to give back. (The Redis store's steps wait for the cancels given before
    /// them, at most the response timeout.)
    ///
    /// ```
    /// use sluicegate::algorithms::FixedWindow;
    /// use sluicegate::stores::{MemoryStore, Operation, Store};
    /// use sluicegate::Decision;
    /// use std::time::Duration;
    /// let window = FixedWindow::new(1, Duration::from_secs(1)).unwrap();
    /// let store: MemoryStore<&str, FixedWindow> = MemoryStore::new();
    /// let take = Operation::Reserve { cost: 1, max_wait: 0 };
    /// let (granted, receipt): (Decision, _) = store.apply_key(&window, &"k", 0, take).unwrap();
    /// assert!(granted.is_allowed());
    /// let again: Decision = store.apply_key(&window, &"k", 0, take).unwrap();
    /// assert!(!again.is_allowed());
    /// // Cancelled at the instant the grant acts: the window gets its permit back.
    /// store.cancel_detached(&window, &["k"], 0, &[receipt], 0);
    /// let after: Decision = store.apply_key(&window, &"k", 0, take).unwrap();
    /// assert!(after.is_allowed());
    /// ```
    fn cancel_detached(
        &self,
        algorithm: &A,
        keys: &[K],
        now: Nanos,
        receipts: &[Receipt],
        acts_at: Nanos,
    ) where
        K: Sized;

    /// A number naming `key`'s state in this store, by which the async keyed
    /// limiter tells apart the waits of different keys when it gives back waits
    /// abandoned together (see [`AsyncKeyedRateLimiter`](crate::AsyncKeyedRateLimiter)).
    /// The same key must always answer the same number; different keys should
    /// answer different numbers (a 64-bit hash of the key will do). Keys that share
    /// a number share one record of waits: an abandoned wait on one may then wait
    /// for a wait on the other, and give back less, never more. `None`, the
    /// default, says the store cannot tell: each abandoned wait is then cancelled
    /// alone, at once, by Go's rule. The in-memory and Redis stores answer.
    ///
    /// ```
    /// use sluicegate::algorithms::SmoothBursty;
    /// use sluicegate::stores::{MemoryStore, Store};
    /// let store: MemoryStore<&str, SmoothBursty> = MemoryStore::new();
    /// let id = |key| Store::<&str, SmoothBursty>::key_id(&store, &key);
    /// assert_eq!(id("alice"), id("alice"));
    /// assert_ne!(id("alice"), id("bob"));
    /// assert!(id("alice").is_some());
    /// ```
    fn key_id(&self, key: &K) -> Option<u64> {
        let _ = key;
        None
    }
}

/// Renders a key as text, for stores that address states by string (Redis).
///
/// Every [`Display`](fmt::Display) type renders as its display form, so
/// `42u64`, `"alice"` and an `IpAddr` work as they are. A compound key (ip and path,
/// user and route) needs a type of its own with a `Display` impl that keeps the parts
/// apart unambiguously (e.g. `ip:1.2.3.4|path:/api`), since two keys that render the
/// same are the same key to a remote store.
///
/// ```
/// use sluicegate::stores::RenderKey;
/// let mut out = String::new();
/// std::net::Ipv4Addr::new(10, 0, 0, 1).render_key(&mut out);
/// assert_eq!(out, "10.0.0.1");
/// ```
pub trait RenderKey {
    /// Appends this key's text to `out`, keeping what `out` holds already. For a
    /// `Display` type the text is its display form, with nothing escaped (a
    /// remote store escapes it where it builds its server keys).
    ///
    /// ```
    /// use sluicegate::stores::RenderKey;
    /// let mut out = String::from("rl:");
    /// 42u64.render_key(&mut out);
    /// assert_eq!(out, "rl:42");
    /// "user:{7}".render_key(&mut out);
    /// assert_eq!(out, "rl:42user:{7}");
    /// ```
    fn render_key(&self, out: &mut String);
}

impl<T: fmt::Display + ?Sized> RenderKey for T {
    fn render_key(&self, out: &mut String) {
        // Writing to a String cannot fail.
        let _ = write!(out, "{self}");
    }
}

/// The check every store's [`Store::apply`] makes first: one output slot per key.
pub(crate) fn check_output(keys: usize, out: usize) -> Result<(), Error> {
    if out == keys {
        return Ok(());
    }
    Err(Error::InvalidCount {
        what: "output buffer length",
        value: out as u64,
        requirement: "equal to the number of keys",
    })
}

/// A placeholder answer to fill an output buffer before a store writes into it.
pub(crate) fn blank() -> (Decision, Receipt) {
    (Decision::never(0, 0, 0), Receipt::NONE)
}

/// A zero-wait reserve of `cost` on one key in the lean report, as a keyed
/// `try_acquire` asks it: `None` if granted, else the refusal. What the store
/// tests call.
#[cfg(test)]
pub(crate) trait TryTake<K: ?Sized, A: Algorithm>: Store<K, A> {
    fn try_take_key(
        &self,
        algorithm: &A,
        key: &K,
        now: Nanos,
        cost: u64,
    ) -> Result<Option<Decision>, Error> {
        let step = Operation::Reserve { cost, max_wait: 0 };
        let taken: Result<(), Decision> = self.apply_key(algorithm, key, now, step)?;
        Ok(taken.err())
    }
}

#[cfg(test)]
impl<K: ?Sized, A: Algorithm, S: Store<K, A> + ?Sized> TryTake<K, A> for S {}
