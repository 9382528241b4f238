//! A tower layer for outbound clients: every request waits for its permits before
//! it is sent (feature `tower`).
//!
//! ```text
//!   call(request) ─► weigh: (key, cost) ─► held back by the server? sleep it out
//!                 ─► just after a hold? wait for its turn at the limiter's steady pace
//!                 ─► limiter.acquire(key, cost, max_wait) ─► held back meanwhile? back to the top
//!                 ─► jitter (if it waited) ─► held back meanwhile? back to the top
//!                 ─► inner.poll_ready ─► held back meanwhile? back to the top
//!                 ─► inner.call ─► response ─► observe 429/503, Retry-After, RateLimit
//! ```
//!
//! **Under concurrency.** Many tasks share one client, and the server's answer to one
//! of them holds back every request of that key: those that have not started waiting,
//! and those not yet sent: waiting for permits, for their jitter or for the inner
//! service to be ready (they wait the hold out and take fresh permits after it). A
//! request already sent cannot be recalled, so the refusals a hold can still meet are
//! bounded by the requests in flight when it began. After the hold the key resumes at
//! its limiter's steady rate, one turn per
//! [`Pace::interval`](crate::algorithms::Pace::interval), not with the burst its
//! limiter stored meanwhile ([`HoldBack`](super::HoldBack) says how each algorithm's
//! credit is left unspent).
//!
//! **A cost of 0 is free**, as in every adapter: such a request takes no permits
//! and no turn, and goes as soon as no hold stops its key.
//!
//! What it does that tower's own `RateLimit` does not (tower#408, #626): clones of
//! the layer and of its services share one limit (the limiter is a shared handle);
//! `poll_ready` is always ready and never needs to be called first (the wait happens
//! in the response future, which readies a clone of the inner service itself);
//! each request has its own key and cost; a request future dropped while it waits
//! for its permits gives them back (a turn after a hold stays booked); waiters are served in the order they asked (the
//! limiter's reservations); and a server's `Retry-After` / `RateLimit` answer slows
//! the key down ([`HoldBack`](super::HoldBack)).
//!
//! The inner service must be `Clone` (as `reqwest::Client`, hyper's client and
//! tonic's `Channel` are): the response future owns a clone so that waiting never
//! holds the caller's `&mut` service.

mod future;
mod layer;
mod service;

pub use future::{ClientError, ResponseFuture};
pub use layer::ClientLayer;
pub use service::{Client, HttpResponses, Unobserved};
