//! A Cell, MultiAgg, Outer or Row operator compiled with Cranelift: the plan's analysis (the
//! skeleton's spec, what each input is read as), its entry points (the one for the expected
//! main-input format now, any other on the first call that needs it), and its calls through
//! the skeletons, with the LLVM backend's rule for skipping a sparse main input's zeros.

use super::cell::{self, CellLike, FULL_LANES, LANES};
use super::jit::{self, Code};
use super::outer::{self, Visit};
use super::row;
use crate::backend::{CodegenError, Executable, Internal, MainFormat, Operand, Unsupported};
use crate::plan_info::{outer_analysis, transposed_frame, used_mask, OuterInputs};
use crate::row_plan::{self, RowInfo};
use crate::zero_cells::{self, InputBound};
use lafuse_compiler::fusion::cplan::{CPlan, TemplateSpec};
use lafuse_runtime::{Matrix, ValueRange};
use lafuse_skeletons::abi::KernelFn;
use lafuse_skeletons::{
    cell as sk_cell, magg as sk_magg, outer as sk_outer, row as sk_row, CellKernels, CellKind,
    CellSpec, EntryError, Input, LazyEntry, MAggKernels, MAggSpec, OuterKernels, OuterSpec,
    OuterTiles, SkeletonError,
};
use std::fmt;
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

/// Largest operator body compiled (the LLVM backend's limit, for the same reason: past it the
/// compile time grows with the chain while fusion saves little more).
pub const MAX_BODY_NODES: usize = 20_000;

/// What the operator's skeleton needs, and what its entry points compute.
enum Kind {
    Cell(CellSpec, CellLike),
    MAgg(MAggSpec, CellLike),
    Outer(OuterSpec, OuterInputs),
    Row(Box<RowInfo>, sk_row::RowSpec),
}

impl fmt::Debug for Kind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Kind::Cell(spec, _) => write!(f, "Cell({spec:?})"),
            Kind::MAgg(spec, _) => write!(f, "MAgg({spec:?})"),
            Kind::Outer(spec, _) => write!(f, "Outer({spec:?})"),
            Kind::Row(_, spec) => write!(f, "Row({spec:?})"),
        }
    }
}

/// Which entry point of a template: rows of a dense main input, non-zeros of a CSR one, or
/// (Outer) every cell of a dense or densified driver, or every cell of blocks of it over tiles
/// of `U %*% t(V)`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Which {
    Dense,
    Csr,
    EveryCell,
    Tiles,
}

/// One compiled entry point and its compilation's time.
struct Entry {
    code: Code,
    time: Duration,
}

/// A fused operator compiled with Cranelift. `Send + Sync`; it owns the machine code of its
/// entry points for its lifetime.
pub struct CraneliftOperator {
    kind: Kind,
    used: Vec<bool>,
    plan: CPlan,
    /// Cell and MultiAgg: the body is 0 where the main input is (given finite side inputs).
    sparse_safe: bool,
    dense: OnceLock<Result<Entry, CodegenError>>,
    csr: OnceLock<Result<Entry, CodegenError>>,
    every_cell: OnceLock<Result<Entry, CodegenError>>,
    tiles: OnceLock<Result<Entry, CodegenError>>,
    /// An Outer operator runs over tiles of `U %*% t(V)` for a driver of at least this density
    /// (the backend's; never by default, see `CraneliftBackend`'s `Default`).
    outer_tile_density: f64,
    /// The analysis, which the entry points' times do not include.
    analysis: Duration,
    /// A Cell operator whose body runs in its main input's transposed frame: its output is
    /// relabelled to the transposed shape.
    transposed_frame: bool,
}

impl fmt::Debug for CraneliftOperator {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("CraneliftOperator")
            .field("kind", &self.kind)
            .field("compile_time", &self.compile_time())
            .finish()
    }
}

/// Compiles `plan` with Cranelift: the entry point for a main input in format `main` now
/// (the CSR one for a sparse main input, where the template has one), any other on first use.
pub fn compile_for(plan: &CPlan, main: MainFormat) -> Result<CraneliftOperator, CodegenError> {
    let start = Instant::now();
    if plan.outputs.is_empty() || plan.inputs.is_empty() {
        return Err(CodegenError::Internal(Internal::MalformedPlan(
            "a plan needs inputs and outputs",
        )));
    }
    if plan.nodes.len() > MAX_BODY_NODES {
        return Err(CodegenError::Unsupported(Unsupported::TooManyNodes {
            nodes: plan.nodes.len(),
            limit: MAX_BODY_NODES,
        }));
    }
    let (kind, used, sparse_safe) = analyze(plan)?;
    let mut op = CraneliftOperator {
        kind,
        used,
        plan: plan.clone(),
        sparse_safe,
        dense: OnceLock::new(),
        csr: OnceLock::new(),
        every_cell: OnceLock::new(),
        tiles: OnceLock::new(),
        // As LLVM's operators under the default cost model.
        outer_tile_density: lafuse_compiler::fusion::CostModel::default().outer_tile_density(),
        analysis: Duration::ZERO,
        transposed_frame: matches!(plan.template, TemplateSpec::Cell { .. })
            && transposed_frame(plan, &plan.outputs[..1]).unwrap_or(false),
    };
    op.analysis = start.elapsed();
    let first = if main == MainFormat::Sparse && op.has(Which::Csr) {
        Which::Csr
    } else {
        Which::Dense
    };
    op.entry(first)?;
    Ok(op)
}

/// The skeleton's spec and the loops' description of a plan (as the LLVM backend derives
/// them), the inputs its entry points load, and whether it is sparse-safe (a Row operator's
/// skeleton decides per call whether to visit a sparse main input's non-zeros).
fn analyze(plan: &CPlan) -> Result<(Kind, Vec<bool>, bool), CodegenError> {
    match &plan.template {
        TemplateSpec::Cell {
            cell_type,
            agg,
            sparse_safe,
        } => {
            let crate::plan_info::CellAnalysis {
                kind,
                agg,
                transposed,
                uses,
            } = crate::plan_info::cell_analysis(plan, *cell_type, *agg)?;
            let used = used_mask(&uses);
            let like = CellLike {
                outs: vec![(plan.outputs[0], agg)],
                kind,
                transposed,
            };
            let spec = CellSpec {
                kind,
                agg,
                sparse_safe: *sparse_safe,
                uses,
                lanes: FULL_LANES,
            };
            Ok((Kind::Cell(spec, like), used, *sparse_safe))
        }
        TemplateSpec::MAgg { aggs, sparse_safe } => {
            let crate::plan_info::MAggAnalysis {
                aggs,
                transposed,
                uses,
            } = crate::plan_info::magg_analysis(plan, aggs)?;
            let used = used_mask(&uses);
            let like = CellLike {
                outs: plan
                    .outputs
                    .iter()
                    .copied()
                    .zip(aggs.iter().map(|&a| Some(a)))
                    .collect(),
                kind: CellKind::FullAgg,
                transposed,
            };
            let spec = MAggSpec {
                aggs,
                sparse_safe: *sparse_safe,
                uses,
                lanes: FULL_LANES,
            };
            Ok((Kind::MAgg(spec, like), used, *sparse_safe))
        }
        TemplateSpec::Outer { outer_type } => {
            let (kind, oi, uses) = outer_analysis(plan, *outer_type)?;
            let used = used_mask(&uses);
            let spec = OuterSpec {
                kind,
                w: oi.w,
                uses,
                lanes: LANES,
            };
            Ok((Kind::Outer(spec, oi), used, false))
        }
        TemplateSpec::Row { row_type, .. } => {
            let info = row_plan::analyze(plan, *row_type)?;
            let spec = sk_row::RowSpec {
                kind: info.kind,
                inputs: info.inputs.clone(),
            };
            // Row entry points load their inputs by `spec.inputs`.
            let used = vec![false; plan.inputs.len()];
            Ok((Kind::Row(Box::new(info), spec), used, false))
        }
    }
}

impl CraneliftOperator {
    /// This operator with Outer calls over tiles of `U %*% t(V)` from a driver density of
    /// `density` on (`CostModel::outer_tile_density`; `f64::INFINITY`: never).
    pub fn with_outer_tile_density(mut self, density: f64) -> CraneliftOperator {
        self.outer_tile_density = density;
        self
    }

    /// Whether the template has entry point `which` (Cell and MultiAgg: a CSR one only when
    /// sparse-safe, no every-cell one; Row: dense and CSR ones).
    fn has(&self, which: Which) -> bool {
        match (&self.kind, which) {
            (_, Which::Dense) | (Kind::Outer(..), _) => true,
            (Kind::Row(..), Which::Csr) => true,
            (_, Which::Csr) => self.sparse_safe,
            (_, Which::EveryCell | Which::Tiles) => false,
        }
    }

    /// Entry point `which`, compiled on first request; an error where the template has none.
    fn entry(&self, which: Which) -> Result<&Entry, CodegenError> {
        if !self.has(which) {
            return Err(CodegenError::Internal(match which {
                Which::Csr => Internal::SparseUnsafeCsr {
                    template: match self.kind {
                        Kind::MAgg(..) => "MultiAgg",
                        _ => "cell",
                    },
                },
                Which::Tiles => Internal::NoEntryPoint { entry: "Tiles" },
                _ => Internal::NoEntryPoint { entry: "EveryCell" },
            }));
        }
        let slot = match which {
            Which::Dense => &self.dense,
            Which::Csr => &self.csr,
            Which::EveryCell => &self.every_cell,
            Which::Tiles => &self.tiles,
        };
        slot.get_or_init(|| {
            let start = Instant::now();
            let code = jit::compile(|fx, args, rl, ru| match &self.kind {
                Kind::Cell(_, like) | Kind::MAgg(_, like) => cell::emit_entry(
                    fx,
                    args,
                    rl,
                    ru,
                    &self.plan,
                    like,
                    &self.used,
                    which == Which::Csr,
                ),
                Kind::Outer(spec, oi) if which == Which::Tiles => {
                    outer::emit_tiles_entry(fx, args, rl, ru, &self.plan, spec.kind, oi, &self.used)
                }
                Kind::Outer(spec, oi) => outer::emit_entry(
                    fx,
                    args,
                    rl,
                    ru,
                    &self.plan,
                    spec.kind,
                    oi,
                    &self.used,
                    match which {
                        Which::Dense => Visit::DenseNonZeros,
                        Which::Csr => Visit::CsrNonZeros,
                        Which::EveryCell | Which::Tiles => Visit::EveryCell,
                    },
                ),
                Kind::Row(info, _) => row::emit_entry(fx, args, rl, ru, info, which == Which::Csr),
            })?;
            Ok(Entry {
                code,
                time: start.elapsed(),
            })
        })
        .as_ref()
        .map_err(Clone::clone)
    }

    /// Compilation time so far: the analysis and every entry point compiled.
    pub fn compile_time(&self) -> Duration {
        let entry = |s: &OnceLock<Result<Entry, CodegenError>>| match s.get() {
            Some(Ok(e)) => e.time,
            _ => Duration::ZERO,
        };
        self.analysis
            + entry(&self.dense)
            + entry(&self.csr)
            + entry(&self.every_cell)
            + entry(&self.tiles)
    }

    /// Runs the operator: the contract of [`crate::reference::evaluate`], with the value
    /// ranges the caller knows of some inputs (by position). As the LLVM backend, a
    /// sparse-safe Cell or MultiAgg operator visits only the non-zeros of a sparse main input,
    /// and an Outer operator only those of its driver, where
    /// [`zero_cells::zeros_skippable`] proves the body 0 at the zeros; else every cell.
    pub fn execute_with_ranges(
        &self,
        inputs: &[Operand<'_>],
        out_shapes: &[(usize, usize)],
        known: &[Option<ValueRange>],
    ) -> Result<Vec<Matrix>, CodegenError> {
        if out_shapes.len() != self.plan.outputs.len() {
            return Err(CodegenError::Internal(Internal::OutputCount {
                outputs: self.plan.outputs.len(),
                shapes: out_shapes.len(),
            }));
        }
        let mut ranges: Vec<Option<ValueRange>> = (0..inputs.len())
            .map(|pos| known.get(pos).copied().flatten())
            .collect();
        let main_sparse = matches!(inputs.first(), Some(Operand::Matrix(m)) if m.is_sparse());
        let skips_zeros = match self.kind {
            Kind::Outer(..) => true,
            _ => self.sparse_safe && main_sparse,
        };
        let zeros_skippable = skips_zeros && {
            let bounds: Vec<InputBound> = inputs
                .iter()
                .zip(ranges.iter_mut())
                .enumerate()
                .map(|(pos, (o, range))| match o {
                    Operand::Scalar(s) => InputBound::Scalar(*s),
                    Operand::Matrix(_) if pos == 0 => InputBound::Unknown,
                    Operand::Matrix(m) => InputBound::Matrix {
                        range: *range.get_or_insert_with(|| m.value_range()),
                        cols: m.cols(),
                    },
                })
                .collect();
            zero_cells::zeros_skippable(&self.plan, &bounds)
        };
        let ins: Vec<Input<'_>> = inputs
            .iter()
            .zip(&ranges)
            .map(|(o, range)| match o {
                Operand::Scalar(s) => Input::Scalar(*s),
                Operand::Matrix(m) if range.is_some_and(|r| r.is_finite()) => {
                    Input::FiniteMatrix(m)
                }
                Operand::Matrix(m) => Input::Matrix(m),
            })
            .collect();
        // SAFETY (both): the entry points are generated with the `KernelFn` signature and
        // live as long as the operator, which this call borrows.
        let kernel = |which: Which| {
            move || -> Result<KernelFn, EntryError> {
                self.entry(which)
                    .map(|e| unsafe { std::mem::transmute::<usize, KernelFn>(e.code.kernel) })
                    .map_err(|e| EntryError(Arc::new(e)))
            }
        };
        let (dense_fn, csr_fn, every_fn, tiles_fn) = (
            kernel(Which::Dense),
            kernel(Which::Csr),
            kernel(Which::EveryCell),
            kernel(Which::Tiles),
        );
        let kernels = CellKernels {
            dense: &dense_fn,
            csr: zeros_skippable.then_some(&csr_fn as LazyEntry<'_, KernelFn>),
        };
        let sk = |e: SkeletonError| match e {
            SkeletonError::EntryPoint(entry) => match entry.0.downcast_ref::<CodegenError>() {
                Some(ce) => ce.clone(),
                None => CodegenError::Internal(Internal::EntryPoint { error: entry }),
            },
            e => CodegenError::Skeleton(e),
        };
        let mut out = match &self.kind {
            Kind::Cell(spec, _) => vec![sk_cell::execute(spec, &kernels, &ins).map_err(sk)?],
            Kind::MAgg(spec, _) => {
                let k: MAggKernels<'_> = kernels;
                sk_magg::execute(spec, &k, &ins).map_err(sk)?
            }
            Kind::Outer(spec, _) => {
                let k = OuterKernels {
                    dense: &dense_fn,
                    csr: &csr_fn,
                    every_cell: (!zeros_skippable).then_some(&every_fn as LazyEntry<'_, KernelFn>),
                    tiles: Some(OuterTiles {
                        entry: &tiles_fn,
                        min_density: self.outer_tile_density,
                    }),
                };
                vec![sk_outer::execute(spec, &k, &ins).map_err(sk)?]
            }
            Kind::Row(info, spec) => {
                // SAFETY (both): Row entry points are generated with the `RowKernelFn`
                // signature (a `RowArgs` in place of the `KernelArgs` it starts with) and live
                // as long as the operator, which this call borrows.
                let row_kernel = |which: Which| {
                    move || -> Result<sk_row::RowKernelFn, EntryError> {
                        self.entry(which)
                            .map(|e| unsafe {
                                std::mem::transmute::<usize, sk_row::RowKernelFn>(e.code.kernel)
                            })
                            .map_err(|e| EntryError(Arc::new(e)))
                    }
                };
                let (dense_row, csr_row) = (row_kernel(Which::Dense), row_kernel(Which::Csr));
                let shape = out_shapes.first().copied().unwrap_or((0, 0));
                let layout = row_plan::layout(info, inputs, shape)?;
                let k = sk_row::RowKernels {
                    dense: &dense_row,
                    csr: &csr_row,
                };
                vec![sk_row::execute(spec, &k, &ins, &layout).map_err(sk)?]
            }
        };
        for (m, &s) in out.iter_mut().zip(out_shapes) {
            // A body over a transposed vector main input walked its cells in the main
            // input's shape: the same cells, relabelled.
            if m.shape() == (s.1, s.0) && (s.0 == 1 || s.1 == 1) && self.transposed_frame {
                *m = lafuse_runtime::kernels::reshape(m, s.0, s.1, true)
                    .map_err(CodegenError::Runtime)?;
            }
            if m.shape() != s {
                return Err(CodegenError::Internal(Internal::OutputShape {
                    got: m.shape(),
                    expected: s,
                }));
            }
        }
        Ok(out)
    }
}

impl Executable for CraneliftOperator {
    fn execute(
        &self,
        inputs: &[Operand<'_>],
        out_shapes: &[(usize, usize)],
        known: &[Option<ValueRange>],
    ) -> Result<Vec<Matrix>, CodegenError> {
        self.execute_with_ranges(inputs, out_shapes, known)
    }

    fn compile_time(&self) -> Duration {
        CraneliftOperator::compile_time(self)
    }
}
