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
//! Beside them: [`Weigh`] (what an item or request is charged: [`Each`],
//! [`Weighed`], or a closure giving a key and a cost), [`Jitter`] (seeded, repeatable
//! extra delay) and, with `tower`, `HoldBack` (the back-off that honours a server's
//! `Retry-After` and `RateLimit` fields, usable by any client).
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
pub use weigh::{Each, Weigh, Weighed};

#[cfg(doc)]
use crate::{clock::Clock, Error};
