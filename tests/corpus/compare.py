#!/usr/bin/env python3
"""Compares an actual stdout with a corpus .expected file, the way tests/corpus.rs does.

Usage: compare.py EXPECTED ACTUAL
Lines are compared one by one after splitting on whitespace. Tokens that parse as numbers are
compared with a relative tolerance of 1e-9 (absolute 1e-12 near zero); an integer token must
match an integer token and a double token a double token. Everything else must match exactly.
Exits 0 when they agree, 1 (printing the first difference) otherwise.
"""
import math
import re
import sys

INT_RE = re.compile(r"^[+-]?\d+$")
DOUBLE_RE = re.compile(r"^[+-]?(\d+\.\d*([eE][+-]?\d+)?|\d+[eE][+-]?\d+|NaN|Infinity)$")


def kind(tok):
    if INT_RE.match(tok):
        return "int"
    if DOUBLE_RE.match(tok):
        return "double"
    return None


def close(a, b):
    if math.isnan(a) or math.isnan(b):
        return math.isnan(a) and math.isnan(b)
    if math.isinf(a) or math.isinf(b):
        return a == b
    return abs(a - b) <= max(1e-12, 1e-9 * max(abs(a), abs(b)))


def token_eq(e, a):
    ke, ka = kind(e), kind(a)
    if ke is None or ka is None:
        return e == a
    if ke != ka:
        return False
    return close(float(e), float(a))


def compare(expected, actual):
    el, al = expected.split("\n"), actual.split("\n")
    # A trailing newline yields one empty last element on both sides; ignore trailing blank lines.
    while el and el[-1].strip() == "":
        el.pop()
    while al and al[-1].strip() == "":
        al.pop()
    for i in range(max(len(el), len(al))):
        e = el[i].split() if i < len(el) else None
        a = al[i].split() if i < len(al) else None
        if e is None or a is None:
            return "line %d: %s" % (i + 1, "missing in actual" if a is None else "extra in actual: %r" % al[i])
        if len(e) != len(a) or not all(token_eq(x, y) for x, y in zip(e, a)):
            return "line %d:\n  expected: %s\n  actual:   %s" % (i + 1, el[i], al[i])
    return None


if __name__ == "__main__":
    with open(sys.argv[1]) as f:
        exp = f.read()
    with open(sys.argv[2]) as f:
        act = f.read()
    diff = compare(exp, act)
    if diff:
        print(diff)
        sys.exit(1)
