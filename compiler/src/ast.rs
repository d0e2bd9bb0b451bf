//! Abstract syntax tree of a DML script, as written (before blocks and HOP DAGs).
//!
//! Every node carries a [`Span`] so that checks and execution errors can point at the script.
//! The tree keeps the user's surface forms (e.g. `<-` vs `=` are not distinguished, but named
//! arguments, `$name` arguments and `ifdef` are); desugaring happens when blocks are built.

use crate::span::Span;
use crate::stack::with_stack;
use serde::{Deserialize, Serialize};

/// A whole script: top-level statements and function definitions, in source order.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Script {
    pub statements: Vec<Stmt>,
    pub functions: Vec<FunctionDef>,
    /// `source("file.dml") as ns` at the top level, in source order; the loader
    /// (`crate::modules`) reads the files and resolves the calls into them.
    #[serde(default)]
    pub imports: Vec<Import>,
    /// Characters the lexer skipped, as SystemDS does (`lexer::Lexed::skipped`), in this
    /// file and in the files loaded into it: warnings for the embedder to show.
    #[serde(skip)]
    pub skipped: Vec<crate::error::CompileError>,
}

/// `source("file.dml") as ns`: the functions of `file.dml`, callable as `ns::f(...)`.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Import {
    pub path: String,
    pub namespace: Ident,
    pub span: Span,
}

/// Declared value types of function parameters and results (`matrix[double]`, `double`, ...).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum ValueType {
    /// `matrix[double]` (also `matrix[int]`/`matrix[boolean]`, stored as f64).
    Matrix,
    /// `double` / `Double`.
    Double,
    /// `integer` / `int` / `Integer`.
    Int,
    /// `boolean` / `Boolean`.
    Bool,
    /// `string` / `String`.
    String,
    /// `list[unknown]` / `List[Unknown]` (or any value type in the brackets, unchecked, as in
    /// SystemDS): a list of any elements.
    List,
    /// `frame[unknown]` / `Frame[String]` (any value type in the brackets, unchecked).
    Frame,
}

#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Param {
    pub name: String,
    pub ty: ValueType,
    pub default: Option<Expr>,
    pub span: Span,
}

/// `name = function(params) return (results) { body }`.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct FunctionDef {
    pub name: String,
    pub params: Vec<Param>,
    /// Named results; their defaults are always `None`.
    pub results: Vec<Param>,
    pub body: Vec<Stmt>,
    pub span: Span,
}

#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Stmt {
    pub kind: StmtKind,
    pub span: Span,
}

impl Stmt {
    /// The statement's kind, taken out of it (a `Stmt` cannot be destructured: it implements
    /// `Drop`).
    pub fn into_kind(mut self) -> StmtKind {
        std::mem::replace(
            &mut self.kind,
            StmtKind::Expr(Expr {
                kind: ExprKind::Int(0),
                span: self.span,
            }),
        )
    }
}

/// Nested bodies are dropped through [`with_stack`], as [`Expr`]'s children are.
impl Drop for Stmt {
    fn drop(&mut self) {
        let nested = match &mut self.kind {
            StmtKind::If {
                then_body,
                else_body,
                ..
            } => {
                let mut all = std::mem::take(then_body);
                all.append(else_body);
                all
            }
            StmtKind::For { body, .. } | StmtKind::While { body, .. } => std::mem::take(body),
            _ => return,
        };
        if !nested.is_empty() {
            with_stack(move || drop(nested));
        }
    }
}

#[derive(Clone, Debug, Serialize, Deserialize)]
pub enum StmtKind {
    /// `x = e`, `x <- e`.
    Assign {
        target: Ident,
        value: Expr,
    },
    /// `X[rows, cols] = e` (left indexing); either index may be omitted (`X[, j] = e`).
    IndexAssign {
        target: Ident,
        rows: Option<IndexRange>,
        cols: Option<IndexRange>,
        value: Expr,
    },
    /// `[A, b] = f(...)`; `call` is always an [`ExprKind::Call`].
    MultiAssign {
        targets: Vec<Ident>,
        call: Expr,
    },
    /// An expression evaluated for its effect: `print(...)`, `stop(...)`, `write(...)`, `f(x)`.
    Expr(Expr),
    If {
        cond: Expr,
        then_body: Vec<Stmt>,
        else_body: Vec<Stmt>,
    },
    /// `for (var in from:to)`, `for (var in seq(from, to, step))`, `parfor (...)`.
    For {
        var: Ident,
        from: Expr,
        to: Expr,
        step: Option<Expr>,
        body: Vec<Stmt>,
        parallel: bool,
    },
    While {
        cond: Expr,
        body: Vec<Stmt>,
    },
}

#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Ident {
    pub name: String,
    pub span: Span,
}

/// One dimension of an index expression: `i` (a single row/column) or `a:b` (inclusive range).
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct IndexRange {
    pub lower: Box<Expr>,
    /// `None` for a single index `i` (meaning `i:i`).
    pub upper: Option<Box<Expr>>,
    pub span: Span,
}

#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Expr {
    pub kind: ExprKind,
    pub span: Span,
}

impl Expr {
    /// The node's kind, taken out of it (an `Expr` cannot be destructured: it implements
    /// `Drop`).
    pub fn into_kind(mut self) -> ExprKind {
        std::mem::replace(&mut self.kind, ExprKind::Int(0))
    }

    /// The variables this expression reads, in order of appearance (repeats kept).
    pub fn variables_read<'a>(&'a self, out: &mut Vec<&'a str>) {
        with_stack(|| match &self.kind {
            ExprKind::Var(name) => out.push(name),
            ExprKind::Double(_)
            | ExprKind::Int(_)
            | ExprKind::Bool(_)
            | ExprKind::Str(_)
            | ExprKind::ScriptArg(_) => {}
            ExprKind::Unary { operand, .. } => operand.variables_read(out),
            ExprKind::Binary { lhs, rhs, .. } => {
                lhs.variables_read(out);
                rhs.variables_read(out);
            }
            ExprKind::Call { args, .. } => args.iter().for_each(|a| a.value.variables_read(out)),
            ExprKind::Index { target, rows, cols } => {
                target.variables_read(out);
                for range in [rows, cols].into_iter().flatten() {
                    range.variables_read(out);
                }
            }
        })
    }
}

impl IndexRange {
    /// The variables its bounds read.
    pub fn variables_read<'a>(&'a self, out: &mut Vec<&'a str>) {
        self.lower.variables_read(out);
        if let Some(upper) = &self.upper {
            upper.variables_read(out);
        }
    }
}

/// Dropping a tree as deep as the parser accepts would recurse once per level in the drop
/// glue; each level's children are dropped through [`with_stack`] instead.
impl Drop for Expr {
    fn drop(&mut self) {
        if matches!(
            self.kind,
            ExprKind::Double(_)
                | ExprKind::Int(_)
                | ExprKind::Bool(_)
                | ExprKind::Str(_)
                | ExprKind::Var(_)
                | ExprKind::ScriptArg(_)
        ) {
            return;
        }
        let kind = std::mem::replace(&mut self.kind, ExprKind::Int(0));
        with_stack(move || drop(kind));
    }
}

#[derive(Clone, Debug, Serialize, Deserialize)]
pub enum ExprKind {
    /// A literal with a decimal point or exponent (`1.0`, `1e-3`): DML type double.
    Double(f64),
    /// A literal without (`7`): DML type integer.
    Int(i64),
    Bool(bool),
    Str(String),
    Var(String),
    /// `$name`: a script argument given with `--nvargs name=value`.
    ScriptArg(String),
    Unary {
        op: UnaryOp,
        operand: Box<Expr>,
    },
    Binary {
        op: BinaryOp,
        lhs: Box<Expr>,
        rhs: Box<Expr>,
    },
    /// Built-in or user-defined function call, with positional and named arguments.
    Call {
        name: String,
        args: Vec<Arg>,
    },
    /// `X[rows, cols]` (right indexing); either index may be omitted (`X[, j]`).
    Index {
        target: Box<Expr>,
        rows: Option<IndexRange>,
        cols: Option<IndexRange>,
    },
}

#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Arg {
    pub name: Option<Ident>,
    pub value: Expr,
    pub span: Span,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum UnaryOp {
    /// `-x`
    Neg,
    /// `+x`
    Plus,
    /// `!x`
    Not,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum BinaryOp {
    Add,
    Sub,
    Mul,
    Div,
    /// `^`
    Pow,
    /// `%%`
    Mod,
    /// `%/%`
    IntDiv,
    /// `%*%`
    MatMul,
    Lt,
    Le,
    Gt,
    Ge,
    Eq,
    Ne,
    /// `&` (element-wise) and `&&` (scalar) mean the same for scalars.
    And,
    Or,
}

impl BinaryOp {
    /// The element-wise operator of the HOP IR this is (`%*%` is not element-wise: `None`).
    pub fn elementwise(self) -> Option<crate::hops::BinaryOp> {
        use crate::hops::BinaryOp as H;
        Some(match self {
            BinaryOp::Add => H::Add,
            BinaryOp::Sub => H::Sub,
            BinaryOp::Mul => H::Mul,
            BinaryOp::Div => H::Div,
            BinaryOp::Pow => H::Pow,
            BinaryOp::Mod => H::Mod,
            BinaryOp::IntDiv => H::IntDiv,
            BinaryOp::MatMul => return None,
            BinaryOp::Lt => H::Lt,
            BinaryOp::Le => H::Le,
            BinaryOp::Gt => H::Gt,
            BinaryOp::Ge => H::Ge,
            BinaryOp::Eq => H::Eq,
            BinaryOp::Ne => H::Ne,
            BinaryOp::And => H::And,
            BinaryOp::Or => H::Or,
        })
    }

    /// The operator as written in DML (an element-wise operator's name, or `%*%`).
    pub fn symbol(self) -> &'static str {
        self.elementwise().map_or("%*%", |op| op.name())
    }
}
