//! Literal constants as operator parameters: a plan's literals whose values no code generator
//! looks at become scalar inputs, so plans that differ only in such constants share one
//! compiled operator (DESIGN.md section 3). [`LiteralsAsParameters`] wraps any [`Backend`]
//! with this rewrite; the values travel with the built operator and are appended to its
//! inputs on every call.
//!
//! Why always, not "where that is cheaper" by a cost estimate: a parameter costs one scalar
//! load per call (generated code loads scalars once, outside its loops), while compiling an
//! operator costs milliseconds. A script that computes `X * i + 1` for 2,000 literals `i`
//! compiled 2,000 operators before this rewrite; it now compiles one. The CPlan construction
//! has folded constant subexpressions already, so a parameter rarely hides a fold from LLVM.
//!
//! Literals stay compiled in where a generator or an analysis at compile time reads their
//! value (see [`value_shapes_code`]): zeros (sparse-safety proofs of the Row template),
//! infinities and NaN (finiteness proofs), the exponent 2 (`x ^ 2` is `x * x`), and strings.

use crate::backend::{Backend, Built, CodegenError, Executable, Internal, Operand, Request};
use lafuse_compiler::fusion::cplan::{self, Access, CNode, CPlan, InputKind};
use lafuse_compiler::hops::{BinaryOp, Literal};
use lafuse_runtime::{Matrix, ValueRange};
use std::fmt;
use std::sync::Arc;
use std::time::Duration;

/// A plan whose parameter literals are trailing scalar inputs, and their values in input
/// order (input `plan.inputs.len() - values.len() + k` has value `values[k]`).
#[derive(Clone, Debug, PartialEq)]
pub struct Parameterized {
    pub plan: CPlan,
    pub values: Vec<f64>,
}

/// Whether a generator or a compile-time analysis reads this literal's value, so that it must
/// stay in the plan: its value is not a number the code could load at run time (a string), or
/// a proof depends on it (0 for zero-preservation, non-finite values for finiteness), or it is
/// the exponent of `x ^ 2` (generated as a multiplication).
pub fn value_shapes_code(plan: &CPlan, node: usize) -> bool {
    let CNode::Literal { value } = &plan.nodes[node] else {
        return true;
    };
    let Some(v) = (match value {
        Literal::Str(_) => None,
        l => l.as_f64(),
    }) else {
        return true;
    };
    if v == 0.0 || !v.is_finite() {
        return true;
    }
    v == 2.0
        && plan
            .nodes
            .iter()
            .any(|n| matches!(n, CNode::Binary { f: BinaryOp::Pow, b, .. } if *b == node))
}

/// `plan` with each literal that does not shape its code replaced by a new scalar input,
/// appended after the existing inputs in node order. A plan without such literals comes back
/// unchanged, with no values.
pub fn parameterize(plan: &CPlan) -> Parameterized {
    let mut out = plan.clone();
    let mut values = Vec::new();
    for (n, node) in plan.nodes.iter().enumerate() {
        if let CNode::Literal { value } = node {
            if value_shapes_code(plan, n) {
                continue;
            }
            let Some(v) = value.as_f64() else { continue };
            out.nodes[n] = CNode::Data {
                input: out.inputs.len(),
                access: Access::Scalar,
            };
            out.inputs.push(InputKind::Scalar);
            values.push(v);
        }
    }
    Parameterized { plan: out, values }
}

/// A plan to build and the values of its parameters.
type PlanAndValues = (Arc<CPlan>, Vec<f64>);

/// A backend whose operators are built from parameterized plans ([`parameterize`]); the
/// wrapped backend's cache then holds one operator per plan shape.
pub struct LiteralsAsParameters<B> {
    inner: B,
}

impl<B: Backend> LiteralsAsParameters<B> {
    pub fn new(inner: B) -> Self {
        LiteralsAsParameters { inner }
    }

    /// The wrapped backend.
    pub fn inner(&self) -> &B {
        &self.inner
    }
}

impl<B: Backend> Backend for LiteralsAsParameters<B> {
    fn name(&self) -> &'static str {
        self.inner.name()
    }

    fn build(&self, requests: &[Request<'_>]) -> Vec<Result<Built, CodegenError>> {
        // Per request, the plan the wrapped backend builds and the values for its parameters;
        // a rewritten plan the verifier refuses is that request's error (ours: its hops then
        // run unfused), not the other requests'.
        let parameterized: Vec<Result<PlanAndValues, CodegenError>> = requests
            .iter()
            .map(|r| {
                let p = parameterize(r.plan);
                if p.values.is_empty() {
                    return Ok((Arc::clone(r.plan), p.values));
                }
                cplan::verify(&p.plan)
                    .map_err(|e| CodegenError::Internal(Internal::ParameterizedPlan(e)))?;
                Ok((Arc::new(p.plan), p.values))
            })
            .collect();
        let inner_requests: Vec<Request<'_>> = requests
            .iter()
            .zip(&parameterized)
            .filter_map(|(r, p)| {
                let (plan, _) = p.as_ref().ok()?;
                Some(Request { plan, main: r.main })
            })
            .collect();
        let mut built = self.inner.build(&inner_requests).into_iter();
        parameterized
            .into_iter()
            .map(|p| {
                let (_, values) = p?;
                let built = built
                    .next()
                    .ok_or(CodegenError::Internal(Internal::MissingOperators))??;
                if values.is_empty() {
                    return Ok(built);
                }
                Ok(Built {
                    executable: Arc::new(WithParameters {
                        operator: built.executable,
                        values,
                    }),
                    origin: built.origin,
                })
            })
            .collect()
    }
}

/// A built operator of a parameterized plan, with the literal values it is called with.
struct WithParameters {
    operator: Arc<dyn Executable>,
    values: Vec<f64>,
}

impl fmt::Debug for WithParameters {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("WithParameters")
            .field("operator", &self.operator)
            .field("values", &self.values)
            .finish()
    }
}

impl Executable for WithParameters {
    fn execute(
        &self,
        inputs: &[Operand<'_>],
        out_shapes: &[(usize, usize)],
        known: &[Option<ValueRange>],
    ) -> Result<Vec<Matrix>, CodegenError> {
        let mut all = Vec::with_capacity(inputs.len() + self.values.len());
        all.extend_from_slice(inputs);
        all.extend(self.values.iter().map(|&v| Operand::Scalar(v)));
        // `known` covers the caller's inputs only; the parameters are scalars, never scanned.
        self.operator.execute(&all, out_shapes, known)
    }

    fn execute_traced(
        &self,
        inputs: &[Operand<'_>],
        out_shapes: &[(usize, usize)],
        known: &[Option<ValueRange>],
        lineage: &[Option<lafuse_runtime::lineage::Lineage>],
    ) -> Result<Vec<Matrix>, CodegenError> {
        let mut all = Vec::with_capacity(inputs.len() + self.values.len());
        all.extend_from_slice(inputs);
        all.extend(self.values.iter().map(|&v| Operand::Scalar(v)));
        // The parameters are scalars: no lineage (past the end of `lineage`).
        self.operator
            .execute_traced(&all, out_shapes, known, lineage)
    }

    fn compile_time(&self) -> Duration {
        self.operator.compile_time()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use lafuse_compiler::fusion::cplan::TemplateSpec;
    use lafuse_compiler::fusion::template::{CellAgg, CellType};

    fn lit(v: Literal) -> CNode {
        CNode::Literal { value: v }
    }

    /// `sum(X * c + d)` as a Cell plan.
    fn affine_sum(c: Literal, d: Literal) -> CPlan {
        CPlan {
            template: TemplateSpec::Cell {
                cell_type: CellType::FullAgg,
                agg: Some(CellAgg::Sum),
                sparse_safe: false,
            },
            inputs: vec![InputKind::Matrix],
            nodes: vec![
                CNode::Data {
                    input: 0,
                    access: Access::Main,
                },
                lit(c),
                CNode::Binary {
                    f: BinaryOp::Mul,
                    a: 0,
                    b: 1,
                },
                lit(d),
                CNode::Binary {
                    f: BinaryOp::Add,
                    a: 2,
                    b: 3,
                },
            ],
            outputs: vec![4],
        }
    }

    #[test]
    fn plans_differing_only_in_ordinary_constants_parameterize_to_one_plan() {
        let a = parameterize(&affine_sum(Literal::Double(7.0), Literal::Int(1)));
        let b = parameterize(&affine_sum(Literal::Double(-3.5), Literal::Double(1e300)));
        assert_eq!(a.plan, b.plan);
        assert_eq!(a.plan.structural_hash(), b.plan.structural_hash());
        assert_eq!(a.values, vec![7.0, 1.0]);
        assert_eq!(b.values, vec![-3.5, 1e300]);
        assert_eq!(
            a.plan.inputs,
            vec![InputKind::Matrix; 1]
                .into_iter()
                .chain([InputKind::Scalar; 2])
                .collect::<Vec<_>>()
        );
        cplan::verify(&a.plan).unwrap();
    }

    #[test]
    fn zeros_non_finite_values_and_strings_stay_compiled_in() {
        for keep in [
            Literal::Double(0.0),
            Literal::Double(-0.0),
            Literal::Double(f64::INFINITY),
            Literal::Double(f64::NEG_INFINITY),
            Literal::Double(f64::NAN),
            Literal::Bool(false),
            Literal::Str("a".into()),
        ] {
            let p = parameterize(&affine_sum(keep.clone(), Literal::Double(1.0)));
            assert_eq!(p.values, vec![1.0], "{keep:?}");
            assert_eq!(p.plan.nodes[1], lit(keep));
        }
    }

    #[test]
    fn the_exponent_two_stays_compiled_in_and_other_twos_do_not() {
        let mut plan = affine_sum(Literal::Double(2.0), Literal::Double(2.0));
        // The two literals are different nodes here; make the second an exponent.
        plan.nodes[4] = CNode::Binary {
            f: BinaryOp::Pow,
            a: 2,
            b: 3,
        };
        let p = parameterize(&plan);
        assert_eq!(p.values, vec![2.0]);
        assert!(matches!(p.plan.nodes[1], CNode::Data { input: 1, .. }));
        assert_eq!(p.plan.nodes[3], lit(Literal::Double(2.0)));
    }

    #[test]
    fn a_plan_without_parameters_is_unchanged() {
        let plan = affine_sum(Literal::Double(0.0), Literal::Double(f64::NAN));
        let p = parameterize(&plan);
        assert!(p.values.is_empty());
        assert_eq!(p.plan, plan);
    }
}
