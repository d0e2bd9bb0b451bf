#!/bin/bash
# Dense Outer at 20000², rank 100, with the plain multiply: the micro suite's case, binaries alternating.
# usage: run_outer_20000_ab.sh ROUNDS OLD NEW (OUT: where the bench reports go, default /tmp)
rounds=$1; old=$2; new=$3
for r in $(seq "$rounds"); do
  if [ $((r % 2)) = 1 ]; then order="$old $new"; else order="$new $old"; fi
  for b in $order; do
    out=$(LAFUSE_PROFILE= $b bench --suite micro --filter "outer sp=1e0" --reps 3 --out ${OUT:-/tmp}/outer-ab-$r-$(basename $b) 2>&1)
    echo "round $r $(basename $b): $(echo "$out" | grep -o 'lafuse gen *[0-9.]* ms' | tr -s ' ') | $(echo "$out" | grep -o 'plain multiply[^:]*: [0-9.]*×[^)]*)')"
  done
done
