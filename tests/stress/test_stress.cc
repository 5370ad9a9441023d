// Multi-thread stress: random sizes across all tiers, frees from other threads,
// content patterns verified before every free, invariants checked as we go
// (after every operation in the single-thread phase of a --enable-debug build).
#include <gtest/gtest.h>
#include <malloc.h>
#include <atomic>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <random>
#include <thread>
#include <vector>
#include "config.h"
#include "hpcmem.h"

namespace {
struct Block { unsigned char *p; size_t n; uint8_t seed; };

size_t random_size(std::mt19937_64 &rng) {
  unsigned r = (unsigned)(rng() % 100);
  if (r < 70) return rng() % 512 + 1;
  if (r < 90) return rng() % 32768 + 1;
  if (r < 98) return rng() % 300000 + 1;
  return rng() % (8u << 20) + 1;
}

Block make(std::mt19937_64 &rng) {
  Block b;
  b.n = random_size(rng);
  b.seed = (uint8_t)rng();
  b.p = (unsigned char *)malloc(b.n);
  // pattern at both ends and a few places inside (touching every byte of 8 MiB blocks is slow)
  for (size_t i = 0; i < b.n; i += (b.n > 4096 ? 4093 : 1)) b.p[i] = (unsigned char)(b.seed + i);
  b.p[b.n - 1] = (unsigned char)(b.seed + b.n - 1);
  return b;
}

bool intact(const Block &b) {
  for (size_t i = 0; i < b.n; i += (b.n > 4096 ? 4093 : 1))
    if (b.p[i] != (unsigned char)(b.seed + i)) return false;
  return b.p[b.n - 1] == (unsigned char)(b.seed + b.n - 1) && malloc_usable_size(b.p) >= b.n;
}
}  // namespace

TEST(stress, single_thread_checked_after_every_operation) {
#ifdef HPCMEM_DEBUG
  const int ops = 3000, every = 1;
#else
  const int ops = 20000, every = 500;
#endif
  std::mt19937_64 rng(1);
  std::vector<Block> live;
  for (int i = 0; i < ops; i++) {
    if (live.empty() || rng() % 2) live.push_back(make(rng));
    else {
      size_t k = rng() % live.size();
      ASSERT_TRUE(intact(live[k])) << "corrupted block of " << live[k].n << " bytes";
      if (rng() % 4 == 0) {   // realloc keeps the prefix
        size_t m = random_size(rng);
        unsigned char *q = (unsigned char *)realloc(live[k].p, m);
        ASSERT_NE(q, nullptr);
        size_t keep = live[k].n < m ? live[k].n : m;
        for (size_t j = 0; j < keep; j += (live[k].n > 4096 ? 4093 : 1)) ASSERT_EQ(q[j], (unsigned char)(live[k].seed + j));
        free(q);
      } else {
        free(live[k].p);
      }
      live[k] = live.back();
      live.pop_back();
    }
    if (i % every == 0) {
      ASSERT_EQ(hpcmem_check(), 0) << "after operation " << i;
    }
  }
  for (auto &b : live) { ASSERT_TRUE(intact(b)); free(b.p); }
  EXPECT_EQ(hpcmem_check(), 0);
}

// kThreads threads allocate, free their own blocks and each other's
// (through `shared`), verifying contents before every free; while
// `during` runs on the calling thread.
struct CrossFrees {
  std::mutex mu;
  std::vector<Block> shared;          // blocks any thread may free
  std::atomic<int> corrupt{0};

  // drain > 0: every drain operations the thread frees all its blocks and
  // trims (spans empty out, under the other threads' refills)
  void worker(int t, int ops, int drain) {
    std::mt19937_64 rng((uint64_t)t + 100);
    std::vector<Block> mine;
    for (int i = 0; i < ops; i++) {
      if (drain && i % drain == drain - 1) {
        for (auto &b : mine) { if (!intact(b)) corrupt++; free(b.p); }
        mine.clear();
        malloc_trim(0);                 // its cache too, while the others work
      }
      unsigned r = (unsigned)(rng() % 10);
      if (r < 4) mine.push_back(make(rng));
      else if (r < 6 && !mine.empty()) {
        std::lock_guard<std::mutex> g(mu);
        shared.push_back(mine.back());
        mine.pop_back();
      } else if (r < 8) {
        Block b{nullptr, 0, 0};
        {
          std::lock_guard<std::mutex> g(mu);
          if (!shared.empty()) { size_t k = rng() % shared.size(); b = shared[k]; shared[k] = shared.back(); shared.pop_back(); }
        }
        if (b.p) { if (!intact(b)) corrupt++; free(b.p); }
      } else if (!mine.empty()) {
        size_t k = rng() % mine.size();
        if (!intact(mine[k])) corrupt++;
        free(mine[k].p);
        mine[k] = mine.back();
        mine.pop_back();
      }
      if (i % 5000 == 0 && hpcmem_check() != 0) corrupt += 1000;
    }
    for (auto &b : mine) { if (!intact(b)) corrupt++; free(b.p); }
  }

  template <class F> void run(int threads, int ops, int drain, F during) {
    std::vector<std::thread> ts;
    std::atomic<int> running{threads};
    for (int t = 0; t < threads; t++) ts.emplace_back([&, t] { worker(t, ops, drain); running--; });
    during(running);
    for (auto &t : ts) t.join();
    for (auto &b : shared) { EXPECT_TRUE(intact(b)); free(b.p); }
    EXPECT_EQ(corrupt.load(), 0);
    EXPECT_EQ(hpcmem_check(), 0);
    hpcmem_stats_t s;
    hpcmem_stats(&s);
    EXPECT_EQ(s.error_count, 0u);
  }
};

TEST(stress, threads_with_cross_thread_frees) {
  CrossFrees c;
  c.run(8, 40000, 0, [](std::atomic<int> &) {});
}

// malloc_trim empties spans and gives back large pages under threads that
// are refilling from the same heaps; mallinfo2 and malloc_info read them.
TEST(stress, threads_while_another_thread_trims) {
  CrossFrees c;
  FILE *null = fopen("/dev/null", "w");
  ASSERT_NE(null, nullptr);
  unsigned trims = 0, gave = 0;
  c.run(6, 30000, 1000, [&](std::atomic<int> &running) {
    while (running.load() > 0) {
      gave += malloc_trim(0);
      struct mallinfo2 m = mallinfo2();
      EXPECT_EQ(m.arena, m.uordblks + m.fordblks);
      if (++trims % 8 == 0) {
        EXPECT_EQ(malloc_info(0, null), 0);
      }
    }
  });
  fclose(null);
  EXPECT_GT(gave, 0u) << "of " << trims << " trims";
}
