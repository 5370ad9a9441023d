#!/bin/sh
# The bwamem kernel under every allocator: BWA0/1/2 (one reference, three
# read sets, as in the Mmalloc paper), reads/s for 1..16 OpenMP threads.
#
#   benchmarks/bwamem/run.sh OUTDIR [--quick|--tiny|--full] [--sizes LIST]
#                            [--threads LIST] [--allocs LIST] [--reps N] [--builddir DIR]
#
#   --full         the BWA0/1/2 presets as they are (20k, 80k, 320k reads), best of 3
#   --quick        15% of the reads, best of 2 (what `make bench` runs), the default
#   --tiny         2% of the reads, one run, seconds in all (to exercise the runner)
#   --sizes LIST   comma list out of bwa0,bwa1,bwa2
#   --threads LIST thread counts (default 1,2,4,8,16)
#   --allocs LIST  comma list out of glibc,jemalloc,tcmalloc,mimalloc,libhpcmem
#   --reps N       rounds over all allocators, the fastest counts (default: by level)
#   --builddir DIR build directory (default: $top_builddir, the current directory)
#
# Writes OUTDIR/bwamem.md (tables), OUTDIR/bwamem.csv
# (size,allocator,threads,reads_per_s,seconds,reads_per_cpu_s: the best rounds,
# then the worst round's reads_per_cpu_s),
# OUTDIR/raw.csv (size,allocator,threads,reads_per_s,seconds,cpu_s,round), OUTDIR/*.svg (Figures 5 and 6 of the paper, redrawn from this
# run) and OUTDIR/logs/.
set -u
usage() { sed -n '2,19p' "$0" | sed 's/^# \{0,1\}//'; exit "${1:-64}"; }

here=$(cd "$(dirname "$0")" && pwd)
src=$(cd "$here/../.." && pwd)
out=""; level=quick; sizes="bwa0,bwa1,bwa2"; threads="1,2,4,8,16"; allocs=""; reps=""; builddir=""
while [ $# -gt 0 ]; do
  case $1 in
    --quick) level=quick ;;
    --tiny) level=tiny ;;
    --full) level=full ;;
    --sizes) sizes=${2:?--sizes LIST}; shift ;;
    --threads) threads=${2:?--threads LIST}; shift ;;
    --allocs) allocs=${2:?--allocs LIST}; shift ;;
    --reps) reps=${2:?--reps N}; shift ;;
    --builddir) builddir=${2:?--builddir DIR}; shift ;;
    -h|--help) usage 0 ;;
    -*) echo "run.sh: unknown option $1" >&2; usage ;;
    *) [ -z "$out" ] || usage; out=$1 ;;
  esac
  shift
done
[ -n "$out" ] || usage
case $level in full) scale=1; r=3 ;; quick) scale=0.15; r=2 ;; tiny) scale=0.02; r=1 ;; esac
reps=${reps:-$r}
. "$src/benchmarks/common/allocators.sh"
bench_positive run.sh --reps "$reps"
builddir=$(bench_builddir run.sh benchmarks/bwamem/bwamem "$builddir" "${top_builddir:-}" "$PWD") || exit 1
mkdir -p "$out/logs" "$out/data" || exit 1
out=$(cd "$out" && pwd)

bench_allocators "$builddir" > "$out/allocators.txt"
if [ -n "$allocs" ]; then
  awk -F'|' -v want=",$allocs," 'index(want, "," $1 ",")' "$out/allocators.txt" > "$out/allocators.sel"
  mv "$out/allocators.sel" "$out/allocators.txt"
fi
: > "$out/raw.csv"
status=0
for size in $(echo "$sizes" | tr ',' ' '); do
  data=$out/data/$size-$level
  if [ ! -f "$data.fq" ]; then
    "$builddir/benchmarks/bwamem/bwagen" --preset="$size" --scale="$scale" "$data" > "$out/logs/gen-$size.log" 2>&1 \
      || { echo "run.sh: bwagen --preset=$size failed" >&2; cat "$out/logs/gen-$size.log" >&2; exit 1; }
  fi
done
# Repetitions go round all allocators in turn, so that a busy spell on a
# shared machine hits every allocator alike; the fastest repetition counts.
rep=1
while [ $rep -le $reps ]; do
  for size in $(echo "$sizes" | tr ',' ' '); do
    data=$out/data/$size-$level
    while IFS='|' read -r name lib st; do
      log=$out/logs/$size-$name-$rep.log
      if [ "$st" != ok ]; then
        [ $rep -eq 1 ] && echo "$size $name: $st"
        continue
      fi
      # runs in the logs directory: libhpcmem writes its report file into the current one
      (cd "$out/logs" && env ${lib:+LD_PRELOAD=$lib} OMP_WAIT_POLICY=passive \
         "$builddir/benchmarks/bwamem/bwamem" -t "$threads" --name="$size" --label="$name" \
         "$data.fa" "$data.fq") < /dev/null > "$log" 2>&1
      rc=$?
      awk -v r="$rep" '$1 == "#result" && $2 == "bwamem" { printf "%s,%s,%s,%s,%s,%s,%s\n", $3, $4, $5, $6, $7, $8, r }' \
        "$log" >> "$out/raw.csv"
      v=$(grep '^validation:' "$log" | cut -d: -f2 | cut -d' ' -f2)
      echo "$size $name run $rep: rc=$rc validation=${v:-none} $(awk '$1 == "#result" { printf "%s:%.0f ", $5, $6 }' "$log")"
      [ $rc -eq 0 ] && [ "$v" = "passed" ] || status=1
    done < "$out/allocators.txt"
  done
  rep=$((rep + 1))
done
# best of the rounds: size,allocator,threads,reads_per_s,seconds (fastest
# round), reads_per_cpu_s (least CPU time, user + system, of any round)
# and, for the spread, the worst round's reads_per_cpu_s
awk -F, '{ k = $1 "," $2 "," $3; if (!(k in best)) order[++n] = k
           if (!(k in best) || $4 > best[k]) { best[k] = $4; secs[k] = $5 }
           pc = $6 > 0 ? $4 * $5 / $6 : 0; if (pc > percpu[k]) percpu[k] = pc
           if (!(k in worstpc) || pc < worstpc[k]) worstpc[k] = pc }
         END { for (i = 1; i <= n; i++) { k = order[i]; printf "%s,%s,%s,%.1f,%.1f\n", k, best[k], secs[k], percpu[k], worstpc[k] } }' \
  "$out/raw.csv" > "$out/bwamem.csv"

# ------------------------------------------------------------------ report
# table SIZE COLUMN TITLE [WORST-COLUMN]: threads down, allocators across, the
# best in bold; with WORST-COLUMN each cell adds how far the worst round fell below
table() {
  awk -F, -v size="$1" -v col="$2" -v title="$3" -v wcol="${4:-0}" '
    $1 == size { if (!(($2) in seen)) { seen[$2] = 1; order[++na] = $2 }
                 if (!(($3) in tseen)) { tseen[$3] = 1; th[++nt] = $3 }
                 v[$2, $3] = $col; if (wcol > 0) w[$2, $3] = $wcol }
    END {
      if (na == 0) { print "(no results)"; exit }
      printf "%s\n\n| threads |", title; for (a = 1; a <= na; a++) printf " %s |", order[a]; printf "\n"
      printf "|---:|"; for (a = 1; a <= na; a++) printf "---:|"; printf "\n"
      for (t = 1; t <= nt; t++) {
        best = 0; for (a = 1; a <= na; a++) if (v[order[a], th[t]] > best) best = v[order[a], th[t]]
        printf "| %s |", th[t]
        for (a = 1; a <= na; a++) {
          x = v[order[a], th[t]]
          printf (x == best ? " **%.0f**" : " %.0f"), x
          if (wcol > 0 && x > 0) printf " (-%.0f%%)", 100 * (1 - w[order[a], th[t]] / x)
          printf " |"
        }
        printf "\n"
      }
    }' "$out/bwamem.csv"
}
{
  echo "## BWA-MEM kernel: reads/s per allocator and thread count"
  echo
  ref=$(sed -n '1s/^bwagen: [^(]*(\([^)]*\)).*/\1/p' "$out/logs/gen-$(echo "$sizes" | cut -d, -f1).log")
  echo "One synthetic reference ($ref) and three read sets of 100-base reads, BWA0/1/2"
  echo "at $scale x the presets' read counts (level $level); \`bwagen --preset=SIZE --scale=$scale\` made them."
  echo "Every run checks its alignments against the generator's true positions. The allocators"
  echo "take turns, $reps rounds, and the fastest round of each is shown (all rounds: raw.csv). Per allocator:"
  echo
  echo '```'
  echo "env LD_PRELOAD=<allocator> OMP_WAIT_POLICY=passive benchmarks/bwamem/bwamem -t $threads REF.fa READS.fq"
  echo '```'
  echo
  while IFS='|' read -r name lib st; do
    [ "$st" = ok ] || echo "- $name: $st"
  done < "$out/allocators.txt"
  for size in $(echo "$sizes" | tr ',' ' '); do
    echo
    echo "### $size ($(grep -c '^+$' "$out/data/$size-$level.fq" 2>/dev/null) reads)"
    echo
    table "$size" 4 "Reads per second (wall clock):"
    echo
    table "$size" 6 "Reads per CPU second (user + system time: the work done, whatever else the machine runs; in brackets how far the worst round fell below the best):" 7
    echo
    echo "![reads/s, $size]($size-threads.svg)"
  done
  echo
  echo "![time at the largest thread count](bwamem-time.svg)"
} > "$out/bwamem.md"

if command -v python3 >/dev/null 2>&1; then
  plot=$src/benchmarks/common/svgplot.py
  maxt=$(echo "$threads" | tr ',' '\n' | sort -n | tail -1)
  for size in $(echo "$sizes" | tr ',' ' '); do
    awk -F, -v s="$size" '$1 == s { print $2 "," $3 "," $4 }' "$out/bwamem.csv" > "$out/$size-threads.csv"
    [ -s "$out/$size-threads.csv" ] && python3 "$plot" lines "$out/$size-threads.svg" "$out/$size-threads.csv" \
      --title "bwamem $size: scalability (cf. Mmalloc Fig. 6)" --xlabel "OpenMP threads" --ylabel "reads/s"
    rm -f "$out/$size-threads.csv"
  done
  awk -F, -v t="$maxt" '$3 == t { print $1 "," $2 "," $5 }' "$out/bwamem.csv" > "$out/time.csv"
  [ -s "$out/time.csv" ] && python3 "$plot" bars "$out/bwamem-time.svg" "$out/time.csv" \
    --title "bwamem: seconds at $maxt threads (cf. Mmalloc Fig. 5)" --xlabel "data set" --ylabel "seconds"
  rm -f "$out/time.csv"
else
  echo "run.sh: no python3, no SVG plots" >&2
fi
exit $status
