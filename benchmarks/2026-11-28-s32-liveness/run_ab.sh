#!/usr/bin/env bash
# Interleaved A/B: session-32 first binary vs final, hv.dml (200 calls of MLogReg's Hessian product) and MLogReg quick.
set -u
A=/tmp/s31/lafuse-final
B=/work/target-main/release/lafuse
export LAFUSE_PROFILE=/tmp/machine.json
cd /work/main
for round in 1 2 3; do
  for bin in A B; do
    exe=${!bin}
    for j in "--fusion none" "--jit llvm" "--jit cranelift"; do
      t=$($exe run examples/micro/hessian_product.dml $j 2>&1 | grep hessian_product_us | awk "{print \$2}")
      echo "hv $bin $j us $t"
    done
    for j in "--fusion none" "--jit tiered" "--jit llvm"; do
      t=$($exe run examples/algorithms/mlogreg.dml --nvargs X=/tmp/algq/mlogreg/X Y=/tmp/algq/mlogreg/y fmt=binary $j 2>&1 | grep time_ms | awk '{print $2}')
      echo "mlogreg $bin $j time_ms $t"
    done
  done
done
