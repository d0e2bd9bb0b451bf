//! Lineage items of hops (LIMA sections 3.1 and 3.3): the one place that says which item a
//! hop's value gets, and the lineage patches the lowering attaches to instructions.
//!
//! Items are defined by the hops computed, never by the instructions or fused operators that
//! compute them: an unfused `tsmm` for `t(X) %*% X` and a fused operator covering the same
//! sub-DAG both yield `ba(+*)(r(t)(X), X)`, so lineage depends on neither the fusion policy
//! nor the backend. A hop's item is `Lineage::instruction(opcode, data, inputs)` with the
//! hop's display name as opcode (for people reading a log) and the serde JSON of its
//! `OpKind` as data, which `HopDag`'s JSON import reads: a later `lafuse recompute` can
//! rebuild the hop from the item alone. Literal hops are literal items.
//!
//! Three hops depend on what only the run decides, recorded by the tracer through the
//! instruction's run-time input (the placeholder after the register inputs): `rand` gets the
//! seed it used in place of its seed input (so an unseeded `rand` is reproducible from its
//! item), `read` gets the file's identity as an extra last input, `time()` its value.

use lafuse_compiler::hops::{DataGenOp, HopDag, HopId, Literal, OpKind};
use lafuse_runtime::lineage::{literal_data, Lineage, LiteralValue};
use std::collections::HashMap;
use std::sync::Arc;

/// The position of `rand`'s seed among its inputs (`hops::RAND_INPUTS`).
const RAND_SEED: usize = 5;

/// The opcode and data of the item of a hop computing `op` (see the module docs).
pub(crate) fn hop_opcode_data(op: &OpKind) -> (String, String) {
    let data = serde_json::to_string(op).unwrap_or_else(|_| op.display_name());
    (op.display_name(), data)
}

/// The literal item of a literal hop.
pub(crate) fn literal_item(l: &Literal) -> Lineage {
    Lineage::literal(literal_data(&match l {
        Literal::Double(v) => LiteralValue::Double(*v),
        Literal::Int(v) => LiteralValue::Int(*v),
        Literal::Bool(v) => LiteralValue::Bool(*v),
        Literal::Str(s) => LiteralValue::Str(s),
    }))
}

/// The literal a literal item's data states (the inverse of [`literal_item`]); `None` for
/// data that is not `<value>·<TYPE>` as `literal_data` writes it.
pub(crate) fn literal_of_item(data: &str) -> Option<Literal> {
    let (value, ty) = data.rsplit_once('·')?;
    Some(match ty {
        // `literal_data` writes doubles with `{:?}` (`inf`, `-inf`, `NaN`), which `parse` reads.
        "DOUBLE" => Literal::Double(value.parse().ok()?),
        "INT" => Literal::Int(value.parse().ok()?),
        "BOOLEAN" => Literal::Bool(match value {
            "true" => true,
            "false" => false,
            _ => return None,
        }),
        "STRING" => Literal::Str(serde_json::from_str(value).ok()?),
        _ => return None,
    })
}

/// The lineage patches of the values of `roots`, computed from the values of `inputs`: the
/// items of the hops between them, with `Lineage::placeholder(i)` for `inputs[i]` and
/// `placeholder(inputs.len())` for the run-time input (see the module docs). Walks with an
/// explicit stack (a block's DAG may be deep).
pub(crate) fn patches(dag: &HopDag, roots: &[HopId], inputs: &[HopId]) -> Arc<[Lineage]> {
    let runtime_input = inputs.len();
    let mut made: HashMap<HopId, Lineage> = HashMap::new();
    for (i, &h) in inputs.iter().enumerate() {
        // An input listed twice (`tsmm`'s X) is the first position's placeholder; both hold
        // the same value.
        made.entry(h).or_insert_with(|| Lineage::placeholder(i));
    }
    let mut stack: Vec<(HopId, bool)> = roots.iter().map(|&r| (r, false)).collect();
    while let Some((id, expanded)) = stack.pop() {
        if made.contains_key(&id) || id.index() >= dag.len() {
            continue;
        }
        let hop = dag.hop(id);
        if !expanded {
            stack.push((id, true));
            stack.extend(
                hop.inputs
                    .iter()
                    .filter(|i| !made.contains_key(i))
                    .map(|&i| (i, false)),
            );
            continue;
        }
        let item = match &hop.op {
            OpKind::Literal(l) => literal_item(l),
            // Reached only where a patch's walk passes an input it was not given (never, for
            // the lowering's patches): the variable is named rather than resolved.
            OpKind::TransientRead { name } => Lineage::creation(
                lafuse_runtime::lineage::trace::INPUT_VARIABLE,
                name.as_str(),
            ),
            op => {
                let mut ins: Vec<Lineage> = hop
                    .inputs
                    .iter()
                    .map(|i| {
                        made.get(i)
                            .cloned()
                            .unwrap_or_else(|| Lineage::placeholder(usize::MAX))
                    })
                    .collect();
                match op {
                    OpKind::DataGen(DataGenOp::Rand) if ins.len() > RAND_SEED => {
                        ins[RAND_SEED] = Lineage::placeholder(runtime_input);
                    }
                    // The seed, drawn at run time for `-1`, as `rand`'s.
                    OpKind::DataGen(DataGenOp::Sample) if ins.len() == 4 => {
                        ins[3] = Lineage::placeholder(runtime_input);
                    }
                    OpKind::DataGen(DataGenOp::Time) | OpKind::PersistentRead { .. } => {
                        ins.push(Lineage::placeholder(runtime_input));
                    }
                    _ => {}
                }
                let (opcode, data) = hop_opcode_data(op);
                Lineage::instruction(opcode, data, ins)
            }
        };
        made.insert(id, item);
    }
    roots
        .iter()
        .map(|r| {
            made.get(r)
                .cloned()
                .unwrap_or_else(|| Lineage::placeholder(usize::MAX))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn literal_items_read_back_as_the_literals_they_were_made_from() {
        let literals = [
            Literal::Double(0.1),
            Literal::Double(-0.0),
            Literal::Double(f64::NAN),
            Literal::Double(f64::INFINITY),
            Literal::Double(f64::NEG_INFINITY),
            Literal::Double(1e300),
            Literal::Int(i64::MIN),
            Literal::Bool(true),
            Literal::Bool(false),
            Literal::Str("a·b \"c\"".to_string()),
            Literal::Str(String::new()),
        ];
        for l in literals {
            let item = literal_item(&l);
            assert_eq!(
                literal_of_item(item.data()),
                Some(l.clone()),
                "{}",
                item.data()
            );
        }
        for bad in ["", "1", "1·FLOAT", "x·INT", "yes·BOOLEAN", "abc·STRING"] {
            assert_eq!(literal_of_item(bad), None, "{bad}");
        }
    }
}
