#!/bin/sh
# make check: miniFE at tiny sizes under MPI.  The solver's residual and
# the error against the exact solution are checked by the program; here we
# also check that the error falls as h^2, that an uneven decomposition is
# uneven, and that bad input is refused.
prog=$top_builddir/miniapps/minife/minife
run_mpi=$top_builddir/tests/run-mpi.sh
dir=${TMPDIR:-/tmp}/check_minife.$$
fail=0
trap '[ -n "${KEEP:-}" ] || rm -rf "$dir"' EXIT
mkdir -p "$dir" || exit 1
cd "$dir" || exit 1   # the libhpcmem report (JSON) lands here

ok()  { echo "[       OK ] minife.$1"; }
bad() { echo "[  FAILED  ] minife.$1 ($2)"; fail=1; }
skip() { echo "[  SKIPPED ] minife.$1 ($2)"; }

if [ ! -x "$prog" ]; then
  echo "[  SKIPPED ] minife.all (not built: needs MPI)"
  exit 77
fi
# one-rank runs are MPI singletons; Open MPI as root wants to be told
OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMP_NUM_THREADS=1
export OMPI_ALLOW_RUN_AS_ROOT OMPI_ALLOW_RUN_AS_ROOT_CONFIRM OMP_NUM_THREADS

verified() { grep -q '^verification: passed' "$1" && grep -q '^#result minife .* passed$' "$1"; }
field() { awk -v k="$2" '$1 == "#result" { print $k }' "$1"; }  # #result minife nx ny nz ranks thr setup asm solve it res err

"$run_mpi" 2 "$prog" 12 >two.log 2>&1
rc=$?
if [ $rc -eq 0 ] && verified two.log && [ "$(field two.log 6)" = 2 ] \
   && awk '/^residual:/ { exit !($7 + 0 <= 1e-9) }' two.log; then
  ok two_ranks_verify
else
  bad two_ranks_verify "rc=$rc; $(grep -E 'residual|solution|minife:' two.log | head -3 | tr '\n' ' ')"
fi

# rank r of 4 weighs 1 + 2r/3: planes must grow with the rank and rows be uneven
"$run_mpi" 4 "$prog" 16 --imbalance=2 >uneven.log 2>&1
rc=$?
if [ $rc -eq 0 ] && verified uneven.log \
   && awk '$1 ~ /^[0-3]$/ && NF == 8 { p[$1] = $2 } /^imbalance/ { imb = $6 + 0 }
           END { exit !(p[0] < p[1] && p[1] < p[2] && p[2] < p[3] && imb >= 1.3) }' uneven.log; then
  ok uneven_decomposition_shows_imbalance
else
  bad uneven_decomposition_shows_imbalance "rc=$rc; $(grep -E '^imbalance|verification' uneven.log | tr '\n' ' ')"
fi

# a box that is not a cube, on 3 ranks
"$run_mpi" 3 "$prog" 10 6 14 >box.log 2>&1
rc=$?
if [ $rc -eq 0 ] && verified box.log && grep -q '^miniFE .*: 10 x 6 x 14 hexahedral elements, 1155 unknowns' box.log; then
  ok rectangular_box_on_three_ranks
else
  bad rectangular_box_on_three_ranks "rc=$rc; $(grep -E 'solution|minife:' box.log | tr '\n' ' ')"
fi

# second order: halving h divides the nodal error by about 4
"$prog" 8 >h8.log 2>&1 && "$prog" 16 >h16.log 2>&1
e8=$(field h8.log 13); e16=$(field h16.log 13)
if verified h8.log && verified h16.log && awk -v a="$e8" -v b="$e16" 'BEGIN { r = a / b; exit !(r > 3.5 && r < 4.5) }'; then
  ok error_falls_as_h_squared
else
  bad error_falls_as_h_squared "errors $e8 (n=8) and $e16 (n=16)"
fi

OMP_NUM_THREADS=2 "$prog" 14 >omp.log 2>&1
rc=$?
if [ $rc -eq 0 ] && verified omp.log && grep -q '1 ranks x 2 OpenMP threads' omp.log; then
  ok openmp_threads_verify
else
  bad openmp_threads_verify "rc=$rc; $(grep -E 'solution|minife:' omp.log | tr '\n' ' ')"
fi

# libhpcmem's statistics as a PAPI software-defined event, read around the solve
if grep -q '^SDE: libhpcmem statistics exported' two.log; then
  "$prog" 10 --papi-events=sde:::libhpcmem::current_bytes >sde.log 2>&1
  if verified sde.log && grep -q 'sde:::libhpcmem::current_bytes=[1-9][0-9]*' sde.log; then
    ok sde_counter_read_through_papi
  else
    bad sde_counter_read_through_papi "$(grep -E '^PAPI|counters' sde.log | tr '\n' ' ')"
  fi
else
  skip sde_counter_read_through_papi "$(grep '^SDE:' two.log)"
fi

# bad input: status 2 and a message naming the problem
bad_ok=1
for args in "" "0" "abc" "8 8" "1" "--imbalance=-1" "--tol=2 8" "--max-iter=0 8" "--segment=interleaved 8" "--placement=hbm 8"; do
  "$prog" $args >bad.log 2>&1
  rc=$?
  if [ $rc -ne 2 ] || ! grep -q '^minife: ' bad.log; then
    bad_ok=0
    bad bad_input_refused "'$args' gave rc=$rc"
  fi
done
"$run_mpi" 4 "$prog" 2 >ranks.log 2>&1   # 3 node planes cannot feed 4 ranks
rc=$?
if [ $rc -ne 2 ] || ! grep -q 'cannot be shared by 4 ranks' ranks.log; then
  bad_ok=0
  bad bad_input_refused "4 ranks on 3 planes gave rc=$rc"
fi
# options for APIs this build lacks say so instead of running without them
"$prog" --segment=interleaved 8 >bad.log 2>&1
if ! grep -q 'segment API .*not in this build' bad.log; then
  bad_ok=0
  bad bad_input_refused "--segment does not say that the API is missing"
fi
[ $bad_ok -eq 1 ] && ok bad_input_refused

exit $fail
