/* The interval tree of a thread-group heap (Mmalloc, DESIGN.md tier 2).
 *
 * A heap's data area is a power-of-two number of datablocks.  The tree is an
 * implicit, perfectly balanced binary tree over those blocks: node 1 covers
 * the whole area, node i's children 2i and 2i+1 cover its two halves.  Every
 * node carries the free space of its subtree (as a used-block count) and the
 * order of the longest free power-of-two run inside it.  Allocation of a run
 * of 2^k blocks descends from the root towards the side with MORE free space
 * among the sides that can hold the run (the paper's workflow), and marks the
 * node it stops at as one allocation (a "data manager").  Freeing searches the
 * tree from the root along the address bits of the block index.
 *
 * All of it lives in a management area apart from the data; zero when fresh
 * and zero means "free", so untouched parts of a huge tree cost no memory.
 * Invariant: below a fully free node every node is zero, so allocation never
 * writes, and mostly never reads, the free side of a split.
 *
 * The nodes are stored in blocks, each a subtree of up to nine levels (4 KiB),
 * bands of blocks counted from the leaves.  The lowest band can be given
 * fewer levels (`low`): the group heaps make its top the order of their
 * smallest span, so that the nodes every span and larger run uses, up to
 * 2^(low+8) blocks, lie in one 4 KiB block, and only runs smaller than a span
 * reach into the lowest band.  Allocation is confined to the leftmost
 * `extent` blocks, doubled when they are full, which keeps a young heap
 * compact; the nodes above the extent's root are neither read nor written
 * until the extent reaches them.  Not thread-safe: the owning heap's lock
 * protects it. */
#ifndef HPCMEM_HEAP_ITREE_H
#define HPCMEM_HEAP_ITREE_H
#include <stddef.h>
#include <stdint.h>

#define HPCMEM_ITREE_BAND 9          /* levels per block: 511 nodes in 512 slots of 8 bytes */
#define HPCMEM_ITREE_MAX_BANDS 9
#define HPCMEM_ITREE_MAX_DEPTH 62

typedef struct hpcmem_itree_node {
  uint32_t used;        /* blocks in use in the subtree */
  uint8_t code;         /* bit 7 = allocated as one run; low bits = order - longest free order */
  uint8_t pad_[3];
} hpcmem_itree_node_t;

typedef struct hpcmem_itree {
  hpcmem_itree_node_t *node;
  size_t band_base[HPCMEM_ITREE_MAX_BANDS];   /* first slot of each band (band 0 holds the leaves) */
  uint8_t band_bits[HPCMEM_ITREE_MAX_BANDS];  /* levels of the band's blocks (2^bits slots each) */
  uint8_t band_top[HPCMEM_ITREE_MAX_BANDS];   /* tree level of the band's block tops */
  uint8_t level_band[HPCMEM_ITREE_MAX_DEPTH + 1];
  unsigned depth;       /* leaves are at this depth; node count is 2^(depth+1) - 1 */
  unsigned extent_order;/* allocation confined to the first 2^extent_order blocks */
  uint64_t used_blocks;
} hpcmem_itree_t;

/* Bytes of management area for a tree over 2^depth blocks whose lowest band
 * has `low` levels (0: nine, like the others); depth <= HPCMEM_ITREE_MAX_DEPTH. */
size_t _hpcmem_itree_mgmt_size(unsigned depth, unsigned low);
/* mgmt must be zeroed memory of _hpcmem_itree_mgmt_size(depth, low) bytes. */
void _hpcmem_itree_init(hpcmem_itree_t *t, void *mgmt, unsigned depth, unsigned low,
                        unsigned initial_extent_order);
/* A run of 2^order blocks: its first block index, or -1 when none is free. */
int64_t _hpcmem_itree_alloc(hpcmem_itree_t *t, unsigned order);
/* The run of 2^order blocks at idx becomes one of 2^to (to > order) in place,
 * when idx is aligned to it and the rest of it is free: 0, -EBUSY, -EINVAL
 * (no such run). */
int _hpcmem_itree_grow(hpcmem_itree_t *t, uint64_t idx, unsigned order, unsigned to);
/* Free the run that starts at block idx: its order, or -EINVAL when idx is not
 * the first block of an allocated run (interior or unallocated: double free). */
int _hpcmem_itree_free(hpcmem_itree_t *t, uint64_t idx);
/* Order of the allocated run starting at idx, or -EINVAL. */
int _hpcmem_itree_order(const hpcmem_itree_t *t, uint64_t idx);
/* Check every invariant of the reachable tree: 0, or -EFAULT with a message. */
int _hpcmem_itree_check(const hpcmem_itree_t *t);

#endif
