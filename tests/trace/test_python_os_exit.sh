#!/bin/sh
# Python under LD_PRELOAD and HPCMEM_TRACE=1: a program that ends by
# os._exit (which calls _exit) has the same allocations in its trace as
# one that returns normally -- a thousand bytearray(1000), 1001 bytes each
# -- and a multiprocessing worker (start method fork, which ends the child
# with os._exit) leaves a trace of its own holding what it allocated.
# Skipped without python3.
b=$(cd "${top_builddir:-.}" && pwd)
COUNT=$b/tests/trace/hmt_count
LIB=${LIBHPCMEM:-$b/.libs/libhpcmem.so}
fails=0
ok() { echo "[       OK ] python_os_exit.$1"; }
ko() { echo "[  FAILED  ] python_os_exit.$1 ($2)"; fails=$((fails + 1)); }
command -v python3 > /dev/null 2>&1 || { echo "[  SKIPPED ] python_os_exit.all (no python3)"; exit 77; }
# the interpreter itself, not a wrapper that execs it (pyenv's shims are
# shell scripts: each would leave traces of its own)
PY=$(python3 -c 'import sys; print(sys.executable)' 2> /dev/null)
[ -x "$PY" ] || { echo "[  SKIPPED ] python_os_exit.all (python3 does not name its interpreter)"; exit 77; }
dir=$(mktemp -d /tmp/hpcmem-python-exit.XXXXXX)
trap 'rm -rf "$dir"' EXIT

# traced NAME CODE: run CODE traced into $dir/NAME
traced() {
  HPCMEM_TRACE=1 HPCMEM_TRACE_DIR="$dir/$1" HPCMEM_REPORT=off LD_PRELOAD="$LIB" "$PY" -c "$2" > "$dir/$1.out" 2>&1
}
# allocs NAME SIZE: allocations of SIZE in the trace of NAME's first process
allocs() {
  f=$(ls "$dir/$1"/*.hmt 2> /dev/null | head -1)
  [ -n "$f" ] && "$COUNT" "$f" "$2" 2> /dev/null | awk -v s="$2" '$1 == s {print $3}'
}

traced normal 'x = [bytearray(1000) for _ in range(1000)]'
n_normal=$(allocs normal 1001)
if [ "${n_normal:-0}" -lt 1000 ]; then
  echo "[  SKIPPED ] python_os_exit.all (a normal run's trace holds ${n_normal:-no} allocations of 1001 bytes: not recorded here)"
  exit 77
fi
traced os_exit 'import os
x = [bytearray(1000) for _ in range(1000)]
os._exit(0)'
rc=$?
n_exit=$(allocs os_exit 1001)
if [ $rc != 0 ]; then ko os_exit.same_allocations_as_a_normal_end "status $rc: $(cat "$dir/os_exit.out")"
elif [ "$n_exit" != "$n_normal" ]; then ko os_exit.same_allocations_as_a_normal_end "${n_exit:-no} allocations of 1001 bytes, $n_normal when it returns"
else ok os_exit.same_allocations_as_a_normal_end; fi

traced worker 'import multiprocessing as mp, sys
def work():
    x = [bytearray(1500) for _ in range(1000)]
if __name__ == "__main__":
    p = mp.get_context("fork").Process(target=work)
    p.start()
    p.join()
    sys.exit(p.exitcode)'
rc=$?
# the worker's trace is the one that holds its allocations
best=0
for f in "$dir"/worker/*.hmt; do
  [ -f "$f" ] || continue
  n=$("$COUNT" "$f" 1501 2> /dev/null | awk '$1 == 1501 {print $3}')
  [ "${n:-0}" -gt $best ] && best=$n
done
if [ $rc != 0 ]; then ko multiprocessing_worker.its_allocations_written "status $rc: $(cat "$dir/worker.out")"
elif [ "$best" -lt 1000 ]; then
  ko multiprocessing_worker.its_allocations_written "the most allocations of 1501 bytes in a trace: $best ($(ls "$dir/worker" | tr '\n' ' '))"
else ok multiprocessing_worker.its_allocations_written; fi
[ $fails = 0 ]
