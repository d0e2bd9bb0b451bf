#!/usr/bin/env python3
"""Computes the expected stdout of every corpus script independently of lafuse and SystemDS.

Each `@case` function re-implements one `<name>.dml` script in numpy and returns its output
through `Out`; `python3 tests/corpus/expected.py [NAME...]` (re)writes `<name>.expected`.

Typing follows DML: a Python `int` (or numpy integer) is printed as a DML integer (`7`), a
Python `float` as a DML double in Java `Double.toString` form (`7.0`, `1.0E10`), a `bool` as
`TRUE`/`FALSE`. Which DML expressions yield integers and which doubles is a semantic rule of
SystemDS (recorded in README.md); each case writes its values with the type the script produces.
Values that cannot be computed here (SystemDS's `rand` streams) are literals marked
"from SystemDS 3.4 (rand is SystemDS-specific)".
"""
import math
import os
import sys
from decimal import Decimal

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
CASES = {}


def case(fn):
    CASES[fn.__name__] = fn
    return fn


# ---------------------------------------------------------------- formatting (SystemDS style)

def jdouble(x):
    """Java Double.toString: shortest round-trip digits; plain notation for 1e-3 <= |x| < 1e7,
    otherwise computerized scientific notation `d.dddE[-]n`; always at least one fraction digit."""
    x = float(x)
    if math.isnan(x):
        return "NaN"
    if math.isinf(x):
        return "Infinity" if x > 0 else "-Infinity"
    if x == 0.0:
        return "-0.0" if math.copysign(1.0, x) < 0 else "0.0"
    sign = "-" if x < 0 else ""
    d = Decimal(repr(abs(x)))
    _, digits, exp = d.as_tuple()
    digits = "".join(map(str, digits)).rstrip("0") or "0"
    # value = 0.digits * 10^(point); point = position of the decimal point within digits
    point = len("".join(map(str, d.as_tuple()[1]))) + exp
    if 1e-3 <= abs(x) < 1e7:
        if point <= 0:
            s = "0." + "0" * (-point) + digits
        elif point >= len(digits):
            s = digits + "0" * (point - len(digits)) + ".0"
        else:
            s = digits[:point] + "." + digits[point:]
        return sign + s
    mant = digits[0] + "." + (digits[1:] or "0")
    return sign + mant + "E" + str(point - 1)


def fmt(v):
    """Formats one DML scalar value as print() and string concatenation do."""
    if isinstance(v, (bool, np.bool_)):
        return "TRUE" if v else "FALSE"
    if isinstance(v, (int, np.integer)):
        return str(int(v))
    if isinstance(v, (float, np.floating)):
        return jdouble(v)
    if isinstance(v, str):
        return v
    raise TypeError("cannot format %r" % (v,))


def cell(x, decimal):
    """One cell of toString(): fixed notation with `decimal` digits, correctly rounded (half-even
    on the exact binary value, like Java's BigDecimal/DecimalFormat); NaN/Infinity spelled out."""
    x = float(x)
    if math.isnan(x):
        return "NaN"
    if math.isinf(x):
        return "Infinity" if x > 0 else "-Infinity"
    return "%.*f" % (decimal, x)


def tostring(M, rows=100, cols=100, decimal=3, sparse=False, sep=" ", linesep="\n"):
    """toString(X): the first `rows` x `cols` cells, cells joined by sep, every row (including
    the last) terminated by linesep. sparse=TRUE lists non-zeros as `row sep col sep value`
    (1-based) instead."""
    M = np.atleast_2d(np.asarray(M, dtype=float))
    out = []
    if sparse:
        for i in range(min(rows, M.shape[0])):
            for j in range(min(cols, M.shape[1])):
                if M[i, j] != 0:
                    out.append(str(i + 1) + sep + str(j + 1) + sep + cell(M[i, j], decimal) + linesep)
        return "".join(out)
    for i in range(min(rows, M.shape[0])):
        out.append(sep.join(cell(M[i, j], decimal) for j in range(min(cols, M.shape[1]))) + linesep)
    return "".join(out)


class Out:
    """Collects a script's stdout; p() mirrors DML's print(a + b + ...) on already-typed parts."""

    def __init__(self):
        self.buf = []

    def p(self, *parts):
        self.buf.append("".join(fmt(x) for x in parts) + "\n")

    def text(self):
        return "".join(self.buf)


# ---------------------------------------------------------------- DML semantics helpers

def ridiv(a, b):
    """DML %/% as SystemDS 3.4 computes it: a/b truncated toward zero (Java (long) cast), so
    -17 %/% 5 == -3; NaN/Infinity quotients pass through. Typed like its operands."""
    q = a / b if b != 0 else (math.copysign(math.inf, a) * math.copysign(1.0, b) if a != 0 else math.nan)
    if math.isnan(q) or math.isinf(q):
        return q
    r = math.trunc(q)
    return r if isinstance(a, int) and isinstance(b, int) else float(r)


def rmod(a, b):
    """DML %% as SystemDS 3.4 computes it: a - (a %/% b) * b, i.e. the dividend's sign
    (-17 %% 5 == -2, like Java's %, NOT R's 3); NaN when b == 0."""
    if b == 0:
        return math.nan
    r = a - math.trunc(a / b) * b
    return r if isinstance(a, int) and isinstance(b, int) else float(r)


def mseq(a, b, step=None):
    """DML seq(a, b[, step]) as a float column vector (step defaults to 1 or -1)."""
    if step is None:
        step = 1.0 if b >= a else -1.0
    n = int(math.floor((b - a) / step + 1e-10)) + 1
    return np.array([a + i * step for i in range(n)], dtype=float).reshape(-1, 1)


def mrow(vals, rows, cols):
    """DML matrix(vector, rows, cols): fills row by row."""
    return np.asarray(vals, dtype=float).reshape(rows, cols)


def m_div(a, b):
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.asarray(a, dtype=float) / np.asarray(b, dtype=float)


def m_pow(a, b):
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        return np.power(np.asarray(a, dtype=float), np.asarray(b, dtype=float))


def m_idiv(a, b):
    """Element-wise %/% (see ridiv): truncated quotient, +0.0 instead of -0.0 (Java's long cast)."""
    q = m_div(a, b)
    with np.errstate(invalid="ignore"):
        return np.where(np.isfinite(q), np.trunc(q) + 0.0, q)


def m_mod(a, b):
    """Element-wise %% (see rmod): a - (a %/% b) * b, NaN where b == 0."""
    a = np.asarray(a, dtype=float)
    b = np.asarray(b, dtype=float)
    a, b = np.broadcast_arrays(a, b)
    with np.errstate(invalid="ignore"):
        r = a - m_idiv(a, b) * b
    return np.where(b == 0, np.nan, r)


def b2f(m):
    """Boolean matrix -> 0/1 doubles (DML comparison/logical results)."""
    return np.asarray(m, dtype=float)


def sparse_s(rows=50, cols=40, mod=7):
    """The corpus's standard sparse matrix: (matrix(seq(1,r*c),r,c) %% mod == 0) * same."""
    X = np.arange(1, rows * cols + 1, dtype=float).reshape(rows, cols)
    return (X % mod == 0) * X


def svar(v):
    """Sample variance (denominator n-1), as DML var()."""
    v = np.asarray(v, dtype=float).ravel()
    return float(np.var(v, ddof=1))


# ================================================================ cases

@case
def print_format(o):
    o.p(7)
    o.p(-42)
    o.p(2.0)
    o.p(2000.0)
    o.p(0.5)
    o.p(-2.25)
    o.p(1.0e10)
    o.p(123456789.0)
    o.p(9999999.0)
    o.p(10000000.0)
    o.p(0.001)
    o.p(0.0001)
    o.p(9.809842524581822e-7)
    o.p(1 / 3)
    o.p(-1 / 3)
    o.p(2 / 3 * 1e-5)
    o.p(True)
    o.p(False)
    o.p("hello world")
    # concatenation is left to right: "a"+1 -> "a1", then +2.5 -> "a12.5"
    o.p("a", 1, 2.5)
    # 1+2 is integer addition first, then string concatenation
    o.p(3, "a")
    o.p("a", 3)
    o.p("x=", 3, ", y=", 0.25, ", ok=", True)
    o.p("neg ", -5)
    o.p("big ", 1e20)
    o.p("d ", 5.0)
    o.p("concat")
    # integer literals are 64-bit: no 32-bit overflow
    o.p("int arith ", 2147483648)


@case
def scalar_typing(o):
    X = np.ones((3, 4))
    o.p(7)
    o.p(-2)
    o.p(15)
    o.p(2.5)       # int / int -> double
    o.p(3.0)
    o.p(8.0)       # int ^ int -> double
    o.p(3)         # int %/% int -> int
    o.p(1)         # int %% int -> int
    o.p(7.0)
    o.p(3.0)
    o.p(1.5)
    o.p(X.shape[0] * 2)       # nrow is an integer
    o.p(X.shape[1] + 1)
    o.p(X.size)
    o.p(float(X.sum()))        # aggregates are doubles
    o.p(float(X.mean()))
    o.p(4)                     # max of two ints -> int
    o.p(3.0)                   # min of int and double -> double
    o.p(3)
    o.p(3.0)
    o.p(float(X[0, 0]))        # as.scalar -> double
    o.p(6)
    o.p(1.0)
    o.p(True)
    o.p(-3)
    o.p(-2.5)


@case
def scalar_arith(o):
    a, b, x, y = 17, 5, 2.5, -1.25
    o.p("add ", a + b, " ", x + y, " ", a + x)
    o.p("sub ", a - b, " ", x - y, " ", b - a)
    o.p("mul ", a * b, " ", x * y, " ", a * y)
    o.p("div ", a / b, " ", x / y, " ", 1 / 8)
    o.p("pow ", float(b ** 2), " ", x ** 2, " ", 2.0 ** -2, " ", 4 ** 0.5)
    o.p("mod ", rmod(a, b), " ", rmod(-a, b), " ", rmod(a, -b), " ", rmod(-a, -b))
    o.p("moddbl ", rmod(x, 1.0), " ", rmod(-x, 1.0), " ", rmod(7.5, -2.0))
    o.p("idiv ", ridiv(a, b), " ", ridiv(-a, b), " ", ridiv(a, -b), " ", ridiv(-a, -b))
    o.p("idivdbl ", ridiv(7.5, 2), " ", ridiv(-7.5, 2))
    o.p("prec1 ", -(2.0 ** 2))          # ^ binds tighter than unary minus
    o.p("prec2 ", 2.0 ** (3 ** 2))      # ^ is right-associative
    o.p("prec3 ", 2 + 3 * 4 - 6 / 3)
    o.p("prec4 ", (2 + 3) * 4)
    o.p("prec5 ", (-3) * (-2))
    o.p("prec6 ", 10 - 4 - 3)
    o.p("prec7 ", 64 / 4 / 2)
    o.p("prec8 ", 2 * rmod(3, 4))       # %% and %/% bind tighter than * and /
    o.p("prec9 ", 1 + ridiv(7, 2))
    o.p("prec10 ", 2.0 ** -1 * 4)
    o.p("big ", float("inf"))
    o.p("tiny ", 0.0)


@case
def scalar_compare_logic(o):
    a, b = 3, 4.5
    o.p("lt ", a < b, " ", b < a, " ", a < 3)
    o.p("le ", a <= b, " ", a <= 3, " ", b <= a)
    o.p("gt ", a > b, " ", b > a)
    o.p("ge ", a >= 3, " ", a >= b)
    o.p("eq ", a == 3, " ", a == 3.0, " ", a == b)
    o.p("ne ", a != 3, " ", a != b)
    t, f = True, False
    o.p("not ", not t, " ", not f)
    o.p("and ", t and t, " ", t and f, " ", f and f)
    o.p("or ", t or f, " ", f or f)
    o.p("combo ", (a < b) and (b < 10), " ", (not (a > b)) or f)
    o.p("streq ", True, " ", True)
    o.p("prec ", ((1 < 2) and (3 < 2)) or (2 == 2))
    # ! binds looser than comparisons but tighter than &; & binds tighter than |
    o.p("notprec ", not (1 < 2), " ", (not False) and False)
    o.p("andor ", True or (False and False), " ", (False and True) or True)
    o.p("arithcmp ", True, " ", True)


@case
def logic_shortcircuit(o):
    t, f = True, False
    o.p("andand ", t and f, " ", t and t)
    o.p("oror ", f or t, " ", f or f)
    o.p("in range")
    o.p("either")


A1 = np.array([[4, -3, 0], [2.5, 7, -1.5]])
B1 = np.array([[2, 5, -4], [0.5, -3, 2]])


@case
def ops_matrix_scalar(o):
    A, s, d = A1, 3.0, -1.5
    T = lambda M, dec=3: tostring(M, decimal=dec)
    o.p("A+s"); o.p(T(A + s))
    o.p("s+A"); o.p(T(s + A))
    o.p("A-d"); o.p(T(A - d))
    o.p("d-A"); o.p(T(d - A))
    o.p("A*d"); o.p(T(A * d))
    o.p("s*A"); o.p(T(s * A))
    o.p("A/s"); o.p(T(m_div(A, s), 6))
    o.p("s/A"); o.p(T(m_div(s, A), 6))
    o.p("A^2"); o.p(T(m_pow(A, 2)))
    o.p("2^A"); o.p(T(m_pow(2, A), 6))
    o.p("A^0.5"); o.p(T(m_pow(A, 0.5), 6))
    o.p("A%%s"); o.p(T(m_mod(A, s)))
    o.p("s%%A"); o.p(T(m_mod(s, A)))
    o.p("A%%d"); o.p(T(m_mod(A, d)))
    o.p("A%/%s"); o.p(T(m_idiv(A, s)))
    o.p("s%/%A"); o.p(T(m_idiv(s, A)))
    o.p("sums ", float(m_div(A, s).sum()), " ", float(m_pow(2, A).sum()), " ", float((s - A * d).sum()))


@case
def ops_matrix_matrix(o):
    A, B = A1, B1
    o.p("A+B"); o.p(tostring(A + B))
    o.p("A-B"); o.p(tostring(A - B))
    o.p("A*B"); o.p(tostring(A * B))
    o.p("A/B"); o.p(tostring(m_div(A, B), decimal=6))
    o.p("B^A"); o.p(tostring(m_pow(abs(B), A), decimal=6))
    o.p("A%%B"); o.p(tostring(m_mod(A, B)))
    o.p("A%/%B"); o.p(tostring(m_idiv(A, B)))
    o.p("B%%A"); o.p(tostring(m_mod(B, A)))
    C = A * B + m_div(A, B) - B
    o.p("sum ", float(C.sum()))
    o.p("cell ", float(C[1, 2]))


@case
def ops_broadcast(o):
    A = mrow(range(1, 13), 3, 4)
    r = np.array([[1, -2, 0.5, 4]])
    c = np.array([[2], [-1], [10]])
    o.p("A+r"); o.p(tostring(A + r))
    o.p("A-r"); o.p(tostring(A - r))
    o.p("A*r"); o.p(tostring(A * r))
    o.p("A/r"); o.p(tostring(m_div(A, r)))
    o.p("A^r"); o.p(tostring(m_pow(A, np.array([[0, 1, 2, 0.5]])), decimal=6))
    o.p("A%%r"); o.p(tostring(m_mod(A, r)))
    o.p("A>r"); o.p(tostring(b2f(A > r)))
    o.p("A+c"); o.p(tostring(A + c))
    o.p("A-c"); o.p(tostring(A - c))
    o.p("A*c"); o.p(tostring(A * c))
    o.p("A/c"); o.p(tostring(m_div(A, c), decimal=5))
    o.p("A%/%c"); o.p(tostring(m_idiv(A, c)))
    o.p("A==c"); o.p(tostring(b2f(A == c * 5)))
    o.p("min ", float((A - r).min()), " max ", float((A * c).max()), " sum ", float(m_div(A, c).sum()))


@case
def ops_compare_matrix(o):
    A = mrow(range(1, 7), 2, 3)
    B = np.array([[3, 2, 1], [6, 5, 4]], dtype=float)
    for lbl, M in [("A<B", A < B), ("A<=B", A <= B), ("A>B", A > B), ("A>=B", A >= B),
                   ("A==B", A == B), ("A!=B", A != B), ("A<3", A < 3), ("A>=3.5", A >= 3.5),
                   ("A==5", A == 5), ("4!=A", 4 != A), ("2>A", 2 > A), ("4<=A", 4 <= A)]:
        o.p(lbl)
        o.p(tostring(b2f(M)))
    o.p("count ", float((A < B).sum()), " ", float((A != B).sum()), " ", float((A >= 2).sum()))


@case
def ops_logical_matrix(o):
    A = np.array([[1, 0, -2], [0, 3, 0]], dtype=float) != 0
    B = np.array([[0, 0, 5], [1, 1, 0]], dtype=float) != 0
    Ag0 = np.array([[1, 0, -2], [0, 3, 0]]) > 0
    for lbl, M in [("!A", ~A), ("A&B", A & B), ("A|B", A | B), ("A&TRUE", A), ("A|FALSE", A),
                   ("FALSE|B", B), ("!(A>0)|B", ~Ag0 | B), ("xor-ish", (A | B) & ~(A & B))]:
        o.p(lbl)
        o.p(tostring(b2f(M)))
    o.p("count ", float((A & B).sum()), " ", float((A | B).sum()), " ", float((~B).sum()))


@case
def nan_compare_chain(o):
    # SystemDS rewrites (A op B) == 0 to the complement comparison and !(A op B) likewise
    # where the negation is the comparison's only reader (after CSE); NaN cells then give 0.
    nan = math.nan
    X = np.array([[nan, 0.5, 1], [2, nan, 3]])
    with np.errstate(invalid="ignore"):
        lt, ge, le = X < 1, X >= 1, X <= 1
        cases = [("lt==0", ge), ("gt==0", le), ("le==1", le), ("ge!=0", ge),
                 ("!gt", le),          # X > 1 is also read by gt==0, rewritten first
                 ("!lt", ~lt),         # X < 1 is still read by lt!=1: no rewrite
                 ("!eq", X != 1), ("!ge", ~ge), ("lt!=1", ~lt)]
        for lbl, M in cases:
            o.p(lbl)
            o.p(tostring(b2f(M)))
        o.p("count ", float(ge.sum()), " ", float((X <= 0).sum()), " ", float((X == X).sum()))


def jround(x):
    """DML round(): Java Math.round semantics, floor(x + 0.5), with +0.0 instead of -0.0."""
    return np.floor(np.asarray(x, dtype=float) + 0.5) + 0.0


def sigmoid(x):
    return 1.0 / (1.0 + np.exp(-np.asarray(x, dtype=float)))


@case
def unary_scalar(o):
    x, n = 0.75, -2.4
    o.p("abs ", abs(n), " ", 3.5, " ", 7.25)
    o.p("exp ", math.exp(x), " ", 1.0, " ", math.exp(-1))
    o.p("log ", math.log(x), " ", math.log(10), " ", 0.0)
    o.p("sqrt ", math.sqrt(x), " ", 4.0, " ", math.sqrt(2))
    o.p("round ", float(jround(n)), " ", 3.0, " ", -2.0, " ", 0.0)
    o.p("floor ", float(math.floor(n)), " ", 0.0, " ", 3.0)
    o.p("ceil ", float(math.ceil(n)), " ", 1.0, " ", 3.0)
    o.p("sign ", -1.0, " ", 0.0, " ", 1.0)
    o.p("sin ", math.sin(x), " ", 0.0)
    o.p("cos ", math.cos(x), " ", 1.0)
    o.p("tan ", math.tan(x))
    o.p("asin ", math.asin(x), " ", math.asin(1))
    o.p("acos ", math.acos(x), " ", math.acos(-1))
    o.p("atan ", math.atan(x), " ", math.atan(-10))
    o.p("sinh ", math.sinh(x), " ", math.sinh(n))
    o.p("cosh ", math.cosh(x), " ", math.cosh(n))
    o.p("tanh ", math.tanh(x), " ", math.tanh(n))
    o.p("sigmoid ", float(sigmoid(x)), " ", float(sigmoid(n)), " ", 0.5)
    o.p("nested ", math.sqrt(abs(n)), " ", math.exp(math.log(5)))


@case
def unary_matrix(o):
    X = np.array([[0.75, -2.4, 0], [1, -0.5, 3.5]])
    U = X / 4
    T = lambda M, d=6: o.p(tostring(M, decimal=d))
    o.p("abs"); T(abs(X), 3)
    o.p("exp"); T(np.exp(X))
    o.p("sqrt"); T(np.sqrt(abs(X)))
    o.p("log"); T(np.log(abs(X) + 1))
    o.p("round"); T(jround(X), 3)
    o.p("floor"); T(np.floor(X), 3)
    o.p("ceil"); T(np.ceil(X), 3)
    o.p("sign"); T(np.sign(X), 3)
    o.p("sin"); T(np.sin(X))
    o.p("cos"); T(np.cos(X))
    o.p("tan"); T(np.tan(X))
    o.p("asin"); T(np.arcsin(U))
    o.p("acos"); T(np.arccos(U))
    o.p("atan"); T(np.arctan(X))
    o.p("sinh"); T(np.sinh(X))
    o.p("cosh"); T(np.cosh(X))
    o.p("tanh"); T(np.tanh(X))
    o.p("sigmoid"); T(sigmoid(X))
    o.p("neg"); T(-X, 3)
    S = sparse_s() / 1000
    o.p("sparse abs ", float(abs(-S).sum()))
    o.p("sparse sqrt ", float(np.sqrt(S).sum()))
    o.p("sparse exp ", float(np.exp(S).sum()))
    o.p("sparse sin ", float(np.sin(S).sum()))
    o.p("sparse cos ", float(np.cos(S).sum()))
    o.p("sparse tan ", float(np.tan(S).sum()))
    o.p("sparse round ", float(jround(S * 10).sum()))
    o.p("sparse floor ", float(np.floor(S * 3).sum()))
    o.p("sparse ceil ", float(np.ceil(S).sum()))
    o.p("sparse sign ", float(np.sign(S - 0.5).sum()))
    o.p("sparse asin ", float(np.arcsin(S / 2).sum()))
    o.p("sparse acos ", float(np.arccos(S / 2).sum()))
    o.p("sparse atan ", float(np.arctan(S).sum()))
    o.p("sparse sinh ", float(np.sinh(S).sum()))
    o.p("sparse cosh ", float(np.cosh(S).sum()))
    o.p("sparse tanh ", float(np.tanh(S).sum()))
    o.p("sparse sigmoid ", float(sigmoid(S).sum()))
    o.p("sparse log ", float(np.log(S + 1).sum()))


@case
def log_base(o):
    o.p(math.log(8) / math.log(2))
    o.p(math.log(100) / math.log(10))
    o.p(math.log(2.5) / math.log(0.5))
    o.p(0.0)
    X = np.array([[1, 2, 4], [8, 1024, 0.5]])
    o.p(tostring(np.log(X) / np.log(2)))
    o.p(float((np.log(X) / np.log(10)).sum()))
    o.p(float(np.log(X).sum()))


@case
def nan_inf(o):
    nan, inf = math.nan, math.inf
    o.p("0/0 ", nan)
    o.p("1/0 ", inf)
    o.p("-1/0 ", -inf)
    o.p("log0 ", -inf)
    o.p("sqrtneg ", nan)
    o.p("inf-inf ", nan)
    o.p("0*inf ", nan)
    o.p("exp ", inf)
    o.p("mod0 ", rmod(5.0, 0), " ", rmod(5.5, 0))
    o.p("idiv0 ", ridiv(5.0, 0), " ", ridiv(-5.0, 0), " ", ridiv(0.0, 0))
    X = np.array([[1, 0], [-1, 4]], dtype=float)
    D = m_div(X, np.zeros((2, 2)))
    with np.errstate(divide="ignore", invalid="ignore"):
        L = np.log(X)
        Q = np.sqrt(X)
    o.p(tostring(D))
    o.p(tostring(L))
    o.p(tostring(Q))
    o.p("sumsqrt ", float(Q.sum()))
    N = np.array([[1, nan], [3, 4]])
    o.p("nan sum ", float(N.sum()), " mean ", float(N.mean()), " min ", float(N.min()), " max ", float(N.max()))
    o.p(tostring(N.sum(axis=1, keepdims=True)))
    o.p(tostring(N.max(axis=0, keepdims=True)))
    o.p(tostring(N.min(axis=1, keepdims=True)))
    I = np.array([[1, 2], [inf, 4]])
    o.p("inf sum ", float(I.sum()), " max ", float(I.max()), " min ", float(I.min()))
    with np.errstate(invalid="ignore"):
        o.p("inf-inf ", float((I - I).sum()))
    o.p("nan cmp ", float((N > 0).sum()), " ", float((N == N).sum()), " ", float((N != N).sum()))
    o.p("nan scalar cmp ", False, " ", False)
    o.p("minmax nan ", nan, " ", nan)
    o.p("round nan ", 0.0)   # Java Math.round(NaN) == 0
    o.p("constants ", nan, " ", inf, " ", -inf, " ", True, " ", False)
    o.p("constant matrix ", inf, " ", nan)   # 3 + Inf; max over a NaN is NaN


@case
def pmin_pmax(o):
    A, B = A1, B1
    for lbl, M in [("pmin", np.minimum(A, B)), ("pmax", np.maximum(A, B)), ("min2", np.minimum(A, B)),
                   ("max2", np.maximum(A, B)), ("pmax0", np.maximum(A, 0)), ("pmin1", np.minimum(A, 1)),
                   ("max scalar-matrix", np.maximum(2, A))]:
        o.p(lbl)
        o.p(tostring(M))
    o.p("scalars ", 3, " ", 7, " ", -2.5, " ", 2.5)
    o.p("three ", 2, " ", 8)
    o.p("agg ", float(A.min()), " ", float(A.max()), " ", float(B.min()), " ", float(B.max()))


@case
def agg_full_dense(o):
    X = mrow(range(1, 21), 4, 5) / 4 - 2
    o.p("sum ", float(X.sum()))
    o.p("mean ", float(X.mean()))
    o.p("prod ", float(np.prod(X[0:2, 0:4] + 3)))
    o.p("var ", svar(X))
    o.p("sd ", math.sqrt(svar(X)))
    o.p("min ", float(X.min()))
    o.p("max ", float(X.max()))
    Y = np.sin(mrow(range(1, 301), 15, 20))
    o.p("sum ", float(Y.sum()))
    o.p("mean ", float(Y.mean()))
    o.p("var ", svar(Y))
    o.p("sd ", math.sqrt(svar(Y)))
    o.p("min ", float(Y.min()))
    o.p("max ", float(Y.max()))
    o.p("prod ", float(np.prod(Y[0, 0:6])))


@case
def agg_rowcol_dense(o):
    X = np.cos(mrow(range(1, 13), 3, 4)) * 10
    T = lambda M: o.p(tostring(M, decimal=9))
    o.p("rowSums"); T(X.sum(axis=1, keepdims=True))
    o.p("colSums"); T(X.sum(axis=0, keepdims=True))
    o.p("rowMeans"); T(X.mean(axis=1, keepdims=True))
    o.p("colMeans"); T(X.mean(axis=0, keepdims=True))
    o.p("rowMaxs"); T(X.max(axis=1, keepdims=True))
    o.p("rowMins"); T(X.min(axis=1, keepdims=True))
    o.p("colMaxs"); T(X.max(axis=0, keepdims=True))
    o.p("colMins"); T(X.min(axis=0, keepdims=True))
    o.p("rowVars"); T(X.var(axis=1, ddof=1, keepdims=True))
    o.p("colVars"); T(X.var(axis=0, ddof=1, keepdims=True))
    o.p("dims 3x1 1x4")
    o.p("cell ", float(X[1].var(ddof=1)), " ", float(X[:, 2].sum()))


def sparse_n():
    S = sparse_s()
    return S * (1 - 2 * m_mod(S, 2))


@case
def agg_full_sparse(o):
    S = sparse_s()
    N = sparse_n()
    o.p("nnz ", float((S != 0).sum()))
    o.p("sum ", float(S.sum()), " ", float(N.sum()))
    o.p("mean ", float(S.mean()), " ", float(N.mean()))
    o.p("var ", svar(S), " ", svar(N))
    o.p("sd ", math.sqrt(svar(S)), " ", math.sqrt(svar(N)))
    o.p("min ", float(S.min()), " ", float(N.min()))
    o.p("max ", float(S.max()), " ", float(N.max()))
    o.p("prod ", float(np.prod(S)))
    P = -S
    o.p("max of non-positive ", float(P.max()), " min ", float(P.min()))
    E = np.zeros((30, 30))
    E[3, 4] = 3
    E[29, 29] = -2
    o.p("tiny sparse ", float(E.sum()), " ", float(E.mean()), " ", float(E.min()), " ", float(E.max()), " ", svar(E))


@case
def agg_rowcol_sparse(o):
    N = sparse_n()
    N[:, 2] = 0
    N[9, :] = 0
    rs = N.sum(axis=1)
    cs = N.sum(axis=0)
    o.p("rowSums ", float(rs.sum()), " ", float(rs[0]), " ", float(rs[9]), " ", float(rs[49]))
    o.p("colSums ", float(cs.sum()), " ", float(cs[0]), " ", float(cs[2]), " ", float(cs[39]))
    o.p("rowMeans ", float(N.mean(axis=1).sum()), " ", float(N.mean(axis=1)[6]))
    o.p("colMeans ", float(N.mean(axis=0).sum()), " ", float(N.mean(axis=0)[6]))
    o.p("rowMaxs"); o.p(tostring(N.max(axis=1)[0:12].reshape(1, -1), decimal=1))
    o.p("rowMins"); o.p(tostring(N.min(axis=1)[0:12].reshape(1, -1), decimal=1))
    o.p("colMaxs"); o.p(tostring(N.max(axis=0)[0:12].reshape(1, -1), decimal=1))
    o.p("colMins"); o.p(tostring(N.min(axis=0)[0:12].reshape(1, -1), decimal=1))
    rv = N.var(axis=1, ddof=1)
    cv = N.var(axis=0, ddof=1)
    o.p("rowVars ", float(rv.sum()), " ", float(rv[1]))
    o.p("colVars ", float(cv.sum()), " ", float(cv[4]))
    o.p("maxs ", float(N.max(axis=1).sum()), " ", float(N.max(axis=0).sum()), " mins ",
        float(N.min(axis=1).sum()), " ", float(N.min(axis=0).sum()))


@case
def edge_shapes(o):
    O = np.array([[2.5]])
    o.p("1x1 ", 2.5, " ", 2.5, " ", 2.5, " ", 2.5, " ", 2.5)
    o.p(tostring(O @ O))
    o.p(tostring(O.T + O))
    o.p("1x1 scalar ", 10.0)
    R = np.array([[3, 1, 4, 1, 5]], dtype=float)
    C = R.T
    o.p("row ", float(R.sum()), " ", float(R.mean()), " ", svar(R), " ", math.sqrt(svar(R)))
    o.p(tostring(R.sum(axis=1, keepdims=True)))
    o.p(tostring(R.sum(axis=0, keepdims=True)))
    o.p(tostring(R.max(axis=1, keepdims=True)))
    o.p(tostring(C.min(axis=0, keepdims=True)))
    o.p(tostring(R @ C))
    o.p(tostring(C @ R))
    o.p(tostring(np.cumsum(C, axis=0)))
    o.p("dims ", 1, " ", 5, " ", 5, " ", 1, " ", 5)
    o.p(tostring(C.var(axis=0, ddof=1, keepdims=True), decimal=6))
    o.p(tostring(C.mean(axis=1, keepdims=True)))
    o.p(tostring(R[:, 1:4]))
    o.p(tostring(C[4:5, 0:1]))


@case
def matmult(o):
    A = mrow(range(1, 7), 2, 3)
    B = np.array([[1, -1], [0.5, 2], [0, 3]])
    o.p("AB"); o.p(tostring(A @ B))
    o.p("BA"); o.p(tostring(B @ A))
    v = np.array([[1], [2], [3]], dtype=float)
    o.p("Av"); o.p(tostring(A @ v))
    w = np.array([[2, -1]], dtype=float)
    o.p("wA"); o.p(tostring(w @ A))
    o.p("outer"); o.p(tostring(v @ v.T))
    o.p("inner ", float((v.T @ v)[0, 0]))
    X = np.sin(mrow(range(1, 601), 30, 20))
    G = X.T @ X
    o.p("gram ", float(G.sum()), " ", float(G[2, 6]), " ", float(G[6, 2]), " ", float(np.trace(G)))
    H = X @ X.T
    o.p("xxt ", float(H.sum()), " ", float(H[29, 0]))
    y = np.cos(mseq(1, 20))
    o.p("mv ", float((X @ y).sum()), " ", float(((X @ y) ** 2).sum()))
    # %*% binds tighter than *
    o.p("prec ", float((2 * (A @ B)).sum()), " ", float((A @ B + 1).sum()))


@case
def matmult_sparse(o):
    S = sparse_s() / 100
    D = np.cos(mrow(range(1, 1201), 40, 30))
    E = np.sin(mrow(range(1, 1501), 30, 50))
    SD = S @ D
    o.p("sparse x dense ", float(SD.sum()), " ", float(SD[6, 10]), " ", float((SD ** 2).sum()))
    ES = E @ S
    o.p("dense x sparse ", float(ES.sum()), " ", float(ES[1, 39]))
    T = (mrow(range(1, 1201), 40, 30) % 5 == 0) * 1.5
    ST = S @ T
    o.p("sparse x sparse ", float(ST.sum()), " ", float(ST[48, 29]), " ", float((ST != 0).sum()))
    v = mseq(1, 40) / 40
    Sv = S @ v
    o.p("sparse x vector ", float(Sv.sum()), " ", float(Sv[49, 0]))
    G = S.T @ S
    o.p("sparse gram ", float(G.sum()), " ", float(G[6, 13]))
    o.p("vector x sparse ", float((np.ones((1, 50)) @ S).sum()))


@case
def transpose_diag(o):
    A = mrow(range(1, 7), 2, 3)
    o.p(tostring(A.T))
    o.p(tostring(A.T.T - A))
    v = np.array([3, -1, 2], dtype=float)
    o.p(tostring(np.diag(v)))
    M = mrow(range(1, 10), 3, 3)
    o.p(tostring(np.diag(M).reshape(-1, 1)))
    o.p("trace ", float(np.trace(M)))
    o.p("identity ", 4.0, " ", 4, " ", 4)
    S = sparse_s()
    St = S.T
    o.p("sparse t ", 40, " ", 50, " ", float(St.sum()), " ", float(St[6, 0]), " ", float(St[0, 6]))
    Q = S[0:40, 0:40]
    o.p("sparse diag ", float(np.trace(Q)), " ", 40)


@case
def seq_builtin(o):
    T = lambda v: o.p(tostring(np.asarray(v, dtype=float).reshape(1, -1)))
    T([1, 2, 3, 4, 5])
    T([2, 5, 8, 11])
    T([10, 8, 6, 4, 2])
    T([5, 4, 3, 2, 1])          # seq(from, to) with from > to counts down by 1
    T([0, 0.25, 0.5, 0.75, 1])
    T([1, 1.3, 1.6, 1.9])
    T([-1, -1.5, -2, -2.5])
    T([3])
    s = mseq(0, 1, 0.1)
    o.p("len ", s.shape[0], " sum ", float(s.sum()), " last ", float(s[10, 0]))
    o.p("big ", float(sum(range(1, 100001))), " ", len(range(1, 100001, 7)))


@case
def matrix_reshape(o):
    o.p(tostring(np.full((2, 3), 7.0)))
    o.p(tostring(mrow([1, 2, 3, 4, 5, 6], 2, 3)))
    v = np.arange(1, 7, dtype=float)
    o.p(tostring(v.reshape(2, 3)))
    o.p(tostring(v.reshape(2, 3)))
    o.p(tostring(v.reshape(2, 3, order="F")))
    A = v.reshape(3, 2)
    o.p(tostring(A.reshape(2, 3)))
    o.p(tostring(A.reshape(1, 6)))
    # byrow=FALSE is R's column-major reshape: the source is read column by column and the
    # target filled column by column
    o.p(tostring(A.ravel(order="F").reshape(6, 1, order="F")))
    o.p(tostring(A.ravel(order="F").reshape(2, 3, order="F")))
    o.p("zero ", 0.0, " ", 4, " ", 5)
    R = sparse_s().reshape(100, 20)
    o.p("sparse reshape ", float(R.sum()), " ", float(R[1, 7]), " ", float(R[99, 19]))


@case
def cbind_rbind(o):
    A = mrow(range(1, 5), 2, 2)
    B = np.array([[9], [8]], dtype=float)
    C = np.array([[-1, -2]], dtype=float)
    o.p(tostring(np.hstack([A, B])))
    o.p(tostring(np.vstack([A, C])))
    o.p(tostring(np.hstack([A, A, B])))
    o.p(tostring(np.vstack([C, A, C])))
    o.p(tostring(np.vstack([np.hstack([A, B]), np.hstack([C, np.zeros((1, 1))])])))
    S = sparse_s()
    W = np.hstack([S, np.ones((50, 2))])
    o.p("sparse cbind ", 50, "x", 42, " ", float(W.sum()), " ", float(W[6, 40]))
    H = np.vstack([S, S * 2])
    o.p("sparse rbind ", 100, "x", 40, " ", float(H.sum()), " ", float(H[56, 6]))


@case
def right_index(o):
    X = mrow(range(1, 21), 4, 5)
    o.p(tostring(X[1:2, 2:3]))
    o.p("cell ", float(X[3, 4]), " ", float(X[0, 0]))
    o.p(tostring(X[1:3, 1:4]))
    o.p(tostring(X[2:3, :]))
    o.p(tostring(X[:, 1:2]))
    o.p(tostring(X[1:4, :]))
    o.p(tostring(X[:, 3:5]))
    o.p(tostring(X[0:1, 4:5]))
    o.p(tostring(X[1:3, 2:3]))
    o.p(tostring(X[3:4, 3:4]))
    Y = X[1:3, :]
    o.p("dims ", 2, " ", 5, " sum ", float(Y.sum()))
    S = sparse_s()
    o.p("sparse cell ", float(S[0, 6]), " ", float(S[0, 5]))
    o.p("sparse block ", float(S[9:20, 4:15].sum()), " row ", float(S[32, :].sum()), " col ", float(S[:, 20].sum()))
    o.p(tostring(S[0:2, 4:9]))


@case
def left_index(o):
    X = np.zeros((4, 5))
    X[1, 2] = 7
    X[3, 4] = -1.5
    o.p(tostring(X))
    X[0:2, 0:2] = [[1, 2], [3, 4]]
    o.p(tostring(X))
    X[2, :] = 9
    o.p(tostring(X))
    X[:, 4] = [10, 20, 30, 40]
    o.p(tostring(X))
    X[1:3, 3] = -8
    o.p(tostring(X))
    X[3, 0:3] = [1, 2, 3]
    o.p(tostring(X))
    for k in range(1, 5):
        X[k - 1, k - 1] = 100 + k
    o.p(tostring(X))
    o.p("sum ", float(X.sum()))
    o.p("copy ", 9.0, " ", 13.0)        # Z = Y copies: changing Z leaves Y alone
    S = sparse_s()
    S[0, 0] = -5
    S[49, 39] = 0
    S[19:21, :] = 0
    o.p("sparse ", float(S.sum()), " ", -5.0, " ", float((S != 0).sum()))
    D = np.ones((50, 40))
    D[4:10, 4:10] = S[4:10, 4:10]
    o.p("dense<-sparse ", float(D.sum()))


@case
def solve_builtin(o):
    A = np.array([[4, -2, 1], [-2, 4, -2], [1, -2, 4]], dtype=float)
    b = np.array([[11], [-16], [17]], dtype=float)
    x = np.linalg.solve(A, b)
    o.p(tostring(x, decimal=9))
    o.p("residual ", float(abs(A @ x - b).sum()))   # ~1e-15: compared with absolute 1e-12
    n = 6
    M = np.diag(np.full(n, 10.0)) + np.sin(mrow(range(1, n * n + 1), n, n))
    y = mseq(1, n)
    z = np.linalg.solve(M, y)
    o.p("z ", float(z.sum()), " ", float(z[0, 0]), " ", float(z[5, 0]))
    o.p("res ", True)


@case
def cumsum_builtin(o):
    X = np.array([[1, 2, 3], [-4, 5, 6], [7, 8, 0.5]])
    o.p(tostring(np.cumsum(X, axis=0)))
    o.p(tostring(np.cumsum(mseq(1, 10), axis=0).T))
    C = np.cumsum(sparse_s(), axis=0)
    o.p("sparse ", float(C.sum()), " ", float(C[49, 0]), " ", float(C[24, 6]))
    o.p(tostring(np.full((1, 4), 2.5)))


@case
def ifelse_builtin(o):
    X = np.array([[1, -2, 3], [-4, 0, 6]], dtype=float)
    Y = mrow(range(10, 61, 10), 2, 3)
    o.p(tostring(np.where(X > 0, X, 0)))
    o.p(tostring(np.where(X > 0, 1, -1)))
    o.p(tostring(np.where(X < 0, Y, X)))
    o.p(tostring(np.where(X != 0, Y, -Y)))
    o.p(tostring(np.where(X >= 3, 100, Y)))
    o.p(1.5)
    o.p("no")
    o.p(2)
    S = sparse_s()
    o.p("sparse ", float(np.where(S > 1000, S, 0).sum()), " ", float(np.where(S == 0, 1, 0).sum()))


@case
def replace_builtin(o):
    X = np.array([[1, 0, 3], [0, 5, 1]], dtype=float)
    o.p(tostring(np.where(X == 0, -1, X)))
    o.p(tostring(np.where(X == 1, 9.5, X)))
    N = m_div(X, X)
    o.p(tostring(N))
    o.p(tostring(np.where(np.isnan(N), 0, N)))
    o.p("sum ", float(np.where(np.isnan(N), 2, N).sum()))
    S = sparse_s()
    R = np.where(S == 0, 1, S)
    o.p("sparse ", float(R.sum()), " ", float((R == 1).sum()))
    o.p("sparse2 ", float(np.where(S == 7, -7, S).sum()))


@case
def shape_builtins(o):
    o.p("7 3 21")
    o.p("50 40 2000")
    o.p("3 7 50")
    o.p(21)
    o.p(10.5)
    o.p(-2)
    o.p(float(np.mean(np.arange(1, 51))))


@case
def casts(o):
    o.p(2.75)
    o.p(3.75)
    o.p(tostring([[3.5]]))
    o.p("1 1")
    o.p(4.0)
    o.p(0.5)
    o.p(2)
    o.p(-2)        # as.integer truncates toward zero
    o.p(8)
    o.p(True)
    o.p(False)
    o.p(True)
    o.p(2.0)
    o.p(1)
    o.p(-2.0)
    o.p(float((2 * np.array([2.75, -1])).sum()))


@case
def tostring_options(o):
    B = mrow(range(1, 13), 3, 4)
    o.p(tostring(B / 3))
    o.p(tostring(B / 7, decimal=1))
    o.p(tostring(B / 11, decimal=5))
    o.p(tostring(B / 19, decimal=0))
    N = np.array([[-1.5, 1000000], [0.0004, -0.0004]])
    o.p(tostring(N))
    S = np.zeros((4, 4))
    S[1, 2] = 1.25
    S[3, 0] = -2
    o.p(tostring(S, sparse=True))
    o.p("pre:", tostring([[1, 1]]), ":post")


@case
def tostring_layout(o):
    B = mrow(range(1, 13), 3, 4)
    o.p(tostring(B / 13, rows=2))
    o.p(tostring(B / 17, cols=2))
    o.p(tostring(B / 19, rows=1, cols=3, decimal=0))
    o.p(tostring(B / 23, sep=","))
    o.p(tostring(B / 29, sep=" | ", linesep=" ;; "))
    o.p(tostring(B[0:1, :] / 31, decimal=2, linesep="|"))


@case
def if_else(o):
    for x in (-3.5, 0, 4, 1e6):
        o.p("negative" if x < 0 else "zero" if x == 0 else "small" if x < 10 else "large")
    o.p("sum above 20")
    o.p("min is ", 1.0)
    o.p("y ", 15)
    o.p("z ", 11)
    o.p("negated")


@case
def for_loops(o):
    o.p("sum 1..10 ", sum(range(1, 11)), " last i ", 10)
    o.p("odd product ", 1 * 3 * 5 * 7 * 9)
    o.p("down ", "".join("%d," % j for j in range(10, 0, -3)))
    o.p("reverse range ", "321")        # a:b with a > b counts down
    o.p("single ", 1)
    o.p(tostring(np.array([[1, 4, 9, 16]])))
    o.p("bounds fixed at entry, q ", 5, " m ", 2)
    o.p("double acc ", 0.5 * 1 * 2 * 3)


@case
def while_loops(o):
    o.p("i ", 5)
    x, steps = 100.0, 0
    while abs(x - 2) > 1e-10:
        x = (x + 4 / x) / 2
        steps += 1
    o.p("sqrt4 ", x, " steps ", steps)
    A = np.array([[2, 1, 0], [1, 3, 1], [0, 1, 4]], dtype=float)
    w = np.ones((3, 1))
    for _ in range(20):
        w = A @ w
        w = w / math.sqrt(float((w ** 2).sum()))
    o.p("eig ", float((w.T @ A @ w)[0, 0]))
    o.p("never ", 0)
    n = 1
    while n < 1000:
        n *= 3
    o.p("n ", n)


@case
def nested_loops(o):
    n = 5
    M = mrow(range(1, 26), 5, 5)
    o.p(tostring(M))
    o.p("upper ", float(np.triu(M).sum()))
    o.p("pairs ", 6)


@case
def functions_defaults(o):
    X = mrow(range(1, 5), 2, 2)
    o.p(tostring(2 * X))
    o.p(tostring(3 * X))
    o.p(tostring(3 * X + 1))
    o.p(tostring(2 * X - 1))
    o.p(tostring(0.5 * X + 10))
    o.p(tostring(np.full((2, 2), 7.0)))
    o.p("norm ", 5.0)
    o.p("in expr ", 1 + math.sqrt(30) * 2)
    o.p("unit ", 3 / 5 + 4 / 5)
    o.p("hi bob;")
    o.p("hi amy;hi amy;")
    o.p("hi x;hi x;hi x;")


@case
def functions_multi_return(o):
    X = np.array([[2, 4, 4, 4], [5, 5, 7, 9]], dtype=float)
    m, sd = float(X.mean()), math.sqrt(svar(X))
    Z = (X - m) / sd
    o.p("mean ", m, " sd ", sd)
    o.p(tostring(Z, decimal=6))
    o.p("range ", 2.0, " ", 9.0)
    o.p("swap ", -2.0, " ", 1.5)
    o.p("swap back ", 1.5, " ", -2.0)
    o.p("z range ", float(Z.min()), " ", float(Z.max()))


@case
def functions_recursion(o):
    o.p("5! = ", math.factorial(5))
    o.p("10! = ", math.factorial(10))
    o.p("20! = ", math.factorial(20))
    fib = [0, 1]
    while len(fib) <= 15:
        fib.append(fib[-1] + fib[-2])
    o.p("fib(15) = ", fib[15])
    A = np.array([[1, 1], [1, 0]], dtype=float)
    o.p(tostring(np.linalg.matrix_power(A, 10)))


@case
def parfor_loop(o):
    R = np.array([[i * i, float(i * i)] for i in range(1, 9)], dtype=float)
    o.p(tostring(R))
    o.p("total ", float(R.sum()))


def read_csv(name):
    return np.loadtxt(os.path.join(HERE, "data", name), delimiter=",", ndmin=2)


def read_mm(name):
    with open(os.path.join(HERE, "data", name)) as f:
        lines = [l for l in f if not l.startswith("%")]
    r, c, _ = (int(t) for t in lines[0].split())
    M = np.zeros((r, c))
    for l in lines[1:]:
        i, j, v = l.split()
        M[int(i) - 1, int(j) - 1] = float(v)
    return M


@case
def io_read(o):
    A = read_csv("a.csv")
    o.p(tostring(A))
    o.p("A ", 4, "x", 3, " sum ", float(A.sum()), " colSums ", tostring(A.sum(axis=0, keepdims=True)))
    H = np.loadtxt(os.path.join(HERE, "data", "h.csv"), delimiter=",", skiprows=1, ndmin=2)
    o.p(tostring(H))
    S = read_mm("s.mtx")
    o.p(tostring(S))
    o.p("S ", 5, "x", 4, " nnz ", float((S != 0).sum()), " sum ", float(S.sum()))
    o.p(tostring(S @ S[0:4, :].T, decimal=4))


@case
def io_roundtrip(o):
    X = mrow(range(1, 13), 3, 4) / 8 - 0.5
    o.p(tostring(X))
    o.p("csv equal ", True)
    S = sparse_s() / 3
    # written values round-trip exactly (shortest repr), so the differences are 0
    o.p("mm dims ", 50, "x", 40, " sum ", float(S.sum()), " max abs diff ", 0.0)
    o.p("csv sparse sum ", float(S.sum()), " nnz ", float((S != 0).sum()), " max abs diff ", 0.0)


@case
def args_ifdef(o):
    # args: n=4 scale=2.5 label=hello file=tests/corpus/data/a.csv
    o.p("n ", 4, " scale ", 2.5, " missing ", 7, " label ", "hello")
    o.p("sum ", 2.5 * (1 + 2 + 3 + 4))
    o.p("direct ", 4, " ", 5.0)
    o.p("file ", "tests/corpus/data/a.csv")
    o.p("read sum ", float(read_csv("a.csv").sum()))


@case
def args_defaults(o):
    o.p("n ", 6, " s ", 0.5, " name ", "default")
    o.p(0.5 * 36)


@case
def time_builtin(o):
    o.p(True)
    o.p(True, " ", 1000.0)


@case
def pipeline_linreg(o):
    n, m = 200, 5
    X = np.sin(mrow(range(1, n * m + 1), n, m)) + mseq(1, n) @ np.full((1, m), 0.001)
    beta_true = np.array([[1.5], [-2], [0.5], [3], [-1]])
    y = X @ beta_true + 0.01 * np.cos(mseq(1, n))
    lam = 0.001
    A = X.T @ X + lam * np.eye(m)
    beta = np.linalg.solve(A, X.T @ y)
    o.p(tostring(beta, decimal=8))
    res = y - X @ beta
    o.p("rss ", float((res ** 2).sum()))
    o.p("r2 ", float(1 - (res ** 2).sum() / ((y - y.mean()) ** 2).sum()))
    o.p("beta sum ", float(beta.sum()), " b1 ", float(beta[0, 0]))


@case
def pipeline_logreg(o):
    n, m = 100, 3
    X = np.hstack([np.cos(mrow(range(1, n * (m - 1) + 1), n, m - 1) * 0.7), np.ones((n, 1))])
    w_true = np.array([[2], [-1], [0.5]])
    y = b2f((X @ w_true + 0.3 * np.sin(mseq(1, n) * 3)) > 0)
    w = np.zeros((m, 1))
    for it in range(1, 31):
        p = sigmoid(X @ w)
        g = X.T @ (p - y) / n
        w = w - 0.5 * g
        if it % 10 == 0:
            loss = -float((y * np.log(p) + (1 - y) * np.log(1 - p)).sum()) / n
            o.p("iter ", it, " loss ", loss)
    o.p(tostring(w, decimal=8))
    o.p("accuracy ", float(((sigmoid(X @ w) > 0.5) == (y == 1)).sum()) / n)


@case
def pipeline_kmeans(o):
    n = 60
    i = mseq(1, n)
    X = np.hstack([np.sin(i) * 3 + m_mod(i, 3) * 10, np.cos(i * 2) * 2])
    C = X[0:3, :]
    for it in range(1, 4):
        D = (X ** 2).sum(axis=1, keepdims=True) - 2 * X @ C.T + (C ** 2).sum(axis=1, keepdims=True).T
        P = b2f(D == D.min(axis=1, keepdims=True))
        sizes = P.sum(axis=0, keepdims=True)
        C = (P.T @ X) / sizes.T
        o.p("iter ", it, " sizes ", float(sizes[0, 0]), " ", float(sizes[0, 1]), " ", float(sizes[0, 2]))
    o.p(tostring(C, decimal=6))
    D = (X ** 2).sum(axis=1, keepdims=True) - 2 * X @ C.T + (C ** 2).sum(axis=1, keepdims=True).T
    o.p("wcss ", float(D.min(axis=1).sum()))


@case
def pipeline_cg(o):
    n, m = 150, 8
    X = np.cos(mrow(range(1, n * m + 1), n, m) * 0.3)
    y = X @ mseq(1, m) / m + np.sin(mseq(1, n))
    lam = 0.01
    w = np.zeros((m, 1))
    r = -X.T @ y
    p = -r
    nr2 = float((r ** 2).sum())
    i = 0
    while i < m and nr2 > 1e-20:
        q = X.T @ (X @ p) + lam * p
        a = nr2 / float((p * q).sum())
        w = w + a * p
        r = r + a * q
        old = nr2
        nr2 = float((r ** 2).sum())
        p = -r + (nr2 / old) * p
        i += 1
    o.p("iterations ", i)
    o.p(tostring(w.T, decimal=6))
    direct = np.linalg.solve(X.T @ X + lam * np.eye(m), X.T @ y)
    o.p("max diff small ", bool(abs(w - direct).max() < 1e-6))
    o.p("loss ", float(((y - X @ w) ** 2).sum()))


@case
def rand_small(o):
    # from SystemDS 3.4 (rand is SystemDS-specific): the cell values and sums below are literals
    # taken from SystemDS; means are derived here from the literal sums as a consistency check.
    U = np.array([[0.453243533222923, 0.015920304163203, 0.086065888798596],
                  [0.596636059731402, 0.055753963052545, 0.054754264666909],
                  [0.461037762313174, 0.777090614345430, 0.407373903216179]])
    o.p(tostring(U, decimal=15))
    usum = 2.9078762935103613
    assert abs(usum - U.sum()) < 1e-13
    o.p("uniform sum ", usum, " mean ", usum / 9)
    o.p("uniform[-1,2] sum ", 2.995138602040433, " min ", -0.9378105430918707, " max ", 1.8161641482285615)
    N = np.array([[-0.511561012573886, -0.393406345790708, -0.982776436919665],
                  [1.372890111387299, 1.465014375257064, 0.157543197041757],
                  [-0.262780543310665, -0.689362866266785, -0.988247091021241]])
    o.p(tostring(N, decimal=15))
    nsum = -0.8326866121968302
    assert abs(nsum - N.sum()) < 1e-13
    o.p("normal sum ", nsum, " mean ", nsum / 9)
    # 10x10 at sparsity 0.3: each cell is non-zero with probability 0.3; this seed gives 29
    o.p("sparse sum ", 12.588946173958293, " nnz ", 29.0)


@case
def rand_large(o):
    # from SystemDS 3.4 (rand is SystemDS-specific)
    o.p("uniform sum ", 899854.5784780569, " mean ", 899854.5784780569 / (1500 * 1200),
        " cell ", 0.3700039389037827)
    o.p("normal sum ", 955.900707055993, " mean ", 955.900707055993 / (1500 * 1200),
        " cell ", -0.573491170668853)
    o.p("sparse sum ", 44800.19301164217, " nnz ", 89500.0, " cell ", 0.0)
    o.p("sparse[-5,5] sum ", -1105.6278693008562, " nnz ", 899711.0)


@case
def rand_properties(o):
    o.p("dims ", 40, "x", 30)
    o.p("in range ", True, " ", True)
    o.p("constant ", 60.0, " ", 3.0, " ", 3.0)
    o.p("empty ", 0.0, " ", 0.0)
    o.p("full ", 400.0, " ", True)
    o.p("sparse fraction plausible ", True, " in range ", True, " ", True)
    o.p("same seed same values ", True)
    o.p("normal moments plausible ", True, " ", True)
    o.p("unseeded dims ", 3, " ", 2)


@case
def sparse_elementwise(o):
    S = sparse_s()
    D = np.cos(mrow(range(1, 2001), 50, 40))
    r = mseq(1, 40).T / 10
    c = mseq(1, 50) / 5
    f = lambda M: float(np.asarray(M, dtype=float).sum())
    o.p("S*D ", f(S * D))
    o.p("S+D ", f(S + D))
    o.p("S-S*2 ", f(S - S * 2))
    o.p("S*3 ", f(S * 3), " S/4 ", f(S / 4))
    o.p("S+1 ", f(S + 1), " 1-S ", f(1 - S))
    o.p("S^2 ", f(S ** 2), " S^0.5 ", f(S ** 0.5))
    o.p("S%%5 ", f(m_mod(S, 5)), " S%/%5 ", f(m_idiv(S, 5)))
    o.p("S*r ", f(S * r), " S+c ", f(S + c), " S/c ", f(S / c))
    o.p("S>100 ", f(S > 100), " S==0 ", f(S == 0), " S!=0 ", f(S != 0), " S<=7 ", f(S <= 7))
    o.p("!S ", f(S == 0), " S&D ", f((S != 0) & (D != 0)), " S|D ", f((S != 0) | (D > 0.99)))
    o.p("pmin ", f(np.minimum(S, 100)), " pmax ", f(np.maximum(S, 1)), " pmaxSD ", f(np.maximum(S, D)))
    o.p("S/S ", f(S != 0))
    o.p("abs(-S) ", f(S), " exp(-S) ", f(np.exp(-S)))
    P = S * S
    o.p("S*S ", f(P), " ", float(P[1, 13]))


@case
def ops_precedence(o):
    A = np.array([[1, -2], [3, 4]], dtype=float)
    B = np.array([[2, 0], [1, -1]], dtype=float)
    o.p(tostring(-(A ** 2)))
    o.p(tostring(2 * (A @ B)))
    o.p(tostring((A @ B) / 2 + 1))
    o.p(tostring(A * m_mod(3, 2)))
    o.p(tostring(b2f((A + B * 2) > 3)))
    o.p(tostring(b2f(((A > 0) & (B != 0)) | (A == 4))))
    o.p(tostring(m_pow(A, 2 ** 0.5)))
    o.p(tostring((-A) @ (-B)))
    o.p(tostring(1 - A - B))
    o.p(tostring(m_div(m_div(A, B), 2)))
    o.p(tostring(b2f(~(A > 0))))


@case
def syntax_misc(o):
    o.p("c ", 13)
    o.p("single quotes and \"escaped\" double quotes")
    o.p("tab[\t] newline[\n]")
    o.p(1000.0, " ", 0.0025, " ", 500.0)
    o.p(1.5)
    o.p("M ", 6.0, " ", 1.0)
    o.p("braced block")


@case
def tostring_truncate(o):
    o.p(tostring(mrow(range(1, 307), 102, 3) / 2))
    o.p(tostring(mrow(range(1, 104), 1, 103)))
    o.p(tostring([[1, -2.5], [0, 4]]))


@case
def for_fractional(o):
    o.p("frac sum ", 0.0 + 0.25 + 0.5 + 0.75 + 1.0, " count ", 5, " last ", 1.0)
    o.p("2.0;1.5;1.0;")


@case
def large_dense(o):
    X = np.sin(mrow(np.arange(1, 2000001), 2000, 1000))
    Y = np.cos(mrow(np.arange(1, 1000001), 1000, 1000))
    o.p("sum ", float(X.sum()), " mean ", float(X.mean()), " sumsq ", float((X ** 2).sum()))
    o.p("min ", float(X.min()), " max ", float(X.max()), " var ", svar(X))
    rs = X.sum(axis=1)
    cs = X.sum(axis=0)
    o.p("rowSums ", float(abs(rs).sum()), " ", float(rs[1998]), " colSums ", float(abs(cs).sum()), " ", float(cs[776]))
    o.p("rowMaxs ", float(X.max(axis=1).sum()), " colMins ", float(X.min(axis=0).sum()))
    Z = X * 2 + np.exp(X) - X / 3
    o.p("chain ", float(Z.sum()))
    P = X @ Y
    o.p("mm ", float(P.sum()), " ", float(P[1499, 499]), " ", float((P ** 2).sum()))
    G = X.T @ X[:, 0:20]
    o.p("tsmm ", float(G.sum()), " ", float(G[998, 19]))
    v = mseq(1, 1000) / 1000
    o.p("mv ", float((X @ v).sum()))


@case
def large_sparse(o):
    I = mrow(np.arange(1, 2000001), 2000, 1000)
    S = (I % 97 == 0) * np.sin(I)
    D = np.cos(mrow(np.arange(1, 200001), 1000, 200))
    o.p("nnz ", float((S > 0).sum()), " ", float((S < 0).sum()))
    o.p("sum ", float(S.sum()), " mean ", float(S.mean()), " sumsq ", float((S ** 2).sum()))
    o.p("min ", float(S.min()), " max ", float(S.max()))
    rs = S.sum(axis=1)
    cs = S.sum(axis=0)
    o.p("rowSums ", float(abs(rs).sum()), " colSums ", float(abs(cs).sum()), " ", float(cs[96]))
    o.p("rowMaxs ", float(S.max(axis=1).sum()), " colMins ", float(S.min(axis=0).sum()))
    P = S @ D
    o.p("sparse x dense ", float(P.sum()), " ", float(P[96, 0]))
    Q = D.T @ S.T
    o.p("dense x sparse ", float(Q.sum()))
    o.p("sparse * dense ", float((S * np.cos(I)).sum()), " sparse + 1 ", float((S + 1).sum()))


@case
def empty_matrix(o):
    E = np.zeros((50, 40))
    D = mrow(range(1, 2001), 40, 50)
    o.p("agg ", 0.0, " ", 0.0, " ", 0.0, " ", 0.0, " ", 0.0, " ", 0.0)
    o.p("rowcol ", 0.0, " ", 0.0, " ", 0.0, " ", 0.0)
    o.p("mm ", 50, "x", 50, " ", 0.0, " ", 0.0)
    o.p("mm2 ", 0.0, " ", 0.0)
    o.p("ew ", 2000.0, " ", 0.0, " ", 2000.0, " ", 2000.0)
    E[2, 3] = 2
    o.p("after set ", 2.0, " ", 2.0)
    o.p(tostring(E[1:4, 2:5]))
    o.p("t ", 40, " ", 2.0)
    o.p("cumsum ", float(np.cumsum(E, axis=0).sum()))


# ================================================================ main

def main(names):
    for name in names or sorted(CASES):
        o = Out()
        CASES[name](o)
        with open(os.path.join(HERE, name + ".expected"), "w") as f:
            f.write(o.text())


if __name__ == "__main__":
    unknown = [n for n in sys.argv[1:] if n not in CASES]
    if unknown:
        sys.exit("unknown case(s): " + ", ".join(unknown))
    main(sys.argv[1:])
