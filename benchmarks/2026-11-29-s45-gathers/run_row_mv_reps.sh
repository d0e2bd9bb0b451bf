#!/bin/bash
# `t(X) %*% (w * (X %*% v))` over a 1e5 x 1000 CSR X under the default --jit tiered, two
# binaries alternating, at 5, 10 and 40 evaluations in the loop (ms per evaluation, and the
# fused calls on each tier from --stats); run from the repository root.
# usage: run_row_mv_reps.sh ROUNDS OLD NEW
rounds=$1; old=$2; new=$3
for r in $(seq "$rounds"); do
  for sp in 0.1 0.01; do
    for reps in 5 10 40; do
      if [ $((r % 2)) = 0 ]; then order="old new"; else order="new old"; fi
      for which in $order; do
        bin=$old; [ $which = new ] && bin=$new
        out=$($bin run examples/micro/row_mv.dml --stats --nvargs m=100000 sp=$sp reps=$reps 2>&1)
        echo "sp=$sp reps=$reps $which rep $(echo "$out" | awk '/ms_per_rep/{print $2}') calls $(echo "$out" | awk -F'\t' '/Calls on Cranelift/{print $NF}' | awk '{print $1}')"
      done
    done
  done
done
