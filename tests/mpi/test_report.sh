#!/bin/sh
# The job report at MPI_Finalize, on 4 ranks: rank r allocates (r+1)*32 MiB
# (tests/mpi/report_ranks.c); the JSON must show exactly those high-water
# marks, the right min/max ranks, mean, standard deviation, imbalance and
# node sums, and the job's peak over time (not the sum of the peaks when the
# ranks take turns).
#
# Overhead bound: each rank's high-water mark may exceed what it allocated by
# at most 8 MiB -- the heap MPI_Init leaves live (about 3.5 MiB with Open MPI
# 4.1 over vader/tcp), the C library's buffers and the program's 2 KiB of
# bookkeeping.  The statistics count requested bytes, so the allocator's own
# metadata is not part of it.
np=4 mib=32 overhead=8
prog=$top_builddir/tests/mpi/report_ranks
check=$top_srcdir/tests/mpi/report_check.py
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fails=0
ok() { echo "[       OK ] report.$1"; }
fail() { echo "[  FAILED  ] report.$1 ($2)"; fails=$((fails + 1)); }

run() {  # name layout [VAR=value...]: run the program, its report into $tmp/name
  name=$1 layout=$2; shift 2
  mkdir -p "$tmp/$name"
  env HPCMEM_REPORT_DIR="$tmp/$name" "$@" \
    "$top_builddir/tests/run-mpi.sh" $np "$prog" $layout $mib > "$tmp/$name.out" 2> "$tmp/$name.err"
  echo $? > "$tmp/$name.rc"
}
json() { ls "$tmp/$1"/hpcmem-report-*.json 2>/dev/null | head -1; }

# --- all ranks hold their memory together, default report mode
run overlap overlap HPCMEM_REPORT=summary
f=$(json overlap)
if [ "$(cat "$tmp/overlap.rc")" = 0 ] && [ -n "$f" ]; then ok overlap_run
else fail overlap_run "exit $(cat "$tmp/overlap.rc"), json '$f'"; sed -n 1,20p "$tmp/overlap.err"; fi
[ -n "$f" ] && { python3 "$check" job "$f" --suite report.overlap --np $np --mib $mib \
    --overhead-mib $overhead --layout overlap || fails=$((fails + 1)); }
# the banner: a few lines on stderr from rank 0 only
err=$tmp/overlap.err
if [ "$(grep -c '^libhpcmem: job ' "$err")" = 1 ] && grep -q 'min .* (rank 0)' "$err" &&
   grep -q 'max .* (rank 3)' "$err" && grep -q '^libhpcmem: IMBALANCE' "$err" &&
   grep -q '^libhpcmem: heaviest node' "$err" && grep -q "^libhpcmem: report: $f" "$err" &&
   [ "$(grep -c '^libhpcmem:' "$err")" -le 6 ]; then ok banner
else fail banner "stderr: $(tr '\n' '|' < "$err" | cut -c1-400)"; fi
# the numbers in the banner are the JSON's
hwm_max=$(python3 -c "import json,sys; print('%.1f MiB' % (json.load(open(sys.argv[1]))['job']['hwm']['max'] / 1048576))" "$f")
if grep -q "max $hwm_max (rank 3)" "$err"; then ok banner_matches_json
else fail banner_matches_json "no 'max $hwm_max (rank 3)' in the banner"; fi

# --- the ranks take turns; full report with the timeline
run phased phased HPCMEM_REPORT=full
f=$(json phased)
if [ "$(cat "$tmp/phased.rc")" = 0 ] && [ -n "$f" ]; then ok phased_run
else fail phased_run "exit $(cat "$tmp/phased.rc"), json '$f'"; sed -n 1,20p "$tmp/phased.err"; fi
[ -n "$f" ] && { python3 "$check" job "$f" --suite report.phased --np $np --mib $mib \
    --overhead-mib $overhead --layout phased --full || fails=$((fails + 1)); }
if grep -q '^libhpcmem: peak_bytes ' "$tmp/phased.err"; then ok full_banner_table
else fail full_banner_table "no per-field table in the full banner"; fi

# --- the imbalance threshold is an option: 50% is not exceeded by 37.5%;
#     this run starts with MPI_Init_thread
run threshold overlap HPCMEM_REPORT=summary HPCMEM_IMBALANCE_THRESHOLD=50 HPCMEM_TEST_INIT_THREAD=1
f=$(json threshold)
[ -n "$f" ] && { python3 "$check" job "$f" --suite report.threshold50 --np $np --mib $mib \
    --overhead-mib $overhead --layout overlap --threshold 50 || fails=$((fails + 1)); }
if grep -q 'imbalance (max-mean)/max = .*(threshold 50%)' "$tmp/threshold.err" &&
   ! grep -q IMBALANCE "$tmp/threshold.err"; then ok threshold_banner
else fail threshold_banner "$(grep -i imbalance "$tmp/threshold.err")"; fi

# --- two nodes of two ranks (HPCMEM_REPORT_NODE_SIZE=2 cuts this machine in
#     two): per-node sums, node peaks, the heaviest node
run nodes overlap HPCMEM_REPORT=summary HPCMEM_REPORT_NODE_SIZE=2
f=$(json nodes)
if [ "$(cat "$tmp/nodes.rc")" = 0 ] && [ -n "$f" ] && grep -q '^libhpcmem: job .*: 4 ranks on 2 nodes' "$tmp/nodes.err" &&
   grep -q '^libhpcmem: heaviest node .*:1: ' "$tmp/nodes.err"; then ok nodes_run
else fail nodes_run "exit $(cat "$tmp/nodes.rc"), json '$f', $(grep node "$tmp/nodes.err" | tr '\n' '|')"; fi
[ -n "$f" ] && { python3 "$check" job "$f" --suite report.two_nodes --np $np --mib $mib \
    --overhead-mib $overhead --layout overlap --nodes 2 || fails=$((fails + 1)); }

# --- the same program built as the README says: mpicc app.c -o app -lhpcmem
if [ -x "$top_builddir/tests/mpi/mpicc_link" ] && ldd "$top_builddir/tests/mpi/mpicc_link" | grep -q libhpcmem; then
  prog=$top_builddir/tests/mpi/mpicc_link
  run mpicc overlap HPCMEM_REPORT=summary
  prog=$top_builddir/tests/mpi/report_ranks
  f=$(json mpicc)
  if [ "$(cat "$tmp/mpicc.rc")" = 0 ] && [ -n "$f" ]; then ok mpicc_run
  else fail mpicc_run "exit $(cat "$tmp/mpicc.rc"), json '$f'"; fi
  [ -n "$f" ] && { python3 "$check" job "$f" --suite report.mpicc --np $np --mib $mib \
      --overhead-mib $overhead --layout overlap || fails=$((fails + 1)); }
else fail mpicc_run "tests/mpi/mpicc_link missing or not linked with libhpcmem"; fi

# --- HPCMEM_REPORT=off: no banner, no file, nothing at exit either
run off overlap HPCMEM_REPORT=off
if [ "$(cat "$tmp/off.rc")" = 0 ] && [ -z "$(ls "$tmp/off")" ] && ! grep -q '^libhpcmem:' "$tmp/off.err"; then
  ok off
else fail off "exit $(cat "$tmp/off.rc"), files: $(ls "$tmp/off"), stderr: $(head -3 "$tmp/off.err")"; fi

# --- one rank that allocates nothing itself: the job's peak is within the
# rank's high-water mark.  The report's first query of the memory classes
# reads the machine with hwloc, which allocates; made after the statistics'
# snapshot, it put the job's peak above the sum of the ranks' marks (22 KB
# with one rank).
mkdir -p "$tmp/one"
HPCMEM_REPORT=summary HPCMEM_REPORT_DIR="$tmp/one" "$top_builddir/tests/run-mpi.sh" 1 "$prog" overlap 0 \
  > "$tmp/one.out" 2> "$tmp/one.err"
f=$(json one)
if [ -n "$f" ] && python3 -c "
import json, sys
j = json.load(open(sys.argv[1]))['job']
sys.exit(0 if j['peak_bytes'] <= j['hwm_sum_bytes'] else 1)" "$f"; then ok one_rank_peak_within_its_hwm
else fail one_rank_peak_within_its_hwm "json '$f': $(python3 -c "import json,sys; j=json.load(open(sys.argv[1]))['job']; print(j['peak_bytes'], j['hwm_sum_bytes'])" "$f" 2>&1)"; fi

[ $fails = 0 ]
