//! The open-fuse-merge-close (OFMC) template abstraction (paper section 3.2, reference 2.1)
//! and its four implementations, one per file.
//!
//! A template answers four local questions about a hop; exploration
//! ([`crate::fusion::explore()`]) asks them bottom-up and records the answers in the memo table.
//! Templates are stateless: whether a plan is still open is a property of the memo entry being
//! extended, which the explorer checks once for every template (so no template can forget the
//! guard, as SystemDS's Cell template does for n-ary ops, reference defect #8).

mod cell;
mod magg;
mod outer;
mod row;

pub use cell::{cell_agg_kind, is_valid_cell_operation, CellAgg, CellTemplate, CellType};
pub use magg::{is_multi_agg_root, is_valid_multi_aggregate, MAggTemplate, MAX_MAGG_AGGREGATES};
pub use outer::OuterTemplate;
pub use row::RowTemplate;

use crate::fusion::dag::FusionDag;
use crate::fusion::memo::{CloseState, TemplateKind};
use crate::hops::HopId;

/// The OFMC conditions of one template type.
///
/// All methods are pure functions of the DAG (sizes included) and may look at any hop, though
/// they only need `h`, its inputs and its consumers in practice.
pub trait Template: Send + Sync {
    /// Which template this is.
    fn kind(&self) -> TemplateKind;

    /// Can a new fused operator of this template start at `h`, covering `h` and reading its
    /// inputs materialized?
    fn open(&self, dag: &FusionDag<'_>, h: HopId) -> bool;

    /// Can an open plan of this template at `input` be extended to its consumer `h`?
    fn fuse(&self, dag: &FusionDag<'_>, h: HopId, input: HopId) -> bool;

    /// Can a plan of this template at `h` (opened at `h` or fused into it) additionally absorb
    /// an open plan at another input `input` of `h`? The explorer also requires `input` to have
    /// an open plan this template can absorb ([`TemplateKind::can_absorb`]).
    fn merge(&self, dag: &FusionDag<'_>, h: HopId, input: HopId) -> bool;

    /// The close state of this template's plans after `h`.
    fn close(&self, dag: &FusionDag<'_>, h: HopId) -> CloseState;
}

static ROW: RowTemplate = RowTemplate;
static CELL: CellTemplate = CellTemplate;
static OUTER: OuterTemplate = OuterTemplate;
static MAGG: MAggTemplate = MAggTemplate;

/// The templates exploration tries to open, in SystemDS's order (Row, Cell, Outer; MultiAgg is
/// never opened, reference 1.4).
pub fn opening_templates() -> [&'static dyn Template; 3] {
    [&ROW, &CELL, &OUTER]
}

/// The template object of a kind.
pub fn template(kind: TemplateKind) -> &'static dyn Template {
    match kind {
        TemplateKind::Row => &ROW,
        TemplateKind::Cell => &CELL,
        TemplateKind::Outer => &OUTER,
        TemplateKind::MAgg => &MAGG,
    }
}

#[cfg(test)]
pub(crate) mod test_util {
    //! A tiny harness for template condition tests: build a DAG, then ask a template; and
    //! the DAGs more than one module's tests share.
    use crate::fusion::dag::FusionDag;
    use crate::hops::{AggOp, BinaryOp, DagBuilder, Direction, HopDag, HopId, UnaryOp};

    /// Builds with `f` (which returns the hops it wants to keep as outputs) and gives the DAG.
    pub fn build(f: impl FnOnce(&mut DagBuilder) -> Vec<HopId>) -> HopDag {
        let mut b = DagBuilder::new();
        let outs = f(&mut b);
        for (i, o) in outs.into_iter().enumerate() {
            b.output(&format!("o{i}"), o).unwrap();
        }
        b.build().unwrap()
    }

    pub fn view(dag: &HopDag) -> FusionDag<'_> {
        FusionDag::new(dag).unwrap()
    }

    /// `sum(X * log(U %*% t(V) + 1e-15))` over an X of `nnz` non-zeros in 2000² cells, rank
    /// 100: the hops `(uv, s)`.
    pub fn outer_log_sum(nnz: u64) -> (HopDag, [HopId; 2]) {
        let mut ids = [HopId(0); 2];
        let dag = build(|b| {
            let x = b.input("X", 2000, 2000, nnz);
            let u = b.input("U", 2000, 100, 200_000);
            let v = b.input("V", 2000, 100, 200_000);
            let vt = b.transpose(v).unwrap();
            let uv = b.matmul(u, vt).unwrap();
            let eps = b.literal_f64(1e-15);
            let p = b.binary(BinaryOp::Add, uv, eps).unwrap();
            let l = b.unary(UnaryOp::Log, p).unwrap();
            let g = b.binary(BinaryOp::Mul, x, l).unwrap();
            let s = b.agg(AggOp::Sum, Direction::Full, g).unwrap();
            ids = [uv, s];
            vec![s]
        });
        (dag, ids)
    }
}
