// Public API of the contiguous arenas (include/hpcmem_contig.h): spanning
// allocations, free and reuse, threads, and every bad input we promise to
// survive (NULL/unknown/destroyed arenas, foreign, interior and twice-freed
// pointers, zero and oversized requests, bad configurations, the wrong API).
#include <gtest/gtest.h>
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <string>
#include <thread>
#include <vector>

#include "hpcmem_contig.h"

namespace {

const size_t KiB = 1024, MiB = 1024 * 1024;

hpcmem_contig_t *make(size_t region, int n, int mode = HPCMEM_CONTIG_GLOBAL) {
  hpcmem_contig_config_t c = {};
  c.region_size = region;
  c.nregions = n;
  c.mode = mode;
  c.prealloc = HPCMEM_CONTIG_NO_PREALLOC;
  hpcmem_contig_t *a = nullptr;
  EXPECT_EQ(0, hpcmem_contig_create(&c, &a));
  return a;
}

// Runs f with stderr captured; returns what it printed.
template <class F> std::string stderr_of(F f) {
  testing::internal::CaptureStderr();
  f();
  return testing::internal::GetCapturedStderr();
}

bool has(const std::string &s, const char *what) { return s.find(what) != std::string::npos; }

}  // namespace

TEST(hpcmem_contig_create, BadConfigurations) {
  hpcmem_contig_t *a = nullptr;
  hpcmem_contig_config_t c = {};
  c.region_size = 1 * MiB;
  c.nregions = 2;
  EXPECT_EQ(-EINVAL, hpcmem_contig_create(nullptr, &a));
  EXPECT_EQ(-EINVAL, hpcmem_contig_create(&c, nullptr));
  hpcmem_contig_config_t d = c;
  d.nregions = 0;   // and no nodes
  EXPECT_TRUE(has(stderr_of([&] { EXPECT_EQ(-EINVAL, hpcmem_contig_create(&d, &a)); }), "nregions 0"));
  d = c;
  d.nregions = -3;
  EXPECT_EQ(-EINVAL, hpcmem_contig_create(&d, &a));
  d = c;
  d.chunk = 3 * 4096;
  EXPECT_TRUE(has(stderr_of([&] { EXPECT_EQ(-EINVAL, hpcmem_contig_create(&d, &a)); }), "power of two"));
  d.chunk = 2 * MiB;   // larger than a region, so it cannot divide it
  EXPECT_EQ(-EINVAL, hpcmem_contig_create(&d, &a));
  d = c;
  d.mode = 7;
  EXPECT_EQ(-EINVAL, hpcmem_contig_create(&d, &a));
  d = c;
  d.region_size = 5000;
  EXPECT_TRUE(has(stderr_of([&] { EXPECT_EQ(-EINVAL, hpcmem_contig_create(&d, &a)); }), "multiple of the page size"));
  d = c;
  d.nodes = "0-99";
  EXPECT_TRUE(has(stderr_of([&] { EXPECT_EQ(-ENODEV, hpcmem_contig_create(&d, &a)); }), "does not exist"));
  d.nodes = "zero";
  EXPECT_EQ(-EINVAL, hpcmem_contig_create(&d, &a));
  d = c;
  d.region_size = (size_t)1 << 62;
  d.nregions = 8;
  EXPECT_EQ(-ENOMEM, hpcmem_contig_create(&d, &a));
  EXPECT_EQ(nullptr, a);
}

// A request of 2.5 regions is one range, writable and readable end to end.
TEST(hpcmem_contig_malloc, SpanningIsContiguousAndWritable) {
  hpcmem_contig_t *a = make(4 * MiB, 4);
  char *head = (char *)hpcmem_contig_malloc(a, 1 * MiB);   // the big one starts mid-region
  ASSERT_NE(nullptr, head);
  const size_t n = 10 * MiB;
  uint64_t *p = (uint64_t *)hpcmem_contig_malloc(a, n);
  ASSERT_NE(nullptr, p);
  EXPECT_EQ(head + 1 * MiB, (char *)p);
  EXPECT_EQ(0u, (uintptr_t)p % (64 * KiB));
  for (size_t i = 0; i < n / 8; i++) p[i] = i * 0x9E3779B97F4A7C15ULL;
  size_t bad = 0;
  for (size_t i = 0; i < n / 8; i++) bad += p[i] != i * 0x9E3779B97F4A7C15ULL;
  EXPECT_EQ(0u, bad);
  hpcmem_contig_block_t b;
  ASSERT_EQ(0, hpcmem_contig_block(a, p, &b));
  EXPECT_EQ(0, b.first_region);
  EXPECT_EQ(2, b.last_region);
  EXPECT_EQ(1 * MiB, b.offset);
  EXPECT_EQ(a, hpcmem_contig_owner((char *)p + n - 1));
  EXPECT_EQ(0, hpcmem_contig_free(a, p));
  EXPECT_EQ(0, hpcmem_contig_free(a, head));
  EXPECT_EQ(0, hpcmem_contig_destroy(a));
}

TEST(hpcmem_contig_malloc, BadInputs) {
  hpcmem_contig_t *a = make(1 * MiB, 2);
  errno = 0;
  EXPECT_EQ(nullptr, hpcmem_contig_malloc(nullptr, 100));
  EXPECT_EQ(EINVAL, errno);
  int not_an_arena = 0;   // an unknown id is recognised without being read
  errno = 0;
  EXPECT_TRUE(has(stderr_of([&] { EXPECT_EQ(nullptr, hpcmem_contig_malloc((hpcmem_contig_t *)&not_an_arena, 100)); }),
                  "not a live arena"));
  EXPECT_EQ(EINVAL, errno);
  errno = 0;
  EXPECT_EQ(nullptr, hpcmem_contig_malloc(a, 0));
  EXPECT_EQ(EINVAL, errno);
  errno = 0;
  EXPECT_TRUE(has(stderr_of([&] { EXPECT_EQ(nullptr, hpcmem_contig_malloc(a, 2 * MiB + 1)); }), "larger than the whole arena"));
  EXPECT_EQ(ENOMEM, errno);
  errno = 0;
  EXPECT_EQ(nullptr, hpcmem_contig_malloc(a, SIZE_MAX));
  EXPECT_EQ(ENOMEM, errno);
  void *all = hpcmem_contig_malloc(a, 2 * MiB);   // exactly the arena
  ASSERT_NE(nullptr, all);
  errno = 0;
  EXPECT_EQ(nullptr, hpcmem_contig_malloc(a, 1));   // full
  EXPECT_EQ(ENOMEM, errno);
  hpcmem_contig_stats_t st;
  ASSERT_EQ(0, hpcmem_contig_stats(a, &st));
  EXPECT_EQ(3u, st.failures);   // too large twice, full once
  EXPECT_EQ(0u, st.free_bytes);
  EXPECT_EQ(0, hpcmem_contig_destroy(a));
  errno = 0;
  EXPECT_EQ(nullptr, hpcmem_contig_malloc(a, 100));   // destroyed
  EXPECT_EQ(EINVAL, errno);
}

TEST(hpcmem_contig_free, FreeAndReuse) {
  hpcmem_contig_t *a = make(1 * MiB, 4);
  void *p = hpcmem_contig_malloc(a, 1536 * KiB);
  void *q = hpcmem_contig_malloc(a, 512 * KiB);
  ASSERT_NE(nullptr, p);
  ASSERT_NE(nullptr, q);
  EXPECT_EQ(0, hpcmem_contig_free(a, p));
  EXPECT_EQ(p, hpcmem_contig_malloc(a, 1 * MiB));        // first fit reuses the hole
  EXPECT_EQ((char *)p + 1 * MiB, hpcmem_contig_malloc(a, 512 * KiB));
  EXPECT_EQ(0, hpcmem_contig_free(a, nullptr));
  hpcmem_contig_stats_t st;
  ASSERT_EQ(0, hpcmem_contig_stats(a, &st));
  EXPECT_EQ(3u, st.live);
  EXPECT_EQ(4 * MiB - 2 * MiB, st.free_bytes);
  EXPECT_EQ(2 * MiB, st.largest_free);
  EXPECT_EQ(0, hpcmem_contig_destroy(a));
}

TEST(hpcmem_contig_free, BadPointers) {
  hpcmem_contig_t *a = make(1 * MiB, 2);
  hpcmem_contig_t *b = make(1 * MiB, 2);
  char *p = (char *)hpcmem_contig_malloc(a, 300 * KiB);
  char *q = (char *)hpcmem_contig_malloc(b, 300 * KiB);
  ASSERT_NE(nullptr, p);
  ASSERT_NE(nullptr, q);
  memset(p, 0x5a, 300 * KiB);
  void *m = malloc(64);
  EXPECT_TRUE(has(stderr_of([&] { EXPECT_EQ(-EINVAL, hpcmem_contig_free(a, m)); }), "not in this arena"));
  free(m);
  EXPECT_TRUE(has(stderr_of([&] { EXPECT_EQ(-EINVAL, hpcmem_contig_free(a, q)); }), "another arena"));
  EXPECT_TRUE(has(stderr_of([&] { EXPECT_EQ(-EINVAL, hpcmem_contig_free(a, p + 8)); }), "interior pointer"));
  EXPECT_TRUE(has(stderr_of([&] { EXPECT_EQ(-EINVAL, hpcmem_contig_free(a, p + 128 * KiB)); }), "interior pointer"));
  EXPECT_TRUE(has(stderr_of([&] { EXPECT_EQ(-EINVAL, hpcmem_contig_free(a, p + 512 * KiB)); }), "no live allocation"));
  EXPECT_EQ(-EINVAL, hpcmem_contig_free(nullptr, p));
  EXPECT_EQ(-EINVAL, hpcmem_contig_free((hpcmem_contig_t *)&m, p));
  // the allocation survived all of that untouched
  size_t bad = 0;
  for (size_t i = 0; i < 300 * KiB; i++) bad += p[i] != 0x5a;
  EXPECT_EQ(0u, bad);
  EXPECT_EQ(0, hpcmem_contig_free(a, p));
  EXPECT_TRUE(has(stderr_of([&] { EXPECT_EQ(-EINVAL, hpcmem_contig_free(a, p)); }), "double free"));
  hpcmem_contig_stats_t st;
  ASSERT_EQ(0, hpcmem_contig_stats(a, &st));
  EXPECT_EQ(0u, st.live);
  EXPECT_EQ(2 * MiB, st.free_bytes);
  EXPECT_EQ(0, hpcmem_contig_destroy(a));
  EXPECT_EQ(0, hpcmem_contig_destroy(b));
}

// free() handed a contiguous pointer reports it (HPCMEM_ON_ERROR, default abort)
// and never gives the range to anyone else.
TEST(hpcmem_contig_free, PlainFreeOfContigPointerIsReported) {
  testing::FLAGS_gtest_death_test_style = "threadsafe";
  hpcmem_contig_t *a = make(1 * MiB, 2);
  void *p = hpcmem_contig_malloc(a, 100 * KiB);
  ASSERT_NE(nullptr, p);
  EXPECT_DEATH(free(p), "free\\(0x[0-9a-f]+\\)");
  EXPECT_EQ(0, hpcmem_contig_free(a, p));
  EXPECT_EQ(0, hpcmem_contig_destroy(a));
}

TEST(hpcmem_contig_destroy, UnknownAndTwice) {
  EXPECT_EQ(-EINVAL, hpcmem_contig_destroy(nullptr));
  hpcmem_contig_t *a = make(1 * MiB, 1);
  void *p = hpcmem_contig_malloc(a, 4096);   // live allocations go with the arena
  ASSERT_NE(nullptr, p);
  EXPECT_EQ(a, hpcmem_contig_owner(p));
  EXPECT_EQ(0, hpcmem_contig_destroy(a));
  EXPECT_EQ(nullptr, hpcmem_contig_owner(p));
  EXPECT_TRUE(has(stderr_of([&] { EXPECT_EQ(-EINVAL, hpcmem_contig_destroy(a)); }), "not a live arena"));
  EXPECT_EQ(-EINVAL, hpcmem_contig_free(a, p));
}

TEST(hpcmem_contig_stats, BadInputs) {
  hpcmem_contig_stats_t st;
  EXPECT_EQ(-EINVAL, hpcmem_contig_stats(nullptr, &st));
  hpcmem_contig_t *a = make(1 * MiB, 3);
  EXPECT_EQ(-EINVAL, hpcmem_contig_stats(a, nullptr));
  ASSERT_EQ(0, hpcmem_contig_stats(a, &st));
  EXPECT_EQ(3 * MiB, st.arena_bytes);
  EXPECT_EQ(3, st.nregions);
  EXPECT_EQ(64 * KiB, st.chunk);
  EXPECT_EQ(0u, st.prealloc_bytes);
  EXPECT_EQ(0, hpcmem_contig_destroy(a));
}

TEST(hpcmem_contig_region, BadInputs) {
  hpcmem_contig_t *a = make(1 * MiB, 3);
  hpcmem_contig_region_t r;
  EXPECT_EQ(-EINVAL, hpcmem_contig_region(a, -1, &r));
  EXPECT_EQ(-EINVAL, hpcmem_contig_region(a, 3, &r));
  EXPECT_EQ(-EINVAL, hpcmem_contig_region(a, 0, nullptr));
  EXPECT_EQ(-EINVAL, hpcmem_contig_region(nullptr, 0, &r));
  ASSERT_EQ(0, hpcmem_contig_region(a, 2, &r));
  EXPECT_EQ(1 * MiB, r.free_bytes);
  EXPECT_EQ(1 * MiB, r.largest_free);
  EXPECT_EQ(-1, r.node);
  EXPECT_EQ(0, hpcmem_contig_destroy(a));
}

TEST(hpcmem_contig_block, BadInputs) {
  hpcmem_contig_t *a = make(1 * MiB, 2);
  char *p = (char *)hpcmem_contig_malloc(a, 100 * KiB);
  hpcmem_contig_block_t b;
  EXPECT_EQ(-EINVAL, hpcmem_contig_block(a, p + 1, &b));
  EXPECT_EQ(-EINVAL, hpcmem_contig_block(a, &b, &b));
  EXPECT_EQ(-EINVAL, hpcmem_contig_block(a, p, nullptr));
  EXPECT_EQ(-EINVAL, hpcmem_contig_block(nullptr, p, &b));
  ASSERT_EQ(0, hpcmem_contig_block(a, p, &b));
  EXPECT_EQ(128 * KiB, b.size);
  EXPECT_EQ(0, hpcmem_contig_destroy(a));
}

TEST(hpcmem_contig_owner, MallocMemoryHasNoArena) {
  void *m = malloc(100);
  EXPECT_EQ(nullptr, hpcmem_contig_owner(m));
  EXPECT_EQ(nullptr, hpcmem_contig_owner(nullptr));
  free(m);
}

// Threads allocating and freeing at once never get overlapping ranges.
TEST(hpcmem_contig_malloc, ThreadsNeverOverlap) {
  hpcmem_contig_t *a = make(1 * MiB, 16);
  std::vector<std::thread> th;
  std::vector<int> errors(4, 0);
  for (int t = 0; t < 4; t++)
    th.emplace_back([a, t, &errors] {
      std::vector<std::pair<unsigned char *, size_t>> mine;
      for (int i = 0; i < 3000; i++) {
        size_t n = (size_t)(1 + (i * 7 + t) % 13) * 40 * KiB;
        if (unsigned char *p = (unsigned char *)hpcmem_contig_malloc(a, n)) {
          memset(p, t + 1, n);
          mine.push_back({p, n});
        }
        if (mine.size() > 4 || (!mine.empty() && i % 3 == 0)) {
          auto [p, len] = mine.front();
          for (size_t k = 0; k < len; k += 512) errors[t] += p[k] != t + 1;
          errors[t] += hpcmem_contig_free(a, p) != 0;
          mine.erase(mine.begin());
        }
      }
      for (auto [p, len] : mine) errors[t] += hpcmem_contig_free(a, p) != 0;
    });
  for (auto &x : th) x.join();
  for (int t = 0; t < 4; t++) EXPECT_EQ(0, errors[t]) << "thread " << t;
  hpcmem_contig_stats_t st;
  ASSERT_EQ(0, hpcmem_contig_stats(a, &st));
  EXPECT_EQ(0u, st.live);
  EXPECT_EQ(16 * MiB, st.free_bytes);
  EXPECT_EQ(0, hpcmem_contig_destroy(a));
}
