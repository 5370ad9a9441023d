/* The interval tree of a thread-group heap (see itree.h). */
#include "config.h"
#include "heap/itree.h"
#include "util/log.h"
#include <errno.h>

#define RUN_BIT 0x80u
#define NONE_FREE(order) ((uint8_t)((order) + 1))   /* code of a node with no free block */

static inline unsigned node_order(const hpcmem_itree_t *t, uint64_t n) {
  return t->depth - (unsigned)(63 - __builtin_clzll(n));
}
/* longest free run order of node n, or -1 when nothing is free */
static inline int longest(const hpcmem_itree_t *t, uint64_t n) {
  return (int)node_order(t, n) - (int)(t->code[n] & ~RUN_BIT);
}
static inline int fully_free(const hpcmem_itree_t *t, uint64_t n) { return t->code[n] == 0; }

size_t _hpcmem_itree_mgmt_size(unsigned depth) {
  size_t nodes = (size_t)2 << depth;
  return nodes * sizeof(uint32_t) + nodes;
}

void _hpcmem_itree_init(hpcmem_itree_t *t, void *mgmt, unsigned depth, unsigned initial_extent_order) {
  size_t nodes = (size_t)2 << depth;
  t->used = (uint32_t *)mgmt;
  t->code = (uint8_t *)mgmt + nodes * sizeof(uint32_t);
  t->depth = depth;
  t->extent_order = initial_extent_order < depth ? initial_extent_order : depth;
  t->used_blocks = 0;
}

/* Recompute node n from its children after a change below it. */
static void pull_up(hpcmem_itree_t *t, uint64_t n) {
  for (; n >= 1; n >>= 1) {
    uint64_t l = 2 * n, r = l + 1;
    unsigned ord = node_order(t, n);
    t->used[n] = t->used[l] + t->used[r];
    if (fully_free(t, l) && fully_free(t, r)) t->code[n] = 0;
    else {
      int ll = longest(t, l), lr = longest(t, r);
      int best = ll > lr ? ll : lr;
      t->code[n] = (uint8_t)((int)ord - best);
    }
    if (n == 1) break;
  }
}

int64_t _hpcmem_itree_alloc(hpcmem_itree_t *t, unsigned order) {
  if (order > t->depth) return -1;
  for (;;) {
    uint64_t root = (uint64_t)1 << (t->depth - t->extent_order);   /* leftmost node of the extent */
    if (order <= t->extent_order && longest(t, root) >= (int)order) {
      uint64_t n = root;
      while (node_order(t, n) > order) {
        uint64_t l = 2 * n, r = l + 1;
        if (fully_free(t, n)) { t->code[l] = t->code[r] = 0; t->used[l] = t->used[r] = 0; }
        int okl = longest(t, l) >= (int)order, okr = longest(t, r) >= (int)order;
        /* both fit: the side with more free space (fewer used blocks); left on a tie */
        n = (okl && (!okr || t->used[l] <= t->used[r])) ? l : r;
      }
      t->code[n] = (uint8_t)(RUN_BIT | NONE_FREE(order));
      t->used[n] = (uint32_t)1 << order;
      t->used_blocks += (uint64_t)1 << order;
      if (n > 1) pull_up(t, n >> 1);
      return (int64_t)((n << order) - ((uint64_t)1 << t->depth));
    }
    if (t->extent_order >= t->depth) return -1;
    t->extent_order++;
  }
}

/* Find the run node that starts at idx (descending along the address bits). */
static uint64_t find_run(const hpcmem_itree_t *t, uint64_t idx) {
  if (idx >> t->depth) return 0;
  uint64_t n = 1;
  for (unsigned level = 0;; level++) {
    if (t->code[n] & RUN_BIT) {
      unsigned ord = node_order(t, n);
      return (idx & (((uint64_t)1 << ord) - 1)) == 0 ? n : 0;  /* interior block: not a run start */
    }
    if (fully_free(t, n) || level == t->depth) return 0;
    n = 2 * n + ((idx >> (t->depth - level - 1)) & 1);
  }
}

int _hpcmem_itree_order(const hpcmem_itree_t *t, uint64_t idx) {
  uint64_t n = find_run(t, idx);
  return n ? (int)node_order(t, n) : -EINVAL;
}

int _hpcmem_itree_free(hpcmem_itree_t *t, uint64_t idx) {
  uint64_t n = find_run(t, idx);
  if (!n) return -EINVAL;
  unsigned ord = node_order(t, n);
  t->code[n] = 0;
  t->used[n] = 0;
  t->used_blocks -= (uint64_t)1 << ord;
  if (n > 1) pull_up(t, n >> 1);
  return (int)ord;
}

/* Returns used blocks of the subtree, or -1 after reporting a broken invariant. */
static int64_t check_node(const hpcmem_itree_t *t, uint64_t n) {
  unsigned ord = node_order(t, n);
  if (t->code[n] & RUN_BIT) {
    if ((t->code[n] & ~RUN_BIT) != NONE_FREE(ord) || t->used[n] != (1u << ord)) {
      _hpcmem_warn("itree: run node %llu has code %u used %u", (unsigned long long)n, t->code[n], t->used[n]);
      return -1;
    }
    return (int64_t)1 << ord;
  }
  if (fully_free(t, n)) {
    if (t->used[n] != 0) { _hpcmem_warn("itree: free node %llu has used %u", (unsigned long long)n, t->used[n]); return -1; }
    return 0;
  }
  if (ord == 0) { _hpcmem_warn("itree: leaf %llu in a bad state", (unsigned long long)n); return -1; }
  int64_t ul = check_node(t, 2 * n), ur = check_node(t, 2 * n + 1);
  if (ul < 0 || ur < 0) return -1;
  int ll = longest(t, 2 * n), lr = longest(t, 2 * n + 1);
  int both_free = fully_free(t, 2 * n) && fully_free(t, 2 * n + 1);
  int expect = both_free ? (int)ord : (ll > lr ? ll : lr);
  if (t->used[n] != (uint64_t)(ul + ur) || longest(t, n) != expect) {
    _hpcmem_warn("itree: node %llu used %u (children %lld) longest %d (expected %d)", (unsigned long long)n,
                 t->used[n], (long long)(ul + ur), longest(t, n), expect);
    return -1;
  }
  return ul + ur;
}

int _hpcmem_itree_check(const hpcmem_itree_t *t) {
  int64_t u = check_node(t, 1);
  if (u < 0) return -EFAULT;
  if ((uint64_t)u != t->used_blocks) {
    _hpcmem_warn("itree: %llu blocks used in the tree, %llu counted", (unsigned long long)u,
                 (unsigned long long)t->used_blocks);
    return -EFAULT;
  }
  return 0;
}
