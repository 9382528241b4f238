//! The leaky bucket's ticks: the exact fraction `count / period` turned into
//! whole ticks per permit, and the conversions between clock readings in
//! nanoseconds and instants of the state in ticks (see the
//! [module docs](super#driftless)).

use super::LeakyBucket;
use crate::clock::Nanos;

/// The tick arithmetic derived from a configuration: one permit is `per_permit`
/// ticks, and `num / den` ticks pass per nanosecond (`num == den` when a tick is a
/// nanosecond).
#[derive(Clone, Copy, Debug)]
pub(super) struct Ticks {
    pub(super) per_permit: u64,
    pub(super) num: u64,
    pub(super) den: u64,
}

/// A clock reading in ticks, `ticks = ⌊nanos × num / den⌋`, and the remainder
/// `nanos × num mod den` that the rounding dropped (0 when a tick is a
/// nanosecond): what the tests' plain model measures waits from.
#[cfg(test)]
#[derive(Clone, Copy, Debug)]
pub(super) struct Reading {
    pub(super) ticks: u64,
    pub(super) dropped: u64,
}

impl Ticks {
    /// The clock reading `nanos` in ticks, rounded down.
    #[inline]
    pub(super) fn reading(self, nanos: Nanos) -> u64 {
        if self.num == self.den {
            return nanos;
        }
        // num = den + excess with excess < count, so ticks = nanos + ⌊nanos × excess /
        // den⌋: one 64-bit division whenever nanos × excess fits (always, for small
        // counts), instead of a 128-bit one.
        let excess = self.num - self.den;
        if let Some(scaled) = nanos.checked_mul(excess) {
            return nanos.saturating_add(scaled / self.den);
        }
        let scaled = u128::from(nanos) * u128::from(self.num);
        u64::try_from(scaled / u128::from(self.den)).unwrap_or(u64::MAX)
    }

    /// The reading `nanos` with the remainder its rounding dropped (which is that
    /// of `nanos × excess` whenever that fits).
    #[cfg(test)]
    pub(super) fn read(self, nanos: Nanos) -> Reading {
        let excess = self.num - self.den;
        let dropped = match nanos.checked_mul(excess) {
            Some(scaled) => scaled % self.den,
            None => (u128::from(nanos) * u128::from(self.num) % u128::from(self.den)) as u64,
        };
        Reading {
            ticks: self.reading(nanos),
            dropped,
        }
    }

    /// How long after the reading `now` the clock first reads at least `target`
    /// ticks: the smallest `t` with `dropped + t × num ≥ (target − now) × den`. Exact,
    /// so that rounding `now` down never makes a wait a nanosecond late, and in 64-bit
    /// arithmetic whenever it fits (the common case). The step measures the same
    /// wait as `first_reading(target) − now`, which does not wait for `now`'s
    /// conversion; this, the wait from the reading, serves the tests (and their
    /// plain model of the step).
    #[cfg(test)]
    pub(super) fn until(self, now: Reading, target: u128) -> Nanos {
        let Some(delta) = target.checked_sub(u128::from(now.ticks)).filter(|&d| d > 0) else {
            return 0;
        };
        if self.num == self.den {
            return u64::try_from(delta).unwrap_or(u64::MAX);
        }
        self.nanos_for(now, delta)
    }

    /// The first clock reading, in nanoseconds, that reads at least `target`
    /// ticks: the least `n` with `n × num ≥ target × den`, that is
    /// `target − ⌊target × excess / num⌋` (as `den = num − excess`), one 64-bit
    /// division whenever `target × excess` fits. It depends on the target alone,
    /// not on `now`, so for a target read off the state it runs beside the clock
    /// read instead of after it.
    #[inline(always)]
    pub(super) fn first_reading(self, target: u64) -> Nanos {
        if self.num == self.den {
            return target;
        }
        let excess = self.num - self.den;
        if let Some(lag) = target.checked_mul(excess) {
            return target - lag / self.num;
        }
        let need = u128::from(target) * u128::from(self.den);
        u64::try_from(need.div_ceil(u128::from(self.num))).unwrap_or(u64::MAX)
    }

    /// The nanoseconds after the reading `now` that `delta > 0` more ticks take:
    /// `⌈(delta · den − dropped) / num⌉`. As `den = num − excess`, that is
    /// `delta − ⌊(delta · excess + dropped) / num⌋`, which stays in 64 bits for a
    /// backlog far longer than `delta · den` does (excess < count), where the
    /// 128-bit quotient would cost a library call.
    #[cfg(test)]
    pub(super) fn nanos_for(self, now: Reading, delta: u128) -> Nanos {
        let excess = self.num - self.den;
        let short = u64::try_from(delta).ok().and_then(|delta| {
            let lag = delta.checked_mul(excess)?.checked_add(now.dropped)?;
            Some(delta - lag / self.num)
        });
        if let Some(nanos) = short {
            return nanos;
        }
        let need = delta * u128::from(self.den) - u128::from(now.dropped);
        u64::try_from(need.div_ceil(u128::from(self.num))).unwrap_or(u64::MAX)
    }
}

/// How many whole permits `ticks` hold: no division for less than one permit, as
/// in a full bucket.
#[inline]
pub(super) fn whole_permits(ticks: u64, per_permit: u64) -> u64 {
    if ticks < per_permit {
        return 0;
    }
    ticks / per_permit
}

impl LeakyBucket {
    #[inline]
    pub(super) fn ticks(&self) -> Ticks {
        let count = u64::from(self.count);
        if count == 1 {
            return Ticks {
                per_permit: self.period,
                num: 1,
                den: 1,
            };
        }
        // count × ⌈period / count⌉ < period + count ≤ 2⁶³ + 2³², so it fits.
        Ticks {
            per_permit: self.per_permit,
            num: count.wrapping_mul(self.per_permit),
            den: self.period,
        }
    }
}
