// The group heaps' lookups (src/heap/group.h): class geometry, chunk and page maps.
#include <gtest/gtest.h>
#include <malloc.h>
#include <stdlib.h>
#include <string.h>
#include <vector>
extern "C" {
#include "heap/group.h"
#include "heap/tcache.h"
#include "hpcmem.h"
}

namespace {
hpcmem_class_geom_t geom(uint64_t size, uint64_t span) {
  hpcmem_class_geom_t g = {};
  g.divmagic = UINT64_MAX / size + 1;
  g.limit = _hpcmem_class_limit(size, span);
  g.span_mask = span - 1;
  return g;
}
}  // namespace

// The free fast path's test, with the span's end folded into the limit, must
// say yes exactly at the starts of the objects a span holds: for every class
// and every offset of its span (and of the next span over).
TEST(_hpcmem_class_on_boundary, exact_for_every_class_and_offset) {
  ASSERT_EQ(malloc_usable_size(nullptr), 0u);     // the allocator (and its geometry) is set up
  void *p = malloc(1);
  free(p);
  for (unsigned c = 1; c < HPCMEM_NCLASSES; c++) {
    const hpcmem_class_geom_t *g = &_hpcmem_class_geom[c];
    uint64_t size = _hpcmem_class_size[c], span = g->span_mask + 1, capacity = span / size;
    ASSERT_EQ(span & (span - 1), 0u) << c;
    ASSERT_GE(span, 8 * size) << c;
    ASSERT_LE(span, (uint64_t)1 << 20) << c;       // the bound the folded limit relies on
    for (uint64_t off = 0; off < span; off++) {
      bool start = off % size == 0 && off / size < capacity;
      ASSERT_EQ(_hpcmem_class_on_boundary(g, off) != 0, start) << "class " << c << " offset " << off;
      ASSERT_EQ(_hpcmem_class_on_boundary(g, off + 3 * span) != 0, start) << "class " << c << " offset " << off;
    }
  }
  EXPECT_FALSE(_hpcmem_class_on_boundary(&_hpcmem_class_geom[0], 0));   // no class: nothing passes
}

// A new span takes its capacity, order and divisor from the class geometry
// (computed once at start): they must be what the span's size gives, and
// what the spans the heap makes carry.
TEST(_hpcmem_heaps_init, class_geometry_matches_the_spans) {
  void *p = malloc(1);
  free(p);
  for (unsigned c = 1; c < HPCMEM_NCLASSES; c++) {
    const hpcmem_class_geom_t *g = &_hpcmem_class_geom[c];
    uint64_t size = _hpcmem_class_size[c], span = g->span_mask + 1;
    EXPECT_EQ(g->capacity, span / size) << c;
    EXPECT_EQ((uint64_t)1 << (g->order + _hpcmem_heaps.block_shift), span) << c;
    EXPECT_EQ(g->divmagic, UINT64_MAX / size + 1) << c;
  }
  for (size_t n : {24u, 200u, 3000u, 40000u}) {
    void *q = malloc(n);
    ASSERT_NE(q, nullptr);
    hpcmem_span_t *s = _hpcmem_span_of(q);
    ASSERT_NE(s, nullptr) << n;
    const hpcmem_class_geom_t *g = &_hpcmem_class_geom[s->cls];
    EXPECT_EQ(s->capacity, g->capacity) << n;
    EXPECT_EQ(s->order, g->order) << n;
    EXPECT_EQ(s->divmagic, g->divmagic) << n;
    EXPECT_EQ(s->obj_size, _hpcmem_class_size[s->cls]) << n;
    free(q);
  }
}

TEST(_hpcmem_class_limit, folds_the_end_of_the_span) {
  // 48-byte objects in 64 KiB: 1365 of them; the 1366th would start at 65520 and run past the end
  hpcmem_class_geom_t g = geom(48, 65536);
  EXPECT_TRUE(_hpcmem_class_on_boundary(&g, 1364 * 48));
  EXPECT_FALSE(_hpcmem_class_on_boundary(&g, 1365 * 48));
  EXPECT_FALSE(_hpcmem_class_on_boundary(&g, 47));
  // a power of two divides its span: every multiple is an object
  hpcmem_class_geom_t h = geom(4096, 65536);
  EXPECT_EQ(_hpcmem_class_limit(4096, 65536), 1u);
  EXPECT_TRUE(_hpcmem_class_on_boundary(&h, 65536 - 4096));
  EXPECT_FALSE(_hpcmem_class_on_boundary(&h, 4095));
  // odd sizes that are not classes, at the largest span
  for (uint64_t size : {24u, 112u, 1040u, 114688u}) {
    hpcmem_class_geom_t x = geom(size, (uint64_t)1 << 20);
    uint64_t cap = ((uint64_t)1 << 20) / size;
    EXPECT_TRUE(_hpcmem_class_on_boundary(&x, (cap - 1) * size)) << size;
    EXPECT_FALSE(_hpcmem_class_on_boundary(&x, cap * size)) << size;
    EXPECT_FALSE(_hpcmem_class_on_boundary(&x, size / 2)) << size;
  }
}

// Runs of a chunk or more have their record in the chunk map; smaller ones
// (large alignments) in the page map behind a marker; free pages of such a
// chunk have none.
TEST(_hpcmem_span_of, runs_smaller_and_larger_than_a_chunk) {
  void *a = memalign(8192, 100), *b = memalign(8192, 100), *big = nullptr;
  ASSERT_NE(a, nullptr);
  ASSERT_NE(b, nullptr);
  ASSERT_EQ(posix_memalign(&big, 65536, 100), 0);
  hpcmem_span_t *sa = _hpcmem_span_of(a), *sb = _hpcmem_span_of(b), *sbig = _hpcmem_span_of(big);
  ASSERT_NE(sa, nullptr);
  ASSERT_NE(sb, nullptr);
  ASSERT_NE(sbig, nullptr);
  EXPECT_EQ(sa->kind, HPCMEM_SPAN_RUN);
  EXPECT_EQ(sa->start, (char *)a);
  EXPECT_EQ(_hpcmem_span_of((char *)a + 4096), sa);        // the run's second page
  EXPECT_NE(sa, sb);
  EXPECT_EQ(sbig->start, (char *)big);
  EXPECT_EQ(_hpcmem_span_of((char *)big + 65535), sbig);
  EXPECT_EQ(malloc_usable_size(a), 8192u);
  EXPECT_EQ(malloc_usable_size((char *)a + 4096), 0u);      // interior: not a block
  free(a);
  EXPECT_EQ(_hpcmem_span_of(a), nullptr);                   // a's pages hold nothing now
  EXPECT_EQ(_hpcmem_span_of(b), sb);
  free(b);
  free(big);
  EXPECT_EQ(_hpcmem_span_of(big), nullptr);
  EXPECT_EQ(hpcmem_check(), 0);
}

// The thread's cache gives its objects (and its fresh ranges) back to the spans.
static void flush_my_cache() {
  free(malloc(1));                               // the thread has a cache
  ASSERT_NE(_hpcmem_tc->heap, nullptr);
  _hpcmem_tcache_flush_all(_hpcmem_tc);
}

// malloc_trim's part in a heap: empty spans go back to the tree (a class's
// last one too), spans with a live object stay as they are.
TEST(_hpcmem_heap_trim, releases_every_empty_span_and_keeps_used_ones) {
  const size_t size = 5000;                      // a class nothing else here uses
  std::vector<unsigned char *> v;
  for (int i = 0; i < 200; i++) {
    unsigned char *p = (unsigned char *)malloc(size);
    memset(p, i, size);
    v.push_back(p);
  }
  hpcmem_span_t *first = _hpcmem_span_of(v.front()), *last = _hpcmem_span_of(v.back());
  ASSERT_NE(first, nullptr);
  ASSERT_NE(first, last);                        // 200 objects of 5 KiB take more than one span
  hpcmem_heap_t *h = &_hpcmem_heaps.heap[first->heap];
  for (size_t i = 0; i + 1 < v.size(); i++)
    if (_hpcmem_span_of(v[i]) != last) { free(v[i]); v[i] = nullptr; }
  flush_my_cache();
  ASSERT_EQ(first->used, 0u);                    // empty now: kept, or its class's last span
  uint64_t mapped = h->mapped_bytes;
  uint64_t given = _hpcmem_heap_trim(h);
  EXPECT_GE(given, (uint64_t)1 << (first->order + _hpcmem_heaps.block_shift));
  EXPECT_EQ(mapped - h->mapped_bytes, given);
  EXPECT_EQ(h->empty_bytes, 0u);
  EXPECT_EQ(_hpcmem_span_of(v.front()), nullptr);  // its run is back in the tree
  EXPECT_EQ(_hpcmem_span_of(v.back()), last);     // in use: stays
  EXPECT_GT(last->used, 0u);
  for (size_t i = 0; i < v.size(); i++)
    if (v[i]) {
      ASSERT_EQ(v[i][0], (unsigned char)i);
      ASSERT_EQ(v[i][size - 1], (unsigned char)i);
    }
  EXPECT_EQ(_hpcmem_heap_check(h), 0);
  EXPECT_EQ(_hpcmem_heap_trim(h), 0u);           // nothing more to give
  for (unsigned char *p : v) free(p);
  flush_my_cache();
  ASSERT_EQ(last->used, 0u);                     // the class's last span, empty: the heap keeps it ...
  EXPECT_EQ(_hpcmem_span_of(v.back()), last);
  EXPECT_GE(_hpcmem_heap_trim(h), (uint64_t)1 << (last->order + _hpcmem_heaps.block_shift));
  EXPECT_EQ(_hpcmem_span_of(v.back()), nullptr); // ... but not through a trim
  void *again = malloc(size);                    // the class starts over on a new span
  ASSERT_NE(again, nullptr);
  memset(again, 1, size);
  free(again);
  EXPECT_EQ(_hpcmem_heap_check(h), 0);
}

TEST(_hpcmem_heap_free_objects, counts_the_objects_on_the_spans_free_lists) {
  const size_t size = 2900;                      // a class of its own here
  unsigned cls = _hpcmem_size_class(size);
  std::vector<void *> v;
  for (int i = 0; i < 300; i++) v.push_back(malloc(size));
  flush_my_cache();                              // the bin's fresh range goes back unwritten
  hpcmem_heap_t *h = &_hpcmem_heaps.heap[_hpcmem_span_of(v[0])->heap];
  uint64_t before = _hpcmem_heap_free_objects(h, cls);
  for (size_t i = 0; i < v.size(); i += 3) { free(v[i]); v[i] = nullptr; }
  flush_my_cache();
  EXPECT_EQ(_hpcmem_heap_free_objects(h, cls), before + 100);
  for (void *p : v) free(p);
}
