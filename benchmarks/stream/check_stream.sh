#!/bin/sh
# make check: STREAM at a tiny size under MPI; every variant that exists
# must validate, the missing ones must say so, bad options must be refused.
prog=$top_builddir/benchmarks/stream/stream
run_mpi=$top_builddir/tests/run-mpi.sh
out=${TMPDIR:-/tmp}/check_stream.$$
fail=0
trap 'rm -f "$out" "$out".*' EXIT

ok()   { echo "[       OK ] stream.$1"; }
bad()  { echo "[  FAILED  ] stream.$1 ($2)"; fail=1; }

if [ ! -x "$prog" ]; then
  echo "[  SKIPPED ] stream.all (not built: needs MPI)"
  exit 77
fi

# one-rank runs start as MPI singletons (no launcher: quicker); as root
# Open MPI wants to be told that this is intended
OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
export OMPI_ALLOW_RUN_AS_ROOT OMPI_ALLOW_RUN_AS_ROOT_CONFIRM

# 2 ranks x 1 thread, then 1 rank x 2 threads (the OpenMP path)
OMP_NUM_THREADS=1 "$run_mpi" 2 "$prog" --array-size=6M --ntimes=3 >"$out" 2>&1
rc=$?
OMP_NUM_THREADS=2 "$prog" --array-size=6M --ntimes=3 --variants=malloc >"$out.omp" 2>&1
rc_omp=$?

if [ $rc -eq 0 ] && grep -q '^#result stream malloc Triad [0-9.]* 1.0000 valid$' "$out" \
   && [ "$(grep -c '^  validation: passed' "$out")" -eq 2 ]; then
  ok mpi_two_ranks_validate
else
  bad mpi_two_ranks_validate "rc=$rc; $(grep -E 'validation|rror' "$out" | head -3 | tr '\n' ' ')"
fi

if [ $rc_omp -eq 0 ] && grep -q 'OpenMP threads per rank 2' "$out.omp" \
   && grep -q '^  validation: passed' "$out.omp"; then
  ok openmp_two_threads_validate
else
  bad openmp_two_threads_validate "rc=$rc_omp; $(tail -3 "$out.omp" | tr '\n' ' ')"
fi

# both ranks report their own best bandwidth for every kernel
if [ "$(grep -c '^  rank [01] *best MB/s: Copy [0-9.]* Scale [0-9.]* Add [0-9.]* Triad [0-9.]*$' "$out")" -eq 4 ]; then
  ok per_rank_bandwidth
else
  bad per_rank_bandwidth "expected 2 ranks x 2 variants of per-rank lines"
fi

# the ratio column: plain malloc is 1.00x of itself, the aligned variant has a ratio
if grep -q '^  malloc .*(1.00x).*(1.00x).*(1.00x).*(1.00x)  passed' "$out" \
   && grep -q '^#result stream malloc-aligned Copy [0-9.]* [0-9]\.[0-9]* valid$' "$out"; then
  ok ratio_against_malloc
else
  bad ratio_against_malloc "summary has no ratios"
fi

# variants this build lacks print one clear line each and do not pretend to run
if [ "$(grep -c '^variant segment-[a-z]*: not available: needs the libhpcmem segment API' "$out")" -eq 3 ] \
   && grep -q '^variant placement: not available' "$out" \
   && ! grep -q '^#result stream segment' "$out"; then
  ok missing_variants_say_so
else
  bad missing_variants_say_so "no 'not available' lines"
fi

if [ "$(grep -c '^PAPI: ' "$out")" -eq 1 ]; then
  ok papi_status_line
else
  bad papi_status_line "expected exactly one 'PAPI:' line"
fi

# bad input: each must exit with status 2 and a message
bad_inputs_ok=1
for args in "--array-size=junk" "--array-size=0" "--ntimes=1" "--variants=nope" "--llc-factor=-1" "extra"; do
  OMP_NUM_THREADS=1 "$prog" $args >"$out.bad" 2>&1
  rc=$?
  if [ $rc -ne 2 ] || ! grep -q 'stream:' "$out.bad"; then
    bad_inputs_ok=0
    bad bad_options_rejected "'$args' gave rc=$rc"
  fi
done
[ $bad_inputs_ok -eq 1 ] && ok bad_options_rejected

exit $fail
