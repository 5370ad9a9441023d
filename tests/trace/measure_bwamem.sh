#!/bin/sh
# Tracing overhead on the BWA-MEM kernel (benchmarks/bwamem): an
# allocation-heavy OpenMP program, about a million allocations per CPU
# second.  Makes the BWA2 read set (bwagen --preset=bwa2 --scale=SCALE) and
# runs tests/trace/measure_overhead.sh -b on
#   OMP_WAIT_POLICY=passive bwamem -t THREADS REF.fa READS.fq
# plain libhpcmem, libhpcmem with HPCMEM_TRACE=1, and heaptrack over
# libhpcmem, taking turns for ROUNDS rounds.
#   tests/trace/measure_bwamem.sh [-r ROUNDS] [-t THREADS] [-s SCALE] [-d DATADIR]
# (defaults 5, 2, 0.15, a temporary directory).  Run from the build
# directory; minutes.  docs/trace-format.md has the figures.
rounds=5 threads=2 scale=0.15 data=""
while getopts r:t:s:d: o; do
  case $o in r) rounds=$OPTARG ;; t) threads=$OPTARG ;; s) scale=$OPTARG ;; d) data=$OPTARG ;; *) exit 2 ;; esac
done
b=$(pwd)
here=$(cd "$(dirname "$0")" && pwd)
[ -x "$b/benchmarks/bwamem/bwamem" ] || { echo "$0: build benchmarks/bwamem/bwamem first (make)" >&2; exit 1; }
tmp=""
if [ -z "$data" ]; then tmp=$(mktemp -d /tmp/hpcmem-bwamem.XXXXXX); data=$tmp; fi
trap '[ -n "$tmp" ] && rm -rf "$tmp"' EXIT
mkdir -p "$data" && data=$(cd "$data" && pwd)
set=$data/bwa2-$scale
[ -f "$set.fq" ] || "$b/benchmarks/bwamem/bwagen" --preset=bwa2 --scale="$scale" "$set" > /dev/null ||
  { echo "$0: bwagen failed" >&2; exit 1; }
echo "bwamem -t $threads on BWA2 x $scale ($(grep -c '^+$' "$set.fq") reads), $rounds rounds"
# in the environment, not through env(1): heaptrack must start bwamem itself
OMP_WAIT_POLICY=passive; export OMP_WAIT_POLICY
sh "$here/measure_overhead.sh" -b -r "$rounds" "$b/benchmarks/bwamem/bwamem" -t "$threads" --no-validate "$set.fa" "$set.fq"
