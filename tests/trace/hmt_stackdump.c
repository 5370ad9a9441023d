/* Prints the allocations of a trace file whose size is in [LO, HI], one
 * line each: size and the frames as module+offset, so that two runs of one
 * program can be compared despite ASLR (sort the lines: threads interleave
 * differently from run to run).  For test_stack_cache.sh.
 *   hmt_stackdump FILE LO HI */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "hmt_reader.h"

static const char *base_name(const char *p) {
  const char *b = strrchr(p, '/');
  return b ? b + 1 : p;
}

int main(int argc, char **argv) {
  if (argc != 4) { fprintf(stderr, "usage: %s FILE LO HI\n", argv[0]); return 2; }
  uint64_t lo = strtoull(argv[2], NULL, 0), hi = strtoull(argv[3], NULL, 0);
  hmt_reader_t *r;
  hmt_error_t err;
  if (hmt_open(argv[1], 0, &r, &err)) { fprintf(stderr, "%s\n", err.message); return 1; }
  hmt_event_t ev;
  int k;
  while ((k = hmt_next(r, &ev)) == 1) {
    if (ev.type == HPCMEM_EV_FREE || ev.size < lo || ev.size > hi) continue;
    printf("%llu:", (unsigned long long)ev.size);
    const uint64_t *f;
    uint32_t d;
    if (ev.stack && hmt_stack(r, ev.stack, &f, &d) == 0)
      for (uint32_t i = 0; i < d; i++) {
        const hmt_module_t *m = hmt_module_of(r, f[i]);
        printf(" %s+%llx", m ? base_name(m->path) : "?", (unsigned long long)(f[i] - (m ? m->bias : 0)));
      }
    else
      printf(" (no stack)");
    putchar('\n');
  }
  if (k < 0) { fprintf(stderr, "%s\n", hmt_error(r)->message); return 1; }
  hmt_close(r);
  return 0;
}
