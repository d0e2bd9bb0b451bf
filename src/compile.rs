//! Compiling a block for execution: HOP DAG construction with the block's actual input
//! metadata, then lowering of the linearized HOPs onto runtime instructions.
//!
//! A compiled block remembers the metadata of the variables it read (data type, shape, scalar
//! type) and is reused while they hold. Where sizes depend on scalar values (`X[beg:end, ]`),
//! the compiler is given the values for size inference only; the code reads the variables, so
//! the plan is reused for any values that imply the same sizes (a mini-batch loop compiles
//! its body once, not once per batch).

use crate::deferral::Expected;
use crate::error::Error;
use crate::fused::{Fuser, Fusion, PlannedOperator};
use crate::ScriptArgs;
use lafuse_compiler::ast;
use lafuse_compiler::hops::{
    self, BinaryOp, CastOp, CumulativeOp, DataGenOp, HopDag, HopId, Literal, MetaOp, NaryOp,
    OpKind, ParamOp, ReorgOp, TernaryOp,
};
use lafuse_compiler::stack::with_stack;
use lafuse_compiler::CompileError;
use lafuse_runtime::exec::{FusedOutput, Instruction, Op, Reg, SymbolTable};
use lafuse_runtime::value::{ScalarType, Value};
use std::collections::BTreeSet;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::{sync_channel, Receiver};
use std::sync::{Arc, Mutex};

/// What a compiled plan assumed of a variable it reads.
#[derive(Clone, Debug, PartialEq)]
pub(crate) enum VarMeta {
    Matrix {
        rows: u64,
        cols: u64,
        nnz: u64,
    },
    Scalar {
        ty: ScalarType,
    },
    /// Any list whose elements share the scalar type `items` (or do not, `None`).
    List {
        items: Option<ScalarType>,
    },
}

impl VarMeta {
    fn of(v: &Value) -> VarMeta {
        match v {
            Value::Matrix(m) => VarMeta::Matrix {
                rows: m.rows() as u64,
                cols: m.cols() as u64,
                nnz: m.nnz() as u64,
            },
            Value::List(l) => VarMeta::List {
                items: l.item_type(),
            },
            s => VarMeta::Scalar {
                ty: s.scalar_type().unwrap_or(ScalarType::Double),
            },
        }
    }

    /// Whether a plan compiled with `self` is valid for the value `v`: same data type and shape
    /// (matrices), same scalar type. Non-zero counts may differ: they only steer estimates,
    /// never correctness. Scalar values the plan's sizes depend on are checked by
    /// [`CompiledBlock::is_valid_for`].
    fn admits(&self, v: &Value) -> bool {
        match (self, v) {
            (VarMeta::Matrix { rows, cols, .. }, Value::Matrix(m)) => {
                *rows == m.rows() as u64 && *cols == m.cols() as u64
            }
            (VarMeta::Scalar { ty }, s) if !s.is_matrix() => s.scalar_type() == Some(*ty),
            // A plan reads a list's elements at run time, and types them by their shared
            // scalar type: any list with that (lack of) shared type will do.
            (VarMeta::List { items }, Value::List(l)) => l.item_type() == *items,
            _ => false,
        }
    }
}

/// The literal of a scalar value (`None` for a matrix).
fn scalar_literal(v: &Value) -> Option<Literal> {
    Some(match v {
        Value::Matrix(_) | Value::List(_) | Value::Frame(_) => return None,
        Value::Double(x) => Literal::Double(*x),
        Value::Int(x) => Literal::Int(*x),
        Value::Bool(x) => Literal::Bool(*x),
        Value::Str(x) => Literal::Str(x.to_string()),
    })
}

/// The metadata of the variables in scope when a block is compiled.
pub(crate) struct BlockMeta<'v> {
    vars: &'v SymbolTable,
    /// Whether lineage is traced: instructions then carry lineage patches.
    traced: bool,
    /// Whether the run reuses partially, so the plan takes LIMA's reuse-aware rewrites.
    reuse_aware: bool,
    /// The variables whose readers reuse leaves alone ([`crate::unmark`]).
    unmarked: Option<Arc<[String]>>,
    /// The runs of the block so far on a plan compiled unfused because fusing it did not pay
    /// yet (the fuser weighs fusion against them).
    unfused_runs: u64,
}

impl<'v> BlockMeta<'v> {
    pub(crate) fn of(vars: &'v SymbolTable) -> BlockMeta<'v> {
        BlockMeta {
            vars,
            traced: false,
            reuse_aware: false,
            unmarked: None,
            unfused_runs: 0,
        }
    }

    /// The same metadata for a block that has run `unfused_runs` times unfused.
    pub(crate) fn after_unfused_runs(self, unfused_runs: u64) -> BlockMeta<'v> {
        BlockMeta {
            unfused_runs,
            ..self
        }
    }

    /// The same metadata for a run that traces lineage (or not).
    pub(crate) fn traced(self, traced: bool) -> BlockMeta<'v> {
        BlockMeta { traced, ..self }
    }

    /// Whether `plan` was compiled for a run like this one (tracing, reuse), so it serves it.
    pub(crate) fn is_met_by(&self, plan: &CompiledBlock) -> bool {
        plan.traced == self.traced
            && plan.reuse_aware == self.reuse_aware
            && plan.unmarking == self.unmarked.is_some()
    }

    /// The same metadata with the variables whose readers reuse leaves alone.
    pub(crate) fn unmarked(self, unmarked: Option<Arc<[String]>>) -> BlockMeta<'v> {
        BlockMeta { unmarked, ..self }
    }

    /// The same metadata for a run with partial reuse (or not).
    pub(crate) fn reuse_aware(self, reuse_aware: bool) -> BlockMeta<'v> {
        BlockMeta {
            reuse_aware,
            ..self
        }
    }

    /// The compiler's view of the variables: with or without the values of scalars.
    fn inputs(&self, with_values: bool) -> hops::BlockInputs {
        let mut inputs = hops::BlockInputs::default();
        for (name, v) in self.vars {
            let meta = match (v, scalar_literal(v)) {
                (Value::Matrix(m), _) => {
                    hops::InputMeta::matrix(m.rows() as u64, m.cols() as u64, m.nnz() as u64)
                }
                (Value::List(l), _) => hops::InputMeta::List {
                    value_type: l.item_type().map_or(hops::ValueType::Double, value_type_of),
                },
                (Value::Frame(_), _) => hops::InputMeta::Frame,
                (_, Some(literal)) => hops::InputMeta::Scalar {
                    value_type: literal.value_type(),
                    value: with_values.then_some(literal),
                },
                (_, None) => continue,
            };
            inputs.insert(name.clone(), meta);
        }
        inputs
    }
}

/// A block (or expression) ready to run, with the DAG it was lowered from. An expression's
/// value is left in the variable [`EXPR_RESULT`].
#[derive(Debug)]
pub(crate) struct CompiledBlock {
    pub(crate) instructions: Vec<Instruction>,
    pub(crate) num_regs: usize,
    pub(crate) dag: HopDag,
    /// The variables read and what the plan assumed of them.
    assumptions: Vec<(String, VarMeta)>,
    /// What the plan assumed of the files it reads; a file whose stated size changed since
    /// makes the block compile again.
    files: Vec<FileAssumption>,
    /// Matrix operations whose size was unknown when the block was compiled: fusion leaves
    /// them out (`--stats` says so).
    pub(crate) unknown_size_ops: usize,
    /// Whether the instructions carry lineage patches (compiled for a tracing run).
    pub(crate) traced: bool,
    /// Whether the plan took the reuse-aware rewrites (compiled for a run with partial reuse).
    pub(crate) reuse_aware: bool,
    /// Whether the plan unmarked instructions (compiled for a run with reuse).
    pub(crate) unmarking: bool,
    /// Whether sizes in `dag` were inferred from the values of scalar variables (`X[beg:end,]`
    /// with the current `beg` and `end`). The instructions read those variables, so the plan
    /// serves any values that imply the same sizes.
    sizes_from_values: bool,
    /// Set where the block was compiled unfused because fusing would not yet pay for its
    /// compilation (`--jit tiered`): its runs are counted until it would.
    pub(crate) deferral: Option<Deferral>,
}

/// The runs of a block compiled unfused while its fusion does not pay ([`Fusion::Deferred`]).
#[derive(Debug)]
pub(crate) struct Deferral {
    /// The block's unfused runs, shared by the plans one block was compiled to (a plan compiled
    /// again for new metadata counts on).
    runs: Arc<AtomicU64>,
    /// The run from which the block is compiled again; moved on where it then defers again.
    runs_to_pay: AtomicU64,
    /// What the plan search that deferred the block last expects of its fusion
    /// ([`crate::fused::Fuser::background_lag`] weighs it against the lag).
    expected: Mutex<Option<Expected>>,
    /// The block's fusion, planned and compiled on a background thread since it fell due
    /// ([`crate::fused::Fuser::background_lag`]).
    background: Mutex<Option<Background>>,
    /// The run a background fusion scheduled when the block fell due will replace the plan at
    /// (0: none scheduled); its work starts at the run `runs_to_pay` names
    /// ([`Deferral::schedule`]).
    scheduled_install: AtomicU64,
}

/// A deferred block's fusion under way on a background thread.
#[derive(Debug)]
struct Background {
    job: FusionJob,
    /// The run from which its result replaces the plan; the block runs unfused until then.
    install_at: u64,
}

/// Where a deferred block's background fusion stands at a run.
pub(crate) enum InBackground {
    /// None under way.
    Idle,
    /// Under way, its result for a later run.
    Running,
    /// Due at this run: the job, taken (the run waits for it if it has not finished).
    Due(FusionJob),
}

/// A block's fusion on the background pool (`lafuse_codegen::tiers::spawn_in_background`):
/// its result, or the panic it raised.
#[derive(Debug)]
pub(crate) struct FusionJob(Receiver<std::thread::Result<Result<Fusion, Error>>>);

impl FusionJob {
    /// Waits for the fusion. A panic on the pool is resumed on this thread, as it would have
    /// been raised had the block been fused here; `None` where the job never ran (the pool
    /// dropped it), and the caller fuses the block itself.
    pub(crate) fn wait(self) -> Option<Result<Fusion, Error>> {
        match self.0.recv() {
            Ok(Ok(fusion)) => Some(fusion),
            Ok(Err(panic)) => std::panic::resume_unwind(panic),
            Err(_) => None,
        }
    }
}

impl Deferral {
    fn new(runs_to_pay: u64, expected: Option<Expected>) -> Deferral {
        Deferral {
            runs: Arc::default(),
            runs_to_pay: AtomicU64::new(runs_to_pay),
            expected: Mutex::new(expected),
            background: Mutex::new(None),
            scheduled_install: AtomicU64::new(0),
        }
    }

    /// Schedules the block's background fusion: its work starts at run `start_at` (the plan
    /// stays as it is until then) and its result replaces the plan at run `install_at`, as
    /// had it started at once. A loop that ends before `start_at` spares the work.
    pub(crate) fn schedule(&self, start_at: u64, install_at: u64) {
        self.scheduled_install.store(install_at, Ordering::Relaxed);
        self.defer_to(start_at);
    }

    /// The install run of the background fusion [`Deferral::schedule`] put off, taken (`None`:
    /// none scheduled).
    pub(crate) fn take_scheduled_install(&self) -> Option<u64> {
        Some(self.scheduled_install.swap(0, Ordering::Relaxed)).filter(|&at| at > 0)
    }

    /// The runs counter this plan shares.
    pub(crate) fn counter(&self) -> &Arc<AtomicU64> {
        &self.runs
    }

    /// Counts on from `runs`, the counter of an earlier plan of the same block.
    pub(crate) fn share(&mut self, runs: Arc<AtomicU64>) {
        self.runs = runs;
    }

    /// Counts a run; the block's unfused runs so far, this one included.
    pub(crate) fn count_run(&self) -> u64 {
        self.runs.fetch_add(1, Ordering::Relaxed).saturating_add(1)
    }

    /// Whether fusion has paid for its compilation by run `runs`, when the block should be
    /// compiled again (fused, or deferred further where the fuser's bound was loose).
    pub(crate) fn is_due(&self, runs: u64) -> bool {
        runs >= self.runs_to_pay.load(Ordering::Relaxed)
    }

    /// Counts a run; true from the run at which fusion has paid for its compilation.
    pub(crate) fn ran_and_due(&self) -> bool {
        let runs = self.count_run();
        self.is_due(runs)
    }

    /// The plan stays as it is until run `runs_to_pay`: the fuser deferred the block again.
    pub(crate) fn defer_to(&self, runs_to_pay: u64) {
        self.runs_to_pay.store(runs_to_pay, Ordering::Relaxed);
    }

    /// [`Deferral::defer_to`], with what the search that deferred the block again expects.
    pub(crate) fn defer_again(&self, runs_to_pay: u64, expected: Option<Expected>) {
        *self.expected.lock().unwrap_or_else(|p| p.into_inner()) = expected;
        self.defer_to(runs_to_pay);
    }

    /// What the last plan search expects of the block's fusion (`None`: no plan weighed).
    pub(crate) fn expected(&self) -> Option<Expected> {
        *self.expected.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The background fusion at run `runs`; a due job is taken out.
    pub(crate) fn in_background(&self, runs: u64) -> InBackground {
        let mut slot = self.background.lock().unwrap_or_else(|p| p.into_inner());
        match slot.take() {
            Some(b) if runs >= b.install_at => {
                // Not due again meanwhile: the taker installs the fusion or defers the block
                // anew (another parfor worker would otherwise start the same work again).
                self.defer_to(u64::MAX);
                InBackground::Due(b.job)
            }
            Some(b) => {
                *slot = Some(b);
                InBackground::Running
            }
            None => InBackground::Idle,
        }
    }

    /// Runs `job` (the block's fusion) on the background pool, its result for run
    /// `install_at`; false where the pool has no thread (the caller fuses now).
    pub(crate) fn start_in_background(
        &self,
        job: impl FnOnce() -> Result<Fusion, Error> + Send + 'static,
        install_at: u64,
    ) -> bool {
        let (result, receiver) = sync_channel(1);
        let spawned = lafuse_codegen::tiers::spawn_in_background(move || {
            let fusion = std::panic::catch_unwind(std::panic::AssertUnwindSafe(job));
            // The run that would take it may have ended (the program finished first).
            let _ = result.send(fusion);
        });
        if spawned {
            *self.background.lock().unwrap_or_else(|p| p.into_inner()) = Some(Background {
                job: FusionJob(receiver),
                install_at,
            });
        }
        spawned
    }
}

impl CompiledBlock {
    pub(crate) fn is_valid_for(&self, vars: &SymbolTable) -> bool {
        self.assumptions
            .iter()
            .all(|(name, meta)| vars.get(name).is_some_and(|v| meta.admits(v)))
            && self.files.iter().all(|f| {
                lafuse_runtime::io::stated_dims(std::path::Path::new(&f.path)) == Some(f.dims)
            })
            && (!self.sizes_from_values || self.same_sizes_for(vars))
    }

    /// Whether the scalar values in `vars` imply the sizes the plan was compiled for: sizes
    /// are inferred again over the plan's DAG with those values (a few microseconds, against
    /// a compilation's hundreds), files read by a path held in a variable included.
    fn same_sizes_for(&self, vars: &SymbolTable) -> bool {
        let mut probe = self.dag.clone();
        for hop in &mut probe.hops {
            if let OpKind::TransientRead { name } = &hop.op {
                if hop.is_scalar() {
                    hop.known = vars.get(name).and_then(scalar_literal);
                }
            }
        }
        if hops::propagate_sizes(&mut probe).is_err() {
            return false;
        }
        probe.hops.iter().zip(&self.dag.hops).all(|(now, then)| {
            let read_path = match &now.op {
                OpKind::PersistentRead { .. } if now.is_matrix() => now.inputs.first(),
                _ => None,
            };
            let same_file = match read_path.map(|&p| (probe.literal_of(p), probe.scalar_value(p))) {
                // A path in a variable: the file it names now must state the assumed size.
                Some((None, Some(Literal::Str(path)))) if then.dims().is_some() => {
                    lafuse_runtime::io::stated_dims(std::path::Path::new(path))
                        .is_some_and(|d| Some((d.rows as u64, d.cols as u64)) == then.dims())
                }
                _ => true,
            };
            same_file && now.rows == then.rows && now.cols == then.cols
        })
    }
}

pub(crate) use hops::EXPR_RESULT;

/// Compiles the statements of a basic block; with `live_out`, only those of its variables are
/// written back (the others are dead after the block: see `compiler::liveness`).
pub(crate) fn compile_block(
    stmts: &[ast::Stmt],
    live_out: Option<&BTreeSet<String>>,
    meta: &BlockMeta,
    args: &ScriptArgs,
    fuser: Option<&Fuser>,
) -> Result<CompiledBlock, Error> {
    let mut names = Vec::new();
    for stmt in stmts {
        stmt_reads(stmt, &mut names);
    }
    compile_with(meta, &names, fuser, |inputs| {
        let mut dag = hops::construct::construct_block_dag(stmts, inputs, args.compiler_args())?;
        if let Some(live) = live_out {
            dag.drop_writes_except(live);
        }
        let files = size_reads_from_files(&mut dag)?;
        hops::optimize(&mut dag)?;
        Ok((dag, files))
    })
}

/// Compiles a DAG handed over by an embedder for the metadata of the values bound to its
/// transient reads: each read takes its bound matrix's size and non-zeros (where the DAG left
/// them open, or as stated), then sizes propagate and the rewrites run as for a script's block.
pub(crate) fn compile_dag(
    dag: &HopDag,
    meta: &BlockMeta,
    fuser: Option<&Fuser>,
) -> Result<CompiledBlock, Error> {
    let names: Vec<&str> = dag
        .hops
        .iter()
        .filter_map(|h| match &h.op {
            OpKind::TransientRead { name } => Some(name.as_str()),
            _ => None,
        })
        .collect();
    compile_with(meta, &names, fuser, |inputs| {
        optimized_dag(dag, inputs).map(|dag| (dag, Vec::new()))
    })
}

/// `dag` with the sizes of the matrices in `inputs` given to its transient reads of them
/// (the others keep what the DAG states), sizes propagated and the rewrites applied.
pub(crate) fn optimized_dag(
    dag: &HopDag,
    inputs: &hops::BlockInputs,
) -> Result<HopDag, CompileError> {
    let mut dag = dag.clone();
    for (name, meta) in inputs {
        if let hops::InputMeta::Matrix { rows, cols, nnz } = *meta {
            dag.size_input(name, rows, cols, nnz);
        }
    }
    hops::propagate_sizes(&mut dag)?;
    hops::optimize(&mut dag)?;
    Ok(dag)
}

/// The matrix operations of `dag` whose size is unknown, which fusion leaves out. Reads and
/// variable stores are never fused; an operation on their values is.
pub(crate) fn unknown_size_ops(dag: &HopDag) -> usize {
    dag.hops
        .iter()
        .filter(|h| h.is_matrix() && h.dims().is_none())
        .filter(|h| {
            !matches!(
                h.op,
                OpKind::PersistentRead { .. }
                    | OpKind::TransientRead { .. }
                    | OpKind::TransientWrite { .. }
                    | OpKind::PersistentWrite { .. }
            )
        })
        .count()
}

/// What a block's plan assumed of a file it reads: the size the file's metadata or header
/// stated when the block was compiled.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct FileAssumption {
    path: String,
    dims: lafuse_runtime::io::StatedDims,
}

/// Gives the block's reads of known paths the sizes their files state, as SystemDS reads
/// sizes from metadata at compile time (so that data read from files is fused like data made
/// in place), and propagates them; returns what it assumed. A block that writes files itself
/// is left alone: a read after a write in the block would see the size before the write.
pub(crate) fn size_reads_from_files(dag: &mut HopDag) -> Result<Vec<FileAssumption>, CompileError> {
    if dag
        .hops
        .iter()
        .any(|h| matches!(h.op, OpKind::PersistentWrite { .. }))
    {
        return Ok(Vec::new());
    }
    let mut assumed = Vec::new();
    let mut sized = false;
    for i in 0..dag.hops.len() {
        let hop = &dag.hops[i];
        if !matches!(hop.op, OpKind::PersistentRead { .. })
            || !hop.is_matrix()
            || hop.dims().is_some()
        {
            continue;
        }
        let Some(&file) = hop.inputs.first() else {
            continue;
        };
        // A literal path, or one in a variable whose value the compiler was given (a plan
        // sized that way is checked against the file the variable names when it is reused).
        let literal_path = dag.literal_of(file).is_some();
        let Some(Literal::Str(path)) = dag.scalar_value(file) else {
            continue;
        };
        let Some(dims) = lafuse_runtime::io::stated_dims(std::path::Path::new(path)) else {
            continue;
        };
        let path = path.clone();
        let hop = &mut dag.hops[i];
        hop.rows = Some(dims.rows as u64);
        hop.cols = Some(dims.cols as u64);
        hop.nnz = dims.nnz.map(|n| n as u64);
        sized = true;
        if literal_path {
            assumed.push(FileAssumption { path, dims });
        }
    }
    if sized {
        hops::propagate_sizes(dag)?;
    }
    Ok(assumed)
}

/// Compiles a scalar expression (a condition or loop bound), whose value goes to [`EXPR_RESULT`].
pub(crate) fn compile_predicate(
    expr: &ast::Expr,
    meta: &BlockMeta,
    args: &ScriptArgs,
    fuser: Option<&Fuser>,
) -> Result<CompiledBlock, Error> {
    let mut names = Vec::new();
    expr_reads(expr, &mut names);
    compile_with(meta, &names, fuser, |inputs| {
        hops::build_expr_dag(expr, inputs, args.compiler_args()).map(|dag| (dag, Vec::new()))
    })
}

/// Compiles an expression of any type (a function argument) as the assignment
/// `EXPR_RESULT = expr`.
pub(crate) fn compile_value(
    expr: &ast::Expr,
    meta: &BlockMeta,
    args: &ScriptArgs,
    fuser: Option<&Fuser>,
) -> Result<CompiledBlock, Error> {
    let assign = ast::Stmt {
        kind: ast::StmtKind::Assign {
            target: ast::Ident {
                name: EXPR_RESULT.to_string(),
                span: expr.span,
            },
            value: expr.clone(),
        },
        span: expr.span,
    };
    let mut names = Vec::new();
    expr_reads(expr, &mut names);
    compile_with(meta, &names, fuser, |inputs| {
        hops::build_block_dag(std::slice::from_ref(&assign), inputs, args.compiler_args())
            .map(|dag| (dag, Vec::new()))
    })
}

/// The variables a statement reads (a left-indexing target is read too).
pub(crate) fn stmt_reads<'a>(stmt: &'a ast::Stmt, out: &mut Vec<&'a str>) {
    with_stack(|| stmt_reads_step(stmt, out))
}

fn stmt_reads_step<'a>(stmt: &'a ast::Stmt, out: &mut Vec<&'a str>) {
    use ast::StmtKind;
    let range = |r: &'a Option<ast::IndexRange>, out: &mut Vec<&'a str>| {
        if let Some(r) = r {
            r.variables_read(out);
        }
    };
    match &stmt.kind {
        StmtKind::Assign { value, .. } => expr_reads(value, out),
        StmtKind::IndexAssign {
            target,
            rows,
            cols,
            value,
        } => {
            out.push(&target.name);
            range(rows, out);
            range(cols, out);
            expr_reads(value, out);
        }
        StmtKind::MultiAssign { call, .. } | StmtKind::Expr(call) => expr_reads(call, out),
        StmtKind::If {
            cond,
            then_body,
            else_body,
        } => {
            expr_reads(cond, out);
            then_body
                .iter()
                .chain(else_body)
                .for_each(|s| stmt_reads(s, out));
        }
        StmtKind::For {
            from,
            to,
            step,
            body,
            ..
        } => {
            expr_reads(from, out);
            expr_reads(to, out);
            if let Some(step) = step {
                expr_reads(step, out);
            }
            body.iter().for_each(|s| stmt_reads(s, out));
        }
        StmtKind::While { cond, body } => {
            expr_reads(cond, out);
            body.iter().for_each(|s| stmt_reads(s, out));
        }
    }
}

/// The variables an expression reads.
pub(crate) fn expr_reads<'a>(expr: &'a ast::Expr, out: &mut Vec<&'a str>) {
    expr.variables_read(out)
}

/// Builds the DAG without scalar values first; only when some matrix size then depends on a
/// scalar's value is it built again with the values given to size inference ([`Hop::known`]:
/// the code still reads the variables, and the plan is checked by its sizes when reused).
///
/// [`Hop::known`]: lafuse_compiler::hops::Hop::known
fn compile_with(
    meta: &BlockMeta,
    reads: &[&str],
    fuser: Option<&Fuser>,
    build: impl Fn(&hops::BlockInputs) -> Result<(HopDag, Vec<FileAssumption>), CompileError>,
) -> Result<CompiledBlock, Error> {
    let ((dag, files), with_values) = {
        let built = build(&meta.inputs(false))?;
        if built
            .0
            .hops
            .iter()
            .any(|h| h.is_matrix() && h.dims().is_none())
        {
            (build(&meta.inputs(true))?, true)
        } else {
            (built, false)
        }
    };
    // What the plan assumed of every variable the code reads (found syntactically: once scalar
    // values are inlined as literals, the DAG itself no longer shows which were read).
    let mut assumptions: Vec<(String, VarMeta)> = Vec::new();
    for name in reads {
        if let Some(v) = meta.vars.get(*name) {
            if !assumptions.iter().any(|(n, _)| n == name) {
                assumptions.push((name.to_string(), VarMeta::of(v)));
            }
        }
    }
    finish(dag, meta, fuser, assumptions, files, with_values)
}

/// What a block whose deferral came due compiles to.
pub(crate) enum Refusal {
    /// Fusing still does not pay: the unfused plan stands until run `runs_to_pay`; what the
    /// weighed plan would save.
    Later {
        runs_to_pay: u64,
        expected: Option<Expected>,
    },
    /// The block compiled fused.
    Now(CompiledBlock),
}

/// `block` compiled again from its DAG, for a run after unfused ones: fused where that pays by
/// now, else deferred further on the closer estimate without lowering it again. The DAG, its
/// assumptions and files are the unfused plan's, which was just found valid for the run's
/// variables.
pub(crate) fn refuse(
    block: &CompiledBlock,
    meta: &BlockMeta,
    fuser: &Fuser,
) -> Result<Refusal, Error> {
    refuse_with(block, meta, fuser.fuse(&block.dag, meta.unfused_runs)?)
}

/// [`refuse`] with the block's fusion decided already (on a background thread).
pub(crate) fn refuse_with(
    block: &CompiledBlock,
    meta: &BlockMeta,
    fusion: Fusion,
) -> Result<Refusal, Error> {
    match fusion {
        Fusion::Deferred {
            runs_to_pay,
            expected,
        } => Ok(Refusal::Later {
            runs_to_pay,
            expected,
        }),
        Fusion::Now(operators) => Ok(Refusal::Now(lower_block(
            block.dag.clone(),
            meta,
            operators,
            None,
            block.assumptions.clone(),
            block.files.clone(),
            block.sizes_from_values,
        )?)),
    }
}

/// Fusion and lowering of an optimized block DAG.
fn finish(
    dag: HopDag,
    meta: &BlockMeta,
    fuser: Option<&Fuser>,
    assumptions: Vec<(String, VarMeta)>,
    files: Vec<FileAssumption>,
    with_values: bool,
) -> Result<CompiledBlock, Error> {
    let (fused, deferral) = match fuser {
        Some(fuser) if dag.hops.iter().any(|h| h.is_matrix()) => {
            match fuser.fuse(&dag, meta.unfused_runs)? {
                Fusion::Now(operators) => (operators, None),
                Fusion::Deferred {
                    runs_to_pay,
                    expected,
                } => (Vec::new(), Some(Deferral::new(runs_to_pay, expected))),
            }
        }
        _ => (Vec::new(), None),
    };
    lower_block(dag, meta, fused, deferral, assumptions, files, with_values)
}

/// A block DAG lowered with its fused operators onto instructions.
fn lower_block(
    dag: HopDag,
    meta: &BlockMeta,
    fused: Vec<PlannedOperator>,
    deferral: Option<Deferral>,
    assumptions: Vec<(String, VarMeta)>,
    files: Vec<FileAssumption>,
    with_values: bool,
) -> Result<CompiledBlock, Error> {
    let lowering = LoweringOptions {
        traced: meta.traced,
        reuse_aware: meta.reuse_aware,
        unmarked: meta.unmarked.as_deref().unwrap_or_default(),
    };
    let (instructions, num_regs) = lower(&dag, &fused, &lowering)?;
    Ok(CompiledBlock {
        instructions,
        num_regs,
        traced: meta.traced,
        reuse_aware: meta.reuse_aware,
        unmarking: meta.unmarked.is_some(),
        sizes_from_values: with_values,
        unknown_size_ops: unknown_size_ops(&dag),
        dag,
        assumptions,
        files,
        deferral,
    })
}

/// What a lowering adds for lineage and reuse.
struct LoweringOptions<'a> {
    /// Every instruction with a value carries its lineage patches.
    traced: bool,
    /// Products of concatenations read their parts ([`parts_products`]).
    reuse_aware: bool,
    /// Instructions depending on these variables' values at block entry are not cacheable.
    unmarked: &'a [String],
}

/// Lowers a DAG onto instructions: one register per hop; fused operators replace the hops
/// they cover; units (hops and fused operators) in the linearized order as far as their
/// inputs allow, side effects and `time()` in statement order; variable stores last
/// (transient reads see the values the block started with); each register released after its
/// last use.
fn lower(
    dag: &HopDag,
    fused: &[PlannedOperator],
    options: &LoweringOptions<'_>,
) -> Result<(Vec<Instruction>, usize), Error> {
    let LoweringOptions {
        traced,
        reuse_aware,
        unmarked,
    } = *options;
    let order = hops::linearize(dag);
    let n = dag.len();
    let mut position = vec![usize::MAX; n];
    for (k, &id) in order.iter().enumerate() {
        position[id.index()] = k;
    }
    // Which operator produces each hop: a fused operator for its outputs, else the hop itself.
    let mut producer: Vec<Option<usize>> = vec![None; n];
    for (k, op) in fused.iter().enumerate() {
        for &(h, _) in &op.outputs {
            producer[h.index()] = Some(k);
        }
    }
    // What must run, found backwards from the roots: a needed hop is produced by its fused
    // operator (whose inputs are then needed) or computed unfused (its inputs needed). So a
    // covered interior hop still read by an unfused consumer runs unfused as well (reference
    // 1.8), and an uncovered hop read only inside fused operators (`t(X)` under a Row
    // operator) does not run at all.
    let reading_parts = if reuse_aware {
        parts_products(dag, &producer)
    } else {
        Vec::new()
    };
    let parts_of = |id: HopId| {
        reading_parts
            .iter()
            .find(|(p, _)| *p == id)
            .map(|(_, product)| product)
    };
    let mut unfused = vec![false; n];
    let mut operator_needed = vec![false; fused.len()];
    let mut seen = vec![false; n];
    let mut work: Vec<HopId> = dag.roots.clone();
    while let Some(h) = work.pop() {
        if h.index() >= n || std::mem::replace(&mut seen[h.index()], true) {
            continue;
        }
        match producer[h.index()] {
            Some(k) => {
                if !std::mem::replace(&mut operator_needed[k], true) {
                    work.extend(fused[k].inputs.iter().copied());
                }
            }
            None => {
                unfused[h.index()] = true;
                match parts_of(h) {
                    Some(product) => work.extend(product.parts.iter().copied()),
                    None => work.extend(dag.hop(h).inputs.iter().copied()),
                }
            }
        }
    }
    let fused_inputs: Vec<HopId> = fused.iter().flat_map(|op| op.inputs.clone()).collect();
    let parts_products: Vec<HopId> = reading_parts.iter().map(|(p, _)| *p).collect();
    let tsmm = transpose_products(dag, &unfused, &fused_inputs, &parts_products);

    // Units in a topological order that follows the linearization: Kahn's algorithm, always
    // taking the ready unit that comes first in `order`.
    #[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
    enum Unit {
        Hop(HopId),
        Fused(usize),
    }
    let unit_of = |h: HopId| match producer[h.index()] {
        Some(k) => Unit::Fused(k),
        None => Unit::Hop(h),
    };
    let mut units: Vec<(usize, Unit, Vec<Unit>)> = Vec::new();
    for &id in &order {
        if unfused[id.index()] && producer[id.index()].is_none() && !tsmm.skipped.contains(&id) {
            let mut deps: Vec<Unit> = match parts_of(id) {
                // A product reading the parts of its operands depends on them.
                Some(product) => product.parts.iter().map(|&p| unit_of(p)).collect(),
                None => dag.hop(id).inputs.iter().map(|&i| unit_of(i)).collect(),
            };
            // A product reading `A` of `t(A)` in place depends on `A`, not on the transpose;
            // a transposed output on its product's operands.
            deps.extend(tsmm.reads(dag, id).into_iter().map(unit_of));
            units.push((position[id.index()], Unit::Hop(id), deps));
        }
    }
    for (k, op) in fused
        .iter()
        .enumerate()
        .filter(|&(k, _)| operator_needed[k])
    {
        let first = op
            .outputs
            .iter()
            .map(|&(h, _)| position[h.index()])
            .min()
            .unwrap_or(usize::MAX);
        let deps = op.inputs.iter().map(|&i| unit_of(i)).collect();
        units.push((first, Unit::Fused(k), deps));
    }
    units.sort();
    let index_of: std::collections::HashMap<Unit, usize> = units
        .iter()
        .enumerate()
        .map(|(i, (_, u, _))| (*u, i))
        .collect();
    let deps: Vec<Vec<usize>> = units
        .iter()
        .enumerate()
        .map(|(i, (_, _, deps))| {
            // A dependency that is not a unit (a skipped transpose) is no constraint.
            deps.iter()
                .filter_map(|d| index_of.get(d).copied())
                .filter(|&j| j != i)
                .collect()
        })
        .collect();
    // Side effects and `time()` (the roots other than variable writes) keep their statement
    // order: each waits for the one before it. The linearized order alone does not ensure it
    // once fused operators join hops of several statements (a MultiAgg of the sums of two
    // prints waits for the inputs of the later one, and the print in between, ready sooner,
    // would overtake the first).
    let ordered: Vec<usize> = dag
        .roots
        .iter()
        .filter(|&&r| r.index() < n && !matches!(dag.hop(r).op, OpKind::TransientWrite { .. }))
        .filter_map(|&r| index_of.get(&unit_of(r)).copied())
        .collect();
    let mut chained = deps.clone();
    for pair in ordered.windows(2) {
        if pair[0] != pair[1] {
            chained[pair[1]].push(pair[0]);
        }
    }
    // Only where fusion joined a later statement's value into an earlier one's operator
    // through a side effect's input (`time()`) is the statement order impossible; the values
    // are the same either way, so the block then runs in dependency order alone.
    let schedule = topological_order(&chained)
        .or_else(|| topological_order(&deps))
        .ok_or_else(|| Error::Runtime {
            error: lafuse_runtime::RuntimeError::Internal(
                lafuse_runtime::error::Internal::OperatorCycle,
            ),
            span: None,
        })?;
    let rebound = dag.outputs().into_iter().map(|(name, _)| name).collect();
    let mut lowering = Lowering {
        dag,
        instructions: Vec::new(),
        stores: Vec::new(),
        rebound,
        traced,
        unmarked: depends_on(dag, unmarked),
        needed_results: (0..n)
            .map(|i| HopId(i as u32))
            .filter(|h| {
                unfused[h.index()]
                    && matches!(
                        dag.hop(*h).op,
                        OpKind::Decompose { .. } | OpKind::TransformEncode { .. }
                    )
            })
            .collect(),
        decomposed: std::collections::HashSet::new(),
    };
    for i in schedule {
        match units[i].1 {
            Unit::Hop(id) => lowering.lower_hop(id, tsmm.in_place(dag, id), parts_of(id))?,
            Unit::Fused(k) => lowering.lower_fused(&fused[k]),
        }
    }
    let stores = std::mem::take(&mut lowering.stores);
    lowering.instructions.extend(stores);
    let num_regs = n;
    let mut instructions = lowering.instructions;
    // Release every register after its last use.
    let mut last_use = vec![None; num_regs];
    for (i, instr) in instructions.iter().enumerate() {
        for &r in &instr.inputs {
            last_use[r as usize] = Some(i);
        }
    }
    for (reg, last) in last_use.into_iter().enumerate() {
        if let Some(i) = last {
            instructions[i].release.push(reg as Reg);
        }
    }
    Ok((instructions, num_regs))
}

/// Kahn's algorithm over units `0..deps.len()` (sorted by their linearized position), always
/// taking the ready unit that comes first; `None` if the dependencies form a cycle.
fn topological_order(deps: &[Vec<usize>]) -> Option<Vec<usize>> {
    let mut pending = vec![0usize; deps.len()];
    let mut dependents: Vec<Vec<usize>> = vec![Vec::new(); deps.len()];
    for (i, ds) in deps.iter().enumerate() {
        let mut seen = Vec::new();
        for &j in ds {
            if !seen.contains(&j) {
                seen.push(j);
                pending[i] += 1;
                dependents[j].push(i);
            }
        }
    }
    let mut ready: std::collections::BinaryHeap<std::cmp::Reverse<usize>> = (0..deps.len())
        .filter(|&i| pending[i] == 0)
        .map(std::cmp::Reverse)
        .collect();
    let mut order = Vec::with_capacity(deps.len());
    while let Some(std::cmp::Reverse(i)) = ready.pop() {
        order.push(i);
        for &j in &dependents[i] {
            pending[j] -= 1;
            if pending[j] == 0 {
                ready.push(std::cmp::Reverse(j));
            }
        }
    }
    (order.len() == deps.len()).then_some(order)
}

/// Products `t(A) %*% B` computed without materialising `t(A)` (`tsmm` when `B` is `A`, else
/// a product that reads `A` transposed in place), products `A %*% t(B)` likewise reading `B`
/// (where the left operand is no such transpose), and the transposes that only those products
/// used in those places (which need not run at all). This is the unfused baseline's one piece
/// of operator selection: SystemDS avoids the left transpose likewise (`tsmm`, and its rewrite
/// of `t(X) %*% y` to `t(t(y) %*% X)`).
struct TransposeProducts {
    products: Vec<HopId>,
    right_products: Vec<HopId>,
    /// Transposes `t(P)` of products `P` that nothing else reads, with `P`: computed as a
    /// product with a transposed output, `P` itself not at all.
    transposed_outputs: Vec<(HopId, HopId)>,
    skipped: Vec<HopId>,
}

/// A product's operand read transposed in place: `A` of `t(A) %*% B`, `B` of `A %*% t(B)`;
/// or a transpose computed as its product's transposed output, from the product's operands
/// (`B` under its transpose where the product reads it in place).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum InPlace {
    Left(HopId),
    Right(HopId),
    Output {
        a: HopId,
        b: HopId,
        b_transposed: bool,
    },
}

impl TransposeProducts {
    /// The matrix under the transpose a product reads in place, if `id` is such a product;
    /// the product's operands, if `id` is a transpose computed as a transposed output.
    fn in_place(&self, dag: &HopDag, id: HopId) -> Option<InPlace> {
        let under =
            |product: HopId, operand: usize| dag.hop(dag.hop(product).inputs[operand]).inputs[0];
        if let Some(&(_, p)) = self.transposed_outputs.iter().find(|(t, _)| *t == id) {
            let a = dag.hop(p).inputs[0];
            return Some(if self.right_products.contains(&p) {
                InPlace::Output {
                    a,
                    b: under(p, 1),
                    b_transposed: true,
                }
            } else {
                InPlace::Output {
                    a,
                    b: dag.hop(p).inputs[1],
                    b_transposed: false,
                }
            });
        }
        if self.products.contains(&id) {
            Some(InPlace::Left(under(id, 0)))
        } else if self.right_products.contains(&id) {
            Some(InPlace::Right(under(id, 1)))
        } else {
            None
        }
    }

    /// The hops a unit computing `id` reads in place of its DAG inputs.
    fn reads(&self, dag: &HopDag, id: HopId) -> Vec<HopId> {
        match self.in_place(dag, id) {
            Some(InPlace::Left(a) | InPlace::Right(a)) => vec![a],
            Some(InPlace::Output { a, b, .. }) => vec![a, b],
            None => Vec::new(),
        }
    }
}

fn transpose_products(
    dag: &HopDag,
    unfused: &[bool],
    fused_inputs: &[HopId],
    reading_parts: &[HopId],
) -> TransposeProducts {
    let users = dag.users();
    let (mut products, mut right_products) = (Vec::new(), Vec::new());
    // Only a transpose computed unfused: its input is then computed too. A transpose a fused
    // operator produces (`t(exp(S))` as a Cell output) may be all there is of its input, which
    // then has no register to read in place.
    let unfused_transpose =
        |h: HopId| dag.hop(h).op == OpKind::Reorg(ReorgOp::Transpose) && unfused[h.index()];
    for id in dag.ids() {
        if !unfused[id.index()] {
            continue;
        }
        let hop = dag.hop(id);
        if hop.op == OpKind::MatMul {
            if unfused_transpose(hop.inputs[0]) {
                products.push(id);
            } else if unfused_transpose(hop.inputs[1]) {
                right_products.push(id);
            }
        }
    }
    // A transpose is skipped where every unfused user reads it in place only.
    let read_in_place = |t: HopId, u: HopId| {
        let ins = &dag.hop(u).inputs;
        (products.contains(&u) && ins[0] == t && ins[1] != t)
            || (right_products.contains(&u) && ins[1] == t && ins[0] != t)
    };
    let mut skipped: Vec<HopId> = products
        .iter()
        .map(|&p| dag.hop(p).inputs[0])
        .chain(right_products.iter().map(|&p| dag.hop(p).inputs[1]))
        .filter(|&t| {
            users[t.index()]
                .iter()
                .all(|&u| read_in_place(t, u) || !unfused[u.index()])
                && !dag.roots.contains(&t)
                && !fused_inputs.contains(&t)
        })
        .collect();
    // `t(P)` of an unfused product `P` that only the transpose reads (not one reading its
    // left operand transposed, nor one reading the parts of concatenations): `P` is computed
    // with a transposed output in the transpose's place.
    let transposed_outputs: Vec<(HopId, HopId)> = dag
        .ids()
        .filter(|&t| unfused_transpose(t))
        .map(|t| (t, dag.hop(t).inputs[0]))
        .filter(|&(t, p)| {
            dag.hop(p).op == OpKind::MatMul
                && unfused[p.index()]
                && users[p.index()] == [t]
                && !products.contains(&p)
                && !reading_parts.contains(&p)
                && !dag.roots.contains(&p)
                && !fused_inputs.contains(&p)
        })
        .collect();
    skipped.extend(transposed_outputs.iter().map(|&(_, p)| p));
    TransposeProducts {
        products,
        right_products,
        transposed_outputs,
        skipped,
    }
}

/// A product that LIMA's compiler assistance (section 4.4) makes read the parts of its
/// concatenated operands, so that partial reuse computes it from a cached product of the
/// first parts (which it computes and caches where it is missing), and the concatenations are
/// made only where something else needs them.
#[derive(Clone)]
struct PartsProduct {
    /// `Op::TransposeSelfMatMulOfCbind` or `Op::TransposedLeftMatMulOfRbind`.
    op: Op,
    /// The hops it reads, in the op's input order.
    parts: Vec<HopId>,
}

/// The unfused products that read parts ([`PartsProduct`]): `t(Z) %*% Z` of
/// `Z = cbind(X, dX)` (steplm's inner loop) and `t(X) %*% y` of `X = rbind(A, dA)` and a column
/// vector `y = rbind(yA, dy)` split at the same row (cross-validation folds).
fn parts_products(dag: &HopDag, producer: &[Option<usize>]) -> Vec<(HopId, PartsProduct)> {
    let two = |h: HopId, op: NaryOp| {
        let hop = dag.hop(h);
        (hop.op == OpKind::Nary(op) && hop.inputs.len() == 2)
            .then(|| [hop.inputs[0], hop.inputs[1]])
    };
    let mut found = Vec::new();
    for id in dag.ids() {
        let hop = dag.hop(id);
        if hop.op != OpKind::MatMul || producer[id.index()].is_some() {
            continue;
        }
        let (t, right) = (dag.hop(hop.inputs[0]), hop.inputs[1]);
        if t.op != OpKind::Reorg(ReorgOp::Transpose) {
            continue;
        }
        let left = t.inputs[0];
        if left == right {
            if let Some([x, dx]) = two(left, NaryOp::Cbind) {
                found.push((
                    id,
                    PartsProduct {
                        op: Op::TransposeSelfMatMulOfCbind,
                        parts: vec![x, dx],
                    },
                ));
            }
        } else if let (Some([a, da]), Some([ya, dy])) =
            (two(left, NaryOp::Rbind), two(right, NaryOp::Rbind))
        {
            let rows = |h: HopId| dag.hop(h).rows;
            if dag.hop(right).cols == Some(1) && rows(a).is_some() && rows(a) == rows(ya) {
                found.push((
                    id,
                    PartsProduct {
                        op: Op::TransposedLeftMatMulOfRbind,
                        parts: vec![a, da, ya, dy],
                    },
                ));
            }
        }
    }
    found
}

struct Lowering<'d> {
    dag: &'d HopDag,
    instructions: Vec<Instruction>,
    stores: Vec<Instruction>,
    /// Variables the block assigns (its transient writes).
    rebound: std::collections::HashSet<&'d str>,
    /// Whether instructions carry lineage patches.
    traced: bool,
    /// Per hop: whether it depends on an unmarked variable (its instruction is not cacheable).
    unmarked: Vec<bool>,
    /// The results of decompositions and encodings that run (one instruction computes those
    /// of a call).
    needed_results: Vec<HopId>,
    /// The results already given an instruction.
    decomposed: std::collections::HashSet<HopId>,
}

/// Per hop of `dag`: whether it reads, directly or through its inputs, one of `variables` as
/// the block started with it.
fn depends_on(dag: &HopDag, variables: &[String]) -> Vec<bool> {
    let mut depends = vec![false; dag.len()];
    if variables.is_empty() {
        return depends;
    }
    for id in hops::linearize(dag) {
        let hop = dag.hop(id);
        depends[id.index()] = match &hop.op {
            OpKind::TransientRead { name } => variables.contains(name),
            _ => hop.inputs.iter().any(|i| depends[i.index()]),
        };
    }
    depends
}

impl Lowering<'_> {
    /// Emits the instruction computing hop `id` from the values of `from` (its registers'
    /// hops, in order: what the lineage patch's placeholders stand for).
    fn emit(&mut self, op: Op, inputs: Vec<Reg>, output: Option<Reg>, id: HopId, from: &[HopId]) {
        let hop = self.dag.hop(id);
        let scalar_type = hop.is_scalar().then(|| scalar_type(hop.value_type));
        // Loads take their variable's item from the lineage map; side effects have no value.
        let lineage = (self.traced && output.is_some() && !matches!(op, Op::Load(_) | Op::Take(_)))
            .then(|| crate::lineage::patches(self.dag, &[id], from));
        self.instructions.push(Instruction {
            op,
            inputs,
            output,
            scalar_type,
            release: Vec::new(),
            span: (hop.span.start, hop.span.end),
            lineage,
            cacheable: !self.unmarked[id.index()],
        });
    }

    /// One instruction running a fused operator; its span is that of its first output.
    fn lower_fused(&mut self, op: &PlannedOperator) {
        let span = op
            .outputs
            .first()
            .map(|&(h, _)| self.dag.hop(h).span)
            .map(|s| (s.start, s.end))
            .unwrap_or((0, 0));
        self.instructions.push(Instruction {
            op: Op::Fused {
                operator: Arc::clone(&op.operator),
                outputs: op
                    .outputs
                    .iter()
                    .map(|&(h, scalar)| FusedOutput {
                        reg: h.0 as Reg,
                        scalar,
                    })
                    .collect(),
            },
            inputs: op.inputs.iter().map(|h| h.0 as Reg).collect(),
            output: None,
            scalar_type: None,
            release: Vec::new(),
            span,
            // The items of the unfused sub-DAG the operator covers (LIMA 3.3), built from the
            // hops before fusion, the operator's inputs as placeholders in order.
            lineage: self.traced.then(|| {
                let roots: Vec<HopId> = op.outputs.iter().map(|&(h, _)| h).collect();
                crate::lineage::patches(self.dag, &roots, &op.inputs)
            }),
            cacheable: op.outputs.iter().all(|&(h, _)| !self.unmarked[h.index()]),
        });
    }

    /// Lowers one hop; `in_place` names the matrix under a transposed operand of a product
    /// that reads it in place (`t(A) %*% B`, `A %*% t(B)`).
    /// One instruction for all the results of a call with several (a decomposition,
    /// `transformencode`): the first result the schedule reaches computes every result of the
    /// same call the block needs (hops of one op kind, differing in `output`, over the same
    /// inputs); `make` builds the instruction from the registers of results `0..n`.
    fn lower_several_results(
        &mut self,
        id: HopId,
        inputs: Vec<Reg>,
        n: usize,
        make: impl FnOnce(Vec<Option<Reg>>) -> Op,
    ) -> Result<(), Error> {
        if self.decomposed.contains(&id) {
            return Ok(());
        }
        let hop = self.dag.hop(id);
        let result_of = |op: &OpKind| match op {
            OpKind::Decompose { output, .. } | OpKind::TransformEncode { output } => {
                Some(usize::from(*output))
            }
            _ => None,
        };
        let same_call = |s: &lafuse_compiler::hops::Hop| {
            s.inputs == hop.inputs
                && std::mem::discriminant(&s.op) == std::mem::discriminant(&hop.op)
                && match (&s.op, &hop.op) {
                    (OpKind::Decompose { op: a, .. }, OpKind::Decompose { op: b, .. }) => a == b,
                    _ => true,
                }
        };
        let mut outputs: Vec<Option<Reg>> = vec![None; n];
        let mut roots = Vec::new();
        for (k, slot) in outputs.iter_mut().enumerate() {
            let sibling = self.needed_results.iter().copied().find(|&h| {
                let s = self.dag.hop(h);
                same_call(s) && result_of(&s.op) == Some(k)
            });
            if let Some(h) = sibling {
                *slot = Some(h.0 as Reg);
                roots.push(h);
                self.decomposed.insert(h);
            }
        }
        self.instructions.push(Instruction {
            op: make(outputs),
            inputs,
            output: None,
            scalar_type: None,
            release: Vec::new(),
            span: (hop.span.start, hop.span.end),
            lineage: self
                .traced
                .then(|| crate::lineage::patches(self.dag, &roots, &hop.inputs)),
            cacheable: roots.iter().all(|h| !self.unmarked[h.index()]),
        });
        Ok(())
    }

    fn lower_hop(
        &mut self,
        id: HopId,
        in_place: Option<InPlace>,
        reading_parts: Option<&PartsProduct>,
    ) -> Result<(), Error> {
        let hop = self.dag.hop(id);
        let out = Some(id.0 as Reg);
        let inputs: Vec<Reg> = hop.inputs.iter().map(|i| i.0 as Reg).collect();
        let op = match &hop.op {
            OpKind::Literal(l) => Op::Const(literal_value(l)),
            // A variable the block rebinds can be moved out of the symbol table: the block holds
            // its only reference and can update it in place (`X[i, 1] = v` in a loop).
            OpKind::TransientRead { name } if self.rebound.contains(name.as_str()) => {
                Op::Take(Arc::from(name.as_str()))
            }
            OpKind::TransientRead { name } => Op::Load(Arc::from(name.as_str())),
            OpKind::TransientWrite { name } => {
                let span = (hop.span.start, hop.span.end);
                self.stores.push(Instruction {
                    op: Op::Store(Arc::from(name.as_str())),
                    inputs,
                    output: None,
                    scalar_type: None,
                    release: Vec::new(),
                    span,
                    lineage: None,
                    cacheable: true,
                });
                return Ok(());
            }
            OpKind::PersistentRead { params } => Op::Read {
                params: params.iter().map(|p| Arc::from(p.as_str())).collect(),
            },
            OpKind::PersistentWrite { params } => {
                let params = params.iter().map(|p| Arc::from(p.as_str())).collect();
                self.emit(Op::Write { params }, inputs, None, id, &hop.inputs);
                return Ok(());
            }
            OpKind::DataGen(op) => match op {
                DataGenOp::Rand => {
                    self.emit(Op::Rand, inputs[..7].to_vec(), out, id, &hop.inputs[..7]);
                    return Ok(());
                }
                DataGenOp::Seq => Op::Seq,
                DataGenOp::Fill => Op::Fill,
                DataGenOp::Sinit => Op::MatrixFromString,
                DataGenOp::Time => Op::Time,
                DataGenOp::Sample => Op::Sample,
            },
            OpKind::Unary(op) => Op::Unary(*op),
            OpKind::Binary(op) => Op::Binary(*op),
            OpKind::Ternary(TernaryOp::IfElse) => Op::IfElse,
            OpKind::Ternary(TernaryOp::Replace) => Op::Replace,
            OpKind::AggUnary { op, dir } => Op::Aggregate(*op, *dir),
            OpKind::MatMul if reading_parts.is_some() => {
                if let Some(product) = reading_parts {
                    let regs = product.parts.iter().map(|p| p.0 as Reg).collect();
                    self.emit(product.op.clone(), regs, out, id, &product.parts);
                }
                return Ok(());
            }
            OpKind::Reorg(ReorgOp::Transpose) if in_place.is_some() => {
                if let Some(InPlace::Output { a, b, b_transposed }) = in_place {
                    let op = Op::TransposedOutMatMul { b_transposed };
                    self.emit(op, vec![a.0 as Reg, b.0 as Reg], out, id, &[a, b]);
                }
                return Ok(());
            }
            OpKind::MatMul if in_place.is_some() => {
                match in_place {
                    Some(InPlace::Left(a_hop)) => {
                        let a = a_hop.0 as Reg;
                        if a == inputs[1] {
                            self.emit(Op::TransposeSelfMatMul, vec![a], out, id, &[a_hop]);
                        } else {
                            let from = [a_hop, hop.inputs[1]];
                            self.emit(Op::TransposedLeftMatMul, vec![a, inputs[1]], out, id, &from);
                        }
                    }
                    Some(InPlace::Right(b_hop)) => {
                        let from = [hop.inputs[0], b_hop];
                        let regs = vec![inputs[0], b_hop.0 as Reg];
                        self.emit(Op::TransposedRightMatMul, regs, out, id, &from);
                    }
                    Some(InPlace::Output { .. }) | None => {}
                }
                return Ok(());
            }
            OpKind::MatMul => Op::MatMul,
            OpKind::Reorg(ReorgOp::Transpose) => Op::Transpose,
            OpKind::Reorg(ReorgOp::Diag) => Op::Diag,
            OpKind::Reorg(ReorgOp::Reshape) => Op::Reshape,
            OpKind::Index => Op::Slice,
            OpKind::LeftIndex => Op::LeftIndex,
            OpKind::Nary(NaryOp::Cbind) => Op::Cbind,
            OpKind::Nary(NaryOp::Rbind) => Op::Rbind,
            OpKind::Nary(NaryOp::Min) => Op::NaryMinMax(BinaryOp::Min),
            OpKind::Nary(NaryOp::Max) => Op::NaryMinMax(BinaryOp::Max),
            OpKind::Cast(CastOp::AsScalar) => Op::CastToScalar,
            OpKind::Cast(CastOp::AsMatrix) => Op::CastToMatrix,
            OpKind::Cast(CastOp::AsDouble) => Op::CastScalar(ScalarType::Double),
            OpKind::Cast(CastOp::AsInt) => Op::CastScalar(ScalarType::Int),
            OpKind::Cast(CastOp::AsBool) => Op::CastScalar(ScalarType::Bool),
            OpKind::Cumulative(CumulativeOp::Cumsum) => Op::Cumsum,
            OpKind::Cumulative(CumulativeOp::Cumprod) => Op::Cumulative(BinaryOp::Mul),
            OpKind::Cumulative(CumulativeOp::Cummin) => Op::Cumulative(BinaryOp::Min),
            OpKind::Cumulative(CumulativeOp::Cummax) => Op::Cumulative(BinaryOp::Max),
            OpKind::Cumulative(CumulativeOp::Cumsumprod) => Op::Cumsumprod,
            OpKind::Reorg(ReorgOp::Rev) => Op::Rev,
            OpKind::Param(p) => match p {
                ParamOp::Table => Op::Table,
                ParamOp::RemoveEmpty => Op::RemoveEmpty,
                ParamOp::Order => Op::Order,
                ParamOp::RowIndexMax => Op::RowIndex(true),
                ParamOp::RowIndexMin => Op::RowIndex(false),
                ParamOp::Outer => Op::Outer,
                ParamOp::Unique => Op::Unique,
                ParamOp::Aggregate => Op::GroupedAggregate,
                ParamOp::LowerTri => Op::Triangle(true),
                ParamOp::UpperTri => Op::Triangle(false),
            },
            OpKind::Solve => Op::Solve,
            OpKind::Stat(op) => Op::Stat(*op),
            OpKind::LinAlg(op) => Op::LinAlg(*op),
            OpKind::Dnn(op) => Op::Dnn(*op),
            OpKind::Decompose { op, .. } => {
                let op = *op;
                return self.lower_several_results(id, inputs, op.outputs(), |outputs| {
                    Op::Decompose { op, outputs }
                });
            }
            OpKind::TransformEncode { .. } => {
                return self.lower_several_results(id, inputs, 2, |outputs| Op::TransformEncode {
                    outputs,
                });
            }
            OpKind::TransformApply => Op::TransformApply,
            OpKind::TransformDecode => Op::TransformDecode,
            OpKind::Colnames => Op::Colnames,
            OpKind::Cast(CastOp::AsFrame) => Op::AsFrame,
            OpKind::Meta(MetaOp::Nrow) => Op::Nrow,
            OpKind::Meta(MetaOp::Ncol) => Op::Ncol,
            OpKind::Meta(MetaOp::Length) => Op::Length,
            OpKind::ListNew { names } => Op::ListNew {
                names: names.as_deref().map(Into::into),
            },
            OpKind::ListIndex => Op::ListIndex,
            OpKind::ListAppend => Op::ListAppend,
            OpKind::ListRemove { output } => Op::ListRemove { output: *output },
            OpKind::ListUnnest => Op::ListUnnest,
            OpKind::ListSet => Op::ListSet,
            OpKind::Print => {
                self.emit(Op::Print, inputs, None, id, &hop.inputs);
                return Ok(());
            }
            OpKind::Stop => {
                self.emit(Op::Stop, inputs, None, id, &hop.inputs);
                return Ok(());
            }
            OpKind::Assert => {
                self.emit(Op::Assert, inputs, None, id, &hop.inputs);
                return Ok(());
            }
            OpKind::ToString => Op::ToString,
            OpKind::Lineage => Op::Lineage,
        };
        self.emit(op, inputs, out, id, &hop.inputs);
        Ok(())
    }
}

/// The compiler's value type of a runtime scalar type.
fn value_type_of(ty: ScalarType) -> hops::ValueType {
    match ty {
        ScalarType::Double => hops::ValueType::Double,
        ScalarType::Int => hops::ValueType::Int,
        ScalarType::Bool => hops::ValueType::Bool,
        ScalarType::Str => hops::ValueType::String,
    }
}

fn scalar_type(vt: hops::ValueType) -> ScalarType {
    match vt {
        hops::ValueType::Double => ScalarType::Double,
        hops::ValueType::Int => ScalarType::Int,
        hops::ValueType::Bool => ScalarType::Bool,
        hops::ValueType::String => ScalarType::Str,
    }
}

fn literal_value(l: &Literal) -> Value {
    match l {
        Literal::Double(v) => Value::Double(*v),
        Literal::Int(v) => Value::Int(*v),
        Literal::Bool(v) => Value::Bool(*v),
        Literal::Str(s) => Value::str(s.as_str()),
    }
}

#[cfg(test)]
mod tests {
    use super::{Deferral, InBackground};
    use crate::fused::Fusion;

    /// The job of run `install_at`, as the engine takes it.
    fn due_job(deferral: &Deferral, install_at: u64) -> super::FusionJob {
        assert!(matches!(
            deferral.in_background(install_at - 1),
            InBackground::Running
        ));
        match deferral.in_background(install_at) {
            InBackground::Due(job) => job,
            _ => panic!("no job due at run {install_at}"),
        }
    }

    /// A block's fusion on the background pool reaches the run it is due at: its result, and
    /// a panic it raised as a panic of that run (as had the block been fused there).
    #[test]
    fn a_background_fusion_hands_its_result_or_its_panic_to_the_due_run() {
        let deferral = Deferral::new(1, None);
        assert!(deferral.start_in_background(
            || Ok(Fusion::Deferred {
                runs_to_pay: 7,
                expected: None
            }),
            3
        ));
        match due_job(&deferral, 3).wait() {
            Some(Ok(Fusion::Deferred {
                runs_to_pay: 7,
                expected: None,
            })) => {}
            other => panic!("{other:?}"),
        }
        let panicking = Deferral::new(1, None);
        assert!(panicking.start_in_background(|| panic!("fusing failed"), 2));
        let job = due_job(&panicking, 2);
        let panic = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| job.wait()))
            .expect_err("the fusion's panic is the run's");
        assert_eq!(panic.downcast_ref::<&str>(), Some(&"fusing failed"));
    }

    /// A scheduled background fusion keeps the plan until its start run, then hands its install
    /// run to the one start (taken once), so that the plan changes where it would have had the
    /// work started when the block fell due.
    #[test]
    fn a_scheduled_background_fusion_starts_later_and_installs_where_it_would_have() {
        let deferral = Deferral::new(5, None);
        assert!(deferral.is_due(5));
        assert_eq!(deferral.take_scheduled_install(), None);
        deferral.schedule(9, 21);
        assert!(!deferral.is_due(8));
        assert!(matches!(deferral.in_background(8), InBackground::Idle));
        assert!(deferral.is_due(9));
        assert_eq!(deferral.take_scheduled_install(), Some(21));
        assert_eq!(deferral.take_scheduled_install(), None);
        assert!(deferral.start_in_background(
            || Ok(Fusion::Deferred {
                runs_to_pay: 30,
                expected: None
            }),
            21
        ));
        match due_job(&deferral, 21).wait() {
            Some(Ok(Fusion::Deferred {
                runs_to_pay: 30,
                expected: None,
            })) => {}
            other => panic!("{other:?}"),
        }
    }
}
