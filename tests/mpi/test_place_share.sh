#!/bin/sh
# Node-wide placement accounting (docs/placement.md, "Ranks of a node"):
# 4 ranks on the KNL-like topology with HBM scaled down to 64 MiB
# (tests/mpi/place_share.c prints one line per case from rank 0), then each
# rank checks after MPI_Finalize that it is alone again.
prog=$top_builddir/tests/mpi/place_share
topo=$top_srcdir/tests/data/knl-snc4-flat.xml
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
HPCMEM_TOPOLOGY=$topo HPCMEM_REPORT=off \
  "$top_builddir/tests/run-mpi.sh" 4 "$prog" > "$tmp/out" 2> "$tmp/err"
rc=$?
cat "$tmp/out"
ok=$(grep -c '^\[       OK \] place_share\.' "$tmp/out")
failed=$(grep -c '^\[  FAILED  \] place_share\.' "$tmp/out")
# the program's cases (9) all reported, and nothing failed after MPI_Finalize
if [ $rc = 0 ] && [ "$ok" = 9 ]; then
  echo "[       OK ] place_share.alone_after_finalize"
else
  [ "$ok" = 9 ] || [ "$failed" -gt 0 ] || echo "[  FAILED  ] place_share.run (exit $rc, $ok cases reported)"
  [ "$ok" = 9 ] && echo "[  FAILED  ] place_share.alone_after_finalize (exit $rc)"
  sed -n 1,30p "$tmp/err"
  exit 1
fi
