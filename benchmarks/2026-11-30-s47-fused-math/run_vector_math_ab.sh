#!/bin/bash
# The unfused exp and log over 512 x 500 cells, 1000 calls each (examples/micro/vector_math.dml,
# the --stats heavy-hitter seconds), two binaries alternating. usage: run_vector_math_ab.sh ROUNDS OLD NEW
rounds=$1; old=$2; new=$3
cd "$(dirname "$0")/../.."
for r in $(seq "$rounds"); do
  if [ $((r % 2)) = 1 ]; then order="old new"; else order="new old"; fi
  for which in $order; do
    if [ $which = old ]; then b=$old; else b=$new; fi
    echo "round $r $which $($b run examples/micro/vector_math.dml --fusion none --stats --nvargs reps=1000 2>&1 | grep -E ' (log|exp|tanh) ' | awk '{print $2, $3}' | tr '\n' ' ')"
  done
done
