#!/bin/bash
# Session 34's interleaved A/B: the session's first binary (A) against the final one (B).
#   run_ab.sh A_BINARY B_BINARY ROUNDS > ab.txt
# Micro scripts: ALS-CG's updates with a dense mask (the Outer tiles' scratch memory) and the
# few-rows product; each line "label case value".
a=$1; b=$2; rounds=${3:-5}
ex=$(dirname "$0")/../../examples/micro
for r in $(seq "$rounds"); do
  for bin in "A=$a" "B=$b"; do
    label=${bin%%=*}; exe=${bin#*=}
    for pol in "--fusion none" "--jit llvm"; do
      $exe run "$ex/als_updates.dml" $pol --nvargs sp=1 reps=200 | awk -v l="$label" -v p="${pol// /}" '/_us/{print l, $1 p, $2}'
    done
    $exe run "$ex/few_rows_product.dml" --fusion none | awk -v l="$label" '/_ms/{print l, $1, $2}'
  done
done
