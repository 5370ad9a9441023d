#!/bin/sh
# Fortran programs linked with -lhpcmem produce the job report: Open MPI
# 4.1's Fortran bindings call PMPI_Init directly, so this checks the
# Fortran entry points of libhpcmem (use mpi -> mpi_init_, use mpi_f08 ->
# mpi_init_f08_).  Rank r allocates (r+1)*32 MiB; overhead bound 8 MiB
# (MPI_Init's heap and the Fortran runtime's I/O buffers).
np=4 mib=32 overhead=8
check=$top_srcdir/tests/mpi/report_check.py
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fails=0
ok() { echo "[       OK ] fortran.$1"; }
fail() { echo "[  FAILED  ] fortran.$1 ($2)"; fails=$((fails + 1)); }

ran=0
for kind in mpi f08; do
  prog=$top_builddir/tests/mpi/fortran_$kind
  if [ ! -x "$prog" ]; then
    echo "[  SKIPPED ] fortran.$kind (no Fortran MPI compiler at configure time)"
    continue
  fi
  ran=1
  if ldd "$prog" | grep -q 'libhpcmem'; then ok $kind.linked
  else fail $kind.linked "$prog does not load libhpcmem"; fi
  mkdir -p "$tmp/$kind"
  HPCMEM_REPORT=summary HPCMEM_REPORT_DIR="$tmp/$kind" \
    "$top_builddir/tests/run-mpi.sh" $np "$prog" $mib > "$tmp/$kind.out" 2> "$tmp/$kind.err"
  rc=$?
  f=$(ls "$tmp/$kind"/hpcmem-report-*.json 2>/dev/null | head -1)
  if [ $rc = 0 ] && [ -n "$f" ] && grep -q '^libhpcmem: job .*: 4 ranks' "$tmp/$kind.err"; then ok $kind.report
  else fail $kind.report "exit $rc, json '$f', stderr: $(head -5 "$tmp/$kind.err" | tr '\n' '|')"; fi
  [ -n "$f" ] && { python3 "$check" job "$f" --suite fortran.$kind --np $np --mib $mib \
      --overhead-mib $overhead --layout overlap --single-block || fails=$((fails + 1)); }
done
[ $ran = 0 ] && exit 77
[ $fails = 0 ]
