#!/bin/sh
# All of libhpcmem's ported benchmarks in one go, with the peers' allocators
# measured in the same run; writes OUTDIR/results.md and SVG plots.
#
#   benchmarks/run-all.sh OUTDIR [--quick|--full] [--builddir DIR] [--skip LIST]
#
#   --quick        small sizes, under ~10 minutes on 2 cores (what `make bench` runs)
#   --full         the sizes BENCHMARKS.md quotes (about an hour on 2 cores)
#   --tiny         seconds per benchmark: checks the runner itself, figures mean nothing
#   --builddir DIR build directory with the programs (default: $top_builddir or .)
#   --skip LIST    comma list out of stream,bwamem,minife,alloc
#
# STREAM and the BWA-MEM kernel run the same binary under each allocator
# (glibc, jemalloc, tcmalloc, mimalloc, libhpcmem) through LD_PRELOAD; miniFE
# links libhpcmem and shows its report; benchmarks/alloc/run.sh, when present,
# adds the allocator micro-benchmarks.  Exit status 1 if any run failed to
# validate its results.
set -u
usage() { sed -n '2,18p' "$0" | sed 's/^# \{0,1\}//'; exit "${1:-64}"; }

here=$(cd "$(dirname "$0")" && pwd)
src=$(cd "$here/.." && pwd)
out=""; level=quick; builddir=""; skip=""
while [ $# -gt 0 ]; do
  case $1 in
    --quick) level=quick ;;
    --full) level=full ;;
    --tiny) level=tiny ;;
    --builddir) builddir=${2:?--builddir DIR}; shift ;;
    --skip) skip=${2:?--skip LIST}; shift ;;
    -h|--help) usage 0 ;;
    -*) echo "run-all.sh: unknown option $1" >&2; usage ;;
    *) [ -z "$out" ] || usage; out=$1 ;;
  esac
  shift
done
[ -n "$out" ] || usage
for d in "$builddir" "${top_builddir:-}" "$PWD"; do
  if [ -n "$d" ] && [ -x "$d/benchmarks/bwamem/bwamem" ]; then builddir=$d; break; fi
done
if [ -z "$builddir" ] || [ ! -x "$builddir/benchmarks/bwamem/bwamem" ]; then
  echo "run-all.sh: no built benchmarks found; run make first or pass --builddir" >&2
  exit 1
fi
builddir=$(cd "$builddir" && pwd)
mkdir -p "$out/logs" || exit 1
out=$(cd "$out" && pwd)
plot=$src/benchmarks/common/svgplot.py
have_python=no; command -v python3 >/dev/null 2>&1 && have_python=yes
wanted() { case ",$skip," in *",$1,"*) return 1 ;; esac; return 0; }
. "$src/benchmarks/common/allocators.sh"
bench_allocators "$builddir" > "$out/allocators.txt"
run_mpi=$builddir/tests/run-mpi.sh
status=0
md=$out/results.md
note() { echo "run-all.sh: $*" >&2; }

# ------------------------------------------------------------------ machine
{
  echo "# libhpcmem benchmark results"
  echo
  echo "Made by \`benchmarks/run-all.sh $(basename "$out") --$level\` on $(date -u '+%Y-%m-%d %H:%M UTC')"
  rev=$(git -C "$src" describe --always --dirty 2>/dev/null) && echo "at commit $rev (\"-dirty\": the working tree had changes)."
  echo
  echo "## Machine"
  echo
  echo "| | |"
  echo "|---|---|"
  echo "| CPU | $(lscpu 2>/dev/null | sed -n 's/^Model name: *//p' | head -1), $(nproc) cores online |"
  echo "| caches | $(lscpu 2>/dev/null | awk -F: '/^L[123].* cache/ { gsub(/^ +/, "", $2); printf "%s %s; ", $1, $2 }') |"
  echo "| memory | $(awk '/^MemTotal/ { printf "%.1f GiB", $2 / 1048576 }' /proc/meminfo), $(lscpu 2>/dev/null | sed -n 's/^NUMA node(s): *//p') NUMA node(s) |"
  echo "| system | $(. /etc/os-release 2>/dev/null && echo "$PRETTY_NAME"), Linux $(uname -r) |"
  echo "| compiler | $(${CC:-cc} --version 2>/dev/null | head -1) |"
  echo "| MPI | $(mpirun --version 2>/dev/null | head -1) |"
  echo "| load at start | $(cut -d' ' -f1-3 /proc/loadavg) (the machine may be shared: figures are noisy) |"
  echo
  echo "Allocators (the same binaries under LD_PRELOAD):"
  echo
  while IFS='|' read -r name lib st; do
    if [ "$st" = ok ]; then echo "- $name: ${lib:-the C library's own malloc}"; else echo "- $name: $st"; fi
  done < "$out/allocators.txt"
} > "$md"

# ------------------------------------------------------------------ STREAM
if wanted stream && [ -x "$builddir/benchmarks/stream/stream" ]; then
  t0=$(date +%s)
  ntimes=10; size_opt=""; rounds=2
  case $level in full) ntimes=20; rounds=3 ;; tiny) ntimes=3; size_opt=--array-size=8M; rounds=1 ;; esac
  : > "$out/stream-raw.csv"
  # the allocators take turns, round after round; each one's best round counts
  round=1
  while [ $round -le $rounds ]; do
    while IFS='|' read -r name lib st; do
      [ "$st" = ok ] || continue
      log=$out/logs/stream-$name-$round.log
      (cd "$out/logs" && OMP_NUM_THREADS=1 "$run_mpi" 2 env ${lib:+LD_PRELOAD=$lib} \
         "$builddir/benchmarks/stream/stream" --ntimes=$ntimes $size_opt) < /dev/null > "$log" 2>&1 || status=1
      awk -v a="$name" '$1 == "#result" && $2 == "stream" { printf "%s,%s,%s,%s,%s,%s\n", a, $3, $4, $5, $6, $7 }' \
        "$log" >> "$out/stream-raw.csv"
      grep -q 'validation: FAILED' "$log" && status=1
      note "stream $name round $round: $(awk -v a="$name" '$1 == "#result" && $3 == "malloc" { printf "%s %s  ", $4, $5 }' "$log")"
    done < "$out/allocators.txt"
    round=$((round + 1))
  done
  # allocator,variant,kernel,best MB/s,ratio in that run,valid|invalid (invalid if any round was)
  awk -F, '{ k = $1 "," $2 "," $3; if (!(k in best)) order[++n] = k
             if (!(k in best) || $4 > best[k]) { best[k] = $4; ratio[k] = $5 }
             if ($6 != "valid") bad[k] = 1 }
           END { for (i = 1; i <= n; i++) { k = order[i]; print k "," best[k] "," ratio[k] "," (k in bad ? "invalid" : "valid") } }' \
    "$out/stream-raw.csv" > "$out/stream.csv"
  first=$(awk -F'|' '$3 == "ok" { print $1; exit }' "$out/allocators.txt")-1
  {
    echo
    echo "## STREAM"
    echo
    echo "2 MPI ranks x 1 OpenMP thread, each array $(sed -n 's/^each array \([^ ]* [^ ]*\) over all ranks.*/\1/p' "$out/logs/stream-$first.log") over both ranks"
    echo "($(sed -n 's/.*last-level cache \([^;]*\);.*/\1/p' "$out/logs/stream-$first.log") last-level cache), MB/s of all ranks together, the best of $((ntimes - 1)) repetitions"
    echo "in each run; the allocators took turns for $rounds rounds and each one's best round is shown."
    echo "\`plain\` is the malloc variant, \`aligned\` the 2 MiB-aligned one; (x) is the ratio against glibc's plain malloc."
    echo
    echo '```'
    echo "OMP_NUM_THREADS=1 tests/run-mpi.sh 2 env LD_PRELOAD=<allocator> benchmarks/stream/stream --ntimes=$ntimes $size_opt"
    echo '```'
    echo
    echo "| allocator | variant | Copy | Scale | Add | Triad | validation |"
    echo "|---|---|---:|---:|---:|---:|---|"
    awk -F, '
      { key = $1 SUBSEP $2; if (!(key in seen)) { seen[key] = 1; rows[++n] = key }
        v[key, $3] = $4; ok[key] = ($6 == "valid" && ok[key] != "invalid") ? "valid" : "invalid"
        if (base == "") base = $1 }
      $1 == base && $2 == "malloc" { b[$3] = $4 }
      END {
        for (i = 1; i <= n; i++) {
          split(rows[i], k, SUBSEP)
          printf "| %s | %s |", k[1], k[2] == "malloc" ? "plain" : k[2] == "malloc-aligned" ? "aligned" : k[2]
          split("Copy Scale Add Triad", ks, " ")
          for (j = 1; j <= 4; j++) printf " %.0f (%.2fx) |", v[rows[i], ks[j]], v[rows[i], ks[j]] / b[ks[j]]
          printf " %s |\n", ok[rows[i]] == "valid" ? "passed" : "FAILED"
        }
      }' "$out/stream.csv"
    echo
    sed -n 's/^variant \([^:]*\): not available: \(.*\)/- variant `\1`: not available (\2)/p' "$out/logs/stream-$first.log"
    echo
    echo "$(grep -m1 '^PAPI:' "$out/logs/stream-$first.log")"
    echo
    echo "![STREAM](stream.svg)"
    echo
    echo "($(($(date +%s) - t0)) s)"
  } >> "$md"
  if [ $have_python = yes ]; then
    awk -F, '$2 == "malloc" { print $3 "," $1 "," $4 }' "$out/stream.csv" > "$out/stream-plot.csv"
    python3 "$plot" bars "$out/stream.svg" "$out/stream-plot.csv" --title "STREAM, plain malloc, 2 ranks" \
      --xlabel kernel --ylabel "MB/s" && rm -f "$out/stream-plot.csv"
  fi
fi

# ------------------------------------------------------------------ BWA-MEM kernel
if wanted bwamem; then
  t0=$(date +%s)
  sh "$src/benchmarks/bwamem/run.sh" "$out/bwamem" --$level --builddir "$builddir" >&2 || status=1
  {
    echo
    sed -e 's/^## /## /' -e 's/](\([^/h][^)]*\.svg\))/](bwamem\/\1)/' "$out/bwamem/bwamem.md"
    echo
    echo "($(($(date +%s) - t0)) s; logs in bwamem/logs/)"
  } >> "$md"
fi

# ------------------------------------------------------------------ miniFE
if wanted minife && [ -x "$builddir/miniapps/minife/minife" ]; then
  t0=$(date +%s)
  case $level in full) n=80 ;; tiny) n=12 ;; *) n=40 ;; esac
  : > "$out/minife.csv"
  # label|short label for the plot|ranks|threads|extra options
  for cfg in "1 rank x 2 threads|1x2|1|2|" "2 ranks x 1 thread|2x1|2|1|" "4 ranks x 1 thread|4x1|4|1|" \
             "4 ranks uneven (--imbalance=1)|4x1 uneven|4|1|--imbalance=1"; do
    IFS='|' read -r label short np nt extra <<EOF_CFG
$cfg
EOF_CFG
    log=$out/logs/minife-np$np-t$nt${extra:+-uneven}.log
    (cd "$out/logs" && OMP_NUM_THREADS=$nt "$run_mpi" "$np" "$builddir/miniapps/minife/minife" $n $extra) < /dev/null > "$log" 2>&1 \
      || status=1
    awk -v l="$label" -v s="$short" '$1 == "#result" && $2 == "minife" { printf "%s,%s,%s,%s,%s,%s,%s,%s,%s\n", l, $8, $9, $10, $11, $12, $13, $14, s }' \
      "$log" >> "$out/minife.csv"
    note "minife $label: $(grep '^setup' "$log")"
  done
  {
    echo
    echo "## miniFE"
    echo
    echo "$n x $n x $n elements ($(( (n + 1) * (n + 1) * (n + 1) )) unknowns), CG to a relative residual of 1e-10;"
    echo "linked with libhpcmem, whose report at MPI_Finalize follows the runs. The error is the largest"
    echo "nodal difference from the exact solution (limit 2.5 h^2)."
    echo
    echo '```'
    echo "OMP_NUM_THREADS=T tests/run-mpi.sh NP miniapps/minife/minife $n [--imbalance=1]"
    echo '```'
    echo
    echo "| run | setup s | assembly s | solve s | CG iterations | residual | error | verification |"
    echo "|---|---:|---:|---:|---:|---:|---:|---|"
    awk -F, '{ printf "| %s | %.3f | %.3f | %.3f | %s | %s | %s | %s |\n", $1, $2, $3, $4, $5, $6, $7, $8 }' "$out/minife.csv"
    echo
    echo "Per-rank table and libhpcmem's report of the uneven run:"
    echo
    echo '```'
    sed -n '/^ rank  planes/,/^imbalance/p' "$out/logs/minife-np4-t1-uneven.log"
    grep '^libhpcmem:' "$out/logs/minife-np4-t1-uneven.log"
    echo '```'
    echo
    echo "![miniFE phases](minife.svg)"
    echo
    echo "($(($(date +%s) - t0)) s)"
  } >> "$md"
  grep -q ',failed,' "$out/minife.csv" && status=1
  if [ $have_python = yes ]; then
    awk -F, '{ print $9 ",setup," $2; print $9 ",assembly," $3; print $9 ",solve," $4 }' "$out/minife.csv" \
      > "$out/minife-plot.csv"
    python3 "$plot" bars "$out/minife.svg" "$out/minife-plot.csv" --title "miniFE $n^3: time per phase" \
      --xlabel "ranks x threads" --ylabel seconds && rm -f "$out/minife-plot.csv"
  fi
fi

# ------------------------------------------------------------------ allocator micro-benchmarks
if wanted alloc && [ -f "$src/benchmarks/alloc/run.sh" ]; then
  t0=$(date +%s)
  if sh "$src/benchmarks/alloc/run.sh" "$out/alloc" --$level --builddir "$builddir" >&2 && [ -f "$out/alloc/alloc.md" ]; then
    {
      echo
      sed -e 's/^#/##/' -e 's/](\([^/h#][^)]*\))/](alloc\/\1)/' "$out/alloc/alloc.md"
      echo
      echo "($(($(date +%s) - t0)) s)"
    } >> "$md"
  else
    status=1
    printf '\n## Allocator micro-benchmarks\n\nbenchmarks/alloc/run.sh failed; see alloc/.\n' >> "$md"
  fi
fi

{
  echo
  echo "Load at the end: $(cut -d' ' -f1-3 /proc/loadavg)."
  [ $have_python = yes ] || echo "No python3 here: no SVG plots."
} >> "$md"
echo "run-all.sh: wrote $md" >&2
exit $status
