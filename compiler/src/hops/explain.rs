//! Explain output of HOP DAGs: text in the spirit of SystemDS's `-explain hops`, JSON, and
//! graphviz dot. All three are deterministic: the same DAG gives the same bytes.

use super::ir::{Hop, HopDag, HopId};
use super::linearize::linearize;
use std::fmt::Write;

fn opt(v: Option<u64>) -> String {
    v.map_or("-1".to_string(), |v| v.to_string())
}

/// `[rows,cols,nnz]` with `-1` for unknown, as SystemDS prints it.
pub(crate) fn size_text(hop: &Hop) -> String {
    format!("[{},{},{}]", opt(hop.rows), opt(hop.cols), opt(hop.nnz))
}

fn type_text(hop: &Hop) -> String {
    let dt = match hop.data_type {
        super::ir::DataType::Scalar => "S",
        super::ir::DataType::Matrix => "M",
        super::ir::DataType::List => "L",
        super::ir::DataType::Frame => "F",
    };
    let vt = match hop.value_type {
        super::ir::ValueType::Double => "D",
        super::ir::ValueType::Int => "I",
        super::ir::ValueType::Bool => "B",
        super::ir::ValueType::String => "S",
    };
    format!("{dt}{vt}")
}

/// One line per hop in linearized order:
/// `(id) op (input ids) [rows,cols,nnz] type`, e.g. `(3) b(*) (1,2) [10,10,100] MD`, where the
/// type is `S`/`M`/`L`/`F` (scalar/matrix/list/frame, as SystemDS writes them) followed by
/// `D`/`I`/`B`/`S` (double/int/bool/string).
pub fn explain_text(dag: &HopDag) -> String {
    let mut out = String::new();
    for id in linearize(dag) {
        let hop = dag.hop(id);
        let inputs: Vec<String> = hop.inputs.iter().map(|i| i.to_string()).collect();
        let _ = write!(out, "({id}) {}", hop.op.display_name());
        if !inputs.is_empty() {
            let _ = write!(out, " ({})", inputs.join(","));
        }
        let _ = writeln!(out, " {} {}", size_text(hop), type_text(hop));
    }
    out
}

/// A JSON array with one object per hop in linearized order: `id`, `op` (display name),
/// `inputs`, `data_type`, `value_type`, `rows`, `cols`, `nnz` (null when unknown), `root`.
pub fn explain_json(dag: &HopDag) -> String {
    let roots: std::collections::BTreeSet<HopId> = dag.roots.iter().copied().collect();
    let hops: Vec<serde_json::Value> = linearize(dag)
        .into_iter()
        .map(|id| {
            let hop = dag.hop(id);
            serde_json::json!({
                "id": id.0,
                "op": hop.op.display_name(),
                "inputs": hop.inputs.iter().map(|i| i.0).collect::<Vec<_>>(),
                "data_type": hop.data_type.name(),
                "value_type": hop.value_type.name(),
                "rows": hop.rows,
                "cols": hop.cols,
                "nnz": hop.nnz,
                "root": roots.contains(&id),
            })
        })
        .collect();
    serde_json::to_string_pretty(&hops).unwrap_or_default()
}

pub(crate) fn dot_escape(s: &str) -> String {
    s.replace('\\', "\\\\")
        .replace('"', "\\\"")
        .replace('\n', "\\n")
}

/// A graphviz digraph: one node per reachable hop (label: id, op, sizes), edges from inputs to
/// users labelled with the input position; roots drawn as boxes.
pub fn explain_dot(dag: &HopDag) -> String {
    let roots: std::collections::BTreeSet<HopId> = dag.roots.iter().copied().collect();
    let mut out = String::from("digraph hops {\n  rankdir=BT;\n  node [fontname=\"monospace\"];\n");
    let order = linearize(dag);
    for &id in &order {
        let hop = dag.hop(id);
        let label = format!(
            "({id}) {}\\n{} {}",
            dot_escape(&hop.op.display_name()),
            size_text(hop),
            type_text(hop)
        );
        let shape = if roots.contains(&id) {
            "box"
        } else {
            "ellipse"
        };
        let _ = writeln!(out, "  h{id} [label=\"{label}\", shape={shape}];");
    }
    for &id in &order {
        for (pos, input) in dag.hop(id).inputs.iter().enumerate() {
            let _ = writeln!(out, "  h{input} -> h{id} [label=\"{pos}\"];");
        }
    }
    out.push_str("}\n");
    out
}
