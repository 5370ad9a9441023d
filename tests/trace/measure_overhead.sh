#!/bin/sh
# Tracing overhead and trace size, next to heaptrack's, on one program:
#   tests/trace/measure_overhead.sh [-n NP] [-r REPEAT] [-l PRELOAD] [-b] PROGRAM ARGS...
# runs PROGRAM (under tests/run-mpi.sh with NP ranks when -n is given)
#   plain      as it is (with -b: with LD_PRELOAD=PRELOAD, not tracing, so that
#              libhpcmem's slowdown is measured against libhpcmem)
#   hpcmem     HPCMEM_TRACE=1 with LD_PRELOAD=PRELOAD (default: libhpcmem.so of
#              this build; tests/trace/.libs/libhmtpreload.so measures the
#              recorder alone over glibc, like heaptrack)
#   heaptrack  under heaptrack (each rank its own file)
# REPEAT times each (default 3), and prints the best wall time, the slowdown,
# and the size of the traces per event.  HPCMEM_TRACE_UNWIND, _DEPTH and
# _COMPRESS are passed on when set.  Not part of make check (minutes).
# Run from the build directory.
np="" repeat=3 preload="" base=""
while getopts n:r:l:b o; do
  case $o in n) np=$OPTARG ;; r) repeat=$OPTARG ;; l) preload=$OPTARG ;; b) base=1 ;; *) exit 2 ;; esac
done
shift $((OPTIND - 1))
[ $# -ge 1 ] || { echo "usage: $0 [-n NP] [-r REPEAT] [-l PRELOAD] PROGRAM ARGS..." >&2; exit 2; }
b=$(pwd)
preload=${preload:-$b/.libs/libhpcmem.so}
work=$(mktemp -d /tmp/hpcmem-overhead.XXXXXX)
trap 'rm -rf "$work"' EXIT

now() { date +%s.%N; }
# best wall and best CPU (user + sys of the whole process tree, so that
# heaptrack's interpreter counts) over REPEAT runs: "WALL CPU"
best() {  # NAME, then the command words
  name=$1; shift
  t="" c=""
  for i in $(seq "$repeat"); do
    rm -rf "$work/$name"; mkdir -p "$work/$name"
    s=$(now)
    ( cd "$work/$name" && /usr/bin/time -f "%U %S" -o "$work/$name.cpu" "$@" ) > "$work/$name.out" 2>&1 ||
      { echo "$name: failed: $(tail -3 "$work/$name.out")" >&2; return 1; }
    e=$(now)
    d=$(echo "$e - $s" | bc)
    u=$(awk '{print $1 + $2}' "$work/$name.cpu")
    if [ -z "$t" ] || [ "$(echo "$d < $t" | bc)" = 1 ]; then t=$d; fi
    if [ -z "$c" ] || [ "$(echo "$u < $c" | bc)" = 1 ]; then c=$u; fi
  done
  echo "$t $c"
}

xs="" es=""
for v in HPCMEM_TRACE_UNWIND HPCMEM_TRACE_DEPTH HPCMEM_TRACE_COMPRESS; do
  eval "val=\${$v:-}"
  [ -n "$val" ] && xs="$xs -x $v=$val" && es="$es $v=$val"
done
bx="" be=""
[ -n "$base" ] && bx="-x HPCMEM_REPORT=off -x LD_PRELOAD=$preload" && be="HPCMEM_REPORT=off LD_PRELOAD=$preload"
if [ -n "$np" ]; then
  tp=$(best plain "$b/tests/run-mpi.sh" "$np" $bx "$@")
  th=$(best hpcmem "$b/tests/run-mpi.sh" "$np" -x HPCMEM_TRACE=1 -x HPCMEM_TRACE_DIR="$work/hpcmem/trace" \
       -x HPCMEM_REPORT=off $xs -x LD_PRELOAD="$preload" "$@")
  prog=$1; shift
  tk=$(best heaptrack "$b/tests/run-mpi.sh" "$np" heaptrack "$prog" "$@")
else
  tp=$(best plain env $be "$@")
  th=$(best hpcmem env $es HPCMEM_TRACE=1 HPCMEM_TRACE_DIR="$work/hpcmem/trace" HPCMEM_REPORT=off LD_PRELOAD="$preload" "$@")
  tk=$(best heaptrack heaptrack "$@")
fi
events=$("$b/tools/hpcmem-report" --json "$work/hpcmem/trace" 2>/dev/null | jq '[.ranks[].events] | add')
hsize=$(cat "$work"/hpcmem/trace/*.hmt | wc -c)
ksize=$(cat "$work"/heaptrack/heaptrack.* 2>/dev/null | wc -c)  # one file per process
set -- $tp; tpw=$1 tpc=$2
set -- $th; thw=$1 thc=$2
set -- $tk; tkw=$1 tkc=$2
printf '%-10s %9s %8s %9s %8s %12s %11s\n' config "wall (s)" "x wall" "CPU (s)" "x CPU" "trace bytes" "bytes/event"
printf '%-10s %9.3f %8s %9.2f %8s %12s %11s\n' plain "$tpw" 1.00 "$tpc" 1.00 - -
printf '%-10s %9.3f %8.2f %9.2f %8.2f %12d %11.2f\n' hpcmem "$thw" "$(echo "$thw / $tpw" | bc -l)" "$thc" \
  "$(echo "$thc / $tpc" | bc -l)" "$hsize" "$(echo "$hsize / $events" | bc -l)"
printf '%-10s %9.3f %8.2f %9.2f %8.2f %12d %11.2f\n' heaptrack "$tkw" "$(echo "$tkw / $tpw" | bc -l)" "$tkc" \
  "$(echo "$tkc / $tpc" | bc -l)" "$ksize" "$(echo "$ksize / $events" | bc -l)"
echo "($events allocation events; preload $preload;$es${base:+; plain = the preload without tracing})"
