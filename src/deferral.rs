//! When a block's fusion pays for its compilation (`--jit tiered`): the cost model's saving
//! per run against the compile time of the plan's operators, by the rent-or-buy rule, and
//! the cheap estimates that spare the exact plan search for blocks that would not pay yet.

use crate::error::Error;
use lafuse_compiler::fusion::cost::MachineProfile;
use lafuse_compiler::fusion::{
    self, CostModel, FuseAll, FuseNoRedundancy, FusionDag, PlanSelector, Selection,
};
use lafuse_compiler::hops::HopDag;
use std::sync::OnceLock;

/// A deferred block is fused at the latest once its unfused runs have cost this many times
/// its compilation by the model, whatever saving it expects: the most a model that underrates
/// fusion can cost a run is then bounded. Thirty model compilations are about ten real ones:
/// the model prices a small block's intermediates at memory bandwidth where they stay in
/// cache (GLM's 25-hop CG body at 10000 x 100: 2.1 ms a run modelled, about 0.6 measured).
/// At ten, that body, whose fusion the model expects to save 1 % of it, was compiled at its
/// 20th run for nothing (GLM quick under `--jit tiered`: 46-50 ms against 39-42 unfused).
pub(crate) const UNFUSED_COST_PER_COMPILE: f64 = 30.0;

/// Blocks of more hops than this are estimated before the exact search
/// ([`BlockCosts::worth_estimating`]).
pub(crate) const ESTIMATE_FROM_HOPS: usize = 16;

/// The unfused runs a block that fell due goes on for while its fusion is planned and compiled
/// in the background ([`crate::fused::Fuser::background_lag`]), as compilations' worth of the
/// block's modelled unfused cost. The work is about two compilations (the exact search and one
/// or two operators), on a thread at idle priority that gets a core only while the run leaves
/// one free (a matrix-vector product takes both), and the model prices a small block's
/// intermediates at memory bandwidth where they stay in cache (GLM's CG body: 2.1 ms a run
/// modelled, about 0.6 measured): a lag of two compilations made L2SVM at 10000 x 100 wait
/// for its background fusion (sparse, 12.9 ms against 9.1 unfused), sixteen did not. A longer
/// lag forgoes at most that many compilations' worth of the fusion's saving.
pub(crate) const BACKGROUND_LAG_COMPILATIONS: f64 = 16.0;

/// A due block's background work starts `lag / BACKGROUND_START_DIVISOR` runs after it fell
/// due, its result installed at the end of the lag as before: three quarters of the lag (12
/// compilations' worth) still cover the work, and a loop that ends within the first quarter
/// never pays for it. Counts only, as the lag: the runs at which a plan changes are the same.
pub(crate) const BACKGROUND_START_DIVISOR: u64 = 4;

/// The most unfused runs a block waits for its background fusion: a block that cheap runs
/// unfused until then, its fused plan ready long before.
pub(crate) const MAX_BACKGROUND_LAG: u64 = 1 << 16;

/// What the last plan search of a deferred block expects of its fusion, under the weighing
/// model ([`weighing_model`]).
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) struct Expected {
    /// Seconds a run the fused plan saves against the unfused one.
    pub(crate) saving: f64,
    /// Its fused operators.
    pub(crate) operators: usize,
}

/// The runs within which fusing a due block on the run's own thread must pay back its stall
/// for [`fusing_now_saves`].
pub(crate) const FOREGROUND_PAYBACK_RUNS: u64 = 4;

/// Whether a block that fell due is better fused on the run's own thread, now, than on a
/// background thread over a lag of `lag` runs: where the expected saving of the next
/// [`FOREGROUND_PAYBACK_RUNS`] runs (of the lag's, if fewer) pays back the stall, a
/// compilation per operator (the plan search beside them is a small part of one: 0.03-0.64
/// ms, [`BlockCosts::worth_estimating`] and [`BlockCosts::estimated`]). The lag is generous (it
/// hides the work however busy the cores are), and for a block whose fusion saves a large part
/// of its run it forgoes many times the stall: ALS-CG's blocks at quick scale save 0.6-0.8 ms
/// of 0.6-0.8 a run by the model, with lags of 20-28 runs (fused so, ALS-CG sparse 146 → 122
/// ms, dense 198 → 184), and `t(X) %*% (w * (X %*% v))` over a 1e5 x 1000 CSR matrix of
/// sparsity 0.01 forwent 0.9 ms a run (measured) over 15 runs to hide a 2 ms compilation. How
/// many runs a loop makes after its block falls due cannot be told then: the bound on the
/// payback keeps a block whose fusion saves a small part of its run in the background, where
/// it was due late in a loop that ends soon after (L2SVM's line search: 0.09 ms saved a run,
/// due at run 12 with a lag of 138; fused now, L2SVM at 10000 x 100 took 9.2 ms against 5.6).
/// A comparison of the model's figures and counts, never of timings, so the plan still changes
/// at a run that depends on sizes and counts only.
pub(crate) fn fusing_now_saves(lag: u64, expected: Expected, per_operator: f64) -> bool {
    let stall = expected.operators as f64 * per_operator;
    lag.min(FOREGROUND_PAYBACK_RUNS) as f64 * expected.saving > stall
}

/// The profile `lafuse calibrate` wrote on the project's reference machine (a two-core AMD
/// EPYC slice with AVX2, 2026-11-28; the profile BENCHMARKS.md's sessions 33 on use).
const REFERENCE_PROFILE: &str = include_str!("reference_machine.json");

/// [`REFERENCE_PROFILE`]'s model (`None` only if it failed to parse, which a test rules out).
fn reference_model() -> Option<CostModel> {
    static MODEL: OnceLock<Option<CostModel>> = OnceLock::new();
    *MODEL.get_or_init(|| {
        MachineProfile::from_json(REFERENCE_PROFILE)
            .ok()
            .map(|p| p.model)
    })
}

/// The model the tiered JIT weighs a block's runs against its compilation with. The rent-or-buy
/// rule compares modelled seconds with compile seconds, so the model must price a run in real
/// seconds, which a plan choice (ratios of costs) does not need. SystemDS's constants, the
/// default without a machine profile, price writes at 2 GiB/s, compute at 2 GFLOP/s a core and
/// a multiply-add at 2 FLOP (the kernels run it at a quarter of one): a small block's
/// intermediates look expensive, so its fusion fell due at once (L2SVM at 10000 x 100 compiled
/// three operators that ran twice, 11.7 ms against 8.8 unfused), and a product looks
/// compute-bound, so the fusion that saves a pass over its input was put off (`t(X) %*% (w *
/// (X %*% v))` at 10000 x 1000 ran unfused throughout). A model still holding SystemDS's
/// bandwidths is weighed as the reference machine's calibrated model instead (bandwidths and
/// operation weights together: the weights are FLOPs at the model's compute bandwidth);
/// a model with any bandwidth measured or given (a profile, `--cost`) is weighed as it is.
///
/// Either way values are priced as they are stored ([`CostModel::pricing_stored_values`]):
/// by SystemDS's rule every intermediate is written and computed at its dense cells, so a
/// block over sparse data looked tens of times dearer unfused than it runs, and its fusion
/// fell due at once for no saving (`sum(X * Y * Z)` over three 10000 x 1000 matrices of
/// sparsity 0.01: 19 ms a run by that rule, 0.4 priced as stored, 0.9 measured unfused and
/// fused alike; its first run compiled a Cranelift operator and took 2.5-4.2 ms against
/// 0.9-1.5 unfused).
pub(crate) fn weighing_model(model: &CostModel) -> CostModel {
    let systemds = CostModel::systemds(1);
    let cores = model.compute_bandwidth / systemds.compute_bandwidth;
    let holds_systemds_bandwidths = model.write_bandwidth == systemds.write_bandwidth
        && model.read_bandwidth == systemds.read_bandwidth
        && cores >= 1.0
        && cores.fract() == 0.0;
    let weighed = match reference_model() {
        Some(reference) if holds_systemds_bandwidths => CostModel {
            unknown_sparsity: model.unknown_sparsity,
            ..reference
        },
        _ => *model,
    };
    weighed.pricing_stored_values()
}

/// Executions of a block unfused before its fused plan, saving `saving` seconds a run by the
/// cost model, has paid for `compile` seconds of compilation: the rent-or-buy rule, which
/// spends at most twice the better of fusing at once and never fusing.
pub(crate) fn runs_to_pay(saving: f64, compile: f64) -> u64 {
    if compile <= 0.0 || saving >= compile {
        return 1;
    }
    if saving.is_nan() || saving <= 0.0 {
        return u64::MAX;
    }
    let runs = (compile / saving).ceil();
    if runs >= u64::MAX as f64 {
        u64::MAX
    } else {
        runs as u64
    }
}

/// One block's unfused cost under the model, and the run at which a plan of it pays.
pub(crate) struct BlockCosts<'d> {
    view: FusionDag<'d>,
    /// The block's hops, each on its unfused kernel, in seconds a run.
    unfused: f64,
    /// Seconds of compilation per fused operator.
    per_operator: f64,
}

impl<'d> BlockCosts<'d> {
    /// `None` for a block without matrix hops, which nothing fuses.
    pub(crate) fn new(
        dag: &'d HopDag,
        model: &CostModel,
        per_operator: f64,
    ) -> Result<Option<BlockCosts<'d>>, Error> {
        if !dag.hops.iter().any(|h| h.is_matrix()) {
            return Ok(None);
        }
        let view = FusionDag::new(dag)?;
        let unfused = fusion::cost::cost_of(&view, model, &Selection::default());
        Ok(Some(BlockCosts {
            view,
            unfused,
            per_operator,
        }))
    }

    /// The block's unfused cost a run, in seconds.
    pub(crate) fn unfused(&self) -> f64 {
        self.unfused
    }

    /// The cost of a run of the block under `selection`.
    pub(crate) fn cost_of(&self, model: &CostModel, selection: &Selection) -> f64 {
        fusion::cost::cost_of(&self.view, model, selection)
    }

    /// The first run at which any plan could pay ([`BlockCosts::pays_at`] of a plan of one
    /// operator at the block's floor), with what that plan would save (a bound): no plan
    /// saves more than the unfused cost above the floor (its inputs read once, each operation
    /// computed once, its outputs written), nor compiles fewer than one operator. Sound, and
    /// nearly free once the block is costed (one walk over its hops): a block whose cost is
    /// mostly a pass over a large input that no fusion removes (L2SVM's `X %*% s` and `t(X)
    /// %*% r`) waits for many runs, not for the few its whole cost would allow, before a plan
    /// search that would find nothing to pay.
    pub(crate) fn earliest(&self, model: &CostModel) -> (u64, Expected) {
        let floor = fusion::cost_floor(&self.view, model);
        (self.pays_at(floor, 1), self.expected(floor, 1))
    }

    /// The run at which a plan of `operators` operators costing `fused` a run pays: when its
    /// saving has paid for their compilation, or at the latest when the block's unfused runs
    /// have cost [`UNFUSED_COST_PER_COMPILE`] compilations. The model's saving can be far
    /// below the real one (a Row operator's second pass over its input: 0.2 ms of 171
    /// modelled, 120 ms measured), hence the second bound.
    pub(crate) fn pays_at(&self, fused: f64, operators: usize) -> u64 {
        let compile = self.per_operator * operators as f64;
        let by_saving = runs_to_pay(self.unfused - fused, compile);
        let by_cost = runs_to_pay(self.unfused / UNFUSED_COST_PER_COMPILE, compile);
        by_saving.min(by_cost)
    }

    /// What a plan of `operators` operators costing `fused` a run expects.
    pub(crate) fn expected(&self, fused: f64, operators: usize) -> Expected {
        Expected {
            saving: self.unfused - fused,
            operators,
        }
    }

    /// Whether the block is large enough for [`BlockCosts::estimated`] to spare time: the exact
    /// search of a block of at most [`ESTIMATE_FROM_HOPS`] hops takes about as long as the
    /// estimate (0.03-0.06 ms; `sum(X * Y) + sum(X * Z)`: 0.057 ms), and the heuristic plans
    /// can miss what it finds (there, the MultiAgg that shares `X` and overlaps the two
    /// gathers: 1.2 ms a run against 2.3 for their two Row operators, under the weighing
    /// model), so such a block is searched at once.
    pub(crate) fn worth_estimating(&self) -> bool {
        self.view.order().len() > ESTIMATE_FROM_HOPS
    }

    /// The run at which the better of the fuse-all and fuse-no-redundancy plans would pay
    /// (`u64::MAX` where neither has an operator). Selecting and costing both takes a fifth
    /// of the exact search (L2SVM's 53-hop loop body: 0.07 against 0.64 ms each, on one memo
    /// explored in 0.04 ms), so a block neither would make pay by its next run defers
    /// without the search; the search decides at the run this estimate names. An estimate,
    /// not a bound: where the exact plan would pay earlier, the block fuses that much later,
    /// by at most [`UNFUSED_COST_PER_COMPILE`] compilations' worth of runs.
    pub(crate) fn estimated(&self, model: &CostModel) -> Result<(u64, Option<Expected>), Error> {
        let explored = fusion::explore(
            &self.view,
            &fusion::ExploreOptions {
                prune_dominated: true,
                ..fusion::ExploreOptions::default()
            },
        );
        let mut best = (u64::MAX, None);
        for selector in [&FuseAll as &dyn PlanSelector, &FuseNoRedundancy] {
            let mut memo = explored.clone();
            let selection = selector.select(&self.view, &mut memo)?;
            // An operator per root the selection materializes (the construction may merge
            // or drop a few; counting them would cost more than the selection).
            let operators = selection.roots.len();
            if operators > 0 {
                let fused = fusion::cost::cost_of(&self.view, model, &selection);
                let due = self.pays_at(fused, operators);
                if due < best.0 {
                    best = (due, Some(self.expected(fused, operators)));
                }
            }
        }
        Ok(best)
    }
}

#[cfg(test)]
mod tests {
    use super::{runs_to_pay, weighing_model, BlockCosts, REFERENCE_PROFILE};
    use lafuse_compiler::fusion::cost::MachineProfile;
    use lafuse_compiler::fusion::cplan::construct_cplans;
    use lafuse_compiler::fusion::{plan_fusion, CostBased, CostModel, TemplateKind};
    use lafuse_compiler::hops::{AggOp, BinaryOp, DagBuilder, Direction, HopDag};

    /// `s = sum(X * Y * Z)` over dense `rows` x 1000 inputs: one Cell operator, which fuse-all
    /// and the exact search both pick, saving two intermediates a run.
    fn sum_xyz(rows: u64) -> HopDag {
        sum_xyz_of(rows, rows * 1000)
    }

    /// [`sum_xyz`] over inputs of `nnz` non-zeros each.
    fn sum_xyz_of(rows: u64, nnz: u64) -> HopDag {
        let mut b = DagBuilder::new();
        let [x, y, z] = ["X", "Y", "Z"].map(|n| b.input(n, rows, 1000, nnz));
        let xy = b.binary(BinaryOp::Mul, x, y).unwrap();
        let xyz = b.binary(BinaryOp::Mul, xy, z).unwrap();
        let s = b.agg(AggOp::Sum, Direction::Full, xyz).unwrap();
        b.output("s", s).unwrap();
        b.build().unwrap()
    }

    /// The run the exact search's plan pays at, as `Fuser::fuse` computes it.
    fn exact_due(costs: &BlockCosts<'_>, dag: &HopDag, model: &CostModel) -> u64 {
        let plan = plan_fusion(dag, &CostBased::new(*model)).unwrap();
        let operators = construct_cplans(dag, &plan.memo, &plan.selection)
            .unwrap()
            .operators
            .len();
        costs.pays_at(costs.cost_of(model, &plan.selection), operators)
    }

    /// Where the heuristic plans are the exact one, the estimate names the exact search's run:
    /// at once for a large block, later for a small one (so it defers without the search).
    #[test]
    fn the_estimate_is_the_exact_run_where_fuse_all_is_the_optimum() {
        let model = CostModel::default();
        for (rows, at_once) in [(100_000, true), (10, false)] {
            let dag = sum_xyz(rows);
            let costs = BlockCosts::new(&dag, &model, 1e-3).unwrap().unwrap();
            let (estimated, _) = costs.estimated(&model).unwrap();
            assert_eq!(estimated, exact_due(&costs, &dag, &model), "{rows} rows");
            assert_eq!(estimated == 1, at_once, "{rows} rows: run {estimated}");
            assert!(costs.earliest(&model).0 <= estimated, "{rows} rows");
        }
    }

    /// SystemDS's constants (for any number of cores) are weighed as the reference machine's
    /// calibrated model, a profile `lafuse calibrate` measured; a model with a bandwidth of its
    /// own is weighed as it is. Both price values as they are stored.
    #[test]
    fn only_systemds_constants_are_weighed_as_the_reference_machine() {
        let reference = MachineProfile::from_json(REFERENCE_PROFILE).unwrap();
        assert_eq!(reference.provenance.source, "measured by lafuse calibrate");
        for cores in [1, 2, 16] {
            let model = CostModel::systemds(cores);
            assert_eq!(
                weighing_model(&model),
                reference.model.pricing_stored_values(),
                "{cores} cores"
            );
        }
        for name in ["write_bandwidth", "read_bandwidth", "compute_bandwidth"] {
            let mut model = CostModel::default();
            model.set(name, 1.0e10).unwrap();
            assert_eq!(
                weighing_model(&model),
                model.pricing_stored_values(),
                "{name} given"
            );
        }
        let mut model = CostModel::default();
        model
            .set(
                "compute_bandwidth",
                1.5 * CostModel::default().compute_bandwidth,
            )
            .unwrap();
        assert_eq!(
            weighing_model(&model),
            model.pricing_stored_values(),
            "a compute bandwidth of 1.5 cores"
        );
        assert_eq!(
            weighing_model(&reference.model),
            reference.model.pricing_stored_values()
        );
    }

    /// Weighed with values priced as stored, `sum(X * Y * Z)` over sparse inputs costs a run
    /// what its non-zeros cost, and its fusion no longer falls due at once for the dense
    /// intermediates SystemDS's rule charges it (10000 x 1000 at sparsity 0.01, as `lafuse
    /// bench`'s micro pattern at 1e4 rows; a Cranelift operator's millisecond of compilation).
    /// Over dense inputs nothing changes.
    #[test]
    fn a_sparse_block_is_weighed_at_its_non_zeros() {
        let model = weighing_model(&CostModel::default());
        let dense_rule = CostModel {
            stored_values: false,
            ..model
        };
        let sparse = sum_xyz_of(10_000, 100_000);
        let costs = BlockCosts::new(&sparse, &model, 1e-3).unwrap().unwrap();
        let by_dense_rule = BlockCosts::new(&sparse, &dense_rule, 1e-3)
            .unwrap()
            .unwrap();
        assert!(
            costs.unfused() * 20.0 < by_dense_rule.unfused(),
            "{} against {}",
            costs.unfused(),
            by_dense_rule.unfused()
        );
        assert_eq!(exact_due(&by_dense_rule, &sparse, &dense_rule), 1);
        assert!(exact_due(&costs, &sparse, &model) > 1);
        assert!(costs.earliest(&model).0 <= exact_due(&costs, &sparse, &model));
        let dense = sum_xyz(10_000);
        let (priced, by_cells) = (
            BlockCosts::new(&dense, &model, 1e-3).unwrap().unwrap(),
            BlockCosts::new(&dense, &dense_rule, 1e-3).unwrap().unwrap(),
        );
        assert_eq!(priced.unfused(), by_cells.unfused());
        assert_eq!(
            priced.estimated(&model).unwrap().0,
            by_cells.estimated(&dense_rule).unwrap().0
        );
    }

    /// `sum(t(X) %*% (W * (X %*% V)))` over a CSR `X` (1e5 x 1e3 at sparsity 0.1, two columns
    /// of `V` and `W`: `lafuse bench`'s `row_mm`): the Row operator that reads `X` once, its
    /// transpose fused (never computed: the operator adds the outer products of `X`'s rows),
    /// costs about half the unfused block, which reads `X` twice, and pays at once. Its
    /// transpose was priced at every cell of `X`, 1e8 FLOPs, so the operator looked five times
    /// dearer than the unfused block and ran fused only after UNFUSED_COST_PER_COMPILE's
    /// bound (measured: 11.7-12.7 ms a run fused by LLVM, 13.6 unfused).
    #[test]
    fn a_row_operator_over_a_sparse_input_is_weighed_at_its_non_zeros() {
        let mut b = DagBuilder::new();
        let x = b.input("X", 100_000, 1000, 10_000_000);
        let v = b.input("V", 1000, 2, 2000);
        let w = b.input("W", 100_000, 2, 200_000);
        let xv = b.matmul(x, v).unwrap();
        let wxv = b.binary(BinaryOp::Mul, w, xv).unwrap();
        let tx = b.transpose(x).unwrap();
        let p = b.matmul(tx, wxv).unwrap();
        let s = b.agg(AggOp::Sum, Direction::Full, p).unwrap();
        b.output("s", s).unwrap();
        let dag = b.build().unwrap();
        let model = weighing_model(&CostModel::default());
        let costs = BlockCosts::new(&dag, &model, 1e-3).unwrap().unwrap();
        let plan = plan_fusion(&dag, &CostBased::new(model)).unwrap();
        assert!(
            plan.selection
                .roots
                .values()
                .any(|e| e.template == TemplateKind::Row),
            "{}",
            plan.selection.explain()
        );
        let fused = costs.cost_of(&model, &plan.selection);
        assert!(
            fused < 0.7 * costs.unfused(),
            "fused {fused} against {}",
            costs.unfused()
        );
        assert_eq!(exact_due(&costs, &dag, &model), 1);
    }

    /// Priced as stored, `sum(X * Y) + sum(X * Z)` over a sparse X and dense Y and Z gathers
    /// 8 % of Y's and Z's lines: the unfused products each pay theirs, the MultiAgg the exact
    /// search finds pays the larger of the two once, at most half the unfused block, and it
    /// pays for its compilation at once (measured: 1.3-1.9 ms a run fused, 3-4 unfused). The
    /// block is small enough to be searched without the heuristic estimate, whose two Row
    /// operators would not pay before run 7.
    #[test]
    fn an_operator_pays_the_largest_of_its_gathers_once() {
        let mut b = DagBuilder::new();
        let x = b.input("X", 10_000, 1000, 100_000);
        let [y, z] = ["Y", "Z"].map(|n| b.input(n, 10_000, 1000, 10_000_000));
        let xy = b.binary(BinaryOp::Mul, x, y).unwrap();
        let xz = b.binary(BinaryOp::Mul, x, z).unwrap();
        let s1 = b.agg(AggOp::Sum, Direction::Full, xy).unwrap();
        let s2 = b.agg(AggOp::Sum, Direction::Full, xz).unwrap();
        let s = b.binary(BinaryOp::Add, s1, s2).unwrap();
        b.output("s", s).unwrap();
        let dag = b.build().unwrap();
        let model = weighing_model(&CostModel::default());
        let costs = BlockCosts::new(&dag, &model, 1e-3).unwrap().unwrap();
        let plan = plan_fusion(&dag, &CostBased::new(model)).unwrap();
        assert!(plan
            .selection
            .roots
            .values()
            .all(|e| e.template == TemplateKind::MAgg));
        let fused = costs.cost_of(&model, &plan.selection);
        assert!(
            2.0 * fused < costs.unfused(),
            "{fused} against {}",
            costs.unfused()
        );
        assert_eq!(exact_due(&costs, &dag, &model), 1);
        assert!(!costs.worth_estimating());
        assert!(costs.estimated(&model).unwrap().0 > 1);
    }

    /// The rent-or-buy rule: fuse at once when one run saves the compile time, never when
    /// the model expects no saving, else after as many runs as pay for the compilation.
    #[test]
    fn runs_to_pay_is_the_rent_or_buy_point() {
        assert_eq!(runs_to_pay(2e-3, 1e-3), 1);
        assert_eq!(runs_to_pay(1e-3, 1e-3), 1);
        assert_eq!(runs_to_pay(1e-5, 0.0), 1);
        assert_eq!(runs_to_pay(4e-4, 1e-3), 3);
        assert_eq!(runs_to_pay(1e-4, 1e-3), 10);
        assert_eq!(runs_to_pay(0.0, 1e-3), u64::MAX);
        assert_eq!(runs_to_pay(-1e-3, 1e-3), u64::MAX);
        assert_eq!(runs_to_pay(f64::NAN, 1e-3), u64::MAX);
        assert_eq!(runs_to_pay(1e-300, 1.0), u64::MAX);
    }
}
