#!/bin/bash
# Interleaved runs of examples/algorithms/<alg>.dml on data of gen_<alg>.dml at quick scale (10000 x 100, sparsity 1 and 0.01, under /tmp/algq/<alg>[s]); prints "case label time_ms".
# tiered_ab.txt: ./run_ab.sh 6 "l2svm l2svms glm glms mlogreg mlogregs kmeans kmeanss" "none=FINAL --fusion none" "fg=FINAL --jit tiered --tier-in-foreground" "bg16=FINAL --jit tiered" "base=FIRST --jit tiered"
# l2svm_ab.txt: ./run_ab.sh 12 l2svm "none=FINAL --fusion none" "bg16=FINAL --jit tiered" "never=FINAL --jit tiered --tier-compile-ms 1e9"
# usage: ab2.sh ROUNDS "alg1 alg2" "label=BIN POLICY..." ...
rounds=$1; shift; algs=$1; shift
for r in $(seq $rounds); do
 for a in $algs; do
  base=${a%s}; [ "$a" = "$base" ] || true
  d=/tmp/algq/$a; alg=${a%s}; [ -d /tmp/algq/$alg ] || alg=$a
  case $alg in kmeans|alscg|autoencoder) args="X=$d/X";; *) args="X=$d/X Y=$d/y";; esac
  for spec in "$@"; do
   label=${spec%%=*}; rest=${spec#*=}; bin=${rest%% *}; pol=${rest#* }
   t=$(LAFUSE_PROFILE=/tmp/machine.json $bin run /work/main/examples/algorithms/$alg.dml $pol --nvargs $args fmt=binary 2>&1 | awk '/time_ms/{print $2}')
   echo "$a $label $t"
  done
 done
done
