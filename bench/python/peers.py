#!/usr/bin/env python3
"""Python peers for the `lafuse bench` harness: numpy (+ scipy.sparse), numexpr and JAX.

Each peer evaluates the same micro patterns as examples/micro/*.dml and the same algorithms as
examples/algorithms/*.dml on inputs of the same shapes, sparsity and value distributions (the values
themselves differ: Python's random generator is not SystemDS's), in float64, and reports per
repetition wall times.

Interface (the contract with the harness, see bench/python/README.md):

    PY peers.py --list
        one JSON object: {"python": ..., "peers": {"numpy": ver|null, ...}, "skipped": {peer: why},
        plus informational keys "scipy", "jax_backend" and "cases" (case -> parameter defaults)
    PY peers.py --case NAME --reps N [--param k=v ...]
        one JSON line per peer (numpy, numexpr, jax), either
        {"peer", "case", "times_ms": [N numbers], "compile_ms": null|number, "result": number|null}
        or {"peer", "case", "skipped": "reason"}

A peer that fails prints a "skipped" line with the error text; the script still exits 0 so the other
peers' lines count. Bad arguments exit 2 with a message on stderr.
"""

import argparse
import functools
import json
import math
import os
import platform
import statistics
import sys
import time
import traceback

PEERS = ("numpy", "numexpr", "jax")

# ----------------------------------------------------------------------------------------------
# Optional libraries, detected once. Each entry is (module or None, version or None, reason).
# ----------------------------------------------------------------------------------------------


def _try_import(name):
    try:
        mod = __import__(name)
        return mod, getattr(mod, "__version__", "unknown"), None
    except Exception as exc:  # ImportError, or a broken install raising something else
        return None, None, f"{type(exc).__name__}: {exc}"


np, NUMPY_VERSION, NUMPY_ERR = _try_import("numpy")
ne, NUMEXPR_VERSION, NUMEXPR_ERR = _try_import("numexpr")
try:
    import scipy.sparse as sps  # noqa: E402

    import scipy  # noqa: E402

    SCIPY_VERSION, SCIPY_ERR = scipy.__version__, None
except Exception as exc:
    sps, SCIPY_VERSION, SCIPY_ERR = None, None, f"{type(exc).__name__}: {exc}"

jax = jnp = jsparse = None
JAX_VERSION, JAX_ERR, JAX_BACKEND = None, None, None
try:
    import jax  # noqa: E402

    # float64 everywhere, as in lafuse and SystemDS; must be set before any array exists.
    jax.config.update("jax_enable_x64", True)
    import jax.numpy as jnp  # noqa: E402
    from jax.experimental import sparse as jsparse  # noqa: E402

    JAX_VERSION = jax.__version__
    JAX_BACKEND = jax.default_backend()
except Exception as exc:
    jax = jnp = jsparse = None
    JAX_ERR = f"{type(exc).__name__}: {exc}"

if np is None:
    # Every peer computes its inputs with numpy, so without it every peer is skipped.
    NUMEXPR_ERR = NUMEXPR_ERR or "numpy is not installed (inputs are generated with numpy)"
    JAX_ERR = JAX_ERR or "numpy is not installed (inputs are generated with numpy)"


def peer_status():
    """(versions, skipped reasons) per peer, as --list reports them."""
    versions = {"numpy": NUMPY_VERSION, "numexpr": NUMEXPR_VERSION, "jax": JAX_VERSION}
    errors = {"numpy": NUMPY_ERR, "numexpr": NUMEXPR_ERR, "jax": JAX_ERR}
    if np is None:
        versions = {p: None for p in PEERS}
    skipped = {p: errors[p] for p in PEERS if versions[p] is None}
    return versions, skipped


class Skip(Exception):
    """A peer cannot run a case for a reason that is not an error (e.g. no sparse support)."""


# ----------------------------------------------------------------------------------------------
# Input generation (numpy only; shared by all peers, excluded from the times)
# ----------------------------------------------------------------------------------------------


class Sparse:
    """A sparse matrix in CSR arrays, plus each non-zero's row (COO view) for gathers."""

    def __init__(self, shape, data, indices, indptr):
        self.shape = shape
        self.data = data
        self.indices = indices
        self.indptr = indptr
        self.rows = np.repeat(np.arange(shape[0], dtype=np.int64), np.diff(indptr))
        self.nnz = int(data.size)

    def scipy(self):
        if sps is None:
            raise Skip(f"scipy.sparse is needed for sparse X (sp < 1) but unavailable: {SCIPY_ERR}")
        return sps.csr_matrix((self.data, self.indices, self.indptr), shape=self.shape)

    def bcoo(self):
        idx = np.stack([self.rows, self.indices.astype(np.int64)], axis=1)
        return jsparse.BCOO((jnp.asarray(self.data), jnp.asarray(idx)), shape=self.shape)

    def dense(self):
        out = np.zeros(self.shape)
        out[self.rows, self.indices] = self.data
        return out


def rand_matrix(rng, m, n, sp=1.0, lo=0.0, hi=1.0):
    """Like DML rand(rows=m, cols=n, min=lo, max=hi, sparsity=sp): uniform values in [lo, hi) at
    round(sp*m*n) distinct random positions; a dense ndarray when sp >= 1, else a Sparse."""
    if sp >= 1.0:
        return lo + (hi - lo) * rng.random((m, n))
    total = m * n
    nnz = int(round(sp * total))
    lin = np.sort(rng.choice(total, size=nnz, replace=False, shuffle=False)).astype(np.int64)
    rows, cols = np.divmod(lin, n)
    indptr = np.zeros(m + 1, dtype=np.int64)
    np.cumsum(np.bincount(rows, minlength=m), out=indptr[1:])
    data = lo + (hi - lo) * rng.random(nnz)
    return Sparse((m, n), data, cols.astype(np.int32), indptr)


def sparse_matvec(X, w):
    """X %*% w for a Sparse X and an n x 1 w, with numpy only (the generators need no scipy)."""
    return np.bincount(X.rows, weights=X.data * w[X.indices, 0], minlength=X.shape[0]).reshape(-1, 1)


def as_numpy_matrix(X):
    """Dense ndarray as is, a Sparse as scipy CSR (so X @ v and X.T @ v work for both)."""
    return X.scipy() if isinstance(X, Sparse) else X


def as_jax_matrix(X):
    """Dense as a jax array, a Sparse as a BCOO matrix (jax.experimental.sparse)."""
    return X.bcoo() if isinstance(X, Sparse) else jnp.asarray(X)


def block(x):
    """Wait for a JAX computation (times must include the work, not just its dispatch)."""
    return jax.block_until_ready(x)


def need_numexpr():
    if ne is None:
        raise Skip(f"numexpr not installed: {NUMEXPR_ERR}")


def need_jax():
    if jax is None:
        raise Skip(f"jax not installed: {JAX_ERR}")


# ----------------------------------------------------------------------------------------------
# Micro patterns (examples/micro/*.dml). Each builder takes (inputs, params) and returns a
# zero-argument callable that evaluates the expression once and returns the result scalar.
# ----------------------------------------------------------------------------------------------

MICRO_DEFAULTS = {"m": 100000, "n": 1000, "sp": 1.0}


def gen_sum_xyz(p):
    """X, Y and Z all at sparsity sp (examples/micro/sum_xyz.dml)."""
    rng = np.random.default_rng(1)
    return {k: rand_matrix(rng, p["m"], p["n"], p["sp"]) for k in "XYZ"}


def sparse_lin(X):
    """Flat (row-major) positions of X's non-zeros, to gather from dense operands."""
    return X.rows * X.shape[1] + X.indices


def np_sum_xyz(d, p):
    X, Y, Z = d["X"], d["Y"], d["Z"]
    if isinstance(X, Sparse):
        Xs, Ys, Zs = X.scipy(), Y.scipy(), Z.scipy()
        # Element-wise products of CSR matrices stay CSR (the intersection of the patterns).
        return lambda: float(Xs.multiply(Ys).multiply(Zs).sum())
    return lambda: float(np.sum(X * Y * Z))


def ne_sum_xyz(d, p):
    need_numexpr()
    X, Y, Z = d["X"], d["Y"], d["Z"]
    if isinstance(X, Sparse):
        raise Skip("numexpr evaluates dense arrays only (all three inputs are sparse)")
    return lambda: float(ne.evaluate("sum(X * Y * Z)", {"X": X, "Y": Y, "Z": Z}))


def jx_sum_xyz(d, p):
    need_jax()
    if isinstance(d["X"], Sparse):
        # jax.experimental.sparse multiplies two BCOO matrices through an nnz x nnz
        # intermediate: 1e7 non-zeros each ask for terabytes.
        raise Skip("jax.experimental.sparse cannot multiply two large BCOO matrices (nnz x nnz memory)")
    X, Y, Z = block((jnp.asarray(d["X"]), jnp.asarray(d["Y"]), jnp.asarray(d["Z"])))
    f = jax.jit(lambda X, Y, Z: jnp.sum(X * Y * Z))
    return lambda: float(block(f(X, Y, Z)))


def gen_magg(p):
    """X at sparsity sp, Y and Z dense (examples/micro/magg.dml)."""
    rng = np.random.default_rng(1)
    return {
        "X": rand_matrix(rng, p["m"], p["n"], p["sp"]),
        "Y": rand_matrix(rng, p["m"], p["n"]),
        "Z": rand_matrix(rng, p["m"], p["n"]),
    }


def np_magg(d, p):
    X, Y, Z = d["X"], d["Y"], d["Z"]
    if isinstance(X, Sparse):
        Xs = X.scipy()
        return lambda: float(Xs.multiply(Y).sum() + Xs.multiply(Z).sum())
    return lambda: float(np.sum(X * Y) + np.sum(X * Z))


def ne_magg(d, p):
    need_numexpr()
    X, Y, Z = d["X"], d["Y"], d["Z"]
    if isinstance(X, Sparse):
        lin, xd, yf, zf = sparse_lin(X), X.data, Y.ravel(), Z.ravel()

        def run():
            a = ne.evaluate("sum(xd * yg)", {"xd": xd, "yg": yf.take(lin)})
            b = ne.evaluate("sum(xd * zg)", {"xd": xd, "zg": zf.take(lin)})
            return float(a + b)

        return run
    # numexpr has no multi-output reductions: two evaluations, each reading X.
    return lambda: float(ne.evaluate("sum(X * Y)", {"X": X, "Y": Y}) + ne.evaluate("sum(X * Z)", {"X": X, "Z": Z}))


def jx_magg(d, p):
    need_jax()
    X, Y, Z = block((as_jax_matrix(d["X"]), jnp.asarray(d["Y"]), jnp.asarray(d["Z"])))
    if isinstance(d["X"], Sparse):
        f = jax.jit(jsparse.sparsify(lambda X, Y, Z: (X * Y).sum() + (X * Z).sum()))
    else:
        f = jax.jit(lambda X, Y, Z: jnp.sum(X * Y) + jnp.sum(X * Z))
    return lambda: float(block(f(X, Y, Z)))


def gen_row_mv(p):
    rng = np.random.default_rng(1)
    return {
        "X": rand_matrix(rng, p["m"], p["n"], p["sp"]),
        "v": rand_matrix(rng, p["n"], 1),
        "w": rand_matrix(rng, p["m"], 1),
    }


def np_row_mv(d, p):
    X, v, w = as_numpy_matrix(d["X"]), d["v"], d["w"]
    return lambda: float(np.sum(X.T @ (w * (X @ v))))


def ne_row_mv(d, p):
    need_numexpr()
    X, v, w = as_numpy_matrix(d["X"]), d["v"], d["w"]

    # numexpr only does the element-wise weighting and the final sum; the products are BLAS/scipy.
    def run():
        q = X @ v
        r = X.T @ ne.evaluate("w * q", {"w": w, "q": q})
        return float(ne.evaluate("sum(r)", {"r": r}))

    return run


def jx_row_mv(d, p):
    need_jax()
    X, v, w = block((as_jax_matrix(d["X"]), jnp.asarray(d["v"]), jnp.asarray(d["w"])))
    # t(X) %*% q as (t(q) %*% X)^T, dense or BCOO: see JaxBackend.tmm (8x for the dense default)
    f = jax.jit(lambda X, v, w: jnp.sum(JaxBackend.tmm(X, w * (X @ v))))
    return lambda: float(block(f(X, v, w)))


def gen_row_mm(p):
    rng = np.random.default_rng(1)
    return {
        "X": rand_matrix(rng, p["m"], p["n"], p["sp"]),
        "V": rand_matrix(rng, p["n"], 2),
        "W": rand_matrix(rng, p["m"], 2),
    }


def np_row_mm(d, p):
    X, V, W = as_numpy_matrix(d["X"]), d["V"], d["W"]
    return lambda: float(np.sum(X.T @ (W * (X @ V))))


def ne_row_mm(d, p):
    need_numexpr()
    X, V, W = as_numpy_matrix(d["X"]), d["V"], d["W"]

    def run():
        Q = X @ V
        R = X.T @ ne.evaluate("W * Q", {"W": W, "Q": np.ascontiguousarray(Q)})
        return float(ne.evaluate("sum(R)", {"R": np.ascontiguousarray(R)}))

    return run


def jx_row_mm(d, p):
    need_jax()
    X, V, W = block((as_jax_matrix(d["X"]), jnp.asarray(d["V"]), jnp.asarray(d["W"])))
    f = jax.jit(lambda X, V, W: jnp.sum(JaxBackend.tmm(X, W * (X @ V))))
    return lambda: float(block(f(X, V, W)))


OUTER_DEFAULTS = {"m": 20000, "n": 20000, "k": 100, "sp": 0.001}
# Non-zeros per chunk of the sparse Outer gathers: bounds the gathered U/V rows to ~2 x 100 MB.
OUTER_CHUNK = 1 << 17


def gen_outer(p):
    rng = np.random.default_rng(1)
    return {
        "X": rand_matrix(rng, p["m"], p["n"], p["sp"]),
        "U": rand_matrix(rng, p["m"], p["k"]),
        "V": rand_matrix(rng, p["n"], p["k"]),
    }


def _outer_dots(X, U, V, lo, hi):
    """Row-wise dots U[i] . V[j] for the non-zeros lo..hi of X (the only cells X * ... needs)."""
    r, c = X.rows[lo:hi], X.indices[lo:hi]
    return np.einsum("ij,ij->i", np.take(U, r, axis=0), np.take(V, c, axis=0))


def np_outer(d, p):
    X, U, V = d["X"], d["U"], d["V"]
    if isinstance(X, Sparse):
        # Fair sparse implementation: U %*% t(V) only at X's non-zeros (sparse-safe because X * ...).
        def run():
            acc = 0.0
            for lo in range(0, X.nnz, OUTER_CHUNK):
                hi = min(lo + OUTER_CHUNK, X.nnz)
                acc += float(np.sum(X.data[lo:hi] * np.log(_outer_dots(X, U, V, lo, hi) + 1e-15)))
            return acc

        return run
    return lambda: float(np.sum(X * np.log(U @ V.T + 1e-15)))


def ne_outer(d, p):
    need_numexpr()
    X, U, V = d["X"], d["U"], d["V"]
    if isinstance(X, Sparse):

        def run():
            acc = 0.0
            for lo in range(0, X.nnz, OUTER_CHUNK):
                hi = min(lo + OUTER_CHUNK, X.nnz)
                env = {"xd": X.data[lo:hi], "uv": _outer_dots(X, U, V, lo, hi)}
                acc += float(ne.evaluate("sum(xd * log(uv + 1e-15))", env))
            return acc

        return run
    # the product is BLAS; numexpr fuses the log, the multiply and the sum
    return lambda: float(ne.evaluate("sum(X * log(P + 1e-15))", {"X": X, "P": U @ V.T}))


def jx_outer(d, p):
    need_jax()
    U, V = block((jnp.asarray(d["U"]), jnp.asarray(d["V"])))
    if isinstance(d["X"], Sparse):
        Xb = block(d["X"].bcoo())

        # BCOO data and indices: evaluate U[i] . V[j] at the non-zeros only (what sparsify cannot
        # express for log(U %*% t(V)), which is dense).
        @jax.jit
        def f(data, idx, U, V):
            dots = jnp.sum(U[idx[:, 0]] * V[idx[:, 1]], axis=1)
            return jnp.sum(data * jnp.log(dots + 1e-15))

        return lambda: float(block(f(Xb.data, Xb.indices, U, V)))
    X = block(jnp.asarray(d["X"]))
    m, n = X.shape
    # XLA:CPU (jaxlib 0.10.2) gets this fused dot + log + sum wrong once U %*% t(V) exceeds 2^31
    # bytes (at 17000 x 17000: 2e-5 relative off numpy, while 16000 x 16000 and the unfused
    # pieces are exact), so the sum runs over row blocks of at most 1 GiB of U %*% t(V).
    rb = min(m, max(1, (1 << 30) // (8 * n)))

    @functools.partial(jax.jit, static_argnames=("rows",))
    def g(X, U, V, lo, rows):
        Xb = jax.lax.dynamic_slice_in_dim(X, lo, rows, 0)
        Ub = jax.lax.dynamic_slice_in_dim(U, lo, rows, 0)
        return jnp.sum(Xb * jnp.log(Ub @ V.T + 1e-15))

    def run():
        parts = [g(X, U, V, lo, rows=min(rb, m - lo)) for lo in range(0, m, rb)]
        return float(block(sum(parts[1:], parts[0])))

    return run


# ----------------------------------------------------------------------------------------------
# Algorithms (examples/algorithms/<id>.dml). Each algorithm is one Python driver (the control flow
# of the DML script, scalars as Python floats) over a set of kernels (the matrix work of one step).
# Backends give the kernels: numpy (+ scipy.sparse CSR for sparse X), numpy with numexpr for the
# element-wise parts, and JAX with every kernel under jax.jit (X as BCOO when sparse).
# ----------------------------------------------------------------------------------------------


class NumpyBackend:
    """numpy kernels; X is an ndarray or a scipy.sparse csr_array."""

    name = "numpy"
    xp = np

    @staticmethod
    def jit(f, **_):
        return f

    @staticmethod
    def matrix(X):
        if isinstance(X, Sparse):
            if sps is None:
                raise Skip(f"scipy.sparse is needed for sparse X (sp < 1) but unavailable: {SCIPY_ERR}")
            # csr_array (not csr_matrix): reductions give ndarrays, not np.matrix
            return sps.csr_array((X.data, X.indices, X.indptr), shape=X.shape)
        return X

    @staticmethod
    def vec(a):
        return a

    @staticmethod
    def rowsumsq(X):
        if sps is not None and sps.issparse(X):
            return np.asarray(X.multiply(X).sum(axis=1)).reshape(-1, 1)
        return np.sum(X * X, axis=1, keepdims=True)

    @staticmethod
    def tmm(X, Q):
        """t(X) %*% Q."""
        return X.T @ Q

    @staticmethod
    def rows(X, idx):
        """X[idx, :] as a dense (len(idx) x ncol) array."""
        if sps is not None and sps.issparse(X):
            return X[idx, :].toarray()
        return X[idx, :]


class NumexprBackend(NumpyBackend):
    """numpy kernels with the element-wise parts (and their sums) evaluated by numexpr."""

    name = "numexpr"


class JaxBackend:
    """JAX kernels, each under jax.jit; X is a jax array or a BCOO matrix."""

    name = "jax"

    def __init__(self):
        self.xp = jnp

    @staticmethod
    def jit(f, **kw):
        return jax.jit(f, **kw)

    @staticmethod
    def matrix(X):
        return as_jax_matrix(X)

    @staticmethod
    def vec(a):
        return jnp.asarray(a)

    @staticmethod
    def rowsumsq(X):
        if isinstance(X, jsparse.BCOO):
            return jax.ops.segment_sum(X.data * X.data, X.indices[:, 0], num_segments=X.shape[0]).reshape(-1, 1)
        return jnp.sum(X * X, axis=1, keepdims=True)

    @staticmethod
    def tmm(X, Q):
        """t(X) %*% Q, written (t(Q) %*% X)^T: XLA:CPU runs X.T @ Q as written 5-10x slower than
        numpy (no transposed gemv for a dense X; a slow transpose for BCOO), the rewrite is as
        fast as numpy. The paper modified TensorFlow's DAG the same way (section 5.2)."""
        return (Q.T @ X).T

    @staticmethod
    def rows(X, idx):
        if isinstance(X, jsparse.BCOO):
            # one-hot selector times X: stays within BCOO's supported products
            sel = (jnp.arange(X.shape[0])[None, :] == jnp.asarray(idx)[:, None]).astype(X.dtype)
            return (X.T @ sel.T).T
        return X[jnp.asarray(idx), :]


def make_backend(peer):
    if peer == "numpy":
        return NumpyBackend()
    if peer == "numexpr":
        need_numexpr()
        return NumexprBackend()
    need_jax()
    return JaxBackend()


def alg_rng(p):
    """The generator of a case's inputs: `seed` plays the role of the gen_<id>.dml seed."""
    return np.random.default_rng(int(p["seed"]))


def gen_linear_labels(p):
    """X uniform in [-1, 1) with sparsity sp, a hidden w_true in [-1, 1), margin = X w_true, and
    the labels sign(margin) in {-1, +1} with 5% flipped (gen_l2svm.dml, gen_mlogreg.dml)."""
    rng = alg_rng(p)
    rows, cols = int(p["rows"]), int(p["cols"])
    X = rand_matrix(rng, rows, cols, p["sp"], -1.0, 1.0)
    w_true = rand_matrix(rng, cols, 1, 1.0, -1.0, 1.0)
    margin = sparse_matvec(X, w_true) if isinstance(X, Sparse) else X @ w_true
    flip = rng.random((rows, 1)) < 0.05
    lab = (2.0 * (margin > 0) - 1.0) * (1.0 - 2.0 * flip)
    return X, lab


# ---------------- L2SVM (examples/algorithms/l2svm.dml) ----------------

ALG_COMMON = {"rows": 10000, "cols": 100, "sp": 1.0}
L2SVM_DEFAULTS = dict(ALG_COMMON, seed=42, reg=0.001, tol=1e-12, maxiter=20, maxii=100)


def gen_l2svm(p):
    X, y = gen_linear_labels(p)
    return {"X": X, "Y": y}


def l2svm_kernels(b):
    xp = b.xp

    def init(X, Y):
        return b.tmm(X, Y)

    def direction(X, w, s, lam):
        return X @ s, lam * xp.sum(w * s), lam * xp.sum(s * s)

    def line_sums(Xw, Xd, Y, step):
        out = 1 - Y * (Xw + step * Xd)
        sv = out > 0
        out = out * sv
        return xp.sum(out * Y * Xd), xp.sum(Xd * sv * Xd)

    def update(X, Y, w, Xw, s, Xd, g_old, step, lam):
        w = w + step * s
        Xw = Xw + step * Xd
        out = 1 - Y * Xw
        out = (out > 0) * out
        obj = 0.5 * xp.sum(out * out) + lam / 2 * xp.sum(w * w)
        g_new = b.tmm(X, out * Y) - lam * w
        tmp = xp.sum(s * g_old)
        be = xp.sum(g_new * g_new) / xp.sum(g_old * g_old)
        s = be * s + g_new
        return w, Xw, obj, g_new, tmp, s, xp.sum(s * s)

    k = {"init": init, "direction": direction, "line_sums": line_sums, "update": update}
    if b.name == "numexpr":

        def line_sums_ne(Xw, Xd, Y, step):
            env = {"Xw": Xw, "Xd": Xd, "Y": Y, "st": step}
            a = ne.evaluate("sum(where(1 - Y * (Xw + st * Xd) > 0, (1 - Y * (Xw + st * Xd)) * Y * Xd, 0))", env)
            h = ne.evaluate("sum(where(1 - Y * (Xw + st * Xd) > 0, Xd * Xd, 0))", env)
            return a, h

        def update_ne(X, Y, w, Xw, s, Xd, g_old, step, lam):
            w = w + step * s
            Xw = ne.evaluate("Xw + st * Xd", {"Xw": Xw, "Xd": Xd, "st": step})
            out = ne.evaluate("where(1 - Y * Xw > 0, 1 - Y * Xw, 0)", {"Y": Y, "Xw": Xw})
            obj = 0.5 * float(ne.evaluate("sum(out * out)", {"out": out})) + lam / 2 * float(np.sum(w * w))
            g_new = X.T @ ne.evaluate("out * Y", {"out": out, "Y": Y}) - lam * w
            tmp = np.sum(s * g_old)
            be = np.sum(g_new * g_new) / np.sum(g_old * g_old)
            s = be * s + g_new
            return w, Xw, obj, g_new, tmp, s, np.sum(s * s)

        k.update(line_sums=line_sums_ne, update=update_ne)
    return {n: b.jit(f) for n, f in k.items()}


def run_l2svm(b, K, X, Y, p):
    lam, eps, maxiter, maxii = p["reg"], p["tol"], int(p["maxiter"]), int(p["maxii"])
    N, D = X.shape
    xp = b.xp
    w = xp.zeros((D, 1))
    Xw = xp.zeros((N, 1))
    g_old = K["init"](X, Y)
    s = g_old
    obj = 0.5 * N
    it = 0
    go = True
    while go and it < maxiter:
        Xd, wd, dd = K["direction"](X, w, s, lam)
        wd, dd = float(wd), float(dd)
        step = 0.0
        inner = 0
        go_inner = True
        while go_inner and inner < maxii:
            a, h = K["line_sums"](Xw, Xd, Y, step)
            g = wd + step * dd - float(a)
            h = dd + float(h)
            step = step - g / h
            go_inner = g * g / h >= 1e-10
            inner += 1
        w, Xw, obj_new, g_old, tmp, s, ss = K["update"](X, Y, w, Xw, s, Xd, g_old, step, lam)
        obj = float(obj_new)
        go = step * float(tmp) >= eps * obj and float(ss) != 0
        it += 1
    return obj, it


# ---------------- MLogreg (examples/algorithms/mlogreg.dml) ----------------

MLOGREG_DEFAULTS = dict(ALG_COMMON, seed=7, reg=0.001, tol=1e-12, moi=20, mii=10)


def gen_mlogreg(p):
    X, lab = gen_linear_labels(p)
    return {"X": X, "Y": 1.5 - 0.5 * lab}


def mlogreg_kernels(b):
    xp = b.xp

    def init(X, y):
        C = 2  # class ids 1..C; the generator writes two classes
        Y = (y == xp.arange(1, C + 1)[None, :]).astype(xp.float64)
        delta = 0.5 * xp.sqrt(X.shape[1]) / xp.max(xp.sqrt(b.rowsumsq(X)))
        return Y, delta

    def grad(X, P, Y, B, lam):
        K = B.shape[1]
        G = b.tmm(X, P[:, :K] - Y[:, :K]) + lam * B
        return G, xp.sqrt(xp.sum(G * G))

    def hv(X, P, V, lam):
        K = V.shape[1]
        Pk = P[:, :K]
        Q = Pk * (X @ V)
        return b.tmm(X, Q - Pk * xp.sum(Q, axis=1, keepdims=True)) + lam * V

    def point(X, Y, B_new, lam):
        N = X.shape[0]
        LT = xp.concatenate([X @ B_new, xp.zeros((N, 1))], axis=1)
        LT = LT - xp.max(LT, axis=1, keepdims=True)
        E = xp.exp(LT)
        rs = xp.sum(E, axis=1, keepdims=True)
        P_new = E / rs
        obj = -xp.sum(Y * LT) + xp.sum(xp.log(rs)) + 0.5 * xp.sum(lam * B_new * B_new)
        return P_new, obj

    k = {"init": init, "grad": grad, "hv": hv, "point": point}
    if b.name == "numexpr":

        def point_ne(X, Y, B_new, lam):
            N = X.shape[0]
            LT = np.concatenate([X @ B_new, np.zeros((N, 1))], axis=1)
            LT = ne.evaluate("LT - m", {"LT": LT, "m": np.max(LT, axis=1, keepdims=True)})
            E = ne.evaluate("exp(LT)", {"LT": LT})
            rs = np.sum(E, axis=1, keepdims=True)
            P_new = ne.evaluate("E / rs", {"E": E, "rs": rs})
            obj = (-float(ne.evaluate("sum(Y * LT)", {"Y": Y, "LT": LT})) + float(ne.evaluate("sum(log(rs))", {"rs": rs}))
                   + 0.5 * lam * float(np.sum(B_new * B_new)))
            return P_new, obj

        def hv_ne(X, P, V, lam):
            K = V.shape[1]
            Pk = np.ascontiguousarray(P[:, :K])
            Q = ne.evaluate("Pk * XV", {"Pk": Pk, "XV": X @ V})
            return X.T @ ne.evaluate("Q - Pk * r", {"Q": Q, "Pk": Pk, "r": np.sum(Q, axis=1, keepdims=True)}) + lam * V

        k.update(point=point_ne, hv=hv_ne)
    return {n: b.jit(f) for n, f in k.items()}


def run_mlogreg(b, K, X, y, p):
    xp = b.xp
    lam, tol, maxiter, maxinner = p["reg"], p["tol"], int(p["moi"]), int(p["mii"])
    eta0, eta1, eta2, sigma1, sigma2, sigma3, psi = 0.0001, 0.25, 0.75, 0.25, 0.5, 4.0, 0.1
    N, D = X.shape
    Y, delta = K["init"](X, y)
    delta = float(delta)
    Kc = Y.shape[1] - 1
    B = xp.zeros((D, Kc))
    P = xp.ones((N, Kc + 1)) / (Kc + 1)
    obj = N * math.log(Kc + 1)
    Grad, norm_Grad = K["grad"](X, P, Y, B, lam)
    norm_Grad = norm_Grad_initial = float(norm_Grad)
    it = 1
    converge = norm_Grad < tol or it > maxiter
    while not converge:
        S = xp.zeros((D, Kc))
        R = -Grad
        V = R
        delta2 = delta**2
        inner = 1
        norm_R2 = float(xp.sum(R * R))
        innerconverge = math.sqrt(norm_R2) <= psi * norm_Grad
        boundary = False
        while not innerconverge:
            HV = K["hv"](X, P, V, lam)
            alpha = norm_R2 / float(xp.sum(V * HV))
            Snew = S + alpha * V
            if float(xp.sum(Snew * Snew)) <= delta2:
                S = Snew
                R = R - alpha * HV
                old = norm_R2
                norm_R2 = float(xp.sum(R * R))
                V = R + (norm_R2 / old) * V
                innerconverge = math.sqrt(norm_R2) <= psi * norm_Grad
            else:
                boundary = True
                sv, v2, s2 = float(xp.sum(S * V)), float(xp.sum(V * V)), float(xp.sum(S * S))
                rad = math.sqrt(sv**2 + v2 * (delta2 - s2))
                alpha = (delta2 - s2) / (sv + rad) if sv >= 0 else (rad - sv) / v2
                S = S + alpha * V
                R = R - alpha * HV
                innerconverge = True
            inner += 1
            innerconverge = innerconverge or inner > maxinner
        gs = float(xp.sum(S * Grad))
        qk = -0.5 * (gs - float(xp.sum(S * R)))
        B_new = B + S
        P_new, obj_new = K["point"](X, Y, B_new, lam)
        obj_new = float(obj_new)
        actred = obj - obj_new
        rho = actred / qk
        snorm = math.sqrt(float(xp.sum(S * S)))
        if it == 1:
            delta = min(delta, snorm)
        alpha2 = obj_new - obj - gs
        alpha = sigma3 if alpha2 <= 0 else max(sigma1, -0.5 * gs / alpha2)
        if rho < eta0:
            delta = min(max(alpha, sigma1) * snorm, sigma2 * delta)
        elif rho < eta1:
            delta = max(sigma1 * delta, min(alpha * snorm, sigma2 * delta))
        elif rho < eta2:
            delta = max(sigma1 * delta, min(alpha * snorm, sigma3 * delta))
        else:
            delta = max(delta, min(alpha * snorm, sigma3 * delta))
        if rho > eta0:
            B, P = B_new, P_new
            Grad, norm_Grad = K["grad"](X, P, Y, B, lam)
            norm_Grad = float(norm_Grad)
            obj = obj_new
        it += 1
        converge = (norm_Grad < tol * norm_Grad_initial or it > maxiter
                    or (not boundary and abs(actred) < (abs(obj) + abs(obj_new)) * 1e-14))
    return obj, it - 1


# ---------------- GLM binomial probit (examples/algorithms/glm.dml) ----------------

GLM_DEFAULTS = dict(ALG_COMMON, seed=11, reg=0.001, tol=1e-12, moi=20, mii=10)


def gen_glm(p):
    rng = alg_rng(p)
    rows, cols = int(p["rows"]), int(p["cols"])
    X = rand_matrix(rng, rows, cols, p["sp"], -1.0, 1.0)
    w_true = rand_matrix(rng, cols, 1, 1.0, -1.0, 1.0)
    if isinstance(X, Sparse):
        margin = sparse_matvec(X, w_true)
        nonempty = (np.diff(X.indptr) > 0).reshape(-1, 1)
    else:
        margin = X @ w_true
        nonempty = np.any(X != 0, axis=1, keepdims=True)
    sd = math.sqrt(float(np.sum((margin * nonempty) ** 2)) / max(int(nonempty.sum()), 1))
    margin = margin * (3.0 / sd)
    e = rng.standard_normal((rows, 1))
    return {"X": X, "Y": ((margin + e) > 0).astype(np.float64)}


# Hart's algorithm 5666 (West 2005) for Q(x) = Phi(-|x|), exactly as glm.dml computes it.
_NT_NUM = (3.52624965998911e-02, 0.700383064443688, 6.37396220353165, 33.912866078383, 112.079291497871,
           221.213596169931, 220.206867912376)
_NT_DEN = (8.83883476483184e-02, 1.75566716318264, 16.064177579207, 86.7807322029461, 296.564248779674,
           637.333633378831, 793.826512519948, 440.413735824752)


def _horner_str(coefs, x):
    s = repr(coefs[0])
    for c in coefs[1:]:
        s = f"({s}) * {x} + {c!r}"
    return s


def glm_kernels(b):
    xp = b.xp
    inv_sqrt_2pi = 0.39894228040143267794

    def probs(eta):
        XA = xp.minimum(xp.abs(eta), 40.0)
        ex = xp.exp(-(XA * XA) / 2)
        num = _NT_NUM[0]
        for c in _NT_NUM[1:]:
            num = num * XA + c
        den = _NT_DEN[0]
        for c in _NT_DEN[1:]:
            den = den * XA + c
        cf = XA + 0.65
        for c in (4.0, 3.0, 2.0, 1.0):
            cf = XA + c / cf
        Q = xp.where(XA < 7.07106781186547, ex * num / den, ex / cf / 2.506628274631)
        pos = eta > 0
        return xp.where(pos, 1 - Q, Q), xp.where(pos, Q, 1 - Q)

    def objective(X, beta, y, lam):
        eta = X @ beta
        P1, P0 = probs(eta)
        return eta, -xp.sum(y * xp.log(P1) + (1 - y) * xp.log(P0)) + 0.5 * lam * xp.sum(beta * beta)

    def gradient(X, eta, y):
        P1, P0 = probs(eta)
        dens = inv_sqrt_2pi * xp.exp(-(eta * eta) / 2)
        g_eta = dens * ((1 - y) / P0 - y / P1)
        w = dens * dens / (P1 * P0)
        return b.tmm(X, g_eta), w

    def hv(X, w, p_cg, lam):
        return lam * p_cg + b.tmm(X, w * (X @ p_cg))

    def delta0(X):
        return 0.5 * math.sqrt(X.shape[1]) / xp.max(xp.sqrt(b.rowsumsq(X)))

    k = {"objective": objective, "gradient": gradient, "hv": hv, "delta0": delta0}
    if b.name == "numexpr":
        XA = "where(abs(eta) < 40.0, abs(eta), 40.0)"
        q = (f"where({XA} < 7.07106781186547, exp(-({XA}**2) / 2) * ({_horner_str(_NT_NUM, XA)}) / "
             f"({_horner_str(_NT_DEN, XA)}), exp(-({XA}**2) / 2) / "
             f"({XA} + 1.0 / ({XA} + 2.0 / ({XA} + 3.0 / ({XA} + 4.0 / ({XA} + 0.65))))) / 2.506628274631)")
        p1 = "where(eta > 0, 1 - Q, Q)"
        p0 = "where(eta > 0, Q, 1 - Q)"

        def objective_ne(X, beta, y, lam):
            eta = X @ beta
            Q = ne.evaluate(q, {"eta": eta})
            nll = ne.evaluate(f"sum(-(y * log({p1}) + (1 - y) * log({p0})))", {"eta": eta, "Q": Q, "y": y})
            return eta, float(nll) + 0.5 * lam * float(np.sum(beta * beta))

        def gradient_ne(X, eta, y):
            env = {"eta": eta, "Q": ne.evaluate(q, {"eta": eta}), "y": y}
            dens = f"({inv_sqrt_2pi!r} * exp(-(eta * eta) / 2))"
            g_eta = ne.evaluate(f"{dens} * ((1 - y) / ({p0}) - y / ({p1}))", env)
            w = ne.evaluate(f"{dens} * {dens} / (({p1}) * ({p0}))", env)
            return X.T @ g_eta, w

        def hv_ne(X, w, p_cg, lam):
            return lam * p_cg + X.T @ ne.evaluate("w * Xp", {"w": w, "Xp": X @ p_cg})

        k.update(objective=objective_ne, gradient=gradient_ne, hv=hv_ne)
    return {n: b.jit(f) for n, f in k.items()}


def run_glm(b, K, X, y, p):
    xp = b.xp
    lam, eps, max_irls, max_cg = p["reg"], p["tol"], int(p["moi"]), int(p["mii"])
    N, D = X.shape
    trust_delta = float(K["delta0"](X))
    beta = xp.zeros((D, 1))
    eta, obj = K["objective"](X, beta, y, lam)
    obj = float(obj)
    accept = True
    i_irls = 0
    term = 0
    newbeta, new_obj = beta, obj
    pred = 0.0
    boundary = False
    g = w = None
    while term == 0:
        if i_irls > 0:
            rho = (new_obj - obj) / pred
            if rho < 0.25:
                trust_delta = 0.25 * trust_delta
            if rho > 0.75 and boundary:
                trust_delta = 2 * trust_delta
            accept = rho > 0.1
        if accept:
            beta, obj = newbeta, new_obj
            g, w = K["gradient"](X, eta, y)
            # eta belongs to newbeta, which is beta now
        tds = trust_delta**2
        z = xp.zeros((D, 1))
        pred = 0.0
        boundary = False
        g_reg = g + lam * beta
        r = g_reg
        pc = -r
        rr = float(xp.sum(r * r))
        eps_cg = rr * min(0.25, math.sqrt(rr))
        converged = rr < eps_cg
        i_cg = 0
        while not converged:
            i_cg += 1
            q = K["hv"](X, w, pc, lam)
            pq = float(xp.sum(pc * q))
            alpha = rr / pq
            new_z = z + alpha * pc
            if pq <= 0 or float(xp.sum(new_z * new_z)) >= tds:
                pp, zz, pz = float(xp.sum(pc * pc)), float(xp.sum(z * z)), float(xp.sum(pc * z))
                sq = math.sqrt(pz * pz - pp * (zz - tds))
                tau1, tau2 = (-pz + sq) / pp, (-pz - sq) / pp
                zq, gp = float(xp.sum(z * q)), float(xp.sum(g_reg * pc))
                f_extra = 0.5 * float(xp.sum(z * (r + g_reg)))
                f1 = f_extra + (0.5 * tau1 * pq + zq + gp) * tau1
                f2 = f_extra + (0.5 * tau2 * pq + zq + gp) * tau2
                z = z + (tau1 if f1 < f2 else tau2) * pc
                pred = min(f1, f2)
                boundary = True
                converged = True
            else:
                z = new_z
                old_rr = rr
                r = r + alpha * q
                rr = float(xp.sum(r * r))
                if i_cg == max_cg or rr < eps_cg:
                    pred = 0.5 * float(xp.sum(z * (r + g_reg)))
                    converged = True
                else:
                    pc = -r + (rr / old_rr) * pc
        newbeta = beta + z
        eta, new_obj = K["objective"](X, newbeta, y, lam)
        new_obj = float(new_obj)
        change = obj - new_obj
        if not boundary and (2 * abs(change) < eps * (2 * obj + 0.1) or abs(change) < (abs(obj) + abs(new_obj)) * 1e-14):
            term = 1
        i_irls += 1
        if i_irls == max_irls:
            term = 2
    # glm.dml keeps the last point only if it does not increase the objective
    return (new_obj if new_obj <= obj else obj), i_irls


# ---------------- KMeans (examples/algorithms/kmeans.dml) ----------------

KMEANS_DEFAULTS = dict(ALG_COMMON, seed=3, k=5, tol=1e-12, maxi=20)


def gen_kmeans(p):
    """gen_kmeans.dml: points around k sparse centers (rand -10..10 at sparsity sp - 1/cols, plus
    C[c, c] = 5 + c), each non-zero with N(0, 0.5^2) noise, zeros kept."""
    rng = alg_rng(p)
    rows, cols, k, sp = int(p["rows"]), int(p["cols"]), int(p["k"]), p["sp"]
    if cols < k:
        raise ValueError("kmeans needs cols >= k")
    sp_c = sp if sp >= 1 else max(sp - 1.0 / cols, 0.0)
    Cs = rand_matrix(rng, k, cols, sp_c, -10.0, 10.0)
    C = Cs.dense() if isinstance(Cs, Sparse) else Cs
    for c in range(k):
        C[c, c] = 5.0 + (c + 1)
    ident = np.maximum(np.ceil(rng.random(rows) * k), 1).astype(np.int64) - 1
    if sp >= 1:
        X = C[ident]
        X = X + 0.5 * rng.standard_normal((rows, cols)) * (X != 0)
        return {"X": X}
    # sparse: row i has the non-zero pattern of its center
    pats = [np.flatnonzero(C[c]) for c in range(k)]
    lens = np.array([len(q) for q in pats], dtype=np.int64)
    starts = np.concatenate([[0], np.cumsum(lens)[:-1]])
    flat_cols = np.concatenate(pats)
    flat_vals = np.concatenate([C[c, pats[c]] for c in range(k)])
    rl = lens[ident]
    indptr = np.concatenate([[0], np.cumsum(rl)]).astype(np.int64)
    pos = np.repeat(starts[ident] - indptr[:-1], rl) + np.arange(indptr[-1])
    data = flat_vals[pos] + 0.5 * rng.standard_normal(pos.size)
    return {"X": Sparse((rows, cols), data, flat_cols[pos].astype(np.int32), indptr)}


def kmeans_kernels(b):
    xp = b.xp

    def stats(X):
        rsq = b.rowsumsq(X)
        return xp.sum(rsq), rsq

    def far_dist(X, C, rsq):
        D = -2 * (X @ C.T) + xp.sum(C * C, axis=1)[None, :]
        md = xp.min(D, axis=1) + rsq[:, 0]
        return xp.argmax(md)  # the first of the farthest points

    def step(X, C, sumXsq):
        D = -2 * (X @ C.T) + xp.sum(C * C, axis=1)[None, :]
        minD = xp.min(D, axis=1, keepdims=True)
        wcss = sumXsq + xp.sum(minD)
        P = (D <= minD).astype(xp.float64)
        P = P / xp.sum(P, axis=1, keepdims=True)
        denom = xp.sum(P, axis=0)
        C_new = b.tmm(X, P).T / denom[:, None]
        return wcss, C_new, xp.min(denom)

    k = {"stats": stats, "far_dist": far_dist, "step": step}
    if b.name == "numexpr":

        def step_ne(X, C, sumXsq):
            XC = np.ascontiguousarray(X @ C.T)
            D = ne.evaluate("-2 * XC + cn", {"XC": XC, "cn": np.sum(C * C, axis=1)[None, :]})
            minD = np.min(D, axis=1, keepdims=True)
            wcss = sumXsq + float(np.sum(minD))
            P = ne.evaluate("where(D <= minD, 1.0, 0.0)", {"D": D, "minD": minD})
            P = ne.evaluate("P / s", {"P": P, "s": np.sum(P, axis=1, keepdims=True)})
            denom = np.sum(P, axis=0)
            C_new = (X.T @ P).T / denom[:, None]
            return wcss, C_new, np.min(denom)

        k.update(step=step_ne)
    return {n: b.jit(f) for n, f in k.items()}


def run_kmeans(b, K, X, p):
    kc, eps, max_iter = int(p["k"]), p["tol"], int(p["maxi"])
    sumXsq, rsq = K["stats"](X)
    C = b.rows(X, [0])
    for _ in range(1, kc):
        far = int(K["far_dist"](X, C, rsq))
        C = b.xp.concatenate([C, b.rows(X, [far])], axis=0)
    it = 0
    term = 0
    wcss = math.inf
    while term == 0:
        wcss_old = wcss
        w, C_new, min_denom = K["step"](X, C, sumXsq)
        wcss = float(w)
        it += 1
        if wcss_old - wcss < eps * wcss:
            term = 1
        elif it >= max_iter:
            term = 2
        elif float(min_denom) <= 0:
            term = 3
        else:
            C = C_new
    return wcss, it


# ---------------- ALS-CG (examples/algorithms/alscg.dml) ----------------

ALSCG_DEFAULTS = dict(ALG_COMMON, sp=0.01, seed=5, r0=5, rank=20, reg="wL2", **{"lambda": 0.001}, maxi=20, thr=1e-12, init_seed=17)


def gen_alscg(p):
    """gen_alscg.dml: X = M * (1 + 4/r0 * U0 V0^T + 0.1 noise), M a 0/1 mask of density sp."""
    rng = alg_rng(p)
    rows, cols, r0, sp = int(p["rows"]), int(p["cols"]), int(p["r0"]), p["sp"]
    U0 = rng.random((rows, r0))
    V0 = rng.random((cols, r0))
    if sp >= 1:
        return {"X": 1 + (4.0 / r0) * (U0 @ V0.T) + 0.1 * rng.standard_normal((rows, cols))}
    M = rand_matrix(rng, rows, cols, sp)
    vals = 1 + (4.0 / r0) * np.einsum("ij,ij->i", U0[M.rows], V0[M.indices]) + 0.1 * rng.standard_normal(M.nnz)
    return {"X": Sparse((rows, cols), vals, M.indices, M.indptr)}


ALS_CHUNK = 1 << 18


class AlsSparseNumpy:
    """The masked products of ALS-CG over X's non-zeros only (scipy CSR), as a fair sparse
    implementation computes W * (A B^T): row-wise dots of gathered rows, in chunks."""

    def __init__(self, X, use_ne):
        self.X, self.use_ne = X, use_ne
        self.rows = np.repeat(np.arange(X.shape[0]), np.diff(X.indptr))
        self.cols = X.indices
        self.E = None

    def dots(self, A, B):
        out = np.empty(self.rows.size)
        for lo in range(0, out.size, ALS_CHUNK):
            hi = min(lo + ALS_CHUNK, out.size)
            # np.take: faster than fancy indexing for row gathers
            out[lo:hi] = np.einsum("ij,ij->i", np.take(A, self.rows[lo:hi], axis=0), np.take(B, self.cols[lo:hi], axis=0))
        return out

    def masked(self, vals):
        # X's structure with new values; one object reused (each result is consumed at once),
        # which skips scipy's O(nnz) format checks of a fresh csr_array per product
        if self.E is None:
            self.E = sps.csr_array((vals, self.X.indices, self.X.indptr), shape=self.X.shape)
        self.E.data = vals
        return self.E

    def residual(self, U, V):
        d = self.dots(U, V)
        x = self.X.data
        return self.masked(ne.evaluate("d - x", {"d": d, "x": x}) if self.use_ne else d - x)

    def sq_sum(self, E):
        v = E.data
        return float(ne.evaluate("sum(v * v)", {"v": v})) if self.use_ne else float(np.sum(v * v))


def alscg_numpy(b, X, p):
    lam, r, max_iter, thr = p["lambda"], int(p["rank"]), int(p["maxi"]), p["thr"]
    use_ne = b.name == "numexpr"
    m, n = X.shape
    rng = np.random.default_rng(int(p["init_seed"]))
    U = rng.random((m, r)) - 0.5
    V = rng.random((n, r)) - 0.5
    sparse = sps is not None and sps.issparse(X)
    if sparse:
        S_ = AlsSparseNumpy(X, use_ne)
        nnzr = np.diff(X.indptr).astype(np.float64).reshape(-1, 1)
        nnzc = np.bincount(X.indices, minlength=n).astype(np.float64).reshape(-1, 1)
    else:
        W = (X != 0).astype(np.float64)
        nnzr = W.sum(axis=1, keepdims=True)
        nnzc = W.sum(axis=0).reshape(-1, 1)
    if p["reg"] == "L2":
        nnzr, nnzc = np.ones((m, 1)), np.ones((n, 1))

    def resid(U, V):
        if sparse:
            return S_.residual(U, V)
        P = U @ V.T
        return ne.evaluate("where(X != 0, P - X, 0)", {"X": X, "P": P}) if use_ne else W * (P - X)

    def loss(U, V):
        E = resid(U, V)
        sq = S_.sq_sum(E) if sparse else (float(ne.evaluate("sum(E * E)", {"E": E})) if use_ne else float(np.sum(E * E)))
        return 0.5 * sq + 0.5 * lam * (float(np.sum(U * U * nnzr)) + float(np.sum(V * V * nnzc)))

    def hs_u(S):
        if sparse:
            return S_.masked(S_.dots(S, V)) @ V + lam * S * nnzr
        return (W * (S @ V.T)) @ V + lam * S * nnzr

    def hs_v(S):
        if sparse:
            return S_.masked(S_.dots(U, S)).T @ U + lam * S * nnzc
        return (W * (U @ S.T)).T @ U + lam * S * nnzc

    loss_init = loss(U, V)
    is_u = True
    it = 0
    converged = False
    while it // 2 < max_iter and not converged:
        it += 1
        E = resid(U, V)
        G = E @ V + lam * U * nnzr if is_u else E.T @ U + lam * V * nnzc
        R = -G
        S = R
        norm_G2 = float(np.sum(G * G))
        norm_R2 = norm_G2
        inner = 1
        while norm_R2 > 1e-9 * norm_G2 and inner <= r:
            HS = hs_u(S) if is_u else hs_v(S)
            alpha = norm_R2 / float(np.sum(S * HS))
            if is_u:
                U = U + alpha * S
            else:
                V = V + alpha * S
            R = R - alpha * HS
            old = norm_R2
            norm_R2 = float(np.sum(R * R))
            S = R + (norm_R2 / old) * S
            inner += 1
        is_u = not is_u
        if it % 2 == 0:
            cur = loss(U, V)
            dec = (loss_init - cur) / loss_init if loss_init != 0 else 0.0
            if (0 <= dec < thr) or loss_init == 0:
                converged = True
            loss_init = cur
    return loss_init, it // 2


def alscg_jax(b, X, p):
    """Returns the ALS-CG run for JAX: the jitted kernels are built once (so warm runs reuse them);
    each run initializes U, V and runs the DML script's loop, scalars synchronized per CG step."""
    lam, r, max_iter, thr = p["lambda"], int(p["rank"]), int(p["maxi"]), p["thr"]
    m, n = X.shape
    sparse = isinstance(X, jsparse.BCOO)
    wl2 = p["reg"] == "wL2"

    def dots(A, B, ri, ci):
        return jnp.sum(A[ri] * B[ci], axis=1)

    if sparse:
        ops = (X.indices[:, 0], X.indices[:, 1], X.data)

        # masked products over the non-zeros only: gathered row-wise dots and segment sums
        def stats(ops):
            ri, ci, xd = ops
            if not wl2:
                return jnp.ones((m, 1)), jnp.ones((n, 1))
            one = jnp.ones_like(xd)
            return (jax.ops.segment_sum(one, ri, num_segments=m).reshape(-1, 1),
                    jax.ops.segment_sum(one, ci, num_segments=n).reshape(-1, 1))

        def loss(U, V, ops, nnzr, nnzc):
            ri, ci, xd = ops
            e = dots(U, V, ri, ci) - xd
            return 0.5 * jnp.sum(e * e) + 0.5 * lam * (jnp.sum(U * U * nnzr) + jnp.sum(V * V * nnzc))

        def grad(U, V, ops, nnzr, nnzc, is_u):
            ri, ci, xd = ops
            e = (dots(U, V, ri, ci) - xd)[:, None]
            if is_u:
                return jax.ops.segment_sum(e * V[ci], ri, num_segments=m) + lam * U * nnzr
            return jax.ops.segment_sum(e * U[ri], ci, num_segments=n) + lam * V * nnzc

        def hs(U, V, S, ops, nnzr, nnzc, is_u):
            ri, ci, _ = ops
            if is_u:
                e = dots(S, V, ri, ci)[:, None]
                return jax.ops.segment_sum(e * V[ci], ri, num_segments=m) + lam * S * nnzr
            e = dots(U, S, ri, ci)[:, None]
            return jax.ops.segment_sum(e * U[ri], ci, num_segments=n) + lam * S * nnzc
    else:
        ops = (X,)

        def stats(ops):
            (X,) = ops
            if not wl2:
                return jnp.ones((m, 1)), jnp.ones((n, 1))
            Wd = (X != 0).astype(jnp.float64)
            return jnp.sum(Wd, axis=1, keepdims=True), jnp.sum(Wd, axis=0).reshape(-1, 1)

        def loss(U, V, ops, nnzr, nnzc):
            (X,) = ops
            E = (X != 0) * (U @ V.T - X)
            return 0.5 * jnp.sum(E * E) + 0.5 * lam * (jnp.sum(U * U * nnzr) + jnp.sum(V * V * nnzc))

        def grad(U, V, ops, nnzr, nnzc, is_u):
            (X,) = ops
            E = (X != 0) * (U @ V.T - X)
            # (t(U) E)^T rather than t(E) U: see JaxBackend.tmm
            return E @ V + lam * U * nnzr if is_u else (U.T @ E).T + lam * V * nnzc

        def hs(U, V, S, ops, nnzr, nnzc, is_u):
            (X,) = ops
            if is_u:
                return ((X != 0) * (S @ V.T)) @ V + lam * S * nnzr
            return (U.T @ ((X != 0) * (U @ S.T))).T + lam * S * nnzc

    stats, loss = jax.jit(stats), jax.jit(loss)
    # is_u picks the half-step (a Python bool): one specialization each
    grad = jax.jit(grad, static_argnames=("is_u",))
    hs = jax.jit(hs, static_argnames=("is_u",))

    @jax.jit
    def cg_update(A, S, R, HS, norm_R2):
        alpha = norm_R2 / jnp.sum(S * HS)
        A = A + alpha * S
        R = R - alpha * HS
        nr = jnp.sum(R * R)
        return A, R, R + (nr / norm_R2) * S, nr

    def run():
        rng = np.random.default_rng(int(p["init_seed"]))
        U = jnp.asarray(rng.random((m, r)) - 0.5)
        V = jnp.asarray(rng.random((n, r)) - 0.5)
        nnzr, nnzc = stats(ops)
        loss_init = float(loss(U, V, ops, nnzr, nnzc))
        is_u = True
        it = 0
        converged = False
        while it // 2 < max_iter and not converged:
            it += 1
            G = grad(U, V, ops, nnzr, nnzc, is_u=is_u)
            R = -G
            S = R
            norm_G2 = float(jnp.sum(G * G))
            norm_R2 = norm_G2
            inner = 1
            while norm_R2 > 1e-9 * norm_G2 and inner <= r:
                HS = hs(U, V, S, ops, nnzr, nnzc, is_u=is_u)
                if is_u:
                    U, R, S, nr = cg_update(U, S, R, HS, norm_R2)
                else:
                    V, R, S, nr = cg_update(V, S, R, HS, norm_R2)
                norm_R2 = float(nr)
                inner += 1
            is_u = not is_u
            if it % 2 == 0:
                cur = float(loss(U, V, ops, nnzr, nnzc))
                dec = (loss_init - cur) / loss_init if loss_init != 0 else 0.0
                if (0 <= dec < thr) or loss_init == 0:
                    converged = True
                loss_init = cur
        return loss_init, it // 2

    return run


# ---------------- AutoEncoder (examples/algorithms/autoencoder.dml) ----------------

AUTOENCODER_DEFAULTS = dict(ALG_COMMON, seed=9, H1=500, H2=2, batch=512, step=0.05, epochs=1, init_seed=23)


def gen_autoencoder(p):
    """gen_autoencoder.dml: X = M * (0.8 tanh(Z A) + 0.05 noise), Z rows x 2, A 2 x cols."""
    rng = alg_rng(p)
    rows, cols, sp = int(p["rows"]), int(p["cols"]), p["sp"]
    Z = rng.uniform(-1, 1, (rows, 2))
    A = rng.uniform(-1, 1, (2, cols))
    if sp >= 1:
        return {"X": 0.8 * np.tanh(Z @ A) + 0.05 * rng.standard_normal((rows, cols))}
    M = rand_matrix(rng, rows, cols, sp)
    vals = 0.8 * np.tanh(np.einsum("ij,ij->i", Z[M.rows], A.T[M.indices])) + 0.05 * rng.standard_normal(M.nnz)
    return {"X": Sparse((rows, cols), vals, M.indices, M.indptr)}


def ae_init(p, m):
    """Glorot initialization as autoencoder.dml (seeded; values differ from SystemDS's rand)."""
    rng = np.random.default_rng(int(p["init_seed"]))
    h1, h2 = int(p["H1"]), int(p["H2"])

    def glorot(rows, cols, fan):
        return math.sqrt(6) / math.sqrt(fan) * rng.uniform(-1, 1, (rows, cols))

    return [glorot(h1, m, m + h1), np.zeros((h1, 1)), glorot(h2, h1, h1 + h2), np.zeros((h2, 1)),
            glorot(h1, h2, h2 + h1), np.zeros((h1, 1)), glorot(m, h1, h2 + m), np.zeros((m, 1))]


def ae_numpy(b, X, p):
    """Mini-batch SGD, plain numpy (X_batch @ W^T instead of t(W %*% t(X)): the same product)."""
    use_ne = b.name == "numexpr"
    n, m = X.shape
    sparse = sps is not None and sps.issparse(X)
    W1, b1, W2, b2, W3, b3, W4, b4 = ae_init(p, m)
    step, bs = p["step"], int(p["batch"])

    def act(A):
        # returns tanh(A) and its derivative 1 - tanh(A)^2
        if use_ne:
            H = ne.evaluate("tanh(A)", {"A": A})
            return H, ne.evaluate("1 - H * H", {"H": H})
        H = np.tanh(A)
        return H, 1 - H * H

    def forward(Xb):
        H1, H1p = act(Xb @ W1.T + b1.T)
        H2, H2p = act(H1 @ W2.T + b2.T)
        H3, H3p = act(H2 @ W3.T + b3.T)
        Yh, Yhp = act(H3 @ W4.T + b4.T)
        Xd = Xb.toarray() if sparse else Xb
        E = ne.evaluate("Yh - Xd", {"Yh": Yh, "Xd": Xd}) if use_ne else Yh - Xd
        return H1, H1p, H2, H2p, H3, H3p, Yhp, E

    def sq(E):
        return float(ne.evaluate("sum(E * E)", {"E": E})) if use_ne else float(np.sum(E * E))

    iters_per_epoch = -(-n // bs)
    it, beg = 0, 0
    while it < int(p["epochs"]) * iters_per_epoch:
        end = min(beg + bs, n)
        Xb = X[beg:end]
        H1, H1p, H2, H2p, H3, H3p, Yhp, E = forward(Xb)
        if use_ne:
            d4 = ne.evaluate("E * Yhp", {"E": E, "Yhp": Yhp})
            d3 = ne.evaluate("H3p * T", {"H3p": H3p, "T": d4 @ W4})
            d2 = ne.evaluate("H2p * T", {"H2p": H2p, "T": d3 @ W3})
            d1 = ne.evaluate("H1p * T", {"H1p": H1p, "T": d2 @ W2})
        else:
            d4 = E * Yhp
            d3 = H3p * (d4 @ W4)
            d2 = H2p * (d3 @ W3)
            d1 = H1p * (d2 @ W2)
        ls = step / (end - beg)
        # t(delta1) %*% X_batch, as (X_batch^T delta1)^T so a sparse X_batch stays on the left
        g1 = (Xb.T @ d1).T
        W4 -= ls * (d4.T @ H3)
        b4 -= ls * d4.sum(axis=0).reshape(-1, 1)
        W3 -= ls * (d3.T @ H2)
        b3 -= ls * d3.sum(axis=0).reshape(-1, 1)
        W2 -= ls * (d2.T @ H1)
        b2 -= ls * d2.sum(axis=0).reshape(-1, 1)
        W1 -= ls * g1
        b1 -= ls * d1.sum(axis=0).reshape(-1, 1)
        it += 1
        beg = 0 if end == n else end
    E = forward(X)[-1]
    return 0.5 * sq(E), it


def ae_jax(b, X, p):
    """Mini-batch SGD with one jitted step (forward, back-propagation, update) per batch. A sparse X
    is sliced per batch on the host (scipy CSR) and densified: BCOO has a static number of stored
    elements, so row slices of it would either carry all of X's non-zeros or recompile per batch.
    Returns the run; the jitted step is built once, so warm runs reuse its compilation."""
    sparse = isinstance(X, Sparse)
    Xh = X.scipy() if sparse else None
    Xd = None if sparse else block(jnp.asarray(X))
    n, m = X.shape
    step, bs = p["step"], int(p["batch"])

    def forward(P, Xb):
        W1, b1, W2, b2, W3, b3, W4, b4 = P
        H1 = jnp.tanh(Xb @ W1.T + b1.T)
        H2 = jnp.tanh(H1 @ W2.T + b2.T)
        H3 = jnp.tanh(H2 @ W3.T + b3.T)
        Yh = jnp.tanh(H3 @ W4.T + b4.T)
        return H1, H2, H3, Yh, Yh - Xb

    @jax.jit
    def sgd_step(P, Xb):
        W1, b1, W2, b2, W3, b3, W4, b4 = P
        H1, H2, H3, Yh, E = forward(P, Xb)
        d4 = E * (1 - Yh * Yh)
        d3 = (1 - H3 * H3) * (d4 @ W4)
        d2 = (1 - H2 * H2) * (d3 @ W3)
        d1 = (1 - H1 * H1) * (d2 @ W2)
        ls = step / Xb.shape[0]
        grads = [d1.T @ Xb, d1.sum(0)[:, None], d2.T @ H1, d2.sum(0)[:, None],
                 d3.T @ H2, d3.sum(0)[:, None], d4.T @ H3, d4.sum(0)[:, None]]
        return [a - ls * g for a, g in zip(P, grads)]

    @jax.jit
    def sq_err(P, Xb):
        E = forward(P, Xb)[-1]
        return jnp.sum(E * E)

    def batch(lo, hi):
        if sparse:
            return jnp.asarray(Xh[lo:hi].toarray())
        return jax.lax.slice_in_dim(Xd, lo, hi)

    def run():
        params = [jnp.asarray(a) for a in ae_init(p, m)]
        iters_per_epoch = -(-n // bs)
        it, beg = 0, 0
        while it < int(p["epochs"]) * iters_per_epoch:
            end = min(beg + bs, n)
            params = sgd_step(params, batch(beg, end))
            it += 1
            beg = 0 if end == n else end
        if sparse:
            # the objective over all of X, in dense row blocks of 8 batches
            tot = 0.0
            for lo in range(0, n, 8 * bs):
                tot += float(sq_err(params, batch(lo, min(lo + 8 * bs, n))))
            return 0.5 * tot, it
        return 0.5 * float(sq_err(params, Xd)), it

    return run


# ----------------------------------------------------------------------------------------------
# Case registry, timing and the command line
# ----------------------------------------------------------------------------------------------


def alg_case(gen, defaults, kernels, runner, inputs=("X", "Y")):
    """An algorithm case: the generic driver `runner(b, K, *inputs, p)` over `kernels(b)`."""

    def build(peer, d, p):
        b = make_backend(peer)
        K = kernels(b)
        args = [b.matrix(d["X"])] + [b.vec(d[n]) for n in inputs[1:]]
        if peer == "jax":
            block(args)  # transfers finish before the clock starts
        return lambda: runner(b, K, *args, p)

    return {"kind": "algorithm", "defaults": defaults, "gen": gen, "build": build}


def alscg_case():
    def build(peer, d, p):
        b = make_backend(peer)
        X = b.matrix(d["X"])
        if peer == "jax":
            return alscg_jax(b, block(X), p)
        return lambda: alscg_numpy(b, X, p)

    return {"kind": "algorithm", "defaults": ALSCG_DEFAULTS, "gen": gen_alscg, "build": build}


def autoencoder_case():
    def build(peer, d, p):
        b = make_backend(peer)
        if peer == "jax":
            return ae_jax(b, d["X"], p)
        X = b.matrix(d["X"])
        return lambda: ae_numpy(b, X, p)

    return {"kind": "algorithm", "defaults": AUTOENCODER_DEFAULTS, "gen": gen_autoencoder, "build": build}


def micro_case(gen, defaults, impls):
    def build(peer, d, p):
        return impls[peer](d, p)

    return {"kind": "micro", "defaults": defaults, "gen": gen, "build": build}


CASES = {
    "sum_xyz": micro_case(gen_sum_xyz, MICRO_DEFAULTS, {"numpy": np_sum_xyz, "numexpr": ne_sum_xyz, "jax": jx_sum_xyz}),
    "magg": micro_case(gen_magg, MICRO_DEFAULTS, {"numpy": np_magg, "numexpr": ne_magg, "jax": jx_magg}),
    "row_mv": micro_case(gen_row_mv, MICRO_DEFAULTS, {"numpy": np_row_mv, "numexpr": ne_row_mv, "jax": jx_row_mv}),
    "row_mm": micro_case(gen_row_mm, MICRO_DEFAULTS, {"numpy": np_row_mm, "numexpr": ne_row_mm, "jax": jx_row_mm}),
    "outer": micro_case(gen_outer, OUTER_DEFAULTS, {"numpy": np_outer, "numexpr": ne_outer, "jax": jx_outer}),
    "l2svm": alg_case(gen_l2svm, L2SVM_DEFAULTS, l2svm_kernels, run_l2svm),
    "mlogreg": alg_case(gen_mlogreg, MLOGREG_DEFAULTS, mlogreg_kernels, run_mlogreg),
    "glm": alg_case(gen_glm, GLM_DEFAULTS, glm_kernels, run_glm),
    "kmeans": alg_case(gen_kmeans, KMEANS_DEFAULTS, kmeans_kernels, run_kmeans, inputs=("X",)),
    "alscg": alscg_case(),
    "autoencoder": autoencoder_case(),
}


def time_runs(run, reps, warm_first):
    """Runs `run` (1 + reps times if warm_first else reps times); returns the per-repetition times
    in ms, the first (untimed-in-list) call's time or None, and the last result."""
    first_ms = None
    result = None
    if warm_first:
        t0 = time.perf_counter()
        result = run()
        first_ms = (time.perf_counter() - t0) * 1e3
    times = []
    for _ in range(reps):
        t0 = time.perf_counter()
        result = run()
        times.append((time.perf_counter() - t0) * 1e3)
    return times, first_ms, result


def json_number(x):
    if x is None or not math.isfinite(x):
        return None  # JSON has no NaN/Inf
    return x


def run_peer(case_name, case, peer, data, p, reps):
    versions, skipped = peer_status()
    if versions[peer] is None:
        return {"peer": peer, "case": case_name, "skipped": f"{peer} not available: {skipped[peer]}"}
    try:
        run = case["build"](peer, data, p)
        # micro: one warm-up call (as the DML micro scripts evaluate once before the clock);
        # algorithms: only JAX gets a first call, which compiles; numpy/numexpr are timed cold.
        warm = case["kind"] == "micro" or peer == "jax"
        times, first_ms, result = time_runs(run, reps, warm)
        iterations = None
        if isinstance(result, tuple):  # algorithms: (objective, iterations)
            result, iterations = float(result[0]), int(result[1])
        compile_ms = None
        if peer == "jax":
            compile_ms = max(first_ms - statistics.median(times), 0.0)
        res = {"peer": peer, "case": case_name, "times_ms": [round(t, 4) for t in times],
               "compile_ms": None if compile_ms is None else round(compile_ms, 4), "result": json_number(result)}
        if case["kind"] == "micro" and first_ms is not None:
            # The first call, as the DML scripts' first evaluation (JIT included) is timed apart.
            res["first_ms"] = round(first_ms, 4)
        if iterations is not None:
            res["iterations"] = iterations
        if result is not None and not math.isfinite(result):
            res["note"] = f"non-finite result {result}"
        return res
    except Skip as exc:
        return {"peer": peer, "case": case_name, "skipped": str(exc)}
    except MemoryError as exc:
        return {"peer": peer, "case": case_name, "skipped": f"error: MemoryError: {exc}"}
    except Exception as exc:  # a failing peer must not take the others down
        tb = traceback.extract_tb(exc.__traceback__)
        where = f" (at {os.path.basename(tb[-1].filename)}:{tb[-1].lineno})" if tb else ""
        return {"peer": peer, "case": case_name, "skipped": f"error: {type(exc).__name__}: {exc}{where}"}


def run_isolated(a, peer):
    """Runs one peer in a child process (this script with --in-process) and returns its JSON line,
    or a skipped line saying how the child failed. Each child generates its own inputs (the same,
    from the same seeds); that time is not in the reported times."""
    import subprocess

    cmd = [sys.executable, os.path.abspath(__file__), "--case", a.case, "--reps", str(a.reps), "--peers", peer,
           "--in-process"] + [f"--param={kv}" for kv in a.param]
    try:
        r = subprocess.run(cmd, capture_output=True, text=True, timeout=a.peer_timeout or None)
    except subprocess.TimeoutExpired:
        return {"peer": peer, "case": a.case, "skipped": f"error: timed out after {a.peer_timeout:g} s (--peer-timeout)"}
    for line in r.stdout.splitlines():
        try:
            obj = json.loads(line)
        except ValueError:
            continue
        if isinstance(obj, dict) and obj.get("peer") == peer:
            return obj
    if r.returncode < 0:
        how = f"killed by signal {-r.returncode}" + (" (SIGKILL: likely out of memory)" if r.returncode == -9 else "")
    else:
        how = f"exited with status {r.returncode}"
    tail = " | ".join(r.stderr.strip().splitlines()[-3:])
    return {"peer": peer, "case": a.case, "skipped": f"error: peer process {how}" + (f": {tail}" if tail else "")}


def emit(obj):
    print(json.dumps(obj), flush=True)


def usage_error(msg):
    print(f"peers.py: error: {msg}", file=sys.stderr)
    sys.exit(2)


def parse_params(case_name, raw):
    defaults = CASES[case_name]["defaults"]
    p = dict(defaults)
    for item in raw:
        if "=" not in item:
            usage_error(f"--param expects k=v, got {item!r}")
        k, v = item.split("=", 1)
        k = k.strip()
        if k not in defaults:
            usage_error(f"unknown parameter {k!r} for case {case_name}; known: {', '.join(sorted(defaults))}")
        d = defaults[k]
        if isinstance(d, str):
            p[k] = v
            continue
        try:
            x = float(v)
        except ValueError:
            usage_error(f"parameter {k}={v!r} is not a number")
        if not math.isfinite(x):
            usage_error(f"parameter {k}={v!r} is not finite")
        if isinstance(d, int):
            if x != int(x):
                usage_error(f"parameter {k}={v!r} must be an integer")
            x = int(x)
        p[k] = x
    if "sp" in p and not 0.0 < p["sp"] <= 1.0:
        usage_error(f"sp={p['sp']} must be in (0, 1]")
    for k in ("m", "n", "k", "rows", "cols", "rank", "r0", "H1", "H2", "batch"):
        if k in p and p[k] < 1:
            usage_error(f"{k}={p[k]} must be >= 1")
    for k, v in p.items():
        if isinstance(v, (int, float)) and not isinstance(v, bool) and v < 0:
            usage_error(f"{k}={v} must not be negative")
    if case_name == "kmeans" and p["k"] > p["cols"]:
        usage_error(f"kmeans needs cols >= k (the generator puts center c's marker at column c), got k={p['k']} cols={p['cols']}")
    if p.get("reg") is not None and isinstance(p["reg"], str) and p["reg"] not in ("wL2", "L2"):
        usage_error(f"reg={p['reg']!r} must be wL2 or L2")
    return p


def list_json():
    versions, skipped = peer_status()
    return {
        "python": platform.python_version(),
        "peers": versions,
        "skipped": skipped,
        "scipy": SCIPY_VERSION,
        "jax_backend": JAX_BACKEND,
        "cases": {name: c["defaults"] for name, c in CASES.items()},
    }


def main(argv):
    ap = argparse.ArgumentParser(description="Python peers (numpy, numexpr, jax) for lafuse bench.")
    ap.add_argument("--list", action="store_true", help="print the detected peers as one JSON object")
    ap.add_argument("--case", help="case to run: " + ", ".join(CASES))
    ap.add_argument("--reps", type=int, default=5, help="timed repetitions (default 5)")
    ap.add_argument("--param", action="append", default=[], metavar="K=V", help="case parameter, repeatable")
    ap.add_argument("--peers", default=",".join(PEERS), help="comma list of peers to run (default all)")
    ap.add_argument("--peer-timeout", type=float, default=0.0, metavar="S",
                    help="seconds each peer may take, inputs included (default 0: no limit)")
    ap.add_argument("--in-process", action="store_true",
                    help="run the peers in this process (default: one child process per peer, so that a "
                         "peer killed by the OS, e.g. out of memory, or timed out is reported as skipped)")
    a = ap.parse_args(argv)  # exits 2 on malformed arguments
    if a.list:
        emit(list_json())
        return 0
    if not a.case:
        usage_error("one of --list or --case NAME is required")
    if a.case not in CASES:
        usage_error(f"unknown case {a.case!r}; cases: {', '.join(CASES)}")
    if a.reps < 1:
        usage_error(f"--reps must be >= 1, got {a.reps}")
    peers = [q.strip() for q in a.peers.split(",") if q.strip()]
    for q in peers:
        if q not in PEERS:
            usage_error(f"unknown peer {q!r}; peers: {', '.join(PEERS)}")
    p = parse_params(a.case, a.param)
    if a.peer_timeout < 0:
        usage_error(f"--peer-timeout must be >= 0, got {a.peer_timeout}")
    if not a.in_process:
        for q in peers:
            emit(run_isolated(a, q))
        return 0
    case = CASES[a.case]
    if np is None:
        for q in peers:
            emit({"peer": q, "case": a.case, "skipped": f"numpy not installed: {NUMPY_ERR}"})
        return 0
    try:
        data = case["gen"](p)
    except Exception as exc:
        for q in peers:
            emit({"peer": q, "case": a.case, "skipped": f"error generating inputs: {type(exc).__name__}: {exc}"})
        return 0
    for q in peers:
        emit(run_peer(a.case, case, q, data, p, a.reps))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
