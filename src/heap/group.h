/* Thread-group heaps (Mmalloc, DESIGN.md tier 2).
 *
 * C heaps, no global heap.  The data area is one reservation cut into C
 * slices of 2^HPCMEM_SLICE_SHIFT bytes, so the heap of an address is its high
 * bits and the datablock its low bits.  Each heap manages its slice with an
 * interval tree (itree.h) of power-of-two runs of datablocks.  A run is either
 * a span (carved into objects of one size class, handed to thread caches in
 * batches) or a direct run (one allocation: sizes above the largest class
 * that stay below the large threshold, and large alignments).  Every run's
 * record (its "data manager", hpcmem_span_t) lives in the heap's management
 * area, never in front of the data; a chunk map (one entry per 64 KiB, where
 * runs smaller than that defer to a page map) gives the record of any
 * address in O(1) for the slow paths, and the tree search
 * (_hpcmem_itree_free) validates runs when they are given back.
 *
 * Frees from a thread of another group go onto the span's lock-free remote
 * list; the owner collects them when it next refills, so a remote free never
 * takes the owner's lock. */
#ifndef HPCMEM_HEAP_GROUP_H
#define HPCMEM_HEAP_GROUP_H
#include <stddef.h>
#include <stdint.h>
#include "heap/itree.h"
#include "heap/sizeclass.h"
#include "util/lock.h"

#define HPCMEM_SLICE_SHIFT 34          /* 16 GiB of address space per heap */
#define HPCMEM_MAX_HEAPS 64
#define HPCMEM_PAGEMAP_SHIFT 12        /* page map granularity, whatever the datablock size */
#define HPCMEM_CHUNK_SHIFT 16          /* class map and chunk map granularity: spans are at least this
                                          big and aligned */

#define HPCMEM_STASH 4                 /* chains a heap keeps of each class (group.c: the stash) */

enum { HPCMEM_SPAN_SMALL = 1, HPCMEM_SPAN_RUN = 2 };

typedef struct hpcmem_span {
  /* first line: what refills, flushes and the slow free path read */
  char *start;
  uint64_t divmagic;         /* ceil(2^64 / obj_size): divisibility test with one multiply */
  uint32_t obj_size;
  uint32_t capacity;         /* objects in the span */
  uint32_t used;             /* objects out of the span (with users, in caches, on the remote list);
                                the free list holds bump - used - (the hole's) objects */
  uint32_t bump;             /* objects carved so far (the rest were never touched) */
  uint8_t cls, kind, order, in_partial;   /* in_partial: which list of the heap holds it (group.c) */
  uint16_t heap;
  uint16_t fast_heap;        /* heap for spans of small objects, HPCMEM_NO_HEAP for direct runs */
  uint8_t pending;           /* on the heap's pending stack */
  uint8_t kept;              /* empty, counted in the heap's empty_bytes instead of given back */
  uint8_t on_kept_list;      /* on the heap's queue of kept spans (maybe reused since: kept 0) */
  uint8_t pad_;
  uint32_t dirty;            /* bytes from start that another class touched (taken over: group.c) */
  void *free;                /* owner-lock protected; its objects carry the free key */
  void *free_tail;           /* last object of free (when free is not NULL) */
  /* second line */
  void *remote;              /* lock-free stack of objects freed by other groups */
  union {
    size_t run_size;         /* direct runs: usable size */
    uint64_t hole;           /* spans: carved objects that came back unwritten (group.c:
                                uncarve), first | count << 32, 0 for none; one word, as
                                _hpcmem_span_is_object reads it without the lock */
  };
  struct hpcmem_span *next, *prev, *pending_next;
  struct hpcmem_span *kept_next;   /* the heap's queue of kept spans */
} __attribute__((aligned(64))) hpcmem_span_t;

typedef struct hpcmem_heap {
  hpcmem_lock_t lock;
  unsigned index;
  char *base;
  hpcmem_itree_t tree;
  /* _hpcmem_heaps_init writes the fields above and desc_next, desc_end of
   * every heap, used or not: together in the heap's first 216 bytes, they
   * touch no page beyond the one where the heap begins (docs/footprint.md,
   * session 23: on a 2-cpu machine with one thread group, the second heap
   * begins in the first one's page) */
  hpcmem_span_t *desc_next, *desc_end;
  hpcmem_span_t *desc_free;
  hpcmem_span_t *partial[HPCMEM_NCLASSES];   /* spans with free objects */
  hpcmem_span_t *fresh[HPCMEM_NCLASSES];     /* spans with none but with uncarved room or a hole */
  hpcmem_span_t *pending;                    /* spans with remote frees (lock-free push) */
  uint64_t mapped_bytes;                     /* bytes of runs taken from the tree */
  uint64_t free_small_bytes;                 /* bytes in span free lists (retained) */
  uint64_t empty_bytes;                      /* bytes of empty spans kept (group.c: empty_budget) */
  hpcmem_span_t *kept_head, *kept_tail;      /* spans kept empty, oldest first */
  uint64_t dirty_bytes;                      /* pages of taken-over spans beyond their carving (group.c) */
  /* The stash (group.c): chains of objects that thread caches flushed,
   * kept whole for the next refill of their class.  Last: a heap that no
   * cache ever stashed into reads stash_bytes only, not the arrays' pages. */
  uint64_t stash_bytes;                      /* bytes of all chains (retained, free) */
  uint8_t stash_count[HPCMEM_NCLASSES];      /* chains of each class */
  uint16_t stash_n[HPCMEM_NCLASSES][HPCMEM_STASH];
  void *stash[HPCMEM_NCLASSES][HPCMEM_STASH];
} hpcmem_heap_t;

typedef struct hpcmem_heaps {
  char *base;
  size_t size;                /* count << HPCMEM_SLICE_SHIFT */
  /* The record of the run covering each 64 KiB chunk of all slices, or
   * HPCMEM_CHUNK_SMALL_RUNS where runs smaller than a chunk lie: their
   * records are in the page map (one entry per 4 KiB page, written for those
   * runs only).  Spans and most direct runs are chunks or more, so a young
   * heap's first 32 MiB of runs have their records in one page of the chunk
   * map. */
  hpcmem_span_t **chunkmap;
  hpcmem_span_t **pagemap;
  uint8_t *classmap;          /* one byte per 64 KiB chunk of all slices: the key of the size class
                                 of the span covering the chunk (HPCMEM_CLASS_KEY), 0 when no span
                                 of small objects does */
  unsigned count, block_shift;
  char *mgmt;                 /* the management area (trees and records of all heaps) */
  /* last: the start writes the heaps there are, so a process writes the
   * first pages of this array only (src/hot-text.ld) */
  hpcmem_heap_t heap[HPCMEM_MAX_HEAPS];
} hpcmem_heaps_t;

extern HPCMEM_HIDDEN hpcmem_heaps_t _hpcmem_heaps;

/* What the free fast path needs of a size class, in one place: spans of a
 * class all have the same size (a power of two, aligned to it, at least one
 * chunk), so a pointer's offset in its span is its slice offset masked, and
 * the span record is not needed to tell an object boundary.  Entry 0 (no
 * class) has limit 0, which no offset passes.  32 bytes, as a bin: one
 * shifted class index addresses both.  The last word holds what a new span
 * of the class starts with, computed once at start (a class's first refill
 * divided twice for it: 633 -> 609 instructions, BENCHMARKS.md session 21). */
typedef struct hpcmem_class_geom {
  uint64_t divmagic;          /* ceil(2^64 / size) */
  uint64_t limit;             /* offset * divmagic (mod 2^64) is below this exactly at object starts */
  uint64_t span_mask;         /* span bytes - 1 (spans are at most 1 MiB) */
  uint32_t capacity;          /* objects in a span (what a new span's record starts with) */
  uint8_t order;              /* a span's order in datablocks */
  uint8_t pad_[3];
} hpcmem_class_geom_t;
extern HPCMEM_HIDDEN hpcmem_class_geom_t _hpcmem_class_geom[HPCMEM_NCLASSES];

int _hpcmem_heaps_init(unsigned count, unsigned block_shift);
void _hpcmem_heaps_release(void);

#define HPCMEM_CHUNK_SMALL_RUNS ((hpcmem_span_t *)1)

/* The record of the run holding p, or NULL when p is not in a live run. */
static inline hpcmem_span_t *_hpcmem_span_of(const void *p) {
  uintptr_t off = (uintptr_t)p - (uintptr_t)_hpcmem_heaps.base;
  if (off >= _hpcmem_heaps.size) return NULL;
  hpcmem_span_t *s = _hpcmem_heaps.chunkmap[off >> HPCMEM_CHUNK_SHIFT];
  return s == HPCMEM_CHUNK_SMALL_RUNS ? _hpcmem_heaps.pagemap[off >> HPCMEM_PAGEMAP_SHIFT] : s;
}
#define HPCMEM_NO_HEAP 0xFFFFu
/* p is at an object boundary of span s (Lemire's divisibility test: off is a
 * multiple of the size iff off * ceil(2^64/size) wraps below the magic). */
static inline int _hpcmem_span_on_boundary(const hpcmem_span_t *s, const void *p) {
  return (uint64_t)((const char *)p - s->start) * s->divmagic < s->divmagic;
}
/* A span's hole (see hole above): its first object and its count. */
static inline uint32_t _hpcmem_hole_at(uint64_t hole) { return (uint32_t)hole; }
static inline uint32_t _hpcmem_hole_n(uint64_t hole) { return (uint32_t)(hole >> 32); }
/* p is the start of an object of span s that was handed out at some time. */
static inline int _hpcmem_span_is_object(const hpcmem_span_t *s, const void *p) {
  size_t off = (size_t)((const char *)p - s->start);
  if (!_hpcmem_span_on_boundary(s, p) || off >= (size_t)s->bump * s->obj_size) return 0;
  uint64_t hole = __atomic_load_n(&s->hole, __ATOMIC_RELAXED);
  if (!hole) return 1;                        /* no hole: no division (a realloc's lookup, 40 cycles) */
  return off / s->obj_size - _hpcmem_hole_at(hole) >= _hpcmem_hole_n(hole);   /* not in the hole */
}

/* Is off (an offset in a heap's slice, inside a chunk of class cls) the
 * start of an object?  Lemire's test with the span's end folded in: with
 * e = size * divmagic - 2^64, a multiple k * size of the size gives k * e,
 * anything else at least divmagic, so "below capacity * e" is "an object
 * start below capacity" (limit = capacity * e < span <= 2^20 < divmagic; a
 * power-of-two size divides its span, e = 0: limit 1, only multiples give 0). */
static inline int _hpcmem_class_on_boundary(const hpcmem_class_geom_t *g, uintptr_t off) {
  return (off & g->span_mask) * g->divmagic < g->limit;
}
/* The limit of a class of `size` bytes in spans of `span` bytes. */
static inline uint64_t _hpcmem_class_limit(uint64_t size, uint64_t span) {
  uint64_t magic = UINT64_MAX / size + 1, e = size * magic;   /* mod 2^64 */
  return e ? span / size * e : 1;
}

/* At most `want` objects of class cls from heap h (a span's whole free list
 * when it fits, else `want` of it: more, which a refill took before, left
 * other threads' refills to carve new memory); returns how many (0: out of
 * memory).  One goes to first without the free key (a fresh one
 * is not written), nlist to list, linked through their first word and
 * carrying the key, and nfresh never-written ones lie from fresh on, one
 * object size apart.  With recycled_only, only objects that were handed out
 * before (freed, or stashed): none fresh, nfresh 0, and 0 when the heap has
 * no such object of the class (for a bin that still holds a fresh range). */
typedef struct hpcmem_refill {
  void *first, *list;
  char *fresh;
  unsigned nlist, nfresh;
} hpcmem_refill_t;
/* Objects a thread holds alone in its bins (one per class, not written
 * since they were freed), offered to a refill that would otherwise make a
 * span of untouched memory: when one is all that is out of its span and the
 * span can hold the new class's span (of the same size, or smaller and able
 * to grow in place), it goes back to its span, unwritten when it was the
 * span's last carving, and the span becomes the new class's (`taken` says
 * which: the caller's bin no longer holds it), else -1. */
#define HPCMEM_LONE_MAX 4
typedef struct hpcmem_lone {
  void *obj[HPCMEM_LONE_MAX];
  unsigned cls[HPCMEM_LONE_MAX];
  unsigned n;
  int taken;
} hpcmem_lone_t;
unsigned _hpcmem_heap_refill(hpcmem_heap_t *h, unsigned cls, hpcmem_refill_t *out, unsigned want,
                             hpcmem_lone_t *lone, int recycled_only);
/* Give back a range of n fresh objects (never written) from a refill without
 * writing them: uncarved when it was its span's last carving, else it becomes
 * the span's hole (or joins it from below), which the class's refills hand
 * out as fresh objects.  1 done, 0 not (the span has another hole: the
 * caller writes the objects onto a list). */
int _hpcmem_heap_uncarve(char *fresh, unsigned n);
/* Give back n objects linked through their first word (any spans, any heaps):
 * those of heap `mine` under its lock, the others onto remote lists.  When
 * cls is their class (0: not known) and the list is n objects of mine's
 * slice ending in NULL, it may go whole into mine's stash (group.c). */
void _hpcmem_heap_flush(hpcmem_heap_t *mine, unsigned cls, void *list, unsigned n, uint64_t *remote_count);
/* The lists in h's stash (group.c) back to their spans. */
void _hpcmem_heap_stash_drain(hpcmem_heap_t *h);
/* Push one object of span s onto its remote list (no lock); it gets the free key. */
void _hpcmem_span_remote_free(hpcmem_span_t *s, void *p);
/* Is p on span s's free list or remote list?  (Takes the owner's lock.) */
int _hpcmem_span_holds_free(hpcmem_span_t *s, const void *p);
/* Marks free objects (second word) in caches, span free lists and remote
 * lists: a free of an object carrying it is searched for a double free. */
extern HPCMEM_HIDDEN uint64_t _hpcmem_free_key;

/* Direct runs: one allocation of at least size bytes aligned to align. */
void *_hpcmem_heap_run_alloc(hpcmem_heap_t *h, size_t size, size_t align);
int _hpcmem_heap_run_free(hpcmem_span_t *s, void *p);

/* malloc_trim: every empty span of h goes back to the tree and its pages to
 * the system (a class's last span too, which the heap otherwise keeps warm),
 * and so do pages other classes touched beyond a span's carving.  Objects in
 * thread caches are not the heap's: the caller flushes its own first.
 * Returns the bytes of spans given back. */
uint64_t _hpcmem_heap_trim(hpcmem_heap_t *h);

/* Free objects of class cls on h's spans' free lists (malloc_info). */
uint64_t _hpcmem_heap_free_objects(hpcmem_heap_t *h, unsigned cls);

/* Invariants of one heap (tree, page map, span counts): 0 or -EFAULT. */
int _hpcmem_heap_check(hpcmem_heap_t *h);
void _hpcmem_heaps_fork_prepare(void);
void _hpcmem_heaps_fork_parent(void);
void _hpcmem_heaps_fork_child(void);

#endif
