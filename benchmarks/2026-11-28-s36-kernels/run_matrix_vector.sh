#!/bin/bash
# usage: abmv.sh ROUNDS M BIN... ; interleaves lafuse binaries with numpy on X %*% v and t(X) %*% y
# Run from the repository root; PYTHON names an interpreter with numpy.
rounds=$1; m=$2; shift 2
for r in $(seq $rounds); do
  for b in "$@"; do echo "$(basename $b) $($b run examples/micro/matrix_vector.dml --fusion none --nvargs m=$m reps=1000 2>&1 | tail -1)"; done
  ${PYTHON:-python3} - $m <<'PY'
import numpy as np, time, sys
m=int(sys.argv[1]); rng=np.random.default_rng(7)
X=rng.random((m,100)); v=rng.random((100,1)); y=rng.random((m,1))
def t(f,reps=1000):
    f(); s=time.perf_counter()
    for _ in range(reps): f()
    return (time.perf_counter()-s)/reps*1e6
print("numpy X %%*%% v us %.1f, t(X) %%*%% y us %.1f" % (t(lambda: X@v), t(lambda: X.T@y)))
PY
done
