//! What a CPlan computes at a zero of its main input, bounded over the value ranges of its
//! other inputs: the certificate that lets a sparse-safe operator skip the main input's zeros
//! and still give the unfused result.
//!
//! "Sparse-safe" (the body is 0 wherever the main input is 0) holds for finite operands
//! only: `X * exp(Y)` is `0 * Inf = NaN` at a zero of `X` where `exp(Y)` overflows, and
//! `X * log(U %*% t(V))` is NaN where a dot product is negative. Unfused kernels compute those
//! cells, so a fused operator may skip them only when the body is provably 0 there. This
//! module proves it by interval arithmetic: the main input is the point 0, every other input
//! lies in its [`ValueRange`], and each node's value is bounded by `[lo, hi]` (endpoints may
//! be infinite) together with whether it may be NaN.
//!
//! Soundness: `+ - * /`, `sqrt`, `min`, `max`, rounding and comparisons are monotone in each
//! argument and correctly rounded, so the same operations on the endpoints bound what the
//! generated code computes; `exp` and `log` are within an ulp of monotone, and only their
//! infinite or NaN edges matter here, which are decided conservatively. Anything not modelled
//! is unbounded and may be NaN, so the certificate fails and the zeros are visited.

use lafuse_compiler::fusion::cplan::{CNode, CPlan, TemplateSpec};
use lafuse_compiler::hops::{BinaryOp, Literal, NaryOp, TernaryOp, UnaryOp};
use lafuse_runtime::math;
use lafuse_runtime::ValueRange;

/// What is known of an operator input at a zero cell of the main input.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum InputBound {
    /// A scalar operand.
    Scalar(f64),
    /// A matrix whose values lie in the range; `cols` is its column count (the rank of an
    /// Outer operator's factors).
    Matrix { range: ValueRange, cols: usize },
    /// Nothing is known.
    Unknown,
}

/// The values a node may take: every non-NaN value lies in `[lo, hi]`, and `nan` says whether
/// NaN is possible.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Interval {
    pub lo: f64,
    pub hi: f64,
    pub nan: bool,
}

const INF: f64 = f64::INFINITY;

impl Interval {
    /// Anything, NaN included.
    pub const TOP: Interval = Interval {
        lo: -INF,
        hi: INF,
        nan: true,
    };
    /// Exactly zero.
    pub const ZERO: Interval = Interval {
        lo: 0.0,
        hi: 0.0,
        nan: false,
    };
    /// `0` or `1`, never NaN (comparisons and logical operators).
    const UNIT: Interval = Interval {
        lo: 0.0,
        hi: 1.0,
        nan: false,
    };

    fn point(v: f64) -> Interval {
        if v.is_nan() {
            Interval {
                lo: 0.0,
                hi: 0.0,
                nan: true,
            }
        } else {
            Interval {
                lo: v,
                hi: v,
                nan: false,
            }
        }
    }

    /// Bounds from endpoints that may have come out NaN (`Inf - Inf`), widened to infinity.
    fn new(lo: f64, hi: f64, nan: bool) -> Interval {
        Interval {
            lo: if lo.is_nan() { -INF } else { lo },
            hi: if hi.is_nan() { INF } else { hi },
            nan,
        }
    }

    /// Provably zero (`+0` or `-0`), never NaN.
    pub fn is_zero(&self) -> bool {
        !self.nan && self.lo == 0.0 && self.hi == 0.0
    }

    /// Provably finite: never NaN or infinite.
    pub fn is_finite(&self) -> bool {
        !self.nan && self.lo > -INF && self.hi < INF
    }

    fn contains_zero(&self) -> bool {
        self.lo <= 0.0 && self.hi >= 0.0
    }

    fn unbounded(&self) -> bool {
        self.lo == -INF || self.hi == INF
    }

    fn union(self, o: Interval) -> Interval {
        Interval::new(self.lo.min(o.lo), self.hi.max(o.hi), self.nan || o.nan)
    }

    fn neg(self) -> Interval {
        Interval::new(-self.hi, -self.lo, self.nan)
    }

    fn add(self, o: Interval) -> Interval {
        let nan = self.nan
            || o.nan
            || (self.hi == INF && o.lo == -INF)
            || (self.lo == -INF && o.hi == INF);
        Interval::new(self.lo + o.lo, self.hi + o.hi, nan)
    }

    fn mul(self, o: Interval) -> Interval {
        let nan = self.nan
            || o.nan
            || (self.contains_zero() && o.unbounded())
            || (o.contains_zero() && self.unbounded());
        let products = [
            self.lo * o.lo,
            self.lo * o.hi,
            self.hi * o.lo,
            self.hi * o.hi,
        ];
        let (lo, hi) = products
            .iter()
            .filter(|p| !p.is_nan())
            .fold((INF, -INF), |(lo, hi), &p| (lo.min(p), hi.max(p)));
        if lo > hi {
            // Every endpoint product was `0 * Inf`: only NaN.
            Interval::new(0.0, 0.0, true)
        } else {
            Interval::new(lo, hi, nan)
        }
    }

    fn div(self, o: Interval) -> Interval {
        if o.contains_zero() {
            // x / 0 is infinite, 0 / 0 NaN.
            return Interval::TOP;
        }
        let nan = self.nan || o.nan || (self.unbounded() && o.unbounded());
        let q = [
            self.lo / o.lo,
            self.lo / o.hi,
            self.hi / o.lo,
            self.hi / o.hi,
        ];
        let lo = q
            .iter()
            .copied()
            .filter(|v| !v.is_nan())
            .fold(INF, f64::min);
        let hi = q
            .iter()
            .copied()
            .filter(|v| !v.is_nan())
            .fold(-INF, f64::max);
        if lo > hi {
            Interval::TOP
        } else {
            Interval::new(lo, hi, nan)
        }
    }

    /// A function monotonically non-decreasing on the whole line, NaN for NaN only.
    fn monotone(self, f: impl Fn(f64) -> f64) -> Interval {
        Interval::new(f(self.lo), f(self.hi), self.nan)
    }

    /// `[lo, hi]` whatever the finite operand; NaN for a NaN or (if `nan_at_inf`) an
    /// infinite one.
    fn bounded(self, lo: f64, hi: f64, nan_at_inf: bool) -> Interval {
        Interval::new(lo, hi, self.nan || (nan_at_inf && self.unbounded()))
    }
}

fn unary(f: UnaryOp, x: Interval) -> Interval {
    use std::f64::consts::PI;
    match f {
        UnaryOp::Neg => x.neg(),
        UnaryOp::Abs => {
            if x.lo >= 0.0 {
                x
            } else if x.hi <= 0.0 {
                x.neg()
            } else {
                Interval::new(0.0, (-x.lo).max(x.hi), x.nan)
            }
        }
        // The runtime's `exp` and `ln`, which generated code computes to the bit. Overflow is
        // decided a little early, so an exp within an ulp of monotone never overflows where
        // the bound says it does not.
        UnaryOp::Exp => Interval::new(
            math::exp(x.lo),
            if x.hi > 709.0 { INF } else { math::exp(x.hi) },
            x.nan,
        ),
        UnaryOp::Log => Interval::new(
            if x.lo <= 0.0 { -INF } else { math::ln(x.lo) },
            if x.hi <= 0.0 { -INF } else { math::ln(x.hi) },
            x.nan || x.lo < 0.0,
        ),
        UnaryOp::Sqrt => Interval::new(
            x.lo.max(0.0).sqrt(),
            x.hi.max(0.0).sqrt(),
            x.nan || x.lo < 0.0,
        ),
        UnaryOp::Round | UnaryOp::Floor | UnaryOp::Ceil => {
            x.monotone(|v| v.floor()).union(x.monotone(|v| v.ceil()))
        }
        UnaryOp::Sign => x.bounded(
            if x.lo < 0.0 { -1.0 } else { 0.0 },
            if x.hi > 0.0 { 1.0 } else { 0.0 },
            false,
        ),
        UnaryOp::Sigmoid | UnaryOp::Tanh => x.bounded(-1.0, 1.0, false),
        UnaryOp::Atan => x.bounded(-PI, PI, false),
        UnaryOp::Sin | UnaryOp::Cos => x.bounded(-1.0, 1.0, true),
        UnaryOp::Asin | UnaryOp::Acos => Interval::new(-PI, PI, x.nan || x.lo < -1.0 || x.hi > 1.0),
        UnaryOp::Tan => Interval::new(-INF, INF, x.nan || x.unbounded()),
        UnaryOp::Sinh | UnaryOp::Cosh => Interval::new(-INF, INF, x.nan),
        UnaryOp::Not | UnaryOp::IsNaN | UnaryOp::IsInf => Interval::UNIT,
    }
}

fn binary(f: BinaryOp, a: Interval, b: Interval) -> Interval {
    match f {
        BinaryOp::Add => a.add(b),
        BinaryOp::Sub => a.add(b.neg()),
        BinaryOp::Mul => a.mul(b),
        BinaryOp::Div => a.div(b),
        BinaryOp::Lt
        | BinaryOp::Le
        | BinaryOp::Gt
        | BinaryOp::Ge
        | BinaryOp::Eq
        | BinaryOp::Ne
        | BinaryOp::And
        | BinaryOp::Or
        | BinaryOp::Xor => Interval::UNIT,
        // Java `int`s (a shift's NaN aside).
        BinaryOp::BitwAnd | BinaryOp::BitwOr | BinaryOp::BitwXor | BinaryOp::BitwShiftR => {
            Interval::new(i32::MIN as f64, i32::MAX as f64, false)
        }
        BinaryOp::BitwShiftL => Interval::new(i32::MIN as f64, i32::MAX as f64, true),
        BinaryOp::Min => Interval::new(a.lo.min(b.lo), a.hi.min(b.hi), a.nan || b.nan),
        BinaryOp::Max => Interval::new(a.lo.max(b.lo), a.hi.max(b.hi), a.nan || b.nan),
        // 0 ^ y = 0 for y > 0 (Java's Math.pow); anything else is not modelled.
        BinaryOp::Pow if a.is_zero() && b.lo > 0.0 && !b.nan => Interval::ZERO,
        BinaryOp::Pow | BinaryOp::Mod | BinaryOp::IntDiv | BinaryOp::Log => Interval::TOP,
    }
}

/// `x * x`: never negative, NaN only for NaN.
fn square(x: Interval) -> Interval {
    let (a, b) = (x.lo * x.lo, x.hi * x.hi);
    let lo = if x.contains_zero() { 0.0 } else { a.min(b) };
    Interval::new(lo, a.max(b), x.nan)
}

/// A sum of `k` products each in `p` (a dot product of length `k`), as any order of
/// floating-point additions computes it: a sum of non-negative terms is never negative, and
/// the magnitude bound is widened by a relative `1e-9` for the rounding of `k` additions.
fn dot_sum(p: Interval, k: usize) -> Interval {
    if k == 0 {
        return Interval::ZERO;
    }
    let kf = k as f64;
    let lo = if p.lo >= 0.0 {
        0.0
    } else {
        kf * p.lo * (1.0 + 1e-9)
    };
    let hi = if p.hi <= 0.0 {
        0.0
    } else {
        kf * p.hi * (1.0 + 1e-9)
    };
    Interval::new(lo, hi, p.nan || (k > 1 && p.lo == -INF && p.hi == INF))
}

fn literal(v: &Literal) -> Interval {
    match v {
        Literal::Double(d) => Interval::point(*d),
        Literal::Int(i) => Interval::point(*i as f64),
        Literal::Bool(b) => Interval::point(f64::from(u8::from(*b))),
        Literal::Str(_) => Interval::TOP,
    }
}

fn input_interval(b: &InputBound) -> Interval {
    match b {
        InputBound::Scalar(s) => Interval::point(*s),
        InputBound::Matrix { range, .. } if range.min > range.max => {
            // No cells: nothing is read from it.
            Interval::new(0.0, 0.0, range.nan)
        }
        InputBound::Matrix { range, .. } => Interval::new(range.min, range.max, range.nan),
        InputBound::Unknown => Interval::TOP,
    }
}

/// Every node's value at a zero cell of the main input (input 0), given what is known of
/// the other inputs (by input position).
pub fn at_zero(plan: &CPlan, inputs: &[InputBound]) -> Vec<Interval> {
    let mut v: Vec<Interval> = Vec::with_capacity(plan.nodes.len());
    let cols = |node: usize| match plan.nodes.get(node) {
        Some(CNode::Data { input, .. }) => match inputs.get(*input) {
            Some(InputBound::Matrix { cols, .. }) => Some(*cols),
            _ => None,
        },
        _ => None,
    };
    for node in &plan.nodes {
        let x = match node {
            CNode::Data { input: 0, .. } => Interval::ZERO,
            CNode::Data { input, .. } => inputs.get(*input).map_or(Interval::TOP, input_interval),
            CNode::Literal { value } => literal(value),
            CNode::Unary { f, x } => unary(*f, v[*x]),
            CNode::Pow2 { x } => square(v[*x]),
            CNode::Mult2 { x } => v[*x].add(v[*x]),
            CNode::Binary { f, a, b } => binary(*f, v[*a], v[*b]),
            CNode::Ternary {
                f: TernaryOp::IfElse,
                b,
                c,
                ..
            } => v[*b].union(v[*c]),
            CNode::Ternary {
                f: TernaryOp::Replace,
                a,
                c,
                ..
            } => v[*a].union(v[*c]),
            CNode::Nary { f, xs } if matches!(f, NaryOp::Min | NaryOp::Max) && !xs.is_empty() => {
                let op = if *f == NaryOp::Min {
                    BinaryOp::Min
                } else {
                    BinaryOp::Max
                };
                xs[1..]
                    .iter()
                    .fold(v[xs[0]], |acc, &x| binary(op, acc, v[x]))
            }
            CNode::DotCell { a, b } => v[*a].mul(v[*b]),
            CNode::OuterDot { u, v: w } => match cols(*u) {
                Some(k) => dot_sum(v[*u].mul(v[*w]), k),
                None => Interval::TOP,
            },
            // A skipped cell contributes `g * w` to the final product.
            CNode::FinalProduct { g, w } => v[*g].mul(v[*w]),
            CNode::Transpose { x } => v[*x],
            CNode::Nary { .. }
            | CNode::RowAgg { .. }
            | CNode::RowSumSq { .. }
            | CNode::VectMatMult { .. }
            | CNode::OuterMultAdd { .. } => Interval::TOP,
        };
        v.push(x);
    }
    v
}

/// Whether every output of `plan` is provably 0 (never NaN) at every zero cell of the main
/// input, so an operator may skip those cells and still give the unfused result.
///
/// An Outer plan's value at a zero of its driver is `0 * body` (the template's `X * f`, or
/// `(X != 0) * f` whose mask construction may have simplified away, leaving `f`), so there
/// the body need only be finite.
pub fn zeros_skippable(plan: &CPlan, inputs: &[InputBound]) -> bool {
    let v = at_zero(plan, inputs);
    let outer = matches!(plan.template, TemplateSpec::Outer { .. });
    plan.outputs.iter().all(|&o| {
        v.get(o)
            .is_some_and(|x| if outer { x.is_finite() } else { x.is_zero() })
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use lafuse_compiler::fusion::cplan::{Access, InputKind, TemplateSpec};
    use lafuse_compiler::fusion::template::{CellAgg, CellType};

    fn range(min: f64, max: f64) -> InputBound {
        bound(min, max, false)
    }

    /// A rank-4 factor's values in `[min, max]`, NaN among them where `nan`.
    fn bound(min: f64, max: f64, nan: bool) -> InputBound {
        InputBound::Matrix {
            range: ValueRange { min, max, nan },
            cols: 4,
        }
    }

    fn cell(nodes: Vec<CNode>, n_inputs: usize) -> CPlan {
        let out = nodes.len() - 1;
        CPlan {
            template: TemplateSpec::Cell {
                cell_type: CellType::FullAgg,
                agg: Some(CellAgg::Sum),
                sparse_safe: true,
            },
            inputs: vec![InputKind::Matrix; n_inputs],
            nodes,
            outputs: vec![out],
        }
    }

    fn data(input: usize) -> CNode {
        CNode::Data {
            input,
            access: if input == 0 {
                Access::Main
            } else {
                Access::Aligned
            },
        }
    }

    fn bin(f: BinaryOp, a: usize, b: usize) -> CNode {
        CNode::Binary { f, a, b }
    }

    #[test]
    fn products_with_finite_factors_are_zero_at_zeros() {
        // sum(X * Y * Z)
        let p = cell(
            vec![
                data(0),
                data(1),
                bin(BinaryOp::Mul, 0, 1),
                data(2),
                bin(BinaryOp::Mul, 2, 3),
            ],
            3,
        );
        assert!(zeros_skippable(
            &p,
            &[InputBound::Unknown, range(-5.0, 5.0), range(0.0, 1.0)]
        ));
        // An infinite or NaN factor anywhere makes 0 * x NaN.
        assert!(!zeros_skippable(
            &p,
            &[InputBound::Unknown, range(-5.0, INF), range(0.0, 1.0)]
        ));
        let nan = bound(0.0, 1.0, true);
        assert!(!zeros_skippable(
            &p,
            &[InputBound::Unknown, range(0.0, 1.0), nan]
        ));
        assert!(!zeros_skippable(
            &p,
            &[InputBound::Unknown, InputBound::Unknown, range(0.0, 1.0)]
        ));
    }

    #[test]
    fn operator_internal_overflow_and_domain_errors_are_caught() {
        // sum(X * exp(Y)): exact while exp(Y) cannot overflow.
        let p = cell(
            vec![
                data(0),
                data(1),
                CNode::Unary {
                    f: UnaryOp::Exp,
                    x: 1,
                },
                bin(BinaryOp::Mul, 0, 2),
            ],
            2,
        );
        assert!(zeros_skippable(
            &p,
            &[InputBound::Unknown, range(-1e300, 700.0)]
        ));
        assert!(!zeros_skippable(
            &p,
            &[InputBound::Unknown, range(0.0, 710.0)]
        ));
        // sum(X * log(Y)): log of a non-positive value is -Inf or NaN.
        let p = cell(
            vec![
                data(0),
                data(1),
                CNode::Unary {
                    f: UnaryOp::Log,
                    x: 1,
                },
                bin(BinaryOp::Mul, 0, 2),
            ],
            2,
        );
        assert!(zeros_skippable(
            &p,
            &[InputBound::Unknown, range(1e-300, 1e300)]
        ));
        assert!(!zeros_skippable(
            &p,
            &[InputBound::Unknown, range(0.0, 1.0)]
        ));
        // sum(X * (Y * Y)) where Y * Y overflows; sum(X / Y) where Y holds a zero.
        let p = cell(
            vec![
                data(0),
                data(1),
                CNode::Pow2 { x: 1 },
                bin(BinaryOp::Mul, 0, 2),
            ],
            2,
        );
        assert!(zeros_skippable(
            &p,
            &[InputBound::Unknown, range(-1e150, 1e150)]
        ));
        assert!(!zeros_skippable(
            &p,
            &[InputBound::Unknown, range(-1e160, 1e150)]
        ));
        let p = cell(vec![data(0), data(1), bin(BinaryOp::Div, 0, 1)], 2);
        assert!(zeros_skippable(&p, &[InputBound::Unknown, range(0.5, 2.0)]));
        assert!(!zeros_skippable(
            &p,
            &[InputBound::Unknown, range(-1.0, 2.0)]
        ));
    }

    #[test]
    fn outer_dot_products_are_bounded_by_rank_and_factor_ranges() {
        // sum(X * log(U %*% t(V) + eps)), rank 4.
        let p = cell(
            vec![
                data(0),
                data(1),
                data(2),
                CNode::OuterDot { u: 1, v: 2 },
                CNode::Literal {
                    value: Literal::Double(1e-15),
                },
                bin(BinaryOp::Add, 3, 4),
                CNode::Unary {
                    f: UnaryOp::Log,
                    x: 5,
                },
                bin(BinaryOp::Mul, 0, 6),
            ],
            3,
        );
        let nonneg = [InputBound::Unknown, range(0.0, 1.0), range(0.0, 1.0)];
        assert!(zeros_skippable(&p, &nonneg));
        // A negative factor value makes a negative dot product, and its log NaN, possible.
        let mixed = [InputBound::Unknown, range(-0.1, 1.0), range(0.0, 1.0)];
        assert!(!zeros_skippable(&p, &mixed));
        let v = at_zero(&p, &nonneg);
        assert_eq!(v[3].lo, 0.0);
        assert!(v[3].hi >= 4.0 && v[3].hi < 4.0 + 1e-6);
    }

    /// An Outer plan's value at a zero of the driver is `0 * body`: its body (here the dot
    /// product alone, `(X != 0) * (U %*% t(V))` with the mask simplified away) need only be
    /// finite there, where a Cell plan's must be 0.
    #[test]
    fn outer_bodies_need_only_be_finite_at_zeros() {
        let nodes = vec![
            CNode::Data {
                input: 0,
                access: Access::Main,
            },
            CNode::Data {
                input: 1,
                access: Access::OuterU,
            },
            CNode::Data {
                input: 2,
                access: Access::OuterV,
            },
            CNode::OuterDot { u: 1, v: 2 },
        ];
        let outer = CPlan {
            template: TemplateSpec::Outer {
                outer_type: lafuse_compiler::fusion::cplan::OuterType::FullAgg,
            },
            inputs: vec![InputKind::Matrix; 3],
            nodes: nodes.clone(),
            outputs: vec![3],
        };
        let finite = [InputBound::Unknown, range(-2.0, 1.0), range(0.0, 3.0)];
        assert!(zeros_skippable(&outer, &finite));
        assert!(!zeros_skippable(&cell(nodes, 3), &finite));
        let nan = bound(0.0, 1.0, true);
        assert!(!zeros_skippable(
            &outer,
            &[InputBound::Unknown, range(0.0, 1.0), nan]
        ));
        let huge = [InputBound::Unknown, range(0.0, f64::MAX), range(0.0, 2.0)];
        assert!(!zeros_skippable(&outer, &huge));
    }

    #[test]
    fn comparisons_and_selections_never_make_nan() {
        // sum(X * (Y > 0)) with NaN in Y: the comparison is 0 or 1.
        let nan = InputBound::Matrix {
            range: ValueRange {
                min: 0.0,
                max: 0.0,
                nan: true,
            },
            cols: 1,
        };
        let p = cell(
            vec![
                data(0),
                data(1),
                CNode::Literal {
                    value: Literal::Double(0.0),
                },
                bin(BinaryOp::Gt, 1, 2),
                bin(BinaryOp::Mul, 0, 3),
            ],
            2,
        );
        assert!(zeros_skippable(&p, &[InputBound::Unknown, nan]));
    }

    #[test]
    fn interval_arithmetic_is_sound_on_sampled_points() {
        // Every operation on points drawn from the operand intervals lands in the result
        // interval (or is NaN only where NaN was allowed).
        let ivs = [
            (-3.0, 2.0),
            (0.0, 0.0),
            (0.5, 7.0),
            (-1e200, 1e200),
            (-INF, 0.0),
            (1.0, INF),
            (-2.0, -0.25),
        ];
        let pts = |lo: f64, hi: f64| {
            let mut v = vec![lo, hi];
            if lo.is_finite() && hi.is_finite() {
                v.extend((1..8).map(|k| lo + (hi - lo) * k as f64 / 8.0));
            } else {
                v.extend([
                    0.0f64.clamp(lo, hi),
                    1.0f64.clamp(lo, hi),
                    (-1.0f64).clamp(lo, hi),
                ]);
            }
            v
        };
        let inside = |r: Interval, x: f64| {
            if x.is_nan() {
                r.nan
            } else {
                r.lo <= x && x <= r.hi
            }
        };
        let bops = [
            BinaryOp::Add,
            BinaryOp::Sub,
            BinaryOp::Mul,
            BinaryOp::Div,
            BinaryOp::Min,
            BinaryOp::Max,
            BinaryOp::Lt,
        ];
        for &(alo, ahi) in &ivs {
            let a = Interval::new(alo, ahi, false);
            for f in [
                UnaryOp::Abs,
                UnaryOp::Exp,
                UnaryOp::Log,
                UnaryOp::Sqrt,
                UnaryOp::Round,
                UnaryOp::Sign,
                UnaryOp::Sigmoid,
                UnaryOp::Sin,
                UnaryOp::Neg,
            ] {
                let r = unary(f, a);
                for x in pts(alo, ahi) {
                    let y = f.apply(x);
                    assert!(inside(r, y), "{f:?}({x}) = {y} outside {r:?}");
                }
            }
            let r = square(a);
            for x in pts(alo, ahi) {
                assert!(inside(r, x * x), "({x})^2 outside {r:?}");
            }
            for &(blo, bhi) in &ivs {
                let b = Interval::new(blo, bhi, false);
                for f in bops {
                    let r = binary(f, a, b);
                    for x in pts(alo, ahi) {
                        for y in pts(blo, bhi) {
                            let z = f.apply(x, y);
                            assert!(inside(r, z), "{x} {f:?} {y} = {z} outside {r:?}");
                        }
                    }
                }
            }
        }
    }
}
