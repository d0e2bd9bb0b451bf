#!/bin/bash
# Writes each pattern's .expected file from Apache SystemDS 3.4's output (the oracle of these
# scripts): tests/codegen_patterns/systemds_expected.sh [NAME...]   (from anywhere)
# Scripts run from the repository root with SystemDS's fusion off (--base), except those whose
# header has "# systemds: codegen REASON" (SystemDS's unfused run fails on them; the reason says
# how). SystemDS's statistics trailer is cut off. A script SystemDS fails on writes nothing and
# counts as failed. Needs SystemDS (DEVELOPERS.md): $SYSTEMDS, else /work/shared/tools/systemds.
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
sds=${SYSTEMDS:-/work/shared/tools/systemds}
cd "$root"
tmp=$(mktemp -d)
had_scratch=0; [[ -e scratch_space ]] && had_scratch=1
cleanup() { rm -rf "$tmp"; [[ $had_scratch -eq 0 ]] && rm -rf scratch_space; true; }
trap cleanup EXIT
if [[ $# -gt 0 ]]; then names=("$@"); else
  names=(); for f in "$here"/*.dml; do names+=("$(basename "${f%.dml}")"); done
fi
written=0; failed=()
for name in "${names[@]}"; do
  script="$here/$name.dml"
  mode=--base
  head -5 "$script" | grep -q '^# systemds: codegen' && mode=--codegen
  "$sds" "tests/codegen_patterns/$name.dml" "$mode" -exec singlenode >"$tmp/raw" 2>"$tmp/err"
  if grep -q "An Error Occurred" "$tmp/raw"; then
    failed+=("$name"); echo "FAIL $name ($mode): $(grep -m1 -A2 'An Error Occurred' "$tmp/raw" | tail -1)"
    continue
  fi
  sed '/^SystemDS Statistics:$/,$d' "$tmp/raw" >"$here/$name.expected"
  written=$((written + 1)); echo "ok   $name ($mode)"
done
echo "written $written, failed ${#failed[@]}${failed:+: ${failed[*]}}"
[[ ${#failed[@]} -eq 0 ]]
