//! # sluicegate
//!
//! Rate limiting that is exact where Guava is exact, lock-free where it counts, and
//! lazy everywhere: Guava's bursty and warming-up token buckets, a driftless leaky
//! bucket, fixed and sliding windows, an exact sliding log and sets of several limits
//! (see [`algorithms`] for which to pick), used directly ([`RateLimiter`]), per key
//! ([`KeyedRateLimiter`]), blocking, non-blocking or async. No layer starts a thread. Time-based state (refill, window
//! roll-over, expiry) advances only when a call arrives, by comparing the clock with
//! what the state remembers (Guava's `nextFreeTicket` resync model).
//!
//! ```
//! use sluicegate::RateLimiter;
//! let limiter = RateLimiter::bursty(100.0).unwrap(); // 100 permits per second
//! limiter.acquire().unwrap();                        // blocks as needed
//! if limiter.try_acquire() { /* go */ }              // never blocks
//! ```
//!
//! ## Layers
//!
//! Dependencies point one way, each layer in its own module:
//!
//! 1. [`clock`]: monotonic integer nanoseconds, plus sleeping. [`DefaultClock`] reads
//!    `quanta`; [`ManualClock`] is virtual time for tests.
//! 2. [`algorithms`]: pure state machines: an immutable configuration, a small state,
//!    a step function that answers a [`Decision`]. No locks, no clock, no I/O.
//! 3. Where state lives, updated atomically: cells hold one limit's state (a
//!    lock-free word, words under a sequence lock, or a mutex: the algorithm's
//!    shape picks), and [`stores`] hold keyed state: the [`Store`](stores::Store)
//!    contract and its sharded in-memory default.
//! 4. [`limiters`]: the public front ends: the direct [`RateLimiter`] (over a cell),
//!    its [`AsyncRateLimiter`] handle, [`Reservation`]s, and the
//!    [`KeyedRateLimiter`] (over a store) with its [`KeyedReservation`]s.
//! 5. [`adapters`]: what plugs a limiter into other code: Stream and Sink adapters,
//!    and (feature `tower`) tower layers for outbound clients that wait and honour a
//!    server's `Retry-After`, and for HTTP servers that answer `429` with `RateLimit`
//!    headers.

#![deny(missing_docs)]
#![forbid(unsafe_code)]

pub mod adapters;
pub mod algorithms;
mod cells;
pub mod clock;
mod error;
pub mod limiters;
pub mod stores;

pub use algorithms::{Decision, Source, Verdict};
pub use clock::{Clock, DefaultClock, ManualClock};
pub use error::{Applied, ConfigError, Error, StoreError};
pub use limiters::{AsyncKeyedRateLimiter, CellAlgorithm, KeyedRateLimiter, KeyedReservation};
pub use limiters::{AsyncRateLimiter, RateLimiter, Reservation};

/// The README's examples, compiled and run as doctests so they cannot rot. Some use
/// the `tower` feature, so they run with it (the README's test command,
/// `cargo test --all-features`).
#[cfg(all(doctest, feature = "tower"))]
#[doc = include_str!("../README.md")]
pub struct ReadmeDoctests;
