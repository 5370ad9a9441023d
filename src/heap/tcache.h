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
 * is timed through the slow path and the time scaled by it.  A power of two. */
#define HPCMEM_SAMPLE_PERIOD 1024u
#define HPCMEM_SAMPLE_MASK (HPCMEM_SAMPLE_PERIOD - 1)

typedef struct hpcmem_bin {
  void *head;
  uint32_t count, max;
} hpcmem_bin_t;

typedef struct hpcmem_tcache {
  /* first cache line: everything the malloc and free fast paths read besides
   * their bin (hit paths touch this line, the bin's and the object's) */
  char *slice;                     /* start of the group heap's address slice (NULL while tracing) */
  const uint8_t *classmap;         /* the slice's part of _hpcmem_heaps.classmap */
  uint64_t free_key;               /* _hpcmem_free_key */
  /* statistics of this thread; current bytes = allocated - freed.  One call
   * in HPCMEM_SAMPLE_PERIOD (by n_alloc, n_free) takes the slow path, which
   * times it. */
  uint64_t n_alloc, n_free, b_alloc, b_freed;
  int64_t published;               /* part of (b_alloc - b_freed) already in the process total */
  hpcmem_bin_t bin[HPCMEM_NCLASSES];
  hpcmem_heap_t *heap;
  unsigned heap_index;             /* heap->index */
  uint64_t alloc_ticks;            /* sampled time inside the allocator, in _hpcmem_prim_ticks() */
  int in_call;                     /* inside calloc/realloc/...: the inner calls are not events */
  hpcmem_stats_t st;               /* the other counters (merged by hpcmem_stats) */
  struct hpcmem_tcache *next_all;  /* registry of live caches */
  int live;
} __attribute__((aligned(64))) hpcmem_tcache_t;

/* Every thread starts on an empty, shared placeholder cache (its bins are empty
 * and its heap index matches no span), so the fast paths need no NULL test:
 * they fall through to the slow path, which gives the thread a real cache. */
extern HPCMEM_HIDDEN hpcmem_tcache_t _hpcmem_tcache_none;
extern __thread hpcmem_tcache_t *_hpcmem_tc __attribute__((tls_model("initial-exec")));

/* The calling thread's cache, created on first use (NULL only when out of memory). */
hpcmem_tcache_t *_hpcmem_tcache_get(void);
/* Refill bin cls; returns an object or NULL (out of memory). */
void *_hpcmem_tcache_refill(hpcmem_tcache_t *t, unsigned cls);
/* Flush half of bin cls back to the heaps. */
void _hpcmem_tcache_flush(hpcmem_tcache_t *t, unsigned cls);
/* Give everything back (thread exit); the cache stays usable. */
void _hpcmem_tcache_flush_all(hpcmem_tcache_t *t);
/* The whole-cache scan behind a suspected double free: is p in a bin of t? */
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
