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

use crate::cases::{cases, member_names, set_name, SET_LIMITS};
use crate::measure::Bench;
use crate::row::Case;
use std::time::Instant;

#[path = "redis_regimes/cases.rs"]
mod cases;
#[path = "redis_regimes/measure.rs"]
mod measure;
#[path = "redis_regimes/plan.rs"]
mod plan;
mod redis_floor;
mod redis_server;
#[path = "redis_regimes/row.rs"]
mod row;

use redis_server::Server;

/// Calls per measurement.
const CALLS: usize = 5_000;
/// Calls of a row (and of the floor before them) per stats window.
pub(crate) const CHUNK: usize = 500;
/// Rounds over the whole table; each row's figure is its best.
const ROUNDS: usize = 3;

pub(crate) const US: u64 = 1_000;
pub(crate) const SEC: u64 = 1_000_000_000;
pub(crate) const MIN: u64 = 60 * SEC;
pub(crate) const HOUR: u64 = 60 * MIN;
pub(crate) const DAY: u64 = 24 * HOUR;
/// 2025-11-23 00:00:00 UTC in ns: the caller's virtual time starts here.
pub(crate) const START: u64 = 1_763_856_000 * SEC;
/// A call that waits for ever.
pub(crate) const FOREVER: u64 = u64::MAX;
/// Calls per pipelined batch of a fill.
pub(crate) const BATCH: usize = 1_000;

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
