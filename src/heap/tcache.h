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

typedef struct hpcmem_bin {
  void *head;
  uint32_t count, max;
} hpcmem_bin_t;

typedef struct hpcmem_tcache {
  hpcmem_bin_t bin[HPCMEM_NCLASSES];
  hpcmem_heap_t *heap;
  unsigned heap_index;             /* heap->index, kept here for the free fast path */
  /* statistics of this thread; current bytes = allocated - freed */
  uint64_t n_alloc, n_free, b_alloc, b_freed;
  int64_t published;
  uint64_t alloc_ticks;
  uint64_t fast_mask;              /* 63: one call in 64 takes the slow path (timing sample);
                                      0 while tracing: every call does (the recorder is there) */
  int in_call;                     /* inside calloc/realloc/...: the inner calls are not events */            /* sampled time inside the allocator, in _hpcmem_prim_ticks() */               /* part of (b_alloc - b_freed) already in the process total */
  hpcmem_stats_t st;               /* the other counters (merged by hpcmem_stats) */
  struct hpcmem_tcache *next_all;  /* registry of live caches */
  int live;
} hpcmem_tcache_t;

/* Every thread starts on an empty, shared placeholder cache (its bins are empty
 * and its heap index matches no span), so the fast paths need no NULL test:
 * they fall through to the slow path, which gives the thread a real cache. */
extern hpcmem_tcache_t _hpcmem_tcache_none;
extern __thread hpcmem_tcache_t *_hpcmem_tc __attribute__((tls_model("initial-exec")));
extern uint64_t _hpcmem_free_key;   /* marks objects in a cache: cheap double-free detection */

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
/* Mask of the fast-path test (see fast_mask) for every cache, present and future. */
extern uint64_t _hpcmem_tcache_fast_mask;
void _hpcmem_tcache_set_fast_mask(uint64_t mask);
/* Which group heap a thread on `cpu` uses; set by the topology layer. */
extern unsigned (*_hpcmem_cpu_to_group)(int cpu);

#endif
