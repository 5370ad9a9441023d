#!/bin/sh
# The node-shared segment over MPI, 4 ranks on this host (tests/segment/seg_shared.c),
# and its lines in the report at MPI_Finalize: the JSON has the per-segment
# fields, each rank's shared peak is at least the (r+1) MiB it kept, and the
# placement fields show the (r+1) MiB each rank placed in DRAM.
np=4
prog=$top_builddir/tests/segment/seg_shared
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fails=0
HPCMEM_REPORT=full HPCMEM_REPORT_DIR=$tmp "$top_builddir/tests/run-mpi.sh" $np "$prog" > "$tmp/out" 2> "$tmp/err"
rc=$?
cat "$tmp/out"
fails=$(grep -c '^\[  FAILED  \]' "$tmp/out")
if [ $rc -ne 0 ] || [ "$(grep -c '^\[       OK \]' "$tmp/out")" -ne 7 ]; then
  echo "[  FAILED  ] seg_shared.run (exit $rc)"; sed -n 1,30p "$tmp/err"; fails=$((fails + 1))
fi
json=$(ls "$tmp"/hpcmem-report-*.json 2>/dev/null | head -1)
if [ -n "$json" ] && python3 - "$json" $np <<'PY'
import json, sys
doc = json.load(open(sys.argv[1])); np = int(sys.argv[2])
ranks = doc["ranks"]
assert len(ranks) == np, len(ranks)
for r in ranks:
    k = r["rank"]
    assert r["shared_peak_bytes"] >= (k + 1) << 20, (k, r["shared_peak_bytes"])
    assert r["shared_bytes"] >= (k + 1) << 20, (k, r["shared_bytes"])
    assert r["private_bytes"] + r["interleaved_bytes"] + r["shared_bytes"] <= r["current_bytes"] + 1, k
    assert r["place_dram_bytes"] == (k + 1) << 20, (k, r["place_dram_bytes"])
    assert r["place_hbm_bytes"] == 0 and r["place_fallback_bytes"] == 0, k
PY
then echo "[       OK ] seg_shared.report_fields"
else echo "[  FAILED  ] seg_shared.report_fields (json '$json')"; fails=$((fails + 1)); fi
if grep -q 'segments, largest high-water mark of a rank: .* shared .* (rank 3)' "$tmp/err"; then
  echo "[       OK ] seg_shared.report_banner"
else
  echo "[  FAILED  ] seg_shared.report_banner (no segment line naming rank 3)"; grep libhpcmem "$tmp/err" | head; fails=$((fails + 1))
fi
# Plain malloc in the shared segment and tracing on: the library's start
# loads the trace's libraries, with malloc, before its constructors ran
# (tests/segment/seg_shared_start.c).  The segment was taken for a plain
# program's and stayed process-local: the ranks read each other's offsets
# as unrelated memory.
HPCMEM_DEFAULT_SEGMENT=shared HPCMEM_TRACE=1 HPCMEM_TRACE_DIR=$tmp/trace HPCMEM_REPORT_DIR=$tmp \
  "$top_builddir/tests/run-mpi.sh" $np "$top_builddir/tests/segment/seg_shared_start" > "$tmp/out2" 2> "$tmp/err2"
rc=$?
if [ $rc -eq 0 ] && [ "$(grep -c ': OK$' "$tmp/out2")" -eq $np ] && ! grep -q 'process-local' "$tmp/err2"; then
  echo "[       OK ] seg_shared.default_segment_with_tracing"
else
  echo "[  FAILED  ] seg_shared.default_segment_with_tracing (exit $rc)"; cat "$tmp/out2"; sed -n 1,10p "$tmp/err2"; fails=$((fails + 1))
fi
# ... and a rank that forks: the child's writes to malloc's objects stay in the child
if [ $rc -eq 0 ] && [ "$(grep -c ': fork OK$' "$tmp/out2")" -eq $np ]; then
  echo "[       OK ] seg_shared.default_segment_fork_gives_the_child_a_copy"
else
  echo "[  FAILED  ] seg_shared.default_segment_fork_gives_the_child_a_copy (exit $rc)"; grep fork "$tmp/out2"; fails=$((fails + 1))
fi
# no file left behind in the shared directory
if ls /dev/shm/hpcmem-shared-* >/dev/null 2>&1; then
  echo "[  FAILED  ] seg_shared.file_removed ($(ls /dev/shm/hpcmem-shared-* | head -3))"; fails=$((fails + 1))
else echo "[       OK ] seg_shared.file_removed"; fi
[ $fails -eq 0 ]
