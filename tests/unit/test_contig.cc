// Unit tests of the contiguous arenas (src/place/contig.c): CLMalloc Table 2,
// the bitmap against a reference model, pre-allocation (page faults),
// HPCMEM_PREALLOC, NUMA binding (get_mempolicy) and the node-list errors.
#include <gtest/gtest.h>
#include <errno.h>
#include <numaif.h>
#include <stdint.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>
#include <random>
#include <string>
#include <vector>

extern "C" {
#include "place/contig.h"
#include "prim/prim.h"
#include "topo/topo.h"
#include "util/options.h"
}

extern char **environ;

namespace {

const size_t KiB = 1024, MiB = 1024 * 1024;

hpcmem_contig_config_t config(size_t region, int n, int mode = HPCMEM_CONTIG_GLOBAL,
                              size_t prealloc = HPCMEM_CONTIG_NO_PREALLOC) {
  hpcmem_contig_config_t c = {};
  c.region_size = region;
  c.nregions = n;
  c.mode = mode;
  c.prealloc = prealloc;
  return c;
}

struct Arena {
  hpcmem_contig_t *a = nullptr;
  explicit Arena(const hpcmem_contig_config_t &c) { EXPECT_EQ(0, hpcmem_contig_create(&c, &a)); }
  ~Arena() {
    if (a) { EXPECT_EQ(0, hpcmem_contig_destroy(a)); }
  }
  Arena(const Arena &) = delete;
  Arena &operator=(const Arena &) = delete;
};

long minflt() {
  struct rusage ru;
  getrusage(RUSAGE_SELF, &ru);
  return ru.ru_minflt;
}

// How many 20 MiB requests 16 areas of 16 MiB hold before the first failure.
int table2_count(int mode) {
  Arena A(config(16 * MiB, 16, mode));
  int n = 0;
  while (hpcmem_contig_malloc(A.a, 20 * MiB)) n++;
  EXPECT_EQ(ENOMEM, errno);
  return n;
}

}  // namespace

// CLMalloc Table 2: the per-area baseline fits 8 requests of 20 MiB, the global bitmap 12.
TEST(hpcmem_contig_malloc, Table2PerAreaBaselineFits8) { EXPECT_EQ(8, table2_count(HPCMEM_CONTIG_PER_AREA)); }
TEST(hpcmem_contig_malloc, Table2GlobalBitmapFits12) { EXPECT_EQ(12, table2_count(HPCMEM_CONTIG_GLOBAL)); }

// The other rows of Table 2 (1 MiB, 8 MiB, 100 MiB) succeed in both modes.
TEST(hpcmem_contig_malloc, Table2SmallerRowsBothModes) {
  for (int mode : {HPCMEM_CONTIG_GLOBAL, HPCMEM_CONTIG_PER_AREA})
    for (size_t size : {1 * MiB, 8 * MiB, 100 * MiB}) {
      Arena A(config(16 * MiB, 16, mode));
      void *p = hpcmem_contig_malloc(A.a, size);
      EXPECT_NE(nullptr, p) << "mode " << mode << " size " << size;
      EXPECT_EQ(0, hpcmem_contig_free(A.a, p));
    }
}

// The global bitmap places the 20 MiB requests back to back (Table 1: start_zone, offset).
TEST(hpcmem_contig_block, GlobalRunsCrossRegionBoundaries) {
  Arena A(config(16 * MiB, 16));
  for (int i = 0; i < 12; i++) {
    char *p = (char *)hpcmem_contig_malloc(A.a, 20 * MiB);
    ASSERT_NE(nullptr, p);
    hpcmem_contig_block_t b;
    ASSERT_EQ(0, hpcmem_contig_block(A.a, p, &b));
    size_t start = (size_t)i * 20 * MiB;
    EXPECT_EQ((int)(start / (16 * MiB)), b.first_region) << i;
    EXPECT_EQ(start % (16 * MiB), b.offset) << i;
    EXPECT_EQ((int)((start + 20 * MiB - 1) / (16 * MiB)), b.last_region) << i;
  }
  hpcmem_contig_stats_t st;
  ASSERT_EQ(0, hpcmem_contig_stats(A.a, &st));
  EXPECT_EQ(12u, st.live);
  EXPECT_EQ(12u, st.spanning);
  EXPECT_EQ(16 * MiB, st.largest_free);   // 256 - 240 MiB, all in the last region
}

// The baseline's small requests stay inside one region.
TEST(hpcmem_contig_malloc, PerAreaSmallRequestsNeverSpan) {
  Arena A(config(1 * MiB, 8, HPCMEM_CONTIG_PER_AREA));
  int got = 0;
  while (void *p = hpcmem_contig_malloc(A.a, 384 * KiB)) {
    hpcmem_contig_block_t b;
    ASSERT_EQ(0, hpcmem_contig_block(A.a, p, &b));
    EXPECT_EQ(b.first_region, b.last_region);
    got++;
  }
  EXPECT_EQ(16, got);   // two per 1 MiB region; global first fit would fit 21
  hpcmem_contig_stats_t st;
  ASSERT_EQ(0, hpcmem_contig_stats(A.a, &st));
  EXPECT_EQ(0u, st.spanning);
}

// Random allocations and frees against a model bitmap: every address is the
// model's first fit, and the per-region counters match.
TEST(hpcmem_contig_malloc, FirstFitMatchesModel) {
  const size_t chunk = 64 * KiB, region = 1 * MiB;
  const int R = 7;                         // 112 chunks: the last word is partial
  Arena A(config(region, R));
  const size_t N = region / chunk * R;
  std::vector<char> used(N, 0);
  std::vector<std::pair<char *, size_t>> live;
  std::mt19937 rng(42);
  char *base = nullptr;
  hpcmem_contig_region_t r0;
  ASSERT_EQ(0, hpcmem_contig_region(A.a, 0, &r0));
  base = (char *)r0.base;
  for (int step = 0; step < 4000; step++) {
    if (live.empty() || rng() % 3) {
      size_t n = 1 + rng() % 40;
      size_t want = SIZE_MAX;
      for (size_t s = 0; s + n <= N && want == SIZE_MAX; s++) {
        size_t k = 0;
        while (k < n && !used[s + k]) k++;
        if (k == n) want = s;
      }
      char *p = (char *)hpcmem_contig_malloc(A.a, n * chunk - rng() % chunk);
      if (want == SIZE_MAX) { ASSERT_EQ(nullptr, p) << step; continue; }
      ASSERT_EQ(base + want * chunk, p) << step;
      for (size_t k = 0; k < n; k++) used[want + k] = 1;
      live.push_back({p, n});
    } else {
      size_t i = rng() % live.size();
      ASSERT_EQ(0, hpcmem_contig_free(A.a, live[i].first));
      size_t s = (size_t)(live[i].first - base) / chunk;
      for (size_t k = 0; k < live[i].second; k++) used[s + k] = 0;
      live.erase(live.begin() + (long)i);
    }
    if (step % 97 == 0)
      for (int r = 0; r < R; r++) {
        hpcmem_contig_region_t ri;
        ASSERT_EQ(0, hpcmem_contig_region(A.a, r, &ri));
        size_t f = 0;
        for (size_t k = 0; k < region / chunk; k++) f += !used[r * (region / chunk) + k];
        ASSERT_EQ(f * chunk, ri.free_bytes) << "step " << step << " region " << r;
      }
  }
}

// Pre-allocated memory is faulted in once at creation; a spanning run in it is
// written, freed and allocated again without one new page fault.
TEST(hpcmem_contig_create, PreallocReusedWithoutPageFaults) {
  const size_t total = 64 * MiB;
  long f0 = minflt();
  Arena A(config(16 * MiB, 4, HPCMEM_CONTIG_GLOBAL, total));
  long created = minflt() - f0;
  EXPECT_GE(created, (long)(total / 4096 / 2)) << "creation should pay the faults";
  long f1 = minflt();
  for (int round = 0; round < 3; round++) {
    char *p = (char *)hpcmem_contig_malloc(A.a, 40 * MiB);
    ASSERT_NE(nullptr, p);
    for (size_t o = 0; o < 40 * MiB; o += 4096) p[o] = (char)round;
    char *q = (char *)hpcmem_contig_malloc(A.a, 20 * MiB);
    ASSERT_NE(nullptr, q);
    memset(q, 1, 20 * MiB);
    ASSERT_EQ(0, hpcmem_contig_free(A.a, p));
    ASSERT_EQ(0, hpcmem_contig_free(A.a, q));
  }
  EXPECT_LT(minflt() - f1, 64) << "reuse of pre-allocated memory must not fault";
  hpcmem_contig_stats_t st;
  ASSERT_EQ(0, hpcmem_contig_stats(A.a, &st));
  EXPECT_EQ(total, st.prealloc_bytes);
}

// Without pre-allocation every first touch faults, and a freed run goes back
// to the system (touching it again faults again).
TEST(hpcmem_contig_free, WithoutPreallocPagesGoBack) {
  Arena A(config(8 * MiB, 2));
  for (int round = 0; round < 2; round++) {
    long f = minflt();
    char *p = (char *)hpcmem_contig_malloc(A.a, 12 * MiB);
    ASSERT_NE(nullptr, p);
    for (size_t o = 0; o < 12 * MiB; o += 4096) p[o] = 1;
    EXPECT_GE(minflt() - f, (long)(12 * MiB / (2 * MiB))) << "round " << round;
    EXPECT_EQ(0, p[4096 * 7 + 1]);
    ASSERT_EQ(0, hpcmem_contig_free(A.a, p));
  }
}

// config.prealloc 0 takes HPCMEM_PREALLOC; HPCMEM_CONTIG_NO_PREALLOC overrides it;
// more than the arena is capped at the arena.
TEST(hpcmem_contig_create, PreallocFromOption) {
  char e1[] = "HPCMEM_PREALLOC=3M";
  char *env[] = {e1, nullptr};
  _hpcmem_options_load(env);
  hpcmem_contig_stats_t st;
  {
    Arena A(config(1 * MiB, 8, HPCMEM_CONTIG_GLOBAL, 0));
    ASSERT_EQ(0, hpcmem_contig_stats(A.a, &st));
    EXPECT_EQ(3 * MiB, st.prealloc_bytes);
  }
  {
    Arena A(config(1 * MiB, 8));
    ASSERT_EQ(0, hpcmem_contig_stats(A.a, &st));
    EXPECT_EQ(0u, st.prealloc_bytes);
  }
  {
    Arena A(config(1 * MiB, 2, HPCMEM_CONTIG_GLOBAL, 100 * MiB));
    ASSERT_EQ(0, hpcmem_contig_stats(A.a, &st));
    EXPECT_EQ(2 * MiB, st.prealloc_bytes);
  }
  _hpcmem_options_load(environ);
}

// Regions given nodes are bound (MPOL_BIND) to them; pages land there.
TEST(hpcmem_contig_create, NodesBindEveryRegion) {
  hpcmem_numa_info_t first;
  ASSERT_EQ(0, _hpcmem_topo_numa_info(0, &first));
  std::string node = std::to_string(first.os_index);
  hpcmem_contig_config_t c = config(2 * MiB, 0, HPCMEM_CONTIG_GLOBAL, 4 * MiB);
  c.nodes = "all";
  Arena A(c);
  hpcmem_contig_stats_t st;
  ASSERT_EQ(0, hpcmem_contig_stats(A.a, &st));
  EXPECT_EQ(_hpcmem_topo_numa_count(), st.nregions);
  for (int r = 0; r < st.nregions; r++) {
    hpcmem_contig_region_t ri;
    ASSERT_EQ(0, hpcmem_contig_region(A.a, r, &ri));
    int mode = -1;
    unsigned long mask[HPCMEM_TOPO_MASK_LONGS] = {0};
    ASSERT_EQ(0, get_mempolicy(&mode, mask, HPCMEM_TOPO_MAX_NODE_OS, ri.base, MPOL_F_ADDR)) << strerror(errno);
    EXPECT_EQ(MPOL_BIND, mode) << "region " << r;
    EXPECT_TRUE(mask[ri.node / 64] >> (ri.node % 64) & 1) << "region " << r;
    int where = -1;   // the pre-allocated page is on the bound node
    ASSERT_EQ(0, get_mempolicy(&where, nullptr, 0, ri.base, MPOL_F_ADDR | MPOL_F_NODE));
    EXPECT_EQ(ri.node, where);
  }
  // more regions than nodes: blocks of regions share a node; still bound
  hpcmem_contig_config_t c2 = config(1 * MiB, 4);
  c2.nodes = node.c_str();
  Arena B(c2);
  for (int r = 0; r < 4; r++) {
    hpcmem_contig_region_t ri;
    ASSERT_EQ(0, hpcmem_contig_region(B.a, r, &ri));
    EXPECT_EQ(first.os_index, ri.node);
    int mode = -1;
    ASSERT_EQ(0, get_mempolicy(&mode, nullptr, 0, ri.base, MPOL_F_ADDR));
    EXPECT_EQ(MPOL_BIND, mode);
  }
  // no nodes: no binding, node -1
  Arena C(config(1 * MiB, 2));
  hpcmem_contig_region_t ri;
  ASSERT_EQ(0, hpcmem_contig_region(C.a, 1, &ri));
  EXPECT_EQ(-1, ri.node);
  int mode = -1;
  ASSERT_EQ(0, get_mempolicy(&mode, nullptr, 0, ri.base, MPOL_F_ADDR));
  EXPECT_EQ(MPOL_DEFAULT, mode);
}

TEST(hpcmem_contig_create, NodesThatDoNotExistENODEV) {
  hpcmem_contig_config_t c = config(1 * MiB, 4);
  c.nodes = "0-99";
  hpcmem_contig_t *a = (hpcmem_contig_t *)0x1;
  testing::internal::CaptureStderr();
  EXPECT_EQ(-ENODEV, hpcmem_contig_create(&c, &a));
  std::string err = testing::internal::GetCapturedStderr();
  EXPECT_NE(std::string::npos, err.find("hpcmem_contig_create: nodes")) << err;
  EXPECT_NE(std::string::npos, err.find("does not exist")) << err;
  EXPECT_EQ((hpcmem_contig_t *)0x1, a) << "out untouched on failure";
  c.nodes = "0-";
  EXPECT_EQ(-EINVAL, hpcmem_contig_create(&c, &a));
}

TEST(hpcmem_contig_create, RegionSizeNotPageMultipleEINVAL) {
  hpcmem_contig_config_t c = config(1 * MiB + 100, 4);
  hpcmem_contig_t *a = nullptr;
  testing::internal::CaptureStderr();
  EXPECT_EQ(-EINVAL, hpcmem_contig_create(&c, &a));
  std::string err = testing::internal::GetCapturedStderr();
  EXPECT_NE(std::string::npos, err.find("region_size 1048676 is not a positive multiple of the page size")) << err;
  EXPECT_EQ(nullptr, a);
}

// chunk 0 picks the largest power of two up to 64 KiB that divides region_size.
TEST(hpcmem_contig_create, DefaultChunkFollowsRegionSize) {
  Arena A(config(12 * KiB, 3));
  hpcmem_contig_stats_t st;
  ASSERT_EQ(0, hpcmem_contig_stats(A.a, &st));
  EXPECT_EQ(4 * KiB, st.chunk);
  void *p = hpcmem_contig_malloc(A.a, 36 * KiB);
  EXPECT_NE(nullptr, p);
  Arena B(config(1 * MiB, 1));
  ASSERT_EQ(0, hpcmem_contig_stats(B.a, &st));
  EXPECT_EQ(64 * KiB, st.chunk);
}
