//! The public front ends.
//!
//! * [`RateLimiter`]: one limit shared by every caller (Guava's `RateLimiter`, but
//!   over any algorithm). Blocking `acquire`, non-blocking `try_acquire`, `check` for
//!   a full [`Decision`](crate::Decision), `peek`, reservations that can be cancelled.
//! * [`AsyncRateLimiter`]: the same limiter, with `acquire().await`. It shares state
//!   with the [`RateLimiter`] it came from.
//! * [`KeyedRateLimiter`]: one limit kept separately per key (IP, user id, …) in a
//!   [`Store`](crate::stores::Store), with all-or-nothing calls over several keys;
//!   [`AsyncKeyedRateLimiter`] is its async handle. Its reservations are
//!   [`KeyedReservation`]s, cancelled by the direct ones' rule.
//!
//! All of them wrap one core step, "reserve `cost` permits for a caller willing to wait
//! up to `max_wait`" (Go's `reserveN`); the rest are thin wrappers that choose
//! `max_wait` and sleep on the limiter's [`Clock`](crate::clock::Clock).

pub(crate) mod asynchronous;
mod combine;
mod direct;
mod keyed;
mod keyed_all;
pub(crate) mod keyed_async;
mod keyed_reservation;
mod ledger;
mod reservation;
mod waiting;

pub use crate::cells::CellAlgorithm;
pub use asynchronous::AsyncRateLimiter;
pub use direct::RateLimiter;
pub use keyed::KeyedRateLimiter;
pub use keyed_async::AsyncKeyedRateLimiter;
pub use keyed_reservation::KeyedReservation;
pub use reservation::Reservation;

pub(crate) use combine::combine;
pub(crate) use direct::nonzero;
