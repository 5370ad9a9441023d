// The allocator across threads, fork and dlopen.
#include <gtest/gtest.h>
#include <dlfcn.h>
#include <malloc.h>
#include <sys/wait.h>
#include <unistd.h>
#include <atomic>
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
