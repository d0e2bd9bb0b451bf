#!/bin/bash
# Alternating A/B of two lafuse binaries on the MultiAgg micro pattern (sum(X*Y), sum(X*Z), X
# CSR, Y and Z dense) under each JIT and unfused, ms per evaluation (reps=5); run from the
# repository root. usage: run_magg_ab.sh ROUNDS OLD NEW
rounds=$1; old=$2; new=$3
for r in $(seq "$rounds"); do
  for m in 10000 100000; do
    for sp in 0.01 0.1; do
      for cfg in "--jit tiered" "--jit llvm" "--jit cranelift" "--fusion none"; do
        if [ $((r % 2)) = 0 ]; then order="old new"; else order="new old"; fi
        for which in $order; do
          bin=$old; [ $which = new ] && bin=$new
          out=$($bin run examples/micro/magg.dml $cfg --nvargs m=$m sp=$sp reps=5 2>&1)
          echo "m=$m sp=$sp ${cfg// /_} $which first $(echo "$out" | awk '/first_ms/{print $2}') rep $(echo "$out" | awk '/ms_per_rep/{print $2}')"
        done
      done
    done
  done
done
