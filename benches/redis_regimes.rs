//! What one decision costs the Redis server, for every algorithm, in three regimes,
//! at a small limit and at large ones, and for a set of three limits against its
//! members alone: each row as the server's own µs per call and as a ratio to the
//! floor (`benches/redis_floor`: a function that reads `TIME`, `GET`s a key and
//! `SET`s it with an expiry) measured the same way in the same run.
//!
//! ```text
//! cargo bench --bench redis_regimes --features redis
//! cargo bench --bench redis_regimes --features redis -- log buckets   # rows whose name has "log" or "buckets"
//! REGIMES_ROWS=counter,set REGIMES_CALLS=2000 REGIMES_ROUNDS=1 cargo bench --bench redis_regimes --features redis
//! ```
//!
//! Row selection: every argument that does not start with `--` (cargo passes
//! `--bench`), or the comma-separated `REGIMES_ROWS`, picks the rows whose name
//! contains it (case-insensitive); no selection runs every row. Each row brings
//! its own floor (below). `REGIMES_CALLS` sets the calls per measurement (default
//! [`CALLS`]), `REGIMES_ROUNDS` the rounds (default [`ROUNDS`]). The calls keep
//! their receipts, as a reservation does; `REGIMES_RECEIPTS=0` asks for the
//! decision alone, as `try_acquire` and `check` do, which the server answers
//! without a receipt (a set without its members' receipts).
//!
//! # How a figure is taken
//!
//! The bench starts its own `redis-server` (a free port, no persistence). A row's
//! calls are the store's own (`Store::apply_key` on a blocking connection, deadline
//! included), one reserve of 1 each; the floor is `FCALL floor` on one key, from the
//! same kind of connection. They run in turn, in chunks of [`CHUNK`]: the floor's
//! chunk, then the row's, each in its own window of `CONFIG RESETSTAT` ... `INFO
//! commandstats`, whose `cmdstat_fcall` gives the chunk's total µs and must count
//! exactly its calls (one `FCALL` per decision, no retry, no library load among
//! them, none failed) or the bench panics. So every figure has a floor taken under
//! the same load, within a few milliseconds: on a VM shared with builds, the floor
//! itself moves by 1.5x from one minute to the next. Every row is measured once in
//! each of the rounds, and the rounds run over the whole table in turn (a burst of
//! noise hits one round of each row, not one row); a figure is the row's best
//! round, its ratio is to the best round of its own floor. The fresh regime also
//! runs the floor on a new key each call, in a chunk of its own before each of the
//! row's: creating a key costs any step on a new key, the floor's too, so its
//! second ratio (`/ new`) is to that floor.
//!
//! Time is the caller's ([`TimeSource::Caller`]), a virtual clock from
//! [`START`] (a whole day since 1970, so every window, bucket and interval starts on
//! it), so that each regime is exact and the same in every round:
//!
//! * **hammered**: the key is filled first (not measured), then every call lands
//!   while it is full (within 3 µs: at the fill's instant for the leaky bucket and
//!   the smooth limiters, in the last 3 µs of the first window for the windows and
//!   the log, all of whose permits are still live there) and is refused;
//! * **granted**: the steady state of a key kept at its limit, after the same
//!   fill: one call every `window / limit` (the smooth limiters' stable interval),
//!   from the instant the first permit comes back (the windows' second window, one
//!   interval after the leaky bucket's fill, the smooth limiters' next free instant
//!   as a peek reports it), each granted: a log drops its oldest entry and appends
//!   one, a bucketed window moves its ring once per bucket, a leaky bucket drains
//!   one permit. The sliding window counter and the weighted bucketed window
//!   estimate the previous window's share, and paced at exactly the limit they
//!   refuse the call at each window's start (the estimate then reads the limit),
//!   so they are paced with that one slot left empty: `limit - 1` calls a window,
//!   at the same instants;
//! * **fresh**: every call on a key the server does not hold (granted).
//!
//! Every measured call's decision is counted, and a measurement whose calls are
//! not all of its regime's kind panics: a mis-set regime gives no figure.
//!
//! Fills are sent pipelined, 1,000 calls a batch (the very call the store sends,
//! from `RedisStore::step_call`), each checked granted. The sliding log is filled
//! with `limit` entries one `window / limit` apart, as paced grants would leave it
//! (1,000,000 entries at 10⁶ a day: the largest fill, about 20 s a round on a
//! 2-core VM). A bucketed window is filled with one call per bucket whose cost is
//! the number of paced grants that bucket would hold, at the first of their
//! instants: the same ring, header and counts as the paced fill, in one call a
//! bucket. The windows and the leaky bucket take one call of the whole limit
//! (their state is a count or an instant: the same state as that many calls at one
//! instant, byte for byte); the smooth limiters one call of their most stored
//! permits plus one, which leaves them empty. The leaky queue's calls and the
//! smooth limiters' fills wait for ever (a queue grants a turn later); every other
//! call waits not at all.
//!
//! The set is `AllOf((FixedWindow, SlidingWindowBuckets::dropping, SlidingLog))`,
//! all three of one limit and window, filled with paced single grants (the log needs
//! them), so that one plan puts all three members in the same regime; its members
//! alone are the table's own rows of the same configurations, and the set is
//! compared with their sum, in floors (each figure over its own floor: the rows
//! run minutes apart).

use sluicegate::algorithms::{
    AllOf, Decision, FixedWindow, LeakyBucket, Receipt, SlidingLog, SlidingWindowBuckets,
    SlidingWindowCounter, SmoothBursty, SmoothWarmingUp,
};
use sluicegate::stores::redis::{RedisAlgorithm, RedisOptions, RedisStore, TimeSource};
use sluicegate::stores::{Operation, Store};
use std::time::{Duration, Instant};

mod redis_floor;
mod redis_server;

use redis_server::Server;

/// Calls per measurement.
const CALLS: usize = 5_000;
/// Calls of a row (and of the floor before them) per stats window.
const CHUNK: usize = 500;
/// Rounds over the whole table; each row's figure is its best.
const ROUNDS: usize = 3;

const US: u64 = 1_000;
const SEC: u64 = 1_000_000_000;
const MIN: u64 = 60 * SEC;
const HOUR: u64 = 60 * MIN;
const DAY: u64 = 24 * HOUR;
/// 2025-11-23 00:00:00 UTC in ns: the caller's virtual time starts here.
const START: u64 = 1_763_856_000 * SEC;
/// A call that waits for ever.
const FOREVER: u64 = u64::MAX;
/// Calls per pipelined batch of a fill.
const BATCH: usize = 1_000;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Regime {
    Hammered,
    Granted,
    Fresh,
}

const REGIMES: [Regime; 3] = [Regime::Hammered, Regime::Granted, Regime::Fresh];

impl Regime {
    fn name(self) -> &'static str {
        match self {
            Regime::Hammered => "hammered",
            Regime::Granted => "granted",
            Regime::Fresh => "fresh",
        }
    }
}

/// When the granted regime's calls land.
#[derive(Clone, Copy, Debug)]
enum Pace {
    /// `from + i × every`.
    Every { from: u64, every: u64 },
    /// `limit - 1` calls a window (`every × limit`) from the window-aligned `from`,
    /// at the instants `j × every` for `j` in `1..limit`: each window's first
    /// instant left empty.
    SkipWindowStart { from: u64, every: u64, limit: u64 },
    /// One call every `every` from the first instant a peek on the hammered key
    /// reports (rounded up to a whole µs).
    AfterPeek { every: u64 },
}

/// How a key is put in each regime.
#[derive(Clone, Debug)]
struct Plan {
    /// The fill: (instant, cost) of each call, in order.
    fill: Vec<(u64, u64)>,
    /// The fill's max wait.
    fill_wait: u64,
    /// The measured calls' max wait.
    wait: u64,
    /// Hammered calls land at this instant plus 0, 1 or 2 µs.
    hammer: u64,
    pace: Pace,
}

impl Plan {
    /// A window of `limit` per `window` filled by one call at [`START`], hammered in
    /// its last 3 µs, paced from the next window on.
    fn window(limit: u64, window: u64, pace: Pace) -> Plan {
        Plan {
            fill: vec![(START, limit)],
            fill_wait: 0,
            wait: 0,
            hammer: START + window - 3 * US,
            pace,
        }
    }

    /// A log of `limit` per `window`: `limit` entries one interval apart.
    fn log(limit: u64, window: u64) -> Plan {
        let every = window / limit;
        Plan {
            fill: (0..limit).map(|i| (START + i * every, 1)).collect(),
            ..Plan::window(
                limit,
                window,
                Pace::Every {
                    from: START + window,
                    every,
                },
            )
        }
    }

    /// A bucketed window of `limit` per `window` in buckets of `bucket`: one call
    /// per bucket, of the paced grants it would hold, at the first of them.
    fn buckets(limit: u64, window: u64, bucket: u64, pace: Pace) -> Plan {
        let every = window / limit;
        let mut fill: Vec<(u64, u64)> = Vec::new();
        for i in 0..limit {
            let at = i * every;
            match fill.last_mut() {
                Some((first, cost)) if (*first - START) / bucket == at / bucket => *cost += 1,
                _ => fill.push((START + at, 1)),
            }
        }
        Plan {
            fill,
            ..Plan::window(limit, window, pace)
        }
    }

    /// A leaky bucket of `limit` per `window` filled at [`START`] and hammered
    /// there; one permit drains every interval.
    fn leaky(limit: u64, window: u64, wait: u64) -> Plan {
        let every = window / limit;
        Plan {
            fill: vec![(START, limit)],
            fill_wait: wait,
            wait,
            hammer: START,
            pace: Pace::Every {
                from: START + every,
                every,
            },
        }
    }

    /// A smooth limiter of `every` ns per permit, emptied at [`START`] by one call of
    /// `cost` and hammered there; paced from its next free instant.
    fn smooth(cost: u64, every: u64) -> Plan {
        Plan {
            fill: vec![(START, cost)],
            fill_wait: FOREVER,
            wait: 0,
            hammer: START,
            pace: Pace::AfterPeek { every },
        }
    }
}

/// One measurement: the server's µs per call of the row and of the floor
/// interleaved with it (on one key, and for the fresh regime also on a new key
/// each call: what creating a key costs any step), and how many of the row's calls
/// were granted.
#[derive(Clone, Copy, Debug)]
struct Measured {
    usec: f64,
    floor: f64,
    /// The floor on new keys; infinite where not measured.
    new_key_floor: f64,
    granted: usize,
}

/// The bench's shared parts: the server, an admin connection, the floor's
/// connection (the floor function loaded), the calls per row.
struct Bench {
    server: Server,
    admin: redis::Connection,
    floor: redis::Connection,
    calls: usize,
    /// Whether the calls keep their receipts (`REGIMES_RECEIPTS`, default yes).
    receipts: bool,
    /// The new keys the floor has created so far.
    new_keys: u64,
}

impl Bench {
    /// The calls of a row, `call(i)` for each (true: granted), in chunks of
    /// [`CHUNK`], each chunk preceded by as many calls of the floor: the floor is
    /// measured under the very load the row meets. Each chunk is its own
    /// `CONFIG RESETSTAT` ... `INFO commandstats` window. With `new_keys`, a chunk
    /// of the floor on a new key each call comes before each of the row's too.
    fn measure(
        &mut self,
        row: &str,
        new_keys: bool,
        mut call: impl FnMut(u64) -> bool,
    ) -> Measured {
        let (mut usec, mut floor, mut new_key_floor, mut granted) = (0, 0, 0, 0);
        let mut i = 0;
        while i < self.calls as u64 {
            let n = (CHUNK as u64).min(self.calls as u64 - i);
            self.reset();
            for _ in 0..n {
                self.floor_call("floor".to_owned());
            }
            floor += self.fcall_usec(FLOOR, n);
            if new_keys {
                self.reset();
                for _ in 0..n {
                    self.new_keys += 1;
                    self.floor_call(format!("floor-new{}", self.new_keys));
                }
                new_key_floor += self.fcall_usec(FLOOR, n);
            }
            self.reset();
            granted += (i..i + n).filter(|&j| call(j)).count();
            usec += self.fcall_usec(row, n);
            i += n;
        }
        let calls = self.calls as f64;
        Measured {
            usec: usec as f64 / calls,
            floor: floor as f64 / calls,
            new_key_floor: if new_keys {
                new_key_floor as f64 / calls
            } else {
                f64::INFINITY
            },
            granted,
        }
    }

    fn floor_call(&mut self, key: String) {
        let _: i64 = redis::cmd("FCALL")
            .arg("floor")
            .arg(1)
            .arg(key)
            .query(&mut self.floor)
            .unwrap();
    }

    fn reset(&mut self) {
        let () = redis::cmd("CONFIG")
            .arg("RESETSTAT")
            .query(&mut self.admin)
            .unwrap();
    }

    /// `cmdstat_fcall`'s total µs since the last reset: panics unless it counted
    /// exactly `calls` `FCALL`s, none failed.
    fn fcall_usec(&mut self, row: &str, calls: u64) -> u64 {
        let info: String = redis::cmd("INFO")
            .arg("commandstats")
            .query(&mut self.admin)
            .unwrap();
        let line = info
            .lines()
            .find_map(|l| l.strip_prefix("cmdstat_fcall:"))
            .unwrap_or_else(|| panic!("{row}: no cmdstat_fcall in {info}"));
        let field = |name: &str| -> Option<u64> {
            line.split(',')
                .find_map(|f| f.strip_prefix(name))
                .and_then(|v| v.parse().ok())
        };
        let counted = field("calls=").unwrap_or_else(|| panic!("{row}: no calls in {line}"));
        assert_eq!(
            counted, calls,
            "{row}: the server counted {counted} FCALLs for {calls} decisions ({line})"
        );
        assert_eq!(
            field("failed_calls=").unwrap_or(0),
            0,
            "{row}: failed FCALLs ({line})"
        );
        field("usec=").unwrap_or_else(|| panic!("{row}: no usec in {line}"))
    }

    fn flush(&mut self) {
        let () = redis::cmd("FLUSHALL").query(&mut self.admin).unwrap();
    }
}

const FLOOR: &str = "floor (TIME + GET + SET … PX)";

/// A row of the table: one algorithm at one limit, in each regime.
trait Case {
    fn name(&self) -> &str;
    /// Measures every regime once: (fill time, a figure per regime).
    fn run(&self, bench: &mut Bench) -> (Duration, [Measured; 3]);
}

struct Row<A> {
    name: String,
    algorithm: A,
    plan: Plan,
}

fn row<A: RedisAlgorithm + 'static>(name: String, algorithm: A, plan: Plan) -> Box<dyn Case> {
    Box::new(Row {
        name,
        algorithm,
        plan,
    })
}

fn reserve(cost: u64, max_wait: u64) -> Operation<'static> {
    Operation::Reserve { cost, max_wait }
}

impl<A: RedisAlgorithm> Case for Row<A> {
    fn name(&self) -> &str {
        &self.name
    }

    fn run(&self, bench: &mut Bench) -> (Duration, [Measured; 3]) {
        let (name, plan, algorithm) = (&self.name, &self.plan, &self.algorithm);
        bench.flush();
        let options = RedisOptions::default()
            .prefix("regimes:")
            .unwrap()
            .time_source(TimeSource::Caller)
            .expiry_grace(Duration::from_secs(3600))
            .response_timeout(Duration::from_secs(60));
        let store: RedisStore<String, A> =
            RedisStore::open_with(&bench.server.url, options).unwrap();
        let receipts = bench.receipts;
        let apply = |key: &String, now: u64, step: Operation<'_>| {
            let decision = if receipts {
                store
                    .apply_key::<(Decision, Receipt)>(algorithm, key, now, step)
                    .map(|(decision, _)| decision)
            } else {
                store.apply_key::<Decision>(algorithm, key, now, step)
            };
            decision.unwrap_or_else(|e| panic!("{name}: {e}"))
        };
        // Loads the library and builds this configuration's step, on a key of its own.
        apply(&"warm".to_owned(), START, reserve(1, 0));
        let hot = "hot".to_owned();

        // The fill, pipelined, every call granted.
        let started = Instant::now();
        let function = redis_server::function_name(&mut bench.admin);
        for batch in plan.fill.chunks(BATCH) {
            let mut pipe = redis::pipe();
            for &(at, cost) in batch {
                let (keys, args) = store
                    .step_call(algorithm, &hot, at, reserve(cost, plan.fill_wait))
                    .unwrap();
                pipe.cmd("FCALL")
                    .arg(&function)
                    .arg(keys.len())
                    .arg(keys)
                    .arg(args);
            }
            let replies: Vec<redis::Value> = pipe.query(&mut bench.admin).unwrap();
            let replies = replies
                .into_iter()
                .map(|r| RedisStore::<String, A>::step_reply(r).unwrap());
            for (reply, (at, cost)) in replies.zip(batch) {
                assert_eq!(
                    reply.first(),
                    Some(&0),
                    "{name}: the fill's call of {cost} at {} µs was not granted: {reply:?}",
                    (at - START) / US
                );
            }
        }
        let fill = started.elapsed();

        let hammer = plan.hammer;
        let hammered = bench.measure(name, false, |i| {
            apply(&hot, hammer + i % 3 * US, reserve(1, plan.wait)).is_allowed()
        });
        assert_eq!(
            hammered.granted, 0,
            "{name}, hammered: {} of {} calls granted (every call must be refused)",
            hammered.granted, bench.calls
        );

        let at: Box<dyn Fn(u64) -> u64> = match plan.pace {
            Pace::Every { from, every } => Box::new(move |i| from + i * every),
            Pace::SkipWindowStart { from, every, limit } => Box::new(move |i| {
                from + i / (limit - 1) * every * limit + (1 + i % (limit - 1)) * every
            }),
            Pace::AfterPeek { every } => {
                let peek = apply(&hot, hammer, Operation::Peek { cost: 1 });
                assert!(!peek.is_allowed(), "{name}: the filled key admits a call");
                let from = (hammer + peek.retry_after_nanos()).div_ceil(US) * US;
                Box::new(move |i| from + i * every)
            }
        };
        let granted = bench.measure(name, false, |i| {
            apply(&hot, at(i), reserve(1, plan.wait)).is_allowed()
        });
        assert_eq!(
            granted.granted, bench.calls,
            "{name}, granted: {} of {} calls granted (every call must be)",
            granted.granted, bench.calls
        );

        let fresh = bench.measure(name, true, |i| {
            apply(&format!("fresh{i}"), START + i * US, reserve(1, plan.wait)).is_allowed()
        });
        assert_eq!(
            fresh.granted, bench.calls,
            "{name}, fresh: {} of {} calls granted (every call must be)",
            fresh.granted, bench.calls
        );
        (fill, [hammered, granted, fresh])
    }
}

/// "10/min", "10,000/h", "1,000,000/day".
fn per(limit: u64, window: u64) -> String {
    let digits = limit.to_string();
    let mut grouped = String::new();
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            grouped.push(',');
        }
        grouped.push(c);
    }
    let unit = match window {
        SEC => "s",
        MIN => "min",
        HOUR => "h",
        DAY => "day",
        _ => unreachable!("windows are a second, a minute, an hour or a day"),
    };
    format!("{grouped}/{unit}")
}

fn d(ns: u64) -> Duration {
    Duration::from_nanos(ns)
}

/// The limits every window-like algorithm is measured at: (limit, window).
const LIMITS: [(u64, u64); 4] = [(10, MIN), (10_000, HOUR), (100_000, MIN), (1_000_000, DAY)];

/// A bucketed window's bucket for `window`: 60 buckets a minute or an hour, 24 a day.
fn bucket_of(window: u64) -> u64 {
    match window {
        MIN => SEC,
        HOUR => MIN,
        _ => HOUR,
    }
}

/// The bucketed windows' limits: [`LIMITS`] and 100,000 an hour in minutes.
const BUCKET_LIMITS: [(u64, u64); 5] = [
    (10, MIN),
    (10_000, HOUR),
    (100_000, MIN),
    (100_000, HOUR),
    (1_000_000, DAY),
];

/// The set's limits (its members are the table's rows at these limits).
const SET_LIMITS: [(u64, u64); 2] = [(10, MIN), (10_000, HOUR)];

fn cases() -> Vec<Box<dyn Case>> {
    let mut cases = Vec::new();
    for (limit, window) in LIMITS {
        let every = window / limit;
        cases.push(row(
            format!("fixed window {}", per(limit, window)),
            FixedWindow::new(limit, d(window)).unwrap(),
            Plan::window(
                limit,
                window,
                Pace::Every {
                    from: START + window,
                    every,
                },
            ),
        ));
    }
    for (limit, window) in LIMITS {
        let every = window / limit;
        cases.push(row(
            format!("sliding window counter {}", per(limit, window)),
            SlidingWindowCounter::new(limit, d(window)).unwrap(),
            Plan::window(
                limit,
                window,
                Pace::SkipWindowStart {
                    from: START + window,
                    every,
                    limit,
                },
            ),
        ));
    }
    for (limit, window) in LIMITS {
        cases.push(row(
            format!("leaky bucket meter {}", per(limit, window)),
            LeakyBucket::meter(limit, limit, d(window)).unwrap(),
            Plan::leaky(limit, window, 0),
        ));
    }
    for (limit, window) in LIMITS {
        cases.push(row(
            format!("leaky bucket queue {}", per(limit, window)),
            LeakyBucket::queue(limit, limit, d(window)).unwrap(),
            Plan::leaky(limit, window, FOREVER),
        ));
    }
    // The smooth limiters at 10 a second (their default one-second burst), and at
    // the large limits as a rate with the window as burst or warm-up.
    let smooth: [(u64, u64); 4] = [(10, SEC), LIMITS[1], LIMITS[2], LIMITS[3]];
    for (limit, window) in smooth {
        let rate = limit as f64 * SEC as f64 / window as f64;
        let mut bursty = SmoothBursty::new(rate).unwrap();
        if window != SEC {
            bursty = bursty.with_max_burst(d(window)).unwrap();
        }
        let cost = bursty.max_permits().ceil() as u64 + 1;
        cases.push(row(
            format!("smooth bursty {}", per(limit, window)),
            bursty,
            Plan::smooth(cost, window / limit),
        ));
    }
    for (limit, window) in smooth {
        let rate = limit as f64 * SEC as f64 / window as f64;
        let warming = SmoothWarmingUp::new(rate, d(window)).unwrap();
        let cost = warming.max_permits().ceil() as u64 + 1;
        cases.push(row(
            format!("smooth warming up {}", per(limit, window)),
            warming,
            Plan::smooth(cost, window / limit),
        ));
    }
    for (limit, window) in LIMITS {
        cases.push(row(
            format!("sliding log {}", per(limit, window)),
            SlidingLog::new(limit, d(window)).unwrap(),
            Plan::log(limit, window),
        ));
    }
    for weighted in [false, true] {
        for (limit, window) in BUCKET_LIMITS {
            let every = window / limit;
            let bucket = bucket_of(window);
            let (kind, buckets, pace) = if weighted {
                (
                    "weighted",
                    SlidingWindowBuckets::weighted(limit, d(window), d(bucket)),
                    Pace::SkipWindowStart {
                        from: START + window,
                        every,
                        limit,
                    },
                )
            } else {
                (
                    "dropping",
                    SlidingWindowBuckets::dropping(limit, d(window), d(bucket)),
                    Pace::Every {
                        from: START + window,
                        every,
                    },
                )
            };
            cases.push(row(
                format!(
                    "buckets {kind} {} in {}",
                    per(limit, window),
                    unit_name(bucket)
                ),
                buckets.unwrap(),
                Plan::buckets(limit, window, bucket, pace),
            ));
        }
    }
    for (limit, window) in SET_LIMITS {
        let set = AllOf::new((
            FixedWindow::new(limit, d(window)).unwrap(),
            SlidingWindowBuckets::dropping(limit, d(window), d(bucket_of(window))).unwrap(),
            SlidingLog::new(limit, d(window)).unwrap(),
        ));
        cases.push(row(set_name(limit, window), set, Plan::log(limit, window)));
    }
    cases
}

fn unit_name(bucket: u64) -> &'static str {
    match bucket {
        SEC => "1 s",
        MIN => "1 min",
        _ => "1 h",
    }
}

fn set_name(limit: u64, window: u64) -> String {
    format!("set of 3 {}", per(limit, window))
}

/// The members' rows of the set at (limit, window).
fn member_names(limit: u64, window: u64) -> [String; 3] {
    [
        format!("fixed window {}", per(limit, window)),
        format!(
            "buckets dropping {} in {}",
            per(limit, window),
            unit_name(bucket_of(window))
        ),
        format!("sliding log {}", per(limit, window)),
    ]
}

fn env_number(name: &str, default: usize) -> usize {
    std::env::var(name).map_or(default, |v| {
        v.parse()
            .unwrap_or_else(|_| panic!("{name} must be a number, not {v:?}"))
    })
}

fn main() {
    let mut filters: Vec<String> = std::env::args()
        .skip(1)
        .filter(|a| !a.starts_with("--"))
        .map(|a| a.to_lowercase())
        .collect();
    if let Ok(rows) = std::env::var("REGIMES_ROWS") {
        filters.extend(
            rows.split(',')
                .filter(|r| !r.is_empty())
                .map(str::to_lowercase),
        );
    }
    let calls = env_number("REGIMES_CALLS", CALLS);
    let rounds = env_number("REGIMES_ROUNDS", ROUNDS);
    let receipts = env_number("REGIMES_RECEIPTS", 1) != 0;
    let cases: Vec<Box<dyn Case>> = cases()
        .into_iter()
        .filter(|c| {
            let name = c.name().to_lowercase();
            filters.is_empty() || filters.iter().any(|f| name.contains(f.as_str()))
        })
        .collect();

    let server = Server::start("redis-regimes", &[]);
    let connect = || {
        redis::Client::open(server.url.as_str())
            .unwrap()
            .get_connection()
            .unwrap()
    };
    let (mut admin, floor) = (connect(), connect());
    // A function survives FLUSHALL: loaded once.
    redis_floor::load(&mut admin).unwrap();
    let mut bench = Bench {
        server,
        admin,
        floor,
        calls,
        receipts,
        new_keys: 0,
    };
    let version: String = redis::cmd("INFO")
        .arg("server")
        .query(&mut bench.admin)
        .unwrap();
    let version = version
        .lines()
        .find_map(|l| l.strip_prefix("redis_version:"))
        .unwrap_or("?")
        .to_owned();

    let started = Instant::now();
    // Per row and regime, the best round: (the row's µs, its floor's µs, the floor's
    // on new keys).
    let mut best = vec![[(f64::INFINITY, f64::INFINITY, f64::INFINITY); 3]; cases.len()];
    for round in 1..=rounds {
        for (case, best) in cases.iter().zip(&mut best) {
            let (fill, figures) = case.run(&mut bench);
            eprintln!(
                "round {round}: {:42} {} · granted {}/{}/{} of {calls} · fill {:.2} s",
                case.name(),
                figures
                    .iter()
                    .zip(REGIMES)
                    .map(|(m, r)| format!("{} {:.2} µs (floor {:.2})", r.name(), m.usec, m.floor))
                    .collect::<Vec<_>>()
                    .join(" · "),
                figures[0].granted,
                figures[1].granted,
                figures[2].granted,
                fill.as_secs_f64(),
            );
            for (b, m) in best.iter_mut().zip(figures) {
                *b = (b.0.min(m.usec), b.1.min(m.floor), b.2.min(m.new_key_floor));
            }
        }
    }

    let floors = best.iter().flatten().map(|b| b.1);
    let lowest = floors.clone().fold(f64::INFINITY, f64::min);
    let highest = floors.fold(0.0, f64::max);
    println!(
        "\nredis-server {version}, caller's time, {}; best of {rounds} rounds of {calls} calls \
         a row; {:.0} s in all",
        if receipts {
            "receipts kept"
        } else {
            "decisions alone (no receipt)"
        },
        started.elapsed().as_secs_f64()
    );
    println!(
        "hammered: every call refused; granted: every call granted, paced at the limit; \
         fresh: every call on a new key, granted"
    );
    println!(
        "x floor: against the floor's calls interleaved with the row's, {CHUNK} and {CHUNK} \
         (best of {rounds}: {lowest:.2}-{highest:.2} µs per call); fresh keys also against \
         the floor on a new key each call (/ new)\n"
    );
    println!(
        "| row | hammered µs (x floor) | granted µs (x floor) | fresh µs (x floor / new) | \
         floors µs |"
    );
    println!("|---|---|---|---|---|");
    for (case, best) in cases.iter().zip(&best) {
        let cells: Vec<String> = best
            .iter()
            .map(|&(u, f, new)| {
                if new.is_finite() {
                    format!("{u:.2} ({:.2}x / {:.2}x)", u / f, u / new)
                } else {
                    format!("{u:.2} ({:.2}x)", u / f)
                }
            })
            .collect();
        let floors: Vec<String> = best
            .iter()
            .map(|&(_, f, new)| {
                if new.is_finite() {
                    format!("{f:.2}, new {new:.2}")
                } else {
                    format!("{f:.2}")
                }
            })
            .collect();
        println!(
            "| {} | {} | {} |",
            case.name(),
            cells.join(" | "),
            floors.join(" / ")
        );
    }

    // Each set against its members alone and their sum, in floors (each figure
    // over its own floor: the rows ran minutes apart, under different loads).
    let figure = |name: &str| -> Option<[f64; 3]> {
        cases
            .iter()
            .position(|c| c.name() == name)
            .map(|i| best[i].map(|(u, f, _)| u / f))
    };
    for (limit, window) in SET_LIMITS {
        let Some(set) = figure(&set_name(limit, window)) else {
            continue;
        };
        let names = member_names(limit, window);
        let Some(members) = names.iter().map(|n| figure(n)).collect::<Option<Vec<_>>>() else {
            println!(
                "\n{}: run its members' rows too to compare it with them",
                set_name(limit, window)
            );
            continue;
        };
        println!(
            "\n{} against its members alone (x floor; the set's ratio to the members' sum)",
            set_name(limit, window)
        );
        println!("| | hammered | granted | fresh |");
        println!("|---|---|---|---|");
        for (name, m) in names.iter().zip(&members) {
            println!("| {name} | {:.2}x | {:.2}x | {:.2}x |", m[0], m[1], m[2]);
        }
        let sum: Vec<f64> = (0..3).map(|r| members.iter().map(|m| m[r]).sum()).collect();
        println!(
            "| members' sum | {:.2}x | {:.2}x | {:.2}x |",
            sum[0], sum[1], sum[2]
        );
        println!(
            "| the set | {:.2}x ({:.2} of the sum) | {:.2}x ({:.2}) | {:.2}x ({:.2}) |",
            set[0],
            set[0] / sum[0],
            set[1],
            set[1] / sum[1],
            set[2],
            set[2] / sum[2]
        );
    }
}
