//! The crate's one error type.

use std::fmt;
use std::time::Duration;

/// Everything that can go wrong, each variant saying what was wrong with which value.
///
/// Bad input never panics in this crate: constructors return `Err` for impossible
/// parameters, and calls return `Err` for an impossible cost. A call that is merely
/// refused by a limit is not an error (see [`Decision`](crate::Decision)), except a
/// blocking or async acquire whose cost can *never* be granted, which fails at once
/// with [`Error::Never`] instead of waiting forever.
///
/// ```
/// use sluicegate::{Error, RateLimiter};
/// let err = RateLimiter::bursty(-1.0).unwrap_err();
/// assert!(matches!(err, Error::InvalidRate { .. }));
/// assert_eq!(err.to_string(), "rate must be a positive number of permits per second (+inf allowed), got -1");
/// ```
#[derive(Clone, Debug, PartialEq)]
#[non_exhaustive]
pub enum Error {
    /// A rate was zero, negative, NaN or -inf. `+inf` is a valid rate (no limit).
    InvalidRate {
        /// The rejected rate, in permits per second.
        rate: f64,
    },
    /// A cost (number of permits) of zero was requested.
    ZeroCost,
    /// A warm-up cold factor was below 1 or NaN.
    InvalidColdFactor {
        /// The rejected factor.
        cold_factor: f64,
    },
    /// A duration parameter was out of range (e.g. a zero window, or a period too
    /// long to represent).
    InvalidDuration {
        /// Which parameter.
        what: &'static str,
        /// The rejected value.
        value: Duration,
        /// What it must be.
        requirement: &'static str,
    },
    /// A count parameter (a limit, a capacity, a number of buckets) was out of range.
    InvalidCount {
        /// Which parameter.
        what: &'static str,
        /// The rejected value.
        value: u64,
        /// What it must be.
        requirement: &'static str,
    },
    /// The requested cost can never be granted: it exceeds what the limit can ever
    /// hold, or the limit will never grant again (e.g. after the smallest positive
    /// rate spent its one permit). Waiting would never end, so acquires fail at once.
    Never {
        /// The cost that was asked for.
        cost: u64,
    },
    /// A blocking or async acquire with a deadline could not be granted in time.
    /// Nothing was consumed.
    Timeout {
        /// How long the caller would have had to wait.
        needed: Duration,
    },
    /// A keyed store with a cap on its number of keys is full, and the call needed
    /// room for a new key. Nothing was consumed; keys already held keep working.
    StoreFull {
        /// The store's cap, in keys.
        max_keys: u64,
    },
    /// A store could not apply a step (e.g. a remote store is unreachable or replied
    /// with an error). Nothing is known to have been consumed.
    Store {
        /// Which store failed (e.g. `"redis"`).
        store: &'static str,
        /// What went wrong.
        message: String,
    },
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::InvalidRate { rate } => write!(
                f,
                "rate must be a positive number of permits per second (+inf allowed), got {rate}"
            ),
            Error::ZeroCost => write!(f, "requested permits must be positive, got 0"),
            Error::InvalidColdFactor { cold_factor } => {
                write!(f, "cold factor must be at least 1.0, got {cold_factor}")
            }
            Error::InvalidDuration {
                what,
                value,
                requirement,
            } => write!(f, "{what} must be {requirement}, got {value:?}"),
            Error::InvalidCount {
                what,
                value,
                requirement,
            } => write!(f, "{what} must be {requirement}, got {value}"),
            Error::Never { cost } => write!(
                f,
                "a cost of {cost} can never be granted by this limit (above its capacity, or the limit is exhausted for good)"
            ),
            Error::Timeout { needed } => {
                write!(f, "could not acquire within the timeout: would have needed {needed:?}")
            }
            Error::StoreFull { max_keys } => write!(
                f,
                "the keyed store holds its maximum of {max_keys} keys and none can be forgotten yet"
            ),
            Error::Store { store, message } => write!(f, "the {store} store failed: {message}"),
        }
    }
}

impl std::error::Error for Error {}
