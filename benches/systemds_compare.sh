#!/usr/bin/env bash
# Times the paper's micro patterns (examples/micro/*.dml) in lafuse (fused, gen) and in
# Apache SystemDS 3.4 with codegen on, in one run on this machine, and prints a markdown table.
# Each script times its own loop with time(), so JVM start-up and data generation are excluded.
#   benches/systemds_compare.sh [LAFUSE_BINARY] [SYSTEMDS_WRAPPER]
# Defaults: target/release/lafuse and ../shared/tools/systemds. REPS=n sets repetitions.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
lafuse=${1:-$root/target/release/lafuse}
systemds=${2:-$root/../shared/tools/systemds}
reps=${REPS:-5}
cases=(
  "sum_xyz dense|sum_xyz.dml|m=100000 n=1000 sp=1.0"
  "sum_xyz sparse 0.01|sum_xyz.dml|m=100000 n=1000 sp=0.01"
  "magg dense|magg.dml|m=100000 n=1000 sp=1.0"
  "magg sparse 0.01|magg.dml|m=100000 n=1000 sp=0.01"
  "row_mv dense|row_mv.dml|m=100000 n=1000 sp=1.0"
  "row_mv sparse 0.01|row_mv.dml|m=100000 n=1000 sp=0.01"
  "row_mm dense|row_mm.dml|m=100000 n=1000 sp=1.0"
  "row_mm sparse 0.01|row_mm.dml|m=100000 n=1000 sp=0.01"
  "outer sp=1e-2|outer.dml|m=20000 n=20000 k=100 sp=0.01"
  "outer sp=1e-3|outer.dml|m=20000 n=20000 k=100 sp=0.001"
  "outer sp=1e-4|outer.dml|m=20000 n=20000 k=100 sp=0.0001"
)
field() { grep -E "^$1 " | head -1 | awk '{print $2}'; }
echo "| pattern | lafuse ms | SystemDS codegen ms | speedup | results agree |"
echo "|---|---|---|---|---|"
for c in "${cases[@]}"; do
  IFS='|' read -r name script args <<<"$c"
  # shellcheck disable=SC2086
  # Fused from the first repetition, as SystemDS's codegen (the default tiered JIT starts
  # blocks unfused until fusing them pays).
  ours=$("$lafuse" run "$root/examples/micro/$script" --jit llvm --nvargs $args reps=$reps 2>&1)
  # shellcheck disable=SC2086
  theirs=$("$systemds" "$root/examples/micro/$script" --codegen -nvargs $args reps=$reps 2>&1)
  a=$(field ms_per_rep <<<"$ours"); b=$(field ms_per_rep <<<"$theirs")
  ra=$(field result <<<"$ours"); rb=$(field result <<<"$theirs")
  agree=$(python3 -c "a,b=float('$ra'),float('$rb'); print('yes' if abs(a-b)<=1e-9*max(abs(a),abs(b)) else f'NO ({a} vs {b})')")
  speed=$(python3 -c "print(f'{$b/$a:.2f}x')")
  printf '| %s | %.1f | %.1f | %s | %s |\n' "$name" "$a" "$b" "$speed" "$agree"
done
