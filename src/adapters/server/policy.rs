//! One limit as a client should know it (a `RateLimit-Policy` item), and the
//! spellings of the legacy fields.

use super::headers::{ceil_seconds, MAX_SF_INTEGER};
use crate::adapters::fields::push_string;
use crate::clock::duration_to_nanos;
use http::header::HeaderName;
use std::fmt::Write;
use std::time::Duration;

/// One limit as a client should know it: the `RateLimit-Policy` item
/// `"name";q=quota;qu="unit";w=window`, and the name its `RateLimit` item carries.
///
/// The quota is in the policy's quota units: permits, which are requests when every
/// request costs 1 (the draft's default unit, `"requests"`, sent as no `qu`). A
/// weigher that charges something else says so with
/// [`quota_unit`](Policy::quota_unit) (the draft registers `"content-bytes"` and
/// `"concurrent-requests"`). The window is in whole seconds (the draft allows no
/// finer), rounded up; a policy without a window sends no `w`. A structured field's
/// integer has at most 15 digits, so a larger quota or window is sent as
/// 999,999,999,999,999 (the quota keeps its value in [`quota`](Policy::quota)).
///
/// ```
/// use sluicegate::adapters::server::Policy;
/// use std::time::Duration;
/// let p = Policy::new("burst", 100, Duration::from_secs(60));
/// assert_eq!(p.to_string(), r#""burst";q=100;w=60"#);
/// assert_eq!(Policy::without_window("daily", 5).to_string(), r#""daily";q=5"#);
/// let unlimited = Policy::without_window("any", u64::MAX);
/// assert_eq!(unlimited.to_string(), r#""any";q=999999999999999"#);
/// assert_eq!(unlimited.quota(), u64::MAX);
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Policy {
    pub(super) name: String,
    quota: u64,
    unit: Option<String>,
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
            unit: None,
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
            unit: None,
            window: None,
        }
    }

    /// States the quota unit `qu`: what one permit of this limit stands for, e.g.
    /// `"content-bytes"` for a weigher that charges a request its body's length. Sent
    /// as an sf-string (characters outside printable ASCII become `?`); an empty
    /// unit sends no `qu`, as does a policy without one (the draft's default,
    /// requests).
    ///
    /// ```
    /// use sluicegate::adapters::server::Policy;
    /// use std::time::Duration;
    /// let bytes = Policy::new("upload", 65_535, Duration::from_secs(10)).quota_unit("content-bytes");
    /// assert_eq!(bytes.to_string(), r#""upload";q=65535;qu="content-bytes";w=10"#);
    /// assert_eq!(bytes.unit(), Some("content-bytes"));
    /// assert_eq!(Policy::without_window("p", 1).quota_unit("").unit(), None);
    /// ```
    pub fn quota_unit(mut self, unit: impl Into<String>) -> Self {
        let unit = unit.into();
        self.unit = (!unit.is_empty()).then_some(unit);
        self
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

    /// The quota, in the policy's units.
    ///
    /// ```
    /// use sluicegate::adapters::server::Policy;
    /// assert_eq!(Policy::without_window("p", 3).quota(), 3);
    /// ```
    pub fn quota(&self) -> u64 {
        self.quota
    }

    /// The quota unit set with [`quota_unit`](Policy::quota_unit), if any.
    ///
    /// ```
    /// use sluicegate::adapters::server::Policy;
    /// assert_eq!(Policy::without_window("p", 3).unit(), None);
    /// ```
    pub fn unit(&self) -> Option<&str> {
        self.unit.as_deref()
    }

    pub(super) fn write(&self, out: &mut String) {
        push_string(out, &self.name);
        let _ = write!(out, ";q={}", self.quota.min(MAX_SF_INTEGER));
        if let Some(unit) = &self.unit {
            out.push_str(";qu=");
            push_string(out, unit);
        }
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
    pub(super) fn names(self) -> [HeaderName; 3] {
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
