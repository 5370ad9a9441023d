/* A job whose memory is known in advance, for testing hpcmem-report:
 *   trace_workload DIR [RANKS]
 * forks RANKS processes ("ranks", default 4); each records its allocations
 * through the recorder into DIR (as libhpcmem does for a real program), at
 * addresses of its own that no allocator hands out, from these functions:
 *
 *   read_mesh     10 MiB x (rank + 1), in 10 allocations
 *   build_halo    4 x 1 MiB through local_alloc (a wrapper, as in WMTrace)
 *   assemble      3 x 2 MiB through local_alloc
 *   -- all ranks at their peak: 10 * rank + 20 MiB each (barrier) --
 *   free the mesh; solve 5 MiB; free halo, assembly and solve
 *   leak          100 KiB x (rank + 1), never freed
 *
 * So rank r's high-water mark is (10 r + 20) MiB, reached at the last
 * assemble allocation; the job peaks at the barrier with the sum of all
 * of them; at the peak read_mesh holds 10 (r + 1) MiB and local_alloc
 * 10 MiB (build_halo 4 MiB and assemble 6 MiB when wrappers are
 * collapsed); 100 (r + 1) KiB leak.  Rank 1 also frees one address it
 * never allocated (memory from before the trace). */
#define _GNU_SOURCE
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include "trace/trace.h"
#include "util/options.h"

#define MiB (1024u * 1024u)
#define BASE 0x100000000000ull

static uint64_t next_addr;

#define NOINLINE __attribute__((noinline))
#define KEEP __asm__ volatile("" ::: "memory")

static NOINLINE uint64_t local_alloc(uint64_t size) {
  uint64_t p = next_addr;
  next_addr += (size + 4095) & ~4095ull;
  _hpcmem_trace_event(HPCMEM_EV_MALLOC, (void *)(uintptr_t)p, size, NULL, 0);
  KEEP;
  return p;
}

static void release(uint64_t p) { _hpcmem_trace_event(HPCMEM_EV_FREE, (void *)(uintptr_t)p, 0, NULL, 0); }

static NOINLINE void read_mesh(int rank, uint64_t *mesh) {
  for (int i = 0; i < 10; i++) {
    mesh[i] = next_addr;
    next_addr += (rank + 1) * MiB;
    _hpcmem_trace_event(HPCMEM_EV_CALLOC, (void *)(uintptr_t)mesh[i], (size_t)(rank + 1) * MiB, NULL, 0);
    KEEP;
  }
}

static NOINLINE void build_halo(uint64_t *halo) {
  for (int i = 0; i < 4; i++) halo[i] = local_alloc(MiB);
  KEEP;
}

static NOINLINE void assemble(uint64_t *a) {
  for (int i = 0; i < 3; i++) a[i] = local_alloc(2 * MiB);
  KEEP;
}

static NOINLINE uint64_t solve(void) {
  uint64_t p = next_addr;
  next_addr += 5 * MiB;
  _hpcmem_trace_event(HPCMEM_EV_MEMALIGN, (void *)(uintptr_t)p, 5 * MiB, NULL, 4096);
  KEEP;
  return p;
}

static NOINLINE void leak(int rank) {
  uint64_t p = next_addr;
  next_addr += 1 * MiB;
  _hpcmem_trace_event(HPCMEM_EV_MALLOC, (void *)(uintptr_t)p, (size_t)(rank + 1) * 100 * 1024, NULL, 0);
  KEEP;
}

extern char **environ;

/* the settings: the environment plus HPCMEM_TRACE=1 and the directory
 * (loaded explicitly: libhpcmem may have read the environment already) */
static void load_options(const char *dir) {
  size_t n = 0;
  while (environ[n]) n++;
  char **env = calloc(n + 3, sizeof *env);
  static char trace[] = "HPCMEM_TRACE=1", dirvar[4200];
  snprintf(dirvar, sizeof dirvar, "HPCMEM_TRACE_DIR=%s", dir);
  memcpy(env, environ, n * sizeof *env);
  env[n] = trace;
  env[n + 1] = dirvar;
  _hpcmem_options_init();
  _hpcmem_options_load(env);
  free(env);
}

static int run_rank(int rank, int size, int to_parent, int from_parent, uint64_t origin) {
  _hpcmem_trace_init();
  if (!_hpcmem_trace_enabled) { fprintf(stderr, "trace_workload: set HPCMEM_TRACE=1\n"); return 1; }
  /* as the MPI layer does: the clock of the job counts from its origin */
  _hpcmem_trace_set_rank(rank, size, -(int64_t)origin);
  next_addr = BASE + (uint64_t)rank * 0x10000000000ull;
  uint64_t mesh[10], halo[4], a[3];
  read_mesh(rank, mesh);
  usleep(20000);
  build_halo(halo);
  assemble(a);
  /* barrier: everybody is at the peak */
  char c = 'p';
  if (write(to_parent, &c, 1) != 1 || read(from_parent, &c, 1) != 1) return 1;
  for (int i = 0; i < 10; i++) release(mesh[i]);
  uint64_t s = solve();
  usleep(20000);
  for (int i = 0; i < 4; i++) release(halo[i]);
  for (int i = 0; i < 3; i++) release(a[i]);
  release(s);
  leak(rank);
  if (rank == 1) release(BASE - 4096);  /* allocated before the trace */
  _hpcmem_trace_flush_all(HMT_FLUSH_EXIT);
  return 0;
}

int main(int argc, char **argv) {
  if (argc < 2) { fprintf(stderr, "usage: trace_workload DIR [RANKS]\n"); return 2; }
  int n = argc > 2 ? atoi(argv[2]) : 4;
  load_options(argv[1]);
  int up[2], down[2];
  if (pipe(up) || pipe(down)) return 1;
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  uint64_t origin = (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
  for (int r = 0; r < n; r++) {
    pid_t pid = fork();
    if (pid < 0) return 1;
    if (pid == 0) _exit(run_rank(r, n, up[1], down[0], origin));
  }
  for (int r = 0; r < n; r++) {
    char c;
    if (read(up[0], &c, 1) != 1) return 1;
  }
  for (int r = 0; r < n; r++)
    if (write(down[1], "g", 1) != 1) return 1;
  int rc = 0;
  for (int r = 0; r < n; r++) {
    int st;
    wait(&st);
    if (!WIFEXITED(st) || WEXITSTATUS(st)) rc = 1;
  }
  return rc;
}
