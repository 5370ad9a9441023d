/* Node-wide capacity accounting (issue 7 item 4), on 4 ranks of one node
 * with the KNL-like topology (HPCMEM_TOPOLOGY=tests/data/knl-snc4-flat.xml)
 * and HBM scaled down to 64 MiB on every rank:
 *   1. rank 0 takes 48 MiB of HBM (SPILL_OVER HBM->DRAM, IMMEDIATE);
 *   2. ranks 1-3 each ask for 32 MiB the same way (ranks 1, 2 IMMEDIATE,
 *      rank 3 ON_COMMIT + hpcmem_commit): alone each would fit HBM, with
 *      rank 0's 48 MiB only 16 MiB of HBM is left on the node, so all of
 *      them spill to DRAM and the node's HBM total is exactly 64 MiB;
 *   3. rank 0 frees: a 40 MiB request on rank 1 fits HBM again;
 *   4. all four ranks race for HBM in 1 MiB requests: the node lock lets
 *      the node hold exactly 64 MiB, never more;
 *   5. all four ranks take and free 24 MiB in a loop: the node never
 *      holds more than 64 MiB (a snapshot under the node lock);
 *   6. after MPI_Finalize each rank is alone again (the window is gone and
 *      placement still works).
 * Decisions are read with hpcmem_where (the requested class of each piece:
 * this machine has no MCDRAM, the kernel columns are not consulted).
 * Rank 0 prints one gtest-style line per case; exit status 1 on failure. */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <hpcmem_place.h>

#define MiB (1ull << 20)

static int rank, fails;

typedef struct { unsigned long long hbm, dram, other; } split_t;

static split_t split_of(void *p, size_t len) {
  split_t s = {0, 0, 0};
  hpcmem_where_t w[16];
  int n = hpcmem_where(p, len, w, 16);
  if (n <= 0 || n > 16) { s.other = len; return s; }
  for (int i = 0; i < n; i++) {
    if (w[i].cls == HPCMEM_CLASS_HBM && w[i].nodes == 0xF0) s.hbm += w[i].length;
    else if (w[i].cls == HPCMEM_CLASS_DRAM && w[i].nodes == 0x0F) s.dram += w[i].length;
    else s.other += w[i].length;
  }
  return s;
}

static void *spill(size_t size, int mapping) {
  hpcmem_place_attr_t a;
  hpcmem_place_attr_init(&a);
  hpcmem_place_attr_add(&a, HPCMEM_CLASS_HBM, HPCMEM_INDEX_ALL);
  hpcmem_place_attr_add(&a, HPCMEM_CLASS_DRAM, HPCMEM_INDEX_ALL);
  a.split = HPCMEM_SPLIT_SPILL_OVER;
  a.mapping = mapping;
  a.mismatch = HPCMEM_MISMATCH_FALLBACK;
  return hpcmem_place_alloc(size, &a);
}

static unsigned long long hbm_used_by_others(void) {
  hpcmem_class_info_t c[4];
  int n = hpcmem_classes(c, 4);
  for (int i = 0; i < n && i < 4; i++)
    if (c[i].cls == HPCMEM_CLASS_HBM) return c[i].used_node;
  return ~0ull;
}

/* every rank's verdict reaches rank 0, which prints the case */
static void verdict(const char *name, int ok_here, const char *why) {
  int all = 0;
  MPI_Allreduce(&ok_here, &all, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
  if (!ok_here) fprintf(stderr, "rank %d: %s: %s\n", rank, name, why);
  if (rank == 0) {
    if (all) printf("[       OK ] place_share.%s\n", name);
    else printf("[  FAILED  ] place_share.%s (see the ranks' stderr)\n", name);
    fflush(stdout);
  }
  if (!all) fails++;
}

int main(int argc, char **argv) {
  MPI_Init(&argc, &argv);
  int size;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  char why[256] = "";
  int ok;

  hpcmem_class_info_t c[4];
  int n = hpcmem_classes(c, 4);
  ok = size == 4 && n == 2 && c[1].cls == HPCMEM_CLASS_HBM && hpcmem_class_limit(HPCMEM_CLASS_HBM, 64 * MiB) == 0;
  snprintf(why, sizeof why, "%d ranks, %d classes: not 4 ranks on the KNL topology", size, n);
  verdict("knl_topology_on_4_ranks", ok, why);
  if (!ok) { MPI_Finalize(); return 1; }

  /* 1. rank 0 fills most of HBM */
  void *big = NULL;
  ok = 1;
  if (rank == 0) {
    big = spill(48 * MiB, HPCMEM_MAP_IMMEDIATE);
    split_t s = big ? split_of(big, 48 * MiB) : (split_t){0, 0, 0};
    ok = big && s.hbm == 48 * MiB;
    snprintf(why, sizeof why, "48 MiB: %llu MiB HBM, %llu MiB DRAM", s.hbm / MiB, s.dram / MiB);
  }
  verdict("rank0_fills_hbm", ok, why);

  /* 2. the others see it, and spill */
  unsigned long long others = hbm_used_by_others();
  ok = others == (rank == 0 ? 0 : 48 * MiB);
  snprintf(why, sizeof why, "hpcmem_classes: others hold %llu bytes of HBM", others);
  verdict("others_see_rank0_usage", ok, why);

  void *mine = NULL;
  split_t s = {0, 0, 0};
  ok = 1;
  if (rank > 0) {
    mine = spill(32 * MiB, rank == 3 ? HPCMEM_MAP_ON_COMMIT : HPCMEM_MAP_IMMEDIATE);
    int rc = rank == 3 && mine ? hpcmem_commit(HPCMEM_COMMIT_EPOCH) : 0;
    if (mine) s = split_of(mine, 32 * MiB);
    ok = mine && rc == 0 && s.hbm + s.dram == 32 * MiB && s.dram >= 16 * MiB && s.other == 0;
    snprintf(why, sizeof why, "32 MiB (%s, commit %d): %llu MiB HBM, %llu MiB DRAM, %llu other",
             rank == 3 ? "ON_COMMIT" : "IMMEDIATE", rc, s.hbm / MiB, s.dram / MiB, s.other);
  }
  verdict("spill_over_to_dram_past_node_usage", ok, why);

  unsigned long long hbm = rank == 0 ? 48 * MiB : s.hbm, total = 0;
  MPI_Allreduce(&hbm, &total, 1, MPI_UNSIGNED_LONG_LONG, MPI_SUM, MPI_COMM_WORLD);
  snprintf(why, sizeof why, "the node's ranks hold %llu MiB of HBM (64 MiB exist)", total / MiB);
  verdict("node_hbm_is_exactly_the_capacity", total == 64 * MiB, why);

  /* 3. rank 0 gives its HBM back: it fits again */
  MPI_Barrier(MPI_COMM_WORLD);
  ok = 1;
  if (rank == 0) ok = hpcmem_place_free(big) == 0;
  MPI_Barrier(MPI_COMM_WORLD);
  void *again = NULL;
  if (rank == 1) {
    again = spill(40 * MiB, HPCMEM_MAP_IMMEDIATE);
    split_t t = again ? split_of(again, 40 * MiB) : (split_t){0, 0, 0};
    ok = again && t.hbm == 40 * MiB;
    snprintf(why, sizeof why, "40 MiB after rank 0's free: %llu MiB HBM, %llu MiB DRAM", t.hbm / MiB, t.dram / MiB);
  }
  verdict("fits_hbm_after_rank0_frees", ok, why);
  if (again) hpcmem_place_free(again);
  if (mine) hpcmem_place_free(mine);
  MPI_Barrier(MPI_COMM_WORLD);
  others = hbm_used_by_others();
  snprintf(why, sizeof why, "after every free the others still hold %llu bytes of HBM", others);
  verdict("frees_are_published", others == 0, why);

  /* 4. everyone at once, 1 MiB at a time: 4 x 40 MiB asked, 64 MiB exist */
  enum { K = 40 };
  void *bits[K];
  unsigned long long got = 0;
  ok = 1;
  MPI_Barrier(MPI_COMM_WORLD);
  for (int i = 0; i < K; i++) {
    bits[i] = spill(MiB, HPCMEM_MAP_IMMEDIATE);
    if (!bits[i]) { ok = 0; continue; }
    split_t b = split_of(bits[i], MiB);
    got += b.hbm;
    if (b.hbm + b.dram != MiB) ok = 0;
  }
  MPI_Allreduce(&got, &total, 1, MPI_UNSIGNED_LONG_LONG, MPI_SUM, MPI_COMM_WORLD);
  snprintf(why, sizeof why, "racing ranks hold %llu MiB of HBM together (this rank %llu MiB)", total / MiB, got / MiB);
  verdict("racing_ranks_never_overcommit", ok && total == 64 * MiB, why);
  for (int i = 0; i < K; i++)
    if (bits[i]) hpcmem_place_free(bits[i]);

  /* 5. churn: every rank takes 24 MiB and gives it back, over and over
   * (64 MiB hold two and a half); at no instant may the node hold more
   * than 64 MiB.  Without the node lock two ranks read the same free
   * capacity and both take it: this sees it within a few hundred rounds. */
  unsigned long long worst = 0, rounds = 0, in_hbm = 0;
  double until = MPI_Wtime() + 2.0;
  MPI_Barrier(MPI_COMM_WORLD);
  for (; rounds < 3000 && MPI_Wtime() < until; rounds++) {
    void *x = spill(24 * MiB, HPCMEM_MAP_IMMEDIATE);
    if (!x) { worst = ~0ull; break; }
    hpcmem_class_info_t ci[4];
    int nc = hpcmem_classes(ci, 4);
    for (int i = 0; i < nc && i < 4; i++)
      if (ci[i].cls == HPCMEM_CLASS_HBM && ci[i].used + ci[i].used_node > worst) worst = ci[i].used + ci[i].used_node;
    in_hbm += split_of(x, 24 * MiB).hbm == 24 * MiB;
    hpcmem_place_free(x);
  }
  snprintf(why, sizeof why, "%llu rounds (%llu wholly in HBM): the node held up to %llu MiB of HBM",
           rounds, in_hbm, worst / MiB);
  verdict("churning_ranks_never_overcommit", worst <= 64 * MiB, why);
  unsigned long long mine_spilled = rounds - in_hbm, spilled = 0;
  MPI_Reduce(&mine_spilled, &spilled, 1, MPI_UNSIGNED_LONG_LONG, MPI_SUM, 0, MPI_COMM_WORLD);
  if (rank == 0)   /* how much contention the case met (0: the ranks never overlapped) */
    printf("# churn: %llu rounds spilled to DRAM over the 4 ranks\n", spilled);

  MPI_Barrier(MPI_COMM_WORLD);
  int failed = fails;
  MPI_Finalize();

  /* 6. alone again: the window is gone, placement goes on with this rank's view */
  void *p = spill(8 * MiB, HPCMEM_MAP_IMMEDIATE);
  void *q = spill(60 * MiB, HPCMEM_MAP_IMMEDIATE);
  split_t sp = p ? split_of(p, 8 * MiB) : (split_t){0, 0, 0};
  split_t sq = q ? split_of(q, 60 * MiB) : (split_t){0, 0, 0};
  if (!p || !q || hbm_used_by_others() != 0 || sp.hbm != 8 * MiB || sq.hbm != 56 * MiB) {
    fprintf(stderr, "rank %d: after MPI_Finalize: others %llu, 8 MiB -> %llu HBM, 60 MiB -> %llu HBM\n", rank,
            hbm_used_by_others(), sp.hbm / MiB, sq.hbm / MiB);
    failed = 1;
  }
  if (p) hpcmem_place_free(p);
  if (q) hpcmem_place_free(q);
  return failed ? 1 : 0;
}
