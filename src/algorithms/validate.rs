//! Parameter checks shared by the algorithms' constructors: each returns the value
//! in the unit the algorithm computes with, or a typed error naming the parameter.

use crate::clock::{duration_to_nanos, Nanos};
use crate::error::ConfigError;
use std::time::Duration;

/// A rate in permits per second: positive, with `+inf` meaning unlimited. Zero,
/// negative values, NaN and `-inf` are refused.
pub(crate) fn validate_rate(rate: f64) -> Result<f64, ConfigError> {
    if rate > 0.0 {
        Ok(rate)
    } else {
        Err(ConfigError::InvalidRate { rate })
    }
}

/// A period that fits the signed nanosecond arithmetic (under 292 years); zero is
/// allowed (a zero burst or warm-up means "none").
pub(crate) fn validate_period(what: &'static str, period: Duration) -> Result<Nanos, ConfigError> {
    let nanos = duration_to_nanos(period);
    if nanos > i64::MAX as u64 {
        return Err(ConfigError::InvalidDuration {
            what,
            value: period,
            requirement: "at most i64::MAX nanoseconds (about 292 years)",
        });
    }
    Ok(nanos)
}

/// A period that must also be positive: a window, a bucket, a leak period.
pub(crate) fn validate_positive_period(
    what: &'static str,
    period: Duration,
) -> Result<Nanos, ConfigError> {
    let nanos = validate_period(what, period)?;
    if nanos == 0 {
        return Err(ConfigError::InvalidDuration {
            what,
            value: period,
            requirement: "positive",
        });
    }
    Ok(nanos)
}
