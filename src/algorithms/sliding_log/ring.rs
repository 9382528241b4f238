//! The log's words: a header and a ring of `(time, running count)` entries, and
//! the steps that read and write them.

use super::{LogState, SlidingLog, MAX_ENTRIES};
use crate::algorithms::words::{read_all, write_all, Plan, WordEncoded, Words, WordsMut};
use crate::algorithms::{Decision, Receipt, Report};
use crate::clock::Nanos;

/// Word index of the ring slot that holds the oldest entry.
pub(super) const HEAD: usize = 0;
/// Word index of the number of entries held.
pub(super) const LEN: usize = 1;
/// Word index of the running count just before the oldest entry (see
/// [`LogState`]).
pub(super) const BASE: usize = 2;
/// The number of header words, before the ring.
pub(super) const HEADER: usize = 3;

/// The word index of the time of the entry in ring slot `slot`; its running count
/// is the next word. Wrapping: a slot computed from mixed reads gives an index
/// past the end, where reads answer 0 and writes do nothing.
#[inline(always)]
pub(super) fn at_word(slot: u64) -> usize {
    (slot as usize).wrapping_mul(2).wrapping_add(HEADER)
}

/// `slot` brought back into a ring of `ring` slots, for a slot below twice the
/// ring. A conditional subtract: the number of slots is rarely a power of two, and a
/// division would cost more than the rest of a try.
#[inline(always)]
pub(super) fn wrap(slot: u64, ring: u64) -> u64 {
    if slot >= ring {
        slot.wrapping_sub(ring)
    } else {
        slot
    }
}

/// What a non-blocking try of a [`SlidingLog`] writes, planned by
/// `plan_take` and written by
/// `apply_take`: the header after the step (the
/// expired entries dropped if the call needed their room, the oldest evicted if
/// the log was full) and the entry it appends, a grant or, with
/// [`with_rejected_recorded`](SlidingLog::with_rejected_recorded), a refusal.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LogTake {
    /// The header after the step.
    head: u64,
    len: u64,
    base: u64,
    /// The ring slot of the new entry, and the entry.
    slot: u64,
    at: Nanos,
    count: u64,
}

/// The log's header and newest entry at one instant: what every call reads.
#[derive(Clone, Copy)]
pub(super) struct Header {
    /// The instant used: `now`, or the time of the newest entry if later.
    pub(super) at: Nanos,
    /// The ring slot of the oldest entry, and the number of entries (at most the
    /// ring's size).
    pub(super) head: u64,
    pub(super) len: u64,
    /// The ring's number of slots: the log's, unless the state was made by a log
    /// with more.
    pub(super) ring: u64,
    /// The running count before the oldest entry, and after the newest.
    pub(super) base: u64,
    pub(super) end: u64,
    /// The time of the newest entry (0 when there is none).
    pub(super) newest: Nanos,
}

impl Header {
    /// The word index of the time of entry `index` (from the oldest); its running
    /// count is the next word.
    #[inline(always)]
    pub(super) fn at_word(&self, index: u64) -> usize {
        at_word(wrap(self.head.wrapping_add(index), self.ring))
    }

    /// The time of entry `index`.
    #[inline(always)]
    pub(super) fn time<W: Words + ?Sized>(&self, words: &W, index: u64) -> Nanos {
        words.word(self.at_word(index))
    }

    /// The running count just before entry `index` (after the newest for `len`).
    #[inline(always)]
    pub(super) fn count_before<W: Words + ?Sized>(&self, words: &W, index: u64) -> u64 {
        if index == 0 {
            self.base
        } else {
            words.word(self.at_word(index - 1).wrapping_add(1))
        }
    }

    /// The permits logged from entry `index` on.
    #[inline(always)]
    pub(super) fn from<W: Words + ?Sized>(&self, words: &W, index: u64) -> u64 {
        self.end.wrapping_sub(self.count_before(words, index))
    }

    /// The permits of every entry held, expired ones included.
    #[inline(always)]
    pub(super) fn total(&self) -> u64 {
        self.end.wrapping_sub(self.base)
    }

    /// The time of the newest entry, if any: where the minimum spacing runs from.
    #[inline(always)]
    pub(super) fn last(&self) -> Option<Nanos> {
        (self.len > 0).then_some(self.newest)
    }
}

/// The log at one instant with what counts: the header, and where the live
/// entries start.
#[derive(Clone, Copy)]
pub(super) struct View {
    pub(super) header: Header,
    /// Index (from the oldest) of the first live entry: those before have expired.
    pub(super) first_live: u64,
    /// The sum of the live entries' costs.
    pub(super) live: u64,
}

impl SlidingLog {
    /// The header and the newest entry at `now`, in a ring of `ring` slots: five
    /// reads.
    #[inline(always)]
    pub(super) fn header<W: Words + ?Sized>(&self, words: &W, ring: u64, now: Nanos) -> Header {
        let mut header = Header {
            at: now,
            head: words.word(HEAD),
            len: words.word(LEN).min(ring),
            ring,
            base: words.word(BASE),
            end: 0,
            newest: 0,
        };
        header.end = header.base;
        if header.len > 0 {
            let newest = header.at_word(header.len - 1);
            header.newest = words.word(newest);
            header.end = words.word(newest.wrapping_add(1));
            header.at = now.max(header.newest);
        }
        header
    }

    /// True if the entries held, expired ones included, leave room for `cost`: the
    /// call then needs neither to count what is live nor to drop anything.
    #[inline(always)]
    pub(super) fn roomy(&self, header: &Header, cost: u64) -> bool {
        // Every entry costs at least 1, so a total within the limit also means a
        // free slot; the length is checked all the same, should a caller break that.
        header.total().saturating_add(cost) <= self.limit && header.len < self.slots()
    }

    /// The index of the first live entry: the oldest, at once, in the common case,
    /// else a binary search (entries are in time order). Total on any words: at
    /// most 2 + log₂(len) reads.
    #[inline(always)]
    pub(super) fn first_live<W: Words + ?Sized>(&self, words: &W, header: &Header) -> u64 {
        // Measured back from the instant, so that no sum saturates: at the clock's
        // last instant, `time + window` would read as expired for every entry.
        let expired =
            |index: u64| header.at.saturating_sub(header.time(words, index)) >= self.window;
        if header.len == 0 || !expired(0) {
            return 0;
        }
        // Entry `low` has expired; the first live one is in (low, high].
        let (mut low, mut high) = (0, header.len);
        while high - low > 1 {
            let middle = low + (high - low) / 2;
            if expired(middle) {
                low = middle;
            } else {
                high = middle;
            }
        }
        high
    }

    /// The log at `now` with its live entries found.
    pub(super) fn view<W: Words + ?Sized>(&self, words: &W, ring: u64, now: Nanos) -> View {
        let header = self.header(words, ring, now);
        let first_live = self.first_live(words, &header);
        View {
            header,
            first_live,
            live: header.from(words, first_live),
        }
    }

    /// What appending the entry `(header.at, cost)` writes, after dropping the
    /// first `dropped` entries (the expired ones, when the call had to find them;
    /// none otherwise), and then the oldest if the log is still full. Total on any
    /// header; room for the entry needs a ring of at least the log's slots.
    #[inline(always)]
    pub(super) fn plan_append<W: Words + ?Sized>(
        &self,
        words: &W,
        header: &Header,
        dropped: u64,
        cost: u64,
    ) -> LogTake {
        let mut dropped = dropped;
        if header.len.wrapping_sub(dropped) >= self.slots() {
            dropped = dropped.wrapping_add(1);
        }
        LogTake {
            head: wrap(header.head.wrapping_add(dropped), header.ring),
            len: header.len.wrapping_sub(dropped).wrapping_add(1),
            base: if dropped == 0 {
                header.base
            } else {
                header.count_before(words, dropped)
            },
            // Just after the newest entry, whatever was dropped.
            slot: wrap(header.head.wrapping_add(header.len), header.ring),
            at: header.at,
            count: header.end.wrapping_add(cost),
        }
    }

    /// `state`'s entries in a ring of this log's slots, for a state whose ring is
    /// smaller (so all its entries fit).
    #[cold]
    pub(super) fn grown(&self, state: &LogState) -> LogState {
        let mut words = vec![0; self.state_words()].into_boxed_slice();
        let mut len = 0;
        let mut count = state.words.word(BASE);
        for (at, cost) in state.entries() {
            count = count.wrapping_add(cost);
            let index = at_word(len);
            words.set_word(index, at);
            words.set_word(index + 1, count);
            len += 1;
        }
        words.set_word(LEN, len);
        words.set_word(BASE, state.words.word(BASE));
        LogState { words }
    }

    /// [`Algorithm::reserve`](crate::algorithms::Algorithm::reserve) on words
    /// holding a ring of `ring` slots: the plan decides and says what to write
    /// (the lean try's half, [`plan_in`](Self::plan_in)), the report describes
    /// what it reads of the decision on the words as they were, then the plan is
    /// written. A grant's receipt names its entry by the running count after it
    /// (unique among the entries held, bit for bit) and records its cost; a
    /// refusal, recorded or not, has none.
    #[inline(always)]
    pub(super) fn reserve_in<W: WordsMut + ?Sized, R: Report>(
        &self,
        words: &mut W,
        ring: u64,
        now: Nanos,
        cost: u64,
    ) -> R {
        let (granted, take) = self.plan_in(&*words, ring, now, cost);
        let decision = |words: &W| {
            let recorded = !granted && take.is_some();
            self.decision_of(words, ring, now, cost, (granted, recorded))
        };
        let Some(take) = take else {
            return R::refused(|| decision(&*words));
        };
        let answer = if granted {
            R::granted(
                || decision(&*words),
                || Receipt::new(take.count as i64, cost),
            )
        } else {
            R::refused(|| decision(&*words))
        };
        self.apply_take(words, take);
        answer
    }

    /// The verdict of `cost` at `now` on words holding a ring of `ring` slots,
    /// reading the header and the newest entry, and only when the entries held
    /// (expired ones included) leave no room, searching for the first live one;
    /// and what to write, for a grant or a refusal this log records.
    #[inline(always)]
    pub(super) fn plan_in<W: Words + ?Sized>(
        &self,
        words: &W,
        ring: u64,
        now: Nanos,
        cost: u64,
    ) -> Plan<LogTake> {
        if cost > self.limit {
            // Never: refused, and not recorded.
            return (false, None);
        }
        let header = self.header(words, ring, now);
        let Some(spacing_end) = self.spacing_end(header.last()) else {
            // The spacing after the last call never ends: never, and not recorded.
            return (false, None);
        };
        let spaced = header.at >= spacing_end;
        let (granted, dropped) = if self.roomy(&header, cost) {
            (spaced, 0)
        } else {
            let first_live = self.first_live(words, &header);
            let live = header.from(words, first_live);
            (
                live.saturating_add(cost) <= self.limit && spaced,
                first_live,
            )
        };
        if granted || self.record_rejected {
            (
                granted,
                Some(self.plan_append(words, &header, dropped, cost)),
            )
        } else {
            (false, None)
        }
    }

    /// [`Algorithm::cancel`](crate::algorithms::Algorithm::cancel) on words holding
    /// a ring of `ring` slots: up to `acts_at`, that instant included, the grant's
    /// entry is removed if it is still the newest (the spacing then runs from the
    /// entry before it again); behind a later entry, granted or a recorded
    /// refusal, or after `acts_at`, nothing changes.
    pub(super) fn cancel_in<W: WordsMut + ?Sized>(
        &self,
        words: &mut W,
        ring: u64,
        now: Nanos,
        receipt: &Receipt,
        acts_at: Nanos,
    ) {
        if acts_at < now || receipt.is_none() {
            return;
        }
        let header = self.header(&*words, ring, now);
        let Some(newest) = header.len.checked_sub(1) else {
            return;
        };
        let same_entry =
            header.end == receipt.mark() as u64 && header.from(&*words, newest) == receipt.charge();
        if same_entry {
            words.set_word(LEN, newest);
        }
    }

    /// [`Algorithm::peek`] on words holding a ring of `ring` slots, nothing written;
    /// a refusal this log records is described as recorded only if `recording`.
    pub(super) fn peek_in<W: Words + ?Sized>(
        &self,
        words: &W,
        ring: u64,
        (now, cost): (Nanos, u64),
        recording: bool,
    ) -> Decision {
        let (granted, take) = self.plan_in(words, ring, now, cost);
        let recorded = recording && !granted && take.is_some();
        self.decision_of(words, ring, now, cost, (granted, recorded))
    }
}

impl WordEncoded for SlidingLog {
    type Config = [u64; 4];
    type Take = LogTake;

    /// A 3-word header, then 2 words per [slot](SlidingLog::slots).
    #[inline]
    fn state_words(&self) -> usize {
        HEADER + 2 * self.slots() as usize
    }

    /// An empty log: the header is all 0 (the words are 0 already; time plays no part).
    fn init_words<W: WordsMut + ?Sized>(&self, words: &mut W, _now: Nanos) {
        for index in [HEAD, LEN, BASE] {
            words.set_word(index, 0);
        }
    }

    fn reserve_words<W: WordsMut + ?Sized>(
        &self,
        words: &mut W,
        now: Nanos,
        cost: u64,
        _max_wait: Nanos,
    ) -> (Decision, Receipt) {
        self.reserve_in(words, self.slots(), now, cost)
    }

    fn cancel_words<W: WordsMut + ?Sized>(
        &self,
        words: &mut W,
        now: Nanos,
        receipt: &Receipt,
        acts_at: Nanos,
    ) {
        self.cancel_in(words, self.slots(), now, receipt, acts_at);
    }

    fn peek_words<W: Words + ?Sized>(&self, words: &W, now: Nanos, cost: u64) -> Decision {
        self.peek_in(words, self.slots(), (now, cost), true)
    }

    /// The step's own plan ([`plan_in`](Self::plan_in)) on this log's ring.
    #[inline(always)]
    fn plan_take<W: Words + ?Sized>(&self, words: &W, now: Nanos, cost: u64) -> Plan<LogTake> {
        self.plan_in(words, self.slots(), now, cost)
    }

    #[inline(always)]
    fn apply_take<W: WordsMut + ?Sized>(&self, words: &mut W, take: LogTake) {
        let at = at_word(take.slot);
        words.set_word(at, take.at);
        words.set_word(at.wrapping_add(1), take.count);
        words.set_word(HEAD, take.head);
        words.set_word(LEN, take.len);
        words.set_word(BASE, take.base);
    }

    /// `[limit, window, min_spacing, record_rejected]`.
    #[inline(always)]
    fn config_words(&self) -> [u64; 4] {
        [
            self.limit,
            self.window,
            self.min_spacing,
            u64::from(self.record_rejected),
        ]
    }

    /// The inverse of [`config_words`](Self::config_words). A limit above
    /// [`MAX_ENTRIES`] is read as `MAX_ENTRIES`, so that no words make a log whose
    /// number of slots overflows.
    #[inline(always)]
    fn from_config_words(words: [u64; 4]) -> Self {
        SlidingLog {
            limit: words[0].min(MAX_ENTRIES),
            window: words[1],
            min_spacing: words[2],
            record_rejected: words[3] != 0,
        }
    }

    fn read_state<W: Words + ?Sized>(&self, words: &W) -> LogState {
        LogState {
            words: read_all(words, self.state_words()),
        }
    }

    fn write_state<W: WordsMut + ?Sized>(&self, state: &LogState, words: &mut W) {
        write_all(&state.words, words);
    }
}
