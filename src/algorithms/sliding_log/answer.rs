//! What a call on the log is told: its decision's fields (when the spacing ends,
//! when enough entries expire, when everything blocking has gone), for a grant, a
//! refusal and a refusal the log records. Read from the words as they were before
//! the step writes.

use super::ring::{Header, View};
use super::SlidingLog;
use crate::algorithms::words::Words;
use crate::algorithms::Decision;
use crate::clock::Nanos;

impl SlidingLog {
    /// When the minimum spacing after the last call ends: at 0 when there is none,
    /// never (`None`) when its end would reach the clock's last reading
    /// (`u64::MAX` ns, which stands for "for ever"), so that a spacing of 584 years
    /// allows one call, ever.
    #[inline(always)]
    pub(super) fn spacing_end(&self, last: Option<Nanos>) -> Option<Nanos> {
        match last {
            Some(last) if self.min_spacing > 0 => last
                .checked_add(self.min_spacing)
                .filter(|end| *end < Nanos::MAX),
            _ => Some(0),
        }
    }

    /// The first instant at which the entries from `from` on, plus `attempt` (a
    /// recorded refusal's own entry) if given, have expired enough that `cost` more
    /// fits the limit. A binary search on the running counts: O(log len).
    pub(super) fn fits_at<W: Words + ?Sized>(
        &self,
        words: &W,
        header: &Header,
        from: u64,
        attempt: Option<(Nanos, u64)>,
        cost: u64,
    ) -> Nanos {
        let allowed = self.limit.saturating_sub(cost);
        let extra = attempt.map_or(0, |(_, cost)| cost);
        // Permits still logged once entries `from ..= index` have expired (the
        // attempt is entry `len`).
        let after = |index: u64| {
            if index >= header.len {
                0
            } else {
                header.from(words, index + 1).saturating_add(extra)
            }
        };
        let live = header.from(words, from).saturating_add(extra);
        if live <= allowed {
            return 0;
        }
        // The first index whose expiry brings the count within `allowed`: in
        // [from, last], where `last` (the newest, or the attempt) always does.
        let last = if attempt.is_some() {
            header.len
        } else {
            header.len.saturating_sub(1)
        };
        let (mut low, mut high) = (from, last);
        while low < high {
            let middle = low + (high - low) / 2;
            if after(middle) <= allowed {
                high = middle;
            } else {
                low = middle + 1;
            }
        }
        let at = match attempt {
            Some((at, _)) if low >= header.len => at,
            _ => header.time(words, low),
        };
        at.saturating_add(self.window)
    }

    /// When everything that blocks a call has gone.
    pub(super) fn reset_at(&self, newest: Option<Nanos>, last: Option<Nanos>) -> Nanos {
        let expired = newest.map_or(0, |at| at.saturating_add(self.window));
        expired.max(self.spacing_end(last).unwrap_or(Nanos::MAX))
    }

    pub(super) fn remaining(&self, live: u64) -> u64 {
        self.limit.saturating_sub(live)
    }

    /// The decision at `view` for a call the step `granted` or refused (a cost
    /// above the limit, or a spacing that never ends, is never), without recording
    /// a refused attempt: only its fields, the verdict being the plan's.
    pub(super) fn describe<W: Words + ?Sized>(
        &self,
        words: &W,
        view: &View,
        now: Nanos,
        cost: u64,
        granted: bool,
    ) -> Decision {
        let header = &view.header;
        let last = header.last();
        let reset = self.reset_at(last, last).saturating_sub(now);
        let remaining = self.remaining(view.live);
        if cost > self.limit {
            return Decision::never(self.limit, remaining, reset);
        }
        if granted {
            let reset = self
                .reset_at(Some(header.at), Some(header.at))
                .saturating_sub(now);
            let remaining = self.remaining(view.live.saturating_add(cost));
            return Decision::allowed(self.limit, remaining, reset);
        }
        let Some(spaced) = self.spacing_end(last) else {
            return Decision::never(self.limit, remaining, reset);
        };
        let at = self
            .fits_at(words, header, view.first_live, None, cost)
            .max(spaced);
        Decision::denied(self.limit, remaining, at.saturating_sub(now), reset)
    }

    /// The decision of a call the plan answered (`granted`, `recorded`: a refusal
    /// it records), described on the words before the step writes.
    pub(super) fn decision_of<W: Words + ?Sized>(
        &self,
        words: &W,
        ring: u64,
        now: Nanos,
        cost: u64,
        (granted, recorded): (bool, bool),
    ) -> Decision {
        let view = self.view(words, ring, now);
        if recorded {
            self.recorded_refusal(words, &view, now, cost)
        } else {
            self.describe(words, &view, now, cost, granted)
        }
    }

    /// The decision a recorded refusal gives: as if the attempt were already in the
    /// log, so that a retry at `retry_after` succeeds.
    pub(super) fn recorded_refusal<W: Words + ?Sized>(
        &self,
        words: &W,
        view: &View,
        now: Nanos,
        cost: u64,
    ) -> Decision {
        let header = &view.header;
        // The entries that stay after dropping the expired and evicting for room.
        let held = header.len - view.first_live;
        let kept = view.first_live + u64::from(held >= self.slots());
        let live = header.from(words, kept).saturating_add(cost);
        let reset = self
            .reset_at(Some(header.at), Some(header.at))
            .saturating_sub(now);
        let Some(spaced) = self.spacing_end(Some(header.at)) else {
            return Decision::never(self.limit, self.remaining(live), reset);
        };
        let at = self
            .fits_at(words, header, kept, Some((header.at, cost)), cost)
            .max(spaced);
        Decision::denied(
            self.limit,
            self.remaining(live),
            at.saturating_sub(now),
            reset,
        )
    }
}
