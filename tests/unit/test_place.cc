// Unit tests of the placement layer (src/place): the decision on the saved
// KNL-like machine (tests/data/knl-snc4-flat.xml: DRAM nodes 0-3, 24 GiB
// each; MCDRAM nodes 4-7, 4 GiB each), hexe Table I, order independence,
// bad input, and the binding itself on this machine's node 0.
#include <gtest/gtest.h>
#include <errno.h>
#include <numaif.h>
#include <stdlib.h>
#include <string.h>
#include <algorithm>
#include <fstream>
#include <random>
#include <sstream>
#include <string>
#include <vector>
extern "C" {
#include "hpcmem_place.h"
#include "place/place.h"
#include "topo/topo.h"
#include "util/options.h"
}
extern char **environ;

namespace {

const uint64_t MiB = 1ULL << 20, GiB = 1ULL << 30;
const uint64_t HBM_NODES = 0xF0, DRAM_NODES = 0x0F;

std::string data(const char *name) {
  const char *top = getenv("top_srcdir");
  return std::string(top && *top ? top : TOP_SRCDIR) + "/tests/data/" + name;
}

class Place : public testing::Test {
 protected:
  void TearDown() override {
    _hpcmem_place_reset();
    _hpcmem_place_set_usage_hook(nullptr);
    _hpcmem_topo_load(NULL);
  }
  void knl() {
    testing::internal::CaptureStderr();
    ASSERT_EQ(_hpcmem_topo_load(data("knl-snc4-flat.xml").c_str()), 0);
    testing::internal::GetCapturedStderr();
    _hpcmem_place_reset();
  }
  void real() {
    testing::internal::CaptureStderr();
    _hpcmem_topo_load(NULL);
    testing::internal::GetCapturedStderr();
    _hpcmem_place_reset();
  }
};

class hpcmem_classes_ : public Place {};
class hpcmem_place_attr_add_ : public Place {};
class hpcmem_commit_ : public Place {};
class place_decide : public Place {};
class hpcmem_where_ : public Place {};
class hpcmem_place_alloc_ : public Place {};

hpcmem_place_attr_t attr(std::vector<std::pair<int, int>> cls, int split, int mapping, int mismatch,
                         int prio) {
  hpcmem_place_attr_t a;
  hpcmem_place_attr_init(&a);
  for (auto &c : cls) EXPECT_EQ(hpcmem_place_attr_add(&a, c.first, c.second), 0);
  a.split = split;
  a.mapping = mapping;
  a.mismatch = mismatch;
  a.priority = prio;
  return a;
}

// Bytes of a range per class, from hpcmem_where's decided pieces.
struct Split {
  uint64_t hbm = 0, dram = 0, any = 0;
  bool operator==(const Split &o) const { return hbm == o.hbm && dram == o.dram && any == o.any; }
};

Split split_of(void *p, size_t len) {
  hpcmem_where_t w[16];
  int n = hpcmem_where(p, len, w, 16);
  EXPECT_GT(n, 0);
  Split s;
  for (int i = 0; i < n && i < 16; i++) {
    if (w[i].cls == HPCMEM_CLASS_HBM) {
      s.hbm += w[i].length;
      EXPECT_EQ(w[i].nodes, HBM_NODES);
    } else if (w[i].cls == HPCMEM_CLASS_DRAM) {
      s.dram += w[i].length;
      EXPECT_EQ(w[i].nodes, DRAM_NODES);
    } else {
      s.any += w[i].length;
    }
  }
  return s;
}

TEST_F(hpcmem_classes_, knl_dram_and_hbm) {
  knl();
  hpcmem_class_info_t c[4];
  ASSERT_EQ(hpcmem_classes(c, 4), 2);
  EXPECT_EQ(c[0].cls, HPCMEM_CLASS_DRAM);
  EXPECT_EQ(c[0].nodes, DRAM_NODES);
  EXPECT_EQ(c[0].capacity, 96 * GiB);
  EXPECT_EQ(c[1].cls, HPCMEM_CLASS_HBM);
  EXPECT_EQ(c[1].node_count, 4);
  EXPECT_EQ(c[1].nodes, HBM_NODES);
  EXPECT_EQ(c[1].capacity, 16 * GiB);
  ASSERT_EQ(hpcmem_class_limit(HPCMEM_CLASS_HBM, 64 * MiB), 0);
  ASSERT_EQ(hpcmem_classes(c, 4), 2);
  EXPECT_EQ(c[1].capacity, 64 * MiB);
  EXPECT_EQ(hpcmem_classes(NULL, 1), -EINVAL);
  EXPECT_EQ(hpcmem_classes(NULL, 0), 2);
  EXPECT_EQ(hpcmem_class_limit(HPCMEM_CLASS_NVM, MiB), -ENODEV);
  EXPECT_EQ(hpcmem_class_limit(17, MiB), -EINVAL);
}

TEST_F(hpcmem_place_attr_add_, bad_input) {
  knl();
  hpcmem_place_attr_t a;
  hpcmem_place_attr_init(&a);
  EXPECT_EQ(hpcmem_place_attr_add(NULL, HPCMEM_CLASS_HBM, 0), -EINVAL);
  EXPECT_EQ(hpcmem_place_attr_add(&a, 42, 0), -EINVAL);                    // unknown class
  EXPECT_EQ(hpcmem_place_attr_add(&a, HPCMEM_CLASS_NVM, HPCMEM_INDEX_ALL), -ENODEV);  // absent
  EXPECT_EQ(hpcmem_place_attr_add(&a, HPCMEM_CLASS_HBM, 4), -ERANGE);     // 4 HBM nodes: 0..3
  EXPECT_EQ(hpcmem_place_attr_add(&a, HPCMEM_CLASS_HBM, -7), -ERANGE);
  EXPECT_EQ(a.nclasses, 0);
  for (int i = 0; i < HPCMEM_PLACE_MAX_CLASSES; i++) EXPECT_EQ(hpcmem_place_attr_add(&a, HPCMEM_CLASS_DRAM, 0), 0);
  EXPECT_EQ(hpcmem_place_attr_add(&a, HPCMEM_CLASS_DRAM, 0), -ENOSPC);
}

TEST_F(hpcmem_place_attr_add_, knl_index_local_and_near) {
  knl();
  // pin to cpu 0 of the real machine: on the KNL cpu 0 belongs to DRAM node 0 and MCDRAM node 4
  cpu_set_t old, one;
  sched_getaffinity(0, sizeof old, &old);
  CPU_ZERO(&one);
  CPU_SET(0, &one);
  ASSERT_EQ(sched_setaffinity(0, sizeof one, &one), 0);
  hpcmem_place_attr_t a = attr({{HPCMEM_CLASS_HBM, HPCMEM_INDEX_LOCAL}, {HPCMEM_CLASS_HBM, 2},
                                {HPCMEM_CLASS_NEAR, HPCMEM_INDEX_ALL}},
                               HPCMEM_SPLIT_SPILL_OVER, HPCMEM_MAP_ON_COMMIT, HPCMEM_MISMATCH_FALLBACK, 1);
  hpcmem_class_limit(HPCMEM_CLASS_HBM, 16 * MiB);   // 4 MiB per MCDRAM node
  void *p = hpcmem_place_alloc(12 * MiB, &a);
  ASSERT_NE(p, nullptr);
  ASSERT_EQ(hpcmem_commit(HPCMEM_COMMIT_EPOCH), 0);
  hpcmem_where_t w[8];
  ASSERT_EQ(hpcmem_where(p, 12 * MiB, w, 8), 3);
  EXPECT_EQ(w[0].nodes, 1ULL << 4);   // local MCDRAM: 4 MiB
  EXPECT_EQ(w[0].length, 4 * MiB);
  EXPECT_EQ(w[1].nodes, 1ULL << 6);   // HBM index 2 = node 6
  EXPECT_EQ(w[1].length, 4 * MiB);
  EXPECT_EQ(w[2].nodes, (1ULL << 0) | (1ULL << 4));   // near: DRAM 0 (MCDRAM 4 is full)
  EXPECT_EQ(w[2].cls, HPCMEM_CLASS_NEAR);
  EXPECT_EQ(w[2].length, 4 * MiB);
  sched_setaffinity(0, sizeof old, &old);
}

// hexe Table I on the KNL with HBM scaled down to 64 MiB: STREAM arrays
// a (priority 2), b, c (priority 1), lazily placed, preferred HBM then DRAM.
struct Stream {
  Split a, b, c;
};

Stream stream(uint64_t size, std::vector<int> order) {
  hpcmem_class_limit(HPCMEM_CLASS_HBM, 64 * MiB);
  void *p[3] = {nullptr, nullptr, nullptr};
  for (int i : order) {
    hpcmem_place_attr_t a = attr({{HPCMEM_CLASS_HBM, HPCMEM_INDEX_ALL}, {HPCMEM_CLASS_DRAM, HPCMEM_INDEX_ALL}},
                                 HPCMEM_SPLIT_SPILL_OVER, HPCMEM_MAP_ON_COMMIT, HPCMEM_MISMATCH_FALLBACK,
                                 i == 0 ? 2 : 1);
    p[i] = hpcmem_place_alloc(size, &a);
    EXPECT_NE(p[i], nullptr);
  }
  EXPECT_EQ(hpcmem_commit(HPCMEM_COMMIT_EPOCH), 0);
  Stream s{split_of(p[0], size), split_of(p[1], size), split_of(p[2], size)};
  _hpcmem_place_reset();
  return s;
}

TEST_F(hpcmem_commit_, hexe_table1_all_fit) {
  knl();
  Stream s = stream(16 * MiB, {0, 1, 2});   // 48 MiB <= 64 MiB: everything in HBM
  EXPECT_EQ(s.a.hbm, 16 * MiB);
  EXPECT_EQ(s.b.hbm, 16 * MiB);
  EXPECT_EQ(s.c.hbm, 16 * MiB);
  EXPECT_EQ(s.a.dram + s.b.dram + s.c.dram, 0u);
}

TEST_F(hpcmem_commit_, hexe_table1_two_fit) {
  knl();
  Stream s = stream(32 * MiB, {0, 1, 2});   // a in HBM; b and c share the rest with DRAM
  EXPECT_EQ(s.a.hbm, 32 * MiB);
  EXPECT_EQ(s.a.dram, 0u);
  EXPECT_EQ(s.b.hbm, 16 * MiB);
  EXPECT_EQ(s.b.dram, 16 * MiB);
  EXPECT_TRUE(s.b == s.c);
}

TEST_F(hpcmem_commit_, hexe_table1_none_fit) {
  knl();
  Stream s = stream(80 * MiB, {0, 1, 2});   // every array split between HBM and DRAM
  for (const Split *x : {&s.a, &s.b, &s.c}) {
    EXPECT_GT(x->hbm, 0u);
    EXPECT_GT(x->dram, 0u);
    EXPECT_EQ(x->hbm + x->dram, 80 * MiB);
  }
  EXPECT_GT(s.a.hbm, s.b.hbm);   // the higher priority gets the larger share
  EXPECT_TRUE(s.b == s.c);
  EXPECT_LE(s.a.hbm + s.b.hbm + s.c.hbm, 64 * MiB);
  EXPECT_GT(s.a.hbm + s.b.hbm + s.c.hbm, 63 * MiB);
}

TEST_F(hpcmem_commit_, same_decision_in_every_arrival_order) {
  knl();
  for (uint64_t size : {16 * MiB, 32 * MiB, 80 * MiB}) {
    std::vector<int> order = {0, 1, 2};
    Stream first = stream(size, order);
    while (std::next_permutation(order.begin(), order.end())) {
      Stream s = stream(size, order);
      EXPECT_TRUE(s.a == first.a && s.b == first.b && s.c == first.c) << "size " << size;
    }
  }
}

TEST_F(hpcmem_commit_, bad_input) {
  real();
  EXPECT_EQ(hpcmem_commit(HPCMEM_COMMIT_EPOCH), -ENODATA);   // nothing pending
  EXPECT_EQ(hpcmem_commit(HPCMEM_COMMIT_ALL), -ENODATA);
  EXPECT_EQ(hpcmem_commit(7), -EINVAL);
  hpcmem_place_stats_t st;
  hpcmem_place_stats(&st);
  EXPECT_EQ(st.epoch, 0u);   // a refused commit does not advance the epoch
}

TEST_F(hpcmem_commit_, error_mode_without_capacity_fails_that_request_only) {
  knl();
  hpcmem_class_limit(HPCMEM_CLASS_HBM, 64 * MiB);
  hpcmem_place_attr_t strict = attr({{HPCMEM_CLASS_HBM, HPCMEM_INDEX_ALL}}, HPCMEM_SPLIT_SPILL_OVER,
                                    HPCMEM_MAP_ON_COMMIT, HPCMEM_MISMATCH_ERROR, 1);
  hpcmem_place_attr_t soft = strict;
  soft.mismatch = HPCMEM_MISMATCH_FALLBACK;
  soft.priority = 5;
  void *big = hpcmem_place_alloc(48 * MiB, &soft);
  void *p = hpcmem_place_alloc(32 * MiB, &strict);
  ASSERT_TRUE(big && p);
  // the strict request does not fit after the priority-5 one: -ENOMEM, the other is placed
  EXPECT_EQ(hpcmem_commit(HPCMEM_COMMIT_EPOCH), -ENOMEM);
  hpcmem_where_t w[4];
  ASSERT_EQ(hpcmem_where(p, 32 * MiB, w, 4), 1);
  EXPECT_EQ(w[0].state, HPCMEM_PLACE_FAILED);
  EXPECT_EQ(w[0].cls, HPCMEM_CLASS_ANY);
  ASSERT_EQ(hpcmem_where(big, 48 * MiB, w, 4), 1);
  EXPECT_EQ(w[0].cls, HPCMEM_CLASS_HBM);
  EXPECT_EQ(w[0].length, 48 * MiB);
  // the kernel here has no node 4-7: FALLBACK keeps the decision, the range stays unbound
  EXPECT_EQ(w[0].state, HPCMEM_PLACE_UNBOUND);
  // once the big one is gone, recommitting everything places the strict one;
  // the kernel cannot bind MCDRAM here, so ERROR mode reports -ENODEV
  EXPECT_EQ(hpcmem_place_free(big), 0);
  EXPECT_EQ(hpcmem_commit(HPCMEM_COMMIT_ALL), -ENODEV);
  ASSERT_EQ(hpcmem_where(p, 32 * MiB, w, 4), 1);
  EXPECT_EQ(w[0].cls, HPCMEM_CLASS_HBM);
  EXPECT_EQ(w[0].state, HPCMEM_PLACE_FAILED);
  // a refused request holds no HBM, however often it is decided again
  hpcmem_class_info_t c[2];
  for (int round = 0; round < 2; round++) {
    ASSERT_EQ(hpcmem_classes(c, 2), 2);
    EXPECT_EQ(c[1].used, 0u) << "round " << round;
    EXPECT_EQ(hpcmem_commit(HPCMEM_COMMIT_ALL), -ENODEV);
  }
  EXPECT_EQ(hpcmem_place_free(p), 0);
  ASSERT_EQ(hpcmem_classes(c, 2), 2);
  EXPECT_EQ(c[1].used, 0u);
}

TEST_F(hpcmem_place_alloc_, bad_input) {
  knl();
  hpcmem_place_attr_t a = attr({{HPCMEM_CLASS_HBM, HPCMEM_INDEX_ALL}}, HPCMEM_SPLIT_CHUNK,
                               HPCMEM_MAP_ON_COMMIT, HPCMEM_MISMATCH_FALLBACK, 1);
  a.chunk_size = 6000;   // not a page multiple
  errno = 0;
  EXPECT_EQ(hpcmem_place_alloc(MiB, &a), nullptr);
  EXPECT_EQ(errno, EINVAL);
  a.chunk_size = 0;
  EXPECT_EQ(hpcmem_place_alloc(MiB, &a), nullptr);
  EXPECT_EQ(errno, EINVAL);
  a.chunk_size = 64 * 1024;
  EXPECT_EQ(hpcmem_place_alloc(0, &a), nullptr);
  EXPECT_EQ(errno, EINVAL);
  hpcmem_place_attr_t b = a;
  b.classes[0].cls = 99;   // written by hand: unknown class
  EXPECT_EQ(hpcmem_place_alloc(MiB, &b), nullptr);
  EXPECT_EQ(errno, EINVAL);
  b = a;
  b.classes[0].index = 9;  // out of range
  EXPECT_EQ(hpcmem_place_alloc(MiB, &b), nullptr);
  EXPECT_EQ(errno, ERANGE);
  b = a;
  b.classes[0].cls = HPCMEM_CLASS_NVM;
  EXPECT_EQ(hpcmem_place_alloc(MiB, &b), nullptr);
  EXPECT_EQ(errno, ENODEV);
  for (int bad : {-1, 4}) {
    b = a; b.split = bad;
    EXPECT_EQ(hpcmem_place_alloc(MiB, &b), nullptr);
    b = a; b.mapping = bad;
    EXPECT_EQ(hpcmem_place_alloc(MiB, &b), nullptr);
    b = a; b.mismatch = bad;
    EXPECT_EQ(hpcmem_place_alloc(MiB, &b), nullptr);
    EXPECT_EQ(errno, EINVAL);
  }
  b = a; b.priority = -1;
  EXPECT_EQ(hpcmem_place_alloc(MiB, &b), nullptr);
  EXPECT_EQ(errno, EINVAL);
  // IMMEDIATE + ERROR larger than the class: ENOMEM
  hpcmem_class_limit(HPCMEM_CLASS_HBM, 64 * MiB);
  b = attr({{HPCMEM_CLASS_HBM, HPCMEM_INDEX_ALL}}, HPCMEM_SPLIT_SPILL_OVER, HPCMEM_MAP_IMMEDIATE,
           HPCMEM_MISMATCH_ERROR, 1);
  EXPECT_EQ(hpcmem_place_alloc(65 * MiB, &b), nullptr);
  EXPECT_EQ(errno, ENOMEM);
  // IMMEDIATE + ERROR that fits, on nodes this kernel lacks: ENODEV, never a crash
  EXPECT_EQ(hpcmem_place_alloc(8 * MiB, &b), nullptr);
  EXPECT_EQ(errno, ENODEV);
  EXPECT_EQ(hpcmem_place_free(&b), -EINVAL);
  EXPECT_EQ(hpcmem_place_free(NULL), -EINVAL);
}

TEST_F(place_decide, small_objects_first_when_demand_far_exceeds_capacity) {
  knl();
  hpcmem_class_limit(HPCMEM_CLASS_HBM, 64 * MiB);
  hpcmem_place_attr_t a = attr({{HPCMEM_CLASS_HBM, HPCMEM_INDEX_ALL}, {HPCMEM_CLASS_DRAM, HPCMEM_INDEX_ALL}},
                               HPCMEM_SPLIT_SPILL_OVER, HPCMEM_MAP_ON_COMMIT, HPCMEM_MISMATCH_FALLBACK, 1);
  std::vector<void *> big, small;
  for (int i = 0; i < 4; i++) big.push_back(hpcmem_place_alloc(100 * MiB, &a));
  for (int i = 0; i < 8; i++) small.push_back(hpcmem_place_alloc(2 * MiB, &a));
  ASSERT_EQ(hpcmem_commit(HPCMEM_COMMIT_EPOCH), 0);
  for (void *p : small) EXPECT_EQ(split_of(p, 2 * MiB).hbm, 2 * MiB);
  uint64_t hbm = 0;
  for (void *p : big) {
    Split s = split_of(p, 100 * MiB);
    EXPECT_EQ(s.hbm, split_of(big[0], 100 * MiB).hbm);   // equal requests, equal shares
    EXPECT_GT(s.dram, 0u);
    hbm += s.hbm;
  }
  EXPECT_EQ(hbm, 48 * MiB);
}

TEST_F(place_decide, equal_and_chunk_splits) {
  knl();
  hpcmem_place_attr_t a = attr({{HPCMEM_CLASS_HBM, HPCMEM_INDEX_ALL}}, HPCMEM_SPLIT_EQUAL,
                               HPCMEM_MAP_ON_COMMIT, HPCMEM_MISMATCH_FALLBACK, 1);
  void *p = hpcmem_place_alloc(8 * MiB, &a);
  a.split = HPCMEM_SPLIT_CHUNK;
  a.chunk_size = MiB;
  void *q = hpcmem_place_alloc(6 * MiB, &a);
  ASSERT_EQ(hpcmem_commit(HPCMEM_COMMIT_EPOCH), 0);
  hpcmem_where_t w[8];
  ASSERT_EQ(hpcmem_where(p, 8 * MiB, w, 8), 4);
  for (int i = 0; i < 4; i++) {
    EXPECT_EQ(w[i].offset, i * 2 * MiB);
    EXPECT_EQ(w[i].length, 2 * MiB);
    EXPECT_EQ(w[i].nodes, 1ULL << (4 + i));
  }
  ASSERT_EQ(hpcmem_where(q, 6 * MiB, w, 8), 6);
  for (int i = 0; i < 6; i++) EXPECT_EQ(w[i].nodes, 1ULL << (4 + i % 4));
  // a sub-range: only the pieces it covers, offsets from its start
  ASSERT_EQ(hpcmem_where((char *)q + MiB / 2, MiB, w, 8), 2);
  EXPECT_EQ(w[0].offset, 0u);
  EXPECT_EQ(w[0].length, MiB / 2);
  EXPECT_EQ(w[1].nodes, 1ULL << 5);
}

// What the MPI layer plugs in: the other ranks of the node hold 48 MiB of HBM.
int others_use_hbm(uint64_t *per_node, int n) {
  for (int i = 4; i < 8 && i < n; i++) per_node[i] = 12 * MiB;
  return 0;
}

TEST_F(place_decide, node_usage_hook_shrinks_spill_over) {
  knl();
  hpcmem_class_limit(HPCMEM_CLASS_HBM, 64 * MiB);
  _hpcmem_place_set_usage_hook(others_use_hbm);
  hpcmem_class_info_t c[2];
  ASSERT_EQ(hpcmem_classes(c, 2), 2);
  EXPECT_EQ(c[1].used_node, 48 * MiB);
  hpcmem_place_attr_t a = attr({{HPCMEM_CLASS_HBM, HPCMEM_INDEX_ALL}, {HPCMEM_CLASS_DRAM, HPCMEM_INDEX_ALL}},
                               HPCMEM_SPLIT_SPILL_OVER, HPCMEM_MAP_ON_COMMIT, HPCMEM_MISMATCH_FALLBACK, 1);
  void *p = hpcmem_place_alloc(32 * MiB, &a);
  ASSERT_EQ(hpcmem_commit(HPCMEM_COMMIT_EPOCH), 0);
  Split s = split_of(p, 32 * MiB);
  EXPECT_EQ(s.hbm, 16 * MiB);
  EXPECT_EQ(s.dram, 16 * MiB);
  uint64_t mine[HPCMEM_PLACE_NODES];
  _hpcmem_place_local_usage(mine, HPCMEM_PLACE_NODES);
  EXPECT_EQ(mine[4] + mine[5] + mine[6] + mine[7], 16 * MiB);
}

// What the MPI layer's node-wide table sees: every decision inside the
// node lock, this process's usage published after each change.
struct ShareLog {
  int locks = 0, unlocks = 0, publishes = 0, published_unlocked = 0;
  bool held = false;
  uint64_t row[HPCMEM_PLACE_NODES] = {0};
} share_log;
int log_lock() { share_log.locks++; share_log.held = true; return 0; }
void log_unlock() { share_log.unlocks++; share_log.held = false; }
void log_publish(const uint64_t *mine, int n) {
  share_log.publishes++;
  if (!share_log.held) share_log.published_unlocked++;
  for (int i = 0; i < n && i < HPCMEM_PLACE_NODES; i++) share_log.row[i] = mine[i];
}

TEST_F(place_decide, share_table_sees_decisions_under_the_lock_and_every_change) {
  real();
  share_log = ShareLog();
  hpcmem_place_share_t ops = {nullptr, log_publish, log_lock, log_unlock};
  _hpcmem_place_set_share(&ops);
  EXPECT_EQ(share_log.publishes, 1);   // installing publishes what is already placed
  int locks = share_log.locks;
  hpcmem_place_attr_t a = attr({{HPCMEM_CLASS_DRAM, 0}}, HPCMEM_SPLIT_OS, HPCMEM_MAP_IMMEDIATE,
                               HPCMEM_MISMATCH_FALLBACK, 1);
  void *p = hpcmem_place_alloc(3 * MiB, &a);
  ASSERT_NE(p, nullptr);
  EXPECT_EQ(share_log.row[0], 3 * MiB);
  EXPECT_EQ(share_log.locks, locks + 1);
  a.mapping = HPCMEM_MAP_ON_COMMIT;
  void *q = hpcmem_place_alloc(MiB, &a);
  EXPECT_EQ(share_log.row[0], 3 * MiB);   // pending: nothing placed yet
  ASSERT_EQ(hpcmem_commit(HPCMEM_COMMIT_EPOCH), 0);
  EXPECT_EQ(share_log.row[0], 4 * MiB);
  EXPECT_EQ(share_log.published_unlocked, 0);   // decisions publish inside the lock
  EXPECT_EQ(hpcmem_place_free(p), 0);
  EXPECT_EQ(share_log.row[0], MiB);             // frees publish without it
  EXPECT_EQ(hpcmem_place_free(q), 0);
  EXPECT_EQ(share_log.row[0], 0u);
  EXPECT_EQ(share_log.locks, share_log.unlocks);
  EXPECT_EQ(share_log.locks, locks + 2);   // the IMMEDIATE allocation and the commit
  int before = share_log.publishes;
  _hpcmem_place_set_share(nullptr);   // removed: nothing reaches the table any more
  EXPECT_NE(hpcmem_place_alloc(MiB, nullptr), nullptr);
  EXPECT_EQ(share_log.publishes, before);
}

// ---- binding on this machine (node 0 exists for real) ----

TEST_F(hpcmem_where_, immediate_binding_is_what_the_kernel_reports) {
  real();
  for (int mismatch : {HPCMEM_MISMATCH_ERROR, HPCMEM_MISMATCH_FALLBACK}) {
    hpcmem_place_attr_t a = attr({{HPCMEM_CLASS_DRAM, 0}}, HPCMEM_SPLIT_OS, HPCMEM_MAP_IMMEDIATE, mismatch, 1);
    char *p = (char *)hpcmem_place_alloc(3 * MiB, &a);
    ASSERT_NE(p, nullptr);
    memset(p, 1, 3 * MiB);
    hpcmem_where_t w[2];
    ASSERT_EQ(hpcmem_where(p, 3 * MiB, w, 2), 1);
    EXPECT_EQ(w[0].state, HPCMEM_PLACE_BOUND);
    EXPECT_EQ(w[0].cls, HPCMEM_CLASS_DRAM);
    EXPECT_EQ(w[0].nodes, 1u);
    EXPECT_EQ(w[0].kernel_policy, mismatch == HPCMEM_MISMATCH_ERROR ? MPOL_BIND : MPOL_PREFERRED);
    EXPECT_EQ(w[0].kernel_nodes, 1u);
    EXPECT_EQ(w[0].page_node, 0);
    // independent check straight from the kernel
    int mode = -1;
    unsigned long mask[2] = {0, 0};
    ASSERT_EQ(get_mempolicy(&mode, mask, 65, p + 2 * MiB, MPOL_F_ADDR), 0);
    EXPECT_EQ(mode, w[0].kernel_policy);
    EXPECT_EQ(mask[0], 1ul);
    EXPECT_EQ(hpcmem_place_free(p), 0);
  }
  EXPECT_EQ(hpcmem_where(NULL, 1, NULL, 0), -EINVAL);
  int x;
  EXPECT_EQ(hpcmem_where(&x, sizeof x, NULL, 0), -ENOENT);
}

TEST_F(hpcmem_where_, on_commit_touched_before_commit_is_moved_and_counted) {
  real();
  hpcmem_place_attr_t a = attr({{HPCMEM_CLASS_DRAM, HPCMEM_INDEX_ALL}}, HPCMEM_SPLIT_SPILL_OVER,
                               HPCMEM_MAP_ON_COMMIT, HPCMEM_MISMATCH_ERROR, 1);
  char *p = (char *)hpcmem_place_alloc(MiB, &a);
  char *q = (char *)hpcmem_place_alloc(MiB, &a);
  ASSERT_TRUE(p && q);
  hpcmem_where_t w[2];
  ASSERT_EQ(hpcmem_where(p, MiB, w, 2), 1);
  EXPECT_EQ(w[0].state, HPCMEM_PLACE_PENDING);
  EXPECT_EQ(w[0].kernel_policy, MPOL_DEFAULT);
  memset(p, 7, 256 * 1024);   // touched before the commit: 64 pages
  ASSERT_EQ(hpcmem_commit(HPCMEM_COMMIT_EPOCH), 0);
  hpcmem_place_stats_t st;
  hpcmem_place_stats(&st);
  EXPECT_EQ(st.moved_bytes, 256u * 1024);
  EXPECT_GT(st.move_ns, 0u);
  EXPECT_GE(st.commit_ns, st.move_ns);
  uint64_t move_ns = st.move_ns;
  EXPECT_EQ(st.epoch, 1u);
  EXPECT_EQ(st.pending, 0u);
  ASSERT_EQ(hpcmem_where(p, MiB, w, 2), 1);
  EXPECT_EQ(w[0].state, HPCMEM_PLACE_BOUND);
  EXPECT_EQ(w[0].kernel_policy, MPOL_BIND);
  EXPECT_EQ(w[0].page_node, 0);
  EXPECT_EQ(p[1000], 7);   // contents survive the move
  ASSERT_EQ(hpcmem_where(q, MiB, w, 2), 1);
  EXPECT_EQ(w[0].kernel_policy, MPOL_BIND);
  EXPECT_EQ(w[0].page_node, -ENOENT);   // never touched
  // the next epoch: only the new request; ALL takes everything again
  char *r = (char *)hpcmem_place_alloc(MiB, &a);
  ASSERT_EQ(hpcmem_where(r, MiB, w, 2), 1);
  EXPECT_EQ(w[0].epoch, 1);
  ASSERT_EQ(hpcmem_commit(HPCMEM_COMMIT_EPOCH), 0);
  hpcmem_place_stats(&st);
  EXPECT_EQ(st.moved_bytes, 256u * 1024);   // r was never touched: nothing to move
  EXPECT_EQ(st.move_ns, move_ns);
  EXPECT_EQ(hpcmem_commit(HPCMEM_COMMIT_EPOCH), -ENODATA);
  ASSERT_EQ(hpcmem_commit(HPCMEM_COMMIT_ALL), 0);
  hpcmem_place_stats(&st);
  EXPECT_EQ(st.epoch, 3u);
  EXPECT_EQ(st.commits, 3u);
  hpcmem_class_info_t c[1];
  ASSERT_GE(hpcmem_classes(c, 1), 1);
  EXPECT_EQ(c[0].used, 3 * MiB);   // recommitting did not count anything twice
  for (char *x : {p, q, r}) EXPECT_EQ(hpcmem_place_free(x), 0);
  ASSERT_GE(hpcmem_classes(c, 1), 1);
  EXPECT_EQ(c[0].used, 0u);
}

// ---- order independence over many random request sets ----

// A random request on the KNL (DRAM 0-3, HBM 4-7): 1-3 targets among
// whole classes and single nodes, any split, both mismatch modes.
hpcmem_place_req_t random_req(std::mt19937_64 &g) {
  const uint64_t page = 4096;
  static const hpcmem_place_target_t pool[] = {
      {HPCMEM_CLASS_HBM, HBM_NODES}, {HPCMEM_CLASS_DRAM, DRAM_NODES}, {HPCMEM_CLASS_HBM, 1ULL << 4},
      {HPCMEM_CLASS_HBM, 1ULL << 6}, {HPCMEM_CLASS_DRAM, 1ULL << 1}, {HPCMEM_CLASS_NEAR, 0x11}};
  hpcmem_place_req_t r;
  memset(&r, 0, sizeof r);
  // sizes from a few pages to 40 MiB, with repeats (identical requests are the hard case)
  static const uint64_t sizes[] = {16 * page, MiB, 3 * MiB, 8 * MiB, 8 * MiB + 64 * page, 20 * MiB, 40 * MiB};
  r.size = sizes[g() % 7];
  r.priority = (int)(g() % 3);
  r.split = (int)(g() % 4);
  r.chunk = MiB;
  r.mismatch = (int)(g() % 2);
  r.ntargets = 1 + (int)(g() % 3);
  for (int t = 0; t < r.ntargets; t++) r.targets[t] = pool[g() % 6];
  return r;
}

std::string outcome(const hpcmem_place_req_t &r) {
  std::ostringstream o;
  o << "failed " << r.failed << " bytes";
  for (int t = 0; t < r.ntargets; t++) o << " " << r.bytes[t];
  o << " charged";
  for (int nd = 0; nd < 8; nd++) o << " " << r.charged[nd];
  return o.str();
}

TEST_F(place_decide, random_request_sets_same_decision_in_any_order) {
  std::mt19937_64 g(7);
  std::vector<char> scratch(HPCMEM_PLACE_SCRATCH);
  int cases_with_failures = 0, cases_with_splits = 0;
  for (int c = 0; c < 300; c++) {
    int n = 2 + (int)(g() % 11);
    std::vector<hpcmem_place_req_t> base;
    for (int i = 0; i < n; i++) base.push_back(random_req(g));
    if (g() % 3 == 0) base.push_back(base[0]);   // an identical twin
    n = (int)base.size();
    uint64_t free0[HPCMEM_PLACE_NODES] = {0};
    for (int nd = 0; nd < 4; nd++) free0[nd] = 24 * MiB;      // DRAM scarce too: later rounds matter
    for (int nd = 4; nd < 8; nd++) free0[nd] = 6 * MiB;
    std::vector<hpcmem_place_req_t> first;
    std::vector<uint64_t> first_left;
    std::vector<int> perm(n);
    for (int i = 0; i < n; i++) perm[i] = i;
    for (int k = 0; k < 12; k++) {
      if (k) std::shuffle(perm.begin(), perm.end(), g);
      // arrival order = perm: ids are arrival numbers, as in hpcmem_place_alloc
      std::vector<hpcmem_place_req_t> work(n);
      std::vector<hpcmem_place_req_t *> ptr(n);
      for (int pos = 0; pos < n; pos++) {
        work[pos] = base[perm[pos]];
        work[pos].id = (uint64_t)pos;
        ptr[pos] = &work[pos];
      }
      uint64_t fr[HPCMEM_PLACE_NODES];
      memcpy(fr, free0, sizeof fr);
      _hpcmem_place_decide(ptr.data(), n, fr, scratch.data(), 4096);
      std::vector<hpcmem_place_req_t> got(n);
      for (int pos = 0; pos < n; pos++) got[perm[pos]] = work[pos];
      if (k == 0) {
        first = got;
        first_left.assign(fr, fr + HPCMEM_PLACE_NODES);
        for (auto &r : got) {
          cases_with_failures += r.failed;
          cases_with_splits += r.ntargets > 1 && r.bytes[0] && r.bytes[0] < r.size;
        }
        continue;
      }
      EXPECT_TRUE(std::equal(fr, fr + HPCMEM_PLACE_NODES, first_left.begin())) << "case " << c << " order " << k;
      // per request: failed, bytes per target, bytes charged per node.  Twins
      // (identical in every field) may trade outcomes with the arrival order;
      // as a set they must be the same.
      for (int i = 0; i < n; i++) {
        std::vector<std::string> want, have;
        for (int j = 0; j < n; j++)
          if (memcmp(&base[j], &base[i], sizeof base[i]) == 0) {
            want.push_back(outcome(first[j]));
            have.push_back(outcome(got[j]));
          }
        std::sort(want.begin(), want.end());
        std::sort(have.begin(), have.end());
        EXPECT_EQ(have, want) << "case " << c << " order " << k << " request " << i;
      }
    }
  }
  // the sets were hard enough: some ERROR requests failed, some requests were split
  EXPECT_GT(cases_with_failures, 0);
  EXPECT_GT(cases_with_splits, 0);
}

// ---- huge pages for large placed allocations ----

// The smaps entry of the mapping holding p: its VmFlags line and THPeligible.
struct Smaps {
  bool found = false, hg = false, nh = false;
  int thp_eligible = -1;
};

Smaps smaps_of(const void *p) {
  std::ifstream f("/proc/self/smaps");
  std::string line;
  Smaps s;
  bool in = false;
  uintptr_t a = (uintptr_t)p;
  while (std::getline(f, line)) {
    // a mapping's header: "lo-hi perms offset dev inode path" (lowercase hex);
    // its fields follow as "Name: value"
    size_t dash = line.find('-'), space = line.find(' ');
    if (!line.empty() && isxdigit((unsigned char)line[0]) && !isupper((unsigned char)line[0]) &&
        dash != std::string::npos && dash < space) {
      uintptr_t lo = std::stoull(line.substr(0, dash), nullptr, 16);
      uintptr_t hi = std::stoull(line.substr(dash + 1, space - dash - 1), nullptr, 16);
      in = a >= lo && a < hi;
      s.found |= in;
      continue;
    }
    if (!in) continue;
    if (line.rfind("THPeligible:", 0) == 0) s.thp_eligible = atoi(line.c_str() + 12);
    if (line.rfind("VmFlags:", 0) == 0) {
      std::istringstream v(line.substr(8));
      std::string fl;
      while (v >> fl) {
        s.hg |= fl == "hg";
        s.nh |= fl == "nh";
      }
    }
  }
  return s;
}

// "always [madvise] never" -> "madvise"; "" when the kernel has no THP.
std::string thp_mode() {
  std::ifstream f("/sys/kernel/mm/transparent_hugepage/enabled");
  std::string all;
  std::getline(f, all);
  size_t a = all.find('['), b = all.find(']');
  return a == std::string::npos || b == std::string::npos ? "" : all.substr(a + 1, b - a - 1);
}

TEST_F(hpcmem_place_alloc_, large_requests_ask_for_huge_pages) {
  std::string mode = thp_mode();
  if (mode.empty() || mode == "never")
    GTEST_SKIP() << "transparent huge pages are " << (mode.empty() ? "not in this kernel" : "disabled (never)");
  real();
  char thp_on[] = "HPCMEM_THP=1";   // the default, whatever the caller's environment says
  char *env[] = {thp_on, nullptr};
  _hpcmem_options_load(env);
  hpcmem_place_attr_t a = attr({{HPCMEM_CLASS_DRAM, 0}}, HPCMEM_SPLIT_OS, HPCMEM_MAP_IMMEDIATE,
                               HPCMEM_MISMATCH_FALLBACK, 1);
  const size_t page = 4096;
  // from 2 MiB (one PMD huge page on x86-64) on: aligned to it and MADV_HUGEPAGE
  for (size_t size : {2 * MiB, 8 * MiB + page}) {
    char *p = (char *)hpcmem_place_alloc(size, &a);
    ASSERT_NE(p, nullptr);
    EXPECT_EQ((uintptr_t)p % (2 * MiB), 0u) << size;
    memset(p, 1, size);
    Smaps s = smaps_of(p);
    ASSERT_TRUE(s.found);
    EXPECT_TRUE(s.hg) << size << " bytes: no \"hg\" in VmFlags";
    if (s.thp_eligible >= 0) {   // kernels since 5.x print it
      EXPECT_EQ(s.thp_eligible, 1) << size;
    }
    Smaps end = smaps_of(p + size - 1);   // the whole range, not just its start
    EXPECT_TRUE(end.hg);
    EXPECT_EQ(hpcmem_place_free(p), 0);
  }
  // below 2 MiB: ordinary pages (no madvise)
  char *q = (char *)hpcmem_place_alloc(2 * MiB - page, &a);
  ASSERT_NE(q, nullptr);
  Smaps s = smaps_of(q);
  ASSERT_TRUE(s.found);
  EXPECT_FALSE(s.hg);
  EXPECT_EQ(hpcmem_place_free(q), 0);
  _hpcmem_options_load(environ);
}

TEST_F(hpcmem_place_alloc_, no_huge_pages_with_HPCMEM_THP_0) {
  std::string mode = thp_mode();
  if (mode.empty() || mode == "never")
    GTEST_SKIP() << "transparent huge pages are " << (mode.empty() ? "not in this kernel" : "disabled (never)");
  real();
  char thp_off[] = "HPCMEM_THP=0";
  char *env[] = {thp_off, nullptr};
  _hpcmem_options_load(env);
  char *p = (char *)hpcmem_place_alloc(4 * MiB, nullptr);
  _hpcmem_options_load(environ);
  ASSERT_NE(p, nullptr);
  Smaps s = smaps_of(p);
  ASSERT_TRUE(s.found);
  EXPECT_FALSE(s.hg);
  EXPECT_EQ(hpcmem_place_free(p), 0);
}

// ---- the remaining documented errors ----

TEST_F(hpcmem_place_alloc_, bad_attribute_fields_and_limits) {
  real();
  hpcmem_place_attr_t a;
  hpcmem_place_attr_init(&a);
  ASSERT_EQ(hpcmem_place_attr_add(&a, HPCMEM_CLASS_DRAM, HPCMEM_INDEX_ALL), 0);
  hpcmem_place_attr_t b = a;
  b.nclasses = HPCMEM_PLACE_MAX_CLASSES + 1;   // written by hand
  errno = 0;
  EXPECT_EQ(hpcmem_place_alloc(MiB, &b), nullptr);
  EXPECT_EQ(errno, EINVAL);
  b.nclasses = -1;
  EXPECT_EQ(hpcmem_place_alloc(MiB, &b), nullptr);
  EXPECT_EQ(errno, EINVAL);
  EXPECT_EQ(hpcmem_place_attr_add(&b, HPCMEM_CLASS_DRAM, 0), -ENOSPC);
  b = a;
  b.priority = 1000001;
  EXPECT_EQ(hpcmem_place_alloc(MiB, &b), nullptr);
  EXPECT_EQ(errno, EINVAL);
  b.priority = 1000000;   // the top of the range is allowed
  void *ok = hpcmem_place_alloc(MiB, &b);
  EXPECT_NE(ok, nullptr);
  EXPECT_EQ(hpcmem_place_free(ok), 0);
  // no address space for it
  EXPECT_EQ(hpcmem_place_alloc((size_t)1 << 60, &a), nullptr);
  EXPECT_EQ(errno, ENOMEM);
  // 1024 live placed allocations, then ENOMEM; a free makes room again
  a.mapping = HPCMEM_MAP_ON_COMMIT;
  std::vector<void *> live;
  for (int i = 0; i < HPCMEM_PLACE_MAX_REQS; i++) {
    void *p = hpcmem_place_alloc(4096, &a);
    ASSERT_NE(p, nullptr) << i;
    live.push_back(p);
  }
  EXPECT_EQ(hpcmem_place_alloc(4096, &a), nullptr);
  EXPECT_EQ(errno, ENOMEM);
  EXPECT_EQ(hpcmem_place_free(live.back()), 0);
  live.pop_back();
  void *again = hpcmem_place_alloc(4096, &a);
  EXPECT_NE(again, nullptr);
  live.push_back(again);
  hpcmem_place_stats_t st;
  ASSERT_EQ(hpcmem_place_stats(&st), 0);
  EXPECT_EQ(st.pending, (uint64_t)HPCMEM_PLACE_MAX_REQS);
  for (void *p : live) ASSERT_EQ(hpcmem_place_free(p), 0);
  ASSERT_EQ(hpcmem_place_stats(&st), 0);
  EXPECT_EQ(st.pending, 0u);
  EXPECT_EQ(hpcmem_place_stats(NULL), -EINVAL);
  EXPECT_EQ(hpcmem_commit(HPCMEM_COMMIT_EPOCH), -ENODATA);   // they were freed before any commit
}

TEST_F(hpcmem_place_alloc_, free_needs_the_start_of_the_range) {
  real();
  char *p = (char *)hpcmem_place_alloc(3 * 4096, nullptr);
  ASSERT_NE(p, nullptr);
  EXPECT_EQ(hpcmem_place_free(p + 4096), -EINVAL);
  hpcmem_where_t w;
  EXPECT_EQ(hpcmem_where(p, 3 * 4096, &w, 1), 1);   // still there
  EXPECT_EQ(hpcmem_place_free(p), 0);
  EXPECT_EQ(hpcmem_where(p, 1, &w, 1), -ENOENT);
}

TEST_F(hpcmem_where_, bad_input) {
  real();
  char *p = (char *)hpcmem_place_alloc(2 * 4096, nullptr);
  ASSERT_NE(p, nullptr);
  hpcmem_where_t w[2];
  EXPECT_EQ(hpcmem_where(p, 0, w, 2), -EINVAL);            // len 0
  EXPECT_EQ(hpcmem_where(p, 4096, NULL, 1), -EINVAL);      // out NULL with max > 0
  EXPECT_EQ(hpcmem_where(p, 4096, w, -1), -EINVAL);
  EXPECT_EQ(hpcmem_where(p, 4096, NULL, 0), 1);            // counting only
  EXPECT_EQ(hpcmem_where(p + 4096, 4097, w, 2), -ENOENT);  // runs past the end
  EXPECT_EQ(hpcmem_where(p - 1, 2, w, 2), -ENOENT);        // starts before it
  EXPECT_EQ(hpcmem_place_free(p), 0);
}

}  // namespace
