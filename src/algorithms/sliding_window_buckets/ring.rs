//! The window's words: the newest bucket's number, the total, and a ring of bucket
//! counters; and the steps that read and write them.

use super::{BucketsState, OldestBucket, SlidingWindowBuckets, MAX_BUCKETS};
use crate::algorithms::words::{read_all, write_all, Plan, WordEncoded, Words, WordsMut};
use crate::algorithms::{Decision, Receipt, Report};
use crate::clock::Nanos;

/// Word 0: the number of the newest bucket the ring holds.
pub(super) const NEWEST: usize = 0;
/// Word 1: the sum of every slot (of buckets `newest − B ..= newest`).
pub(super) const TOTAL: usize = 1;
/// Words 2..: the ring of counters.
pub(super) const SLOTS: usize = 2;

/// What a granted lean try of a [`SlidingWindowBuckets`] writes, planned by
/// `WordEncoded::plan_take`: where the ring moves and the cost to count.
/// Opaque; it is only handed back to
/// `apply_take`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BucketsTake {
    view: View,
    cost: u64,
}

/// What the window looks like at some instant, computed without touching the state.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct View {
    /// The instant used (`now`, or the start of the newest bucket if `now` is older).
    pub(super) at: Nanos,
    /// The newest bucket the ring holds.
    pub(super) newest: u64,
    /// The bucket holding `at`.
    pub(super) current: u64,
    /// The sum of buckets `current − B ..= current` (the ring moved to `current`).
    pub(super) total: u64,
}

impl SlidingWindowBuckets {
    /// The ring's length: `B + 1` rounded up to a power of two, so that a bucket's
    /// slot is a mask, not a division.
    #[inline(always)]
    pub(super) fn ring_len(&self) -> usize {
        // B + 1 <= 4097, so this is at most 8192.
        (self.buckets + 1).next_power_of_two() as usize
    }

    /// The word holding `bucket`'s counter.
    #[inline(always)]
    pub(super) fn slot(&self, bucket: u64) -> usize {
        // ring_len is a power of two at most 8192: the masked value fits any usize.
        SLOTS + (bucket & (self.ring_len() as u64 - 1)) as usize
    }

    /// The count of `bucket`. Valid for buckets in `current − B ..= current` of a
    /// view: the slots hold non-zero counts only for `newest − B ..= newest`.
    #[inline(always)]
    pub(super) fn count<W: Words + ?Sized>(&self, words: &W, view: &View, bucket: u64) -> u64 {
        if bucket > view.newest {
            0
        } else {
            words.word(self.slot(bucket))
        }
    }

    /// The buckets that leave the window when the ring moves from `newest` to
    /// `current`: `newest − B ..= current − B − 1` (none below 0), or `None` if
    /// every bucket leaves.
    #[inline(always)]
    pub(super) fn leaving(&self, newest: u64, current: u64) -> Option<std::ops::Range<u64>> {
        if current.saturating_sub(newest) > self.buckets {
            return None;
        }
        let end = current.saturating_sub(self.buckets);
        Some(newest.saturating_sub(self.buckets).min(end)..end)
    }

    /// The window at `now`. Total on any words: at most `B` slots are read, and the
    /// arithmetic saturates.
    #[inline(always)]
    pub(super) fn view<W: Words + ?Sized>(&self, words: &W, now: Nanos) -> View {
        let newest = words.word(NEWEST);
        let start = newest.saturating_mul(self.precision);
        let at = now.max(start);
        // Most calls land in the newest bucket: no division then.
        let current = if at - start < self.precision {
            newest
        } else {
            at / self.precision
        };
        let total = match self.leaving(newest, current) {
            // The usual case, kept apart so that it costs one load.
            _ if current == newest => words.word(TOTAL),
            None => 0,
            Some(leaving) => {
                let gone = leaving.fold(0u64, |gone, bucket| {
                    gone.saturating_add(words.word(self.slot(bucket)))
                });
                words.word(TOTAL).saturating_sub(gone)
            }
        };
        View {
            at,
            newest,
            current,
            total,
        }
    }

    /// The oldest bucket that counts whole: `current − B + 1` if dropping; for the
    /// weighted variant, the one after the bucket holding `at − window`. Returns
    /// `(first whole bucket, partial bucket and the nanoseconds of it inside the
    /// window)`; the partial bucket is `None` when dropping or before the origin.
    #[inline(always)]
    pub(super) fn bounds(&self, view: &View) -> (u64, Option<(u64, Nanos)>) {
        let next = view.current.saturating_add(1).saturating_sub(self.buckets);
        match self.oldest {
            OldestBucket::Drop => (next, None),
            OldestBucket::Weighted => match view.at.checked_sub(self.window) {
                // The window starts before the clock's origin: every bucket is whole.
                None => (0, None),
                Some(start) => {
                    // `at` lies in bucket `current` and (B − 1)·precision < window
                    // <= B·precision, so `start` lies in bucket current − B or the
                    // one after: one multiplication finds which, where a division
                    // would cost several times more on every call.
                    let boundary = next.saturating_mul(self.precision);
                    let (partial, end) = if start >= boundary {
                        (next, boundary.saturating_add(self.precision))
                    } else {
                        (next.saturating_sub(1), boundary)
                    };
                    (partial + 1, Some((partial, end.saturating_sub(start))))
                }
            },
        }
    }

    /// The counts of buckets `first ..= last` (all within the ring at `view`),
    /// oldest first, stopping at the newest bucket written (later ones are empty).
    pub(super) fn counts<'a, W: Words + ?Sized>(
        &'a self,
        words: &'a W,
        view: &View,
        first: u64,
        last: u64,
    ) -> impl Iterator<Item = u64> + 'a + use<'a, W> {
        (first..=last.min(view.newest)).map(move |bucket| words.word(self.slot(bucket)))
    }

    /// The sum of the whole buckets at `view`: the ring's total less the one or two
    /// buckets before `first_whole`.
    #[inline(always)]
    pub(super) fn whole<W: Words + ?Sized>(&self, words: &W, view: &View, first_whole: u64) -> u64 {
        // `first_whole` is at most two buckets past the oldest the ring holds
        // (see `bounds`), so this loop runs at most twice.
        let mut whole = view.total;
        let mut bucket = view.current.saturating_sub(self.buckets);
        while bucket < first_whole {
            whole = whole.saturating_sub(self.count(words, view, bucket));
            bucket += 1;
        }
        whole
    }

    /// The permits counted at `view`, scaled by `precision` (so the weighted part
    /// stays exact: `Σ whole · precision + partial · inside`).
    #[inline(always)]
    pub(super) fn used_scaled<W: Words + ?Sized>(&self, words: &W, view: &View) -> u128 {
        let (first_whole, partial) = self.bounds(view);
        let whole = self.whole(words, view, first_whole);
        let scaled = u128::from(whole) * u128::from(self.precision);
        match partial {
            Some((bucket, inside)) => {
                scaled + u128::from(self.count(words, view, bucket)) * u128::from(inside)
            }
            None => scaled,
        }
    }

    /// A scaled count in permits, rounded up.
    pub(super) fn permits(&self, scaled: u128) -> u64 {
        // Most values fit a u64, whose division is much cheaper than a u128's.
        match u64::try_from(scaled) {
            Ok(small) => small.div_ceil(self.precision),
            Err(_) => {
                u64::try_from(scaled.div_ceil(u128::from(self.precision))).unwrap_or(u64::MAX)
            }
        }
    }

    /// True if `cost` (at most `limit`) fits the weighted variant's count, compared
    /// scaled so that nothing divides, multiplying only when the partial bucket's
    /// count could matter: `whole + count · inside / precision + cost <= limit`,
    /// and `inside <= precision`, so a count within the room left by the whole
    /// buckets fits whatever part of the bucket is inside.
    #[inline(always)]
    pub(super) fn fits_weighted<W: Words + ?Sized>(
        &self,
        words: &W,
        view: &View,
        cost: u64,
    ) -> bool {
        let (first_whole, partial) = self.bounds(view);
        let whole = self.whole(words, view, first_whole);
        let Some(room) = (self.limit - cost).checked_sub(whole) else {
            return false;
        };
        let Some((bucket, inside)) = partial else {
            return true;
        };
        let count = self.count(words, view, bucket);
        count <= room
            || u128::from(count) * u128::from(inside)
                <= u128::from(room) * u128::from(self.precision)
    }

    /// The newest non-empty bucket among `current − B ..= current`, if any.
    pub(super) fn newest_nonempty<W: Words + ?Sized>(&self, words: &W, view: &View) -> Option<u64> {
        let oldest = view.current.saturating_sub(self.buckets);
        let newest = view.current.min(view.newest);
        (oldest..=newest)
            .rev()
            .find(|&bucket| self.count(words, view, bucket) > 0)
    }

    /// Nanoseconds from `now` until nothing counted remains.
    pub(super) fn reset_after<W: Words + ?Sized>(
        &self,
        words: &W,
        view: &View,
        now: Nanos,
    ) -> Nanos {
        self.newest_nonempty(words, view)
            .map_or(0, |bucket| self.gone_at(bucket).saturating_sub(now))
    }

    /// When `bucket` stops counting at all.
    pub(super) fn gone_at(&self, bucket: u64) -> Nanos {
        match self.oldest {
            // Dropped once it is B buckets old.
            OldestBucket::Drop => bucket
                .saturating_add(self.buckets)
                .saturating_mul(self.precision),
            // Gone once the window's start passes its end.
            OldestBucket::Weighted => bucket
                .saturating_add(1)
                .saturating_mul(self.precision)
                .saturating_add(self.window),
        }
    }

    /// The first instant at which `excess` (scaled by precision; `excess_permits`
    /// unscaled, used when dropping) has left the window.
    pub(super) fn retry_at<W: Words + ?Sized>(
        &self,
        words: &W,
        view: &View,
        excess: u128,
        excess_permits: u64,
    ) -> Nanos {
        let (first_whole, partial) = self.bounds(view);
        match self.oldest {
            OldestBucket::Drop => {
                // Bucket b stops counting at (b + B) · precision.
                let mut excess = excess_permits;
                let mut bucket = first_whole;
                for count in self.counts(words, view, first_whole, view.current) {
                    if count >= excess {
                        break;
                    }
                    excess -= count;
                    bucket = bucket.saturating_add(1);
                }
                self.gone_at(bucket)
            }
            OldestBucket::Weighted => {
                // The window's start sweeps forward; while it crosses bucket b, the
                // estimate falls by count(b) per nanosecond (scaled).
                let mut excess = excess;
                let mut start = match partial {
                    Some((partial, inside)) => {
                        let start = view.at.saturating_sub(self.window);
                        let count = u128::from(self.count(words, view, partial));
                        if count * u128::from(inside) >= excess {
                            return self.crossed(start, excess, count);
                        }
                        excess -= count * u128::from(inside);
                        start.saturating_add(inside)
                    }
                    // Before the origin: nothing leaves until the start reaches 0.
                    None => 0,
                };
                for count in self.counts(words, view, first_whole, view.current) {
                    let count = u128::from(count);
                    if count * u128::from(self.precision) >= excess {
                        return self.crossed(start, excess, count);
                    }
                    excess -= count * u128::from(self.precision);
                    start = start.saturating_add(self.precision);
                }
                // Unreachable while cost <= limit: everything counted leaves.
                start.saturating_add(self.window)
            }
        }
    }

    /// The instant at which a window start at `start`, moving over a bucket holding
    /// `count` (> 0, since `excess` > 0), has freed `excess`.
    pub(super) fn crossed(&self, start: Nanos, excess: u128, count: u128) -> Nanos {
        let nanos = u64::try_from(excess.div_ceil(count.max(1))).unwrap_or(u64::MAX);
        start.saturating_add(nanos).saturating_add(self.window)
    }

    /// The decision at `view` for a call the step `granted` or refused (a cost
    /// above the limit is never): only its fields, the verdict being the plan's.
    pub(super) fn describe<W: Words + ?Sized>(
        &self,
        words: &W,
        view: &View,
        now: Nanos,
        cost: u64,
        granted: bool,
    ) -> Decision {
        let scaled = self.used_scaled(words, view);
        let used = self.permits(scaled);
        if cost > self.limit {
            let reset = self.reset_after(words, view, now);
            return Decision::never(self.limit, self.limit.saturating_sub(used), reset);
        }
        if granted {
            let remaining = self.limit.saturating_sub(cost).saturating_sub(used);
            // The grant lands in the current bucket, the newest one.
            let reset = self.gone_at(view.current).saturating_sub(now);
            return Decision::allowed(self.limit, remaining, reset);
        }
        let reset = self.reset_after(words, view, now);
        let allowed_scaled = u128::from(self.limit - cost) * u128::from(self.precision);
        let excess_permits = used.saturating_add(cost).saturating_sub(self.limit);
        let excess = scaled.saturating_sub(allowed_scaled);
        let at = self.retry_at(words, view, excess, excess_permits);
        Decision::denied(
            self.limit,
            self.limit.saturating_sub(used),
            at.saturating_sub(now),
            reset,
        )
    }

    /// The verdict of `cost` at `now`, from the newest bucket's number, the total
    /// and at most two slots (more only when the ring moves to a new bucket, once
    /// per bucket): no division in the common case, and no `retry_after`; and, for
    /// a grant, what to write.
    #[inline(always)]
    pub(super) fn plan_in<W: Words + ?Sized>(
        &self,
        words: &W,
        now: Nanos,
        cost: u64,
    ) -> Plan<BucketsTake> {
        if cost > self.limit {
            return (false, None);
        }
        let view = self.view(words, now);
        let fits = match self.oldest {
            // Whole buckets only: no scaling needed.
            OldestBucket::Drop => {
                let (first_whole, _) = self.bounds(&view);
                // `cost <= limit` (above): no overflow, at any limit.
                self.whole(words, &view, first_whole) <= self.limit - cost
            }
            OldestBucket::Weighted => self.fits_weighted(words, &view, cost),
        };
        if fits {
            (true, Some(BucketsTake { view, cost }))
        } else {
            (false, None)
        }
    }

    /// [`Algorithm::reserve`](crate::algorithms::Algorithm::reserve) on words: the
    /// plan decides (the lean try's half, [`plan_in`](Self::plan_in)), the report
    /// describes what it reads of the decision on the words as they were, then a
    /// grant is counted. A grant's receipt names the bucket it was counted in (its
    /// number, bit for bit) and its cost.
    #[inline(always)]
    pub(super) fn reserve_in<W: WordsMut + ?Sized, R: Report>(
        &self,
        words: &mut W,
        now: Nanos,
        cost: u64,
    ) -> R {
        let (granted, take) = self.plan_in(&*words, now, cost);
        let decision = |words: &W| {
            let view = self.view(words, now);
            self.describe(words, &view, now, cost, granted)
        };
        let Some(take) = take else {
            return R::refused(|| decision(&*words));
        };
        let answer = R::granted(
            || decision(&*words),
            || Receipt::new(take.view.current as i64, cost),
        );
        self.commit(words, &take.view, take.cost);
        answer
    }

    /// Moves the ring to `view.current` (clearing the buckets that left) and counts
    /// `cost` in the current bucket.
    #[inline(always)]
    pub(super) fn commit<W: WordsMut + ?Sized>(&self, words: &mut W, view: &View, cost: u64) {
        let mut total = words.word(TOTAL);
        if view.current > view.newest {
            match self.leaving(view.newest, view.current) {
                None => {
                    for slot in SLOTS..SLOTS + self.ring_len() {
                        words.set_word(slot, 0);
                    }
                }
                Some(leaving) => {
                    for bucket in leaving {
                        words.set_word(self.slot(bucket), 0);
                    }
                }
            }
            words.set_word(NEWEST, view.current);
            total = view.total;
        }
        let slot = self.slot(view.current);
        words.set_word(slot, words.word(slot).saturating_add(cost));
        words.set_word(TOTAL, total.saturating_add(cost));
    }
}

impl WordEncoded for SlidingWindowBuckets {
    type Config = [u64; 4];
    type Take = BucketsTake;

    #[inline(always)]
    fn state_words(&self) -> usize {
        SLOTS + self.ring_len()
    }

    fn init_words<W: WordsMut + ?Sized>(&self, words: &mut W, now: Nanos) {
        words.set_word(NEWEST, now / self.precision);
    }

    #[inline(always)]
    fn reserve_words<W: WordsMut + ?Sized>(
        &self,
        words: &mut W,
        now: Nanos,
        cost: u64,
        _max_wait: Nanos,
    ) -> (Decision, Receipt) {
        self.reserve_in(words, now, cost)
    }

    /// The rule of [`Algorithm::cancel`](crate::algorithms::Algorithm::cancel): up
    /// to `acts_at`, that instant included, the grant's cost comes off its bucket
    /// (and the total) while the ring still holds that bucket, never below zero;
    /// once the ring has moved past it (its slot may hold a later bucket), or after
    /// `acts_at`, nothing comes back.
    fn cancel_words<W: WordsMut + ?Sized>(
        &self,
        words: &mut W,
        now: Nanos,
        receipt: &Receipt,
        acts_at: Nanos,
    ) {
        if acts_at < now {
            return;
        }
        let bucket = receipt.mark() as u64;
        let newest = words.word(NEWEST);
        // The ring holds buckets newest − B ..= newest.
        if bucket > newest || bucket < newest.saturating_sub(self.buckets) {
            return;
        }
        let slot = self.slot(bucket);
        let count = words.word(slot);
        let back = receipt.charge().min(count);
        words.set_word(slot, count - back);
        words.set_word(TOTAL, words.word(TOTAL).saturating_sub(back));
    }

    /// The step's decision, with nothing written.
    fn peek_words<W: Words + ?Sized>(&self, words: &W, now: Nanos, cost: u64) -> Decision {
        let (granted, _) = self.plan_in(words, now, cost);
        self.describe(words, &self.view(words, now), now, cost, granted)
    }

    /// The step's own plan ([`plan_in`](Self::plan_in)).
    #[inline(always)]
    fn plan_take<W: Words + ?Sized>(&self, words: &W, now: Nanos, cost: u64) -> Plan<BucketsTake> {
        self.plan_in(words, now, cost)
    }

    #[inline(always)]
    fn apply_take<W: WordsMut + ?Sized>(&self, words: &mut W, take: BucketsTake) {
        self.commit(words, &take.view, take.cost);
    }

    #[inline(always)]
    fn config_words(&self) -> [u64; 4] {
        let oldest = match self.oldest {
            OldestBucket::Drop => 0,
            OldestBucket::Weighted => 1,
        };
        [
            self.limit,
            self.window,
            self.precision,
            self.buckets << 1 | oldest,
        ]
    }

    /// The inverse of `config_words`. Words this
    /// type did not encode are brought into range (a precision of at least 1 ns,
    /// 1 to [`MAX_BUCKETS`] buckets), so that no step on them divides by zero or
    /// sizes an absurd ring.
    #[inline(always)]
    fn from_config_words(words: [u64; 4]) -> Self {
        SlidingWindowBuckets {
            limit: words[0],
            window: words[1],
            precision: words[2].max(1),
            buckets: (words[3] >> 1).clamp(1, MAX_BUCKETS),
            oldest: if words[3] & 1 == 0 {
                OldestBucket::Drop
            } else {
                OldestBucket::Weighted
            },
        }
    }

    fn read_state<W: Words + ?Sized>(&self, words: &W) -> BucketsState {
        BucketsState {
            words: read_all(words, self.state_words()),
        }
    }

    fn write_state<W: WordsMut + ?Sized>(&self, state: &BucketsState, words: &mut W) {
        write_all(&state.words, words);
    }
}
