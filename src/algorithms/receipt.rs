//! What a grant leaves behind so that it can be given back.

use std::sync::Arc;

/// The bookkeeping an algorithm needs to cancel one of its grants later: returned
/// next to the [`Decision`](super::Decision) by
/// [`Algorithm::reserve`](super::Algorithm::reserve) to a caller that keeps it, held
/// by a [`Reservation`](crate::Reservation) (or a keyed async acquire), and handed
/// back to [`Algorithm::cancel`](super::Algorithm::cancel).
///
/// Its fields are the algorithm's own: `mark`, a position in its state right after
/// the grant (e.g. the token bucket's theoretical arrival time), `charge`, how much
/// the grant consumed in the algorithm's unit (e.g. nanoseconds of capacity), and the
/// stored permits it spent, for algorithms whose stored permits are worth more than
/// time alone says (Guava's warm-up). A set of limits ([`AllOf`](super::AllOf),
/// [`Limits`](super::Limits)) keeps no record of its grants: its receipt carries
/// one receipt per member ([`members`](Receipt::members)), so that every grant of a
/// set, not only its latest, can be given back. Nobody else reads them; a remote
/// store carries them to its server and back unchanged.
///
/// A receipt of one limit is three words and clones as a copy; a set's shares its
/// members' receipts behind one allocation, made only when a grant's receipt is
/// asked for.
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
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Receipt {
    mark: i64,
    charge: u64,
    spent: f64,
    members: Option<Arc<[Receipt]>>,
}

impl Receipt {
    /// Nothing to give back.
    pub const NONE: Receipt = Receipt {
        mark: 0,
        charge: 0,
        spent: 0.0,
        members: None,
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
            members: None,
        }
    }

    /// A set's receipt for a grant of `cost` permits: its members' receipts, in the
    /// order of the set's members, which a set's cancel hands to each member.
    /// [`Receipt::NONE`] if no member has anything to give back.
    ///
    /// ```
    /// use sluicegate::algorithms::Receipt;
    /// let set = Receipt::of_members(2, [Receipt::new(7, 2), Receipt::NONE]);
    /// assert_eq!(set.members(), [Receipt::new(7, 2), Receipt::NONE]);
    /// assert_eq!(set.charge(), 2);
    /// assert!(Receipt::of_members(2, [Receipt::NONE, Receipt::NONE]).is_none());
    /// ```
    pub fn of_members(cost: u64, members: impl IntoIterator<Item = Receipt>) -> Self {
        let members: Arc<[Receipt]> = members.into_iter().collect();
        if members.iter().all(Receipt::is_none) {
            return Receipt::NONE;
        }
        Receipt {
            mark: 0,
            charge: cost,
            spent: 0.0,
            members: Some(members),
        }
    }

    /// The same receipt, also recording `permits` stored permits spent.
    ///
    /// ```
    /// use sluicegate::algorithms::Receipt;
    /// assert_eq!(Receipt::new(1, 1).with_stored_spent(0.5).stored_spent(), 0.5);
    /// ```
    #[inline]
    pub fn with_stored_spent(mut self, permits: f64) -> Self {
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

    /// A set's member receipts, in the order of its members (see
    /// [`of_members`](Receipt::of_members)); empty for a receipt of one limit.
    ///
    /// ```
    /// use sluicegate::algorithms::Receipt;
    /// assert!(Receipt::new(1, 1).members().is_empty());
    /// ```
    #[inline]
    pub fn members(&self) -> &[Receipt] {
        self.members.as_deref().unwrap_or(&[])
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
