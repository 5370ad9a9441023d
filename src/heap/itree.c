/* The interval tree of a thread-group heap (see itree.h). */
#include "config.h"
#include "heap/itree.h"
#include "util/log.h"
#include <errno.h>

#define RUN_BIT 0x80u
#define NONE_FREE(order) ((uint8_t)((order) + 1))   /* code of a node with no free block */

/* Node n (1-based, children 2n and 2n+1) at level L lies in band
 * (depth - L) / BAND, in the block of its ancestor at the band's top level
 * Ltop; inside the block, nodes are numbered as in a tree of their own. */
static inline hpcmem_itree_node_t *at(const hpcmem_itree_t *t, uint64_t n) {
  unsigned level = (unsigned)(63 - __builtin_clzll(n));
  unsigned band = (t->depth - level) / HPCMEM_ITREE_BAND;
  int top = (int)t->depth - (int)(band * HPCMEM_ITREE_BAND + HPCMEM_ITREE_BAND - 1);
  unsigned ltop = top > 0 ? (unsigned)top : 0, k = level - ltop;
  uint64_t local = ((uint64_t)1 << k) | (n & (((uint64_t)1 << k) - 1));
  uint64_t block = (n >> k) - ((uint64_t)1 << ltop);
  return &t->node[t->band_base[band] + (block << HPCMEM_ITREE_BAND) + local];
}
#define CODE(t, n) (at((t), (n))->code)
#define USED(t, n) (at((t), (n))->used)

static inline unsigned node_order(const hpcmem_itree_t *t, uint64_t n) {
  return t->depth - (unsigned)(63 - __builtin_clzll(n));
}
/* longest free run order of node n, or -1 when nothing is free */
static inline int longest(const hpcmem_itree_t *t, uint64_t n) {
  return (int)node_order(t, n) - (int)(CODE(t, n) & ~RUN_BIT);
}
static inline int fully_free(const hpcmem_itree_t *t, uint64_t n) { return CODE(t, n) == 0; }

/* Slots of each band (blocks of 2^BAND slots, one per node at the band's top level). */
static size_t layout(unsigned depth, size_t *base) {
  size_t slots = 0;
  for (unsigned b = 0; b < HPCMEM_ITREE_MAX_BANDS; b++) {
    int top = (int)depth - (int)(b * HPCMEM_ITREE_BAND + HPCMEM_ITREE_BAND - 1);
    if (base) base[b] = slots;
    if (b * HPCMEM_ITREE_BAND > depth) continue;           /* no such band */
    slots += ((size_t)1 << (top > 0 ? top : 0)) << HPCMEM_ITREE_BAND;
  }
  return slots;
}

size_t _hpcmem_itree_mgmt_size(unsigned depth) {
  return layout(depth, NULL) * sizeof(hpcmem_itree_node_t);
}

void _hpcmem_itree_init(hpcmem_itree_t *t, void *mgmt, unsigned depth, unsigned initial_extent_order) {
  t->node = (hpcmem_itree_node_t *)mgmt;
  layout(depth, t->band_base);
  t->depth = depth;
  t->extent_order = initial_extent_order < depth ? initial_extent_order : depth;
  t->used_blocks = 0;
}

/* Recompute node n from its children after a change below it. */
static void pull_up(hpcmem_itree_t *t, uint64_t n) {
  for (; n >= 1; n >>= 1) {
    uint64_t l = 2 * n, r = l + 1;
    unsigned ord = node_order(t, n);
    USED(t, n) = USED(t, l) + USED(t, r);
    if (fully_free(t, l) && fully_free(t, r)) CODE(t, n) = 0;
    else {
      int ll = longest(t, l), lr = longest(t, r);
      int best = ll > lr ? ll : lr;
      CODE(t, n) = (uint8_t)((int)ord - best);
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
        if (fully_free(t, n)) { CODE(t, l) = CODE(t, r) = 0; USED(t, l) = USED(t, r) = 0; }
        int okl = longest(t, l) >= (int)order, okr = longest(t, r) >= (int)order;
        /* both fit: the side with more free space (fewer used blocks); left on a tie */
        n = (okl && (!okr || USED(t, l) <= USED(t, r))) ? l : r;
      }
      CODE(t, n) = (uint8_t)(RUN_BIT | NONE_FREE(order));
      USED(t, n) = (uint32_t)1 << order;
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
    if (CODE(t, n) & RUN_BIT) {
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
  CODE(t, n) = 0;
  USED(t, n) = 0;
  t->used_blocks -= (uint64_t)1 << ord;
  if (n > 1) pull_up(t, n >> 1);
  return (int)ord;
}

/* Returns used blocks of the subtree, or -1 after reporting a broken invariant. */
static int64_t check_node(const hpcmem_itree_t *t, uint64_t n) {
  unsigned ord = node_order(t, n);
  if (CODE(t, n) & RUN_BIT) {
    if ((CODE(t, n) & ~RUN_BIT) != NONE_FREE(ord) || USED(t, n) != (1u << ord)) {
      _hpcmem_warn("itree: run node %llu has code %u used %u", (unsigned long long)n, CODE(t, n), USED(t, n));
      return -1;
    }
    return (int64_t)1 << ord;
  }
  if (fully_free(t, n)) {
    if (USED(t, n) != 0) { _hpcmem_warn("itree: free node %llu has used %u", (unsigned long long)n, USED(t, n)); return -1; }
    return 0;
  }
  if (ord == 0) { _hpcmem_warn("itree: leaf %llu in a bad state", (unsigned long long)n); return -1; }
  int64_t ul = check_node(t, 2 * n), ur = check_node(t, 2 * n + 1);
  if (ul < 0 || ur < 0) return -1;
  int ll = longest(t, 2 * n), lr = longest(t, 2 * n + 1);
  int both_free = fully_free(t, 2 * n) && fully_free(t, 2 * n + 1);
  int expect = both_free ? (int)ord : (ll > lr ? ll : lr);
  if (USED(t, n) != (uint64_t)(ul + ur) || longest(t, n) != expect) {
    _hpcmem_warn("itree: node %llu used %u (children %lld) longest %d (expected %d)", (unsigned long long)n,
                 USED(t, n), (long long)(ul + ur), longest(t, n), expect);
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
