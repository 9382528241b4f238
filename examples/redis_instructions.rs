//! The measurement harness for the Redis store's server cost per call of the
//! ring-keeping algorithms, in instructions (repeatable on a loaded machine,
//! unlike `INFO commandstats`): a `redis-server` under callgrind, counting only
//! inside `fcallCommand`, zeroed after the fill, so that a count is what the calls
//! measured cost the server, reply included, and nothing else.
//!
//! ```text
//! cargo build --release --example redis_instructions --features redis
//! valgrind --tool=callgrind --toggle-collect=fcallCommand --collect-atstart=no \
//!     --callgrind-out-file=cg.out redis-server --port 7790 --save '' --appendonly no &
//! B=target/release/examples/redis_instructions; export REDIS_URL=redis://127.0.0.1:7790/
//! $B log 1000 fill                 # not measured
//! $B log 1000 hammer 10            # loads the library, warms the step
//! callgrind_control -z redis-server
//! $B log 1000 hammer 2000          # or: pace 2000
//! callgrind_control -d redis-server    # then callgrind_annotate cg.out.1: total / 2000
//! ```
//!
//! The same goes for the floor: `$B floor 10`, zero, `$B floor 2000`, dump; and for
//! a straight-line grant: `$B straight-log 1000 fill`, `$B straight-log 1000 load`,
//! zero, `$B straight-log 1000 pace 2000`, dump (`check` first, on a server of its
//! own, to see that it answers as the library). Kill the server (by its pid) after
//! each run, so that every count starts from a fresh one.
//!
//! Kinds, one key at the caller's (virtual) time, window `D` = 60 s:
//! * `log`: `SlidingLog::new(limit, D)`;
//! * `buckets`: `SlidingWindowBuckets::dropping(limit, D, 1 s)`;
//! * `weighted`: `SlidingWindowBuckets::weighted(limit, D, 1 s)`;
//! * `fine-buckets`: `SlidingWindowBuckets::dropping(limit, D, 200 ms)`, a ring of
//!   300 buckets, every one of them holding a count at 1,000 and more;
//! * `leaky`: `LeakyBucket::meter(limit, limit, D)` (hammered, it grants what
//!   drained and refuses the rest);
//! * `meter`, `queue`: `LeakyBucket::meter(10, limit, 1 s)`, `::queue(10, limit, 1 s)`
//!   (as `benches/redis.rs`'s rows at 3 per second, whose ticks are fractional);
//! * `bursty`: `SmoothBursty::new(limit)` (`limit` per second);
//! * `fixed`, `counter`: `FixedWindow::new(limit, D)`, `SlidingWindowCounter::new(limit, D)`;
//! * `set`: `AllOf((FixedWindow, SlidingWindowBuckets::dropping, SlidingLog))` of
//!   `limit` in `D` (buckets of 1 s), as `benches/redis_regimes.rs`' set rows;
//! * `floor`: the floor of any scripted decision, a function that reads `TIME`,
//!   `GET`s a key and `SET`s it with an expiry (as in `benches/redis.rs`), loaded
//!   by the first call. It takes no limit: `floor <calls>`;
//! * `straight-log`, `straight-fixed`: the paced grant of `log` or `fixed` written
//!   out as straight-line Lua on the library's layout
//!   (`redis_instructions_straight.lua`: the same commands, `ARGV` and reply, no
//!   driver, state tables or helper calls), to tell what a grant's commands and
//!   packing cost by themselves from what the library's general step adds. Phases:
//!   `fill` (the library's), `load` (loads the functions, no call), `pace`, and
//!   `check <calls>`, which paces two keys the library filled, one through the
//!   library and one through the straight function, and fails unless every answer
//!   and the library's next call on each agree. `clock <rounds>` (on a server not
//!   under callgrind) times the floor, the straight function and the library by
//!   the server's own accounting (`INFO commandstats`), interleaved in chunks of
//!   1,000 calls on two keys holding the same full log, and prints each over the
//!   floor, per round and the median.
//!
//! Phases: `fill` grants `limit` calls spread evenly over the first window (one
//! every `D / limit`), so every limit is measured full. `hammer` then makes calls
//! within the last 3 µs of that window, every entry still live: all refused.
//! `pace` makes calls from the end of the window on, one every `D / limit`: each
//! finds exactly the oldest permit gone, the steady state of a key kept at its
//! limit, and is granted (a log drops one entry and appends one). Each prints how
//! many of its calls were granted, so that a count per call is known to be one
//! kind of call. `server` makes its calls at the server's `TIME`, as `benches/redis.rs`
//! does (the call the store sends by default, one argument shorter), as fast as they
//! come back: a hammered key, without a fill. `fresh` makes each call on a key the
//! server does not hold (granted), without a fill.

use sluicegate::algorithms::{
    AllOf, FixedWindow, LeakyBucket, Receipt, SlidingLog, SlidingWindowBuckets,
    SlidingWindowCounter, SmoothBursty,
};
use sluicegate::stores::redis::{RedisAlgorithm, RedisOptions, RedisStore, TimeSource};
use sluicegate::stores::{Operation, Store};
use sluicegate::Decision;
use std::time::Duration;

/// The floor, as `benches/redis.rs` times it.
#[path = "../benches/redis_floor/mod.rs"]
mod redis_floor;

/// 2025-11-23 in ns: a realistic caller time.
const START: u64 = 1_763_900_000_000_000_000;
const WINDOW: Duration = Duration::from_secs(60);

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let usage = "usage: redis_instructions log|buckets|weighted|fine-buckets|leaky|meter|queue|bursty|fixed|counter|set <limit> \
                 fill | hammer <calls> | pace <calls> | server <calls> | fresh <calls>\n       \
                 redis_instructions straight-log|straight-fixed <limit> fill | load | pace <calls> | check <calls> | clock <rounds>\n       \
                 redis_instructions floor <calls>";
    let url = std::env::var("REDIS_URL").unwrap_or_else(|_| "redis://127.0.0.1:7790/".into());
    let fail = || -> ! {
        eprintln!("{usage}");
        std::process::exit(2)
    };
    let number = |i: usize| -> u64 {
        args.get(i)
            .map_or_else(|| fail(), |n| n.parse().unwrap_or_else(|_| fail()))
    };
    let kind = args.get(1).map_or_else(|| fail(), String::as_str);
    if kind == "floor" {
        return floor(&url, number(2));
    }
    let limit = number(2);
    let phase = args.get(3).map_or_else(|| fail(), String::as_str);
    let calls = if phase == "fill" || phase == "load" {
        limit
    } else {
        number(4)
    };
    let second = Duration::from_secs(1);
    match kind {
        "straight-log" => straight(
            &url,
            SlidingLog::new(limit, WINDOW),
            "log",
            limit,
            phase,
            calls,
        ),
        "straight-fixed" => straight(
            &url,
            FixedWindow::new(limit, WINDOW),
            "fixed",
            limit,
            phase,
            calls,
        ),
        "log" => run(&url, SlidingLog::new(limit, WINDOW), limit, phase, calls),
        "buckets" => run(
            &url,
            SlidingWindowBuckets::dropping(limit, WINDOW, second),
            limit,
            phase,
            calls,
        ),
        "weighted" => run(
            &url,
            SlidingWindowBuckets::weighted(limit, WINDOW, second),
            limit,
            phase,
            calls,
        ),
        "fine-buckets" => run(
            &url,
            SlidingWindowBuckets::dropping(limit, WINDOW, Duration::from_millis(200)),
            limit,
            phase,
            calls,
        ),
        "leaky" => run(
            &url,
            LeakyBucket::meter(limit, limit, WINDOW),
            limit,
            phase,
            calls,
        ),
        "meter" => run(
            &url,
            LeakyBucket::meter(10, limit, second),
            limit,
            phase,
            calls,
        ),
        "queue" => run(
            &url,
            LeakyBucket::queue(10, limit, second),
            limit,
            phase,
            calls,
        ),
        "bursty" => run(&url, SmoothBursty::new(limit as f64), limit, phase, calls),
        "fixed" => run(&url, FixedWindow::new(limit, WINDOW), limit, phase, calls),
        "counter" => run(
            &url,
            SlidingWindowCounter::new(limit, WINDOW),
            limit,
            phase,
            calls,
        ),
        "set" => {
            let members = (|| {
                Ok::<_, sluicegate::ConfigError>((
                    FixedWindow::new(limit, WINDOW)?,
                    SlidingWindowBuckets::dropping(limit, WINDOW, second)?,
                    SlidingLog::new(limit, WINDOW)?,
                ))
            })();
            run(&url, members.map(AllOf::new), limit, phase, calls)
        }
        _ => fail(),
    }
}

/// `calls` calls of the floor function, loaded first (`FUNCTION LOAD REPLACE`:
/// not counted, it is not an `FCALL`).
fn floor(url: &str, calls: u64) {
    let client = redis::Client::open(url).expect("a Redis URL");
    let mut conn = client
        .get_connection()
        .unwrap_or_else(|e| panic!("{e} (is a redis-server at {url}?)"));
    redis_floor::load(&mut conn).expect("the floor loads");
    for _ in 0..calls {
        redis_floor::call(&mut conn, "instructions:floor").expect("the floor runs");
    }
    println!("floor: {calls} calls");
}

fn run<A: RedisAlgorithm>(
    url: &str,
    algorithm: Result<A, sluicegate::ConfigError>,
    limit: u64,
    phase: &str,
    calls: u64,
) {
    let algorithm = algorithm.expect("a valid limit");
    let store = open::<A>(url, phase == "server");
    let fresh = phase == "fresh";
    let pid = std::process::id();
    let mut out = [(Decision::never(0, 0, 0), Receipt::NONE)];
    let step = Operation::Reserve {
        cost: 1,
        max_wait: 0,
    };
    let mut apply = |i: u64, now: u64| {
        let key = [if fresh {
            format!("fresh:{pid}:{i}")
        } else {
            "hot".to_owned()
        }];
        store
            .apply(&algorithm, &key, now, step, &mut out)
            .unwrap_or_else(|e| panic!("{e} (is a redis-server at {url}?)"));
        out[0].0.is_allowed()
    };
    let window = WINDOW.as_nanos() as u64;
    let spacing = window / limit;
    let at: Box<dyn Fn(u64) -> u64> = match phase {
        "fill" => Box::new(|i| START + i * spacing),
        "hammer" => Box::new(|i| START + window - 3_000 + i % 3_000),
        "pace" => Box::new(|i| START + window + i * spacing),
        "server" => Box::new(|_| 0),
        "fresh" => Box::new(|i| START + i * spacing),
        _ => {
            eprintln!("unknown phase {phase}");
            std::process::exit(2)
        }
    };
    let granted = (0..calls).filter(|&i| apply(i, at(i))).count();
    println!("{phase}: {granted} of {calls} granted");
}

/// The harness's store: keys under `instructions:`, an hour's expiry grace, the
/// caller's time unless `server_time`.
fn open<A: RedisAlgorithm>(url: &str, server_time: bool) -> RedisStore<String, A> {
    let options = RedisOptions::default()
        .prefix("instructions:")
        .expect("no braces")
        .time_source(if server_time {
            TimeSource::Server
        } else {
            TimeSource::Caller
        })
        .expiry_grace(Duration::from_secs(3600))
        .response_timeout(Duration::from_secs(60));
    RedisStore::open_with(url, options).expect("a Redis URL")
}

/// The straight-line functions (`redis_instructions_straight.lua`).
const STRAIGHT: &str = include_str!("redis_instructions_straight.lua");

/// The `straight-*` kinds: `step` (`log` or `fixed`) written out, on keys the
/// library (with `algorithm`) fills. The call's text is the one the store sends
/// for this configuration, so that `ARGV` costs what the library's does; the
/// server key is the store's for a key under the harness's prefix.
fn straight<A: RedisAlgorithm>(
    url: &str,
    algorithm: Result<A, sluicegate::ConfigError>,
    step: &str,
    limit: u64,
    phase: &str,
    calls: u64,
) {
    let (suffix, text) = match step {
        "log" => ("log", format!("3600000 6 {limit} 60000000 0 0;r 1 0")),
        "fixed" => ("fw", format!("3600000 1 60000000 {limit};r 1 0")),
        _ => {
            eprintln!("no straight-line step for {step}");
            std::process::exit(2)
        }
    };
    let function = format!("straight_{step}");
    let server_key = |key: &str| format!("instructions:{{k{key}}}:{suffix}");
    let client = redis::Client::open(url).expect("a Redis URL");
    let mut conn = client
        .get_connection()
        .unwrap_or_else(|e| panic!("{e} (is a redis-server at {url}?)"));
    let window = WINDOW.as_nanos() as u64;
    let spacing = window / limit;
    let paced = |i: u64| START + window + i * spacing;
    // One call of the straight function: its packed reply, 9 doubles.
    let mut call = |key: &str, now: u64| -> [f64; 9] {
        let reply: Vec<u8> = redis::cmd("FCALL")
            .arg(&function)
            .arg(1)
            .arg(server_key(key))
            .arg(&text)
            .arg("9999999999999999")
            .arg(now / 1_000)
            .query(&mut conn)
            .unwrap_or_else(|e| panic!("{function} at {now}: {e}"));
        assert_eq!(reply.len(), 72, "a grant's reply is 9 doubles");
        std::array::from_fn(|j| {
            f64::from_be_bytes(reply[8 * j..8 * j + 8].try_into().expect("8 bytes"))
        })
    };
    match phase {
        "fill" => run(url, algorithm, limit, "fill", limit),
        "load" => {
            let _: redis::Value = redis::cmd("FUNCTION")
                .arg("LOAD")
                .arg("REPLACE")
                .arg(STRAIGHT)
                .query(&mut conn)
                .expect("the straight functions load");
            println!("load: {function} loaded");
        }
        "pace" => {
            for i in 0..calls {
                let reply = call("hot", paced(i));
                assert_eq!(reply[0], 0.0, "call {i} granted");
            }
            println!("pace: {calls} of {calls} granted");
        }
        "check" => {
            let algorithm = algorithm.expect("a valid limit");
            let store = open::<A>(url, false);
            let library = |key: &str, now: u64| library_grant(&store, &algorithm, key, now);
            for i in 0..limit {
                for key in ["checka", "checkb"] {
                    library(key, START + i * spacing);
                }
            }
            for i in 0..calls {
                let (decision, receipt) = library("checka", paced(i));
                let straight = call("checkb", paced(i));
                assert!(
                    decision.is_allowed(),
                    "call {i}: the library grants: {decision:?}"
                );
                let expected = [
                    decision.reset_after_nanos() as f64,
                    decision.remaining() as f64,
                    decision.limit() as f64,
                    receipt.mark() as f64,
                    receipt.charge() as f64,
                ];
                let got = [
                    straight[2],
                    straight[3],
                    straight[4],
                    straight[5] * 4_294_967_296.0 + straight[6],
                    straight[7] * 4_294_967_296.0 + straight[8],
                ];
                assert_eq!(got, expected, "call {i}: reset, remaining, limit, receipt");
            }
            let next = paced(calls);
            let (a, b) = (library("checka", next), library("checkb", next));
            assert_eq!(a, b, "the library's next call on either key");
            println!("check: {calls} calls agree, and the library's next call on each");
        }
        "clock" => {
            let algorithm = algorithm.expect("a valid limit");
            let store = open::<A>(url, false);
            let mut admin = client.get_connection().expect("a second connection");
            clock(&mut admin, &store, &algorithm, limit, calls, &mut call);
        }
        _ => {
            eprintln!("unknown phase {phase} for straight-{step}");
            std::process::exit(2)
        }
    }
}

/// The `clock` phase: the server's own µs per call (`INFO commandstats`, on a
/// server not under callgrind) of the floor, the straight-line grant and the
/// library's grant, interleaved in chunks of `CHUNK` calls, each chunk its own
/// `CONFIG RESETSTAT` window, for `rounds` rounds; each row over the floor
/// measured beside it. Both keys hold the same full log: the library fills one and
/// the server copies it (`COPY`), so that a fill of 10^6 entries is made once.
fn clock<A: RedisAlgorithm>(
    conn: &mut redis::Connection,
    store: &RedisStore<String, A>,
    algorithm: &A,
    limit: u64,
    rounds: u64,
    straight: &mut dyn FnMut(&str, u64) -> [f64; 9],
) {
    // Calls per chunk, and chunks of each row per round.
    const CHUNK: u64 = 1_000;
    const CHUNKS: u64 = 4;
    let window = WINDOW.as_nanos() as u64;
    let spacing = window / limit;
    let library = |key: &str, now: u64| library_grant(store, algorithm, key, now).0.is_allowed();
    for i in 0..limit {
        library("clocka", START + i * spacing);
    }
    let keys = store.server_keys(algorithm, &"clocka".to_owned());
    let copy = keys[0].replace("{kclocka}", "{kclockb}");
    let copied: i64 = redis::cmd("COPY")
        .arg(&keys[0])
        .arg(&copy)
        .arg("REPLACE")
        .query(conn)
        .expect("COPY (Redis 6.2 or later)");
    assert_eq!(copied, 1, "the filled log is copied");
    redis_floor::load(conn).expect("the floor loads");
    let _: redis::Value = redis::cmd("FUNCTION")
        .arg("LOAD")
        .arg("REPLACE")
        .arg(STRAIGHT)
        .query(conn)
        .expect("the straight functions load");
    // µs of the FCALLs since the last reset, which must be exactly `calls`.
    let usec = |conn: &mut redis::Connection, calls: u64| -> f64 {
        let info: String = redis::cmd("INFO").arg("commandstats").query(conn).unwrap();
        let line = info
            .lines()
            .find_map(|l| l.strip_prefix("cmdstat_fcall:"))
            .expect("cmdstat_fcall");
        let field = |name: &str| -> u64 {
            line.split(',')
                .find_map(|f| f.strip_prefix(name))
                .and_then(|v| v.parse().ok())
                .unwrap_or_else(|| panic!("no {name} in {line}"))
        };
        assert_eq!(field("calls="), calls, "one FCALL per call: {line}");
        field("usec=") as f64 / calls as f64
    };
    let reset = |conn: &mut redis::Connection| {
        let () = redis::cmd("CONFIG").arg("RESETSTAT").query(conn).unwrap();
    };
    let mut i = 0;
    let mut ratios = (Vec::new(), Vec::new());
    for round in 0..rounds {
        let (mut floor, mut line, mut lib) = (0.0, 0.0, 0.0);
        for _ in 0..CHUNKS {
            reset(conn);
            for _ in 0..CHUNK {
                redis_floor::call(conn, "instructions:floor").expect("the floor runs");
            }
            floor += usec(conn, CHUNK);
            reset(conn);
            for j in i..i + CHUNK {
                let reply = straight("clockb", START + window + j * spacing);
                assert_eq!(reply[0], 0.0, "straight call {j} granted");
            }
            line += usec(conn, CHUNK);
            reset(conn);
            for j in i..i + CHUNK {
                assert!(
                    library("clocka", START + window + j * spacing),
                    "call {j} granted"
                );
            }
            lib += usec(conn, CHUNK);
            i += CHUNK;
        }
        let chunks = CHUNKS as f64;
        let (floor, line, lib) = (floor / chunks, line / chunks, lib / chunks);
        println!(
            "round {round}: floor {floor:.2} us, straight-line {line:.2} us ({:.2}x), \
             library {lib:.2} us ({:.2}x)",
            line / floor,
            lib / floor
        );
        ratios.0.push(line / floor);
        ratios.1.push(lib / floor);
    }
    let median = |v: &mut Vec<f64>| {
        v.sort_by(f64::total_cmp);
        v[v.len() / 2]
    };
    println!(
        "median of {rounds} rounds, limit {limit}: straight-line {:.2}x, library {:.2}x the floor",
        median(&mut ratios.0),
        median(&mut ratios.1)
    );
}

/// One reserve of 1 through the library on `key` at `now`: its decision and receipt.
fn library_grant<A: RedisAlgorithm>(
    store: &RedisStore<String, A>,
    algorithm: &A,
    key: &str,
    now: u64,
) -> (Decision, Receipt) {
    let step = Operation::Reserve {
        cost: 1,
        max_wait: 0,
    };
    let mut out = [(Decision::never(0, 0, 0), Receipt::NONE)];
    store
        .apply(algorithm, &[key.to_owned()], now, step, &mut out)
        .expect("the library answers");
    out[0].clone()
}
