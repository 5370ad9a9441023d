// The group heaps' lookups (src/heap/group.h): class geometry, chunk and page maps.
#include <gtest/gtest.h>
#include <malloc.h>
#include <stdlib.h>
extern "C" {
#include "heap/group.h"
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
