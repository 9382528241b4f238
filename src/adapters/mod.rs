//! What plugs a limiter into other code: Stream and Sink adapters, and (feature
//! `tower`) tower layers for outbound clients and HTTP servers.
//!
//! Every adapter holds a [`Permits`] handle: any limiter of this crate, direct or
//! keyed, over any algorithm, set and store. The handle is shared (a clone of the
//! limiter, an `Arc` inside), never borrowed, so an adapter is `'static`, can be
//! spawned, and every clone of it draws on one limit.
//!
//! | adapter | what waits | module |
//! |---|---|---|
//! | [`Throttled`] stream | each item, before it is yielded | [`stream`] |
//! | [`ThrottledSink`] | each item, before it is sent on | [`sink`] |
//! | `ClientLayer` (feature `tower`) | each request, before it is sent | `client` |
//! | `ServerLayer` (feature `tower`) | nothing: refuses with `429` (or, with `delay_up_to`, each request up to a maximum) | `server` |
//!
//! Beside them: weighers (what an item or request is charged, see
//! [below](#weighers)), [`Jitter`] (seeded, repeatable extra delay) and, with
//! `tower`, `HoldBack` (the back-off that honours a server's `Retry-After` and
//! `RateLimit` fields, usable by any client).
//!
//! # Weighers
//!
//! Each adapter's `with_weigher` takes what an item (or request) is charged, its
//! key and its cost, in one of three shapes:
//! * [`Each`]: every item costs 1, key `()` (a direct limiter; what `new` uses);
//! * [`Weighed`]`(|item| cost)`: a cost per item, key `()`;
//! * a closure `|item| (key, cost)`, an `FnMut(&T) -> (K, u64)`: a key and a cost
//!   per item, for a keyed limiter (e.g. per target host).
//!
//! The server layer adds `keyed(limiter, |request| key)`, each request costing 1.
//! These are every weigher: the trait the adapters read them through is the
//! crate's own, so a weigher of another shape is a closure that computes it.
//!
//! ```
//! use futures::{stream, StreamExt};
//! use sluicegate::adapters::{Throttled, Weighed};
//! use sluicegate::{algorithms::FixedWindow, clock::ManualClock, RateLimiter};
//! use std::time::Duration;
//! let window = FixedWindow::new(100, Duration::from_secs(60)).unwrap();
//! let limiter = RateLimiter::with_clock(window, ManualClock::new());
//! let words = stream::iter(["to", "be", "or"]);
//! let paced = Throttled::with_weigher(words, limiter.clone(), Weighed(|w: &&str| w.len() as u64));
//! assert_eq!(futures::executor::block_on(paced.collect::<Vec<_>>()).len(), 3);
//! assert_eq!(limiter.peek(94).map(|d| d.is_allowed()), Ok(true)); // 6 of 100 spent
//! assert_eq!(limiter.peek(95).map(|d| d.is_allowed()), Ok(false));
//! ```
//!
//! A type of another crate cannot be a weigher by implementing that trait:
//!
//! ```compile_fail,E0603
//! struct ByLength;
//! impl sluicegate::adapters::Weigh<String, ()> for ByLength {
//!     fn weigh(&mut self, item: &String) -> ((), u64) {
//!         ((), item.len() as u64)
//!     }
//! }
//! ```
//!
//! # Waiting
//!
//! Waiting is the limiter's own async acquire (see
//! [`AsyncRateLimiter`](crate::AsyncRateLimiter)): it sleeps on the limiter's
//! [`Clock`], so it needs no particular runtime, and under a
//! [`ManualClock`](crate::ManualClock) every adapter runs on virtual time (a test
//! asserts exact send times without sleeping). Waiters are served by the limiter's
//! reservations: a bursty or leaky-bucket queue limiter books each waiter its own
//! slot in the order they asked, so a late caller cannot overtake one that is
//! already waiting. (The window counters cannot book the future: their waiters sleep
//! the refusal's `retry_after` and ask again, so whoever asks first after the window
//! turns wins; [`Jitter`] spreads such waiters.)
//!
//! **A wait that is abandoned gives its permits back**: dropping an adapter, a
//! stream, or a request future while it waits cancels its reservation, and waits
//! dropped together (requests timing out at once) give back all of theirs, in
//! whatever order they are dropped: each is given back once no wait after it is
//! pending, latest first, as far as grants made after them by others allow (see
//! the limiter's [abandoned waits](crate::AsyncRateLimiter#abandoned-waits)).
//! A client request dropped while it waits for its turn after a server's hold
//! gives the turn back too (see [`client::ResponseFuture`]).
//!
//! A maximum wait (`with_max_wait`) makes a call that would wait longer fail at once,
//! consuming nothing, with [`Error::Timeout`] saying how long it would have needed; a
//! cost that can never be granted fails at once with [`Error::Never`], whatever the
//! maximum wait.
//!
//! **A cost of 0 is free**, in every adapter alike: the item or request passes at
//! once, uncounted, without asking the limiter (whose own calls refuse 0 with
//! [`Error::ZeroCost`]), and a server sends no rate-limit
//! fields for it. A weigher can so exempt what should not count (a health check, a
//! cached answer) without a second path around the adapter.
//!
//! # Feature gates
//!
//! The Stream and Sink adapters are always built: they need only the `futures`
//! traits this crate already depends on (and `pin-project-lite`, a macro). The tower
//! layers are behind the feature `tower`, which adds `tower-layer`,
//! `tower-service` and `http`, and no runtime.

#[cfg(feature = "tower")]
mod backoff;
#[cfg(feature = "tower")]
pub mod client;
#[cfg(feature = "tower")]
mod fields;
#[cfg(feature = "tower")]
mod http_date;
mod jitter;
mod permits;
#[cfg(feature = "tower")]
pub mod server;
pub mod sink;
pub mod stream;
mod weigh;

#[cfg(feature = "tower")]
pub use backoff::HoldBack;
pub use jitter::Jitter;
pub use permits::{Acquiring, Checking, CheckingEach, Permits};
pub use sink::ThrottledSink;
pub use stream::{Rejected, Throttled};
pub(crate) use weigh::Weigh;
pub use weigh::{Each, Weighed};

#[cfg(doc)]
use crate::{clock::Clock, Error};
