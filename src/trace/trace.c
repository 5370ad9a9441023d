/* The event recorder: per-thread buffers, the event hook, flushing.
 *
 * Each thread appends encoded records (include/hpcmem_trace_format.h) to
 * its own buffer without locks; `committed` is published after each whole
 * record.  A full buffer is compressed and written as one block by its
 * owner.  Another thread -- or a signal handler on this one -- may write
 * the committed part of any buffer (flush_all): it takes the buffer's lock,
 * writes [flushed, committed) and advances `flushed`, decoding that range
 * to learn the encoder state at its end, which becomes the next block's
 * base.  So the owner's fast path has no atomic read-modify-write at all.
 *
 * Re-entrancy: stack capture (libunwind, glibc's backtrace) may call
 * malloc, which comes back here.  A thread-local flag stops the recursion;
 * an event that arrives while this thread is capturing is recorded as
 * libhpcmem-internal (S) without a stack, one that arrives while it is
 * writing is counted as dropped. */
#include "config.h"
#include "trace/trace.h"
#include "prim/prim.h"
#include "util/job.h"
#include "util/log.h"
#include "util/options.h"
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

/* a buffer older than this is written even if not full, so that a rank
 * killed with SIGKILL loses at most this much of a slow thread's events */
#define HMT_FLUSH_AGE_NS (2ull * 1000 * 1000 * 1000)
/* compressed blocks keep time in ticks of 2^10 ns (about 1 us): the
 * nanoseconds below are mostly the clock's noise, and cost two thirds of
 * the compressed bytes of an event (docs/trace-format.md) */
#define HMT_TICK_SHIFT 10

typedef struct hmt_tbuf {
  struct hmt_tbuf *next;      /* all buffers ever made (never unlinked) */
  volatile int in_use;        /* owned by a live thread */
  int tid;
  hmt_tlock_t lock;           /* held while writing a block of this buffer */
  volatile size_t committed;  /* end of the last whole record */
  size_t flushed;             /* start of what is not in the file yet */
  hmt_state_t enc;            /* owner's encoder state at `committed` */
  hmt_state_t base;           /* encoder state at `flushed` */
  uint64_t first_time;        /* time of the first record after `flushed` */
  uint64_t records, records_flushed;
  volatile uint64_t events;   /* recorded into this buffer (summed by fill_stats) */
  int capturing;
  size_t cap;
  uint8_t *buf;
  uint64_t *slots;            /* capture scratch (4 x frames): where each frame was found */
  hmt_scache_t *cache;        /* recent stacks of the owning thread */
  uint64_t frames[];          /* capture scratch */
} hmt_tbuf_t;

int _hpcmem_trace_enabled;

static struct {
  int ready;
  int final;                  /* after EXIT / a signal: write through */
  int codec, depth, method;
  int stack_cache;            /* HPCMEM_TRACE_STACK_CACHE */
  size_t bufsize;
  hmt_tbuf_t *volatile all;
  uint64_t start_ns;
} G;

static struct {
#define HMT_TRACE_STAT_(name, help) volatile uint64_t name;
  HMT_FLUSH_FIELDS(HMT_TRACE_STAT_)
#undef HMT_TRACE_STAT_
} S;

static __thread hmt_tbuf_t *t_buf;
static __thread int t_inside;  /* inside the recorder */
static __thread int t_lib;     /* inside libhpcmem's own work */
static __thread int t_tid;

#define STAT_ADD(f, n) __atomic_add_fetch(&S.f, (n), __ATOMIC_RELAXED)

/* ---- the clock ---------------------------------------------------------
 * Time stamps are CLOCK_MONOTONIC nanoseconds.  clock_gettime costs 67 ns
 * on the development VM, almost half of what tracing adds to a malloc/free
 * pair without stacks; where the kernel itself keeps time with the TSC
 * (clocksource "tsc": synchronised across cores and at a constant rate) we
 * read the TSC (about 20 ns) and convert with an anchor (tsc, ns, ns per
 * tick << 32) shared by all threads, so their stamps stay comparable.
 * The rate is calibrated for 1 ms at start-up and refined against
 * CLOCK_MONOTONIC at most twice a second from the flush path; a new anchor
 * continues the old line where they meet, so time never jumps, and it goes
 * into the inactive one of two slots before the switch. */
typedef struct { uint64_t c, t, mult; } hmt_anchor_t;
static struct {
  int tsc;
  volatile int idx;
  hmt_anchor_t a[2];
  uint64_t c0, t0, last_fix;
  hmt_tlock_t lock;
} CLK;

#if defined(__x86_64__)
static inline uint64_t tsc_ns(const hmt_anchor_t *a, uint64_t c) {
  if (c < a->c) c = a->c;
  return a->t + (uint64_t)(((unsigned __int128)(c - a->c) * a->mult) >> 32);
}
#endif

static inline uint64_t clk_now(void) {
#if defined(__x86_64__)
  if (CLK.tsc) {
    int i = __atomic_load_n(&CLK.idx, __ATOMIC_ACQUIRE);
    return tsc_ns(&CLK.a[i], __builtin_ia32_rdtsc());
  }
#endif
  return _hpcmem_prim_now_ns();
}

static void clk_init(void) {
  CLK.tsc = 0;
#if defined(__x86_64__)
  char src[32] = "";
  int fd = open("/sys/devices/system/clocksource/clocksource0/current_clocksource", O_RDONLY | O_CLOEXEC);
  if (fd >= 0) {
    ssize_t n = read(fd, src, sizeof src - 1);
    src[n > 0 ? n : 0] = 0;
    close(fd);
  }
  if (strncmp(src, "tsc", 3) != 0 || (src[3] != '\n' && src[3] != 0)) return;
  uint64_t t0 = _hpcmem_prim_now_ns(), c0 = __builtin_ia32_rdtsc(), t1, c1;
  do { t1 = _hpcmem_prim_now_ns(); c1 = __builtin_ia32_rdtsc(); } while (t1 - t0 < 1000000);
  if (c1 <= c0) return;
  CLK.c0 = c0; CLK.t0 = t0;
  CLK.a[0] = (hmt_anchor_t){c0, t0, (uint64_t)(((unsigned __int128)(t1 - t0) << 32) / (c1 - c0))};
  CLK.idx = 0;
  CLK.last_fix = t1;
  CLK.tsc = 1;
#endif
}

/* Refine the rate against CLOCK_MONOTONIC (from the flush path). */
static void clk_fix(void) {
#if defined(__x86_64__)
  if (!CLK.tsc) return;
  uint64_t tn = _hpcmem_prim_now_ns();
  if (tn - CLK.last_fix < 500000000u || !_hpcmem_tlock_try(&CLK.lock, _hpcmem_trace_tid())) return;
  uint64_t cn = __builtin_ia32_rdtsc();
  int i = CLK.idx;
  uint64_t pn = tsc_ns(&CLK.a[i], cn);
  hmt_anchor_t n = {cn, pn, (uint64_t)(((unsigned __int128)(tn - CLK.t0) << 32) / (cn - CLK.c0))};
  /* far off (the machine slept, the VM moved): start from the truth */
  if (pn > tn + 1000000 || tn > pn + 1000000) n.t = tn > CLK.a[i].t ? tn : CLK.a[i].t;
  CLK.a[!i] = n;
  __atomic_store_n(&CLK.idx, !i, __ATOMIC_RELEASE);
  CLK.last_fix = tn;
  _hpcmem_tlock_release(&CLK.lock);
#endif
}

/* ---- small helpers shared by the recorder's files ------------------ */

int _hpcmem_trace_tid(void) {
  if (!t_tid) t_tid = (int)syscall(SYS_gettid);
  return t_tid;
}

int _hpcmem_tlock_try(hmt_tlock_t *l, int tid) {
  int free_ = 0;
  return __atomic_compare_exchange_n(&l->owner, &free_, tid, 0, __ATOMIC_ACQUIRE, __ATOMIC_RELAXED);
}

void _hpcmem_tlock(hmt_tlock_t *l, int tid) {
  for (int spins = 0; !_hpcmem_tlock_try(l, tid);) {
    if (++spins > 64) { sched_yield(); spins = 0; }
    else __builtin_ia32_pause();
  }
}

void _hpcmem_tlock_release(hmt_tlock_t *l) { __atomic_store_n(&l->owner, 0, __ATOMIC_RELEASE); }

void _hpcmem_trace_lib_enter(void) { t_lib++; }
void _hpcmem_trace_lib_leave(void) { if (t_lib > 0) t_lib--; }

/* ---- start-up -------------------------------------------------------- */

static void after_fork_child(void);

void _hpcmem_trace_init(void) {
  if (G.ready) return;
  _hpcmem_options_init();
  if (!_hpcmem_opt(TRACE)) return;
  if (!_hpcmem_job.jobid[0]) _hpcmem_job_init();
  G.codec = (int)_hpcmem_opt(TRACE_COMPRESS);
  G.codec = G.codec == HPCMEM_COMPRESS_ZSTD ? HMT_CODEC_ZSTD
          : G.codec == HPCMEM_COMPRESS_ZLIB ? HMT_CODEC_ZLIB : HMT_CODEC_NONE;
  if (!_hpcmem_codec_available(G.codec)) {
    int alt = _hpcmem_codec_available(HMT_CODEC_ZSTD) ? HMT_CODEC_ZSTD
            : _hpcmem_codec_available(HMT_CODEC_ZLIB) ? HMT_CODEC_ZLIB : HMT_CODEC_NONE;
    _hpcmem_warn("trace: HPCMEM_TRACE_COMPRESS: this build has no %s; using %s",
                 G.codec == HMT_CODEC_ZSTD ? "zstd" : "zlib",
                 alt == HMT_CODEC_ZSTD ? "zstd" : alt == HMT_CODEC_ZLIB ? "zlib" : "none");
    G.codec = alt;
  }
  G.depth = (int)_hpcmem_opt(TRACE_DEPTH);
  G.bufsize = (size_t)_hpcmem_opt(TRACE_BUFFER);
  /* the option's order is the HMT_UNWIND_* order */
  G.method = (int)_hpcmem_opt(TRACE_UNWIND);
  G.stack_cache = (int)_hpcmem_opt(TRACE_STACK_CACHE);
  _hpcmem_stack_init(G.method);
  clk_init();

  hmt_header_t h;
  memset(&h, 0, sizeof h);
  h.version_major = HMT_VERSION_MAJOR; h.version_minor = HMT_VERSION_MINOR;
  h.rank = _hpcmem_job.rank < 0 ? 0 : _hpcmem_job.rank;
  h.size = _hpcmem_job.size < 1 ? 1 : _hpcmem_job.size;
  if (h.rank >= h.size) h.size = h.rank + 1;
  h.pid = (uint32_t)getpid();
  struct timespec rt;
  clock_gettime(CLOCK_REALTIME, &rt);
  G.start_ns = h.start_ns = clk_now();
  h.start_realtime_ns = (uint64_t)rt.tv_sec * 1000000000u + (uint64_t)rt.tv_nsec;
  h.pointer_size = sizeof(void *);
  h.page_size = (uint32_t)_hpcmem_prim_page_size();
  h.max_depth = (uint32_t)G.depth;
  h.buffer_size = (uint32_t)G.bufsize;
  h.codec = (uint32_t)G.codec;
  memcpy(h.hostname, _hpcmem_job.hostname, sizeof h.hostname - 1);
  memcpy(h.jobid, _hpcmem_job.jobid, sizeof h.jobid - 1);
  char dir[PATH_MAX / 2];
  const char *d = _hpcmem_opt_str(TRACE_DIR);
  if (d[0]) snprintf(dir, sizeof dir, "%s", d);
  else snprintf(dir, sizeof dir, "hpcmem-trace-%s", _hpcmem_job.jobid);
  _hpcmem_tfile_configure(&h, dir);

  static int atfork_done;
  if (!atfork_done) { atfork_done = 1; pthread_atfork(NULL, NULL, after_fork_child); }
  _hpcmem_trace_signals_install();
  G.final = 0;
  G.ready = 1;
  __atomic_store_n(&_hpcmem_trace_enabled, 1, __ATOMIC_RELEASE);
}

/* ---- thread buffers -------------------------------------------------- */

static hmt_tbuf_t *tbuf_acquire(void) {
  for (hmt_tbuf_t *b = G.all; b; b = b->next) {
    int z = 0;
    if (!b->in_use && __atomic_compare_exchange_n(&b->in_use, &z, 1, 0, __ATOMIC_ACQUIRE, __ATOMIC_RELAXED)) {
      b->tid = _hpcmem_trace_tid();
      /* the cached stacks were another thread's, on its stack */
      _hpcmem_scache_clear(b->cache, (uint32_t)G.depth);
      return t_buf = b;
    }
  }
  size_t nframes = (size_t)G.depth + HMT_CAPTURE_EXTRA;
  size_t head = sizeof(hmt_tbuf_t) + 5 * nframes * sizeof(uint64_t);
  head = (head + 63) & ~(size_t)63;
  size_t csize = (_hpcmem_scache_size((uint32_t)G.depth) + 63) & ~(size_t)63;
  hmt_tbuf_t *b = _hpcmem_trace_alloc(head + csize + G.bufsize);
  if (!b) return NULL;
  memset(b, 0, sizeof *b);
  b->slots = b->frames + nframes;
  b->cache = (hmt_scache_t *)((uint8_t *)b + head);
  _hpcmem_scache_clear(b->cache, (uint32_t)G.depth);
  b->buf = (uint8_t *)b + head + csize;
  b->cap = G.bufsize;
  b->in_use = 1;
  b->tid = _hpcmem_trace_tid();
  hmt_tbuf_t *old = G.all;
  do b->next = old;
  while (!__atomic_compare_exchange_n(&G.all, &old, b, 0, __ATOMIC_RELEASE, __ATOMIC_RELAXED));
  STAT_ADD(threads, 1);
  return t_buf = b;
}

/* Write [b->flushed, end) as one block whose first record is encoded
 * against `base`.  Holding b->lock. */
static int write_chunk(hmt_tbuf_t *b, size_t end, uint64_t count, int may_wait) {
  size_t len = end - b->flushed;
  if (len == 0) return 0;
  const uint8_t *raw = b->buf + b->flushed;
  hmt_block_t blk;
  memset(&blk, 0, sizeof blk);
  blk.type = HMT_BLOCK_EVENTS;
  blk.raw_len = (uint32_t)len;
  blk.tid = (uint32_t)b->tid;
  blk.count = (uint32_t)count;
  blk.base_time = b->base.time; blk.base_ptr = b->base.ptr; blk.base_stack = b->base.stack;
  const void *out = raw;
  size_t out_len = len, raw_len = len;
  int columns = 0;
  void *comp = _hpcmem_compress_events_begin(G.codec, raw, len, &b->base, HMT_TICK_SHIFT, may_wait, &out, &out_len,
                                             &raw_len, &columns);
  blk.codec = comp ? (uint8_t)G.codec : HMT_CODEC_NONE;
  if (comp && columns) { blk.flags = HMT_BF_COLUMNS; blk.raw_len = (uint32_t)raw_len; }
  blk.stored_len = (uint32_t)out_len;
  int err = _hpcmem_tfile_write_block(&blk, out, may_wait);
  _hpcmem_compress_done(comp);
  if (err) { STAT_ADD(write_errors, 1); return err; }
  STAT_ADD(blocks, 1); STAT_ADD(raw_bytes, len); STAT_ADD(stored_bytes, out_len);
  return 0;
}

/* The owner writes its whole buffer and starts over. */
static void owner_flush(hmt_tbuf_t *b) {
  _hpcmem_tlock(&b->lock, b->tid);
  write_chunk(b, b->committed, b->records - b->records_flushed, 1);
  /* written or not, the buffer starts over: memory stays bounded */
  b->flushed = 0; b->records = b->records_flushed = 0;
  b->base = b->enc;
  __atomic_store_n(&b->committed, 0, __ATOMIC_RELEASE);
  _hpcmem_tlock_release(&b->lock);
  _hpcmem_tfile_check_modules(1);
  clk_fix();
}

/* Anyone writes the committed part of a buffer (flush_all).  Returns 0,
 * or -EBUSY when the lock is held by the interrupted owner itself. */
static int partial_flush(hmt_tbuf_t *b, int may_wait) {
  int tid = _hpcmem_trace_tid();
  if (!_hpcmem_tlock_try(&b->lock, tid)) {
    if (b->lock.owner == tid) return -EBUSY;  /* a signal interrupted our own flush */
    if (!may_wait) {
      int got = 0;
      for (int i = 0; i < 1000000 && !got; i++) got = _hpcmem_tlock_try(&b->lock, tid);
      if (!got) return -EBUSY;
    } else {
      _hpcmem_tlock(&b->lock, tid);
    }
  }
  size_t end = __atomic_load_n(&b->committed, __ATOMIC_ACQUIRE);
  if (end > b->flushed) {
    /* decode what we write to learn the state at its end */
    hmt_state_t st = b->base;
    hmt_record_t r;
    const uint8_t *p = b->buf + b->flushed, *e = b->buf + end;
    uint64_t n = 0;
    while (p < e && hmt_decode_record(&p, e, &st, &r) == HMT_OK) n++;
    if (p == e) {
      write_chunk(b, end, n, may_wait);
      b->flushed = end;
      b->base = st;
      b->records_flushed += n;
      b->first_time = 0;
    }
  }
  _hpcmem_tlock_release(&b->lock);
  return 0;
}

/* ---- the event hook -------------------------------------------------- */

static void append(hmt_tbuf_t *b, unsigned kind, int sys, uint64_t t, uint64_t ptr, uint64_t old,
                   uint64_t size, uint64_t align, uint64_t stack, const hmt_stack_def_t *def) {
  size_t need = HMT_MAX_RECORD(0) + (def ? HMT_MAX_RECORD(def->n) : 0);
  size_t pos = b->committed;
  if (pos + need > b->cap) { owner_flush(b); pos = 0; }
  uint8_t *p = b->buf + pos;
  if (def) { p = hmt_encode_stack(p, &b->enc, def->first, def->parent, b->frames, def->n); b->records++; }
  if (t < b->enc.time) t = b->enc.time;  /* an S event recorded inside a capture came first */
  p = hmt_encode_event(p, &b->enc, kind, sys, t, ptr, old, size, align, stack);
  b->records++;
  if (pos == b->flushed || b->first_time == 0) b->first_time = t;
  __atomic_store_n(&b->committed, (size_t)(p - b->buf), __ATOMIC_RELEASE);
  /* the owner's own counter: a shared one would bounce between cores */
  __atomic_store_n(&b->events, b->events + 1, __ATOMIC_RELAXED);
  if (G.final || t - b->first_time > HMT_FLUSH_AGE_NS) owner_flush(b);
}

__attribute__((noinline, optimize("no-omit-frame-pointer"))) void _hpcmem_trace_event(int kind, const void *ptr, size_t size,
                                                   const void *old_ptr, size_t align) {
  if (!__atomic_load_n(&_hpcmem_trace_enabled, __ATOMIC_ACQUIRE)) return;
  const void *from = __builtin_return_address(0);
  int sys = (kind & HPCMEM_EV_SYS) || t_lib > 0;
  unsigned k = (unsigned)kind & HMT_TAG_TYPE;
  if (k < HPCMEM_EV_MALLOC || k > HPCMEM_EV_MEMALIGN || ((unsigned)kind & ~(HMT_TAG_TYPE | HPCMEM_EV_SYS))) return;
  hmt_tbuf_t *b = t_buf;
  if (t_inside) {
    if (b && b->capturing)
      append(b, k, 1, clk_now(), (uintptr_t)ptr, (uintptr_t)old_ptr, size, align, 0, NULL);
    else
      STAT_ADD(dropped, 1);
    return;
  }
  t_inside = 1;
  if (!b && !(b = tbuf_acquire())) { STAT_ADD(dropped, 1); t_inside = 0; return; }
  uint64_t stack = 0;
  hmt_stack_def_t def = {0, 0, 0};
  /* realloc to size 0 frees: no stack to keep */
  if (hmt_is_alloc(k) && G.depth > 0 && !(k == HPCMEM_EV_REALLOC && !ptr)) {
    b->capturing = 1;
    stack = _hpcmem_stack_get(G.stack_cache ? b->cache : NULL, b->frames, b->slots, (uint32_t)G.depth, from, __builtin_frame_address(0), &def);
    b->capturing = 0;
    if (def.n) {
      STAT_ADD(stacks, 1);
      _hpcmem_tfile_check_modules(1);  /* a dlopen'ed object shows up in new stacks first */
    }
  }
  append(b, k, sys, clk_now(), (uintptr_t)ptr, (uintptr_t)old_ptr, size, align, stack, def.n ? &def : NULL);
  t_inside = 0;
}

/* ---- flushing -------------------------------------------------------- */

static void fill_stats(hpcmem_trace_stats_t *o) {
#define HMT_TRACE_STAT_(name, help) o->name = __atomic_load_n(&S.name, __ATOMIC_RELAXED);
  HMT_FLUSH_FIELDS(HMT_TRACE_STAT_)
#undef HMT_TRACE_STAT_
  for (hmt_tbuf_t *b = __atomic_load_n(&G.all, __ATOMIC_ACQUIRE); b; b = b->next)
    o->events += __atomic_load_n(&b->events, __ATOMIC_RELAXED);
  o->stacks = _hpcmem_stack_count();
  o->memory_bytes = _hpcmem_trace_alloc_bytes();
}

void _hpcmem_trace_get_stats(hpcmem_trace_stats_t *out) { fill_stats(out); }

const char *_hpcmem_trace_path(void) { return _hpcmem_tfile_path(); }

void _hpcmem_trace_flush_all(int reason) {
  if (!G.ready) return;
  int in_signal = reason >= HMT_FLUSH_SIGNAL;
  int may_wait = !in_signal;
  int saved = t_inside;
  t_inside = 1;  /* no recording while we write */
  if (may_wait) _hpcmem_tfile_check_modules(1);
  for (hmt_tbuf_t *b = G.all; b; b = b->next) partial_flush(b, may_wait);
  hpcmem_trace_stats_t st;
  fill_stats(&st);
  uint8_t payload[16 + 10 * 16], *p = payload;
  p = hmt_put_varint(p, (uint64_t)reason);
  p = hmt_put_varint(p, clk_now());
  uint64_t nfields = 0;
#define HMT_TRACE_COUNT_(name, help) nfields++;
  HMT_FLUSH_FIELDS(HMT_TRACE_COUNT_)
#undef HMT_TRACE_COUNT_
  p = hmt_put_varint(p, nfields);
#define HMT_TRACE_PUT_(name, help) p = hmt_put_varint(p, st.name);
  HMT_FLUSH_FIELDS(HMT_TRACE_PUT_)
#undef HMT_TRACE_PUT_
  hmt_block_t blk;
  memset(&blk, 0, sizeof blk);
  blk.type = HMT_BLOCK_FLUSH; blk.codec = HMT_CODEC_NONE;
  blk.stored_len = blk.raw_len = (uint32_t)(p - payload);
  _hpcmem_tfile_write_block(&blk, payload, may_wait);
  if (reason == HMT_FLUSH_EXIT || in_signal) G.final = 1;
  if (reason == HMT_FLUSH_EXIT && _hpcmem_opt(VERBOSE)) {
    uint64_t hits = 0, misses = 0;
    for (hmt_tbuf_t *b = G.all; b; b = b->next) _hpcmem_scache_counts(b->cache, &hits, &misses);
    _hpcmem_info("trace: %llu events, %llu stacks; stack cache %s: %llu hits, %llu captures", (unsigned long long)st.events,
                 (unsigned long long)st.stacks, G.stack_cache ? "on" : "off", (unsigned long long)hits,
                 (unsigned long long)misses);
  }
  t_inside = saved;
}

void _hpcmem_trace_thread_exit(void) {
  hmt_tbuf_t *b = t_buf;
  if (!b) return;
  int saved = t_inside;
  t_inside = 1;
  partial_flush(b, 1);
  t_buf = NULL;
  __atomic_store_n(&b->in_use, 0, __ATOMIC_RELEASE);
  t_inside = saved;
}

void _hpcmem_trace_set_rank(int rank, int size, int64_t clock_offset_ns) {
  if (!G.ready) return;
  hmt_file_identity_t id = {rank, size, clock_offset_ns, 1};
  _hpcmem_tfile_set_identity(&id);
  _hpcmem_trace_signals_install();
}

/* fork: the child keeps recording into a file of its own; what the
 * parent had buffered is the parent's to write */
static void after_fork_child(void) {
  if (!G.ready) return;
  t_tid = 0;
  for (hmt_tbuf_t *b = G.all; b; b = b->next) {
    b->lock.owner = 0;
    b->committed = b->flushed = 0;
    b->records = b->records_flushed = 0;
    b->base = b->enc;
    b->first_time = 0;
    b->events = 0;
    if (b != t_buf) b->in_use = 0;
    else b->tid = _hpcmem_trace_tid();
  }
  memset(&S, 0, sizeof S);
  /* stack definitions went to the parent's file: define them again here */
  _hpcmem_stack_reset();
  _hpcmem_compress_after_fork_child();
  _hpcmem_tfile_after_fork_child();
}

void _hpcmem_trace_shutdown(void) {
  if (!G.ready) return;
  _hpcmem_trace_flush_all(HMT_FLUSH_EXPLICIT);
  __atomic_store_n(&_hpcmem_trace_enabled, 0, __ATOMIC_RELEASE);
  _hpcmem_trace_signals_uninstall();
  hmt_tbuf_t *b = G.all;
  while (b) { hmt_tbuf_t *n = b->next; _hpcmem_trace_free(b); b = n; }
  G.all = NULL;
  t_buf = NULL;
  _hpcmem_tfile_close();
  _hpcmem_stack_reset();
  _hpcmem_compress_reset();
  memset(&S, 0, sizeof S);
  G.ready = 0;
  G.final = 0;
}

/* A safety net for programs whose exit path does not reach the core's
 * hook (the core calls _hpcmem_trace_flush_all(HMT_FLUSH_EXIT) itself). */
__attribute__((destructor)) static void trace_fini(void) {
  if (G.ready && !G.final && _hpcmem_trace_enabled) _hpcmem_trace_flush_all(HMT_FLUSH_EXIT);
}
