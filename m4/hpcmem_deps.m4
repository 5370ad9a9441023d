# One macro per dependency.  The mechanism (three states, error texts, summary)
# is HPCMEM_DEP in hpcmem_dep.m4; MPI, OpenMP and GoogleTest need their own probes.

AC_DEFUN([HPCMEM_CHECK_HWLOC], [HPCMEM_DEP([hwloc], [hwloc], [hwloc], [hwloc.h], [hwloc],
  [hwloc_topology_init], [required],
  [the segmented heaps and thread groups are laid out from the hwloc machine topology.], [libhwloc-dev])])

AC_DEFUN([HPCMEM_CHECK_NUMA], [HPCMEM_DEP([numa], [libnuma], [numa], [numa.h], [numa],
  [numa_available], [required],
  [the interleaved segment and memory placement bind pages with mbind through libnuma.], [libnuma-dev])])

AC_DEFUN([HPCMEM_CHECK_PAPI], [HPCMEM_DEP([papi], [PAPI], [papi], [papi.h], [papi],
  [PAPI_library_init], [auto], [], [libpapi-dev])])

AC_DEFUN([HPCMEM_CHECK_ZLIB], [HPCMEM_DEP([zlib], [zlib], [zlib], [zlib.h], [z],
  [deflate], [auto], [], [zlib1g-dev])])

AC_DEFUN([HPCMEM_CHECK_ZSTD], [HPCMEM_DEP([zstd], [zstd], [libzstd], [zstd.h], [zstd],
  [ZSTD_compress], [auto], [], [libzstd-dev])])

AC_DEFUN([HPCMEM_CHECK_LIBUNWIND], [HPCMEM_DEP([libunwind], [libunwind], [libunwind], [libunwind.h], [unwind],
  [unw_backtrace], [auto], [], [libunwind-dev])])

AC_DEFUN([HPCMEM_CHECK_LIBDW], [HPCMEM_DEP([libdw], [elfutils libdw], [libdw], [elfutils/libdwfl.h], [dw],
  [dwfl_begin], [auto], [], [libdw-dev])])

# --enable-debug: internal consistency checks after every heap operation.
AC_DEFUN([HPCMEM_CHECK_DEBUG], [
  AC_ARG_ENABLE([debug], [AS_HELP_STRING([--enable-debug],
    [build with internal consistency checks (tree invariants, list links, size sums)])],
    [], [enable_debug=no])
  AS_IF([test "x$enable_debug" = xyes],
    [AC_DEFINE([HPCMEM_DEBUG], [1], [Define to 1 for internal consistency checks.])])
  AM_CONDITIONAL([HPCMEM_DEBUG], [test "x$enable_debug" = xyes])
  hpcmem_summary="$hpcmem_summary
  debug        $enable_debug"
])

# libtool -version-info from VERSION (major.minor.patch).
AC_DEFUN([HPCMEM_LT_VERSION], [
  hpcmem_v=`cat $srcdir/VERSION`
  hpcmem_major=`echo $hpcmem_v | cut -d. -f1`; hpcmem_minor=`echo $hpcmem_v | cut -d. -f2`
  hpcmem_patch=`echo $hpcmem_v | cut -d. -f3`
  AC_SUBST([HPCMEM_LT_VERSION_INFO], ["$hpcmem_minor:$hpcmem_patch:$hpcmem_minor"])
  AC_DEFINE_UNQUOTED([HPCMEM_VERSION_MAJOR], [$hpcmem_major], [major version])
  AC_DEFINE_UNQUOTED([HPCMEM_VERSION_MINOR], [$hpcmem_minor], [minor version])
  AC_DEFINE_UNQUOTED([HPCMEM_VERSION_PATCH], [$hpcmem_patch], [patch version])
])

AC_DEFUN([HPCMEM_SUMMARY], [
  AS_ECHO([""])
  AS_ECHO(["libhpcmem $PACKAGE_VERSION configuration summary"])
  AS_ECHO(["  dependency   found"])
  AS_ECHO(["  ------------ -----$hpcmem_summary"])
  AS_ECHO(["  built: libhpcmem (shared $enable_shared, static $enable_static), MPI layer: $hpcmem_have_mpi, tests: $hpcmem_have_gtest, PAPI: $hpcmem_have_papi"])
  AS_ECHO([""])
])
