/* The GNU extensions of the malloc family: mallinfo, mallinfo2, malloc_trim,
 * malloc_stats, malloc_info and mallopt.  Without them a program that asks
 * glibc's allocator how much it holds (many HPC codes print mallinfo's
 * figures) would read glibc's empty arena, and malloc_trim would trim it.
 * None of these is on a fast path; docs/allocator.md says how glibc's fields
 * and parameters map onto libhpcmem. */
#include "config.h"
#include "api/internal.h"
#include "heap/group.h"
#include "heap/sizeclass.h"
#include "hpcmem.h"
#include "prim/prim.h"
#include "segment/segment.h"
#include "util/log.h"
#include "util/options.h"
#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <malloc.h>
#include <stdio.h>
#include <string.h>

#define EXPORT __attribute__((visibility("default")))

#ifndef HAVE_STRUCT_MALLINFO2
/* glibc before 2.33: mallinfo only; the same fields, wide, for it */
struct mallinfo2 {
  size_t arena, ordblks, smblks, hblks, hblkhd, usmblks, fsmblks, uordblks, fordblks, keepcost;
};
#endif

/* What mallinfo2, malloc_stats and malloc_info report, in glibc's terms. */
struct gnu_totals {
  hpcmem_stats_t st;
  size_t small_mapped;              /* the group heaps' spans and direct runs */
  size_t large_mapped, large_live, large_blocks, large_free_blocks, large_free, large_retained;
  size_t trimmable;                 /* what malloc_trim would give back now */
};

static void totals(struct gnu_totals *g) {
  memset(g, 0, sizeof *g);
  hpcmem_stats(&g->st);             /* initialises the library if needed */
  for (unsigned i = 0; i < _hpcmem_heaps.count; i++) {
    hpcmem_heap_t *h = &_hpcmem_heaps.heap[i];
    g->small_mapped += __atomic_load_n(&h->mapped_bytes, __ATOMIC_RELAXED);
    g->trimmable += __atomic_load_n(&h->empty_bytes, __ATOMIC_RELAXED) +
                    __atomic_load_n(&h->dirty_bytes, __ATOMIC_RELAXED);
  }
  hpcmem_large_t *tiers[HPCMEM_SEG_COUNT + 1];
  for (int n = _hpcmem_large_tiers(tiers), i = 0; i < n; i++) {
    hpcmem_large_stats_t ls;
    _hpcmem_large_stats(tiers[i], &ls);
    g->large_mapped += ls.mapped_bytes;
    g->large_live += ls.live_bytes;
    g->large_blocks += ls.live_blocks;
    g->large_free_blocks += ls.free_blocks;
    g->large_free += ls.free_bytes;
    g->large_retained += ls.retained_bytes;
  }
  g->trimmable += g->large_retained;
}

/* glibc's fields: arena = uordblks + fordblks is the memory held outside the
 * large tiers' live blocks (hblkhd), so uordblks + hblkhd is what is in use
 * and arena + hblkhd what libhpcmem holds, as programs add them up. */
static struct mallinfo2 info_of(const struct gnu_totals *g) {
  struct mallinfo2 m;
  memset(&m, 0, sizeof m);          /* smblks, usmblks, fsmblks: no fastbins */
  size_t in_use = g->st.current_bytes > g->large_live ? g->st.current_bytes - g->large_live : 0;
  m.arena = g->small_mapped + g->large_retained;
  m.uordblks = in_use < m.arena ? in_use : m.arena;
  m.fordblks = m.arena - m.uordblks;
  m.ordblks = g->large_free_blocks;
  m.hblks = g->large_blocks;
  m.hblkhd = g->large_live;
  m.keepcost = g->trimmable;
  return m;
}

static struct mallinfo2 info_now(void) {
  struct gnu_totals g;
  totals(&g);
  return info_of(&g);
}

#ifdef HAVE_STRUCT_MALLINFO2
EXPORT struct mallinfo2 mallinfo2(void) { return info_now(); }
#endif

static int clamp_int(size_t v) { return v > INT_MAX ? INT_MAX : (int)v; }

/* The int fields of the old interface saturate at INT_MAX (glibc's wrap). */
EXPORT struct mallinfo mallinfo(void) {
  struct mallinfo2 m2 = info_now();
  struct mallinfo m;
  m.arena = clamp_int(m2.arena);
  m.ordblks = clamp_int(m2.ordblks);
  m.smblks = clamp_int(m2.smblks);
  m.hblks = clamp_int(m2.hblks);
  m.hblkhd = clamp_int(m2.hblkhd);
  m.usmblks = clamp_int(m2.usmblks);
  m.fsmblks = clamp_int(m2.fsmblks);
  m.uordblks = clamp_int(m2.uordblks);
  m.fordblks = clamp_int(m2.fordblks);
  m.keepcost = clamp_int(m2.keepcost);
  return m;
}

/* The calling thread's cached objects go back to their spans, every empty
 * span to its heap's tree and its pages to the system, and every free page
 * of the large tiers too, however young (decay would wait HPCMEM_DECAY_MS).
 * Other threads' caches are theirs.  pad is glibc's room to keep at the top
 * of its heap: libhpcmem has no top.  1 when memory was given back. */
EXPORT int malloc_trim(size_t pad) {
  (void)pad;
  if (!_hpcmem_ready) _hpcmem_init();
  hpcmem_tcache_t *t = _hpcmem_tc;
  if (t != &_hpcmem_tcache_none && t->heap) _hpcmem_tcache_trim(t);
  uint64_t given = 0;
  for (unsigned i = 0; i < _hpcmem_heaps.count; i++) given += _hpcmem_heap_trim(&_hpcmem_heaps.heap[i]);
  hpcmem_large_t *tiers[HPCMEM_SEG_COUNT + 1];
  uint64_t now = _hpcmem_coarse_now_ns();
  for (int n = _hpcmem_large_tiers(tiers), i = 0; i < n; i++) {
    hpcmem_large_stats_t before, after;
    _hpcmem_large_stats(tiers[i], &before);
    _hpcmem_large_decay(tiers[i], now, 1);
    _hpcmem_large_stats(tiers[i], &after);
    given += after.decayed_bytes - before.decayed_bytes;
  }
  return given > 0;
}

/* glibc prints "system bytes" and "in use bytes" per arena and in total;
 * libhpcmem per tier, then every statistic by name. */
EXPORT void malloc_stats(void) {
  struct gnu_totals g;
  totals(&g);
  struct mallinfo2 m = info_of(&g);
  hpcmem_large_t *tiers[HPCMEM_SEG_COUNT + 1];
  fprintf(stderr,
          "libhpcmem small tier (%u group heap%s):\n"
          "system bytes     = %10zu\n"
          "in use bytes     = %10zu\n"
          "large-block tier%s:\n"
          "system bytes     = %10zu\n"
          "in use bytes     = %10zu\n"
          "Total:\n"
          "system bytes     = %10zu\n"
          "in use bytes     = %10zu\n"
          "max in use bytes = %10" PRIu64 "\n"
          "large blocks     = %10zu\n",
          _hpcmem_heaps.count, _hpcmem_heaps.count == 1 ? "" : "s", g.small_mapped, m.uordblks,
          _hpcmem_large_tiers(tiers) > 1 ? "s (with the segments')" : "",
          g.large_mapped, m.hblkhd, g.small_mapped + g.large_mapped, m.uordblks + m.hblkhd, g.st.peak_bytes, m.hblks);
  fprintf(stderr, "All statistics (hpcmem_stats):\n");
  hpcmem_stats_print(stderr, &g.st);
}

/* glibc's layout: a <heap> element an arena with the free chunks by size,
 * then the totals.  Here a <heap> each group heap (free objects by size
 * class) and one for the large tiers.  Only options 0 exists (EINVAL). */
EXPORT int malloc_info(int options, FILE *fp) {
  if (options != 0 || fp == NULL) {
    errno = EINVAL;
    return -1;
  }
  struct gnu_totals g;
  totals(&g);
  struct mallinfo2 m = info_of(&g);
  uint64_t free_objs = 0, free_bytes = 0;
  fprintf(fp, "<malloc version=\"1\" allocator=\"libhpcmem\">\n");
  for (unsigned i = 0; i < _hpcmem_heaps.count; i++) {
    hpcmem_heap_t *h = &_hpcmem_heaps.heap[i];
    uint64_t objs = 0, bytes = 0;
    fprintf(fp, "<heap nr=\"%u\" kind=\"group\">\n<sizes>\n", i);
    for (unsigned c = 1; c < HPCMEM_NCLASSES; c++) {
      uint64_t n = _hpcmem_heap_free_objects(h, c);
      if (!n) continue;
      uint32_t size = _hpcmem_class_size[c];
      fprintf(fp, "  <size from=\"%u\" to=\"%u\" total=\"%" PRIu64 "\" count=\"%" PRIu64 "\"/>\n",
              c > 1 ? _hpcmem_class_size[c - 1] + 1 : 1, size, n * size, n);
      objs += n;
      bytes += n * size;
    }
    fprintf(fp, "</sizes>\n<total type=\"free\" count=\"%" PRIu64 "\" size=\"%" PRIu64 "\"/>\n"
                "<total type=\"empty\" size=\"%" PRIu64 "\"/>\n"
                "<system type=\"current\" size=\"%" PRIu64 "\"/>\n</heap>\n",
            objs, bytes, __atomic_load_n(&h->empty_bytes, __ATOMIC_RELAXED),
            __atomic_load_n(&h->mapped_bytes, __ATOMIC_RELAXED));
    free_objs += objs;
    free_bytes += bytes;
  }
  fprintf(fp, "<heap nr=\"%u\" kind=\"large\">\n<sizes>\n</sizes>\n"
              "<total type=\"free\" count=\"%zu\" size=\"%zu\"/>\n"
              "<total type=\"retained\" size=\"%zu\"/>\n"
              "<total type=\"in-use\" count=\"%zu\" size=\"%zu\"/>\n"
              "<system type=\"current\" size=\"%zu\"/>\n</heap>\n",
          _hpcmem_heaps.count, g.large_free_blocks, g.large_free, g.large_retained, g.large_blocks,
          g.large_live, g.large_mapped);
  /* glibc's totals (fast: fastbins; rest: free chunks; mmap: blocks mapped
   * on their own), then libhpcmem's */
  fprintf(fp, "<total type=\"fast\" count=\"0\" size=\"0\"/>\n"
              "<total type=\"rest\" count=\"%" PRIu64 "\" size=\"%" PRIu64 "\"/>\n"
              "<total type=\"mmap\" count=\"%zu\" size=\"%zu\"/>\n"
              "<total type=\"in-use\" size=\"%zu\"/>\n"
              "<total type=\"retained\" size=\"%" PRIu64 "\"/>\n"
              "<total type=\"decayed\" size=\"%" PRIu64 "\"/>\n"
              "<system type=\"current\" size=\"%zu\"/>\n"
              "<system type=\"max\" size=\"%" PRIu64 "\"/>\n"
              "<aspace type=\"total\" size=\"%zu\"/>\n</malloc>\n",
          free_objs + g.large_free_blocks, free_bytes + g.large_free, m.hblks, m.hblkhd, m.uordblks + m.hblkhd,
          g.st.retained_bytes, g.st.decayed_bytes, g.small_mapped + g.large_mapped, g.st.peak_bytes,
          g.small_mapped + g.large_mapped);
  return ferror(fp) ? -1 : 0;
}

/* glibc 2.36 takes every parameter (M_MXFAST only up to 160) and returns 1,
 * and programs check that (a threshold that "failed" to be set is an error
 * for some): so does libhpcmem, but none has an effect -- it has no
 * fastbins, no heap top, no block mapped on its own, no arenas to tune; the
 * HPCMEM_* options set at start decide instead (docs/allocator.md has the
 * table).  HPCMEM_VERBOSE says so per call.  A parameter glibc does not name
 * in malloc.h is refused (0). */
EXPORT int mallopt(int param, int value) {
  const char *name, *instead;
  int ok = 1;
  if (!_hpcmem_ready) _hpcmem_init();
  switch (param) {
  case M_MXFAST: name = "M_MXFAST"; instead = "thread caches serve small sizes"; ok = value >= 0 && value <= 160; break;
  case M_NLBLKS: name = "M_NLBLKS"; instead = "unused by glibc too"; break;
  case M_GRAIN: name = "M_GRAIN"; instead = "unused by glibc too"; break;
  case M_KEEP: name = "M_KEEP"; instead = "unused by glibc too"; break;
  case M_TRIM_THRESHOLD: name = "M_TRIM_THRESHOLD"; instead = "HPCMEM_DECAY_MS, malloc_trim"; break;
  case M_TOP_PAD: name = "M_TOP_PAD"; instead = "no heap top"; break;
  case M_MMAP_THRESHOLD: name = "M_MMAP_THRESHOLD"; instead = "HPCMEM_LARGE_THRESHOLD"; break;
  case M_MMAP_MAX: name = "M_MMAP_MAX"; instead = "no block has a mapping of its own"; break;
  case M_CHECK_ACTION: name = "M_CHECK_ACTION"; instead = "HPCMEM_ON_ERROR"; break;
  case M_PERTURB: name = "M_PERTURB"; instead = "memory is not filled"; break;
  case M_ARENA_TEST: name = "M_ARENA_TEST"; instead = "HPCMEM_HEAPS"; break;
  case M_ARENA_MAX: name = "M_ARENA_MAX"; instead = "HPCMEM_HEAPS"; break;
  default:
    if (_hpcmem_opt(VERBOSE)) _hpcmem_info("mallopt(%d, %d): no such parameter; refused", param, value);
    return 0;
  }
  if (_hpcmem_opt(VERBOSE))
    _hpcmem_info("mallopt(%s, %d): %s, no effect in libhpcmem (%s)", name, value, ok ? "accepted" : "refused",
                 instead);
  return ok;
}
