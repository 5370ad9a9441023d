#!/bin/sh
# hpcmem-report on a 4-rank job whose memory is known in advance
# (tests/trace/trace_workload.c says what each rank allocates):
# high-water marks, peak of the sum, per-function breakdown with and without
# wrapper collapse, leaks, imbalance, JSON, SVG, heaptrack export, and
# damaged input (a clear error naming the file and offset, never a crash).
# Needs jq to read the JSON (skipped without it).
b=${top_builddir:-.}
REPORT=$b/tools/hpcmem-report
WORKLOAD=$b/tests/trace/trace_workload
dir=$(mktemp -d /tmp/hpcmem-report-test.XXXXXX)
trap 'rm -rf "$dir"' EXIT
fails=0
ok() { echo "[       OK ] hpcmem_report.$1"; }
ko() { echo "[  FAILED  ] hpcmem_report.$1 ($2)"; fails=$((fails + 1)); }

if ! command -v jq >/dev/null 2>&1; then
  echo "[  SKIPPED ] hpcmem_report.all (jq is not installed: apt-get install jq)"; exit 77
fi
q() { jq -r "$1" "$dir/report.json"; }

MiB=1048576
# within [want, want + slack): the job's own small allocations (stdio,
# libhpcmem's S allocations) may add to the synthetic ones once the
# allocator traces the process itself
near() { [ "$1" -ge "$2" ] 2>/dev/null && [ "$1" -lt $(($2 + $3)) ]; }

if ! "$WORKLOAD" "$dir/trace" 4; then echo "[  FAILED  ] hpcmem_report.workload (did not run)"; exit 1; fi

# --- JSON -------------------------------------------------------------------
if "$REPORT" --json="$dir/report.json" "$dir/trace" > "$dir/report.txt" 2> "$dir/err.txt"; then ok runs; else ko runs "exit $?: $(cat "$dir/err.txt")"; fi

n=$(q '.ranks | length')
[ "$n" = 4 ] && ok four_ranks || ko four_ranks "got $n"

bad=""
for r in 0 1 2 3; do
  hwm=$(q ".ranks[] | select(.rank == $r) | .hwm_bytes")
  near "$hwm" $(((10 * r + 20) * MiB)) $MiB || bad="$bad rank$r=$hwm"
done
[ -z "$bad" ] && ok hwm_per_rank_is_10r_plus_20_MiB || ko hwm_per_rank_is_10r_plus_20_MiB "$bad"

peak=$(q '.job.peak_bytes')
near "$peak" $((140 * MiB)) $((4 * MiB)) && ok job_peak_is_the_sum_at_the_barrier || ko job_peak_is_the_sum_at_the_barrier "$peak"

# events that share a time stamp (a tick of the columnar blocks): a rank's
# allocation and another rank's free, and the same between two threads of a
# rank, are merged allocations first (tests/trace/tie_job.c): the peaks are
# upper bounds, not what file order would give (rank 0 13 -> 12 MiB, job 32
# -> 20 MiB)
mkdir -p "$dir/tie"
if "$b/tests/trace/tie_job" "$dir/tie" && "$REPORT" --json="$dir/tie.json" "$dir/tie" > /dev/null 2> "$dir/tie.err"; then
  tp=$(jq -r '.job.peak_bytes' "$dir/tie.json"); t0=$(jq -r '.ranks[] | select(.rank == 0) | .hwm_bytes' "$dir/tie.json")
  [ "$tp" = $((32 * MiB)) ] && [ "$t0" = $((13 * MiB)) ] && ok same_tick_allocations_before_frees ||
    ko same_tick_allocations_before_frees "job peak $tp, rank 0 $t0"
else
  ko same_tick_allocations_before_frees "$(cat "$dir/tie.err")"
fi

# blocks handed from one thread to another and freed there, most within the
# same tick (tests/trace/handoff_app.c, which counts its own live bytes in
# the true order): every free finds its block, the leaks are exactly the
# program's, and the peak is an upper bound of the true one (GCC may name
# the functions' clones kept.isra.0 and the like)
lib=${HPCMEM_LIB:-$b/.libs/libhpcmem.so}
if [ -r "$lib" ]; then
  exact=$(HPCMEM_TRACE=1 HPCMEM_TRACE_DIR="$dir/handoff" HPCMEM_REPORT=off LD_PRELOAD="$lib" "$b/tests/trace/handoff_app" 20000)
  if "$REPORT" --json="$dir/handoff.json" "$dir/handoff" > /dev/null 2> "$dir/handoff.err"; then
    set -- $exact   # peak P live L
    hq() { jq -r "$1" "$dir/handoff.json"; }
    un=$(hq '.ranks[0].unmatched_frees'); kept=$(hq '[.leaks.functions[] | select(.name | test("^kept([.]|$)")) | .bytes] | add')
    prod=$(hq '[.leaks.functions[] | select(.name | test("^produce([.]|$)")) | .bytes] | add // 0'); hwm=$(hq '.ranks[0].hwm_bytes')
    [ "$un" = 0 ] && [ "$kept" = "$4" ] && [ "$prod" = 0 ] && ok handed_over_blocks_all_freed ||
      ko handed_over_blocks_all_freed "unmatched frees $un, kept $kept (program: $4), produce still live $prod"
    [ "$hwm" -ge "$2" ] 2>/dev/null && [ "$hwm" -lt $(($2 + MiB)) ] && ok handed_over_blocks_peak_bounds ||
      ko handed_over_blocks_peak_bounds "hwm $hwm, program's exact peak $2"
  else
    ko handed_over_blocks_all_freed "$(cat "$dir/handoff.err")"
  fi
fi

# four threads trading large blocks through a pool (tests/trace/trade_app.c):
# a block freed by one thread is often allocated again by another in the
# same tick.  Every free finds its block, nothing the program freed stays
# live, and the peak is at or above the program's own (before the reader
# searched a tick's order, ~2,000 frees were missing and the peak read
# 20 times too high)
if [ -r "$lib" ]; then
  exact=$(HPCMEM_TRACE=1 HPCMEM_TRACE_DIR="$dir/trade" HPCMEM_REPORT=off LD_PRELOAD="$lib" "$b/tests/trace/trade_app" 4 20000)
  if "$REPORT" --json="$dir/trade.json" "$dir/trade" > /dev/null 2> "$dir/trade.err"; then
    set -- $exact   # peak P live L
    tq() { jq -r "$1" "$dir/trade.json"; }
    mf=$(tq '.ranks[0].missing_frees'); un=$(tq '.ranks[0].unmatched_frees')
    le=$(tq '.ranks[0].live_at_end_bytes'); hwm=$(tq '.ranks[0].hwm_bytes')
    [ "$mf" = 0 ] && [ "$un" = 0 ] && [ "$le" -lt 131072 ] && ok traded_blocks_all_freed ||
      ko traded_blocks_all_freed "missing frees $mf, unmatched frees $un, live at end $le (program: $4)"
    [ "$hwm" -ge "$2" ] 2>/dev/null && [ "$hwm" -lt $(($2 + 8 * MiB)) ] && ok traded_blocks_peak_bounds ||
      ko traded_blocks_peak_bounds "hwm $hwm, program's exact peak $2"
  else
    ko traded_blocks_all_freed "$(cat "$dir/trade.err")"
  fi
  # eight threads freeing outside the pool's lock: ticks of 6 - 8 threads,
  # whose order took the reader up to a million steps to find
  HPCMEM_TRACE=1 HPCMEM_TRACE_DIR="$dir/trade8" HPCMEM_REPORT=off LD_PRELOAD="$lib" "$b/tests/trace/trade_app" 8 20000 outside > /dev/null
  if "$REPORT" --json="$dir/trade8.json" "$dir/trade8" > /dev/null 2> "$dir/trade8.err"; then
    mf=$(jq -r '.ranks[0].missing_frees' "$dir/trade8.json"); un=$(jq -r '.ranks[0].unmatched_frees' "$dir/trade8.json")
    le=$(jq -r '.ranks[0].live_at_end_bytes' "$dir/trade8.json")
    [ "$mf" = 0 ] && [ "$un" = 0 ] && [ "$le" -lt 131072 ] && ok traded_blocks_all_freed.eight_threads ||
      ko traded_blocks_all_freed.eight_threads "missing frees $mf, unmatched frees $un, live at end $le"
  else
    ko traded_blocks_all_freed.eight_threads "$(cat "$dir/trade8.err")"
  fi
fi

# a trace that misses a free (an address allocated again without one): the
# old block ends there, in the report and in the heaptrack export alike, and
# the report says so; its end marker counts an event the file does not hold
mkdir -p "$dir/lost"
if "$b/tests/trace/tie_job" "$dir/lost" lost-free && "$REPORT" --json="$dir/lost.json" "$dir/lost" > "$dir/lost.out" 2> "$dir/lost.err"; then
  lh=$(jq -r '.ranks[0].hwm_bytes' "$dir/lost.json"); ll=$(jq -r '.ranks[0].live_at_end_bytes' "$dir/lost.json")
  [ "$lh" = $((10 * MiB)) ] && [ "$ll" = $MiB ] && ok allocated_again_without_a_free || ko allocated_again_without_a_free "hwm $lh, live at end $ll"
  mf=$(jq -r '.ranks[0].missing_frees' "$dir/lost.json"); me=$(jq -r '.ranks[0].missing_events' "$dir/lost.json")
  if [ "$mf" = 1 ] && [ "$me" = 1 ] && grep -q '1 allocation of an address the trace held live' "$dir/lost.out" &&
     grep -q '1 event that the end marker counts is not in the file' "$dir/lost.out"; then
    ok says_a_free_and_an_event_are_missing
  else
    ko says_a_free_and_an_event_are_missing "missing_frees $mf, missing_events $me: $(grep '!' "$dir/lost.out" | tr '\n' ' ')"
  fi
  if command -v heaptrack_print >/dev/null 2>&1; then
    "$REPORT" --heaptrack=0 -o "$dir/lost.gz" "$dir/lost" > /dev/null 2>&1
    heaptrack_print -f "$dir/lost.gz" > "$dir/lost.txt" 2>&1
    # decimal megabytes: 10 MiB = 10.49M, 1 MiB = 1.05M
    grep -q 'peak heap memory consumption: 10.49M' "$dir/lost.txt" && grep -q 'total memory leaked: 1.05M' "$dir/lost.txt" &&
      ok heaptrack_export_allocated_again_without_a_free ||
      ko heaptrack_export_allocated_again_without_a_free "$(grep -e peak -e leaked "$dir/lost.txt" | tr '\n' ' ')"
  else
    echo "[  SKIPPED ] hpcmem_report.heaptrack_export_allocated_again_without_a_free (no heaptrack_print)"
  fi
else
  ko allocated_again_without_a_free "$(cat "$dir/lost.err")"
fi

# at the job peak every rank is at its own peak
bad=""
for r in 0 1 2 3; do
  v=$(q ".job.ranks_at_peak[] | select(.rank == $r) | .bytes")
  near "$v" $(((10 * r + 20) * MiB)) $MiB || bad="$bad rank$r=$v"
done
[ -z "$bad" ] && ok ranks_at_the_job_peak || ko ranks_at_the_job_peak "$bad"

bad=""
for r in 0 1 2 3; do
  mesh=$(q ".ranks[] | select(.rank == $r) | .functions_at_peak[] | select(.name == \"read_mesh\") | .bytes")
  wrap=$(q ".ranks[] | select(.rank == $r) | .functions_at_peak[] | select(.name == \"local_alloc\") | .bytes")
  [ "$mesh" = $((10 * (r + 1) * MiB)) ] || bad="$bad read_mesh@$r=$mesh"
  [ "$wrap" = $((10 * MiB)) ] || bad="$bad local_alloc@$r=$wrap"
done
[ -z "$bad" ] && ok functions_at_peak || ko functions_at_peak "$bad"

mn=$(q '.imbalance.min_rank'); mx=$(q '.imbalance.max_rank'); im=$(q '.imbalance.imbalanced')
[ "$mn" = 0 ] && [ "$mx" = 3 ] && [ "$im" = true ] && ok imbalance || ko imbalance "min $mn max $mx imbalanced $im"

leak=$(q '[.leaks.functions[] | select(.name == "leak") | .bytes] | add')
[ "$leak" = $((1000 * 1024)) ] && ok leaks_by_function || ko leaks_by_function "got $leak"
lst=$(q '.leaks.stacks[0] | "\(.ranks) \(.frames[.attribution].function)"')
[ "$lst" = "4 leak" ] && ok leaks_by_stack || ko leaks_by_stack "got $lst"

um=$(q '.ranks[] | select(.rank == 1) | .unmatched_frees')
[ "$um" -ge 1 ] 2>/dev/null && ok free_of_memory_from_before_the_trace || ko free_of_memory_from_before_the_trace "got $um"

hist=$(q '[.histogram[].count] | add')
allocs=$(q '[.ranks[] | .mallocs + .callocs + .memaligns + .reallocs] | add')
[ "$hist" = "$allocs" ] && ok histogram_counts_every_allocation || ko histogram_counts_every_allocation "$hist vs $allocs"

# --- wrapper collapse (WMTrace's drill-down past local_alloc) -------------------
"$REPORT" --collapse-wrappers --json="$dir/report.json" "$dir/trace" > /dev/null 2>&1
bad=""
for r in 0 3; do
  a=$(q ".ranks[] | select(.rank == $r) | .functions_at_peak[] | select(.name == \"assemble\") | .bytes")
  h=$(q ".ranks[] | select(.rank == $r) | .functions_at_peak[] | select(.name == \"build_halo\") | .bytes")
  l=$(q ".ranks[] | select(.rank == $r) | [.functions_at_peak[] | select(.name == \"local_alloc\")] | length")
  [ "$a" = $((6 * MiB)) ] && [ "$h" = $((4 * MiB)) ] && [ "$l" = 0 ] || bad="$bad rank$r: assemble=$a build_halo=$h local_alloc=$l"
done
[ -z "$bad" ] && ok collapse_wrappers || ko collapse_wrappers "$bad"
"$REPORT" --wrapper='local_*' --json="$dir/report.json" "$dir/trace" > /dev/null 2>&1
a=$(q '.ranks[] | select(.rank == 3) | .functions_at_peak[] | select(.name == "assemble") | .bytes')
[ "$a" = $((6 * MiB)) ] && ok wrapper_by_name || ko wrapper_by_name "assemble=$a"

# --- text ---------------------------------------------------------------------------
if grep -q '^High-water mark per rank' "$dir/report.txt" && grep -q '50.00 MiB' "$dir/report.txt" &&
   grep -q 'read_mesh (trace_workload.c' "$dir/report.txt" && grep -q '^Job: peak of the sum 140' "$dir/report.txt"; then
  ok text_report
else
  ko text_report "$(head -c 300 "$dir/report.txt")"
fi

# every table of the text report lines up (tests/trace/check_text_tables.py)
bad=$(python3 "$(dirname "$0")/check_text_tables.py" "$dir/report.txt")
[ -z "$bad" ] && ok text_tables_line_up || ko text_tables_line_up "$bad"

# --- processes that are no MPI ranks --------------------------------------------------
# two of them with rank -1 in their headers (the format's "no rank") on a host
# with a 54-character name (tests/trace/tie_job.c): no "-1" anywhere, each
# named by its pid, the host in full and the table still in line
mkdir -p "$dir/norank"
if "$b/tests/trace/tie_job" "$dir/norank" no-rank && "$REPORT" --svg="$dir/norank-svg" "$dir/norank" > "$dir/norank.txt" 2> "$dir/norank.err"; then
  if ! grep -qE '(^|[^0-9.])-1([^0-9.]|$)' "$dir/norank.txt" && grep -q '^  - (pid 4242) ' "$dir/norank.txt" &&
     grep -q '^Process 4343 at its peak' "$dir/norank.txt" && grep -q '(process 4242)' "$dir/norank.txt" &&
     grep -q '(no MPI ranks)' "$dir/norank.txt"; then ok no_rank.named_by_pid_in_the_text
  else ko no_rank.named_by_pid_in_the_text "$(grep -E -e '-1|pid|rank' "$dir/norank.txt" | head -5 | tr '\n' '|')"; fi
  bad=$(python3 "$(dirname "$0")/check_text_tables.py" "$dir/norank.txt")
  grep -q ' login-node-with-a-rather-long-name.cluster.example.org ' "$dir/norank.txt" || bad="$bad (host name cut)"
  [ -z "$bad" ] && ok no_rank.long_labels_and_host_keep_the_table_in_line || ko no_rank.long_labels_and_host_keep_the_table_in_line "$bad"
  bad=$(grep -l -e '>-1<' -e 'rank -1' "$dir"/norank-svg/*.svg)
  grep -q '>process 4343' "$dir/norank-svg/memory-over-time.svg" || bad="$bad (no process 4343 in the legend)"
  clip=$(python3 "$(dirname "$0")/check_svg_labels.py" "$dir/norank-svg") || bad="$bad (labels cut off: $clip)"
  [ -z "$bad" ] && ok no_rank.named_by_pid_in_the_plots || ko no_rank.named_by_pid_in_the_plots "$bad"
  # --heaptrack=0 takes a process without a rank, as its file name rank-0.hmt says
  if "$REPORT" --heaptrack=0 -o "$dir/norank.ht" "$dir/norank" > /dev/null 2> "$dir/norank.err" &&
     grep -q '^X .*(process 4[23]4[23] of job pid4[23]4[23],' "$dir/norank.ht"; then ok no_rank.heaptrack_export
  else ko no_rank.heaptrack_export "$(grep '^X' "$dir/norank.ht" 2>/dev/null) $(cat "$dir/norank.err")"; fi
else
  ko no_rank.named_by_pid_in_the_text "$(cat "$dir/norank.err")"
fi
# a real program without MPI (the handoff trace above): the recorder writes
# rank 0 there, but neither MPI nor a launcher gave it, and the report says so
if [ -d "$dir/handoff" ] && "$REPORT" "$dir/handoff" > "$dir/handoff.txt" 2>&1; then
  pid=$(jq -r '.ranks[0].pid' "$dir/handoff.json")
  if grep -q '^  -  ' "$dir/handoff.txt" && grep -q "^Process $pid at its peak" "$dir/handoff.txt" &&
     [ "$(jq -r '.ranks[0].is_rank' "$dir/handoff.json")" = false ]; then ok no_rank.program_without_mpi
  else ko no_rank.program_without_mpi "$(sed -n '/^High-water/,/^$/p' "$dir/handoff.txt" | tr '\n' '|') $(grep 'at its peak' "$dir/handoff.txt")"; fi
fi

# --- symbols through addr2line, progress bar ---------------------------------------
if command -v addr2line >/dev/null 2>&1; then
  "$REPORT" --symbols=addr2line --json="$dir/report.json" "$dir/trace" > /dev/null 2>&1
  m=$(q '.ranks[] | select(.rank == 2) | .functions_at_peak[] | select(.name == "read_mesh") | .bytes')
  s=$(q '.symbols')
  [ "$m" = $((30 * MiB)) ] && [ "$s" = addr2line ] && ok symbols_by_addr2line || ko symbols_by_addr2line "read_mesh=$m symbols=$s"
fi
"$REPORT" --symbols=none --json="$dir/report.json" "$dir/trace" > /dev/null 2>&1
hwm=$(q '.ranks[] | select(.rank == 3) | .hwm_bytes')
near "$hwm" $((50 * MiB)) $MiB && ok without_symbols || ko without_symbols "hwm $hwm"
# code without a name is listed by object and offset, never by an offset alone
# (which would merge the unnamed code of different objects into one row).
# "(no stack)" is no code: libhpcmem's own allocations made without one, as
# the writer thread's start when a slow rank reaches its peak 100 ms after
# the trace started (a loaded machine: 6 runs in 10 on one starved cpu)
names=$(q '[.ranks[].functions_at_peak[].name | select(. != "(no stack)")] | unique | join(" ")')
bad=$(for n in $names; do echo "$n" | grep -qE '^trace_workload\+0x[0-9a-f]+$' || echo "$n"; done)
[ -n "$names" ] && [ -z "$bad" ] && ok unnamed_code_by_object_and_offset || ko unnamed_code_by_object_and_offset "names: $names"
"$REPORT" --progress "$dir/trace" > /dev/null 2> "$dir/err.txt"
tr '\r' '\n' < "$dir/err.txt" | grep -q '^reading traces \[#*\] 100%' && ok progress_bar || ko progress_bar "$(head -c 200 "$dir/err.txt")"
# by default the bar comes for a large input on a terminal: 2.4 million events
# (map_churn 120000, well under a megabyte of trace), not for the workload's
# few hundred
lib=${HPCMEM_LIB:-$b/.libs/libhpcmem.so}
if command -v script >/dev/null 2>&1 && [ -r "$lib" ]; then
  HPCMEM_TRACE=1 HPCMEM_TRACE_DIR="$dir/churn" HPCMEM_REPORT=off LD_PRELOAD="$lib" "$b/tests/trace/map_churn" 120000 > /dev/null
  script -qc "'$REPORT' '$dir/churn' > /dev/null" /dev/null > "$dir/pty-large.txt" 2>&1
  script -qc "'$REPORT' '$dir/trace' > /dev/null" /dev/null > "$dir/pty-small.txt" 2>&1
  if grep -q 'reading traces' "$dir/pty-large.txt" && ! grep -q 'reading traces' "$dir/pty-small.txt"; then ok progress_bar_when_large
  else ko progress_bar_when_large "large: $(tr '\r' '\n' < "$dir/pty-large.txt" | tail -c 200); small: $(head -c 100 "$dir/pty-small.txt")"; fi
else
  echo "[  SKIPPED ] hpcmem_report.progress_bar_when_large (no script(1) or no $lib)"
fi
"$REPORT" "$dir/trace" > /dev/null 2> "$dir/err.txt"
[ ! -s "$dir/err.txt" ] && ok no_progress_bar_for_small_input || ko no_progress_bar_for_small_input "$(head -c 200 "$dir/err.txt")"

# --- plots ------------------------------------------------------------------------------
"$REPORT" --svg="$dir/svg" "$dir/trace" > /dev/null 2>&1
bad=""
for f in memory-over-time job-memory-over-time hwm-per-rank top-stacks; do
  s="$dir/svg/$f.svg"
  { head -1 "$s" | grep -q '^<?xml' && tail -1 "$s" | grep -q '^</svg>$'; } || bad="$bad $f"
done
grep -c '<polyline' "$dir/svg/memory-over-time.svg" | grep -qx 4 || bad="$bad (not 4 curves)"
grep -q 'read_mesh' "$dir/svg/top-stacks.svg" || bad="$bad (top-stacks without read_mesh)"
# every label ends inside the picture
clip=$(python3 "$(dirname "$0")/check_svg_labels.py" "$dir/svg")
[ -z "$clip" ] || bad="$bad (labels cut off: $clip)"
[ -z "$bad" ] && ok svg_plots || ko svg_plots "$bad"

# PNG copies, where rsvg-convert (Debian: librsvg2-bin) is installed: a PNG
# signature, an IHDR of the SVG's size, and a drawing (not one flat colour)
png_info() {  # FILE -> "WIDTH HEIGHT COLOURS" (COLOURS only with python3)
  python3 - "$1" <<'PY' 2>/dev/null || od -A n -t u1 -j 16 -N 8 "$1" | awk '{ print $1*16777216+$2*65536+$3*256+$4, $5*16777216+$6*65536+$7*256+$8, "?" }'
import struct, sys, zlib
d = open(sys.argv[1], "rb").read()
assert d[:8] == b"\x89PNG\r\n\x1a\n" and d[12:16] == b"IHDR"
w, h, depth, ctype = struct.unpack(">IIBB", d[16:26])
pos, idat = 8, b""
while pos < len(d):
    n, = struct.unpack(">I", d[pos:pos + 4]); kind = d[pos + 4:pos + 8]
    if kind == b"IDAT": idat += d[pos + 8:pos + 8 + n]
    pos += 12 + n
raw = zlib.decompress(idat)
bpp = {2: 3, 6: 4}.get(ctype, 1) * depth // 8
stride = w * bpp + 1
# filtered rows: the distinct byte values of the first pixel of each row and
# of the raw data are a rough count of colours, enough to tell a blank image
print(w, h, len(set(raw[i] for i in range(0, len(raw), 7))))
PY
}
if command -v rsvg-convert >/dev/null 2>&1; then
  bad=""
  for f in memory-over-time job-memory-over-time hwm-per-rank top-stacks; do
    p="$dir/svg/$f.png"
    if [ ! -s "$p" ]; then bad="$bad $f.png:missing"; continue; fi
    sig=$(od -A n -t x1 -N 8 "$p" | tr -d ' \n')
    [ "$sig" = 89504e470d0a1a0a ] || { bad="$bad $f.png:signature=$sig"; continue; }
    set -- $(png_info "$p")
    sw=$(sed -n '2s/.* width="\([0-9]*\)".*/\1/p' "$dir/svg/$f.svg")
    sh=$(sed -n '2s/.* height="\([0-9]*\)".*/\1/p' "$dir/svg/$f.svg")
    [ "$1" = "$sw" ] && [ "$2" = "$sh" ] || bad="$bad $f.png:${1}x$2/svg:${sw}x$sh"
    [ "$3" = "?" ] || [ "$3" -gt 8 ] || bad="$bad $f.png:blank"
    [ "$(wc -c < "$p")" -gt 2000 ] || bad="$bad $f.png:$(wc -c < "$p")bytes"
  done
  [ -z "$bad" ] && ok png_plots || ko png_plots "$bad"
else
  echo "[  SKIPPED ] hpcmem_report.png_plots (rsvg-convert is not installed: apt-get install librsvg2-bin)"
fi
# no converter on the PATH: SVGs only, quietly
PATH=/nonexistent "$REPORT" --svg="$dir/svg2" "$dir/trace" > /dev/null 2> "$dir/err.txt"; rc=$?
n_png=$(ls "$dir/svg2" | grep -c '\.png$'); n_svg=$(ls "$dir/svg2" | grep -c '\.svg$')
[ $rc = 0 ] && [ "$n_png" = 0 ] && [ "$n_svg" = 4 ] && [ ! -s "$dir/err.txt" ] && ok svg_without_a_png_converter ||
  ko svg_without_a_png_converter "exit $rc, $n_svg SVG, $n_png PNG: $(head -c 200 "$dir/err.txt")"

# --- heaptrack export -----------------------------------------------------------------
if "$REPORT" --heaptrack=3 -o "$dir/ht.gz" "$dir/trace" > /dev/null 2> "$dir/err.txt" && [ -s "$dir/ht.gz" ]; then
  if command -v heaptrack_print >/dev/null 2>&1; then
    heaptrack_print -f "$dir/ht.gz" > "$dir/ht.txt" 2>&1
    # heaptrack prints decimal megabytes: 50 MiB = 52.43M
    if grep -q 'peak heap memory consumption: 52.4' "$dir/ht.txt" && grep -q 'read_mesh' "$dir/ht.txt"; then
      ok heaptrack_print_reads_the_export
    else
      ko heaptrack_print_reads_the_export "$(grep -m3 -e peak -e error "$dir/ht.txt")"
    fi
  else
    echo "[  SKIPPED ] hpcmem_report.heaptrack_print_reads_the_export (no heaptrack_print)"
  fi
else
  ko heaptrack_export "$(cat "$dir/err.txt")"
fi

# --- damaged input ------------------------------------------------------------------------
cp -r "$dir/trace" "$dir/bad"
f=$dir/bad/rank-2.hmt
size=$(wc -c < "$f")
printf '\377' | dd of="$f" bs=1 seek=$((size - 40)) conv=notrunc 2>/dev/null
"$REPORT" "$dir/bad" > "$dir/out.txt" 2> "$dir/err.txt"; rc=$?
if [ $rc = 1 ] && grep -q "rank-2.hmt: offset [0-9]*: " "$dir/err.txt"; then ok corrupt_file_names_file_and_offset
else ko corrupt_file_names_file_and_offset "exit $rc: $(cat "$dir/err.txt")"; fi
"$REPORT" --salvage --json="$dir/report.json" "$dir/bad" > /dev/null 2>&1; rc=$?
n=$(q '.ranks | length')
[ $rc = 0 ] && [ "$n" = 4 ] && ok salvage_reads_around_the_damage || ko salvage_reads_around_the_damage "exit $rc, $n ranks"

cp "$dir/trace/rank-2.hmt" "$f"
head -c $((size - 10)) "$dir/trace/rank-2.hmt" > "$f"
"$REPORT" "$dir/bad" > "$dir/out.txt" 2> "$dir/err.txt"; rc=$?
if [ $rc = 0 ] && grep -q 'rank 2: .*ends inside a block at offset' "$dir/out.txt"; then ok truncated_file_is_reported
else ko truncated_file_is_reported "exit $rc: $(grep -m2 '!' "$dir/out.txt") $(cat "$dir/err.txt")"; fi

printf 'not a trace at all, just some text to look at\n' > "$f"
"$REPORT" "$dir/bad" > /dev/null 2> "$dir/err.txt"; rc=$?
if [ $rc = 1 ] && grep -q 'rank-2.hmt: offset .*: file header truncated\|rank-2.hmt: offset 0: not a libhpcmem trace file' "$dir/err.txt"; then
  ok not_a_trace_file
else ko not_a_trace_file "exit $rc: $(cat "$dir/err.txt")"; fi

mkdir "$dir/empty"
"$REPORT" "$dir/empty" > /dev/null 2> "$dir/err.txt"; rc=$?
[ $rc = 2 ] && grep -q 'no trace files' "$dir/err.txt" && ok empty_directory || ko empty_directory "exit $rc: $(cat "$dir/err.txt")"
"$REPORT" "$dir/nonexistent" > /dev/null 2> "$dir/err.txt"; rc=$?
[ $rc = 2 ] && grep -q 'nonexistent: No such file' "$dir/err.txt" && ok missing_directory || ko missing_directory "exit $rc"
"$REPORT" --top=x "$dir/trace" > /dev/null 2> "$dir/err.txt"; rc=$?
[ $rc = 2 ] && grep -q "top: 'x'" "$dir/err.txt" && ok bad_option || ko bad_option "exit $rc"
# usage errors say what is wrong, on stderr, exit 2, nothing on stdout
usage_case() {  # NAME EXPECTED-TEXT ARGS...
  name=$1 want=$2; shift 2
  "$REPORT" "$@" > "$dir/out.txt" 2> "$dir/err.txt"; rc=$?
  [ $rc = 2 ] && [ ! -s "$dir/out.txt" ] && grep -q "$want" "$dir/err.txt" && ok "usage.$name" ||
    ko "usage.$name" "exit $rc: $(head -c 200 "$dir/err.txt")"
}
usage_case no_input 'no trace directory or file given'
usage_case svg_without_its_directory 'no trace directory or file given' --svg "$dir/trace"
usage_case two_inputs 'one trace directory or file, not 2' "$dir/trace" "$dir/trace"
usage_case rank_not_in_the_job 'no trace of rank 9 in' --rank=9 "$dir/trace"
usage_case output_without_heaptrack 'names the file of --heaptrack' -o "$dir/x.gz" "$dir/trace"
usage_case heaptrack_rank_not_in_the_job 'heaptrack: no trace of rank 9' --heaptrack=9 "$dir/trace"
usage_case unknown_option 'unrecognized option' --bogus "$dir/trace"

# --- twelve ranks: in rank order, not in the order of their file names' text
# (rank-10.hmt sorts before rank-2.hmt)
if "$WORKLOAD" "$dir/trace12" 12 > /dev/null &&
   "$REPORT" --json="$dir/r12.json" "$dir/trace12" > /dev/null 2>&1 &&
   [ "$(jq -c '[.ranks[].rank]' "$dir/r12.json")" = "[0,1,2,3,4,5,6,7,8,9,10,11]" ]; then ok ranks_in_order
else ko ranks_in_order "$(jq -c '[.ranks[].rank]' "$dir/r12.json" 2>&1)"; fi

[ $fails = 0 ]
