//! The fusion optimizer's read-only view of a HOP DAG: the reachable hops in bottom-up order,
//! each hop's consumers, and the shape predicates the template conditions are written in
//! (SystemDS's `HopRewriteUtils`/`TemplateUtils` helpers, reference section 3 preamble).
//!
//! Every predicate treats an unknown size conservatively: it answers `false` whenever the answer
//! would depend on a size that is not known, so no fusion decision ever rests on a guess
//! (SystemDS instead lets `-1` count as "not 1", DESIGN section 2 makes sizes always known for
//! us, and an unknown size must then only cost fusion opportunities, never correctness).

use crate::error::{CompileError, Result};
use crate::hops::{verify, BinaryOp, DataGenOp, Direction, Hop, HopDag, HopId, OpKind, ReorgOp};

/// A verified HOP DAG together with what every fusion pass needs to know about its structure.
///
/// Only hops reachable from the roots take part in fusion; dead hops are ignored.
#[derive(Clone, Debug)]
pub struct FusionDag<'a> {
    dag: &'a HopDag,
    order: Vec<HopId>,
    consumers: Vec<Vec<HopId>>,
    reachable: Vec<bool>,
    /// Per hop: its sub-DAG holds an outer-product-like multiply (precomputed bottom-up so
    /// the Outer template's checks stay linear over the DAG).
    has_outer_product: Vec<bool>,
    /// Per hop: a transpose that products read in place ([`FusionDag::is_read_in_place`]).
    read_in_place: Vec<bool>,
}

impl<'a> FusionDag<'a> {
    /// Verifies `dag` and computes the bottom-up order and the consumers of every hop.
    ///
    /// A DAG that fails verification is a user error (an embedder handed in a broken DAG);
    /// DAGs built by lafuse's own construction are verified already and always pass.
    pub fn new(dag: &'a HopDag) -> Result<FusionDag<'a>> {
        verify(dag).map_err(|e| {
            CompileError::at(
                crate::error::DagError::Fusion(e),
                crate::span::Span::default(),
            )
        })?;
        let order = crate::hops::linearize(dag);
        let mut reachable = vec![false; dag.len()];
        for &id in &order {
            reachable[id.index()] = true;
        }
        let mut consumers: Vec<Vec<HopId>> = vec![Vec::new(); dag.len()];
        for &id in &order {
            for &input in &dag.hop(id).inputs {
                let list = &mut consumers[input.index()];
                // Distinct consumers: `X * X` reads X twice within one operator, which is no
                // reason to materialize X (paper section 4.1 counts consumers, not edges).
                // Hops are visited one at a time, so a repeat of `id` is the list's last entry
                // (a search of the whole list made a hop read by n others cost O(n^2)).
                if list.last() != Some(&id) {
                    list.push(id);
                }
            }
        }
        for list in &mut consumers {
            list.sort();
        }
        let mut view = FusionDag {
            dag,
            order,
            consumers,
            reachable,
            has_outer_product: vec![false; dag.len()],
            read_in_place: vec![false; dag.len()],
        };
        for i in 0..view.order.len() {
            let h = view.order[i];
            let below = view
                .inputs(h)
                .iter()
                .any(|i| view.has_outer_product[i.index()]);
            view.has_outer_product[h.index()] = below || view.is_outer_product_like_mm(h);
        }
        for i in 0..view.order.len() {
            let h = view.order[i];
            view.read_in_place[h.index()] = view.every_product_reads_in_place(h);
        }
        Ok(view)
    }

    /// Whether `t` is a transpose whose every consumer is a product `t %*% B` (`B` not `t`)
    /// that reads the matrix under it in place, whatever the plan: unfused, as a product that
    /// reads its left operand transposed (`tsmm` when `B` is that matrix); as a Row operator's
    /// final `t(X) %*% B`, which reads the rows of `X`; and as an Outer operator's final
    /// `t(U) %*% W` only where `U` is the left factor of `W`'s outer product (another left
    /// operand would be read materialized, so a product that might become such an operator
    /// disqualifies `t`). Such a transpose is never computed unless it is fused (the
    /// executor's side of this is `transpose_products` in the root crate's `compile.rs`); the
    /// cost model charges its readers the matrix under it instead (SystemDS's cost model
    /// treats the Row case alike, reference 4.9 "implicitly fused").
    ///
    /// Only transposes no template computes as an operator's root: not a row vector (a Cell
    /// operator's output) nor the transpose of a product (an Outer operator's left product).
    /// Whether such a transpose is read in place then depends on the DAG alone, never on
    /// the plan, so each plan partition is still costed on its own.
    fn every_product_reads_in_place(&self, t: HopId) -> bool {
        if !self.is_transpose(t) || !self.dims_known(t) || self.is_row_vector(t) {
            return false;
        }
        let under = self.inputs(t)[0];
        if self.is_matmul(under) {
            return false;
        }
        let consumers = self.consumers(t);
        !consumers.is_empty()
            && consumers.iter().all(|&mm| {
                let ins = self.inputs(mm);
                self.is_matmul(mm)
                    && ins[0] == t
                    && ins[1] != t
                    && (!self.contains_outer_product(ins[1], Some(t))
                        || self.has_outer_product_of_left_factor(ins[1], under))
            })
    }

    /// A transpose that every consumer reads in place as a product's left operand, so that
    /// it is computed only where an operator fuses it ([`FusionDag::every_product_reads_in_place`]).
    pub fn is_read_in_place(&self, id: HopId) -> bool {
        self.read_in_place.get(id.index()).copied().unwrap_or(false)
    }

    /// The underlying DAG.
    pub fn dag(&self) -> &'a HopDag {
        self.dag
    }

    /// The hop with this id.
    pub fn hop(&self, id: HopId) -> &'a Hop {
        self.dag.hop(id)
    }

    /// The inputs of a hop, in the order documented on [`OpKind`].
    pub fn inputs(&self, id: HopId) -> &'a [HopId] {
        &self.dag.hop(id).inputs
    }

    /// Input `pos` of hop `id`, if it has that many inputs.
    pub fn input(&self, id: HopId, pos: usize) -> Option<HopId> {
        self.dag.hop(id).inputs.get(pos).copied()
    }

    /// The size of the underlying DAG's arena: every hop's [`HopId::index`] is below it (for
    /// flags indexed by hop).
    pub fn arena_len(&self) -> usize {
        self.consumers.len()
    }

    /// The reachable hops, every input before its users (the order exploration walks).
    pub fn order(&self) -> &[HopId] {
        &self.order
    }

    /// The distinct reachable consumers of a hop, ascending by id.
    pub fn consumers(&self, id: HopId) -> &[HopId] {
        &self.consumers[id.index()]
    }

    /// The number of distinct reachable consumers of a hop.
    pub fn num_consumers(&self, id: HopId) -> usize {
        self.consumers[id.index()].len()
    }

    /// Whether some root reaches this hop.
    pub fn is_reachable(&self, id: HopId) -> bool {
        self.reachable.get(id.index()).copied().unwrap_or(false)
    }

    /// The op of a hop.
    pub fn op(&self, id: HopId) -> &'a OpKind {
        &self.dag.hop(id).op
    }

    /// `(rows, cols)` of a matrix hop when both are known (`None` for scalars).
    pub fn dims(&self, id: HopId) -> Option<(u64, u64)> {
        let h = self.hop(id);
        if h.is_matrix() {
            h.dims()
        } else {
            None
        }
    }

    /// Whether a hop is a scalar.
    pub fn is_scalar(&self, id: HopId) -> bool {
        self.hop(id).is_scalar()
    }

    /// Whether a hop is a matrix (of any, possibly unknown, size).
    pub fn is_matrix(&self, id: HopId) -> bool {
        self.hop(id).is_matrix()
    }

    /// A matrix with known sizes.
    pub fn dims_known(&self, id: HopId) -> bool {
        self.dims(id).is_some()
    }

    /// Known column vector: `m×1` with `m > 1`.
    pub fn is_col_vector(&self, id: HopId) -> bool {
        matches!(self.dims(id), Some((r, 1)) if r > 1)
    }

    /// Known row vector: `1×n` with `n > 1`.
    pub fn is_row_vector(&self, id: HopId) -> bool {
        matches!(self.dims(id), Some((1, c)) if c > 1)
    }

    /// Known row or column vector (a 1×1 matrix is neither).
    pub fn is_vector(&self, id: HopId) -> bool {
        self.is_col_vector(id) || self.is_row_vector(id)
    }

    /// A scalar, or a matrix of known size that is a vector or 1×1 (what broadcasts against a
    /// matrix in a cell-wise operation).
    pub fn is_vector_or_scalar(&self, id: HopId) -> bool {
        self.is_scalar(id) || matches!(self.dims(id), Some((r, c)) if r == 1 || c == 1)
    }

    /// Known "true" matrix: more than one row and more than one column (SystemDS `isMatrix`).
    pub fn is_full_matrix(&self, id: HopId) -> bool {
        matches!(self.dims(id), Some((r, c)) if r > 1 && c > 1)
    }

    /// A known 1×1 matrix.
    pub fn is_1x1(&self, id: HopId) -> bool {
        self.dims(id) == Some((1, 1))
    }

    /// Number of rows when known (scalars: `None`).
    pub fn rows(&self, id: HopId) -> Option<u64> {
        self.dims(id).map(|d| d.0)
    }

    /// Number of columns when known (scalars: `None`).
    pub fn cols(&self, id: HopId) -> Option<u64> {
        self.dims(id).map(|d| d.1)
    }

    /// `t(X)`.
    pub fn is_transpose(&self, id: HopId) -> bool {
        matches!(self.op(id), OpKind::Reorg(ReorgOp::Transpose))
    }

    /// `A %*% B`.
    pub fn is_matmul(&self, id: HopId) -> bool {
        matches!(self.op(id), OpKind::MatMul)
    }

    /// An element-wise binary operator.
    pub fn binary_op(&self, id: HopId) -> Option<BinaryOp> {
        match self.op(id) {
            OpKind::Binary(op) => Some(*op),
            _ => None,
        }
    }

    /// The literal value of a scalar hop as a double.
    pub fn literal_f64(&self, id: HopId) -> Option<f64> {
        self.hop(id).literal().and_then(|l| l.as_f64())
    }

    /// An aggregation's direction, if the hop is one.
    pub fn agg_direction(&self, id: HopId) -> Option<Direction> {
        match self.op(id) {
            OpKind::AggUnary { dir, .. } => Some(*dir),
            _ => None,
        }
    }

    /// Outer-product-like matrix multiply `U(m×k) %*% V'(k×n)` with `k < m` and `k < n`, all
    /// sizes known (reference 3, `isOuterProductLikeMM`).
    pub fn is_outer_product_like_mm(&self, id: HopId) -> bool {
        if !self.is_matmul(id) {
            return false;
        }
        let (a, b) = (self.inputs(id)[0], self.inputs(id)[1]);
        match (self.dims(id), self.dims(a), self.dims(b)) {
            (Some(_), Some((ar, ac)), Some((br, bc))) => ar > ac && br < bc,
            _ => false,
        }
    }

    /// Outer broadcasting of a column vector with a row vector (`m×1 op 1×n → m×n`, SystemDS's
    /// `outer(a, b, op)`).
    pub fn is_outer_binary(&self, id: HopId) -> bool {
        if self.binary_op(id).is_none() {
            return false;
        }
        let (a, b) = (self.inputs(id)[0], self.inputs(id)[1]);
        self.is_col_vector(a) && self.is_row_vector(b)
    }

    /// Single-column indexing over all rows `X[, j]` (or `X[1:nrow(X), j:j]`), the input's
    /// column count known (reference 3.1, Cell open). The row range must cover every row because
    /// the fused lookup `X[rix, j]` uses the operator's own row index.
    pub fn is_single_column_indexing(&self, id: HopId) -> bool {
        if !matches!(self.op(id), OpKind::Index) {
            return false;
        }
        let x = self.inputs(id)[0];
        match (self.dims(x), self.dims(id)) {
            (Some((xr, _)), Some((r, 1))) => r == xr && self.covers_all_rows(id),
            _ => false,
        }
    }

    /// Column-range indexing `X[, 1:k]` over all rows (reference 3, `isColumnRangeIndexing`):
    /// the column lower bound is the literal 1 and the upper bound a literal.
    pub fn is_column_range_indexing(&self, id: HopId) -> bool {
        if !matches!(self.op(id), OpKind::Index) {
            return false;
        }
        let ins = self.inputs(id);
        let (cl, cu) = (self.literal_f64(ins[3]), self.literal_f64(ins[4]));
        match (self.dims(ins[0]), self.dims(id)) {
            (Some((xr, _)), Some((r, _))) => {
                r == xr && self.covers_all_rows(id) && cl == Some(1.0) && cu.is_some()
            }
            _ => false,
        }
    }

    /// The row bounds of an indexing hop are literals `1..nrow(X)`.
    fn covers_all_rows(&self, id: HopId) -> bool {
        let ins = self.inputs(id);
        let nrow = self.rows(ins[0]).map(|r| r as f64);
        self.literal_f64(ins[1]) == Some(1.0) && nrow.is_some() && self.literal_f64(ins[2]) == nrow
    }

    /// `seq(from, to, incr)` with literal parameters.
    pub fn is_literal_seq(&self, id: HopId) -> bool {
        matches!(self.op(id), OpKind::DataGen(DataGenOp::Seq))
            && self
                .inputs(id)
                .iter()
                .all(|&i| self.literal_f64(i).is_some())
    }

    /// Every consumer of `id` is a unary op or a binary op (with `id` as right operand if
    /// `only_rhs`), the condition under which a literal `seq` can be fused as `from + i·incr`.
    pub fn has_only_unary_binary_consumers(&self, id: HopId, only_rhs: bool) -> bool {
        self.consumers(id).iter().all(|&c| match self.op(c) {
            OpKind::Unary(_) => true,
            OpKind::Binary(_) => !only_rhs || self.inputs(c)[1] == id,
            _ => false,
        })
    }

    /// Whether `target` is `root` or one of its (transitive) inputs.
    pub fn contains(&self, root: HopId, target: HopId) -> bool {
        self.find(root, &mut |h| h == target)
    }

    /// Whether the sub-DAG under `root` (inclusive) holds an outer-product-like matrix multiply;
    /// with `probe`, one that reads `probe` directly up to transposes (`X`, `t(X)`) (the `U`/`V` of a final
    /// `W %*% V` of the Outer template, reference 3.4).
    pub fn contains_outer_product(&self, root: HopId, probe: Option<HopId>) -> bool {
        let Some(p) = probe else {
            return self
                .has_outer_product
                .get(root.index())
                .copied()
                .unwrap_or(false);
        };
        if !self.contains_outer_product(root, None) {
            return false;
        }
        self.find(root, &mut |h| {
            self.is_outer_product_like_mm(h)
                && self
                    .inputs(h)
                    .iter()
                    .any(|&i| self.strip_transposes(i) == self.strip_transposes(p))
        })
    }

    /// Whether some outer-product-like multiply at or below `root` has `u` as its left factor
    /// (`u %*% t(V)`, `u` itself, not a transpose of it).
    pub fn has_outer_product_of_left_factor(&self, root: HopId, u: HopId) -> bool {
        self.contains_outer_product(root, None)
            && self.find(root, &mut |h| {
                self.is_outer_product_like_mm(h) && self.inputs(h)[0] == u
            })
    }

    /// The hop under any chain of transposes (`t(t(X))` → `X`).
    pub fn strip_transposes(&self, mut id: HopId) -> HopId {
        while self.is_transpose(id) {
            id = self.inputs(id)[0];
        }
        id
    }

    /// Depth-first search below `root` (inclusive), each hop visited once.
    fn find(&self, root: HopId, pred: &mut dyn FnMut(HopId) -> bool) -> bool {
        let mut seen = vec![false; self.dag.len()];
        let mut stack = vec![root];
        while let Some(h) = stack.pop() {
            if std::mem::replace(&mut seen[h.index()], true) {
                continue;
            }
            if pred(h) {
                return true;
            }
            stack.extend(self.inputs(h).iter().copied());
        }
        false
    }
}

/// SystemDS `isSkinnyRightHandSide(m1r, m1c, m2r, m2c)`: the product of an `m1r×m1c` and an
/// `m2r×m2c` matrix has between 2 and 63 columns and fewer columns than either row count, so
/// one row of the result fits a small vector (reference 3 preamble).
pub fn is_skinny_rhs(m1r: u64, _m1c: u64, m2r: u64, m2c: u64) -> bool {
    m1r > m2c && m2r > m2c && m2c > 1 && m2c < 64
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::hops::{BinaryOp, DagBuilder};

    #[test]
    fn consumers_are_distinct_and_reachable_only() {
        let mut b = DagBuilder::new();
        let x = b.input("X", 10, 10, 100);
        let sq = b.binary(BinaryOp::Mul, x, x).unwrap();
        let _dead = b.unary(crate::hops::UnaryOp::Exp, x).unwrap();
        b.output("Y", sq).unwrap();
        let dag = b.build().unwrap();
        let f = FusionDag::new(&dag).unwrap();
        assert_eq!(f.consumers(x), &[sq]);
        assert_eq!(f.num_consumers(sq), 1);
        assert!(!f.is_reachable(_dead));
    }

    #[test]
    fn shape_predicates_are_conservative_about_unknown_sizes() {
        let mut b = DagBuilder::new();
        let u = b.input_with("U", None, Some(1), None);
        let v = b.input("v", 7, 1, 7);
        b.output("U", u).unwrap();
        b.output("v", v).unwrap();
        let dag = b.build().unwrap();
        let f = FusionDag::new(&dag).unwrap();
        assert!(!f.is_col_vector(u));
        assert!(!f.is_vector_or_scalar(u));
        assert!(f.is_col_vector(v));
        assert!(!f.is_row_vector(v));
    }

    #[test]
    fn outer_product_like_mm_needs_a_small_common_dimension() {
        let mut b = DagBuilder::new();
        let u = b.input("U", 1000, 10, 10_000);
        let v = b.input("V", 2000, 10, 20_000);
        let vt = b.transpose(v).unwrap();
        let uv = b.matmul(u, vt).unwrap();
        let ut = b.transpose(u).unwrap();
        let inner = b.matmul(ut, u).unwrap();
        b.output("A", uv).unwrap();
        b.output("B", inner).unwrap();
        let dag = b.build().unwrap();
        let f = FusionDag::new(&dag).unwrap();
        assert!(f.is_outer_product_like_mm(uv));
        assert!(!f.is_outer_product_like_mm(inner));
        assert!(f.contains_outer_product(uv, Some(v)));
        assert!(f.contains_outer_product(uv, Some(u)));
        assert!(!f.contains_outer_product(inner, None));
    }

    #[test]
    fn skinny_rhs_bounds() {
        assert!(is_skinny_rhs(1000, 100, 100, 2));
        assert!(is_skinny_rhs(1000, 100, 100, 63));
        assert!(!is_skinny_rhs(1000, 100, 100, 64));
        assert!(!is_skinny_rhs(1000, 100, 100, 1));
    }
}
