//! The cells' steps, each checked on a small case: a refused change changes nothing,
//! every kind of cell decides as the others, the sequence lock orders its readers.

#[test]
fn a_refused_reconfiguration_changes_nothing() {
    use crate::algorithms::SmoothBursty;
    use crate::cells::{StateCell, WordCell};
    use crate::ConfigError;
    let cell = WordCell::new(SmoothBursty::new(1.0).unwrap(), 0);
    assert!(cell
        .reconfigure(&|_, _| Err(ConfigError::InvalidRate { rate: 0.0 }))
        .is_err());
    assert_eq!(cell.algorithm().rate(), 1.0); // a refused change changes nothing
    cell.reconfigure(&|algorithm, _| {
        *algorithm = SmoothBursty::new(2.0)?;
        Ok(())
    })
    .unwrap();
    assert_eq!(cell.algorithm().rate(), 2.0);
}

#[test]
fn every_cell_decides_alike() {
    use crate::algorithms::{Algorithm, FixedWindow};
    use crate::cells::{LockedCell, StateCell, WordCell};
    use std::time::Duration;
    // Code generic over the cell sees the same decisions from every kind.
    fn two_calls<A: Algorithm + Clone, C: StateCell<A>>(algorithm: A) -> (bool, bool) {
        let cell = C::new(algorithm, 0);
        (cell.reserve(0, 1, 0).0.is_allowed(), cell.try_take(0, 1))
    }
    let window = FixedWindow::new(1, Duration::from_secs(1)).unwrap();
    assert_eq!(two_calls::<_, WordCell<_>>(window), (true, false));
    assert_eq!(two_calls::<_, LockedCell<_>>(window), (true, false));
}

#[test]
fn check_is_a_zero_wait_reserve() {
    use crate::algorithms::FixedWindow;
    use crate::cells::{StateCell, WordCell};
    use std::time::Duration;
    let cell = WordCell::new(FixedWindow::new(2, Duration::from_secs(10)).unwrap(), 0);
    assert_eq!(cell.check(3_000_000_000, 1).remaining(), 1);
    assert_eq!(cell.check(3_000_000_000, 1).remaining(), 0);
    let refused = cell.check(3_000_000_000, 1);
    assert_eq!(refused.retry_after(), Duration::from_secs(7));
    assert_eq!(refused, cell.reserve(3_000_000_000, 1, 0).0); // nothing was taken
}

#[test]
fn check_each_reports_every_limit() {
    use crate::algorithms::{AllOf, FixedWindow};
    use crate::cells::{LockedCell, StateCell};
    use std::time::Duration;
    let second = FixedWindow::new(2, Duration::from_secs(1)).unwrap();
    let minute = FixedWindow::new(10, Duration::from_secs(60)).unwrap();
    let cell = LockedCell::new(AllOf::new((second, minute)), 0);
    let mut left = Vec::new();
    assert!(cell
        .check_each(0, 1, &mut |d| left.push(d.remaining()))
        .is_allowed());
    assert_eq!(left, [1, 9]);
    // One limit: its last permit granted, it reports when the next one comes.
    use crate::cells::WordCell;
    let lone = WordCell::new(FixedWindow::new(1, Duration::from_secs(1)).unwrap(), 0);
    let mut reported = Vec::new();
    assert!(lone
        .check_each(0, 1, &mut |d| reported.push(d))
        .is_allowed());
    assert!(!reported[0].is_allowed());
    assert_eq!(reported[0].retry_after(), Duration::from_secs(1));
}

#[test]
fn a_shape_names_its_cell() {
    use crate::algorithms::{FixedWindow, OneWord};
    use crate::cells::{CellFor, WordCell};
    let _: Option<<OneWord as CellFor<FixedWindow>>::Cell> = None::<WordCell<FixedWindow>>;
}

#[test]
fn an_algorithm_names_its_cell() {
    use crate::algorithms::SmoothBursty;
    use crate::cells::{HasCell, StateCell};
    let cell = <SmoothBursty as HasCell>::Cell::new(SmoothBursty::new(1.0).unwrap(), 0);
    assert!(cell.try_take(0, 1));
    assert!(!cell.try_take(0, 1)); // the next permit is 1 s away
}

#[test]
fn a_locked_cell_steps_a_warming_up_limiter() {
    use crate::algorithms::SmoothWarmingUp;
    use crate::cells::{LockedCell, StateCell};
    use std::time::Duration;
    let cell = LockedCell::new(
        SmoothWarmingUp::new(2.0, Duration::from_secs(4)).unwrap(),
        0,
    );
    assert!(cell.try_take(0, 1));
    assert!(!cell.try_take(0, 1)); // the first cold permit costs 1.375 s
}

#[test]
fn a_write_makes_a_plan_stale() {
    use crate::cells::SequenceLock;
    let lock = SequenceLock::new();
    let seen = lock.begin();
    {
        let mut claim = lock.claim(seen).expect("nobody else wrote");
        claim.wrote();
    }
    assert!(!lock.unchanged_since(seen)); // a write landed since `seen`
    assert!(lock.claim(seen).is_none()); // so a plan made under `seen` is stale
    let again = lock.begin();
    drop(lock.lock()); // a claim that wrote nothing leaves the sequence as it was
    assert!(lock.unchanged_since(again));
}

#[test]
fn a_claim_marks_its_write() {
    use crate::cells::SequenceLock;
    let lock = SequenceLock::new();
    let mut claim = lock.lock();
    claim.wrote(); // the release will tell readers that the words changed
}

#[test]
fn a_new_lock_is_even() {
    use crate::cells::SequenceLock;
    assert_eq!(SequenceLock::new().begin() % 2, 0);
}

#[test]
fn nothing_written_since_begin() {
    use crate::cells::SequenceLock;
    let lock = SequenceLock::new();
    assert!(lock.unchanged_since(lock.begin()));
}

#[test]
fn a_write_is_a_change() {
    use crate::cells::SequenceLock;
    let lock = SequenceLock::new();
    let seen = lock.begin();
    lock.lock().wrote();
    assert!(!lock.unchanged_since(seen));
}

#[test]
fn a_held_claim_is_exclusive() {
    use crate::cells::SequenceLock;
    let lock = SequenceLock::new();
    let seen = lock.begin();
    let claim = lock.claim(seen);
    assert!(claim.is_some());
    assert!(lock.claim(seen).is_none()); // held: nobody else can claim
}

#[test]
fn a_lock_is_released_on_drop() {
    use crate::cells::SequenceLock;
    let lock = SequenceLock::new();
    drop(lock.lock());
    drop(lock.lock()); // released on drop, so it can be taken again
}

#[test]
fn a_write_moves_the_sequence() {
    use crate::cells::SequenceLock;
    let lock = SequenceLock::new();
    let seen = lock.begin();
    lock.lock().wrote();
    assert_ne!(lock.begin(), seen);
}

#[test]
fn a_word_cell_steps_the_bursty_limiter() {
    use crate::algorithms::SmoothBursty;
    use crate::cells::{StateCell, WordCell};
    let cell = WordCell::new(SmoothBursty::new(5.0).unwrap(), 0);
    assert!(cell.try_take(0, 1));
    assert_eq!(cell.reserve(0, 1, u64::MAX).0.wait_nanos(), 200_000_000);
}

#[test]
fn a_words_cell_keeps_its_state_size() {
    use crate::algorithms::SlidingLog;
    use crate::cells::{StateCell, WordsCell};
    use std::time::Duration;
    let log = SlidingLog::new(2, Duration::from_secs(60)).unwrap();
    let cell = WordsCell::new(log, 0);
    assert!(cell.try_take(0, 1));
    assert!(cell.reserve(0, 1, 0).0.is_allowed());
    assert!(!cell.try_take(0, 1)); // the log is full
    assert_eq!(cell.peek(0, 1).retry_after(), Duration::from_secs(60));
    // The state's size is fixed: a new limit must keep the capacity.
    let err = cell.reconfigure(&|log, _| {
        *log = SlidingLog::new(3, Duration::from_secs(60))?;
        Ok(())
    });
    assert!(err.is_err());
    assert_eq!(cell.algorithm(), log); // refused: nothing changed
}

mod check_is_reserve;
mod guava_shortcuts;
