/* The node-shared segment on the ranks of one host (run by test_seg_shared.sh).
 * Prints one marker line per case; rank 0 prints the job's verdict.
 *   before_init   hpcmem_malloc_seg(SHARED) before MPI_Init: NULL, EAGAIN
 *   node_ranks    every rank sees all ranks of the host in the mapping
 *   cross_read    rank r writes a pattern into its own shared array; every
 *                 other rank reads it through the offset it was sent
 *   cross_write   a rank writes into its neighbour's block, the owner sees it
 *   foreign_free  freeing another rank's block is refused (-EPERM)
 *   stats_add_up  the ranks' shared-segment live bytes add up to what was
 *                 allocated; per rank the three segments add up to the total
 *   free          the owner frees its block, the segment is empty again */
#include <errno.h>
#include <malloc.h>
#include <mpi.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include "hpcmem.h"

static int rank, fails;

static void verdict(const char *name, int mine) {
  int all = 0;
  MPI_Allreduce(&mine, &all, 1, MPI_INT, MPI_LAND, MPI_COMM_WORLD);
  if (rank == 0) printf("%s seg_shared.%s\n", all ? "[       OK ]" : "[  FAILED  ]", name);
  if (!all) fails++;
}

int main(int argc, char **argv) {
  errno = 0;
  void *early = hpcmem_malloc_seg(100, HPCMEM_SEG_SHARED);
  int early_ok = early == NULL && errno == EAGAIN;
  MPI_Init(&argc, &argv);
  int size;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  setvbuf(stdout, NULL, _IONBF, 0);
  verdict("before_init", early_ok);

  hpcmem_seg_info_t in;
  int ok = hpcmem_seg_info(HPCMEM_SEG_SHARED, &in) == 0 && in.available && !in.process_local &&
           in.node_ranks == size && in.node_rank >= 0 && in.node_rank < size;
  if (!ok) fprintf(stderr, "rank %d: available %d process_local %d node_ranks %d (of %d)\n", rank,
                   in.available, in.process_local, in.node_ranks, size);
  verdict("node_ranks", ok);

  hpcmem_seg_stats_t s0;
  hpcmem_seg_stats(HPCMEM_SEG_SHARED, &s0);
  size_t n = (size_t)(rank + 1) * 100000;   /* ints */
  int *mine = hpcmem_malloc_seg(n * sizeof(int), HPCMEM_SEG_SHARED);
  ok = mine != NULL && hpcmem_seg_of(mine) == HPCMEM_SEG_SHARED;
  uint64_t off = 0;
  if (ok) {
    for (size_t i = 0; i < n; i++) mine[i] = rank * 1000003 + (int)i;
    ok = hpcmem_seg_offset(mine, &off) == 0;
  }
  uint64_t offs[64];
  MPI_Allgather(&off, 1, MPI_UINT64_T, offs, 1, MPI_UINT64_T, MPI_COMM_WORLD);
  for (int r = 0; r < size && ok; r++) {
    const int *theirs = hpcmem_seg_pointer(offs[r]);
    size_t m = (size_t)(r + 1) * 100000;
    if (!theirs) { ok = 0; break; }
    for (size_t i = 0; i < m; i += 997)
      if (theirs[i] != r * 1000003 + (int)i) { ok = 0; fprintf(stderr, "rank %d: rank %d's [%zu] wrong\n", rank, r, i); break; }
  }
  verdict("cross_read", ok);

  /* each rank writes one word into its right neighbour's block */
  int right = (rank + 1) % size, left = (rank + size - 1) % size;
  int *nb = hpcmem_seg_pointer(offs[right]);
  MPI_Barrier(MPI_COMM_WORLD);
  if (nb) nb[1] = -rank - 1;
  MPI_Barrier(MPI_COMM_WORLD);
  verdict("cross_write", mine && mine[1] == -left - 1);

  ok = 1;
  if (size > 1) ok = hpcmem_free_seg(nb, HPCMEM_SEG_SHARED) == -EPERM;
  verdict("foreign_free", ok);

  hpcmem_seg_stats_t s1, seg[3];
  hpcmem_stats_t all;
  hpcmem_seg_stats(HPCMEM_SEG_SHARED, &s1);
  uint64_t usable = mine ? malloc_usable_size(mine) : 0, grew = s1.current_bytes - s0.current_bytes;
  uint64_t sums[2] = {usable, grew}, tot[2];
  MPI_Allreduce(sums, tot, 2, MPI_UINT64_T, MPI_SUM, MPI_COMM_WORLD);
  hpcmem_stats(&all);
  for (int i = 0; i < 3; i++) hpcmem_seg_stats(i, &seg[i]);
  ok = tot[0] == tot[1] && usable >= n * sizeof(int) &&
       seg[0].alloc_count + seg[1].alloc_count + seg[2].alloc_count == all.alloc_count &&
       seg[0].bytes_allocated + seg[1].bytes_allocated + seg[2].bytes_allocated == all.bytes_allocated;
  if (!ok) fprintf(stderr, "rank %d: usable sum %llu, shared growth sum %llu\n", rank,
                   (unsigned long long)tot[0], (unsigned long long)tot[1]);
  verdict("stats_add_up", ok);

  MPI_Barrier(MPI_COMM_WORLD);   /* nobody reads the blocks any more */
  ok = hpcmem_free_seg(mine, HPCMEM_SEG_SHARED) == 0;
  hpcmem_seg_stats(HPCMEM_SEG_SHARED, &s1);
  ok = ok && s1.current_bytes == s0.current_bytes && hpcmem_check() == 0;
  verdict("free", ok);

  /* a block the report will show: rank r keeps (r+1) MiB in the shared segment */
  void *kept = hpcmem_malloc_seg((size_t)(rank + 1) << 20, HPCMEM_SEG_SHARED);
  /* and (r+1) MiB placed in DRAM, for the report's placement fields */
  void *placed = hpcmem_place_alloc((size_t)(rank + 1) << 20, NULL);
  (void)kept; (void)placed;
  MPI_Finalize();
  return fails ? 1 : 0;
}
