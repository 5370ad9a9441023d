/* The segment API (include/hpcmem_seg.h).  Blocks of the interleaved and
 * shared segments count in the calling thread's statistics like any other
 * (so hpcmem_stats() covers every segment), and in their segment's own
 * counters (segment/segment.c); the private segment's figures are the rest. */
#include "config.h"
#include "api/internal.h"
#include "hpcmem.h"
#include "heap/group.h"
#include "segment/segment.h"
#include "trace/trace.h"
#include "hpcmem_trace_format.h"
#include "util/log.h"
#include "util/options.h"
#include <errno.h>
#include <malloc.h>
#include <stdlib.h>
#include <string.h>

#define EXPORT __attribute__((visibility("default")))

static const char *const seg_names[HPCMEM_SEG_COUNT] = {"private", "interleaved", "shared"};

EXPORT const char *hpcmem_seg_name(int seg) {
  return seg >= 0 && seg < HPCMEM_SEG_COUNT ? seg_names[seg] : NULL;
}

/* The segment plain malloc uses now, which is not always the one
 * HPCMEM_DEFAULT_SEGMENT names: alloc_routed (alloc.c) keeps malloc in
 * private memory while that segment cannot serve it (shared: before MPI_Init,
 * outside an MPI job, in a forked child; interleaved: when it could not be
 * made).  Same test as there, so the two cannot disagree. */
EXPORT int hpcmem_seg_default(void) {
  if (!_hpcmem_ready) _hpcmem_init();
  int seg = _hpcmem_default_seg;
  return seg == HPCMEM_SEG_PRIVATE || _hpcmem_seg_serves_malloc(seg) ? seg : HPCMEM_SEG_PRIVATE;
}

static int resolve(int seg) {
  if (seg == HPCMEM_SEG_DEFAULT) return hpcmem_seg_default();
  return seg >= 0 && seg < HPCMEM_SEG_COUNT ? seg : -1;
}

/* One warning per segment and reason, not one per request. */
static void explain(int seg, int err) {
  static int said[HPCMEM_SEG_COUNT][3];
  int k = err == EAGAIN ? 0 : err == ENODEV ? 1 : 2;
  if (err == ENOMEM || __atomic_exchange_n(&said[seg][k], 1, __ATOMIC_RELAXED)) return;
  if (err == EAGAIN)
    _hpcmem_warn("%s segment requested before MPI_Init: it is created collectively in MPI_Init "
                 "(this request fails with EAGAIN; allocate shared objects after MPI_Init)", seg_names[seg]);
  else if (err == ENODEV)
    _hpcmem_warn("%s segment is not available in this process (see the message at MPI_Init, "
                 "or the process was forked from the one that owns it); requests fail with ENODEV", seg_names[seg]);
}

void *_hpcmem_seg_alloc_for(hpcmem_tcache_t *t, int seg, size_t n, size_t align, int zero) {
  size_t usable = 0;
  if (n > (size_t)PTRDIFF_MAX) { errno = ENOMEM; return NULL; }   /* as glibc */
  void *p = _hpcmem_seg_alloc(seg, n, align, zero, &usable);
  if (!p) return NULL;
  t->n_alloc++;
  t->b_alloc += usable;
  t->st.large_alloc_count++;   /* the segment's SWAlloc tier */
  if (n > t->st.largest_alloc) t->st.largest_alloc = n;
  _hpcmem_stats_maybe_publish(t);
  return p;
}

/* An allocation of the API in segment seg (resolved), counted for the thread. */
static void *seg_alloc(int seg, size_t n, size_t align, int zero, int kind) {
  hpcmem_tcache_t *t = _hpcmem_thread_cache();
  if (!t) {
    /* libhpcmem did not start (api/alloc.c): private memory is the C library's */
    if (seg == HPCMEM_SEG_PRIVATE && _hpcmem_on_system()) {
      void *p = NULL;
      if (align > 16) { if (posix_memalign(&p, align, n) != 0) errno = ENOMEM; }
      else p = zero ? calloc(1, n) : malloc(n);
      return p;
    }
    errno = ENOMEM;
    return NULL;
  }
  void *p;
  if (seg == HPCMEM_SEG_PRIVATE) {
    p = _hpcmem_alloc_private(t, n, align > 16 ? align : 0, zero);
  } else if (!(p = _hpcmem_seg_alloc_for(t, seg, n, align, zero))) {
    explain(seg, errno);
    return NULL;
  }
  if (HPCMEM_UNLIKELY(_hpcmem_trace_enabled) && p && !t->in_call) _hpcmem_trace_event(kind, p, n, NULL, align);
  return p;
}

EXPORT void *hpcmem_malloc_seg(size_t size, int seg) {
  int s = resolve(seg);
  if (s < 0) { errno = EINVAL; return NULL; }
  return seg_alloc(s, size, 0, 0, HPCMEM_EV_MALLOC);
}

EXPORT void *hpcmem_calloc_seg(size_t count, size_t size, int seg) {
  int s = resolve(seg);
  if (s < 0) { errno = EINVAL; return NULL; }
  size_t n;
  if (__builtin_mul_overflow(count, size, &n)) { errno = ENOMEM; return NULL; }
  return seg_alloc(s, n, 0, 1, HPCMEM_EV_CALLOC);
}

EXPORT void *hpcmem_aligned_alloc_seg(size_t align, size_t size, int seg) {
  int s = resolve(seg);
  if (s < 0 || !align || (align & (align - 1))) { errno = EINVAL; return NULL; }
  return seg_alloc(s, size, align, 0, HPCMEM_EV_MEMALIGN);
}

EXPORT int hpcmem_seg_of(const void *p) {
  if (!p) return -EINVAL;
  if (!_hpcmem_ready) _hpcmem_init();
  if ((uintptr_t)p - (uintptr_t)_hpcmem_heaps.base < _hpcmem_heaps.size || _hpcmem_large_owns(&_hpcmem_large, p))
    return HPCMEM_SEG_PRIVATE;
  hpcmem_segment_t *s = _hpcmem_seg_holding(p);
  return s ? _hpcmem_seg_id(s) : -ENOENT;
}

EXPORT int hpcmem_free_seg(void *p, int seg) {
  if (!p) return 0;
  int s = resolve(seg);
  if (s < 0) {
    _hpcmem_warn("hpcmem_free_seg(%p, %d): unknown segment id (0 private, 1 interleaved, 2 shared); nothing freed", p, seg);
    return -EINVAL;
  }
  int have = hpcmem_seg_of(p);
  if (have != s) {
    if (have >= 0)
      _hpcmem_warn("hpcmem_free_seg(%p, %s): the block belongs to the %s segment; nothing freed "
                   "(free() finds the segment itself)", p, seg_names[s], seg_names[have]);
    else
      _hpcmem_warn("hpcmem_free_seg(%p, %s): not a block of any libhpcmem segment; nothing freed", p, seg_names[s]);
    return -EINVAL;
  }
  hpcmem_tcache_t *t = _hpcmem_thread_cache();
  if (!t) return -ENOMEM;
  if (s == HPCMEM_SEG_SHARED) {
    hpcmem_segment_t *sg = &_hpcmem_segs[s];
    if (_hpcmem_seg_part_of(sg, p) != sg->node_rank) {
      _hpcmem_warn("hpcmem_free_seg(%p, shared): the block is in the part of node rank %d; "
                   "only the rank that allocated it may free it; nothing freed", p, _hpcmem_seg_part_of(sg, p));
      return -EPERM;
    }
  }
  uint64_t errors = t->st.error_count;
  free(p);
  return t->st.error_count != errors ? -EINVAL : 0;
}

EXPORT void *hpcmem_realloc_seg(void *p, size_t size, int seg) {
  int s = resolve(seg);
  if (s < 0) { errno = EINVAL; return NULL; }
  if (!p) return hpcmem_malloc_seg(size, s);
  int have = hpcmem_seg_of(p);
  if (have == s) {                   /* realloc keeps a block in its segment, or fails */
    hpcmem_tcache_t *t = _hpcmem_thread_cache();
    if (!t) { errno = ENOMEM; return NULL; }
    t->keep_seg++;
    void *q = realloc(p, size ? size : 1);
    t->keep_seg--;
    return q;
  }
  size_t old = malloc_usable_size(p);
  if (!old) {
    _hpcmem_warn("hpcmem_realloc_seg(%p, %zu, %s): not a live libhpcmem block; left untouched", p, size, seg_names[s]);
    errno = EINVAL;
    return NULL;
  }
  void *q = hpcmem_malloc_seg(size, s);
  if (!q) return NULL;
  memcpy(q, p, old < size ? old : size);
  free(p);
  return q;
}

/* ---- the hooks of the malloc family (alloc.c) ---- */

int _hpcmem_seg_free_block(hpcmem_tcache_t *t, hpcmem_segment_t *s, void *p, const char **why) {
  size_t usable = 0;
  int rc = _hpcmem_seg_free(s, p, &usable);
  if (rc == -EPERM) { *why = "block of another rank's part of the node-shared segment (only the rank that allocated it may free it)"; return -1; }
  if (rc == -EALREADY) { *why = "double free"; return -1; }
  if (rc < 0) { *why = "not the start of a live block of the interleaved or shared segment"; return -1; }
  t->n_free++;
  t->b_freed += usable;
  t->st.large_free_count++;
  _hpcmem_stats_plain_clear();   /* the other segments' live bytes fell: the private peak's room shrank */
  return 0;
}

/* ---- introspection ---- */

EXPORT int hpcmem_seg_info(int seg, hpcmem_seg_info_t *out) {
  int s = resolve(seg);
  if (s < 0 || !out) return -EINVAL;
  if (!_hpcmem_ready) _hpcmem_init();
  memset(out, 0, sizeof *out);
  out->seg = s;
  out->node_ranks = 1;
  if (s == HPCMEM_SEG_PRIVATE) {
    out->available = 1;
    out->base = _hpcmem_heaps.base;
    out->size = _hpcmem_heaps.size;
    out->own_base = out->base;
    out->own_size = out->size;
    return 0;
  }
  if (s == HPCMEM_SEG_INTERLEAVED) _hpcmem_seg_ready(s);
  hpcmem_segment_t *sg = &_hpcmem_segs[s];
  out->available = __atomic_load_n(&sg->state, __ATOMIC_ACQUIRE) == HPCMEM_SEG_READY && _hpcmem_seg_ready(s) == 0;
  if (__atomic_load_n(&sg->state, __ATOMIC_ACQUIRE) != HPCMEM_SEG_READY) return 0;
  out->process_local = sg->process_local;
  out->node_ranks = sg->node_ranks;
  out->node_rank = sg->node_rank;
  out->base = _hpcmem_seg_range[s].base;
  out->size = _hpcmem_seg_range[s].size;
  out->own_base = sg->own;
  out->own_size = sg->own_size;
  memcpy(out->nodes, sg->nodes, sizeof out->nodes);
  return 0;
}

/* hpcmem_seg_stats(); with nowait for the summary of a fatal signal
 * (_hpcmem_seg_stats_nowait): 1 when approximate. */
static int seg_stats_take(int s, hpcmem_seg_stats_t *out, int nowait) {
  memset(out, 0, sizeof *out);
  if (s != HPCMEM_SEG_PRIVATE) {
    hpcmem_segment_t *sg = &_hpcmem_segs[s];
    int64_t live = __atomic_load_n(&sg->live, __ATOMIC_RELAXED);
    out->current_bytes = live > 0 ? (uint64_t)live : 0;
    out->peak_bytes = (uint64_t)__atomic_load_n(&sg->peak, __ATOMIC_RELAXED);
    out->alloc_count = __atomic_load_n(&sg->allocs, __ATOMIC_RELAXED);
    out->free_count = __atomic_load_n(&sg->frees, __ATOMIC_RELAXED);
    out->bytes_allocated = __atomic_load_n(&sg->bytes_allocated, __ATOMIC_RELAXED);
    out->bytes_freed = __atomic_load_n(&sg->bytes_freed, __ATOMIC_RELAXED);
    out->reserved_bytes = __atomic_load_n(&sg->state, __ATOMIC_ACQUIRE) == HPCMEM_SEG_READY ? sg->own_size : 0;
    return 0;
  }
  /* private = the process totals less the other segments */
  hpcmem_stats_t all;
  int approx = nowait ? _hpcmem_stats_nowait(&all) : hpcmem_stats(&all);
  hpcmem_seg_stats_t o[HPCMEM_SEG_COUNT];
  for (int i = HPCMEM_SEG_INTERLEAVED; i < HPCMEM_SEG_COUNT; i++) seg_stats_take(i, &o[i], nowait);
#define PRIVATE_PART_(field, total) \
  out->field = total - o[HPCMEM_SEG_INTERLEAVED].field - o[HPCMEM_SEG_SHARED].field; \
  if ((int64_t)out->field < 0) out->field = 0;
  PRIVATE_PART_(current_bytes, all.current_bytes)
  PRIVATE_PART_(alloc_count, all.alloc_count)
  PRIVATE_PART_(free_count, all.free_count)
  PRIVATE_PART_(bytes_allocated, all.bytes_allocated)
  PRIVATE_PART_(bytes_freed, all.bytes_freed)
#undef PRIVATE_PART_
  out->peak_bytes = _hpcmem_stats_private_peak();
  if (out->peak_bytes < out->current_bytes) out->peak_bytes = out->current_bytes;
  out->reserved_bytes = _hpcmem_heaps.size + (size_t)(_hpcmem_large.end - _hpcmem_large.base);
  return approx;
}

EXPORT int hpcmem_seg_stats(int seg, hpcmem_seg_stats_t *out) {
  int s = resolve(seg);
  if (s < 0 || !out) return -EINVAL;
  seg_stats_take(s, out, 0);
  return 0;
}

__attribute__((noinline, cold)) int _hpcmem_seg_stats_nowait(int seg, hpcmem_seg_stats_t *out) {
  int s = resolve(seg);
  if (s < 0 || !out) return -EINVAL;
  return seg_stats_take(s, out, 1);
}

EXPORT int hpcmem_seg_offset(const void *p, uint64_t *off) {
  const hpcmem_seg_range_t *r = &_hpcmem_seg_range[HPCMEM_SEG_SHARED];
  if (!off || !p) return -EINVAL;
  char *base = __atomic_load_n(&r->base, __ATOMIC_ACQUIRE);
  if (!base || (uintptr_t)p - (uintptr_t)base >= r->size) return -EINVAL;
  *off = (uint64_t)((const char *)p - base);
  return 0;
}

EXPORT void *hpcmem_seg_pointer(uint64_t off) {
  const hpcmem_seg_range_t *r = &_hpcmem_seg_range[HPCMEM_SEG_SHARED];
  char *base = __atomic_load_n(&r->base, __ATOMIC_ACQUIRE);
  if (!base) { errno = EAGAIN; return NULL; }
  if (off >= r->size) { errno = EINVAL; return NULL; }
  return base + off;
}
