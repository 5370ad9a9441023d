/* Where miniFE's big arrays come from: plain malloc, a libhpcmem segment,
 * or libhpcmem placement (hexe).  The binary is not linked with libhpcmem
 * (it also runs under glibc, jemalloc, tcmalloc and mimalloc), so the
 * libhpcmem variants find its API at run time. */
#include "config.h"
#include "minife.h"

#include <errno.h>
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench_hpcmem.h"
#include "bench_util.h"

static const struct {
  const char *name, *long_name, *what;
} kinds[] = {
  [MINIFE_ALLOC_MALLOC] = {"malloc", "malloc", "plain malloc"},
  [MINIFE_ALLOC_PRIVATE] = {"private", "segment-private", "hpcmem_malloc_seg(HPCMEM_SEG_PRIVATE) for the matrix and vectors"},
  [MINIFE_ALLOC_INTERLEAVED] = {"interleaved", "segment-interleaved",
                                "hpcmem_malloc_seg(HPCMEM_SEG_INTERLEAVED) for the matrix and vectors"},
  [MINIFE_ALLOC_SHARED] = {"shared", "segment-shared",
                           "the vectors with ghost planes (x, p) in the node-shared segment; halo exchange "
                           "with ranks of the same node reads their planes directly"},
  [MINIFE_ALLOC_PLACE] = {"place", "placement",
                          "hpcmem_place_alloc (ON_COMMIT, priority 1, HBM preferred if present, then DRAM), "
                          "hpcmem_commit after setup and after the solver's vectors"},
};

static int kind = MINIFE_ALLOC_MALLOC;
static const bench_hpcmem_t *hp;

/* arrays made since the last commit, to say where the commit put them */
enum { MAX_PENDING = 16 };
static struct { void *p; size_t bytes; const char *what; } pending[MAX_PENDING];
static int npending;

int minife_alloc_parse(const char *name)
{
  for (int k = 0; k < MINIFE_ALLOC_COUNT; k++)
    if (strcmp(name, kinds[k].name) == 0 || strcmp(name, kinds[k].long_name) == 0)
      return k;
  return -EINVAL;
}

const char *minife_alloc_name(int k)
{
  return k >= 0 && k < MINIFE_ALLOC_COUNT ? kinds[k].name : "?";
}

const char *minife_alloc_what(int k)
{
  return k >= 0 && k < MINIFE_ALLOC_COUNT ? kinds[k].what : "?";
}

int minife_alloc_init(int k, const char **why)
{
  if (k < 0 || k >= MINIFE_ALLOC_COUNT)
    return -EINVAL;
  kind = k;
  if (k == MINIFE_ALLOC_MALLOC)
    return 0;
  hp = bench_hpcmem_get(k == MINIFE_ALLOC_PLACE ? BENCH_HPCMEM_PLACEMENT : BENCH_HPCMEM_SEGMENTS, why);
  if (hp == NULL) {
    kind = MINIFE_ALLOC_MALLOC;
    return -ENOSYS;
  }
  return 0;
}

int minife_alloc_kind(void) { return kind; }

static void *place(size_t bytes)
{
  hpcmem_place_attr_t a;

  hp->place_attr_init(&a);
  (void)hp->place_attr_add(&a, HPCMEM_CLASS_HBM, HPCMEM_INDEX_ALL);  /* -ENODEV without HBM */
  if (hp->place_attr_add(&a, HPCMEM_CLASS_DRAM, HPCMEM_INDEX_ALL) != 0)
    return NULL;
  a.split = HPCMEM_SPLIT_SPILL_OVER;
  a.mapping = HPCMEM_MAP_ON_COMMIT;
  a.mismatch = HPCMEM_MISMATCH_FALLBACK;
  a.priority = 1;  /* as the hexe paper's miniFE: size decides */
  return hp->place_alloc(bytes, &a);
}

void *minife_big_alloc(size_t bytes, const char *what, int ghosted)
{
  void *p;

  if (bytes == 0)
    bytes = 1;
  switch (kind) {
  case MINIFE_ALLOC_PRIVATE: return hp->malloc_seg(bytes, HPCMEM_SEG_PRIVATE);
  case MINIFE_ALLOC_INTERLEAVED: return hp->malloc_seg(bytes, HPCMEM_SEG_INTERLEAVED);
  case MINIFE_ALLOC_SHARED:
    /* only what the neighbours read is shared; the rest is the rank's own */
    return hp->malloc_seg(bytes, ghosted ? HPCMEM_SEG_SHARED : HPCMEM_SEG_PRIVATE);
  case MINIFE_ALLOC_PLACE:
    p = place(bytes);
    if (p != NULL && npending < MAX_PENDING) {
      pending[npending].p = p;
      pending[npending].bytes = bytes;
      pending[npending].what = what;
      npending++;
    }
    return p;
  default: return malloc(bytes);
  }
}

void minife_big_free(void *p)
{
  if (p == NULL)
    return;
  switch (kind) {
  case MINIFE_ALLOC_MALLOC: free(p); break;
  case MINIFE_ALLOC_PLACE: {
    for (int i = 0; i < npending; i++)
      if (pending[i].p == p)
        pending[i] = pending[--npending];
    if (hp->place_free(p) != 0)
      fprintf(stderr, "minife: hpcmem_place_free(%p) refused\n", p);
    break;
  }
  default: {
    int seg = hp->seg_of(p);
    if (hp->free_seg(p, seg) != 0)
      fprintf(stderr, "minife: hpcmem_free_seg(%p, %d) refused\n", p, seg);
  }
  }
}

int minife_big_commit(const char *when, int verbose)
{
  if (kind != MINIFE_ALLOC_PLACE)
    return 0;
  hpcmem_place_stats_t before, after;
  hp->place_stats(&before);
  int rc = hp->commit(HPCMEM_COMMIT_EPOCH);
  hp->place_stats(&after);
  if (rc != 0 && rc != -ENODATA) {
    fprintf(stderr, "minife: hpcmem_commit %s: %s\n", when, strerror(-rc));
    return rc;
  }
  if (verbose) {
    char b1[32];
    printf("placement, commit %s (rank 0): %d arrays, %.3f ms, %s already touched and migrated\n", when, npending,
           1e-6 * (double)(after.commit_ns - before.commit_ns),
           bench_fmt_bytes((double)(after.moved_bytes - before.moved_bytes), b1, sizeof b1));
    for (int i = 0; i < npending; i++) {
      char line[256];
      bench_place_describe(hp, pending[i].p, pending[i].bytes, pending[i].what, line, sizeof line);
      printf("  %s\n", line);
    }
  }
  npending = 0;
  return 0;
}

/* ------------------------------------------------------------------ */
/* Halo exchange.  Over MPI the end planes travel as messages into the
 * ghost planes.  In the shared variant, a neighbour on the same node has
 * its vector in the node's shared mapping: after a zero-byte message that
 * says "my vector is up to date", the plane is copied straight out of the
 * neighbour's array.  The neighbour cannot change it during the copy: its
 * next write to that vector comes after a dot product (MPI_Allreduce) that
 * this rank joins only after the copy. */

int minife_halo_open(const decomp_t *d, double *x, halo_t *h)
{
  memset(h, 0, sizeof *h);
  h->x = x;
  if (kind != MINIFE_ALLOC_SHARED)
    return 0;

  /* what a neighbour needs: my node (the world rank of its lowest rank),
   * where my vector lies in the node's mapping, and my rows */
  MPI_Comm node;
  int node_id = d->rank;
  MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &node);
  MPI_Allreduce(MPI_IN_PLACE, &node_id, 1, MPI_INT, MPI_MIN, node);
  MPI_Comm_free(&node);
  uint64_t off = UINT64_MAX, mine[3], theirs[2][3];
  if (hp->seg_offset(x, &off) != 0)
    off = UINT64_MAX;
  mine[0] = (uint64_t)node_id;
  mine[1] = off;
  mine[2] = (uint64_t)d->nown;
  int below = d->below >= 0 ? d->below : MPI_PROC_NULL, above = d->above >= 0 ? d->above : MPI_PROC_NULL;
  for (int s = 0; s < 2; s++)
    theirs[s][1] = UINT64_MAX;
  MPI_Sendrecv(mine, 3, MPI_UINT64_T, above, 7, theirs[0], 3, MPI_UINT64_T, below, 7, MPI_COMM_WORLD,
               MPI_STATUS_IGNORE);
  MPI_Sendrecv(mine, 3, MPI_UINT64_T, below, 8, theirs[1], 3, MPI_UINT64_T, above, 8, MPI_COMM_WORLD,
               MPI_STATUS_IGNORE);
  for (int s = 0; s < 2; s++) {
    const double *nx;
    if (theirs[s][1] == UINT64_MAX || theirs[s][0] != (uint64_t)node_id || off == UINT64_MAX)
      continue;  /* another node, or no shared vector there: MPI messages */
    if ((nx = hp->seg_pointer(theirs[s][1])) == NULL)
      continue;
    if (s == 0)
      h->below_plane = nx + theirs[0][2] - d->plane;  /* the last owned plane of the rank below */
    else
      h->above_plane = nx;                             /* the first owned plane of the rank above */
  }
  return 0;
}

void minife_halo(const decomp_t *d, const halo_t *h)
{
  MPI_Request req[4];
  int n = 0;
  double *x = h->x;
  int below = d->below >= 0 ? d->below : MPI_PROC_NULL;
  int above = d->above >= 0 ? d->above : MPI_PROC_NULL;
  double *ghost_below = x + d->nown;
  double *ghost_above = x + d->nown + (d->below >= 0 ? d->plane : 0);
  /* planes read through the shared mapping need only a token */
  int cnt_below = h->below_plane != NULL ? 0 : (int)d->plane;
  int cnt_above = h->above_plane != NULL ? 0 : (int)d->plane;

  /* tag 0 travels down, tag 1 travels up; the neighbour's choice of
   * token or plane mirrors ours, so the counts match */
  __atomic_thread_fence(__ATOMIC_SEQ_CST);  /* my vector's writes before my token */
  MPI_Irecv(ghost_below, cnt_below, MPI_DOUBLE, below, 1, MPI_COMM_WORLD, &req[n++]);
  MPI_Irecv(ghost_above, cnt_above, MPI_DOUBLE, above, 0, MPI_COMM_WORLD, &req[n++]);
  MPI_Isend(x, cnt_below, MPI_DOUBLE, below, 0, MPI_COMM_WORLD, &req[n++]);
  MPI_Isend(x + d->nown - d->plane, cnt_above, MPI_DOUBLE, above, 1, MPI_COMM_WORLD, &req[n++]);
  MPI_Waitall(n, req, MPI_STATUSES_IGNORE);
  __atomic_thread_fence(__ATOMIC_SEQ_CST);  /* the neighbour's writes before my reads */
  if (h->below_plane != NULL)
    memcpy(ghost_below, h->below_plane, sizeof(double) * (size_t)d->plane);
  if (h->above_plane != NULL)
    memcpy(ghost_above, h->above_plane, sizeof(double) * (size_t)d->plane);
}
