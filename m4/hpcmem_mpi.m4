# HPCMEM_CHECK_MPI: Open MPI (or another MPI) through its compiler wrapper.
# The allocator itself is compiled with the ordinary C compiler; the MPI layer
# gets MPI_CFLAGS / MPI_LIBS from `mpicc --showme:compile/--showme:link`
# (Open MPI) or from `mpicc -show` (MPICH).  MPIEXEC runs the MPI tests with
# the switches a one-host, possibly-root test run needs.
AC_DEFUN([HPCMEM_CHECK_MPI], [
  AC_ARG_WITH([mpi], [AS_HELP_STRING([--with-mpi@<:@=DIR@:>@], [MPI layer: MPI_Init/Finalize interception and the report (--without-mpi to skip)])],
              [], [with_mpi=auto])
  AC_ARG_ENABLE([mpi], [AS_HELP_STRING([--enable-mpi], [same as --with-mpi])],
                [AS_IF([test "x$enableval" = xno], [with_mpi=no], [with_mpi=yes])])
  hpcmem_have_mpi=no
  AS_IF([test "x$with_mpi" != xno], [
    AS_CASE([$with_mpi], [yes|auto], [hpcmem_mpi_path=$PATH], [hpcmem_mpi_path=$with_mpi/bin])
    AC_PATH_PROG([MPICC], [mpicc], [], [$hpcmem_mpi_path])
    AC_PATH_PROG([MPIFC], [mpifort], [], [$hpcmem_mpi_path])
    AC_PATH_PROGS([MPIEXEC_BIN], [mpiexec mpirun], [], [$hpcmem_mpi_path])
    AS_IF([test -n "$MPICC" && test -n "$MPIEXEC_BIN"], [
      MPI_CFLAGS=`$MPICC --showme:compile 2>/dev/null`
      MPI_LIBS=`$MPICC --showme:link 2>/dev/null`
      AS_IF([test -z "$MPI_LIBS"], [
        hpcmem_mpi_show=`$MPICC -show 2>/dev/null`
        MPI_CFLAGS=`echo $hpcmem_mpi_show | tr ' ' '\n' | grep -E '^-(I|D)' | tr '\n' ' '`
        MPI_LIBS=`echo $hpcmem_mpi_show | tr ' ' '\n' | grep -E '^-(L|l|Wl)' | tr '\n' ' '`])
      hpcmem_save_CPPFLAGS=$CPPFLAGS; hpcmem_save_LIBS=$LIBS
      CPPFLAGS="$CPPFLAGS $MPI_CFLAGS"; LIBS="$MPI_LIBS $LIBS"
      AC_CHECK_HEADER([mpi.h], [
        AC_MSG_CHECKING([for PMPI_Init])
        AC_LINK_IFELSE([AC_LANG_CALL([], [PMPI_Init])], [hpcmem_have_mpi=yes])
        AC_MSG_RESULT([$hpcmem_have_mpi])])
      CPPFLAGS=$hpcmem_save_CPPFLAGS; LIBS=$hpcmem_save_LIBS])
    AS_IF([test $hpcmem_have_mpi = no && test "x$with_mpi" != xauto],
      [AC_MSG_ERROR([--with-mpi was given but no working MPI (mpicc, mpiexec, mpi.h, PMPI_Init) was found.
On Debian 12: apt-get install libopenmpi-dev openmpi-bin])])
  ])
  AS_IF([test $hpcmem_have_mpi = yes], [
    AC_DEFINE([HAVE_MPI], [1], [Define to 1 to build the MPI layer.])
    # one host, several ranks, possibly as root (CI): the switches Open MPI needs
    AS_IF([$MPIEXEC_BIN --version 2>&1 | grep -qi 'open mpi'],
      [MPIEXEC="$MPIEXEC_BIN --oversubscribe --allow-run-as-root"], [MPIEXEC="$MPIEXEC_BIN"])
  ], [MPI_CFLAGS=""; MPI_LIBS=""; MPIEXEC=""])
  AM_CONDITIONAL([HAVE_MPI], [test $hpcmem_have_mpi = yes])
  AM_CONDITIONAL([HAVE_MPIFC], [test $hpcmem_have_mpi = yes && test -n "$MPIFC"])
  AC_SUBST([MPI_CFLAGS]) AC_SUBST([MPI_LIBS]) AC_SUBST([MPIEXEC]) AC_SUBST([MPIFC])
  AC_ARG_VAR([MPIEXEC], [command that launches the MPI tests])
  hpcmem_summary="$hpcmem_summary
  mpi          $hpcmem_have_mpi"
])

# HPCMEM_CHECK_OPENMP: benchmarks and miniapps use OpenMP threads.
AC_DEFUN([HPCMEM_CHECK_OPENMP], [
  AC_OPENMP
  hpcmem_have_openmp=no
  AS_IF([test "x$enable_openmp" != xno && test -n "$OPENMP_CFLAGS"], [hpcmem_have_openmp=yes])
  AS_IF([test "x$enable_openmp" = xyes && test $hpcmem_have_openmp = no],
    [AC_MSG_ERROR([--enable-openmp was given but the C compiler has no OpenMP support (On Debian 12: apt-get install libgomp1 gcc)])])
  AM_CONDITIONAL([HAVE_OPENMP], [test $hpcmem_have_openmp = yes])
  hpcmem_summary="$hpcmem_summary
  openmp       $hpcmem_have_openmp"
])

# HPCMEM_CHECK_GTEST: the test suite (C++ GoogleTest driving the C API).
AC_DEFUN([HPCMEM_CHECK_GTEST], [
  AC_ARG_WITH([gtest], [AS_HELP_STRING([--with-gtest], [GoogleTest for make check (--without-gtest to skip the tests)])],
              [], [with_gtest=auto])
  AC_ARG_ENABLE([gtest], [AS_HELP_STRING([--enable-gtest], [same as --with-gtest])],
                [AS_IF([test "x$enableval" = xno], [with_gtest=no], [with_gtest=yes])])
  hpcmem_have_gtest=no
  AS_IF([test "x$with_gtest" != xno], [
    PKG_CHECK_MODULES([GTEST], [gtest_main], [:], [GTEST_CFLAGS=""; GTEST_LIBS="-lgtest_main -lgtest -lpthread"])
    AC_LANG_PUSH([C++])
    hpcmem_save_CPPFLAGS=$CPPFLAGS; hpcmem_save_LIBS=$LIBS
    CPPFLAGS="$CPPFLAGS $GTEST_CFLAGS"; LIBS="$GTEST_LIBS $LIBS"
    AC_CHECK_HEADER([gtest/gtest.h], [
      AC_MSG_CHECKING([whether GoogleTest links])
      AC_LINK_IFELSE([AC_LANG_PROGRAM([[#include <gtest/gtest.h>
TEST(a, b) { EXPECT_EQ(1, 1); }]], [[]])], [hpcmem_have_gtest=yes])
      AC_MSG_RESULT([$hpcmem_have_gtest])])
    CPPFLAGS=$hpcmem_save_CPPFLAGS; LIBS=$hpcmem_save_LIBS
    AC_LANG_POP([C++])
    AS_IF([test $hpcmem_have_gtest = no && test "x$with_gtest" = xyes],
      [AC_MSG_ERROR([--with-gtest was given but GoogleTest was not found. On Debian 12: apt-get install libgtest-dev])])
  ])
  AM_CONDITIONAL([HAVE_GTEST], [test $hpcmem_have_gtest = yes])
  hpcmem_summary="$hpcmem_summary
  gtest        $hpcmem_have_gtest"
])
