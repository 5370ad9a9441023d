#!/bin/sh
# A program preloaded with libhpcmem and HPCMEM_TRACE=1 that dies by a
# signal: it dies by the same signal, and its trace holds every allocation
# and says how it ended.  SIGKILL cannot be caught: the file still reads.
# A SIGTERM while a realloc's event is being recorded finds the block the
# realloc moved away from still allocated, as the trace says it is.
b=$(cd "${top_builddir:-.}" && pwd)
APP=$b/tests/trace/signal_app
REALLOC_APP=$b/tests/trace/realloc_signal_app
COUNT=$b/tests/trace/hmt_count
REPORT=$b/tools/hpcmem-report
LIB=${HPCMEM_LIB:-$b/.libs/libhpcmem.so}
fails=0
ok() { echo "[       OK ] trace_signal.$1"; }
ko() { echo "[  FAILED  ] trace_signal.$1 ($2)"; fails=$((fails + 1)); }
if ! command -v jq >/dev/null 2>&1; then echo "[  SKIPPED ] trace_signal.all (jq is not installed)"; exit 77; fi
dir=$(mktemp -d /tmp/hpcmem-trace-signal.XXXXXX)
trap 'rm -rf "$dir"' EXIT
ulimit -c 0

# a first run tells whether this libhpcmem records at all
HPCMEM_TRACE=1 HPCMEM_TRACE_DIR="$dir/probe" HPCMEM_REPORT=off LD_PRELOAD="$LIB" "$APP" EXIT
if ! ls "$dir"/probe/*.hmt > /dev/null 2>&1; then
  echo "[  SKIPPED ] trace_signal.all (libhpcmem wrote no trace: the allocator does not call the recorder's hooks)"
  exit 77
fi

for case in TERM:15 INT:2 SEGV:11 ABRT:6 EXIT:0 KILL:9; do
  how=${case%:*} sig=${case#*:}
  t=$dir/$how
  rm -f "$dir/r.json"
  # --default-signal: a shell's background job (make check &, nohup) starts
  # with SIGINT ignored, and the recorder leaves an ignored signal alone
  HPCMEM_TRACE=1 HPCMEM_TRACE_DIR="$t" HPCMEM_TRACE_BUFFER=64K HPCMEM_REPORT=off LD_PRELOAD="$LIB" \
    env --default-signal "$APP" "$how" 2> /dev/null
  rc=$?
  want=$((sig ? 128 + sig : 0))
  if [ $rc != $want ]; then ko "$how.dies_the_same_way" "exit $rc, expected $want"; continue; fi
  ok "$how.dies_the_same_way"
  "$REPORT" --json="$dir/r.json" "$t" > "$dir/r.txt" 2> "$dir/err.txt"
  live=$(jq -r '.ranks[0].live_at_end_bytes' "$dir/r.json")
  fill=$(jq -r '[.leaks.functions[] | select(.name == "fill") | .bytes] | add' "$dir/r.json")
  end=$(jq -r '.ranks[0].end' "$dir/r.json")
  case $how in
    KILL)
      # what was still buffered dies with the process; the blocks written before read
      ev=$(jq -r '.ranks[0].events' "$dir/r.json")
      [ "$end" = none ] && [ "$ev" -gt 50000 ] 2>/dev/null && ok KILL.written_blocks_read ||
        ko KILL.written_blocks_read "end $end events $ev $(cat "$dir/err.txt")" ;;
    EXIT)
      [ "$fill" = 1024000 ] && [ "$end" = exit ] && ok EXIT.every_allocation || ko EXIT.every_allocation "fill $fill end $end" ;;
    *)
      [ "$fill" = 1024000 ] && [ "$end" = "signal $sig" ] && ok "$how.every_allocation_and_the_signal" ||
        ko "$how.every_allocation_and_the_signal" "fill $fill end $end $(cat "$dir/err.txt")" ;;
  esac
done

# realloc_signal_app: SIGTERM while main records the event of a realloc that
# moved a 2 MiB block (it waits for the loader's lock in the stack capture).
# The trace ends with the block live; the program must not have given it
# back yet.  It had, when realloc recorded after releasing the old block:
# the trace then kept live a block the program had freed ("a free went
# missing": 2-5% of SIGTERMs to a Python program building strings with +=).
t=$dir/REALLOC
out=$(HPCMEM_TRACE=1 HPCMEM_TRACE_DIR="$t" HPCMEM_REPORT=off LD_PRELOAD="$LIB" \
  env --default-signal "$REALLOC_APP" 2> "$dir/err.txt")
rc=$?
if [ $rc = 4 ]; then
  echo "[  SKIPPED ] trace_signal.REALLOC.old_block_held_until_its_event (the stack capture did not wait for the loader's lock)"
elif [ $rc != 143 ] || [ "$out" != held ]; then
  ko REALLOC.old_block_held_until_its_event "exit $rc, printed '$out' $(cat "$dir/err.txt")"
else
  big=$("$COUNT" "$t"/*.hmt 2097152 2> /dev/null | awk '$1 == 2097152 {print $3 " " $5}')
  flushes=$("$COUNT" "$t"/*.hmt 2097152 2> /dev/null | sed -n 's/^flushes //p')
  [ "$big" = "1 0" ] && [ "$flushes" = "signal 15" ] && ok REALLOC.old_block_held_until_its_event ||
    ko REALLOC.old_block_held_until_its_event "2 MiB blocks: allocs/frees '$big', flushes '$flushes'"
fi
# two threads that fault at the same moment: one writes the buffers, the
# other's SIGSEGV must wait for it (it ended the process in the middle of
# the write: no end marker, and the blocks of the thread not yet written
# lost).  Large buffers hold every event until the signal, so the write
# takes a while.
t=$dir/TWO
HPCMEM_TRACE=1 HPCMEM_TRACE_DIR="$t" HPCMEM_TRACE_BUFFER=64M HPCMEM_REPORT=off LD_PRELOAD="$LIB" \
  env --default-signal "$APP" TWO 2> /dev/null
rc=$?
if [ $rc != 139 ]; then
  ko TWO.second_fault_waits_for_the_first_flush "exit $rc, expected 139"
elif "$REPORT" --json="$dir/two.json" "$t" > /dev/null 2> "$dir/err.txt"; then
  end=$(jq -r '.ranks[0].end' "$dir/two.json")
  fill=$(jq -r '[.leaks.functions[] | select(.name == "fill") | .bytes] | add' "$dir/two.json")
  twin=$(jq -r '[.leaks.functions[] | select(.name == "twin") | .bytes] | add' "$dir/two.json")
  [ "$end" = "signal 11" ] && [ "$fill" = 1024000 ] && [ "$twin" = 512000 ] && ok TWO.second_fault_waits_for_the_first_flush ||
    ko TWO.second_fault_waits_for_the_first_flush "end $end, fill $fill, twin $twin $(cat "$dir/err.txt")"
else
  ko TWO.second_fault_waits_for_the_first_flush "$(cat "$dir/err.txt")"
fi
[ $fails = 0 ]
