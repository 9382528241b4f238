//! The Redis store's cost, against a `redis-server` this bench starts itself (on a
//! free port, no persistence). For each algorithm: the server's CPU per decision
//! (`INFO commandstats`, `usec_per_call` of `FCALL`), the commands clients sent
//! per decision (must be 1: the commands a script runs inside are part of it), decisions per second from one blocking
//! connection and from 64 concurrent async callers on one multiplexed connection.
//! Anchors in the same run: a plain `SET`; the smallest atomic Lua step that reads
//! `TIME`, `GET`s a key and `SET`s it with an expiry (the floor of any scripted
//! decision); and redis-cell's `CL.THROTTLE` when `REDIS_CELL_MODULE` names a built
//! module (the row says so and is skipped when it is unset). The sliding log and
//! the bucketed window are also run at limits from 10 to 100,000 on a hammered key.
//!
//! Every row is measured in each of [`ROUNDS`] rounds over the whole table (so a
//! burst of noise on a shared machine hits one round of each row, not one row);
//! the table shows each row's best round: the least server time, the most
//! decisions per second.
//!
//! `cargo bench --bench redis --features redis` (wall-clock figures on a loaded
//! machine are noisy; the server's µs per call are the comparable ones).

use sluicegate::algorithms::*;
use sluicegate::stores::redis::{RedisAlgorithm, RedisOptions, RedisStore};
use sluicegate::stores::{Operation, Store};
use std::process::Command;
use std::time::{Duration, Instant};

mod redis_floor;
mod redis_server;

use redis_server::Server;

const CALLS: usize = 20_000;
const ROUNDS: usize = 3;

/// The bench's server, with redis-cell loaded when `REDIS_CELL_MODULE` names it.
fn start_server() -> Server {
    let module: Vec<String> = std::env::var("REDIS_CELL_MODULE")
        .map(|module| vec!["--loadmodule".to_owned(), module])
        .unwrap_or_default();
    Server::start("redis-bench", &module)
}

/// The server's (µs per call of `command`, commands the clients sent) since the
/// last reset. The commands a script runs inside (`GET`, `SET`, `TIME`) are part of
/// its call, not commands of their own, so only the client-level ones count.
fn server_stats(admin: &mut redis::Connection, command: &str) -> (f64, u64) {
    let info: String = redis::cmd("INFO").arg("commandstats").query(admin).unwrap();
    let stat = |name: &str, field: &str| -> Option<String> {
        let line = info
            .lines()
            .find_map(|l| l.strip_prefix(&format!("cmdstat_{name}:")))?;
        line.split(',')
            .find_map(|f| f.strip_prefix(field))
            .map(str::to_owned)
    };
    let per_call = stat(command, "usec_per_call=")
        .and_then(|v| v.parse().ok())
        .unwrap_or(f64::NAN);
    // A script's own SET is counted under `set` too: only the SET anchor sends it.
    let client_level: &[&str] = if command == "set" {
        &["set"]
    } else {
        &[
            "evalsha",
            "eval",
            "script|load",
            "fcall",
            "function|load",
            "cl.throttle",
        ]
    };
    let sent = client_level
        .iter()
        .filter_map(|name| stat(name, "calls=")?.parse::<u64>().ok())
        .sum();
    (per_call, sent)
}

fn reset(admin: &mut redis::Connection) {
    let () = redis::cmd("CONFIG").arg("RESETSTAT").query(admin).unwrap();
}

fn admin(server: &Server) -> redis::Connection {
    redis::Client::open(server.url.as_str())
        .unwrap()
        .get_connection()
        .unwrap()
}

/// One row of the table: what one round measured.
#[derive(Clone)]
struct Row {
    name: String,
    /// Server µs per call (`usec_per_call`).
    usec: f64,
    /// Commands the clients sent per call.
    commands: f64,
    /// Calls per second from one blocking connection.
    blocking: f64,
    /// Calls per second from 64 async callers on one multiplexed connection.
    concurrent: Option<f64>,
    /// Calls per second `redis-benchmark -P 32` gets for the same call.
    pipelined: Option<f64>,
}

impl Row {
    /// The best of two rounds of this row.
    fn best(self, other: Row) -> Row {
        let most = |a: Option<f64>, b: Option<f64>| match (a, b) {
            (Some(a), Some(b)) => Some(a.max(b)),
            (a, b) => a.or(b),
        };
        Row {
            usec: self.usec.min(other.usec),
            blocking: self.blocking.max(other.blocking),
            concurrent: most(self.concurrent, other.concurrent),
            pipelined: most(self.pipelined, other.pipelined),
            ..self
        }
    }
}

/// Runs `call` CALLS times after a stats reset: the row of `command`.
fn anchor(
    admin: &mut redis::Connection,
    name: &str,
    command: &str,
    mut call: impl FnMut(&mut redis::Connection),
) -> Row {
    reset(admin);
    let started = Instant::now();
    for _ in 0..CALLS {
        call(admin);
    }
    let blocking = CALLS as f64 / started.elapsed().as_secs_f64();
    let (usec, commands) = server_stats(admin, command);
    Row {
        name: name.to_owned(),
        usec,
        commands: commands as f64 / CALLS as f64,
        blocking,
        concurrent: None,
        pipelined: None,
    }
}

/// The anchors: a plain SET, the floor as a script and as a function, and
/// redis-cell when its module is loaded.
fn anchors(server: &Server) -> Vec<Row> {
    let mut admin = admin(server);
    let mut rows = vec![anchor(&mut admin, "anchor: SET", "set", |conn| {
        let () = redis::cmd("SET")
            .arg("anchor")
            .arg("1")
            .query(conn)
            .unwrap();
    })];
    // The floor, as a script (EVALSHA) and as a function (FCALL, what the store
    // calls): the same three commands either way.
    let script = redis::Script::new(redis_floor::BODY);
    let _: i64 = script.key("floor").invoke(&mut admin).unwrap();
    rows.push(anchor(
        &mut admin,
        "anchor: TIME+GET+SET script (EVALSHA)",
        "evalsha",
        |conn| {
            let _: i64 = script.key("floor").invoke(conn).unwrap();
        },
    ));
    redis_floor::load(&mut admin).unwrap();
    rows.push(anchor(&mut admin, FLOOR, "fcall", |conn| {
        redis_floor::call(conn, "floor").unwrap();
    }));
    if std::env::var("REDIS_CELL_MODULE").is_ok() {
        rows.push(anchor(
            &mut admin,
            "anchor: redis-cell CL.THROTTLE",
            "cl.throttle",
            |conn| {
                let _: Vec<i64> = redis::cmd("CL.THROTTLE")
                    .arg("cell")
                    .arg(100)
                    .arg(100)
                    .arg(60)
                    .query(conn)
                    .unwrap();
            },
        ));
    }
    rows
}

const FLOOR: &str = "anchor: TIME+GET+SET function (the floor)";

/// One algorithm's row: reserves of 1 on one hot key at the server's time, after
/// `prefill` of them sent through redis-benchmark (to fill a log or a window of a
/// large limit first: "hammered" means full).
fn bench<A: RedisAlgorithm + Clone>(
    server: &Server,
    name: &str,
    algorithm: &A,
    prefill: u64,
) -> Row {
    let mut admin = admin(server);
    let options = RedisOptions::default()
        .prefix(format!("bench-{name}:"))
        .unwrap();
    let store: RedisStore<&str, A> = RedisStore::open_with(&server.url, options).unwrap();
    let step = Operation::Reserve {
        cost: 1,
        max_wait: 0,
    };
    store
        .apply_key::<(Decision, Receipt)>(algorithm, &"hot", 0, step)
        .unwrap(); // loads the library
    if prefill > 0 {
        // At least CALLS: redis-benchmark prints no rate for a handful of calls.
        pipelined_rate(
            server,
            &mut admin,
            &store,
            algorithm,
            prefill.max(CALLS as u64),
        );
    }
    reset(&mut admin);
    let started = Instant::now();
    for _ in 0..CALLS {
        store
            .apply_key::<(Decision, Receipt)>(algorithm, &"hot", 0, step)
            .unwrap();
    }
    let blocking = CALLS as f64 / started.elapsed().as_secs_f64();
    let (usec, commands) = server_stats(&mut admin, "fcall");
    // 64 concurrent async callers on the store's one multiplexed connection.
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let keys: Vec<&str> = vec!["hot"];
    let started = Instant::now();
    runtime.block_on(async {
        let tasks: Vec<_> = (0..64)
            .map(|_| {
                let store = store.clone();
                let algorithm = algorithm.clone();
                let keys = keys.clone();
                tokio::spawn(async move {
                    for _ in 0..CALLS / 64 {
                        store.apply_async(&algorithm, &keys, 0, step).await.unwrap();
                    }
                })
            })
            .collect();
        for task in tasks {
            task.await.unwrap();
        }
    });
    let concurrent = (CALLS / 64 * 64) as f64 / started.elapsed().as_secs_f64();
    Row {
        name: name.to_owned(),
        usec,
        commands: commands as f64 / CALLS as f64,
        blocking,
        concurrent: Some(concurrent),
        pipelined: Some(pipelined_rate(
            server,
            &mut admin,
            &store,
            algorithm,
            CALLS as u64,
        )),
    }
}

/// Sends `calls` times, through `redis-benchmark -P 32` (one connection, 32 calls
/// in flight), the very call the store sends for one decision on the hot key:
/// answers the calls per second it got.
fn pipelined_rate<A: RedisAlgorithm>(
    server: &Server,
    admin: &mut redis::Connection,
    store: &RedisStore<&str, A>,
    algorithm: &A,
    calls: u64,
) -> f64 {
    // A reserve of 1 at the server's time, no wait, as `bench` sends it.
    let step = Operation::Reserve {
        cost: 1,
        max_wait: 0,
    };
    let (keys, args) = store.step_call(algorithm, &"hot", 0, step).unwrap();
    let function = redis_server::function_name(admin);
    // The same call once through redis-rs: a well-formed decision, not an error
    // that redis-benchmark would count as a request.
    let reply: redis::Value = redis::cmd("FCALL")
        .arg(&function)
        .arg(keys.len())
        .arg(&keys)
        .arg(&args)
        .query(admin)
        .unwrap();
    let reply = RedisStore::<&str, A>::step_reply(reply).unwrap();
    assert!(!reply.is_empty(), "one decision");
    let output = Command::new("redis-benchmark")
        .args(["-p", &server.port.to_string(), "-n", &calls.to_string()])
        .args(["-P", "32", "-c", "1", "--csv", "FCALL"])
        .arg(function)
        .arg(keys.len().to_string())
        .args(&keys)
        .args(args)
        .output()
        .expect("redis-benchmark (redis-tools) must be installed");
    let csv = String::from_utf8_lossy(&output.stdout);
    // The last line: "test","rps",...
    csv.lines()
        .last()
        .and_then(|line| line.split("\",\"").nth(1))
        .and_then(|rps| rps.trim_matches('"').parse().ok())
        .unwrap_or_else(|| panic!("unexpected redis-benchmark output: {csv}"))
}

/// Every row of the table, in order, measured once.
fn round(server: &Server) -> Vec<Row> {
    let s = Duration::from_secs;
    let mut rows = anchors(server);
    rows.push(bench(
        server,
        "fixed window 100/min",
        &FixedWindow::new(100, s(60)).unwrap(),
        0,
    ));
    rows.push(bench(
        server,
        "leaky bucket meter 100/min",
        &LeakyBucket::meter(100, 100, s(60)).unwrap(),
        0,
    ));
    rows.push(bench(
        server,
        "leaky bucket meter 3/s (fractional)",
        &LeakyBucket::meter(10, 3, s(1)).unwrap(),
        0,
    ));
    rows.push(bench(
        server,
        "leaky bucket queue 3/s",
        &LeakyBucket::queue(10, 3, s(1)).unwrap(),
        0,
    ));
    rows.push(bench(
        server,
        "sliding window counter 100/min",
        &SlidingWindowCounter::new(100, s(60)).unwrap(),
        0,
    ));
    rows.push(bench(
        server,
        "smooth bursty 10/s",
        &SmoothBursty::new(10.0).unwrap(),
        0,
    ));
    rows.push(bench(
        server,
        "smooth warming up 10/s",
        &SmoothWarmingUp::new(10.0, s(2)).unwrap(),
        0,
    ));
    for limit in [10, 1_000, 100_000] {
        rows.push(bench(
            server,
            &format!("buckets {limit}/min in 1 s"),
            &SlidingWindowBuckets::dropping(limit, s(60), s(1)).unwrap(),
            limit,
        ));
        rows.push(bench(
            server,
            &format!("sliding log {limit}/min"),
            &SlidingLog::new(limit, s(60)).unwrap(),
            limit,
        ));
    }
    rows.push(bench(
        server,
        "set: fixed window + sliding log",
        &AllOf::new((
            FixedWindow::new(100, s(60)).unwrap(),
            SlidingLog::new(50, s(60)).unwrap(),
        )),
        0,
    ));
    rows
}

fn main() {
    // `cargo bench` passes `--bench`; nothing to parse.
    let server = start_server();
    let mut table = round(&server);
    for _ in 1..ROUNDS {
        table = table
            .into_iter()
            .zip(round(&server))
            .map(|(a, b)| a.best(b))
            .collect();
    }
    let floor = table
        .iter()
        .find(|row| row.name == FLOOR)
        .map_or(f64::NAN, |row| row.usec);
    println!(
        "best of {ROUNDS} rounds, {CALLS} calls each\n{:44} {:>8} {:>6} {:>6} {:>10} {:>10} {:>10} {:>7}",
        "", "µs/call", "floor", "cmds", "blocking/s", "64 async/s", "-P 32/s", "async/P"
    );
    let rate = |r: Option<f64>| r.map_or("-".to_owned(), |r| format!("{r:.0}"));
    for row in &table {
        let ratio = match (row.concurrent, row.pipelined) {
            (Some(c), Some(p)) => format!("{:.2}", c / p),
            _ => "-".to_owned(),
        };
        println!(
            "{:44} {:>8.2} {:>6.2} {:>6.2} {:>10.0} {:>10} {:>10} {:>7}",
            row.name,
            row.usec,
            row.usec / floor,
            row.commands,
            row.blocking,
            rate(row.concurrent),
            rate(row.pipelined),
            ratio
        );
    }
    if std::env::var("REDIS_CELL_MODULE").is_err() {
        println!(
            "(anchor redis-cell CL.THROTTLE skipped: set REDIS_CELL_MODULE to a built module)"
        );
    }
}
