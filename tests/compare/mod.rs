//! How a script's output is compared with SystemDS's: line by line, numbers within 1e-9
//! relative and of the same kind (integer or double), other tokens exactly.

/// How a printed token reads: an integer, a double in SystemDS's format, or neither.
#[derive(PartialEq)]
enum TokenKind {
    Int,
    Double,
    Other,
}

fn kind(token: &str) -> TokenKind {
    let unsigned = token.strip_prefix(['+', '-']).unwrap_or(token);
    let digits = |s: &str| !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit());
    if digits(unsigned) {
        return TokenKind::Int;
    }
    let (mantissa, exponent) = match unsigned.split_once(['e', 'E']) {
        Some((m, e)) => (m, Some(e.strip_prefix(['+', '-']).unwrap_or(e))),
        None => (unsigned, None),
    };
    let mantissa_ok = match mantissa.split_once('.') {
        Some((int, frac)) => digits(int) && (frac.is_empty() || digits(frac)),
        None => digits(mantissa) && exponent.is_some(),
    };
    if matches!(unsigned, "NaN" | "Infinity") || (mantissa_ok && exponent.is_none_or(digits)) {
        TokenKind::Double
    } else {
        TokenKind::Other
    }
}

/// Numbers match within 1e-9 relative (1e-12 absolute) and must be of the same kind (an
/// integer printed where a double is expected is a typing bug); other tokens match exactly.
fn tokens_match(expected: &str, actual: &str) -> bool {
    let (ke, ka) = (kind(expected), kind(actual));
    if ke == TokenKind::Other || ka == TokenKind::Other {
        return expected == actual;
    }
    if ke != ka {
        return false;
    }
    let number = |t: &str| {
        t.replace("Infinity", "inf")
            .parse::<f64>()
            .unwrap_or(f64::NAN)
    };
    let (e, a) = (number(expected), number(actual));
    if e.is_nan() || a.is_nan() {
        return e.is_nan() && a.is_nan();
    }
    if e.is_infinite() || a.is_infinite() {
        return e == a;
    }
    (e - a).abs() <= 1e-12_f64.max(1e-9 * e.abs().max(a.abs()))
}

/// `token` cut into numbers and the text between them (`obj=1.5,` is `obj=`, `1.5`, `,`): a
/// number is a maximal run of digits, signs, `.` and exponent letters holding a digit.
fn pieces(token: &str) -> Vec<String> {
    let numeric = |c: char| c.is_ascii_digit() || matches!(c, '.' | 'e' | 'E' | '+' | '-');
    let mut out = vec![];
    let mut start = 0;
    let mut in_number = false;
    for (i, c) in token.char_indices() {
        if numeric(c) != in_number {
            if i > start {
                out.push(&token[start..i]);
            }
            start = i;
            in_number = numeric(c);
        }
    }
    out.push(&token[start..]);
    // A run without digits ("e", "-") is text: join it to its neighbours' text again.
    let mut joined: Vec<String> = vec![];
    let mut last_text = false;
    for p in out {
        let text = !p.chars().any(|c| c.is_ascii_digit());
        if text && last_text {
            joined.last_mut().unwrap().push_str(p);
        } else {
            joined.push(p.to_string());
        }
        last_text = text;
    }
    joined
}

/// Whether two tokens match piece by piece: numbers inside text (`obj=183.78`) within the
/// tolerance, the text between them exactly.
fn tokens_match_embedded(expected: &str, actual: &str) -> bool {
    if tokens_match(expected, actual) {
        return true;
    }
    let (pe, pa) = (pieces(expected), pieces(actual));
    pe.len() == pa.len() && pe.iter().zip(&pa).all(|(e, a)| tokens_match(e, a))
}

/// Line-by-line comparison after dropping trailing blank lines (as `tests/corpus/compare.py`).
#[allow(dead_code)] // Each test crate uses one of the two comparisons.
pub fn outputs_match(expected: &str, actual: &str) -> Result<(), String> {
    outputs_match_by(expected, actual, tokens_match)
}

/// [`outputs_match`], with numbers inside other text (`obj=183.78`, `Norm = 1.8,`) compared
/// within the tolerance too: for algorithms that print their progress.
#[allow(dead_code)] // Each test crate uses one of the two comparisons.
pub fn outputs_match_embedded(expected: &str, actual: &str) -> Result<(), String> {
    outputs_match_by(expected, actual, tokens_match_embedded)
}

fn outputs_match_by(
    expected: &str,
    actual: &str,
    tokens_match: fn(&str, &str) -> bool,
) -> Result<(), String> {
    let trimmed = |s: &str| -> Vec<String> {
        let mut lines: Vec<String> = s.split('\n').map(str::to_string).collect();
        while lines.last().is_some_and(|l| l.trim().is_empty()) {
            lines.pop();
        }
        lines
    };
    let (exp, act) = (trimmed(expected), trimmed(actual));
    for i in 0..exp.len().max(act.len()) {
        match (exp.get(i), act.get(i)) {
            (Some(e), Some(a)) => {
                let et: Vec<&str> = e.split_whitespace().collect();
                let at: Vec<&str> = a.split_whitespace().collect();
                if et.len() != at.len() || !et.iter().zip(&at).all(|(x, y)| tokens_match(x, y)) {
                    return Err(format!("line {}: expected `{e}`, got `{a}`", i + 1));
                }
            }
            (Some(e), None) => return Err(format!("line {}: missing, expected `{e}`", i + 1)),
            (None, Some(a)) => return Err(format!("line {}: extra output `{a}`", i + 1)),
            (None, None) => unreachable!("index below the longer length"),
        }
    }
    Ok(())
}
