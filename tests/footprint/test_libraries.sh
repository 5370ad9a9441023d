#!/bin/sh
# libhpcmem's fixed cost at start (docs/footprint.md): a program without MPI
# must not get the MPI library, hwloc (with libudev and libm behind it),
# hwloc's plugins (PCI, OpenCL, GL with libX11 and libxcb, libxml2), the
# trace libraries or libnuma mapped by libhpcmem, neither under LD_PRELOAD nor linked with
# -lhpcmem.  The MPI layer reaches MPI through weak references; hwloc is not
# opened at all unless something needs more than sysfs tells (and closed
# again after reading); both are checked in the library's symbol table too.
# An MPI program still gets its report: tests/mpi/test_report.sh,
# test_preload.sh and test_fortran.sh.
bare=$top_builddir/tests/footprint/loaded_libs_bare
linked=$top_builddir/tests/footprint/loaded_libs
lib=$LIBHPCMEM
fails=0
ok() { echo "[       OK ] footprint.$1"; }
fail() { echo "[  FAILED  ] footprint.$1 ($2)"; fails=$((fails + 1)); }

# what must not be there: MPI, hwloc and everything they bring
# (and the trace libraries, loaded when tracing starts, and libnuma: the
# NUMA system calls are made directly, src/prim)
words="libmpi libopen-pal libopen-rte libopen-orted libpmix libevent libhwloc hwloc_ libudev libm.so libpciaccess libOpenCL libX11 libxcb libxml2 libicu libzstd libunwind liblzma libz.so libnuma libgcc_s"

# $1: case name; the rest: the command
check_libs() {
  name=$1; shift
  out=$("$@" $words 2>&1)
  rc=$?
  found=$(echo "$out" | grep '^/' | tr '\n' ' ')
  if [ $rc != 0 ]; then fail "$name" "exit $rc: $out"
  elif ! echo "$out" | grep -q '^libhpcmem: yes'; then fail "$name" "libhpcmem is not mapped: $out"
  elif [ -n "$found" ]; then fail "$name" "mapped after the first malloc: $found"
  else ok "$name"; fi
}

check_libs preload_no_mpi_no_hwloc env LD_PRELOAD="$lib" "$bare"
check_libs linked_no_mpi_no_hwloc "$linked"

# the same with the thread groups and NUMA tables filled from a saved machine
check_libs preload_saved_topology env LD_PRELOAD="$lib" HPCMEM_TOPOLOGY="$top_srcdir/tests/data/2socket-4numa.xml" "$bare"

# hwloc must not even be opened for a while at start: the thread groups come
# from sysfs (src/topo/sysfs.c), so a plain program never maps it, and the
# peak RSS does not see it.  The dynamic loader's own log (LD_DEBUG=files)
# names every object it opens, dlopen'd ones included.  Asking for the
# topology summary (HPCMEM_VERBOSE) or a saved topology must open it: that
# is the lazy path working, and shows the check can see hwloc.
# $1: case name, $2: 1 if hwloc must be opened; the rest: the command
check_opened() {
  name=$1; want=$2; shift 2
  log=$(env LD_DEBUG=files "$@" 2>&1 >/dev/null)
  if ! echo "$log" | grep -q 'file=libc\.so'; then
    echo "[  SKIPPED ] footprint.$name (the dynamic loader has no LD_DEBUG=files log)"
    return
  fi
  opened=$(echo "$log" | grep -c 'file=[^ ]*libhwloc')
  if [ "$want" = 1 ] && [ "$opened" = 0 ]; then fail "$name" "hwloc was not opened"
  elif [ "$want" = 0 ] && [ "$opened" != 0 ]; then
    fail "$name" "hwloc was opened at start: $(echo "$log" | grep 'file=[^ ]*libhwloc' | head -1)"
  else ok "$name"; fi
}

check_opened preload_never_opens_hwloc 0 env LD_PRELOAD="$lib" "$bare"
check_opened linked_never_opens_hwloc 0 "$linked"
check_opened verbose_opens_hwloc 1 env LD_PRELOAD="$lib" HPCMEM_VERBOSE=1 "$bare"
check_opened saved_topology_opens_hwloc 1 env LD_PRELOAD="$lib" HPCMEM_TOPOLOGY="$top_srcdir/tests/data/2socket-4numa.xml" "$bare"

# the library itself: no DT_NEEDED on MPI or hwloc, no strong reference to them
needed=$(readelf -d "$lib" 2>/dev/null | sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p' | grep -E 'mpi|open-(pal|rte)|hwloc|udev|numa|^libm\.' | tr '\n' ' ')
if ! readelf -d "$lib" > /dev/null 2>&1; then echo "[  SKIPPED ] footprint.needed (no readelf)"
elif [ -z "$needed" ]; then ok needed
else fail needed "libhpcmem.so needs $needed"; fi

strong=$(nm -D "$lib" 2>/dev/null | awk '$1 == "U" && $2 ~ /^(P?MPI_|ompi_|OMPI_|mpi_|pmpi_|hwloc_)/ { print $2 }' | tr '\n' ' ')
if ! nm -D "$lib" > /dev/null 2>&1; then echo "[  SKIPPED ] footprint.no_strong_mpi_hwloc_references (no nm)"
elif [ -z "$strong" ]; then ok no_strong_mpi_hwloc_references
else fail no_strong_mpi_hwloc_references "strong undefined: $strong (list them in mpi/weak.h, or call hwloc through src/topo/topo.c's table)"; fi

exit $fails
