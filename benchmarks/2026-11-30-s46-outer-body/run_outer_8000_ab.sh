#!/bin/bash
# Dense Outer sum(X * log(U %*% t(V) + 1e-15)) at 8000², rank 100, --jit llvm: two binaries
# alternating, ms an evaluation (five evaluations a run). usage: run_outer_8000_ab.sh ROUNDS OLD NEW
rounds=$1; old=$2; new=$3
cd "$(dirname "$0")/../.."
for r in $(seq "$rounds"); do
  if [ $((r % 2)) = 1 ]; then order="old new"; else order="new old"; fi
  for which in $order; do
    if [ $which = old ]; then b=$old; else b=$new; fi
    out=$($b run examples/micro/outer.dml --jit llvm --nvargs m=8000 n=8000 sp=1 reps=5 2>&1)
    echo "round $r $which ms_per_rep $(echo "$out" | awk '/ms_per_rep/{print $2}') result $(echo "$out" | awk '/^result/{print $2}')"
  done
done
