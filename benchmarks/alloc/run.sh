#!/bin/sh
# Allocator micro-benchmarks: every program of benchmarks/alloc/ under every
# allocator (the same binary each time; the allocator comes from LD_PRELOAD).
#
#   benchmarks/alloc/run.sh OUTDIR [--quick] [--reps N] [--allocs LIST]
#                           [--benches LIST] [--builddir DIR]
#
#   --quick        small sizes, < ~3 minutes in all (what `make bench-alloc` runs)
#   --tiny         seconds; used by smoke.sh to exercise the runner itself
#   --reps N       repeats of every measurement (default 3)
#   --allocs LIST  comma list out of system,jemalloc,tcmalloc,mimalloc,libhpcmem
#   --benches LIST comma list out of sizes,residents,churn,threads
#   --builddir DIR build directory holding benchmarks/alloc/alloc_* (default:
#                  $top_builddir, the current directory, or the in-tree build)
# Environment: LIBHPCMEM (default BUILDDIR/.libs/libhpcmem.so; HPCMEM_LIB is
# accepted too, but not passed on: libhpcmem warns about unknown HPCMEM_*); JEMALLOC_LIB,
# TCMALLOC_LIB, MIMALLOC_LIB override where the peers are looked for.
#
# Writes OUTDIR/alloc.md (tables, targets, commands), OUTDIR/alloc.csv
# (aggregated), OUTDIR/raw.csv (every repeat), OUTDIR/logs/ (every run's output).
set -u

usage() { sed -n '2,20p' "$0" | sed 's/^# \{0,1\}//'; exit "${1:-64}"; }

here=$(cd "$(dirname "$0")" && pwd)
out=""; level=full; reps=3; allocs_sel=""; benches="sizes,residents,churn,threads"
builddir=""
while [ $# -gt 0 ]; do
  case $1 in
    --quick) level=quick ;;
    --tiny) level=tiny ;;
    --full) level=full ;;
    --reps) reps=${2:?--reps N}; shift ;;
    --allocs) allocs_sel=${2:?--allocs LIST}; shift ;;
    --benches) benches=${2:?--benches LIST}; shift ;;
    --builddir) builddir=${2:?--builddir DIR}; shift ;;
    -h|--help) usage 0 ;;
    -*) echo "run.sh: unknown option $1" >&2; usage ;;
    *) [ -z "$out" ] || usage; out=$1 ;;
  esac
  shift
done
[ -n "$out" ] || usage
. "$here/../common/allocators.sh"
bench_positive run.sh --reps "$reps"
prog=benchmarks/alloc/alloc_sizes
if [ -n "$builddir" ]; then builddir=$(bench_builddir run.sh $prog "$builddir") || exit 1
else builddir=$(bench_builddir run.sh $prog "${top_builddir:-}" "$PWD" "$here/../..") || exit 1; fi
bin=$builddir/benchmarks/alloc
mkdir -p "$out/logs" "$out/work" || exit 1
out=$(cd "$out" && pwd)

# ---------------------------------------------------------------- allocators
# the peers and libhpcmem as every runner finds them (benchmarks/common/allocators.sh);
# "glibc" there is "system" here
all_allocs="system jemalloc tcmalloc mimalloc libhpcmem"
: > "$out/allocators.csv"
bench_allocators "$builddir" > "$out/allocators.found"
unset HPCMEM_LIB
while IFS='|' read -r a lib st; do
  [ "$a" = glibc ] && a=system
  if [ -n "$allocs_sel" ] && ! echo ",$allocs_sel," | grep -q ",$a,"; then st="not selected"; fi
  eval "lib_$a=\$lib; state_$a=\$st"
  echo "$a,$st,$lib" >> "$out/allocators.csv"
done < "$out/allocators.found"
rm -f "$out/allocators.found"

# ---------------------------------------------------------------- plan
# one line per run: bench case param args   (param "*" = the run covers many)
case $level in
  full)
    sizes_args="--rounds 64 --min 4 --max 128M --factor 2"
    res_n="256 1024 4096 16384"; res_pairs=1000000; res_touch="none ends"
    churn_ops=100M; thr_ops=40M; thr_trials=3; thr_t="1 2 4 8 16"; tmo=1200 ;;
  quick)
    sizes_args="--rounds 64 --min 4 --max 64M --factor 4"
    res_n="256 1024 4096 16384"; res_pairs=50000; res_touch="none"
    churn_ops=10M; thr_ops=4M; thr_trials=2; thr_t="1 2 4 8 16"; tmo=120 ;;
  tiny)
    sizes_args="--rounds 4 --min 4 --max 1M --factor 16"
    res_n="64 256"; res_pairs=2000; res_touch="none ends"
    churn_ops=200K; thr_ops=100K; thr_trials=1; thr_t="1 2 4"; tmo=60 ;;
esac

plan=$out/plan.txt
: > "$plan"
for b in $(echo "$benches" | tr ',' ' '); do
  case $b in
    sizes)
      for m in notouch touch; do
        echo "sizes $m * alloc_sizes --mode $m $sizes_args" >> "$plan"
      done ;;
    residents)
      for t in $res_touch; do for n in $res_n; do
        echo "residents $t $n alloc_residents --n $n --pairs $res_pairs --touch $t" >> "$plan"
      done; done ;;
    churn)
      for v in 8-1024 16-64; do
        echo "churn $v 1 alloc_churn --min ${v%-*} --max ${v#*-} --live 10000 --ops $churn_ops" >> "$plan"
      done ;;
    threads)
      for m in xfree local; do for t in $thr_t; do
        echo "threads $m $t alloc_threads --mode $m --threads $t --ops $thr_ops --trials $thr_trials" >> "$plan"
      done; done ;;
    *) echo "run.sh: unknown benchmark '$b'" >&2; exit 64 ;;
  esac
done

# ---------------------------------------------------------------- run
raw=$out/raw.csv
: > "$raw"
: > "$out/commands.txt"
start=$(date +%s)
load_start=$(cut -d' ' -f1-3 /proc/loadavg)
nruns=0; nfail=0

signame() { kill -l "$1" 2>/dev/null || echo "$1"; }

# run_one BENCH CASE PARAM ALLOC REP ARGS...
run_one() {
  b=$1; c=$2; p=$3; a=$4; r=$5; shift 5
  eval "lib=\$lib_$a"
  tag=$b-$c-$( [ "$p" = "*" ] && echo all || echo "$p")-$a-$r
  if [ -n "$lib" ]; then pre="env LD_PRELOAD=$lib"; else pre=""; fi
  cmd="$pre $bin/$*"
  cmd=${cmd# }
  [ "$r" = 1 ] && echo "$cmd" >> "$out/commands.txt"
  t0=$(date +%s.%N)
  # shellcheck disable=SC2086
  (cd "$out/work" && exec timeout --signal=KILL "$tmo" $pre "$bin/$@") \
      < /dev/null > "$out/logs/$tag.out" 2> "$out/logs/$tag.err"
  rc=$?
  t1=$(date +%s.%N)
  nruns=$((nruns + 1))
  reason=""
  from=$(sed -n 's/^info,malloc_from,//p' "$out/logs/$tag.out" | head -1)
  if [ "$rc" -eq 137 ]; then reason="timeout after ${tmo} s or killed"
  elif [ "$rc" -gt 128 ]; then reason="signal $(signame $((rc - 128)))"
  elif [ "$rc" -eq 2 ] && grep -q '^validate,failed' "$out/logs/$tag.out"; then
    reason="validation: $(grep -m1 'VALIDATION FAILED' "$out/logs/$tag.err" | cut -c20-90 | tr ',' ';')"
  elif [ "$rc" -ne 0 ]; then reason="exit $rc"
  elif ! grep -q "^validate,$b,ok" "$out/logs/$tag.out"; then reason="no validation line"
  elif [ -n "$lib" ] && [ "$(readlink -f "$from")" != "$(readlink -f "$lib")" ]; then
    reason="LD_PRELOAD not effective: malloc from ${from:-?}"
  elif [ -z "$lib" ] && ! echo "$from" | grep -q '/libc\.so'; then
    reason="system run got malloc from ${from:-?}"
  fi
  secs=$(echo "$t0 $t1" | awk '{ printf "%.1f", $2 - $1 }')
  if [ -n "$reason" ]; then
    nfail=$((nfail + 1))
    echo "$b,$c,$p,$a,$r,status,$reason," >> "$raw"
    printf '  %-9s %-8s %-6s %-10s rep %s  FAILED: %s (logs/%s.err)\n' "$b" "$c" "$p" "$a" "$r" "$reason" "$tag"
  else
    awk -F, -v a="$a" -v r="$r" '$1 == "result" { print $2","$3","$4","a","r","$5","$6","$7 }' \
        "$out/logs/$tag.out" >> "$raw"
    printf '  %-9s %-8s %-6s %-10s rep %s  %5s s\n' "$b" "$c" "$p" "$a" "$r" "$secs"
  fi
}

echo "allocator benchmarks ($level, $reps repeats) -> $out"
for a in $all_allocs; do
  eval "st=\$state_$a; lib=\$lib_$a"
  printf '  %-10s %s %s\n' "$a" "$st" "$lib"
done
rep=1
while [ "$rep" -le "$reps" ]; do
  # allocators interleaved inside each repeat, so a noisy moment hits all of them
  while read -r b c p args; do
    for a in $all_allocs; do
      eval "st=\$state_$a"
      [ "$st" = ok ] || continue
      # shellcheck disable=SC2086
      run_one "$b" "$c" "$p" "$a" "$rep" $args
    done
  done < "$plan"
  rep=$((rep + 1))
done
elapsed=$(( $(date +%s) - start ))
load_end=$(cut -d' ' -f1-3 /proc/loadavg)

# ---------------------------------------------------------------- report
md=$out/alloc.md
{
  echo "# Allocator micro-benchmarks ($level)"
  echo
  echo "Generated by \`benchmarks/alloc/run.sh\` on $(date -u '+%Y-%m-%d %H:%M UTC');"
  echo "$reps repeats of every run, $nruns runs ($nfail failed), ${elapsed} s."
  echo
  echo "- host: $(uname -n), $(uname -sr), $(nproc) cores," \
       "$(awk -F': ' '/model name/ { print $2; exit }' /proc/cpuinfo)," \
       "$(awk '/MemTotal/ { printf "%.0f GiB", $2 / 1048576 }' /proc/meminfo)"
  echo "- load average (1/5/15 min) at start: $load_start, at end: $load_end" \
       "(other work on the machine makes the figures noisy; compare repeats in raw.csv)"
  echo "- source: $(git -C "$here" describe --always --dirty 2>/dev/null || echo unknown)," \
       "build dir \`$builddir\`"
  echo "- peers (the \"best peer\" is the best of these): system, jemalloc, tcmalloc, mimalloc;" \
       "\`system\` is the C library's malloc (glibc $(ldd --version 2>/dev/null | awk 'NR == 1 { print $NF }'))"
  echo
  echo "| allocator | library | state |"
  echo "|---|---|---|"
  while IFS=, read -r a st lib; do
    echo "| $a | \`${lib:-(none: no LD_PRELOAD)}\` | $st |"
  done < "$out/allocators.csv"
  echo
  echo "Targets: libhpcmem at least as fast as the best peer on the two SWAlloc tests"
  echo "(size sweep, residents); within 10% of the best peer on the small-object tests"
  echo "(churn, threads); peak RSS within 10% of the best peer everywhere.  Every row"
  echo "shows PASS or **MISS**; a libhpcmem that is not built shows \"not built\"."
  echo
  awk -F, -v allocs="$all_allocs" -v peers="system jemalloc tcmalloc mimalloc" -v me=libhpcmem \
      -v csv="$out/alloc.csv" -f "$here/report.awk" "$out/allocators.csv" "$raw"
  echo
  echo "## Commands"
  echo
  hs=$(env | grep '^HPCMEM_' | sort | tr '\n' ' ' | sed 's/ $//')
  echo "Each command ran $reps times, with its working directory \`$out/work\`"
  echo "(libhpcmem writes its exit report there); HPCMEM_* settings in the environment:"
  echo "${hs:-none, every option at its default}."
  echo
  echo
  echo '```'
  cat "$out/commands.txt"
  echo '```'
} > "$md"

echo "wrote $md and $out/alloc.csv (${elapsed} s, $nfail failed runs)"
[ "$nfail" -eq 0 ]
