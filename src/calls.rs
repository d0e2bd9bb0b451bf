//! Which functions a piece of DML calls, for the analyses that depend on it: deduplication
//! (a body calling `lineage` or `write` needs items while it runs) and multi-level reuse (a
//! function drawing random numbers or printing is not deterministic).

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
    with_stack(|| {
        use ast::ExprKind;
        match &expr.kind {
            ExprKind::Call { name, args } => {
                named(name) || args.iter().any(|a| expr_calls(&a.value, named))
            }
            ExprKind::Unary { operand, .. } => expr_calls(operand, named),
            ExprKind::Binary { lhs, rhs, .. } => expr_calls(lhs, named) || expr_calls(rhs, named),
            ExprKind::Index { target, rows, cols } => {
                expr_calls(target, named) || range_calls(rows, named) || range_calls(cols, named)
            }
            ExprKind::Var(_)
            | ExprKind::Double(_)
            | ExprKind::Int(_)
            | ExprKind::Bool(_)
            | ExprKind::Str(_)
            | ExprKind::ScriptArg(_) => false,
        }
    })
}

fn range_calls(range: &Option<ast::IndexRange>, named: &dyn Fn(&str) -> bool) -> bool {
    range.as_ref().is_some_and(|r| {
        expr_calls(&r.lower, named) || r.upper.as_deref().is_some_and(|u| expr_calls(u, named))
    })
}
