//! Random DML programs for property tests: top-level statements, `for` and `while` loops,
//! nested loops, and loop bodies with branches and calls of a function with a branch, over a
//! 3×3 matrix `A`, a matrix `B` and a scalar `s`. Deterministic (seeded `rand` only), so two
//! runs of one program must print the same.

use proptest::prelude::*;

/// A statement of a random loop body (`k` is the loop variable or, in `while` loops, the
/// last value it had).
pub fn statement() -> impl Strategy<Value = &'static str> {
    prop::sample::select(vec![
        "A = A * 0.5 + s",
        "A = t(A) %*% B / 3",
        "s = s + sum(A) / 100",
        "s = s * 0.9",
        "B = B + A",
        "A = A + k",
        "C = A[1:2, ] * k",
        "s = s + as.scalar(A[1, 1])",
        "B = B * (A > 0.5)",
    ])
}

fn condition() -> impl Strategy<Value = &'static str> {
    prop::sample::select(vec!["k %% 2 == 0", "s > 1", "sum(A) > 5", "k > 2"])
}

#[derive(Clone, Debug)]
pub enum BodyItem {
    Stmt(&'static str),
    If(&'static str, Vec<&'static str>, Vec<&'static str>),
    Call,
}

#[derive(Clone, Debug)]
pub enum TopItem {
    Stmt(&'static str),
    For(u8, Vec<BodyItem>),
    While(u8, Vec<BodyItem>),
    Nested(u8, u8, Vec<BodyItem>),
}

fn body() -> impl Strategy<Value = Vec<BodyItem>> {
    let item = prop_oneof![
        4 => statement().prop_map(BodyItem::Stmt),
        2 => (
            condition(),
            prop::collection::vec(statement(), 1..3),
            prop::collection::vec(statement(), 0..2)
        )
            .prop_map(|(c, t, e)| BodyItem::If(c, t, e)),
        1 => Just(BodyItem::Call),
    ];
    prop::collection::vec(item, 1..5)
}

pub fn program() -> impl Strategy<Value = Vec<TopItem>> {
    let item = prop_oneof![
        1 => statement().prop_map(TopItem::Stmt),
        3 => (1u8..6, body()).prop_map(|(n, b)| TopItem::For(n, b)),
        1 => (1u8..5, body()).prop_map(|(n, b)| TopItem::While(n, b)),
        1 => (1u8..4, 1u8..4, body()).prop_map(|(n, m, b)| TopItem::Nested(n, m, b)),
    ];
    prop::collection::vec(item, 1..4)
}

fn render_body(items: &[BodyItem], out: &mut String) {
    for item in items {
        match item {
            BodyItem::Stmt(s) => out.push_str(&format!("  {s}\n")),
            BodyItem::If(c, t, e) => {
                out.push_str(&format!("  if ({c}) {{\n"));
                t.iter().for_each(|s| out.push_str(&format!("    {s}\n")));
                out.push_str("  } else {\n");
                e.iter().for_each(|s| out.push_str(&format!("    {s}\n")));
                out.push_str("  }\n");
            }
            BodyItem::Call => out.push_str("  A = f(A, s)\n"),
        }
    }
}

pub fn render(program: &[TopItem]) -> String {
    let mut out = String::from(
        "f = function(matrix[double] M, double c) return (matrix[double] R) {\n  \
         R = M * c + 1\n  if (sum(R) > 100) {\n    R = R / 10\n  }\n}\n\
         A = matrix(seq(1, 9), rows=3, cols=3) / 10\nB = rand(rows=3, cols=3, seed=3)\n\
         s = 0.5\nk = 1\n",
    );
    for item in program {
        match item {
            TopItem::Stmt(s) => out.push_str(&format!("{s}\n")),
            TopItem::For(n, body) => {
                out.push_str(&format!("for (k in 1:{n}) {{\n"));
                render_body(body, &mut out);
                out.push_str("}\n");
            }
            TopItem::While(n, body) => {
                out.push_str(&format!("w = 0\nwhile (w < {n}) {{\n  w = w + 1\n"));
                render_body(body, &mut out);
                out.push_str("}\n");
            }
            TopItem::Nested(n, m, body) => {
                out.push_str(&format!("for (j in 1:{n}) {{\n  s = s + j\n"));
                out.push_str(&format!("  for (k in 1:{m}) {{\n"));
                render_body(body, &mut out);
                out.push_str("  }\n}\n");
            }
        }
    }
    out.push_str("print(sum(A) + sum(B) + s)\n");
    out
}
