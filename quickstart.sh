#!/bin/sh
# libhpcmem quick start (Debian 12, as root or with sudo):
#   ./quickstart.sh run    install the Debian packages, build, run miniFE on 4 ranks with the memory report
#   ./quickstart.sh test   install the Debian packages, build, run the whole test suite
#   ./quickstart.sh deps   only install the Debian packages
#   ./quickstart.sh build  only build (into ./build)
# Idempotent: packages already installed are not fetched again, and a second run
# reuses ./build (configure runs only when the build has no Makefile yet).
set -eu
cd "$(dirname "$0")"
top=$(pwd)
build=${HPCMEM_BUILD_DIR:-$top/build}
jobs=$(nproc 2>/dev/null || echo 2)

PACKAGES="build-essential autoconf automake libtool pkg-config make g++ gfortran
 libopenmpi-dev openmpi-bin libhwloc-dev hwloc libnuma-dev numactl libpapi-dev
 libgtest-dev zlib1g-dev libzstd-dev libunwind-dev libdw-dev elfutils
 libjemalloc2 libtcmalloc-minimal4 libmimalloc2.0 heaptrack python3 iproute2 procps jq gdb
 librsvg2-bin"

deps() {
  missing=""
  for p in $PACKAGES; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing="$missing $p"
  done
  [ -z "$missing" ] && return 0
  echo "quickstart: installing Debian packages:$missing"
  sudo=""; [ "$(id -u)" -ne 0 ] && sudo=sudo
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends $missing
}

build() {
  [ -x "$top/configure" ] || (cd "$top" && autoreconf -fi)
  mkdir -p "$build"
  [ -f "$build/Makefile" ] || (cd "$build" && "$top/configure" ${HPCMEM_CONFIGURE_FLAGS:-})
  make -C "$build" -j"$jobs"
}

# The allocator's own tests once more in a --enable-debug build, whose heaps check
# their invariants as they go and whose stress test checks after every operation.
# It lives under build/tests/ so that tests/summary.sh counts its results too.
debug_check() {
  dbg="$build/tests/debug-build"
  mkdir -p "$dbg"
  [ -f "$dbg/Makefile" ] || (cd "$dbg" && "$top/configure" -q --enable-debug --without-mpi --disable-static >/dev/null)
  progs="tests/stress/test_stress tests/integration/test_malloc tests/integration/test_threads tests/unit/test_tcache tests/unit/test_group"
  make -C "$dbg" -j"$jobs" $progs >/dev/null
  make -C "$dbg" check TESTS="$progs" check_PROGRAMS="$progs"
}

export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1

case "${1:-}" in
  deps) deps ;;
  build) deps; build ;;
  run)
    deps; build
    make -C "$build" -j"$jobs" demo
    ;;
  test)
    deps; build
    status=0
    make -C "$build" -j"$jobs" check || status=$?
    debug_check || status=$?
    "$top/tests/summary.sh" "$build" || status=1
    exit $status
    ;;
  *) sed -n '2,9p' "$0" | sed 's/^# \{0,1\}//'; exit 2 ;;
esac
