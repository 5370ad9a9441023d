# Sourced by the benchmark runners: which allocators can be preloaded here,
# and the checks every runner makes of its command line.
#   . benchmarks/common/allocators.sh
#   bench_allocators BUILDDIR     prints "name|library|status" per allocator
#   bench_builddir RUNNER PROG DIR...  the first DIR holding the built PROG, absolute
#   bench_positive RUNNER OPTION VALUE exit 64 unless VALUE is a positive number
# status is "ok" or why the allocator cannot run (not installed, not built).
# The same binary runs under each one through LD_PRELOAD; "glibc" has none.
# Environment: JEMALLOC_LIB, TCMALLOC_LIB, MIMALLOC_LIB, LIBHPCMEM override
# where the libraries are looked for (HPCMEM_LIB is accepted for LIBHPCMEM, but
# callers should unset it: libhpcmem warns about HPCMEM_* names it does not know).

bench_builddir() {
  _runner=$1 _prog=$2; shift 2
  for _d in "$@"; do
    if [ -n "$_d" ] && [ -x "$_d/$_prog" ]; then (cd "$_d" && pwd); return 0; fi
  done
  echo "$_runner: no built $_prog found; build first (make) or pass --builddir" >&2
  return 1
}

bench_positive() {
  case $3 in ''|*[!0-9]*|0) echo "$1: $2 wants a positive number" >&2; exit 64 ;; esac
}

bench_ldcache() { /sbin/ldconfig -p 2>/dev/null | awk -v n="$1" '$1 == n { print $NF; exit }'; }
bench_first_file() {
  for f in "$@"; do
    if [ -n "$f" ] && [ -f "$f" ]; then echo "$f"; return; fi
  done
}

bench_allocators() {
  _libdir=/usr/lib/x86_64-linux-gnu
  _je=$(bench_first_file "${JEMALLOC_LIB:-}" "$_libdir/libjemalloc.so.2" "$(bench_ldcache libjemalloc.so.2)")
  _tc=$(bench_first_file "${TCMALLOC_LIB:-}" "$_libdir/libtcmalloc_minimal.so.4" "$(bench_ldcache libtcmalloc_minimal.so.4)")
  _mi=$(bench_first_file "${MIMALLOC_LIB:-}" \
        "$(dpkg -L libmimalloc2.0 2>/dev/null | grep -E '/libmimalloc\.so\.2(\.[0-9]+)?$' | head -1)" \
        "$(bench_ldcache libmimalloc.so.2)")
  _hp=${LIBHPCMEM:-${HPCMEM_LIB:-$1/.libs/libhpcmem.so}}
  printf 'glibc||ok\n'
  for _a in jemalloc tcmalloc mimalloc; do
    case $_a in jemalloc) _l=$_je ;; tcmalloc) _l=$_tc ;; mimalloc) _l=$_mi ;; esac
    if [ -n "$_l" ]; then printf '%s|%s|ok\n' "$_a" "$_l"; else printf '%s||not installed\n' "$_a"; fi
  done
  # libhpcmem replaces malloc only once its core exports it
  if [ ! -f "$_hp" ]; then
    printf 'libhpcmem||not built (%s missing)\n' "$_hp"
  elif nm -D --defined-only "$_hp" 2>/dev/null | awk '$3 == "malloc" { f = 1 } END { exit !f }'; then
    printf 'libhpcmem|%s|ok\n' "$_hp"
  else
    printf 'libhpcmem|%s|not built (no malloc exported by %s)\n' "$_hp" "$_hp"
  fi
}
