#!/bin/sh
# Add up the results of every test program run by `make check` and print
# "N passed, N failed" (test cases, not programs).  Each program's log is read:
#   GoogleTest:   "[       OK ] x.y" passed, "[  FAILED  ] x.y (" failed, "[  SKIPPED ]" skipped
#   shell tests:  the same markers, printed by the scripts themselves
# A program that failed (automake's .trs) without printing any failed case counts as
# one failure (it crashed or died before its report), so a crash is never hidden.
# Usage: tests/summary.sh BUILD-DIR   -> exit 1 when anything failed
dir=${1:-.}
passed=0; failed=0; skipped=0
for trs in $(find "$dir" -name '*.trs' -not -path '*/.libs/*' | sort); do
  log="${trs%.trs}.log"
  p=$(grep -c '^\[       OK \]' "$log" 2>/dev/null); p=${p:-0}
  f=$(grep -cE '^\[  FAILED  \] [A-Za-z_0-9/.]+[ :(]' "$log" 2>/dev/null); f=${f:-0}
  # gtest repeats every failed case in its final list; count each once
  if grep -q '^\[==========\]' "$log" 2>/dev/null; then f=$(grep -E '^\[  FAILED  \] [A-Za-z_0-9/.]+ \(' "$log" | sort -u | wc -l); fi
  s=$(grep -cE '^\[  SKIPPED \] [A-Za-z_0-9/.]+' "$log" 2>/dev/null); s=${s:-0}
  result=$(sed -n 's/^:test-result: //p' "$trs" | head -1)
  if [ "$result" = FAIL ] || [ "$result" = ERROR ]; then
    [ "$f" -eq 0 ] && f=1 && echo "test program failed without a failed case (crash?): ${trs%.trs}"
  elif [ "$result" = SKIP ] && [ "$p" -eq 0 ] && [ "$s" -eq 0 ]; then s=1; fi
  [ "$f" -gt 0 ] && echo "failures in ${log}"
  passed=$((passed + p)); failed=$((failed + f)); skipped=$((skipped + s))
done
echo "$passed passed, $failed failed, $skipped skipped"
[ "$failed" -eq 0 ]
