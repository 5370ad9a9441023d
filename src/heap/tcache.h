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

/* Timing of the allocator's own time (alloc_time_ns): about one call in this
 * many is timed through the slow path, and the time scaled by the calls it
 * stands for. */
#define HPCMEM_SAMPLE_PERIOD 1024u
/* A thread publishes its live-bytes change once it drifts this far. */
#define HPCMEM_PUBLISH_BYTES ((int64_t)64 << 10)

/* A bin holds objects three ways.  A list linked through the objects' first
 * word, each carrying the free key in its second word: what malloc and free
 * use while a thread holds objects of the class.  When the list is empty, a
 * slot holds one freed object without writing into it or reading it, so a
 * malloc/free loop cycles one object and never touches its memory; the slot
 * is full only while the list is empty (the first object pushed moves it
 * onto the list), which keeps it off the list paths.  Last, a range of fresh
 * objects never written (from a refill), handed out by bumping a pointer
 * (hpcmem_tcache_t.fresh): a class's memory is first touched by the program,
 * not by the allocator.  A class this thread never used (not in `started`)
 * takes a single object at its first refill.  32 bytes: everything a list or
 * slot hit reads of its bin is in one cache line. */
typedef struct hpcmem_bin {
  void *head;
  uint64_t step;                   /* what a hit takes from the accounting word: (size << 32) | 1 */
  uint16_t count, max;             /* objects on the list; max <= 512 */
  uint32_t nfresh;                 /* fresh objects from fresh[class] on, one class size apart */
  void *slot;                      /* NULL or one free object, not written; only while count == 0 */
} __attribute__((aligned(32))) hpcmem_bin_t;

/* The fast paths' statistics, one word per direction: its high 32 bits are
 * the bytes the fast path may still allocate (free) before the slow path
 * settles them, its low 32 bits count calls down from HPCMEM_ACCT_CALLS.  A
 * hit takes its bin's step off the word, and instead goes to the slow path
 * when the word would go negative: the byte budget is spent, or the slow path
 * emptied it to see the next call (the timing sample; tracing).  Budgets stay
 * below 2^31 and at least 16 bytes go per call, so neither half runs over. */
#define HPCMEM_ACCT_CALLS 0xFFFFFFFFu
static inline uint64_t _hpcmem_acct_word(uint32_t bytes) { return (uint64_t)bytes << 32 | HPCMEM_ACCT_CALLS; }
/* A hit's accounting: 0, or 1 when the call must go to the slow path (nothing taken). */
static inline int _hpcmem_acct_take(uint64_t *acct, uint64_t step) {
  uint64_t left = *acct - step;
  if ((int64_t)left < 0) return 1;
  *acct = left;
  return 0;
}

typedef struct hpcmem_tcache {
  /* first line: everything the malloc and free fast paths read besides
   * their bin (hit paths touch this line, the bin's, and the object's; free
   * also one byte of the class map and the class's geometry) */
  char *slice;                     /* start of the group heap's address slice (tcache.c's NONE_SLICE while tracing) */
  const uint8_t *classmap;         /* the slice's part of _hpcmem_heaps.classmap */
  uint64_t acct_alloc, acct_free;  /* accounting words (see HPCMEM_ACCT_CALLS) */
  union {
    hpcmem_bin_t bin[HPCMEM_NCLASSES + 2];   /* and two empty ones past the last class, which
                                                bin_take's look at the next two classes reads (api/alloc.c) */
    /* class 0 has no objects: its bin's room on the first line holds the
     * pending free.  free's hit puts its object aside here and pushes the
     * one put aside before onto that one's bin, whose address was known
     * long ago: malloc's next load of a bin head then does not wait for
     * the address of a store that depends on the pointer just freed (a
     * cache miss in a program that frees what it just loaded;
     * docs/allocator.md, "The pending free"). */
    struct {
      void *pend;                  /* freed (counted, unwritten), not yet in its bin; or NULL */
      hpcmem_bin_t *pend_bin;      /* its bin (the thread's heap: a rebind flushes it first) */
    };
  };
  char *fresh[HPCMEM_NCLASSES];    /* next fresh object of each bin */
  /* Statistics of this thread, as settled; the exact figures are
   * _hpcmem_tcache_n_alloc() and its neighbours.  current bytes = allocated - freed. */
  /* No two counters that settle together are neighbours: the compiler would
   * settle them with one 16-byte load and store, which cannot take its data
   * from the slow paths' recent 8-byte stores to one of them (a
   * store-forwarding stall every settling). */
  uint64_t b_alloc;
  int64_t published;               /* part of (b_alloc - b_freed) already in the process total */
  uint64_t n_alloc;
  uint64_t timed_alloc;            /* n_alloc before the last timed call */
  uint64_t b_freed;
  uint64_t alloc_ticks;            /* sampled time inside the allocator, in _hpcmem_prim_ticks() */
  uint64_t n_free;
  uint64_t timed_free;             /* n_free before the last timed call */
  uint32_t credit_alloc;           /* the byte budget given to acct_alloc */
  unsigned heap_index;             /* heap->index */
  uint32_t credit_free;
  uint8_t time_alloc, time_free;   /* the next slow-path call is timed */
  hpcmem_heap_t *heap;
  int in_call;                     /* inside calloc/realloc/...: the inner calls are not events */
  uint32_t bind_gen;               /* _hpcmem_tcache_bind_gen when the cache chose its heap */
  hpcmem_stats_t st;               /* the other counters (merged by hpcmem_stats) */
  uint64_t bins_active;            /* classes that refilled or flushed since the last scavenge (tcache.c) */
  uint64_t started;                /* classes this thread has used (refilled or freed into) */
  uint64_t lent, kept_hot;         /* classes whose lone object went to a new class's span; those
                                      that needed it back (tcache.c: lend_lone) */
  uint16_t loan_tries[HPCMEM_NCLASSES];  /* looks for a loan, by class (tcache.c: LOAN_GROW) */
  uint32_t bin_events;             /* refills and flushes since then */
  struct hpcmem_tcache *next_all;  /* registry of live caches */
  int live;
  int late_tid;                    /* a cache made after its thread's exit hook ran: the thread's id
                                      (no destructor may run again to give it back; see
                                      _hpcmem_tcache_mark_late), else 0 */
  int keep_seg;                    /* inside hpcmem_realloc_seg: a segment block stays in its segment */
} __attribute__((aligned(64))) hpcmem_tcache_t;

/* Every thread starts on an empty, shared placeholder cache (its bins are empty
 * and its heap index matches no span), so the fast paths need no NULL test:
 * they fall through to the slow path, which gives the thread a real cache. */
extern HPCMEM_HIDDEN hpcmem_tcache_t _hpcmem_tcache_none;
extern __thread hpcmem_tcache_t *_hpcmem_tc __attribute__((tls_model("initial-exec")));

/* The thread's exact counters (another thread may read them while they move:
 * statistics only; each accounting word is read in one load). */
static inline uint64_t _hpcmem_tcache_n_alloc(const hpcmem_tcache_t *t) {
  return t->n_alloc + (HPCMEM_ACCT_CALLS - (uint32_t)__atomic_load_n(&t->acct_alloc, __ATOMIC_RELAXED));
}
static inline uint64_t _hpcmem_tcache_n_free(const hpcmem_tcache_t *t) {
  return t->n_free + (HPCMEM_ACCT_CALLS - (uint32_t)__atomic_load_n(&t->acct_free, __ATOMIC_RELAXED));
}
static inline uint64_t _hpcmem_tcache_b_alloc(const hpcmem_tcache_t *t) {
  return t->b_alloc + (t->credit_alloc - (uint32_t)(__atomic_load_n(&t->acct_alloc, __ATOMIC_RELAXED) >> 32));
}
static inline uint64_t _hpcmem_tcache_b_freed(const hpcmem_tcache_t *t) {
  return t->b_freed + (t->credit_free - (uint32_t)(__atomic_load_n(&t->acct_free, __ATOMIC_RELAXED) >> 32));
}
/* Move the fast paths' calls and bytes into n_* and b_* (the budgets left
 * stay).  The words are stored one by one (relaxed atomics: other threads
 * read them for statistics): a store of both in one 16-byte vector comes
 * with a 16-byte load, which cannot take its data from the fast path's
 * recent 8-byte store to one of them (a store-forwarding stall). */
static inline void _hpcmem_tcache_settle(hpcmem_tcache_t *t) {
  uint64_t a = t->acct_alloc, f = t->acct_free;
  t->n_alloc += HPCMEM_ACCT_CALLS - (uint32_t)a;
  t->b_alloc += t->credit_alloc - (uint32_t)(a >> 32);
  t->credit_alloc = (uint32_t)(a >> 32);
  __atomic_store_n(&t->acct_alloc, a | HPCMEM_ACCT_CALLS, __ATOMIC_RELAXED);
  t->n_free += HPCMEM_ACCT_CALLS - (uint32_t)f;
  t->b_freed += t->credit_free - (uint32_t)(f >> 32);
  t->credit_free = (uint32_t)(f >> 32);
  __atomic_store_n(&t->acct_free, f | HPCMEM_ACCT_CALLS, __ATOMIC_RELAXED);
}
/* Fast paths switched off for every cache, present and future: malloc's
 * (tracing, or plain malloc routed to another segment) and free's (tracing). */
extern int _hpcmem_tcache_alloc_off, _hpcmem_tcache_fast_off;
/* New budgets for a settled thread whose live bytes are `drift` past what it
 * published (|drift| <= HPCMEM_PUBLISH_BYTES): the live bytes may rise or
 * fall by the rest before the next check.  A direction whose timing sample
 * is due, or whose fast path is off, gets none: its next call comes to the
 * slow path. */
static inline void _hpcmem_tcache_set_budgets(hpcmem_tcache_t *t, int64_t drift) {
  uint32_t ba = (uint32_t)(HPCMEM_PUBLISH_BYTES - drift), bf = (uint32_t)(HPCMEM_PUBLISH_BYTES + drift);
  if (t->n_alloc - t->timed_alloc >= HPCMEM_SAMPLE_PERIOD) { t->time_alloc = 1; ba = 0; }
  if (t->n_free - t->timed_free >= HPCMEM_SAMPLE_PERIOD) { t->time_free = 1; bf = 0; }
  if (__atomic_load_n(&_hpcmem_tcache_alloc_off, __ATOMIC_RELAXED)) ba = 0;
  t->credit_alloc = ba;
  __atomic_store_n(&t->acct_alloc, _hpcmem_acct_word(ba), __ATOMIC_RELAXED);
  t->credit_free = bf;
  __atomic_store_n(&t->acct_free, _hpcmem_acct_word(bf), __ATOMIC_RELAXED);
}
/* The calling thread's cache, created on first use (NULL only when out of memory). */
hpcmem_tcache_t *_hpcmem_tcache_get(void);
/* An object of class cls for a bin whose list and slot are empty: a loan
 * (below), one of the bin's fresh range, or the first of a refill of the
 * bin from the group heap; it does not carry the free key (a fresh one is
 * not written); NULL when out of memory.
 * With got_cls, the object may be one of a class just above cls, lent from
 * the thread's own bins while cls has nothing free (tcache.c, loan):
 * *got_cls is the object's class.  Without (NULL), it is of class cls (an
 * aligned request: the class was chosen for its alignment). */
void *_hpcmem_tcache_refill(hpcmem_tcache_t *t, unsigned cls, unsigned *got_cls);
/* Class cls is used by this thread: its next refill is not its first. */
void _hpcmem_tcache_bin_start(hpcmem_tcache_t *t, unsigned cls);
/* Put p (freed, of class cls, of the thread's heap) into bin cls when its
 * list is empty: into the empty slot without writing it, or onto the list
 * after the slot's object.  Returns 0, or -1 when p is the slot's object (a
 * double free). */
static inline int _hpcmem_tcache_put_empty(hpcmem_bin_t *b, void *p, uint64_t key) {
  void *q = b->slot;
  if (!q) { b->slot = p; return 0; }
  if (q == p) return -1;
  *(void **)q = NULL;              /* the list is empty: q ends it */
  ((uint64_t *)q)[1] = key;
  *(void **)p = q;
  ((uint64_t *)p)[1] = key;
  b->head = p;
  b->count = 2;
  b->slot = NULL;
  return 0;
}
/* p onto bin b's list, carrying the free key (the caller saw to the list's room). */
static inline void _hpcmem_bin_link(hpcmem_bin_t *b, void *p, uint64_t key) {
  *(void **)p = b->head;
  ((uint64_t *)p)[1] = key;
  b->head = p;
  b->count++;
}
/* p into bin b: onto its list, or when the list is empty into the slot (see
 * _hpcmem_tcache_put_empty, whose -1 it returns: p is the slot's object). */
static inline int _hpcmem_bin_give(hpcmem_bin_t *b, void *p, uint64_t key) {
  if (!b->count) return _hpcmem_tcache_put_empty(b, p, key);
  _hpcmem_bin_link(b, p, key);
  return 0;
}
/* Flush half of bin cls back to the heaps (whole into the heap's stash
 * while _hpcmem_tcache_stash_on()). */
void _hpcmem_tcache_flush(hpcmem_tcache_t *t, unsigned cls);
/* Whether full bins flush into the heap's stash now (group.c): from
 * HPCMEM_STASH_THREADS_PER_CPU live threads a cpu on (tcache.c). */
#define HPCMEM_STASH_THREADS_PER_CPU 4
int _hpcmem_tcache_stash_on(void);
/* Give everything back (thread exit); the cache stays usable. */
void _hpcmem_tcache_flush_all(hpcmem_tcache_t *t);
/* The pending free (see pend) into its bin; flush_all does it first. */
void _hpcmem_tcache_pend_flush(hpcmem_tcache_t *t);
/* malloc_trim: flush_all, and every bin starts small again (the next
 * refills do not take back at once what the trim gave). */
void _hpcmem_tcache_trim(hpcmem_tcache_t *t);
/* The thread of t exited (after _hpcmem_tcache_flush_all): t may go to another thread. */
void _hpcmem_tcache_retire(hpcmem_tcache_t *t);
/* t was made for the calling thread after its exit hook ran (another
 * thread-specific destructor allocated): glibc may run no destructor round
 * after this one, so t is noted with the thread's id, and a later
 * _hpcmem_tcache_dead_late gives it back once the thread is gone. */
void _hpcmem_tcache_mark_late(hpcmem_tcache_t *t);
/* A cache noted late whose thread is gone (no longer noted, still live: the
 * caller flushes and retires it; *tid: the thread's id), or NULL. */
hpcmem_tcache_t *_hpcmem_tcache_dead_late(int *tid);
/* How many caches are noted late (read without the lock: a hint). */
extern HPCMEM_HIDDEN unsigned _hpcmem_tcache_late;
void _hpcmem_tcache_fork_prepare(void);
void _hpcmem_tcache_fork_parent(void);
void _hpcmem_tcache_fork_child(void);
/* The whole-bin scan behind a suspected double free: is p in t's bin cls (slot or list) or its pending free? */
int _hpcmem_tcache_contains(hpcmem_tcache_t *t, unsigned cls, const void *p);
void _hpcmem_tcache_init_process(void);
/* Statistics over all caches (live and exited). */
/* wait_ns 0: under the registry's lock; else for the summary of a fatal
 * signal, the lock if it comes free within wait_ns, else without it (1). */
int _hpcmem_tcache_merge_stats(hpcmem_stats_t *out, uint64_t *cur_unpublished, uint64_t wait_ns);
/* Select the group heap of the calling thread again (after the topology is known). */
void _hpcmem_tcache_rebind(hpcmem_tcache_t *t);
/* Counts the changes of _hpcmem_cpu_to_group: a cache bound before the last
 * one binds again at its next refill or direct run (the thread that was
 * alone when the groups became known: api/alloc.c, know_groups). */
extern HPCMEM_HIDDEN uint32_t _hpcmem_tcache_bind_gen;
/* Before t takes memory from its heap on a slow path: bound before the
 * groups last changed, it binds again (flushing the old heap's objects). */
static inline void _hpcmem_tcache_bind_check(hpcmem_tcache_t *t) {
  if (__builtin_expect(t->bind_gen != __atomic_load_n(&_hpcmem_tcache_bind_gen, __ATOMIC_RELAXED), 0))
    _hpcmem_tcache_rebind(t);
}
/* Threads with a live cache (read without the lock: a hint). */
unsigned _hpcmem_tcache_live_count(void);
/* Turn the fast paths off for every cache, present and future: malloc's
 * (alloc, tracing or routed plain malloc) and free's (free_too, tracing:
 * every call goes past the recorder). */
void _hpcmem_tcache_fast_path_off(int free_too);
/* Which group heap a thread on `cpu` uses (modulo the heaps), set when a
 * second thread appears (api/alloc.c, know_groups); until then, NULL: the
 * one thread uses heap 0. */
extern unsigned (*_hpcmem_cpu_to_group)(int cpu);

#endif
