//! What a caller reads of a step: the one type parameter of [`Algorithm::reserve`].
//!
//! [`Algorithm::reserve`]: super::Algorithm::reserve

use super::{Decision, Receipt};

/// What a caller reads of one [`Algorithm::reserve`](super::Algorithm::reserve)
/// step. The step is written once; its report type decides what of a grant is
/// built, and the compiler drops the rest:
///
/// | report | a grant reads | a refusal reads | what asks for it |
/// |---|---|---|---|
/// | `bool` | `true`, nothing described | `false`, nothing described | a direct limiter's `try_acquire` |
/// | `Result<(), Decision>` | `Ok(())`: granted, nothing described | `Err` with the refusal | a keyed `try_acquire`, a server that sends no fields on grants |
/// | [`Decision`] | the grant's decision | the refusal | `check`, `acquire`, `peek` |
/// | `(Decision, Receipt)` | the decision and the [`Receipt`] that gives it back | the refusal and [`Receipt::NONE`] | `reserve`, whose grant can be cancelled |
///
/// An algorithm answers a step with [`granted`](Report::granted) or
/// [`refused`](Report::refused), each given closures that only the reports reading
/// them run, or, when it has built both halves anyway, with
/// [`decided`](Report::decided). The trait is sealed: these four are the reports.
///
/// ```
/// use sluicegate::algorithms::{Algorithm, Decision, FixedWindow, Receipt, Report};
/// use std::time::Duration;
/// let window = FixedWindow::new(3, Duration::from_secs(1)).unwrap();
/// let mut state = window.initial_state(0);
/// // The same step, four reports.
/// let granted: bool = window.reserve(&mut state, 0, 1, 0);
/// assert!(granted);
/// let lean: Result<(), Decision> = window.reserve(&mut state, 0, 1, 0);
/// assert!(lean.is_ok());
/// let full: Decision = window.reserve(&mut state, 0, 1, 0);
/// assert_eq!(full.remaining(), 0);
/// let (refusal, receipt): (Decision, Receipt) = window.reserve(&mut state, 0, 1, 0);
/// assert!(!refusal.is_allowed() && receipt.is_none());
/// // An algorithm of your own builds its answer with these:
/// let built: Result<(), Decision> = Report::decided(refusal, Receipt::NONE);
/// assert_eq!(built, Err(refusal));
/// ```
pub trait Report: Sized + sealed::Sealed {
    /// Whether this report keeps a grant's receipt: a set of limits builds its
    /// members' receipts (one allocation) only for a report that does.
    #[doc(hidden)]
    const KEEPS_RECEIPT: bool;

    /// The report of a grant. `decision` runs only if this report reads the
    /// grant's decision, `receipt` only if it keeps the receipt, so a step that
    /// passes them as closures builds neither for a report that drops them.
    /// Algorithms call it; a caller sees it in what
    /// [`reserve`](super::Algorithm::reserve) returns: `true`, `Ok(())`, the
    /// allowed decision, or that decision with its receipt.
    ///
    /// ```
    /// use sluicegate::algorithms::{Algorithm, Decision, FixedWindow, Receipt};
    /// use std::time::Duration;
    /// let window = FixedWindow::new(2, Duration::from_secs(1)).unwrap();
    /// let fresh = window.initial_state(0);
    /// // One grant, as each report reads it (each on its own copy of the state).
    /// assert!(window.reserve::<bool>(&mut fresh.clone(), 0, 1, 0));
    /// assert_eq!(window.reserve::<Result<(), Decision>>(&mut fresh.clone(), 0, 1, 0), Ok(()));
    /// let decision: Decision = window.reserve(&mut fresh.clone(), 0, 1, 0);
    /// assert_eq!((decision.is_allowed(), decision.remaining()), (true, 1));
    /// let (kept, receipt): (Decision, Receipt) = window.reserve(&mut fresh.clone(), 0, 1, 0);
    /// assert_eq!((kept, receipt.charge()), (decision, 1)); // the receipt gives 1 back
    /// ```
    fn granted(decision: impl FnOnce() -> Decision, receipt: impl FnOnce() -> Receipt) -> Self;

    /// The report of a refusal, denied or never. `decision` runs only if this
    /// report reads the refusal: every report but `bool` does. A caller sees it in
    /// what [`reserve`](super::Algorithm::reserve) returns: `false`, `Err` with
    /// the refusal, the refusal, or the refusal with [`Receipt::NONE`].
    ///
    /// ```
    /// use sluicegate::algorithms::{Algorithm, Decision, FixedWindow, Receipt};
    /// use std::time::Duration;
    /// let window = FixedWindow::new(2, Duration::from_secs(1)).unwrap();
    /// let mut state = window.initial_state(0);
    /// assert!(window.reserve::<bool>(&mut state, 0, 2, 0)); // the window is full
    /// // One refusal (which moves nothing), as each report reads it.
    /// assert!(!window.reserve::<bool>(&mut state, 0, 1, 0));
    /// let refusal: Decision = window.reserve(&mut state, 0, 1, 0);
    /// assert_eq!(refusal.retry_after(), Duration::from_secs(1));
    /// assert_eq!(window.reserve::<Result<(), Decision>>(&mut state, 0, 1, 0), Err(refusal));
    /// let (kept, receipt): (Decision, Receipt) = window.reserve(&mut state, 0, 1, 0);
    /// assert_eq!((kept, receipt), (refusal, Receipt::NONE)); // nothing to give back
    /// assert!(window.reserve::<Decision>(&mut state, 0, 3, 0).is_never()); // above the limit
    /// ```
    fn refused(decision: impl FnOnce() -> Decision) -> Self;

    /// Whether this report is a grant's: what a store reads of an answer to
    /// know whether a new key's state is worth keeping.
    #[doc(hidden)]
    fn is_granted(&self) -> bool;

    /// The report of a step that has built its decision and receipt: a grant's as
    /// [`granted`](Report::granted), anything else as
    /// [`refused`](Report::refused).
    ///
    /// ```
    /// use sluicegate::algorithms::{Decision, Receipt, Report};
    /// let grant = Decision::allowed(5, 4, 0);
    /// let lean: Result<(), Decision> = Report::decided(grant, Receipt::new(1, 1));
    /// assert_eq!(lean, Ok(()));
    /// let (decision, receipt): (Decision, Receipt) = Report::decided(grant, Receipt::new(1, 1));
    /// assert_eq!((decision, receipt.charge()), (grant, 1));
    /// ```
    #[inline(always)]
    fn decided(decision: Decision, receipt: Receipt) -> Self {
        if decision.is_allowed() {
            Self::granted(|| decision, || receipt)
        } else {
            Self::refused(|| decision)
        }
    }
}

mod sealed {
    pub trait Sealed {}
    impl Sealed for bool {}
    impl Sealed for Result<(), super::Decision> {}
    impl Sealed for super::Decision {}
    impl Sealed for (super::Decision, super::Receipt) {}
}

impl Report for bool {
    const KEEPS_RECEIPT: bool = false;

    #[inline(always)]
    fn granted(_: impl FnOnce() -> Decision, _: impl FnOnce() -> Receipt) -> Self {
        true
    }

    #[inline(always)]
    fn refused(_: impl FnOnce() -> Decision) -> Self {
        false
    }

    #[inline(always)]
    fn is_granted(&self) -> bool {
        *self
    }
}

impl Report for Result<(), Decision> {
    const KEEPS_RECEIPT: bool = false;

    #[inline(always)]
    fn granted(_: impl FnOnce() -> Decision, _: impl FnOnce() -> Receipt) -> Self {
        Ok(())
    }

    #[inline(always)]
    fn refused(decision: impl FnOnce() -> Decision) -> Self {
        Err(decision())
    }

    #[inline(always)]
    fn is_granted(&self) -> bool {
        self.is_ok()
    }
}

impl Report for Decision {
    const KEEPS_RECEIPT: bool = false;

    #[inline(always)]
    fn granted(decision: impl FnOnce() -> Decision, _: impl FnOnce() -> Receipt) -> Self {
        decision()
    }

    #[inline(always)]
    fn refused(decision: impl FnOnce() -> Decision) -> Self {
        decision()
    }

    #[inline(always)]
    fn is_granted(&self) -> bool {
        self.is_allowed()
    }
}

impl Report for (Decision, Receipt) {
    const KEEPS_RECEIPT: bool = true;

    #[inline(always)]
    fn granted(decision: impl FnOnce() -> Decision, receipt: impl FnOnce() -> Receipt) -> Self {
        (decision(), receipt())
    }

    #[inline(always)]
    fn refused(decision: impl FnOnce() -> Decision) -> Self {
        (decision(), Receipt::NONE)
    }

    #[inline(always)]
    fn is_granted(&self) -> bool {
        self.0.is_allowed()
    }
}
