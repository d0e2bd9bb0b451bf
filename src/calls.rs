//! Which functions a piece of DML calls, for the analyses that depend on it: deduplication
//! (a body calling `lineage` or `write` needs items while it runs), multi-level reuse (a
//! function drawing random numbers or printing is not deterministic) and `parfor` (a body
//! printing must run in order).

use lafuse_compiler::ast;
use lafuse_compiler::stack::with_stack;

/// Whether `stmt` calls, anywhere in its expressions or nested statements, a function whose
/// name satisfies `named`.
pub(crate) fn stmt_calls(stmt: &ast::Stmt, named: &dyn Fn(&str) -> bool) -> bool {
    with_stack(|| {
        use ast::StmtKind;
        let expr = |e: &ast::Expr| expr_calls(e, named);
        let body = |stmts: &[ast::Stmt]| stmts.iter().any(|s| stmt_calls(s, named));
        match &stmt.kind {
            StmtKind::Assign { value, .. } => expr(value),
            StmtKind::IndexAssign {
                rows, cols, value, ..
            } => range_calls(rows, named) || range_calls(cols, named) || expr(value),
            StmtKind::MultiAssign { call, .. } => expr(call),
            StmtKind::Expr(e) => expr(e),
            StmtKind::If {
                cond,
                then_body,
                else_body,
            } => expr(cond) || body(then_body) || body(else_body),
            StmtKind::For {
                from,
                to,
                step,
                body: stmts,
                ..
            } => expr(from) || expr(to) || step.as_ref().is_some_and(expr) || body(stmts),
            StmtKind::While { cond, body: stmts } => expr(cond) || body(stmts),
        }
    })
}

/// Whether `expr` calls a function whose name satisfies `named`.
pub(crate) fn expr_calls(expr: &ast::Expr, named: &dyn Fn(&str) -> bool) -> bool {
    first_call(expr, named).is_some()
}

/// The first call in `expr` (a call before its arguments, operands left to right) of a
/// function whose name satisfies `named`.
pub(crate) fn first_call<'e>(expr: &'e ast::Expr, named: &dyn Fn(&str) -> bool) -> Option<&'e str> {
    with_stack(|| {
        use ast::ExprKind;
        match &expr.kind {
            ExprKind::Call { name, args } => {
                if named(name) {
                    return Some(name.as_str());
                }
                args.iter().find_map(|a| first_call(&a.value, named))
            }
            ExprKind::Unary { operand, .. } => first_call(operand, named),
            ExprKind::Binary { lhs, rhs, .. } => {
                first_call(lhs, named).or_else(|| first_call(rhs, named))
            }
            ExprKind::Index { target, rows, cols } => first_call(target, named)
                .or_else(|| range_first_call(rows, named))
                .or_else(|| range_first_call(cols, named)),
            ExprKind::Var(_)
            | ExprKind::Double(_)
            | ExprKind::Int(_)
            | ExprKind::Bool(_)
            | ExprKind::Str(_)
            | ExprKind::ScriptArg(_) => None,
        }
    })
}

fn range_first_call<'e>(
    range: &'e Option<ast::IndexRange>,
    named: &dyn Fn(&str) -> bool,
) -> Option<&'e str> {
    let r = range.as_ref()?;
    first_call(&r.lower, named).or_else(|| r.upper.as_deref().and_then(|u| first_call(u, named)))
}

fn range_calls(range: &Option<ast::IndexRange>, named: &dyn Fn(&str) -> bool) -> bool {
    range_first_call(range, named).is_some()
}
