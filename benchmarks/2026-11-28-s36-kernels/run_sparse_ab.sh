#!/bin/bash
# Interleaved A/B of lafuse binaries on the sparse micro patterns at 1e4 x 1e3 (run from the
# repository root): usage run_sparse_ab.sh ROUNDS BIN...
# Prints "binary pattern policy sparsity ms_per_rep" (and first_ms for magg).
rounds=$1; shift
for r in $(seq "$rounds"); do
  for b in "$@"; do
    for sp in 0.1 0.01 0.001; do
      echo "$(basename "$b") sum_xyz llvm $sp $("$b" run examples/micro/sum_xyz.dml --jit llvm --nvargs m=10000 sp=$sp reps=20 2>&1 | grep ms_per)"
    done
    echo "$(basename "$b") row_mv none 0.1 $("$b" run examples/micro/row_mv.dml --fusion none --nvargs m=10000 sp=0.1 reps=30 2>&1 | grep ms_per)"
    echo "$(basename "$b") magg tiered 0.01 $("$b" run examples/micro/magg.dml --jit tiered --nvargs m=10000 sp=0.01 reps=5 2>&1 | head -2 | tr '\n' ' ')"
  done
done
