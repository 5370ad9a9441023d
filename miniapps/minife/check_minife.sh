#!/bin/sh
# make check: miniFE at tiny sizes under MPI.  The solver's residual and
# the error against the exact solution are checked by the program; here we
# also check that the error falls as h^2, that an uneven decomposition is
# uneven, that every --alloc variant gives the same solve under libhpcmem
# (preloaded: the binary is not linked with it) and says why it cannot run
# under another malloc, and that bad input is refused.
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
# #result minife nx ny nz ranks thr setup asm solve iterations residual error alloc asm-cpu solve-cpu passed
field() { awk -v k="$2" '$1 == "#result" { print $k }' "$1"; }
have_hpcmem=no
[ -n "${LIBHPCMEM:-}" ] && [ -f "$LIBHPCMEM" ] && have_hpcmem=yes

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

# the benchmark binary runs under every allocator: it must not carry libhpcmem
if readelf -d "$prog" 2>/dev/null | grep -q 'NEEDED.*libhpcmem'; then
  bad not_linked_with_libhpcmem "$(readelf -d "$prog" | grep NEEDED | grep hpcmem)"
elif ! readelf -d "$prog" >/dev/null 2>&1; then
  skip not_linked_with_libhpcmem "no readelf"
else
  ok not_linked_with_libhpcmem
fi

if [ $have_hpcmem = yes ]; then
  # every allocation variant on 4 uneven ranks (with the report, which make
  # check turns off): the same iterations and residual as plain malloc (the halo through the shared segment must
  # deliver the same planes as MPI), each showing what it did
  "$run_mpi" 4 env HPCMEM_REPORT=summary LD_PRELOAD="$LIBHPCMEM" "$prog" 14 --imbalance=1 --alloc=malloc >alloc-malloc.log 2>&1
  ref="$(field alloc-malloc.log 11) $(field alloc-malloc.log 12) $(field alloc-malloc.log 13)"
  if verified alloc-malloc.log && grep -q '^libhpcmem: job [0-9]*: 4 ranks on 1 node' alloc-malloc.log; then
    ok report_under_preload
  else
    bad report_under_preload "$(grep -E '^libhpcmem|verification' alloc-malloc.log | head -3 | tr '\n' ' ')"
  fi
  for kind in private interleaved shared place; do
    "$run_mpi" 4 env HPCMEM_REPORT=summary LD_PRELOAD="$LIBHPCMEM" "$prog" 14 --imbalance=1 --alloc=$kind >alloc-$kind.log 2>&1
    rc=$?
    got="$(field alloc-$kind.log 11) $(field alloc-$kind.log 12) $(field alloc-$kind.log 13)"
    why=""
    # not verified: the log's last lines name why (a failure seen once in CI left only "rc=1")
    { [ $rc -eq 0 ] && verified alloc-$kind.log; } || why="rc=$rc, not verified: $(tail -n 8 alloc-$kind.log | tr '\n' ' ')"
    [ "$(field alloc-$kind.log 14)" = $kind ] || why="$why; #result names $(field alloc-$kind.log 14)"
    [ "$got" = "$ref" ] || why="$why; iterations/residual/error '$got' against malloc's '$ref'"
    case $kind in
      interleaved) grep -q '^libhpcmem: segments, .* interleaved [1-9][0-9.]* [KM]iB' alloc-$kind.log \
                     || why="$why; the report shows no interleaved memory" ;;
      shared) grep -q '^halo: 6 of 6 ghost planes read from the neighbour.s vector in the node-shared segment' alloc-$kind.log \
                || why="$why; $(grep '^halo' alloc-$kind.log)"
              grep -q '^libhpcmem: segments, .* shared [1-9][0-9.]* [KM]iB' alloc-$kind.log \
                || why="$why; the report shows no shared memory" ;;
      place) [ "$(grep -c '^placement, commit ' alloc-$kind.log)" -eq 2 ] \
               && [ "$(grep -c '^  [a-zA-Z*() -]*: DRAM [0-9.]* [KM]iB (bound)$' alloc-$kind.log)" -eq 8 ] \
               || why="$why; $(grep -A1 '^placement' alloc-$kind.log | tr '\n' ' ')" ;;
    esac
    if [ -z "$why" ]; then ok alloc_${kind}_same_solve; else bad alloc_${kind}_same_solve "$why"; fi
  done

  # libhpcmem's statistics as a PAPI software-defined event, read around the solve
  if grep -q '^SDE: libhpcmem statistics exported' alloc-malloc.log; then
    LD_PRELOAD=$LIBHPCMEM "$prog" 10 --papi-events=sde:::libhpcmem::current_bytes >sde.log 2>&1
    if verified sde.log && grep -q 'sde:::libhpcmem::current_bytes=[1-9][0-9]*' sde.log; then
      ok sde_counter_read_through_papi
    else
      bad sde_counter_read_through_papi "$(grep -E '^PAPI|counters' sde.log | tr '\n' ' ')"
    fi
  else
    skip sde_counter_read_through_papi "$(grep '^SDE:' alloc-malloc.log)"
  fi
else
  skip alloc_variants "LIBHPCMEM not set: run through make check"
fi

# without libhpcmem as the malloc the libhpcmem variants say why and exit 77
skip_ok=1
for kind in private interleaved shared place; do
  "$prog" 8 --alloc=$kind >skip.log 2>&1
  rc=$?
  if [ $rc -ne 77 ] || ! grep -q "^minife: --alloc=$kind skipped: needs libhpcmem as the process's malloc; this run's malloc is libc.so.6" skip.log \
     || grep -q '^verification' skip.log; then
    skip_ok=0
    bad libhpcmem_variants_skip_under_glibc "--alloc=$kind: rc=$rc; $(head -2 skip.log | tr '\n' ' ')"
  fi
done
grep -q '^SDE: not exported (no PAPI SDE support, or libhpcmem is not loaded)' h8.log || {
  skip_ok=0; bad libhpcmem_variants_skip_under_glibc "SDE line under glibc: $(grep '^SDE' h8.log)"; }
[ $skip_ok -eq 1 ] && ok libhpcmem_variants_skip_under_glibc

# bad input: status 2 and a message naming the problem
bad_ok=1
for args in "" "0" "abc" "8 8" "1" "--imbalance=-1" "--tol=2 8" "--max-iter=0 8" "--alloc=hbm 8" "--alloc= 8"; do
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
[ $bad_ok -eq 1 ] && ok bad_input_refused

exit $fail
