//! A tower layer for outbound clients: every request waits for its permits before
//! it is sent (feature `tower`).
//!
//! ```text
//!   call(request) ─► meter: (key, cost) ─► held back by the server? sleep it out
//!                 ─► limiter.acquire(key, cost, max_wait) ─► jitter (if it waited)
//!                 ─► inner.poll_ready ─► inner.call ─► response ─► observe 429/503,
//!                                                                   Retry-After, RateLimit
//! ```
//!
//! What it does that tower's own `RateLimit` does not (tower#408, #626): clones of
//! the layer and of its services share one limit (the limiter is a shared handle);
//! `poll_ready` is always ready and never needs to be called first (the wait happens
//! in the response future, which readies a clone of the inner service itself);
//! each request has its own key and cost; a request future dropped while it waits
//! gives its permits back; waiters are served in the order they asked (the
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
pub use service::{Client, HttpResponses, ReadResponse, Unobserved};
