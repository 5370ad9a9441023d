#!/bin/sh
# The recorder's stack cache (src/trace/stack.c) against capture without it
# (HPCMEM_TRACE_STACK_CACHE=0): tests/trace/stack_cache_app makes
# allocations whose stacks differ only far from the allocating function,
# from frames that land at the same stack address, through alloca, deeper
# than the cache keeps, and from threads.  Every allocation must have the
# same stack with the cache as without, for each capture method, and most
# stacks must come from the cache (HPCMEM_VERBOSE's count of hits).  The
# program is built twice: without frame pointers (each frame's CFA from the
# stack pointer) and with them (from the frame pointer).
b=${top_builddir:-.}
lib=${LIBHPCMEM:-$b/.libs/libhpcmem.so}
dump=$b/tests/trace/hmt_stackdump
dir=$(mktemp -d /tmp/hpcmem-stack-cache.XXXXXX)
trap 'rm -rf "$dir"' EXIT
fails=0
expect=30060  # 3 workloads x (2000 x 5 + 20) allocations (stack_cache_app.c)

run() {  # PROGRAM METHOD CACHE
  if ! env LD_PRELOAD="$lib" HPCMEM_REPORT=off HPCMEM_VERBOSE=1 HPCMEM_TRACE=1 HPCMEM_TRACE_DEPTH=200 \
       HPCMEM_TRACE_UNWIND=$2 HPCMEM_TRACE_STACK_CACHE=$3 HPCMEM_TRACE_DIR="$dir/$1-$2-$3" \
       "$b/tests/trace/$1" > "$dir/$1-$2-$3.out" 2>&1; then
    echo "[  FAILED  ] stack_cache.$1_$2 (did not run: $(tail -c 300 "$dir/$1-$2-$3.out"))"; return 1
  fi
  "$dump" "$dir/$1-$2-$3/rank-0.hmt" 3001 3999 | sort > "$dir/$1-$2-$3.txt"
}

for prog in stack_cache_app stack_cache_app_fp; do
  for m in libunwind backtrace; do
    run $prog $m 1 && run $prog $m 0 || { fails=$((fails + 1)); continue; }
    on=$dir/$prog-$m-1.txt
    n=$(wc -l < "$on")
    nostack=$(grep -c 'no stack' "$on")
    distinct=$(sort -u "$on" | wc -l)
    # "stack cache on: H hits, C captures"
    set -- $(sed -n 's/.*stack cache on: \([0-9]*\) hits, \([0-9]*\) captures.*/\1 \2/p' "$dir/$prog-$m-1.out")
    hits=${1:-0} captures=${2:-0}
    if [ "$n" != $expect ] || [ "$nostack" != 0 ]; then
      echo "[  FAILED  ] stack_cache.${prog}_$m ($n allocations traced, $expect expected; $nostack without a stack)"
      fails=$((fails + 1))
    elif ! cmp -s "$on" "$dir/$prog-$m-0.txt"; then
      echo "[  FAILED  ] stack_cache.${prog}_$m (stacks differ from capture without the cache: $(diff "$on" \
        "$dir/$prog-$m-0.txt" | head -3 | cut -c1-200 | tr '\n' ' '))"
      fails=$((fails + 1))
    elif [ "$distinct" -lt 20 ]; then
      echo "[  FAILED  ] stack_cache.${prog}_$m (only $distinct distinct size and stack pairs: the program did not vary them)"
      fails=$((fails + 1))
    elif [ "$hits" -lt $((expect / 2)) ]; then
      echo "[  FAILED  ] stack_cache.${prog}_$m (only $hits stacks from the cache, $captures captured)"
      fails=$((fails + 1))
    else
      echo "[       OK ] stack_cache.${prog}_$m ($n allocations, $distinct distinct, same stacks as without the cache; $hits hits, $captures captures)"
    fi
  done
done
# frame pointers: the recorder over glibc (libhmtpreload, whose entry points
# keep frame pointers) and the program built with them; the walk ends in
# the C library (built without), so frames are compared up to there
pre=$b/tests/trace/.libs/libhmtpreload.so
if [ -f "$pre" ]; then
  for c in 1 0; do
    env LD_PRELOAD="$pre" HPCMEM_VERBOSE=1 HPCMEM_TRACE=1 HPCMEM_TRACE_DEPTH=200 HPCMEM_TRACE_UNWIND=frame \
      HPCMEM_TRACE_STACK_CACHE=$c HPCMEM_TRACE_DIR="$dir/fp-$c" "$b/tests/trace/stack_cache_app_fp" > "$dir/fp-$c.out" 2>&1
    "$dump" "$dir/fp-$c/rank-0.hmt" 3001 3999 | sed 's/ libc\.so.*//' | sort > "$dir/fp-$c.txt"
  done
  sed 's/ libc\.so.*//' "$dir/stack_cache_app_fp-backtrace-0.txt" | sort > "$dir/fp-ref.txt"
  hits=$(sed -n 's/.*stack cache on: \([0-9]*\) hits.*/\1/p' "$dir/fp-1.out")
  if [ "$(wc -l < "$dir/fp-1.txt")" != $expect ] || grep -q 'no stack' "$dir/fp-1.txt"; then
    echo "[  FAILED  ] stack_cache.frame_pointers ($(wc -l < "$dir/fp-1.txt") allocations, $(grep -c 'no stack' "$dir/fp-1.txt") without a stack)"
    fails=$((fails + 1))
  elif ! cmp -s "$dir/fp-1.txt" "$dir/fp-0.txt" || ! cmp -s "$dir/fp-1.txt" "$dir/fp-ref.txt"; then
    echo "[  FAILED  ] stack_cache.frame_pointers (stacks differ: $(diff "$dir/fp-1.txt" "$dir/fp-ref.txt" | head -3 | cut -c1-200 | tr '\n' ' '))"
    fails=$((fails + 1))
  elif [ "${hits:-0}" -lt $((expect / 2)) ]; then
    echo "[  FAILED  ] stack_cache.frame_pointers (only ${hits:-0} stacks from the cache)"
    fails=$((fails + 1))
  else
    echo "[       OK ] stack_cache.frame_pointers (same stacks with and without the cache, and as libgcc's up to the C library; $hits hits)"
  fi
else
  echo "[  SKIPPED ] stack_cache.frame_pointers (tests/trace/libhmtpreload.la not built)"
fi
[ $fails = 0 ]
