// hpcmem_version, hpcmem_version_numbers (public API only).
#include <gtest/gtest.h>
#include <cerrno>
#include <cstdio>
#include <string>
#include "hpcmem.h"

TEST(hpcmem_version, matches_numbers) {
  int ma = -1, mi = -1, pa = -1;
  ASSERT_EQ(hpcmem_version_numbers(&ma, &mi, &pa), 0);
  char expect[64];
  snprintf(expect, sizeof expect, "%d.%d.%d", ma, mi, pa);
  EXPECT_STREQ(hpcmem_version(), expect);
  EXPECT_GE(ma, 0);
}

TEST(hpcmem_version_numbers, rejects_null) {
  int a;
  EXPECT_EQ(hpcmem_version_numbers(nullptr, &a, &a), -EINVAL);
  EXPECT_EQ(hpcmem_version_numbers(&a, nullptr, &a), -EINVAL);
  EXPECT_EQ(hpcmem_version_numbers(&a, &a, nullptr), -EINVAL);
}
