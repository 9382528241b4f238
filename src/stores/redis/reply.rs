//! The wire format of a step's reply and of a cancel's receipts: one decision per
//! key, and the receipts that travel with it.
//!
//! A key's decision is 16 integers (`decision` in `lua/prelude.lua`); a single
//! algorithm's receipt is in them. A set's receipt follows them, as its
//! [`Layout`] says: one leaf of 7 integers per single algorithm in the set, depth
//! first (allowed, then mark, charge and stored-permits bits as 32-bit halves),
//! which is also how a cancel sends it back.

use super::connection::failure;
use crate::algorithms::{Decision, Receipt};
use crate::clock::Nanos;
use crate::error::{Applied, Error};
use crate::stores::store::{blank, Operation};

/// Where a key's receipt is in a reply and in a cancel (public in a private
/// module, as [`ServerStep`](super::algorithm::ServerStep) is): in the key's 16 integers
/// (a single algorithm), or after them as its members' leaves (a set).
#[derive(Clone, Debug)]
pub enum Layout {
    /// A single algorithm: one leaf.
    One,
    /// A set: its members' layouts, in order.
    Set(Vec<Layout>),
}

/// Integers per leaf of a receipt.
const LEAF: usize = 7;

impl Layout {
    /// Single algorithms in it.
    fn leaves(&self) -> usize {
        match self {
            Layout::One => 1,
            Layout::Set(members) => members.iter().map(Layout::leaves).sum(),
        }
    }

    /// Integers per key in a reply.
    fn width(&self) -> usize {
        match self {
            Layout::One => REPLY_WIDTH,
            Layout::Set(_) => REPLY_WIDTH + LEAF * self.leaves(),
        }
    }

    /// The receipt of a grant of `cost` from its leaves, depth first, as the
    /// memory store's algorithm would build it.
    fn receipt(&self, leaves: &mut impl Iterator<Item = Receipt>, cost: u64) -> Receipt {
        match self {
            Layout::One => leaves.next().unwrap_or(Receipt::NONE),
            Layout::Set(members) => {
                let members: Vec<Receipt> =
                    members.iter().map(|m| m.receipt(leaves, cost)).collect();
                Receipt::of_members(cost, members)
            }
        }
    }

    /// Appends `receipt`'s leaves, depth first (a member with no receipt: one
    /// that gives nothing back).
    fn flatten<'r>(&self, receipt: &'r Receipt, out: &mut Vec<&'r Receipt>) {
        match self {
            Layout::One => out.push(receipt),
            Layout::Set(members) => {
                for (index, member) in members.iter().enumerate() {
                    member.flatten(receipt.members().get(index).unwrap_or(&Receipt::NONE), out);
                }
            }
        }
    }
}

/// Numbers per key in a script's reply (see `lua/prelude.lua`).
const REPLY_WIDTH: usize = 16;

/// A step's reply as integers: an array of integers, or the integers packed as
/// big-endian doubles in one string (`SHORT5` ... and `packed` in `lua/`), each
/// an integer its double holds exactly (below 2⁵³, or a multiple of 4 µs past it:
/// see `us_ns`). Anything else (a length that is not whole doubles, a double that
/// is not an integer an `i64` holds) is not a reply the step sends.
pub(super) struct Numbers(pub(super) Vec<i64>);

impl redis::FromRedisValue for Numbers {
    fn from_redis_value(value: redis::Value) -> Result<Self, redis::ParsingError> {
        let redis::Value::BulkString(bytes) = value else {
            return Vec::<i64>::from_redis_value(value).map(Numbers);
        };
        let malformed = || format!("a packed step reply of {} bytes", bytes.len());
        if bytes.len() % 8 != 0 {
            return Err(malformed().into());
        }
        let exact = |chunk: &[u8]| {
            let mut word = [0; 8];
            word.copy_from_slice(chunk);
            let x = f64::from_be_bytes(word);
            // [-2^63, 2^63): exactly the doubles an i64 holds (2^63 itself is past it).
            let i64_range = i64::MIN as f64..-(i64::MIN as f64);
            let whole = x.fract() == 0.0 && i64_range.contains(&x);
            whole.then_some(x as i64)
        };
        let numbers: Option<Vec<i64>> = bytes.chunks_exact(8).map(exact).collect();
        numbers.map(Numbers).ok_or_else(|| malformed().into())
    }
}

/// Widens a lone key's short reply (`short` in `lua/driver.lua`: 5 integers for a
/// refusal, 9 or 11 for a grant, durations as whole ns, -1 for ever, no limit
/// index; 5 for a grant without its receipt; a set's refusal, or its answer
/// without a receipt: the 5 and its limit index) to the full 16; `None` for any
/// other length.
fn widen(reply: &[i64]) -> Option<[i64; REPLY_WIDTH]> {
    if !matches!(reply.len(), 5 | 6 | 9 | 11) {
        return None;
    }
    let split = |ns: i64| {
        if ns < 0 {
            (-1, 0)
        } else {
            (ns / 1_000, ns % 1_000)
        }
    };
    let mut wide = [0; REPLY_WIDTH];
    wide[0] = reply[0];
    let duration = if reply[0] == 0 { 1 } else { 3 };
    (wide[duration], wide[duration + 1]) = split(reply[1]);
    (wide[5], wide[6]) = split(reply[2]);
    wide[7..9].copy_from_slice(&reply[3..5]);
    if reply.len() == 6 {
        wide[9] = reply[5];
    } else {
        wide[10..10 + reply.len() - 5].copy_from_slice(&reply[5..]);
    }
    Some(wide)
}

/// A duration sent back as whole microseconds and a nanosecond remainder (from
/// 2⁵³ µs on, a multiple of 4 µs and a remainder below 4,000 ns: exact up to
/// `u64::MAX` ns, see `us_ns` in `lua/exact.lua`); -1 µs stands for `u64::MAX` ns
/// (for ever).
fn nanos_of(micros: i64, rest: i64) -> Nanos {
    if micros < 0 {
        return u64::MAX;
    }
    let micros = micros as u64;
    let rest = u64::try_from(rest).unwrap_or(0);
    micros.saturating_mul(1_000).saturating_add(rest)
}

/// A count; -1 stands for `u64::MAX` (unlimited).
fn count_of(n: i64) -> u64 {
    u64::try_from(n).unwrap_or(u64::MAX)
}

/// A 64-bit word sent back as its high and low 32-bit halves.
fn word_of(hi: i64, lo: i64) -> u64 {
    (hi as u64) << 32 | (lo as u64 & 0xffff_ffff)
}

/// Decodes one key's reply into the decision and receipt the memory store would give.
fn decode(reply: &[i64]) -> Option<(Decision, Receipt)> {
    let [verdict, wait_us, wait_ns, retry_us, retry_ns, reset_us, reset_ns, remaining, limit, index, mark_hi, mark_lo, charge_hi, charge_lo, spent_hi, spent_lo] =
        *reply
    else {
        return None;
    };
    let reset = nanos_of(reset_us, reset_ns);
    let (decision, receipt) = match verdict {
        0 => (
            Decision::allowed_after(
                nanos_of(wait_us, wait_ns),
                count_of(limit),
                count_of(remaining),
                reset,
            ),
            Receipt::new(
                word_of(mark_hi, mark_lo) as i64,
                word_of(charge_hi, charge_lo),
            )
            .with_stored_spent(f64::from_bits(word_of(spent_hi, spent_lo))),
        ),
        1 => (
            Decision::denied(
                count_of(limit),
                count_of(remaining),
                nanos_of(retry_us, retry_ns),
                reset,
            ),
            Receipt::NONE,
        ),
        2 => (
            Decision::never(count_of(limit), count_of(remaining), reset),
            Receipt::NONE,
        ),
        _ => return None,
    };
    Some((
        decision.with_limit_index(u32::try_from(index).unwrap_or(0)),
        receipt,
    ))
}

/// One leaf's receipt from its 7 integers.
fn leaf(w: &[i64]) -> Receipt {
    match *w {
        [1, mark_hi, mark_lo, charge_hi, charge_lo, spent_hi, spent_lo] => Receipt::new(
            word_of(mark_hi, mark_lo) as i64,
            word_of(charge_hi, charge_lo),
        )
        .with_stored_spent(f64::from_bits(word_of(spent_hi, spent_lo))),
        _ => Receipt::NONE,
    }
}

/// A reply that is not what the step sends.
fn malformed() -> Error {
    failure(
        Applied::Unknown,
        redis::RedisError::from((
            redis::ErrorKind::UnexpectedReturnType,
            "the step's reply has the wrong shape",
        )),
    )
}

/// Splits a step's reply into one decision and receipt per key, the receipts laid
/// out as `layout` says for a grant of `cost`. A peek takes nothing, so it leaves
/// nothing to give back (the step reports the mark a grant would have had).
pub(super) fn answers_from(
    reply: &[i64],
    out: &mut [(Decision, Receipt)],
    layout: &Layout,
    cost: u64,
    peek: bool,
) -> Result<(), Error> {
    // A lone key's short form is read as the full one; a set's (a refusal, or any
    // answer to a call that keeps no receipt) carries no leaves: nothing to give
    // back. So does a lone set's full decision without its leaves (a bare call's).
    let wide;
    let (reply, width) = match (out.len(), widen(reply)) {
        (1, Some(full)) if reply.len() < REPLY_WIDTH => {
            wide = full;
            (&wide[..], REPLY_WIDTH)
        }
        (1, _) if reply.len() == REPLY_WIDTH => (reply, REPLY_WIDTH),
        _ => (reply, layout.width()),
    };
    if reply.len() != out.len() * width {
        return Err(malformed());
    }
    for (slot, chunk) in out.iter_mut().zip(reply.chunks_exact(width)) {
        let (own, leaves) = chunk.split_at(REPLY_WIDTH);
        *slot = decode(own).ok_or_else(malformed)?;
        if peek {
            slot.1 = Receipt::NONE;
        } else if let (Layout::Set(_), false) = (layout, leaves.is_empty()) {
            let mut leaves = leaves.chunks_exact(LEAF).map(leaf);
            slot.1 = layout.receipt(&mut leaves, cost);
        }
    }
    Ok(())
}

/// Splits the reply of a step on one key sent with `report`: the key's decision
/// and receipt, then one decision per limit (a reserve's; any other step reports
/// its decision once, and a cancel answers nothing).
pub(super) fn reported_from(
    reply: &[i64],
    step: &Operation<'_>,
    layout: &Layout,
) -> Result<((Decision, Receipt), Vec<Decision>), Error> {
    let mut answer = [blank()];
    let (cost, peek) = match *step {
        Operation::Cancel { .. } => {
            let [answer] = answer;
            return Ok((answer, Vec::new()));
        }
        Operation::Reserve { cost, .. } => (cost, false),
        Operation::Peek { cost } => (cost, true),
    };
    let (own, each) = reply.split_at(reply.len().min(layout.width()));
    // A set's reporting step answers no receipt, as in memory
    // (`Algorithm::reserve_each`).
    let set = matches!(layout, Layout::Set(_));
    answers_from(own, &mut answer, layout, cost, peek || set)?;
    let [answer] = answer;
    if peek {
        let decision = answer.0;
        return Ok((answer, vec![decision]));
    }
    let mut limits = vec![blank(); each.len() / REPLY_WIDTH];
    answers_from(each, &mut limits, &Layout::One, cost, true)?;
    Ok((answer, limits.into_iter().map(|(d, _)| d).collect()))
}

/// The cancel's arguments after the configuration: when the grants were to act,
/// relative to `now` (so that it means the same at the server's time; `-` when
/// already past), then each key's receipt, leaf by leaf as `layout` lays it out:
/// whether it gives anything back, mark, charge and stored permits spent, each as
/// 32-bit halves.
pub(super) fn cancel_args(
    receipts: &[Receipt],
    layout: &Layout,
    acts_at: Nanos,
    now: Nanos,
    keys: usize,
    args: &mut Vec<String>,
) {
    args.push(if acts_at < now {
        "-".to_owned()
    } else {
        (acts_at - now).to_string()
    });
    let mut leaves = Vec::new();
    for index in 0..keys {
        leaves.clear();
        layout.flatten(receipts.get(index).unwrap_or(&Receipt::NONE), &mut leaves);
        for receipt in &leaves {
            args.push(u8::from(!receipt.is_none()).to_string());
            for word in [
                receipt.mark() as u64,
                receipt.charge(),
                receipt.stored_spent().to_bits(),
            ] {
                args.push((word >> 32).to_string());
                args.push((word & 0xffff_ffff).to_string());
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::Numbers;
    use redis::{FromRedisValue, Value};

    fn packed(values: &[f64]) -> Value {
        Value::BulkString(values.iter().flat_map(|v| v.to_be_bytes()).collect())
    }

    #[test]
    fn a_packed_reply_reads_as_its_integers() {
        let reply = packed(&[
            0.0,
            -1.0,
            9_007_199_254_740_991.0,
            10.0,
            18_014_398_509_481_984.0,
        ]);
        let Numbers(numbers) = Numbers::from_redis_value(reply).unwrap();
        assert_eq!(numbers, [0, -1, 9_007_199_254_740_991, 10, 1 << 54]);
        let array = Value::Array(vec![Value::Int(1), Value::Int(-1)]);
        assert_eq!(Numbers::from_redis_value(array).unwrap().0, [1, -1]);
    }

    #[test]
    fn a_packed_reply_of_part_of_a_double_or_of_no_integer_is_an_error() {
        let mut short = packed(&[1.0, 2.0]);
        if let Value::BulkString(bytes) = &mut short {
            bytes.pop();
        }
        assert!(Numbers::from_redis_value(short).is_err());
        for bad in [0.5, f64::NAN, f64::INFINITY, -(i64::MIN as f64)] {
            assert!(
                Numbers::from_redis_value(packed(&[1.0, bad])).is_err(),
                "{bad}"
            );
        }
    }
}
