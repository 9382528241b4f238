//! The crate's errors: [`ConfigError`] for a limit that cannot be built, [`Error`]
//! for a call that cannot be answered.

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

/// What can go wrong with a call: a cost that is impossible, a wait that cannot end
/// or would pass its deadline, a store that failed or cannot take the call.
///
/// Bad input never panics in this crate: a call returns `Err` for an impossible cost.
/// A call that is merely refused by a limit is not an error (see
/// [`Decision`](crate::Decision)), except a blocking or async acquire whose cost can
/// *never* be granted, which fails at once with [`Error::Never`] instead of waiting
/// forever. Building a limit with impossible parameters is a [`ConfigError`], a type
/// of its own, so that a constructor promises only what it can fail with.
///
/// ```
/// use sluicegate::{Error, RateLimiter};
/// let limiter = RateLimiter::bursty(1.0).unwrap();
/// let err = limiter.acquire_n(0).unwrap_err();
/// assert_eq!(err, Error::ZeroCost);
/// assert_eq!(err.to_string(), "requested permits must be positive, got 0");
/// ```
#[derive(Clone, Debug, PartialEq)]
#[non_exhaustive]
pub enum Error {
    /// A cost (number of permits) of zero was requested.
    ZeroCost,
    /// A store cannot run the limit's configuration: one of its durations is out of
    /// the range the store keeps (e.g. a period a remote store cannot express in
    /// its time unit). Nothing was applied.
    InvalidDuration {
        /// Which parameter.
        what: &'static str,
        /// The rejected value.
        value: Duration,
        /// What it must be.
        requirement: &'static str,
    },
    /// A count of the call was out of range (no keys, an output buffer of the wrong
    /// length), or a store cannot run the limit's configuration (a count too large
    /// for what it keeps). Nothing was applied.
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
    /// rate spent its one permit, or when its next permit comes after the clock's
    /// last reading, `u64::MAX` ns). Waiting would never end, so acquires fail at
    /// once.
    Never {
        /// The cost that was asked for: the call's `n`, which a multi-key call asks
        /// of each key (a key listed twice is charged it twice, and this stays `n`).
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
    /// A store could not apply a step (e.g. a remote store is unreachable, timed out
    /// or replied with an error). [`StoreError::applied`] says whether the step may
    /// have been applied anyway; [`source`](std::error::Error::source) returns the
    /// underlying error.
    Store(StoreError),
    /// The keys of one call cannot be applied together by this store (e.g. on Redis
    /// Cluster they fall in different hash slots, and one script can only touch one
    /// slot). Nothing was sent and nothing was consumed.
    InvalidKeys {
        /// Why the keys cannot go together.
        why: &'static str,
        /// What to do about it.
        help: &'static str,
    },
}

/// Whether a step that failed may still have been applied by the store.
///
/// A caller that retries a failed step must know which failure it has: a step that
/// certainly was not applied can be retried; one whose outcome is unknown may
/// already have counted, and retrying it could count twice.
///
/// ```
/// use sluicegate::Applied;
/// assert_ne!(Applied::No, Applied::Unknown);
/// assert_eq!(Applied::Unknown.to_string(), "it may have been applied");
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Applied {
    /// The step certainly did not run: it was never sent (no connection, refused
    /// connect), or the store refused it before running it (a script error, a
    /// malformed request). Nothing was consumed; a retry is safe.
    No,
    /// The step was sent but no answer came back (a response timeout, a connection
    /// dropped mid-call): it may or may not have run. Do not retry blindly.
    Unknown,
}

impl fmt::Display for Applied {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Applied::No => "it was not applied",
            Applied::Unknown => "it may have been applied",
        })
    }
}

/// A failure of a store, with its underlying error: the payload of [`Error::Store`].
///
/// Two store errors are equal when they name the same store, the same [`Applied`]
/// and underlying errors that display the same text (the underlying error types need
/// not be comparable).
///
/// ```
/// use sluicegate::{Applied, Error, StoreError};
/// use std::error::Error as _;
/// let io = std::io::Error::new(std::io::ErrorKind::TimedOut, "no reply in 50ms");
/// let err = Error::Store(StoreError::new("redis", Applied::Unknown, io));
/// assert_eq!(err.to_string(), "the redis store failed and it may have been applied: no reply in 50ms");
/// assert_eq!(err.source().unwrap().to_string(), "no reply in 50ms");
/// let Error::Store(store) = &err else { unreachable!() };
/// assert_eq!(store.applied(), Applied::Unknown);
/// ```
#[derive(Clone, Debug)]
pub struct StoreError {
    store: &'static str,
    applied: Applied,
    source: Arc<dyn std::error::Error + Send + Sync + 'static>,
}

impl StoreError {
    /// A failure of the store named `store` (e.g. `"redis"`), caused by `source`.
    ///
    /// ```
    /// use sluicegate::{Applied, StoreError};
    /// let e = StoreError::new("redis", Applied::No, std::io::Error::other("connection refused"));
    /// assert_eq!(e.store(), "redis");
    /// ```
    pub fn new(
        store: &'static str,
        applied: Applied,
        source: impl Into<Box<dyn std::error::Error + Send + Sync + 'static>>,
    ) -> Self {
        StoreError {
            store,
            applied,
            source: Arc::from(source.into()),
        }
    }

    /// Which store failed.
    ///
    /// ```
    /// use sluicegate::{Applied, StoreError};
    /// assert_eq!(StoreError::new("redis", Applied::No, "refused").store(), "redis");
    /// ```
    pub fn store(&self) -> &'static str {
        self.store
    }

    /// Whether the failed step may have been applied.
    ///
    /// ```
    /// use sluicegate::{Applied, StoreError};
    /// assert_eq!(StoreError::new("redis", Applied::No, "refused").applied(), Applied::No);
    /// ```
    pub fn applied(&self) -> Applied {
        self.applied
    }
}

impl PartialEq for StoreError {
    fn eq(&self, other: &Self) -> bool {
        self.store == other.store
            && self.applied == other.applied
            && self.source.to_string() == other.source.to_string()
    }
}

impl fmt::Display for StoreError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "the {} store failed and {}: {}",
            self.store, self.applied, self.source
        )
    }
}

impl std::error::Error for StoreError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        Some(&*self.source)
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::ZeroCost => write!(f, "requested permits must be positive, got 0"),
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
            Error::Store(error) => error.fmt(f),
            Error::InvalidKeys { why, help } => write!(f, "{why}; {help}"),
        }
    }
}

impl std::error::Error for Error {
    /// The underlying error of a [`Error::Store`]; `None` for every other variant.
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            Error::Store(error) => std::error::Error::source(error),
            _ => None,
        }
    }
}

/// What can be wrong with the parameters of a limit or a store: a rate, a cold
/// factor, a duration or a count out of range, a store's URL that cannot be used, a
/// store setting that the others require.
/// Returned by constructors and by `set_rate`, never by a call; each variant names
/// the parameter and what it must be.
///
/// ```
/// use sluicegate::{ConfigError, RateLimiter};
/// let err = RateLimiter::bursty(-1.0).unwrap_err();
/// assert!(matches!(err, ConfigError::InvalidRate { .. }));
/// assert_eq!(err.to_string(), "rate must be a positive number of permits per second (+inf allowed), got -1");
/// ```
#[derive(Clone, Debug, PartialEq)]
#[non_exhaustive]
pub enum ConfigError {
    /// A rate was zero, negative, NaN or -inf. `+inf` is a valid rate (no limit).
    InvalidRate {
        /// The rejected rate, in permits per second.
        rate: f64,
    },
    /// A warm-up cold factor was below 1, NaN or infinite.
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
    /// A count parameter (a limit, a capacity, a number of buckets or shards) was
    /// out of range.
    InvalidCount {
        /// Which parameter.
        what: &'static str,
        /// The rejected value.
        value: u64,
        /// What it must be.
        requirement: &'static str,
    },
    /// A store's URL cannot be used: it does not parse, its scheme is not one the
    /// store reads, or a part of it is invalid (a port, a database number, TLS
    /// asked for without a TLS feature). `why` says which, without repeating the
    /// URL (it may hold a password).
    InvalidUrl {
        /// What is wrong with it.
        why: String,
    },
    /// A setting that the other settings make necessary was left unset (e.g. a
    /// Redis store on the caller's clock needs an expiry grace).
    MissingSetting {
        /// Which setting.
        what: &'static str,
        /// Why it is needed, and what to set it to.
        why: &'static str,
    },
    /// A name given to a store cannot be used as it is (e.g. a Redis key prefix
    /// or shared hash tag holding a brace). `why` says what it may not hold.
    InvalidText {
        /// Which setting.
        what: &'static str,
        /// What is wrong with it.
        why: &'static str,
    },
    /// A wrapper cannot serve the configuration it was given (e.g. a
    /// [`DenyCache`](crate::stores::deny_cache::DenyCache) over an algorithm whose
    /// refusals count).
    Unsupported {
        /// What cannot be served.
        what: &'static str,
        /// Why not, and what to do instead.
        why: &'static str,
    },
}

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ConfigError::InvalidRate { rate } => write!(
                f,
                "rate must be a positive number of permits per second (+inf allowed), got {rate}"
            ),
            ConfigError::InvalidColdFactor { cold_factor } => {
                write!(f, "cold factor must be at least 1.0, got {cold_factor}")
            }
            ConfigError::InvalidDuration {
                what,
                value,
                requirement,
            } => write!(f, "{what} must be {requirement}, got {value:?}"),
            ConfigError::InvalidCount {
                what,
                value,
                requirement,
            } => write!(f, "{what} must be {requirement}, got {value}"),
            ConfigError::InvalidUrl { why } => write!(f, "invalid store URL: {why}"),
            ConfigError::MissingSetting { what, why } => write!(f, "{what} must be set: {why}"),
            ConfigError::InvalidText { what, why } => write!(f, "a {what} {why}"),
            ConfigError::Unsupported { what, why } => write!(f, "{what} is not supported: {why}"),
        }
    }
}

impl std::error::Error for ConfigError {}
