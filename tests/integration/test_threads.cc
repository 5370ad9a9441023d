// The allocator across threads, fork and dlopen.
#include <gtest/gtest.h>
#include <dlfcn.h>
#include <pthread.h>
#include <limits.h>
#include <malloc.h>
#include <sys/wait.h>
#include <unistd.h>
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <thread>
#include <vector>
#include "hpcmem.h"

TEST(malloc, memory_outlives_the_thread_that_allocated_it) {
  std::vector<void *> v(2000);
  std::thread t([&] {
    for (size_t i = 0; i < v.size(); i++) { v[i] = malloc(i % 700 + 1); memset(v[i], (int)i, i % 700 + 1); }
  });
  t.join();   // the thread is gone; its memory is still ours
  for (size_t i = 0; i < v.size(); i++) {
    ASSERT_EQ(((unsigned char *)v[i])[0], (unsigned char)i);
    free(v[i]);
  }
  EXPECT_EQ(hpcmem_check(), 0);
}

TEST(free, cross_thread_producer_consumer) {
  const int kItems = 200000;
  std::vector<std::atomic<void *>> slots(1024);
  for (auto &s : slots) s = nullptr;
  std::thread prod([&] {
    for (int i = 0; i < kItems; i++) {
      size_t n = (size_t)(i % 500) + 8;
      unsigned char *p = (unsigned char *)malloc(n);
      p[0] = (unsigned char)i; p[n - 1] = (unsigned char)(i >> 3);
      void *expected = nullptr;
      auto &s = slots[(size_t)i % slots.size()];
      while (!s.compare_exchange_weak(expected, p)) { expected = nullptr; std::this_thread::yield(); }
    }
  });
  std::thread cons([&] {
    for (int i = 0; i < kItems; i++) {
      auto &s = slots[(size_t)i % slots.size()];
      void *p;
      while (!(p = s.exchange(nullptr))) std::this_thread::yield();
      size_t n = (size_t)(i % 500) + 8;
      ASSERT_EQ(((unsigned char *)p)[0], (unsigned char)i);
      ASSERT_EQ(((unsigned char *)p)[n - 1], (unsigned char)(i >> 3));
      free(p);
    }
  });
  prod.join();
  cons.join();
  EXPECT_EQ(hpcmem_check(), 0);
}

TEST(malloc, works_in_a_forked_child) {
  std::vector<void *> keep;
  for (int i = 0; i < 100; i++) keep.push_back(malloc(1000));
  std::thread busy([] { for (int i = 0; i < 100000; i++) free(malloc(64)); });   // fork while another thread allocates
  pid_t pid = fork();
  if (pid == 0) {
    std::vector<void *> v;
    for (int i = 0; i < 10000; i++) v.push_back(malloc((size_t)i % 5000 + 1));
    for (void *p : v) free(p);
    for (void *p : keep) free(p);
    void *big = malloc(10 << 20);
    memset(big, 1, 10 << 20);
    free(big);
    _exit(hpcmem_check() == 0 ? 0 : 3);
  }
  busy.join();
  int st = 0;
  ASSERT_EQ(waitpid(pid, &st, 0), pid);
  EXPECT_TRUE(WIFEXITED(st));
  EXPECT_EQ(WEXITSTATUS(st), 0);
  for (void *p : keep) free(p);
}

// A single-threaded process skips the heaps' locks and the statistics'
// atomics (heap/single.h); a forked child is single-threaded again.  Blocks
// it made that way must stay consistent once it starts threads that free
// them and allocate on their own (small and large blocks, both tiers' locks).
TEST(malloc, single_threaded_work_then_threads) {
  pid_t pid = fork();
  if (pid == 0) {
    std::vector<void *> mine;
    for (int i = 0; i < 2000; i++) mine.push_back(malloc(i % 7 == 0 ? (size_t)(i + 1) * 1024 : (size_t)i % 900 + 1));
    for (int i = 0; i < 2000; i += 3) { free(mine[i]); mine[i] = malloc(300000); }
    hpcmem_stats_t a;
    hpcmem_stats(&a);
    std::atomic<int> bad{0};
    std::vector<std::thread> ts;
    for (int t = 0; t < 4; t++)
      ts.emplace_back([&, t] {
        for (size_t i = t; i < mine.size(); i += 4) free(mine[i]);   // the single-threaded blocks
        void *ring[64] = {nullptr};
        for (int i = 0; i < 20000; i++) {
          void *p = malloc(i % 50 == 0 ? (size_t)(131072 + (i % 7) * 65536) : (size_t)(i % 1000) + 1);
          if (!p) bad++;
          free(ring[i % 64]);
          ring[i % 64] = p;
        }
        for (void *p : ring) free(p);
      });
    for (auto &t : ts) t.join();
    hpcmem_stats_t b;
    hpcmem_stats(&b);
    // everything made since a is freed again, and so are the blocks a counted
    // (making and joining the threads allocates a few blocks more)
    uint64_t na = b.alloc_count - a.alloc_count, nf = b.free_count - a.free_count;
    int ok = bad == 0 && hpcmem_check() == 0 && b.current_bytes + 1000000 < a.current_bytes &&
             na >= 80000 && na < 80100 && nf >= 80000 + 2000 && nf < 80000 + 2000 + 100;
    if (!ok) fprintf(stderr, "bad %d, current %llu -> %llu, allocs +%llu, frees +%llu\n", bad.load(),
                     (unsigned long long)a.current_bytes, (unsigned long long)b.current_bytes,
                     (unsigned long long)na, (unsigned long long)nf);
    _exit(ok ? 0 : 3);
  }
  int st = 0;
  ASSERT_EQ(waitpid(pid, &st, 0), pid);
  EXPECT_TRUE(WIFEXITED(st));
  EXPECT_EQ(WEXITSTATUS(st), 0);
}

TEST(malloc, programs_that_dlopen_libraries) {
  void *h = dlopen("libz.so.1", RTLD_NOW);   // a library that allocates on its own
  if (!h) h = dlopen("libm.so.6", RTLD_NOW);
  ASSERT_NE(h, nullptr) << dlerror();
  void *p = malloc(100);
  EXPECT_NE(p, nullptr);
  free(p);
  EXPECT_EQ(dlclose(h), 0);
}

TEST(malloc, many_threads_many_sizes) {
  std::vector<std::thread> ts;
  std::atomic<int> bad{0};
  for (int t = 0; t < 16; t++)
    ts.emplace_back([t, &bad] {
      std::vector<unsigned char *> v;
      unsigned seed = (unsigned)t * 7919u + 1;
      for (int i = 0; i < 20000; i++) {
        seed = seed * 1103515245u + 12345u;
        size_t n = (seed >> 8) % 4096 + 1;
        if (seed % 97 == 0) n = (seed % 3 + 1) << 18;
        unsigned char *p = (unsigned char *)malloc(n);
        p[0] = (unsigned char)n; p[n - 1] = (unsigned char)(n >> 1);
        v.push_back(p);
        if (v.size() > 200) {
          unsigned char *q = v[seed % v.size()];
          v[seed % v.size()] = v.back();
          v.pop_back();
          size_t m = malloc_usable_size(q);
          if (m == 0) bad++;
          free(q);
        }
      }
      for (auto p : v) free(p);
    });
  for (auto &t : ts) t.join();
  EXPECT_EQ(bad.load(), 0);
  EXPECT_EQ(hpcmem_check(), 0);
}

namespace {
pthread_key_t late_key;
// Allocates in every destructor round glibc runs, the last one included,
// which comes after libhpcmem's own exit hook.
void late_destructor(void *v) {
  long round = (long)v;
  void *p[50];
  for (int i = 0; i < 50; i++) {
    p[i] = malloc(16 + i * 24);
    memset(p[i], i, 16 + i * 24);
  }
  for (int i = 0; i < 50; i++) free(p[i]);
  if (round < PTHREAD_DESTRUCTOR_ITERATIONS) pthread_setspecific(late_key, (void *)(round + 1));
}
}  // namespace

TEST(free, memory_a_destructor_allocates_in_the_last_round_goes_back) {
  ASSERT_EQ(pthread_key_create(&late_key, late_destructor), 0);
  hpcmem_stats_t before, after;
  ASSERT_EQ(hpcmem_stats(&before), 0);
  for (int i = 0; i < 100; i++)
    std::thread([] {
      free(malloc(100));
      pthread_setspecific(late_key, (void *)1L);
    }).join();
  std::thread([] { free(malloc(100)); }).join();    // a new cache: those of gone threads go back first
  ASSERT_EQ(hpcmem_stats(&after), 0);
  // each thread's last round left ~50 KiB in a cache that no hook gave back
  EXPECT_LT(after.retained_bytes, before.retained_bytes + (512u << 10))
      << "retained " << before.retained_bytes << " -> " << after.retained_bytes << " bytes";
  EXPECT_EQ(pthread_key_delete(late_key), 0);
  EXPECT_EQ(hpcmem_check(), 0);
}

namespace {
pthread_key_t large_key;
// Waits for glibc's last destructor round, then takes the thread's first
// large block there.
void large_destructor(void *v) {
  long round = (long)v;
  if (round < PTHREAD_DESTRUCTOR_ITERATIONS) {
    pthread_setspecific(large_key, (void *)(round + 1));
    return;
  }
  void *p = malloc(200 << 10);
  memset(p, 1, 4096);
  free(p);
}
}  // namespace

// A thread's first large block in the last destructor round listed its
// large-block cache with an exit destructor that never ran: the tier's list
// of caches then pointed into the gone thread's storage, the next thread
// there listed its own on top (a list that loops), and hpcmem_stats() spun
// for ever.  In a child, so that a hang fails the test instead of the run.
TEST(malloc, a_first_large_block_in_the_last_destructor_round) {
  pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    alarm(60);
    if (pthread_key_create(&large_key, large_destructor) != 0) _exit(2);
    for (int i = 0; i < 20; i++)
      std::thread([] {
        free(malloc(100));
        pthread_setspecific(large_key, (void *)1L);
      }).join();
    hpcmem_stats_t s;
    if (hpcmem_stats(&s) != 0) _exit(3);
    for (int i = 0; i < 20; i++) free(malloc(300 << 10));
    _exit(hpcmem_check() == 0 ? 0 : 1);
  }
  int status = 0;
  ASSERT_EQ(waitpid(pid, &status, 0), pid);
  EXPECT_FALSE(WIFSIGNALED(status)) << "the child died of signal " << WTERMSIG(status) << " (SIGALRM: it hung)";
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "exit status " << WEXITSTATUS(status);
}

