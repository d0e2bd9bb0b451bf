//! DML's `eval(fname, args...)`: a call of the function named by a string at run time, as
//! blocks that every later pass already knows.
//!
//! SystemDS resolves the name when the call runs (`EvalNaryCPInstruction`): a name `ns::f` in
//! namespace `ns`, else a function of the main script, else a DML-bodied built-in (its public
//! `m_f`/`s_f`, or a function private to any built-in's file, all of which share SystemDS's
//! built-in namespace). Its one result is a matrix: a function with several results gives its
//! first, a scalar result becomes a 1x1 matrix.
//!
//! lafuse binds and checks every call before the script runs, so [`candidates`] lists, in that
//! order of precedence, the functions of the loaded program a name can reach that can take the
//! call's arguments (by count, or count and names for a list written in the call; a list held
//! in a variable is spread over the parameters when the call runs, and a mismatch of kinds
//! fails then too), and
//! the program builder turns the call into `if (name == "f1") r = f1(args) else if ...`, its
//! last branch stopping with SystemDS's message for a name no function answers. A name that is
//! a literal is resolved while the program is built; the module loader loads the built-in it
//! names (`eval("lm", X, y)`). A name computed at run time reaches the functions the program
//! loads for other reasons: a built-in that nothing else calls is not among them.

use crate::ast::{self, Arg, ValueType};
use crate::builtins;
use crate::span::Span;
use std::collections::BTreeMap;

/// The name of the built-in.
pub const EVAL: &str = "eval";

/// `evalList(fname, args)`: the same call, all of its results returned as a list named by the
/// function's result names (SystemDS's `EvalNaryCPInstruction` with a list output).
pub const EVAL_LIST: &str = "evalList";

/// Whether `name` is `eval` or `evalList`.
pub fn is_eval(name: &str) -> bool {
    name == EVAL || name == EVAL_LIST
}

/// One function an `eval` may call: the name SystemDS's `eval` knows it by, its name in the
/// loaded program, and whether the call's one argument is spread over its parameters when it
/// is a list ([`crate::program::CallBlock::spread`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Candidate {
    pub written: String,
    pub function: String,
    pub spread: bool,
}

/// How an `eval`'s arguments (after the name) are written.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ArgsForm {
    /// Several arguments, or one that is no list: bound one to one, as many as the parameters.
    Positional,
    /// One list written in the call (`list(X, y)`, `list(X=X)`), already spread into the
    /// arguments: positional or named, parameters left out taking their defaults.
    ListLiteral,
    /// One argument whose kind shows only when it runs: a list is spread over the parameters
    /// (unless the function takes one list), anything else is the one argument.
    Value,
}

/// How a candidate's results become `eval`'s matrix.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ResultUse {
    /// The first result is a matrix, bound as is (other results dropped).
    Matrix,
    /// The first result is a scalar, wrapped by `as.matrix`.
    Scalar,
    /// No result: only a call made for its effect.
    Nothing,
}

/// How `eval`'s result comes from `def`'s, or `None` where SystemDS's `eval` rejects it (a list
/// result).
pub fn result_use(def: &ast::FunctionDef) -> Option<ResultUse> {
    match def.results.first().map(|r| r.ty) {
        None => Some(ResultUse::Nothing),
        Some(ValueType::Matrix) => Some(ResultUse::Matrix),
        Some(ValueType::List) => None,
        Some(_) => Some(ResultUse::Scalar),
    }
}

/// The name SystemDS's `eval` reaches the function `qualified` of the loaded program by, and
/// whether it is a built-in's private function (found after all others), given all functions. The loader names a main-script function or a
/// built-in's entry plainly (`f`, `lm`), a sourced file's function `ns::f`, and a built-in's
/// other functions `builtin::f`.
fn written_name(qualified: &str, functions: &BTreeMap<String, ast::FunctionDef>) -> (String, bool) {
    let Some((prefix, f)) = qualified.rsplit_once("::") else {
        return (qualified.to_string(), false);
    };
    // A built-in's file: its entry is the plain `prefix`, or `prefix::m_prefix` where lafuse has
    // a function of that name itself.
    let builtin = functions.contains_key(prefix)
        || ["m_", "s_"]
            .iter()
            .any(|p| functions.contains_key(&format!("{prefix}::{p}{prefix}")));
    if builtin {
        // Private functions of built-ins share SystemDS's built-in namespace; an entry kept
        // under its file's name (`sigmoid::m_sigmoid`) answers to the built-in's name.
        let entry = f == format!("m_{prefix}") || f == format!("s_{prefix}");
        if entry {
            (prefix.to_string(), false)
        } else {
            (f.to_string(), true)
        }
    } else {
        (qualified.to_string(), false)
    }
}

/// Which results of the called function an `eval` returns.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Returned {
    /// `eval`: the first (a matrix or scalar), which the call `needs` where it is assigned.
    First { needed: bool },
    /// `evalList`: all of them, whatever their types, as a list.
    All,
}

/// The functions an `eval` with arguments `args` (the name excluded) can call, best first for
/// each name: main-script functions and built-in entries before built-ins' private functions.
pub fn candidates(
    functions: &BTreeMap<String, ast::FunctionDef>,
    args: &[Arg],
    call_span: Span,
    returned: Returned,
    form: ArgsForm,
) -> Vec<Candidate> {
    let mut out: Vec<(bool, Candidate)> = vec![];
    for (qualified, def) in functions {
        let one_list = matches!(def.params.as_slice(), [p] if p.ty == ValueType::List);
        let fits = match form {
            ArgsForm::ListLiteral => builtins::bind_udf_args(def, args, call_span).is_ok(),
            ArgsForm::Positional => {
                def.params.len() == args.len() && args.iter().all(|a| a.name.is_none())
            }
            ArgsForm::Value => true,
        };
        if !fits {
            continue;
        }
        match (returned, result_use(def)) {
            (Returned::All, _) => {}
            (_, None) => continue,
            (Returned::First { needed: true }, Some(ResultUse::Nothing)) => continue,
            _ => {}
        }
        let (written, private) = written_name(qualified, functions);
        out.push((
            private,
            Candidate {
                written,
                function: qualified.clone(),
                spread: form == ArgsForm::Value && !one_list,
            },
        ));
    }
    // Stable: within each rank, the functions' sorted order.
    out.sort_by_key(|(private, _)| *private);
    let mut seen = std::collections::BTreeSet::new();
    out.into_iter()
        .map(|(_, c)| c)
        .filter(|c| seen.insert(c.written.clone()))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ast::{Expr, ExprKind, FunctionDef, Param};

    fn def(name: &str, params: usize, result: Option<ValueType>) -> FunctionDef {
        let p = |i: usize| Param {
            name: format!("p{i}"),
            ty: ValueType::Matrix,
            default: None,
            span: Span::new(0, 1),
        };
        FunctionDef {
            name: name.into(),
            params: (0..params).map(p).collect(),
            results: result
                .map(|ty| Param {
                    name: "r".into(),
                    ty,
                    default: None,
                    span: Span::new(0, 1),
                })
                .into_iter()
                .collect(),
            body: vec![],
            span: Span::new(0, 1),
        }
    }

    fn args(n: usize) -> Vec<Arg> {
        (0..n)
            .map(|_| Arg {
                name: None,
                value: Expr {
                    kind: ExprKind::Int(1),
                    span: Span::new(0, 1),
                },
                span: Span::new(0, 1),
            })
            .collect()
    }

    #[test]
    fn names_follow_systemds_namespaces_and_fit_the_arguments() {
        let mut fs = BTreeMap::new();
        for d in [
            def("main_f", 2, Some(ValueType::Matrix)),
            def("arima", 2, Some(ValueType::Matrix)),
            def("arima::cg_solver", 2, Some(ValueType::Double)),
            def("arima::three", 3, Some(ValueType::Matrix)),
            def("nn::relu", 2, Some(ValueType::Matrix)),
            def("lister", 2, Some(ValueType::List)),
            def("sigmoid::m_sigmoid", 2, Some(ValueType::Matrix)),
        ] {
            fs.insert(d.name.clone(), d);
        }
        let got: Vec<(String, String)> = candidates(
            &fs,
            &args(2),
            Span::new(0, 1),
            Returned::First { needed: true },
            ArgsForm::Positional,
        )
        .into_iter()
        .map(|c| (c.written, c.function))
        .collect();
        let want = [
            ("arima", "arima"),
            ("main_f", "main_f"),
            ("nn::relu", "nn::relu"),
            ("sigmoid", "sigmoid::m_sigmoid"),
            ("cg_solver", "arima::cg_solver"),
        ];
        let want: Vec<(String, String)> = want
            .iter()
            .map(|(a, b)| (a.to_string(), b.to_string()))
            .collect();
        assert_eq!(got, want);
    }

    #[test]
    fn a_main_function_answers_before_a_builtins_private_one() {
        let mut fs = BTreeMap::new();
        for d in [
            def("solve", 1, Some(ValueType::Matrix)),
            def("arima", 1, Some(ValueType::Matrix)),
            def("arima::solve", 1, Some(ValueType::Matrix)),
        ] {
            fs.insert(d.name.clone(), d);
        }
        let c = candidates(
            &fs,
            &args(1),
            Span::new(0, 1),
            Returned::First { needed: false },
            ArgsForm::ListLiteral,
        );
        let solve: Vec<&Candidate> = c.iter().filter(|c| c.written == "solve").collect();
        assert_eq!(solve.len(), 1);
        assert_eq!(solve[0].function, "solve");
    }

    #[test]
    fn one_value_argument_reaches_every_function_spread_unless_it_takes_one_list() {
        let mut fs = BTreeMap::new();
        let mut lister = def("takes_list", 1, Some(ValueType::Matrix));
        lister.params[0].ty = ValueType::List;
        for d in [
            def("one", 1, Some(ValueType::Matrix)),
            def("three", 3, None),
            lister,
        ] {
            fs.insert(d.name.clone(), d);
        }
        let got: Vec<(String, bool)> = candidates(
            &fs,
            &args(1),
            Span::new(0, 1),
            Returned::First { needed: false },
            ArgsForm::Value,
        )
        .into_iter()
        .map(|c| (c.written, c.spread))
        .collect();
        let want = [("one", true), ("takes_list", false), ("three", true)];
        let want: Vec<(String, bool)> = want.iter().map(|(n, s)| (n.to_string(), *s)).collect();
        assert_eq!(got, want);
        // Positional arguments reach the functions of as many parameters only.
        let positional = candidates(
            &fs,
            &args(1),
            Span::new(0, 1),
            Returned::First { needed: false },
            ArgsForm::Positional,
        );
        assert_eq!(positional.len(), 2);
        assert!(positional.iter().all(|c| !c.spread && c.written != "three"));
    }

    #[test]
    fn eval_list_reaches_functions_of_any_results_eval_does_not() {
        let mut fs = BTreeMap::new();
        for d in [
            def("lister", 1, Some(ValueType::List)),
            def("nothing", 1, None),
            def("one", 1, Some(ValueType::Matrix)),
        ] {
            fs.insert(d.name.clone(), d);
        }
        let names = |r| -> Vec<String> {
            candidates(&fs, &args(1), Span::new(0, 1), r, ArgsForm::Positional)
                .into_iter()
                .map(|c| c.written)
                .collect()
        };
        assert_eq!(names(Returned::All), ["lister", "nothing", "one"]);
        assert_eq!(names(Returned::First { needed: true }), ["one"]);
        assert_eq!(names(Returned::First { needed: false }), ["nothing", "one"]);
    }
}
