// The interval tree of the group heaps (src/heap/itree.c).
#include <gtest/gtest.h>
#include <map>
#include <random>
#include <vector>
extern "C" {
#include "heap/itree.h"
}

namespace {
struct Tree {
  std::vector<unsigned char> mem;
  hpcmem_itree_t t;
  Tree(unsigned depth, unsigned extent) : mem(_hpcmem_itree_mgmt_size(depth)) {
    _hpcmem_itree_init(&t, mem.data(), depth, extent);
  }
};
}  // namespace

TEST(_hpcmem_itree_alloc, fills_the_whole_area_without_overlap) {
  Tree tr(8, 8);
  std::vector<int> owner(256, -1);
  for (int i = 0; i < 256; i++) {
    int64_t b = _hpcmem_itree_alloc(&tr.t, 0);
    ASSERT_GE(b, 0);
    ASSERT_EQ(owner[b], -1);
    owner[b] = i;
  }
  EXPECT_EQ(_hpcmem_itree_alloc(&tr.t, 0), -1);
  EXPECT_EQ(_hpcmem_itree_check(&tr.t), 0);
}

TEST(_hpcmem_itree_alloc, runs_are_aligned_to_their_size) {
  Tree tr(10, 10);
  for (unsigned order : {3u, 0u, 5u, 1u, 7u, 2u}) {
    int64_t b = _hpcmem_itree_alloc(&tr.t, order);
    ASSERT_GE(b, 0);
    EXPECT_EQ(b % (1 << order), 0) << order;
    EXPECT_EQ(_hpcmem_itree_order(&tr.t, (uint64_t)b), (int)order);
  }
  EXPECT_EQ(_hpcmem_itree_check(&tr.t), 0);
}

TEST(_hpcmem_itree_alloc, descends_to_the_side_with_more_free_space) {
  Tree tr(4, 4);                      // 16 blocks: halves [0,8) and [8,16)
  int64_t a = _hpcmem_itree_alloc(&tr.t, 0);
  EXPECT_EQ(a, 0);                    // tie: left
  int64_t b = _hpcmem_itree_alloc(&tr.t, 0);
  EXPECT_GE(b, 8);                    // the right half has more free space now
  int64_t c = _hpcmem_itree_alloc(&tr.t, 2);
  ASSERT_GE(c, 0);
  // both halves have one used block; left wins the tie but must hold a free 4-run
  EXPECT_EQ(_hpcmem_itree_check(&tr.t), 0);
}

TEST(_hpcmem_itree_alloc, extent_grows_when_full) {
  Tree tr(10, 2);                     // starts confined to 4 blocks
  for (int i = 0; i < 4; i++) ASSERT_LT(_hpcmem_itree_alloc(&tr.t, 0), 4);
  int64_t b = _hpcmem_itree_alloc(&tr.t, 0);
  EXPECT_GE(b, 4);
  EXPECT_LT(b, 8);                    // doubled, not jumped across the area
  EXPECT_EQ(_hpcmem_itree_alloc(&tr.t, 11), -1);  // larger than the area
  EXPECT_GE(_hpcmem_itree_alloc(&tr.t, 9), 0);    // half the area: extent grows to the top
  EXPECT_EQ(_hpcmem_itree_check(&tr.t), 0);
}

TEST(_hpcmem_itree_free, merges_buddies_back) {
  Tree tr(6, 6);
  std::vector<int64_t> v;
  for (int i = 0; i < 64; i++) v.push_back(_hpcmem_itree_alloc(&tr.t, 0));
  for (auto b : v) ASSERT_EQ(_hpcmem_itree_free(&tr.t, (uint64_t)b), 0);
  EXPECT_EQ(_hpcmem_itree_alloc(&tr.t, 6), 0);   // the whole area is one free run again
  EXPECT_EQ(_hpcmem_itree_check(&tr.t), 0);
}

TEST(_hpcmem_itree_free, rejects_interior_unallocated_and_double_free) {
  Tree tr(6, 6);
  int64_t b = _hpcmem_itree_alloc(&tr.t, 3);
  ASSERT_GE(b, 0);
  EXPECT_EQ(_hpcmem_itree_free(&tr.t, (uint64_t)b + 1), -EINVAL);   // interior
  EXPECT_EQ(_hpcmem_itree_free(&tr.t, (uint64_t)(b + 8) % 64), -EINVAL);  // never allocated
  EXPECT_EQ(_hpcmem_itree_free(&tr.t, 1000), -EINVAL);              // outside the area
  EXPECT_EQ(_hpcmem_itree_free(&tr.t, (uint64_t)b), 3);
  EXPECT_EQ(_hpcmem_itree_free(&tr.t, (uint64_t)b), -EINVAL);       // double free
  EXPECT_EQ(_hpcmem_itree_check(&tr.t), 0);
}

TEST(_hpcmem_itree_check, random_operations_keep_invariants) {
  Tree tr(12, 3);
  std::mt19937_64 rng(42);
  std::map<int64_t, unsigned> live;
  std::vector<char> used(1 << 12, 0);
  for (int op = 0; op < 20000; op++) {
    if (live.empty() || rng() % 3) {
      unsigned order = (unsigned)(rng() % 6);
      int64_t b = _hpcmem_itree_alloc(&tr.t, order);
      if (b < 0) continue;
      for (int64_t i = b; i < b + (1 << order); i++) { ASSERT_FALSE(used[i]) << "overlap at " << i; used[i] = 1; }
      live[b] = order;
    } else {
      auto it = live.begin();
      std::advance(it, rng() % live.size());
      ASSERT_EQ(_hpcmem_itree_free(&tr.t, (uint64_t)it->first), (int)it->second);
      for (int64_t i = it->first; i < it->first + (1 << it->second); i++) used[i] = 0;
      live.erase(it);
    }
    if (op % 97 == 0) ASSERT_EQ(_hpcmem_itree_check(&tr.t), 0) << "after op " << op;
  }
  EXPECT_EQ(_hpcmem_itree_check(&tr.t), 0);
}

TEST(_hpcmem_itree_mgmt_size, grows_with_the_tree) {
  EXPECT_GT(_hpcmem_itree_mgmt_size(10), _hpcmem_itree_mgmt_size(9));
  // nodes sit in 4 KiB blocks of nine levels: one block for a tree of up to nine levels
  EXPECT_EQ(_hpcmem_itree_mgmt_size(0), 4096u);
  EXPECT_EQ(_hpcmem_itree_mgmt_size(8), 4096u);
  // depth 9: the leaves' band (levels 1..9, two blocks) and the root's
  EXPECT_EQ(_hpcmem_itree_mgmt_size(9), 3 * 4096u);
}

// A young heap (a 16 GiB slice of 4 KiB blocks, the first 4 MiB in use) must
// cost a few pages of tree, not one page per level (the resident set of a
// small program counts every page written).
TEST(_hpcmem_itree_alloc, young_tree_touches_few_pages) {
  Tree tr(22, 10);
  std::map<int64_t, unsigned> runs;
  for (unsigned order = 4; order <= 6; order++)   // spans of 64 KiB .. 256 KiB
    for (int i = 0; i < 3; i++) {
      int64_t b = _hpcmem_itree_alloc(&tr.t, order);
      ASSERT_GE(b, 0);
      runs[b] = order;
    }
  for (int i = 0; i < 8; i++) ASSERT_GE(_hpcmem_itree_alloc(&tr.t, 0), 0);
  ASSERT_EQ(_hpcmem_itree_free(&tr.t, (uint64_t)runs.begin()->first), (int)runs.begin()->second);
  EXPECT_EQ(_hpcmem_itree_check(&tr.t), 0);
  ASSERT_EQ(tr.t.extent_order, 10u);              // still within the first 4 MiB
  size_t pages = 0;
  for (size_t off = 0; off < tr.mem.size(); off += 4096) {
    size_t end = off + 4096 < tr.mem.size() ? off + 4096 : tr.mem.size();
    for (size_t i = off; i < end; i++)
      if (tr.mem[i]) { pages++; break; }
  }
  EXPECT_LE(pages, 6u);   // the leaves' blocks of the first 4 MiB (4), the band above, the top
}
