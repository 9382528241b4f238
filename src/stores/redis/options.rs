//! The Redis store's settings: namespace, timeouts, time source, expiry, hash tags.

use super::algorithm::EXACT;
use super::keys::check_part;
use crate::error::ConfigError;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

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
    ///
    /// Keys still expire by the *server's* clock, so a store on the caller's
    /// clock must be given [`RedisOptions::expiry_grace`] (building one without
    /// it is a [`ConfigError`]): see there for how long.
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
///     .time_source(TimeSource::Caller)
///     .expiry_grace(Duration::from_secs(60));
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
    /// `None` until set: required with [`TimeSource::Caller`], zero otherwise.
    pub(super) expiry_grace: Option<Duration>,
    pub(super) deadline_slack: Duration,
}

impl Default for RedisOptions {
    fn default() -> Self {
        RedisOptions {
            prefix: "rl:".to_owned(),
            shared_tag: None,
            connect_timeout: Duration::from_millis(250),
            response_timeout: Duration::from_millis(250),
            time_source: TimeSource::Server,
            expiry_grace: None,
            deadline_slack: Duration::ZERO,
        }
    }
}

impl RedisOptions {
    /// The namespace every server key starts with (default `"rl:"`).
    ///
    /// # Errors
    /// [`ConfigError::InvalidText`] if it contains `{` or `}` (it would change the
    /// keys' hash tag, and with it their Cluster slot).
    ///
    /// ```
    /// use sluicegate::stores::redis::RedisOptions;
    /// use sluicegate::ConfigError;
    /// assert_eq!(RedisOptions::default().prefix("app:").unwrap().get_prefix(), "app:");
    /// let err = RedisOptions::default().prefix("rl:{x").unwrap_err();
    /// assert!(matches!(err, ConfigError::InvalidText { what: "Redis key prefix", .. }));
    /// ```
    pub fn prefix(mut self, prefix: impl Into<String>) -> Result<Self, ConfigError> {
        let prefix = prefix.into();
        check_part("Redis key prefix", &prefix)?;
        self.prefix = prefix;
        Ok(self)
    }

    /// The namespace prefix (see [`prefix`](RedisOptions::prefix)): `"rl:"`
    /// unless set. A refused prefix leaves no options to read, so what this
    /// answers never holds `{` or `}`.
    ///
    /// ```
    /// use sluicegate::stores::redis::RedisOptions;
    /// assert_eq!(RedisOptions::default().get_prefix(), "rl:");
    /// assert_eq!(RedisOptions::default().prefix("").unwrap().get_prefix(), ""); // no namespace
    /// let options = RedisOptions::default().prefix("a:").unwrap().prefix("b:").unwrap();
    /// assert_eq!(options.get_prefix(), "b:"); // the last one set
    /// ```
    pub fn get_prefix(&self) -> &str {
        &self.prefix
    }

    /// Puts every key of the store under one hash tag `{tag}` instead of one per
    /// identity, so that a multi-key call (an IP *and* a user, all-or-nothing) works
    /// on Redis Cluster. Every key of the store then lives on one Cluster node: use
    /// it for keys that really are limited together, with one store per group.
    ///
    /// # Errors
    /// [`ConfigError::InvalidText`] if `tag` is empty (Redis Cluster ignores an
    /// empty `{}` and hashes the whole key, so the keys would not share a slot) or
    /// contains `{` or `}`.
    ///
    /// ```
    /// use sluicegate::stores::redis::RedisOptions;
    /// assert!(RedisOptions::default().shared_tag("checkout").is_ok());
    /// assert!(RedisOptions::default().shared_tag("a{b").is_err());
    /// assert!(RedisOptions::default().shared_tag("").is_err());
    /// ```
    pub fn shared_tag(mut self, tag: impl Into<String>) -> Result<Self, ConfigError> {
        let tag = tag.into();
        if tag.is_empty() {
            return Err(ConfigError::InvalidText {
                what: "shared hash tag",
                why: "may not be empty (Redis Cluster ignores an empty '{}', so the keys would not share a slot)",
            });
        }
        check_part("shared hash tag", &tag)?;
        self.shared_tag = Some(tag);
        Ok(self)
    }

    /// How long opening a connection (TLS handshake and `AUTH` included) may take
    /// before the call fails with [`Applied::No`](crate::Applied::No) (default 250
    /// ms); the error's source is an [`std::io::Error`] of kind `TimedOut`, reading
    /// `timed out after 250ms connecting (the connect timeout)`. A zero duration is
    /// raised to 1 ms (a socket takes no zero timeout).
    ///
    /// ```
    /// use sluicegate::stores::redis::RedisOptions;
    /// use std::time::Duration;
    /// let options = RedisOptions::default().connect_timeout(Duration::ZERO);
    /// assert!(format!("{options:?}").contains("connect_timeout: 1ms"));
    /// ```
    pub fn connect_timeout(mut self, timeout: Duration) -> Self {
        self.connect_timeout = timeout.max(Duration::from_millis(1));
        self
    }

    /// How long a sent call may wait for its reply before it fails with
    /// [`Applied::Unknown`](crate::Applied::Unknown) (default 250 ms): the server
    /// may still run the step once it answers again. Blocking or async, the
    /// error's source is an [`std::io::Error`] of kind `TimedOut`, reading `timed
    /// out after 250ms waiting for the step's reply (the response timeout)`. A
    /// zero duration is raised to 1 ms (the socket layer treats zero as "for ever").
    ///
    /// ```
    /// use sluicegate::stores::redis::RedisOptions;
    /// use std::time::Duration;
    /// let options = RedisOptions::default().response_timeout(Duration::ZERO);
    /// assert!(format!("{options:?}").contains("response_timeout: 1ms"));
    /// ```
    pub fn response_timeout(mut self, timeout: Duration) -> Self {
        self.response_timeout = timeout.max(Duration::from_millis(1));
        self
    }

    /// Whose clock the steps run at (default [`TimeSource::Server`]). With
    /// [`TimeSource::Caller`], set [`expiry_grace`](RedisOptions::expiry_grace)
    /// too: a store is not built without it.
    ///
    /// ```
    /// use sluicegate::algorithms::FixedWindow;
    /// use sluicegate::stores::redis::{RedisOptions, RedisStore, TimeSource};
    /// use std::time::Duration;
    /// type Store = RedisStore<&'static str, FixedWindow>;
    /// let url = "redis+unix:///nonexistent/redis.sock"; // opening does not connect
    /// let caller = RedisOptions::default().time_source(TimeSource::Caller);
    /// assert!(format!("{caller:?}").contains("time_source: Caller"));
    /// assert!(Store::open_with(url, caller.clone()).is_err()); // no expiry grace
    /// assert!(Store::open_with(url, caller.expiry_grace(Duration::ZERO)).is_ok());
    /// let server = RedisOptions::default().time_source(TimeSource::Server);
    /// assert!(Store::open_with(url, server).is_ok()); // needs no grace
    /// ```
    pub fn time_source(mut self, source: TimeSource) -> Self {
        self.time_source = source;
        self
    }

    /// Extra lifetime given to every server key beyond the moment its state stops
    /// mattering. The server sets a key's expiry to the decision's `reset_after`
    /// plus this grace, and counts it down on *its own* clock.
    ///
    /// At the server's time ([`TimeSource::Server`], the default) that is the
    /// clock the steps run at, and no grace is needed (zero unless set). At the
    /// caller's time ([`TimeSource::Caller`]) it is not: a state stops mattering
    /// when the *caller's* clock has moved `reset_after` on, and if that clock runs
    /// slower than the server's (a virtual clock in a test, a replay), or lags
    /// another caller's, the key would expire while it still matters and the
    /// limit would grant again. So with the caller's clock the grace must be set,
    /// to at least how far that clock may fall behind the server's over a key's
    /// life (the length of a test with a frozen clock, the skew between callers;
    /// [`Duration::ZERO`] only for one clock that keeps pace with the server's),
    /// and a store built without it is a [`ConfigError::MissingSetting`]. A
    /// longer grace only keeps idle keys longer.
    ///
    /// ```
    /// use sluicegate::algorithms::FixedWindow;
    /// use sluicegate::stores::redis::{RedisOptions, RedisStore, TimeSource};
    /// use sluicegate::ConfigError;
    /// use std::time::Duration;
    /// type Store = RedisStore<&'static str, FixedWindow>;
    /// let caller = RedisOptions::default().time_source(TimeSource::Caller);
    /// let err = Store::open_with("redis://127.0.0.1/", caller.clone()).unwrap_err();
    /// assert!(matches!(err, ConfigError::MissingSetting { what: "expiry_grace", .. }));
    /// let graced = caller.expiry_grace(Duration::from_secs(3600));
    /// assert!(Store::open_with("redis://127.0.0.1/", graced).is_ok());
    /// ```
    pub fn expiry_grace(mut self, grace: Duration) -> Self {
        self.expiry_grace = Some(grace);
        self
    }

    /// How far past its deadline a call may still be applied (default zero): the
    /// skew allowed for a server clock that runs *ahead* of this host's.
    ///
    /// Every reserve or peek carries a deadline: this host's wall-clock time when
    /// it is sent, plus the [response timeout](RedisOptions::response_timeout),
    /// plus this slack. The server compares it with its own clock (`TIME`) before
    /// it reads anything, and refuses a call that arrives later with an `EXPIRED`
    /// error, applying nothing: a call whose caller has given up (it timed out,
    /// say, while the server was paused) never lands when the server comes back.
    /// Cancels carry none (nobody waits for them, and a late one only gives back).
    ///
    /// With the server's clock `s` ahead of this host's (negative: behind), a call
    /// is applied only if it reaches the server within `timeout + slack - s` of
    /// being sent. So:
    /// * with the clocks in step (NTP keeps them within milliseconds) and no
    ///   slack, nothing is applied after its caller gave up;
    /// * a server clock *behind* by `b` lets a call land up to `b` after its caller
    ///   gave up (plus the slack);
    /// * a server clock *ahead* by `a` refuses calls that took longer than
    ///   `timeout + slack - a` (`a` beyond the timeout plus the slack refuses
    ///   every call: a failure the store reports, never a grant). Set the slack to
    ///   the skew you cannot rule out.
    ///
    /// A reply that is in flight when the caller gives up can still have been
    /// applied: that is what [`Applied::Unknown`](crate::Applied::Unknown) says.
    /// A slack so large that the deadline passes 2⁵³ µs since 1970 (285 years;
    /// e.g. [`Duration::MAX`], which saturates) sends a deadline no server clock
    /// reaches, which turns the check off.
    ///
    /// ```
    /// use sluicegate::stores::redis::RedisOptions;
    /// use std::time::Duration;
    /// let options = RedisOptions::default().deadline_slack(Duration::from_millis(20));
    /// let unchecked = RedisOptions::default().deadline_slack(Duration::MAX);
    /// # let _ = (options, unchecked);
    /// ```
    pub fn deadline_slack(mut self, slack: Duration) -> Self {
        self.deadline_slack = slack;
        self
    }

    /// The deadline of a call sent now, as `call`'s ARGV carries it: whole µs
    /// since 1970 on this host's wall clock ('' for none, on a clock set before
    /// 1970).
    pub(super) fn deadline_from_now(&self) -> String {
        let Ok(since) = SystemTime::now().duration_since(UNIX_EPOCH) else {
            return String::new();
        };
        let deadline = since
            .saturating_add(self.response_timeout)
            .saturating_add(self.deadline_slack);
        deadline.as_micros().min(u128::from(EXACT - 1)).to_string()
    }

    /// The grace the keys get: the one set, else zero (see
    /// [`expiry_grace`](RedisOptions::expiry_grace)).
    pub(super) fn grace(&self) -> Duration {
        self.expiry_grace.unwrap_or_default()
    }

    /// Refuses options a store cannot run safely: the caller's clock with no
    /// expiry grace.
    pub(super) fn check(&self) -> Result<(), ConfigError> {
        if self.time_source == TimeSource::Caller && self.expiry_grace.is_none() {
            return Err(ConfigError::MissingSetting {
                what: "expiry_grace",
                why: "with TimeSource::Caller keys still expire by the Redis server's clock, \
                      so RedisOptions::expiry_grace must say how far the callers' clocks may \
                      fall behind it (Duration::ZERO if they never do)",
            });
        }
        Ok(())
    }
}
