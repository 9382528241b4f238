//! # sluicegate
//!
//! Rate limiting that is exact where Guava is exact, lock-free where it counts, and
//! lazy everywhere: no layer starts a thread. Time-based state (refill, window
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
//! 3. [`stores`]: where state lives and is updated atomically (a lock-free word, or a
//!    mutex).
//! 4. [`limiters`]: the public front ends: the direct [`RateLimiter`], its
//!    [`AsyncRateLimiter`] handle and [`Reservation`]s.

#![deny(missing_docs)]
#![forbid(unsafe_code)]

pub mod algorithms;
pub mod clock;
mod error;
pub mod limiters;
pub mod stores;

pub use algorithms::{Decision, Verdict};
pub use clock::{Clock, DefaultClock, ManualClock};
pub use error::Error;
pub use limiters::{AsyncKeyedRateLimiter, KeyedRateLimiter};
pub use limiters::{AsyncRateLimiter, RateLimiter, Reservation};

/// The README's examples, compiled and run as doctests so they cannot rot.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
pub struct ReadmeDoctests;
