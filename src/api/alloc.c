/* The malloc family.  Each entry point is a short fast path (thread-cache
 * hit, no lock, no atomic) and one unlikely branch into a noinline slow path
 * that handles initialisation, refills and flushes, the group heaps' direct
 * runs, the large-block tier, statistics sampling, tracing and misuse. */
#include "config.h"
#include "api/internal.h"
#include "hpcmem.h"
#include "prim/prim.h"
#include "place/contig.h"
#include "segment/segment.h"
#include "topo/topo.h"
#include "trace/trace.h"
#include "hpcmem_trace_format.h"
#include "util/job.h"
#include "util/log.h"
#include "util/options.h"
#include "util/startdata.h"
#include <dlfcn.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdint.h>
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define EXPORT __attribute__((visibility("default")))

int _hpcmem_ready;
int _hpcmem_default_seg = HPCMEM_SEG_PRIVATE;
hpcmem_large_t _hpcmem_large;
size_t _hpcmem_large_threshold = (size_t)128 << 10;
static hpcmem_lock_t init_lock = HPCMEM_LOCK_INIT;
static pthread_key_t exit_key;
static int on_error = HPCMEM_ON_ERROR_ABORT;
static int check_always;
static char *brk_start;             /* glibc's heap start, for pointers it handed out before us */
static size_t fast_lim;             /* malloc's fast path serves sizes above HPCMEM_TINY_MAX below
                                       this: the large threshold, the largest class + 1; 0 before
                                       initialisation and while tracing (smaller sizes see that in
                                       their accounting word, see _hpcmem_tcache_fast_path_off) */

/* glibc's own functions, for memory the process got before libhpcmem was loaded */
extern void __libc_free(void *);
extern void *__libc_realloc(void *, size_t);
extern void *__libc_malloc(size_t);
extern void *__libc_calloc(size_t, size_t);
extern void *__libc_memalign(size_t, size_t);

/* The C library's allocator for a process whose start failed (on_system),
 * called through pointers loaded from the GOT: a direct call would add an
 * entry to the PLT, which lies in front of the hot text and would move the
 * malloc and free fast paths (src/hot-text.ld). */
static struct {
  void *(*volatile malloc)(size_t);
  void *(*volatile calloc)(size_t, size_t);
  void *(*volatile memalign)(size_t, size_t);
  void *(*volatile realloc)(void *, size_t);
} libc_alloc = {__libc_malloc, __libc_calloc, __libc_memalign, __libc_realloc};

/* ------------------------------------------------------------------ */
/* initialisation                                                       */


/* A thread's cache goes back: at its exit, or, made late, from another
 * thread once it is gone (the statistics the same way). */
static inline void cache_back(hpcmem_tcache_t *t) {
  _hpcmem_tcache_flush_all(t);
  _hpcmem_stats_publish(t);
  _hpcmem_tcache_retire(t);
}

static void thread_exit(void *arg) {
  hpcmem_tcache_t *t = arg;
  if (_hpcmem_trace_enabled) _hpcmem_trace_thread_exit();
  cache_back(t);
  _hpcmem_tc = &_hpcmem_tcache_none;
  _hpcmem_thread_exiting = 1;     /* a cache made from now on is late (_hpcmem_tcache_mark_late) */
}

/* Caches made late whose threads are gone go back (with their trace
 * buffers): each new cache looks for them first. */
HPCMEM_NOINLINE static void late_back(void) {
  int tid;
  for (hpcmem_tcache_t *dead; (dead = _hpcmem_tcache_dead_late(&tid)) != NULL;) {
    if (_hpcmem_trace_enabled) _hpcmem_trace_thread_gone(tid);
    cache_back(dead);
  }
}

static unsigned log2_of(size_t v) { return 63u - (unsigned)__builtin_clzll(v); }

/* Set when the start found too little address space for the heaps and the
 * large tier: every call then goes to the C library's allocator, which the
 * process keeps running on (start_short). */
static int on_system;

/* Why reserving address space failed, for the message: strict overcommit
 * accounting counts every reservation as memory. */
static int overcommit_strict(void) {
  char c = 0;
  int fd = open("/proc/sys/vm/overcommit_memory", O_RDONLY | O_CLOEXEC);
  if (fd < 0) return 0;
  ssize_t got = read(fd, &c, 1);
  close(fd);
  return got == 1 && c == '2';
}

int _hpcmem_on_system(void) { return on_system; }

/* Said where someone expects libhpcmem's output: an MPI job (once, by rank 0
 * or a process whose rank is unknown), a program that asked for its report,
 * a trace or HPCMEM_VERBOSE.  Without, a shell pipeline under LD_PRELOAD
 * would print it once per command. */
HPCMEM_NOINLINE __attribute__((cold)) static void start_on_system(int rc, unsigned heaps, size_t limit_mib) {
  _hpcmem_heaps_release();
  on_system = 1;
  int report = (int)_hpcmem_opt(REPORT);
  int say = _hpcmem_job.from_launcher ? _hpcmem_job.rank <= 0
                                      : report == HPCMEM_REPORT_SUMMARY || report == HPCMEM_REPORT_FULL;
  if (!say && !_hpcmem_opt(TRACE) && !_hpcmem_opt(VERBOSE)) return;
  char why[160];
  if (overcommit_strict())
    snprintf(why, sizeof why, "the kernel counts reserved address space as memory (vm.overcommit_memory = 2)");
  else if (limit_mib)
    snprintf(why, sizeof why, "the address-space limit (ulimit -v) is %zu MiB, libhpcmem needs at least 19 GiB", limit_mib);
  else
    snprintf(why, sizeof why, "%s", strerror(-rc));
  _hpcmem_warn("cannot reserve address space for the heaps (%u of 16 GiB each, and 1 GiB - 1 TiB for large blocks): "
               "%s; this process allocates with the C library's malloc instead, without libhpcmem's statistics, "
               "segments or trace (docs/footprint.md)", heaps, why);
}

/* The start's reservations fell short (an address-space limit, ulimit -v):
 * one heap instead of one per cpu, then a large-block region halved down to
 * 1 GiB; when even that does not fit, the process runs on the C library
 * (start_on_system); what was taken is said with HPCMEM_VERBOSE.  Out of
 * line: a start without such a limit never runs it. */
HPCMEM_NOINLINE __attribute__((cold)) static void start_short(int rc, unsigned wanted, unsigned shift) {
  unsigned heaps = wanted;
  if (!_hpcmem_heaps.count) rc = heaps > 1 ? _hpcmem_heaps_init(heaps = 1, shift) : rc;
  else rc = -ENOMEM;                   /* the heaps are there: the large region is not */
  if (rc == 0 || _hpcmem_heaps.count) {
    hpcmem_large_config_t c;           /* as _hpcmem_large_init(&_hpcmem_large, NULL) */
    _hpcmem_large_config_from_options(&c);
    c.warm = (size_t)_hpcmem_opt(LARGE_THRESHOLD);
    c.tcache = 1;
    rc = -ENOMEM;
    for (size_t r = c.reserve; rc == -ENOMEM && r >= ((size_t)1 << 30); r /= 2) {
      c.reserve = r;
      rc = _hpcmem_large_init(&_hpcmem_large, &c);
    }
  }
  size_t limit_mib = _hpcmem_prim_as_limit() >> 20;
  if (rc < 0) {
    start_on_system(rc, heaps, limit_mib);
    return;
  }
  if (_hpcmem_opt(VERBOSE))
    _hpcmem_info("the address-space limit (ulimit -v, %zu MiB) leaves %u of %u heaps and %zu MiB of the 1 TiB "
                 "region for large blocks (docs/footprint.md)", limit_mib, heaps, wanted,
                 (size_t)(_hpcmem_large.end - _hpcmem_large.base) >> 20);
}

static int no_sysfs;                /* the topology would come from hwloc (hpcmem_constructor) */

void _hpcmem_init(void) {
  _hpcmem_lock(&init_lock);
  if (_hpcmem_ready) { _hpcmem_unlock(&init_lock); return; }
  _hpcmem_options_init();
  _hpcmem_job_init();
  on_error = (int)_hpcmem_opt(ON_ERROR);
  check_always = (int)_hpcmem_opt(CHECK);
#ifdef HPCMEM_DEBUG
  check_always = 1;
#endif
  _hpcmem_large_threshold = (size_t)_hpcmem_opt(LARGE_THRESHOLD);
  /* one address slice per cpu (slices cost address space only); the topology,
   * loaded once the allocator works, maps cpus that share a cache onto one heap */
  long ncpu = _hpcmem_topo_sysfs_possible_cpus(HPCMEM_START_STR("/"));
  no_sysfs = ncpu <= 0;
  if (no_sysfs) ncpu = sysconf(_SC_NPROCESSORS_CONF);
  unsigned heaps = _hpcmem_opt(HEAPS) ? (unsigned)_hpcmem_opt(HEAPS) : (unsigned)(ncpu > 0 ? ncpu : 1);
  if (heaps > HPCMEM_MAX_HEAPS) heaps = HPCMEM_MAX_HEAPS;   /* cpus beyond share heaps (HPCMEM_HEAPS stops at 64) */
  unsigned shift = log2_of((size_t)_hpcmem_opt(BLOCK_SIZE));
  int rc = _hpcmem_heaps_init(heaps, shift);
  if (rc < 0 || (rc = _hpcmem_large_init(&_hpcmem_large, NULL)) < 0) start_short(rc, heaps, shift);
  _hpcmem_tcache_init_process();
  _hpcmem_stats_init();
  fast_lim = _hpcmem_large_threshold < HPCMEM_SMALL_MAX + 1 ? _hpcmem_large_threshold : HPCMEM_SMALL_MAX + 1;
  /* the option lists private|shared|interleaved */
  static const int seg_of_choice[3] HPCMEM_START_RO = {HPCMEM_SEG_PRIVATE, HPCMEM_SEG_SHARED, HPCMEM_SEG_INTERLEAVED};
  _hpcmem_default_seg = seg_of_choice[_hpcmem_opt(DEFAULT_SEGMENT) % 3];
  /* another default segment: every malloc takes the slow path, which routes it */
  if (_hpcmem_default_seg != HPCMEM_SEG_PRIVATE) {
    fast_lim = 0;
    _hpcmem_tcache_fast_path_off(0);
  }
  brk_start = sbrk(0);
  pthread_key_create(&exit_key, thread_exit);
  __atomic_store_n(&_hpcmem_ready, 1, __ATOMIC_RELEASE);
  _hpcmem_unlock(&init_lock);
  /* tracing starts with the first allocation, so that nothing is missed */
  if (_hpcmem_opt(TRACE) && !on_system) {
    _hpcmem_trace_init();
    if (_hpcmem_trace_enabled) {               /* every call past the recorder */
      __atomic_store_n(&fast_lim, 0, __ATOMIC_RELAXED);
      _hpcmem_tcache_fast_path_off(1);
    }
  }
}

static void know_groups(void);
static int groups_known;
static hpcmem_lock_t groups_lock = HPCMEM_LOCK_INIT;

hpcmem_tcache_t *_hpcmem_thread_cache(void) {
  hpcmem_tcache_t *t = _hpcmem_tc;
  if (HPCMEM_LIKELY(t != &_hpcmem_tcache_none)) return t;
  if (!_hpcmem_ready) _hpcmem_init();
  if (HPCMEM_UNLIKELY(on_system)) return NULL;   /* no heaps: the callers go to the C library */
  if (HPCMEM_UNLIKELY(__atomic_load_n(&_hpcmem_tcache_late, __ATOMIC_RELAXED))) late_back();
  t = _hpcmem_tcache_get();
  if (!t) return NULL;
  if (HPCMEM_UNLIKELY(_hpcmem_thread_exiting)) _hpcmem_tcache_mark_late(t);
  pthread_setspecific(exit_key, t);   /* arms thread_exit for this thread (if a round is left) */
  if (!__atomic_load_n(&groups_known, __ATOMIC_ACQUIRE) && _hpcmem_tcache_live_count() > 1) know_groups();
  return t;
}

/* fork: the child gets consistent heaps and only its own thread cache */
static void fork_prepare(void) {
  _hpcmem_tcache_fork_prepare();
  _hpcmem_seg_fork_prepare(_hpcmem_default_seg == HPCMEM_SEG_SHARED);
  _hpcmem_heaps_fork_prepare();
  _hpcmem_large_fork_prepare(&_hpcmem_large);
}
static void fork_parent(void) {
  _hpcmem_large_fork_parent(&_hpcmem_large);
  _hpcmem_heaps_fork_parent();
  _hpcmem_seg_fork_parent();
  _hpcmem_tcache_fork_parent();
}
static void fork_child(void) {
  _hpcmem_large_fork_child(&_hpcmem_large);
  _hpcmem_heaps_fork_child();
  _hpcmem_seg_fork_child();
  _hpcmem_tcache_fork_child();
  _hpcmem_stats_plain_clear();   /* single-threaded again, with the parent's range */
  _hpcmem_unlock(&groups_lock);  /* another thread's know_groups never ends here: run again */
  _hpcmem_topo_fork_child();
}

static unsigned topo_group(int cpu) {
  int g = _hpcmem_topo_cpu_group(cpu);
  return g < 0 ? 0 : (unsigned)g;
}
static unsigned cpu_slice(int cpu) { return (unsigned)cpu; }   /* no topology: a heap per cpu */

/* The thread groups: the topology read (src/topo: sysfs, 270 us of a 1 ms
 * start here), the cpus mapped onto the heaps, and the calling thread's
 * cache bound again; the other threads' caches bind again at their next
 * refill or direct run (_hpcmem_tcache_bind_check).  A process's first
 * thread has no one to share a heap with: it takes heap 0, and the groups
 * wait for a second thread's first cache (_hpcmem_thread_cache), or the
 * constructor reads them at once where something needs them there. */
HPCMEM_NOINLINE static void know_groups(void) {
  _hpcmem_lock(&groups_lock);
  if (!groups_known) {
    int loaded = _hpcmem_topo_loaded() && _hpcmem_topo_group_count(0) > 0;
    __atomic_store_n(&_hpcmem_cpu_to_group, loaded ? topo_group : cpu_slice, __ATOMIC_RELEASE);
    __atomic_add_fetch(&_hpcmem_tcache_bind_gen, 1, __ATOMIC_RELEASE);
    __atomic_store_n(&groups_known, 1, __ATOMIC_RELEASE);
  }
  _hpcmem_unlock(&groups_lock);
  if (_hpcmem_tc != &_hpcmem_tcache_none) _hpcmem_tcache_rebind(_hpcmem_tc);
}

static void around_hwloc(int entering) {
  if (!_hpcmem_trace_enabled) return;
  if (entering) _hpcmem_trace_lib_enter();   /* hwloc's allocations are ours: S */
  else _hpcmem_trace_lib_leave();
}

/* What needs a working malloc comes here, after the allocator started:
 * hwloc allocates while it loads the topology.  src/topo reads the groups
 * from sysfs and opens hwloc only when something needs more, without its
 * plugins, and closes it again (docs/footprint.md). */
__attribute__((constructor(101))) static void hpcmem_constructor(void) {
  if (!_hpcmem_ready) _hpcmem_init();
  if (on_system) return;
  pthread_atfork(fork_prepare, fork_parent, fork_child);
  _hpcmem_topo_hwloc_guard = around_hwloc;   /* the topology and hwloc loaded later, by whoever asks */
  /* at once: for the summary; where hwloc reads it (a topology file or
   * hwloc's variables, or no sysfs), which mallocs and opens libraries --
   * not inside another thread's first malloc, which may run under the
   * loader's lock (a dlopen) -- and says what is wrong with a file at start;
   * and for segments that a malloc may create (they ask for nodes) */
  if (_hpcmem_opt(VERBOSE) || _hpcmem_topo_start_needs_hwloc() || no_sysfs ||
      _hpcmem_default_seg != HPCMEM_SEG_PRIVATE) {
    _hpcmem_topo_read_at_start();
    know_groups();
  }
  if (_hpcmem_opt(VERBOSE)) _hpcmem_topo_print(stderr);
}

/* ------------------------------------------------------------------ */
/* misuse                                                               */

HPCMEM_NOINLINE static void misuse(const char *fn, const void *p, const char *what) {
  hpcmem_tcache_t *t = _hpcmem_tc;
  if (t != &_hpcmem_tcache_none) t->st.error_count++; else _hpcmem_stats_add_error();
  if (on_error == HPCMEM_ON_ERROR_IGNORE) return;
  if (on_error == HPCMEM_ON_ERROR_WARN) { _hpcmem_warn("%s(%p): %s", fn, p, what); return; }
  _hpcmem_warn("%s(%p): %s; aborting (set HPCMEM_ON_ERROR=warn or ignore to go on)", fn, p, what);
  abort();
}

/* Did glibc hand this out before libhpcmem took over?  Its heap lies between
 * the program break at our start and now; its mmapped chunks carry the
 * IS_MMAPPED bit in a header that sits 16 bytes before a page boundary. */
static int from_system(const void *p);
static void periodic_check(void);
static int from_system(const void *p) {
  const char *c = p;
  if (brk_start && c >= brk_start - ((size_t)64 << 20) && c < (char *)sbrk(0)) return 1;
  if (((uintptr_t)c & 4095) == 16) {
    size_t hdr = ((const size_t *)c)[-1];
    return (hdr & 2) && !(hdr & 4) && (hdr & 4095) == 2;
  }
  return 0;
}

/* ------------------------------------------------------------------ */
/* allocation                                                           */

/* The class of n bytes aligned to align; 0 when none serves it (above the
 * largest class: a run of the group heap, where HPCMEM_LARGE_THRESHOLD is
 * above the classes). */
static inline unsigned class_for(size_t n, size_t align) {
  if (align <= 16) return n <= HPCMEM_SMALL_MAX ? _hpcmem_size_class(n ? n : 1) : 0;
  size_t m = (n + align - 1) & ~(align - 1);
  if (m < align) m = align;
  if (m > HPCMEM_SMALL_MAX) return 0;
  unsigned c = _hpcmem_size_class(m);
  if (_hpcmem_class_size[c] % align == 0) return c;
  size_t pow2 = (size_t)1 << (64 - __builtin_clzll(m - 1));    /* power-of-two classes are aligned */
  return pow2 <= HPCMEM_SMALL_MAX ? _hpcmem_size_class(pow2) : 0;
}

/* Everything that is not a thread-cache hit.  align is a power of two (0/16: natural). */
static void *alloc_slow(hpcmem_tcache_t *t, size_t n, size_t align, int zeroed);

/* Plain malloc in another default segment (HPCMEM_DEFAULT_SEGMENT): there
 * when the segment can serve (the shared one exists only after MPI_Init),
 * else in the private segment. */
static void *alloc_routed(hpcmem_tcache_t *t, size_t n, size_t align, int zeroed) {
  if (n > (size_t)PTRDIFF_MAX) { errno = ENOMEM; return NULL; }
  if (!_hpcmem_seg_serves_malloc(_hpcmem_default_seg)) return alloc_slow(t, n, align, zeroed);
  int saved = errno;
  void *p = _hpcmem_seg_alloc_for(t, _hpcmem_default_seg, n, align, zeroed);
  if (!p) { errno = saved; return alloc_slow(t, n, align, zeroed); }   /* full: private memory */
  return p;
}

void *_hpcmem_alloc_private(hpcmem_tcache_t *t, size_t n, size_t align, int zero) {
  void *p = alloc_slow(t, n, align, zero && n >= _hpcmem_large_threshold);
  if (p && zero && n < _hpcmem_large_threshold) memset(p, 0, n);
  return p;
}

/* The statistics' publish check of the slow paths, in one copy: inlined
 * into each, it made the code that a process runs overflow its 64 KiB
 * window (src/hot-text.ld). */
HPCMEM_NOINLINE static void publish_due(hpcmem_tcache_t *t) { _hpcmem_stats_maybe_publish(t); }

/* The publish check of a slow path that moved b_alloc or b_freed: the
 * light one first (internal.h), the full one when that cannot decide. */
static inline void slow_publish(hpcmem_tcache_t *t, uint64_t calls, uint64_t timed) {
  if (!_hpcmem_stats_light(t, calls, timed)) publish_due(t);
}

/* p (n bytes asked, usable bytes handed out) counted in the thread's
 * statistics, published when due; shared by alloc_slow, malloc_big and
 * malloc_refill.  A small object takes the full check, which also gives the
 * fast paths new budgets: with the light one, a budget a refill left low ran
 * out a few calls later, and that settle cost a fast path 300 - 1,200 TSC
 * ticks where it was cold (the 512 B row of the size sweep, 10 -> 13.5 ns). */
static inline void *counted(hpcmem_tcache_t *t, void *p, size_t n, size_t usable) {
  t->n_alloc++;
  t->b_alloc += usable;
  if (n > t->st.largest_alloc) t->st.largest_alloc = n;
  if (usable >= _hpcmem_large_threshold) slow_publish(t, t->n_alloc, t->timed_alloc);
  else publish_due(t);
  return p;
}

/* A run of the thread's heap for n bytes at align (above the datablock
 * size: no class has it), after the thread bound to its group's heap
 * (a lone thread on heap 0 when the groups became known binds here too when
 * it takes no refill), or NULL. */
static void *direct_run(hpcmem_tcache_t *t, size_t n, size_t align) {
  _hpcmem_tcache_bind_check(t);
  return _hpcmem_heap_run_alloc(t->heap, n, align);
}

static void *alloc_slow(hpcmem_tcache_t *t, size_t n, size_t align, int zeroed) {
  void *p;
  size_t usable;
  if (n > (size_t)PTRDIFF_MAX) { errno = ENOMEM; return NULL; }   /* as glibc */
  unsigned cls = (n < _hpcmem_large_threshold && align <= ((size_t)1 << _hpcmem_heaps.block_shift)) ? class_for(n, align) : 0;
  if (cls) {
    hpcmem_bin_t *b = &t->bin[cls];
    if ((p = b->head) != NULL) {                  /* the same order as malloc's fast path */
      b->head = *(void **)p;
      b->count--;
      ((uint64_t *)p)[1] = 0;                      /* not a cached object any more */
    } else if ((p = b->slot) != NULL) {
      b->slot = NULL;                              /* the slot's object does not carry the key */
    } else if (!(p = _hpcmem_tcache_refill(t, cls, align <= 16 ? &cls : NULL))) {
      goto large;
    }
    usable = _hpcmem_class_size[cls];
  } else if (n < _hpcmem_large_threshold && (p = direct_run(t, n, align)) != NULL) {
    usable = _hpcmem_span_of(p)->run_size;
  } else {
  large:
    /* a span or run the heap's slice has no room for comes from the large
     * tier too (free, realloc and malloc_usable_size find a block by its
     * address); nothing is written into a large block: an untouched block
     * costs no page */
    p = zeroed ? _hpcmem_large_alloc_zeroed(&_hpcmem_large, n, align, &usable)
               : _hpcmem_large_alloc_usable(&_hpcmem_large, n, align, &usable);
    if (!p) { errno = ENOMEM; return NULL; }
    t->st.large_alloc_count++;
  }
  return counted(t, p, n, usable);
}

/* HPCMEM_CHECK=1 (and debug builds): every 256th slow-path call checks the
 * invariants of all heaps and the large tier, and stops on the first fault.
 * The check walks every span and block, so its time grows with the heap:
 * in a release build the next one waits until the program has run
 * CHECK_SHARE times as long as the last one took, so the checks themselves
 * take at most about a tenth of the time (a C++ compile under HPCMEM_CHECK=1
 * ran 3 - 5 times as long as without it when every 256th call checked).
 * One thread checks at a time: it claims the turn by setting not_before to
 * the end of time, and the threads that meet a 256th call meanwhile go on.
 * Debug builds keep checking every 256th call. */
#define CHECK_SHARE 9
HPCMEM_NOINLINE __attribute__((cold)) static void periodic_check(void) {
  static unsigned long calls;
  if (__atomic_add_fetch(&calls, 1, __ATOMIC_RELAXED) % 256) return;
#ifndef HPCMEM_DEBUG
  static uint64_t not_before;
  uint64_t t0 = _hpcmem_prim_now_ns(), due = __atomic_load_n(&not_before, __ATOMIC_RELAXED);
  if (t0 < due || !__atomic_compare_exchange_n(&not_before, &due, UINT64_MAX, 0, __ATOMIC_RELAXED, __ATOMIC_RELAXED))
    return;
#endif
  if (hpcmem_check() < 0) _hpcmem_fatal("internal consistency check failed (HPCMEM_CHECK)");
#ifndef HPCMEM_DEBUG
  uint64_t t1 = _hpcmem_prim_now_ns();
  __atomic_store_n(&not_before, t1 + CHECK_SHARE * (t1 - t0), __ATOMIC_RELAXED);
#endif
}

/* A call whose timing sample is due (the slow path emptied the accounting
 * word to see it) is timed and stands for the calls since the last timed
 * one: returns the start tick, or 0. */
static inline uint64_t time_start(uint8_t *due, uint64_t *timed, uint64_t n, uint64_t *weight) {
  if (HPCMEM_LIKELY(!*due)) return 0;
  *due = 0;
  *weight = n - *timed;
  *timed = n;
  return _hpcmem_prim_ticks();
}

/* The end of a call time_start timed (t0 != 0): its ticks, weighted. */
static inline void time_stop(hpcmem_tcache_t *t, uint64_t t0, uint64_t weight) {
  if (t0) t->alloc_ticks += (_hpcmem_prim_ticks() - t0) * weight;
}

/* malloc and its kin when libhpcmem could not start (on_system) */
HPCMEM_NOINLINE __attribute__((cold)) static void *system_alloc(size_t n, size_t align, int kind) {
  if (!on_system) { errno = ENOMEM; return NULL; }
  if (kind == HPCMEM_EV_CALLOC) return libc_alloc.calloc(1, n);
  return align > 16 ? libc_alloc.memalign(align, n) : libc_alloc.malloc(n);
}

/* Timing sample (about 1 call in HPCMEM_SAMPLE_PERIOD), tracing, errno. */

HPCMEM_NOINLINE static void *malloc_slow(size_t n, size_t align, int kind) {
  hpcmem_tcache_t *t = _hpcmem_thread_cache();
  if (!t) return system_alloc(n, align, kind);
  uint64_t weight = 0, t0 = time_start(&t->time_alloc, &t->timed_alloc, _hpcmem_tcache_n_alloc(t), &weight);
  void *p = HPCMEM_UNLIKELY(_hpcmem_default_seg != HPCMEM_SEG_PRIVATE)
                ? alloc_routed(t, n, align, kind == HPCMEM_EV_CALLOC)
                : alloc_slow(t, n, align, kind == HPCMEM_EV_CALLOC);
  time_stop(t, t0, weight);
  if (HPCMEM_UNLIKELY(_hpcmem_trace_enabled) && p && !t->in_call) _hpcmem_trace_event(kind, p, n, NULL, align);
  if (HPCMEM_UNLIKELY(check_always)) periodic_check();
  return p;
}

/* The large tier's calls and the refills of malloc's empty bins skip
 * malloc_slow / alloc_slow and free_any when none of their extras is due:
 * the thread has its cache (t is not the placeholder), no tracing or
 * routing (both set fast_lim to 0) and no periodic checks.  The large tier's
 * ways time a sampled call themselves; malloc_refill leaves one to
 * malloc_slow (it tests time_alloc itself).  A 128 KiB malloc+free pair from
 * the thread's block cache took 569 instructions the long way, and a sampled
 * large free 400 - 700 TSC ticks more than an unsampled one (the size sweep's
 * 128 KiB row has one sampled malloc and free: +10 ticks a round). */
static inline int direct_way(const hpcmem_tcache_t *t) {
  return t != &_hpcmem_tcache_none && __atomic_load_n(&fast_lim, __ATOMIC_RELAXED) != 0 && !check_always;
}

/* malloc of n >= fast_lim (a run of the group heap, or a large block) */
HPCMEM_NOINLINE static void *malloc_big(size_t n) {
  hpcmem_tcache_t *t = _hpcmem_tc;
  if (n >= _hpcmem_large_threshold && n <= (size_t)PTRDIFF_MAX && direct_way(t)) {
    uint64_t weight = 0, t0 = time_start(&t->time_alloc, &t->timed_alloc, _hpcmem_tcache_n_alloc(t), &weight);
    size_t usable;
    void *p = _hpcmem_large_alloc_usable(&_hpcmem_large, n, 0, &usable);
    if (HPCMEM_UNLIKELY(p == NULL)) { errno = ENOMEM; return NULL; }
    t->st.large_alloc_count++;
    counted(t, p, n, usable);
    time_stop(t, t0, weight);
    return p;
  }
  return malloc_slow(n, 0, HPCMEM_EV_MALLOC);
}

/* malloc of n (n < fast_lim) whose bin is empty: a refill from the group
 * heap straight away when nothing else is due (see direct_way); the first
 * object of a class a thread uses came through malloc_slow and alloc_slow,
 * 130 of its ~770 instructions.  The class is found again from n: passing
 * the hit's key along cost the hit a saved register. */
HPCMEM_NOINLINE static void *malloc_refill(size_t n) {
  hpcmem_tcache_t *t = _hpcmem_tc;
  if (!t->time_alloc && direct_way(t)) {
    unsigned c = _hpcmem_size_class(n);
    void *p = _hpcmem_tcache_refill(t, c, &c);
    if (HPCMEM_LIKELY(p != NULL)) return counted(t, p, n, _hpcmem_class_size[c]);
  }
  return malloc_slow(n, 0, HPCMEM_EV_MALLOC);
}

/* calloc, realloc and the aligned forms are one event each, not the
 * malloc and free they are made of. */
#define TRACED_CALL(t, expr) do { (t)->in_call++; expr; (t)->in_call--; } while (0)

/* ------------------------------------------------------------------ */
/* free                                                                 */

static inline uint64_t usable_of_span(const hpcmem_span_t *s) {
  return s->kind == HPCMEM_SPAN_SMALL ? s->obj_size : s->run_size;
}

/* Is p, which carries the free key, really free already?  The caller's
 * cache, and the span's free list and remote list (objects freed by other
 * groups) are searched; other threads' caches are not. */
static int is_double_free(hpcmem_tcache_t *t, hpcmem_span_t *s, void *p) {
  return _hpcmem_tcache_contains(t, s->cls, p) || _hpcmem_span_holds_free(s, p);
}

/* A block of the large tier back to it, counted and published; -1 after
 * reporting misuse.  Out of line: free_any and free_slow's direct way share it. */
HPCMEM_NOINLINE static int free_large(hpcmem_tcache_t *t, void *p, const char *fn) {
  size_t usable = 0;
  int rc = _hpcmem_large_free(&_hpcmem_large, p, &usable);
  if (rc == -EALREADY) { misuse(fn, p, "double free"); return -1; }
  if (rc < 0) { misuse(fn, p, "not the start of a block libhpcmem handed out (interior or misaligned pointer)"); return -1; }
  t->n_free++;
  t->b_freed += usable;
  t->st.large_free_count++;
  slow_publish(t, t->n_free, t->timed_free);
  return 0;
}

/* 0 when p was freed (or handed on), -1 after reporting misuse. */
static int free_any(hpcmem_tcache_t *t, void *p, const char *fn) {
  hpcmem_span_t *s = _hpcmem_span_of(p);
  hpcmem_segment_t *seg;
  if (s && s->kind == HPCMEM_SPAN_SMALL) {
    if (!_hpcmem_span_is_object(s, p)) { misuse(fn, p, "pointer into the middle of a block (not returned by malloc)"); return -1; }
    hpcmem_bin_t *b = &t->bin[s->cls];
    /* as on the fast path, p goes into an empty list's slot without being
     * read (it cannot be on the empty list); otherwise the key is checked */
    int mine = s->heap == t->heap_index, empty = mine && !b->count;
    if (p == b->slot || p == t->pend ||
        (!empty && ((uint64_t *)p)[1] == _hpcmem_free_key && is_double_free(t, s, p))) {
      misuse(fn, p, "double free");
      return -1;
    }
    t->n_free++;
    t->b_freed += s->obj_size;
    /* the free put aside goes onto its list: with tracing, or plain malloc
     * routed to another segment, every free comes here and none would */
    if (HPCMEM_UNLIKELY(t->pend != NULL)) _hpcmem_tcache_pend_flush(t);
    if (!mine) {                              /* another group's memory goes home, lock-free */
      _hpcmem_span_remote_free(s, p);
      t->st.remote_free_count++;
    } else {
      _hpcmem_tcache_bin_start(t, s->cls);
      _hpcmem_bin_give(b, p, _hpcmem_free_key);   /* not the slot's object: tested above */
      if (b->count > b->max) _hpcmem_tcache_flush(t, s->cls);
    }
  } else if (s) {
    size_t usable = s->run_size;
    if (_hpcmem_heap_run_free(s, p) < 0) { misuse(fn, p, "pointer into the middle of a block (not returned by malloc)"); return -1; }
    t->n_free++;
    t->b_freed += usable;
  } else if (_hpcmem_large_owns(&_hpcmem_large, p)) {
    return free_large(t, p, fn);
  } else if ((uintptr_t)p - (uintptr_t)_hpcmem_heaps.base < _hpcmem_heaps.size) {
    misuse(fn, p, "not allocated: no live block at this address (double free, or never returned by malloc)");
    return -1;
  } else if ((seg = _hpcmem_seg_holding(p)) != NULL) {
    const char *why;
    if (_hpcmem_seg_free_block(t, seg, p, &why) < 0) { misuse(fn, p, why); return -1; }
  } else if (_hpcmem_contig_owner(p)) {
    misuse(fn, p, "pointer from hpcmem_contig_malloc: give it back with hpcmem_contig_free");
    return -1;
  } else if (from_system(p)) {
    __libc_free(p);                            /* the system allocator's, from before libhpcmem */
  } else {
    misuse(fn, p, "pointer was not allocated by libhpcmem (foreign pointer)");
    return -1;
  }
  publish_due(t);
  return 0;
}

HPCMEM_NOINLINE static void free_slow(void *p) {
  if (!p) return;
  hpcmem_tcache_t *t = _hpcmem_tc;
  /* a large block straight to its tier when nothing else is due (see
   * direct_way): no span lookup, no timing or tracing tests */
  if (_hpcmem_large_owns(&_hpcmem_large, p) && direct_way(t)) {
    uint64_t weight = 0, t0 = time_start(&t->time_free, &t->timed_free, _hpcmem_tcache_n_free(t), &weight);
    free_large(t, p, "free");
    time_stop(t, t0, weight);
    return;
  }
  t = _hpcmem_thread_cache();
  if (!t) {
    if (on_system) __libc_free(p);
    return;
  }
  uint64_t weight = 0, t0 = time_start(&t->time_free, &t->timed_free, _hpcmem_tcache_n_free(t), &weight);
  /* recorded before the block is released: once it is, another thread may
   * get the address back, and its malloc must come after this free */
  if (HPCMEM_UNLIKELY(_hpcmem_trace_enabled) && !t->in_call) _hpcmem_trace_event(HPCMEM_EV_FREE, p, 0, NULL, 0);
  free_any(t, p, "free");
  time_stop(t, t0, weight);
  if (HPCMEM_UNLIKELY(check_always)) periodic_check();
}

/* ------------------------------------------------------------------ */
/* the entry points                                                     */

/* The fast paths: a thread-cache hit touches the cache's first line, the
 * bin's line and the object (free also one byte of the class map, the
 * class's geometry, and the line and object of the free it put aside before:
 * no span record, no lock, no atomic).  A hit's statistics
 * are one subtraction from the accounting word (HPCMEM_ACCT_CALLS); a word
 * that would go negative sends the call, before anything changed, to a
 * tail-called settling path (malloc_settle, free_settle). */

_Static_assert(sizeof(hpcmem_bin_t) == 32 && sizeof(hpcmem_class_geom_t) == 32 && HPCMEM_CLASS_KEY(1) * 8 == 32,
               "the fast paths address bins and geometries with a class key scaled by 8");

/* The hits themselves, shared by the fast paths and their settling paths. */
#define ALWAYS_INLINE inline __attribute__((always_inline))

/* An object from bin b (class c): the list's head, else the slot's object,
 * else a fresh one while the lists of the next two classes' bins are empty
 * (neither was written: no key to clear); NULL otherwise.  With an object
 * on either list, the refill lends it instead of touching new memory
 * (heap/tcache.c, loan).  Handing fresh objects out here keeps a program
 * that only allocates on the fast path: through the refill, each cost
 * 6.6 ns more (4 M mallocs of 48 B, 10 -> 16.5 ns). */
static ALWAYS_INLINE void *bin_take(hpcmem_tcache_t *t, hpcmem_bin_t *b, unsigned c) {
  void *p = b->head;
  if (HPCMEM_LIKELY(p != NULL)) {
    void *next = *(void **)p;
    b->head = next;
    __builtin_prefetch(next, 1);               /* the next malloc's object: freed on another core, it misses */
    b->count--;
    ((uint64_t *)p)[1] = 0;                    /* not a cached object any more */
  } else if ((p = b->slot) != NULL) {
    b->slot = NULL;
  } else if (HPCMEM_LIKELY(b->nfresh != 0) && !b[1].head && !b[2].head) {
    p = t->fresh[c];
    t->fresh[c] = (char *)p + _hpcmem_class_size[c];   /* not b->step: the hit's subtraction keeps its load */
    b->nfresh--;
  }
  return p;
}

/* p (an object of bin b's class, of the thread's heap) into bin b: onto the
 * list when it does not carry the free key (a suspected double free goes to
 * the slow path's search) and the list has room; when the list is empty,
 * into the slot without being read (p cannot be on the empty list; a second
 * free of the slot's object goes to the slow path).  0, or -1: the slow path
 * must see p. */
static ALWAYS_INLINE int bin_put(hpcmem_bin_t *b, void *p, uint64_t key) {
  if (HPCMEM_LIKELY(b->count != 0)) {         /* the slot is empty while the list is not */
    if (HPCMEM_UNLIKELY(((uint64_t *)p)[1] == key) || HPCMEM_UNLIKELY(b->count >= b->max)) return -1;
    _hpcmem_bin_link(b, p, key);
    return 0;
  }
  if (HPCMEM_UNLIKELY(p == b->slot)) return -1;
  _hpcmem_tcache_put_empty(b, p, key);
  return 0;
}

/* The bin of p when p is in a chunk of small objects of the thread's own
 * slice, on an object boundary (the class map's key, scaled by 8, addresses
 * both the geometry and the bin); else NULL. */
static ALWAYS_INLINE hpcmem_bin_t *bin_of(hpcmem_tcache_t *t, const void *p) {
  uintptr_t off = (uintptr_t)p - (uintptr_t)t->slice, chunk = off >> HPCMEM_CHUNK_SHIFT;
  if (HPCMEM_UNLIKELY(chunk >= ((uintptr_t)1 << (HPCMEM_SLICE_SHIFT - HPCMEM_CHUNK_SHIFT)))) return NULL;
  size_t k = t->classmap[chunk];
  /* indexed in 8-byte words, so that k scaled by 8 is part of each address */
  if (HPCMEM_UNLIKELY(!_hpcmem_class_on_boundary((const hpcmem_class_geom_t *)((const uint64_t *)_hpcmem_class_geom + k), off)))
    return NULL;
  /* hides from the compiler that this is the k above, which it would
   * otherwise shift once for both tables and add to each (two instructions
   * more than the scaled addresses) */
  __asm__("" : "+r"(k));
  return (hpcmem_bin_t *)((uint64_t *)t->bin + k);
}

/* The pending free q (checked and counted when free put it aside) into its
 * bin b: onto the list while it has room, into the slot when the list is
 * empty; -1: free_pending must take it. */
static ALWAYS_INLINE int bin_push(hpcmem_bin_t *b, void *q, uint64_t key) {
  if (HPCMEM_LIKELY(b->count != 0)) {         /* _hpcmem_bin_give with the room's test, laid out for the hit */
    if (HPCMEM_UNLIKELY(b->count >= b->max)) return -1;
    _hpcmem_bin_link(b, q, key);
    return 0;
  }
  return _hpcmem_tcache_put_empty(b, q, key);
}

/* A pending free its bin did not take on the fast path: the bin is full
 * (it flushes half), or q is the slot's object (cannot be: a free of the
 * slot's object goes to the slow path). */
HPCMEM_NOINLINE static void free_pending(hpcmem_tcache_t *t, void *q, hpcmem_bin_t *b) {
  unsigned cls = (unsigned)(b - t->bin);
  if (!b->count) return;                       /* the slot's object: cached already */
  _hpcmem_bin_link(b, q, _hpcmem_free_key);
  _hpcmem_tcache_flush(t, cls);
}

/* A hit whose accounting word would go negative: its budget ran out, or
 * the slow path emptied the word to see this call -- its timing sample is
 * due, or malloc's fast path is off (tracing, routed malloc), which only the
 * slow path serves.  A hit is counted as settled, the slow paths' settling
 * follows (publish, or new budgets; a budget may be 0 when the thread's live
 * bytes are a whole HPCMEM_PUBLISH_BYTES past what it published), and a
 * sampled call is timed here, hit or not: sent to the slow path, a sampled
 * free took its span lookup and checks (~600 TSC ticks, which the call
 * stood for 1024 times in alloc_time_ns). */
HPCMEM_NOINLINE static void *malloc_settle(size_t n) {
  hpcmem_tcache_t *t = _hpcmem_tc;
  if (t != &_hpcmem_tcache_none && !__atomic_load_n(&_hpcmem_tcache_alloc_off, __ATOMIC_RELAXED)) {
    uint64_t weight = 0, t0 = time_start(&t->time_alloc, &t->timed_alloc, _hpcmem_tcache_n_alloc(t), &weight);
    unsigned c = _hpcmem_size_class(n);       /* n < fast_lim: the fast path came here */
    hpcmem_bin_t *b = &t->bin[c];
    void *p = bin_take(t, b, c);
    if (p) {
      t->n_alloc++;
      t->b_alloc += b->step >> 32;
      _hpcmem_stats_maybe_publish(t);
    } else {
      p = malloc_refill(n);
    }
    time_stop(t, t0, weight);
    return p;
  }
  return malloc_slow(n, 0, HPCMEM_EV_MALLOC);
}

/* The same for free (a free whose bin does not take it goes to free_slow). */
HPCMEM_NOINLINE static void free_settle(void *p) {
  hpcmem_tcache_t *t = _hpcmem_tc;
  hpcmem_bin_t *b = bin_of(t, p);
  if (!b || p == t->pend) { free_slow(p); return; }
  uint64_t weight = 0, t0 = time_start(&t->time_free, &t->timed_free, _hpcmem_tcache_n_free(t), &weight);
  if (bin_put(b, p, _hpcmem_free_key) == 0) {
    t->n_free++;
    t->b_freed += b->step >> 32;
    _hpcmem_stats_maybe_publish(t);
  } else {
    free_slow(p);
  }
  time_stop(t, t0, weight);
}

/* malloc's hit on the bin of key k (bins are 32 bytes, 8 * k apart) */
static ALWAYS_INLINE void *malloc_hit(hpcmem_tcache_t *t, size_t k, size_t n) {
  hpcmem_bin_t *b = (hpcmem_bin_t *)((uint64_t *)t->bin + k);
  uint64_t left = t->acct_alloc - b->step;
  if (HPCMEM_UNLIKELY((int64_t)left < 0)) return malloc_settle(n);
  void *p = bin_take(t, b, HPCMEM_KEY_CLASS(k));
  if (HPCMEM_UNLIKELY(p == NULL)) return malloc_refill(n);
  t->acct_alloc = left;
  return p;
}

/* Two copies of the hit, one for each way to the key: shared, the compiler
 * moved the key between registers where the two met. */
/* The hits start on a cache line (64-byte aligned), side by side at the
 * front of the code every process runs (src/hot-text.sh): ~0.5 ns a round
 * in the size sweep's small rows, where they sat at offsets that varied
 * with every build. */
#define FAST_PATH __attribute__((aligned(64)))

EXPORT FAST_PATH void *malloc(size_t n) {
  hpcmem_tcache_t *t = _hpcmem_tc;
  if (HPCMEM_LIKELY(n <= HPCMEM_TINY_MAX)) return malloc_hit(t, _hpcmem_key_of_size[n], n);
  if (n < fast_lim) return malloc_hit(t, HPCMEM_CLASS_KEY(_hpcmem_size_class(n)), n);
  return malloc_big(n);
}

/* Hit: p lies in the slice of the thread's own group heap, in a chunk of a
 * span of small objects, on an object boundary, and its bin takes it (see
 * bin_put).  The placeholder cache's slice is the address space's last
 * 16 GiB (tcache.c), so NULL and every pointer of a thread without a cache
 * fall through. */
EXPORT FAST_PATH void free(void *p) {
  hpcmem_tcache_t *t = _hpcmem_tc;
  hpcmem_bin_t *b = bin_of(t, p);
  if (HPCMEM_LIKELY(b != NULL)) {
    uint64_t left = t->acct_free - b->step;
    if (HPCMEM_UNLIKELY((int64_t)left < 0)) { free_settle(p); return; }
    void *q = t->pend;
    /* a list to push onto: p is put aside, the one put aside before goes
     * onto its bin (see pend in heap/tcache.h); the checks are bin_put's */
    if (HPCMEM_LIKELY(b->count != 0)) {
      if (HPCMEM_UNLIKELY(((uint64_t *)p)[1] == _hpcmem_free_key || p == q)) { free_slow(p); return; }
      hpcmem_bin_t *qb = t->pend_bin;
      t->pend = p;
      t->pend_bin = b;
      t->acct_free = left;
      if (HPCMEM_UNLIKELY(q == NULL)) return;
      if (HPCMEM_LIKELY(bin_push(qb, q, _hpcmem_free_key) == 0)) return;
      free_pending(t, q, qb);
      return;
    }
    /* an empty list: p into the slot at once (a malloc that follows finds
     * it there; put aside, a malloc+free loop would refill every time) */
    if (HPCMEM_LIKELY(p != q && bin_put(b, p, _hpcmem_free_key) == 0)) {
      t->acct_free = left;
      return;
    }
  }
  free_slow(p);
}

EXPORT void cfree(void *p) { free(p); }

EXPORT void *calloc(size_t count, size_t size) {
  size_t n;
  if (__builtin_mul_overflow(count, size, &n)) { errno = ENOMEM; return NULL; }
  /* large blocks come back zeroed from the large tier, which clears only
   * what may have been written: fresh or decayed pages are zero already */
  void *p;
  if (n >= _hpcmem_large_threshold) return malloc_slow(n, 0, HPCMEM_EV_CALLOC);
  p = HPCMEM_UNLIKELY(_hpcmem_trace_enabled) ? malloc_slow(n, 0, HPCMEM_EV_CALLOC) : malloc(n);
  if (p) memset(p, 0, n);
  return p;
}

static size_t usable_size(const void *p) {
  hpcmem_span_t *s = _hpcmem_span_of(p);
  if (s) return _hpcmem_span_is_object(s, p) || (s->kind == HPCMEM_SPAN_RUN && s->start == (char *)p)
                    ? usable_of_span(s) : 0;
  if (_hpcmem_large_owns(&_hpcmem_large, p)) return _hpcmem_large_usable_size(&_hpcmem_large, p);
  hpcmem_segment_t *seg = _hpcmem_seg_holding(p);
  return seg ? _hpcmem_seg_usable(seg, p) : 0;
}

EXPORT size_t malloc_usable_size(void *p) {
  if (!p) return 0;
  size_t n = usable_size(p);
  if (!n && (on_system || from_system(p))) n = (((size_t *)p)[-1] & ~(size_t)7) - ((((size_t *)p)[-1] & 2) ? 16 : 8);
  return n;
}

static void *realloc_body(void *p, size_t n);
static void *realloc_keep(void *p, size_t n, void **old);

/* Traced, a realloc that moves or frees the block keeps the old one until
 * its event is recorded, as free records before releasing: once released,
 * another thread may get the address back, and its allocation must come
 * after this realloc in the trace; and a fatal signal during the event
 * (the stack capture is most of its time) would end the process with the
 * block live in the trace although the program had freed it.  Held instead,
 * the block is what the trace says until the event is in. */
EXPORT void *realloc(void *p, size_t n) {
  if (HPCMEM_LIKELY(!_hpcmem_trace_enabled)) return realloc_body(p, n);
  hpcmem_tcache_t *t = _hpcmem_thread_cache();
  if (!t || t->in_call) return realloc_body(p, n);
  void *q, *old = NULL;
  TRACED_CALL(t, q = realloc_keep(p, n, &old));
  if (q || n == 0) _hpcmem_trace_event(HPCMEM_EV_REALLOC, q, q ? n : 0, p, 0);
  if (old) TRACED_CALL(t, free(old));
  return q;
}

/* The old block of a realloc that moved or freed it: released now, or
 * (keep) left to the caller. */
static ALWAYS_INLINE void release_old(void *p, void **keep) {
  if (keep) *keep = p;
  else free(p);
}

/* A block of the interleaved or shared segment stays in its segment while
 * the segment can hold it. */
static ALWAYS_INLINE void *realloc_in_segment(hpcmem_tcache_t *t, hpcmem_segment_t *seg, void *p, size_t old, size_t n,
                                              void **keep) {
  int64_t d = 0;
  if (_hpcmem_seg_resize(seg, p, n, &d) == 0) {
    if (d > 0) t->b_alloc += (uint64_t)d;
    else if (d < 0) { t->b_freed += (uint64_t)-d; _hpcmem_stats_plain_clear(); }   /* as _hpcmem_seg_free_block */
    if (n > t->st.largest_alloc) t->st.largest_alloc = n;
    publish_due(t);
    return p;
  }
  int id = _hpcmem_seg_id(seg), saved = errno;
  void *q = _hpcmem_seg_alloc_for(t, id, n, 0, 0);
  /* plain realloc of a default-segment block moves it to private memory, as
   * malloc falls back to it; hpcmem_realloc_seg keeps it there or fails */
  if (!q && id == _hpcmem_default_seg && !t->keep_seg) { errno = saved; q = _hpcmem_alloc_private(t, n, 0, 0); }
  if (!q) return NULL;                                /* p is left untouched */
  memcpy(q, p, old < n ? old : n);
  release_old(p, keep);
  return q;
}

/* realloc_body and, keeping the old block, realloc_keep */
static ALWAYS_INLINE void *realloc_impl(void *p, size_t n, void **keep) {
  if (!p) return malloc(n);
  if (n == 0) { release_old(p, keep); return NULL; }  /* glibc: frees and returns NULL */
  hpcmem_tcache_t *t = _hpcmem_thread_cache();
  if (!t) return on_system ? libc_alloc.realloc(p, n) : (errno = ENOMEM, NULL);
  t->st.realloc_count++;
  size_t old = usable_size(p);
  if (!old) {
    if (from_system(p)) {                             /* glibc's block: move it into ours */
      size_t have = malloc_usable_size(p);
      void *q = malloc(n);
      if (q) { memcpy(q, p, have < n ? have : n); __libc_free(p); }
      return q;
    }
    free_any(t, p, "realloc");                        /* reports what is wrong with p */
    errno = EINVAL;
    return NULL;
  }
  hpcmem_segment_t *seg = _hpcmem_seg_holding(p);
  if (seg) return realloc_in_segment(t, seg, p, old, n, keep);
  /* Stay in place when the block fits and is not much too big.  Only the
   * large tier resizes a block; which tier holds it is a question of its
   * address, not its size: the largest small class is as large as the
   * default threshold (128 KiB), and a lower HPCMEM_LARGE_THRESHOLD leaves
   * classes above it.  Asked by size, a realloc growing a 128 KiB-class
   * object within its class asked the large tier, which said no, and
   * copied the object every time (16-byte steps from 112 to 128 KiB: 1,024
   * copies of about 120 KiB). */
  int large = _hpcmem_large_owns(&_hpcmem_large, p);
  int64_t d;
  if (n <= old && (old <= 1024 || n >= old / 2 || (large && n >= _hpcmem_large_threshold))) {
    if (!large) return p;                             /* its usable size, and so the statistics, stay */
    if (_hpcmem_large_resize(&_hpcmem_large, p, n, &d) == 0) {
      t->b_freed += (uint64_t)-d;
      publish_due(t);
      return p;
    }
  }
  if (n > old && large && _hpcmem_large_resize(&_hpcmem_large, p, n, &d) == 0) {
    t->b_alloc += (uint64_t)d;
    if (n > t->st.largest_alloc) t->st.largest_alloc = n;
    publish_due(t);
    return p;
  }
  void *q = malloc(n);
  if (!q) return NULL;                                /* p is left untouched, as the standard says */
  memcpy(q, p, old < n ? old : n);
  release_old(p, keep);
  return q;
}

static void *realloc_body(void *p, size_t n) { return realloc_impl(p, n, NULL); }

HPCMEM_NOINLINE static void *realloc_keep(void *p, size_t n, void **old) { return realloc_impl(p, n, old); }

EXPORT void *reallocarray(void *p, size_t count, size_t size) {
  size_t n;
  if (__builtin_mul_overflow(count, size, &n)) { errno = ENOMEM; return NULL; }
  return realloc(p, n);
}

static void *aligned(size_t align, size_t n) {
  if (align <= 16 && HPCMEM_LIKELY(!_hpcmem_trace_enabled)) return malloc(n);
  return malloc_slow(n, align <= 16 ? 0 : align, HPCMEM_EV_MEMALIGN);
}

static int pow2(size_t a) { return a && !(a & (a - 1)); }

EXPORT int posix_memalign(void **out, size_t align, size_t n) {
  if (!pow2(align) || align % sizeof(void *)) return EINVAL;
  int saved = errno;
  void *p = aligned(align, n);
  if (!p) return errno = saved, ENOMEM;
  *out = p;
  return 0;
}

/* memalign's alignment as glibc takes it (and aligned_alloc's, which is
 * memalign in Debian 12's glibc 2.36) when it is not a power of two: up to
 * malloc's 16 bytes any value, 0 included; above, the next power of two;
 * EINVAL past SIZE_MAX / 2 + 1, where no power of two is left.  A program
 * that asks for 24 or 100 bytes works with glibc, so it must here.  Out of
 * line: programs that run it are few (src/hot-text.ld). */
HPCMEM_NOINLINE static void *memalign_odd(size_t align, size_t n) {
  if (align <= 16) return aligned(16, n);
  if (align > SIZE_MAX / 2 + 1) { errno = EINVAL; return NULL; }
  return aligned((size_t)1 << (64 - __builtin_clzll(align)), n);
}

EXPORT void *memalign(size_t align, size_t n) {
  if (HPCMEM_UNLIKELY(!pow2(align))) return memalign_odd(align, n);
  return aligned(align, n);
}

/* the same function, as in glibc 2.36 */
EXPORT void *aligned_alloc(size_t align, size_t n) __attribute__((alias("memalign")));

EXPORT void *valloc(size_t n) { return aligned(_hpcmem_prim_page_size(), n); }

EXPORT void *pvalloc(size_t n) {
  size_t page = _hpcmem_prim_page_size();
  if (n > SIZE_MAX - page) { errno = ENOMEM; return NULL; }
  return aligned(page, n ? (n + page - 1) & ~(page - 1) : page);
}

/* ------------------------------------------------------------------ */
/* checks                                                               */

EXPORT int hpcmem_check(void) {
  if (!_hpcmem_ready) _hpcmem_init();
  int rc = 0;
  for (unsigned i = 0; i < _hpcmem_heaps.count; i++)
    if (_hpcmem_heap_check(&_hpcmem_heaps.heap[i]) < 0) rc = -EFAULT;
  if (_hpcmem_large_check(&_hpcmem_large) < 0) rc = -EFAULT;
  if (_hpcmem_seg_check() < 0) rc = -EFAULT;
  return rc;
}
