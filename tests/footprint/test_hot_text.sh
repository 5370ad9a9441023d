#!/bin/sh
# The functions a process that does not trace runs lie together right after
# the PLT (src/hot-text.ld, docs/footprint.md): fails when the linker script
# stops applying (-ffunction-sections lost, the section renamed), when the
# allocator's entry points and start-up fall out of it, when it (with .init
# and the PLT) no longer fits the first 64 KiB window of the code, and (with
# gdb) when the list is stale:
# the programs src/hot-text.sh runs to make the list are run again with a
# breakpoint on every function outside the section, and every function that
# ran there is named.
lib=$LIBHPCMEM
fails=0
ok() { echo "[       OK ] hot_text.$1"; }
fail() { echo "[  FAILED  ] hot_text.$1 ($2)"; fails=$((fails + 1)); }

sec=$(readelf -SW "$lib" | awk '$2 == ".text.hpcmem_hot" {print $4, $6}')
if [ -z "$sec" ]; then
  fail section "no .text.hpcmem_hot in $lib"
  exit 1
fi
set -- $sec
start=$((0x$1)); size=$((0x$2))
if [ $size -le 98304 ]; then ok size; else fail size "$size bytes: more than 96 KiB, more windows than it saves"; fi
# the text segment starts a 64 KiB window (-z max-page-size=0x10000, ld.so
# honours p_align): .init, the PLT and the section must end inside it, or
# every process maps a second window of code
tseg=$(readelf -lW "$lib" | awk '$1 == "LOAD" && $8 == "E" {print $3, $9; exit}')
set -- $tseg
if [ "$2" != 0x10000 ]; then
  fail window "text segment aligned to $2, not 64 KiB"
elif [ $((start + size)) -le $(($1 + 65536)) ]; then
  ok window
else
  fail window "PLT and hot code end $((start + size - $1 - 65536)) bytes past the first 64 KiB window of the code: move functions that only some programs run out, or make room"
fi
for f in malloc free calloc realloc _hpcmem_init _hpcmem_heaps_init pthread_atfork; do
  a=$(nm "$lib" | awk -v f="$f" '$3 == f && $2 ~ /[tT]/ {print $1; exit}')
  if [ -z "$a" ]; then fail "$f" "not in the symbol table"; continue; fi
  a=$((0x$a))
  if [ $a -ge $start ] && [ $a -lt $((start + size)) ]; then ok "$f"; else fail "$f" "at $a, outside $start + $size"; fi
done

# stale list: what ran outside the section (about 10 s; gdb is in
# quickstart.sh's package list)
if ! command -v gdb > /dev/null; then
  echo "[  SKIPPED ] hot_text.ran_outside (no gdb)"
elif ! out=$(sh "$top_srcdir/src/hot-text.sh" --outside "$top_builddir" 2>&1); then
  fail ran_outside "src/hot-text.sh --outside failed: $out"
elif [ -n "$out" ]; then
  fail ran_outside "ran outside .text.hpcmem_hot: $(echo $out) -- regenerate: sh src/hot-text.sh BUILDDIR > src/hot-text.ld"
else
  ok ran_outside
fi
[ $fails = 0 ]
