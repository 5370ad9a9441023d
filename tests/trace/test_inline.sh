#!/bin/sh
# Symbols of inlined code (tools/hmt_symbols.c): tests/trace/inline_app,
# built with -O2, allocates 5 MiB through make_block, forced inline into
# make_pair, forced inline into build_table.  One return address, three
# calls: hpcmem-report must show make_block and make_pair marked inlined
# with their own lines, then build_table at the line that calls make_pair,
# and charge the memory to make_block (the innermost function that is not
# the allocator).  Needs libdw (the default symboliser) and jq.
b=${top_builddir:-.}
src=${top_srcdir:-..}/tests/trace/inline_app.c
lib=${LIBHPCMEM:-$b/.libs/libhpcmem.so}
REPORT=$b/tools/hpcmem-report
dir=$(mktemp -d /tmp/hpcmem-inline.XXXXXX)
trap 'rm -rf "$dir"' EXIT
fails=0
ok() { echo "[       OK ] inline_frames.$1"; }
ko() { echo "[  FAILED  ] inline_frames.$1 ($2)"; fails=$((fails + 1)); }
command -v jq >/dev/null 2>&1 || { echo "[  SKIPPED ] inline_frames.all (jq is not installed)"; exit 77; }
line() { grep -n "@$1 \*/" "$src" | cut -d: -f1; }

if ! env LD_PRELOAD="$lib" HPCMEM_REPORT=off HPCMEM_TRACE=1 HPCMEM_TRACE_DIR="$dir/trace" "$b/tests/trace/inline_app" \
     > "$dir/out" 2>&1; then
  echo "[  FAILED  ] inline_frames.run ($(head -c 300 "$dir/out"))"; exit 1
fi
"$REPORT" --json="$dir/r.json" "$dir/trace" > "$dir/r.txt" 2> "$dir/err"
if [ "$(jq -r .symbols "$dir/r.json")" != libdw ]; then
  echo "[  SKIPPED ] inline_frames.all (hpcmem-report built without libdw: addr2line shows no inlined frames)"; exit 77
fi
# the stack of the 5 MiB block, as calls from the attribution on
st=$(jq -c '[.. | objects | select(has("frames") and .bytes == 5242880)][0]' "$dir/r.json")
calls=$(echo "$st" | jq -r '.frames[.attribution:] | .[:4][] | "\(.function):\(.line // 0):\(.inlined // false)"' | tr '\n' ' ')
want="make_block:$(line make_block):true make_pair:$(line make_pair):true build_table:$(line build_table):false main:$(line main):false "
[ "$calls" = "$want" ] && ok calls_at_one_address || ko calls_at_one_address "got '$calls', want '$want'"

addrs=$(echo "$st" | jq -r '.frames[.attribution:] | .[:3] | map(.address) | unique | length')
[ "$addrs" = 1 ] && ok one_return_address || ko one_return_address "$addrs addresses for the three calls"

b5=$(jq -r '.ranks[0].functions_at_peak[] | select(.name == "make_block") | .bytes' "$dir/r.json")
[ "$b5" = 5242880 ] && ok charged_to_the_inlined_function || ko charged_to_the_inlined_function "make_block: '$b5'"

if grep -q "make_block (inline_app.c:$(line make_block)) \[inlined\]" "$dir/r.txt" &&
   grep -q "make_pair (inline_app.c:$(line make_pair)) \[inlined\]" "$dir/r.txt" &&
   grep -q "build_table (inline_app.c:$(line build_table))$" "$dir/r.txt"; then
  ok text_report
else
  ko text_report "$(grep -A5 'top stacks' "$dir/r.txt" | head -8 | tr '\n' '|')"
fi
[ $fails = 0 ]
