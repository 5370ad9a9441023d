#!/bin/sh
# A program without MPI, linked with libhpcmem, gets its summary at exit:
# a short banner on stderr and hpcmem-report-pid<PID>.json.  It allocates
# 48 MiB in 1 MiB blocks, frees 32 MiB and calls exit() with 16 MiB live.
# Overhead bound: 2 MiB (the C library's stdio buffers and start-up heap).
prog=$top_builddir/tests/mpi/lone
check=$top_srcdir/tests/mpi/report_check.py
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fails=0
ok() { echo "[       OK ] lone.$1"; }
fail() { echo "[  FAILED  ] lone.$1 ($2)"; fails=$((fails + 1)); }

HPCMEM_REPORT=summary HPCMEM_REPORT_DIR="$tmp/r" "$prog" 48 16 > "$tmp/out" 2> "$tmp/err"
rc=$?
f=$(ls "$tmp"/r/hpcmem-report-pid*.json 2>/dev/null | head -1)
if [ $rc = 0 ] && [ -n "$f" ]; then ok written_at_exit
else fail written_at_exit "exit $rc, files: $(ls "$tmp/r" 2>&1)"; fi
[ -n "$f" ] && { python3 "$check" lone "$f" --suite lone --peak-mib 48 --live-mib 16 --overhead-mib 2 || fails=$((fails + 1)); }
if grep -q '^libhpcmem: process [0-9]*: heap high-water mark 48\.[0-9] MiB' "$tmp/err" &&
   grep -q "^libhpcmem: report: $f" "$tmp/err" && [ "$(wc -l < "$tmp/err")" -le 3 ]; then ok banner
else fail banner "stderr: $(tr '\n' '|' < "$tmp/err")"; fi

# full: the process's own timeline (samples on its clock) and the per-field table
HPCMEM_REPORT=full HPCMEM_REPORT_DIR="$tmp/full" "$prog" 48 16 > "$tmp/out" 2> "$tmp/err"
rc=$?
res=$(python3 - "$tmp/full" <<'PY'
import glob, json, sys
d = json.load(open(glob.glob(sys.argv[1] + "/hpcmem-report-pid*.json")[0]))
r, s = d["ranks"][0], d["samples"]
ok = d["report"] == "full" and len(s) >= 2 and max(b for t, b in s) == r["peak_bytes"] and \
    [t for t, b in s] == sorted(t for t, b in s) and all(t <= r["end_ns"] for t, b in s)
print("ok" if ok else "samples %s, peak %d" % (s[:4], r["peak_bytes"]))
PY
)
if [ $rc = 0 ] && [ "$res" = ok ] && grep -q '^libhpcmem: peak_bytes ' "$tmp/err"; then ok full_timeline
else fail full_timeline "exit $rc, $res"; fi

# the program chooses with hpcmem_report_mode(), over HPCMEM_REPORT (a tool that
# links libhpcmem turns its own report off this way); bad modes are refused
HPCMEM_REPORT=summary HPCMEM_REPORT_DIR="$tmp/apioff" "$prog" 8 1 api-off > "$tmp/out" 2> "$tmp/err"
rc=$?
if [ $rc = 0 ] && [ ! -e "$tmp/apioff" ] && [ ! -s "$tmp/err" ]; then ok report_mode_off
else fail report_mode_off "exit $rc (4: bad mode accepted), stderr: $(head -2 "$tmp/err")"; fi
HPCMEM_REPORT=off HPCMEM_REPORT_DIR="$tmp/apifull" "$prog" 8 1 api-full > "$tmp/out" 2> "$tmp/err"
rc=$?
if [ $rc = 0 ] && grep -q '"report": "full"' "$tmp"/apifull/*.json 2>/dev/null && grep -q '^libhpcmem: peak_bytes ' "$tmp/err"; then
  ok report_mode_full
else fail report_mode_full "exit $rc, files: $(ls "$tmp/apifull" 2>&1)"; fi

HPCMEM_REPORT=off HPCMEM_REPORT_DIR="$tmp/off" "$prog" 8 1 > "$tmp/out" 2> "$tmp/err"
rc=$?
if [ $rc = 0 ] && [ ! -e "$tmp/off" ] && [ ! -s "$tmp/err" ]; then ok off
else fail off "exit $rc, stderr: $(head -2 "$tmp/err")"; fi

# a forked child that exits is not a second process to report on
HPCMEM_REPORT=summary HPCMEM_REPORT_DIR="$tmp/fork" "$prog" 4 1 fork > "$tmp/out" 2> "$tmp/err"
rc=$?
n=$(ls "$tmp/fork" 2>/dev/null | wc -l)
if [ $rc = 0 ] && [ "$n" = 1 ] && [ "$(grep -c '^libhpcmem: process' "$tmp/err")" = 1 ]; then ok fork_child_silent
else fail fork_child_silent "exit $rc, $n files: $(ls "$tmp/fork" 2>&1)"; fi
[ $fails = 0 ]
