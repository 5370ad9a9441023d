#!/bin/sh
# Tracing overhead and trace size, next to heaptrack's, on one program:
#   tests/trace/measure_overhead.sh [-n NP] [-r ROUNDS] [-l PRELOAD] [-b] [-H] PROGRAM ARGS...
# runs PROGRAM (under tests/run-mpi.sh with NP ranks when -n is given) as
#   plain      as it is; with -b: with LD_PRELOAD=PRELOAD and HPCMEM_TRACE=0,
#              so that the slowdown is tracing's alone, against libhpcmem
#   hpcmem     HPCMEM_TRACE=1 with LD_PRELOAD=PRELOAD (default: libhpcmem.so of
#              this build; tests/trace/.libs/libhmtpreload.so is the recorder
#              alone over glibc's malloc)
#   heaptrack  under heaptrack (each process its own file); with -b over
#              PRELOAD too, so that both tracers wrap the same allocator
# ROUNDS times (default 5).  The three take turns within a round, so that a
# busy spell of a shared machine hits all of them alike.  Prints, per
# configuration, the best, median and worst wall and CPU (user + system of
# the whole process tree: heaptrack's interpreter counts) times; the
# slowdowns of the best times; the spread of the slowdown over the rounds
# (each round's traced time over the same round's plain time); and the trace
# sizes per event.  -H leaves heaptrack out.  HPCMEM_TRACE_UNWIND, _DEPTH,
# _COMPRESS and _STACK_CACHE are passed on when set.  Not part of make check
# (minutes).  Run from the build directory.
np="" rounds=5 preload="" base="" noheap=""
while getopts n:r:l:bH o; do
  case $o in n) np=$OPTARG ;; r) rounds=$OPTARG ;; l) preload=$OPTARG ;; b) base=1 ;; H) noheap=1 ;; *) exit 2 ;; esac
done
shift $((OPTIND - 1))
[ $# -ge 1 ] || { echo "usage: $0 [-n NP] [-r ROUNDS] [-l PRELOAD] [-b] [-H] PROGRAM ARGS..." >&2; exit 2; }
b=$(pwd)
preload=${preload:-$b/.libs/libhpcmem.so}
# the runs happen in directories of their own: a relative path must not break
prog=$1; shift
case $prog in /*) ;; */*) prog=$b/$prog ;; esac
set -- "$prog" "$@"
work=$(mktemp -d /tmp/hpcmem-overhead.XXXXXX)
trap 'rm -rf "$work"' EXIT
: > "$work/times"

# one run: NAME ROUND, then the command; appends "NAME ROUND WALL CPU"
once() {
  name=$1 round=$2; shift 2
  rm -rf "${work:?}/$name"; mkdir -p "$work/$name"
  s=$(date +%s.%N)
  ( cd "$work/$name" && /usr/bin/time -f "%U %S" -o "$work/$name.cpu" "$@" ) > "$work/$name.out" 2>&1 ||
    { echo "$name: failed: $(tail -3 "$work/$name.out")" >&2; exit 1; }
  e=$(date +%s.%N)
  echo "$name $round $(echo "$e - $s" | bc) $(awk '{ print $1 + $2 }' "$work/$name.cpu")" >> "$work/times"
}

xs="" es=""
for v in HPCMEM_TRACE_UNWIND HPCMEM_TRACE_DEPTH HPCMEM_TRACE_COMPRESS HPCMEM_TRACE_STACK_CACHE; do
  eval "val=\${$v:-}"
  [ -n "$val" ] && xs="$xs -x $v=$val" && es="$es $v=$val"
done
bx="" be=""
[ -n "$base" ] && bx="-x HPCMEM_REPORT=off -x LD_PRELOAD=$preload" && be="HPCMEM_REPORT=off LD_PRELOAD=$preload"
r=1
while [ $r -le "$rounds" ]; do
  if [ -n "$np" ]; then
    once plain $r "$b/tests/run-mpi.sh" "$np" $bx "$@"
    once hpcmem $r "$b/tests/run-mpi.sh" "$np" -x HPCMEM_TRACE=1 -x HPCMEM_TRACE_DIR="$work/hpcmem/trace" \
      -x HPCMEM_REPORT=off $xs -x LD_PRELOAD="$preload" "$@"
    [ -n "$noheap" ] || once heaptrack $r "$b/tests/run-mpi.sh" "$np" $bx heaptrack "$@"
  else
    once plain $r env $be "$@"
    once hpcmem $r env $es HPCMEM_TRACE=1 HPCMEM_TRACE_DIR="$work/hpcmem/trace" HPCMEM_REPORT=off LD_PRELOAD="$preload" "$@"
    [ -n "$noheap" ] || once heaptrack $r env $be heaptrack "$@"
  fi
  r=$((r + 1))
done

events=$("$b/tools/hpcmem-report" --json "$work/hpcmem/trace" 2>/dev/null | jq '[.ranks[].events] | add')
hsize=$(cat "$work"/hpcmem/trace/*.hmt | wc -c)
ksize=$(cat "$work"/heaptrack/heaptrack.* 2>/dev/null | wc -c)  # one file per process

# per configuration: best, median, worst of wall ($3) and CPU ($4)
stat() {  # NAME COLUMN -> "BEST MEDIAN WORST"
  awk -v n="$1" -v c="$2" '$1 == n { print $c }' "$work/times" | sort -g |
    awk '{ v[NR] = $1 } END { printf "%s %s %s\n", v[1], (NR % 2 ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2), v[NR] }'
}
# the slowdown of each round against the same round's plain run: "MIN MAX"
spread() {  # NAME COLUMN
  awk -v n="$1" -v c="$2" '$1 == "plain" { p[$2] = $c } $1 == n { t[$2] = $c }
    END { mn = 1e9; mx = 0; for (r in t) if (p[r] > 0) { x = t[r] / p[r]; if (x < mn) mn = x; if (x > mx) mx = x }
          printf "%.2f %.2f\n", mn, mx }' "$work/times"
}
printf '%-10s %26s %26s %8s %8s %13s %13s %12s %11s\n' "" "wall s: best median worst" "CPU s: best median worst" \
  "x wall" "x CPU" "x wall/round" "x CPU/round" "trace bytes" "bytes/event"
set -- $(stat plain 3); pw=$1; pwm=$2; pwx=$3
set -- $(stat plain 4); pc=$1; pcm=$2; pcx=$3
printf '%-10s %8.3f %8.3f %8.3f %8.2f %8.2f %8.2f %8s %8s %13s %13s %12s %11s\n' plain "$pw" "$pwm" "$pwx" "$pc" "$pcm" "$pcx" \
  1.00 1.00 - - - -
for cfg in hpcmem heaptrack; do
  grep -q "^$cfg " "$work/times" || continue
  set -- $(stat $cfg 3); w=$1; wm=$2; wx=$3
  set -- $(stat $cfg 4); c=$1; cm=$2; cx=$3
  set -- $(spread $cfg 3); sw="$1-$2"
  set -- $(spread $cfg 4); sc="$1-$2"
  size=$hsize; [ $cfg = heaptrack ] && size=$ksize
  printf '%-10s %8.3f %8.3f %8.3f %8.2f %8.2f %8.2f %8.2f %8.2f %13s %13s %12d %11.3f\n' $cfg "$w" "$wm" "$wx" "$c" "$cm" "$cx" \
    "$(echo "$w / $pw" | bc -l)" "$(echo "$c / $pc" | bc -l)" "$sw" "$sc" "$size" "$(echo "$size / $events" | bc -l)"
done
echo "($events allocation events per run, $rounds rounds; preload $preload;$es${base:+; plain = the preload without tracing}; load average now $(cut -d' ' -f1-3 /proc/loadavg))"
