#!/bin/sh
# All of libhpcmem's ported benchmarks in one go, with the peers' allocators
# measured in the same run; writes OUTDIR/results.md and SVG plots.
#
#   benchmarks/run-all.sh OUTDIR [--quick|--full|--tiny] [--builddir DIR] [--skip LIST] [--rounds N]
#
#   --quick        small sizes, under ~10 minutes on 2 cores (what `make bench` runs)
#   --full         the sizes BENCHMARKS.md quotes (about 30 minutes on 2 cores without alloc)
#   --tiny         seconds per benchmark: checks the runner itself, figures mean nothing
#   --builddir DIR build directory with the programs (default: $top_builddir or .)
#   --skip LIST    comma list out of stream,bwamem,minife,alloc
#   --rounds N     rounds of every benchmark (default: 2 quick, 3 full, 1 tiny)
#
# Every program runs as the same binary under each allocator (glibc,
# jemalloc, tcmalloc, mimalloc, libhpcmem) through LD_PRELOAD; STREAM and
# miniFE also run their libhpcmem segment and placement variants under
# libhpcmem; miniFE's uneven 4-rank run shows libhpcmem's report;
# benchmarks/alloc/run.sh, when present, adds the allocator
# micro-benchmarks.  Exit status 1 if any run failed to validate its results.
set -u
usage() { sed -n '2,20p' "$0" | sed 's/^# \{0,1\}//'; exit "${1:-64}"; }

here=$(cd "$(dirname "$0")" && pwd)
src=$(cd "$here/.." && pwd)
out=""; level=quick; builddir=""; skip=""; rounds=""
while [ $# -gt 0 ]; do
  case $1 in
    --quick) level=quick ;;
    --full) level=full ;;
    --tiny) level=tiny ;;
    --builddir) builddir=${2:?--builddir DIR}; shift ;;
    --skip) skip=${2:?--skip LIST}; shift ;;
    --rounds) rounds=${2:?--rounds N}; shift ;;
    -h|--help) usage 0 ;;
    -*) echo "run-all.sh: unknown option $1" >&2; usage ;;
    *) [ -z "$out" ] || usage; out=$1 ;;
  esac
  shift
done
[ -n "$out" ] || usage
. "$src/benchmarks/common/allocators.sh"
[ -z "$rounds" ] || bench_positive run-all.sh --rounds "$rounds"
builddir=$(bench_builddir run-all.sh benchmarks/bwamem/bwamem "$builddir" "${top_builddir:-}" "$PWD") || exit 1
mkdir -p "$out/logs" || exit 1
out=$(cd "$out" && pwd)
plot=$src/benchmarks/common/svgplot.py
have_python=no; command -v python3 >/dev/null 2>&1 && have_python=yes
wanted() { case ",$skip," in *",$1,"*) return 1 ;; esac; return 0; }
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
  ntimes=10; size_opt=""; srounds=2
  case $level in full) ntimes=20; srounds=3 ;; tiny) ntimes=3; size_opt=--array-size=8M; srounds=1 ;; esac
  srounds=${rounds:-$srounds}
  : > "$out/stream-raw.csv"
  # the allocators take turns, round after round; each one's best round counts.
  # Every run tries every variant: under libhpcmem all six run, under the
  # others the four libhpcmem ones say why they skip.
  round=1
  while [ $round -le $srounds ]; do
    while IFS='|' read -r name lib st; do
      [ "$st" = ok ] || continue
      log=$out/logs/stream-$name-$round.log
      (cd "$out/logs" && OMP_NUM_THREADS=1 "$run_mpi" 2 env ${lib:+LD_PRELOAD=$lib} \
         "$builddir/benchmarks/stream/stream" --ntimes=$ntimes $size_opt) < /dev/null > "$log" 2>&1 || status=1
      awk -v a="$name" -v r="$round" '$1 == "#result" && $2 == "stream" { printf "%s,%s,%s,%s,%s,%s,%s\n", a, $3, $4, $5, $6, $7, r }' \
        "$log" >> "$out/stream-raw.csv"
      grep -q 'validation: FAILED\|neighbour check: .*FAILED\|arrays in the .* segment: NO' "$log" && status=1
      note "stream $name round $round: $(awk '$1 == "#result" && $4 == "Triad" { printf "%s %s  ", $3, $5 }' "$log")"
    done < "$out/allocators.txt"
    round=$((round + 1))
  done
  # allocator,variant,kernel,best MB/s,ratio in that run,valid|invalid (invalid if any round was),
  # worst round's MB/s, rounds
  awk -F, '{ k = $1 "," $2 "," $3; if (!(k in best)) order[++n] = k
             if (!(k in best) || $4 > best[k]) { best[k] = $4; ratio[k] = $5 }
             if (!(k in worst) || $4 < worst[k]) worst[k] = $4
             cnt[k]++
             if ($6 != "valid") bad[k] = 1 }
           END { for (i = 1; i <= n; i++) { k = order[i]
                 print k "," best[k] "," ratio[k] "," (k in bad ? "invalid" : "valid") "," worst[k] "," cnt[k] } }' \
    "$out/stream-raw.csv" > "$out/stream.csv"
  first=$(awk -F'|' '$3 == "ok" { print $1; exit }' "$out/allocators.txt")-1
  hplog=$out/logs/stream-libhpcmem-1.log
  peerlog=$(ls "$out"/logs/stream-jemalloc-1.log "$out"/logs/stream-glibc-1.log 2>/dev/null | head -1)
  {
    echo
    echo "## STREAM"
    echo
    echo "2 MPI ranks x 1 OpenMP thread, each array $(sed -n 's/^each array \([^ ]* [^ ]*\) over all ranks.*/\1/p' "$out/logs/stream-$first.log") over both ranks"
    echo "($(sed -n 's/.*last-level cache \([^;]*\);.*/\1/p' "$out/logs/stream-$first.log") last-level cache), MB/s of all ranks together, the best of $((ntimes - 1)) repetitions"
    echo "in each run; the allocators took turns for $srounds rounds and each one's best round is shown,"
    echo "with the Triad of its worst round next to it (the spread). (x) is the ratio against glibc's plain"
    echo "malloc; \`same run\` is the Triad ratio against plain malloc in the same process and round as the"
    echo "best, which is what the segment and placement variants should be read against."
    echo
    echo '```'
    echo "OMP_NUM_THREADS=1 tests/run-mpi.sh 2 env LD_PRELOAD=<allocator> benchmarks/stream/stream --ntimes=$ntimes $size_opt"
    echo '```'
    echo
    echo "| allocator | variant | Copy | Scale | Add | Triad | Triad, worst round | same run | validation |"
    echo "|---|---|---:|---:|---:|---:|---:|---:|---|"
    awk -F, '
      { key = $1 SUBSEP $2; if (!(key in seen)) { seen[key] = 1; rows[++n] = key }
        v[key, $3] = $4; w[key, $3] = $7; r[key, $3] = $5
        ok[key] = ($6 == "valid" && ok[key] != "invalid") ? "valid" : "invalid"
        if (base == "") base = $1 }
      $1 == base && $2 == "malloc" { b[$3] = $4 }
      END {
        split("malloc plain malloc-aligned aligned segment-private private segment-interleaved interleaved segment-shared shared placement place", nm, " ")
        for (i = 1; i in nm; i += 2) short[nm[i]] = nm[i + 1]
        for (i = 1; i <= n; i++) {
          split(rows[i], k, SUBSEP)
          printf "| %s | %s |", k[1], (k[2] in short) ? short[k[2]] : k[2]
          split("Copy Scale Add Triad", ks, " ")
          for (j = 1; j <= 4; j++) printf " %.0f (%.2fx) |", v[rows[i], ks[j]], v[rows[i], ks[j]] / b[ks[j]]
          printf " %.0f (%.0f%% below) | %.2fx |", w[rows[i], "Triad"], 100 * (1 - w[rows[i], "Triad"] / v[rows[i], "Triad"]), r[rows[i], "Triad"]
          printf " %s |\n", ok[rows[i]] == "valid" ? "passed" : "FAILED"
        }
      }' "$out/stream.csv"
    echo
    if [ -n "$peerlog" ]; then
      echo "Under the other allocators the libhpcmem variants skip, e.g. ($(basename "$peerlog" .log)):"
      echo
      echo '```'
      grep '^variant .*: skipped:' "$peerlog" | head -4
      echo '```'
      echo
    fi
    if [ -f "$hplog" ]; then
      echo "What the libhpcmem variants did (round 1):"
      echo
      echo '```'
      grep -E '^  (segment:|neighbour check:|placement:|commit \(rank 0\)|rank 0: a:)' "$hplog"
      grep '^libhpcmem: segments' "$hplog"
      echo '```'
      echo
    fi
    echo "$(grep -m1 '^PAPI:' "$out/logs/stream-$first.log")"
    echo
    echo "![STREAM, plain malloc](stream.svg)"
    [ -f "$hplog" ] && echo "![STREAM, libhpcmem variants](stream-variants.svg)"
    echo
    echo "($(($(date +%s) - t0)) s)"
  } >> "$md"
  if [ $have_python = yes ]; then
    awk -F, '$2 == "malloc" { print $3 "," $1 "," $4 }' "$out/stream.csv" > "$out/stream-plot.csv"
    python3 "$plot" bars "$out/stream.svg" "$out/stream-plot.csv" --title "STREAM, plain malloc, 2 ranks" \
      --xlabel kernel --ylabel "MB/s" && rm -f "$out/stream-plot.csv"
    awk -F, '$1 == "libhpcmem" { print $3 "," $2 "," $4 }' "$out/stream.csv" > "$out/stream-plot.csv"
    [ -s "$out/stream-plot.csv" ] && python3 "$plot" bars "$out/stream-variants.svg" "$out/stream-plot.csv" \
      --title "STREAM under libhpcmem: allocation variants, 2 ranks" --xlabel kernel --ylabel "MB/s"
    rm -f "$out/stream-plot.csv"
  fi
fi

# ------------------------------------------------------------------ BWA-MEM kernel
if wanted bwamem; then
  t0=$(date +%s)
  sh "$src/benchmarks/bwamem/run.sh" "$out/bwamem" --$level ${rounds:+--reps $rounds} --builddir "$builddir" >&2 || status=1
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
  mrounds=2
  case $level in full) n=100; mrounds=3 ;; tiny) n=12; mrounds=1 ;; *) n=40 ;; esac
  mrounds=${rounds:-$mrounds}
  hplib=$(awk -F'|' '$1 == "libhpcmem" && $3 == "ok" { print $2 }' "$out/allocators.txt")
  : > "$out/minife-raw.csv"
  # 2 ranks x 1 thread (one rank per core); every allocator with plain
  # malloc, libhpcmem also with each --alloc variant; the allocators take turns
  round=1
  while [ $round -le $mrounds ]; do
    while IFS='|' read -r name lib st; do
      [ "$st" = ok ] || continue
      kinds=malloc
      [ "$name" = libhpcmem ] && kinds="malloc private interleaved shared place"
      for kind in $kinds; do
        log=$out/logs/minife-$name-$kind-$round.log
        (cd "$out/logs" && OMP_NUM_THREADS=1 "$run_mpi" 2 env ${lib:+LD_PRELOAD=$lib} \
           "$builddir/miniapps/minife/minife" $n --alloc=$kind) < /dev/null > "$log" 2>&1 || status=1
        # allocator,variant,round,setup,assembly,solve,iterations,residual,error,assembly-cpu,solve-cpu,passed
        awk -v a="$name" -v r="$round" '$1 == "#result" && $2 == "minife" {
               printf "%s,%s,%s,%s,%s,%s,%s,%s,%s,%s,%s,%s\n", a, $14, r, $8, $9, $10, $11, $12, $13, $15, $16, $17 }' \
          "$log" >> "$out/minife-raw.csv"
        grep -q '^#result minife .* passed$' "$log" || status=1
        note "minife $name $kind round $round: $(grep '^setup' "$log" | cut -d'(' -f1)"
      done
    done < "$out/allocators.txt"
    round=$((round + 1))
  done
  # the README demo's run: 4 uneven ranks, libhpcmem's report
  if [ -n "$hplib" ]; then
    (cd "$out/logs" && OMP_NUM_THREADS=1 "$run_mpi" 4 env LD_PRELOAD="$hplib" \
       "$builddir/miniapps/minife/minife" $n --imbalance=2) < /dev/null > "$out/logs/minife-np4-uneven.log" 2>&1 || status=1
  fi
  # allocator,variant: best solve, worst solve, least solve CPU, best assembly, least assembly CPU,
  # iterations, residual, error, all passed
  awk -F, '{ k = $1 "," $2; if (!(k in sb)) { order[++n] = k; sb[k] = $6; sw[k] = $6; sc[k] = $11; ab[k] = $5; ac[k] = $10; ok[k] = 1 }
             if ($6 < sb[k]) sb[k] = $6; if ($6 > sw[k]) sw[k] = $6; if ($11 < sc[k]) sc[k] = $11
             if ($5 < ab[k]) ab[k] = $5; if ($10 < ac[k]) ac[k] = $10
             it[k] = $7; res[k] = $8; er[k] = $9; if ($12 != "passed") ok[k] = 0 }
           END { for (i = 1; i <= n; i++) { k = order[i]
                 printf "%s,%.4f,%.4f,%.4f,%.4f,%.4f,%s,%s,%s,%s\n", k, sb[k], sw[k], sc[k], ab[k], ac[k], it[k], res[k], er[k], ok[k] ? "passed" : "FAILED" } }' \
    "$out/minife-raw.csv" > "$out/minife.csv"
  {
    echo
    echo "## miniFE"
    echo
    echo "$n x $n x $n elements ($(( (n + 1) * (n + 1) * (n + 1) )) unknowns), 2 MPI ranks x 1 OpenMP thread, CG to a"
    echo "relative residual of 1e-10. Every allocator runs the same binary with plain malloc; under"
    echo "libhpcmem it also runs each \`--alloc\` variant. The allocators took turns for $mrounds rounds:"
    echo "best wall time of the solve, its worst round (the spread), and the least CPU time (user +"
    echo "system of both ranks; it includes the time a rank spins in MPI waiting for the other, so it"
    echo "grows under load as the wall time does); (x) against glibc with plain malloc."
    echo
    echo '```'
    echo "OMP_NUM_THREADS=1 tests/run-mpi.sh 2 env LD_PRELOAD=<allocator> miniapps/minife/minife $n --alloc=<variant>"
    echo '```'
    echo
    echo "| allocator | variant | solve s | solve s, worst round | solve CPU s | assembly s | assembly CPU s | CG iterations | verification |"
    echo "|---|---|---:|---:|---:|---:|---:|---:|---|"
    awk -F, 'NR == 1 { bs = $3; bc = $5 }
             { printf "| %s | %s | %.3f (%.2fx) | %.3f | %.3f (%.2fx) | %.3f | %.3f | %s | %s |\n", $1, $2, $3, $3 / bs, $4, $5, $5 / bc, $6, $7, $8, $11 }' \
      "$out/minife.csv"
    echo
    echo "Residual and largest nodal error (limit 2.5 h^2) of every run: $(awk -F, '{ print $9 " / " $10 }' "$out/minife.csv" | sort -u | tr '\n' ';' | sed 's/;$//; s/;/; /g')."
    hl=$out/logs/minife-libhpcmem-shared-1.log
    [ -f "$hl" ] && { echo; echo "Shared variant: $(grep '^halo:' "$hl")."; }
    hl=$out/logs/minife-libhpcmem-place-1.log
    if [ -f "$hl" ]; then
      echo
      echo "Placement variant (round 1, rank 0):"
      echo
      echo '```'
      sed -n '/^placement, commit/,/^$/p' "$hl" | sed '/^$/d'
      echo '```'
    fi
    if [ -f "$out/logs/minife-np4-uneven.log" ]; then
      echo
      echo "The README demo's workload, 4 ranks with an uneven decomposition, libhpcmem preloaded:"
      echo
      echo '```'
      echo "OMP_NUM_THREADS=1 tests/run-mpi.sh 4 env LD_PRELOAD=.libs/libhpcmem.so miniapps/minife/minife $n --imbalance=2"
      echo '```'
      echo
      echo '```'
      sed -n '/^ rank  planes/,/^imbalance/p' "$out/logs/minife-np4-uneven.log"
      grep -E '^(setup|verification)' "$out/logs/minife-np4-uneven.log"
      grep '^libhpcmem:' "$out/logs/minife-np4-uneven.log"
      echo '```'
    fi
    echo
    echo "![miniFE solve time](minife.svg)"
    echo
    echo "($(($(date +%s) - t0)) s)"
  } >> "$md"
  grep -q ',FAILED$' "$out/minife.csv" && status=1
  if [ $have_python = yes ]; then
    awk -F, '{ print $1 "," $2 "," $3 }' "$out/minife.csv" > "$out/minife-plot.csv"
    python3 "$plot" bars "$out/minife.svg" "$out/minife-plot.csv" --title "miniFE $n^3, 2 ranks: best solve time" \
      --xlabel "allocator" --ylabel seconds && rm -f "$out/minife-plot.csv"
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
