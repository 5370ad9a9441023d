#!/bin/sh
# A new size class reuses memory the process touched before (docs/allocator.md,
# "Spans of a class"): page faults of a size sweep, touched and untouched.
prog="$top_builddir/tests/integration/span_reuse"
export HPCMEM_REPORT=off
fails=0
for mode in touch notouch; do
  if out=$("$prog" $mode); then echo "[       OK ] span_reuse.$mode"
  else echo "[  FAILED  ] span_reuse.$mode"; fails=$((fails + 1)); fi
  echo "$out"
done
exit $fails
