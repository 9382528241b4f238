//! Per-client limiting for an HTTP service: each request is charged to its client's
//! IP *and*, when signed in, to its user id, all-or-nothing, with writes
//! costing more than reads, and answered with the status and headers a
//! server sends: `429 Too Many Requests`, `Retry-After`, `X-Rate-Limit-Limit`,
//! `X-Rate-Limit-Remaining`.
//!
//! The "server" is the standard library only: a raw request is parsed, decided,
//! and a raw response is written. Time is a `ManualClock`, so the run is instant.
//!
//! `cargo run --example http_keys`

use sluicegate::algorithms::SmoothBursty;
use sluicegate::clock::ManualClock;
use sluicegate::stores::MemoryStore;
use sluicegate::{Decision, Error, KeyedRateLimiter, Verdict};
use std::fmt;
use std::net::IpAddr;
use std::time::Duration;

/// Whom a request is charged to. `Display` renders it for a remote store (Redis):
/// the parts are tagged so that no IP can render like a user id.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
enum Client {
    Ip(IpAddr),
    User(String),
}

impl fmt::Display for Client {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Client::Ip(ip) => write!(f, "ip:{ip}"),
            Client::User(user) => write!(f, "user:{user}"),
        }
    }
}

/// The parts of a request the limiter looks at.
struct Request {
    method: String,
    path: String,
    ip: IpAddr,
    user: Option<String>,
}

/// What the server sends back.
struct Response {
    status: u16,
    headers: Vec<(&'static str, String)>,
}

type Limiter =
    KeyedRateLimiter<Client, SmoothBursty, MemoryStore<Client, SmoothBursty>, ManualClock>;

/// Parses the request line and an `X-User` header (standing in for a session).
fn parse(raw: &str, ip: IpAddr) -> Option<Request> {
    let mut lines = raw.lines();
    let mut request_line = lines.next()?.split_whitespace();
    let method = request_line.next()?.to_string();
    let path = request_line.next()?.to_string();
    let user = lines
        .filter_map(|line| line.split_once(':'))
        .find(|(name, _)| name.eq_ignore_ascii_case("x-user"))
        .map(|(_, value)| value.trim().to_string());
    Some(Request {
        method,
        path,
        ip,
        user,
    })
}

/// Writes cost 2, reads 1 (`POST /user` costs twice `GET /user`).
fn cost(request: &Request) -> u64 {
    match request.method.as_str() {
        "GET" | "HEAD" | "OPTIONS" => 1,
        _ => 2,
    }
}

/// The decision, and the response a server would send for it.
fn decide(limiter: &Limiter, request: &Request) -> (Result<Decision, Error>, Response) {
    let mut keys = vec![Client::Ip(request.ip)];
    if let Some(user) = &request.user {
        keys.push(Client::User(user.clone()));
    }
    let decision = limiter.check_all(&keys, cost(request));
    let response = match &decision {
        Ok(d) if d.is_allowed() => Response {
            status: 200,
            headers: rate_headers(d),
        },
        Ok(d) => {
            let mut headers = rate_headers(d);
            if d.verdict() == Verdict::Denied {
                headers.push(("Retry-After", whole_seconds_up(d.retry_after()).to_string()));
            }
            Response {
                status: 429,
                headers,
            }
        }
        // The store is full of clients still within their limits: fail closed.
        Err(_) => Response {
            status: 503,
            headers: vec![("Retry-After", "1".to_string())],
        },
    };
    (decision, response)
}

fn rate_headers(d: &Decision) -> Vec<(&'static str, String)> {
    vec![
        ("X-Rate-Limit-Limit", d.limit().to_string()),
        ("X-Rate-Limit-Remaining", d.remaining().to_string()),
    ]
}

/// `Retry-After` takes whole seconds; rounding down would invite an early retry.
fn whole_seconds_up(wait: Duration) -> u64 {
    wait.as_secs() + u64::from(wait.subsec_nanos() > 0)
}

fn render(response: &Response) -> String {
    let reason = match response.status {
        200 => "OK",
        429 => "Too Many Requests",
        _ => "Service Unavailable",
    };
    let mut out = format!("HTTP/1.1 {} {reason}\r\n", response.status);
    for (name, value) in &response.headers {
        out.push_str(&format!("{name}: {value}\r\n"));
    }
    out.push_str("\r\n");
    out
}

fn main() {
    let clock = ManualClock::new();
    // The server has been up a while: a new client starts with its full burst.
    clock.advance(Duration::from_secs(60));
    // 2 permits per second per client, saving up to 3 s (6 permits) of burst.
    let algorithm = SmoothBursty::new(2.0)
        .and_then(|b| b.with_max_burst(Duration::from_secs(3)))
        .expect("a valid limit");
    let store = MemoryStore::new()
        .with_max_keys(1_000_000)
        .expect("a valid cap");
    let limiter: Limiter = KeyedRateLimiter::with_store(algorithm, store, clock.clone());

    let alice_laptop: IpAddr = "203.0.113.7".parse().expect("an IP");
    let alice_phone: IpAddr = "198.51.100.23".parse().expect("an IP");
    let script: [(u64, &str, IpAddr); 8] = [
        (
            0,
            "GET /api/widgets HTTP/1.1\r\nX-User: alice\r\n",
            alice_laptop,
        ),
        (
            0,
            "POST /api/widgets HTTP/1.1\r\nX-User: alice\r\n",
            alice_laptop,
        ),
        (
            0,
            "POST /api/widgets HTTP/1.1\r\nX-User: alice\r\n",
            alice_laptop,
        ),
        // One permit left and a cost of 2: it goes (pay later), the next one waits.
        (
            0,
            "POST /api/widgets HTTP/1.1\r\nX-User: alice\r\n",
            alice_laptop,
        ),
        // Alice's user id is spent, from any IP: 429...
        (
            0,
            "GET /api/widgets HTTP/1.1\r\nX-User: alice\r\n",
            alice_phone,
        ),
        // ...and that refusal did not charge her phone's IP: signed out, it has all 6.
        (0, "GET /api/widgets HTTP/1.1\r\n", alice_phone),
        // Half a second later her debt is paid: one more, then 429 again.
        (
            500,
            "GET /api/widgets HTTP/1.1\r\nX-User: alice\r\n",
            alice_phone,
        ),
        (
            0,
            "GET /api/widgets HTTP/1.1\r\nX-User: alice\r\n",
            alice_phone,
        ),
    ];
    for (after_ms, raw, ip) in script {
        clock.advance(Duration::from_millis(after_ms));
        let Some(request) = parse(raw, ip) else {
            continue;
        };
        let (_, response) = decide(&limiter, &request);
        let who = request.user.as_deref().unwrap_or("-");
        println!(
            "{} {} from {} as {who}:\n{}",
            request.method,
            request.path,
            request.ip,
            render(&response)
        );
    }
    println!("clients held in memory: {}", limiter.live_keys());
}
