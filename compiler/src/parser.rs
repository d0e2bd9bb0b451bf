//! The DML parser: a hand-written recursive-descent parser with Pratt expression parsing,
//! following the grammar of SystemDS (`Dml.g4`).
//!
//! Operator precedence, tightest first, exactly as `Dml.g4` orders its alternatives:
//!
//! | level | operators                      | associativity |
//! |-------|--------------------------------|---------------|
//! | 10    | `^`                            | right         |
//! | 9     | unary `-` `+`                  | prefix        |
//! | 8     | `%*%`                          | left          |
//! | 7     | `%/%` `%%`                     | left          |
//! | 6     | `*` `/`                        | left          |
//! | 5     | `+` `-`                        | left          |
//! | 4     | `>` `>=` `<` `<=` `==` `!=`    | left          |
//! | 3     | `!`                            | prefix        |
//! | 2     | `&` `&&`                       | left          |
//! | 1     | `\|` `\|\|`                    | left          |
//!
//! So `-2^2` is `-(2^2)`, `2^-1` is `2^(-1)`, `-A %*% B` is `(-A) %*% B`, `a %% b %*% c` is
//! `a %% (b %*% c)` and `!a == b` is `!(a == b)`.
//!
//! As in DML, statements need no separator and newlines are whitespace; `;` may follow any
//! statement. `x += e` (SystemDS's accumulator assignment) becomes `x = x + e`; `ifdef(...)` is
//! accepted only as a whole right-hand side, as in `Dml.g4`; a `for` range is `a:b` or
//! `seq(a, b[, s])`. A list `[a, b, ...]` (`Dml.g4`'s MultiIdExpression) is accepted as the
//! value of a named argument only, the one place SystemDS uses it (its deep-learning built-ins:
//! `stride=[2, 2]`), and expanded there as SystemDS expands it. Deviations from `Dml.g4` are all rejections of constructs outside the
//! subset (`source`, `setwd`, `externalFunction`, namespaces, frames, lists, tensors, `+=` on
//! an indexed target), reported as "unsupported: ..." errors.
//!
//! Syntax errors say what was expected and what was found. After an error the parser skips to
//! the next line that is not inside a deeper `{ }` and goes on, so one run reports several
//! independent errors; nesting deeper than [`MAX_DEPTH`] is rejected instead of overflowing the
//! stack.

use crate::ast::{
    Arg, BinaryOp, Expr, ExprKind, FunctionDef, Ident, Import, IndexRange, Param, Script, Stmt,
    StmtKind, UnaryOp, ValueType,
};
use crate::error::{CompileError, Internal, SyntaxError, Unsupported};
use crate::lexer::{tokenize, Keyword, Punct, Token, TokenKind};
use crate::span::{SourceFile, Span};
use crate::stack::with_stack;

/// The name of SystemDS's built-in constant pi.
const PI: &str = "pi";

/// Deepest nesting of expressions and statements the parser accepts. Later passes recurse over
/// the tree, so the bound keeps every pass within a small, fixed stack.
pub const MAX_DEPTH: usize = 10_000;

/// Most errors reported from one parse; past this, later errors are mostly echoes of earlier
/// ones.
const MAX_ERRORS: usize = 25;

/// Parses a whole script. On failure returns every lexical error, or else every syntax error
/// found (at least one), in source order.
pub fn parse(source: &SourceFile) -> Result<Script, Vec<CompileError>> {
    parse_text(&source.text, 0)
}

/// Parses `text` placed at byte offset `base` of its script's address space (a file loaded
/// beside the script, [`SourceFile::load`]): every span of the result and of its errors is
/// offset by `base`.
pub fn parse_text(text: &str, base: u32) -> Result<Script, Vec<CompileError>> {
    let shift = |span: &mut Span| {
        span.start += base;
        span.end += base;
    };
    let lexed = tokenize(text);
    let (mut tokens, mut lex_errors, mut skipped) = (lexed.tokens, lexed.errors, lexed.skipped);
    if !lex_errors.is_empty() {
        for e in &mut lex_errors {
            e.span.iter_mut().for_each(shift);
        }
        return Err(lex_errors);
    }
    for t in &mut tokens {
        shift(&mut t.span);
    }
    for e in &mut skipped {
        e.span.iter_mut().for_each(shift);
    }
    let mut parser = Parser {
        src: text,
        base,
        tokens,
        pos: 0,
        depth: 0,
        stmt_start: 0,
        errors: vec![],
    };
    let mut script = parser.script();
    script.skipped = skipped;
    if parser.errors.is_empty() {
        Ok(script)
    } else {
        Err(parser.errors)
    }
}

type PResult<T> = Result<T, CompileError>;

struct Parser<'s> {
    src: &'s str,
    /// Where `src` starts in its script's address space (token spans include it).
    base: u32,
    tokens: Vec<Token>,
    pos: usize,
    /// Current nesting (recursion plus left-associative chain length), bounded by MAX_DEPTH.
    depth: usize,
    /// Index of the first token of the statement being parsed (for error recovery).
    stmt_start: usize,
    errors: Vec<CompileError>,
}

const LVL_OR: usize = 1;
const LVL_AND: usize = 2;
const LVL_NOT: usize = 3;
const LVL_REL: usize = 4;
const LVL_ADD: usize = 5;
const LVL_MUL: usize = 6;
const LVL_MOD: usize = 7;
const LVL_MATMUL: usize = 8;
const LVL_UNARY: usize = 9;
const LVL_POW: usize = 10;

fn infix(p: Punct) -> Option<(BinaryOp, usize)> {
    Some(match p {
        Punct::PipePipe | Punct::Pipe => (BinaryOp::Or, LVL_OR),
        Punct::AmpAmp | Punct::Amp => (BinaryOp::And, LVL_AND),
        Punct::Lt => (BinaryOp::Lt, LVL_REL),
        Punct::Le => (BinaryOp::Le, LVL_REL),
        Punct::Gt => (BinaryOp::Gt, LVL_REL),
        Punct::Ge => (BinaryOp::Ge, LVL_REL),
        Punct::EqEq => (BinaryOp::Eq, LVL_REL),
        Punct::Ne => (BinaryOp::Ne, LVL_REL),
        Punct::Plus => (BinaryOp::Add, LVL_ADD),
        Punct::Minus => (BinaryOp::Sub, LVL_ADD),
        Punct::Star => (BinaryOp::Mul, LVL_MUL),
        Punct::Slash => (BinaryOp::Div, LVL_MUL),
        Punct::Mod => (BinaryOp::Mod, LVL_MOD),
        Punct::IntDiv => (BinaryOp::IntDiv, LVL_MOD),
        Punct::MatMul => (BinaryOp::MatMul, LVL_MATMUL),
        Punct::Caret => (BinaryOp::Pow, LVL_POW),
        _ => return None,
    })
}

impl Parser<'_> {
    // ----- token access -----

    fn peek(&self) -> &Token {
        self.peek_at(0)
    }

    fn peek_at(&self, ahead: usize) -> &Token {
        let last = self.tokens.len() - 1;
        &self.tokens[(self.pos + ahead).min(last)]
    }

    fn bump(&mut self) -> Token {
        let tok = self.peek().clone();
        if self.pos < self.tokens.len() - 1 {
            self.pos += 1;
        }
        tok
    }

    /// `span` (in the script's address space) within `src`.
    fn local(&self, span: Span) -> Span {
        Span {
            start: span.start - self.base,
            end: span.end - self.base,
        }
    }

    fn prev_span(&self) -> Span {
        self.tokens[self.pos.saturating_sub(1)].span
    }

    fn at(&self, p: Punct) -> bool {
        self.peek().kind == TokenKind::Punct(p)
    }

    fn at_kw(&self, k: Keyword) -> bool {
        self.peek().kind == TokenKind::Keyword(k)
    }

    fn eat(&mut self, p: Punct) -> bool {
        if self.at(p) {
            self.bump();
            true
        } else {
            false
        }
    }

    fn at_assign(&self) -> bool {
        self.at(Punct::Assign) || self.at(Punct::Arrow)
    }

    /// How a token is named in messages: its text where short, else its class.
    fn found(&self, tok: &Token) -> String {
        match &tok.kind {
            TokenKind::Eof => "end of file".to_string(),
            TokenKind::Str(_) => "a string".to_string(),
            _ => {
                let text = &self.src[self.local(tok.span).range()];
                if text.chars().count() > 24 {
                    let cut: String = text.chars().take(24).collect();
                    format!("'{cut}...'")
                } else {
                    format!("'{text}'")
                }
            }
        }
    }

    fn unexpected(&self, expected: &str) -> CompileError {
        let tok = self.peek();
        CompileError::at(
            SyntaxError::Expected {
                expected: expected.to_string(),
                found: self.found(tok),
            },
            tok.span,
        )
    }

    fn expect(&mut self, p: Punct, expected: &str) -> PResult<Span> {
        if self.at(p) {
            Ok(self.bump().span)
        } else {
            Err(self.unexpected(expected))
        }
    }

    fn ident(&mut self, what: &str) -> PResult<Ident> {
        match &self.peek().kind {
            TokenKind::Ident(name) => {
                let name = name.clone();
                let span = self.bump().span;
                if name.contains("::") {
                    return Err(namespace_unsupported(span));
                }
                Ok(Ident { name, span })
            }
            TokenKind::Keyword(_) => {
                let tok = self.peek();
                Err(CompileError::at(
                    SyntaxError::ReservedWord {
                        expected: what.to_string(),
                        found: self.found(tok),
                    },
                    tok.span,
                ))
            }
            _ => Err(self.unexpected(what)),
        }
    }

    fn enter(&mut self) -> PResult<()> {
        self.depth += 1;
        if self.depth > MAX_DEPTH {
            return Err(CompileError::at(
                SyntaxError::TooDeep { limit: MAX_DEPTH },
                self.peek().span,
            ));
        }
        Ok(())
    }

    // ----- error recovery -----

    fn record(&mut self, err: CompileError) {
        if self.errors.len() < MAX_ERRORS {
            self.errors.push(err);
        }
    }

    /// Skips to the next token that starts a line outside any `{ }` opened while skipping.
    /// Inside a block it stops before the block's closing `}`.
    fn recover(&mut self, in_block: bool) {
        let mut braces = 0usize;
        let mut first = true;
        loop {
            let tok = self.peek();
            match tok.kind {
                TokenKind::Eof => return,
                TokenKind::Punct(Punct::RBrace) if braces == 0 && in_block => return,
                _ => {}
            }
            // A line start after the statement's first token is a fresh statement; do not eat it.
            let fresh_line = tok.newline_before && (self.pos > self.stmt_start || !first);
            if braces == 0 && fresh_line {
                return;
            }
            first = false;
            match tok.kind {
                TokenKind::Punct(Punct::LBrace) => braces += 1,
                TokenKind::Punct(Punct::RBrace) => braces = braces.saturating_sub(1),
                _ => {}
            }
            self.bump();
        }
    }

    fn skip_semis(&mut self) {
        while self.eat(Punct::Semi) {}
    }

    // ----- statements -----

    fn script(&mut self) -> Script {
        let mut statements = vec![];
        let mut functions = vec![];
        let mut imports = vec![];
        loop {
            self.skip_semis();
            if self.peek().kind == TokenKind::Eof || self.errors.len() >= MAX_ERRORS {
                break;
            }
            self.stmt_start = self.pos;
            self.depth = 0;
            if self.peek().kind == TokenKind::Keyword(Keyword::Source) {
                match self.import() {
                    Ok(i) => imports.push(i),
                    Err(e) => {
                        self.record(e);
                        self.recover(false);
                    }
                }
                continue;
            }
            if self.at_function_def() {
                match self.function_def() {
                    Ok(f) => functions.push(f),
                    Err(e) => {
                        self.record(e);
                        self.recover(false);
                    }
                }
                continue;
            }
            match self.statement() {
                Ok(s) => statements.push(s),
                Err(e) => {
                    self.record(e);
                    self.recover(false);
                }
            }
        }
        Script {
            statements,
            functions,
            imports,
            skipped: vec![],
        }
    }

    /// `source("file.dml") as ns` (the `as ns` SystemDS's grammar requires).
    fn import(&mut self) -> PResult<Import> {
        let start = self.bump().span;
        self.expect(Punct::LParen, "'(' after 'source'")?;
        let path = match self.peek().kind.clone() {
            TokenKind::Str(path) => {
                self.bump();
                path
            }
            _ => return Err(self.unexpected("the sourced file's path as a string")),
        };
        self.expect(Punct::RParen, "')'")?;
        if self.peek().kind != TokenKind::Keyword(Keyword::As) {
            return Err(self.unexpected("'as' and a namespace after source(...)"));
        }
        self.bump();
        let namespace = self.ident("a namespace")?;
        Ok(Import {
            path,
            span: start.to(namespace.span),
            namespace,
        })
    }

    /// An identifier, or a function of a sourced namespace (`ns::f`) where a call follows.
    fn callee_or_ident(&mut self, what: &str) -> PResult<Ident> {
        if let TokenKind::Ident(name) = &self.peek().kind {
            if name.contains("::") && self.peek_at(1).kind == TokenKind::Punct(Punct::LParen) {
                let name = name.clone();
                let span = self.bump().span;
                return Ok(Ident { name, span });
            }
        }
        self.ident(what)
    }

    fn at_function_def(&self) -> bool {
        matches!(self.peek().kind, TokenKind::Ident(_))
            && matches!(
                self.peek_at(1).kind,
                TokenKind::Punct(Punct::Assign | Punct::Arrow)
            )
            && matches!(
                self.peek_at(2).kind,
                TokenKind::Keyword(Keyword::Function | Keyword::ExternalFunction)
            )
    }

    /// Statements up to the `}` closing a block whose `{` has been consumed.
    fn block_stmts(&mut self, open: Span) -> PResult<Vec<Stmt>> {
        let mut out = vec![];
        loop {
            self.skip_semis();
            if self.eat(Punct::RBrace) {
                return Ok(out);
            }
            if self.peek().kind == TokenKind::Eof {
                let line = self.src[..self.local(open).start as usize]
                    .matches('\n')
                    .count()
                    + 1;
                return Err(CompileError::at(
                    SyntaxError::UnclosedBlock { line },
                    self.peek().span,
                ));
            }
            if self.errors.len() >= MAX_ERRORS {
                return Ok(out);
            }
            self.stmt_start = self.pos;
            let result = if self.at_function_def() {
                let span = self.peek().span;
                Err(CompileError::at(SyntaxError::NestedFunction, span))
            } else {
                self.statement()
            };
            match result {
                Ok(s) => out.push(s),
                Err(e) => {
                    self.record(e);
                    self.recover(true);
                }
            }
        }
    }

    /// A statement body: `{ statements }` or a single statement (with optional `;`).
    fn body(&mut self) -> PResult<Vec<Stmt>> {
        if self.at(Punct::LBrace) {
            let open = self.bump().span;
            return self.block_stmts(open);
        }
        if self.at_function_def() {
            return Err(CompileError::at(
                SyntaxError::NestedFunction,
                self.peek().span,
            ));
        }
        let stmt = self.statement()?;
        self.skip_semis();
        Ok(vec![stmt])
    }

    fn statement(&mut self) -> PResult<Stmt> {
        let saved = self.depth;
        let result = self
            .enter()
            .and_then(|()| with_stack(|| self.statement_inner()));
        self.depth = saved;
        result
    }

    fn statement_inner(&mut self) -> PResult<Stmt> {
        let start = self.peek().span;
        let kind = match self.peek().kind.clone() {
            TokenKind::Keyword(Keyword::If) => self.if_stmt()?,
            TokenKind::Keyword(Keyword::For) => self.for_stmt(false)?,
            TokenKind::Keyword(Keyword::Parfor) => self.for_stmt(true)?,
            TokenKind::Keyword(Keyword::While) => self.while_stmt()?,
            TokenKind::Keyword(Keyword::Source) => {
                return Err(CompileError::at(Unsupported::Source, start))
            }
            TokenKind::Keyword(Keyword::Setwd) => {
                return Err(CompileError::at(Unsupported::Setwd, start))
            }
            TokenKind::Punct(Punct::LBracket) => self.multi_assign()?,
            TokenKind::Ident(_) => self.ident_stmt()?,
            TokenKind::ScriptArg(name) => {
                return Err(CompileError::at(
                    SyntaxError::AssignScriptArg { name: name.clone() },
                    start,
                ))
            }
            TokenKind::Double(v)
                if !v.is_finite()
                    && matches!(
                        self.peek_at(1).kind,
                        TokenKind::Punct(Punct::Assign | Punct::Arrow)
                    ) =>
            {
                let name = if v.is_nan() { "NaN" } else { "Inf" };
                return Err(CompileError::at(
                    SyntaxError::AssignConstant { name },
                    start,
                ));
            }
            _ => return Err(self.unexpected("a statement")),
        };
        Ok(Stmt {
            kind,
            span: start.to(self.prev_span()),
        })
    }

    fn ident_stmt(&mut self) -> PResult<StmtKind> {
        let target = self.callee_or_ident("an identifier")?;
        if target.name == PI && !self.at(Punct::LParen) {
            return Err(CompileError::at(
                SyntaxError::AssignConstant { name: PI },
                target.span,
            ));
        }
        match self.peek().kind {
            TokenKind::Punct(Punct::LParen) => {
                let call = self.call_rest(target)?;
                Ok(StmtKind::Expr(call))
            }
            TokenKind::Punct(Punct::LBracket) => {
                let (rows, cols) = self.index_rest()?;
                if self.at(Punct::PlusAssign) {
                    return Err(CompileError::at(
                        Unsupported::IndexedCompoundAssign,
                        self.peek().span,
                    ));
                }
                if !self.at_assign() {
                    return Err(self.unexpected("'=' or '<-' after the indexed target"));
                }
                self.bump();
                let value = self.rhs()?;
                Ok(StmtKind::IndexAssign {
                    target,
                    rows,
                    cols,
                    value,
                })
            }
            TokenKind::Punct(Punct::Assign | Punct::Arrow) => {
                self.bump();
                let value = self.rhs()?;
                Ok(StmtKind::Assign { target, value })
            }
            TokenKind::Punct(Punct::PlusAssign) => {
                // SystemDS's accumulator assignment: `x += e` adds to an existing `x`.
                self.bump();
                let rhs = self.expr(0)?;
                let lhs = Expr {
                    kind: ExprKind::Var(target.name.clone()),
                    span: target.span,
                };
                let span = target.span.to(rhs.span);
                let value = Expr {
                    kind: ExprKind::Binary {
                        op: BinaryOp::Add,
                        lhs: Box::new(lhs),
                        rhs: Box::new(rhs),
                    },
                    span,
                };
                Ok(StmtKind::Assign { target, value })
            }
            _ => Err(self.unexpected(&format!("'=', '<-', '(' or '[' after '{}'", target.name))),
        }
    }

    /// The right-hand side of an assignment: an expression, or `ifdef($name, default)`,
    /// which DML allows only as a whole right-hand side.
    fn rhs(&mut self) -> PResult<Expr> {
        if self.at_kw(Keyword::Function) || self.at_kw(Keyword::ExternalFunction) {
            return Err(CompileError::at(
                SyntaxError::NestedFunction,
                self.peek().span,
            ));
        }
        if !self.at_kw(Keyword::Ifdef) {
            return self.expr(0);
        }
        let kw = self.bump().span;
        let ident = Ident {
            name: "ifdef".to_string(),
            span: kw,
        };
        let call = self.call_rest(ident)?;
        let next = self.peek();
        if !next.newline_before {
            if let TokenKind::Punct(p) = next.kind {
                if infix(p).is_some() {
                    return Err(CompileError::at(
                        SyntaxError::IfdefInExpression,
                        call.span.to(next.span),
                    ));
                }
            }
        }
        Ok(call)
    }

    fn multi_assign(&mut self) -> PResult<StmtKind> {
        self.bump(); // [
        let mut targets = vec![self.ident("a variable name")?];
        while self.eat(Punct::Comma) {
            targets.push(self.ident("a variable name")?);
        }
        if self.at(Punct::LBracket) {
            return Err(CompileError::at(
                Unsupported::IndexedMultiAssign,
                self.peek().span,
            ));
        }
        self.expect(
            Punct::RBracket,
            "',' or ']' in the list of assignment targets",
        )?;
        if !self.at_assign() {
            return Err(self.unexpected("'=' or '<-' after '[...]'"));
        }
        self.bump();
        let name = self.callee_or_ident("a function call")?;
        if !self.at(Punct::LParen) {
            return Err(self.unexpected("'(' (a multi-assignment needs a function call)"));
        }
        let call = self.call_rest(name)?;
        Ok(StmtKind::MultiAssign { targets, call })
    }

    fn paren_cond(&mut self, what: &str) -> PResult<Expr> {
        self.expect(Punct::LParen, &format!("'(' after '{what}'"))?;
        let cond = self.expr(0)?;
        self.expect(Punct::RParen, &format!("')' closing the {what} condition"))?;
        Ok(cond)
    }

    fn if_stmt(&mut self) -> PResult<StmtKind> {
        self.bump();
        let cond = self.paren_cond("if")?;
        let then_body = self.body()?;
        let else_body = if self.at_kw(Keyword::Else) {
            self.bump();
            self.body()?
        } else {
            vec![]
        };
        Ok(StmtKind::If {
            cond,
            then_body,
            else_body,
        })
    }

    fn while_stmt(&mut self) -> PResult<StmtKind> {
        self.bump();
        let cond = self.paren_cond("while")?;
        let body = self.body()?;
        Ok(StmtKind::While { cond, body })
    }

    fn for_stmt(&mut self, parallel: bool) -> PResult<StmtKind> {
        let kw = if parallel { "parfor" } else { "for" };
        self.bump();
        self.expect(Punct::LParen, &format!("'(' after '{kw}'"))?;
        let var = self.ident("the loop variable")?;
        if !self.at_kw(Keyword::In) {
            return Err(self.unexpected("'in' after the loop variable"));
        }
        self.bump();
        let from = self.expr(0)?;
        let (from, to, step) = if self.eat(Punct::Colon) {
            (from, self.expr(0)?, None)
        } else {
            let from_span = from.span;
            match from.into_kind() {
                ExprKind::Call { name, args } if name == "seq" => {
                    if let Some(arg) = args.iter().find(|a| a.name.is_some()) {
                        return Err(CompileError::at(SyntaxError::ForSeqNamed, arg.span));
                    }
                    if !(2..=3).contains(&args.len()) {
                        return Err(CompileError::at(
                            SyntaxError::ForSeqArity { got: args.len() },
                            from_span,
                        ));
                    }
                    let mut it = args.into_iter().map(|a| a.value);
                    let (Some(f), Some(t)) = (it.next(), it.next()) else {
                        return Err(CompileError::internal(Internal::Invariant {
                            what: "seq argument count checked above",
                        }));
                    };
                    (f, t, it.next())
                }
                _ => {
                    return Err(self.unexpected(
                        "':' (as in 'for (i in 1:n)'), or a loop range 'seq(from, to, incr)'",
                    ))
                }
            }
        };
        // Loop options (`parfor (i in 1:n, check=0)`, allowed on `for` too) tune SystemDS's
        // parallel optimizer; lafuse parses and ignores them.
        while self.eat(Punct::Comma) {
            self.ident("a loop option name")?;
            self.expect(Punct::Assign, "'=' after the loop option name")?;
            self.expr(0)?;
        }
        self.expect(Punct::RParen, &format!("')' closing the {kw} header"))?;
        let body = self.body()?;
        Ok(StmtKind::For {
            var,
            from,
            to,
            step,
            body,
            parallel,
        })
    }

    fn function_def(&mut self) -> PResult<FunctionDef> {
        let name = self.ident("a function name")?;
        self.bump(); // = or <-
        if self.at_kw(Keyword::ExternalFunction) {
            return Err(CompileError::at(
                Unsupported::ExternalFunction,
                self.peek().span,
            ));
        }
        self.bump(); // function
        self.expect(Punct::LParen, "'(' after 'function'")?;
        let mut params = vec![];
        if !self.at(Punct::RParen) {
            loop {
                params.push(self.param(true)?);
                if !self.eat(Punct::Comma) {
                    break;
                }
            }
        }
        self.expect(Punct::RParen, "',' or ')' in the parameter list")?;
        let mut results = vec![];
        if self.at_kw(Keyword::Return) {
            self.bump();
            self.expect(Punct::LParen, "'(' after 'return'")?;
            if !self.at(Punct::RParen) {
                loop {
                    results.push(self.param(false)?);
                    if !self.eat(Punct::Comma) {
                        break;
                    }
                }
            }
            self.expect(Punct::RParen, "',' or ')' in the result list")?;
        }
        let open = self.expect(Punct::LBrace, "'{' starting the function body")?;
        let body = self.block_stmts(open)?;
        let span = name.span.to(self.prev_span());
        self.skip_semis();
        Ok(FunctionDef {
            name: name.name,
            params,
            results,
            body,
            span,
        })
    }

    fn param(&mut self, with_default: bool) -> PResult<Param> {
        let start = self.peek().span;
        let ty = self.value_type()?;
        let name = self.ident("a parameter name")?;
        let default = if with_default && self.eat(Punct::Assign) {
            Some(self.expr(0)?)
        } else {
            None
        };
        Ok(Param {
            name: name.name,
            ty,
            default,
            span: start.to(self.prev_span()),
        })
    }

    fn value_type(&mut self) -> PResult<ValueType> {
        const EXPECTED: &str = "a type (matrix[double], double, integer, boolean or string)";
        let tok = self.peek().clone();
        let scalar = |kw: Keyword| match kw {
            Keyword::IntType => Some(ValueType::Int),
            Keyword::DoubleType => Some(ValueType::Double),
            Keyword::BooleanType => Some(ValueType::Bool),
            Keyword::StringType => Some(ValueType::String),
            _ => None,
        };
        match &tok.kind {
            TokenKind::Keyword(Keyword::UnknownType) => {
                Err(CompileError::at(Unsupported::UnknownValueType, tok.span))
            }
            TokenKind::Keyword(kw) => match scalar(*kw) {
                Some(ty) => {
                    self.bump();
                    Ok(ty)
                }
                None => Err(self.unexpected(EXPECTED)),
            },
            TokenKind::Ident(name) => {
                let lower = name.to_ascii_lowercase();
                match lower.as_str() {
                    "matrix" => {
                        self.bump();
                        self.expect(Punct::LBracket, "'[' after 'matrix' (as in matrix[double])")?;
                        let vt = self.peek().clone();
                        match vt.kind {
                            TokenKind::Keyword(
                                Keyword::DoubleType | Keyword::IntType | Keyword::BooleanType,
                            ) => {
                                self.bump();
                            }
                            TokenKind::Keyword(Keyword::StringType | Keyword::UnknownType) => {
                                return Err(CompileError::at(
                                    Unsupported::MatrixValueType {
                                        found: self.found(&vt),
                                    },
                                    vt.span,
                                ))
                            }
                            _ => return Err(self.unexpected("double, integer or boolean")),
                        }
                        self.expect(Punct::RBracket, "']' closing the matrix type")?;
                        Ok(ValueType::Matrix)
                    }
                    // SystemDS takes any value type in a list's brackets (`gridSearch` has
                    // `List[String] params`) and checks none of the elements against it.
                    "list" | "frame" => {
                        self.bump();
                        let frame = lower == "frame";
                        self.expect(
                            Punct::LBracket,
                            "'[' after the data type (as in list[unknown])",
                        )?;
                        let vt = &self.peek().kind;
                        let named_value_type = matches!(vt, TokenKind::Keyword(kw)
                            if *kw == Keyword::UnknownType || scalar(*kw).is_some());
                        if !named_value_type {
                            return Err(self.unexpected("a value type (as in list[unknown])"));
                        }
                        self.bump();
                        self.expect(Punct::RBracket, "']' closing the data type")?;
                        Ok(if frame {
                            ValueType::Frame
                        } else {
                            ValueType::List
                        })
                    }
                    // `Scalar[int] R = 81` (`hyperband`) is SystemDS's spelling of `int R = 81`.
                    "scalar" => {
                        self.bump();
                        self.expect(Punct::LBracket, "'[' after 'scalar' (as in scalar[int])")?;
                        let vt = self.peek().clone();
                        let ty = match vt.kind {
                            TokenKind::Keyword(Keyword::UnknownType) => {
                                return Err(CompileError::at(
                                    Unsupported::UnknownValueType,
                                    vt.span,
                                ))
                            }
                            TokenKind::Keyword(kw) => scalar(kw),
                            _ => None,
                        };
                        let Some(ty) = ty else {
                            return Err(self.unexpected("int, double, boolean or string"));
                        };
                        self.bump();
                        self.expect(Punct::RBracket, "']' closing the scalar type")?;
                        Ok(ty)
                    }
                    "tensor" => Err(CompileError::at(
                        Unsupported::DataType {
                            name: name.to_string(),
                        },
                        tok.span,
                    )),
                    _ => Err(self.unexpected(EXPECTED)),
                }
            }
            _ => Err(self.unexpected(EXPECTED)),
        }
    }

    // ----- expressions -----

    fn expr(&mut self, min_level: usize) -> PResult<Expr> {
        let saved = self.depth;
        let result = self
            .enter()
            .and_then(|()| with_stack(|| self.expr_inner(min_level)));
        self.depth = saved;
        result
    }

    fn expr_inner(&mut self, min_level: usize) -> PResult<Expr> {
        let mut lhs = self.prefix()?;
        while let TokenKind::Punct(p) = self.peek().kind {
            let Some((op, level)) = infix(p) else { break };
            if level < min_level {
                break;
            }
            self.bump();
            // Each link of a left-leaning chain deepens the tree, so it counts as nesting.
            self.enter()?;
            let next_min = if op == BinaryOp::Pow {
                level
            } else {
                level + 1
            };
            let rhs = self.expr(next_min)?;
            let span = lhs.span.to(rhs.span);
            lhs = Expr {
                kind: ExprKind::Binary {
                    op,
                    lhs: Box::new(lhs),
                    rhs: Box::new(rhs),
                },
                span,
            };
        }
        Ok(lhs)
    }

    fn prefix(&mut self) -> PResult<Expr> {
        let (op, level) = match self.peek().kind {
            TokenKind::Punct(Punct::Minus) => (UnaryOp::Neg, LVL_UNARY),
            TokenKind::Punct(Punct::Plus) => (UnaryOp::Plus, LVL_UNARY),
            TokenKind::Punct(Punct::Bang) => (UnaryOp::Not, LVL_NOT),
            _ => return self.primary(),
        };
        let start = self.bump().span;
        let operand = self.expr(level)?;
        let span = start.to(operand.span);
        Ok(Expr {
            kind: ExprKind::Unary {
                op,
                operand: Box::new(operand),
            },
            span,
        })
    }

    fn primary(&mut self) -> PResult<Expr> {
        let tok = self.peek().clone();
        let kind = match tok.kind {
            TokenKind::Int(v) => ExprKind::Int(v),
            TokenKind::Double(v) => ExprKind::Double(v),
            TokenKind::Str(s) => ExprKind::Str(s),
            TokenKind::Keyword(Keyword::True) => ExprKind::Bool(true),
            TokenKind::Keyword(Keyword::False) => ExprKind::Bool(false),
            TokenKind::ScriptArg(name) => ExprKind::ScriptArg(name),
            TokenKind::Punct(Punct::LParen) => {
                self.bump();
                let inner = self.expr(0)?;
                self.expect(Punct::RParen, "')'")?;
                return Ok(inner);
            }
            TokenKind::Ident(_) => {
                let ident = self.callee_or_ident("an expression")?;
                if self.at(Punct::LParen) {
                    return self.call_rest(ident);
                }
                if self.at(Punct::LBracket) && !self.bracket_starts_multi_assign() {
                    let (rows, cols) = self.index_rest()?;
                    let span = ident.span.to(self.prev_span());
                    let target = Box::new(Expr {
                        kind: ExprKind::Var(ident.name),
                        span: ident.span,
                    });
                    return Ok(Expr {
                        kind: ExprKind::Index { target, rows, cols },
                        span,
                    });
                }
                // SystemDS's built-in constant `pi` (`BuiltinConstant`, like `Inf` and `NaN`,
                // which the lexer reads as numbers) replaces the name wherever it is read as a
                // variable; a parameter or argument may still be named `pi`.
                let kind = if ident.name == PI {
                    ExprKind::Double(std::f64::consts::PI)
                } else {
                    ExprKind::Var(ident.name)
                };
                return Ok(Expr {
                    kind,
                    span: ident.span,
                });
            }
            TokenKind::Keyword(Keyword::Ifdef) => {
                return Err(CompileError::at(SyntaxError::IfdefNested, tok.span))
            }
            _ => return Err(self.unexpected("an expression")),
        };
        self.bump();
        Ok(Expr {
            kind,
            span: tok.span,
        })
    }

    /// Whether the `[` at the current token opens the target list of a multi-assignment on a
    /// new statement (`y = x` then `[a, b] = f()`), not an index of the identifier before it.
    /// DML's grammar needs no separator between the two statements; `Dml.g4` resolves this by
    /// unbounded lookahead, and so does this: an index is never followed by `=` or `<-` inside
    /// an expression.
    fn bracket_starts_multi_assign(&self) -> bool {
        let mut depth = 0usize;
        let mut i = self.pos;
        while i < self.tokens.len() {
            match self.tokens[i].kind {
                TokenKind::Punct(Punct::LBracket | Punct::LParen | Punct::LBrace) => depth += 1,
                TokenKind::Punct(Punct::RBracket | Punct::RParen | Punct::RBrace) => {
                    depth = depth.saturating_sub(1);
                    if depth == 0 {
                        return matches!(
                            self.tokens.get(i + 1).map(|t| &t.kind),
                            Some(TokenKind::Punct(Punct::Assign | Punct::Arrow))
                        );
                    }
                }
                TokenKind::Eof => return false,
                _ => {}
            }
            i += 1;
        }
        false
    }

    /// `( args )` after a function name.
    fn call_rest(&mut self, name: Ident) -> PResult<Expr> {
        self.expect(Punct::LParen, "'('")?;
        let mut args = vec![];
        if !self.at(Punct::RParen) {
            loop {
                self.arg(&mut args)?;
                if !self.eat(Punct::Comma) {
                    break;
                }
            }
        }
        self.expect(
            Punct::RParen,
            &format!("',' or ')' in the arguments of {}(...)", name.name),
        )?;
        let span = name.span.to(self.prev_span());
        Ok(Expr {
            kind: ExprKind::Call {
                name: name.name,
                args,
            },
            span,
        })
    }

    /// One argument of a call, pushed onto `args`. A named list `name=[a, b, ...]` (SystemDS's
    /// MultiIdExpression, which only its deep-learning built-ins take: `stride=[2, 2]`) is
    /// pushed as one argument per element, `name1=a, name2=b, ...`, as SystemDS's
    /// `expandListParams` expands it before binding.
    fn arg(&mut self, args: &mut Vec<Arg>) -> PResult<()> {
        let named = matches!(self.peek().kind, TokenKind::Ident(_))
            && self.peek_at(1).kind == TokenKind::Punct(Punct::Assign);
        if named {
            let name = self.ident("a parameter name")?;
            self.bump(); // =
            if self.at(Punct::LBracket) {
                self.bump(); // [
                let mut k = 0;
                loop {
                    let value = self.expr(0)?;
                    k += 1;
                    let span = name.span.to(value.span);
                    let element = Ident {
                        name: format!("{}{k}", name.name),
                        span: name.span,
                    };
                    args.push(Arg {
                        name: Some(element),
                        value,
                        span,
                    });
                    if !self.eat(Punct::Comma) {
                        break;
                    }
                }
                self.expect(Punct::RBracket, "',' or ']' in the list argument")?;
                return Ok(());
            }
            let value = self.expr(0)?;
            let span = name.span.to(value.span);
            args.push(Arg {
                name: Some(name),
                value,
                span,
            });
            return Ok(());
        }
        let value = self.expr(0)?;
        args.push(Arg {
            name: None,
            span: value.span,
            value,
        });
        Ok(())
    }

    /// `[rows, cols]`, either part optional.
    fn index_rest(&mut self) -> PResult<(Option<IndexRange>, Option<IndexRange>)> {
        self.expect(Punct::LBracket, "'['")?;
        let rows = if self.at(Punct::Comma) || self.at(Punct::RBracket) {
            None
        } else {
            Some(self.range()?)
        };
        let mut cols = None;
        if self.eat(Punct::Comma) && !self.at(Punct::RBracket) {
            cols = Some(self.range()?);
        }
        self.expect(Punct::RBracket, "',' or ']' in the index")?;
        Ok((rows, cols))
    }

    fn range(&mut self) -> PResult<IndexRange> {
        let lower = self.expr(0)?;
        let upper = if self.eat(Punct::Colon) {
            Some(Box::new(self.expr(0)?))
        } else {
            None
        };
        let span = lower.span.to(upper.as_ref().map_or(lower.span, |u| u.span));
        Ok(IndexRange {
            lower: Box::new(lower),
            upper,
            span,
        })
    }
}

fn namespace_unsupported(span: Span) -> CompileError {
    CompileError::at(Unsupported::Namespaces, span)
}

// ----- s-expressions -----

/// A compact, unambiguous rendering of an expression for tests and debugging, e.g.
/// `-2^2` is `(- (^ 2 2))`, `X[1:2, ]` is `(index X (: 1 2) _)`, `rand(rows=3)` is
/// `(rand rows=3)`. Doubles print with a decimal point (`2.0`), strings quoted.
pub fn sexpr(expr: &Expr) -> String {
    match &expr.kind {
        ExprKind::Double(v) => format!("{v:?}"),
        ExprKind::Int(v) => v.to_string(),
        ExprKind::Bool(true) => "TRUE".to_string(),
        ExprKind::Bool(false) => "FALSE".to_string(),
        ExprKind::Str(s) => format!("{s:?}"),
        ExprKind::Var(name) => name.clone(),
        ExprKind::ScriptArg(name) => format!("${name}"),
        ExprKind::Unary { op, operand } => {
            let sym = match op {
                UnaryOp::Neg => "-",
                UnaryOp::Plus => "+",
                UnaryOp::Not => "!",
            };
            format!("({sym} {})", sexpr(operand))
        }
        ExprKind::Binary { op, lhs, rhs } => {
            format!("({} {} {})", op.symbol(), sexpr(lhs), sexpr(rhs))
        }
        ExprKind::Call { name, args } => {
            let mut out = format!("({name}");
            for a in args {
                out.push(' ');
                if let Some(n) = &a.name {
                    out.push_str(&n.name);
                    out.push('=');
                }
                out.push_str(&sexpr(&a.value));
            }
            out.push(')');
            out
        }
        ExprKind::Index { target, rows, cols } => {
            format!(
                "(index {} {} {})",
                sexpr(target),
                sexpr_range(rows),
                sexpr_range(cols)
            )
        }
    }
}

fn sexpr_range(r: &Option<IndexRange>) -> String {
    match r {
        None => "_".to_string(),
        Some(IndexRange {
            lower, upper: None, ..
        }) => sexpr(lower),
        Some(IndexRange {
            lower,
            upper: Some(u),
            ..
        }) => format!("(: {} {})", sexpr(lower), sexpr(u)),
    }
}

fn sexpr_body(stmts: &[Stmt]) -> String {
    let parts: Vec<String> = stmts.iter().map(sexpr_stmt).collect();
    format!("({})", parts.join(" "))
}

/// The s-expression of a statement: `(= x e)`, `(= (index X r c) e)`, `(= [a b] (f x))`,
/// `(if c (then...) (else...))`, `(for i from to [step] (body...))`, `(parfor ...)`,
/// `(while c (body...))`; an expression statement is its expression.
pub fn sexpr_stmt(stmt: &Stmt) -> String {
    match &stmt.kind {
        StmtKind::Assign { target, value } => format!("(= {} {})", target.name, sexpr(value)),
        StmtKind::IndexAssign {
            target,
            rows,
            cols,
            value,
        } => format!(
            "(= (index {} {} {}) {})",
            target.name,
            sexpr_range(rows),
            sexpr_range(cols),
            sexpr(value)
        ),
        StmtKind::MultiAssign { targets, call } => {
            let names: Vec<&str> = targets.iter().map(|t| t.name.as_str()).collect();
            format!("(= [{}] {})", names.join(" "), sexpr(call))
        }
        StmtKind::Expr(e) => sexpr(e),
        StmtKind::If {
            cond,
            then_body,
            else_body,
        } => {
            format!(
                "(if {} {} {})",
                sexpr(cond),
                sexpr_body(then_body),
                sexpr_body(else_body)
            )
        }
        StmtKind::For {
            var,
            from,
            to,
            step,
            body,
            parallel,
        } => {
            let kw = if *parallel { "parfor" } else { "for" };
            let step = step
                .as_ref()
                .map(|s| format!(" {}", sexpr(s)))
                .unwrap_or_default();
            format!(
                "({kw} {} {} {}{step} {})",
                var.name,
                sexpr(from),
                sexpr(to),
                sexpr_body(body)
            )
        }
        StmtKind::While { cond, body } => format!("(while {} {})", sexpr(cond), sexpr_body(body)),
    }
}

/// The s-expression of a function definition:
/// `(function f ((matrix X) (double a 1)) ((matrix Y)) (body...))`.
pub fn sexpr_function(f: &FunctionDef) -> String {
    let ty = |t: ValueType| match t {
        ValueType::Matrix => "matrix",
        ValueType::Double => "double",
        ValueType::Int => "int",
        ValueType::Bool => "boolean",
        ValueType::String => "string",
        ValueType::List => "list",
        ValueType::Frame => "frame",
    };
    let params = |ps: &[Param]| -> String {
        let parts: Vec<String> = ps
            .iter()
            .map(|p| match &p.default {
                Some(d) => format!("({} {} {})", ty(p.ty), p.name, sexpr(d)),
                None => format!("({} {})", ty(p.ty), p.name),
            })
            .collect();
        format!("({})", parts.join(" "))
    };
    format!(
        "(function {} {} {} {})",
        f.name,
        params(&f.params),
        params(&f.results),
        sexpr_body(&f.body)
    )
}

/// The whole script, one top-level statement or function per line, in source order.
pub fn sexpr_script(script: &Script) -> String {
    let mut items: Vec<(u32, String)> = script
        .statements
        .iter()
        .map(|s| (s.span.start, sexpr_stmt(s)))
        .chain(
            script
                .functions
                .iter()
                .map(|f| (f.span.start, sexpr_function(f))),
        )
        .collect();
    items.sort_by_key(|(start, _)| *start);
    items
        .into_iter()
        .map(|(_, s)| s)
        .collect::<Vec<_>>()
        .join("\n")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::Fault;

    fn p(text: &str) -> String {
        match parse(&SourceFile::new("t.dml", text)) {
            Ok(script) => sexpr_script(&script),
            Err(errors) => panic!("{text}: {errors:?}"),
        }
    }

    fn e(text: &str) -> String {
        let s = p(&format!("x = {text}"));
        s.strip_prefix("(= x ")
            .and_then(|s| s.strip_suffix(')'))
            .unwrap_or(&s)
            .to_string()
    }

    fn err(text: &str) -> CompileError {
        match parse(&SourceFile::new("t.dml", text)) {
            Ok(s) => panic!("{text} parsed: {}", sexpr_script(&s)),
            Err(mut errors) => errors.remove(0),
        }
    }

    #[test]
    fn pi_is_a_constant_and_lists_are_a_parameter_type() {
        assert_eq!(
            e("2 * pi"),
            format!("(* 2 {})", e(&format!("{:?}", std::f64::consts::PI)))
        );
        assert!(err("pi = 3").to_string().contains("built-in constant pi"));
        let f =
            p("f = function(List[Unknown] L, list[unknown] M) return (List[Unknown] R) { R = L }");
        assert!(
            f.contains("(list L)") && f.contains("(list M)") && f.contains("(list R)"),
            "{f}"
        );
        let f = p("f = function(List[String] P, List[Double] D) return (Double x) { x = 1 }");
        assert!(f.contains("(list P)") && f.contains("(list D)"), "{f}");
        assert!(
            err("f = function(List[Matrix] L) return (Double x) { x = 1 }")
                .to_string()
                .contains("a value type (as in list[unknown])")
        );
    }

    #[test]
    fn lists_name_any_value_type_and_scalar_brackets_name_a_scalar() {
        let f = p(
            "f = function(List[String] L, list[double] M, Scalar[int] k = 3, \
                   scalar[Boolean] b) return (Scalar[Double] x) { x = k }",
        );
        assert!(
            f.contains("((list L) (list M) (int k 3) (boolean b)) ((double x))"),
            "{f}"
        );
        let param = |ty: &str| {
            err(&format!(
                "f = function({ty} k) return (Double x) {{ x = 1 }}"
            ))
        };
        assert_eq!(param("Scalar[Unknown]").fault(), Fault::Unsupported);
        for not_scalar in ["Scalar[Matrix[Double]]", "Scalar[List[Unknown]]"] {
            let e = param(not_scalar);
            assert_eq!(e.fault(), Fault::User, "{not_scalar}: {e}");
            assert!(
                e.to_string().contains("int, double, boolean or string"),
                "{e}"
            );
        }
    }

    #[test]
    fn precedence_matches_dml_grammar() {
        assert_eq!(e("-2^2"), "(- (^ 2 2))");
        assert_eq!(e("2^-1"), "(^ 2 (- 1))");
        assert_eq!(e("2^3^2"), "(^ 2 (^ 3 2))");
        assert_eq!(e("-A %*% B"), "(%*% (- A) B)");
        assert_eq!(e("a %% b %*% c"), "(%% a (%*% b c))");
        assert_eq!(e("a * b %/% c"), "(* a (%/% b c))");
        assert_eq!(e("a + b * c - d"), "(- (+ a (* b c)) d)");
        assert_eq!(e("a < b + 1 & c"), "(& (< a (+ b 1)) c)");
        assert_eq!(e("!a == b"), "(! (== a b))");
        assert_eq!(e("!a & b | c && d"), "(| (& (! a) b) (& c d))");
        assert_eq!(e("a * -b + c"), "(+ (* a (- b)) c)");
    }

    #[test]
    fn statements_need_no_separator() {
        assert_eq!(
            p("x = 3 print(x) y = 4; print(y)"),
            "(= x 3)\n(print x)\n(= y 4)\n(print y)"
        );
        assert_eq!(p("y = x\n[a, b] = f(y)"), "(= y x)\n(= [a b] (f y))");
        assert_eq!(p("x += 2"), "(= x (+ x 2))");
    }

    #[test]
    fn errors_name_expected_and_found() {
        let e1 = err("x = (1 + 2");
        assert_eq!(
            e1.to_string(),
            "syntax error: expected ')', found end of file"
        );
        let e2 = err("x = 1 +\nif (1) {}");
        assert_eq!(
            e2.to_string(),
            "syntax error: expected an expression, found 'if'"
        );
        assert!(err("if (TRUE) { source(\"a.dml\") as a }")
            .to_string()
            .starts_with("unsupported: source(...) inside a block"));
        assert_eq!(
            err("source(\"a.dml\")").to_string(),
            "syntax error: expected 'as' and a namespace after source(...), found end of file"
        );
        let script = parse(&SourceFile::new(
            "t.dml",
            "source(\"lib/a.dml\") as a\nx = a::f(1)",
        ))
        .unwrap();
        assert_eq!(script.imports[0].path, "lib/a.dml");
        assert_eq!(script.imports[0].namespace.name, "a");
        assert_eq!(sexpr_script(&script), "(= x (a::f 1))");
        let script = parse(&SourceFile::new("t.dml", "[y, z] = a::g(1)\na::h(y)")).unwrap();
        assert_eq!(script.statements.len(), 2);
        assert!(err("a::x = 1")
            .to_string()
            .starts_with("unsupported: namespaced"));
        assert!(err("x = ifdef($a, 1) + 1")
            .to_string()
            .contains("whole right-hand side"));
    }

    #[test]
    fn deep_nesting_parses_on_a_small_stack_up_to_the_limit_and_is_an_error_beyond() {
        // A 256 KiB thread, like an embedder's: parsing and dropping the tree grow the stack
        // as they go instead of overflowing it.
        let run = || {
            let ok = |text: &str| {
                let parsed = parse(&SourceFile::new("t.dml", text));
                assert!(parsed.is_ok(), "{}...: {:?}", &text[..40], parsed.err());
            };
            let n = MAX_DEPTH - 10;
            ok(&format!("x = {}1{}", "(".repeat(n), ")".repeat(n)));
            ok(&format!("x = 1{}", " + 1".repeat(n)));
            ok(&format!("x = {}1", "-".repeat(n)));
            ok(&format!(
                "{}x = 1{}",
                "if (TRUE) {\n".repeat(n),
                "\n}".repeat(n)
            ));
            let n = MAX_DEPTH + 1;
            let deep = format!("x = {}1{}", "(".repeat(n), ")".repeat(n));
            assert!(err(&deep).to_string().contains("nested too deeply"));
            let long = format!("x = 1{}", " + 1".repeat(n));
            assert!(err(&long).to_string().contains("nested too deeply"));
            let negs = format!("x = {}1", "-".repeat(n));
            assert!(err(&negs).to_string().contains("nested too deeply"));
        };
        let small = std::thread::Builder::new().stack_size(256 << 10);
        small
            .spawn(run)
            .map(|t| t.join())
            .expect("spawn")
            .expect("no overflow");
    }
}
