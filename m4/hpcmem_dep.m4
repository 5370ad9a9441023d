# HPCMEM_DEP(NAME, DESCRIPTION, PKG-MODULE, HEADER, LIBRARY, FUNCTION, [DEFAULT=auto|required])
# -----------------------------------------------------------------------
# The one mechanism behind every dependency macro.  Three states, as hwloc does it:
#   not asked            -> used when found, skipped quietly otherwise
#   --without-NAME       -> skipped
#   --with-NAME[=DIR]    -> configure stops with an error if it is missing
# --enable-NAME / --disable-NAME are accepted as spellings of --with / --without.
# DEFAULT=required turns "not asked" into "must be found" (hwloc, libnuma).
# WHY-REQUIRED ($8) and DEBIAN-PACKAGE ($9) go into the error text.
# Sets NAME_CFLAGS, NAME_LIBS (upper case), HAVE_NAME (config.h) and the
# automake conditional HAVE_NAME; records the result for HPCMEM_SUMMARY.
AC_DEFUN([HPCMEM_DEP], [
  m4_pushdef([UP], m4_toupper([$1]))
  AC_ARG_WITH([$1], [AS_HELP_STRING([--with-$1@<:@=DIR@:>@], [$2 (--without-$1 to skip)])],
              [], [with_$1=m4_default([$7], [auto])])
  AC_ARG_ENABLE([$1], [AS_HELP_STRING([--enable-$1], [same as --with-$1])],
                [AS_IF([test "x$enableval" = xno], [with_$1=no], [with_$1=yes])])
  hpcmem_have_$1=no
  AS_IF([test "x$with_$1" != xno], [
    hpcmem_$1_save_CPPFLAGS=$CPPFLAGS; hpcmem_$1_save_LIBS=$LIBS
    AS_CASE([$with_$1], [yes|auto|required], [
      PKG_CHECK_MODULES(UP, [$3], [:], [UP[]_CFLAGS=""; UP[]_LIBS="-l$5"])
    ], [
      UP[]_CFLAGS="-I$with_$1/include"; UP[]_LIBS="-L$with_$1/lib -l$5"
    ])
    CPPFLAGS="$CPPFLAGS $UP[]_CFLAGS"; LIBS="$UP[]_LIBS $LIBS"
    AC_CHECK_HEADER([$4], [
      AC_MSG_CHECKING([for $6 in $UP[]_LIBS])
      AC_LINK_IFELSE([AC_LANG_CALL([], [$6])], [hpcmem_have_$1=yes])
      AC_MSG_RESULT([$hpcmem_have_$1])])
    CPPFLAGS=$hpcmem_$1_save_CPPFLAGS; LIBS=$hpcmem_$1_save_LIBS
    AS_IF([test $hpcmem_have_$1 = no], [
      UP[]_CFLAGS=""; UP[]_LIBS=""
      AS_CASE([$with_$1], [auto], [],
        [required], [AC_MSG_ERROR([$2 was not found (header $4, library -l$5). It is required: $8
On Debian 12: apt-get install $9])],
        [AC_MSG_ERROR([--with-$1 (or --enable-$1) was given but $2 was not found (header $4, library -l$5).
On Debian 12: apt-get install $9])])])
  ])
  AS_IF([test $hpcmem_have_$1 = yes], [AC_DEFINE([HAVE_]UP, [1], [Define to 1 if $2 is available.])])
  AM_CONDITIONAL([HAVE_]UP, [test $hpcmem_have_$1 = yes])
  AC_SUBST(UP[_CFLAGS]) AC_SUBST(UP[_LIBS])
  hpcmem_summary="$hpcmem_summary
  m4_format([%-12s], [$1]) $hpcmem_have_$1"
  m4_popdef([UP])
])
