//! The rate-limit fields a server sends: `Retry-After`, the IETF `RateLimit` and
//! `RateLimit-Policy` (draft-ietf-httpapi-ratelimit-headers-10), and the legacy
//! `X-RateLimit-*` trio.

use super::partition::push_binary;
use super::policy::{Legacy, Policy};
use crate::adapters::fields::push_string;
use crate::algorithms::{Decision, Verdict};
use crate::clock::{Nanos, NANOS_PER_SECOND};
use http::header::{HeaderMap, HeaderName, HeaderValue, RETRY_AFTER};
use std::fmt::Write;

/// Which rate-limit fields a response carries, and how they are spelled.
///
/// By default the IETF fields, for every response (allowed or refused):
///
/// ```text
/// RateLimit-Policy: "burst";q=10;w=1, "hourly";q=100;w=3600     one item per limit of a set
/// RateLimit: "burst";r=7;t=1, "hourly";r=60;t=35                one item per limit (allowed)
/// RateLimit: "hourly";r=0;t=1800                                the limits that refused (429)
/// Retry-After: 1800                                             refused (429) only
/// ```
///
/// * `RateLimit-Policy` lists every configured [`Policy`] in the set's order; without
///   policies it is one item `"default";q=<limit>` from the decision (or, for a set
///   reporting each limit, `"limit<i>";q=<its limit>` per limit).
/// * `RateLimit` has one item per limit when the limiter reports every limit (a
///   direct limiter, or a keyed one whose store reports each limit, see
///   [`KeyedRateLimiter::check_each`](crate::KeyedRateLimiter::check_each)), in the
///   set's order, a nested set's limits in its place (the order of
///   [`Policy::describe`]). On a grant each item is that limit's
///   [`standing`](crate::algorithms::Algorithm::standing): `r` its remaining
///   permits, `t` the whole seconds, rounded up, until more than `r` are there (the
///   draft's "time until additional quota is made available": a fixed window's end,
///   the moment a sliding window's oldest counted permits leave it, a bucket's next
///   permit); a limit left whole (or one that would grant more at once, as a
///   pay-later limiter may) has its `reset_after` as `t`. A refused call lists only the
///   limits that refused it, each with `r=0` (nothing is left for this request) and
///   `t` its `retry_after`. A single limit, or a limiter that reports only the
///   combined decision (a store that keeps
///   [`Store::apply_key_each`](crate::stores::Store::apply_key_each)'s default),
///   gets one item, for the limit that decided (the decision's `limit_index`: the
///   set's tightest limit when allowed, its refusing limit when refused). A cost
///   that can never be granted has no `t`, and `r` what is left.
/// * `Retry-After` on a refusal: `retry_after` in whole seconds, rounded up, so a
///   client that honours it is never early; it equals the `t` of the refusing
///   item whose retry is longest.
/// * With [`legacy`](RateLimitHeaders::legacy): `X-RateLimit-Limit`,
///   `-Remaining` and `-Reset` (seconds until that limit is whole again, rounded
///   up), instead of or as well as the IETF fields. All three describe **one
///   limit**: on a refusal the one that refused (so `-Remaining` is 0 and `-Reset`
///   is never earlier than `Retry-After`), on a grant the one that decided, the
///   tightest (fewest remaining).
///
/// **Fields already on the response** (a layer inside this one, or the application,
/// wrote them) are kept, so that stacked layers each add what they know: the
/// `RateLimit` and `RateLimit-Policy` items go on their own field lines
/// ([`HeaderMap::append`]; the draft lets a list span lines), so a client sees every
/// limit that applies and which one refused (`r=0`; an outer layer's grant item may
/// then have a `t` beyond `Retry-After`, as its limit did not refuse, and the draft
/// has clients follow `Retry-After` over `t`); a `Retry-After` already there
/// is never shortened (a longer one replaces it; an HTTP-date is left as it is);
/// the legacy trio, which can describe only one limit, is replaced only by one with
/// fewer remaining, so the refusing limit (0 remaining) is kept over a grant's.
///
/// ```
/// use sluicegate::adapters::server::{Policy, RateLimitHeaders};
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

    /// Writes the fields for `decision` into `headers`: `Retry-After` on a denial,
    /// and the configured rate-limit fields, with one `RateLimit` item, for the
    /// limit that decided. Fields already in `headers` are kept as the type docs
    /// say.
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
    /// that limit's `remaining` (0 on a denial), its `t` its `retry_after` if it
    /// refuses, else its `reset_after`. A single entry in `each` is the limit that
    /// decided, named as [`write`](RateLimitHeaders::write) names it.
    ///
    /// A refused call lists only the limits that refused it: the others took
    /// nothing, and what they report is their standing after a grant that did not
    /// happen (see [`Algorithm::reserve_each`](crate::algorithms::Algorithm::reserve_each)).
    /// `Retry-After` comes from `decision`, the combined one; the legacy fields from
    /// the entry of `each` at the decision's `limit_index` (the refusing or the
    /// tightest limit), or from `decision` when `each` has one entry.
    ///
    /// ```
    /// use sluicegate::adapters::server::{Legacy, Policy, RateLimitHeaders};
    /// use sluicegate::Decision;
    /// use std::time::Duration;
    /// let headers = RateLimitHeaders::new()
    ///     .policies([
    ///         Policy::new("second", 10, Duration::from_secs(1)),
    ///         Policy::new("hour", 100, Duration::from_secs(3600)),
    ///     ])
    ///     .legacy(Legacy::XRateLimit);
    /// // The second refused (retry in 1 s); the hour would have granted.
    /// let each = [
    ///     Decision::denied(10, 0, 400_000_000, 1_000_000_000),
    ///     Decision::allowed(100, 42, 2_500_000_000_000),
    /// ];
    /// let refusal = Decision::denied(10, 0, 400_000_000, 2_500_000_000_000);
    /// let mut out = http::HeaderMap::new();
    /// headers.write_each(&refusal, &each, &mut out);
    /// assert_eq!(out["ratelimit"], r#""second";r=0;t=1"#);
    /// assert_eq!(out["retry-after"], "1");
    /// // One limit, the one that refused: not the hour's 2500 s.
    /// let legacy = ["x-ratelimit-limit", "x-ratelimit-remaining", "x-ratelimit-reset"].map(|name| &out[name]);
    /// assert_eq!(legacy, ["10", "0", "1"]);
    /// ```
    pub fn write_each(&self, decision: &Decision, each: &[Decision], headers: &mut HeaderMap) {
        self.write_with(decision, each, None, false, headers);
    }

    /// [`write_each`](RateLimitHeaders::write_each), each `RateLimit` item also
    /// carrying the partition key `pk` when one is given. `fresh`: `headers` are a
    /// response of the caller's own, with no field yet, so nothing there needs to
    /// be kept (the server's refusals).
    pub(super) fn write_with(
        &self,
        decision: &Decision,
        each: &[Decision],
        partition: Option<&[u8; 8]>,
        fresh: bool,
        headers: &mut HeaderMap,
    ) {
        if decision.verdict() == Verdict::Denied {
            write_retry_after(decision, fresh, headers);
        }
        if self.ietf {
            self.write_items(decision, each, partition, headers);
            self.write_policy(decision, each, headers);
        }
        if let Some(legacy) = self.legacy {
            write_legacy(legacy, decision, each, fresh, headers);
        }
    }

    /// True if a grant gets any field (false for [`none`](RateLimitHeaders::none)),
    /// so that the server skips describing grants at all when not.
    pub(crate) fn describes_grants(&self) -> bool {
        self.ietf || self.legacy.is_some()
    }

    /// Appends the `RateLimit` field: one item per limit, as the type docs say.
    fn write_items(
        &self,
        decision: &Decision,
        each: &[Decision],
        partition: Option<&[u8; 8]>,
        headers: &mut HeaderMap,
    ) {
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
            // A refusing limit: nothing is left for this request until `t` (one that
            // can never grant the cost keeps what is left, with no `t`).
            let remaining = if refused && limit.verdict() == Verdict::Denied {
                0
            } else {
                limit.remaining()
            };
            let _ = write!(items, ";r={}", remaining.min(MAX_SF_INTEGER));
            let t = match limit.verdict() {
                Verdict::Denied => Some(limit.retry_after_nanos()),
                Verdict::Allowed => Some(limit.reset_after_nanos()),
                Verdict::Never => None,
            };
            if let Some(t) = t {
                let _ = write!(items, ";t={}", ceil_seconds(t));
            }
            if let Some(key) = partition {
                items.push_str(";pk=");
                push_binary(&mut items, key);
            }
        }
        if let Ok(value) = HeaderValue::from_str(&items) {
            headers.append(RATELIMIT.clone(), value);
        }
    }

    /// Appends the `RateLimit-Policy` field (the IETF fields only): the configured
    /// policies, or the ones read off `decision` and `each`. What a response that
    /// was held back and then let through carries (see
    /// [`ServerLayer::delay_up_to`](super::ServerLayer::delay_up_to)).
    pub(super) fn write_policy(
        &self,
        decision: &Decision,
        each: &[Decision],
        headers: &mut HeaderMap,
    ) {
        if !self.ietf {
            return;
        }
        let policy = match &self.policy_value {
            Some(value) => Some(value.clone()),
            None if each.len() <= 1 => {
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
            headers.append(RATELIMIT_POLICY.clone(), policy);
        }
    }
}

/// Writes a denial's `Retry-After`, unless one already there is at least as long
/// (or is an HTTP-date, which this cannot compare without a clock).
pub(super) fn write_retry_after(decision: &Decision, fresh: bool, headers: &mut HeaderMap) {
    let retry = ceil_seconds(decision.retry_after_nanos());
    if fresh {
        headers.insert(RETRY_AFTER, HeaderValue::from(retry));
        return;
    }
    let kept = headers.get(RETRY_AFTER).map(|v| {
        v.to_str()
            .ok()
            .and_then(|text| text.trim().parse::<u64>().ok())
    });
    match kept {
        Some(Some(existing)) if existing >= retry => {}
        Some(None) => {}
        _ => {
            headers.insert(RETRY_AFTER, HeaderValue::from(retry));
        }
    }
}

/// Writes the legacy trio for one limit (see the type docs), unless a trio
/// already there has no more remaining.
fn write_legacy(
    legacy: Legacy,
    decision: &Decision,
    each: &[Decision],
    fresh: bool,
    headers: &mut HeaderMap,
) {
    let source = match each {
        [_, _, ..] => each
            .get(decision.limit_index() as usize)
            .unwrap_or(decision),
        _ => decision,
    };
    let denied = decision.verdict() == Verdict::Denied;
    let (remaining, reset) = if denied {
        let reset = source.reset_after_nanos().max(decision.retry_after_nanos());
        (0, reset)
    } else {
        (source.remaining(), source.reset_after_nanos())
    };
    let [limit_name, remaining_name, reset_name] = legacy.names();
    if !fresh {
        let existing = headers
            .get(&remaining_name)
            .and_then(|v| v.to_str().ok()?.trim().parse::<u64>().ok());
        if existing.is_some_and(|existing| existing <= remaining) {
            return;
        }
    }
    headers.insert(limit_name, HeaderValue::from(source.limit()));
    headers.insert(remaining_name, HeaderValue::from(remaining));
    headers.insert(reset_name, HeaderValue::from(ceil_seconds(reset)));
}

/// The largest Integer a structured field can carry (15 digits); larger counts
/// (an unlimited set's `u64::MAX` remaining) are sent as this.
pub(super) const MAX_SF_INTEGER: u64 = 999_999_999_999_999;

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
