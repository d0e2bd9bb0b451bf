//! Graphviz views of the fusion levels (`explain --level memo|plan|cplan --format dot`): the
//! HOP DAG with each hop's memo entries, the HOP DAG with the selected fused operators drawn
//! as clusters around the hops they compute, and each operator's CPlan body.

use crate::fusion::cplan::FusedProgram;
use crate::fusion::memo::MemoTable;
use crate::hops::explain::{dot_escape, size_text};
use crate::hops::{linearize, HopDag, HopId};
use std::collections::BTreeMap;
use std::fmt::Write;

/// The HOP DAG's nodes and edges; `extra` adds a second label line per hop, and `skip` leaves
/// hops out of the node list (drawn inside clusters instead).
fn hop_graph(
    dag: &HopDag,
    out: &mut String,
    extra: &dyn Fn(HopId) -> Option<String>,
    skip: &dyn Fn(HopId) -> bool,
) {
    let order = linearize(dag);
    for &id in &order {
        if !skip(id) {
            let _ = writeln!(out, "  {}", hop_node(dag, id, extra));
        }
    }
    for &id in &order {
        for (pos, input) in dag.hop(id).inputs.iter().enumerate() {
            let _ = writeln!(out, "  h{input} -> h{id} [label=\"{pos}\"];");
        }
    }
}

fn hop_node(dag: &HopDag, id: HopId, extra: &dyn Fn(HopId) -> Option<String>) -> String {
    let hop = dag.hop(id);
    let mut label = format!(
        "({id}) {}\\n{}",
        dot_escape(&hop.op.display_name()),
        size_text(hop)
    );
    let filled = match extra(id) {
        Some(more) => {
            let _ = write!(label, "\\n{}", dot_escape(&more));
            ", style=filled, fillcolor=\"#e8f0ff\""
        }
        None => "",
    };
    format!("h{id} [label=\"{label}\"{filled}];")
}

/// `explain --level memo --format dot`: each hop with its memo entries (template letter and
/// the inputs each fuses, `C[1,-]` fusing input 0 from hop 1), hops with entries filled.
pub fn memo_dot(dag: &HopDag, memo: &MemoTable) -> String {
    let mut out = String::from("digraph memo {\n  rankdir=BT;\n  node [fontname=\"monospace\"];\n");
    let entries = |id: HopId| {
        let group = memo.group(id);
        (!group.is_empty()).then(|| {
            group
                .iter()
                .map(|e| {
                    let ins: Vec<String> = e
                        .inputs
                        .iter()
                        .map(|i| i.map_or("-".to_string(), |h| h.to_string()))
                        .collect();
                    format!("{}[{}]", e.template.letter(), ins.join(","))
                })
                .collect::<Vec<_>>()
                .join(" ")
        })
    };
    hop_graph(dag, &mut out, &entries, &|_| false);
    out.push_str("}\n");
    out
}

/// `explain --level plan --format dot`: the HOP DAG with one cluster per fused operator
/// around the hops it computes (a hop computed by two operators is drawn in the first).
pub fn plan_dot(dag: &HopDag, program: &FusedProgram) -> String {
    let mut out = String::from("digraph plan {\n  rankdir=BT;\n  node [fontname=\"monospace\"];\n");
    let mut owner: BTreeMap<HopId, usize> = BTreeMap::new();
    for (k, op) in program.operators.iter().enumerate() {
        for &h in &op.covered {
            owner.entry(h).or_insert(k);
        }
    }
    for (k, op) in program.operators.iter().enumerate() {
        let _ = writeln!(
            out,
            "  subgraph cluster_op{k} {{\n    label=\"op {k}: {} {}\";\n    style=rounded;",
            op.cplan.template.name(),
            dot_escape(&op.cplan.template.variant())
        );
        for (&h, _) in owner.iter().filter(|(_, &o)| o == k) {
            let _ = writeln!(out, "    {}", hop_node(dag, h, &|_| None));
        }
        out.push_str("  }\n");
    }
    hop_graph(dag, &mut out, &|_| None, &|h| owner.contains_key(&h));
    out.push_str("}\n");
    out
}

/// `explain --level cplan --format dot`: one cluster per operator with its CPlan body, data
/// reads as boxes and outputs double-circled.
pub fn cplan_dot(program: &FusedProgram) -> String {
    let mut out =
        String::from("digraph cplan {\n  rankdir=BT;\n  node [fontname=\"monospace\"];\n");
    for (k, op) in program.operators.iter().enumerate() {
        let plan = &op.cplan;
        let _ = writeln!(
            out,
            "  subgraph cluster_op{k} {{\n    label=\"op {k}: {} {} (hash {:016x})\";",
            plan.template.name(),
            dot_escape(&plan.template.variant()),
            plan.structural_hash()
        );
        for (i, node) in plan.nodes.iter().enumerate() {
            let shape = if plan.outputs.contains(&i) {
                "doublecircle"
            } else if node.operands().is_empty() {
                "box"
            } else {
                "ellipse"
            };
            let _ = writeln!(
                out,
                "    o{k}n{i} [label=\"%{i} {}\", shape={shape}];",
                dot_escape(&node.label())
            );
        }
        for (i, node) in plan.nodes.iter().enumerate() {
            for (pos, o) in node.operands().into_iter().enumerate() {
                let _ = writeln!(out, "    o{k}n{o} -> o{k}n{i} [label=\"{pos}\"];");
            }
        }
        out.push_str("  }\n");
    }
    out.push_str("}\n");
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fusion::{self, cplan::construct_cplans, select::PlanSelector};
    use crate::hops::{AggOp, BinaryOp, DagBuilder, Direction};

    fn sum_xyz() -> HopDag {
        let mut b = DagBuilder::new();
        let x = b.input("X", 100, 10, 1000);
        let y = b.input("Y", 100, 10, 1000);
        let xy = b.binary(BinaryOp::Mul, x, y).unwrap();
        let xyx = b.binary(BinaryOp::Mul, xy, x).unwrap();
        let s = b.agg(AggOp::Sum, Direction::Full, xyx).unwrap();
        b.output("s", s).unwrap();
        b.build().unwrap()
    }

    #[test]
    fn fusion_levels_draw_as_graphs_with_their_fused_parts() {
        let dag = sum_xyz();
        let selector = fusion::select::FuseAll;
        let plan = fusion::plan_fusion(&dag, &selector as &dyn PlanSelector).unwrap();
        let program = construct_cplans(&dag, &plan.memo, &plan.selection).unwrap();
        assert_eq!(program.operators.len(), 1);

        let memo = memo_dot(&dag, &plan.explored);
        assert!(memo.starts_with("digraph memo {"), "{memo}");
        assert!(memo.contains("C["), "cell entries are listed: {memo}");
        assert!(memo.contains("fillcolor"), "{memo}");

        let planned = plan_dot(&dag, &program);
        assert!(planned.contains("subgraph cluster_op0"), "{planned}");
        assert!(planned.contains("label=\"op 0: cell"), "{planned}");
        // Every hop the operator computes is drawn once, inside its cluster.
        for h in &program.operators[0].covered {
            assert_eq!(
                planned.matches(&format!("  h{h} [label")).count(),
                1,
                "{planned}"
            );
        }

        let cplan = cplan_dot(&program);
        assert!(cplan.contains("shape=doublecircle"), "{cplan}");
        let nodes = program.operators[0].cplan.nodes.len();
        assert_eq!(cplan.matches("[label=\"%").count(), nodes, "{cplan}");
        assert!(cplan.ends_with("}\n"));
    }
}
