/* CLMalloc Figure 6: latency of contiguous allocation.
 *
 * Part 1 (the paper's experiment): 16 areas of 16 MiB; T = 8..12 requests of
 * 20 MiB, each allocated and its pages touched once (the kernel version pays
 * the physical allocation inside the call; here the first touch does).  Per
 * allocator: milliseconds for the T requests and how many of them succeeded.
 *   per-area   the paper's baseline (HPCMEM_CONTIG_PER_AREA), no pre-allocation
 *   global     the global bitmap, no pre-allocation
 *   global+pre the global bitmap with the whole arena pre-allocated
 *   malloc     malloc/free of this process (libhpcmem's)
 *   glibc      __libc_malloc/__libc_free (the system allocator)
 * Part 2 (a request mix): random sizes 64 KiB .. 40 MiB, allocated and freed
 * at random with up to 24 live, no touching: nanoseconds per call of the
 * allocation function alone, and the failures.
 *
 * Usage: contig_bench [-r rounds] [-n mix_ops] [-s seed]
 */
#include "hpcmem_contig.h"
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

extern void *__libc_malloc(size_t);
extern void __libc_free(void *);

#define MiB ((size_t)1 << 20)
#define KiB ((size_t)1 << 10)
#define AREAS 16
#define AREA (16 * MiB)
#define REQ (20 * MiB)
#define MAXT 12

enum { PER_AREA, GLOBAL, GLOBAL_PRE, MALLOC, GLIBC, KINDS };
static const char *kind_name[KINDS] = {"per-area", "global", "global+pre", "malloc", "glibc"};

static uint64_t now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static hpcmem_contig_t *arena(int kind) {
  hpcmem_contig_config_t c;
  memset(&c, 0, sizeof c);
  c.region_size = AREA;
  c.nregions = AREAS;
  c.mode = kind == PER_AREA ? HPCMEM_CONTIG_PER_AREA : HPCMEM_CONTIG_GLOBAL;
  c.prealloc = kind == GLOBAL_PRE ? (size_t)AREAS * AREA : HPCMEM_CONTIG_NO_PREALLOC;
  hpcmem_contig_t *a = NULL;
  int rc = hpcmem_contig_create(&c, &a);
  if (rc) { fprintf(stderr, "contig_bench: hpcmem_contig_create: %s\n", strerror(-rc)); exit(1); }
  return a;
}

static void *get(int kind, hpcmem_contig_t *a, size_t n) {
  switch (kind) {
  case MALLOC: return malloc(n);
  case GLIBC: return __libc_malloc(n);
  default: return hpcmem_contig_malloc(a, n);
  }
}

static void put(int kind, hpcmem_contig_t *a, void *p) {
  switch (kind) {
  case MALLOC: free(p); break;
  case GLIBC: __libc_free(p); break;
  default: if (hpcmem_contig_free(a, p)) { fprintf(stderr, "contig_bench: free failed\n"); exit(1); }
  }
}

static volatile char sink;

/* One round: T requests of 20 MiB, each touched; returns ns spent, *ok successes. */
static uint64_t round_fig6(int kind, hpcmem_contig_t *a, int T, int *ok) {
  void *p[MAXT];
  uint64_t spent = 0;
  long page = sysconf(_SC_PAGESIZE);
  *ok = 0;
  for (int i = 0; i < T; i++) {
    uint64_t t0 = now_ns();
    char *q = get(kind, a, REQ);
    if (q) for (size_t o = 0; o < REQ; o += (size_t)page) q[o] = (char)i;
    spent += now_ns() - t0;
    p[i] = q;
    if (q) { sink = q[REQ - 1]; (*ok)++; }
  }
  for (int i = 0; i < T; i++) if (p[i]) put(kind, a, p[i]);
  return spent;
}

static uint64_t rng_state;
static uint64_t rnd(void) {
  rng_state ^= rng_state << 13; rng_state ^= rng_state >> 7; rng_state ^= rng_state << 17;
  return rng_state;
}

/* The mix: same random sequence for every allocator. */
static void mix(int kind, hpcmem_contig_t *a, int ops, uint64_t seed, double *ns, int *fails) {
  void *live[24] = {0};
  uint64_t spent = 0;
  int calls = 0;
  *fails = 0;
  rng_state = seed;
  for (int i = 0; i < ops; i++) {
    int slot = (int)(rnd() % 24);
    if (live[slot]) { put(kind, a, live[slot]); live[slot] = NULL; continue; }
    size_t n = 64 * KiB + rnd() % (40 * MiB - 64 * KiB);
    uint64_t t0 = now_ns();
    live[slot] = get(kind, a, n);
    spent += now_ns() - t0;
    calls++;
    if (!live[slot]) (*fails)++;
  }
  for (int s = 0; s < 24; s++) if (live[s]) put(kind, a, live[s]);
  *ns = calls ? (double)spent / calls : 0;
}

int main(int argc, char **argv) {
  int rounds = 5, ops = 20000;
  uint64_t seed = 12345;
  for (int c; (c = getopt(argc, argv, "r:n:s:")) != -1;) {
    if (c == 'r') rounds = atoi(optarg);
    else if (c == 'n') ops = atoi(optarg);
    else if (c == 's') seed = strtoull(optarg, NULL, 0);
    else { fprintf(stderr, "usage: %s [-r rounds] [-n mix_ops] [-s seed]\n", argv[0]); return 2; }
  }
  if (rounds < 1 || ops < 1) { fprintf(stderr, "contig_bench: -r and -n must be positive\n"); return 2; }
  hpcmem_contig_t *ar[KINDS] = {0};
  for (int k = PER_AREA; k <= GLOBAL_PRE; k++) ar[k] = arena(k);

  printf("# CLMalloc Figure 6: %d areas of %zu MiB, T requests of %zu MiB, alloc + first touch\n",
         AREAS, AREA / MiB, REQ / MiB);
  printf("# ms for the T requests (mean over %d rounds; failed requests included), ok = requests served\n", rounds);
  printf("%-4s", "T");
  for (int k = 0; k < KINDS; k++) printf(" %12s %3s", kind_name[k], "ok");
  printf("\n");
  for (int T = 8; T <= MAXT; T++) {
    printf("%-4d", T);
    for (int k = 0; k < KINDS; k++) {
      uint64_t spent = 0;
      int ok = 0;
      for (int r = 0; r < rounds; r++) spent += round_fig6(k, ar[k], T, &ok);
      printf(" %12.2f %3d", (double)spent / 1e6 / rounds, ok);
    }
    printf("\n");
  }

  printf("\n# request mix: %d operations, sizes 64 KiB..40 MiB, up to 24 live, no touching\n", ops);
  printf("%-12s %12s %8s\n", "allocator", "ns/alloc", "failed");
  for (int k = 0; k < KINDS; k++) {
    double ns;
    int fails;
    mix(k, ar[k], ops, seed, &ns, &fails);
    printf("%-12s %12.1f %8d\n", kind_name[k], ns, fails);
  }
  for (int k = PER_AREA; k <= GLOBAL_PRE; k++) hpcmem_contig_destroy(ar[k]);
  return 0;
}
