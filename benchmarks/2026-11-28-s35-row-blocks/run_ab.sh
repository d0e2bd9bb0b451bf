#!/bin/bash
# Session 35's interleaved A/B of the Row patterns: binary A against binary B, each line
# "label pattern jit ms_per_rep read_ms_per_rep first_ms" (read: a same-process sum of X
# timed after each evaluation; first: the first evaluation, JIT included).
#   run_ab.sh A_BINARY B_BINARY ROWS ROUNDS "JIT..." > ab.txt
a=$1; b=$2; m=${3:-10000}; rounds=${4:-3}; jits=${5:-llvm}
ex=$(dirname "$0")/../../examples/micro
for r in $(seq "$rounds"); do
  for bin in "A=$a" "B=$b"; do
    label=${bin%%=*}; exe=${bin#*=}
    for jit in $jits; do
      for p in row_mv row_mm; do
        $exe run "$ex/$p.dml" --jit "$jit" --nvargs m="$m" n=1000 reps=5 read_ref=1 |
          awk -v l="$label" -v p="$p" -v j="$jit" '/^first_ms/{f=$2} /^ms_per_rep/{o=$2} /^read_ms_per_rep/{d=$2} END{print l, p, j, o, d, f}'
      done
    done
  done
done
