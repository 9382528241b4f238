//! The Redis store's settings: namespace, timeouts, time source, expiry, hash tags.

use super::keys::check_part;
use crate::error::Error;
use std::time::Duration;

/// Whose clock a step runs at.
///
/// ```
/// use sluicegate::stores::redis::TimeSource;
/// assert_eq!(TimeSource::default(), TimeSource::Server);
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum TimeSource {
    /// The Redis server's `TIME`, read inside the script: every client agrees
    /// whatever its own clock says. The caller's `now` is ignored.
    #[default]
    Server,
    /// The caller's `now` (its [`Clock`](crate::Clock)), rounded down to whole
    /// microseconds: for tests with virtual time and for replaying traces. Clients
    /// with skewed clocks then disagree, so use it with one clock for all.
    Caller,
}

/// How the Redis store connects, names its keys and reads time. Every setter
/// returns the changed options; [`RedisOptions::default`] suits a rate limiter in
/// front of a request (short timeouts, server time, prefix `"rl:"`).
///
/// ```
/// use sluicegate::stores::redis::{RedisOptions, TimeSource};
/// use std::time::Duration;
/// let options = RedisOptions::default()
///     .prefix("api:")
///     .unwrap()
///     .response_timeout(Duration::from_millis(50))
///     .time_source(TimeSource::Caller);
/// assert_eq!(options.get_prefix(), "api:");
/// assert!(RedisOptions::default().prefix("a{b").is_err());
/// ```
#[derive(Clone, Debug)]
pub struct RedisOptions {
    pub(super) prefix: String,
    pub(super) shared_tag: Option<String>,
    pub(super) connect_timeout: Duration,
    pub(super) response_timeout: Duration,
    pub(super) time_source: TimeSource,
    pub(super) expiry_grace: Duration,
}

impl Default for RedisOptions {
    fn default() -> Self {
        RedisOptions {
            prefix: "rl:".to_owned(),
            shared_tag: None,
            connect_timeout: Duration::from_millis(250),
            response_timeout: Duration::from_millis(250),
            time_source: TimeSource::Server,
            expiry_grace: Duration::ZERO,
        }
    }
}

impl RedisOptions {
    /// The namespace every server key starts with (default `"rl:"`).
    ///
    /// # Errors
    /// [`Error::InvalidKeys`] if it contains `{` or `}` (it would change the keys'
    /// hash tag, and with it their Cluster slot).
    pub fn prefix(mut self, prefix: impl Into<String>) -> Result<Self, Error> {
        let prefix = prefix.into();
        check_part("prefix", &prefix)?;
        self.prefix = prefix;
        Ok(self)
    }

    /// The namespace prefix (see [`prefix`](RedisOptions::prefix)).
    pub fn get_prefix(&self) -> &str {
        &self.prefix
    }

    /// Puts every key of the store under one hash tag `{tag}` instead of one per
    /// identity, so that a multi-key call (an IP *and* a user, all-or-nothing) works
    /// on Redis Cluster. Every key of the store then lives on one Cluster node: use
    /// it for keys that really are limited together, with one store per group.
    ///
    /// # Errors
    /// [`Error::InvalidKeys`] if `tag` contains `{` or `}`.
    ///
    /// ```
    /// use sluicegate::stores::redis::RedisOptions;
    /// assert!(RedisOptions::default().shared_tag("checkout").is_ok());
    /// ```
    pub fn shared_tag(mut self, tag: impl Into<String>) -> Result<Self, Error> {
        let tag = tag.into();
        check_part("tag", &tag)?;
        self.shared_tag = Some(tag);
        Ok(self)
    }

    /// How long opening a connection may take before the call fails with
    /// [`Applied::No`](crate::Applied::No) (default 250 ms).
    pub fn connect_timeout(mut self, timeout: Duration) -> Self {
        self.connect_timeout = timeout;
        self
    }

    /// How long a sent call may wait for its reply before it fails with
    /// [`Applied::Unknown`](crate::Applied::Unknown) (default 250 ms). A
    /// zero duration is raised to 1 ms (the socket layer treats zero as "for ever").
    pub fn response_timeout(mut self, timeout: Duration) -> Self {
        self.response_timeout = timeout.max(Duration::from_millis(1));
        self
    }

    /// Whose clock the steps run at (default [`TimeSource::Server`]).
    pub fn time_source(mut self, source: TimeSource) -> Self {
        self.time_source = source;
        self
    }

    /// Extra lifetime given to every server key beyond the moment its state stops
    /// mattering (default zero). Keys expire on the *server's* clock: with
    /// [`TimeSource::Caller`] and a virtual clock that runs slower than real time,
    /// a grace longer than the test keeps states alive for the whole test.
    pub fn expiry_grace(mut self, grace: Duration) -> Self {
        self.expiry_grace = grace;
        self
    }
}
