/* An MPI program whose memory is known in advance, for the traced 4-rank
 * test (tests/trace/test_mpi_trace.sh).  Plain malloc; run under
 * LD_PRELOAD with HPCMEM_TRACE=1.  Rank r:
 *   read_mesh   10 x (r + 1) MiB           (10 mallocs)
 *   build_halo  4 x 1 MiB through local_alloc
 *   assemble    3 x 2 MiB through local_alloc
 *   MPI_Barrier: every rank holds (10 r + 20) MiB of its own, the job
 *                140 MiB on 4 ranks (plus what MPI itself holds)
 *   frees everything but leak(): 100 KiB x (r + 1) */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MiB (1024u * 1024u)
#define NOINLINE __attribute__((noinline))

static NOINLINE void *local_alloc(size_t n) {
  void *p = malloc(n);
  if (!p) MPI_Abort(MPI_COMM_WORLD, 1);
  memset(p, 1, n);
  __asm__ volatile("" ::: "memory");
  return p;
}

static NOINLINE void read_mesh(int rank, void **mesh) {
  for (int i = 0; i < 10; i++) {
    mesh[i] = malloc((size_t)(rank + 1) * MiB);
    if (!mesh[i]) MPI_Abort(MPI_COMM_WORLD, 1);
    memset(mesh[i], 2, (size_t)(rank + 1) * MiB);
  }
  __asm__ volatile("" ::: "memory");
}

static NOINLINE void build_halo(void **h) {
  for (int i = 0; i < 4; i++) h[i] = local_alloc(MiB);
  __asm__ volatile("" ::: "memory");
}

static NOINLINE void assemble(void **a) {
  for (int i = 0; i < 3; i++) a[i] = local_alloc(2 * MiB);
  __asm__ volatile("" ::: "memory");
}

static NOINLINE void *leak(int rank) {
  void *p = malloc((size_t)(rank + 1) * 100 * 1024);
  __asm__ volatile("" ::: "memory");
  return p;
}

static void *volatile keep;

int main(int argc, char **argv) {
  MPI_Init(&argc, &argv);
  int rank, size;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  void *mesh[10], *halo[4], *a[3];
  read_mesh(rank, mesh);
  build_halo(halo);
  assemble(a);
  MPI_Barrier(MPI_COMM_WORLD);
  for (int i = 0; i < 10; i++) free(mesh[i]);
  MPI_Barrier(MPI_COMM_WORLD);
  for (int i = 0; i < 4; i++) free(halo[i]);
  for (int i = 0; i < 3; i++) free(a[i]);
  keep = leak(rank);
  MPI_Finalize();
  if (rank == 0) printf("mpi_trace_app: %d ranks done\n", size);
  return 0;
}
