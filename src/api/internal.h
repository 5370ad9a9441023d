/* Shared by the files of the API layer: the process-wide allocator state,
 * statistics publishing, and the slow paths behind the malloc family. */
#ifndef HPCMEM_API_INTERNAL_H
#define HPCMEM_API_INTERNAL_H
#include <stddef.h>
#include <stdint.h>
#include "heap/large.h"
#include "heap/single.h"
#include "heap/tcache.h"
#include "segment/segment.h"

#define HPCMEM_LIKELY(x) __builtin_expect(!!(x), 1)
#define HPCMEM_UNLIKELY(x) __builtin_expect(!!(x), 0)
#define HPCMEM_NOINLINE __attribute__((noinline))

extern int _hpcmem_ready;              /* set once initialisation finished */
extern hpcmem_large_t _hpcmem_large;
extern size_t _hpcmem_large_threshold;

void _hpcmem_init(void);
/* 1 when the start found too little address space for the heaps (an
 * address-space limit, strict overcommit): malloc and its kin go to the C
 * library, and there is no report or trace (api/alloc.c, start_on_system). */
HPCMEM_HIDDEN int _hpcmem_on_system(void);
/* Segment of plain malloc (HPCMEM_DEFAULT_SEGMENT), HPCMEM_SEG_*. */
extern int _hpcmem_default_seg;
/* An allocation in the private segment whatever the default (memset when
 * zero), counted for thread t; NULL with errno. */
/* The large-block tiers: the process's and those of the segments in use
 * (fills tiers, returns how many; see src/api/stats.c). */
int _hpcmem_large_tiers(hpcmem_large_t *tiers[HPCMEM_SEG_COUNT + 1]);
void *_hpcmem_alloc_private(hpcmem_tcache_t *t, size_t n, size_t align, int zero);
/* An allocation in segment seg (interleaved or shared), counted for thread t
 * as every allocation is; NULL with errno (segment_api.c). */
void *_hpcmem_seg_alloc_for(hpcmem_tcache_t *t, int seg, size_t n, size_t align, int zero);
/* free() of a block of the interleaved or shared segment s: 0, or -1 with
 * *why saying what is wrong with p (the caller reports it). */
struct hpcmem_segment;
int _hpcmem_seg_free_block(hpcmem_tcache_t *t, struct hpcmem_segment *s, void *p, const char **why);
hpcmem_tcache_t *_hpcmem_thread_cache(void);

/* statistics (stats.c) */
void _hpcmem_stats_publish(hpcmem_tcache_t *t);
/* The same for a thread whose counters are settled already (its accounting
 * words emptied, as _hpcmem_stats_maybe_publish does before it calls). */
void _hpcmem_stats_publish_settled(hpcmem_tcache_t *t);
/* The thread's live bytes moved HPCMEM_PUBLISH_BYTES or more, but less than
 * HPCMEM_QUIET_DRIFT, from what it published (its counters settled):
 * publish, unless nothing needs it (stats.c). */
#define HPCMEM_QUIET_DRIFT ((int64_t)1 << 20)
void _hpcmem_stats_drifted(hpcmem_tcache_t *t);
/* After a slow path moved b_alloc or b_freed: publish when the thread's
 * unpublished change exceeds HPCMEM_PUBLISH_BYTES (as stats.c says; at
 * "reaches", every malloc and free of a 64 KiB object published: 91 -> 55
 * instructions a pair), else give the fast paths what is left of it as
 * budgets.  The settling is done here, not by _hpcmem_tcache_settle: the
 * new budgets replace the words at once. */
static inline void _hpcmem_stats_maybe_publish(hpcmem_tcache_t *t) {
  uint64_t a = t->acct_alloc, f = t->acct_free;
  t->n_alloc += HPCMEM_ACCT_CALLS - (uint32_t)a;
  t->b_alloc += t->credit_alloc - (uint32_t)(a >> 32);
  t->n_free += HPCMEM_ACCT_CALLS - (uint32_t)f;
  t->b_freed += t->credit_free - (uint32_t)(f >> 32);
  int64_t drift = (int64_t)(t->b_alloc - t->b_freed) - t->published;
  if (HPCMEM_UNLIKELY((uint64_t)(drift + HPCMEM_PUBLISH_BYTES) > (uint64_t)(2 * HPCMEM_PUBLISH_BYTES))) {
    t->credit_alloc = (uint32_t)(a >> 32);        /* settled: nothing left in the words */
    __atomic_store_n(&t->acct_alloc, a | HPCMEM_ACCT_CALLS, __ATOMIC_RELAXED);
    t->credit_free = (uint32_t)(f >> 32);
    __atomic_store_n(&t->acct_free, f | HPCMEM_ACCT_CALLS, __ATOMIC_RELAXED);
    if ((uint64_t)(drift + HPCMEM_QUIET_DRIFT - 1) < (uint64_t)(2 * HPCMEM_QUIET_DRIFT - 1)) _hpcmem_stats_drifted(t);
    else _hpcmem_stats_publish_settled(t);   /* the residents benchmark's usual case: 13 instructions less */
  } else {
    _hpcmem_tcache_set_budgets(t, drift);
  }
}
/* The process's published live bytes, and its plain range [lo, lo + span]
 * (stats.c, plain_set): while a single-threaded process's total stays in it,
 * a publish raises neither peak nor takes a timeline sample -- it adds the
 * change to current and to the thread's published part, nothing else.  Set
 * by the full publish decisions, emptied (lo = INT64_MIN, span 0) when the
 * peak, the private peak's room or the timeline move otherwise. */
typedef struct { int64_t current, lo; uint64_t span; } hpcmem_totals_t;
extern hpcmem_totals_t _hpcmem_totals;
void _hpcmem_stats_plain_clear(void);
/* The slow paths' publish check before _hpcmem_stats_maybe_publish (which
 * settles the accounting words, decides and publishes: a third of a cached
 * 128 KiB malloc+free pair, an eighth of the residents benchmark's pair).
 * Returns 1 when it did all there was to do: the thread's change (with what
 * its fast paths have not settled) is within HPCMEM_PUBLISH_BYTES of what
 * it published (nothing to publish, in any process), or the process is
 * single-threaded and its new total is in the plain range (published here:
 * two additions; the fast paths' budgets are cut to HPCMEM_PUBLISH_BYTES
 * from the new published level, so small blocks stay within it).  0 when
 * the full check must run, or when the timing sample of the call's
 * direction is due (calls: n_alloc or n_free; timed: timed_alloc or
 * timed_free), which only the full check arranges. */
static inline int _hpcmem_stats_light(hpcmem_tcache_t *t, uint64_t calls, uint64_t timed) {
  if (calls - timed >= HPCMEM_SAMPLE_PERIOD) return 0;
  uint64_t a = t->acct_alloc, f = t->acct_free;
  uint32_t ra = (uint32_t)(a >> 32), rf = (uint32_t)(f >> 32);
  uint64_t in = t->b_alloc + (t->credit_alloc - ra), out = t->b_freed + (t->credit_free - rf);
  int64_t d = (int64_t)(in - out) - t->published;
  if ((uint64_t)(d + HPCMEM_PUBLISH_BYTES) <= (uint64_t)(2 * HPCMEM_PUBLISH_BYTES)) return 1;
  if (!_hpcmem_single_threaded()) return 0;
  int64_t now = _hpcmem_totals.current + d;
  if ((uint64_t)(now - _hpcmem_totals.lo) > _hpcmem_totals.span) return 0;
  _hpcmem_totals.current = now;
  t->published += d;
  if (HPCMEM_UNLIKELY(ra > (uint32_t)HPCMEM_PUBLISH_BYTES)) {   /* the word's bytes and its credit move together */
    uint32_t cut = ra - (uint32_t)HPCMEM_PUBLISH_BYTES;
    t->credit_alloc -= cut;
    __atomic_store_n(&t->acct_alloc, a - ((uint64_t)cut << 32), __ATOMIC_RELAXED);
  }
  if (HPCMEM_UNLIKELY(rf > (uint32_t)HPCMEM_PUBLISH_BYTES)) {
    uint32_t cut = rf - (uint32_t)HPCMEM_PUBLISH_BYTES;
    t->credit_free -= cut;
    __atomic_store_n(&t->acct_free, f - ((uint64_t)cut << 32), __ATOMIC_RELAXED);
  }
  return 1;
}
void _hpcmem_stats_init(void);
/* High-water mark of the private segment's share of the published total. */
uint64_t _hpcmem_stats_private_peak(void);
/* hpcmem_stats(), hpcmem_timeline() and hpcmem_seg_stats() for the summary of
 * a fatal signal (mpi/sample.c): they never wait long for a lock, whose
 * holder the signal may have interrupted, and read without it then; the
 * return value / *approx says so: 1 when a figure may be approximate
 * (stats.c, segment_api.c). */
#define HPCMEM_SIGNAL_WAIT_NS 20000000u   /* the longest such a reader waits for a lock: 20 ms */
int _hpcmem_stats_nowait(hpcmem_stats_t *out);
size_t _hpcmem_timeline_nowait(hpcmem_sample_t *out, size_t max, int *approx);
int _hpcmem_seg_stats_nowait(int seg, hpcmem_seg_stats_t *out);
/* counters of threads that never got a cache (allocation before any cache exists) */
void _hpcmem_stats_add_error(void);

#endif
