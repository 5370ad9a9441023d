// Public placement API (include/hpcmem_place.h) through libhpcmem.so only,
// on this machine as it is: every class the machine has, binding checked
// with the kernel's own get_mempolicy.
#include <gtest/gtest.h>
#include <errno.h>
#include <numaif.h>
#include <string.h>
#include "hpcmem_place.h"

namespace {
const size_t MiB = 1 << 20;

TEST(hpcmem_classes, this_machine_has_dram) {
  hpcmem_class_info_t c[4];
  int n = hpcmem_classes(c, 4);
  ASSERT_GE(n, 1);
  EXPECT_EQ(c[0].cls, HPCMEM_CLASS_DRAM);
  EXPECT_GT(c[0].capacity, 0u);
  EXPECT_GE(c[0].node_count, 1);
  EXPECT_EQ(hpcmem_classes(NULL, 1), -EINVAL);
}

TEST(hpcmem_place_alloc, defaults_and_null_attr) {
  hpcmem_place_attr_t a;
  ASSERT_EQ(hpcmem_place_attr_init(&a), 0);
  EXPECT_EQ(a.mapping, HPCMEM_MAP_IMMEDIATE);
  EXPECT_EQ(hpcmem_place_attr_init(NULL), -EINVAL);
  char *p = (char *)hpcmem_place_alloc(5000, NULL);
  ASSERT_NE(p, nullptr);
  EXPECT_EQ((uintptr_t)p % 4096, 0u);
  memset(p, 3, 8192);   // rounded up to whole pages
  hpcmem_where_t w;
  ASSERT_EQ(hpcmem_where(p, 5000, &w, 1), 1);
  EXPECT_EQ(w.cls, HPCMEM_CLASS_DRAM);
  EXPECT_EQ(w.state, HPCMEM_PLACE_BOUND);
  EXPECT_EQ(hpcmem_place_free(p), 0);
  EXPECT_EQ(hpcmem_place_free(p), -EINVAL);   // twice: refused, not a crash
}

TEST(hpcmem_commit, lazy_binding_to_node_0) {
  hpcmem_place_attr_t a;
  hpcmem_place_attr_init(&a);
  ASSERT_EQ(hpcmem_place_attr_add(&a, HPCMEM_CLASS_DRAM, 0), 0);
  a.mapping = HPCMEM_MAP_ON_COMMIT;
  a.mismatch = HPCMEM_MISMATCH_ERROR;
  char *p = (char *)hpcmem_place_alloc(4 * MiB, &a);
  ASSERT_NE(p, nullptr);
  int mode = -1;
  unsigned long mask[2] = {0, 0};
  ASSERT_EQ(get_mempolicy(&mode, mask, 65, p, MPOL_F_ADDR), 0);
  EXPECT_EQ(mode, MPOL_DEFAULT);   // an address, no binding yet
  hpcmem_place_stats_t before, after;
  hpcmem_place_stats(&before);
  ASSERT_EQ(hpcmem_commit(HPCMEM_COMMIT_EPOCH), 0);
  hpcmem_place_stats(&after);
  EXPECT_EQ(after.epoch, before.epoch + 1);
  ASSERT_EQ(get_mempolicy(&mode, mask, 65, p + 3 * MiB, MPOL_F_ADDR), 0);
  EXPECT_EQ(mode, MPOL_BIND);
  EXPECT_EQ(mask[0], 1ul);
  EXPECT_EQ(hpcmem_commit(HPCMEM_COMMIT_EPOCH), -ENODATA);
  EXPECT_EQ(hpcmem_place_free(p), 0);
}

TEST(hpcmem_place_attr_add, errors) {
  hpcmem_place_attr_t a;
  hpcmem_place_attr_init(&a);
  EXPECT_EQ(hpcmem_place_attr_add(&a, 1234, 0), -EINVAL);
  EXPECT_EQ(hpcmem_place_attr_add(&a, HPCMEM_CLASS_DRAM, 1 << 20), -ERANGE);
  hpcmem_class_info_t c[4];
  int n = hpcmem_classes(c, 4);
  bool has_nvm = false;
  for (int i = 0; i < n; i++) has_nvm |= c[i].cls == HPCMEM_CLASS_NVM;
  if (!has_nvm) {
    EXPECT_EQ(hpcmem_place_attr_add(&a, HPCMEM_CLASS_NVM, HPCMEM_INDEX_ALL), -ENODEV);
  }
  a.split = HPCMEM_SPLIT_CHUNK;
  a.chunk_size = 4097;
  errno = 0;
  EXPECT_EQ(hpcmem_place_alloc(MiB, &a), nullptr);
  EXPECT_EQ(errno, EINVAL);
}
}  // namespace
