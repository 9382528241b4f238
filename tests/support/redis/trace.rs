//! Differential traces: the same random calls on the memory store and on the Redis
//! store at the caller's time, decision by decision, and a no-lost-update hammer.
#![allow(dead_code)]

use sluicegate::algorithms::{Decision, Receipt};
use sluicegate::stores::redis::{RedisAlgorithm, RedisOptions, RedisStore, TimeSource};
use sluicegate::stores::{MemoryStore, Operation, Store};
use std::time::Duration;

pub use crate::support::rng::Rng;

/// Options for a store driven by the caller's (virtual) time: keys live an hour
/// longer than their state matters, since the server expires them by its own clock.
pub fn caller_time_options(prefix: &str) -> RedisOptions {
    RedisOptions::default()
        .prefix(prefix)
        .expect("test prefixes have no braces")
        .time_source(TimeSource::Caller)
        .expiry_grace(Duration::from_secs(3600))
        .connect_timeout(Duration::from_secs(5))
        .response_timeout(Duration::from_secs(5))
}

/// The keys a trace draws from: ordinary and hostile texts.
pub const KEYS: [&str; 6] = ["alice", "bob", "}{", "a b:c", "\\]", "k"];

/// What one trace exercises.
pub struct TraceShape {
    /// Largest cost asked (costs run 1..=max_cost; choose it above the limit so
    /// that "never" shows up).
    pub max_cost: u64,
    /// Largest forward gap between calls, in µs.
    pub max_gap_us: u64,
    /// Percent of calls in the second half of the trace that step time back (by up
    /// to `max_back_us`).
    pub back_percent: u64,
    pub max_back_us: u64,
    /// Percent of calls on two or three keys (possibly repeated).
    pub multi_percent: u64,
    /// When the trace starts, in µs since the stores' origin (e.g. today's Unix
    /// time, where absolute nanoseconds are far beyond a double's 2⁵³).
    pub start_us: u64,
    /// Compare with the memory store too while time runs forward. False only where
    /// forgetting is visible even forward: an algorithm whose stored window index
    /// wraps (the sliding window counter with a 16-bit index) reads a long-idle
    /// state as recent, which the memory store has forgotten by then and Redis, at
    /// the caller's virtual time, has not.
    pub compare_memory: bool,
    /// Percent of calls that cancel an earlier grant (0 for algorithms whose cancel
    /// the Redis store does not run yet).
    pub cancel_percent: u64,
}

impl TraceShape {
    /// Costs 1..=`max_cost`, gaps up to `max_gap_us`, from `start_us`; in the
    /// second half 3% of the calls step back as far as a gap; 15% of the calls on
    /// several keys, 5% cancels; compared with memory too.
    pub fn new(max_cost: u64, max_gap_us: u64, start_us: u64) -> Self {
        TraceShape {
            max_cost,
            max_gap_us,
            back_percent: 3,
            max_back_us: max_gap_us,
            multi_percent: 15,
            start_us,
            compare_memory: true,
            cancel_percent: 5,
        }
    }
}

impl TraceShape {
    /// [`new`](TraceShape::new) for `limit` permits per window of `window_us`: gaps
    /// up to two windows per limit, stepping back as far as a window.
    pub fn window(max_cost: u64, limit: u64, window_us: u64, start_us: u64) -> Self {
        TraceShape {
            max_back_us: window_us,
            ..TraceShape::new(max_cost, 2 * window_us / limit, start_us)
        }
    }
}

/// Allowed, denied and never decisions over several traces.
#[derive(Default, Debug)]
pub struct Totals([usize; 3]);

impl Totals {
    pub fn add(&mut self, seen: [usize; 3]) {
        for (total, n) in self.0.iter_mut().zip(seen) {
            *total += n;
        }
    }

    /// How many were allowed, denied and never.
    pub fn seen(&self) -> [usize; 3] {
        self.0
    }

    /// Every kind of decision showed up more than `n` times.
    pub fn assert_each_above(&self, n: usize) {
        assert!(self.0.iter().all(|&seen| seen > n), "{self:?}");
    }
}

/// A [`differential`] trace of `events` calls for each case, each on a fresh store
/// at the caller's time, seeded `seed`, `seed + 1`, ...: what they exercised.
pub fn traces<'a, A: RedisAlgorithm + 'a>(
    url: &str,
    seed: u64,
    events: usize,
    cases: impl IntoIterator<Item = (&'a A, TraceShape)>,
) -> Totals {
    let mut totals = Totals::default();
    for (index, (algorithm, shape)) in cases.into_iter().enumerate() {
        let store: RedisStore<String, A> =
            RedisStore::open_with(url, caller_time_options(&super::unique_prefix("diff"))).unwrap();
        totals.add(differential(
            algorithm,
            &store,
            seed + index as u64,
            events,
            &shape,
        ));
    }
    totals
}

/// The store contract with nothing ever forgotten: the in-memory store's multi-key
/// rule (working copies in key order, commit all or nothing; a new key is kept only
/// if allowed and not replenished) over a plain map.
///
/// It is the reference once time has gone backwards: the memory store forgets a
/// key that is replenished at the latest time it has seen, and a later call at an
/// earlier time then finds it fresh where it was not (Redis forgets by its own
/// clock, which a virtual trace never reaches). Forward in time the two agree,
/// which the trace checks too.
pub struct Reference<A: sluicegate::algorithms::Algorithm> {
    states: std::collections::HashMap<String, A::State>,
}

impl<A: sluicegate::algorithms::Algorithm> Reference<A> {
    pub fn new() -> Self {
        Reference {
            states: std::collections::HashMap::new(),
        }
    }

    /// The store step on the pure algorithm; with `each`, a reserve on one key is
    /// `reserve_each`, reporting into it.
    pub fn apply(
        &mut self,
        algorithm: &A,
        keys: &[String],
        now: u64,
        step: Operation<'_>,
        mut each: Option<&mut Vec<Decision>>,
    ) -> Vec<(Decision, Receipt)> {
        let (cost, max_wait, commit) = match step {
            Operation::Reserve { cost, max_wait } => (cost, max_wait, true),
            Operation::Peek { cost } => (cost, 0, false),
            Operation::Cancel { receipts, acts_at } => {
                // As the memory store: each held key gives back its grant, in order.
                for (index, key) in keys.iter().enumerate() {
                    if let Some(state) = self.states.get_mut(key) {
                        algorithm.cancel(state, now, &receipts[index], acts_at);
                    }
                }
                return vec![(Decision::never(0, 0, 0), Receipt::NONE); keys.len()];
            }
        };
        if let ([key], Operation::Peek { cost }) = (keys, step) {
            // One key: the algorithm's own peek (a set's differs from a zero-wait
            // reserve: it marks no grant).
            let state = self
                .states
                .get(key)
                .cloned()
                .unwrap_or_else(|| algorithm.initial_state(0));
            return vec![(algorithm.peek(&state, now, cost), Receipt::NONE)];
        }
        let mut work: Vec<(String, A::State, bool)> = Vec::new();
        let mut out = Vec::with_capacity(keys.len());
        for key in keys {
            if !work.iter().any(|(k, _, _)| k == key) {
                let (state, held) = match self.states.get(key) {
                    Some(state) => (state.clone(), true),
                    None => (algorithm.initial_state(0), false),
                };
                work.push((key.clone(), state, held));
            }
            let entry = work.iter_mut().find(|(k, _, _)| k == key).unwrap();
            let (decision, receipt) = match each.as_deref_mut() {
                Some(each) if commit => {
                    algorithm.reserve_each(&mut entry.1, now, cost, max_wait, &mut |d| each.push(d))
                }
                _ => algorithm.reserve::<(Decision, Receipt)>(&mut entry.1, now, cost, max_wait),
            };
            // A peek is a zero-wait reserve on copies: it takes nothing, so it
            // leaves nothing to give back.
            out.push((decision, if commit { receipt } else { Receipt::NONE }));
        }
        let all = out.iter().all(|(d, _)| d.is_allowed());
        if commit && (all || keys.len() == 1) {
            for (key, state, held) in work {
                if held || (all && !algorithm.is_replenished(&state, now)) {
                    self.states.insert(key, state);
                }
            }
        }
        out
    }
}

/// Runs `events` random calls on the Redis store and the reference, asserting
/// identical results field by field, and on the memory store too until the trace
/// first steps back in time. Returns how many calls were allowed, denied and never,
/// so a test can check that the trace exercised each.
pub fn differential<A>(
    algorithm: &A,
    redis: &RedisStore<String, A>,
    seed: u64,
    events: usize,
    shape: &TraceShape,
) -> [usize; 3]
where
    A: RedisAlgorithm,
{
    let memory: MemoryStore<String, A> = MemoryStore::new();
    let mut reference = Reference::new();
    let mut forward = true;
    // Recent grants that a later event may cancel: keys, receipts, time to act.
    let mut granted: Vec<(Vec<String>, Vec<Receipt>, u64)> = Vec::new();
    // Receipts are compared too where the server runs the cancel they feed; an
    // algorithm whose cancel the store refuses keeps no marks on the server.
    let comparable = |answers: &[(Decision, Receipt)]| -> Vec<(Decision, Receipt)> {
        answers
            .iter()
            .map(|(d, r)| {
                (
                    *d,
                    if A::CANCEL_ON_SERVER {
                        r.clone()
                    } else {
                        Receipt::NONE
                    },
                )
            })
            .collect()
    };
    let mut rng = Rng::new(seed);
    let mut now_us: u64 = shape.start_us + rng.below(1_000_000);
    let mut seen = [0usize; 3];
    for event in 0..events {
        // The first half runs forward (the memory store is compared too), the
        // second sometimes steps back.
        if event >= events / 2 && shape.back_percent > 0 && rng.chance(shape.back_percent) {
            now_us = now_us.saturating_sub(1 + rng.below(shape.max_back_us));
            forward = false;
        } else {
            now_us += rng.below(shape.max_gap_us + 1);
        }
        let now = now_us * 1_000;
        let count = if rng.chance(shape.multi_percent) {
            2 + rng.below(2) as usize
        } else {
            1
        };
        let keys: Vec<String> = (0..count)
            .map(|_| KEYS[rng.below(KEYS.len() as u64) as usize].to_owned())
            .collect();
        let cost = 1 + rng.below(shape.max_cost);
        let cancelling = if !granted.is_empty() && rng.chance(shape.cancel_percent) {
            Some(granted.swap_remove(rng.below(granted.len() as u64) as usize))
        } else {
            None
        };
        let keys = match &cancelling {
            Some((keys, _, _)) => keys.clone(),
            None => keys,
        };
        let count = keys.len();
        let step = match rng.below(10) {
            _ if cancelling.is_some() => {
                let (_, receipts, acts_at) = cancelling.as_ref().unwrap();
                Operation::Cancel {
                    receipts,
                    acts_at: *acts_at,
                }
            }
            0 | 1 => Operation::Peek { cost },
            2 => Operation::Reserve {
                cost,
                max_wait: u64::MAX,
            },
            3 => Operation::Reserve {
                cost,
                max_wait: rng.below(2 * shape.max_gap_us + 1) * 1_000,
            },
            _ => Operation::Reserve { cost, max_wait: 0 },
        };
        // Half the reserves on one key also report every limit (what the server
        // layer lists): the Redis store's report must be the algorithm's.
        let report = count == 1 && matches!(step, Operation::Reserve { .. }) && rng.chance(50);
        let mut expected_each = Vec::new();
        let expected = reference.apply(
            algorithm,
            &keys,
            now,
            step,
            report.then_some(&mut expected_each),
        );
        if forward && shape.compare_memory {
            let mut in_memory = vec![(Decision::never(0, 0, 0), Receipt::NONE); count];
            memory
                .apply(algorithm, &keys, now, step, &mut in_memory)
                .expect("memory store");
            // Decisions only: a store that forgets a replenished key may restart an
            // opaque mark (a log's running count, a set's serial); the Redis store's
            // receipts are compared with the reference's below.
            let decisions = |answers: &[(Decision, Receipt)]| -> Vec<Decision> {
                answers.iter().map(|(d, _)| *d).collect()
            };
            assert_eq!(
                decisions(&in_memory),
                decisions(&expected),
                "memory vs reference at event {event}"
            );
        }
        // Every fourth event, a reserve on one key that reports nothing is asked for
        // its decision alone, which the server answers without a receipt: the
        // decision must be the reference's all the same (its receipt is the
        // reference's by construction, and it is never cancelled).
        let bare =
            count == 1 && !report && matches!(step, Operation::Reserve { .. }) && event % 4 == 1;
        let mut got = vec![(Decision::never(0, 0, 0), Receipt::NONE); count];
        let mut got_each = Vec::new();
        let applied = if report {
            let each = &mut |d| got_each.push(d);
            redis
                .apply_key_each(algorithm, &keys[0], now, step, each)
                .map(|answer| got[0] = answer)
        } else if bare {
            redis
                .apply_key::<Decision>(algorithm, &keys[0], now, step)
                .map(|decision| got[0] = (decision, expected[0].1.clone()))
        } else {
            redis.apply(algorithm, &keys, now, step, &mut got)
        };
        if let Err(e) = applied {
            panic!("redis store failed at event {event}: {e}");
        }
        assert_eq!(
            got_each, expected_each,
            "each limit, event {event} (seed {seed}): {step:?} on {keys:?} at {now_us} us"
        );
        assert_eq!(
            comparable(&got),
            comparable(&expected),
            "event {event} (seed {seed}): {step:?} on {keys:?} at {now_us} us"
        );
        let expected: Vec<Decision> = expected.iter().map(|(d, _)| *d).collect();
        if let (Operation::Reserve { .. }, false) = (step, bare)
            && expected.iter().all(Decision::is_allowed)
        {
            let wait = expected.iter().map(Decision::wait_nanos).max().unwrap_or(0);
            let receipts = got.iter().map(|(_, r)| r.clone()).collect();
            granted.push((keys.clone(), receipts, now.saturating_add(wait)));
            if granted.len() > 8 {
                granted.remove(0);
            }
        }
        // A cancel answers nothing: only decisions are tallied.
        let decisions = if matches!(step, Operation::Cancel { .. }) {
            &expected[..0]
        } else {
            &expected[..]
        };
        for decision in decisions {
            seen[match decision.verdict() {
                sluicegate::Verdict::Allowed => 0,
                sluicegate::Verdict::Denied => 1,
                sluicegate::Verdict::Never => 2,
            }] += 1;
        }
    }
    seen
}

/// `threads` threads, each with its own store (so its own connection), reserve
/// one permit `tries` times each on one key at the frozen caller time `now`, willing
/// to wait `max_wait` ns; answers the total granted.
pub fn hammer<A>(
    url: &str,
    prefix: &str,
    algorithm: &A,
    (now, max_wait): (u64, u64),
    threads: usize,
    tries: usize,
) -> u64
where
    A: RedisAlgorithm + Clone,
{
    std::thread::scope(|scope| {
        let handles: Vec<_> = (0..threads)
            .map(|_| {
                let algorithm = algorithm.clone();
                scope.spawn(move || {
                    let store: RedisStore<&str, A> =
                        RedisStore::open_with(url, caller_time_options(prefix)).expect("store");
                    let mut granted = 0;
                    for _ in 0..tries {
                        let (decision, _) = store
                            .apply_key::<(Decision, Receipt)>(
                                &algorithm,
                                &"hot",
                                now,
                                Operation::Reserve { cost: 1, max_wait },
                            )
                            .expect("redis call");
                        if decision.is_allowed() {
                            granted += 1;
                        }
                    }
                    granted
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().expect("thread")).sum()
    })
}

/// A caller time in November 2025, in ns since 1970, far from the clock's origin.
pub const NOV_2025: u64 = 1_763_900_000_000_000_000;

/// [`hammer`] on `server` by four threads of `tries` calls each at `(now,
/// max_wait)`, under a prefix unique to `test`: asserts that exactly `expected`
/// were granted (no update lost, none counted twice).
pub fn assert_hammer_grants<A>(
    server: &super::RedisServer,
    test: &str,
    algorithm: &A,
    (at, tries): ((u64, u64), usize),
    expected: u64,
) where
    A: RedisAlgorithm + Clone + std::fmt::Debug,
{
    let prefix = super::unique_prefix(test);
    let granted = hammer(server.url(), &prefix, algorithm, at, 4, tries);
    assert_eq!(granted, expected, "{algorithm:?}");
}

/// For an algorithm whose grants act at once, configured with a limit of 3: a
/// grant of 2 at an instant, a cancel a microsecond later gives nothing back, a
/// cancel at that very instant gives it back, as in memory.
pub fn cancel_at_the_instant<A: RedisAlgorithm>(url: &str, limit: &A, prefix: &str) {
    let store: RedisStore<&str, A> =
        RedisStore::open_with(url, caller_time_options(&super::unique_prefix(prefix))).unwrap();
    let at = 5_000_000_000; // 5 s, a whole microsecond
    let take = Operation::Reserve {
        cost: 2,
        max_wait: 0,
    };
    let (granted, receipt) = store
        .apply_key::<(Decision, Receipt)>(limit, &"k", at, take)
        .unwrap();
    assert_eq!(granted.remaining(), 1);
    let mut out = [(Decision::never(0, 0, 0), Receipt::NONE)];
    let cancel = Operation::Cancel {
        receipts: &[receipt],
        acts_at: at,
    };
    let peek = || {
        store
            .apply_key::<Decision>(limit, &"k", at, Operation::Peek { cost: 1 })
            .unwrap()
            .remaining()
    };
    // A microsecond later the grant has acted: nothing comes back.
    store
        .apply(limit, &["k"], at + 1_000, cancel, &mut out)
        .unwrap();
    assert_eq!(peek(), 0); // 3 - 2 - the peek's 1
                           // At its very instant it comes back.
    store.apply(limit, &["k"], at, cancel, &mut out).unwrap();
    assert_eq!(peek(), 2);
}

/// How the server stores `key` (`OBJECT ENCODING`: "listpack", "hashtable", ...),
/// after checking that it runs with the default `hash-max-listpack-value` (64
/// bytes), the bound a ring's padded header relies on: a test of the encoding
/// fails plainly on a server configured otherwise.
pub fn hash_encoding(admin: &mut redis::Connection, key: &str) -> String {
    let bound: Vec<String> = redis::cmd("CONFIG")
        .arg("GET")
        .arg("hash-max-listpack-value")
        .query(admin)
        .unwrap();
    assert_eq!(
        bound.get(1).map(String::as_str),
        Some("64"),
        "this test needs the default hash-max-listpack-value"
    );
    redis::cmd("OBJECT")
        .arg("ENCODING")
        .arg(key)
        .query(admin)
        .unwrap()
}

/// A state in an older layout, the hash `old` under the key `"k"`: a reserve of
/// `limit` is refused with the typed "another format" error, applying nothing, and
/// the hash is left exactly as it was, never read as an empty state that would
/// grant the whole limit again.
pub fn assert_an_older_layout_is_refused_and_kept<A: RedisAlgorithm>(
    name: &str,
    limit: &A,
    old: &[(&[u8], &[u8])],
) {
    let server = super::RedisServer::start();
    let mut admin = server.connection();
    let store: RedisStore<&str, A> = RedisStore::open_with(
        server.url(),
        caller_time_options(&super::unique_prefix(name)),
    )
    .unwrap();
    let key = store.server_key(&"k");
    let () = redis::cmd("HSET")
        .arg(&key)
        .arg(old)
        .query(&mut admin)
        .unwrap();
    let take = Operation::Reserve {
        cost: 1,
        max_wait: 0,
    };
    super::assert_unapplied_error(
        store.apply_key::<(Decision, Receipt)>(limit, &"k", 1_000_000_000, take),
        "another format",
    );
    let mut kept: Vec<(Vec<u8>, Vec<u8>)> =
        redis::cmd("HGETALL").arg(&key).query(&mut admin).unwrap();
    kept.sort();
    let mut expected: Vec<(Vec<u8>, Vec<u8>)> = old
        .iter()
        .map(|(field, value)| (field.to_vec(), value.to_vec()))
        .collect();
    expected.sort();
    assert_eq!(kept, expected);
}
