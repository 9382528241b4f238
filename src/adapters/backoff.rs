//! Back-off that honours the server: `Retry-After` and `RateLimit` fields hold a key
//! back until the server says more quota is there.

use super::fields;
use super::http_date;
use crate::algorithms::Pace;
use crate::clock::{duration_to_nanos, nanos_to_duration, Clock, Nanos, NANOS_PER_SECOND};
use http::header::{HeaderMap, AGE, DATE, RETRY_AFTER};
use http::StatusCode;
use parking_lot::Mutex;
use std::collections::HashMap;
use std::hash::Hash;
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// Holds keys back after a server asked a client to slow down: the client-side half
/// of [`ServerLayer`](super::server::ServerLayer)'s headers, usable with any client.
///
/// [`observe`](HoldBack::observe) reads a response's status and headers and, when
/// the server asks for a pause, holds the key back until then;
/// [`remaining`](HoldBack::remaining) and [`wait`](HoldBack::wait) tell a caller how
/// long it still has to wait. The [`ClientLayer`](super::client::ClientLayer) does
/// both for every request when given one
/// ([`honour_server`](super::client::ClientLayer::honour_server)).
///
/// What a response asks for:
///
/// | response | pause |
/// |---|---|
/// | `429` or `503` with `Retry-After` | its delay-seconds, or its HTTP-date less the response's `Date` (the local wall clock if there is none) |
/// | `429` or `503` with `RateLimit` and no `Retry-After` | the longest `t` of the items with `r=0` (of all items if none has `r=0`) |
/// | `429` with neither | the [`fallback`](HoldBack::with_fallback) (1 s unless set) |
/// | any other status with `RateLimit` | the longest `t` of the items with `r=0`, if any |
/// | a response with `Age` above 0 (served from a cache) | none: its fields are stale |
/// | anything else | none |
///
/// `Retry-After` takes precedence over `RateLimit`, as the draft requires. Every
/// pause is capped ([`with_cap`](HoldBack::with_cap), 60 s unless set) so that a
/// broken or hostile server (`Retry-After: 1000000`) cannot stall the client; the
/// draft asks clients for such thresholds. A pause only ever slows the client down:
/// a key already held back longer keeps its longer hold, and a hold never lets a
/// request skip the client's own limiter. Malformed fields are ignored.
///
/// **After a hold, the key resumes at its limiter's steady rate, not with a burst.**
/// A server that says "wait" has said nothing about the credit the client's own
/// limiter stored meanwhile (a bucket's saved burst, a window's unused quota), so
/// the [`ClientLayer`](super::client::ClientLayer) does not spend it at once: from
/// the end of the hold, the key's requests are given turns one
/// [`Pace::interval`] apart per permit (the limiter's [`pace`](crate::algorithms::Algorithm::pace):
/// `1/rate` for the token and leaky buckets, `window/limit` for the windows and the
/// log, the slowest member's for a set), each then still taking its permits from the
/// limiter. The pace ends once a whole [`Pace::refill`] passes with no request: by
/// then the limiter would have stored its full burst again even had the hold
/// emptied it. So the stored credit is spent by no request at all while the key
/// keeps to the steady rate; a limiter whose algorithm has no pace (a user's own,
/// by default) is not paced. A request dropped before its turn comes gives the turn
/// back, to the pace or to the next request that fits in it.
///
/// Clones share the holds. A key is forgotten once its hold and the pace after it
/// are over; memory stays as large as the set of keys held or paced. Time is the
/// given clock's (virtual under a [`ManualClock`](crate::ManualClock)).
///
/// ```
/// use http::{HeaderMap, StatusCode};
/// use sluicegate::adapters::HoldBack;
/// use sluicegate::clock::ManualClock;
/// use std::time::Duration;
///
/// let hold = HoldBack::new(ManualClock::new());
/// let mut headers = HeaderMap::new();
/// headers.insert("retry-after", "3".parse().unwrap());
/// assert_eq!(hold.observe("api.test", StatusCode::TOO_MANY_REQUESTS, &headers), Some(Duration::from_secs(3)));
/// assert_eq!(hold.remaining(&"api.test"), Duration::from_secs(3));
/// assert_eq!(hold.remaining(&"other.test"), Duration::ZERO);
/// ```
pub struct HoldBack<K, C: Clock> {
    shared: Arc<Shared<K>>,
    clock: C,
    cap: Nanos,
    fallback: Nanos,
}

struct Shared<K> {
    /// Per key: its hold, and the steady pace that follows it.
    holds: Mutex<HashMap<K, Hold>>,
}

/// One key's hold and the pacing after it.
#[derive(Clone, Debug)]
struct Hold {
    /// The clock time until which the key is held back.
    until: Nanos,
    /// After the hold: the earliest time the key's next permit may be asked for.
    resume: Nanos,
    /// When the entry may be forgotten: the limiter would have stored a full burst
    /// again by then whatever the hold did.
    forget: Nanos,
    /// Turns given back before `resume` (from, end): booked by requests dropped
    /// before their turn came while a later turn stayed booked. The next request
    /// that fits in one takes it.
    freed: Vec<(Nanos, Nanos)>,
}

/// What the client layer does with a request of a key, as the key's hold says.
#[derive(Debug)]
pub(crate) enum Gate {
    /// Ask the limiter now.
    Open,
    /// Held back by the server for this long: wait, then ask the gate again.
    Held(Nanos),
    /// Paced after a hold: this request's turn is `wait` away and booked (its
    /// ticket gives it back if dropped before it comes); wait, then ask the
    /// limiter (unless a new hold began meanwhile).
    Paced { wait: Nanos, turn: Turn },
    /// Its turn at the pace is this far away, more than the caller would wait:
    /// nothing was booked.
    TooLate(Nanos),
}

impl<K, C: Clock> Clone for HoldBack<K, C> {
    fn clone(&self) -> Self {
        HoldBack {
            shared: self.shared.clone(),
            clock: self.clock.clone(),
            cap: self.cap,
            fallback: self.fallback,
        }
    }
}

impl<K, C: Clock> std::fmt::Debug for HoldBack<K, C> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HoldBack")
            .field("cap", &nanos_to_duration(self.cap))
            .field("fallback", &nanos_to_duration(self.fallback))
            .field("held_keys", &self.shared.holds.lock().len())
            .finish()
    }
}

/// What a request that has booked a turn after a hold holds until the turn comes
/// (see [`HoldBack::gate`]).
pub(crate) struct Turn(Option<Box<dyn FnOnce() + Send>>);

impl Turn {
    /// The turn came: the request used it, and dropping the ticket gives nothing back.
    pub(crate) fn came(&mut self) {
        self.0 = None;
    }
}

impl Drop for Turn {
    fn drop(&mut self) {
        if let Some(give_back) = self.0.take() {
            give_back();
        }
    }
}

impl std::fmt::Debug for Turn {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_tuple("Turn").field(&self.0.is_some()).finish()
    }
}

impl<K: Hash + Eq> Shared<K> {
    /// Takes back `key`'s turn from `turn` to `end`, whose request was dropped
    /// before it came. Only the part after the key's hold counts (a hold that
    /// began since makes the rest moot). If it is the last turn booked, the pace
    /// resumes from it, and from any turn given back just before it; otherwise
    /// it is kept for the next request that fits in it.
    fn give_back(&self, key: &K, turn: Nanos, end: Nanos) {
        let mut holds = self.holds.lock();
        let Some(hold) = holds.get_mut(key) else {
            return;
        };
        let from = turn.max(hold.until);
        if from >= end {
            return;
        }
        if hold.resume == end {
            hold.resume = from;
            while let Some(index) = hold.freed.iter().position(|&(_, e)| e == hold.resume) {
                hold.resume = hold.freed.swap_remove(index).0;
            }
        } else if end < hold.resume {
            hold.freed.push((from, end));
        }
    }
}

/// Above this many remembered keys, an observation first forgets those whose hold
/// has passed, so the map stays as large as the set of keys currently held.
const PRUNE_ABOVE: usize = 1024;

impl<K: Hash + Eq, C: Clock> HoldBack<K, C> {
    /// Holds on `clock` (use the limiter's), capped at 60 s, with a 1 s fallback
    /// for a bare `429`.
    ///
    /// ```
    /// use sluicegate::adapters::HoldBack;
    /// use sluicegate::clock::ManualClock;
    /// let hold: HoldBack<String, _> = HoldBack::new(ManualClock::new());
    /// assert_eq!(hold.remaining(&"x".to_owned()), std::time::Duration::ZERO);
    /// ```
    pub fn new(clock: C) -> Self {
        HoldBack {
            shared: Arc::new(Shared {
                holds: Mutex::new(HashMap::new()),
            }),
            clock,
            cap: 60 * NANOS_PER_SECOND,
            fallback: NANOS_PER_SECOND,
        }
    }

    /// The longest pause any one response can impose (60 s unless set).
    /// `Duration::ZERO` disables holding.
    ///
    /// ```
    /// use http::{HeaderMap, StatusCode};
    /// use sluicegate::adapters::HoldBack;
    /// use sluicegate::clock::ManualClock;
    /// use std::time::Duration;
    /// let hold = HoldBack::new(ManualClock::new()).with_cap(Duration::from_secs(10));
    /// let mut headers = HeaderMap::new();
    /// headers.insert("retry-after", "1000000".parse().unwrap());
    /// assert_eq!(hold.observe((), StatusCode::SERVICE_UNAVAILABLE, &headers), Some(Duration::from_secs(10)));
    /// ```
    pub fn with_cap(mut self, cap: Duration) -> Self {
        self.cap = duration_to_nanos(cap);
        self
    }

    /// The pause after a `429` that gives no hint (no `Retry-After`, no `RateLimit`);
    /// 1 s unless set. `Duration::ZERO`: no pause.
    ///
    /// ```
    /// use http::{HeaderMap, StatusCode};
    /// use sluicegate::adapters::HoldBack;
    /// use sluicegate::clock::ManualClock;
    /// use std::time::Duration;
    /// let hold = HoldBack::new(ManualClock::new()).with_fallback(Duration::from_millis(250));
    /// let bare = HeaderMap::new();
    /// assert_eq!(hold.observe((), StatusCode::TOO_MANY_REQUESTS, &bare), Some(Duration::from_millis(250)));
    /// assert_eq!(hold.observe((), StatusCode::SERVICE_UNAVAILABLE, &bare), None); // 503 alone is not a rate limit
    /// ```
    pub fn with_fallback(mut self, fallback: Duration) -> Self {
        self.fallback = duration_to_nanos(fallback);
        self
    }

    /// The clock holds are measured on.
    ///
    /// ```
    /// use sluicegate::adapters::HoldBack;
    /// use sluicegate::clock::{Clock, ManualClock};
    /// let hold: HoldBack<(), _> = HoldBack::new(ManualClock::new());
    /// assert_eq!(hold.clock().now(), 0);
    /// ```
    pub fn clock(&self) -> &C {
        &self.clock
    }

    /// Reads a response for `key` and holds the key back as the table in the type's
    /// docs says; answers the pause this response asked for (after the cap), or
    /// `None` if it asked for none. An HTTP-date in `Retry-After` is measured from
    /// the response's `Date` field (so the two clocks' skew does not matter), or
    /// from the local wall clock when there is no `Date`.
    ///
    /// ```
    /// use http::{HeaderMap, StatusCode};
    /// use sluicegate::adapters::HoldBack;
    /// use sluicegate::clock::ManualClock;
    /// use std::time::Duration;
    /// let hold = HoldBack::new(ManualClock::new());
    /// let mut headers = HeaderMap::new();
    /// headers.insert("date", "Sun, 06 Nov 1994 08:49:37 GMT".parse().unwrap());
    /// headers.insert("retry-after", "Sun, 06 Nov 1994 08:50:07 GMT".parse().unwrap());
    /// assert_eq!(hold.observe(1, StatusCode::TOO_MANY_REQUESTS, &headers), Some(Duration::from_secs(30)));
    /// // An OK response whose RateLimit says the quota is spent for 5 s:
    /// let mut ok = HeaderMap::new();
    /// ok.insert("ratelimit", r#""default";r=0;t=5"#.parse().unwrap());
    /// assert_eq!(hold.observe(2, StatusCode::OK, &ok), Some(Duration::from_secs(5)));
    /// ok.insert("ratelimit", r#""default";r=4;t=5"#.parse().unwrap());
    /// assert_eq!(hold.observe(3, StatusCode::OK, &ok), None);
    /// ```
    pub fn observe(&self, key: K, status: StatusCode, headers: &HeaderMap) -> Option<Duration> {
        self.observe_at(key, status, headers, SystemTime::now())
    }

    /// [`observe`](HoldBack::observe) with the local wall-clock time given, for a
    /// response without a `Date` field (tests, replays).
    ///
    /// ```
    /// use http::{HeaderMap, StatusCode};
    /// use sluicegate::adapters::HoldBack;
    /// use sluicegate::clock::ManualClock;
    /// use std::time::{Duration, UNIX_EPOCH};
    /// let hold = HoldBack::new(ManualClock::new());
    /// let mut headers = HeaderMap::new();
    /// headers.insert("retry-after", "Thu, 01 Jan 1970 00:00:10 GMT".parse().unwrap());
    /// let wall = UNIX_EPOCH + Duration::from_millis(7_500);
    /// assert_eq!(hold.observe_at((), StatusCode::TOO_MANY_REQUESTS, &headers, wall), Some(Duration::from_millis(2_500)));
    /// ```
    pub fn observe_at(
        &self,
        key: K,
        status: StatusCode,
        headers: &HeaderMap,
        wall_now: SystemTime,
    ) -> Option<Duration> {
        self.observe_paced(key, status, headers, wall_now, || None)
    }

    /// [`observe_at`](HoldBack::observe_at) for a client that paces the key after
    /// the hold at `pace` (asked only when the response asks for a pause): the key
    /// is then remembered until the pace is over, a whole refill after the hold.
    pub(crate) fn observe_paced(
        &self,
        key: K,
        status: StatusCode,
        headers: &HeaderMap,
        wall_now: SystemTime,
        pace: impl FnOnce() -> Option<Pace>,
    ) -> Option<Duration> {
        let pause = self.pause(status, headers, wall_now)?.min(self.cap);
        // Looked at only when the fields ask for a pause: most responses ask none.
        if pause == 0 || from_cache(headers) {
            return None;
        }
        let refill = pace().map_or(0, |pace| pace.refill_nanos());
        let now = self.clock.now();
        let until = now.saturating_add(pause);
        let mut holds = self.shared.holds.lock();
        if holds.len() > PRUNE_ABOVE {
            holds.retain(|_, hold| hold.forget > now);
        }
        let hold = holds.entry(key).or_insert(Hold {
            until: 0,
            resume: 0,
            forget: 0,
            freed: Vec::new(),
        });
        // Only ever slower: a longer hold already in place stays, and the pace
        // after it starts no earlier than its end. Turns given back before a new
        // hold are not offered after it.
        if until > hold.until {
            hold.freed.clear();
        }
        hold.until = hold.until.max(until);
        hold.resume = hold.resume.max(hold.until);
        hold.forget = hold.forget.max(hold.resume.saturating_add(refill));
        Some(nanos_to_duration(pause))
    }

    /// How long `key` is still held back (zero if it is not).
    ///
    /// ```
    /// use http::{HeaderMap, StatusCode};
    /// use sluicegate::adapters::HoldBack;
    /// use sluicegate::clock::ManualClock;
    /// use std::time::Duration;
    /// let clock = ManualClock::new();
    /// let hold = HoldBack::new(clock.clone());
    /// let mut headers = HeaderMap::new();
    /// headers.insert("retry-after", "2".parse().unwrap());
    /// hold.observe("k", StatusCode::TOO_MANY_REQUESTS, &headers);
    /// clock.advance(Duration::from_millis(500));
    /// assert_eq!(hold.remaining(&"k"), Duration::from_millis(1_500));
    /// ```
    pub fn remaining(&self, key: &K) -> Duration {
        nanos_to_duration(self.remaining_nanos(key, self.clock.now()))
    }

    pub(crate) fn remaining_nanos(&self, key: &K, now: Nanos) -> Nanos {
        let holds = self.shared.holds.lock();
        holds
            .get(key)
            .map_or(0, |hold| hold.until.saturating_sub(now))
    }

    /// The gate a request of `cost` permits for `key` passes at `now`, before it
    /// asks the limiter, willing to wait at most `left` more: held back, its turn at
    /// `pace` after a hold (booked here, `cost` intervals long: the earliest turn a
    /// dropped request gave back that holds it, else the next at the pace), or
    /// open. The pace is asked for only after a hold; a key whose pace has run a
    /// whole refill with no request is forgotten, as is one whose limiter has no
    /// pace.
    pub(crate) fn gate(
        &self,
        key: &K,
        now: Nanos,
        cost: u64,
        left: Nanos,
        pace: impl FnOnce() -> Option<Pace>,
    ) -> Gate
    where
        K: Clone + Send + 'static,
    {
        let mut holds = self.shared.holds.lock();
        let Some(hold) = holds.get_mut(key) else {
            return Gate::Open;
        };
        if hold.until > now {
            return Gate::Held(hold.until - now);
        }
        let pace = match pace() {
            Some(pace) if now < hold.resume.saturating_add(pace.refill_nanos()) => pace,
            // No pace, or a whole refill without a request: the limiter alone.
            _ => {
                holds.remove(key);
                return Gate::Open;
            }
        };
        let need = pace.interval_nanos().saturating_mul(cost);
        // A turn given back comes first: the earliest that holds this request's.
        hold.freed.retain(|&(_, end)| end > now);
        let fits = |&(from, end): &(Nanos, Nanos)| from.max(now).saturating_add(need) <= end;
        let freed = (hold.freed.iter().enumerate())
            .filter(|(_, turn)| fits(turn))
            .min_by_key(|(_, turn)| turn.0)
            .map(|(index, _)| index);
        if let Some(index) = freed {
            let (from, end) = hold.freed[index];
            let turn = from.max(now);
            if turn - now <= left {
                let taken = turn + need;
                if taken == end {
                    hold.freed.swap_remove(index);
                } else {
                    hold.freed[index].0 = taken;
                }
                return self.booked(key, now, turn, taken);
            }
        }
        let turn = hold.resume.max(now);
        let wait = turn - now;
        if wait > left {
            return Gate::TooLate(wait);
        }
        hold.resume = turn.saturating_add(need);
        hold.forget = hold.resume.saturating_add(pace.refill_nanos());
        let end = hold.resume;
        drop(holds);
        self.booked(key, now, turn, end)
    }

    /// The gate of a turn booked for `key` from `turn` to `end`, asked at `now`:
    /// open if it is now, else paced, with a ticket that gives the turn back if
    /// dropped before [`Turn::came`]. The pace then resumes from it if no later
    /// turn was booked (and from any turn given back just before it); otherwise
    /// the next request that fits in it takes it.
    fn booked(&self, key: &K, now: Nanos, turn: Nanos, end: Nanos) -> Gate
    where
        K: Clone + Send + 'static,
    {
        if turn == now {
            return Gate::Open;
        }
        let (shared, key) = (Arc::clone(&self.shared), key.clone());
        let ticket = Turn(Some(Box::new(move || shared.give_back(&key, turn, end))));
        Gate::Paced {
            wait: turn - now,
            turn: ticket,
        }
    }

    /// Waits, on the clock, until `key` is no longer held back (a hold lengthened while
    /// it waits is waited out too); resolves to the time waited. For clients that are
    /// not tower services: call it before each request. It waits out the hold only; the
    /// steady pace after it is the client layer's, which knows the limiter.
    ///
    /// ```
    /// use http::{HeaderMap, StatusCode};
    /// use sluicegate::adapters::HoldBack;
    /// use sluicegate::clock::{Clock, ManualClock};
    /// use std::time::Duration;
    /// let clock = ManualClock::new();
    /// let hold = HoldBack::new(clock.clone());
    /// let mut headers = HeaderMap::new();
    /// headers.insert("retry-after", "4".parse().unwrap());
    /// hold.observe("k", StatusCode::TOO_MANY_REQUESTS, &headers);
    /// futures::executor::block_on(hold.wait(&"k"));
    /// assert_eq!(clock.now(), 4_000_000_000);
    /// ```
    pub async fn wait(&self, key: &K) -> Duration {
        // Looks again after each sleep: another response may have lengthened the
        // hold meanwhile.
        let mut waited = Duration::ZERO;
        loop {
            let left = self.remaining(key);
            if left.is_zero() {
                return waited;
            }
            self.clock.sleep_async(left).await;
            waited = waited.saturating_add(left);
        }
    }

    /// The pause a response asks for, in nanoseconds, before the cap.
    fn pause(
        &self,
        status: StatusCode,
        headers: &HeaderMap,
        wall_now: SystemTime,
    ) -> Option<Nanos> {
        let throttled =
            status == StatusCode::TOO_MANY_REQUESTS || status == StatusCode::SERVICE_UNAVAILABLE;
        if throttled && let Some(retry) = headers.get(RETRY_AFTER) {
            // A malformed Retry-After is ignored like a missing one.
            let pause = retry.to_str().ok();
            if let Some(pause) = pause.and_then(|v| retry_after(v, headers, wall_now)) {
                return Some(pause);
            }
        }
        let (spent, any) = ratelimit_resets(headers);
        match (throttled, spent, any) {
            (_, Some(t), _) => Some(t),
            (true, None, Some(t)) => Some(t),
            _ if status == StatusCode::TOO_MANY_REQUESTS => Some(self.fallback),
            _ => None,
        }
    }
}

/// True if the response was served from a cache (`Age` above 0): its rate-limit
/// fields describe the quota as it stood then, not now. `Age` is delta-seconds: a
/// number too large for any integer type is still above 0; a malformed one
/// counts as fresh.
fn from_cache(headers: &HeaderMap) -> bool {
    headers.get_all(AGE).iter().any(|age| {
        let age = age.as_bytes().trim_ascii();
        !age.is_empty() && age.iter().all(u8::is_ascii_digit) && age.iter().any(|&b| b != b'0')
    })
}

/// A `Retry-After` value as a pause in nanoseconds: delay-seconds, or an HTTP-date
/// less the response's `Date` (or the local wall clock). A date in the past is a
/// zero pause.
fn retry_after(value: &str, headers: &HeaderMap, wall_now: SystemTime) -> Option<Nanos> {
    let value = value.trim();
    if !value.is_empty() && value.bytes().all(|b| b.is_ascii_digit()) {
        // Beyond u64 seconds is "for ever"; the cap applies anyway.
        let seconds: u64 = value.parse().unwrap_or(u64::MAX);
        return Some(seconds.saturating_mul(NANOS_PER_SECOND));
    }
    let at = http_date::parse(value)?;
    let reference = headers
        .get(DATE)
        .and_then(|d| d.to_str().ok())
        .and_then(http_date::parse)
        .map(|secs| secs.saturating_mul(NANOS_PER_SECOND))
        .unwrap_or_else(|| {
            wall_now
                .duration_since(UNIX_EPOCH)
                .map_or(0, duration_to_nanos)
        });
    Some(
        at.saturating_mul(NANOS_PER_SECOND)
            .saturating_sub(reference),
    )
}

/// From every `RateLimit` field: the longest `t` among items with `r=0`, and the
/// longest `t` of any item, in nanoseconds. Malformed fields count for nothing.
fn ratelimit_resets(headers: &HeaderMap) -> (Option<Nanos>, Option<Nanos>) {
    let mut spent: Option<Nanos> = None;
    let mut any: Option<Nanos> = None;
    for value in headers.get_all("ratelimit") {
        let Some(items) = value.to_str().ok().and_then(fields::parse_list) else {
            continue;
        };
        for item in items {
            let Some(t) = item.param("t").and_then(|t| u64::try_from(t).ok()) else {
                continue;
            };
            let t = t.saturating_mul(NANOS_PER_SECOND);
            any = any.max(Some(t));
            if item.param("r") == Some(0) {
                spent = spent.max(Some(t));
            }
        }
    }
    (spent, any)
}
