#!/bin/bash
# Interleaved --jit tiered vs --jit llvm on the micro patterns at 1e5 rows (bench's reps=5),
# configurations rotated each round. usage: run.sh ROUNDS BIN
rounds=$1; bin=$2
cd /work/main
for r in $(seq "$rounds"); do
  for p in ${PATTERNS:-sum_xyz magg row_mv row_mm}; do
    for sp in ${SPS:-1 0.1 0.01}; do
      if [ $((r % 2)) = 0 ]; then order="tiered llvm"; else order="llvm tiered"; fi
      for j in $order; do
        out=$($bin run examples/micro/$p.dml --jit $j --nvargs m=100000 sp=$sp reps=5 2>&1)
        echo "$p sp=$sp $j first $(echo "$out" | awk '/first_ms/{print $2}') rep $(echo "$out" | awk '/ms_per_rep/{print $2}')"
      done
    done
  done
done
