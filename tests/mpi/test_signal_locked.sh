#!/bin/sh
# The summary of a fatal signal never waits for a lock of the statistics: a
# SIGTERM and a SIGSEGV that come while the thread holds the large tier's
# lock, the thread caches' registry lock, or (single-threaded) is inside the
# large tier (tests/mpi/signal_locked.c) still get their summary, at once,
# marked approximate, and the process dies of its signal.  Without a bounded
# wait the summary spun on the lock until its 5-second watchdog killed the
# process with no summary at all; single-threaded, it read the tier's lists
# as they were and called the figures exact.
prog=$top_builddir/tests/mpi/signal_locked
ulimit -c 0   # the SIGSEGV leaves no core file
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fails=0
ok() { echo "[       OK ] signal_locked.$1"; }
fail() { echo "[  FAILED  ] signal_locked.$1 ($2)"; fails=$((fails + 1)); }

for case in TERM SEGV TERM.single SEGV.single TERM.registry SEGV.registry; do
  how=${case%%.*}
  what=large; [ "$how" = "$case" ] || what=${case#*.}
  case $how in TERM) sig=15 ;; SEGV) sig=11 ;; esac
  start=$(date +%s%N)
  HPCMEM_REPORT=summary HPCMEM_REPORT_DIR="$tmp/$case" timeout -s KILL 30 "$prog" $how $what > "$tmp/out" 2> "$tmp/err"
  rc=$?
  ms=$(( ($(date +%s%N) - start) / 1000000 ))
  f=$(ls "$tmp/$case"/hpcmem-report-*.json 2>/dev/null | head -1)
  if [ $rc = $((128 + sig)) ] && [ "$ms" -lt 3000 ] && grep -q '^libhpcmem: process [0-9]*: heap high-water mark 40\.' "$tmp/err" &&
     grep -q '^libhpcmem: figures approximate' "$tmp/err"; then ok "$case.summary_at_once"
  else fail "$case.summary_at_once" "exit $rc (want $((128 + sig))), $ms ms, stderr: $(tr '\n' '|' < "$tmp/err" | head -c 400)"; fi
  if [ -n "$f" ] && grep -q '"approximate": true' "$f" && grep -q "\"signal\": $sig" "$f"; then ok "$case.json_says_approximate"
  else fail "$case.json_says_approximate" "file '$f': $(head -c 300 "$f" 2>/dev/null)"; fi
done
[ $fails = 0 ]
