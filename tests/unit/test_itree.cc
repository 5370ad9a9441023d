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
  Tree(unsigned depth, unsigned extent, unsigned low = 0) : mem(_hpcmem_itree_mgmt_size(depth, low)) {
    _hpcmem_itree_init(&t, mem.data(), depth, low, extent);
  }
  // 4 KiB pages of the tree with a non-zero byte (written)
  size_t pages_written() const {
    size_t pages = 0;
    for (size_t off = 0; off < mem.size(); off += 4096) {
      size_t end = off + 4096 < mem.size() ? off + 4096 : mem.size();
      for (size_t i = off; i < end; i++)
        if (mem[i]) { pages++; break; }
    }
    return pages;
  }
  // Random allocations (orders 0..max_order) and frees of random live runs,
  // checking that no two runs overlap, that runs are aligned to their size,
  // that a free gives back the order allocated, and the tree's invariants
  // every check_every operations.  live ends with the runs still allocated.
  void random_ops(std::map<int64_t, unsigned> &live, int ops, unsigned max_order, uint64_t seed,
                  int check_every) {
    std::mt19937_64 rng(seed);
    std::vector<char> used((size_t)1 << t.depth, 0);
    for (int op = 0; op < ops; op++) {
      if (live.empty() || rng() % 3) {
        unsigned order = (unsigned)(rng() % (max_order + 1));
        int64_t b = _hpcmem_itree_alloc(&t, order);
        if (b < 0) continue;
        ASSERT_EQ(b % ((int64_t)1 << order), 0);
        for (int64_t i = b; i < b + (1 << order); i++) { ASSERT_FALSE(used[i]) << "overlap at " << i; used[i] = 1; }
        live[b] = order;
      } else {
        auto it = live.begin();
        std::advance(it, rng() % live.size());
        ASSERT_EQ(_hpcmem_itree_free(&t, (uint64_t)it->first), (int)it->second);
        for (int64_t i = it->first; i < it->first + (1 << it->second); i++) used[i] = 0;
        live.erase(it);
      }
      if (op % check_every == 0) {
        ASSERT_EQ(_hpcmem_itree_check(&t), 0) << "seed " << seed << " op " << op;
      }
    }
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
  std::map<int64_t, unsigned> live;
  tr.random_ops(live, 20000, 5, 42, 97);
  EXPECT_EQ(_hpcmem_itree_check(&tr.t), 0);
}

TEST(_hpcmem_itree_mgmt_size, grows_with_the_tree) {
  EXPECT_GT(_hpcmem_itree_mgmt_size(10, 0), _hpcmem_itree_mgmt_size(9, 0));
  // nodes sit in 4 KiB blocks of nine levels: one block for a tree of nine levels
  EXPECT_EQ(_hpcmem_itree_mgmt_size(8, 0), 4096u);
  EXPECT_EQ(_hpcmem_itree_mgmt_size(0, 0), 16u);          // one level: two slots
  // depth 9: the leaves' band (levels 1..9, two blocks) and the root's (two slots)
  EXPECT_EQ(_hpcmem_itree_mgmt_size(9, 0), 2 * 4096u + 16u);
  // a lowest band of four levels: 2^5 blocks of 16 slots, then levels 0..4 in one block of 32
  EXPECT_EQ(_hpcmem_itree_mgmt_size(8, 4), (32u * 16u + 32u) * 8u);
}

// Every tree shape must work: bands of one level, a lowest band as deep as
// the tree, bands that are not full.
TEST(_hpcmem_itree_check, every_band_layout_keeps_invariants) {
  for (unsigned depth : {0u, 1u, 4u, 9u, 10u, 13u})
    for (unsigned low : {0u, 1u, 2u, 4u, 9u, 12u}) {
      Tree tr(depth, depth >= 2 ? 2 : depth, low);
      std::map<int64_t, unsigned> live;
      tr.random_ops(live, 3000, depth, depth * 100 + low, 61);
      if (::testing::Test::HasFatalFailure()) return;
      for (auto &r : live) ASSERT_EQ(_hpcmem_itree_free(&tr.t, (uint64_t)r.first), (int)r.second);
      ASSERT_EQ(_hpcmem_itree_check(&tr.t), 0);
      // everything free again: the whole extent is one free run
      EXPECT_EQ(_hpcmem_itree_alloc(&tr.t, tr.t.extent_order), 0) << "depth " << depth << " low " << low;
    }
}

// A young heap (a 16 GiB slice of 4 KiB blocks, the first 4 MiB in use) must
// cost a few pages of tree, not one page per level (the resident set of a
// small program counts every page written).  With the lowest band ending
// below the smallest span (64 KiB: four levels), spans of the first 16 MiB
// write one page of tree; only runs smaller than a span reach further.
TEST(_hpcmem_itree_alloc, young_tree_touches_few_pages) {
  Tree tr(22, 10, 4);
  std::map<int64_t, unsigned> runs;
  for (unsigned order = 4; order <= 6; order++)   // spans of 64 KiB .. 256 KiB
    for (int i = 0; i < 3; i++) {
      int64_t b = _hpcmem_itree_alloc(&tr.t, order);
      ASSERT_GE(b, 0);
      runs[b] = order;
    }
  ASSERT_EQ(_hpcmem_itree_free(&tr.t, (uint64_t)runs.begin()->first), (int)runs.begin()->second);
  EXPECT_EQ(_hpcmem_itree_check(&tr.t), 0);
  ASSERT_EQ(tr.t.extent_order, 10u);              // still within the first 4 MiB
  EXPECT_EQ(tr.pages_written(), 1u);
  for (int i = 0; i < 8; i++) ASSERT_GE(_hpcmem_itree_alloc(&tr.t, 0), 0);
  EXPECT_EQ(_hpcmem_itree_check(&tr.t), 0);
  EXPECT_LE(tr.pages_written(), 3u);              // + the lowest band's blocks (2 MiB of leaves a page)
  // the extent grows to 16 MiB: still the same page for spans
  Tree big(22, 10, 4);
  for (int i = 0; i < 200; i++) ASSERT_GE(_hpcmem_itree_alloc(&big.t, 4), 0);
  EXPECT_EQ(big.t.extent_order, 12u);
  EXPECT_EQ(_hpcmem_itree_check(&big.t), 0);
  EXPECT_EQ(big.pages_written(), 1u);
}

// Below a fully free node every node stays zero: the free half of a split is
// not written (_hpcmem_itree_check walks the zero subtrees of small trees).
TEST(_hpcmem_itree_alloc, leaves_the_free_side_unwritten) {
  Tree tr(12, 12, 4);
  int64_t a = _hpcmem_itree_alloc(&tr.t, 4);
  ASSERT_EQ(a, 0);
  // written: the run and its ancestors, nothing else (8 bytes a node)
  size_t nonzero_nodes = 0;
  for (size_t i = 0; i < tr.mem.size(); i += 8)
    for (size_t k = 0; k < 8; k++)
      if (tr.mem[i + k]) { nonzero_nodes++; break; }
  EXPECT_EQ(nonzero_nodes, 12u - 4u + 1u);
  int64_t b = _hpcmem_itree_alloc(&tr.t, 4);
  EXPECT_EQ(b, 2048);                             // the other half had more free space
  ASSERT_EQ(_hpcmem_itree_free(&tr.t, (uint64_t)a), 4);
  ASSERT_EQ(_hpcmem_itree_free(&tr.t, (uint64_t)b), 4);
  EXPECT_EQ(_hpcmem_itree_check(&tr.t), 0);
  for (unsigned char c : tr.mem) ASSERT_EQ(c, 0);  // all free: all zero again
}

// A run grows in place over the free rest of its aligned block: the tree
// then holds one run of the new order at the same start, every invariant
// holds (the nodes below it are zero again), and freeing it frees it all.
TEST(_hpcmem_itree_grow, takes_the_free_rest_of_the_block) {
  Tree tr(10, 10, 4);
  int64_t a = _hpcmem_itree_alloc(&tr.t, 4);          // blocks [0, 16)
  ASSERT_EQ(a, 0);
  int64_t b = _hpcmem_itree_alloc(&tr.t, 4);          // the other half of the area
  ASSERT_EQ(b, 512);
  EXPECT_EQ(_hpcmem_itree_grow(&tr.t, 0, 4, 7), 0);   // [0, 128)
  EXPECT_EQ(_hpcmem_itree_order(&tr.t, 0), 7);
  EXPECT_EQ(_hpcmem_itree_check(&tr.t), 0);
  EXPECT_EQ(tr.t.used_blocks, 128u + 16u);
  EXPECT_EQ(_hpcmem_itree_grow(&tr.t, 0, 7, 9), 0);   // [0, 512): b is outside
  EXPECT_EQ(_hpcmem_itree_check(&tr.t), 0);
  EXPECT_EQ(_hpcmem_itree_free(&tr.t, 16), -EINVAL);  // the old run's neighbour is interior now
  EXPECT_EQ(_hpcmem_itree_free(&tr.t, 0), 9);
  EXPECT_EQ(_hpcmem_itree_free(&tr.t, 512), 4);
  EXPECT_EQ(_hpcmem_itree_check(&tr.t), 0);
  for (unsigned char c : tr.mem) ASSERT_EQ(c, 0);     // all free: all zero again
  EXPECT_EQ(_hpcmem_itree_alloc(&tr.t, 10), 0);
}

TEST(_hpcmem_itree_grow, refuses_taken_blocks_and_bad_runs) {
  Tree tr(8, 8);
  ASSERT_EQ(_hpcmem_itree_alloc(&tr.t, 2), 0);        // [0, 4)
  ASSERT_EQ(_hpcmem_itree_alloc(&tr.t, 6), 128);      // the emptier half
  ASSERT_EQ(_hpcmem_itree_alloc(&tr.t, 6), 64);       // the emptier quarter of the left half
  EXPECT_EQ(_hpcmem_itree_grow(&tr.t, 0, 2, 7), -EBUSY);    // [64, 128) is taken
  EXPECT_EQ(_hpcmem_itree_check(&tr.t), 0);           // a refused grow changes nothing
  EXPECT_EQ(_hpcmem_itree_order(&tr.t, 0), 2);
  EXPECT_EQ(_hpcmem_itree_grow(&tr.t, 0, 3, 5), -EINVAL);   // not a run of that order
  EXPECT_EQ(_hpcmem_itree_grow(&tr.t, 64, 6, 7), -EINVAL);  // not aligned to the new order
  EXPECT_EQ(_hpcmem_itree_grow(&tr.t, 0, 2, 2), -EINVAL);   // not larger
  EXPECT_EQ(_hpcmem_itree_grow(&tr.t, 0, 2, 9), -EINVAL);   // beyond the area
  EXPECT_EQ(_hpcmem_itree_grow(&tr.t, 0, 2, 6), 0);         // [0, 64) is free
  EXPECT_EQ(_hpcmem_itree_order(&tr.t, 0), 6);
  EXPECT_EQ(_hpcmem_itree_check(&tr.t), 0);
}

// Growing runs among random allocations and frees keeps every invariant
// and never overlaps another run.
TEST(_hpcmem_itree_grow, random_growth_keeps_invariants) {
  Tree tr(12, 12, 3);
  std::mt19937_64 rng(7);
  std::map<int64_t, unsigned> live;
  std::vector<char> used(1 << 12, 0);
  int grown = 0;
  for (int op = 0; op < 20000; op++) {
    unsigned r = (unsigned)(rng() % 4);
    if (live.empty() || r < 2) {
      unsigned order = (unsigned)(rng() % 5);
      int64_t b = _hpcmem_itree_alloc(&tr.t, order);
      if (b < 0) continue;
      for (int64_t i = b; i < b + (1 << order); i++) { ASSERT_FALSE(used[i]) << "overlap at " << i; used[i] = 1; }
      live[b] = order;
    } else {
      auto it = live.begin();
      std::advance(it, rng() % live.size());
      if (r == 2) {
        unsigned to = it->second + 1 + (unsigned)(rng() % 3);
        bool aligned = it->first % ((int64_t)1 << to) == 0 && to <= 12;
        bool free_rest = aligned;
        for (int64_t i = it->first + (1 << it->second); free_rest && i < it->first + (1 << to); i++) free_rest = !used[i];
        int rc = _hpcmem_itree_grow(&tr.t, (uint64_t)it->first, it->second, to);
        ASSERT_EQ(rc, !aligned ? -EINVAL : free_rest ? 0 : -EBUSY) << "op " << op;
        if (rc == 0) {
          for (int64_t i = it->first; i < it->first + (1 << to); i++) used[i] = 1;
          it->second = to;
          grown++;
        }
      } else {
        ASSERT_EQ(_hpcmem_itree_free(&tr.t, (uint64_t)it->first), (int)it->second);
        for (int64_t i = it->first; i < it->first + (1 << it->second); i++) used[i] = 0;
        live.erase(it);
      }
    }
    if (op % 89 == 0) {
      ASSERT_EQ(_hpcmem_itree_check(&tr.t), 0) << "after op " << op;
    }
  }
  EXPECT_GT(grown, 100);
  EXPECT_EQ(_hpcmem_itree_check(&tr.t), 0);
}
