/* A program that moves on from one size to the next, one object at a time
 * (the touched size sweep of benchmarks/alloc, a buffer grown by doubling),
 * reuses the pages it touched for each new size class instead of faulting
 * new ones, and an untouched sweep faults no page at all (the object lent
 * back to its span is not written).  Counts minor faults per size with
 * getrusage; prints nothing until the end (stdio would allocate).
 *
 *   span_reuse touch|notouch     exit 0 when every size stays within its faults */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>
#include "hpcmem.h"

static long minflt(void) {
  struct rusage r;
  getrusage(RUSAGE_SELF, &r);
  return r.ru_minflt;
}

int main(int argc, char **argv) {
  int touch = argc > 1 && strcmp(argv[1], "touch") == 0;
  static char out[4096];
  size_t len = 0;
  int bad = 0;
  void *volatile sink = malloc(1);     /* start-up: the first object of the process */
  free(sink);
  for (size_t n = 32; n <= 64 << 10; n *= 2) {
    long before = minflt();
    for (unsigned r = 0; r < 64; r++) {
      unsigned char *p = malloc(n);
      if (!p) return 2;
      if (touch) {
        for (size_t i = 0; i < n; i += 4096) p[i] = (unsigned char)r;
        p[n - 1] = (unsigned char)r;
      }
      sink = p;
      free(p);
    }
    long faults = minflt() - before;
    /* touched: the new pages of a size that is twice the last, as glibc,
     * which carves every size from the same memory; untouched: none */
    long most = !touch ? 0 : n <= 4096 ? 0 : (long)(n / 2 / 4096);
    if (faults > most) bad = 1;
    len += (size_t)snprintf(out + len, sizeof out - len, "%s %zu B: %ld page faults (at most %ld)\n",
                            touch ? "touch" : "notouch", n, faults, most);
  }
  if (hpcmem_check() != 0) bad = 1;
  if (write(1, out, len) < 0) return 2;
  return bad;
}
