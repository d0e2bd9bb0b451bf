//! Size and sparsity propagation: infers every hop's rows, columns and non-zero estimate from
//! its inputs (and from scalar inputs whose value is known, literal or not, such as `rows=10`
//! or `X[beg:end, ]` with the current values of `beg` and `end`), and checks shapes.
//!
//! Re-runnable after any rewrite. Leaves (`TransientRead`, and `PersistentRead` without literal
//! `rows`/`cols`) keep the sizes they were given. Non-zero estimates are exact where derivable
//! and otherwise follow SystemDS's worst-case rules (`OptimizerUtils.getBinaryOpSparsity`):
//! `*`/`&` take the smaller sparsity, `+`/`-`/comparisons/`min`/`max`/`|` the sum capped at 1;
//! matrix multiply uses the average-case estimate `1 - (1 - sa*sb)^k`. With a known scalar
//! operand the estimate is sharper: if `f(0, c) == 0` the result has at most `nnz(X)`
//! non-zeros, otherwise it is dense.

use super::ir::{
    BinaryOp, CastOp, CumulativeOp, DataGenOp, DataType, DecompOp, Direction, DnnOp, Hop, HopDag,
    HopId, Literal, NaryOp, OpKind, ParamOp, ReorgOp, TernaryOp,
};
use super::rewrite::constant_fold::known_value;
use crate::error::{CompileError, DagError, IndexProblem, Internal, Result, Shape, ShapeError};

/// Sizes of one hop: rows, columns and estimated non-zeros (`None` where unknown).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct Dims {
    pub rows: Option<u64>,
    pub cols: Option<u64>,
    pub nnz: Option<u64>,
}

impl Dims {
    const SCALAR: Dims = Dims {
        rows: Some(0),
        cols: Some(0),
        nnz: None,
    };

    fn of(hop: &Hop) -> Dims {
        Dims {
            rows: hop.rows,
            cols: hop.cols,
            nnz: hop.nnz,
        }
    }

    fn cells(&self) -> Option<u64> {
        self.rows?.checked_mul(self.cols?)
    }
}

fn shape(d: &Dims) -> Shape {
    Shape {
        rows: d.rows,
        cols: d.cols,
    }
}

/// Runs size propagation over every hop of the DAG in topological order, overwriting the sizes
/// of every non-leaf hop. Shape errors are user errors pointing at the offending hop's span.
pub fn propagate_sizes(dag: &mut HopDag) -> Result<()> {
    for id in topological_order(dag)? {
        let dims = infer_dims(dag, id)?;
        let known = infer_known(dag, id);
        let hop = dag.hop_mut(id);
        hop.rows = dims.rows;
        hop.cols = dims.cols;
        hop.nnz = dims.nnz;
        hop.known = known;
    }
    Ok(())
}

/// The known value ([`Hop::known`](crate::hops::Hop::known)) of scalar hop `id` from its
/// inputs' values; a transient read keeps the value it was given, a literal needs none.
pub fn infer_known(dag: &HopDag, id: HopId) -> Option<Literal> {
    let hop = dag.hop(id);
    match &hop.op {
        _ if !hop.is_scalar() => None,
        OpKind::TransientRead { .. } => hop.known.clone(),
        OpKind::Literal(_) => None,
        op => known_value(dag, op, &hop.inputs, hop.value_type),
    }
}

/// All hops of the arena (dead ones included), inputs before users. Errors on cycles and
/// out-of-range inputs (user errors: a DAG with those can only come from outside).
pub fn topological_order(dag: &HopDag) -> Result<Vec<HopId>> {
    let n = dag.hops.len();
    // 0 = unvisited, 1 = on the stack, 2 = done. Iterative DFS: DAGs from files can be deep.
    let mut state = vec![0u8; n];
    let mut order = Vec::with_capacity(n);
    for start in 0..n {
        if state[start] != 0 {
            continue;
        }
        let mut stack: Vec<(usize, usize)> = vec![(start, 0)];
        state[start] = 1;
        while let Some(&mut (node, ref mut next)) = stack.last_mut() {
            let inputs = &dag.hops[node].inputs;
            if *next < inputs.len() {
                let input = inputs[*next].index();
                *next += 1;
                if input >= n {
                    return Err(CompileError::at(
                        DagError::InputOutOfRange {
                            node,
                            input,
                            len: n,
                        },
                        dag.hops[node].span,
                    ));
                }
                match state[input] {
                    0 => {
                        state[input] = 1;
                        stack.push((input, 0));
                    }
                    1 => {
                        return Err(CompileError::at(
                            DagError::Cycle { hop: input },
                            dag.hops[node].span,
                        ))
                    }
                    _ => {}
                }
            } else {
                state[node] = 2;
                order.push(HopId(node as u32));
                stack.pop();
            }
        }
    }
    Ok(order)
}

/// The value of a scalar input as an exact integer (sizes, bounds), where known.
fn int_input(dag: &HopDag, id: HopId) -> Option<i64> {
    dag.scalar_value(id).and_then(Literal::as_exact_i64)
}

fn f64_input(dag: &HopDag, id: HopId) -> Option<f64> {
    dag.scalar_value(id).and_then(Literal::as_f64)
}

/// A non-negative size argument (`rows=`, `cols=`): `Ok(None)` if its value is not known. A
/// fractional size is truncated as SystemDS's `UtilFunctions.toLong` does (toward zero after
/// adding 2^-53), as the kernels do.
fn size_input(dag: &HopDag, hop: &Hop, id: HopId, what: &'static str) -> Result<Option<u64>> {
    let truncated = |l: &Literal| {
        let x = l.as_f64()?;
        let t = x.signum() * (x.abs() + f64::EPSILON / 2.0).floor();
        (t.is_finite() && t.abs() < (1u64 << 53) as f64).then_some(t as i64)
    };
    match dag.scalar_value(id) {
        None => Ok(None),
        Some(l) => match truncated(l) {
            Some(v) if v >= 0 => Ok(Some(v as u64)),
            _ => Err(CompileError::at(
                ShapeError::NotACount {
                    argument: what,
                    value: l.clone(),
                },
                hop.span,
            )),
        },
    }
}

fn min_opt(a: Option<u64>, b: Option<u64>) -> Option<u64> {
    Some(a?.min(b?))
}

/// Estimated non-zeros of an operand of an element-wise op: scalars count as fully dense
/// unless they are a literal zero (and then contribute no non-zeros).
fn operand_nnz(dag: &HopDag, id: HopId, out_cells: Option<u64>) -> Option<u64> {
    let hop = dag.hop(id);
    if hop.is_scalar() {
        return match f64_input(dag, id) {
            Some(0.0) => Some(0),
            _ => out_cells,
        };
    }
    let cells = Dims::of(hop).cells()?;
    let nnz = hop.nnz?;
    let out = out_cells?;
    // A broadcast vector repeats its non-zeros over the output.
    if cells == 0 {
        return Some(0);
    }
    Some(((nnz as f64 / cells as f64) * out as f64).ceil() as u64)
}

/// Infers the sizes of one hop from its (already sized) inputs.
pub fn infer_dims(dag: &HopDag, id: HopId) -> Result<Dims> {
    let hop = dag.hop(id);
    let input = |i: usize| dag.hop(hop.inputs[i]);
    let in_dims = |i: usize| Dims::of(input(i));
    let err = |cause: ShapeError| CompileError::at(cause, hop.span);
    if matches!(hop.data_type, DataType::List | DataType::Frame) {
        // A list's length and a frame's sizes are known at run time only, so `length(L)` and
        // `nrow(F)` are never folded.
        return Ok(Dims::of(hop));
    }
    if hop.data_type == DataType::Scalar {
        if let OpKind::Cast(CastOp::AsScalar) = hop.op {
            let d = in_dims(0);
            if let Some((r, c)) = d.rows.zip(d.cols) {
                if (r, c) != (1, 1) {
                    return Err(err(ShapeError::AsScalar { shape: shape(&d) }));
                }
            }
        }
        return Ok(Dims::SCALAR);
    }
    let dims = match &hop.op {
        OpKind::TransientRead { .. } => Dims::of(hop),
        OpKind::TransientWrite { .. } | OpKind::PersistentWrite { .. } => in_dims(0),
        OpKind::PersistentRead { params } => {
            let mut d = Dims::of(hop);
            for (name, &p) in params.iter().zip(&hop.inputs[1..]) {
                match name.as_str() {
                    "rows" => d.rows = size_input(dag, hop, p, "rows")?.or(d.rows),
                    "cols" => d.cols = size_input(dag, hop, p, "cols")?.or(d.cols),
                    _ => {}
                }
            }
            d
        }
        OpKind::DataGen(g) => datagen_dims(dag, hop, *g)?,
        OpKind::Unary(u) => {
            let d = in_dims(0);
            let nnz = if u.is_sparse_safe() { d.nnz } else { d.cells() };
            Dims { nnz, ..d }
        }
        OpKind::Binary(b) => binary_dims(dag, hop, *b)?,
        OpKind::Ternary(TernaryOp::IfElse) => {
            let mut out: Option<Dims> = None;
            for (i, &inp) in hop.inputs.iter().enumerate() {
                if dag.hop(inp).is_matrix() {
                    let d = in_dims(i);
                    if let Some(o) = out {
                        if conflict(o.rows, d.rows) || conflict(o.cols, d.cols) {
                            return Err(err(ShapeError::SameShape {
                                op: "ifelse",
                                left: shape(&o),
                                right: shape(&d),
                            }));
                        }
                        out = Some(Dims {
                            rows: o.rows.or(d.rows),
                            cols: o.cols.or(d.cols),
                            nnz: None,
                        });
                    } else {
                        out = Some(Dims { nnz: None, ..d });
                    }
                }
            }
            let mut d = out.unwrap_or(Dims {
                rows: Some(1),
                cols: Some(1),
                nnz: None,
            });
            let cells = d.cells();
            let yes = operand_nnz(dag, hop.inputs[1], cells);
            let no = operand_nnz(dag, hop.inputs[2], cells);
            d.nnz = min_opt(cells, yes.zip(no).map(|(a, b)| a.saturating_add(b)));
            d
        }
        OpKind::Ternary(TernaryOp::Replace) => {
            let d = in_dims(0);
            let pattern = f64_input(dag, hop.inputs[1]);
            let replacement = f64_input(dag, hop.inputs[2]);
            let nnz = match (pattern, replacement) {
                // Zeros stay zeros: at most the input's non-zeros.
                (Some(p), _) if p != 0.0 => d.nnz,
                (Some(_), Some(0.0)) => d.nnz,
                _ => d.cells(),
            };
            Dims { nnz, ..d }
        }
        OpKind::AggUnary { dir, .. } => {
            let d = in_dims(0);
            let (rows, cols) = match dir {
                Direction::Row => (d.rows, Some(1)),
                Direction::Col => (Some(1), d.cols),
                Direction::Full => {
                    return Err(CompileError::internal(Internal::Invariant {
                        what: "a full aggregate typed as a matrix",
                    }));
                }
            };
            let cells = rows.zip(cols).and_then(|(r, c)| r.checked_mul(c));
            // Empty rows (columns) aggregate to zero, so at most nnz(X) non-zeros.
            Dims {
                rows,
                cols,
                nnz: min_opt(cells, d.nnz),
            }
        }
        OpKind::MatMul => {
            let (a, b) = (in_dims(0), in_dims(1));
            if let (Some(k1), Some(k2)) = (a.cols, b.rows) {
                if k1 != k2 {
                    return Err(err(ShapeError::MatrixMultiply {
                        left: shape(&a),
                        right: shape(&b),
                    }));
                }
            }
            let mut d = Dims {
                rows: a.rows,
                cols: b.cols,
                nnz: None,
            };
            d.nnz = matmul_nnz(&a, &b, d.cells());
            d
        }
        OpKind::Reorg(ReorgOp::Transpose) => {
            let d = in_dims(0);
            Dims {
                rows: d.cols,
                cols: d.rows,
                nnz: d.nnz,
            }
        }
        OpKind::Reorg(ReorgOp::Diag) => {
            let d = in_dims(0);
            match (d.rows, d.cols) {
                (Some(r), Some(1)) => Dims {
                    rows: Some(r),
                    cols: Some(r),
                    nnz: d.nnz,
                },
                (Some(r), Some(c)) if r == c => Dims {
                    rows: Some(r),
                    cols: Some(1),
                    nnz: min_opt(Some(r), d.nnz),
                },
                (Some(_), Some(_)) => return Err(err(ShapeError::Diag { shape: shape(&d) })),
                _ => Dims::default(),
            }
        }
        OpKind::Reorg(ReorgOp::Reshape) => {
            let d = in_dims(0);
            let rows = size_input(dag, hop, hop.inputs[1], "rows")?;
            let cols = size_input(dag, hop, hop.inputs[2], "cols")?;
            if let (Some(r), Some(c), Some(cells)) = (rows, cols, d.cells()) {
                if r.checked_mul(c) != Some(cells) {
                    return Err(err(ShapeError::Reshape {
                        from: shape(&d),
                        rows: r,
                        cols: c,
                    }));
                }
            }
            Dims {
                rows,
                cols,
                nnz: d.nnz,
            }
        }
        OpKind::Index => index_dims(dag, hop)?,
        OpKind::LeftIndex => {
            let d = in_dims(0);
            let v = dag.hop(hop.inputs[1]);
            let (rows, cols) = check_range(dag, hop, &d, &hop.inputs[2..6])?;
            if v.is_matrix() {
                let vd = Dims::of(v);
                if conflict(rows, vd.rows) || conflict(cols, vd.cols) {
                    return Err(err(ShapeError::LeftIndex {
                        value: shape(&vd),
                        rows,
                        cols,
                        target: shape(&d),
                    }));
                }
            }
            let range_cells = rows.zip(cols).and_then(|(r, c)| r.checked_mul(c));
            let added = operand_nnz(dag, hop.inputs[1], range_cells);
            Dims {
                nnz: min_opt(
                    d.cells(),
                    d.nnz.zip(added).map(|(a, b)| a.saturating_add(b)),
                ),
                ..d
            }
        }
        OpKind::Nary(n @ (NaryOp::Cbind | NaryOp::Rbind)) => {
            let cbind = *n == NaryOp::Cbind;
            let first = in_dims(0);
            let (mut keep, mut grow, mut nnz) = if cbind {
                (first.rows, first.cols, first.nnz)
            } else {
                (first.cols, first.rows, first.nnz)
            };
            for i in 1..hop.inputs.len() {
                let d = in_dims(i);
                let (k, g) = if cbind {
                    (d.rows, d.cols)
                } else {
                    (d.cols, d.rows)
                };
                if conflict(keep, k) {
                    let what = if cbind { "rows" } else { "columns" };
                    return Err(err(ShapeError::Bind {
                        op: n.name(),
                        axis: what,
                        first: shape(&first),
                        input: i + 1,
                        other: shape(&d),
                    }));
                }
                keep = keep.or(k);
                grow = grow.zip(g).map(|(a, b)| a.saturating_add(b));
                nnz = nnz.zip(d.nnz).map(|(a, b)| a.saturating_add(b));
            }
            if cbind {
                Dims {
                    rows: keep,
                    cols: grow,
                    nnz,
                }
            } else {
                Dims {
                    rows: grow,
                    cols: keep,
                    nnz,
                }
            }
        }
        OpKind::Nary(n) => {
            let mut out: Option<Dims> = None;
            for (i, &inp) in hop.inputs.iter().enumerate() {
                if dag.hop(inp).is_matrix() {
                    let d = in_dims(i);
                    if let Some(o) = out {
                        if conflict(o.rows, d.rows) || conflict(o.cols, d.cols) {
                            return Err(err(ShapeError::SameShape {
                                op: n.name(),
                                left: shape(&o),
                                right: shape(&d),
                            }));
                        }
                    } else {
                        out = Some(d);
                    }
                }
            }
            let mut d = out.unwrap_or_default();
            let cells = d.cells();
            d.nnz = hop.inputs.iter().try_fold(0u64, |acc, &i| {
                Some(acc.saturating_add(operand_nnz(dag, i, cells)?))
            });
            d.nnz = min_opt(cells, d.nnz);
            d
        }
        OpKind::Cast(CastOp::AsMatrix) => {
            let x = input(0);
            if x.is_list() || x.is_frame() {
                // The element's or frame's shape is known at run time only.
                Dims {
                    rows: None,
                    cols: None,
                    nnz: None,
                }
            } else if x.is_matrix() {
                Dims::of(x)
            } else {
                let nnz = match f64_input(dag, hop.inputs[0]) {
                    Some(0.0) => 0,
                    _ => 1,
                };
                Dims {
                    rows: Some(1),
                    cols: Some(1),
                    nnz: Some(nnz),
                }
            }
        }
        OpKind::Cumulative(CumulativeOp::Cumsumprod) => {
            let d = in_dims(0);
            if conflict(d.cols, Some(2)) {
                return Err(err(ShapeError::Columns {
                    op: "cumsumprod",
                    cols: 2,
                    shape: shape(&d),
                }));
            }
            Dims {
                rows: d.rows,
                cols: Some(1),
                nnz: d.rows,
            }
        }
        OpKind::Reorg(ReorgOp::Rev) => in_dims(0),
        OpKind::Cumulative(_) => {
            let d = in_dims(0);
            Dims {
                nnz: d.cells(),
                ..d
            }
        }
        OpKind::Solve => {
            let (a, b) = (in_dims(0), in_dims(1));
            if conflict(a.rows, a.cols) || conflict(a.rows, b.rows) {
                return Err(err(ShapeError::Solve {
                    a: shape(&a),
                    b: shape(&b),
                }));
            }
            let d = Dims {
                rows: a.cols.or(a.rows),
                cols: b.cols,
                nnz: None,
            };
            Dims {
                nnz: d.cells(),
                ..d
            }
        }
        OpKind::Param(p) => param_dims(dag, hop, *p)?,
        // `quantile(X, P)` with a column of probabilities: one quantile per row of P.
        OpKind::Stat(_) => {
            let p = in_dims(hop.inputs.len() - 1);
            let d = Dims {
                rows: p.rows,
                cols: Some(1),
                nnz: None,
            };
            Dims {
                nnz: d.cells(),
                ..d
            }
        }
        OpKind::Dnn(op) => dnn_dims(dag, hop, *op),
        // Square inputs are checked when the kernel runs (as SystemDS does).
        OpKind::LinAlg(_) => {
            let d = in_dims(0);
            Dims {
                nnz: d.cells(),
                ..d
            }
        }
        // The encoding's width depends on the frame's distinct values; `transformapply`'s on
        // the metadata's.
        OpKind::TransformEncode { .. }
        | OpKind::TransformApply
        | OpKind::TransformDecode
        | OpKind::Colnames => Dims::default(),
        OpKind::Decompose { op, output } => {
            let a = in_dims(0);
            let p = match (a.rows, a.cols) {
                (Some(r), Some(c)) => Some(r.min(c)),
                _ => None,
            };
            let (rows, cols) = match (op, output) {
                (DecompOp::Eigen, 0) => (a.rows, Some(1)),
                (DecompOp::Eigen, _) | (DecompOp::Lu, _) => (a.rows, a.rows),
                (DecompOp::Svd, 0) => (a.rows, p),
                (DecompOp::Svd, 1) => (p, p),
                (DecompOp::Svd, _) => (a.cols, p),
                (DecompOp::Qr, _) => (a.rows, a.cols),
            };
            let d = Dims {
                rows,
                cols,
                nnz: None,
            };
            Dims {
                nnz: d.cells(),
                ..d
            }
        }
        OpKind::Literal(_)
        | OpKind::Cast(_)
        | OpKind::Meta(_)
        | OpKind::Print
        | OpKind::Stop
        | OpKind::Assert
        | OpKind::ToString
        | OpKind::Lineage
        | OpKind::ListNew { .. }
        | OpKind::ListIndex
        | OpKind::ListAppend
        | OpKind::ListRemove { .. }
        | OpKind::ListUnnest
        | OpKind::ListSet => {
            return Err(CompileError::internal(Internal::NotAMatrix {
                op: hop.op.display_name(),
            }))
        }
    };
    Ok(dims)
}

/// Sizes of the parameterized reorganizations. `table` without output dimensions,
/// `removeEmpty` (along its margin) and `unique` depend on the data: unknown here.
fn param_dims(dag: &HopDag, hop: &Hop, p: ParamOp) -> Result<Dims> {
    let inp = &hop.inputs;
    let in_dims = |i: usize| Dims::of(dag.hop(inp[i]));
    let err = |cause: ShapeError| CompileError::at(cause, hop.span);
    let bad = |argument: &'static str, value: &Literal, expected: &'static str| {
        err(ShapeError::Argument {
            function: p.name(),
            argument,
            value: value.to_string(),
            expected,
        })
    };
    Ok(match p {
        ParamOp::Table => {
            // The matrices among A, B and W must agree in shape, or be vectors of as many
            // cells (a row and a column, paired in order as SystemDS's cell loop pairs them).
            let mut first: Option<Dims> = None;
            let vector = |d: &Dims| d.rows == Some(1) || d.cols == Some(1);
            for &id in &inp[..3] {
                if !dag.hop(id).is_matrix() {
                    continue;
                }
                let d = Dims::of(dag.hop(id));
                match first {
                    Some(f)
                        if (conflict(f.rows, d.rows) || conflict(f.cols, d.cols))
                            && !(vector(&f) && vector(&d) && !conflict(f.cells(), d.cells())) =>
                    {
                        return Err(err(ShapeError::SameShape {
                            op: "table",
                            left: shape(&f),
                            right: shape(&d),
                        }))
                    }
                    Some(_) => {}
                    None => first = Some(d),
                }
            }
            // SystemDS truncates fractional output dimensions; -1 means "not given".
            let odim = |i: usize| -> Result<Option<u64>> {
                match dag.scalar_value(inp[i]) {
                    None => Ok(None),
                    Some(l) => match l.as_f64() {
                        Some(-1.0) => Ok(None),
                        Some(v) if v >= 0.0 && v.is_finite() => Ok(Some(v.trunc() as u64)),
                        _ => Err(bad("output dimension", l, "expected a count or -1")),
                    },
                }
            };
            let (rows, cols) = (odim(3)?, odim(4)?);
            let cells = first.and_then(|f| f.cells());
            Dims {
                rows,
                cols,
                nnz: min_opt(rows.zip(cols).map(|(r, c)| r.saturating_mul(c)), cells),
            }
        }
        ParamOp::RemoveEmpty => {
            let d = in_dims(0);
            let rows = match dag.scalar_value(inp[1]) {
                Some(Literal::Str(m)) if m == "rows" => true,
                Some(Literal::Str(m)) if m == "cols" => false,
                Some(l) => return Err(bad("margin", l, "expected \"rows\" or \"cols\"")),
                None => {
                    return Ok(Dims {
                        nnz: d.nnz,
                        ..Dims::default()
                    })
                }
            };
            if let Some(&s) = inp.get(3) {
                let sd = Dims::of(dag.hop(s));
                let (len, want) = if rows {
                    (sd.rows.zip(sd.cols).map(|(r, c)| r * c), d.rows)
                } else {
                    (sd.rows.zip(sd.cols).map(|(r, c)| r * c), d.cols)
                };
                if conflict(len, want) {
                    return Err(err(ShapeError::SameShape {
                        op: "removeEmpty (select)",
                        left: shape(&d),
                        right: shape(&sd),
                    }));
                }
            }
            if rows {
                Dims {
                    rows: None,
                    cols: d.cols,
                    nnz: d.nnz,
                }
            } else {
                Dims {
                    rows: d.rows,
                    cols: None,
                    nnz: d.nnz,
                }
            }
        }
        ParamOp::Order => {
            let d = in_dims(0);
            if let (Some(l), Some(cols)) = (dag.scalar_value(inp[1]), d.cols) {
                match l.as_exact_i64() {
                    Some(by) if by >= 1 && (by as u64) <= cols => {}
                    _ => return Err(bad("by", l, "expected a column of the target")),
                }
            }
            match dag
                .scalar_value(inp[3])
                .and_then(Literal::as_f64)
                .map(|v| v != 0.0)
            {
                Some(true) => Dims {
                    rows: d.rows,
                    cols: Some(1),
                    nnz: d.rows,
                },
                Some(false) => d,
                None => Dims {
                    rows: d.rows,
                    cols: None,
                    nnz: None,
                },
            }
        }
        ParamOp::LowerTri | ParamOp::UpperTri => {
            let d = in_dims(0);
            Dims {
                nnz: min_opt(d.nnz, d.cells()),
                ..d
            }
        }
        ParamOp::RowIndexMax | ParamOp::RowIndexMin => {
            let d = in_dims(0);
            Dims {
                rows: d.rows,
                cols: Some(1),
                nnz: d.rows,
            }
        }
        ParamOp::Aggregate => {
            let (x, g) = (in_dims(0), in_dims(1));
            if conflict(x.rows, g.rows) || conflict(g.cols, Some(1)) {
                return Err(err(ShapeError::SameShape {
                    op: "aggregate (groups)",
                    left: shape(&x),
                    right: shape(&g),
                }));
            }
            let rows = match dag.scalar_value(inp[3]) {
                None => None,
                Some(l) => match l.as_exact_i64() {
                    Some(-1) => None,
                    Some(k) if k >= 0 => Some(k as u64),
                    _ => return Err(bad("ngroups", l, "expected a count")),
                },
            };
            if let Some(Literal::Str(f)) = dag.scalar_value(inp[2]) {
                const FNS: [&str; 7] = [
                    "sum",
                    "count",
                    "mean",
                    "variance",
                    "centralmoment",
                    "min",
                    "max",
                ];
                if !FNS.contains(&f.as_str()) {
                    return Err(bad(
                        "fn",
                        &Literal::Str(f.clone()),
                        "expected sum, count, mean, variance, centralmoment, min or max",
                    ));
                }
            }
            Dims {
                rows,
                cols: x.cols,
                nnz: None,
            }
        }
        ParamOp::Unique => {
            let d = in_dims(0);
            match dag.scalar_value(inp[1]) {
                // "union": `unique(rbind(A, B))` (construction), a column of distinct values.
                Some(Literal::Str(s)) if s == "rc" || s == "union" => Dims {
                    rows: None,
                    cols: Some(1),
                    nnz: None,
                },
                Some(Literal::Str(s)) if s == "r" => Dims {
                    rows: d.rows,
                    cols: None,
                    nnz: None,
                },
                Some(Literal::Str(s)) if s == "c" => Dims {
                    rows: None,
                    cols: d.cols,
                    nnz: None,
                },
                Some(l) => return Err(bad("dir", l, "expected \"rc\", \"r\" or \"c\"")),
                None => Dims::default(),
            }
        }
        ParamOp::Outer => {
            let (u, v) = (in_dims(0), in_dims(1));
            // A second operand with as many rows as the column vector is taken cell by cell,
            // as SystemDS's kernels take it (raJoin's `outer(bucket, seqMatrix, "==")`).
            let matrix_right = u.rows.is_some() && v.rows == u.rows;
            if conflict(u.cols, Some(1)) || (!matrix_right && conflict(v.rows, Some(1))) {
                return Err(err(ShapeError::Outer {
                    left: shape(&u),
                    right: shape(&v),
                }));
            }
            let cells = u.rows.zip(v.cols).and_then(|(r, c)| r.checked_mul(c));
            Dims {
                rows: u.rows,
                cols: v.cols,
                nnz: cells,
            }
        }
    })
}

/// Two known sizes that differ.
fn conflict(a: Option<u64>, b: Option<u64>) -> bool {
    matches!((a, b), (Some(x), Some(y)) if x != y)
}

fn datagen_dims(dag: &HopDag, hop: &Hop, g: DataGenOp) -> Result<Dims> {
    let inp = &hop.inputs;
    Ok(match g {
        DataGenOp::Rand => {
            let rows = size_input(dag, hop, inp[0], "rows")?;
            let cols = size_input(dag, hop, inp[1], "cols")?;
            let cells = rows.zip(cols).and_then(|(r, c)| r.checked_mul(c));
            let (min, max) = (f64_input(dag, inp[2]), f64_input(dag, inp[3]));
            let sparsity = f64_input(dag, inp[4]);
            if let Some(s) = sparsity {
                if !(0.0..=1.0).contains(&s) {
                    return Err(CompileError::at(
                        ShapeError::RandSparsity { sparsity: s },
                        hop.span,
                    ));
                }
            }
            if let (Some(lo), Some(hi)) = (min, max) {
                if lo > hi {
                    return Err(CompileError::at(
                        ShapeError::RandRange { min: lo, max: hi },
                        hop.span,
                    ));
                }
            }
            let nnz = if min == Some(0.0) && max == Some(0.0) {
                Some(0)
            } else {
                cells
                    .zip(sparsity)
                    .map(|(c, s)| (c as f64 * s).round() as u64)
            };
            Dims { rows, cols, nnz }
        }
        DataGenOp::Fill => {
            let rows = size_input(dag, hop, inp[1], "rows")?;
            let cols = size_input(dag, hop, inp[2], "cols")?;
            let cells = rows.zip(cols).and_then(|(r, c)| r.checked_mul(c));
            let nnz = match f64_input(dag, inp[0]) {
                Some(0.0) => Some(0),
                _ => cells,
            };
            Dims { rows, cols, nnz }
        }
        DataGenOp::Sinit => {
            let rows = size_input(dag, hop, inp[1], "rows")?;
            let cols = size_input(dag, hop, inp[2], "cols")?;
            let mut nnz = None;
            if let Some(Literal::Str(text)) = dag.scalar_value(inp[0]) {
                let values = parse_sinit(text).map_err(|e| CompileError::at(e, hop.span))?;
                if let Some(cells) = rows.zip(cols).and_then(|(r, c)| r.checked_mul(c)) {
                    if values.len() as u64 != cells {
                        return Err(CompileError::at(
                            ShapeError::MatrixValues {
                                rows: rows.unwrap_or(0),
                                cols: cols.unwrap_or(0),
                                cells,
                                values: values.len(),
                            },
                            hop.span,
                        ));
                    }
                }
                nnz = Some(values.iter().filter(|v| **v != 0.0).count() as u64);
            }
            Dims { rows, cols, nnz }
        }
        DataGenOp::Seq => {
            let (from, to, incr) = (
                f64_input(dag, inp[0]),
                f64_input(dag, inp[1]),
                f64_input(dag, inp[2]),
            );
            match (from, to, incr) {
                (Some(from), Some(to), Some(incr)) => {
                    let n =
                        seq_length(from, to, incr).map_err(|e| CompileError::at(e, hop.span))?;
                    // One element is zero if 0 lies on the grid from + k*incr inside the range.
                    let k = -from / incr;
                    let has_zero = n > 0 && k >= 0.0 && k.fract() == 0.0 && (k as u64) < n;
                    Dims {
                        rows: Some(n),
                        cols: Some(1),
                        nnz: Some(n - has_zero as u64),
                    }
                }
                _ => Dims {
                    rows: None,
                    cols: Some(1),
                    nnz: None,
                },
            }
        }
        DataGenOp::Time => Dims::SCALAR,
        DataGenOp::Sample => {
            let rows = size_input(dag, hop, inp[1], "size")?;
            let range = f64_input(dag, inp[0]);
            let replace = f64_input(dag, inp[2]).map(|v| v != 0.0);
            if let (Some(n), Some(r), Some(false)) = (rows, range, replace) {
                if r.trunc() < n as f64 {
                    return Err(CompileError::at(
                        ShapeError::Argument {
                            function: "sample",
                            argument: "size",
                            value: n.to_string(),
                            expected: "without replacement at most the range",
                        },
                        hop.span,
                    ));
                }
            }
            Dims {
                rows,
                cols: Some(1),
                nnz: rows,
            }
        }
    })
}

/// Number of elements of `seq(from, to, incr)`, or the user error SystemDS reports.
pub(crate) fn seq_length(from: f64, to: f64, incr: f64) -> std::result::Result<u64, ShapeError> {
    if incr == 0.0 || !incr.is_finite() || !from.is_finite() || !to.is_finite() {
        return Err(ShapeError::SeqIncrement { from, to, incr });
    }
    if (to - from) * incr < 0.0 {
        return Err(ShapeError::SeqSign { from, to, incr });
    }
    Ok((((to - from) / incr).floor() as u64).saturating_add(1))
}

/// Parses the values of `matrix("1 2 3", ...)`: numbers separated by spaces and/or commas.
pub fn parse_sinit(text: &str) -> std::result::Result<Vec<f64>, ShapeError> {
    text.split(|c: char| c == ',' || c.is_whitespace())
        .filter(|t| !t.is_empty())
        .map(|t| {
            t.parse::<f64>().map_err(|_| ShapeError::MatrixToken {
                token: t.to_string(),
            })
        })
        .collect()
}

/// The result dims of an element-wise binary op between two matrices, with SystemDS's
/// broadcasting: the right operand is a 1×1 matrix, or a row vector 1×n or column vector m×1
/// of the left's shape. SystemDS rejects everything else (a vector on the left, a column vector
/// with a row vector), and so do we, so that scripts mean the same on both systems.
pub fn broadcast_dims(a: (u64, u64), b: (u64, u64)) -> Option<(u64, u64)> {
    let ((r1, c1), (r2, c2)) = (a, b);
    let fits = (r1, c1) == (r2, c2)
        || (r2, c2) == (1, 1)
        || (r2 == 1 && c2 == c1)
        || (c2 == 1 && r2 == r1);
    fits.then_some((r1, c1))
}

fn binary_dims(dag: &HopDag, hop: &Hop, op: BinaryOp) -> Result<Dims> {
    let (a, b) = (dag.hop(hop.inputs[0]), dag.hop(hop.inputs[1]));
    let (da, db) = (Dims::of(a), Dims::of(b));
    let (rows, cols) = match (a.is_matrix(), b.is_matrix()) {
        (true, true) => match (da.rows.zip(da.cols), db.rows.zip(db.cols)) {
            (Some(x), Some(y)) => match broadcast_dims(x, y) {
                Some((r, c)) => (Some(r), Some(c)),
                None => {
                    return Err(CompileError::at(
                        ShapeError::Broadcast {
                            op: op.name(),
                            left: shape(&da),
                            right: shape(&db),
                        },
                        hop.span,
                    ))
                }
            },
            // Partially unknown: a known side larger than 1 determines the result.
            _ => (
                da.rows
                    .filter(|&r| r != 1)
                    .or(db.rows.filter(|&r| r != 1))
                    .or(da.rows.zip(db.rows).map(|_| 1)),
                da.cols
                    .filter(|&c| c != 1)
                    .or(db.cols.filter(|&c| c != 1))
                    .or(da.cols.zip(db.cols).map(|_| 1)),
            ),
        },
        (true, false) => (da.rows, da.cols),
        (false, true) => (db.rows, db.cols),
        (false, false) => return Ok(Dims::SCALAR),
    };
    let cells = rows.zip(cols).and_then(|(r, c)| r.checked_mul(c));
    let nnz = binary_nnz(dag, hop, op, cells);
    Ok(Dims { rows, cols, nnz })
}

fn binary_nnz(dag: &HopDag, hop: &Hop, op: BinaryOp, cells: Option<u64>) -> Option<u64> {
    let (ia, ib) = (hop.inputs[0], hop.inputs[1]);
    let (a, b) = (dag.hop(ia), dag.hop(ib));
    // Matrix-scalar with a known scalar: decide by f(0, c).
    if a.is_matrix() != b.is_matrix() {
        let (m, s, scalar_left) = if a.is_matrix() {
            (ia, ib, false)
        } else {
            (ib, ia, true)
        };
        if let Some(c) = f64_input(dag, s) {
            let at_zero = if scalar_left {
                op.apply(c, 0.0)
            } else {
                op.apply(0.0, c)
            };
            let m_nnz = operand_nnz(dag, m, cells);
            return if at_zero == 0.0 { m_nnz } else { cells };
        }
    }
    let sa = operand_nnz(dag, ia, cells)? as f64 / cells?.max(1) as f64;
    let sb = operand_nnz(dag, ib, cells)? as f64 / cells?.max(1) as f64;
    let sparsity = match op {
        BinaryOp::Mul | BinaryOp::And => sa.min(sb),
        BinaryOp::Add
        | BinaryOp::Sub
        | BinaryOp::Lt
        | BinaryOp::Gt
        | BinaryOp::Ne
        | BinaryOp::Min
        | BinaryOp::Max
        | BinaryOp::Or => (sa + sb).min(1.0),
        BinaryOp::Div => (sa + (1.0 - sb)).min(1.0),
        BinaryOp::Mod | BinaryOp::IntDiv => sa,
        _ => 1.0,
    };
    Some(((cells? as f64) * sparsity).ceil().min(cells? as f64) as u64)
}

fn matmul_nnz(a: &Dims, b: &Dims, cells: Option<u64>) -> Option<u64> {
    let k = a.cols?;
    let (na, nb) = (a.nnz?, b.nnz?);
    if na == 0 || nb == 0 || k == 0 {
        return Some(0);
    }
    let sa = na as f64 / a.cells()? as f64;
    let sb = nb as f64 / b.cells()? as f64;
    let sparsity = 1.0 - (1.0 - sa * sb).powf(k as f64);
    let cells = cells?;
    Some(((cells as f64) * sparsity).round().clamp(0.0, cells as f64) as u64)
}

/// Checks literal bounds of an index range and returns the range's (rows, cols).
fn check_range(
    dag: &HopDag,
    hop: &Hop,
    d: &Dims,
    bounds: &[HopId],
) -> Result<(Option<u64>, Option<u64>)> {
    let mut out = [None, None];
    for (axis, &(lo, hi)) in [(bounds[0], bounds[1]), (bounds[2], bounds[3])]
        .iter()
        .enumerate()
    {
        let (what, extent) = if axis == 0 {
            ("row", d.rows)
        } else {
            ("column", d.cols)
        };
        let (l, u) = (int_input(dag, lo), int_input(dag, hi));
        let bad = |problem: IndexProblem| {
            Err(CompileError::at(
                ShapeError::Index {
                    axis: what,
                    problem,
                    shape: shape(d),
                },
                hop.span,
            ))
        };
        if let Some(l) = l {
            if l < 1 {
                return bad(IndexProblem::BelowOne { index: l });
            }
        }
        if let (Some(l), Some(u)) = (l, u) {
            if u < l {
                return bad(IndexProblem::Reversed { lower: l, upper: u });
            }
        }
        if let (Some(u), Some(n)) = (u, extent) {
            if u as u64 > n {
                return bad(IndexProblem::OutOfBounds { index: u });
            }
        }
        if let (Some(l), Some(n)) = (l, extent) {
            if l as u64 > n {
                return bad(IndexProblem::OutOfBounds { index: l });
            }
        }
        out[axis] = if lo == hi {
            Some(1)
        } else {
            l.zip(u).map(|(l, u)| (u - l + 1) as u64)
        };
    }
    Ok((out[0], out[1]))
}

fn index_dims(dag: &HopDag, hop: &Hop) -> Result<Dims> {
    let x = dag.hop(hop.inputs[0]);
    let d = Dims::of(x);
    let (rows, cols) = check_range(dag, hop, &d, &hop.inputs[1..5])?;
    let cells = rows.zip(cols).and_then(|(r, c)| r.checked_mul(c));
    let nnz = if (rows, cols) == (d.rows, d.cols) {
        d.nnz
    } else {
        min_opt(cells, d.nnz)
    };
    Ok(Dims { rows, cols, nnz })
}

/// The size of a deep-learning built-in's result from its geometry's scalars, where they are
/// known and valid. As SystemDS's validation, an invalid geometry leaves the size unknown: the
/// kernel reports it when it runs, as it checks the inputs against the geometry.
fn dnn_dims(dag: &HopDag, hop: &Hop, op: DnnOp) -> Dims {
    let first = Dims::of(dag.hop(hop.inputs[0]));
    if matches!(op, DnnOp::BiasAdd | DnnOp::BiasMultiply) {
        return Dims { nnz: None, ..first };
    }
    // SystemDS reads each as a long (`(long) getDoubleValue`): fractions truncated.
    let at = |k: usize| {
        f64_input(dag, hop.inputs[op.matrix_inputs() + k])
            .filter(|v| v.is_finite() && v.abs() < (1u64 << 53) as f64)
            .map(|v| v.trunc() as i64)
    };
    let [sh, sw, ph, pw, n, c, h, w] = [0, 1, 2, 3, 4, 5, 6, 7].map(at);
    let (k, r, s) = if op.is_pooling() {
        (c, at(8), at(9))
    } else {
        (at(8), at(9), at(10))
    };
    let extent = |size: Option<i64>, filter: Option<i64>, stride: Option<i64>, pad: Option<i64>| {
        let (size, filter, stride, pad) = (size?, filter?, stride?, pad?);
        let out = (size + 2 * pad - filter).checked_div(stride)? + 1;
        (size > 0 && filter > 0 && stride > 0 && pad >= 0 && size + 2 * pad >= filter)
            .then_some(out)
    };
    let (p, q) = (extent(h, r, sh, ph), extent(w, s, sw, pw));
    let count = |v: Option<i64>| v.and_then(|v| u64::try_from(v).ok());
    let product = |parts: &[Option<i64>]| {
        parts
            .iter()
            .try_fold(1u64, |acc, &v| acc.checked_mul(count(v)?))
    };
    let (rows, cols) = match op {
        DnnOp::Conv2d => (count(n), product(&[k, p, q])),
        DnnOp::Conv2dBackwardFilter => (count(k), product(&[c, r, s])),
        DnnOp::MaxPool | DnnOp::AvgPool => (count(n), product(&[c, p, q])),
        _ => (count(n), product(&[c, h, w])),
    };
    Dims {
        rows,
        cols,
        nnz: None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn broadcasting_follows_systemds() {
        assert_eq!(broadcast_dims((3, 4), (3, 4)), Some((3, 4)));
        assert_eq!(broadcast_dims((3, 4), (1, 4)), Some((3, 4)));
        assert_eq!(broadcast_dims((3, 4), (3, 1)), Some((3, 4)));
        assert_eq!(broadcast_dims((3, 4), (1, 1)), Some((3, 4)));
        // SystemDS rejects outer broadcasting of a column with a row vector, and a vector on
        // the left (checked with SystemDS 3.4: "Mismatch in dimensions for operation").
        assert_eq!(broadcast_dims((3, 1), (1, 4)), None);
        assert_eq!(broadcast_dims((1, 4), (3, 4)), None);
        assert_eq!(broadcast_dims((3, 4), (3, 3)), None);
    }

    #[test]
    fn seq_lengths() {
        assert_eq!(seq_length(1.0, 10.0, 1.0), Ok(10));
        assert_eq!(seq_length(10.0, 1.0, -3.0), Ok(4));
        assert_eq!(seq_length(0.0, 1.0, 0.3), Ok(4));
        assert!(seq_length(1.0, 10.0, -1.0).is_err());
        assert!(seq_length(1.0, 10.0, 0.0).is_err());
    }

    #[test]
    fn sinit_parsing() {
        assert_eq!(parse_sinit("1 2,3  0"), Ok(vec![1.0, 2.0, 3.0, 0.0]));
        assert!(parse_sinit("1 x").is_err());
    }

    #[test]
    fn matmul_estimate_is_average_case() {
        let a = Dims {
            rows: Some(10),
            cols: Some(10),
            nnz: Some(10),
        };
        let b = Dims {
            rows: Some(10),
            cols: Some(10),
            nnz: Some(10),
        };
        // 1 - (1 - 0.01)^10 = 0.0956 → 9.56 of 100 cells.
        assert_eq!(matmul_nnz(&a, &b, Some(100)), Some(10));
        let dense = Dims {
            rows: Some(10),
            cols: Some(10),
            nnz: Some(100),
        };
        assert_eq!(matmul_nnz(&dense, &dense, Some(100)), Some(100));
    }
}
