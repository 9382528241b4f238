//! Division by a number fixed at construction, by a kept multiplier.
//!
//! A hardware division takes tens of cycles, and a grant's compare-and-swap waits
//! for every instruction before it; a multiplication and a shift take a few. For a
//! divisor `d ≥ 2`, let `s = ⌈log₂ d⌉ − 1` (so `2ˢ < d ≤ 2ˢ⁺¹`) and keep
//! `m = ⌈2⁶⁴⁺ˢ / d⌉`, which fits 64 bits. Then for every `n < 2⁶³`
//!
//! ```text
//!   ⌊n / d⌋ = ⌊n · m / 2⁶⁴⁺ˢ⌋      (the high word of n · m, shifted right by s)
//! ```
//!
//! exactly. Proof: write `m · d = 2⁶⁴⁺ˢ + e` with `0 ≤ e < d ≤ 2ˢ⁺¹`, and
//! `n = q · d + r` with `r < d`. Then `n · m / 2⁶⁴⁺ˢ = q + (r + n · e / 2⁶⁴⁺ˢ) / d`,
//! and `n · e < 2⁶³ · 2ˢ⁺¹ = 2⁶⁴⁺ˢ`, so the bracket stays below `r + 1 ≤ d`: the
//! floor is `q`. A dividend of 2⁶³ or more (292 years of nanoseconds: rare, and
//! never a clock reading of a limiter's first 292 years) divides in hardware.
//! `d = 1` keeps `m = 0` and answers `n`.

/// A divisor and its kept multiplier (see the [module docs](self)).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Divisor {
    divisor: u64,
    multiplier: u64,
}

impl Divisor {
    /// Division by `divisor`, which must be at least 1 (a 0 is read as 1, so that
    /// no division by it can panic).
    pub(crate) fn new(divisor: u64) -> Self {
        let divisor = divisor.max(1);
        Divisor {
            divisor,
            multiplier: multiplier(divisor),
        }
    }

    /// The divisor with a multiplier that [`new`](Self::new) computed for it
    /// (kept in a cell's configuration words, which decoding must not divide for).
    #[inline(always)]
    pub(crate) fn from_parts(divisor: u64, multiplier: u64) -> Self {
        Divisor {
            divisor,
            multiplier,
        }
    }

    /// The kept multiplier, for encoding.
    #[inline(always)]
    pub(crate) fn multiplier(self) -> u64 {
        self.multiplier
    }

    /// `⌊n / d⌋`.
    #[inline(always)]
    pub(crate) fn divide(self, n: u64) -> u64 {
        if n >> 63 == 0 {
            if self.multiplier == 0 {
                return n;
            }
            // d ≥ 2 here, so d − 1 ≥ 1 and the shift is at most 62.
            let shift = 63 - (self.divisor - 1).leading_zeros();
            let high = (u128::from(n) * u128::from(self.multiplier)) >> 64;
            return (high as u64) >> shift;
        }
        n / self.divisor
    }
}

/// `⌈2⁶⁴⁺ˢ / d⌉` for `d ≥ 2`; 0 for `d < 2`.
fn multiplier(divisor: u64) -> u64 {
    if divisor < 2 {
        return 0;
    }
    let shift = 63 - (divisor - 1).leading_zeros();
    // d > 2ˢ, so the quotient is below 2⁶⁴ (module docs).
    (1u128 << (64 + shift)).div_ceil(u128::from(divisor)) as u64
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// Divisors and dividends at the edges: powers of two and their neighbours,
    /// up to the largest dividend the multiplier serves and past it.
    #[test]
    fn divides_exactly_at_the_edges() {
        let mut values = vec![0, 1, 2, 3, 5, 7, 1_000_000_000, u64::MAX];
        for bit in 0..64 {
            let power = 1u64 << bit;
            values.extend([power - 1, power, power + 1]);
        }
        for &divisor in &values {
            let by = Divisor::new(divisor);
            for &n in &values {
                assert_eq!(by.divide(n), n / divisor.max(1), "{n} / {divisor}");
            }
        }
    }

    proptest! {
        #[test]
        fn divides_exactly(divisor in 1u64.., n: u64, small in 0u64..1 << 40) {
            let by = Divisor::new(divisor);
            prop_assert_eq!(by.divide(n), n / divisor);
            prop_assert_eq!(by.divide(small), small / divisor);
            let last = (i64::MAX as u64) / divisor * divisor;
            prop_assert_eq!(by.divide(last), last / divisor);
            prop_assert_eq!(by.divide(last.saturating_sub(1)), last.saturating_sub(1) / divisor);
            let kept = Divisor::from_parts(by.divisor, by.multiplier());
            prop_assert_eq!(kept, by);
        }
    }
}
