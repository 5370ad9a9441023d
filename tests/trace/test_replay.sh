#!/bin/sh
# hpcmem-replay: a known trace replays under the system allocator and
# libhpcmem (and whichever of jemalloc, tcmalloc, mimalloc are installed),
# with the operation counts of the trace; with --touch the memory added is
# the trace's peak; bad input is refused with a clear message.
b=${top_builddir:-.}
s=${top_srcdir:-..}
REPLAY=$b/tools/hpcmem-replay
dir=$(mktemp -d /tmp/hpcmem-replay-test.XXXXXX)
trap 'rm -rf "$dir"' EXIT
fails=0
ok() { echo "[       OK ] hpcmem_replay.$1"; }
ko() { echo "[  FAILED  ] hpcmem_replay.$1 ($2)"; fails=$((fails + 1)); }

"$b/tests/trace/trace_workload" "$dir/trace" 4 || { echo "[  FAILED  ] hpcmem_replay.workload (did not run)"; exit 1; }
export HPCMEM_LIB="${HPCMEM_LIB:-$b/.libs/libhpcmem.so}"

# rank 3 of the workload: 8 malloc, 10 calloc, 1 aligned, 18 frees (the free
# of memory from before the trace is not replayed), 50 MiB at the peak
if "$REPLAY" -n 1 --touch -A system -A libhpcmem -r 3 "$dir/trace" > "$dir/out" 2> "$dir/err"; then ok runs
else ko runs "exit $?: $(cat "$dir/err") $(cat "$dir/out")"; fi
grep -q ': 37 operations (8 malloc, 10 calloc, 0 realloc, 1 aligned, 18 free), peak live 50.00 MiB' "$dir/out" &&
  ok operation_counts || ko operation_counts "$(head -1 "$dir/out")"
bad=""
for a in system libhpcmem; do
  line=$(grep "^  $a " "$dir/out")
  # RSS added: at least the 50 MiB the replay touched, and not twice that
  mib=$(echo "$line" | awk '{print int($4)}')
  [ -n "$mib" ] && [ "$mib" -ge 49 ] && [ "$mib" -lt 100 ] || bad="$bad $a: $line"
done
[ -z "$bad" ] && ok touched_memory_is_the_peak || ko touched_memory_is_the_peak "$bad"

# every allocator found replays a recorded trace with realloc and memalign
"$REPLAY" -n 1 "$s/tests/trace/corpus/ok-recorded-zstd.hmt" > "$dir/out" 2> "$dir/err"; rc=$?
n=$(grep -c '^  [a-z]' "$dir/out")
if [ $rc = 0 ] && [ "$n" -ge 3 ] && ! grep -q 'failed' "$dir/out"; then ok all_allocators_replay
else ko all_allocators_replay "exit $rc: $(cat "$dir/out" "$dir/err")"; fi

"$REPLAY" "$s/tests/trace/corpus/err-payload-checksum.hmt" > /dev/null 2> "$dir/err"; rc=$?
[ $rc = 2 ] && grep -q 'err-payload-checksum.hmt: offset [0-9]*: block payload checksum mismatch' "$dir/err" &&
  ok damaged_trace_is_refused || ko damaged_trace_is_refused "exit $rc: $(cat "$dir/err")"
"$REPLAY" -A nosuch "$dir/trace/rank-0.hmt" > /dev/null 2> "$dir/err"; rc=$?
[ $rc = 2 ] && grep -q 'nosuch: not found' "$dir/err" && ok unknown_allocator || ko unknown_allocator "exit $rc: $(cat "$dir/err")"
[ $fails = 0 ]
