/* The event recorder: per-thread buffers, the event hook, a writer thread.
 *
 * The allocating thread does as little as it can: it reads the time stamp
 * counter, finds its stack id (stack.c's cache) and stores a few fixed-size
 * words in its own buffer ("raw entries", below; nothing here is varint or
 * delta encoded), without locks, and publishes `pos` after each whole
 * entry.  Each thread's buffer is a ring of segments: when one is full the
 * owner hands it to the writer thread (a length in the segment's `ready`
 * slot, no lock) and goes on in the next.  The writer turns raw entries
 * into the records of include/hpcmem_trace_format.h, converts time stamp
 * counter ticks to nanoseconds, gathers HPCMEM_TRACE_BUFFER / 2 bytes of
 * records, regroups them in columns, compresses them and writes the block
 * -- all off the allocating thread, on the other core.  Only if the writer
 * is a whole ring behind does the owner write the waiting segments itself
 * (nothing is dropped, memory stays bounded).
 *
 * Anyone else -- flush_all from another thread, exit, a signal handler on
 * this one, the writer for a buffer that has waited too long -- writes the
 * committed part of a buffer under the buffer's lock: first the segments
 * that wait for the writer, then what is not written of the current one.  The
 * encoder state (the previous record's time, address, stack) lives with
 * the buffer and is only touched under that lock, so blocks of a thread
 * are written in order whoever writes them.
 *
 * Re-entrancy: stack capture (libunwind, glibc's backtrace) may call
 * malloc, which comes back here.  A thread-local flag stops the recursion;
 * an event that arrives while this thread is capturing (or starting the
 * writer thread) is recorded as libhpcmem-internal (S) without a stack, one
 * that arrives while it is writing is counted as dropped. */
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
#include <stdlib.h>
#include <sys/select.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>
#include <linux/futex.h>
#include <signal.h>

/* a buffer older than this is written even if not full, so that a rank
 * killed with SIGKILL loses at most this much of a slow thread's events */
#define HMT_FLUSH_AGE_NS (2ull * 1000 * 1000 * 1000)
/* compressed blocks keep time in ticks of 2^16 ns (65.5 us; the shift is
 * written in each block, so files with 2^10 ns ticks read as before): a
 * thread's events keep their order whatever the tick, and the time stream
 * costs 0.03 bytes an event on BWA-MEM instead of 0.19 at 2^10 ns.  Events
 * of different threads or ranks within one tick are merged allocations
 * first (tools/hmt_reader.c, tools/hpcmem-report.c): the peak within a
 * tick is off by at most the smaller of the bytes allocated and freed in
 * it, and errs upwards (docs/trace-format.md, "Time"). */
#define HMT_TICK_SHIFT 16

/* Raw entries (in memory only; the writer turns them into records).  Word
 * 0 is the kind (a record tag: type | HMT_TAG_SYS) in its top 8 bits over
 * 56 bits of time (counter ticks since G.t0: 277 days at 3 GHz), then
 *   FREE                ptr
 *   MALLOC, CALLOC      ptr, size, stack
 *   MEMALIGN            ptr, size, stack, align
 *   REALLOC             ptr, size, stack, old_ptr
 *   HMT_REC_STACK       (word 0's low bits: n) first, parent, frame[0 .. n-1] */
#define RAW_KSHIFT 56
#define RAW_TMASK ((1ull << RAW_KSHIFT) - 1)
#define RAW_MAX_WORDS(depth) (8 + 3 + (size_t)(depth))  /* an event and a stack definition */
/* Each thread's buffer is a ring of segments: the owner fills one while
 * the writer works through the ones handed over, so that a writer kept
 * from running for a while (a busy machine) does not stop the owner. */
#define HMT_SEGS 4
#define POS_SEG(p) ((unsigned)((p) >> 48))
#define POS_LEN(p) ((size_t)((p) & ((1ull << 48) - 1)))
#define POS(seg, len) (((uint64_t)(seg) << 48) | (len))

typedef struct hmt_tbuf {
  struct hmt_tbuf *next;      /* all buffers ever made (never unlinked) */
  volatile int in_use;        /* owned by a live thread */
  int late;                   /* taken after its thread's exit hook (see _hpcmem_trace_thread_gone) */
  int tid;
  hmt_tlock_t lock;           /* held while writing a block of this buffer */
  uint64_t *seg[HMT_SEGS];    /* the ring of segments, cap words each */
  volatile uint64_t pos;      /* the owner's: segment being filled << 48 | words of whole entries in it */
  volatile size_t ready[HMT_SEGS];  /* words of a segment handed over (0: free, or being filled) */
  size_t done[HMT_SEGS];      /* words of a segment already written (under `lock`) */
  unsigned tail;              /* the oldest segment handed over (under `lock`) */
  size_t cap;
  hmt_state_t enc;            /* the record encoder's state: under `lock` */
  volatile uint64_t events;   /* recorded into this buffer (summed by fill_stats) */
  int capturing;
  uint8_t *rows;              /* records not written yet (under `lock`): a block is */
  size_t rows_cap, rows_len;  /* written when HPCMEM_TRACE_BUFFER / 2 of them gather */
  uint64_t rows_count;        /* records in them */
  hmt_state_t rows_base;      /* the encoder state they start from */
  uint64_t rows_t0;           /* raw clock when the first of them was gathered */
  hmt_col_model_t *model;     /* the column models of this buffer's blocks (under `lock`) */
  hmt_c2_livemap_t live;      /* its live allocations: address -> allocation index */
  hmt_m4_model_t *m4;         /* format 1.4: the models of this buffer's blocks (under `lock`) */
  hmt_m4_enc_t m4e;           /* ... the block being coded into `rows` (m4_open), */
  int m4_open, m4_chained;    /* which continues the models of the block before */
  hmt_state_t m4_base;        /* the state it starts from */
  uint32_t m4_nmax;           /* allocations the next chained block tracks */
  unsigned m4_low;            /* blocks tracking HMT_M4_LOW since the last try of the full limit */
  int chain;                  /* the models continue those of the last block written */
  uint64_t *slots;            /* capture scratch (4 x frames): where each frame was found */
  hmt_scache_t *cache;        /* recent stacks of the owning thread */
  uint64_t frames[];          /* capture scratch */
} hmt_tbuf_t;

int _hpcmem_trace_enabled;

static struct {
  int ready;
  volatile int final;         /* after EXIT, ABORT, a signal: write through */
  int pid;                    /* the recording process (a child of vfork has another) */
  int codec, depth, method;
  int stack_cache;            /* HPCMEM_TRACE_STACK_CACHE */
  size_t bufsize;
  hmt_tbuf_t *volatile all;
  uint64_t start_ns;
  uint64_t writer_after;      /* raw clock: start the writer from the first event after this */
} G;

/* the writer thread */
static struct {
  volatile int state;         /* 0 not started, 1 starting, 2 running, 3 failed, 4 stopping */
  volatile uint32_t seq;      /* bumped (futex) when a segment is handed over */
  pthread_t thread;
} W;

static struct {
#define HMT_TRACE_STAT_(name, help) volatile uint64_t name;
  HMT_FLUSH_FIELDS(HMT_TRACE_STAT_)
#undef HMT_TRACE_STAT_
} S;

static __thread hmt_tbuf_t *t_buf;
static __thread int t_inside;  /* inside the recorder */
static __thread int t_lib;     /* inside libhpcmem's own work */
static __thread int t_tid;
static __thread int t_writer;  /* this is the writer thread */

#define STAT_ADD(f, n) __atomic_add_fetch(&S.f, (n), __ATOMIC_RELAXED)

/* ---- the clock ---------------------------------------------------------
 * Time stamps are CLOCK_MONOTONIC nanoseconds in the file.  clock_gettime
 * costs 67 ns on the development VM; where the kernel itself keeps time
 * with the TSC (clocksource "tsc": synchronised across cores and at a
 * constant rate) the allocating thread only reads the TSC (rdtsc, no
 * conversion) and the writer converts ticks to nanoseconds with anchors
 * (tsc, ns, ns per tick << 32) calibrated for 1 ms at start-up and refined
 * against CLOCK_MONOTONIC at most twice a second by the writer.  A new
 * anchor continues the old line where they meet, so time never jumps; the
 * last HMT_ANCHORS stay, and a tick converts with the newest anchor not
 * after it, so a buffer written late converts as it would have at once.
 * Without the TSC the raw stamp is CLOCK_MONOTONIC ns itself. */
#define HMT_ANCHORS 64
typedef struct { uint64_t c, t, mult; } hmt_anchor_t;
static struct {
  int tsc;
  volatile uint32_t n;        /* anchors made (the newest is a[(n - 1) % HMT_ANCHORS]) */
  hmt_anchor_t a[HMT_ANCHORS];
  uint64_t c0, t0, last_fix;  /* c0: raw ticks count from here */
  hmt_tlock_t lock;
} CLK;

/* the raw stamp of the allocating thread: ticks since CLK.c0 */
static inline uint64_t clk_raw(void) {
#if defined(__x86_64__)
  if (CLK.tsc) return __builtin_ia32_rdtsc() - CLK.c0;
#endif
  return _hpcmem_prim_now_ns() - CLK.c0;
}

#if defined(__x86_64__)
static inline uint64_t tsc_ns(const hmt_anchor_t *a, uint64_t c) {
  if (c < a->c) c = a->c;
  return a->t + (uint64_t)(((unsigned __int128)(c - a->c) * a->mult) >> 32);
}
#endif

/* raw stamp -> CLOCK_MONOTONIC ns */
static uint64_t clk_ns(uint64_t raw) {
#if defined(__x86_64__)
  if (CLK.tsc) {
    uint64_t c = raw + CLK.c0;
    uint32_t n = __atomic_load_n(&CLK.n, __ATOMIC_ACQUIRE);
    uint32_t k = 0;
    for (; k + 1 < n && k + 1 < HMT_ANCHORS; k++)
      if (CLK.a[(n - 1 - k) % HMT_ANCHORS].c <= c) break;
    return tsc_ns(&CLK.a[(n - 1 - k) % HMT_ANCHORS], c);
  }
#endif
  return raw + CLK.c0;
}

static inline uint64_t clk_now(void) { return clk_ns(clk_raw()); }

#if defined(__x86_64__)
/* A (tick, ns) pair read together: the best of eight tries, the clock read
 * between two TSC reads that lie closest (a pair a preemption split put
 * the line milliseconds off, and a 1 ms calibration's rate off by %). */
static void clk_pair(uint64_t *c, uint64_t *t) {
  uint64_t best = UINT64_MAX;
  *c = *t = 0;
  for (int i = 0; i < 8; i++) {
    uint64_t a = __builtin_ia32_rdtsc(), tt = _hpcmem_prim_now_ns(), b = __builtin_ia32_rdtsc();
    if (b - a < best) { best = b - a; *c = a + (b - a) / 2; *t = tt; }
  }
}
#endif

static void clk_init(void) {
  CLK.tsc = 0;
  CLK.c0 = 0;
#if defined(__x86_64__)
  char src[32] = "";
  int fd = open("/sys/devices/system/clocksource/clocksource0/current_clocksource", O_RDONLY | O_CLOEXEC);
  if (fd >= 0) {
    ssize_t n = read(fd, src, sizeof src - 1);
    src[n > 0 ? n : 0] = 0;
    close(fd);
  }
  if (strncmp(src, "tsc", 3) != 0 || (src[3] != '\n' && src[3] != 0)) return;
  uint64_t t0, c0, t1, c1;
  clk_pair(&c0, &t0);
  while (_hpcmem_prim_now_ns() - t0 < 1000000) {
  }
  clk_pair(&c1, &t1);
  if (c1 <= c0 || t1 <= t0) return;
  CLK.c0 = c0; CLK.t0 = t0;
  CLK.a[0] = (hmt_anchor_t){c0, t0, (uint64_t)(((unsigned __int128)(t1 - t0) << 32) / (c1 - c0))};
  CLK.n = 1;
  CLK.last_fix = t1;
  CLK.tsc = 1;
#endif
}

/* Refine the rate against CLOCK_MONOTONIC (from the writer / flush path). */
static void clk_fix(void) {
#if defined(__x86_64__)
  if (!CLK.tsc) return;
  uint64_t tn = _hpcmem_prim_now_ns();
  if (tn - CLK.last_fix < 500000000u || !_hpcmem_tlock_try(&CLK.lock, _hpcmem_trace_tid())) return;
  uint64_t cn;
  clk_pair(&cn, &tn);
  uint32_t n = CLK.n;
  const hmt_anchor_t *cur = &CLK.a[(n - 1) % HMT_ANCHORS];
  uint64_t pn = tsc_ns(cur, cn);
  hmt_anchor_t a = {cn, pn, (uint64_t)(((unsigned __int128)(tn - CLK.t0) << 32) / (cn - CLK.c0))};
  /* behind: catch up (a jump forward keeps the order); far ahead (the
   * machine slept, the VM moved): start from the truth; a little ahead:
   * keep the line, so time never goes back, on a rate slowed so that it
   * meets the true clock half a second on (at most 0.2 % slower) */
  if (tn > pn || pn > tn + 1000000) a.t = tn > cur->t ? tn : cur->t;
  else if (pn > tn) a.mult -= (uint64_t)(((unsigned __int128)a.mult * (pn - tn)) / 500000000u);
  CLK.a[n % HMT_ANCHORS] = a;
  __atomic_store_n(&CLK.n, n + 1, __ATOMIC_RELEASE);
  CLK.last_fix = tn;
  _hpcmem_tlock_release(&CLK.lock);
#endif
}
/* ---- small helpers shared by the recorder's files ------------------ */

/* prim's gettid, cached: the recorder asks on every event.  A fork's child
 * drops the cache (after_fork_child). */
int _hpcmem_trace_tid(void) {
  if (!t_tid) t_tid = _hpcmem_prim_gettid();
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

/* The deadline of the signal-time flush, CLOCK_MONOTONIC ns (0: none
 * running). */
static volatile uint64_t sig_deadline;

int _hpcmem_tlock_signal(hmt_tlock_t *l, int tid) {
  uint64_t deadline = sig_deadline;
  for (unsigned spins = 0;; spins++) {
    if (_hpcmem_tlock_try(l, tid)) return 0;
    if (__atomic_load_n(&l->owner, __ATOMIC_RELAXED) == tid) return -EBUSY;  /* the interrupted holder: us */
    if (spins < 1000) { __builtin_ia32_pause(); continue; }
    uint64_t now = _hpcmem_prim_now_ns();
    if (!deadline) deadline = now + HMT_SIGNAL_WAIT_NS;
    if (now >= deadline) return -EBUSY;
    /* give the CPU away: the holder may be waiting for it (select, not
     * nanosleep: POSIX lists select as async-signal-safe) */
    struct timeval tv = {0, 50};
    select(0, NULL, NULL, NULL, &tv);
  }
}

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
          : G.codec == HPCMEM_COMPRESS_ZLIB ? HMT_CODEC_ZLIB
          : G.codec == HPCMEM_COMPRESS_MODEL ? HMT_CODEC_MODEL : HMT_CODEC_NONE;
  static const char *const codec_name[] = {"none", "zstd", "zlib", "model"};
  char why[256];
  if (!_hpcmem_codec_built(G.codec)) {
    int alt = _hpcmem_codec_built(HMT_CODEC_ZSTD) ? HMT_CODEC_ZSTD
            : _hpcmem_codec_built(HMT_CODEC_ZLIB) ? HMT_CODEC_ZLIB : HMT_CODEC_NONE;
    _hpcmem_warn("trace: HPCMEM_TRACE_COMPRESS: this build has no %s; using %s", codec_name[G.codec], codec_name[alt]);
    G.codec = alt;
  }
  /* the libraries are loaded now, only when tracing: a missing one is an
   * error the user must see, and the program goes on untraced */
  if (_hpcmem_codec_load(G.codec, why, sizeof why)) {
    _hpcmem_warn("trace: error: HPCMEM_TRACE_COMPRESS=%s needs %s, which cannot be loaded (%s); tracing is OFF "
                 "(HPCMEM_TRACE_COMPRESS=none traces without it)",
                 codec_name[G.codec], _hpcmem_codec_library(G.codec), why);
    return;
  }
  G.depth = (int)_hpcmem_opt(TRACE_DEPTH);
  G.bufsize = (size_t)_hpcmem_opt(TRACE_BUFFER);
  /* the option's order is the HMT_UNWIND_* order */
  G.method = (int)_hpcmem_opt(TRACE_UNWIND);
  G.stack_cache = (int)_hpcmem_opt(TRACE_STACK_CACHE);
  if (_hpcmem_stack_init(G.method, why, sizeof why)) {
    _hpcmem_warn("trace: error: HPCMEM_TRACE_UNWIND=%s: %s; tracing is OFF (HPCMEM_TRACE_UNWIND=backtrace or frame "
                 "trace without it)", _hpcmem_stack_method_name(G.method), why);
    return;
  }
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
  /* the writer also does the age flush, so it must run in a program that
   * never fills a segment; but not from the first allocations of the
   * process (the C library may still be starting): 100 ms in */
  G.writer_after = clk_raw() + (CLK.tsc ? (uint64_t)(((unsigned __int128)100000000u << 32) / CLK.a[0].mult)
                                        : 100000000u);
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
  _hpcmem_tfile_configure(&h, dir, !d[0]);

  static int atfork_done;
  if (!atfork_done) { atfork_done = 1; pthread_atfork(NULL, NULL, after_fork_child); }
  _hpcmem_trace_signals_install();
  _hpcmem_trace_leave_init();
  G.pid = (int)syscall(SYS_getpid);
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
      b->late = _hpcmem_thread_exiting;
      /* the cached stacks were another thread's, on its stack */
      _hpcmem_scache_clear(b->cache, (uint32_t)G.depth);
      b->chain = 0;  /* a reader follows the models by tid */
      return t_buf = b;
    }
  }
  size_t nframes = (size_t)G.depth + HMT_CAPTURE_EXTRA;
  size_t head = sizeof(hmt_tbuf_t) + 5 * nframes * sizeof(uint64_t);
  head = (head + 63) & ~(size_t)63;
  size_t csize = (_hpcmem_scache_size((uint32_t)G.depth) + 63) & ~(size_t)63;
  /* the segments together are twice HPCMEM_TRACE_BUFFER */
  size_t words = G.bufsize * 2 / HMT_SEGS / 8;
  if (words < 4 * RAW_MAX_WORDS(G.depth)) words = 4 * RAW_MAX_WORDS(G.depth);
  /* records are never longer than 4/3 of their raw entries (a free: 16
   * bytes raw, at most 21 encoded); a block gathers HPCMEM_TRACE_BUFFER / 2
   * bytes of records, whatever the segments' size: larger blocks compress
   * better (BWA-MEM: 1.02 bytes an event with a block per 512 KiB segment,
   * 0.89 with blocks of 1 MiB of records) */
  size_t rows = (G.bufsize / 2 + words * 8 / 3 * 4 + 4095) & ~(size_t)4095;
  hmt_tbuf_t *b = _hpcmem_trace_alloc(head + csize + HMT_SEGS * words * 8 + rows);
  if (!b) return NULL;
  memset(b, 0, sizeof *b);
  b->slots = b->frames + nframes;
  b->cache = (hmt_scache_t *)((uint8_t *)b + head);
  _hpcmem_scache_clear(b->cache, (uint32_t)G.depth);
  b->seg[0] = (uint64_t *)((uint8_t *)b + head + csize);
  for (int i = 1; i < HMT_SEGS; i++) b->seg[i] = b->seg[i - 1] + words;
  b->rows = (uint8_t *)(b->seg[HMT_SEGS - 1] + words);
  b->rows_cap = rows;
  b->cap = words;
  b->in_use = 1;
  b->tid = _hpcmem_trace_tid();
  b->late = _hpcmem_thread_exiting;
  hmt_tbuf_t *old = G.all;
  do b->next = old;
  while (!__atomic_compare_exchange_n(&G.all, &old, b, 0, __ATOMIC_RELEASE, __ATOMIC_RELAXED));
  STAT_ADD(threads, 1);
  return t_buf = b;
}

/* Raw entries -> records at out, against b->enc.  Returns the length;
 * *count: records. */
static size_t raw_to_rows(hmt_tbuf_t *b, uint8_t *out, const uint64_t *w, const uint64_t *end, uint64_t *count) {
  uint8_t *o = out;
  uint64_t n = 0;
  while (w < end) {
    unsigned tag = (unsigned)(w[0] >> RAW_KSHIFT), type = tag & HMT_TAG_TYPE;
    if (type == HMT_REC_STACK) {
      uint32_t nf = (uint32_t)(w[0] & RAW_TMASK);
      o = hmt_encode_stack(o, &b->enc, w[1], w[2], w + 3, nf);
      w += 3 + nf;
    } else {
      uint64_t t = clk_ns(w[0] & RAW_TMASK);
      if (t < b->enc.time) t = b->enc.time;  /* an S event recorded inside a capture came first */
      int sys = (tag & HMT_TAG_SYS) != 0;
      if (type == HPCMEM_EV_FREE) {
        o = hmt_encode_event(o, &b->enc, type, sys, t, w[1], 0, 0, 0, 0);
        w += 2;
      } else if (type == HPCMEM_EV_MEMALIGN) {
        o = hmt_encode_event(o, &b->enc, type, sys, t, w[1], 0, w[2], w[4], w[3]);
        w += 5;
      } else if (type == HPCMEM_EV_REALLOC) {
        o = hmt_encode_event(o, &b->enc, type, sys, t, w[1], w[4], w[2], 0, w[3]);
        w += 5;
      } else {
        o = hmt_encode_event(o, &b->enc, type, sys, t, w[1], 0, w[2], 0, w[3]);
        w += 4;
      }
    }
    n++;
  }
  *count = n;
  return (size_t)(o - out);
}

/* The live-allocation map holds the buffer's thread's live allocations of
 * the last HMT_C2_RING (those a free may name), 16 bytes an entry at most
 * half full: it grows with the live set, rebuilt without the older entries
 * (freed by other threads) at twice the size when `more` insertions could
 * fill it over half, up to 2^HMT_LIVE_MAX_BITS entries (4 MiB: 131,072
 * live allocations -- enough for BWA-MEM's live set; a 16 MiB table cost
 * the writer ~60 ns an event in cache misses on a 400,000-object churn,
 * 1 MiB lost a third of the size gain on BWA-MEM), and never beyond
 * HPCMEM_TRACE_BUFFER entries; the frees of
 * allocations it has no room for name their address instead).  Counted in
 * memory_bytes.  0, or -ENOMEM (then no models: format 1.1). */
#define HMT_LIVE_MIN_BITS 12
#define HMT_LIVE_MAX_BITS 18
static int live_reserve(hmt_tbuf_t *b, uint64_t more) {
  if (!b->model && !(b->model = _hpcmem_trace_alloc(sizeof *b->model))) return -ENOMEM;
  hmt_c2_livemap_t *L = &b->live;
  uint64_t cap = L->t ? L->mask + 1 : 0;
  if (L->t && 2 * (L->n + more) <= cap) return 0;
  uint64_t keep = 0, oldest = b->chain && b->model->nalloc > HMT_C2_RING ? b->model->nalloc - HMT_C2_RING : 0;
  if (b->chain)
    for (uint64_t i = 0; i < cap; i++) keep += L->t[i].addr && (L->t[i].idx_class >> 8) >= oldest;
  uint64_t want = 1ull << HMT_LIVE_MIN_BITS;
  while (want < 2 * (keep + more) && 2 * want <= G.bufsize && want < (2ull << HMT_C2_RING_BITS) &&
         want < (1ull << HMT_LIVE_MAX_BITS)) want <<= 1;
  if (want == cap && keep == L->n) return 0;  /* at the largest size: insertions beyond are skipped */
  hmt_c2_livemap_t N = {_hpcmem_trace_alloc(want * sizeof(hmt_c2_live_t)), want - 1, 0};
  if (!N.t) return L->t ? 0 : -ENOMEM;
  if (b->chain)
    for (uint64_t i = 0; i < cap; i++)
      if (L->t[i].addr && (L->t[i].idx_class >> 8) >= oldest)
        hmt_c2_live_put(&N, L->t[i].addr, L->t[i].idx_class >> 8, (unsigned)(L->t[i].idx_class & 0xff));
  _hpcmem_trace_free(L->t);
  *L = N;
  return 0;
}

/* Format 1.4: the buffer's models, with room for a block of count records
 * (hmt_m4_need; chained: they go on).  At most HPCMEM_TRACE_BUFFER / 16
 * allocations are tracked (a power of two from 2^10 to 2^20: 65536 for the
 * default 1 MiB), each 32 bytes plus 32 of address map at most half full --
 * 4 MiB at the default, touched only as far as the live set reaches, as
 * the live map of format 1.2.  Sites (distinct stacks): 104 bytes each and
 * 8 of map, up to HMT_M4_SITES_MAX.  The arrays grow by doubling; all is
 * counted in memory_bytes.  0, or -ENOMEM. */
static uint32_t m4_nmax(void) {
  uint32_t n = 1u << 10;
  while (n < (1u << 20) && (size_t)n * 2 * 16 <= G.bufsize) n *= 2;
  return n;
}
static int m4_reserve(hmt_tbuf_t *b, int chained, uint64_t count) {
  if (!b->m4) {
    if (!(b->m4 = _hpcmem_trace_alloc(sizeof *b->m4))) return -ENOMEM;
    memset(b->m4, 0, sizeof *b->m4);
    chained = 0;
  }
  hmt_m4_model_t *m = b->m4;
  if (!chained) { m->nmax = b->m4_nmax = m4_nmax(); b->m4_low = 0; }
  hmt_m4_room_t need = hmt_m4_need(m, chained, count, m->nmax), r = need;
  int grow = 0;
  if (r.sites > m->site_cap) {
    r.sites = 2 * m->site_cap > r.sites ? 2 * m->site_cap : r.sites;
    if (r.sites > HMT_M4_SITES_MAX) r.sites = HMT_M4_SITES_MAX;
    grow = 1;
  } else r.sites = m->site_cap;
  if (r.ents > m->ent_cap) {
    r.ents = 2 * m->ent_cap > r.ents ? 2 * m->ent_cap : r.ents;
    if (r.ents > m->nmax + 1) r.ents = m->nmax + 1;
    grow = 1;
  } else r.ents = m->ent_cap;
  for (r.map_slots = 64; r.map_slots < 2ull * r.ents; r.map_slots *= 2) {}
  for (r.smap_slots = 64; r.smap_slots < 2ull * r.sites; r.smap_slots *= 2) {}
  if (!grow && m->map && m->smap) return 0;
  hmt_m4_site_t *sites = r.sites == m->site_cap && m->sites ? m->sites : _hpcmem_trace_alloc(r.sites * sizeof *sites);
  hmt_m4_ent_t *ent = r.ents == m->ent_cap && m->ent ? m->ent : _hpcmem_trace_alloc(r.ents * sizeof *ent);
  hmt_m4_mslot_t *map = m->map && r.map_slots == m->map_mask + 1 ? m->map : _hpcmem_trace_alloc(r.map_slots * sizeof *map);
  uint32_t *smap = m->smap && r.smap_slots == m->smap_mask + 1 ? m->smap : _hpcmem_trace_alloc(r.smap_slots * sizeof *smap);
  if (!sites || !ent || !map || !smap) {
    if (sites != m->sites) _hpcmem_trace_free(sites);
    if (ent != m->ent) _hpcmem_trace_free(ent);
    if (map != m->map) _hpcmem_trace_free(map);
    if (smap != m->smap) _hpcmem_trace_free(smap);
    return -ENOMEM;
  }
  hmt_m4_site_t *os = m->sites;
  hmt_m4_ent_t *oe = m->ent;
  hmt_m4_mslot_t *om = m->map;
  uint32_t *osm = m->smap;
  hmt_m4_grow(m, r, sites, ent, map, smap, chained);
  if (os != sites) _hpcmem_trace_free(os);
  if (oe != ent) _hpcmem_trace_free(oe);
  if (om != map) _hpcmem_trace_free(om);
  if (osm != smap) _hpcmem_trace_free(osm);
  return 0;
}
/* After the limit went down: the tracked allocations into arrays of the
 * lower limit's size (in the caches, and memory given back).  Failing
 * that, the large ones stay. */
static void m4_shrink(hmt_tbuf_t *b, uint64_t more) {
  hmt_m4_model_t *m = b->m4;
  hmt_m4_room_t r = hmt_m4_need(m, 1, more, m->nmax);
  if (r.ents < m->ntracked + 1 + more) r.ents = (uint32_t)(m->ntracked + 1 + more < m->nmax + 1 ? m->ntracked + 1 + more : m->nmax + 1);
  for (r.map_slots = 64; r.map_slots < 2ull * r.ents; r.map_slots *= 2) {}
  if (r.ents >= m->ent_cap) return;
  hmt_m4_ent_t *ent = _hpcmem_trace_alloc(r.ents * sizeof *ent);
  hmt_m4_mslot_t *map = _hpcmem_trace_alloc(r.map_slots * sizeof *map);
  if (!ent || !map) { _hpcmem_trace_free(ent); _hpcmem_trace_free(map); return; }
  hmt_m4_ent_t *oe = m->ent;
  hmt_m4_mslot_t *om = m->map;
  hmt_m4_compact(m, r, ent, map);
  _hpcmem_trace_free(oe);
  _hpcmem_trace_free(om);
}

static void m4_free(hmt_tbuf_t *b) {
  if (!b->m4) return;
  _hpcmem_trace_free(b->m4->sites);
  _hpcmem_trace_free(b->m4->ent);
  _hpcmem_trace_free(b->m4->map);
  _hpcmem_trace_free(b->m4->smap);
  _hpcmem_trace_free(b->m4);
  b->m4 = NULL;
}

static int m4_close(hmt_tbuf_t *b, int may_wait);

/* Write the gathered records as one block.  Holding b->lock. */
static int write_rows(hmt_tbuf_t *b, int may_wait) {
  if (b->m4_open) return m4_close(b, may_wait);
  size_t len = b->rows_len;
  if (!len) return 0;
  hmt_state_t base = b->rows_base;
  uint64_t count = b->rows_count;
  b->rows_len = 0; b->rows_count = 0; b->rows_base = b->enc;
  const uint8_t *raw = b->rows;
  hmt_block_t blk;
  memset(&blk, 0, sizeof blk);
  blk.type = HMT_BLOCK_EVENTS;
  blk.raw_len = (uint32_t)len;
  blk.tid = (uint32_t)b->tid;
  blk.count = (uint32_t)count;
  blk.base_time = base.time; blk.base_ptr = base.ptr; blk.base_stack = base.stack;
  const void *out = raw;
  size_t out_len = len, raw_len = len;
  int columns = 0, chained = b->chain, models = 0;
  unsigned shift = HMT_TICK_SHIFT;
  void *comp;
  /* (the live map keeps its entries when the models go on) */
  if (G.codec != HMT_CODEC_MODEL) models = G.codec != HMT_CODEC_NONE && live_reserve(b, count) == 0;
  b->chain = 0;  /* until this block is written with the models */
  if (G.codec == HMT_CODEC_MODEL) {
    /* format 1.4; failing that, rows (and the next block starts afresh) */
    comp = m4_reserve(b, chained, count) == 0
         ? _hpcmem_compress_m4_begin(raw, len, &base, shift, b->m4, chained, may_wait, &out, &out_len, &raw_len)
         : NULL;
    if (comp) {
      columns = 4;
      blk.flags = HMT_BF_M4 | (chained ? HMT_BF_CHAIN : 0);
      blk.raw_len = (uint32_t)raw_len;
    }
  } else {
    chained = models && chained;
    comp = _hpcmem_compress_events_begin(G.codec, raw, len, &base, shift, models ? b->model : NULL, &b->live,
                                         chained, may_wait, &out, &out_len, &raw_len, &columns);
  }
  blk.codec = comp ? (uint8_t)G.codec : HMT_CODEC_NONE;
  if (comp && columns && columns < 4) {
    blk.flags = HMT_BF_COLUMNS;
    if (columns >= 2) blk.flags |= HMT_BF_MODELS | (chained ? HMT_BF_CHAIN : 0);
    if (columns == 3) blk.flags |= HMT_BF_SPLIT;
    blk.raw_len = (uint32_t)raw_len;
  }
  blk.stored_len = (uint32_t)out_len;
  int err = _hpcmem_tfile_write_block(&blk, out, may_wait);
  _hpcmem_compress_done(comp);
  if (err) { STAT_ADD(write_errors, 1); return err; }
  /* a block in rows or 1.1 columns, or one not written, leaves the reader's
   * models where they were: the next block starts them afresh */
  b->chain = comp && columns >= 2;
  STAT_ADD(blocks, 1); STAT_ADD(raw_bytes, len); STAT_ADD(stored_bytes, out_len);
  if (t_writer) STAT_ADD(writer_blocks, 1);
  return 0;
}

/* How many allocations the next block tracks.  A thread whose live set is
 * far beyond the limit evicts nearly every allocation it tracks before its
 * free: the churn of a 400,000-element std::map evicted 65,000 of the
 * 65,000 a block tracked (BWA-MEM at most 5%), and the map and list work
 * for them, in cache misses, made the writer twice as slow as with 1,024
 * tracked, for a file 6% smaller.  So a block that evicted more than half
 * of what it tracked has the next ones track HMT_M4_LOW, and every
 * HMT_M4_RETRY-th block tries the full limit again (the live set may have
 * shrunk). */
#define HMT_M4_LOW (1u << 10)
#define HMT_M4_RETRY 32
static void m4_next_limit(hmt_tbuf_t *b) {
  hmt_m4_model_t *m = b->m4;
  uint32_t full = m4_nmax();
  if (b->m4_nmax >= full) {
    if (m->evicted > m->tracked / 2 && full > HMT_M4_LOW) { b->m4_nmax = HMT_M4_LOW; b->m4_low = 0; }
  } else if (++b->m4_low >= HMT_M4_RETRY) {
    b->m4_nmax = full;
  }
  m->tracked = m->evicted = 0;
}

/* Format 1.4: the open block, closed and written.  Holding b->lock. */
static int m4_close(hmt_tbuf_t *b, int may_wait) {
  hmt_m4_enc_t *e = &b->m4e;
  size_t n = hmt_m4_enc_end(e);
  b->m4_open = 0;
  b->rows_len = 0; b->rows_count = 0; b->rows_base = b->enc;
  if (!n) {  /* cannot happen: m4_code_raw keeps room for the largest record */
    STAT_ADD(write_errors, 1); STAT_ADD(dropped, e->count);
    return -ENOSPC;
  }
  hmt_block_t blk;
  memset(&blk, 0, sizeof blk);
  blk.type = HMT_BLOCK_EVENTS;
  blk.codec = HMT_CODEC_MODEL;
  blk.flags = HMT_BF_M4 | (b->m4_chained ? HMT_BF_CHAIN : 0);
  blk.stored_len = (uint32_t)n;
  blk.raw_len = (uint32_t)e->rows_len;
  blk.tid = (uint32_t)b->tid;
  blk.count = (uint32_t)e->count;
  blk.base_time = b->m4_base.time; blk.base_ptr = b->m4_base.ptr; blk.base_stack = b->m4_base.stack;
  int err = _hpcmem_tfile_write_block(&blk, e->out, may_wait);
  if (err) { STAT_ADD(write_errors, 1); return err; }  /* the next block starts the models afresh */
  b->chain = 1;
  m4_next_limit(b);
  STAT_ADD(blocks, 1); STAT_ADD(raw_bytes, e->rows_len); STAT_ADD(stored_bytes, n);
  if (t_writer) STAT_ADD(writer_blocks, 1);
  return 0;
}

/* the raw entry at w: fetch its address's map slot; the next entry */
static inline const uint64_t *m4_prefetch(const hmt_m4_model_t *m, const uint64_t *w) {
  unsigned type = (unsigned)(w[0] >> RAW_KSHIFT) & HMT_TAG_TYPE;
  if (type == HMT_REC_STACK) return w + 3 + (w[0] & RAW_TMASK);
  __builtin_prefetch(&m->map[hmt_m4_h(w[1]) >> m->map_shift]);
  if (type == HPCMEM_EV_FREE) return w + 2;
  if (type == HPCMEM_EV_REALLOC) __builtin_prefetch(&m->map[hmt_m4_h(w[4]) >> m->map_shift]);
  return w + (type == HPCMEM_EV_MALLOC || type == HPCMEM_EV_CALLOC ? 4 : 5);
}

/* Format 1.4: code the raw entries from *wp on into the open block (opened
 * here), as they are taken -- no rows are made and read again (a quarter of
 * the coder's instructions) -- and close it when it stands for
 * HPCMEM_TRACE_BUFFER / 2 bytes of rows, or when the largest record might
 * not fit in the payload's room (`rows`).  *wp: how far it got; 0, or
 * -ENOMEM when the models cannot grow (the rest is the caller's, in rows).
 * Holding b->lock. */
static int m4_code_raw(hmt_tbuf_t *b, const uint64_t **wp, const uint64_t *end, int may_wait) {
  const uint64_t *w = *wp;
  int err = 0;
  while (w < end) {
    uint64_t more = (uint64_t)(end - w) / 2 + 1;  /* records at most */
    if (!b->m4_open) {
      /* a chained block tracks b->m4_nmax (the room is reserved for it;
       * fewer than before: the oldest are evicted, then the rest moved to
       * arrays of that size) */
      int shrink = b->chain && b->m4 && b->m4_nmax < b->m4->nmax;
      if (b->chain && b->m4) b->m4->nmax = b->m4_nmax;
      if (m4_reserve(b, b->chain, more)) break;
      b->m4_base = b->enc;
      b->rows_t0 = clk_raw();
      if (hmt_m4_enc_begin(&b->m4e, b->rows, b->rows_cap, &b->enc, HMT_TICK_SHIFT, b->m4, b->chain)) break;
      if (shrink) m4_shrink(b, more);
      b->m4_chained = b->chain;
      b->chain = 0;  /* until the block is written */
      b->m4_open = 1;
    } else if (m4_reserve(b, 1, more)) {
      err = m4_close(b, may_wait);
      break;
    }
    hmt_m4_enc_t *e = &b->m4e;
    int full = 0;
    /* the map slots of the entries HMT_M4_AHEAD ahead are fetched while
     * these are coded: a thread with a large live set has its map beyond
     * the caches, and the probes were most of the writer's time */
    const uint64_t *ahead = w;
    for (int k = 0; k < HMT_M4_AHEAD && ahead < end; k++) ahead = m4_prefetch(b->m4, ahead);
    while (w < end && !full) {
      if (ahead < end) ahead = m4_prefetch(b->m4, ahead);
      unsigned tag = (unsigned)(w[0] >> RAW_KSHIFT), type = tag & HMT_TAG_TYPE;
      uint32_t nf = type == HMT_REC_STACK ? (uint32_t)(w[0] & RAW_TMASK) : 0;
      /* a record codes to less than 4 bytes a field (a frame: 20 at most;
       * the deepest stack fits in an empty block) */
      if (e->count && hmt_m4_enc_size(e) + 256 + 20 * (size_t)nf > b->rows_cap) { full = 1; break; }
      if (type == HMT_REC_STACK) {
        if (hmt_m4_enc_stack(e, b->m4, w[1], w[2], w + 3, nf)) full = -1;
        b->enc.stack = w[1] + nf - 1;
        w += 3 + nf;
      } else {
        uint64_t t = clk_ns(w[0] & RAW_TMASK);
        if (t < b->enc.time) t = b->enc.time;  /* an S event recorded inside a capture came first */
        int sys = (tag & HMT_TAG_SYS) != 0, rc;
        b->enc.time = t; b->enc.ptr = w[1];
        if (type == HPCMEM_EV_FREE) {
          rc = hmt_m4_enc_event(e, b->m4, type, sys, t, w[1], 0, 0, 0, 0);
          w += 2;
        } else {
          uint64_t old = type == HPCMEM_EV_REALLOC ? w[4] : 0, align = type == HPCMEM_EV_MEMALIGN ? w[4] : 0;
          rc = hmt_m4_enc_event(e, b->m4, type, sys, t, w[1], old, w[2], align, w[3]);
          b->enc.stack = w[3];
          w += type == HPCMEM_EV_MALLOC || type == HPCMEM_EV_CALLOC ? 4 : 5;
        }
        if (rc) full = -1;
      }
      if (e->rows_len >= G.bufsize / 2) full = 1;
    }
    b->rows_len = e->rows_len; b->rows_count = e->count;
    if (full) err = m4_close(b, may_wait);
  }
  *wp = w;
  return err;
}

/* Add raw entries [w, end) to the gathered records, and write them when
 * enough have gathered (or now: flush).  Holding b->lock. */
static int write_raw(hmt_tbuf_t *b, const uint64_t *w, const uint64_t *end, int may_wait, int flush) {
  int err = 0;
  if (w < end && G.codec == HMT_CODEC_MODEL && (b->m4_open || !b->rows_len)) err = m4_code_raw(b, &w, end, may_wait);
  if (w < end) {
    if (b->m4_open) err = m4_close(b, may_wait);
    if (b->rows_len + (size_t)(end - w) * 8 / 3 * 4 + 64 > b->rows_cap) err = write_rows(b, may_wait);
    if (!b->rows_len) { b->rows_base = b->enc; b->rows_t0 = clk_raw(); }
    uint64_t count;
    b->rows_len += raw_to_rows(b, b->rows + b->rows_len, w, end, &count);
    b->rows_count += count;
  }
  if (flush || b->rows_len >= G.bufsize / 2) err = write_rows(b, may_wait);
  return err;
}

/* Write what is not written yet, oldest first: the segments handed over,
 * then (current) the committed part of the one being filled.  The writer
 * leaves that one alone unless it is old: small blocks compress badly.
 * Holding b->lock. */
static void write_ready(hmt_tbuf_t *b, int may_wait, int current) {
  for (;;) {
    size_t n;
    while ((n = __atomic_load_n(&b->ready[b->tail], __ATOMIC_ACQUIRE)) != 0) {
      unsigned s = b->tail;
      write_raw(b, b->seg[s] + b->done[s], b->seg[s] + n, may_wait, 0);  /* written or not, it is free again */
      b->done[s] = 0;
      b->tail = (s + 1) % HMT_SEGS;
      __atomic_store_n(&b->ready[s], 0, __ATOMIC_RELEASE);
    }
    if (!current) return;  /* the writer: blocks of HPCMEM_TRACE_BUFFER / 2 */
    uint64_t p = __atomic_load_n(&b->pos, __ATOMIC_ACQUIRE);
    unsigned c = POS_SEG(p);
    /* the owner moved on after we looked: the segment it left is ready
     * (handed over before pos moved), and is written as such; or the
     * owner handed over this one and has not moved on yet: written above */
    if (c != b->tail) {
      if (__atomic_load_n(&b->ready[b->tail], __ATOMIC_ACQUIRE)) continue;
      write_rows(b, may_wait);
      return;
    }
    if (POS_LEN(p) > b->done[c]) {
      write_raw(b, b->seg[c] + b->done[c], b->seg[c] + POS_LEN(p), may_wait, 0);
      b->done[c] = POS_LEN(p);
    }
    write_rows(b, may_wait);  /* a flush: everything */
    return;
  }
}

static void writer_start(hmt_tbuf_t *b);

static void wake_writer(void) {
  __atomic_add_fetch(&W.seq, 1, __ATOMIC_RELEASE);
  syscall(SYS_futex, &W.seq, FUTEX_WAKE_PRIVATE, 1, NULL, NULL, 0);
}

/* The owner's segment is full: hand it over and go on in the next one,
 * without a lock.  Only when the writer is a whole ring behind does the
 * owner write the waiting segments itself. */
static void owner_swap(hmt_tbuf_t *b) {
  uint64_t p = b->pos;
  unsigned c = POS_SEG(p), n = (c + 1) % HMT_SEGS;
  if (__atomic_load_n(&b->ready[n], __ATOMIC_ACQUIRE)) {
    _hpcmem_tlock(&b->lock, b->tid);
    write_ready(b, 1, 0);
    _hpcmem_tlock_release(&b->lock);
  }
  /* first hand over, then move on: whoever sees the owner in the next
   * segment finds this one ready (and one who sees it ready and still
   * current writes it as ready only, see write_ready).  The other order left
   * the segment, in between, neither current nor ready -- skipped "for
   * later" by a flush, which never came when that flush was a fatal
   * signal's handler on this thread: the whole segment was lost. */
  __atomic_store_n(&b->ready[c], POS_LEN(p), __ATOMIC_RELEASE);
  __atomic_store_n(&b->pos, POS(n, 0), __ATOMIC_RELEASE);
  if (W.state == 2) {
    wake_writer();
  } else {
    _hpcmem_tlock(&b->lock, b->tid);
    write_ready(b, 1, 0);
    _hpcmem_tlock_release(&b->lock);
    if (W.state == 0) writer_start(b);
    _hpcmem_tfile_check_modules(1);
    clk_fix();
  }
}

/* Anyone writes what a buffer holds.  Returns 0, or -EBUSY when the lock
 * is held by the interrupted owner itself, or (signal handler) still held
 * by another thread at the signal flush's deadline. */
static int partial_flush(hmt_tbuf_t *b, int may_wait) {
  int tid = _hpcmem_trace_tid();
  if (!_hpcmem_tlock_try(&b->lock, tid)) {
    if (b->lock.owner == tid) return -EBUSY;  /* a signal interrupted our own flush */
    if (!may_wait) {
      if (_hpcmem_tlock_signal(&b->lock, tid)) return -EBUSY;
    } else {
      _hpcmem_tlock(&b->lock, tid);
    }
  }
  write_ready(b, may_wait, 1);
  _hpcmem_tlock_release(&b->lock);
  return 0;
}

/* ---- the writer thread ----------------------------------------------- */

/* a buffer whose oldest unwritten entry is older than this is written by
 * the writer even if not full, so that a rank killed with SIGKILL loses at
 * most about this much of a slow thread's events */
static int too_old(hmt_tbuf_t *b, uint64_t now_raw, uint64_t age_raw) {
  if (b->rows_len && now_raw > b->rows_t0 && now_raw - b->rows_t0 > age_raw) return 1;
  uint64_t p = __atomic_load_n(&b->pos, __ATOMIC_ACQUIRE);
  unsigned c = POS_SEG(p);
  size_t from = b->done[c];  /* a heuristic: a stale value only delays or hastens a write */
  if (POS_LEN(p) <= from) return 0;
  uint64_t t = b->seg[c][from] & RAW_TMASK;
  return now_raw > t && now_raw - t > age_raw;
}

static void *writer_main(void *arg) {
  (void)arg;
  t_inside = 1;  /* the writer records nothing of its own */
  t_writer = 1;
  uint64_t age_raw = HMT_FLUSH_AGE_NS;
#if defined(__x86_64__)
  if (CLK.tsc) age_raw = (uint64_t)(((unsigned __int128)HMT_FLUSH_AGE_NS << 32) / CLK.a[0].mult);
#endif
  while (__atomic_load_n(&W.state, __ATOMIC_ACQUIRE) == 2) {
    uint32_t seq = __atomic_load_n(&W.seq, __ATOMIC_ACQUIRE);
    int tid = _hpcmem_trace_tid(), worked = 0;
    uint64_t now = clk_raw();
    for (hmt_tbuf_t *b = __atomic_load_n(&G.all, __ATOMIC_ACQUIRE); b; b = b->next) {
      if (b->ready[b->tail] && _hpcmem_tlock_try(&b->lock, tid)) {
        write_ready(b, 1, 0);
        _hpcmem_tlock_release(&b->lock);
        worked = 1;
      }
      if (b->in_use && too_old(b, now, age_raw)) partial_flush(b, 1);
    }
    _hpcmem_tfile_check_modules(1);
    clk_fix();
    if (!worked) {
      struct timespec ts = {0, 250 * 1000 * 1000};
      syscall(SYS_futex, &W.seq, FUTEX_WAIT_PRIVATE, seq, &ts, NULL, 0);
    }
  }
  return NULL;
}

/* Started by the first hand-over (not at init: pthread_create allocates,
 * and init runs inside the allocator's own start-up).  Its allocations
 * are recorded as libhpcmem's own. */
static void writer_start(hmt_tbuf_t *b) {
  /* not from inside a dl_iterate_phdr callback: pthread_create waits for
   * the loader's TLS lock, which a thread in dlopen may hold while it
   * waits for the lock this thread holds (a later event starts it) */
  if (_hpcmem_t_in_phdr) return;
  int z = 0;
  if (!__atomic_compare_exchange_n(&W.state, &z, 1, 0, __ATOMIC_ACQ_REL, __ATOMIC_RELAXED)) return;
  sigset_t all, old;
  sigfillset(&all);
  pthread_sigmask(SIG_BLOCK, &all, &old);  /* signals go to the application's threads */
  int was = b->capturing;
  b->capturing = 1;
  pthread_attr_t at;
  int err = pthread_attr_init(&at);
  if (!err) {
    pthread_attr_setdetachstate(&at, PTHREAD_CREATE_JOINABLE);
    pthread_attr_setstacksize(&at, 256 * 1024);
    __atomic_store_n(&W.state, 2, __ATOMIC_RELEASE);
    err = pthread_create(&W.thread, &at, writer_main, NULL);
    pthread_attr_destroy(&at);
  }
  b->capturing = was;
  pthread_sigmask(SIG_SETMASK, &old, NULL);
  if (err) {
    __atomic_store_n(&W.state, 3, __ATOMIC_RELEASE);
    _hpcmem_warn("trace: cannot start the writer thread (%s); threads write their own buffers", strerror(err));
  }
}

static void writer_stop(void) {
  if (__atomic_load_n(&W.state, __ATOMIC_ACQUIRE) != 2) { W.state = 0; return; }
  __atomic_store_n(&W.state, 4, __ATOMIC_RELEASE);
  __atomic_add_fetch(&W.seq, 1, __ATOMIC_RELEASE);
  syscall(SYS_futex, &W.seq, FUTEX_WAKE_PRIVATE, 1, NULL, NULL, 0);
  pthread_join(W.thread, NULL);
  W.state = 0;
}

/* ---- the event hook -------------------------------------------------- */

static inline __attribute__((always_inline)) void append(hmt_tbuf_t *b, unsigned tag, uint64_t t, uint64_t ptr, uint64_t old, uint64_t size,
                          uint64_t align, uint64_t stack, const hmt_stack_def_t *def) {
  uint64_t p = b->pos;
  if (__builtin_expect(POS_LEN(p) + RAW_MAX_WORDS(def ? def->n : 0) > b->cap, 0)) {
    owner_swap(b);
    p = b->pos;  /* entries recorded while the writer started came first */
  }
  uint64_t *const start = b->seg[POS_SEG(p)], *w = start + POS_LEN(p);
  if (def) {
    w[0] = ((uint64_t)HMT_REC_STACK << RAW_KSHIFT) | def->n;
    w[1] = def->first; w[2] = def->parent;
    memcpy(w + 3, b->frames, def->n * sizeof *w);
    w += 3 + def->n;
  }
  unsigned type = tag & HMT_TAG_TYPE;
  w[0] = ((uint64_t)tag << RAW_KSHIFT) | (t & RAW_TMASK);
  w[1] = ptr;
  if (type == HPCMEM_EV_FREE) w += 2;
  else {
    w[2] = size; w[3] = stack;
    if (type == HPCMEM_EV_MEMALIGN) { w[4] = align; w += 5; }
    else if (type == HPCMEM_EV_REALLOC) { w[4] = old; w += 5; }
    else w += 4;
  }
  __atomic_store_n(&b->pos, POS(POS_SEG(p), (size_t)(w - start)), __ATOMIC_RELEASE);
  /* the owner's own counter: a shared one would bounce between cores;
   * released after pos, so that whoever counts the event finds it */
  __atomic_store_n(&b->events, b->events + 1, __ATOMIC_RELEASE);
  if (__builtin_expect(G.final, 0)) partial_flush(b, 1);
}

__attribute__((noinline, optimize("no-omit-frame-pointer"))) void _hpcmem_trace_event(int kind, const void *ptr, size_t size,
                                                   const void *old_ptr, size_t align) {
  if (!__atomic_load_n(&_hpcmem_trace_enabled, __ATOMIC_ACQUIRE)) return;
  const void *from = __builtin_return_address(0);
  unsigned sys = ((kind & HPCMEM_EV_SYS) || t_lib > 0) ? HMT_TAG_SYS : 0;
  unsigned k = (unsigned)kind & HMT_TAG_TYPE;
  if (k < HPCMEM_EV_MALLOC || k > HPCMEM_EV_MEMALIGN || ((unsigned)kind & ~(HMT_TAG_TYPE | HPCMEM_EV_SYS))) return;
  hmt_tbuf_t *b = t_buf;
  if (t_inside) {
    if (b && b->capturing)
      append(b, k | HMT_TAG_SYS, clk_raw(), (uintptr_t)ptr, (uintptr_t)old_ptr, size, align, 0, NULL);
    else
      STAT_ADD(dropped, 1);
    return;
  }
  t_inside = 1;
  if (!b && !(b = tbuf_acquire())) { STAT_ADD(dropped, 1); t_inside = 0; return; }
  uint64_t stack = 0;
  hmt_stack_def_t def = {0, 0, 0};
  /* realloc to size 0 frees: no stack to keep */
  if (k != HPCMEM_EV_FREE && G.depth > 0 && !(k == HPCMEM_EV_REALLOC && !ptr)) {
    b->capturing = 1;
    stack = _hpcmem_stack_get(G.stack_cache ? b->cache : NULL, b->frames, b->slots, (uint32_t)G.depth, from, __builtin_frame_address(0), &def);
    b->capturing = 0;
    if (def.n) {
      STAT_ADD(stacks, 1);
      _hpcmem_tfile_check_modules(1);  /* a dlopen'ed object shows up in new stacks first */
    }
  }
  uint64_t t = clk_raw();
  if (__builtin_expect(W.state == 0, 0) && t > G.writer_after) writer_start(b);
  append(b, k | sys, t, (uintptr_t)ptr, (uintptr_t)old_ptr, size, align, stack, def.n ? &def : NULL);
  t_inside = 0;
}

/* ---- flushing -------------------------------------------------------- */

static void fill_stats(hpcmem_trace_stats_t *o) {
#define HMT_TRACE_STAT_(name, help) o->name = __atomic_load_n(&S.name, __ATOMIC_RELAXED);
  HMT_FLUSH_FIELDS(HMT_TRACE_STAT_)
#undef HMT_TRACE_STAT_
  for (hmt_tbuf_t *b = __atomic_load_n(&G.all, __ATOMIC_ACQUIRE); b; b = b->next)
    o->events += __atomic_load_n(&b->events, __ATOMIC_ACQUIRE);  /* the entries counted are published (append) */
  o->stacks = _hpcmem_stack_count();
  o->memory_bytes = _hpcmem_trace_alloc_bytes();
}

void _hpcmem_trace_get_stats(hpcmem_trace_stats_t *out) { fill_stats(out); }

const char *_hpcmem_trace_path(void) { return _hpcmem_tfile_path(); }

/* may_wait = 0: the flush of a signal handler, also that of _exit and exec
 * (_hpcmem_trace_leave), which may run in one */
static void flush_all(int reason, int may_wait) {
  if (!G.ready) return;
  int as_signal = !may_wait;
  int saved = t_inside;
  t_inside = 1;  /* no recording while we write */
  if (may_wait) _hpcmem_tfile_check_modules(1);
  /* from now on (EXIT, ABORT, a signal) each event is written as it comes:
   * set before the buffers are written, so that no event falls in between.
   * ABORT too: PMPI_Abort ends the process with _exit, whose flush
   * (_hpcmem_trace_leave) then finds the trace final and leaves the end
   * marker saying MPI_Abort */
  if (reason == HMT_FLUSH_EXIT || reason == HMT_FLUSH_ABORT || reason >= HMT_FLUSH_SIGNAL) G.final = 1;
  if (as_signal) {
    /* a signal that interrupted this thread's own write holds the file:
     * nothing can be written, and whoever holds a buffer's lock may be
     * waiting for the file -- do not wait for them */
    if (_hpcmem_tfile_held_by(_hpcmem_trace_tid())) { t_inside = saved; return; }
    sig_deadline = _hpcmem_prim_now_ns() + HMT_SIGNAL_WAIT_NS;
  }
  for (hmt_tbuf_t *b = G.all; b; b = b->next) partial_flush(b, may_wait);
  hpcmem_trace_stats_t st;
  fill_stats(&st);
  /* The marker counts events that must be in the file before it.  Other
   * threads went on recording meanwhile -- after EXIT, ABORT or a signal
   * each writes its events through itself (append) -- and one that
   * committed an event after its buffer was written above may still be
   * writing it when the process ends, which after a signal is as soon as
   * the handler returns: a C program allocating on four threads lost one
   * or two counted events in 4 of 20 runs killed by SIGTERM.  So the
   * buffers once more, each lock waited for as above. */
  for (hmt_tbuf_t *b = G.all; b; b = b->next) partial_flush(b, may_wait);
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
  if (as_signal) sig_deadline = 0;
  if (reason == HMT_FLUSH_EXIT && _hpcmem_opt(VERBOSE)) {
    uint64_t hits = 0, misses = 0;
    for (hmt_tbuf_t *b = G.all; b; b = b->next) _hpcmem_scache_counts(b->cache, &hits, &misses);
    _hpcmem_info("trace: %llu events, %llu stacks; stack cache %s: %llu hits, %llu captures", (unsigned long long)st.events,
                 (unsigned long long)st.stacks, G.stack_cache ? "on" : "off", (unsigned long long)hits,
                 (unsigned long long)misses);
  }
  t_inside = saved;
}

void _hpcmem_trace_flush_all(int reason) { flush_all(reason, reason < HMT_FLUSH_SIGNAL); }

/* _exit and exec are async-signal-safe, and a program may call them from a
 * handler that interrupted this thread inside the recorder (or the file's
 * write): so the flush is the one of a fatal signal, which never waits for
 * a lock this thread holds and for another's at most HMT_SIGNAL_WAIT_NS.
 * The writer thread may be coding a block meanwhile; then the compressor is
 * busy and the rest goes out uncompressed, as at a signal.  The pid is
 * asked of the kernel, not of a cache: a child of vfork (or of a clone
 * that shares memory) runs on this process's memory and the TLS of the
 * thread that called vfork, and a flush there would write the parent's
 * buffers, stamp its end marker and (EXIT) turn it to write-through, while
 * the parent goes on recording after the child is gone; if the parent had
 * written no block yet, the file would be opened in the child's copy of
 * the descriptor table and closed with it, and the parent's later blocks
 * written to whatever that number names in its own. */
void _hpcmem_trace_leave(int reason) {
  if (!G.ready || G.final || !__atomic_load_n(&_hpcmem_trace_enabled, __ATOMIC_ACQUIRE)) return;
  if ((int)syscall(SYS_getpid) != G.pid) return;
  int saved_errno = errno;
  flush_all(reason, 0);
  errno = saved_errno;
}

/* b's records go out and b is free for the next thread (its owner is done
 * with it: at its exit, or gone; t_inside set by the caller). */
static void tbuf_release(hmt_tbuf_t *b) {
  partial_flush(b, 1);
  /* the next owner starts at the front of a segment */
  _hpcmem_tlock(&b->lock, b->tid);
  b->done[POS_SEG(b->pos)] = 0;
  __atomic_store_n(&b->pos, POS(POS_SEG(b->pos), 0), __ATOMIC_RELEASE);
  _hpcmem_tlock_release(&b->lock);
  b->late = 0;
  __atomic_store_n(&b->in_use, 0, __ATOMIC_RELEASE);
}

void _hpcmem_trace_thread_exit(void) {
  hmt_tbuf_t *b = t_buf;
  if (!b) return;
  int saved = t_inside;
  t_inside = 1;
  t_buf = NULL;
  tbuf_release(b);
  t_inside = saved;
}

void _hpcmem_trace_thread_gone(int tid) {
  if (!G.ready) return;
  int saved = t_inside;
  t_inside = 1;
  /* only buffers taken after an exit hook: a buffer another thread takes
   * is in use before it carries that thread's id, and the kernel may give
   * tid to a new thread */
  for (hmt_tbuf_t *b = G.all; b; b = b->next)
    if (b != t_buf && __atomic_load_n(&b->in_use, __ATOMIC_ACQUIRE) && b->late && b->tid == tid) tbuf_release(b);
  t_inside = saved;
}

void _hpcmem_trace_set_rank(int rank, int size, int64_t clock_offset_ns) {
  if (!G.ready) return;
  hmt_file_identity_t id = {rank, size, clock_offset_ns, 1};
  _hpcmem_tfile_set_identity(&id);
  _hpcmem_trace_signals_install();
}

/* fork: the child keeps recording into a file of its own; what the
 * parent had buffered is the parent's to write.  The writer thread is not
 * in the child: the next hand-over starts one. */
static void after_fork_child(void) {
  t_tid = 0;  /* the parent's id, even with the trace stopped: it may start again here */
  G.pid = (int)syscall(SYS_getpid);  /* its _exit and exec flush its own trace */
  if (!G.ready) return;
  W.state = 0;
  W.seq = 0;
  G.writer_after = 0;  /* the child's first event starts its writer */
  for (hmt_tbuf_t *b = G.all; b; b = b->next) {
    b->lock.owner = 0;
    for (int i = 0; i < HMT_SEGS; i++) b->ready[i] = b->done[i] = 0;
    b->rows_len = 0; b->rows_count = 0;
    b->m4_open = 0;  /* the parent writes its block */
    b->chain = 0;  /* a new file */
    b->tail = POS_SEG(b->pos);
    b->pos = POS(b->tail, 0);
    b->events = 0;
    if (b != t_buf) b->in_use = b->late = 0;
    else b->tid = _hpcmem_trace_tid();
  }
  memset(&S, 0, sizeof S);
  CLK.lock.owner = 0;
  /* stack definitions went to the parent's file: define them again here */
  _hpcmem_stack_reset();
  _hpcmem_compress_after_fork_child();
  _hpcmem_tfile_after_fork_child();
}

void _hpcmem_trace_shutdown(void) {
  if (!G.ready) return;
  writer_stop();
  _hpcmem_trace_flush_all(HMT_FLUSH_EXPLICIT);
  __atomic_store_n(&_hpcmem_trace_enabled, 0, __ATOMIC_RELEASE);
  _hpcmem_trace_signals_uninstall();
  hmt_tbuf_t *b = G.all;
  while (b) {
    hmt_tbuf_t *n = b->next;
    _hpcmem_trace_free(b->model);
    _hpcmem_trace_free(b->live.t);
    m4_free(b);
    _hpcmem_trace_free(b);
    b = n;
  }
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
