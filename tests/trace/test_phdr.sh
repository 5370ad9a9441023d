#!/bin/sh
# Allocations inside dl_iterate_phdr callbacks, traced and unwound with
# libunwind, while other threads allocate and load and unload a library
# (tests/trace/phdr_app.c): the program ends (it hung before: see
# phdr_app.c), and its trace reads.  libhpcmem exports dl_iterate_phdr.
b=$(cd "${top_builddir:-.}" && pwd)
APP=$b/tests/trace/phdr_app
REPORT=$b/tools/hpcmem-report
LIB=${LIBHPCMEM:-$b/.libs/libhpcmem.so}
fails=0
ok() { echo "[       OK ] phdr.$1"; }
ko() { echo "[  FAILED  ] phdr.$1 ($2)"; fails=$((fails + 1)); }
dir=$(mktemp -d /tmp/hpcmem-phdr.XXXXXX)
trap 'rm -rf "$dir"' EXIT
if ! command -v jq >/dev/null 2>&1; then echo "[  SKIPPED ] phdr.all (jq is not installed)"; exit 77; fi

nm -D --defined-only "$LIB" | awk '$3 == "dl_iterate_phdr" && $2 == "T" {found = 1} END {exit !found}' &&
  ok exported || ko exported "dl_iterate_phdr is not exported by $(basename "$LIB")"

# a library that is on every Debian system and that nothing here loads
lib=""
for l in libbz2.so.1.0 liblzma.so.5 libz.so.1; do
  for d in /lib/x86_64-linux-gnu /usr/lib/x86_64-linux-gnu /lib64 /usr/lib64 /lib /usr/lib; do
    [ -e "$d/$l" ] && { lib=$l; break 2; }
  done
done
[ -n "$lib" ] || lib=libm.so.6

unwind_ok=1
if ! HPCMEM_TRACE=1 HPCMEM_TRACE_UNWIND=libunwind HPCMEM_TRACE_DIR="$dir/probe" HPCMEM_REPORT=off LD_PRELOAD="$LIB" \
     "$APP" 0 "$lib" 2> "$dir/probe.err" > /dev/null || grep -qi "libunwind" "$dir/probe.err"; then
  unwind_ok=0
fi

# three runs with libunwind (each hung before, most within a second), one
# with backtrace(); the last trace must read to its end
last=""
for case in libunwind.1 libunwind.2 libunwind.3 backtrace.1; do
  how=${case%.*}
  [ $how = libunwind ] && [ $unwind_ok = 0 ] && continue
  t=$dir/$case
  out=$(HPCMEM_TRACE=1 HPCMEM_TRACE_UNWIND=$how HPCMEM_TRACE_DIR="$t" HPCMEM_TRACE_BUFFER=64K HPCMEM_REPORT=off \
        LD_PRELOAD="$LIB" timeout -k 10 60 "$APP" 2 "$lib" 2> "$dir/err.txt")
  rc=$?
  if [ $rc = 0 ] && [ "$out" = done ]; then ok "$case.ends"; last=$t
  else ko "$case.ends" "exit $rc (124 or 137: hung, killed after 60 s) $(head -c 300 "$dir/err.txt")"; fi
done
if [ -n "$last" ]; then
  if "$REPORT" --json="$last.json" "$last" > /dev/null 2> "$dir/rep.err" && [ "$(jq -r '.ranks[0].end' "$last.json")" = exit ]; then
    ok trace_reads_to_its_end
  else
    ko trace_reads_to_its_end "$(head -c 300 "$dir/rep.err")"
  fi
fi
[ $unwind_ok = 1 ] || echo "[  SKIPPED ] phdr.libunwind (libunwind is not installed)"
[ $fails = 0 ]
