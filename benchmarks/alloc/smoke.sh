#!/bin/sh
# Smoke test of the allocator benchmarks: every program at a tiny size under
# the C library's malloc and under libhpcmem (LD_PRELOAD, once the library
# exports malloc), each run's own validation must pass and malloc must really
# come from the allocator under test; every program must notice a block that
# was damaged on purpose (--corrupt); run.sh must produce its report, and
# ab.sh its comparison.
# Environment (exported by `make check`): top_builddir, top_srcdir, LIBHPCMEM.
top_builddir=${top_builddir:-.}
top_srcdir=${top_srcdir:-$(cd "$(dirname "$0")/../.." && pwd)}
hp=${LIBHPCMEM:-${HPCMEM_LIB:-$top_builddir/.libs/libhpcmem.so}}
# an HPCMEM_* variable the allocator does not know would make it warn
unset HPCMEM_LIB
bin=$top_builddir/benchmarks/alloc
tmp=$(mktemp -d "${TMPDIR:-/tmp}/alloc-smoke.XXXXXX") || exit 1
trap 'rm -rf "$tmp"' EXIT INT TERM
npass=0; nfail=0; nskip=0

ok() { echo "[       OK ] alloc_bench.$1"; npass=$((npass + 1)); }
bad() { echo "[  FAILED  ] alloc_bench.$1 ($2)"; nfail=$((nfail + 1)); }
skip() { echo "[  SKIPPED ] alloc_bench.$1 ($2)"; nskip=$((nskip + 1)); }

if [ ! -x "$bin/alloc_sizes" ]; then
  skip programs "benchmarks/alloc programs not built in $top_builddir"
  exit 77
fi

hp_state=ok
if [ ! -f "$hp" ]; then hp_state="libhpcmem not built ($hp)"
elif ! nm -D --defined-only "$hp" 2>/dev/null | awk '$3 == "malloc" { f = 1 } END { exit !f }'
then hp_state="libhpcmem exports no malloc yet"; fi

# check NAME LIB PROG ARGS...: run, then demand exit 0, the validate line and
# malloc served by LIB (the C library when LIB is empty)
check() {
  name=$1; lib=$2; prog=$3; shift 3
  if [ -n "$lib" ]; then
    timeout 20 env LD_PRELOAD="$lib" "$bin/$prog" "$@" > "$tmp/out" 2> "$tmp/err" < /dev/null
  else
    timeout 20 "$bin/$prog" "$@" > "$tmp/out" 2> "$tmp/err" < /dev/null
  fi
  rc=$?
  from=$(sed -n 's/^info,malloc_from,//p' "$tmp/out" | head -1)
  b=${prog#alloc_}
  if [ "$rc" -ne 0 ]; then
    bad "$name" "exit $rc: $(head -c 200 "$tmp/err" | tr '\n' ' ')"
  elif ! grep -q "^validate,$b,ok" "$tmp/out"; then
    bad "$name" "no validate,$b,ok line"
  elif ! grep -q "^result,$b," "$tmp/out"; then
    bad "$name" "no result line"
  elif [ -n "$lib" ] && [ "$(readlink -f "$from")" != "$(readlink -f "$lib")" ]; then
    bad "$name" "malloc came from ${from:-?}, not $lib"
  elif [ -z "$lib" ] && ! echo "$from" | grep -q '/libc\.so'; then
    bad "$name" "malloc came from ${from:-?}, not the C library"
  else
    ok "$name"
  fi
}

# the same tiny runs under each allocator
runs() {
  a=$1; lib=$2
  check "sizes_notouch_$a" "$lib" alloc_sizes --mode notouch --rounds 4 --min 1 --max 16M --factor 4
  check "sizes_touch_$a" "$lib" alloc_sizes --mode touch --rounds 4 --min 1 --max 16M --factor 4
  check "residents_none_$a" "$lib" alloc_residents --n 256 --pairs 3000 --touch none
  check "residents_ends_$a" "$lib" alloc_residents --n 256 --pairs 3000 --touch ends
  check "churn_$a" "$lib" alloc_churn --min 8 --max 1024 --live 1000 --ops 400K
  check "threads_xfree_$a" "$lib" alloc_threads --mode xfree --threads 4 --ops 400K
  check "threads_local_$a" "$lib" alloc_threads --mode local --threads 4 --ops 400K
  check "realloc_$a" "$lib" alloc_realloc --step 16 --max 256K --reps 3
  check "start_$a" "$lib" alloc_start --runs 5
  check "start_true_$a" "$lib" alloc_start --runs 5 --program /bin/true
}

runs system ""
if [ "$hp_state" = ok ]; then
  runs libhpcmem "$hp"
else
  for c in sizes_notouch sizes_touch residents_none residents_ends churn threads_xfree threads_local realloc start start_true; do
    skip "${c}_libhpcmem" "$hp_state"
  done
fi

# the checks must be able to fail: each program damages a block on purpose
detects() {
  name=$1; prog=$2; shift 2
  timeout 20 "$bin/$prog" "$@" --corrupt > "$tmp/out" 2> "$tmp/err" < /dev/null
  rc=$?
  if [ "$rc" -eq 2 ] && grep -q '^VALIDATION FAILED' "$tmp/err" && grep -q '^validate,failed' "$tmp/out"
  then ok "$name"
  else bad "$name" "exit $rc, expected 2 with VALIDATION FAILED"
  fi
}
detects sizes_touch_detects_corruption alloc_sizes --mode touch --rounds 2 --max 64K
detects sizes_notouch_detects_corruption alloc_sizes --mode notouch --rounds 2 --max 64K
detects residents_detects_overlap alloc_residents --n 16 --pairs 10 --touch none
detects residents_detects_lost_tag alloc_residents --n 16 --pairs 1000 --touch ends
detects churn_detects_corruption alloc_churn --live 100 --ops 100K
detects threads_xfree_detects_corruption alloc_threads --mode xfree --threads 2 --ops 10K
detects threads_local_detects_corruption alloc_threads --mode local --threads 2 --ops 100K --live 10
detects realloc_detects_corruption alloc_realloc --step 16 --max 4K --reps 1
detects start_detects_a_failed_child alloc_start --runs 2

# --pages yes: where two threads' live objects lie (each covers at least a
# page; a page holds the objects of one or two threads)
timeout 20 "$bin/alloc_threads" --mode local --threads 2 --ops 100K --live 100 --pages yes \
  > "$tmp/out" 2> "$tmp/err" < /dev/null
rc=$?
pt=$(sed -n 's/^info,pages_per_thread,//p' "$tmp/out")
tp=$(sed -n 's/^info,threads_per_page,//p' "$tmp/out")
if [ "$rc" -ne 0 ]; then bad threads_pages "exit $rc: $(head -c 200 "$tmp/err" | tr '\n' ' ')"
elif ! awk -v pt="$pt" -v tp="$tp" 'BEGIN { exit !(pt >= 1 && pt <= 100 && tp >= 1 && tp <= 2) }'; then
  bad threads_pages "pages_per_thread '$pt', threads_per_page '$tp'"
else ok threads_pages
fi

# bad options are refused (usage error 64), not run with some default
rejected=0
for args in "alloc_sizes --mode sideways" "alloc_sizes --mode touch --factor 1" \
            "alloc_residents --pairs 10" "alloc_residents --n 8 --max-size 8X" \
            "alloc_churn --min 0" "alloc_threads --mode xfree --threads 0" \
            "alloc_threads --mode local --queue 3" "alloc_threads --mode xfree --pages yes" \
            "alloc_threads --mode local --pages maybe" "alloc_realloc --step 0" \
            "alloc_realloc --step 64 --max 16" "alloc_start --runs 0" \
            "alloc_start --program /nonexistent/program"; do
  # shellcheck disable=SC2086
  "$bin"/$args > /dev/null 2>&1 < /dev/null
  rc=$?
  if [ "$rc" -ne 64 ]; then bad rejects_bad_options "'$args' exited $rc, expected 64"; rejected=1; fi
done
[ "$rejected" -eq 0 ] && ok rejects_bad_options

# the runner: one tiny repeat, report with every benchmark's tables
if sh "$top_srcdir/benchmarks/alloc/run.sh" "$tmp/run" --tiny --reps 1 \
      --builddir "$top_builddir" > "$tmp/run.log" 2>&1; then
  md=$tmp/run/alloc.md
  missing=""
  for h in "## Size sweep" "## Residents" "## Small-object churn" "## Threads" "## Commands"; do
    grep -q "^$h" "$md" || missing="$missing '$h'"
  done
  if [ -n "$missing" ]; then bad runner "alloc.md lacks$missing"
  elif [ "$hp_state" != ok ] && ! grep -q '| not built' "$md"; then
    bad runner "libhpcmem is not built but alloc.md does not say so"
  elif [ "$hp_state" = ok ] && ! grep -qE '\| (PASS|\*\*MISS\*\*|n/a \(no peer\))' "$md"; then
    bad runner "libhpcmem is built but alloc.md has no PASS/MISS row"
  elif [ "$(wc -l < "$tmp/run/alloc.csv")" -lt 10 ]; then bad runner "alloc.csv nearly empty"
  else ok runner
  fi
else
  bad runner "run.sh failed: $(tail -3 "$tmp/run.log" | tr '\n' ' ')"
fi

# ab.sh: two variants taking turns, one line a case with both; bad uses refused
ab=$top_srcdir/benchmarks/alloc/ab.sh
abvars="glibc=none"
[ "$hp_state" = ok ] && abvars="$abvars hp=$hp@HPCMEM_HEAPS=1"
# shellcheck disable=SC2086  # abvars: one word a variant
if sh "$ab" --builddir "$top_builddir" --reps 2 --ops 20K --trials 1 --raw "$tmp/ab.raw" "local:1 xfree:2" $abvars \
      > "$tmp/ab.out" 2> "$tmp/ab.err"; then
  lines=$(grep -c 'M/s' "$tmp/ab.out")
  runs=$(wc -l < "$tmp/ab.raw")
  want=$((2 * 2 * $(echo $abvars | wc -w)))
  if [ "$lines" -ne 2 ] || ! grep -q '^local T=1 .*glibc: [0-9.]* ([0-9.]*) M/s [0-9.]* MiB' "$tmp/ab.out"; then
    bad ab_sh "expected a line for each of 2 cases: $(head -c 300 "$tmp/ab.out" | tr '\n' ' ')"
  elif [ "$hp_state" = ok ] && ! grep -q '^xfree T=2 .*hp: [0-9.]* ([0-9.]*) M/s' "$tmp/ab.out"; then
    bad ab_sh "no hp column: $(head -c 300 "$tmp/ab.out" | tr '\n' ' ')"
  elif [ "$runs" -ne "$want" ]; then bad ab_sh "--raw holds $runs runs, expected $want"
  else ok ab_sh
  fi
else
  bad ab_sh "ab.sh failed: $(head -c 300 "$tmp/ab.err" | tr '\n' ' ')"
fi
abbad=0
for args in "local:x glibc=none" "ring:2 glibc=none" "local:1 glibc" "local:1 g=/nonexistent/lib.so" \
            "--reps 0 local:1 glibc=none" "--frob local:1 glibc=none" "local:1"; do
  # shellcheck disable=SC2086
  sh "$ab" --builddir "$top_builddir" $args > /dev/null 2> "$tmp/ab.err" < /dev/null
  rc=$?
  if [ "$rc" -ne 2 ] || ! grep -q . "$tmp/ab.err"; then
    bad ab_sh_rejects "'ab.sh $args' exited $rc, expected 2 and a message"; abbad=1
  fi
done
[ "$abbad" -eq 0 ] && ok ab_sh_rejects
# a run that prints no result (alloc_threads refuses the count) fails the comparison
sh "$ab" --builddir "$top_builddir" --reps 1 --ops bogus --trials 1 "local:1" glibc=none > "$tmp/ab.out" 2> "$tmp/ab.err" < /dev/null
rc=$?
if [ "$rc" -eq 1 ] && grep -q 'glibc, local:1: the run printed no result' "$tmp/ab.err" && ! grep -q 'M/s' "$tmp/ab.out"; then ok ab_sh_failed_run
else bad ab_sh_failed_run "exit $rc, expected 1, the run named on stderr and no figures"; fi

echo "alloc_bench: $npass passed, $nfail failed, $nskip skipped"
[ "$nfail" -eq 0 ] || exit 1
[ "$npass" -gt 0 ] || exit 77
exit 0
