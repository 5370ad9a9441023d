#!/bin/sh
# Tracing overhead and trace size, next to heaptrack's, on one program:
#   tests/trace/measure_overhead.sh [-n NP] [-r REPEAT] [-l PRELOAD] PROGRAM ARGS...
# runs PROGRAM (under tests/run-mpi.sh with NP ranks when -n is given)
#   plain      as it is
#   hpcmem     HPCMEM_TRACE=1 with LD_PRELOAD=PRELOAD (default: libhpcmem.so of
#              this build; tests/trace/.libs/libhmtpreload.so measures the
#              recorder alone over glibc, like heaptrack)
#   heaptrack  under heaptrack (each rank its own file)
# REPEAT times each (default 3), and prints the best wall time, the slowdown,
# and the size of the traces per event.  HPCMEM_TRACE_UNWIND, _DEPTH and
# _COMPRESS are passed on when set.  Not part of make check (minutes).
# Run from the build directory.
np="" repeat=3 preload=""
while getopts n:r:l: o; do
  case $o in n) np=$OPTARG ;; r) repeat=$OPTARG ;; l) preload=$OPTARG ;; *) exit 2 ;; esac
done
shift $((OPTIND - 1))
[ $# -ge 1 ] || { echo "usage: $0 [-n NP] [-r REPEAT] [-l PRELOAD] PROGRAM ARGS..." >&2; exit 2; }
b=$(pwd)
preload=${preload:-$b/.libs/libhpcmem.so}
work=$(mktemp -d /tmp/hpcmem-overhead.XXXXXX)
trap 'rm -rf "$work"' EXIT

now() { date +%s.%N; }
best() {  # NAME, then the command words
  name=$1; shift
  t=""
  for i in $(seq "$repeat"); do
    rm -rf "$work/$name"; mkdir -p "$work/$name"
    s=$(now)
    ( cd "$work/$name" && "$@" ) > "$work/$name.out" 2>&1 || { echo "$name: failed: $(tail -3 "$work/$name.out")" >&2; return 1; }
    e=$(now)
    d=$(echo "$e - $s" | bc)
    if [ -z "$t" ] || [ "$(echo "$d < $t" | bc)" = 1 ]; then t=$d; fi
  done
  echo "$t"
}

xs="" es=""
for v in HPCMEM_TRACE_UNWIND HPCMEM_TRACE_DEPTH HPCMEM_TRACE_COMPRESS; do
  eval "val=\${$v:-}"
  [ -n "$val" ] && xs="$xs -x $v=$val" && es="$es $v=$val"
done
if [ -n "$np" ]; then
  tp=$(best plain "$b/tests/run-mpi.sh" "$np" "$@")
  th=$(best hpcmem "$b/tests/run-mpi.sh" "$np" -x HPCMEM_TRACE=1 -x HPCMEM_TRACE_DIR="$work/hpcmem/trace" \
       -x HPCMEM_REPORT=off $xs -x LD_PRELOAD="$preload" "$@")
  prog=$1; shift
  tk=$(best heaptrack "$b/tests/run-mpi.sh" "$np" heaptrack -o "$work/heaptrack/ht" "$prog" "$@")
else
  tp=$(best plain "$@")
  th=$(best hpcmem env $es HPCMEM_TRACE=1 HPCMEM_TRACE_DIR="$work/hpcmem/trace" HPCMEM_REPORT=off LD_PRELOAD="$preload" "$@")
  tk=$(best heaptrack heaptrack -o "$work/heaptrack/ht" "$@")
fi
events=$("$b/tools/hpcmem-report" --json "$work/hpcmem/trace" 2>/dev/null | jq '[.ranks[].events] | add')
hsize=$(cat "$work"/hpcmem/trace/*.hmt | wc -c)
ksize=$(cat "$work"/heaptrack/ht* 2>/dev/null | wc -c)
printf '%-10s %10s %9s %14s %12s\n' config "wall (s)" slowdown "trace bytes" "bytes/event"
printf '%-10s %10.3f %9s %14s %12s\n' plain "$tp" 1.00 - -
printf '%-10s %10.3f %9.2f %14d %12.2f\n' hpcmem "$th" "$(echo "$th / $tp" | bc -l)" "$hsize" "$(echo "$hsize / $events" | bc -l)"
printf '%-10s %10.3f %9.2f %14d %12.2f\n' heaptrack "$tk" "$(echo "$tk / $tp" | bc -l)" "$ksize" "$(echo "$ksize / $events" | bc -l)"
echo "($events allocation events; preload $preload;$es)"
