#!/bin/sh
# An unwritable HPCMEM_REPORT_DIR: one clear warning (from rank 0, the only
# writer), the banner still prints, and the application's exit status does
# not change -- neither a success nor a failure of the application.
np=4 mib=4
prog=$top_builddir/tests/mpi/report_ranks
lone=$top_builddir/tests/mpi/lone
tmp=$(mktemp -d)
trap 'chmod -R u+w "$tmp"; rm -rf "$tmp"' EXIT
fails=0
ok() { echo "[       OK ] report_dir.$1"; }
fail() { echo "[  FAILED  ] report_dir.$1 ($2)"; fails=$((fails + 1)); }

check_run() {  # case dir
  case=$1 dir=$2
  HPCMEM_REPORT=summary HPCMEM_REPORT_DIR="$dir" \
    "$top_builddir/tests/run-mpi.sh" $np "$prog" overlap $mib > "$tmp/$case.out" 2> "$tmp/$case.err"
  rc=$?
  warn=$(grep -c '^libhpcmem: warning: memory report not written' "$tmp/$case.err")
  if [ "$warn" = 1 ] && grep -q "cannot create $dir/hpcmem-report-.*\.json" "$tmp/$case.err" &&
     grep -q 'HPCMEM_REPORT_DIR' "$tmp/$case.err"; then ok $case.one_warning
  else fail $case.one_warning "$warn warnings: $(grep libhpcmem "$tmp/$case.err" | head -3 | tr '\n' '|')"; fi
  if grep -q '^libhpcmem: job ' "$tmp/$case.err" && grep -q '^libhpcmem: per-rank high-water mark' "$tmp/$case.err" &&
     ! grep -q '^libhpcmem: report:' "$tmp/$case.err"; then ok $case.banner_still_prints
  else fail $case.banner_still_prints "$(grep libhpcmem "$tmp/$case.err" | head -5 | tr '\n' '|')"; fi
  if [ $rc = 0 ]; then ok $case.exit_status; else fail $case.exit_status "mpirun exit $rc"; fi
}

# a path through a regular file cannot be created, not even by root
: > "$tmp/file"
check_run under_a_file "$tmp/file/reports"
# a read-only directory (permissions do not stop root: checked as another user only)
mkdir "$tmp/ro" && chmod 555 "$tmp/ro"
if [ "$(id -u)" != 0 ]; then check_run read_only "$tmp/ro"
else echo "[  SKIPPED ] report_dir.read_only (running as root: permissions do not apply)"; fi

# the exit status of a program is its own, report written or not
HPCMEM_REPORT=summary HPCMEM_REPORT_DIR="$tmp/file/x" "$lone" 4 1 > /dev/null 2> "$tmp/lone.err"
rc=$?
if [ $rc = 0 ] && grep -q 'warning: memory report not written' "$tmp/lone.err" &&
   grep -q '^libhpcmem: process' "$tmp/lone.err"; then ok lone_exit_status
else fail lone_exit_status "exit $rc: $(cat "$tmp/lone.err")"; fi
HPCMEM_REPORT=summary HPCMEM_REPORT_DIR="$tmp/file/x" "$lone" 4 1 fail > /dev/null 2> "$tmp/lone.err"
rc=$?
if [ $rc = 3 ]; then ok lone_failure_status_kept; else fail lone_failure_status_kept "exit $rc, not 3"; fi
[ $fails = 0 ]
