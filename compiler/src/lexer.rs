//! The DML lexer: source text to tokens, following the lexer rules of SystemDS's `Dml.g4`.
//!
//! DML is free-form: newlines are whitespace and statements need no separator (`x = 1 y = 2`
//! is two statements). Tokens still record whether a line break preceded them, which the
//! parser uses only to resynchronise after a syntax error.
//!
//! Number literals: digits alone are an integer (`7`); a decimal point or an exponent makes a
//! double (`7.0`, `7.`, `.5`, `1e3`, `1E-3`). SystemDS cannot parse the grammar's `L` suffix
//! (`1L`), so it is an error here too. The words the grammar spells out (`if`, `in`, `as`,
//! `TRUE`, `double`, ...) are reserved and cannot name variables. So are SystemDS's built-in
//! constants `NaN` and `Inf`, which lex as double literals (`-Inf` is the negation of `Inf`).

use crate::error::{CompileError, LexError};
use crate::span::Span;

/// Reserved words of DML.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Keyword {
    If,
    Else,
    For,
    Parfor,
    While,
    In,
    Function,
    Return,
    ExternalFunction,
    Implemented,
    Source,
    Setwd,
    As,
    Ifdef,
    True,
    False,
    /// `int`, `Int`, `integer`, `Integer`.
    IntType,
    /// `double`, `Double`.
    DoubleType,
    /// `boolean`, `Boolean`.
    BooleanType,
    /// `string`, `String`.
    StringType,
    /// `unknown`, `Unknown`.
    UnknownType,
}

impl Keyword {
    fn from_word(word: &str) -> Option<Keyword> {
        Some(match word {
            "if" => Keyword::If,
            "else" => Keyword::Else,
            "for" => Keyword::For,
            "parfor" => Keyword::Parfor,
            "while" => Keyword::While,
            "in" => Keyword::In,
            "function" => Keyword::Function,
            "return" => Keyword::Return,
            "externalFunction" => Keyword::ExternalFunction,
            "implemented" => Keyword::Implemented,
            "source" => Keyword::Source,
            "setwd" => Keyword::Setwd,
            "as" => Keyword::As,
            "ifdef" => Keyword::Ifdef,
            "TRUE" => Keyword::True,
            "FALSE" => Keyword::False,
            "int" | "Int" | "integer" | "Integer" => Keyword::IntType,
            "double" | "Double" => Keyword::DoubleType,
            "boolean" | "Boolean" => Keyword::BooleanType,
            "string" | "String" => Keyword::StringType,
            "unknown" | "Unknown" => Keyword::UnknownType,
            _ => return None,
        })
    }
}

/// Punctuation and operators.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Punct {
    LParen,
    RParen,
    LBracket,
    RBracket,
    LBrace,
    RBrace,
    Comma,
    Semi,
    Colon,
    /// `=`
    Assign,
    /// `<-`
    Arrow,
    /// `+=`
    PlusAssign,
    Plus,
    Minus,
    Star,
    Slash,
    Caret,
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
    EqEq,
    Ne,
    Bang,
    Amp,
    AmpAmp,
    Pipe,
    PipePipe,
}

impl Punct {
    /// The punctuation as written.
    pub fn text(self) -> &'static str {
        match self {
            Punct::LParen => "(",
            Punct::RParen => ")",
            Punct::LBracket => "[",
            Punct::RBracket => "]",
            Punct::LBrace => "{",
            Punct::RBrace => "}",
            Punct::Comma => ",",
            Punct::Semi => ";",
            Punct::Colon => ":",
            Punct::Assign => "=",
            Punct::Arrow => "<-",
            Punct::PlusAssign => "+=",
            Punct::Plus => "+",
            Punct::Minus => "-",
            Punct::Star => "*",
            Punct::Slash => "/",
            Punct::Caret => "^",
            Punct::Mod => "%%",
            Punct::IntDiv => "%/%",
            Punct::MatMul => "%*%",
            Punct::Lt => "<",
            Punct::Le => "<=",
            Punct::Gt => ">",
            Punct::Ge => ">=",
            Punct::EqEq => "==",
            Punct::Ne => "!=",
            Punct::Bang => "!",
            Punct::Amp => "&",
            Punct::AmpAmp => "&&",
            Punct::Pipe => "|",
            Punct::PipePipe => "||",
        }
    }
}

/// What a token is.
#[derive(Clone, Debug, PartialEq)]
pub enum TokenKind {
    /// An identifier; `ns::name` keeps its namespace in the text.
    Ident(String),
    Keyword(Keyword),
    Int(i64),
    Double(f64),
    /// A string literal with escapes resolved.
    Str(String),
    /// `$name` or `$1` (the text after `$`).
    ScriptArg(String),
    Punct(Punct),
    Eof,
}

/// One token with its location.
#[derive(Clone, Debug, PartialEq)]
pub struct Token {
    pub kind: TokenKind,
    pub span: Span,
    /// A line break (or the start of the file) lies between the previous token and this one.
    pub newline_before: bool,
}

/// Identifiers that contain a dot; the grammar lists them explicitly.
const DOTTED_IDENTS: &[&str] = &[
    "as.scalar",
    "as.matrix",
    "as.frame",
    "as.list",
    "as.double",
    "as.integer",
    "as.logical",
    "as.boolean",
    "index.return",
    "empty.return",
    "lower.tail",
    "lower.tri",
    "upper.tri",
    "is.na",
    "is.nan",
    "is.infinite",
];

/// Splits `text` into tokens, ending with one [`TokenKind::Eof`]. Lexical errors (an
/// unterminated string or comment, a bad escape or number) are collected; the lexer skips
/// the offending text and goes on, so one run reports them all.
pub fn tokenize(text: &str) -> Lexed {
    let mut lx = Lexer {
        src: text,
        bytes: text.as_bytes(),
        pos: 0,
        tokens: vec![],
        errors: vec![],
        skipped: vec![],
    };
    lx.run();
    Lexed {
        tokens: lx.tokens,
        errors: lx.errors,
        skipped: lx.skipped,
    }
}

/// What [`tokenize`] found.
pub struct Lexed {
    pub tokens: Vec<Token>,
    pub errors: Vec<CompileError>,
    /// Characters no token starts with (`.` not before a digit, `$` not before a name, `@`,
    /// `é`), each skipped with a warning ([`LexError::UnexpectedChar`],
    /// [`LexError::ScriptArgName`]) as SystemDS's ANTLR lexer skips them with a "token
    /// recognition error" and parses on: SystemDS's own `sliceLineExtract.dml` ends a
    /// statement with a stray `.`. (ANTLR also drops the character after a `.` or `$` that
    /// starts no token; lafuse keeps it, so a line break there still ends the statement.)
    pub skipped: Vec<CompileError>,
}

struct Lexer<'s> {
    src: &'s str,
    bytes: &'s [u8],
    pos: usize,
    tokens: Vec<Token>,
    errors: Vec<CompileError>,
    skipped: Vec<CompileError>,
}

fn is_ident_continue(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b == b'_'
}

impl Lexer<'_> {
    fn peek(&self, ahead: usize) -> u8 {
        self.bytes.get(self.pos + ahead).copied().unwrap_or(0)
    }

    fn run(&mut self) {
        let mut newline = true;
        loop {
            newline |= self.skip_trivia();
            let start = self.pos;
            if start >= self.bytes.len() {
                self.tokens.push(Token {
                    kind: TokenKind::Eof,
                    span: Span::new(start, start),
                    newline_before: true,
                });
                return;
            }
            if let Some(kind) = self.token() {
                self.tokens.push(Token {
                    kind,
                    span: Span::new(start, self.pos),
                    newline_before: newline,
                });
                newline = false;
            }
            debug_assert!(self.pos > start, "lexer made no progress");
        }
    }

    /// Skips whitespace and comments; returns whether a line break was among them.
    fn skip_trivia(&mut self) -> bool {
        let mut newline = false;
        loop {
            match self.peek(0) {
                b'\n' => {
                    newline = true;
                    self.pos += 1;
                }
                b' ' | b'\t' | b'\r' | b'\x0c' => self.pos += 1,
                b'#' => {
                    while self.pos < self.bytes.len() && self.bytes[self.pos] != b'\n' {
                        self.pos += 1;
                    }
                }
                b'/' if self.peek(1) == b'*' => {
                    let start = self.pos;
                    match self.src[start + 2..].find("*/") {
                        Some(rel) => {
                            newline |= self.src[start..start + 2 + rel].contains('\n');
                            self.pos = start + 2 + rel + 2;
                        }
                        None => {
                            self.errors.push(CompileError::at(
                                LexError::UnterminatedComment,
                                Span::new(start, start + 2),
                            ));
                            self.pos = self.bytes.len();
                        }
                    }
                }
                _ => return newline,
            }
        }
    }

    /// Lexes one token at `self.pos` (which is not at the end). Always advances; returns
    /// `None` (after recording an error) for text that is no token.
    fn token(&mut self) -> Option<TokenKind> {
        let start = self.pos;
        let b = self.bytes[start];
        if b.is_ascii_alphabetic() {
            return Some(self.word());
        }
        if b.is_ascii_digit() || (b == b'.' && self.peek(1).is_ascii_digit()) {
            return self.number();
        }
        if b == b'"' || b == b'\'' {
            return self.string(b);
        }
        if b == b'$' {
            let mut end = start + 1;
            let digits = self.peek(1).is_ascii_digit();
            if self.peek(1).is_ascii_alphabetic() || digits {
                end += 1;
                while end < self.bytes.len()
                    && (if digits {
                        self.bytes[end].is_ascii_digit()
                    } else {
                        is_ident_continue(self.bytes[end])
                    })
                {
                    end += 1;
                }
                self.pos = end;
                return Some(TokenKind::ScriptArg(self.src[start + 1..end].to_string()));
            }
            self.pos += 1;
            self.skipped.push(CompileError::at(
                LexError::ScriptArgName,
                Span::new(start, start + 1),
            ));
            return None;
        }
        let three = &self.bytes[start..(start + 3).min(self.bytes.len())];
        let (punct, len) = match (b, self.peek(1)) {
            (b'%', _) if three == b"%/%" => (Punct::IntDiv, 3),
            (b'%', _) if three == b"%*%" => (Punct::MatMul, 3),
            (b'%', b'%') => (Punct::Mod, 2),
            (b'<', b'-') => (Punct::Arrow, 2),
            (b'<', b'=') => (Punct::Le, 2),
            (b'>', b'=') => (Punct::Ge, 2),
            (b'=', b'=') => (Punct::EqEq, 2),
            (b'!', b'=') => (Punct::Ne, 2),
            (b'&', b'&') => (Punct::AmpAmp, 2),
            (b'|', b'|') => (Punct::PipePipe, 2),
            (b'+', b'=') => (Punct::PlusAssign, 2),
            (b'(', _) => (Punct::LParen, 1),
            (b')', _) => (Punct::RParen, 1),
            (b'[', _) => (Punct::LBracket, 1),
            (b']', _) => (Punct::RBracket, 1),
            (b'{', _) => (Punct::LBrace, 1),
            (b'}', _) => (Punct::RBrace, 1),
            (b',', _) => (Punct::Comma, 1),
            (b';', _) => (Punct::Semi, 1),
            (b':', _) => (Punct::Colon, 1),
            (b'=', _) => (Punct::Assign, 1),
            (b'+', _) => (Punct::Plus, 1),
            (b'-', _) => (Punct::Minus, 1),
            (b'*', _) => (Punct::Star, 1),
            (b'/', _) => (Punct::Slash, 1),
            (b'^', _) => (Punct::Caret, 1),
            (b'<', _) => (Punct::Lt, 1),
            (b'>', _) => (Punct::Gt, 1),
            (b'!', _) => (Punct::Bang, 1),
            (b'&', _) => (Punct::Amp, 1),
            (b'|', _) => (Punct::Pipe, 1),
            _ => {
                let ch = self.src[start..].chars().next().unwrap_or('\u{fffd}');
                self.pos += ch.len_utf8().max(1);
                self.skipped.push(CompileError::at(
                    LexError::UnexpectedChar { ch },
                    Span::new(start, self.pos),
                ));
                return None;
            }
        };
        self.pos += len;
        Some(TokenKind::Punct(punct))
    }

    fn word(&mut self) -> TokenKind {
        let start = self.pos;
        for dotted in DOTTED_IDENTS {
            // A whole word only: `is.na` must not take the start of `is.nan`.
            let ends_word = !is_ident_continue(self.peek(dotted.len()));
            if self.src[start..].starts_with(dotted) && ends_word {
                self.pos += dotted.len();
                return TokenKind::Ident(dotted.to_string());
            }
        }
        let mut end = start;
        while end < self.bytes.len() && is_ident_continue(self.bytes[end]) {
            end += 1;
        }
        // `ns::name`: a function or variable of a sourced namespace.
        if self.bytes.get(end) == Some(&b':')
            && self.bytes.get(end + 1) == Some(&b':')
            && self
                .bytes
                .get(end + 2)
                .is_some_and(|b| b.is_ascii_alphabetic())
        {
            end += 3;
            while end < self.bytes.len() && is_ident_continue(self.bytes[end]) {
                end += 1;
            }
        }
        self.pos = end;
        let word = &self.src[start..end];
        match (word, Keyword::from_word(word)) {
            ("NaN", _) => TokenKind::Double(f64::NAN),
            ("Inf", _) => TokenKind::Double(f64::INFINITY),
            (_, Some(kw)) => TokenKind::Keyword(kw),
            (_, None) => TokenKind::Ident(word.to_string()),
        }
    }

    fn digits(&mut self) -> usize {
        let start = self.pos;
        while self.peek(0).is_ascii_digit() {
            self.pos += 1;
        }
        self.pos - start
    }

    fn number(&mut self) -> Option<TokenKind> {
        let start = self.pos;
        let int_digits = self.digits();
        let mut is_double = false;
        let mut frac_start = None;
        if self.peek(0) == b'.' {
            is_double = true;
            self.pos += 1;
            frac_start = Some(self.pos);
            self.digits();
        }
        let frac_end = self.pos;
        let mut exponent = None;
        if matches!(self.peek(0), b'e' | b'E') {
            let sign = usize::from(matches!(self.peek(1), b'+' | b'-'));
            if self.peek(1 + sign).is_ascii_digit() {
                is_double = true;
                self.pos += 1 + sign;
                let exp_start = self.pos - sign;
                self.digits();
                exponent = Some(exp_start..self.pos);
            }
        }
        if matches!(self.peek(0), b'l' | b'L') {
            self.pos += 1;
            self.errors.push(CompileError::at(
                LexError::LongSuffix {
                    float: is_double,
                    text: self.src[start..self.pos].to_string(),
                },
                Span::new(start, self.pos),
            ));
            return None;
        }
        let span = Span::new(start, self.pos);
        if !is_double {
            return match self.src[start..self.pos].parse::<i64>() {
                Ok(v) => Some(TokenKind::Int(v)),
                Err(_) => {
                    self.errors.push(CompileError::at(
                        LexError::IntegerOverflow {
                            text: self.src[start..self.pos].to_string(),
                        },
                        span,
                    ));
                    None
                }
            };
        }
        // Normalise to `int.frac[e±exp]` so forms like `5.` and `.5` parse the same everywhere.
        let int_part = if int_digits == 0 {
            "0"
        } else {
            &self.src[start..start + int_digits]
        };
        let frac = match frac_start {
            Some(f) if frac_end > f => &self.src[f..frac_end],
            _ => "0",
        };
        let mut text = format!("{int_part}.{frac}");
        if let Some(range) = exponent {
            text.push('e');
            text.push_str(&self.src[range]);
        }
        match text.parse::<f64>() {
            Ok(v) => Some(TokenKind::Double(v)),
            Err(_) => {
                self.errors.push(CompileError::at(
                    LexError::BadNumber {
                        text: self.src[start..self.pos].to_string(),
                    },
                    span,
                ));
                None
            }
        }
    }

    /// A string literal. The lexer accepts exactly the escapes of `Dml.g4` (a backslash
    /// followed by one of `b t n f r " ' \\`); the value is then built the way SystemDS builds
    /// it, by replacing, in this order, `\\b \\t \\n \\f \\r \\' \\"` in the raw text. So `\\\\`
    /// stays two backslashes, and `\\\\n` becomes a backslash and a line break, as in SystemDS.
    fn string(&mut self, quote: u8) -> Option<TokenKind> {
        let start = self.pos;
        self.pos += 1;
        let mut ok = true;
        loop {
            let Some(ch) = self.src[self.pos..].chars().next() else {
                self.errors.push(CompileError::at(
                    LexError::UnterminatedString,
                    Span::new(start, start + 1),
                ));
                return None;
            };
            if ch as u32 == quote as u32 {
                self.pos += 1;
                break;
            }
            self.pos += ch.len_utf8();
            if ch == '\\' {
                let Some(next) = self.src[self.pos..].chars().next() else {
                    continue;
                };
                self.pos += next.len_utf8();
                if !matches!(next, 'b' | 't' | 'n' | 'f' | 'r' | '"' | '\'' | '\\') {
                    self.errors.push(CompileError::at(
                        LexError::InvalidEscape { escape: next },
                        Span::new(self.pos - next.len_utf8() - 1, self.pos),
                    ));
                    ok = false;
                }
            }
        }
        if !ok {
            return None;
        }
        let raw = &self.src[start + 1..self.pos - 1];
        let value = raw
            .replace("\\b", "\u{8}")
            .replace("\\t", "\t")
            .replace("\\n", "\n")
            .replace("\\f", "\u{c}")
            .replace("\\r", "\r")
            .replace("\\'", "'")
            .replace("\\\"", "\"");
        Some(TokenKind::Str(value))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn kinds(text: &str) -> Vec<TokenKind> {
        let lexed = tokenize(text);
        assert!(lexed.errors.is_empty(), "{:?}", lexed.errors);
        lexed.tokens.into_iter().map(|t| t.kind).collect()
    }

    #[test]
    fn numbers_follow_dml_typing() {
        assert_eq!(
            kinds("7 7.0 7. .5 1e3 1E-3 2e+2"),
            vec![
                TokenKind::Int(7),
                TokenKind::Double(7.0),
                TokenKind::Double(7.0),
                TokenKind::Double(0.5),
                TokenKind::Double(1000.0),
                TokenKind::Double(0.001),
                TokenKind::Double(200.0),
                TokenKind::Eof
            ]
        );
        // `1e` with no exponent digits is the integer 1 followed by the identifier `e`.
        assert_eq!(
            kinds("1e")[..2],
            [TokenKind::Int(1), TokenKind::Ident("e".into())]
        );
        // The built-in constants are double literals, not names.
        let special = kinds("NaN Inf Infinity");
        assert!(matches!(special[0], TokenKind::Double(v) if v.is_nan()));
        assert_eq!(special[1], TokenKind::Double(f64::INFINITY));
        assert_eq!(special[2], TokenKind::Ident("Infinity".into()));
        let errors = tokenize("1L 99999999999999999999").errors;
        assert_eq!(errors.len(), 2);
    }

    #[test]
    fn operators_take_the_longest_match() {
        use Punct::*;
        let expected: Vec<TokenKind> = [
            MatMul, IntDiv, Mod, Arrow, Le, Lt, Minus, AmpAmp, Amp, PipePipe, Ne, Bang, EqEq,
            Assign, PlusAssign,
        ]
        .into_iter()
        .map(TokenKind::Punct)
        .chain([TokenKind::Eof])
        .collect();
        assert_eq!(kinds("%*% %/% %% <- <= < - && & || != ! == = +="), expected);
        // `x<-1` is an assignment in DML, as in R.
        assert_eq!(kinds("x<-1")[1], TokenKind::Punct(Arrow));
    }

    #[test]
    fn strings_comments_and_words() {
        assert_eq!(
            kinds("is.nan(x) is.na(x)"),
            vec![
                TokenKind::Ident("is.nan".into()),
                TokenKind::Punct(Punct::LParen),
                TokenKind::Ident("x".into()),
                TokenKind::Punct(Punct::RParen),
                TokenKind::Ident("is.na".into()),
                TokenKind::Punct(Punct::LParen),
                TokenKind::Ident("x".into()),
                TokenKind::Punct(Punct::RParen),
                TokenKind::Eof,
            ]
        );
        assert_eq!(
            kinds("'a\\tb' \"q\\\"\" # comment\n/* block\n */ as.scalar ns::f $x $1 TRUE int"),
            vec![
                TokenKind::Str("a\tb".into()),
                TokenKind::Str("q\"".into()),
                TokenKind::Ident("as.scalar".into()),
                TokenKind::Ident("ns::f".into()),
                TokenKind::ScriptArg("x".into()),
                TokenKind::ScriptArg("1".into()),
                TokenKind::Keyword(Keyword::True),
                TokenKind::Keyword(Keyword::IntType),
                TokenKind::Eof
            ]
        );
        // SystemDS keeps `\\` as two backslashes and resolves the rest by text replacement.
        assert_eq!(
            kinds(r#""a\\|\'c\"d""#)[0],
            TokenKind::Str(r#"a\\|'c"d"#.into())
        );
        assert_eq!(kinds(r#""x\\ny""#)[0], TokenKind::Str("x\\\ny".into()));
        let tokens = tokenize("a\n/* x\n */ b c").tokens;
        assert!(tokens[1].newline_before && !tokens[2].newline_before);
    }

    #[test]
    fn lexical_errors_are_collected_and_located() {
        let errors = tokenize("x = \"abc").errors;
        assert_eq!(errors[0].to_string(), "unterminated string literal");
        assert_eq!(errors[0].span, Some(Span::new(4, 5)));
        let lexed = tokenize("a @ b é /* open");
        assert_eq!(lexed.errors.len(), 1, "{:?}", lexed.errors);
        assert_eq!(lexed.skipped.len(), 2, "{:?}", lexed.skipped);
        assert_eq!(lexed.skipped[0].span, Some(Span::new(2, 3)));
        assert_eq!(lexed.tokens.len(), 3);
        let errors = tokenize("'\\q'").errors;
        assert!(errors[0].to_string().contains("invalid escape"));
    }
}
