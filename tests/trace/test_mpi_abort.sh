#!/bin/sh
# Traced ranks that end by MPI_Abort keep their trace: the aborting rank's
# file ends at MPI_Abort and holds what the rank allocated; the ranks mpirun
# then kills end at signal 15.  Rank r holds (r+1)*16 MiB, rank 1 aborts:
#   c     tests/mpi/no_finalize abort (C, linked with -lhpcmem)
#   mpi   tests/trace/fortran_abort (use mpi)       } Open MPI's Fortran bindings
#   f08   tests/trace/fortran_abort_f08 (use mpi_f08) } call PMPI_Abort directly
# And a rank that Open MPI ends itself on an MPI error (MPI_ERRORS_ARE_FATAL:
# tests/mpi/no_finalize fatal) goes by _exit, past every exit hook: its
# trace ends at exit all the same and holds what it allocated (libhpcmem's
# _exit writes it, docs/trace-format.md).
b=$(cd "${top_builddir:-.}" && pwd)
REPORT=$b/tools/hpcmem-report
RUN_MPI=$b/tests/run-mpi.sh
fails=0 ran=0
ok() { echo "[       OK ] mpi_abort.$1"; }
ko() { echo "[  FAILED  ] mpi_abort.$1 ($2)"; fails=$((fails + 1)); }
skip() { echo "[  SKIPPED ] mpi_abort.$1 ($2)"; }
if [ -z "$MPIEXEC" ] || [ ! -x "$b/tests/mpi/no_finalize" ]; then skip all "MPI not available"; exit 77; fi
if ! command -v jq >/dev/null 2>&1; then skip all "jq is not installed"; exit 77; fi
dir=$(mktemp -d /tmp/hpcmem-mpi-abort.XXXXXX)
trap 'rm -rf "$dir"' EXIT
MiB=1048576 np=4
# mpirun sends SIGTERM to the other ranks, SIGKILL this much later: on a
# loaded 2-core machine they need more than the default 1 s to write
export OMPI_MCA_odls_base_sigkill_timeout=3

run_case() {  # NAME PROGRAM ARGS...
  name=$1; shift
  if [ ! -x "$1" ]; then skip "$name" "$1 not built"; return; fi
  ran=1
  t=$dir/$name
  timeout 60 "$RUN_MPI" $np -x HPCMEM_TRACE=1 -x HPCMEM_TRACE_DIR="$t" -x HPCMEM_REPORT=off "$@" \
    > "$dir/$name.out" 2>&1
  rc=$?
  [ $rc = 3 ] && ok "$name.exit_status_of_the_abort" || ko "$name.exit_status_of_the_abort" "mpirun exit $rc, expected 3"
  if ! "$REPORT" --json="$dir/$name.json" "$t" > /dev/null 2> "$dir/$name.err"; then
    ko "$name.report" "$(head -c 300 "$dir/$name.err")"; return
  fi
  q() { jq -r "$1" "$dir/$name.json"; }
  end=$(q '.ranks[] | select(.rank == 1) | .end')
  live=$(q '.ranks[] | select(.rank == 1) | .live_at_end_bytes')
  if [ "$end" = MPI_Abort ] && [ "$live" -ge $((32 * MiB)) ] 2>/dev/null; then ok "$name.aborting_rank_trace"
  else ko "$name.aborting_rank_trace" "rank 1: end '$end', live at end '$live' (files: $(ls "$t" 2>/dev/null | tr '\n' ' '))"; fi
  bad=""
  for r in 0 2 3; do
    e=$(q ".ranks[] | select(.rank == $r) | .end")
    l=$(q ".ranks[] | select(.rank == $r) | .live_at_end_bytes")
    [ "$e" = "signal 15" ] && [ "$l" -ge $(((r + 1) * 16 * MiB)) ] 2>/dev/null || bad="$bad rank$r: '$e' $l"
  done
  [ -z "$bad" ] && ok "$name.killed_ranks_traces" || ko "$name.killed_ranks_traces" "$bad"
}

run_case c "$b/tests/mpi/no_finalize" abort 16

t=$dir/fatal
timeout 60 "$RUN_MPI" $np -x HPCMEM_TRACE=1 -x HPCMEM_TRACE_DIR="$t" -x HPCMEM_REPORT=off \
  "$b/tests/mpi/no_finalize" fatal 16 > "$dir/fatal.out" 2>&1
rc=$?
if [ $rc = 0 ] || [ $rc = 124 ]; then ko fatal.mpi_error_ends_the_job "mpirun exit $rc: $(tail -3 "$dir/fatal.out")"
elif ! "$REPORT" --json="$dir/fatal.json" "$t" > /dev/null 2> "$dir/fatal.err"; then
  ko fatal.erring_rank_trace_written_at_its__exit "$(head -c 300 "$dir/fatal.err")"
else
  end=$(jq -r '.ranks[] | select(.rank == 1) | .end' "$dir/fatal.json")
  live=$(jq -r '.ranks[] | select(.rank == 1) | .live_at_end_bytes' "$dir/fatal.json")
  if [ "$end" = exit ] && [ "$live" -ge $((32 * MiB)) ] 2>/dev/null; then ok fatal.erring_rank_trace_written_at_its__exit
  else ko fatal.erring_rank_trace_written_at_its__exit "rank 1: end '$end', live at end '$live' (files: $(ls "$t" 2>/dev/null | tr '\n' ' '))"; fi
fi
run_case mpi "$b/tests/trace/fortran_abort" 16
run_case f08 "$b/tests/trace/fortran_abort_f08" 16
[ $ran = 0 ] && exit 77
[ $fails = 0 ]
