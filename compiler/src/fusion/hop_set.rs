//! A set of hops as flags over a DAG's arena, for the cost walks the plan search runs once per
//! plan it costs: membership and insertion by index, where a `BTreeSet` allocated a node per
//! hop and searched a tree per test (a third of the search's time).

use crate::fusion::dag::FusionDag;
use crate::hops::HopId;

/// Hops of one DAG, by [`HopId::index`] (below [`FusionDag::arena_len`]).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct HopSet {
    flags: Vec<bool>,
}

impl HopSet {
    /// The empty set, sized for `dag`'s hops.
    pub fn new(dag: &FusionDag<'_>) -> HopSet {
        HopSet {
            flags: vec![false; dag.arena_len()],
        }
    }

    /// The set of `hops`.
    pub fn of(dag: &FusionDag<'_>, hops: impl IntoIterator<Item = HopId>) -> HopSet {
        let mut set = HopSet::new(dag);
        for h in hops {
            set.insert(h);
        }
        set
    }

    /// Whether `h` is in the set.
    pub fn contains(&self, h: HopId) -> bool {
        self.flags.get(h.index()).copied().unwrap_or(false)
    }

    /// Adds `h`; whether it was not in the set before (as `BTreeSet::insert`).
    pub fn insert(&mut self, h: HopId) -> bool {
        let i = h.index();
        if i >= self.flags.len() {
            // A hop of a DAG grown since the set was sized (never during one costing).
            self.flags.resize(i + 1, false);
        }
        !std::mem::replace(&mut self.flags[i], true)
    }

    /// Removes `h`.
    pub fn remove(&mut self, h: HopId) {
        if let Some(f) = self.flags.get_mut(h.index()) {
            *f = false;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::hops::{BinaryOp, DagBuilder};

    #[test]
    fn a_hop_set_inserts_tests_and_removes_as_a_btree_set_does() {
        let mut b = DagBuilder::new();
        let x = b.input("X", 10, 10, 100);
        let y = b.binary(BinaryOp::Mul, x, x).unwrap();
        b.output("y", y).unwrap();
        let dag = b.build().unwrap();
        let view = FusionDag::new(&dag).unwrap();
        let mut set = HopSet::new(&view);
        assert!(!set.contains(x));
        assert!(set.insert(x));
        assert!(!set.insert(x));
        assert!(set.contains(x) && !set.contains(y));
        set.remove(x);
        assert!(!set.contains(x));
        assert_eq!(HopSet::of(&view, [y]), {
            let mut s = HopSet::new(&view);
            s.insert(y);
            s
        });
        // Past the arena (a hop id the set was not sized for): absent, and insertable.
        let far = HopId(1000);
        assert!(!set.contains(far));
        assert!(set.insert(far) && set.contains(far));
    }
}
