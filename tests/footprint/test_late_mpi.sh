#!/bin/sh
# libhpcmem.so does not link the MPI library (docs/mpirun.md): a program that
# opens MPI itself after libhpcmem was preloaded still gets working
# MPI_Init / MPI_Finalize (passed on, one warning); preloading the MPI
# library ahead of libhpcmem brings the layer and its report back.
prog=$top_builddir/tests/footprint/late_mpi
lib=$LIBHPCMEM
ok() { echo "[       OK ] late_mpi.$1"; }
fail() { echo "[  FAILED  ] late_mpi.$1 ($2)"; fails=$((fails + 1)); }
fails=0
if [ -z "$MPIEXEC" ]; then echo "[  SKIPPED ] late_mpi.all (built without MPI)"; exit 77; fi
libmpi=$(ldd "$top_builddir/tests/mpi/plain_mpi" 2>/dev/null | awk '$1 ~ /^libmpi\.so/ { print $3; exit }')
if [ -z "$libmpi" ]; then echo "[  SKIPPED ] late_mpi.all (no libmpi.so in tests/mpi/plain_mpi)"; exit 77; fi
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

for mode in global local; do
  "$top_builddir/tests/run-mpi.sh" 1 -x LD_PRELOAD="$lib" "$prog" "$libmpi" $mode > "$tmp/out" 2> "$tmp/err"
  rc=$?
  if [ $rc = 0 ] && grep -q '^MPI_Init 0 initialized 1' "$tmp/out" && grep -q '^MPI_Finalize 0' "$tmp/out" &&
     grep -q 'MPI library was loaded after libhpcmem' "$tmp/err"; then ok "calls_passed_on_$mode"
  else fail "calls_passed_on_$mode" "exit $rc: $(tr '\n' '|' < "$tmp/out") $(tr '\n' '|' < "$tmp/err" | cut -c1-300)"; fi
done

mkdir -p "$tmp/r"
HPCMEM_REPORT=summary HPCMEM_REPORT_DIR="$tmp/r" "$top_builddir/tests/run-mpi.sh" 1 \
  -x LD_PRELOAD="$lib $libmpi" -x HPCMEM_REPORT -x HPCMEM_REPORT_DIR "$prog" "$libmpi" > "$tmp/out" 2> "$tmp/err"
rc=$?
# the job report (hpcmem-report-ID.json), not only the rank's summary (hpcmem-report-ID.rank0.json)
job=$(ls "$tmp"/r/hpcmem-report-*.json 2>/dev/null | grep -v '\.rank[0-9]*\.json$' | head -1)
if [ $rc = 0 ] && grep -q '^MPI_Finalize 0' "$tmp/out" && ! grep -q 'loaded after libhpcmem' "$tmp/err" &&
   [ -n "$job" ] && grep -q '"ranks"' "$job"; then ok report_with_mpi_preloaded
else fail report_with_mpi_preloaded "exit $rc, files $(ls "$tmp/r"), $(tr '\n' '|' < "$tmp/err" | cut -c1-300)"; fi
exit $fails
