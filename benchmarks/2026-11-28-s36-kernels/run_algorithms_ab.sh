#!/bin/bash
# Interleaved A/B of lafuse binaries and policies on the algorithms at quick scale, one process
# per run (run from the repository root). Data: the directories the suite's generators write
# (examples/algorithms/gen_*.dml, 10000 x 100; a trailing "s" is the sparse set), under $DATA.
# usage: run_algorithms_ab.sh ROUNDS "mlogreg glm glms" "label=BIN POLICY..." ...
rounds=$1; shift; algs=$1; shift
for r in $(seq "$rounds"); do
  for a in $algs; do
    d=$DATA/$a; alg=${a%s}; [ -d "$DATA/$alg" ] || alg=$a
    case $alg in kmeans|alscg|autoencoder) args="X=$d/X";; *) args="X=$d/X Y=$d/y";; esac
    for spec in "$@"; do
      label=${spec%%=*}; rest=${spec#*=}; bin=${rest%% *}; pol=${rest#* }
      t=$($bin run examples/algorithms/$alg.dml $pol --nvargs $args fmt=binary 2>&1 | awk '/time_ms/{print $2}')
      echo "$a $label $t"
    done
  done
done
