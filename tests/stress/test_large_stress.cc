// Stress test of the large-block tier: several threads allocate, resize and
// free blocks (some freed by another thread than the one that allocated
// them) while decay runs with a short period, so madvise outside the lock
// overlaps with everything else.  Every block carries a pattern that is
// verified before it is freed; the tier's full check runs at the end.
#include <gtest/gtest.h>
#include <errno.h>
#include <stdint.h>
#include <string.h>
#include <atomic>
#include <random>
#include <thread>
#include <vector>

extern "C" {
#include "heap/large.h"
#include "prim/prim.h"
}

namespace {

const size_t KiB = 1024, MiB = 1024 * 1024;

struct Block { char *p; size_t n; uint8_t seed; };

void stamp(const Block &b) {
  // first and last 32 bytes and one byte per 32 KiB
  for (size_t i = 0; i < 32 && i < b.n; i++) b.p[i] = (char)(b.seed + i);
  for (size_t i = 32 * KiB; i + 32 < b.n; i += 32 * KiB) b.p[i] = (char)(b.seed + i);
  for (size_t i = b.n > 64 ? b.n - 32 : 32; i < b.n; i++) b.p[i] = (char)(b.seed + i);
}

bool intact(const Block &b) {
  for (size_t i = 0; i < 32 && i < b.n; i++) if (b.p[i] != (char)(b.seed + i)) return false;
  for (size_t i = 32 * KiB; i + 32 < b.n; i += 32 * KiB) if (b.p[i] != (char)(b.seed + i)) return false;
  for (size_t i = b.n > 64 ? b.n - 32 : 32; i < b.n; i++) if (b.p[i] != (char)(b.seed + i)) return false;
  return true;
}

// A small lock-free mailbox: blocks handed from one thread to another.
struct Mailbox {
  static const int N = 64;
  std::atomic<Block *> slot[N];
  Mailbox() { for (auto &s : slot) s.store(nullptr); }
};

hpcmem_large_t L;

// Four threads on tier L (set up from c); a fifth runs decay passes from
// outside, forced ones (everything dirty goes back) or ordinary ones.
void many_threads(const hpcmem_large_config_t &c, bool forced, hpcmem_large_stats_t *out) {
  ASSERT_EQ(_hpcmem_large_init(&L, &c), 0);

  const int threads = 4, ops = 20000;
  Mailbox box;
  std::atomic<int> failures{0}, running{threads};
  std::vector<std::thread> pool;
  for (int t = 0; t < threads; t++) {
    pool.emplace_back([&, t] {
      std::mt19937_64 rng(1000 + t);
      std::vector<Block> mine;
      auto release = [&](const Block &b) {
        if (!intact(b)) failures++;
        if (_hpcmem_large_free(&L, b.p, nullptr) != 0) failures++;
      };
      for (int op = 0; op < ops; op++) {
        unsigned r = (unsigned)(rng() % 100);
        if (mine.empty() || (r < 45 && mine.size() < 64)) {
          unsigned kind = (unsigned)(rng() % 64);
          size_t n = kind == 0 ? 16 * MiB + rng() % (8 * MiB)      // the huge-page arena
                     : kind < 8 ? rng() % (128 * KiB)
                     : 128 * KiB + rng() % (2 * MiB);
          size_t a = rng() % 16 ? 0 : (size_t)1 << (8 + rng() % 13);
          bool zeroed = rng() % 8 == 0;
          Block b = {(char *)(zeroed ? _hpcmem_large_alloc_zeroed(&L, n, a, nullptr)
                                     : _hpcmem_large_alloc(&L, n, a)),
                     n, (uint8_t)rng()};
          if (!b.p || (a && (uintptr_t)b.p % a)) { failures++; continue; }
          if (zeroed) {  // what stamp() will write must read as zero first
            Block z = b;
            z.seed = 0;
            for (size_t i = 0; i < 32 && i < z.n; i++) if (z.p[i]) failures++;
            for (size_t i = 32 * KiB; i + 32 < z.n; i += 32 * KiB) if (z.p[i]) failures++;
            for (size_t i = z.n > 64 ? z.n - 32 : 32; i < z.n; i++) if (z.p[i]) failures++;
          }
          stamp(b);
          mine.push_back(b);
        } else if (r < 80) {
          size_t i = rng() % mine.size();
          release(mine[i]);
          mine[i] = mine.back();
          mine.pop_back();
        } else if (r < 90) {  // hand a block to whoever picks it up
          size_t i = rng() % mine.size();
          Block *b = new Block(mine[i]);
          Block *expected = nullptr;
          if (box.slot[rng() % Mailbox::N].compare_exchange_strong(expected, b)) {
            mine[i] = mine.back();
            mine.pop_back();
          } else {
            delete b;
          }
        } else if (r < 95) {  // pick one up and free it here
          Block *b = box.slot[rng() % Mailbox::N].exchange(nullptr);
          if (b) { release(*b); delete b; }
        } else {
          Block &b = mine[rng() % mine.size()];
          if (!intact(b)) failures++;
          size_t n = rng() % 2 ? b.n / 2 + 1 : b.n + rng() % MiB;
          int rc = _hpcmem_large_resize(&L, b.p, n, NULL);
          if (rc == 0) { b.n = n; stamp(b); }
          else if (rc != -ENOMEM) failures++;
          else stamp(b);
        }
      }
      for (auto &b : mine) release(b);
      running--;
    });
  }
  std::thread decayer([&] {  // passes from outside, as a maintenance thread would
    while (running.load() > 0) {
      _hpcmem_large_decay(&L, _hpcmem_prim_now_ns(), forced);
      std::this_thread::sleep_for(std::chrono::milliseconds(2));
    }
  });
  for (auto &th : pool) th.join();
  decayer.join();
  for (auto &s : box.slot) {
    Block *b = s.exchange(nullptr);
    if (b) {
      EXPECT_TRUE(intact(*b));
      EXPECT_EQ(_hpcmem_large_free(&L, b->p, nullptr), 0);
      delete b;
    }
  }
  EXPECT_EQ(failures.load(), 0);
  EXPECT_EQ(_hpcmem_large_check(&L), 0);
  hpcmem_large_stats_t s;
  _hpcmem_large_stats(&L, &s);
  EXPECT_LE(s.quick_blocks, (size_t)HPCMEM_LARGE_QUICK);
  _hpcmem_large_decay(&L, _hpcmem_prim_now_ns(), 1);  // the quick list back into the trees
  EXPECT_EQ(_hpcmem_large_check(&L), 0);
  _hpcmem_large_stats(&L, &s);
  EXPECT_EQ(s.quick_blocks, 0u);
  EXPECT_EQ(s.live_blocks, 0u);
  EXPECT_EQ(s.free_blocks, (size_t)L.narenas);  // one free block per arena
  EXPECT_EQ(s.alloc_count, s.free_count);
  EXPECT_GT(s.decay_count, 0u);
  *out = s;
  _hpcmem_large_destroy(&L);
}

hpcmem_large_config_t config(uint64_t decay_ns, int ends, int tcache = 0) {
  hpcmem_large_config_t c = {};
  c.tcache = tcache;
  c.reserve = 64ull * 1024 * MiB;
  c.align = 256;
  c.min_split = 128 * KiB;
  c.decay_ns = decay_ns;
  c.thp = 1;  // two arenas: blocks of 16 MiB and more have their own
  c.quick = HPCMEM_LARGE_QUICK;  // blocks freed by one thread reused by another
  c.ends = ends;
  c.sweep_allocs = 32;   // the sweep all the time (with end placement on)
  return c;
}

}  // namespace

TEST(_hpcmem_large_alloc, ManyThreadsWithDecay) {
  hpcmem_large_stats_t s;
  many_threads(config(1000000, 0), true, &s);  // 1 ms: decay passes all the time
}

// End placement on, the sweep after 32 allocations: blocks land inside free
// blocks, and believed-resident pages of free blocks and inside freed ones
// go back without the lock while other threads allocate around them.
TEST(_hpcmem_large_alloc, ManyThreadsWithEndPlacementAndSweep) {
  hpcmem_large_stats_t s;
  many_threads(config(32 * 1000000ull, 1), false, &s);
  EXPECT_GT(s.land_hits, 0u);
  EXPECT_GT(s.swept_pages, 0u);
}

// Threads keep freed blocks in caches of their own (taken without the lock,
// handed between threads, taken back by decay passes from the fifth thread
// with an atomic exchange, given back at thread exit).
TEST(_hpcmem_large_alloc, ManyThreadsWithThreadCaches) {
  hpcmem_large_stats_t s;
  many_threads(config(1000000, 0, 1), false, &s);  // ordinary passes: only blocks older than 1 ms
  EXPECT_GT(s.tcache_hits, 0u);
  EXPECT_EQ(s.tcache_blocks, 0u);   // the threads exited
  EXPECT_GT(s.tcache_offs, 0u);     // random frees of up to 64 blocks miss: the caches switched off
                                    // (and on again for their probes) while other threads went on
  many_threads(config(1000000, 0, 1), true, &s);   // forced passes take every cached block
  EXPECT_GT(s.tcache_hits, 0u);
  EXPECT_EQ(s.tcache_blocks, 0u);
}
