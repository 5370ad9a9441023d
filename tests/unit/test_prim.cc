// Primitives that replace libc wrappers at start (src/prim/prim.c,
// docs/footprint.md): they must answer what the wrappers answer.
#include <gtest/gtest.h>
#include <sched.h>
#include <unistd.h>
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

}  // namespace
