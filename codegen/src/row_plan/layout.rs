//! Row operators at execution: every vector length and buffer offset derived from the input
//! shapes and validated before any generated code runs ([`layout`]).

use super::*;
use crate::backend::RowInputs;

/// Per-node lengths at execution.
#[derive(Clone, Copy, Debug, Default)]
pub(super) struct Len {
    pub(super) len: usize,
    pub(super) aux: usize,
}

pub(super) fn shape_err<T>(why: RowInputs) -> Result<T, CodegenError> {
    Err(CodegenError::Internal(Internal::RowInputs(why)))
}

/// Derives and validates every vector length and buffer offset for these inputs, and checks
/// the expected output shape.
pub(crate) fn layout(
    info: &RowInfo,
    inputs: &[Operand<'_>],
    out_shape: (usize, usize),
) -> Result<RowLayout, CodegenError> {
    let plan = &info.plan;
    if inputs.len() != plan.inputs.len() {
        return shape_err(RowInputs::Count {
            expected: plan.inputs.len(),
            got: inputs.len(),
        });
    }
    let shape = |k: usize| match inputs[k] {
        Operand::Scalar(_) => (1, 1),
        Operand::Matrix(m) => m.shape(),
    };
    let Operand::Matrix(main) = inputs[0] else {
        return shape_err(RowInputs::MainNotMatrix);
    };
    let (m, n) = main.shape();
    let vlen = |lens: &[Len], o: CNodeId| {
        if info.classes[o] == Class::Vector {
            lens[o].len
        } else {
            1
        }
    };
    let mut lens = vec![Len::default(); plan.nodes.len()];
    for (i, node) in plan.nodes.iter().enumerate() {
        if !info.reach[i] {
            continue;
        }
        lens[i] = match node {
            CNode::Data { input, access } => match (info.classes[i], access) {
                (Class::Vector, Access::Main) => Len { len: n, aux: 0 },
                (Class::Vector, _) => {
                    let (r, c) = shape(*input);
                    if *access == Access::Aligned && r != m {
                        return shape_err(RowInputs::Rows {
                            input: *input,
                            rows: r,
                            expected: m,
                        });
                    }
                    Len { len: c, aux: 0 }
                }
                (Class::Whole, _) => {
                    let (r, c) = shape(*input);
                    Len { len: c, aux: r }
                }
                _ => Len::default(),
            },
            n if n.is_elementwise() => {
                let mut len: Option<usize> = None;
                for o in n.operands() {
                    if info.classes[o] != Class::Vector {
                        continue;
                    }
                    let x = lens[o].len;
                    len = Some(match len {
                        None | Some(1) => x,
                        Some(l) if x == 1 || x == l => l,
                        Some(l) => {
                            return shape_err(RowInputs::ElementWiseLengths { left: l, right: x })
                        }
                    });
                }
                Len {
                    len: len.unwrap_or(1),
                    aux: 0,
                }
            }
            CNode::Nary { xs, .. } => Len {
                len: xs.iter().map(|&x| vlen(&lens, x)).sum(),
                aux: 0,
            },
            CNode::VectMatMult { a, b } => {
                let (la, Len { len: k, aux: l }) = (vlen(&lens, *a), lens[*b]);
                if la != l {
                    return shape_err(RowInputs::VectorMatrix { row: la, rows: l });
                }
                Len { len: k, aux: l }
            }
            CNode::OuterMultAdd { a, b } => Len {
                len: vlen(&lens, *a),
                aux: vlen(&lens, *b),
            },
            _ => Len::default(),
        };
    }
    let out = plan.outputs[0];
    let (want, flipped) = match info.kind {
        RowKind::RowWise => ((m, vlen(&lens, out)), false),
        RowKind::ColSum => ((1, vlen(&lens, out)), false),
        RowKind::Outer => {
            let Len { len: la, aux: lb } = lens[out];
            ((la, lb), la > lb)
        }
        RowKind::FullAgg => ((1, 1), false),
    };
    if want != out_shape {
        return shape_err(RowInputs::Output {
            got: want,
            expected: out_shape,
        });
    }
    let mut slot_len = vec![0usize; info.num_slots];
    for (i, s) in info.slot.iter().enumerate() {
        if let Some(s) = s {
            slot_len[*s] = slot_len[*s].max(lens[i].len);
        }
    }
    let mut slot_off = Vec::with_capacity(slot_len.len());
    let mut total = 0usize;
    for l in &slot_len {
        slot_off.push(total);
        total += l;
    }
    let mrow = total;
    if info.needs_dense_main || info.scatter_on_demand {
        total += n;
    }
    let pend = total;
    if info.defer_outer {
        total += ROW_BLOCK as usize * lens[out].aux;
    }
    let mut hoist = vec![0usize; plan.nodes.len()];
    for (i, h) in info.hoisted.iter().enumerate() {
        if *h {
            hoist[i] = total;
            total += ROW_BLOCK as usize * lens[i].len;
        }
    }
    let mut params = vec![0usize; P_NODE0 + PER_NODE * plan.nodes.len()];
    params[P_OUTC] = want.1;
    params[P_MROW] = mrow;
    params[P_FLIP] = usize::from(flipped);
    params[P_PEND] = pend;
    for (i, l) in lens.iter().enumerate() {
        params[pidx(i, LEN)] = l.len;
        params[pidx(i, AUX)] = l.aux;
        params[pidx(i, OFF)] = info.slot[i].map_or(0, |s| slot_off[s]);
        params[pidx(i, HOIST)] = hoist[i];
    }
    Ok(RowLayout {
        params,
        scratch_len: total,
        out_rows: want.0,
        out_cols: want.1,
        flipped,
    })
}
