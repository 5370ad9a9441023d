#!/bin/sh
# An unmodified MPI binary (tests/mpi/plain_mpi: the report test's program,
# linked with the MPI library only) run with
#   mpirun -x LD_PRELOAD=libhpcmem.so ./plain_mpi
# produces the same job report as the relinked program: rank r's high-water
# mark is (r+1)*32 MiB within the 8 MiB overhead bound of test_report.sh.
np=4 mib=32 overhead=8
lib=${LIBHPCMEM:-$HPCMEM_LIB}
prog=$top_builddir/tests/mpi/plain_mpi
check=$top_srcdir/tests/mpi/report_check.py
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fails=0
ok() { echo "[       OK ] preload_mpi.$1"; }
fail() { echo "[  FAILED  ] preload_mpi.$1 ($2)"; fails=$((fails + 1)); }

# the binary really does not know libhpcmem
if [ -x "$prog" ] && ! ldd "$prog" | grep -q hpcmem; then ok binary_without_libhpcmem
else fail binary_without_libhpcmem "$(ldd "$prog" 2>&1 | grep hpcmem)"; fi

# without the preload: no report at all
mkdir -p "$tmp/plain"
HPCMEM_REPORT_DIR="$tmp/plain" "$top_builddir/tests/run-mpi.sh" $np "$prog" overlap 4 > "$tmp/plain.out" 2> "$tmp/plain.err"
rc=$?
if [ $rc = 0 ] && [ -z "$(ls "$tmp/plain")" ] && ! grep -q '^libhpcmem:' "$tmp/plain.err"; then ok no_report_without_preload
else fail no_report_without_preload "exit $rc, files $(ls "$tmp/plain")"; fi

mkdir -p "$tmp/pre"
HPCMEM_REPORT=summary HPCMEM_REPORT_DIR="$tmp/pre" \
  "$top_builddir/tests/run-mpi.sh" $np -x LD_PRELOAD="$lib" -x HPCMEM_REPORT -x HPCMEM_REPORT_DIR \
  "$prog" overlap $mib > "$tmp/pre.out" 2> "$tmp/pre.err"
rc=$?
f=$(ls "$tmp"/pre/hpcmem-report-*.json 2>/dev/null | head -1)
if [ $rc = 0 ] && [ -n "$f" ] && grep -q '^libhpcmem: job .*: 4 ranks' "$tmp/pre.err"; then ok report_with_preload
else fail report_with_preload "exit $rc, json '$f', stderr: $(head -5 "$tmp/pre.err" | tr '\n' '|')"; fi
[ -n "$f" ] && { python3 "$check" job "$f" --suite preload_mpi --np $np --mib $mib \
    --overhead-mib $overhead --layout overlap || fails=$((fails + 1)); }
[ $fails = 0 ]
