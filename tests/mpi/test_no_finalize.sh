#!/bin/sh
# Ranks that never reach MPI_Finalize still write their own summary,
# hpcmem-report-<jobid>.rank<R>.json: after returning from main (also with a
# SIGTERM arriving while the exit path writes it), after MPI_Abort (the
# aborting rank, and the ranks mpirun then kills with SIGTERM), after a fatal
# signal (also of a rank the others wait for in MPI_Finalize's report).  Rank r holds (r+1)*16 MiB when it goes
# (tests/mpi/no_finalize.c).  Overhead bound: 8 MiB per rank (MPI_Init's
# heap, about 3.5 MiB with Open MPI 4.1, and the C library's).
np=4 mib=16 overhead=8
prog=$top_builddir/tests/mpi/no_finalize
check=$top_srcdir/tests/mpi/report_check.py
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fails=0
ok() { echo "[       OK ] no_finalize.$1"; }
fail() { echo "[  FAILED  ] no_finalize.$1 ($2)"; fails=$((fails + 1)); }

# After an abort mpirun sends SIGTERM and, odls_base_sigkill_timeout seconds
# later (default 1), SIGKILL.  On a loaded 2-core machine 1 s is not always
# enough for 4 ranks to be scheduled and write their file: allow 3 (each
# run then lasts 3 s longer: mpirun waits the whole timeout).
export OMPI_MCA_odls_base_sigkill_timeout=3
for how in exit abort segv exitterm finwait; do
  mkdir -p "$tmp/$how"
  HPCMEM_REPORT=summary HPCMEM_REPORT_DIR="$tmp/$how" \
    timeout 60 "$top_builddir/tests/run-mpi.sh" $np "$prog" $how $mib > "$tmp/$how.out" 2> "$tmp/$how.err"
  rc=$?
  n=$(ls "$tmp/$how" | grep -c '^hpcmem-report-.*\.rank[0-9]*\.json$')
  if [ "$n" = $np ] && [ $rc != 124 ]; then ok $how.every_rank_wrote
  else fail $how.every_rank_wrote "$n of $np per-rank files, mpirun exit $rc: $(ls "$tmp/$how")"; sed -n 1,10p "$tmp/$how.err"; fi
  # MPI_Finalize never ran: no job report
  if ! ls "$tmp/$how" | grep -q '^hpcmem-report-[^.]*\.json$'; then ok $how.no_job_report
  else fail $how.no_job_report "a job report appeared without MPI_Finalize"; fi
  for r in 0 1 2 3; do
    f=$(ls "$tmp/$how"/hpcmem-report-*.rank$r.json 2>/dev/null | head -1)
    [ -n "$f" ] || continue
    # a rank that has not left yet when another one has is killed by mpirun
    # (SIGTERM): then its summary comes from the signal handler
    source=exit,signal signal=15
    case $how/$r in
      abort/1) source=MPI_Abort ;;
      abort/*) source=signal signal=15 ;;   # mpirun kills the other ranks with SIGTERM
      segv/2) source=signal signal=11 ;;
      segv/*) source=signal signal=15 ;;
      finwait/1) source=signal signal=11 ;;
      finwait/*) source=signal signal=15 ;;   # killed while waiting in MPI_Finalize's report
    esac
    python3 "$check" rank "$f" --suite no_finalize.$how.rank$r --rank $r --np $np --mib $mib \
      --overhead-mib $overhead --source $source ${signal:+--signal $signal} || fails=$((fails + 1))
  done
done
# a program launched by mpirun that never calls MPI_Init at all (tests/mpi/lone:
# 24 MiB peak, 8 MiB left at exit): the rank comes from the launcher's
# environment, so each process still writes its own rank's file
mkdir -p "$tmp/nompi"
HPCMEM_REPORT=summary HPCMEM_REPORT_DIR="$tmp/nompi" \
  timeout 60 "$top_builddir/tests/run-mpi.sh" 2 "$top_builddir/tests/mpi/lone" 24 8 > "$tmp/nompi.out" 2> "$tmp/nompi.err"
rc=$?
res=$(python3 - "$tmp/nompi" <<'PY'
import glob, json, sys
files = sorted(glob.glob(sys.argv[1] + "/hpcmem-report-*.rank*.json"))
docs = [json.load(open(f)) for f in files]
ok = len(docs) == 2 and sorted(d["rank"] for d in docs) == [0, 1] and all(
    d["mpi"] is False and d["complete"] is False and d["job"]["ranks"] == 2 and
    d["ranks"][0]["rank"] == d["rank"] and
    24 << 20 <= d["ranks"][0]["peak_bytes"] <= (24 << 20) + (2 << 20) and
    8 << 20 <= d["ranks"][0]["current_bytes"] <= (8 << 20) + (2 << 20) for d in docs)
print("ok" if ok else "files %s: %s" % ([f.rsplit("/", 1)[1] for f in files],
      [(d["rank"], d["mpi"], d["ranks"][0]["peak_bytes"]) for d in docs]))
PY
)
if [ $rc = 0 ] && [ "$res" = ok ]; then ok before_mpi_init.rank_from_launcher
else fail before_mpi_init.rank_from_launcher "exit $rc, $res"; fi

# the program handles SIGINT itself and carries on: rank 1 writes its summary
# from the signal, and MPI_Finalize still brings the job report (no hang)
mkdir -p "$tmp/caught"
HPCMEM_REPORT=summary HPCMEM_REPORT_DIR="$tmp/caught" \
  timeout 60 "$top_builddir/tests/run-mpi.sh" $np "$prog" caught $mib > "$tmp/caught.out" 2> "$tmp/caught.err"
rc=$?
job=$(ls "$tmp/caught" | grep -c '^hpcmem-report-[^.]*\.json$')
r1=$(ls "$tmp/caught" | grep -c '\.rank1\.json$')
if [ $rc = 0 ] && [ "$job" = 1 ] && [ "$r1" = 1 ] && grep -q '^libhpcmem: job .*: 4 ranks' "$tmp/caught.err"; then
  ok caught_signal.job_report_still_comes
else fail caught_signal.job_report_still_comes "exit $rc (124: hung), files: $(ls "$tmp/caught" | tr '\n' ' ')"; fi

# one line from rank 0 says where the summaries are
if grep -q '^libhpcmem: rank 0: MPI_Finalize was not reached (exit)' "$tmp/exit.err"; then ok exit.banner
else fail exit.banner "stderr: $(grep libhpcmem "$tmp/exit.err" | head -3)"; fi
[ $fails = 0 ]
