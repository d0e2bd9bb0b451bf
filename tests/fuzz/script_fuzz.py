#!/usr/bin/env python3
"""Differential testing of lafuse with random structured DML scripts.

Each seed generates one script: matrices of one random shape (m x 1 included), a sparse one, row
and column vectors, a function with two results; then statements that reassign their inputs
inside `for` and `while` loops, left indexing, `cbind`, branches on aggregates, `toString`,
and the fusion patterns (`t(X) %*% (w * (X %*% v))`, row and column aggregates, element-wise
chains with broadcasting). The script is run by a baseline and by candidates, and their printed
numbers must agree within 1e-9 relative (NaN with NaN, infinities exactly).

`--grammar wide` writes, besides, positive factors `U`, `V` with the Outer patterns over them,
functions that make NaN and infinities (`log`, `sqrt`, division by zero), `ifelse`,
`replace`, `%%`, `^`, column and mean aggregates, `cumsum`, `var` and shared full aggregates.

Two modes:

* `--against unfused` (default): the baseline is `lafuse run --fusion none`; the candidates are
  `gen`, `fa` and `fnr` on native code fused at every block's first run (`--jit llvm`: the
  default tiered JIT runs blocks this small unfused), `gen` under the default JIT, and `gen`
  on the reference backend. A candidate that fails where the baseline runs is a mismatch too.
  No peer is needed.
* `--against systemds`: the baseline is Apache SystemDS 3.4 unfused (`--base`, through
  `--systemds`, e.g. `../shared/tools/systemds`), the candidate `lafuse run` (fusion `gen`,
  `--jit llvm`).
  Scripts SystemDS rejects (it broadcasts only on the right of a binary operator) are skipped.
  Every mismatch met so far was a SystemDS defect (see `tests/codegen_patterns/README.md`);
  `--avoid-systemds-defects` leaves out `&`, whose matrix-literal form SystemDS gets wrong and
  which most of those scripts met.

Usage:
    tests/fuzz/script_fuzz.py [--against unfused|systemds] [--systemds PATH] [--lafuse PATH]
                              [--keep DIR] [--avoid-systemds-defects] [--grammar base|wide]
                              FIRST_SEED [LAST_SEED]

It prints one line per mismatch or failure and a summary, keeps the scripts and outputs of the
mismatching seeds in `--keep` (default: a temporary directory), and exits with 1 if any seed
mismatched. SystemDS takes about 1 s per script (JVM start), lafuse about 0.05 s per run.
"""

import argparse
import math
import os
import random
import subprocess
import sys
import tempfile

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


class Generator:
    """One script per seed; the same seed always gives the same script."""

    def __init__(self, seed, avoid_systemds_defects):
        self.r = random.Random(seed)
        self.avoid = avoid_systemds_defects
        self.m = self.r.choice([7, 120, 400, 1500])
        self.n = self.r.choice([1, 5, 64, 300])

    def prelude(self):
        r, m, n = self.r, self.m, self.n
        sp = r.choice([0.01, 0.05, 0.3])
        return f"""X = rand(rows={m}, cols={n}, min=-2, max=2, seed=1)
S = rand(rows={m}, cols={n}, min=-1, max=3, sparsity={sp}, seed=2)
c = rand(rows={m}, cols=1, min=0.5, max=1.5, seed=3)
r = rand(rows=1, cols={n}, min=-1, max=1, seed=4)
v = rand(rows={n}, cols=1, min=-1, max=1, seed=5)
V2 = rand(rows={n}, cols=2, min=-1, max=1, seed=6)
s = 2.5
f = function(matrix[double] A, double k) return (matrix[double] B, double t) {{
  B = A * k + abs(A)
  t = sum(B ^ 2)
}}
"""

    def matrix(self, depth=2):
        """A matrix expression of the script's shape."""
        r = self.r
        if depth == 0:
            return r.choice(["X", "S", "X", "S", "(X * S)"])
        k = r.random()
        a = self.matrix(depth - 1)
        if k < 0.3:
            return f"{r.choice(['exp', 'abs', 'round', 'sigmoid', 'floor'])}({a})"
        if k < 0.6:
            ops = ["+", "-", "*", ">", "<=", "!="] + ([] if self.avoid else ["&"])
            op = r.choice(ops)
            # A matrix, a column or row vector, a scalar variable or a literal.
            rhs = r.choice([self.matrix(depth - 1), "c", "r", "s", "0", "1.5", "r"])
            return f"({a} {op} {rhs})"
        if k < 0.7:
            return f"({a} / (abs({self.matrix(depth - 1)}) + 1))"
        if k < 0.8:
            return f"({a} * rowSums({self.matrix(depth - 1)}))"
        if k < 0.9:
            return f"({a} - rowMaxs({self.matrix(depth - 1)}))"
        return f"min({a}, {self.matrix(depth - 1)})"

    def statement(self, depth=0):
        r, n = self.r, self.n
        k = r.random()
        e = self.matrix(r.randint(1, 3))
        if k < 0.12:
            return f"print(sum({e}))"
        if k < 0.2:
            if n <= 5:
                return f"print(toString(colSums({e}), decimal=6))"
            return f"print(sum(colSums({e})^2))"
        if k < 0.28:
            return f"y = {e} %*% v\nprint(sum(y) + sum(t({e}) %*% y))"
        if k < 0.36:
            return f"Q = t(X) %*% (({e} %*% V2) * c)\nprint(sum(Q))"
        if k < 0.44:
            return f"X = {e}\nprint(sum(X) + nrow(X))"
        if k < 0.52 and depth == 0:
            return f"for (i in 1:3) {{\n  {self.statement(1)}\n  S = S * 0.5 + {e} * 0.1\n}}"
        if k < 0.58:
            return f"[B, t] = f({e}, s)\nprint(t + sum(B))"
        if k < 0.66:
            return f"Z = {e}\nZ[1, ] = matrix(7, 1, ncol(Z))\nprint(sum(Z * S))"
        if k < 0.72:
            return f"W = cbind({e}, c)\nprint(sum(W - rowMaxs(W)))"
        if k < 0.78 and depth == 0:
            return (
                f"k = 0\nwhile (k < 2) {{\n  k = k + 1\n  c = c + rowSums({e}) * 0.01\n}}\n"
                "print(sum(c))"
            )
        if k < 0.84:
            return f"print(min({e}) + max({e}) + mean({e}))"
        if k < 0.9:
            return f"print(sum(rowSums({e}) * c) + sum(rowMins({e})))"
        if k < 0.95:
            return f"if (sum({e}) > 0) {{ s = s + 1 }} else {{ s = s - 1 }}\nprint(s)"
        return f"print(sum(({e}) ^ 2) + sum(({e}) * ({e})))"

    def script(self):
        prelude = self.prelude()
        body = [self.statement() for _ in range(self.r.randint(2, 6))]
        return prelude + "\n".join(body) + "\n"


class WideGenerator(Generator):
    """`--grammar wide`: the scripts of `Generator` plus what it never writes. Positive factors
    `U`, `V` and the Outer patterns over them (left, right, cell-wise and aggregating, with `S`
    as the sparse driver); functions that turn values into NaN or infinities (`log`, `sqrt` of
    negatives, division by zero) and those that decide a skeleton's sparse-safety (`sign`,
    `ceil`, `%%`, `^`, `ifelse`, `replace`); column, mean and min/max aggregates, `cumsum`,
    `var`; full aggregates of shared inputs (MultiAgg). Kept apart so that the seeds of the
    default grammar still write the scripts quoted elsewhere."""

    def __init__(self, seed, avoid_systemds_defects):
        super().__init__(seed, avoid_systemds_defects)
        # Outer needs both sides above 256; make that shape likelier than in the base grammar.
        # SystemDS's weighted cross-entropy rewrite is wrong for a single-column X.
        self.n = self.r.choice([5, 64, 300, 300] if self.avoid else [1, 5, 64, 300, 300])

    def prelude(self):
        m, n = self.m, self.n
        return super().prelude() + (
            f"U = rand(rows={m}, cols=3, min=0, max=1, seed=7)\n"
            f"V = rand(rows={n}, cols=3, min=0, max=1, seed=8)\n"
            f"P = rand(rows={m}, cols={n}, min=0.1, max=2, seed=9)\n"
        )

    def matrix(self, depth=2):
        r = self.r
        if depth == 0:
            return r.choice(["X", "S", "P", "(X * S)", "(U %*% t(V))", "S"])
        k = r.random()
        a = self.matrix(depth - 1)
        if k < 0.25:
            f = r.choice(["exp", "abs", "round", "sigmoid", "floor", "ceil", "sign", "tanh",
                          "sin", "cos", "sqrt", "log"])
            if f in ("sqrt", "log") and r.random() < 0.5:
                return f"{f}(abs({a}) + 1)"
            return f"{f}({a})"  # sqrt and log of negatives: NaN; log(0): -Infinity
        if k < 0.5:
            # SystemDS gets a matrix `|` a numeric literal wrong, as `&`.
            ops = ["+", "-", "*", "/", ">", ">=", "<", "==", "!=", "%%", "^"]
            ops += [] if self.avoid else ["|"]
            op = r.choice(ops)
            if op == "^":
                return f"({a} ^ {r.choice(['2', '3', '0.5'])})"
            if op == "%%":
                return f"({a} %% {r.choice(['3', '0.7', 's'])})"
            # Division by a matrix or vector with zeros gives infinities and NaN.
            rhs = r.choice([self.matrix(depth - 1), "c", "r", "s", "0", "2", "r"])
            return f"({a} {op} {rhs})"
        if k < 0.58:
            b = self.matrix(depth - 1)
            return f"ifelse({a} > 0, {a}, {b})"
        if k < 0.64:
            pat = r.choice(["0", "NaN", "1"])
            return f"replace(target={a}, pattern={pat}, replacement={r.choice(['0', '-1', '2'])})"
        if k < 0.72:
            agg = r.choice(["rowMeans", "rowMins", "rowMaxs", "rowSums"])
            return f"({a} * {agg}({self.matrix(depth - 1)}))"
        if k < 0.8:
            agg = r.choice(["colMeans", "colMaxs", "colMins", "colSums"])
            return f"({a} - {agg}({self.matrix(depth - 1)}))"
        if k < 0.9:
            # `a * 0` carries a's NaN and infinities into the factor of the sparse S, whose
            # zeros then give NaN; SystemDS skips them (0 * Infinity is 0 there).
            f = r.choice(["log", "exp", "abs"])
            if self.avoid:
                return f"(S * {f}(U %*% t(V) + 1e-15))"
            return f"(S * {f}(U %*% t(V) + {a} * 0 + 1e-15))"
        if self.avoid:  # SystemDS gets nested min and max over sparse operands wrong
            return f"({a} + {self.matrix(depth - 1)})"
        return f"{r.choice(['min', 'max'])}({a}, {self.matrix(depth - 1)})"

    def statement(self, depth=0):
        r = self.r
        k = r.random()
        if k < 0.5:
            return super().statement(depth)
        e = self.matrix(r.randint(1, 3))
        if k < 0.56:
            return f"print(sum(S * log(U %*% t(V) + 1e-15)))"
        if k < 0.6:
            return f"print(sum((S != 0) * (U %*% t(V))) + sum(S * (U %*% t(V))))"
        if k < 0.64:
            return f"O = t(t(U) %*% (S * (U %*% t(V))))\nprint(sum(O) + sum(O ^ 2))"
        if k < 0.68:
            return f"L = (S * (U %*% t(V))) %*% V\nprint(sum(L))"
        if k < 0.72:
            return f"print(sum((S != 0) * (S - U %*% t(V)) ^ 2))"
        if k < 0.76:
            return f"print(sum(colMaxs({e})) + sum(colMins({e})) + sum(rowMeans({e})))"
        if k < 0.8:
            return f"print(var({e}) + mean({e}))"
        if k < 0.84:
            return f"print(sum(cumsum({e})))"
        if k < 0.9:
            return f"a = sum({e} * X)\nb = sum({e} * S)\nq = sum(X ^ 2)\nprint(a + b + q)"
        if k < 0.95:
            return f"print(sum(colSums({e}) * r) + sum(t({e}) %*% c))"
        return f"print(max({e}) - min({e}))"


def numbers_agree(a, b):
    """Whitespace-separated tokens; numbers within 1e-9 relative, the rest exactly."""
    ta, tb = a.split(), b.split()
    if len(ta) != len(tb):
        return False
    for x, y in zip(ta, tb):
        try:
            p = float(x.replace("Infinity", "inf"))
            q = float(y.replace("Infinity", "inf"))
        except ValueError:
            if x != y:
                return False
            continue
        if math.isnan(p) or math.isnan(q):
            if not (math.isnan(p) and math.isnan(q)):
                return False
        elif math.isinf(p) or math.isinf(q):
            if p != q:
                return False
        elif abs(p - q) > 1e-9 * (1 + max(abs(p), abs(q))):
            return False
    return True


def run(cmd, timeout=300):
    """(ok, stdout) of a command; a timeout counts as a failure."""
    try:
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, cwd=REPO)
    except subprocess.TimeoutExpired:
        return False, "timeout"
    return p.returncode == 0, p.stdout + (p.stderr if p.returncode else "")


def systemds_output(systemds, script):
    """SystemDS's printed lines (its statistics and JVM warnings cut), or None if it failed."""
    ok, out = run([systemds, script, "--base"])
    if not ok or "An Error Occurred" in out or "Exception" in out:
        return None
    lines = []
    for line in out.splitlines():
        if line.startswith("SystemDS Statistics"):
            break
        if "WARN" in line or not line.strip():
            continue
        lines.append(line)
    return "\n".join(lines)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("first", type=int)
    ap.add_argument("last", type=int, nargs="?")
    ap.add_argument("--against", choices=["unfused", "systemds"], default="unfused")
    ap.add_argument("--systemds", help="SystemDS launcher (e.g. ../shared/tools/systemds)")
    ap.add_argument("--lafuse", default=os.path.join(REPO, "target/release/lafuse"))
    ap.add_argument("--keep", help="directory for the scripts and outputs of mismatches")
    ap.add_argument("--avoid-systemds-defects", action="store_true")
    ap.add_argument(
        "--grammar", choices=["base", "wide"], default="base",
        help="`wide` adds Outer patterns, NaN/infinity producers and more aggregates",
    )
    args = ap.parse_args()
    if args.against == "systemds" and not args.systemds:
        ap.error("--against systemds needs --systemds PATH")
    if not os.path.exists(args.lafuse):
        ap.error(f"{args.lafuse} not found: build it with `cargo build --release`")
    keep = args.keep or tempfile.mkdtemp(prefix="lafuse-fuzz-")
    os.makedirs(keep, exist_ok=True)
    last = args.last if args.last is not None else args.first
    counts = {"agree": 0, "mismatch": 0, "skipped": 0}
    for seed in range(args.first, last + 1):
        gen = WideGenerator if args.grammar == "wide" else Generator
        text = gen(seed, args.avoid_systemds_defects).script()
        path = os.path.join(keep, f"s{seed}.dml")
        with open(path, "w") as f:
            f.write(text)
        if args.against == "systemds":
            base = systemds_output(args.systemds, path)
            if base is None:
                counts["skipped"] += 1
                os.remove(path)
                continue
            candidates = {"gen": [args.lafuse, "run", path, "--jit", "llvm"]}
        else:
            ok, base = run([args.lafuse, "run", path, "--fusion", "none"])
            if not ok:
                counts["skipped"] += 1
                os.remove(path)
                continue
            candidates = {
                p: [args.lafuse, "run", path, "--fusion", p, "--jit", "llvm"]
                for p in ("gen", "fa", "fnr")
            }
            candidates["gen-default-jit"] = [args.lafuse, "run", path, "--fusion", "gen"]
            candidates["gen-reference"] = [
                args.lafuse, "run", path, "--fusion", "gen", "--fusion-backend", "reference"
            ]
        bad = []
        for name, cmd in candidates.items():
            ok, out = run(cmd)
            if not ok or not numbers_agree(base, out):
                bad.append(name)
                with open(os.path.join(keep, f"s{seed}.{name}.out"), "w") as f:
                    f.write(out)
        if bad:
            counts["mismatch"] += 1
            with open(os.path.join(keep, f"s{seed}.baseline.out"), "w") as f:
                f.write(base)
            print(f"MISMATCH seed {seed}: {', '.join(bad)} (files in {keep})", flush=True)
        else:
            counts["agree"] += 1
            os.remove(path)
    print(
        f"{counts['agree']} agree, {counts['mismatch']} mismatch, {counts['skipped']} skipped "
        f"(the baseline failed) of seeds {args.first}..{last} against {args.against}"
    )
    sys.exit(1 if counts["mismatch"] else 0)


if __name__ == "__main__":
    main()
