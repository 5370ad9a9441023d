#!/bin/sh
# make check: STREAM at a tiny size under MPI.  Under glibc the libhpcmem
# variants must say that they need libhpcmem and skip; with libhpcmem
# preloaded every variant must validate and show what its API did; bad
# options must be refused.
prog=$top_builddir/benchmarks/stream/stream
run_mpi=$top_builddir/tests/run-mpi.sh
dir=${TMPDIR:-/tmp}/check_stream.$$
out=$dir/out
fail=0
trap 'rm -rf "$dir"' EXIT
mkdir -p "$dir" && cd "$dir" || exit 1   # libhpcmem's report (JSON) lands here

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
   && grep -q '^#result stream malloc-aligned Copy [0-9.]* [0-9][0-9]*\.[0-9]* valid$' "$out"; then
  ok ratio_against_malloc
else
  bad ratio_against_malloc "summary has no ratios"
fi

# without libhpcmem as the malloc, its four variants say why and do not pretend to run
if [ "$(grep -c '^variant \(segment-[a-z]*\|placement\): skipped: needs libhpcmem as the process.s malloc; this run.s malloc is libc\.so\.6' "$out")" -eq 4 ] \
   && [ "$(grep -c '^  \(segment-[a-z]*\|placement\) *skipped: needs libhpcmem' "$out")" -eq 4 ] \
   && ! grep -q '^#result stream \(segment\|placement\)' "$out"; then
  ok libhpcmem_variants_skip_under_glibc
else
  bad libhpcmem_variants_skip_under_glibc "no 'skipped: needs libhpcmem' lines"
fi

# with libhpcmem preloaded (the binary is not linked with it) every variant
# runs and validates; each checks what its API promises
if [ -n "${LIBHPCMEM:-}" ] && [ -f "$LIBHPCMEM" ]; then
  OMP_NUM_THREADS=1 "$run_mpi" 2 env LD_PRELOAD="$LIBHPCMEM" "$prog" --array-size=6M --ntimes=3 >"$out.hp" 2>&1
  rc=$?
  if [ $rc -eq 0 ] && [ "$(grep -c '^  validation: passed' "$out.hp")" -eq 6 ] \
     && [ "$(grep -c '^#result stream [a-z-]* Triad [0-9.]* [0-9.]* valid$' "$out.hp")" -eq 6 ] \
     && grep -q '^malloc of this process: libhpcmem\.so' "$out.hp"; then
    ok all_variants_validate_under_libhpcmem
  else
    bad all_variants_validate_under_libhpcmem "rc=$rc; $(grep -E 'validation|skipped|failed' "$out.hp" | head -4 | tr '\n' ' ')"
  fi
  if [ "$(grep -c '^  segment: arrays in the \(private\|interleaved\|shared\) segment: yes' "$out.hp")" -eq 3 ]; then
    ok segment_variants_allocate_in_their_segment
  else
    bad segment_variants_allocate_in_their_segment "$(grep '^  segment: arrays' "$out.hp" | tr '\n' ' ')"
  fi
  if grep -q '^  segment: one mapping for the 2 rank(s) of this node;' "$out.hp" \
     && grep -q '^  neighbour check: .*through the shared mapping: passed' "$out.hp"; then
    ok shared_segment_read_by_the_other_rank
  else
    bad shared_segment_read_by_the_other_rank "$(grep -E '^  (segment: one|neighbour)' "$out.hp" | tr '\n' ' ')"
  fi
  if grep -q '^  placement: ON_COMMIT, .*priorities a=2 b=1 c=1' "$out.hp" \
     && grep -q '^  rank 0: a: DRAM [0-9.]* MiB (bound) | b: DRAM [0-9.]* MiB (bound) | c: DRAM [0-9.]* MiB (bound)$' "$out.hp" \
     && grep -q '^  commit (rank 0): [0-9.]* ms, 0 bytes migrated' "$out.hp"; then
    ok placement_commits_before_first_touch
  else
    bad placement_commits_before_first_touch "$(grep -E '^  (placement|rank 0:|commit)' "$out.hp" | tr '\n' ' ')"
  fi

  # hexe Table I, middle row, on the saved KNL topology (MCDRAM limited to
  # 64 MiB): a (priority 2) all in HBM, b and c half HBM half DRAM.  This
  # machine lacks those nodes, so the kernel leaves the pages to the OS.
  OMP_NUM_THREADS=1 HPCMEM_TOPOLOGY="$top_srcdir/tests/data/knl-snc4-flat.xml" LD_PRELOAD="$LIBHPCMEM" \
    "$prog" --array-size=32M --ntimes=2 --alloc=place --hbm-limit=64M >"$out.knl" 2>&1
  rc=$?
  if [ $rc -eq 0 ] && grep -q 'HBM preferred then DRAM' "$out.knl" \
     && grep -q '^  rank 0: a: HBM 32.00 MiB (.*) | b: HBM 16.00 MiB + DRAM 16.00 MiB (.*) | c: HBM 16.00 MiB + DRAM 16.00 MiB (.*)$' "$out.knl" \
     && [ "$(grep -c '^  validation: passed' "$out.knl")" -eq 2 ]; then
    ok placement_table1_on_saved_knl_topology
  else
    bad placement_table1_on_saved_knl_topology "rc=$rc; $(grep -E '^  (rank 0|placement)|validation' "$out.knl" | tr '\n' ' ')"
  fi
else
  echo "[  SKIPPED ] stream.all_variants_validate_under_libhpcmem (LIBHPCMEM not set: run through make check)"
fi

if [ "$(grep -c '^PAPI: ' "$out")" -eq 1 ]; then
  ok papi_status_line
else
  bad papi_status_line "expected exactly one 'PAPI:' line"
fi

# bad input: each must exit with status 2 and a message
bad_inputs_ok=1
for args in "--array-size=junk" "--array-size=0" "--ntimes=1" "--variants=nope" "--alloc=" "--alloc=malloc,nope" \
            "--hbm-limit=0" "--llc-factor=-1" "extra"; do
  OMP_NUM_THREADS=1 "$prog" $args >"$out.bad" 2>&1
  rc=$?
  if [ $rc -ne 2 ] || ! grep -q 'stream:' "$out.bad"; then
    bad_inputs_ok=0
    bad bad_options_rejected "'$args' gave rc=$rc"
  fi
done
[ $bad_inputs_ok -eq 1 ] && ok bad_options_rejected

exit $fail
