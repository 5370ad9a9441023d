/* A small MPI program whose ranks need different amounts of memory, so
 * the report at MPI_Finalize shows an imbalance: the workload of `make
 * demo` in a build without MPI and of the multi-host tests (with MPI,
 * `make demo` runs miniFE, see Makefile.inc).  Each rank builds a "mesh" (many small cells plus a few large
 * arrays) sized in proportion to its rank, relaxes it for a few sweeps,
 * and frees it.  Plain malloc/free: libhpcmem serves them because the
 * program is linked with it (or preloaded).  Without MPI it runs as one
 * process and the summary comes at exit. */
#include "config.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#ifdef HAVE_MPI
#include <mpi.h>
#endif

typedef struct cell {
  double value;
  struct cell *next;
  int neighbours[6];
} cell_t;

int main(int argc, char **argv) {
  int rank = 0, size = 1;
#ifdef HAVE_MPI
  MPI_Init(&argc, &argv);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
#endif
  /* MiB of field data per unit of work; rank r gets r+1 units */
  size_t mib = argc > 1 ? (size_t)strtoul(argv[1], NULL, 10) : 24;
  size_t units = (size_t)rank + 1;
  size_t n = units * mib * 1024 * 1024 / sizeof(double);

  /* a few large arrays (the large-block tier) ... */
  double *u = malloc(n * sizeof *u), *v = malloc(n * sizeof *v);
  /* ... and a linked list of small cells (thread caches / group heaps) */
  size_t ncells = units * 20000;
  cell_t *head = NULL;
  for (size_t i = 0; i < ncells; i++) {
    cell_t *c = malloc(sizeof *c);
    if (!c) break;
    c->value = (double)i;
    c->next = head;
    head = c;
  }
  if (!u || !v) { fprintf(stderr, "demo: out of memory\n"); return 1; }
  for (size_t i = 0; i < n; i++) u[i] = (double)(i % 97);
  for (int sweep = 0; sweep < 4; sweep++) {
    for (size_t i = 1; i + 1 < n; i++) v[i] = (u[i - 1] + u[i] + u[i + 1]) / 3.0;
    double *t = u; u = v; v = t;
  }
  double local = 0.0, total = 0.0;
  for (size_t i = 0; i < n; i += 4096) local += u[i];
  for (cell_t *c = head; c; c = c->next) local += c->value * 1e-9;
#ifdef HAVE_MPI
  MPI_Reduce(&local, &total, 1, MPI_DOUBLE, MPI_SUM, 0, MPI_COMM_WORLD);
#else
  total = local;
#endif
  if (rank == 0) printf("demo: %d rank%s, checksum %.6f\n", size, size == 1 ? "" : "s", total);
  fflush(stdout);

  while (head) { cell_t *c = head; head = c->next; free(c); }
  free(u);
  free(v);
#ifdef HAVE_MPI
  MPI_Finalize();
#endif
  return 0;
}
