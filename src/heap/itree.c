/* The interval tree of a thread-group heap (see itree.h). */
#include "config.h"
#include "heap/itree.h"
#include "util/log.h"
#include <errno.h>

#define RUN_BIT 0x80u
#define NONE_FREE(order) ((uint8_t)((order) + 1))   /* code of a node with no free block */

/* Node n (1-based, children 2n and 2n+1) at level L lies in band
 * level_band[L], in the block of its ancestor at the band's top level;
 * inside the block, nodes are numbered as in a tree of their own (1 = the
 * block's top). */
static inline uint64_t slot_of(const hpcmem_itree_t *t, uint64_t n, uint64_t *local) {
  unsigned level = (unsigned)(63 - __builtin_clzll(n));
  unsigned b = t->level_band[level], top = t->band_top[b], k = level - top;
  *local = (n & (((uint64_t)1 << k) - 1)) | ((uint64_t)1 << k);
  uint64_t block = (n >> k) - ((uint64_t)1 << top);
  return t->band_base[b] + (block << t->band_bits[b]) + *local;
}
static inline hpcmem_itree_node_t *at(const hpcmem_itree_t *t, uint64_t n) {
  uint64_t local;
  return &t->node[slot_of(t, n, &local)];
}
#define CODE(t, n) (at((t), (n))->code)
#define USED(t, n) (at((t), (n))->used)

static inline unsigned node_order(const hpcmem_itree_t *t, uint64_t n) {
  return t->depth - (unsigned)(63 - __builtin_clzll(n));
}
/* longest free run order of a node of order ord, or -1 when nothing is free */
static inline int longest_of(const hpcmem_itree_node_t *x, unsigned ord) {
  return (int)ord - (int)(x->code & ~RUN_BIT);
}
static inline int longest(const hpcmem_itree_t *t, uint64_t n) { return longest_of(at(t, n), node_order(t, n)); }
static inline int fully_free(const hpcmem_itree_t *t, uint64_t n) { return CODE(t, n) == 0; }
static inline uint64_t extent_root(const hpcmem_itree_t *t) {
  return (uint64_t)1 << (t->depth - t->extent_order);
}

/* A node's slot, walked to its parent or children without recomputing the
 * band arithmetic while the walk stays inside one block. */
typedef struct cursor {
  hpcmem_itree_node_t *p;
  uint64_t local;        /* index inside its block, 1 = the block's top */
  uint64_t bottom;       /* locals at or above this are the block's lowest level */
} cursor_t;

static inline cursor_t cur_at(const hpcmem_itree_t *t, uint64_t n) {
  cursor_t c;
  unsigned level = (unsigned)(63 - __builtin_clzll(n));
  c.p = &t->node[slot_of(t, n, &c.local)];
  c.bottom = (uint64_t)1 << (t->band_bits[t->level_band[level]] - 1);
  return c;
}
static inline cursor_t cur_parent(const hpcmem_itree_t *t, cursor_t c, uint64_t parent) {
  if (c.local == 1) return cur_at(t, parent);
  c.p -= c.local - (c.local >> 1);
  c.local >>= 1;
  return c;
}
static inline cursor_t cur_child(const hpcmem_itree_t *t, cursor_t c, uint64_t child) {
  if (c.local >= c.bottom) return cur_at(t, child);
  c.p += c.local + (child & 1);
  c.local = 2 * c.local + (child & 1);
  return c;
}
static inline hpcmem_itree_node_t *cur_sibling(const hpcmem_itree_t *t, cursor_t c, uint64_t n) {
  if (c.local == 1) return at(t, n ^ 1);
  return c.local & 1 ? c.p - 1 : c.p + 1;
}

/* Bands from the leaves up: the lowest has `low` levels (0: BAND), the others
 * BAND, the top one what is left.  Bands whose blocks fill pages start on a
 * page.  Returns the slot count. */
static size_t layout(hpcmem_itree_t *t, unsigned depth, unsigned low) {
  size_t slots = 0;
  unsigned bottom = depth, left = depth + 1;
  for (unsigned b = 0; left; b++) {
    unsigned v = b == 0 && low ? low : HPCMEM_ITREE_BAND;
    if (v > left) v = left;
    unsigned top = bottom + 1 - v;
    size_t align = (size_t)1 << (v < HPCMEM_ITREE_BAND ? v : HPCMEM_ITREE_BAND);
    slots = (slots + align - 1) & ~(align - 1);
    if (t) {
      t->band_base[b] = slots;
      t->band_bits[b] = (uint8_t)v;
      t->band_top[b] = (uint8_t)top;
      for (unsigned l = top; l <= bottom; l++) t->level_band[l] = (uint8_t)b;
    }
    slots += ((size_t)1 << top) << v;
    left -= v;
    bottom = top - 1;
  }
  return slots;
}

size_t _hpcmem_itree_mgmt_size(unsigned depth, unsigned low) {
  return layout(NULL, depth, low) * sizeof(hpcmem_itree_node_t);
}

void _hpcmem_itree_init(hpcmem_itree_t *t, void *mgmt, unsigned depth, unsigned low,
                        unsigned initial_extent_order) {
  t->node = (hpcmem_itree_node_t *)mgmt;
  layout(t, depth, low);
  t->depth = depth;
  t->extent_order = initial_extent_order < depth ? initial_extent_order : depth;
  t->used_blocks = 0;
}

/* Node n (at cursor c) changed by delta used blocks: its ancestors up to the
 * extent's root.  The codes stop changing at the first ancestor whose code
 * stays (a code depends on the children's codes only); the counts change all
 * the way. */
static void pull_up(const hpcmem_itree_t *t, uint64_t n, cursor_t c, int32_t delta) {
  uint64_t root = extent_root(t);
  unsigned ord = node_order(t, n);
  int codes = 1;
  while (n > root) {
    const hpcmem_itree_node_t *me = c.p, *sib = codes ? cur_sibling(t, c, n) : NULL;
    c = cur_parent(t, c, n >> 1);
    c.p->used += (uint32_t)delta;
    if (codes) {
      uint8_t code = 0;
      if (me->code || sib->code) {
        int a = longest_of(me, ord), b = longest_of(sib, ord);
        code = (uint8_t)((int)ord + 1 - (a > b ? a : b));
      }
      if (code == c.p->code) codes = 0;
      else c.p->code = code;
    }
    n >>= 1;
    ord++;
  }
}

/* The extent doubles: its new root (never written, like the new right half)
 * takes the old root's counts. */
static void extent_grow(hpcmem_itree_t *t) {
  uint64_t old = extent_root(t);
  const hpcmem_itree_node_t *o = at(t, old);
  t->extent_order++;
  if (o->code == 0) return;                     /* all free: the new root stays zero */
  hpcmem_itree_node_t *r = at(t, old >> 1);
  r->used = o->used;
  r->code = 1;                                  /* the right half is free: order - 1 */
}

/* n (at cursor c, of an order >= order) is fully free: its descendant
 * `run` of the order becomes the run, and the nodes between have a free
 * other side, never read (below a fully free node everything is zero).
 * Returns the run's first block. */
static int64_t take_run(hpcmem_itree_t *t, uint64_t n, cursor_t c, uint64_t run, unsigned order) {
  uint64_t top = n;
  if (run != n) c = cur_at(t, run);
  c.p->code = (uint8_t)(RUN_BIT | NONE_FREE(order));
  c.p->used = (uint32_t)1 << order;
  for (uint64_t a = run; a > top;) {
    c = cur_parent(t, c, a >> 1);
    a >>= 1;
    c.p->used = (uint32_t)1 << order;
    c.p->code = 1;                              /* longest free: the other half, order - 1 */
  }
  t->used_blocks += (uint64_t)1 << order;
  pull_up(t, top, c, (int32_t)1 << order);
  return (int64_t)((run << order) - ((uint64_t)1 << t->depth));
}

int64_t _hpcmem_itree_alloc(hpcmem_itree_t *t, unsigned order) {
  if (order > t->depth) return -1;
  for (;;) {
    uint64_t n = extent_root(t);
    unsigned ord = t->extent_order;
    cursor_t c = cur_at(t, n);
    if (order <= ord && longest_of(c.p, ord) >= (int)order) {
      /* descend while the node is split: both sides that fit, the one with
       * more free space (fewer used blocks), left on a tie */
      while (c.p->code != 0) {
        cursor_t l = cur_child(t, c, 2 * n), r = cur_child(t, c, 2 * n + 1);
        int okl = longest_of(l.p, ord - 1) >= (int)order, okr = longest_of(r.p, ord - 1) >= (int)order;
        if (okl && (!okr || l.p->used <= r.p->used)) { n = 2 * n; c = l; }
        else { n = 2 * n + 1; c = r; }
        ord--;
      }
      /* n is fully free (ord >= order; when equal, it was found split above
       * down to its order): the run is its leftmost descendant of the order */
      return take_run(t, n, c, n << (ord - order), order);
    }
    if (t->extent_order >= t->depth) return -1;
    extent_grow(t);
  }
}

int _hpcmem_itree_grow(hpcmem_itree_t *t, uint64_t idx, unsigned order, unsigned to) {
  if (to > t->extent_order || order >= to || (idx & (((uint64_t)1 << to) - 1)) || (idx >> t->extent_order))
    return -EINVAL;
  uint64_t n = (((uint64_t)1 << t->depth) + idx) >> order;    /* the run's node */
  cursor_t c = cur_at(t, n), run = c;
  if (c.p->code != (uint8_t)(RUN_BIT | NONE_FREE(order))) return -EINVAL;
  /* the other halves up to the new order must be fully free */
  for (unsigned o = order; o < to; o++, n >>= 1) {
    if (cur_sibling(t, c, n)->code != 0) return -EBUSY;
    c = cur_parent(t, c, n >> 1);
  }
  /* below the new run everything becomes zero again, as below a free node */
  uint64_t a = (((uint64_t)1 << t->depth) + idx) >> order;
  for (cursor_t d = run; a > n; a >>= 1) {
    d.p->code = 0;
    d.p->used = 0;
    d = cur_parent(t, d, a >> 1);
  }
  c.p->code = (uint8_t)(RUN_BIT | NONE_FREE(to));
  c.p->used = (uint32_t)1 << to;
  int32_t delta = (int32_t)(((uint32_t)1 << to) - ((uint32_t)1 << order));
  t->used_blocks += (uint64_t)delta;
  pull_up(t, n, c, delta);
  return 0;
}

/* Find the run node that starts at idx (descending along the address bits). */
static uint64_t find_run(const hpcmem_itree_t *t, uint64_t idx, cursor_t *cp) {
  if (idx >> t->extent_order) return 0;          /* nothing is allocated past the extent */
  uint64_t n = extent_root(t);
  cursor_t c = cur_at(t, n);
  for (unsigned ord = t->extent_order;; ord--) {
    if (c.p->code & RUN_BIT) {
      *cp = c;
      return (idx & (((uint64_t)1 << ord) - 1)) == 0 ? n : 0;  /* interior block: not a run start */
    }
    if (c.p->code == 0 || ord == 0) return 0;
    n = 2 * n + ((idx >> (ord - 1)) & 1);
    c = cur_child(t, c, n);
  }
}

int _hpcmem_itree_order(const hpcmem_itree_t *t, uint64_t idx) {
  cursor_t c;
  uint64_t n = find_run(t, idx, &c);
  return n ? (int)node_order(t, n) : -EINVAL;
}

int _hpcmem_itree_free(hpcmem_itree_t *t, uint64_t idx) {
  cursor_t c;
  uint64_t n = find_run(t, idx, &c);
  if (!n) return -EINVAL;
  unsigned ord = node_order(t, n);
  c.p->code = 0;
  c.p->used = 0;
  t->used_blocks -= (uint64_t)1 << ord;
  pull_up(t, n, c, -((int32_t)1 << ord));
  return (int)ord;
}

/* Returns used blocks of the subtree, or -1 after reporting a broken
 * invariant (below a fully free node, every node must be zero). */
static int64_t check_zero(const hpcmem_itree_t *t, uint64_t n) {
  if (CODE(t, n) != 0 || USED(t, n) != 0) {
    _hpcmem_warn("itree: node %llu below a free node is not zero (code %u used %u)", (unsigned long long)n,
                 CODE(t, n), USED(t, n));
    return -1;
  }
  if (node_order(t, n) == 0) return 0;
  return check_zero(t, 2 * n) < 0 || check_zero(t, 2 * n + 1) < 0 ? -1 : 0;
}

static int64_t check_node(const hpcmem_itree_t *t, uint64_t n, int deep) {
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
    return deep ? check_zero(t, n) : 0;
  }
  if (ord == 0) { _hpcmem_warn("itree: leaf %llu in a bad state", (unsigned long long)n); return -1; }
  int64_t ul = check_node(t, 2 * n, deep), ur = check_node(t, 2 * n + 1, deep);
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

/* The zero subtrees below free nodes are walked only for small trees (the
 * tests'): a heap's tree has millions of them. */
#define CHECK_ZERO_DEPTH 16

int _hpcmem_itree_check(const hpcmem_itree_t *t) {
  int64_t u = check_node(t, extent_root(t), t->depth <= CHECK_ZERO_DEPTH);
  if (u < 0) return -EFAULT;
  if ((uint64_t)u != t->used_blocks) {
    _hpcmem_warn("itree: %llu blocks used in the tree, %llu counted", (unsigned long long)u,
                 (unsigned long long)t->used_blocks);
    return -EFAULT;
  }
  return 0;
}
