#!/bin/bash
# Runs every corpus script through Apache SystemDS 3.4 (the reference) and compares its stdout
# with the script's .expected file using the corpus tolerance (compare.py), and checks that every
# script under errors/ makes SystemDS fail.
#   tests/corpus/systemds_check.sh [NAME...]     (from anywhere; scripts run from the repo root)
# SystemDS prints its own trailer ("SystemDS Statistics:", "Total execution time:", "Number of
# executed Spark inst:") on stdout after the script's output; it is cut off before comparing.
# Error scripts whose first line is "# systemds-accepts: REASON" are ones SystemDS 3.4 runs without
# an error although lafuse must reject them; they are skipped here too.
# Scripts whose first line is "# lafuse-only: REASON" use DML that SystemDS 3.4 rejects although
# it is in lafuse's subset (see README.md); they are skipped here.
# SystemDS exits 0 even when a script fails; failure shows as "An Error Occurred" on stdout.
# SystemDS runs with -exec singlenode: the installed wheel has no Spark jars, and scripts whose
# sizes are unknown at compile time otherwise die with NoClassDefFoundError (Spark planning).
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
sds=${SYSTEMDS:-/work/shared/tools/systemds}
cd "$root"
tmp=$(mktemp -d)
# SystemDS creates ./scratch_space in its working directory; remove it again if we made it.
had_scratch=0; [[ -e scratch_space ]] && had_scratch=1
cleanup() { rm -rf "$tmp"; [[ $had_scratch -eq 0 ]] && rmdir scratch_space 2>/dev/null; true; }
trap cleanup EXIT
pass=0; fail=0; failed=()

run_sds() { # script argsfile -> stdout in $tmp/out
  local args=()
  if [[ -f $2 ]]; then
    args=(-nvargs)
    while IFS= read -r l; do [[ -n $l ]] && args+=("$l"); done <"$2"
  fi
  "$sds" "$1" --base -exec singlenode "${args[@]}" >"$tmp/raw" 2>"$tmp/err"
  sed '/^SystemDS Statistics:$/,$d' "$tmp/raw" >"$tmp/out"
}

if [[ $# -gt 0 ]]; then names=("$@"); else
  names=(); for f in "$here"/*.dml "$here"/errors/*.dml; do names+=("$(basename "${f%.dml}")"); done
fi
for name in "${names[@]}"; do
  name=${name#errors/}
  if [[ -f $here/$name.dml ]] && head -1 "$here/$name.dml" | grep -q '^# lafuse-only:'; then
    echo "skip $name ($(head -1 "$here/$name.dml" | sed 's/^# lafuse-only: *//'))"
  elif [[ -f $here/$name.dml ]]; then
    run_sds "tests/corpus/$name.dml" "$here/$name.args"
    if grep -q "An Error Occurred" "$tmp/raw"; then
      echo "FAIL $name: SystemDS error:"; sed -n '1,15p' "$tmp/raw"; fail=$((fail+1)); failed+=("$name"); continue
    fi
    if d=$(python3 "$here/compare.py" "$here/$name.expected" "$tmp/out"); then
      pass=$((pass+1)); echo "ok   $name"
    else
      echo "FAIL $name: $d"; fail=$((fail+1)); failed+=("$name")
    fi
  elif [[ -f $here/errors/$name.dml ]] && head -1 "$here/errors/$name.dml" | grep -q '^# systemds-accepts:'; then
    echo "skip errors/$name ($(head -1 "$here/errors/$name.dml" | sed 's/^# systemds-accepts: *//'))"
  elif [[ -f $here/errors/$name.dml ]]; then
    run_sds "tests/corpus/errors/$name.dml" "$here/errors/$name.args"
    if grep -q "An Error Occurred" "$tmp/raw"; then
      # the innermost cause is the last "Exception -- message" line of SystemDS's report
      msg=$(grep -- ' -- ' "$tmp/raw" | tail -1 | sed 's/^ *//' | cut -c1-160)
      pass=$((pass+1)); echo "ok   errors/$name: $msg"
    else
      echo "FAIL errors/$name: SystemDS did not fail"; fail=$((fail+1)); failed+=("errors/$name")
    fi
  else
    echo "no such script: $name"; fail=$((fail+1))
  fi
done
echo "passed $pass, failed $fail ${failed[*]:-}"
[[ $fail -eq 0 ]]
