//! What a grant leaves behind so that it can be given back.

/// The bookkeeping an algorithm needs to cancel one of its grants later: returned
/// next to the [`Decision`](super::Decision) by
/// [`Algorithm::reserve_with_receipt`](super::Algorithm::reserve_with_receipt), held
/// by a [`Reservation`](crate::Reservation) (or a keyed async acquire), and handed
/// back to [`Algorithm::cancel`](super::Algorithm::cancel).
///
/// Its fields are the algorithm's own: `mark`, a position in its state right after
/// the grant (e.g. the token bucket's theoretical arrival time), `charge`, how much
/// the grant consumed in the algorithm's unit (e.g. nanoseconds of capacity), and the
/// stored permits it spent, for algorithms whose stored permits are worth more than
/// time alone says (Guava's warm-up). Nobody else reads them; a remote store carries
/// them to its server and back unchanged.
///
/// [`Receipt::NONE`] gives nothing back: it is what a refusal, or an algorithm whose
/// grants cannot be given back, returns.
///
/// ```
/// use sluicegate::algorithms::Receipt;
/// let r = Receipt::new(42, 1).with_stored_spent(2.5);
/// assert_eq!((r.mark(), r.charge(), r.stored_spent()), (42, 1, 2.5));
/// assert!(Receipt::NONE.is_none() && !r.is_none());
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Receipt {
    mark: i64,
    charge: u64,
    spent: f64,
}

impl Receipt {
    /// Nothing to give back.
    pub const NONE: Receipt = Receipt {
        mark: 0,
        charge: 0,
        spent: 0.0,
    };

    /// A receipt for a grant that left the state at `mark` and consumed `charge`.
    ///
    /// ```
    /// use sluicegate::algorithms::Receipt;
    /// assert_eq!(Receipt::new(-7, 3).mark(), -7);
    /// ```
    #[inline]
    pub const fn new(mark: i64, charge: u64) -> Self {
        Receipt {
            mark,
            charge,
            spent: 0.0,
        }
    }

    /// The same receipt, also recording `permits` stored permits spent.
    ///
    /// ```
    /// use sluicegate::algorithms::Receipt;
    /// assert_eq!(Receipt::new(1, 1).with_stored_spent(0.5).stored_spent(), 0.5);
    /// ```
    #[inline]
    pub const fn with_stored_spent(mut self, permits: f64) -> Self {
        self.spent = permits;
        self
    }

    /// The algorithm's position mark (0 for [`Receipt::NONE`]).
    ///
    /// ```
    /// use sluicegate::algorithms::Receipt;
    /// assert_eq!(Receipt::NONE.mark(), 0);
    /// ```
    #[inline]
    pub const fn mark(&self) -> i64 {
        self.mark
    }

    /// What the grant consumed, in the algorithm's unit (0 for [`Receipt::NONE`]).
    ///
    /// ```
    /// use sluicegate::algorithms::Receipt;
    /// assert_eq!(Receipt::new(5, 9).charge(), 9);
    /// ```
    #[inline]
    pub const fn charge(&self) -> u64 {
        self.charge
    }

    /// The stored permits the grant spent (0 unless recorded).
    ///
    /// ```
    /// use sluicegate::algorithms::Receipt;
    /// assert_eq!(Receipt::new(5, 9).stored_spent(), 0.0);
    /// ```
    #[inline]
    pub const fn stored_spent(&self) -> f64 {
        self.spent
    }

    /// True if this receipt gives nothing back (it equals [`Receipt::NONE`]).
    ///
    /// ```
    /// use sluicegate::algorithms::Receipt;
    /// assert!(Receipt::default().is_none());
    /// assert!(!Receipt::new(0, 1).is_none());
    /// ```
    #[inline]
    pub fn is_none(&self) -> bool {
        *self == Receipt::NONE
    }
}
