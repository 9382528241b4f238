//! The rate-limit fields a server sends: `Retry-After`, the IETF `RateLimit` and
//! `RateLimit-Policy` (draft-ietf-httpapi-ratelimit-headers-10), and the legacy
//! `X-RateLimit-*` trio.

use crate::adapters::fields::push_string;
use crate::algorithms::{Decision, Verdict};
use crate::clock::{duration_to_nanos, Nanos, NANOS_PER_SECOND};
use http::header::{HeaderMap, HeaderName, HeaderValue, RETRY_AFTER};
use std::fmt::Write;
use std::time::Duration;

/// One limit as a client should know it: the `RateLimit-Policy` item
/// `"name";q=quota;w=window`, and the name its `RateLimit` item carries.
///
/// The quota is in permits (the draft's "quota units"; requests when every request
/// costs 1). The window is in whole seconds (the draft allows no finer), rounded up;
/// a policy without a window sends no `w`.
///
/// ```
/// use sluicegate::adapters::server::Policy;
/// use std::time::Duration;
/// let p = Policy::new("burst", 100, Duration::from_secs(60));
/// assert_eq!(p.to_string(), r#""burst";q=100;w=60"#);
/// assert_eq!(Policy::without_window("daily", 5).to_string(), r#""daily";q=5"#);
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Policy {
    name: String,
    quota: u64,
    window: Option<u64>,
}

impl Policy {
    /// A policy of `quota` permits per `window` (rounded up to whole seconds, at
    /// least 1, as `w` must be positive).
    ///
    /// ```
    /// use sluicegate::adapters::server::Policy;
    /// use std::time::Duration;
    /// assert_eq!(Policy::new("p", 10, Duration::from_millis(1500)).to_string(), r#""p";q=10;w=2"#);
    /// assert_eq!(Policy::new("p", 10, Duration::ZERO).to_string(), r#""p";q=10;w=1"#);
    /// ```
    pub fn new(name: impl Into<String>, quota: u64, window: Duration) -> Self {
        Policy {
            name: name.into(),
            quota,
            window: Some(ceil_seconds(duration_to_nanos(window)).max(1)),
        }
    }

    /// A policy of `quota` permits with no window stated.
    ///
    /// ```
    /// use sluicegate::adapters::server::Policy;
    /// assert_eq!(Policy::without_window("p", 3).quota(), 3);
    /// ```
    pub fn without_window(name: impl Into<String>, quota: u64) -> Self {
        Policy {
            name: name.into(),
            quota,
            window: None,
        }
    }

    /// The policy's name.
    ///
    /// ```
    /// use sluicegate::adapters::server::Policy;
    /// assert_eq!(Policy::without_window("p", 3).name(), "p");
    /// ```
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The quota, in permits.
    ///
    /// ```
    /// use sluicegate::adapters::server::Policy;
    /// assert_eq!(Policy::without_window("p", 3).quota(), 3);
    /// ```
    pub fn quota(&self) -> u64 {
        self.quota
    }

    fn write(&self, out: &mut String) {
        push_string(out, &self.name);
        let _ = write!(out, ";q={}", self.quota);
        if let Some(w) = self.window {
            let _ = write!(out, ";w={w}");
        }
    }
}

impl std::fmt::Display for Policy {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let mut out = String::new();
        self.write(&mut out);
        f.write_str(&out)
    }
}

/// Which legacy header names to send (what most APIs sent before the draft).
///
/// ```
/// use sluicegate::adapters::server::Legacy;
/// assert_ne!(Legacy::XRateLimit, Legacy::XRateDashLimit);
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Legacy {
    /// `X-RateLimit-Limit`, `X-RateLimit-Remaining`, `X-RateLimit-Reset` (the common
    /// spelling: GitHub, Twitter, most gateways).
    XRateLimit,
    /// `X-Rate-Limit-Limit`, `X-Rate-Limit-Remaining`, `X-Rate-Limit-Reset` (a spelling
    /// some APIs use).
    XRateDashLimit,
}

impl Legacy {
    fn names(self) -> [HeaderName; 3] {
        let names = match self {
            Legacy::XRateLimit => [
                "x-ratelimit-limit",
                "x-ratelimit-remaining",
                "x-ratelimit-reset",
            ],
            Legacy::XRateDashLimit => [
                "x-rate-limit-limit",
                "x-rate-limit-remaining",
                "x-rate-limit-reset",
            ],
        };
        names.map(HeaderName::from_static)
    }
}

/// Which rate-limit fields a response carries, and how they are spelled.
///
/// By default the IETF fields, for every response (allowed or refused):
///
/// ```text
/// RateLimit-Policy: "burst";q=10;w=1, "hourly";q=100;w=3600     one item per limit of a set
/// RateLimit: "burst";r=7;t=1, "hourly";r=0;t=1800               one item per limit (allowed)
/// RateLimit: "hourly";r=0;t=1800                                the limits that refused (429)
/// Retry-After: 1800                                             refused (429) only
/// ```
///
/// * `RateLimit-Policy` lists every configured [`Policy`] in the set's order; without
///   policies it is one item `"default";q=<limit>` from the decision (or, for a set
///   reporting each member, `"limit<i>";q=<its limit>` per member).
/// * `RateLimit` has one item per limit when the limiter reports every limit (a
///   direct limiter, or a keyed one whose store reports each member, see
///   [`KeyedRateLimiter::check_each`](crate::KeyedRateLimiter::check_each)), in the
///   set's order: `r` its remaining permits; `t` whole seconds, rounded up, until
///   more of its quota is there: for a limit that refuses one more permit now (it
///   refused the call, or the call spent its last permit), when its next permit
///   comes; otherwise its `reset_after` (when it is whole again). A refused call
///   lists only the limits that refused it. A single limit, or a limiter that
///   reports only the combined decision (a store that keeps
///   [`Store::apply_key_each`](crate::stores::Store::apply_key_each)'s default),
///   gets one item, for the limit that decided (the decision's `limit_index`: the
///   set's tightest member when allowed, its refusing member when refused; for a
///   grant of the last permit, the limit that holds the next one back, which the
///   server peeks for).
///   A cost that can never be granted has no `t`.
/// * `Retry-After` on a refusal: `retry_after` in whole seconds, rounded up, so a
///   client that honours it is never early; it equals the `RateLimit` item's `t`.
/// * With [`legacy`](RateLimitHeaders::legacy): `X-RateLimit-Limit` (the deciding
///   limit's capacity), `-Remaining`, `-Reset` (seconds until whole again, rounded
///   up), instead of or as well as the IETF fields.
///
/// ```
/// use sluicegate::adapters::server::{Legacy, Policy, RateLimitHeaders};
/// use sluicegate::Decision;
/// use std::time::Duration;
/// let headers = RateLimitHeaders::new().policies([Policy::new("minute", 60, Duration::from_secs(60))]);
/// let mut out = http::HeaderMap::new();
/// headers.write(&Decision::denied(60, 0, 1_200_000_000, 30_000_000_000), &mut out);
/// assert_eq!(out["ratelimit-policy"], r#""minute";q=60;w=60"#);
/// assert_eq!(out["ratelimit"], r#""minute";r=0;t=2"#);
/// assert_eq!(out["retry-after"], "2");
/// ```
#[derive(Clone, Debug)]
pub struct RateLimitHeaders {
    policies: Vec<Policy>,
    /// The `RateLimit-Policy` value when it does not depend on the decision.
    policy_value: Option<HeaderValue>,
    ietf: bool,
    legacy: Option<Legacy>,
}

impl Default for RateLimitHeaders {
    fn default() -> Self {
        Self::new()
    }
}

static RATELIMIT: HeaderName = HeaderName::from_static("ratelimit");
static RATELIMIT_POLICY: HeaderName = HeaderName::from_static("ratelimit-policy");

impl RateLimitHeaders {
    /// The IETF fields, with a `"default"` policy taken from each decision.
    ///
    /// ```
    /// use sluicegate::adapters::server::RateLimitHeaders;
    /// use sluicegate::Decision;
    /// let mut out = http::HeaderMap::new();
    /// RateLimitHeaders::new().write(&Decision::allowed(10, 9, 1_000_000_000), &mut out);
    /// assert_eq!(out["ratelimit-policy"], r#""default";q=10"#);
    /// assert_eq!(out["ratelimit"], r#""default";r=9;t=1"#);
    /// assert!(out.get("retry-after").is_none());
    /// ```
    pub fn new() -> Self {
        RateLimitHeaders {
            policies: Vec::new(),
            policy_value: None,
            ietf: true,
            legacy: None,
        }
    }

    /// No rate-limit fields at all: a refusal still carries `Retry-After`.
    ///
    /// ```
    /// use sluicegate::adapters::server::RateLimitHeaders;
    /// use sluicegate::Decision;
    /// let mut out = http::HeaderMap::new();
    /// RateLimitHeaders::none().write(&Decision::allowed(10, 9, 1_000_000_000), &mut out);
    /// assert!(out.is_empty());
    /// RateLimitHeaders::none().write(&Decision::denied(10, 0, 1, 1), &mut out);
    /// assert_eq!(out["retry-after"], "1");
    /// assert_eq!(out.len(), 1);
    /// ```
    pub fn none() -> Self {
        RateLimitHeaders {
            ietf: false,
            ..RateLimitHeaders::new()
        }
    }

    /// Names and describes the limits, in the order of the set (index 0 first; a
    /// single limit has one). A decision whose `limit_index` has no policy is named
    /// `"limit<index>"`. Names are sent as sf-strings; characters outside printable
    /// ASCII become `?`.
    ///
    /// ```
    /// use sluicegate::adapters::server::{Policy, RateLimitHeaders};
    /// use sluicegate::Decision;
    /// use std::time::Duration;
    /// let headers = RateLimitHeaders::new().policies([
    ///     Policy::new("second", 10, Duration::from_secs(1)),
    ///     Policy::new("hour", 100, Duration::from_secs(3600)),
    /// ]);
    /// let mut out = http::HeaderMap::new();
    /// headers.write(&Decision::allowed(100, 42, 2_500_000_000).with_limit_index(1), &mut out);
    /// assert_eq!(out["ratelimit-policy"], r#""second";q=10;w=1, "hour";q=100;w=3600"#);
    /// assert_eq!(out["ratelimit"], r#""hour";r=42;t=3"#);
    /// ```
    pub fn policies(mut self, policies: impl IntoIterator<Item = Policy>) -> Self {
        self.policies = policies.into_iter().collect();
        self.policy_value = if self.policies.is_empty() {
            None
        } else {
            let mut out = String::new();
            for (i, policy) in self.policies.iter().enumerate() {
                if i > 0 {
                    out.push_str(", ");
                }
                policy.write(&mut out);
            }
            HeaderValue::from_str(&out).ok()
        };
        self
    }

    /// Sends the legacy `X-RateLimit-*` fields (spelled as `names` says) as well.
    ///
    /// ```
    /// use sluicegate::adapters::server::{Legacy, RateLimitHeaders};
    /// use sluicegate::Decision;
    /// let mut out = http::HeaderMap::new();
    /// RateLimitHeaders::new().legacy(Legacy::XRateDashLimit).write(&Decision::allowed(3, 2, 1_500_000_000), &mut out);
    /// assert_eq!((&out["x-rate-limit-limit"], &out["x-rate-limit-remaining"], &out["x-rate-limit-reset"]), (&"3".parse::<http::HeaderValue>().unwrap(), &"2".parse::<http::HeaderValue>().unwrap(), &"2".parse::<http::HeaderValue>().unwrap()));
    /// assert!(out.contains_key("ratelimit"));
    /// ```
    pub fn legacy(mut self, names: Legacy) -> Self {
        self.legacy = Some(names);
        self
    }

    /// Sends only the legacy fields (as [`legacy`](RateLimitHeaders::legacy)), not
    /// the IETF ones. `Retry-After` is sent on a refusal either way.
    ///
    /// ```
    /// use sluicegate::adapters::server::{Legacy, RateLimitHeaders};
    /// use sluicegate::Decision;
    /// let mut out = http::HeaderMap::new();
    /// RateLimitHeaders::new().legacy_only(Legacy::XRateLimit).write(&Decision::allowed(3, 2, 0), &mut out);
    /// assert_eq!(out["x-ratelimit-remaining"], "2");
    /// assert!(!out.contains_key("ratelimit") && !out.contains_key("ratelimit-policy"));
    /// ```
    pub fn legacy_only(mut self, names: Legacy) -> Self {
        self.legacy = Some(names);
        self.ietf = false;
        self
    }

    /// Writes the fields for `decision` into `headers` (replacing any of the same
    /// name): `Retry-After` on a denial, and the configured rate-limit fields, with
    /// one `RateLimit` item, for the limit that decided.
    ///
    /// ```
    /// use sluicegate::adapters::server::RateLimitHeaders;
    /// use sluicegate::Decision;
    /// let mut out = http::HeaderMap::new();
    /// RateLimitHeaders::new().write(&Decision::never(5, 5, 0), &mut out);
    /// assert_eq!(out["ratelimit"], r#""default";r=5"#); // no t: never
    /// assert!(!out.contains_key("retry-after"));
    /// ```
    pub fn write(&self, decision: &Decision, headers: &mut HeaderMap) {
        self.write_each(decision, std::slice::from_ref(decision), headers);
    }

    /// [`write`](RateLimitHeaders::write) with one `RateLimit` item per limit:
    /// `each` is how every limit stands after the call, in the set's order (what
    /// [`KeyedRateLimiter::check_each`](crate::KeyedRateLimiter::check_each)
    /// reports). Item `i` is named by policy `i` (`"limit<i>"` without policies,
    /// whose `RateLimit-Policy` then lists `"limit<i>";q=<its limit>`); its `r` is
    /// that limit's `remaining`, its `t` its `retry_after` if it refuses (its next
    /// permit), else its `reset_after`. A single entry in `each` is the limit that
    /// decided, named as [`write`](RateLimitHeaders::write) names it.
    ///
    /// A refused call lists only the limits that refused it: the others took
    /// nothing, and what they report is their standing after a grant that did not
    /// happen (see [`Algorithm::reserve_each`](crate::algorithms::Algorithm::reserve_each)).
    /// `Retry-After` and the legacy fields come from `decision`, the combined one.
    ///
    /// ```
    /// use sluicegate::adapters::server::{Policy, RateLimitHeaders};
    /// use sluicegate::Decision;
    /// use std::time::Duration;
    /// let headers = RateLimitHeaders::new().policies([
    ///     Policy::new("second", 10, Duration::from_secs(1)),
    ///     Policy::new("hour", 100, Duration::from_secs(3600)),
    /// ]);
    /// let each = [Decision::allowed(10, 9, 100_000_000), Decision::allowed(100, 42, 2_500_000_000)];
    /// let mut out = http::HeaderMap::new();
    /// headers.write_each(&each[0], &each, &mut out);
    /// assert_eq!(out["ratelimit"], r#""second";r=9;t=1, "hour";r=42;t=3"#);
    /// ```
    pub fn write_each(&self, decision: &Decision, each: &[Decision], headers: &mut HeaderMap) {
        if decision.verdict() == Verdict::Denied {
            let retry = ceil_seconds(decision.retry_after_nanos());
            headers.insert(RETRY_AFTER, HeaderValue::from(retry));
        }
        if self.ietf {
            self.write_ietf(decision, each, headers);
        }
        if let Some(legacy) = self.legacy {
            let [limit, remaining, reset] = legacy.names();
            headers.insert(limit, HeaderValue::from(decision.limit()));
            headers.insert(remaining, HeaderValue::from(decision.remaining()));
            headers.insert(
                reset,
                HeaderValue::from(ceil_seconds(decision.reset_after_nanos())),
            );
        }
    }

    /// True if a grant gets any field (false for [`none`](RateLimitHeaders::none)),
    /// so that the server skips describing grants at all when not.
    pub(crate) fn describes_grants(&self) -> bool {
        self.ietf || self.legacy.is_some()
    }

    /// True if the `RateLimit` field is sent, whose items describe each limit.
    pub(crate) fn lists_limits(&self) -> bool {
        self.ietf
    }

    fn write_ietf(&self, decision: &Decision, each: &[Decision], headers: &mut HeaderMap) {
        let single = each.len() <= 1;
        let refused = !decision.is_allowed();
        let mut items = String::with_capacity(48 * each.len().max(1));
        for (position, limit) in each.iter().enumerate() {
            if refused && !single && limit.is_allowed() {
                continue;
            }
            if !items.is_empty() {
                items.push_str(", ");
            }
            let index = if single {
                limit.limit_index() as usize
            } else {
                position
            };
            match self.policies.get(index) {
                Some(policy) => push_string(&mut items, &policy.name),
                None if single && self.policies.is_empty() => items.push_str("\"default\""),
                None => {
                    let _ = write!(items, "\"limit{index}\"");
                }
            }
            let _ = write!(items, ";r={}", limit.remaining().min(MAX_SF_INTEGER));
            let t = match limit.verdict() {
                Verdict::Denied => Some(limit.retry_after_nanos()),
                Verdict::Allowed => Some(limit.reset_after_nanos()),
                Verdict::Never => None,
            };
            if let Some(t) = t {
                let _ = write!(items, ";t={}", ceil_seconds(t));
            }
        }
        if let Ok(value) = HeaderValue::from_str(&items) {
            headers.insert(RATELIMIT.clone(), value);
        }
        let policy = match &self.policy_value {
            Some(value) => Some(value.clone()),
            None if single => {
                let quota = decision.limit().min(MAX_SF_INTEGER);
                HeaderValue::from_str(&format!("\"default\";q={quota}")).ok()
            }
            None => {
                let mut out = String::new();
                for (index, limit) in each.iter().enumerate() {
                    if index > 0 {
                        out.push_str(", ");
                    }
                    let quota = limit.limit().min(MAX_SF_INTEGER);
                    let _ = write!(out, "\"limit{index}\";q={quota}");
                }
                HeaderValue::from_str(&out).ok()
            }
        };
        if let Some(policy) = policy {
            headers.insert(RATELIMIT_POLICY.clone(), policy);
        }
    }
}

/// The largest Integer a structured field can carry (15 digits); larger counts
/// (an unlimited set's `u64::MAX` remaining) are sent as this.
const MAX_SF_INTEGER: u64 = 999_999_999_999_999;

/// Whole seconds, rounded up: a client told to wait this long is never early.
/// Capped at the structured-field Integer maximum.
pub(crate) fn ceil_seconds(nanos: Nanos) -> u64 {
    nanos.div_ceil(NANOS_PER_SECOND).min(MAX_SF_INTEGER)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn seconds_round_up() {
        assert_eq!(ceil_seconds(0), 0);
        assert_eq!(ceil_seconds(1), 1);
        assert_eq!(ceil_seconds(NANOS_PER_SECOND), 1);
        assert_eq!(ceil_seconds(NANOS_PER_SECOND + 1), 2);
        assert_eq!(ceil_seconds(u64::MAX), 18_446_744_074);
    }
}
