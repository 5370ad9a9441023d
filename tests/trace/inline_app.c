/* An allocating function forced inline twice over, built with -O2: the
 * return address of its malloc lies in build_table, in code inlined from
 * make_block through make_pair.  test_inline.sh checks that hpcmem-report
 * names all three, each with its own line (the lines marked below). */
#include <stdlib.h>
#include <string.h>

static void *volatile keep[2];

static inline __attribute__((always_inline)) void *make_block(size_t n) {
  char *p = malloc(n); /* @make_block */
  if (p) memset(p, 1, n);
  return p;
}

static inline __attribute__((always_inline)) void *make_pair(size_t n) {
  return make_block(n); /* @make_pair */
}

__attribute__((noinline)) void *build_table(size_t n) {
  void *p = make_pair(n); /* @build_table */
  __asm__ volatile("" ::: "memory");
  return p;
}

int main(void) {
  keep[0] = build_table(5u << 20); /* @main */
  keep[1] = malloc(1000);  /* a plain one, for contrast */
  return keep[0] && keep[1] ? 0 : 1;
}
