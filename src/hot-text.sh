#!/bin/sh
# Regenerates src/hot-text.ld: the functions of libhpcmem.so that a process
# runs when it does not trace (start-up, malloc/free and their slow paths,
# thread start and exit, the large tier), found by running programs under gdb
# with a one-shot breakpoint on every function of the library.  See
# docs/footprint.md (Code pages).
#   sh src/hot-text.sh BUILDDIR > src/hot-text.ld
#   sh src/hot-text.sh --outside BUILDDIR
#     runs the same programs with breakpoints only on the functions that lie
#     outside .text.hpcmem_hot and prints, one a line, those that ran: empty
#     when src/hot-text.ld is up to date (tests/footprint/test_hot_text.sh)
# BUILDDIR is a configured and built tree (benchmarks/alloc built: make builds
# them).  Needs gdb (Debian package gdb).
set -e
outside=no
if [ "$1" = --outside ]; then outside=yes; shift; fi
B=${1:?usage: hot-text.sh [--outside] BUILDDIR}
LIB=$B/.libs/libhpcmem.so
[ -f "$LIB" ] || { echo "no $LIB" >&2; exit 1; }
command -v gdb > /dev/null || { echo "hot-text.sh: no gdb" >&2; exit 1; }
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
# the processes run as a plain program would: no libhpcmem options (the tests
# set HPCMEM_REPORT=off, which a default process does not)
for v in $(env | sed -n 's/^\(HPCMEM_[A-Za-z0-9_]*\)=.*/\1/p'); do unset "$v"; done
# "address name" of each function the library defines (FUNC entries of its
# symbol table, 16 hex digits).  Not nm's t/T: the start's constant data
# lies in .text.hpcmem_hot too (src/util/startdata.h), and a breakpoint
# written into it would change what the programs do
funcs() {
  readelf -sW "$LIB" | awk '/^Symbol table/ {sym = index($0, "'"'.symtab'"'") > 0}
    sym && $4 == "FUNC" && $7 != "UND" {print $2, $8}'
}
if [ $outside = yes ]; then
  set -- $(readelf -SW "$LIB" | awk '$2 == ".text.hpcmem_hot" {print $4, $6}')
  [ $# = 2 ] || { echo "hot-text.sh: no .text.hpcmem_hot in $LIB" >&2; exit 1; }
  # compared as strings of 16 hex digits (POSIX awk has no hex)
  lo=$(printf %016x $((0x$1))); hi=$(printf %016x $((0x$1 + 0x$2)))
  # a name with one definition outside the section is watched (two static
  # functions may share a name); where a hit lay is asked at the stop
  funcs | awk -v lo=$lo -v hi=$hi '($1 "") < lo || ($1 "") >= hi {print $2}' |
    grep -v '^_init$\|^_fini$' | sort -u > "$T/funcs"
  # and _hpcmem_init, which every process runs: proof that gdb ran them at all
  echo _hpcmem_init >> "$T/funcs"
else
  funcs | awk '{print $2}' | grep -v '^_init$\|^_fini$' | sort -u > "$T/funcs"
fi
cat > "$T/start.c" <<'EOC'
#include <stdlib.h>
/* the entry points a plain C program calls (cat reallocs) */
int main(void) {
  void *volatile p = malloc(100), *volatile q = calloc(4, 100);
  p = realloc(p, 200);
  free(p);
  free(q);
  return 0;
}
EOC
${CC:-cc} -O2 "$T/start.c" -o "$T/start"
# each hit is written as "name section" (the section of the stop's pc)
RUN=0
run() {
  RUN=$((RUN + 1))
  gdb -q -batch -ex "set env LD_PRELOAD=$LIB" -ex 'set breakpoint pending on' -ex 'set confirm off' \
      -ex 'set startup-with-shell off' \
      -ex 'break _dl_debug_state' -ex run -ex delete -ex "python
import gdb
hits = set()
# A breakpoint by name stops in every object that has the name: the C
# library's _exit, which exit() calls, or the loader's own calloc are not
# libhpcmem's.  Such a stop only turns its location off; the first stop in
# libhpcmem is the hit, and turns the breakpoint off.
def location_off(ev, pc):
  for b in ev.breakpoints:
    for l in getattr(b, 'locations', []):
      if l.address == pc: l.enabled = False
def stop(ev):
  if isinstance(ev, gdb.BreakpointEvent):
    pc = int(gdb.parse_and_eval('\$pc'))
    if 'libhpcmem' not in (gdb.solib_name(pc) or ''):
      location_off(ev, pc)
      return
    try: sec = gdb.execute('info symbol \$pc', to_string=True).split(' in section ')[1].split()[0]
    except Exception: sec = '?'
    # --outside watches the copies outside the section: a stop inside it (a
    # copy of the name there, or a place the function was inlined into)
    # turns only that location off, or it would hide a later outside run
    if '$outside' == 'yes' and sec == '.text.hpcmem_hot' and ev.breakpoints[0].location != '_hpcmem_init':
      location_off(ev, pc)
      return
    for b in ev.breakpoints:
      hits.add(b.location + ' ' + sec)
      b.enabled = False
gdb.events.stop.connect(stop)
for f in open('$T/funcs').read().split():
  try: gdb.Breakpoint(f)
  except Exception: pass
while True:
  try: gdb.execute('continue', to_string=True)
  except Exception: break
open('$T/hits.$RUN', 'w').write(''.join(h + chr(10) for h in sorted(hits)))
" --args "$@" > /dev/null 2>&1
}
A=$B/benchmarks/alloc
run "$T/start"
run "$A/alloc_churn" --min 8 --max 1024 --live 10000 --ops 1M
run "$A/alloc_sizes" --mode notouch --rounds 4 --min 4 --max 64M --factor 4
run "$A/alloc_sizes" --mode touch --rounds 4 --min 4 --max 64M --factor 4
run "$A/alloc_threads" --mode xfree --threads 2 --ops 400k --trials 1
run "$A/alloc_threads" --mode local --threads 2 --ops 400k --trials 1
if [ $outside = yes ]; then
  for i in $(seq $RUN); do
    grep -q '^_hpcmem_init ' "$T/hits.$i" 2>/dev/null || { echo "hot-text.sh: gdb did not run program $i into libhpcmem" >&2; exit 1; }
  done
  cat "$T"/hits.* | awk '$2 != ".text.hpcmem_hot" {print $1}' | sort -u
  exit 0
fi
echo "/* Generated by src/hot-text.sh: the functions a process that does not trace"
echo " * runs, kept together right after the PLT (docs/footprint.md, Code pages)."
echo " * Compiled with -ffunction-sections; a function missing here still works,"
echo " * it only costs its 64 KiB fault-around window of the text"
echo " * (tests/footprint/test_hot_text.sh names it).  A function's .cold part"
echo " * (.text.unlikely), constructor (.text.startup) or exit handler"
echo " * (.text.exit) section comes along with it. */"
echo "SECTIONS {"
echo "  .text.hpcmem_hot : {"
# the pieces of crtbeginS.o, libc_nonshared.a and libgcc.a are in their .text,
# not in a section of their own: whole, first (every process runs them)
echo "    /* crtbeginS's frame_dummy and tm_clones helpers, libc_nonshared's"
echo "       pthread_atfork and libgcc's helpers run at start too */"
echo "    *crtbeginS.o(.text .text.*)"
echo "    /* _fini (ld.so calls it at exit) would be alone at the far end of the code */"
echo "    KEEP (*(SORT_NONE(.fini)))"
echo "    *libc_nonshared.a:*(.text .text.*)"
echo "    *libgcc.a:*(.text .text.*)"
# the two fast paths first and side by side: every malloc and free runs them,
# and placed where the first-hit order put them (4.5 KiB apart, on two pages,
# at offsets in their cache lines that varied from build to build) the size
# sweep's small rows were 0.3 - 1 ns a round slower than with the two
# starting on adjacent cache lines (docs/footprint.md, Code pages)
echo "    /* malloc's and free's hits, side by side (each 64-byte aligned) */"
echo "    *(.text.malloc)"
echo "    *(.text.free)"
echo "    *(.text.unlikely.malloc .text.unlikely.free)"
# order: the functions more of the programs ran first (then by which ones ran
# them, then by name), so that what every process runs, and then most of
# what each benchmark runs, lies in the section's first 64 KiB window
for i in $(seq $RUN); do awk -v i=$i '{print $1, i}' "$T/hits.$i"; done |
  awk -v n=$RUN '!(($1, $2) in ran) { ran[$1, $2] = 1; c[$1]++ }
    END { for (f in c) { p = ""; for (i = 1; i <= n; i++) p = p (((f, i) in ran) ? i : "."); print c[f], p, f } }' |
  LC_ALL=C sort -k1,1nr -k2,2 -k3,3 | awk '{print $3}' |
  grep -v '^malloc$\|^free$' |
  grep -v '^__cpu_indicator_init$\|^__popcountdi2$\|^__do_global_dtors_aux$\|^pthread_atfork$\|^__pthread_atfork$\|^set_cpu_feature\|^get_available_features\|^has_cpu_feature\|^frame_dummy$\|^register_tm_clones$\|^deregister_tm_clones$' |
  sed 's/.*/    *(.text.& .text.unlikely.& .text.startup.& .text.exit.&)/'
echo "    /* the constant data the start reads (src/util/startdata.h): here, in"
echo "       the window every process maps anyway, .rodata stays unmapped */"
echo "    *(.rodata.hpcmem_start)"
echo "  }"
echo "} INSERT BEFORE .text;"
echo "/* The unwind tables at the end of the code, after what runs, instead of"
echo " * beside .rodata: the start reads .rodata, and its fault-around window"
echo " * mapped the 31 KiB of unwind tables with it (docs/footprint.md).  The"
echo " * unwinders find them through PT_GNU_EH_FRAME wherever they are. */"
echo "SECTIONS {"
echo "  .eh_frame_hdr : { *(.eh_frame_hdr) }"
echo "  .eh_frame : ONLY_IF_RO { KEEP (*(.eh_frame)) *(.eh_frame.*) }"
echo "} INSERT AFTER .fini;"
cat <<'EOS'
/* The variables every process touches at start, so that the parts it
 * touches share pages (on a kernel without a shared zero page, as this
 * project's test machine, a read of untouched .bss costs a page as a write
 * does).  The section follows .bss, whose tail is the small variables
 * (--sort-section=alignment puts them last); there:
 *   - the node cpu sets, whose first rows (the nodes there are) follow
 *     .bss's small variables on their page;
 *   - on a page of their own: the size classes' geometry, the options'
 *     values, the hwloc table (read at start to see that hwloc is not
 *     open), where the segments lie (read by realloc and by a free outside
 *     the heaps), then the topology (its first 742 bytes);
 *   - the heaps: their header and the heaps there are (2.6 KiB for 2, a
 *     page for 3);
 *   - on a page of their own: the large tier's state (3.9 KiB) and the
 *     statistics timeline's first samples: the first publish (64 KiB of
 *     drift, e.g. the first large block) writes them, and on a page of
 *     their own that cost a page fault inside the first 128 KiB malloc
 *     (+20 ns a round in the untouched size sweep); then the cpu rows (the
 *     cpus there are) on the timeline's last page.
 * 5 touched pages of .bss in a plain process (6 when .bss's small
 * variables cross a page boundary) instead of 9 (found by making .bss
 * inaccessible under gdb and noting each first fault; docs/footprint.md).
 * tests/footprint/test_hot_text.sh (hot_text.bss_pages) counts them.  A
 * variable renamed here falls back to the default place and only costs its
 * pages.  The options' strings are written only for values set in the
 * environment.  The topology's tables (node cpu sets, hwloc table,
 * topology, cpu rows) are touched when the topology is read: at start only
 * where the start needs it (api/alloc.c, hpcmem_constructor), else with a
 * second thread's first malloc or never. */
SECTIONS {
  .bss.hpcmem_start (NOLOAD) : {
    *topo.o(.bss.node_cpus)
    . = ALIGN(4096);
    *(.bss._hpcmem_class_geom)
    *(.bss._hpcmem_opt_values)
    *(.bss._hpcmem_opt_text)
    *topo.o(.bss.H)
    *(.bss._hpcmem_seg_range)
    *topo.o(.bss.T)
    . = ALIGN(4096);
    *(.bss._hpcmem_heaps)
    . = ALIGN(4096);
    *(.bss._hpcmem_large)
    *stats.o(.bss.timeline)
    *topo.o(.bss.C)
  }
} INSERT AFTER .bss;
/* The loader's alignment.  ld.so reserves the library's span plus its largest
 * segment alignment, aligns the start, and gives the rest of the reservation
 * back: a gap below the library and one above, together one alignment.  The
 * C library is mapped next, right under the lowest mapping; but first the
 * loader maps its cache file (/etc/ld.so.cache, ~48 KiB) to find libc, and
 * with 64 KiB alignment that fitted the gap above only 5 times in 16 (with
 * LD_PRELOAD and with -lhpcmem alike); otherwise it sat between libhpcmem and
 * libc and moved libc down by its size.  Where libc lies
 * against the 64 KiB fault-around windows decides how many of its code pages
 * a process maps: 1.40 - 1.55 MiB of Debian 12's libc in the small benchmark
 * programs, 215 KiB apart (docs/footprint.md, session 10).  This empty segment
 * aligned to 1 MiB makes the gap above hold the cache unless libhpcmem starts
 * in the last 12 pages of a megabyte (measured: 38 starts in 40; 1 MiB is less
 * than libc, which therefore never fits there), so libc ends where libhpcmem
 * starts.  It costs address space only. */
SECTIONS {
  .hpcmem_load_align (NOLOAD) : ALIGN(0x100000) { . += 1; }
} INSERT AFTER .bss.hpcmem_start;
EOS
