#!/bin/sh
# libhpcmem's fixed cost at start (docs/footprint.md): a program without MPI
# must not get the MPI library, hwloc (with libudev and libm behind it) or
# hwloc's plugins (PCI, OpenCL, GL with libX11 and libxcb, libxml2) mapped
# by libhpcmem, neither under LD_PRELOAD nor linked with -lhpcmem.  The MPI
# layer reaches MPI through weak references and hwloc is opened only while
# the topology is read; both are checked in the library's symbol table too.
# An MPI program still gets its report: tests/mpi/test_report.sh,
# test_preload.sh and test_fortran.sh.
bare=$top_builddir/tests/footprint/loaded_libs_bare
linked=$top_builddir/tests/footprint/loaded_libs
lib=$LIBHPCMEM
fails=0
ok() { echo "[       OK ] footprint.$1"; }
fail() { echo "[  FAILED  ] footprint.$1 ($2)"; fails=$((fails + 1)); }

# what must not be there: MPI, hwloc and everything they bring
words="libmpi libopen-pal libopen-rte libopen-orted libpmix libevent libhwloc hwloc_ libudev libm.so libpciaccess libOpenCL libX11 libxcb libxml2 libicu libzstd libunwind liblzma libz.so"

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

# the library itself: no DT_NEEDED on MPI or hwloc, no strong reference to them
needed=$(readelf -d "$lib" 2>/dev/null | sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p' | grep -E 'mpi|open-(pal|rte)|hwloc|udev|^libm\.' | tr '\n' ' ')
if ! readelf -d "$lib" > /dev/null 2>&1; then echo "[  SKIPPED ] footprint.needed (no readelf)"
elif [ -z "$needed" ]; then ok needed
else fail needed "libhpcmem.so needs $needed"; fi

strong=$(nm -D "$lib" 2>/dev/null | awk '$1 == "U" && $2 ~ /^(P?MPI_|ompi_|OMPI_|mpi_|pmpi_|hwloc_)/ { print $2 }' | tr '\n' ' ')
if ! nm -D "$lib" > /dev/null 2>&1; then echo "[  SKIPPED ] footprint.no_strong_mpi_hwloc_references (no nm)"
elif [ -z "$strong" ]; then ok no_strong_mpi_hwloc_references
else fail no_strong_mpi_hwloc_references "strong undefined: $strong (list them in mpi/weak.h, or call hwloc through src/topo/topo.c's table)"; fi

exit $fails
