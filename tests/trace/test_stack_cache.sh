#!/bin/sh
# The recorder's stack cache (src/trace/stack.c) against capture without it:
# tests/trace/stack_cache_app makes allocations whose stacks differ only far
# from the allocating function, from frames that land at the same stack
# address, through alloca, deeper than the cache keeps, and from threads.
# Traced with HPCMEM_TRACE_UNWIND=libunwind (cached) and =backtrace (not
# cached), every allocation must have the same stack in both.  The program
# is built twice: without frame pointers (CFA from the stack pointer) and
# with them (CFA from the frame pointer).
b=${top_builddir:-.}
lib=${LIBHPCMEM:-$b/.libs/libhpcmem.so}
dump=$b/tests/trace/hmt_stackdump
dir=$(mktemp -d /tmp/hpcmem-stack-cache.XXXXXX)
trap 'rm -rf "$dir"' EXIT
fails=0
expect=30060  # 3 workloads x (2000 x 5 + 20) allocations (stack_cache_app.c)

for prog in stack_cache_app stack_cache_app_fp; do
  for m in libunwind backtrace; do
    if ! env LD_PRELOAD="$lib" HPCMEM_REPORT=off HPCMEM_TRACE=1 HPCMEM_TRACE_DEPTH=200 HPCMEM_TRACE_UNWIND=$m \
         HPCMEM_TRACE_DIR="$dir/$prog-$m" "$b/tests/trace/$prog" > "$dir/out" 2>&1; then
      echo "[  FAILED  ] stack_cache.$prog (did not run with $m: $(head -c 300 "$dir/out"))"; exit 1
    fi
    "$dump" "$dir/$prog-$m/rank-0.hmt" 3001 3999 | sort > "$dir/$prog-$m.txt"
  done
  n=$(wc -l < "$dir/$prog-libunwind.txt")
  nostack=$(grep -c 'no stack' "$dir/$prog-libunwind.txt")
  distinct=$(sort -u "$dir/$prog-libunwind.txt" | wc -l)
  if [ "$n" != $expect ] || [ "$nostack" != 0 ]; then
    echo "[  FAILED  ] stack_cache.$prog ($n allocations traced, $expect expected; $nostack without a stack)"
    fails=$((fails + 1))
  elif ! cmp -s "$dir/$prog-libunwind.txt" "$dir/$prog-backtrace.txt"; then
    echo "[  FAILED  ] stack_cache.$prog (stacks differ from uncached capture: $(diff "$dir/$prog-libunwind.txt" \
      "$dir/$prog-backtrace.txt" | head -3 | cut -c1-200 | tr '\n' ' '))"
    fails=$((fails + 1))
  elif [ "$distinct" -lt 20 ]; then
    echo "[  FAILED  ] stack_cache.$prog (only $distinct distinct size and stack pairs: the program did not vary them)"
    fails=$((fails + 1))
  else
    echo "[       OK ] stack_cache.$prog ($n allocations, $distinct distinct, same stacks as without the cache)"
  fi
done
[ $fails = 0 ]
