/* Thread caches (see tcache.h). */
#include "config.h"
#include "heap/tcache.h"
#include "prim/prim.h"
#include "util/lock.h"
#include "util/log.h"
#include <sched.h>
#include <string.h>

/* The placeholder's slice is the last 16 GiB of the address space, where no
 * pointer a program frees lies: every pointer, NULL too, is outside it, so
 * the free fast path sends all of them on without reading the class map.
 * The map is all zero ("no class") for a thread that reads a cache's old
 * slice with its new map (fast_off): it must cover a whole slice.  Never
 * read otherwise, it costs no page (it did while the slice started at 0:
 * every free(NULL) before a thread's first malloc read its first page, and
 * on a kernel without a shared zero page that read is a page of RSS). */
#define NONE_SLICE ((char *)(uintptr_t)(0 - ((uint64_t)1 << HPCMEM_SLICE_SHIFT)))
static uint8_t none_classmap[(size_t)1 << (HPCMEM_SLICE_SHIFT - HPCMEM_CHUNK_SHIFT)];
hpcmem_tcache_t _hpcmem_tcache_none = {.slice = NONE_SLICE, .classmap = none_classmap, .heap_index = HPCMEM_NO_HEAP - 1};
__thread hpcmem_tcache_t *_hpcmem_tc __attribute__((tls_model("initial-exec"))) = &_hpcmem_tcache_none;
uint64_t _hpcmem_free_key;
unsigned (*_hpcmem_cpu_to_group)(int cpu);
int _hpcmem_tcache_alloc_off, _hpcmem_tcache_fast_off;

/* Caches are never unmapped: an exited thread's cache goes on a free list
 * for the next thread, its statistics stay in it.  Each has a page of its
 * own and ends where the page ends, so that its first line, which every
 * malloc and free reads, is not at the start of a page: a program's stores
 * to the first bytes of pages (page-aligned blocks, every object of 4 KiB
 * classes and up) made the next call's loads of that line wait for them
 * (the cpu matches a load against earlier stores by its low 12 address
 * bits first).  alloc_sizes --mode touch, 64 KiB, malloc + 16 page writes +
 * free: 190 -> 135 cycles a round (glibc: 137). */
#define CACHE_STRIDE ((size_t)4096)
#define CACHE_OFFSET ((CACHE_STRIDE - sizeof(hpcmem_tcache_t)) & ~(size_t)63)
_Static_assert(sizeof(hpcmem_tcache_t) <= CACHE_STRIDE - 1024, "a thread cache's first line 1 KiB or more into its page");
static hpcmem_lock_t registry_lock = HPCMEM_LOCK_INIT;
static hpcmem_tcache_t *all_caches;
static char *pool_next, *pool_end;
/* Caches made after their thread's exit hook (glibc runs the thread-specific
 * destructors in at most PTHREAD_DESTRUCTOR_ITERATIONS rounds: a destructor
 * that allocates in the last one arms libhpcmem's hook for a round that
 * never comes).  Without a way back, each such thread left its cache live:
 * its bins' objects (50 KiB a thread in a test that allocates 50 blocks in
 * each round), and a place in live_threads that shrank every bin's room. */
unsigned _hpcmem_tcache_late;

/* A cache with the placeholder's slice and its all-zero class map sends
 * every free to the slow path.  A thread racing with this reads either field
 * old or new: both combinations miss. */
static void fast_off(hpcmem_tcache_t *t) {
  t->slice = NONE_SLICE;
  t->classmap = none_classmap;
}

/* Called while starting, when no other thread runs (a cache whose owner is
 * in a fast path could lose the emptied word to its own store: its budget
 * would run out before its calls come to the slow path). */
void _hpcmem_tcache_fast_path_off(int free_too) {
  _hpcmem_lock(&registry_lock);
  __atomic_store_n(&_hpcmem_tcache_alloc_off, 1, __ATOMIC_RELAXED);
  if (free_too) __atomic_store_n(&_hpcmem_tcache_fast_off, 1, __ATOMIC_RELAXED);
  for (hpcmem_tcache_t *t = all_caches; t; t = t->next_all) {
    _hpcmem_tcache_settle(t);
    t->credit_alloc = 0;
    t->acct_alloc = _hpcmem_acct_word(0);
    if (free_too) fast_off(t);
  }
  _hpcmem_unlock(&registry_lock);
}

#define BIN_START (8u << 10)     /* a bin starts with room for about this many bytes */

/* Bin room.  What the bins hold is touched memory no other thread can use,
 * and every thread has its own: 16 threads of alloc_threads with bins of
 * 64 KiB held 6-8 MiB (peak RSS 19-24 MiB, glibc 13-17).  Room costs time
 * only where a class runs empty and full at random (churn: a refill or flush
 * every (room / 2)^2 calls of the class): one thread of alloc_churn lost 4 %
 * with 32 KiB bins and 9 % with 16 KiB.  So the bytes a bin may hold follow
 * how many threads share a cpu: BIN_PER_CPU for each cpu the process may run
 * on, shared by the live threads, between BIN_MIN and BIN_MAX -- a thread per
 * cpu keeps BIN_MAX, oversubscribed threads (which cannot all run anyway)
 * get less.  Classes up to 1 KiB keep room for at least BIN_MIN_OBJECTS
 * objects: with 8 KiB, a 1 KiB class would refill or flush every 16 calls.
 * A bin that has not run empty or full during the thread's last
 * SCAVENGE_EVENTS refills and flushes is idle: its list goes back to the
 * heaps and its room starts small again (scavenge). */
#define BIN_MAX (64u << 10)
#define BIN_MIN (8u << 10)
#define BIN_PER_CPU (64u << 10)
#define BIN_MIN_OBJECTS 16
#define SCAVENGE_EVENTS 4096
static unsigned live_threads;
static uint32_t bin_cap = BIN_MAX;

/* The heaps' stashes (group.c) take the lists that full bins flush, whole,
 * for the class's next refill, once the live threads are
 * HPCMEM_STASH_THREADS_PER_CPU or more for each cpu, which is when the bins'
 * room is STASH_CAP a class or less: refills and flushes come often then,
 * and meet under the heap's lock (alloc_threads --mode local --threads 16:
 * 171.5 -> 203.7 M/s, the peak unchanged).  With fewer threads the stash's
 * lists would wait longer for their class, memory no span can hand out
 * (thread-local T = 2 - 8 held 1 - 5 % more at their peak), so a flush goes
 * to the spans. */
#define STASH_CAP (BIN_PER_CPU / HPCMEM_STASH_THREADS_PER_CPU)

static inline int stash_on(void) { return __atomic_load_n(&bin_cap, __ATOMIC_RELAXED) <= STASH_CAP; }
int _hpcmem_tcache_stash_on(void) { return stash_on(); }

/* A thread exited while the stash was on: when that took the threads
 * below its threshold, the stashes' lists go back to their spans, whose
 * objects they held (no span they touch can empty while they wait there
 * for a refill of their class that may not come). */
__attribute__((noinline, cold)) static void stash_off(void) {
  if (stash_on()) return;
  for (unsigned i = 0; i < _hpcmem_heaps.count; i++) _hpcmem_heap_stash_drain(&_hpcmem_heaps.heap[i]);
}

/* A thread started or ended (registry lock held). */
static void set_bin_cap(void) {
  unsigned cpus = _hpcmem_prim_cpus_allowed();
  uint64_t cap = (uint64_t)BIN_PER_CPU * (cpus ? cpus : 1) / (live_threads ? live_threads : 1);
  __atomic_store_n(&bin_cap, cap > BIN_MAX ? BIN_MAX : cap < BIN_MIN ? BIN_MIN : (uint32_t)cap, __ATOMIC_RELAXED);
}

void _hpcmem_tcache_init_process(void) {
  _hpcmem_free_key = _hpcmem_prim_random64() | 1;
}

static uint32_t clamp_objects(uint32_t bytes, unsigned cls, uint32_t lo) {
  uint32_t n = bytes / _hpcmem_class_size[cls];
  return n < lo ? lo : n > 512 ? 512 : n;
}

/* Slow start: a bin's room doubles each time it runs empty or full, up to
 * the cap above, so a class a thread uses a little costs it a page or two,
 * not a full batch of touched objects.  Before that, the first refill of a
 * class (not yet in `started`) takes one object: a thread that allocates and
 * frees one object at a time keeps it in the slot, and nothing else of the
 * span is written.  Every bin has its starting room from the beginning, so
 * that free's slot path need not test for a bin without room. */
static uint16_t bin_start(unsigned cls) { return (uint16_t)clamp_objects(BIN_START, cls, 2); }

static void bins_init(hpcmem_tcache_t *t) {
  for (unsigned c = 1; c < HPCMEM_NCLASSES; c++) {
    t->bin[c].max = bin_start(c);
    t->bin[c].step = (uint64_t)_hpcmem_class_size[c] << 32 | 1;
  }
  t->bins_active = 0;
  t->bin_events = 0;
  t->started = t->lent = t->kept_hot = 0;
}

void _hpcmem_tcache_bin_start(hpcmem_tcache_t *t, unsigned cls) { t->started |= (uint64_t)1 << cls; }

/* A bin that ran empty or full gets twice the room, up to the cap of the
 * moment; above it (more threads now) it shrinks to the cap. */
static void bin_resize(hpcmem_bin_t *b, unsigned cls) {
  uint32_t hard = clamp_objects(__atomic_load_n(&bin_cap, __ATOMIC_RELAXED), cls,
                                _hpcmem_class_size[cls] <= 1024 ? BIN_MIN_OBJECTS : 4);
  b->max = (uint16_t)(b->max * 2u < hard ? b->max * 2u : hard);
}

/* Idle bins (see above) give their lists back and start small again.  Their
 * fresh ranges go back too, unwritten (uncarve; a range that would be its
 * span's second hole keeps the bin as it is): a bin
 * that kept one would hand out untouched objects while the list's touched
 * ones wait in the spans (alloc_churn: +200 KiB resident). */
static void scavenge(hpcmem_tcache_t *t) {
  for (unsigned c = 1; c < HPCMEM_NCLASSES; c++) {
    hpcmem_bin_t *b = &t->bin[c];
    if ((t->bins_active >> c) & 1 || (!((t->started >> c) & 1) && !b->count && !b->nfresh)) continue;
    if (b->nfresh) {
      if (!_hpcmem_heap_uncarve(t->fresh[c], b->nfresh)) continue;   /* the fresh range first, then the list */
      b->nfresh = 0;
    }
    if (b->count) _hpcmem_heap_flush(t->heap, 0, b->head, b->count, &t->st.remote_free_count);   /* idle: to the spans */
    b->head = NULL;
    b->count = 0;
    b->max = bin_start(c);
  }
  t->bins_active = 0;
  t->bin_events = 0;
  t->kept_hot = 0;
}

/* Class cls ran empty or full. */
static void bin_event(hpcmem_tcache_t *t, unsigned cls) {
  t->bins_active |= (uint64_t)1 << cls;
  if (++t->bin_events >= SCAVENGE_EVENTS) scavenge(t);
}

uint32_t _hpcmem_tcache_bind_gen;
unsigned _hpcmem_tcache_live_count(void) { return __atomic_load_n(&live_threads, __ATOMIC_RELAXED); }

void _hpcmem_tcache_rebind(hpcmem_tcache_t *t) {
  t->bind_gen = __atomic_load_n(&_hpcmem_tcache_bind_gen, __ATOMIC_ACQUIRE);   /* then the map it counts */
  int cpu = sched_getcpu();
  unsigned (*group)(int) = __atomic_load_n(&_hpcmem_cpu_to_group, __ATOMIC_ACQUIRE);
  unsigned g = cpu < 0 || !group ? 0 : group(cpu);   /* NULL: one thread so far */
  hpcmem_heap_t *h = &_hpcmem_heaps.heap[g % _hpcmem_heaps.count];
  if (t->heap != h) {
    /* a cache holds only its own group's objects: those of the old group go home first */
    if (t->heap) _hpcmem_tcache_flush_all(t);
    t->heap = h;
    t->heap_index = h->index;
    t->slice = h->base;
    t->classmap = _hpcmem_heaps.classmap + ((size_t)t->heap_index << (HPCMEM_SLICE_SHIFT - HPCMEM_CHUNK_SHIFT));
  }
  if (__atomic_load_n(&_hpcmem_tcache_fast_off, __ATOMIC_RELAXED)) fast_off(t);
}

hpcmem_tcache_t *_hpcmem_tcache_get(void) {
  hpcmem_tcache_t *t = _hpcmem_tc;
  if (t != &_hpcmem_tcache_none) return t;
  t = NULL;
  _hpcmem_lock(&registry_lock);
  for (hpcmem_tcache_t *c = all_caches; c; c = c->next_all)
    if (!c->live) { t = c; break; }              /* reuse an exited thread's cache and counters */
  if (t) {
    _hpcmem_tcache_flush_all(t);     /* empty: its thread's exit gave it back, or a fork's child dropped it */
    bins_init(t);
  } else {
    if (pool_next + CACHE_STRIDE > pool_end) {
      size_t chunk = (size_t)1 << 20;
      pool_next = _hpcmem_prim_reserve(chunk, 4096);
      if (!pool_next) { _hpcmem_unlock(&registry_lock); return NULL; }
      pool_end = pool_next + chunk;
    }
    t = (hpcmem_tcache_t *)(pool_next + CACHE_OFFSET);
    pool_next += CACHE_STRIDE;
    bins_init(t);
    _hpcmem_tcache_set_budgets(t, 0);            /* a reused cache keeps its own: its exit published */
    t->next_all = all_caches;
    __atomic_store_n(&all_caches, t, __ATOMIC_RELEASE);   /* complete before a lockless reader (merge_stats) sees it */
  }
  t->live = 1;
  live_threads++;
  set_bin_cap();
  _hpcmem_unlock(&registry_lock);
  _hpcmem_tcache_rebind(t);
  _hpcmem_tc = t;
  return t;
}

/* The heap has no span of class cls with anything to give: its refill may
 * have to make one of untouched memory.  The bins that hold a single object
 * (in the slot) offer it, so that an emptied span can take the new class
 * instead (group.h: hpcmem_lone_t) -- a program that moves on to other sizes
 * one object at a time (a buffer grown by realloc, a growing string)
 * reuses the pages it touched, as with glibc.  A class whose object went
 * and that needs one again right after (it was not done with it) offers
 * none until the next scavenge: two classes taking turns, one object each,
 * would otherwise pass one span back and forth at every turn. */
static hpcmem_lone_t *lone_offer(hpcmem_tcache_t *t, unsigned cls, hpcmem_lone_t *l) {
  hpcmem_heap_t *h = t->heap;
  if (__atomic_load_n(&h->partial[cls], __ATOMIC_RELAXED) || __atomic_load_n(&h->fresh[cls], __ATOMIC_RELAXED))
    return NULL;                     /* a look without the lock: the class has a span (a stashed list goes
                                        first: the offer waits unused) */
  l->n = 0;
  l->taken = -1;
  for (uint64_t m = t->started & ~t->lent & ~t->kept_hot & ~((uint64_t)1 << cls); m && l->n < HPCMEM_LONE_MAX; m &= m - 1) {
    unsigned c = (unsigned)__builtin_ctzll(m);
    hpcmem_bin_t *b = &t->bin[c];
    if (!b->slot || b->count || b->nfresh) continue;
    l->obj[l->n] = b->slot;
    l->cls[l->n++] = c;
  }
  return l->n ? l : NULL;
}

/* The first object of the process is written here, so its page is faulted
 * in while the process starts: every program writes its first small object,
 * whatever it is, and the fault is then the start-up's instead of the first
 * write's (alloc_sizes --mode touch, 4 B: 76 -> 9 ns a round).  Every other
 * fresh object stays untouched until the program writes it. */
static int first_written;

/* Loans.  A class with no free object in the thread's reach -- its bin
 * empty, its heap without a span of free objects or a stashed list -- would
 * touch new memory for its next object, while the thread's bins of the
 * next LOAN_CLASSES classes up may hold free objects, touched already and a
 * little larger (two classes up: at most a quarter from 128 B to 1 KiB, up
 * to half above, up to three times for the 16-byte steps below 128 B, where
 * the bytes are few).  One of them
 * goes to the caller instead, so a class touches new memory only when its
 * neighbours above have nothing free either.  Each class otherwise peaks on
 * its own, where glibc's one memory for all sizes peaks with the sum
 * (docs/footprint.md): the churn of 8 B - 1 KiB touched 6,304 KiB for 5,168
 * KiB live; lending over two classes, 5,834 KiB (benchmarks/alloc/
 * class_floor's replay; LOAN_GROW below).  The object keeps its class: free finds it by its
 * address and puts it into its own bin.  Only objects on the bins' lists
 * are lent (a fresh one would touch new memory all the same; a slot's lone
 * object may empty its span for a new class instead, lone_offer), and only
 * while the heap has no recycled object of the class -- a look without the
 * lock, as lone_offer's, at its spans' lists and its stash (objects other
 * groups freed that wait on its pending list are not seen); a list a flush
 * puts there meanwhile waits for the next refill.  A request for a power of
 * two may so get an object that is not aligned to its size (malloc promises
 * 16 bytes, as glibc's). */
#define LOAN_CLASSES 2
_Static_assert(LOAN_CLASSES == 2, "bin_take (api/alloc.c) and the bins past the last class (tcache.h) are for two");
/* A class whose deficit lasts -- a program that now keeps more of its
 * objects than before -- would borrow on every malloc that finds its bin
 * empty, each a call of the slow path (about 8 ns more than a hit): the
 * producer/consumer ring of one thread borrowed on 7.5 % of its mallocs and
 * lost 6 % of its speed.  So every LOAN_GROW-th look for a loan of a class
 * takes a fresh object instead (from the bin's fresh range, or a refill
 * that makes one): the class grows by an object, and its loans thin out as
 * it reaches what the program keeps (the ring: 1.5 M loans in 20 M mallocs
 * without growing, 31,800 with 1,024, 8,900 with 256).  The replay
 * (class_floor) of the churn, 100 M calls: 5,834 KiB with 1,024, 5,915
 * with 256, 5,759 never. */
#define LOAN_GROW 1024
static int has_recycled(hpcmem_heap_t *h, unsigned cls) {
  return __atomic_load_n(&h->partial[cls], __ATOMIC_RELAXED) ||
         (__atomic_load_n(&h->stash_bytes, __ATOMIC_RELAXED) && __atomic_load_n(&h->stash_count[cls], __ATOMIC_RELAXED));
}
static void *loan(hpcmem_tcache_t *t, unsigned cls, unsigned *got_cls) {
  unsigned last = cls + LOAN_CLASSES < HPCMEM_NCLASSES ? cls + LOAN_CLASSES : HPCMEM_NCLASSES - 1;
  for (unsigned c = cls + 1; c <= last; c++) {
    hpcmem_bin_t *b = &t->bin[c];
    void *p = b->head;
    if (!p) continue;
    b->head = *(void **)p;
    b->count--;
    ((uint64_t *)p)[1] = 0;                     /* not a cached object any more */
    *got_cls = c;
    return p;
  }
  return NULL;
}

/* This group's slice is full: a refill from the other groups' heaps (out
 * of the way of the common refill's code). */
__attribute__((noinline, cold)) static unsigned refill_elsewhere(hpcmem_tcache_t *t, unsigned cls, hpcmem_refill_t *r,
                                                                 unsigned want) {
  unsigned got = 0;
  for (unsigned i = 1; i < _hpcmem_heaps.count && !got; i++)
    got = _hpcmem_heap_refill(&_hpcmem_heaps.heap[(t->heap->index + i) % _hpcmem_heaps.count], cls, r, want, NULL, 0);
  return got;
}

/* The fast path (bin_take in api/alloc.c) hands a bin's fresh objects out
 * only while the next two classes' lists are empty; else they come here,
 * one a call, each after a look for a loan and for the heap's recycled
 * objects of the class.  A bin that still holds a fresh range takes the
 * heap's recycled objects first when it has some, and the range waits:
 * else it touched new memory while objects the bins' flushes gave back
 * waited in the spans.  alloc_churn 8 B - 1 KiB, 100 M calls, peak RSS:
 * 8,572 KiB before, 8,592 with loans only where a bin is wholly empty (the
 * fresh range handed out first), 7,928 with every fresh object here, 7,948
 * as it is. */
void *_hpcmem_tcache_refill(hpcmem_tcache_t *t, unsigned cls, unsigned *got_cls) {
  _hpcmem_tcache_bind_check(t);               /* the groups became known since (a fresh range goes back too) */
  hpcmem_bin_t *b = &t->bin[cls];
  unsigned want;
  void *p;
  int keep_fresh = b->nfresh != 0;
  if (!has_recycled(t->heap, cls)) {
    if (got_cls && ++t->loan_tries[cls] % LOAN_GROW != 0 && (p = loan(t, cls, got_cls)) != NULL) return p;
    if (keep_fresh) goto fresh;
  }
  if (!((t->started >> cls) & 1)) { /* first use: one object, untouched when fresh */
    _hpcmem_tcache_bin_start(t, cls);
    want = 1;
  } else {
    unsigned old = b->max;
    bin_resize(b, cls);
    want = (old < b->max ? old : b->max) / 2;
    if (!want) want = 1;
    bin_event(t, cls);
  }
  if (__builtin_expect((t->lent >> cls) & 1, 0)) {   /* its lone object was lent: keep the next one */
    t->lent &= ~((uint64_t)1 << cls);
    t->kept_hot |= (uint64_t)1 << cls;
  }
  hpcmem_lone_t lone, *offer = keep_fresh ? NULL : lone_offer(t, cls, &lone);
  hpcmem_refill_t r;
  unsigned got = _hpcmem_heap_refill(t->heap, cls, &r, want, offer, keep_fresh);
  if (offer && lone.taken >= 0) {
    t->bin[lone.cls[lone.taken]].slot = NULL;
    t->lent |= (uint64_t)1 << lone.cls[lone.taken];
  }
  if (!got) {
    if (keep_fresh) goto fresh;               /* another thread took the recycled ones meanwhile */
    if (!(got = refill_elsewhere(t, cls, &r, want))) return NULL;
  }
  b->head = r.list;             /* they carry the free key (heap refill) */
  b->count = (uint16_t)r.nlist;
  if (!keep_fresh) {
    t->fresh[cls] = r.fresh;
    b->nfresh = r.nfresh;
  }
  if (__builtin_expect(!__atomic_load_n(&first_written, __ATOMIC_RELAXED), 0)) {
    __atomic_store_n(&first_written, 1, __ATOMIC_RELAXED);
    *(volatile char *)r.first = 0;  /* a fresh object reads 0: its content does not change */
  }
  return r.first;
fresh:
  p = t->fresh[cls];
  t->fresh[cls] = (char *)p + _hpcmem_class_size[cls];
  b->nfresh--;
  return p;
}

void _hpcmem_tcache_flush(hpcmem_tcache_t *t, unsigned cls) {
  hpcmem_bin_t *b = &t->bin[cls];
  unsigned keep = b->max / 2;
  bin_event(t, cls);
  bin_resize(b, cls);
  if (keep > b->max / 2) keep = b->max / 2;
  unsigned n = b->count - keep;
  void *list = b->head, *cut = list;
  for (unsigned i = 1; i < n; i++) cut = *(void **)cut;
  b->head = *(void **)cut;
  *(void **)cut = NULL;
  b->count = (uint16_t)(b->count - n);
  _hpcmem_heap_flush(t->heap, stash_on() ? cls : 0, list, n, &t->st.remote_free_count);
}

void _hpcmem_tcache_flush_all(hpcmem_tcache_t *t) {
  _hpcmem_tcache_pend_flush(t);
  for (unsigned c = 1; c < HPCMEM_NCLASSES; c++) {
    hpcmem_bin_t *b = &t->bin[c];
    size_t size = _hpcmem_class_size[c];
    /* fresh objects go back unwritten (uncarved, or their span's hole: a
     * thread's exit would otherwise touch pages nobody used, and the next
     * threads' refills carve past them); a range the span cannot take (it has
     * another hole) and the slot's object join spans' lists, which carry
     * keys: written now */
    if (b->nfresh && _hpcmem_heap_uncarve(t->fresh[c], b->nfresh)) b->nfresh = 0;
    for (unsigned i = 0; i <= b->nfresh; i++) {
      void *p = i ? t->fresh[c] + (size_t)(i - 1) * size : b->slot;
      if (!p) continue;
      _hpcmem_bin_link(b, p, _hpcmem_free_key);
    }
    b->slot = NULL;
    b->nfresh = 0;
    if (!b->count) continue;
    _hpcmem_heap_flush(t->heap, 0, b->head, b->count, &t->st.remote_free_count);   /* to the spans: they may empty */
    b->head = NULL;
    b->count = 0;
  }
}

void _hpcmem_tcache_trim(hpcmem_tcache_t *t) {
  _hpcmem_tcache_flush_all(t);
  for (unsigned c = 1; c < HPCMEM_NCLASSES; c++) t->bin[c].max = bin_start(c);
}

void _hpcmem_tcache_retire(hpcmem_tcache_t *t) {
  _hpcmem_lock(&registry_lock);
  if (t->late_tid) {
    t->late_tid = 0;
    __atomic_sub_fetch(&_hpcmem_tcache_late, 1, __ATOMIC_RELAXED);
  }
  t->live = 0;
  live_threads--;
  uint32_t before = __atomic_load_n(&bin_cap, __ATOMIC_RELAXED);
  set_bin_cap();
  _hpcmem_unlock(&registry_lock);
  if (__builtin_expect(before <= STASH_CAP, 0)) stash_off();
}

void _hpcmem_tcache_mark_late(hpcmem_tcache_t *t) {
  _hpcmem_lock(&registry_lock);
  if (!t->late_tid) {
    t->late_tid = _hpcmem_prim_gettid();
    __atomic_add_fetch(&_hpcmem_tcache_late, 1, __ATOMIC_RELAXED);
  }
  _hpcmem_unlock(&registry_lock);
}

hpcmem_tcache_t *_hpcmem_tcache_dead_late(int *tid) {
  if (!__atomic_load_n(&_hpcmem_tcache_late, __ATOMIC_RELAXED)) return NULL;
  hpcmem_tcache_t *dead = NULL;
  _hpcmem_lock(&registry_lock);
  for (hpcmem_tcache_t *c = all_caches; c; c = c->next_all) {
    /* a thread id the kernel reused shows the cache alive a while longer */
    if (!c->live || !c->late_tid || _hpcmem_prim_thread_alive(c->late_tid)) continue;
    *tid = c->late_tid;
    c->late_tid = 0;
    __atomic_sub_fetch(&_hpcmem_tcache_late, 1, __ATOMIC_RELAXED);
    dead = c;
    break;
  }
  _hpcmem_unlock(&registry_lock);
  return dead;
}

/* fork: in the child, only the forking thread lives on; the other threads'
 * caches are free for the child's new threads, and the bins get the room of
 * the live count.  What the other threads' caches held stays where it is,
 * unread: those threads may have been inside a fast path when the process
 * forked, and the child's copy of a cache can be half updated (a malloc
 * that had stored the fresh range's new start but not its shorter length
 * gave the child a range one object too long; flushed by the child's next
 * thread, it made a span inconsistent).  Their objects are lost to the child
 * (pages it shares with the parent until it writes them, which it never
 * does); the heaps themselves are consistent (locked around the fork). */
static void drop_unread(hpcmem_tcache_t *c) {
  for (unsigned k = 1; k < HPCMEM_NCLASSES; k++) {
    c->bin[k].head = NULL;
    c->bin[k].count = 0;
    c->bin[k].slot = NULL;
    c->bin[k].nfresh = 0;
    c->fresh[k] = NULL;
  }
  c->pend = NULL;
  c->pend_bin = NULL;
}

void _hpcmem_tcache_fork_prepare(void) { _hpcmem_lock(&registry_lock); }
void _hpcmem_tcache_fork_parent(void) { _hpcmem_unlock(&registry_lock); }
void _hpcmem_tcache_fork_child(void) {
  live_threads = 0;
  _hpcmem_tcache_late = 0;
  for (hpcmem_tcache_t *c = all_caches; c; c = c->next_all) {
    if (c->live && c != _hpcmem_tc) drop_unread(c);
    c->live = c == _hpcmem_tc;
    live_threads += (unsigned)c->live;
    if (c->live && c->late_tid) {             /* the forking thread, in a late destructor: its id here */
      c->late_tid = _hpcmem_prim_gettid();
      _hpcmem_tcache_late++;
    } else {
      c->late_tid = 0;
    }
  }
  set_bin_cap();
  _hpcmem_unlock(&registry_lock);
}

/* The pending free into its bin's list (bins are flushed after this; the
 * list may run past its room until then). */
void _hpcmem_tcache_pend_flush(hpcmem_tcache_t *t) {
  void *p = t->pend;
  if (!p) return;
  hpcmem_bin_t *b = t->pend_bin;
  t->pend = NULL;
  (void)_hpcmem_bin_give(b, p, _hpcmem_free_key);   /* -1: p is the slot's object already */
}

int _hpcmem_tcache_contains(hpcmem_tcache_t *t, unsigned cls, const void *p) {
  unsigned n = 0;
  if (t->pend == p || t->bin[cls].slot == p) return 1;
  for (void *q = t->bin[cls].head; q && n <= t->bin[cls].count; q = *(void **)q, n++)
    if (q == p) return 1;
  return 0;
}

/* Without the lock (a fatal signal's summary whose handler interrupted a
 * thread's start or end), the walk is still safe: caches are never freed,
 * and a new one goes in at the head of the list, which was read once. */
int _hpcmem_tcache_merge_stats(hpcmem_stats_t *out, uint64_t *cur_unpublished, uint64_t wait_ns) {
  int held = 1;
  if (!wait_ns) _hpcmem_lock(&registry_lock);
  else held = _hpcmem_lock_within(&registry_lock, wait_ns);
  hpcmem_tcache_t *first = __atomic_load_n(&all_caches, __ATOMIC_ACQUIRE);
  for (hpcmem_tcache_t *t = first; t; t = t->next_all) {
#define HPCMEM_MERGE_(name, kind, help) \
    if (#kind[0] == 'S') out->name += t->st.name; else if (t->st.name > out->name) out->name = t->st.name;
    HPCMEM_STATS_FIELDS(HPCMEM_MERGE_)
#undef HPCMEM_MERGE_
    uint64_t b_alloc = _hpcmem_tcache_b_alloc(t), b_freed = _hpcmem_tcache_b_freed(t);
    out->alloc_count += _hpcmem_tcache_n_alloc(t);
    out->free_count += _hpcmem_tcache_n_free(t);
    out->bytes_allocated += b_alloc;
    out->bytes_freed += b_freed;
    out->alloc_time_ns += t->alloc_ticks;   /* ticks: the caller converts */
    *cur_unpublished += (uint64_t)((int64_t)(b_alloc - b_freed) - t->published);
    for (unsigned c = 1; c < HPCMEM_NCLASSES; c++)    /* free objects the bin holds (not its fresh range) */
      out->retained_bytes += ((uint64_t)t->bin[c].count + (t->bin[c].slot != NULL)) * _hpcmem_class_size[c];
    const hpcmem_bin_t *pb = __atomic_load_n(&t->pend_bin, __ATOMIC_RELAXED);   /* and the pending free */
    if (__atomic_load_n(&t->pend, __ATOMIC_RELAXED) && pb) out->retained_bytes += pb->step >> 32;
  }
  if (!held) return 1;
  _hpcmem_unlock(&registry_lock);
  return 0;
}
