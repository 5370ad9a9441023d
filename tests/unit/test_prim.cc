// Primitives that replace libc wrappers at start (src/prim/prim.c,
// docs/footprint.md): they must answer what the wrappers answer.
#include <gtest/gtest.h>
#include <sched.h>
#include <sys/syscall.h>
#include <unistd.h>
#include <atomic>
#include <chrono>
#include <thread>
extern "C" {
#include "prim/prim.h"
}

namespace {

TEST(_hpcmem_prim_page_size, is_sysconf_page_size) {
  EXPECT_EQ(_hpcmem_prim_page_size(), (size_t)sysconf(_SC_PAGESIZE));
  EXPECT_EQ(_hpcmem_prim_page_size(), (size_t)sysconf(_SC_PAGESIZE));   // the cached value
}

TEST(_hpcmem_prim_cpus_allowed, follows_the_affinity_mask) {
  cpu_set_t all;
  ASSERT_EQ(sched_getaffinity(0, sizeof all, &all), 0);
  EXPECT_EQ(_hpcmem_prim_cpus_allowed(), (unsigned)CPU_COUNT(&all));
  // one cpu: the highest allowed one, so a mask word above the first counts too
  int last = -1;
  for (int c = 0; c < CPU_SETSIZE; c++)
    if (CPU_ISSET(c, &all)) last = c;
  ASSERT_GE(last, 0);
  cpu_set_t one;
  CPU_ZERO(&one);
  CPU_SET(last, &one);
  ASSERT_EQ(sched_setaffinity(0, sizeof one, &one), 0);
  EXPECT_EQ(_hpcmem_prim_cpus_allowed(), 1u);
  ASSERT_EQ(sched_setaffinity(0, sizeof all, &all), 0);
  EXPECT_EQ(_hpcmem_prim_cpus_allowed(), (unsigned)CPU_COUNT(&all));
}

TEST(_hpcmem_prim_gettid, is_the_kernel_s_thread_id) {
  EXPECT_EQ(_hpcmem_prim_gettid(), (int)syscall(SYS_gettid));
  EXPECT_EQ(_hpcmem_prim_gettid(), (int)getpid());     // the test's main thread
  int other = 0;
  std::thread([&] { other = _hpcmem_prim_gettid(); }).join();
  EXPECT_NE(other, 0);
  EXPECT_NE(other, (int)getpid());
}

TEST(_hpcmem_prim_thread_alive, until_the_thread_is_gone) {
  EXPECT_EQ(_hpcmem_prim_thread_alive(_hpcmem_prim_gettid()), 1);
  std::atomic<int> tid{0}, go{0};
  std::thread t([&] {
    tid = _hpcmem_prim_gettid();
    while (!go) std::this_thread::yield();
  });
  while (!tid) std::this_thread::yield();
  EXPECT_EQ(_hpcmem_prim_thread_alive(tid), 1);
  go = 1;
  t.join();
  // join returns when the thread's id is released; the kernel may list the
  // task a moment longer
  int alive = 1;
  for (int i = 0; i < 1000 && (alive = _hpcmem_prim_thread_alive(tid)); i++)
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  EXPECT_EQ(alive, 0);
  EXPECT_EQ(_hpcmem_prim_thread_alive(0x7ffffff0), 0) << "no such thread";
}

}  // namespace
