#!/bin/sh
# Smoke run of the Figure 6 benchmark: the served counts must be CLMalloc
# Table 2 (per-area baseline at most 8 of the 20 MiB requests, the global
# bitmap all T up to 12), and pre-allocation must beat first-touch faults.
bench="${top_builddir:-.}/benchmarks/contig/contig_bench"
[ -x "$bench" ] || { echo "[  SKIPPED ] contig_bench.build (no $bench)"; exit 77; }
out=$(HPCMEM_REPORT=off "$bench" -r 1 -n 2000) || { echo "[  FAILED  ] contig_bench.runs (exit $?)"; exit 1; }
echo "$out"
fail=0
check() { # name awk-condition-on-the-figure-6-rows
  if echo "$out" | awk -v bad=0 '/^[0-9]+ /{ if (!('"$2"')) bad=1 } END { exit bad }'; then
    echo "[       OK ] contig_bench.$1"
  else
    echo "[  FAILED  ] contig_bench.$1 ($2 does not hold on every row)"; fail=1
  fi
}
check PerAreaServesAtMost8 '$3 == ($1 < 8 ? $1 : 8)'
check GlobalServesAll '$5 == $1 && $7 == $1'
check PreallocFasterThanFaults '$6 < $4'
rows=$(echo "$out" | grep -c '^1[0-2] \|^[89] ')
if [ "$rows" -eq 5 ]; then echo "[       OK ] contig_bench.FiveRows"; else echo "[  FAILED  ] contig_bench.FiveRows ($rows rows)"; fail=1; fi
exit $fail
