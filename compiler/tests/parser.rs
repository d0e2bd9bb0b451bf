//! Parser tests: every construct of the DML subset and every precedence rule, pinned as
//! s-expressions; syntax and "unsupported" errors with their rendered location.

use lafuse_compiler::parser::{parse, sexpr_script};
use lafuse_compiler::span::SourceFile;
use lafuse_compiler::{CompileError, Fault};

fn tree(text: &str) -> String {
    match parse(&SourceFile::new("test.dml", text)) {
        Ok(script) => sexpr_script(&script),
        Err(errors) => panic!("{text:?} failed to parse: {errors:#?}"),
    }
}

/// The s-expression of the right-hand side of `x = <text>`.
fn expr(text: &str) -> String {
    let t = tree(&format!("x = {text}"));
    t.strip_prefix("(= x ")
        .and_then(|s| s.strip_suffix(')'))
        .expect("assignment")
        .to_string()
}

fn errors(text: &str) -> Vec<CompileError> {
    match parse(&SourceFile::new("test.dml", text)) {
        Ok(script) => panic!("{text:?} parsed as {}", sexpr_script(&script)),
        Err(errors) => errors,
    }
}

fn first_error(text: &str) -> CompileError {
    errors(text).remove(0)
}

#[test]
fn literals() {
    assert_eq!(expr("7"), "7");
    assert_eq!(expr("7.0"), "7.0");
    assert_eq!(expr(".5"), "0.5");
    assert_eq!(expr("5."), "5.0");
    assert_eq!(expr("1e-3"), "0.001");
    assert_eq!(expr("1E6"), "1000000.0");
    assert_eq!(expr("1e3"), "1000.0");
    assert_eq!(expr("TRUE"), "TRUE");
    assert_eq!(expr("FALSE"), "FALSE");
    assert_eq!(expr(r#""a\tb\n\"q\"""#), r#""a\tb\n\"q\"""#);
    assert_eq!(expr(r"'it\'s'"), r#""it's""#);
    assert_eq!(expr("$X"), "$X");
    assert_eq!(expr("$1"), "$1");
}

#[test]
fn precedence_levels_follow_dml_g4() {
    // `^` binds tighter than unary minus and is right-associative.
    assert_eq!(expr("-2^2"), "(- (^ 2 2))");
    assert_eq!(expr("2^3^2"), "(^ 2 (^ 3 2))");
    assert_eq!(expr("2^-1"), "(^ 2 (- 1))");
    assert_eq!(expr("-x^-y"), "(- (^ x (- y)))");
    // Unary minus binds tighter than every other binary operator.
    assert_eq!(expr("-A %*% B"), "(%*% (- A) B)");
    assert_eq!(expr("- a * b"), "(* (- a) b)");
    assert_eq!(expr("+a - -b"), "(- (+ a) (- b))");
    // %*% above %% and %/%, above * and /, above + and -.
    assert_eq!(expr("a %% B %*% C"), "(%% a (%*% B C))");
    assert_eq!(expr("A %*% B %/% c"), "(%/% (%*% A B) c)");
    assert_eq!(expr("a * b %% c"), "(* a (%% b c))");
    assert_eq!(expr("a %/% b * c"), "(* (%/% a b) c)");
    assert_eq!(expr("a + b * c"), "(+ a (* b c))");
    assert_eq!(expr("a / b - c"), "(- (/ a b) c)");
    // Left associativity.
    assert_eq!(expr("a - b - c"), "(- (- a b) c)");
    assert_eq!(expr("a / b / c"), "(/ (/ a b) c)");
    assert_eq!(expr("A %*% B %*% C"), "(%*% (%*% A B) C)");
    assert_eq!(expr("a %% b %% c"), "(%% (%% a b) c)");
    // Comparisons below arithmetic, `!` below comparisons, then & and |.
    assert_eq!(expr("a + 1 < b * 2"), "(< (+ a 1) (* b 2))");
    assert_eq!(expr("a < b == c"), "(== (< a b) c)");
    assert_eq!(expr("!a == b"), "(! (== a b))");
    assert_eq!(expr("!a & b"), "(& (! a) b)");
    assert_eq!(expr("a == !b & c"), "(& (== a (! b)) c)");
    assert_eq!(expr("a & b | c & d"), "(| (& a b) (& c d))");
    assert_eq!(expr("a && b || c"), "(| (& a b) c)");
    assert_eq!(expr("a | b & c"), "(| a (& b c))");
    assert_eq!(
        expr("a >= 1 & b <= 2 | c != 3 & d > 4"),
        "(| (& (>= a 1) (<= b 2)) (& (!= c 3) (> d 4)))"
    );
    // Parentheses override everything.
    assert_eq!(expr("(-2)^2"), "(^ (- 2) 2)");
    assert_eq!(expr("(a + b) * c"), "(* (+ a b) c)");
}

#[test]
fn calls_and_indexing() {
    assert_eq!(expr("rand(rows=3, cols=3)"), "(rand rows=3 cols=3)");
    assert_eq!(expr("matrix(0, 2, 3)"), "(matrix 0 2 3)");
    assert_eq!(expr("toString(X, decimal=2)"), "(toString X decimal=2)");
    assert_eq!(expr("as.scalar(X[1, 1])"), "(as.scalar (index X 1 1))");
    assert_eq!(expr("time()"), "(time)");
    assert_eq!(expr("X[i, j]"), "(index X i j)");
    assert_eq!(expr("X[a:b, ]"), "(index X (: a b) _)");
    assert_eq!(expr("X[, j]"), "(index X _ j)");
    assert_eq!(
        expr("X[1:nrow(X)-1, 2:3]"),
        "(index X (: 1 (- (nrow X) 1)) (: 2 3))"
    );
    assert_eq!(expr("X[i]"), "(index X i _)");
    assert_eq!(expr("ifdef($n, 10)"), "(ifdef $n 10)");
    assert_eq!(expr("-X[1, 1]^2"), "(- (^ (index X 1 1) 2))");
    // A named list is one argument per element, as SystemDS expands its DNN arguments.
    assert_eq!(
        expr("conv2d(X, W, stride=[s, 2], input_shape=[n, c + 1, h, w])"),
        "(conv2d X W stride1=s stride2=2 input_shape1=n input_shape2=(+ c 1) input_shape3=h \
         input_shape4=w)"
    );
}

#[test]
fn statements() {
    assert_eq!(tree("x = 1\ny <- 2"), "(= x 1)\n(= y 2)");
    assert_eq!(tree("x = 1; y = 2;; z = 3"), "(= x 1)\n(= y 2)\n(= z 3)");
    assert_eq!(tree("x = 1 y = 2"), "(= x 1)\n(= y 2)");
    assert_eq!(tree("X[1:2, j] = Y"), "(= (index X (: 1 2) j) Y)");
    assert_eq!(tree("X[, 1] <- 0"), "(= (index X _ 1) 0)");
    assert_eq!(tree("print(\"hi\")"), "(print \"hi\")");
    assert_eq!(
        tree("write(X, \"out.csv\", format=\"csv\")"),
        "(write X \"out.csv\" format=\"csv\")"
    );
    assert_eq!(tree("[A, b] = f(X, k=2)"), "(= [A b] (f X k=2))");
    assert_eq!(tree("x = 1\nx += 2"), "(= x 1)\n(= x (+ x 2))");
    // A line starting with `[` after an identifier is a new multi-assignment, not an index.
    assert_eq!(tree("y = x\n[a, b] = f(y)"), "(= y x)\n(= [a b] (f y))");
    assert_eq!(
        tree("# comment\nx = 1 # trailing\n/* block\ncomment */ y = 2"),
        "(= x 1)\n(= y 2)"
    );
    assert_eq!(
        tree("x = 1 # comment at end of file without newline"),
        "(= x 1)"
    );
}

#[test]
fn control_flow() {
    assert_eq!(tree("if (x > 1) { y = 1 }"), "(if (> x 1) ((= y 1)) ())");
    assert_eq!(
        tree("if (x > 1) y = 1 else y = 2"),
        "(if (> x 1) ((= y 1)) ((= y 2)))"
    );
    assert_eq!(
        tree("if (x > 1) y = 1; else y = 2;"),
        "(if (> x 1) ((= y 1)) ((= y 2)))"
    );
    assert_eq!(
        tree("if (a) { x = 1 } else if (b) { x = 2 } else { x = 3 }"),
        "(if a ((= x 1)) ((if b ((= x 2)) ((= x 3)))))"
    );
    assert_eq!(
        tree("if (a)\n{\n  x = 1\n  y = 2\n}\nelse\n{\n  x = 3\n}"),
        "(if a ((= x 1) (= y 2)) ((= x 3)))"
    );
    assert_eq!(
        tree("for (i in 1:n) { s = s + i }"),
        "(for i 1 n ((= s (+ s i))))"
    );
    assert_eq!(
        tree("for (i in seq(1, n, 2)) s = s + i"),
        "(for i 1 n 2 ((= s (+ s i))))"
    );
    assert_eq!(
        tree("for (i in seq(n, 1)) print(i)"),
        "(for i n 1 ((print i)))"
    );
    assert_eq!(
        tree("for (i in 2:nrow(X)-1) {}"),
        "(for i 2 (- (nrow X) 1) ())"
    );
    assert_eq!(
        tree("parfor (i in 1:n, check=0, mode=\"LOCAL\") { R[i, ] = X[i, ] }"),
        "(parfor i 1 n ((= (index R i _) (index X i _))))"
    );
    assert_eq!(
        tree("while (i < 10) { i = i + 1 }"),
        "(while (< i 10) ((= i (+ i 1))))"
    );
    assert_eq!(
        tree("while (TRUE) i = i + 1"),
        "(while TRUE ((= i (+ i 1))))"
    );
}

#[test]
fn function_definitions() {
    assert_eq!(
        tree(
            "f = function(matrix[double] X, double a = 1) return (matrix[double] Y, double s) {\n\
             Y = X * a\n s = sum(Y)\n}"
        ),
        "(function f ((matrix X) (double a 1)) ((matrix Y) (double s)) ((= Y (* X a)) (= s (sum Y))))"
    );
    assert_eq!(
        tree("g <- function(Integer n, Boolean b=TRUE, String s = \"x\", int k = -1) { print(s) }"),
        "(function g ((int n) (boolean b TRUE) (string s \"x\") (int k (- 1))) () ((print s)))"
    );
    assert_eq!(
        tree("h = function(Matrix[Double] A, matrix[int] B, integer c, Double d) return (Double e) { e = d }"),
        "(function h ((matrix A) (matrix B) (int c) (double d)) ((double e)) ((= e d)))"
    );
    assert_eq!(
        tree("k = function(Frame[String] F, frame[unknown] G) return (Frame[Unknown] H) { H = F }"),
        "(function k ((frame F) (frame G)) ((frame H)) ((= H F)))"
    );
    assert_eq!(
        tree("x = 1\nf = function() return () { }\ny = f()"),
        "(= x 1)\n(function f () () ())\n(= y (f))"
    );
}

fn assert_unsupported(text: &str, what: &str) {
    let err = first_error(text);
    assert_eq!(err.fault(), Fault::Unsupported, "{text}: {err:?}");
    assert!(
        err.to_string().starts_with("unsupported: "),
        "{}",
        err.to_string()
    );
    assert!(
        err.to_string().contains(what),
        "{text}: {} should mention {what}",
        err
    );
    assert!(err.span.is_some());
}

#[test]
fn unsupported_constructs_name_the_construct() {
    assert_unsupported(
        "if (TRUE) { source(\"nn/layers.dml\") as layers }",
        "source",
    );
    assert_unsupported("setwd(\"/tmp\")", "setwd");
    assert_unsupported(
        "f = externalFunction(double a) return (double b) implemented in (classname=\"X\")",
        "externalFunction",
    );
    assert_unsupported("x = ns::v + 1", "namespaced variables");
    assert_unsupported("f = function(tensor[double] T) { print(1) }", "tensor");
    assert_unsupported(
        "f = function(matrix[string] F) { print(1) }",
        "matrices of value type",
    );
    assert_unsupported("f = function(unknown u) { print(1) }", "unknown");
    assert_unsupported("X[1, 1] += 2", "+=");
}

#[test]
fn syntax_errors_say_expected_and_found() {
    let cases: &[(&str, &str)] = &[
        ("x = (1 + 2", "syntax error: expected ')', found end of file"),
        ("x = 1 +", "syntax error: expected an expression, found end of file"),
        ("x = * 2", "syntax error: expected an expression, found '*'"),
        ("if x > 1 { y = 1 }", "syntax error: expected '(' after 'if', found 'x'"),
        ("for (i = 1:3) { }", "syntax error: expected 'in' after the loop variable, found '='"),
        ("for (i in 1, 3) { }", "syntax error: expected ':' (as in 'for (i in 1:n)'), or a loop range 'seq(from, to, incr)', found ','"),
        ("x 1", "syntax error: expected '=', '<-', '(' or '[' after 'x', found '1'"),
        ("f(1, 2", "syntax error: expected ',' or ')' in the arguments of f(...), found end of file"),
        ("in = 3", "syntax error: expected a statement, found 'in'"),
        ("x = ifdef($a, 1) * 2", "ifdef(...) must be the whole right-hand side of an assignment (assign it to a variable first)"),
        ("y = 2 * ifdef($a, 1)", "ifdef(...) must be the whole right-hand side of an assignment (x = ifdef($name, default))"),
        ("if (a) { f = function() { } }", "function definitions are only allowed at the top level of a script"),
        ("x = [1, 2]", "syntax error: expected an expression, found '['"),
        ("f([1, 2])", "syntax error: expected an expression, found '['"),
        ("f(a=[1, 2)", "syntax error: expected ',' or ']' in the list argument, found ')'"),
        ("x = 1L", "cannot parse the int value '1L' (the L suffix is not supported)"),
        ("x = \"abc", "unterminated string literal"),
        ("x = 'a\\qb'", "invalid escape sequence '\\q' in string (valid: \\b \\t \\n \\f \\r \\\" \\' \\\\)"),
        ("/* never closed", "unterminated block comment: '/*' without a closing '*/'"),
        ("x = 99999999999999999999", "integer literal 99999999999999999999 does not fit in 64 bits"),
        ("[a, b] = 3", "syntax error: expected a function call, found '3'"),
        ("$x = 3", "cannot assign to the script argument '$x'"),
        ("NaN = 3", "cannot assign to the built-in constant NaN: choose another name"),
        ("Inf <- 3", "cannot assign to the built-in constant Inf: choose another name"),
    ];
    for (text, message) in cases {
        let err = first_error(text);
        assert_eq!(err.to_string(), *message, "for {text:?}");
        assert_eq!(err.fault(), Fault::User, "for {text:?}");
    }
}

/// SystemDS's lexer skips a character no token starts with (a "token recognition error" on
/// stderr) and parses on; SystemDS's own `sliceLineExtract.dml` relies on it.
#[test]
fn characters_no_token_starts_with_are_skipped_as_systemds_does() {
    let script = parse(&SourceFile::new("s.dml", "x = 3 @\ny = x * 2 .\nz = $ y\n")).unwrap();
    assert_eq!(script.statements.len(), 3);
    let skipped: Vec<String> = script.skipped.iter().map(|e| e.to_string()).collect();
    assert_eq!(
        skipped,
        [
            "unexpected character '@'",
            "unexpected character '.'",
            "expected a script argument name after '$' (e.g. $X or $1)"
        ]
    );
    assert_eq!(
        script.skipped[1].span.map(|s| (s.start, s.end)),
        Some((18, 19))
    );
    assert!(errors("x = 3 @ 4")[0]
        .to_string()
        .starts_with("syntax error"));
}

#[test]
fn rendered_errors_point_at_line_column_and_token() {
    let source = SourceFile::new("script.dml", "x = 1\ny = (x +\n  * 2)\n");
    let err = first_error(&source.text);
    let rendered = err.render(&source);
    assert!(
        rendered.starts_with("error: syntax error: expected an expression, found '*'"),
        "{rendered}"
    );
    assert!(rendered.contains("script.dml:3:3"), "{rendered}");
    assert!(rendered.contains("3 │   * 2)"), "{rendered}");
    let caret_line = rendered
        .lines()
        .find(|l| l.contains('^'))
        .expect("a caret line");
    // The caret sits under the `*`, column 3 of the quoted line.
    let bar = caret_line.find('│').expect("gutter");
    let quoted = rendered.lines().find(|l| l.contains("* 2)")).unwrap();
    let star = quoted.find('*').unwrap();
    assert_eq!(
        caret_line.find('^').unwrap() - bar,
        star - quoted.find('│').unwrap(),
        "{rendered}"
    );
}

#[test]
fn several_independent_errors_are_reported() {
    let errs = errors("x = (1 +\ny = 2\nz = * 3\nw = 4\nif (w) {\n  v = )\n}\nu = 5 +");
    let messages: Vec<String> = errs.iter().map(|e| e.to_string()).collect();
    assert_eq!(
        messages,
        vec![
            // `(1 +` continues onto the next line: `(1 + y` then `=`.
            "syntax error: expected ')', found '='",
            "syntax error: expected an expression, found '*'",
            "syntax error: expected an expression, found ')'",
            "syntax error: expected an expression, found end of file",
        ]
    );
}
