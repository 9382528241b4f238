//! Several limits at once, as properties on random traces: a set is the
//! conjunction of its members run alone (`AllOf` and `Limits` agreeing, plain and
//! heap-state members, in any order), and `reserve_each` takes `reserve`'s step
//! and reports every member as it stands.

use super::all_of_and_limits::{bursty, cadence, per, SlidingLog, MS};
use proptest::prelude::*;
use sluicegate::algorithms::{Algorithm, AllOf, Decision, Limits, Receipt, SmoothWarmingUp};
use sluicegate::clock::Nanos;
use std::time::Duration;

fn max_wait(choice: u8) -> Nanos {
    match choice {
        0 => 0,
        1 => 300 * MS,
        _ => u64::MAX,
    }
}

/// For a random trace: a refused call changes no member; an admitted call was
/// admitted by each member alone, which then moved exactly as it would alone; the
/// static and the dynamic set agree on every decision and every member state.
fn conjunction<A, B, C>(
    (a, b, c): (A, B, C),
    trace: Vec<(u64, u64, u8)>,
) -> Result<(), TestCaseError>
where
    A: Algorithm + Clone,
    B: Algorithm + Clone,
    C: Algorithm + Clone,
    A::State: PartialEq + std::fmt::Debug,
    B::State: PartialEq + std::fmt::Debug,
    C::State: PartialEq + std::fmt::Debug,
{
    let set = AllOf::new((a.clone(), b.clone(), c.clone()));
    let limits = Limits::new()
        .with(a.clone())
        .with(b.clone())
        .with(c.clone());
    let mut state = set.initial_state(0);
    let mut dyn_state = limits.initial_state(0);
    // The same steps again, reporting each member: both sets report alike.
    let (mut reported, mut dyn_reported) = (set.initial_state(0), limits.initial_state(0));
    let mut now = 0;
    for (dt, cost, wait_choice) in trace {
        now += dt * MS;
        let max_wait = max_wait(wait_choice);
        let before = state.members().clone();
        let (mut sa, mut sb, mut sc) = before.clone();
        let alone = [
            a.reserve::<Decision>(&mut sa, now, cost, max_wait),
            b.reserve::<Decision>(&mut sb, now, cost, max_wait),
            c.reserve::<Decision>(&mut sc, now, cost, max_wait),
        ];
        // A peek that admits is followed by a reserve that admits.
        let peeks = [
            a.peek(&before.0, now, cost),
            b.peek(&before.1, now, cost),
            c.peek(&before.2, now, cost),
        ];
        for (p, r) in peeks.iter().zip(&alone) {
            if p.is_allowed() {
                prop_assert!(r.is_allowed());
            }
        }

        let d = set.reserve::<Decision>(&mut state, now, cost, max_wait);
        let dd = limits.reserve::<Decision>(&mut dyn_state, now, cost, max_wait);
        prop_assert_eq!(d, dd);
        let (mut each, mut dyn_each) = (Vec::new(), Vec::new());
        let (r, _) = set.reserve_each(&mut reported, now, cost, max_wait, &mut |x| each.push(x));
        let (dr, _) = limits.reserve_each(&mut dyn_reported, now, cost, max_wait, &mut |x| {
            dyn_each.push(x)
        });
        prop_assert_eq!((r, dr), (d, d));
        prop_assert_eq!(each.len(), 3);
        prop_assert_eq!(&each, &dyn_each);
        prop_assert_eq!(dyn_state.member::<A::State>(0).unwrap(), &state.members().0);
        prop_assert_eq!(dyn_state.member::<B::State>(1).unwrap(), &state.members().1);
        prop_assert_eq!(dyn_state.member::<C::State>(2).unwrap(), &state.members().2);

        if d.is_allowed() {
            prop_assert!(alone.iter().all(Decision::is_allowed));
            prop_assert_eq!(state.members(), &(sa, sb, sc));
            let longest = alone.iter().map(Decision::wait_nanos).max().unwrap();
            prop_assert_eq!(d.wait_nanos(), longest);
            prop_assert!(d.wait_nanos() <= max_wait);
        } else {
            prop_assert_eq!(state.members(), &before);
            let named = alone[d.limit_index() as usize];
            prop_assert!(!named.is_allowed());
            prop_assert_eq!(d.is_never(), alone.iter().any(Decision::is_never));
            if !d.is_never() {
                let longest = alone
                    .iter()
                    .filter(|x| !x.is_allowed())
                    .map(Decision::retry_after_nanos)
                    .max()
                    .unwrap();
                prop_assert_eq!(d.retry_after_nanos(), longest);
            }
        }
    }
    Ok(())
}

fn trace() -> impl Strategy<Value = Vec<(u64, u64, u8)>> {
    prop::collection::vec((0u64..700, 1u64..6, 0u8..3), 1..80)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    /// Plain-data members only: each is reserved in pass 1 and put back on a refusal.
    #[test]
    fn a_set_of_plain_members_is_their_conjunction(trace in trace()) {
        let warming = SmoothWarmingUp::new(2.0, Duration::from_secs(2)).unwrap();
        conjunction((bursty(3.0), warming, per(4, 1)), trace)?;
    }

    /// A member whose state owns memory (the log) is asked first and reserved in
    /// pass 2, between two plain members.
    #[test]
    fn a_set_with_a_heap_state_member_is_their_conjunction(trace in trace()) {
        let log = SlidingLog::new(5, Duration::from_secs(2));
        conjunction((bursty(3.0), log, per(4, 1)), trace)?;
    }

    /// Seed 002: the order the limits are listed in changes no admission.
    #[test]
    fn the_order_of_the_limits_changes_nothing(
        trace in prop::collection::vec((0u64..400, 1u64..4), 1..150)
    ) {
        let forward = AllOf::new((per(3, 1), per(10, 5), per(20, 30)));
        let backward = AllOf::new((per(20, 30), per(10, 5), per(3, 1)));
        let (mut f, mut b) = (forward.initial_state(0), backward.initial_state(0));
        let mut now = 0;
        for (dt, cost) in trace {
            now += dt * MS;
            let df = forward.reserve::<Decision>(&mut f, now, cost, 0);
            let db = backward.reserve::<Decision>(&mut b, now, cost, 0);
            prop_assert_eq!(df.verdict(), db.verdict());
            prop_assert_eq!(df.retry_after_nanos(), db.retry_after_nanos());
        }
    }
}

proptest! {
    /// `reserve_each` takes the very step `reserve` takes and reports
    /// each member as it stands: a grant reports each member's standing after its
    /// own grant (what the member stepped alone reports); a refusal reports each
    /// member's own answer, one of them the refusal the set answered.
    #[test]
    fn reserve_each_steps_as_reserve_and_reports_every_member(
        calls in proptest::collection::vec((0u64..400, 1u64..4), 1..40),
    ) {
        let set = AllOf::new((bursty(5.0), per(4, 1), cadence(20.0)));
        let (a, b, c) = *set.members();
        let mut plain = set.initial_state(0);
        let mut reporting = set.initial_state(0);
        let (mut alone_a, mut alone_b, mut alone_c) =
            (a.initial_state(0), b.initial_state(0), c.initial_state(0));
        let mut now = 0;
        for (advance, cost) in calls {
            now += advance * MS;
            let expected = set.reserve::<(Decision, Receipt)>(&mut plain, now, cost, 0);
            let mut each = Vec::new();
            let answer = set.reserve_each(&mut reporting, now, cost, 0, &mut |d| each.push(d));
            // The same step and decision; reporting serves checks, so a set keeps
            // no receipt for it.
            prop_assert_eq!(answer.0, expected.0);
            prop_assert!(answer.1.is_none());
            prop_assert_eq!(each.len(), 3);
            if answer.0.is_allowed() {
                let ga = a.reserve::<Decision>(&mut alone_a, now, cost, 0);
                let gb = b.reserve::<Decision>(&mut alone_b, now, cost, 0);
                let gc = c.reserve::<Decision>(&mut alone_c, now, cost, 0);
                prop_assert_eq!(each[0], a.standing(ga, &mut |n| a.peek(&alone_a, now, n)));
                prop_assert_eq!(each[1], b.standing(gb, &mut |n| b.peek(&alone_b, now, n)));
                prop_assert_eq!(each[2], c.standing(gc, &mut |n| c.peek(&alone_c, now, n)));
            } else {
                let refusal = each[answer.0.limit_index() as usize];
                prop_assert_eq!(refusal.retry_after_nanos(), answer.0.retry_after_nanos());
                prop_assert!(each.iter().any(|d| !d.is_allowed()));
            }
        }
    }
}
