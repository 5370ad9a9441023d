/* Statistics: always on, cheap.  Threads count in their caches without
 * atomics and publish their live-bytes drift to the process total once it
 * exceeds HPCMEM_PUBLISH_BYTES (large blocks move it past that at once), so
 * the high-water mark is exact for large blocks and within 64 KiB per thread
 * for small ones; a single-threaded process publishes only what moves the
 * peak or the timeline (see _hpcmem_stats_drifted), and its slow paths
 * publish with a mere addition while the total stays in the plain range
 * (plain_set; _hpcmem_stats_light in internal.h).  The timeline keeps
 * samples of the total for the report. */
#include "config.h"
#include "api/internal.h"
#include "heap/single.h"
#include "hpcmem.h"
#include "prim/prim.h"
#include "segment/segment.h"
#include "util/lock.h"
#include <errno.h>
#include <inttypes.h>
#include <string.h>

#define EXPORT __attribute__((visibility("default")))
#define TIMELINE_MAX 4096

static int64_t peak;
static int64_t private_peak;     /* of current less the other segments' live bytes */
static uint64_t peak_time, start_time;
static uint64_t errors_without_cache;

static hpcmem_lock_t timeline_lock = HPCMEM_LOCK_INIT;
static hpcmem_sample_t timeline[TIMELINE_MAX];
static size_t timeline_n;
static int64_t timeline_last;
static uint64_t timeline_step_shift;   /* halvings done when the buffer filled */
static int last_was_peak;
static uint64_t step_tick;             /* coarse clock of the last step samples ... */
static unsigned step_tick_n;           /* ... and how many of them in that tick */
#define STEP_SAMPLES_PER_TICK 2

void _hpcmem_stats_init(void) {
  start_time = _hpcmem_prim_now_ns();
  _hpcmem_prim_ticks_init();
}

void _hpcmem_stats_add_error(void) { __atomic_add_fetch(&errors_without_cache, 1, __ATOMIC_RELAXED); }

/* The published live bytes of the process (current), and the plain range
 * (internal.h, _hpcmem_stats_light). */
hpcmem_totals_t _hpcmem_totals = { 0, INT64_MIN, 0 };

/* Only written when set: once a process has threads the range stays empty
 * (only a single-threaded process sets it), and its line is only read. */
static inline void plain_clear(void) {
  if (__atomic_load_n(&_hpcmem_totals.lo, __ATOMIC_RELAXED) == INT64_MIN) return;
  __atomic_store_n(&_hpcmem_totals.lo, INT64_MIN, __ATOMIC_RELAXED);
  __atomic_store_n(&_hpcmem_totals.span, 0, __ATOMIC_RELAXED);
}
void _hpcmem_stats_plain_clear(void) { plain_clear(); }

/* Keep every other sample (and the peak), so the buffer covers the whole run. */
static void timeline_thin(void) {
  size_t k = 0;
  for (size_t i = 0; i < timeline_n; i++)
    if (i % 2 == 0 || (int64_t)timeline[i].bytes == peak) timeline[k++] = timeline[i];
  timeline_n = k;
  timeline_step_shift++;
}

/* The timeline takes a sample when the total moved by a step since the last
 * one; a new peak always shows: less than a step above a sample that was the
 * peak too, it raises that sample in place (a slow climb costs one slot per
 * step), else it is a sample of its own.  So the maximum is always present
 * and no plateau is lost.  timeline_wants: has the total moved by a step? */
static int64_t timeline_step(void) {
  int64_t step = peak >> 6;
  if (step < ((int64_t)1 << 20)) step = (int64_t)1 << 20;
  return step << timeline_step_shift;
}
static int timeline_wants(int64_t bytes) {
  int64_t step = timeline_step(), d = bytes - timeline_last;
  return d >= step || d <= -step;
}

/* Step samples (not peaks) are limited to a few per clock tick: a block of
 * several steps allocated and freed in a loop moved the total by a step on
 * every call, and each sample costs the exact clock and the timeline lock
 * (half the time of a 4 MiB malloc+free pair).  A step left out is kept as
 * the pending sample (the latest one wins) with the tick's time, and goes
 * into the timeline before the next sample or when the timeline is read, so
 * the timeline still ends each tick at the level the total reached (a
 * rank's drop must not go missing: the job's peak of the sum adds the
 * ranks' timelines).  Racy on purpose: a tick may get a sample more, and a
 * pending sample may pair one thread's total with another's tick. */
static struct { uint64_t t; int64_t bytes; int set; } pend;

static int step_allowed(uint64_t tick) {
  if (tick != __atomic_load_n(&step_tick, __ATOMIC_RELAXED)) {
    __atomic_store_n(&step_tick, tick, __ATOMIC_RELAXED);
    __atomic_store_n(&step_tick_n, 1, __ATOMIC_RELAXED);
    return 1;
  }
  unsigned n = __atomic_load_n(&step_tick_n, __ATOMIC_RELAXED) + 1;
  if (n > STEP_SAMPLES_PER_TICK) return 0;
  __atomic_store_n(&step_tick_n, n, __ATOMIC_RELAXED);
  return 1;
}

static void pend_store(uint64_t tick, int64_t bytes) {
  __atomic_store_n(&pend.t, tick, __ATOMIC_RELAXED);
  __atomic_store_n(&pend.bytes, bytes, __ATOMIC_RELAXED);
  __atomic_store_n(&pend.set, 1, __ATOMIC_RELEASE);
}

/* The plain range from the peaks and the timeline as they are (single-
 * threaded): the totals that raise neither peak (of the total, of the
 * private segment) and are less than a timeline step from its last sample
 * -- or from the pending one, which stands for the tick's level: while
 * samples wait for the next tick, a total that stays within a step of it
 * leaves it as it is (the timeline's resolution is a step) -- where a
 * publish has nothing to do but to add. */
static void plain_set(void) {
  int64_t last = __atomic_load_n(&pend.set, __ATOMIC_ACQUIRE) ? __atomic_load_n(&pend.bytes, __ATOMIC_RELAXED) : timeline_last;
  int64_t step = timeline_step(), hi = peak, lo = last - step + 1;
  int64_t priv = private_peak + __atomic_load_n(&_hpcmem_seg_other_live, __ATOMIC_RELAXED);
  if (hi > priv) hi = priv;
  if (hi > last + step - 1) hi = last + step - 1;
  if (hi < lo) { plain_clear(); return; }
  _hpcmem_totals.lo = lo;
  _hpcmem_totals.span = (uint64_t)(hi - lo);
}

/* timeline_lock held */
static void append_locked(uint64_t t, int64_t bytes, int new_peak) {
  plain_clear();                       /* timeline_last and the step move */
  if (new_peak && last_was_peak && timeline_n && !timeline_wants(bytes)) {
    /* a peak a little above the last one raises that sample in place and
     * keeps its time: moving it would drop the plateau before it from the
     * step function (the value is over-estimated there by less than a step) */
    timeline[timeline_n - 1].bytes = bytes > 0 ? (uint64_t)bytes : 0;
  } else {
    if (timeline_n == TIMELINE_MAX) timeline_thin();
    timeline[timeline_n].t_ns = t;
    timeline[timeline_n].bytes = bytes > 0 ? (uint64_t)bytes : 0;
    timeline_n++;
    timeline_last = bytes;
  }
  last_was_peak = new_peak;
}

/* timeline_lock held: the pending sample goes in, never before the last one */
static void commit_pending_locked(void) {
  if (!__atomic_load_n(&pend.set, __ATOMIC_ACQUIRE)) return;
  __atomic_store_n(&pend.set, 0, __ATOMIC_RELAXED);
  uint64_t t = __atomic_load_n(&pend.t, __ATOMIC_RELAXED);
  if (timeline_n && t < timeline[timeline_n - 1].t_ns) t = timeline[timeline_n - 1].t_ns;
  append_locked(t, __atomic_load_n(&pend.bytes, __ATOMIC_RELAXED), 0);
}

/* Add a sample (a new peak, or a step: the caller asked timeline_wants). */
static void timeline_add(uint64_t t, int64_t bytes, int new_peak) {
  _hpcmem_lock_st(&timeline_lock);
  commit_pending_locked();
  append_locked(t, bytes, new_peak);
  _hpcmem_unlock_st(&timeline_lock);
}

/* Settling again what _hpcmem_stats_maybe_publish settled cost ~27
 * instructions a publish, two a pair in the residents benchmark (whose
 * every large call publishes). */
void _hpcmem_stats_publish(hpcmem_tcache_t *t) {
  _hpcmem_tcache_settle(t);
  _hpcmem_stats_publish_settled(t);
}

void _hpcmem_stats_publish_settled(hpcmem_tcache_t *t) {
  int64_t mine = (int64_t)(t->b_alloc - t->b_freed);
  int64_t d = mine - t->published;
  t->published = mine;
  _hpcmem_tcache_set_budgets(t, 0);
  int64_t now, old = __atomic_load_n(&peak, __ATOMIC_RELAXED);
  int new_peak = 0;
  if (_hpcmem_single_threaded()) {           /* no other thread: plain loads and stores (heap/single.h) */
    now = __atomic_load_n(&_hpcmem_totals.current, __ATOMIC_RELAXED) + d;
    __atomic_store_n(&_hpcmem_totals.current, now, __ATOMIC_RELAXED);
    if (now > old) { __atomic_store_n(&peak, now, __ATOMIC_RELAXED); new_peak = 1; }
  } else {
    now = __atomic_add_fetch(&_hpcmem_totals.current, d, __ATOMIC_RELAXED);
    while (now > old) {
      if (__atomic_compare_exchange_n(&peak, &old, now, 1, __ATOMIC_RELAXED, __ATOMIC_RELAXED)) { new_peak = 1; break; }
    }
  }
  int64_t priv = now - __atomic_load_n(&_hpcmem_seg_other_live, __ATOMIC_RELAXED);
  int64_t pold = __atomic_load_n(&private_peak, __ATOMIC_RELAXED);
  while (priv > pold && !__atomic_compare_exchange_n(&private_peak, &pold, priv, 1, __ATOMIC_RELAXED, __ATOMIC_RELAXED)) {
  }
  /* the clock only when the peak moved or the timeline takes a sample:
   * every large block publishes, and the clock is not cheap on every machine */
  if (new_peak) {
    uint64_t ts = _hpcmem_prim_now_ns();
    __atomic_store_n(&peak_time, ts, __ATOMIC_RELAXED);
    timeline_add(ts, now, 1);
  } else if (timeline_wants(now)) {
    uint64_t tick = _hpcmem_coarse_now_ns();
    if (step_allowed(tick)) timeline_add(_hpcmem_prim_now_ns(), now, 0);
    else pend_store(tick, now);
  }
  if (_hpcmem_single_threaded()) plain_set();   /* the peaks and the timeline as they are now */
}


/* In a single-threaded process the published total plus the thread's
 * unpublished change is the exact total, so a change that raises neither
 * peak (of the total, of the private segment) and moves the total by less
 * than a timeline step needs no publishing: hpcmem_stats adds what threads
 * did not publish.  A large malloc+free pair of 128 KiB published twice,
 * 22 % of its time.  The change kept back stays under HPCMEM_QUIET_DRIFT: when the
 * process starts a second thread (which may then publish onto a total
 * without it), the first thread's next call that moves its live bytes by
 * HPCMEM_PUBLISH_BYTES publishes it. */
void _hpcmem_stats_drifted(hpcmem_tcache_t *t) {
  if (_hpcmem_single_threaded()) {
    int64_t d = (int64_t)(t->b_alloc - t->b_freed) - t->published;
    int64_t now = __atomic_load_n(&_hpcmem_totals.current, __ATOMIC_RELAXED) + d;
    if (d > -HPCMEM_QUIET_DRIFT && d < HPCMEM_QUIET_DRIFT && now <= __atomic_load_n(&peak, __ATOMIC_RELAXED) &&
        now - __atomic_load_n(&_hpcmem_seg_other_live, __ATOMIC_RELAXED) <= __atomic_load_n(&private_peak, __ATOMIC_RELAXED) &&
        !timeline_wants(now)) {
      _hpcmem_tcache_set_budgets(t, 0);   /* the fast paths get their usual room around it */
      if (_hpcmem_totals.lo == INT64_MIN) plain_set();
      return;
    }
  }
  _hpcmem_stats_publish_settled(t);    /* the caller settled */
}

/* The large-block tiers: the process's and those of the segments in use
 * (interleaved, shared), whose blocks are all theirs.  Not the shared
 * segment in a forked child: its memory is the parent's, its records a stale
 * copy (a trim there gave back blocks the parent had allocated again). */
int _hpcmem_large_tiers(hpcmem_large_t *tiers[HPCMEM_SEG_COUNT + 1]) {
  int n = 0;
  tiers[n++] = &_hpcmem_large;
  for (int i = HPCMEM_SEG_INTERLEAVED; i < HPCMEM_SEG_COUNT; i++)
    if (__atomic_load_n(&_hpcmem_segs[i].state, __ATOMIC_ACQUIRE) == HPCMEM_SEG_READY && _hpcmem_seg_ready(i) == 0)
      tiers[n++] = &_hpcmem_segs[i].tier;
  return n;
}

/* hpcmem_stats(), or with nowait its reading for the summary of a fatal
 * signal (_hpcmem_stats_nowait): 1 when a figure is approximate. */
static int stats_take(hpcmem_stats_t *out, int nowait) {
  int approx = 0;
  if (!_hpcmem_ready) _hpcmem_init();
  memset(out, 0, sizeof *out);
  uint64_t unpublished = 0;
  approx |= _hpcmem_tcache_merge_stats(out, &unpublished, nowait ? HPCMEM_SIGNAL_WAIT_NS : 0);
  int64_t cur = __atomic_load_n(&_hpcmem_totals.current, __ATOMIC_RELAXED) + (int64_t)unpublished;
  out->current_bytes = cur > 0 ? (uint64_t)cur : 0;
  int64_t pk = __atomic_load_n(&peak, __ATOMIC_RELAXED);
  out->peak_bytes = pk > cur ? (uint64_t)pk : out->current_bytes;
  out->peak_time_ns = pk > cur ? __atomic_load_n(&peak_time, __ATOMIC_RELAXED) : _hpcmem_prim_now_ns();
  out->alloc_time_ns = _hpcmem_prim_ticks_to_ns(out->alloc_time_ns);
  out->small_alloc_count = out->alloc_count - out->large_alloc_count;
  out->small_free_count = out->free_count - out->large_free_count;
  out->error_count += __atomic_load_n(&errors_without_cache, __ATOMIC_RELAXED);
  uint64_t small_mapped = 0, small_free = 0;
  for (unsigned i = 0; i < _hpcmem_heaps.count; i++) {
    small_mapped += __atomic_load_n(&_hpcmem_heaps.heap[i].mapped_bytes, __ATOMIC_RELAXED);
    small_free += __atomic_load_n(&_hpcmem_heaps.heap[i].free_small_bytes, __ATOMIC_RELAXED) +
                  __atomic_load_n(&_hpcmem_heaps.heap[i].stash_bytes, __ATOMIC_RELAXED);
  }
  out->mapped_bytes = small_mapped;
  out->retained_bytes += small_free;   /* the thread caches' part is in already */
  hpcmem_large_t *tiers[HPCMEM_SEG_COUNT + 1];
  for (int n = _hpcmem_large_tiers(tiers), i = 0; i < n; i++) {   /* the segments' tiers too */
    hpcmem_large_stats_t ls;
    if (nowait) approx |= _hpcmem_large_stats_nowait(tiers[i], &ls, HPCMEM_SIGNAL_WAIT_NS);
    else _hpcmem_large_stats(tiers[i], &ls);
    out->mapped_bytes += ls.mapped_bytes;
    out->retained_bytes += ls.retained_bytes;
    out->decayed_bytes += ls.decayed_bytes;
  }
  return approx;
}

EXPORT int hpcmem_stats(hpcmem_stats_t *out) {
  if (!out) return -EINVAL;
  stats_take(out, 0);
  return 0;
}

/* ---- for the summary of a fatal signal ------------------------------------
 * Its handler may have interrupted the holder of a lock these readers take:
 * its own thread, crashed inside a large free or hit by SIGTERM there, which
 * never lets go (the summary spun until its watchdog ended the process
 * without one).  So they wait HPCMEM_SIGNAL_WAIT_NS at most for a lock
 * -- another thread's hold is over by then -- and else read without it, and
 * say so: a figure may then be off by the operation in progress.
 * hpcmem_stats() and hpcmem_timeline() keep waiting and stay exact.  The
 * same holds for the thread caches' registry lock (a thread holds it while it
 * starts or ends) and, in a single-threaded process, for the mark its locks
 * leave (heap/single.h). */
HPCMEM_NOINLINE __attribute__((cold)) int _hpcmem_stats_nowait(hpcmem_stats_t *out) { return stats_take(out, 1); }

uint64_t _hpcmem_stats_private_peak(void) {
  int64_t v = __atomic_load_n(&private_peak, __ATOMIC_RELAXED);
  return v > 0 ? (uint64_t)v : 0;
}

EXPORT int hpcmem_stats_reset_peak(void) {
  hpcmem_stats_t s;
  hpcmem_stats(&s);
  __atomic_store_n(&peak, (int64_t)s.current_bytes, __ATOMIC_RELAXED);
  plain_clear();
  __atomic_store_n(&peak_time, _hpcmem_prim_now_ns(), __ATOMIC_RELAXED);
  _hpcmem_lock_st(&timeline_lock);
  last_was_peak = 0;            /* the old peak's sample stays in the timeline */
  _hpcmem_unlock_st(&timeline_lock);
  return 0;
}

EXPORT int hpcmem_stats_print(FILE *out, const hpcmem_stats_t *s) {
  if (!out || !s) return -EINVAL;
#define HPCMEM_PRINT_(name, kind, help) fprintf(out, "%-20s %" PRIu64 "\n", #name, s->name);
  HPCMEM_STATS_FIELDS(HPCMEM_PRINT_)
#undef HPCMEM_PRINT_
  return 0;
}

EXPORT size_t hpcmem_timeline(hpcmem_sample_t *out, size_t max) {
  if (!_hpcmem_ready) _hpcmem_init();
  _hpcmem_lock_st(&timeline_lock);
  commit_pending_locked();
  size_t n = timeline_n;
  if (out) memcpy(out, timeline, (n < max ? n : max) * sizeof *out);
  _hpcmem_unlock_st(&timeline_lock);
  return n;
}

/* hpcmem_timeline() for the summary of a fatal signal (above): without the
 * lock, the pending sample stays out (committing it writes) and the copy may
 * meet a sample being added or the buffer being thinned; *approx set then. */
HPCMEM_NOINLINE __attribute__((cold)) size_t _hpcmem_timeline_nowait(hpcmem_sample_t *out, size_t max, int *approx) {
  if (!_hpcmem_ready) _hpcmem_init();
  int held = _hpcmem_lock_within_st(&timeline_lock, HPCMEM_SIGNAL_WAIT_NS);
  if (held) commit_pending_locked();
  else *approx = 1;
  size_t n = __atomic_load_n(&timeline_n, __ATOMIC_RELAXED);
  if (n > TIMELINE_MAX) n = TIMELINE_MAX;
  if (out) memcpy(out, timeline, (n < max ? n : max) * sizeof *out);
  if (held) _hpcmem_unlock_st(&timeline_lock);
  return n;
}

EXPORT uint64_t hpcmem_clock_ns(void) { return _hpcmem_prim_now_ns(); }

EXPORT uint64_t hpcmem_start_ns(void) {
  if (!_hpcmem_ready) _hpcmem_init();
  return start_time;
}
