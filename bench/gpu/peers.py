#!/usr/bin/env python3
"""GPU peers for lafuse's GPU benchmarks: CuPy, PyTorch eager and torch.compile on float64.

Times the same expressions in each system on one CUDA device and prints one JSON object per line:

    {"system": "cupy", "pattern": "cell", "rows": R, "cols": C, "median_ms": ..., "min_ms": ...,
     "max_ms": ..., "gbps": bytes/median, "bytes": ..., "reps": N, "result": ...}

`gbps` is bytes / median time in GB/s (1e9 bytes), with `bytes` the data the pattern must at least
move (listed in PATTERNS), so that it reads as a fraction of the device's memory bandwidth; the
`copy` pattern (device-to-device copy of X, read + write) gives that bandwidth as each system
reaches it. `result` is the computed value (a list for magg, the sum of the result vector for row),
so that the systems can be checked against each other.

A system that cannot be imported, or a pattern that fails in it (e.g. torch.compile without a
working Triton), prints {"system", ["pattern",] "skipped": reason} instead; the script goes on and
exits 0. Bad arguments exit 2. The first line describes the environment ("system": "env").

Patterns, over X, Y, Z dense rows x cols uniform [0, 1) (seeded), v a cols x 1 vector, S a sparse
rows x cols matrix with density --nnz-frac, U rows x 10 and V cols x 10 (uniform (0, 1)):

    cell        sum(X * Y * Z)                              bytes 3 * rows * cols * 8
    magg        [sum(X * Y), sum(X * Z)], one call          bytes 3 * rows * cols * 8
    row         t(X) @ (X @ v)                              bytes rows * cols * 8
    outer       sum(S * log(U @ t(V) + 1e-15)) at S's non-zeros only: gather U's and V's rows per
                non-zero, row-wise dot (CuPy: from a cupyx.scipy.sparse CSR S; torch: indexing)
                                                            bytes nnz * (8 + 2 * 8) + (rows + cols) * 10 * 8
    outer-dense the same with S dense (zeros included) and U @ t(V) materialised
                                                            bytes rows * cols * 8 + (rows + cols) * 10 * 8
    copy        a copy of X into a preallocated buffer      bytes 2 * rows * cols * 8

Timing: 3 warm-up calls per system and pattern (torch.compile compiles in the first; its time is
reported as compile_ms), then --reps rounds; in each round every system runs the pattern once, in
turn, so that clock or thermal drift hits all systems alike. Each call is timed with CUDA events
recorded on the current stream around it, after a device synchronisation.

Usage: python3 bench/gpu/peers.py [--rows 20000] [--cols 2000] [--reps 20] [--nnz-frac 0.01]
                                  [--systems cupy,torch,torch-compile] [--patterns cell,...]
"""

import argparse
import json
import math
import platform
import statistics
import sys
import time
import traceback

SYSTEMS = ("cupy", "torch", "torch-compile")
PATTERNS = ("copy", "cell", "magg", "row", "outer", "outer-dense")
WARMUPS = 3
RANK = 10  # columns of U and V in the outer pattern
EPS = 1e-15


def parse_args(argv):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--rows", type=int, default=20000)
    p.add_argument("--cols", type=int, default=2000)
    p.add_argument("--reps", type=int, default=20)
    p.add_argument("--nnz-frac", type=float, default=0.01)
    p.add_argument("--seed", type=int, default=7)
    p.add_argument("--systems", default=",".join(SYSTEMS),
                   help="comma-separated subset of " + ",".join(SYSTEMS))
    p.add_argument("--patterns", default=",".join(PATTERNS),
                   help="comma-separated subset of " + ",".join(PATTERNS))
    p.add_argument("--compile-mode", default="default",
                   help="torch.compile mode (default, reduce-overhead, max-autotune, ...)")
    p.add_argument("--verbose", action="store_true",
                   help="print the traceback of a skipped system or pattern on stderr")
    a = p.parse_args(argv)
    if a.rows < 1 or a.cols < 1:
        p.error(f"--rows and --cols must be at least 1 (got {a.rows} x {a.cols})")
    if a.reps < 1:
        p.error(f"--reps must be at least 1 (got {a.reps})")
    if not (0.0 < a.nnz_frac <= 1.0):
        p.error(f"--nnz-frac must be in (0, 1] (got {a.nnz_frac})")
    a.systems = _subset(p, "--systems", a.systems, SYSTEMS)
    a.patterns = _subset(p, "--patterns", a.patterns, PATTERNS)
    return a


def _subset(p, flag, text, allowed):
    names = [s.strip() for s in text.split(",") if s.strip()]
    bad = [n for n in names if n not in allowed]
    if bad or not names:
        p.error(f"{flag}: unknown or empty {bad or text!r}; choose from {','.join(allowed)}")
    return names


def emit(obj):
    print(json.dumps(obj), flush=True)


def pattern_bytes(pattern, rows, cols, nnz):
    """The bytes a pattern must at least move; the numerator of gbps."""
    dense = rows * cols * 8
    factors = (rows + cols) * RANK * 8
    return {
        "copy": 2 * dense,
        "cell": 3 * dense,
        "magg": 3 * dense,
        "row": dense,
        # values plus a row and a column index per non-zero, 8 bytes each as torch holds them
        # (CuPy's indices are int32: it moves a little less for the same figure).
        "outer": nnz * (8 + 2 * 8) + factors,
        "outer-dense": dense + factors,
    }[pattern]


# ----------------------------------------------------------------------------------------------
# Host data, made once with numpy so that every system computes on the same values.
# ----------------------------------------------------------------------------------------------


def make_host_data(np, rows, cols, nnz_frac, seed):
    rng = np.random.default_rng(seed)
    d = {
        "X": rng.random((rows, cols)),
        "Y": rng.random((rows, cols)),
        "Z": rng.random((rows, cols)),
        "v": rng.random((cols, 1)),
        # (0, 1]: strictly positive, so that log(U @ t(V) + eps) stays finite.
        "U": 1.0 - rng.random((rows, RANK)),
        "V": 1.0 - rng.random((cols, RANK)),
    }
    mask = rng.random((rows, cols)) < nnz_frac
    s_dense = np.where(mask, 1.0 - rng.random((rows, cols)), 0.0)
    del mask
    ri, ci = np.nonzero(s_dense)  # row-major order, as CSR holds them
    d["S_dense"] = s_dense
    d["S_rows"] = ri.astype(np.int64)
    d["S_cols"] = ci.astype(np.int64)
    d["S_vals"] = s_dense[ri, ci]
    return d


# ----------------------------------------------------------------------------------------------
# Systems. Each builds its device data and returns {pattern: zero-argument callable}, plus
# how to time a call and how to turn a result into a Python float.
# ----------------------------------------------------------------------------------------------


class CupySystem:
    name = "cupy"

    def __init__(self, host, patterns):
        import cupy as cp
        import cupyx.scipy.sparse as cpsparse

        self.cp = cp
        self.version = cp.__version__
        X, Y, Z = (cp.asarray(host[k]) for k in ("X", "Y", "Z"))
        v, U, V = (cp.asarray(host[k]) for k in ("v", "U", "V"))
        out = cp.empty_like(X)
        fns = {
            "copy": lambda: cp.copyto(out, X),
            "cell": lambda: cp.sum(X * Y * Z),
            "magg": lambda: (cp.sum(X * Y), cp.sum(X * Z)),
            "row": lambda: X.T @ (X @ v),
        }
        if "outer" in patterns or "outer-dense" in patterns:
            s_dense = cp.asarray(host["S_dense"])
            if "outer" in patterns:
                # CSR built on the device from the dense matrix; its COO row ids are expanded
                # once here, as torch gets its indices once: the timed part is the per-non-zero work.
                S = cpsparse.csr_matrix(s_dense)
                coo = S.tocoo()
                s_rows, s_cols, s_vals = coo.row, coo.col, coo.data
                fns["outer"] = lambda: cp.sum(
                    s_vals * cp.log(cp.sum(U[s_rows] * V[s_cols], axis=1) + EPS))
            if "outer-dense" in patterns:
                fns["outer-dense"] = lambda: cp.sum(s_dense * cp.log(U @ V.T + EPS))
            else:
                del s_dense
        self.fns = fns

    def sync(self):
        self.cp.cuda.Device().synchronize()

    def time_call(self, fn):
        cp = self.cp
        start, end = cp.cuda.Event(), cp.cuda.Event()
        self.sync()
        start.record()
        r = fn()
        end.record()
        end.synchronize()
        return cp.cuda.get_elapsed_time(start, end), r

    def to_float(self, x):
        return float(x.sum()) if getattr(x, "ndim", 0) else float(x)


class TorchSystem:
    name = "torch"

    def __init__(self, host, patterns, compiled=False, compile_mode="default"):
        import torch

        if not torch.cuda.is_available():
            raise RuntimeError("torch.cuda.is_available() is False (no CUDA device or driver)")
        self.torch = torch
        self.version = torch.__version__
        self.name = "torch-compile" if compiled else "torch"
        dev = torch.device("cuda")
        t = {k: torch.from_numpy(host[k]).to(dev) for k in ("X", "Y", "Z", "v", "U", "V")}
        X, Y, Z, v, U, V = (t[k] for k in ("X", "Y", "Z", "v", "U", "V"))
        out = torch.empty_like(X)
        raw = {
            "copy": (lambda x, o: o.copy_(x), (X, out)),
            "cell": (lambda x, y, z: torch.sum(x * y * z), (X, Y, Z)),
            "magg": (lambda x, y, z: (torch.sum(x * y), torch.sum(x * z)), (X, Y, Z)),
            "row": (lambda x, w: x.T @ (x @ w), (X, v)),
        }
        if "outer" in patterns:
            ri = torch.from_numpy(host["S_rows"]).to(dev)
            ci = torch.from_numpy(host["S_cols"]).to(dev)
            sv = torch.from_numpy(host["S_vals"]).to(dev)
            raw["outer"] = (
                lambda u, w, r, c, s: torch.sum(s * torch.log((u[r] * w[c]).sum(1) + EPS)),
                (U, V, ri, ci, sv))
        if "outer-dense" in patterns:
            sd = torch.from_numpy(host["S_dense"]).to(dev)
            raw["outer-dense"] = (
                lambda s, u, w: torch.sum(s * torch.log(u @ w.T + EPS)), (sd, U, V))
        self.fns = {}
        for pat, (f, args) in raw.items():
            if compiled:
                # One compiled function per pattern: each gets its own graph and kernels.
                f = torch.compile(f, mode=compile_mode)
            self.fns[pat] = (lambda f=f, args=args: f(*args))

    def sync(self):
        self.torch.cuda.synchronize()

    def time_call(self, fn):
        torch = self.torch
        start = torch.cuda.Event(enable_timing=True)
        end = torch.cuda.Event(enable_timing=True)
        self.sync()
        start.record()
        r = fn()
        end.record()
        end.synchronize()
        return start.elapsed_time(end), r

    def to_float(self, x):
        return float(x.sum().item()) if x.dim() else float(x.item())


def result_value(system, r):
    if isinstance(r, tuple):
        return [system.to_float(x) for x in r]
    return system.to_float(r)


# ----------------------------------------------------------------------------------------------


def env_line(args, np, nnz):
    info = {"system": "env", "python": platform.python_version(), "numpy": np.__version__,
            "rows": args.rows, "cols": args.cols, "reps": args.reps, "nnz_frac": args.nnz_frac,
            "nnz": nnz, "seed": args.seed, "warmups": WARMUPS}
    try:
        import torch

        info["torch"] = torch.__version__
        info["torch_cuda"] = torch.version.cuda
        if torch.cuda.is_available():
            info["device"] = torch.cuda.get_device_name(0)
    except Exception as exc:
        info["torch"] = f"unavailable: {type(exc).__name__}: {exc}"
    try:
        import cupy

        info["cupy"] = cupy.__version__
        info["cuda_runtime"] = cupy.cuda.runtime.runtimeGetVersion()
        if "device" not in info:
            props = cupy.cuda.runtime.getDeviceProperties(0)
            info["device"] = props["name"].decode()
    except Exception as exc:
        info["cupy"] = f"unavailable: {type(exc).__name__}: {exc}"
    return info


def reason(exc):
    # The last line of the exception text: torch.compile's errors carry pages of context.
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[-1] if text else ''}"[:500]


def main(argv):
    args = parse_args(argv)
    try:
        import numpy as np
    except Exception as exc:
        print(f"peers.py: numpy is needed to make the inputs: {reason(exc)}", file=sys.stderr)
        return 1
    host = make_host_data(np, args.rows, args.cols, args.nnz_frac, args.seed)
    nnz = int(host["S_vals"].size)
    emit(env_line(args, np, nnz))

    systems = []
    for name in args.systems:
        try:
            if name == "cupy":
                s = CupySystem(host, args.patterns)
            else:
                s = TorchSystem(host, args.patterns, compiled=(name == "torch-compile"),
                                compile_mode=args.compile_mode)
            systems.append(s)
        except Exception as exc:
            emit({"system": name, "skipped": f"setup failed: {reason(exc)}"})
            if args.verbose:
                traceback.print_exc()
    del host

    for pattern in args.patterns:
        live, compile_ms, results = [], {}, {}
        for s in systems:
            try:
                fn = s.fns[pattern]
                t0 = time.perf_counter()
                for i in range(WARMUPS):
                    s.time_call(fn)
                    if i == 0:
                        compile_ms[s.name] = (time.perf_counter() - t0) * 1e3
                live.append(s)
            except Exception as exc:
                emit({"system": s.name, "pattern": pattern, "skipped": reason(exc)})
                if args.verbose:
                    traceback.print_exc()
        times = {s.name: [] for s in live}
        failed = set()
        for _ in range(args.reps):
            for s in live:
                if s.name in failed:
                    continue
                try:
                    ms, r = s.time_call(s.fns[pattern])
                    times[s.name].append(ms)
                    results[s.name] = r
                except Exception as exc:
                    failed.add(s.name)
                    emit({"system": s.name, "pattern": pattern, "skipped": f"failed while timed: {reason(exc)}"})
        nbytes = pattern_bytes(pattern, args.rows, args.cols, nnz)
        for s in live:
            ts = times[s.name]
            if s.name in failed or not ts:
                continue
            med = statistics.median(ts)
            line = {"system": s.name, "pattern": pattern, "rows": args.rows, "cols": args.cols,
                    "median_ms": med, "min_ms": min(ts), "max_ms": max(ts),
                    "gbps": nbytes / (med * 1e-3) / 1e9 if med > 0 else math.inf,
                    "bytes": nbytes, "reps": len(ts), "version": s.version}
            if pattern in ("outer", "outer-dense"):
                line["nnz"] = nnz
            if s.name == "torch-compile":
                line["compile_ms"] = compile_ms.get(s.name)
            if pattern != "copy":
                try:
                    line["result"] = result_value(s, results[s.name])
                except Exception as exc:
                    line["result"] = f"unreadable: {reason(exc)}"
            emit(line)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
