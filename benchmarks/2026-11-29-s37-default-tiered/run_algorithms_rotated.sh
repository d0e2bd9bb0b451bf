#!/bin/bash
# Interleaved A/B of lafuse configurations on the algorithms at quick scale, one process per
# run, the configurations' order rotated every round so that none always runs first after
# another algorithm (run from the repository root). Data: the directories the suite's
# generators write (examples/algorithms/gen_*.dml, 10000 x 100; a trailing "s" is the sparse
# set), under $DATA.
# usage: run_algorithms_rotated.sh ROUNDS "l2svm glms" "label=BIN OPTION..." ...
rounds=$1; shift; algs=$1; shift
specs=("$@")
for r in $(seq "$rounds"); do
  for a in $algs; do
    d=$DATA/$a; alg=${a%s}; [ -d "$DATA/$alg" ] || alg=$a
    case $alg in kmeans|alscg|autoencoder) args="X=$d/X";; *) args="X=$d/X Y=$d/y";; esac
    n=${#specs[@]}
    for i in $(seq 0 $((n - 1))); do
      spec=${specs[$(( (i + r) % n ))]}
      label=${spec%%=*}; rest=${spec#*=}; bin=${rest%% *}; opts=""
      [ "$rest" != "$bin" ] && opts=${rest#* }
      t=$($bin run examples/algorithms/$alg.dml $opts --nvargs $args fmt=binary 2>&1 | awk '/time_ms/{print $2}')
      echo "$a $label $t"
    done
  done
done
