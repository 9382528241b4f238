//! The sliding log on words: the step on words against the step on a log state
//! on random traces, the lean try on arbitrary words, the whole log
//! against a plain reference log (also across changes of limit), the
//! lock-free cell under threads on a frozen virtual clock, and the cell's
//! reconfiguration.

use crate::algorithms::words::{WordEncoded, Words};
use crate::algorithms::{Algorithm, SlidingLog};
use crate::cells::{StateCell, WordsCell};
use crate::clock::ManualClock;
use crate::{Decision, RateLimiter};
use proptest::prelude::*;
use std::cell::Cell;
use std::collections::VecDeque;
use std::time::Duration;

const MS: u64 = 1_000_000;

fn log_of(limit: u64, duration_ms: u64, spacing_ms: u64, record: bool) -> SlidingLog {
    let log = SlidingLog::new(limit, Duration::from_millis(duration_ms))
        .unwrap()
        .with_min_spacing(Duration::from_millis(spacing_ms));
    if record {
        log.with_rejected_recorded()
    } else {
        log
    }
}

/// A trace: (signed time step in ms, cost as a fraction of limit + 1). Steps are
/// often 0 (calls collide) and sometimes negative (time goes backwards).
fn trace() -> impl Strategy<Value = Vec<(i64, u64)>> {
    prop::collection::vec(
        (
            prop_oneof![3 => Just(0i64), 6 => 0i64..400, 1 => -400i64..0],
            0u64..1000,
        ),
        1..120,
    )
}

/// Applies a signed step in ms to `now`, saturating at both ends.
fn step(now: u64, ms: i64) -> u64 {
    let delta = ms.unsigned_abs() * MS;
    if ms >= 0 {
        now.saturating_add(delta)
    } else {
        now.saturating_sub(delta)
    }
}

/// Words that count their reads.
struct Counted<'a> {
    words: &'a [u64],
    reads: Cell<usize>,
}

impl Words for Counted<'_> {
    fn word(&self, index: usize) -> u64 {
        self.reads.set(self.reads.get() + 1);
        self.words.word(index)
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    /// `reserve_words(now, cost, 0)` on words and `reserve` on a `LogState` give
    /// the same answer and the same words after every step, and a refusal writes
    /// nothing unless this log records refusals.
    #[test]
    fn the_step_on_words_and_on_a_log_state_agree(
        limit in prop_oneof![1u64..8, 8u64..40],
        duration_ms in 1u64..2000,
        spacing_ms in prop_oneof![Just(0u64), 1u64..300],
        record in any::<bool>(),
        start in prop_oneof![Just(0u64), Just(u64::MAX - 5_000 * MS)],
        steps in trace(),
    ) {
        let log = log_of(limit, duration_ms, spacing_ms, record);
        let mut full = vec![0; log.state_words()];
        log.init_words(&mut full[..], start);
        let mut state = log.initial_state(start);
        prop_assert_eq!(words_of(&log, &state), full.clone());
        let mut now = start;
        for (ms, fraction) in steps {
            now = step(now, ms);
            // Costs 1..=limit + 1: the last one is never granted.
            let cost = 1 + fraction * (limit + 1) / 1000;
            let before = full.clone();
            let (decision, _) = log.reserve_words(&mut full[..], now, cost, 0);
            if !decision.is_allowed() && (!record || cost > limit) {
                prop_assert_eq!(&before, &full, "a refusal at {} of cost {} wrote", now, cost);
            }
            prop_assert_eq!(log.reserve::<Decision>(&mut state, now, cost, 0), decision);
            prop_assert_eq!(words_of(&log, &state), full.clone());
            prop_assert!(state.entry_count() as u64 <= log.slots());
        }
    }

    /// On arbitrary words (any length, any values, a header far past the ring), the
    /// lean try neither panics nor reads more than the header, the newest entry, the
    /// two oldest entries, the expired ones after them and one live entry's time,
    /// and an evicted entry's cost (`9 + 2 × min(entries, slots)` words); writing its
    /// plan does not panic either.
    #[test]
    fn lean_try_is_total_on_arbitrary_words(
        limit in 1u64..64,
        duration_ms in 1u64..2000,
        spacing in prop_oneof![Just(0u64), any::<u64>()],
        record in any::<bool>(),
        words in prop::collection::vec(
            prop_oneof![
                Just(0u64),
                Just(u64::MAX),
                0u64..200,
                any::<u64>(),
                (u64::MAX - 200)..=u64::MAX,
            ],
            0..140,
        ),
        now in prop_oneof![Just(0u64), Just(u64::MAX), any::<u64>()],
        cost in prop_oneof![Just(0u64), 1u64..70, Just(u64::MAX), any::<u64>()],
    ) {
        let log = SlidingLog::new(limit, Duration::from_millis(duration_ms))
            .unwrap()
            .with_min_spacing(Duration::from_nanos(spacing));
        let log = if record { log.with_rejected_recorded() } else { log };
        let counted = Counted { words: &words, reads: Cell::new(0) };
        let (granted, take) = log.plan_take(&counted, now, cost);
        let held = words.word(1).min(log.slots());
        let bound = 9 + 2 * held as usize;
        prop_assert!(counted.reads.get() <= bound, "{} reads, bound {}", counted.reads.get(), bound);
        if granted {
            prop_assert!(take.is_some());
        }
        if let Some(take) = take {
            let mut written = words.clone();
            log.apply_take(&mut written[..], take);
            prop_assert_eq!(written.len(), words.len());
        }
    }

    /// The log decides exactly as a plain reference log (below: entries in a
    /// `VecDeque`, no words): every field of every decision, the
    /// peeks, the replenishment and the live entries, including when the state is
    /// stepped by logs of other limits, spacings and modes in turn (a state whose
    /// ring is too small is moved into a larger one; a larger one is kept).
    #[test]
    fn decides_exactly_as_a_plain_reference_log(
        phases in prop::collection::vec(
            (
                prop_oneof![1u64..8, 8u64..20],
                1u64..2000,
                prop_oneof![2 => Just(0u64), 1 => 1u64..300],
                any::<bool>(),
                trace(),
            ),
            1..4,
        ),
        start in prop_oneof![Just(0u64), Just(u64::MAX - 5_000 * MS)],
    ) {
        let first = &phases[0];
        let mut state = log_of(first.0, first.1, first.2, first.3).initial_state(start);
        let mut reference = RefLog::default();
        let mut now = start;
        // One window length throughout: the log drops expired entries lazily, so a log
        // given a longer window would count entries the reference one had dropped but
        // this one still holds (see `LogState`); within one window, an entry
        // that has expired stays expired, and the two agree exactly.
        let duration_ms = first.1;
        for (limit, _, spacing_ms, record, steps) in phases {
            let log = log_of(limit, duration_ms, spacing_ms, record);
            for (ms, fraction) in steps {
                now = step(now, ms);
                let cost = 1 + fraction * (limit + 1) / 1000;
                prop_assert_eq!(log.peek(&state, now, cost), ref_peek(&log, &reference, now, cost));
                let d = log.reserve::<Decision>(&mut state, now, cost, 0);
                prop_assert_eq!(d, ref_reserve(&log, &mut reference, now, cost), "at {} cost {}", now, cost);
                // Expired entries are dropped lazily now (when a call needs their
                // room): the log holds what the reference one held, and maybe more that
                // has expired.
                prop_assert!(state.entry_count() >= reference.entries.len());
                prop_assert_eq!(
                    log.live_entries(&state, now).collect::<Vec<_>>(),
                    ref_live_entries(&log, &reference, now)
                );
                prop_assert_eq!(
                    log.is_replenished(&state, now),
                    ref_is_replenished(&log, &reference, now)
                );
                let later = now.saturating_add(fraction * MS);
                prop_assert_eq!(
                    log.live_entries(&state, later).collect::<Vec<_>>(),
                    ref_live_entries(&log, &reference, later)
                );
            }
        }
    }
}

/// A plain reference log (a `VecDeque` of entries, a u128 total, the time of the
/// last entry added), the model the words must match step for step.
#[derive(Clone, Debug, Default)]
struct RefLog {
    entries: VecDeque<(u64, u64)>,
    total: u128,
    last: Option<u64>,
}

struct RefView {
    at: u64,
    first_live: usize,
    live: u128,
}

fn ref_view(log: &SlidingLog, state: &RefLog, now: u64) -> RefView {
    let window = log.window().as_nanos() as u64;
    let newest = state.entries.back().map_or(0, |entry| entry.0);
    let at = now.max(newest).max(state.last.unwrap_or(0));
    let first_live = state
        .entries
        .partition_point(|entry| at - entry.0 >= window);
    let expired: u128 = state
        .entries
        .range(..first_live)
        .map(|entry| u128::from(entry.1))
        .sum();
    RefView {
        at,
        first_live,
        live: state.total.saturating_sub(expired),
    }
}

/// When the spacing after `last` ends; `None`: never (at or past the clock's last
/// reading).
fn ref_spacing_end(log: &SlidingLog, last: Option<u64>) -> Option<u64> {
    let spacing = log.min_spacing().as_nanos() as u64;
    match last {
        Some(last) if spacing > 0 => last.checked_add(spacing).filter(|end| *end < u64::MAX),
        _ => Some(0),
    }
}

fn ref_fits_at(
    log: &SlidingLog,
    live_entries: impl Iterator<Item = (u64, u64)>,
    live: u128,
    cost: u64,
) -> u64 {
    let allowed = u128::from(log.limit() - cost);
    let mut live = live;
    if live <= allowed {
        return 0;
    }
    for (at, entry_cost) in live_entries {
        live = live.saturating_sub(u128::from(entry_cost));
        if live <= allowed {
            return at.saturating_add(log.window().as_nanos() as u64);
        }
    }
    u64::MAX
}

fn ref_reset_at(log: &SlidingLog, newest: Option<u64>, last: Option<u64>) -> u64 {
    let expired = newest.map_or(0, |at| at.saturating_add(log.window().as_nanos() as u64));
    expired.max(ref_spacing_end(log, last).unwrap_or(u64::MAX))
}

fn ref_remaining(log: &SlidingLog, live: u128) -> u64 {
    u64::try_from(u128::from(log.limit()).saturating_sub(live)).unwrap_or(0)
}

fn ref_append(log: &SlidingLog, state: &mut RefLog, view: &RefView, entry: (u64, u64)) {
    for _ in 0..view.first_live {
        if let Some(reference) = state.entries.pop_front() {
            state.total = state.total.saturating_sub(u128::from(reference.1));
        }
    }
    if state.entries.len() as u64 >= log.slots()
        && let Some(reference) = state.entries.pop_front()
    {
        state.total = state.total.saturating_sub(u128::from(reference.1));
    }
    state.entries.push_back(entry);
    state.total = state.total.saturating_add(u128::from(entry.1));
    state.last = Some(entry.0);
}

fn ref_judge(
    log: &SlidingLog,
    state: &RefLog,
    view: &RefView,
    now: u64,
    cost: u64,
) -> Result<Decision, Decision> {
    let limit = log.limit();
    let newest = state.entries.back().map(|entry| entry.0);
    let reset = ref_reset_at(log, newest, state.last).saturating_sub(now);
    let remaining = ref_remaining(log, view.live);
    if cost > limit {
        return Err(Decision::never(limit, remaining, reset));
    }
    let fits = view.live.saturating_add(u128::from(cost)) <= u128::from(limit);
    let spaced = ref_spacing_end(log, state.last).is_some_and(|end| view.at >= end);
    if fits && spaced {
        let reset = ref_reset_at(log, Some(view.at), Some(view.at)).saturating_sub(now);
        let remaining = ref_remaining(log, view.live.saturating_add(u128::from(cost)));
        return Ok(Decision::allowed(limit, remaining, reset));
    }
    let Some(spaced) = ref_spacing_end(log, state.last) else {
        return Err(Decision::never(limit, remaining, reset));
    };
    let live_entries = state.entries.range(view.first_live..).copied();
    let at = ref_fits_at(log, live_entries, view.live, cost).max(spaced);
    Err(Decision::denied(
        limit,
        remaining,
        at.saturating_sub(now),
        reset,
    ))
}

fn ref_recorded_refusal(
    log: &SlidingLog,
    state: &RefLog,
    view: &RefView,
    now: u64,
    cost: u64,
) -> Decision {
    let held = state.entries.len() - view.first_live;
    let evicted = usize::from(held as u64 >= log.slots());
    let kept = state.entries.range(view.first_live + evicted..).copied();
    let evicted_cost: u128 = state
        .entries
        .range(view.first_live..view.first_live + evicted)
        .map(|entry| u128::from(entry.1))
        .sum();
    let live = view
        .live
        .saturating_sub(evicted_cost)
        .saturating_add(u128::from(cost));
    let reset = ref_reset_at(log, Some(view.at), Some(view.at)).saturating_sub(now);
    let Some(spaced) = ref_spacing_end(log, Some(view.at)) else {
        return Decision::never(log.limit(), ref_remaining(log, live), reset);
    };
    let at = ref_fits_at(
        log,
        kept.chain(std::iter::once((view.at, cost))),
        live,
        cost,
    )
    .max(spaced);
    Decision::denied(
        log.limit(),
        ref_remaining(log, live),
        at.saturating_sub(now),
        reset,
    )
}

fn ref_reserve(log: &SlidingLog, state: &mut RefLog, now: u64, cost: u64) -> Decision {
    let view = ref_view(log, state, now);
    match ref_judge(log, state, &view, now, cost) {
        Ok(granted) => {
            ref_append(log, state, &view, (view.at, cost));
            granted
        }
        Err(refused) if refused.is_never() || !log.rejected_recorded() => refused,
        Err(_) => {
            let decision = ref_recorded_refusal(log, state, &view, now, cost);
            ref_append(log, state, &view, (view.at, cost));
            decision
        }
    }
}

fn ref_peek(log: &SlidingLog, state: &RefLog, now: u64, cost: u64) -> Decision {
    let view = ref_view(log, state, now);
    match ref_judge(log, state, &view, now, cost) {
        Ok(decision) => decision,
        Err(refused) if refused.is_never() || !log.rejected_recorded() => refused,
        Err(_) => ref_recorded_refusal(log, state, &view, now, cost),
    }
}

fn ref_is_replenished(log: &SlidingLog, state: &RefLog, now: u64) -> bool {
    let view = ref_view(log, state, now);
    view.live == 0 && ref_spacing_end(log, state.last).is_some_and(|end| view.at >= end)
}

fn ref_live_entries(log: &SlidingLog, state: &RefLog, now: u64) -> Vec<(u64, u64)> {
    let view = ref_view(log, state, now);
    state.entries.range(view.first_live..).copied().collect()
}

/// Runs `calls` calls of `call(thread, i)` on each of 4 threads started together,
/// and answers how many each granted.
fn hammer(calls: u32, call: impl Fn(u32, u32) -> bool + Sync) -> Vec<u64> {
    let start = std::sync::Barrier::new(4);
    std::thread::scope(|scope| {
        let handles: Vec<_> = (0..4)
            .map(|thread| {
                let (start, call) = (&start, &call);
                scope.spawn(move || {
                    start.wait();
                    (0..calls).map(|i| u64::from(call(thread, i))).sum::<u64>()
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    })
}

/// Threads hammering a frozen clock through the lean try: exactly the limit is
/// granted, in both modes (recording, every refusal writes too).
#[test]
fn threads_on_a_frozen_clock_get_exactly_the_limit() {
    const LIMIT: u64 = 30_000;
    for record in [false, true] {
        let clock = ManualClock::new();
        let log = log_of(LIMIT, 3_600_000, 0, record);
        let limiter = RateLimiter::with_clock(log, clock.clone());
        let granted = hammer(12_000, |_, _| limiter.try_acquire());
        assert_eq!(
            granted.iter().sum::<u64>(),
            LIMIT,
            "recording refusals: {record}"
        );
        assert!(!limiter.try_acquire());
        let refused = limiter.check(1).unwrap();
        assert!(!refused.is_allowed());
        assert_eq!(refused.remaining(), 0);
    }
}

/// Lean tries and full checks (which take the cell exclusively) at once: still
/// exactly the limit in total.
#[test]
fn lean_tries_and_full_checks_together_get_exactly_the_limit() {
    const LIMIT: u64 = 30_000;
    for record in [false, true] {
        let clock = ManualClock::new();
        clock.advance(Duration::from_secs(5));
        let limiter = RateLimiter::with_clock(log_of(LIMIT, 3_600_000, 0, record), clock.clone());
        let granted = hammer(12_000, |thread, i| {
            if (i + thread) % 2 == 0 {
                limiter.try_acquire()
            } else {
                limiter.check(1).unwrap().is_allowed()
            }
        });
        assert_eq!(
            granted.iter().sum::<u64>(),
            LIMIT,
            "recording refusals: {record}"
        );
        // Every permit went at the same instant: the window ends an hour later.
        assert_eq!(
            limiter.check(1).unwrap().retry_after(),
            Duration::from_secs(3600)
        );
    }
}

/// A reconfiguration that keeps the state's size (a new limit with the same
/// number of slots) applies; one that changes it is refused with `InvalidCount` and
/// changes nothing, configuration or state, even if the change also stepped the state.
#[test]
fn reconfiguring_a_log_cell_keeps_its_size() {
    let s = Duration::from_secs;
    // Capacity 4 either way: limit 3 recording refusals, or limit 4.
    let recording = SlidingLog::new(3, s(60)).unwrap().with_rejected_recorded();
    let plain = SlidingLog::new(4, s(60)).unwrap();
    let cell = WordsCell::new(recording, 0);
    for _ in 0..3 {
        assert!(cell.try_take(0, 1));
    }
    assert!(!cell.try_take(0, 1)); // refused, and recorded
    cell.reconfigure(&|log, _| {
        *log = plain;
        Ok(())
    })
    .unwrap();
    assert_eq!(cell.algorithm(), plain);
    // The recorded refusal still counts: 4 entries held, limit 4.
    assert!(!cell.try_take(0, 1));
    let before = cell.peek(0, 1);
    assert_eq!(before.remaining(), 0);

    let larger = SlidingLog::new(5, s(60)).unwrap();
    let refused = cell.reconfigure(&|log, state| {
        *log = larger;
        log.reserve::<Decision>(state, 0, 1, 0);
        Ok(())
    });
    assert!(matches!(
        refused,
        Err(crate::ConfigError::InvalidCount { .. })
    ));
    assert_eq!(cell.algorithm(), plain);
    assert_eq!(cell.peek(0, 1), before);
    // A minute later every entry has gone: the 4 permits of the unchanged limit.
    for _ in 0..4 {
        assert!(cell.try_take(60_000_000_000, 1));
    }
    assert!(!cell.try_take(60_000_000_000, 1));
}

#[test]
fn configuration_words_it_did_not_encode_never_make_a_step_panic() {
    let odd = [0, 1, u64::MAX, 1 << 40];
    for limit in odd {
        for duration in odd {
            for spacing in odd {
                for record in [0, 1, u64::MAX] {
                    let log = SlidingLog::from_config_words([limit, duration, spacing, record]);
                    let mut words = vec![0; log.state_words()];
                    log.init_words(&mut words[..], 0);
                    for now in [0, 1, u64::MAX / 2, u64::MAX] {
                        for cost in [1, 2, u64::MAX] {
                            let (_, take) = log.plan_take(&words[..], now, cost);
                            if let Some(take) = take {
                                log.apply_take(&mut words[..], take);
                            }
                            let _ = log.peek_words(&words[..], now, cost);
                            let _ = log.reserve_words(&mut words[..], now, cost, 0);
                        }
                    }
                }
            }
        }
    }
}

/// The words `state` holds, as the log encodes them.
fn words_of(log: &SlidingLog, state: &<SlidingLog as Algorithm>::State) -> Vec<u64> {
    let mut words = vec![0; log.state_words()];
    log.write_state(state, &mut words[..]);
    words
}

#[test]
fn a_recorded_refusal_still_plans_a_write() {
    use crate::algorithms::words::WordEncoded;
    use crate::algorithms::SlidingLog;
    use std::time::Duration;
    let log = SlidingLog::new(1, Duration::from_secs(1))
        .unwrap()
        .with_rejected_recorded();
    let mut words = vec![0; log.state_words()];
    log.init_words(&mut words[..], 0);
    let (granted, take) = log.plan_take(&words[..], 0, 1);
    assert!(granted);
    log.apply_take(&mut words[..], take.unwrap());
    // Refused, and recorded: there is still something to write.
    let (granted, take) = log.plan_take(&words[..], 0, 1);
    assert!(!granted && take.is_some());
    // A cost above the limit is never granted, and never recorded.
    assert_eq!(log.plan_take(&words[..], 0, 2), (false, None));
}
