//! The word representation's pieces, each on a small case: reads and writes past
//! the end, the configuration's words, the lean take and the split check.

#[test]
fn a_read_past_the_end_is_zero() {
    use crate::algorithms::words::Words;
    let words: &[u64] = &[7, 8];
    assert_eq!(words.word(1), 8);
    assert_eq!(words.word(2), 0); // past the end: 0, never a panic
}

#[test]
fn a_write_past_the_end_is_dropped() {
    use crate::algorithms::words::WordsMut;
    let mut words = [0u64; 2];
    words.as_mut_slice().set_word(1, 9);
    words.as_mut_slice().set_word(5, 9); // past the end: ignored
    assert_eq!(words, [0, 9]);
}

#[test]
fn a_configuration_is_one_to_six_words() {
    use crate::algorithms::words::ConfigWords;
    fn len<C: ConfigWords>() -> usize {
        C::default().as_ref().len()
    }
    assert_eq!(len::<[u64; 3]>(), 3);
}

#[test]
fn the_lean_take_and_the_full_step_agree_on_a_full_window() {
    use crate::algorithms::{SlidingWindowBuckets, WordEncoded};
    use std::time::Duration;
    let window =
        SlidingWindowBuckets::dropping(1, Duration::from_secs(1), Duration::from_millis(100))
            .unwrap();
    let mut words = vec![0; window.state_words()];
    window.init_words(&mut words[..], 0);
    let (granted, take) = window.plan_take(&words[..], 0, 1);
    assert!(granted);
    window.apply_take(&mut words[..], take.unwrap());
    assert_eq!(window.plan_take(&words[..], 0, 1), (false, None)); // full: refused, nothing to write
                                                                   // The same step, with the full decision:
    let (refused, _) = window.reserve_words(&mut words[..], 0, 1, 0);
    assert_eq!(refused.retry_after(), Duration::from_secs(1));
}

#[test]
fn own_config_words_decode_to_the_same_algorithm() {
    use crate::algorithms::words::WordEncoded;
    use crate::algorithms::FixedWindow;
    let window = FixedWindow::new(3, std::time::Duration::from_secs(1)).unwrap();
    assert_eq!(
        FixedWindow::from_own_config_words(window.config_words()),
        window
    );
}

#[test]
fn a_failed_publication_describes_nothing() {
    use crate::algorithms::{SmoothBursty, WordEncoded};
    let bursty = SmoothBursty::new(2.0).unwrap();
    let mut words = [0u64];
    bursty.init_words(&mut words[..], 0);
    // A publication that failed (another thread wrote first): no decision; a
    // cell starts again from the words it shares.
    let mut copy = words;
    assert_eq!(bursty.check_words(&mut copy[..], 0, 1, |_| false), None);
    let granted = bursty.check_words(&mut words[..], 0, 1, |_| true).unwrap();
    assert!(granted.is_allowed());
    let refused = bursty.check_words(&mut words[..], 0, 1, |_| true).unwrap();
    assert_eq!(refused.retry_after_nanos(), 500_000_000);
}

mod config_words;
