/* Thread caches (DESIGN.md tier 1): per thread, per size class, a free list
 * with no lock and no atomic on a hit.  Misses refill a batch from the
 * thread's group heap; overflows flush half a bin back.  The cache also keeps
 * the thread's statistics counters, published to the process totals in
 * batches (see stats in api/). */
#ifndef HPCMEM_HEAP_TCACHE_H
#define HPCMEM_HEAP_TCACHE_H
#include <stdint.h>
#include "heap/group.h"
#include "hpcmem.h"

/* Timing of the allocator's own time (alloc_time_ns): one call in this many
 * is timed through the slow path and the time scaled by it. */
#define HPCMEM_SAMPLE_PERIOD 1024u
/* A thread publishes its live-bytes change once it drifts this far. */
#define HPCMEM_PUBLISH_BYTES ((int64_t)64 << 10)

/* A bin holds objects three ways.  A list linked through the objects' first
 * word, each carrying the free key in its second word: what malloc and free
 * use while a thread holds objects of the class.  When the list is empty, a
 * slot (hpcmem_bin_edge_t) holds one freed object without writing into it or
 * reading it, so a malloc/free loop cycles one object and never touches its
 * memory; the slot is full only while the list is empty (the first object
 * pushed moves it onto the list), which keeps it off the list paths.  Last,
 * a range of fresh objects never written (from a refill), handed out by
 * bumping a pointer: a class's memory is first touched by the program, not
 * by the allocator.  max == 0: the class was never used by this thread (its
 * first refill takes a single object). */
typedef struct hpcmem_bin {
  void *head;
  uint16_t count, max;             /* objects on the list; max <= 512 */
  uint32_t size;                   /* the class's object size (0 in the placeholder) */
} hpcmem_bin_t;

/* What a bin holds besides its list, read only when the list is empty. */
typedef struct hpcmem_bin_edge {
  void *slot;                      /* NULL or one free object, not written; only while count == 0 */
  char *fresh;                     /* next fresh object: nfresh of them, one class size apart */
  uint32_t nfresh, pad_;
} hpcmem_bin_edge_t;

typedef struct hpcmem_tcache {
  /* first cache line: everything the malloc and free fast paths read besides
   * their bin (hit paths touch this line, the bin's and the object's) */
  char *slice;                     /* start of the group heap's address slice (NULL while tracing) */
  const uint8_t *classmap;         /* the slice's part of _hpcmem_heaps.classmap */
  /* Bytes the fast paths may still allocate / free before the slow path
   * settles the statistics (budget_* <= credit_*: credit - budget bytes went
   * by since), so a fast hit writes two counters: this and sample_*. */
  uint32_t budget_alloc, budget_free;
  /* calls until the next one is timed; every malloc and free call counts
   * once, hit or not (see _hpcmem_sample_due) */
  uint32_t sample_alloc, sample_free;
  hpcmem_bin_t bin[HPCMEM_NCLASSES];
  hpcmem_bin_edge_t edge[HPCMEM_NCLASSES];
  /* Statistics of this thread, as settled; the exact figures are
   * _hpcmem_tcache_counts().  current bytes = allocated - freed. */
  /* b_alloc and b_freed are not neighbours: the compiler would settle both
   * with one 16-byte load and store, which cannot take its data from the
   * slow paths' recent 8-byte stores (a store-forwarding stall every publish) */
  uint64_t b_alloc, n_alloc, b_freed, n_free;
  uint32_t credit_alloc, credit_free;
  uint32_t slow_alloc, slow_free;  /* slow-path calls in the current sampling period */
  int64_t published;               /* part of (b_alloc - b_freed) already in the process total */
  hpcmem_heap_t *heap;
  unsigned heap_index;             /* heap->index */
  uint64_t alloc_ticks;            /* sampled time inside the allocator, in _hpcmem_prim_ticks() */
  int in_call;                     /* inside calloc/realloc/...: the inner calls are not events */
  hpcmem_stats_t st;               /* the other counters (merged by hpcmem_stats) */
  uint64_t bins_active;            /* classes that refilled or flushed since the last scavenge (tcache.c) */
  uint32_t bin_events;             /* refills and flushes since then */
  struct hpcmem_tcache *next_all;  /* registry of live caches */
  int live;
} __attribute__((aligned(64))) hpcmem_tcache_t;

/* Every thread starts on an empty, shared placeholder cache (its bins are empty
 * and its heap index matches no span), so the fast paths need no NULL test:
 * they fall through to the slow path, which gives the thread a real cache. */
extern HPCMEM_HIDDEN hpcmem_tcache_t _hpcmem_tcache_none;
extern __thread hpcmem_tcache_t *_hpcmem_tc __attribute__((tls_model("initial-exec")));

/* Every malloc and free call counts once towards the next timed call: a
 * fast hit by decrementing sample_*, a slow-path call here (a fast path
 * whose count reached 0 hands the call on at 0).  At the end of a period the
 * fast hits it held (PERIOD minus the slow-path calls) go into n_*.
 * Returns whether this call is the one to time. */
static inline int _hpcmem_sample_due(uint32_t *left, uint32_t *slow, uint64_t *n) {
  ++*slow;
  if (*left != 0 && --*left != 0) return 0;
  *n += HPCMEM_SAMPLE_PERIOD - *slow;
  *slow = 0;
  *left = HPCMEM_SAMPLE_PERIOD;
  return 1;
}

/* The thread's exact counters (another thread may read them while they move:
 * statistics only). */
static inline uint64_t _hpcmem_tcache_n_alloc(const hpcmem_tcache_t *t) {
  return t->n_alloc + (HPCMEM_SAMPLE_PERIOD - t->sample_alloc) - t->slow_alloc;
}
static inline uint64_t _hpcmem_tcache_n_free(const hpcmem_tcache_t *t) {
  return t->n_free + (HPCMEM_SAMPLE_PERIOD - t->sample_free) - t->slow_free;
}
static inline uint64_t _hpcmem_tcache_b_alloc(const hpcmem_tcache_t *t) {
  return t->b_alloc + (t->credit_alloc - t->budget_alloc);
}
static inline uint64_t _hpcmem_tcache_b_freed(const hpcmem_tcache_t *t) {
  return t->b_freed + (t->credit_free - t->budget_free);
}
/* Move the fast paths' bytes into b_alloc / b_freed (the budgets stay). */
static inline void _hpcmem_tcache_settle(hpcmem_tcache_t *t) {
  t->b_alloc += t->credit_alloc - t->budget_alloc;
  t->b_freed += t->credit_free - t->budget_free;
  t->credit_alloc = t->budget_alloc;
  t->credit_free = t->budget_free;
}
/* New budgets for a thread whose live bytes are `drift` past what it
 * published (|drift| <= HPCMEM_PUBLISH_BYTES): the live bytes may rise or
 * fall by the rest before the next check. */
static inline void _hpcmem_tcache_set_budgets(hpcmem_tcache_t *t, int64_t drift) {
  t->budget_alloc = t->credit_alloc = (uint32_t)(HPCMEM_PUBLISH_BYTES - drift);
  t->budget_free = t->credit_free = (uint32_t)(HPCMEM_PUBLISH_BYTES + drift);
}

/* The calling thread's cache, created on first use (NULL only when out of memory). */
hpcmem_tcache_t *_hpcmem_tcache_get(void);
/* Refill the empty bin cls (slot and list); returns an object that does not
 * carry the free key (a fresh one is not written) or NULL (out of memory). */
void *_hpcmem_tcache_refill(hpcmem_tcache_t *t, unsigned cls);
/* A bin of a class never used (max 0) gets its starting room. */
void _hpcmem_tcache_bin_start(hpcmem_bin_t *b, unsigned cls);
/* Put p (freed, of class cls, of the thread's heap) into bin cls when its
 * list is empty: into the empty slot without writing it, or onto the list
 * after the slot's object.  Returns 0, or -1 when p is the slot's object (a
 * double free). */
static inline int _hpcmem_tcache_put_empty(hpcmem_tcache_t *t, unsigned cls, void *p, uint64_t key) {
  hpcmem_bin_t *b = &t->bin[cls];
  hpcmem_bin_edge_t *e = &t->edge[cls];
  void *q = e->slot;
  if (!q) { e->slot = p; return 0; }
  if (q == p) return -1;
  *(void **)q = NULL;              /* the list is empty: q ends it */
  ((uint64_t *)q)[1] = key;
  *(void **)p = q;
  ((uint64_t *)p)[1] = key;
  b->head = p;
  b->count = 2;
  e->slot = NULL;
  return 0;
}
/* Flush half of bin cls back to the heaps. */
void _hpcmem_tcache_flush(hpcmem_tcache_t *t, unsigned cls);
/* Give everything back (thread exit); the cache stays usable. */
void _hpcmem_tcache_flush_all(hpcmem_tcache_t *t);
/* The thread of t exited (after _hpcmem_tcache_flush_all): t may go to another thread. */
void _hpcmem_tcache_retire(hpcmem_tcache_t *t);
void _hpcmem_tcache_fork_prepare(void);
void _hpcmem_tcache_fork_parent(void);
void _hpcmem_tcache_fork_child(void);
/* The whole-bin scan behind a suspected double free: is p in t's bin cls (slot or list)? */
int _hpcmem_tcache_contains(hpcmem_tcache_t *t, unsigned cls, const void *p);
void _hpcmem_tcache_init_process(void);
/* Statistics over all caches (live and exited). */
void _hpcmem_tcache_merge_stats(hpcmem_stats_t *out, uint64_t *cur_unpublished);
/* Select the group heap of the calling thread again (after the topology is known). */
void _hpcmem_tcache_rebind(hpcmem_tcache_t *t);
/* Turn the free fast path off (tracing: every call goes past the recorder)
 * for every cache, present and future; malloc's is the API layer's. */
extern int _hpcmem_tcache_fast_off;
void _hpcmem_tcache_fast_path_off(void);
/* Which group heap a thread on `cpu` uses; set by the topology layer. */
extern unsigned (*_hpcmem_cpu_to_group)(int cpu);

#endif
