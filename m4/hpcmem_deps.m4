# One macro per dependency.  The mechanism (three states, error texts, summary)
# is HPCMEM_DEP in hpcmem_dep.m4; MPI, OpenMP and GoogleTest need their own probes.

AC_DEFUN([HPCMEM_CHECK_HWLOC], [HPCMEM_DEP([hwloc], [hwloc], [hwloc], [hwloc.h], [hwloc],
  [hwloc_topology_init], [required],
  [the segmented heaps and thread groups are laid out from the hwloc machine topology.], [libhwloc-dev])
  AS_IF([test $hpcmem_have_hwloc = yes], [HPCMEM_FIND_HWLOC_LIBRARY])])

# HPCMEM_FIND_HWLOC_LIBRARY: libhpcmem opens hwloc with dlopen only while it reads
# the topology (src/topo/topo.c), so that hwloc, libudev and libm are not
# resident in every program.  The file it opens is the one a program linked
# with HWLOC_LIBS needs (its DT_NEEDED soname), and the directory of a -L in
# HWLOC_LIBS is tried when the loader's search path does not have it.
AC_DEFUN([HPCMEM_FIND_HWLOC_LIBRARY], [
  AC_REQUIRE([AC_PROG_AWK])
  AC_MSG_CHECKING([which hwloc library to open at run time])
  hpcmem_hwloc_save_LIBS=$LIBS; hpcmem_hwloc_save_CPPFLAGS=$CPPFLAGS
  LIBS="$HWLOC_LIBS $LIBS"; CPPFLAGS="$CPPFLAGS $HWLOC_CFLAGS"
  hpcmem_hwloc_soname=
  AC_LINK_IFELSE([AC_LANG_CALL([], [hwloc_topology_init])], [
    hpcmem_hwloc_soname=`${OBJDUMP:-objdump} -p conftest$EXEEXT 2>/dev/null | $AWK '$[]1 == "NEEDED" && $[]2 ~ /hwloc/ { print $[]2; exit }'`])
  LIBS=$hpcmem_hwloc_save_LIBS; CPPFLAGS=$hpcmem_hwloc_save_CPPFLAGS
  AS_IF([test -z "$hpcmem_hwloc_soname"], [hpcmem_hwloc_soname=libhwloc.so])
  hpcmem_hwloc_libdir=`echo " $HWLOC_LIBS" | tr ' ' '\n' | sed -n 's/^-L//p' | head -n 1`
  AC_MSG_RESULT([$hpcmem_hwloc_soname${hpcmem_hwloc_libdir:+ (or in $hpcmem_hwloc_libdir)}])
  AC_DEFINE_UNQUOTED([HPCMEM_HWLOC_LIBRARY], ["$hpcmem_hwloc_soname"], [The hwloc library libhpcmem opens with dlopen.])
  AC_DEFINE_UNQUOTED([HPCMEM_HWLOC_LIBDIR], ["$hpcmem_hwloc_libdir"], [Where to look for it when the loader does not find it ("" for nowhere else).])
])

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
