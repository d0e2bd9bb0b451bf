#!/bin/bash
# A/B of two binaries under --jit cranelift on micro patterns at 1e4 rows (first_ms, ms_per_rep)
rounds=$1; A=$2; B=$3
cd /work/main
for r in $(seq $rounds); do
 for c in "magg 0.01" "magg 1" "sum_xyz 1" "sum_xyz 0.1" "row_mv 1" "row_mm 1" "row_mv 0.1"; do
  set -- $c
  for bin in $A $B; do
   out=$(LAFUSE_PROFILE= $bin run examples/micro/$1.dml --jit cranelift --nvargs m=10000 sp=$2 reps=10 2>&1)
   echo "$1 sp=$2 $(basename $bin) first $(echo "$out" | awk '/first_ms/{print $2}') rep $(echo "$out" | awk '/ms_per_rep/{print $2}')"
  done
 done
done
