/* Thread-group heaps (see group.h). */
#include "config.h"
#include "heap/group.h"
#include "heap/single.h"
#include "prim/prim.h"
#include "util/log.h"
#include <errno.h>
#include <string.h>

hpcmem_heaps_t _hpcmem_heaps;
hpcmem_class_geom_t _hpcmem_class_geom[HPCMEM_NCLASSES];

#define SLICE ((size_t)1 << HPCMEM_SLICE_SHIFT)
#define INITIAL_EXTENT ((size_t)2 << 20)       /* a young heap stays within its first 2 MiB: one page-table page */
#define SPAN_MIN ((size_t)64 << 10)
_Static_assert(SPAN_MIN >= ((size_t)1 << HPCMEM_CHUNK_SHIFT), "a span covers whole chunks of the class map");

static inline void *next_of(void *p) { return *(void **)p; }
static inline void set_next(void *p, void *n) { *(void **)p = n; }

static unsigned order_for(size_t bytes);

/* Every span of a class has this order: eight objects, at least SPAN_MIN. */
static unsigned span_order(unsigned cls) {
  size_t size = _hpcmem_class_size[cls];
  return order_for(size * 8 > SPAN_MIN ? size * 8 : SPAN_MIN);
}

/* The five reservations of count heaps: the slices, the management area
 * (each heap's tree, then its records), the chunk map, the page map and the
 * class map; *mgmt is one heap's part of the management area. */
static inline __attribute__((always_inline)) void heaps_sizes(unsigned count, unsigned block_shift, size_t sizes[5], size_t *tree, size_t *mgmt) {
  unsigned depth = HPCMEM_SLICE_SHIFT - block_shift;
  /* the tree's lowest band ends below the smallest span (see itree.h) */
  unsigned low = block_shift < HPCMEM_CHUNK_SHIFT ? HPCMEM_CHUNK_SHIFT - block_shift : 0;
  *tree = (_hpcmem_itree_mgmt_size(depth, low) + 4095) & ~(size_t)4095;
  size_t descs = ((size_t)1 << depth) * sizeof(hpcmem_span_t);   /* at most one record per block */
  *mgmt = *tree + descs;
  sizes[0] = (size_t)count << HPCMEM_SLICE_SHIFT;
  sizes[1] = *mgmt * count;
  sizes[2] = ((size_t)count << (HPCMEM_SLICE_SHIFT - HPCMEM_CHUNK_SHIFT)) * sizeof(void *);
  sizes[3] = ((size_t)count << (HPCMEM_SLICE_SHIFT - HPCMEM_PAGEMAP_SHIFT)) * sizeof(void *);
  sizes[4] = ((size_t)count << (HPCMEM_SLICE_SHIFT - HPCMEM_CHUNK_SHIFT)) + 4096;
}

/* Start-up code, run once a process: compiled for size, as _hpcmem_large_init
 * is (src/hot-text.ld: the code every process runs in one 64 KiB window). */
__attribute__((optimize("Os"))) int _hpcmem_heaps_init(unsigned count, unsigned block_shift) {
  hpcmem_heaps_t *H = &_hpcmem_heaps;
  if (count < 1 || count > HPCMEM_MAX_HEAPS) return -EINVAL;
  unsigned depth = HPCMEM_SLICE_SHIFT - block_shift;
  size_t nblocks = (size_t)1 << depth;
  unsigned low = block_shift < HPCMEM_CHUNK_SHIFT ? HPCMEM_CHUNK_SHIFT - block_shift : 0;
  size_t tree, mgmt, sizes[5];
  heaps_sizes(count, block_shift, sizes, &tree, &mgmt);
  /* all or nothing: a caller may try again with fewer heaps (an address-space limit) */
  char *got[5];
  for (int i = 0; i < 5; i++) {
    got[i] = _hpcmem_prim_reserve(sizes[i], i == 0 ? SLICE : 4096);
    if (!got[i]) {
      while (i-- > 0) _hpcmem_prim_release(got[i], sizes[i]);
      return -ENOMEM;
    }
  }
  H->mgmt = got[1];
  H->base = got[0];
  char *m = got[1];
  H->chunkmap = (void *)got[2];
  H->pagemap = (void *)got[3];
  /* half a page in: a young heap's entries, which every free reads, are not
   * at the start of a page, where a program's recent stores to page-aligned
   * blocks would hold up the load (as the thread caches, tcache.c):
   * alloc_sizes --mode touch, 32 KiB: 54 -> 43 cycles a round */
  H->classmap = (void *)(got[4] + 2048);
  H->size = (size_t)count << HPCMEM_SLICE_SHIFT;
  H->count = count;
  H->block_shift = block_shift;
  for (unsigned c = 1; c < HPCMEM_NCLASSES; c++) {
    hpcmem_class_geom_t *g = &_hpcmem_class_geom[c];
    size_t span = (size_t)1 << (span_order(c) + block_shift);
    g->divmagic = UINT64_MAX / _hpcmem_class_size[c] + 1;
    g->span_mask = span - 1;
    g->limit = _hpcmem_class_limit(_hpcmem_class_size[c], span);
    g->capacity = (uint32_t)(span / _hpcmem_class_size[c]);
    g->order = (uint8_t)span_order(c);
  }
  for (unsigned i = 0; i < count; i++, m += mgmt) {
    hpcmem_heap_t *h = &H->heap[i];
    h->index = i;
    h->base = H->base + ((size_t)i << HPCMEM_SLICE_SHIFT);
    unsigned ext = 63u - (unsigned)__builtin_clzll(INITIAL_EXTENT >> block_shift | 1);
    _hpcmem_itree_init(&h->tree, m, depth, low, ext);
    h->desc_next = (hpcmem_span_t *)(m + tree);
    h->desc_end = h->desc_next + nblocks;
  }
  return 0;
}

/* Gives back what _hpcmem_heaps_init reserved (a start that found too
 * little address space for the rest: the process runs on the C library's
 * malloc, api/alloc.c).  Only before any thread has a cache. */
void _hpcmem_heaps_release(void) {
  hpcmem_heaps_t *H = &_hpcmem_heaps;
  if (!H->count) return;
  size_t tree, mgmt, sizes[5];
  heaps_sizes(H->count, H->block_shift, sizes, &tree, &mgmt);
  char *got[5] = {H->base, H->mgmt, (char *)H->chunkmap, (char *)H->pagemap, (char *)H->classmap - 2048};
  for (int i = 0; i < 5; i++) _hpcmem_prim_release(got[i], sizes[i]);
  memset(H, 0, sizeof *H);
}

/* ---- records and runs (heap lock held) ---- */

static hpcmem_span_t *desc_alloc(hpcmem_heap_t *h) {
  hpcmem_span_t *s = h->desc_free;
  if (s) h->desc_free = s->next;
  else if (h->desc_next < h->desc_end) s = h->desc_next++;
  else return NULL;
  memset(s, 0, sizeof *s);
  return s;
}

static unsigned order_for(size_t bytes) {
  size_t blocks = (bytes + ((size_t)1 << _hpcmem_heaps.block_shift) - 1) >> _hpcmem_heaps.block_shift;
  return blocks <= 1 ? 0 : 64u - (unsigned)__builtin_clzll(blocks - 1);
}

/* The chunk map entries of a run of a chunk or more; the page map entries of
 * a smaller one, whose chunk is marked as holding such runs (and stays so:
 * the page map says NULL where none lies any more). */
static void map_run(hpcmem_heap_t *h, hpcmem_span_t *s, hpcmem_span_t *value) {
  (void)h;
  size_t off = (size_t)(s->start - _hpcmem_heaps.base);
  unsigned shift = s->order + _hpcmem_heaps.block_shift;
  if (shift >= HPCMEM_CHUNK_SHIFT) {
    size_t first = off >> HPCMEM_CHUNK_SHIFT, n = (size_t)1 << (shift - HPCMEM_CHUNK_SHIFT);
    for (size_t i = 0; i < n; i++) _hpcmem_heaps.chunkmap[first + i] = value;
    return;
  }
  if (value) _hpcmem_heaps.chunkmap[off >> HPCMEM_CHUNK_SHIFT] = HPCMEM_CHUNK_SMALL_RUNS;
  size_t first = off >> HPCMEM_PAGEMAP_SHIFT, n = (size_t)1 << (shift - HPCMEM_PAGEMAP_SHIFT);
  for (size_t i = 0; i < n; i++) _hpcmem_heaps.pagemap[first + i] = value;
}

static hpcmem_span_t *run_new(hpcmem_heap_t *h, unsigned order, unsigned kind) {
  hpcmem_span_t *s = desc_alloc(h);
  if (!s) return NULL;
  int64_t idx = _hpcmem_itree_alloc(&h->tree, order);
  if (idx < 0) { s->next = h->desc_free; h->desc_free = s; return NULL; }
  s->start = h->base + ((size_t)idx << _hpcmem_heaps.block_shift);
  s->order = (uint8_t)order;
  s->kind = (uint8_t)kind;
  s->heap = (uint16_t)h->index;
  s->fast_heap = HPCMEM_NO_HEAP;
  h->mapped_bytes += (size_t)1 << (order + _hpcmem_heaps.block_shift);
  map_run(h, s, s);
  return s;
}

/* The class map entries of the chunks a span covers (spans cover whole chunks). */
static void map_class(const hpcmem_span_t *s, uint8_t cls) {
  size_t first = (size_t)(s->start - _hpcmem_heaps.base) >> HPCMEM_CHUNK_SHIFT;
  size_t n = ((size_t)1 << (s->order + _hpcmem_heaps.block_shift)) >> HPCMEM_CHUNK_SHIFT;
  for (size_t i = 0; i < n; i++) _hpcmem_heaps.classmap[first + i] = (uint8_t)HPCMEM_CLASS_KEY(cls);
}

static void dirty_clear(hpcmem_heap_t *h, hpcmem_span_t *s);

static void run_release(hpcmem_heap_t *h, hpcmem_span_t *s) {
  size_t bytes = (size_t)1 << (s->order + _hpcmem_heaps.block_shift);
  dirty_clear(h, s);
  if (s->kind == HPCMEM_SPAN_SMALL) map_class(s, 0);
  map_run(h, s, NULL);
  int rc = _hpcmem_itree_free(&h->tree, (size_t)(s->start - h->base) >> _hpcmem_heaps.block_shift);
  if (rc < 0) _hpcmem_fatal("heap %u: run at %p is not in the interval tree", h->index, (void *)s->start);
  h->mapped_bytes -= bytes;
  /* give the pages back: a released run is cold, and the tree may hand it to another class */
  if (bytes >= 65536) _hpcmem_prim_decommit(s->start, bytes);
  s->kind = 0;
  s->next = h->desc_free;
  h->desc_free = s;
}

/* ---- spans of small objects ---- */

/* A span with something to give is on one of its class's two lists: with
 * free objects (partial), or with nothing but uncarved room or a hole
 * (fresh).  A refill carves fresh objects -- memory the program has not touched yet --
 * only when no span of the class has a free one, so the resident set grows
 * only when the class's touched objects are all in use or in caches.  (With
 * one list, a span that got room back -- a thread's exit uncarving its fresh
 * range -- went to the front, and refills carved from it while other spans
 * held free objects.) */
enum { LIST_NONE, LIST_PARTIAL, LIST_FRESH };

static hpcmem_span_t **list_head(hpcmem_heap_t *h, const hpcmem_span_t *s, unsigned list) {
  return list == LIST_PARTIAL ? &h->partial[s->cls] : &h->fresh[s->cls];
}

static void list_push(hpcmem_heap_t *h, hpcmem_span_t *s, unsigned list) {
  hpcmem_span_t **head = list_head(h, s, list);
  s->prev = NULL;
  s->next = *head;
  if (s->next) s->next->prev = s;
  *head = s;
  s->in_partial = (uint8_t)list;
}

static void list_remove(hpcmem_heap_t *h, hpcmem_span_t *s) {
  if (s->prev) s->prev->next = s->next; else *list_head(h, s, s->in_partial) = s->next;
  if (s->next) s->next->prev = s->prev;
  s->in_partial = LIST_NONE;
  s->next = s->prev = NULL;
}

/* A span's hole (group.h): objects [at, at + n) that a thread's cache carved
 * and gave back unwritten, below bump; written as one word (see
 * _hpcmem_span_is_object).  Heap lock held. */
static inline uint32_t hole_n(const hpcmem_span_t *s) { return _hpcmem_hole_n(s->hole); }
static inline void hole_set(hpcmem_span_t *s, uint32_t at, uint32_t n) {
  __atomic_store_n(&s->hole, n ? at | (uint64_t)n << 32 : 0, __ATOMIC_RELAXED);
}

/* Put s on the list its state calls for (after its free list or carving changed). */
static void span_file(hpcmem_heap_t *h, hpcmem_span_t *s) {
  unsigned list = s->free ? LIST_PARTIAL : s->bump < s->capacity || s->hole ? LIST_FRESH : LIST_NONE;
  if (list == s->in_partial) return;
  if (s->in_partial) list_remove(h, s);
  if (list) list_push(h, s, list);
}

/* s is the only span of its class with anything to give. */
static int span_is_last(hpcmem_heap_t *h, const hpcmem_span_t *s) {
  return !s->next && !s->prev && h->partial[s->cls] == (s->in_partial == LIST_PARTIAL ? s : NULL) &&
         h->fresh[s->cls] == (s->in_partial == LIST_FRESH ? s : NULL);
}

/* Empty spans stay (committed, in their class's lists) instead of going back
 * to the tree while they add up to at most a quarter of the heap's spans in
 * use, between EMPTY_MIN and EMPTY_MAX: giving one back costs an madvise
 * (with threads on other cores, a TLB shootdown) and its next use a page
 * fault per page -- producer/consumer threads emptied and remade spans
 * hundreds of times a second -- but what stays is resident memory nobody
 * uses: a heap of 1 MiB kept up to 4 MiB of empty spans after a phase. */
#define EMPTY_MIN ((uint64_t)512 << 10)
#define EMPTY_MAX ((uint64_t)4 << 20)

static inline uint64_t span_bytes(const hpcmem_span_t *s) {
  return (uint64_t)1 << (s->order + _hpcmem_heaps.block_shift);
}

static void span_unkeep(hpcmem_heap_t *h, hpcmem_span_t *s) {
  if (s->kept) { s->kept = 0; h->empty_bytes -= span_bytes(s); }
}

/* A span taken over by another class (span_detach) may have resident pages
 * beyond its new class's carving: the old class touched them.  They are
 * kept for the new class to carve (no page faults), but count against the
 * empty-span budget with the kept spans, and go back to the system, oldest
 * first, when the budget is exceeded -- else classes that took over spans
 * and use little of them held pages nobody used (a churn of 256 blocks of
 * 1 B - 100 KiB: 2.4 -> 3.1 MiB resident). */
static inline uint64_t page_up(uint64_t b) { return (b + 4095) & ~(uint64_t)4095; }
static inline uint64_t dirty_tail(const hpcmem_span_t *s) {
  uint64_t front = page_up((uint64_t)s->bump * s->obj_size);
  return s->dirty > front ? s->dirty - front : 0;
}
static void dirty_clear(hpcmem_heap_t *h, hpcmem_span_t *s) {
  h->dirty_bytes -= dirty_tail(s);
  s->dirty = 0;
}
static void queue_push(hpcmem_heap_t *h, hpcmem_span_t *s) {
  if (s->on_kept_list) return;       /* a span is released only off the queue: its record may be reused */
  s->kept_next = NULL;
  if (h->kept_tail) h->kept_tail->kept_next = s; else h->kept_head = s;
  h->kept_tail = s;
  s->on_kept_list = 1;
}
/* s's carving moves by delta objects (fresh objects carved, or uncarved) */
static void carve(hpcmem_heap_t *h, hpcmem_span_t *s, int32_t delta) {
  if (!s->dirty) { s->bump += (uint32_t)delta; return; }
  h->dirty_bytes -= dirty_tail(s);
  s->bump += (uint32_t)delta;
  uint64_t tail = dirty_tail(s);
  h->dirty_bytes += tail;
  if (!tail) s->dirty = 0;          /* carved past what the old class touched */
}

static uint64_t empty_budget(const hpcmem_heap_t *h) {
  uint64_t quarter = (h->mapped_bytes - h->empty_bytes) / 4;
  return quarter < EMPTY_MIN ? EMPTY_MIN : quarter > EMPTY_MAX ? EMPTY_MAX : quarter;
}

/* An empty span (used == 0) off its class's lists and back to the tree. */
static void span_release(hpcmem_heap_t *h, hpcmem_span_t *s) {
  list_remove(h, s);
  h->free_small_bytes -= (uint64_t)(s->bump - hole_n(s)) * s->obj_size;   /* used == 0: the rest is free */
  run_release(h, s);
}

/* Release kept spans, oldest first, until they fit the budget again: the
 * budget shrinks as the heap empties, and spans kept while it was full
 * would stay (a thread that freed 8 MiB kept 2 MiB of it).  all (malloc_trim):
 * every kept span goes, a class's last one too.  Returns the bytes given
 * back (spans, and pages beyond a span's carving).  Inlined: kept_trim's copy,
 * on the free path, is without the trim's part. */
static inline __attribute__((always_inline)) uint64_t kept_release(hpcmem_heap_t *h, int all) {
  hpcmem_span_t *s;
  uint64_t given = 0;
  while ((all || h->empty_bytes + h->dirty_bytes > empty_budget(h)) && (s = h->kept_head) != NULL) {
    h->kept_head = s->kept_next;
    if (!h->kept_head) h->kept_tail = NULL;
    s->on_kept_list = 0;
    if (!s->kept) {                         /* in use again since it was queued */
      uint64_t tail = dirty_tail(s);
      if (tail && !(all && !s->used)) {     /* (an empty one goes back whole: the trim's next step) */
        _hpcmem_prim_decommit(s->start + s->dirty - tail, tail);
        given += tail;
      }
      dirty_clear(h, s);
      continue;
    }
    s->kept = 0;
    h->empty_bytes -= span_bytes(s);
    if (!all && span_is_last(h, s)) continue;   /* a class's last span stays, uncounted */
    given += span_bytes(s);
    span_release(h, s);
  }
  return given;
}

static void kept_trim(hpcmem_heap_t *h) { (void)kept_release(h, 0); }

/* s just became empty: it is kept (a class's last span always, others within
 * the budget above); kept spans beyond the budget go back to the tree. */
static void span_maybe_release(hpcmem_heap_t *h, hpcmem_span_t *s) {
  if (s->used || !s->in_partial || s->kept) return;
  if (span_is_last(h, s)) return;   /* keep one span per class warm */
  s->kept = 1;
  h->empty_bytes += span_bytes(s);
  dirty_clear(h, s);                /* all of it counts now */
  queue_push(h, s);
  kept_trim(h);
}

/* ---- a new span on memory the process touched ---- */

/* A class that needs a new span while the thread asking holds, alone in a
 * bin, the one object that keeps another class's span in use (group.h:
 * hpcmem_lone_t) takes that span over instead of untouched memory from the
 * tree: a program that moves on from one size to the next one object at a
 * time (a buffer grown by doubling, the size sweep) reuses the pages it
 * touched, as with glibc, which carves every size from the same memory.  A
 * span of the same size is taken over in place, a smaller one grows in
 * place when the rest of its aligned block is free (its touched pages come
 * first).  Spans that empty otherwise stay with their class (kept within
 * the budget): taking those over too cost resident memory -- a churn of
 * 256 blocks of 1 B - 100 KiB held 2.4 MiB, 2.9 with kept spans and a
 * class's emptied last span taken over by other classes (23.7 -> 24.5 MiB
 * with every block written), as a class that takes over another's span
 * lays its objects at other offsets and uses little of it, where the old
 * class would have reused its own objects' pages. */

/* s (empty) leaves its class: its carved objects, all on its free list with
 * the free key in their second word, lose the key (a new object of the next
 * class may start there and would send every free of it to the double-free
 * search), its free bytes go, and the pages its class touched become a tail
 * for the next class to carve (dirty_tail). */
static void span_detach(hpcmem_heap_t *h, hpcmem_span_t *s) {
  for (uint32_t k = 0; k < s->bump; k++) {
    if (k == _hpcmem_hole_at(s->hole)) k += hole_n(s);   /* never written: no key to clear */
    if (k < s->bump) ((uint64_t *)(s->start + (size_t)k * s->obj_size))[1] = 0;
  }
  h->free_small_bytes -= (uint64_t)(s->bump - hole_n(s)) * s->obj_size;
  hole_set(s, 0, 0);
  span_unkeep(h, s);
  list_remove(h, s);
  uint64_t touched = page_up((uint64_t)s->bump * s->obj_size);
  if (touched < s->dirty) touched = s->dirty;
  dirty_clear(h, s);
  s->free = s->free_tail = NULL;            /* the caller maps the new class's chunks */
  s->bump = 0;
  if (touched) {                            /* all of it is a tail now (see dirty_tail) */
    s->dirty = (uint32_t)touched;
    h->dirty_bytes += touched;
    queue_push(h, s);
  }
}

/* Grow the run of s (empty) to the given order in place: 0, or -1 (the tree
 * is left as it was). */
static int span_grow(hpcmem_heap_t *h, hpcmem_span_t *s, unsigned order) {
  uint64_t idx = (uint64_t)(s->start - h->base) >> _hpcmem_heaps.block_shift;
  if (_hpcmem_itree_grow(&h->tree, idx, s->order, order) < 0) return -1;
  span_unkeep(h, s);                      /* counted at its old size */
  h->mapped_bytes += ((size_t)1 << (order + _hpcmem_heaps.block_shift)) - span_bytes(s);
  s->order = (uint8_t)order;
  map_run(h, s, s);
  return 0;
}

/* How s, once empty, can hold a span of `order`: 2 in place (the same
 * order), 1 grown (smaller, and its start aligned to the order), 0 not. */
static int span_fits(hpcmem_heap_t *h, const hpcmem_span_t *s, unsigned order) {
  if (s->kind != HPCMEM_SPAN_SMALL) return 0;
  if (s->order == order) return 2;
  uint64_t idx = (uint64_t)(s->start - h->base) >> _hpcmem_heaps.block_shift;
  return s->order < order && !(idx & (((uint64_t)1 << order) - 1));
}

/* One of the lone objects (group.h) empties its span for class cls: of a
 * span of the order first, else of one that grows. */
static hpcmem_span_t *span_from_lone(hpcmem_heap_t *h, unsigned cls, unsigned order, hpcmem_lone_t *lone) {
  hpcmem_span_t *s = NULL;
  int pick = -1;
  for (unsigned i = 0; i < lone->n; i++) {
    hpcmem_span_t *x = _hpcmem_span_of(lone->obj[i]);
    if (!x || x->kind != HPCMEM_SPAN_SMALL || x->heap != h->index || x->used != 1 || x->cls == cls) continue;
    int fit = span_fits(h, x, order);
    if (fit == 2 || (fit == 1 && pick < 0)) { s = x; pick = (int)i; }
    if (fit == 2) break;
  }
  if (pick < 0 || (s->order != order && span_grow(h, s, order) < 0)) return NULL;
  char *p = lone->obj[pick];
  if (s->start + (size_t)(s->bump - 1) * s->obj_size == p) {
    carve(h, s, -1);                      /* the span's last carving: back unwritten */
  } else {                                /* the span's other objects are free: p joins them */
    ((uint64_t *)p)[1] = _hpcmem_free_key;
    set_next(p, s->free);
    if (!s->free) s->free_tail = p;
    s->free = p;
    h->free_small_bytes += s->obj_size;
  }
  s->used = 0;
  span_file(h, s);
  span_detach(h, s);
  lone->taken = pick;
  return s;
}

static hpcmem_span_t *span_new(hpcmem_heap_t *h, unsigned cls, hpcmem_lone_t *lone) {
  const hpcmem_class_geom_t *g = &_hpcmem_class_geom[cls];
  unsigned order = g->order;
  hpcmem_span_t *s = lone ? span_from_lone(h, cls, order, lone) : NULL;
  if (!s && !(s = run_new(h, order, HPCMEM_SPAN_SMALL))) return NULL;
  s->cls = (uint8_t)cls;
  s->obj_size = _hpcmem_class_size[cls];
  s->divmagic = g->divmagic;
  s->fast_heap = (uint16_t)h->index;
  s->capacity = g->capacity;
  map_class(s, (uint8_t)cls);
  span_file(h, s);
  if (s->dirty) kept_trim(h);
  return s;
}

/* Take back objects other groups freed into our spans (heap lock held). */
static void collect_remote(hpcmem_heap_t *h) {
  hpcmem_span_t *s = __atomic_exchange_n(&h->pending, NULL, __ATOMIC_ACQUIRE);
  while (s) {
    hpcmem_span_t *next = s->pending_next;   /* read before the remote list is reopened */
    __atomic_store_n(&s->pending, 0, __ATOMIC_RELAXED);
    void *list = __atomic_exchange_n(&s->remote, NULL, __ATOMIC_ACQUIRE);
    unsigned n = 0;
    void *tail = NULL;
    for (void *p = list; p; p = next_of(p)) { n++; tail = p; }
    if (tail) {
      if (!s->free) s->free_tail = tail;
      set_next(tail, s->free);
      s->free = list;
    }
    s->used -= n;
    h->free_small_bytes += (uint64_t)n * s->obj_size;
    span_file(h, s);
    span_maybe_release(h, s);
    s = next;
  }
}

/* Work under the heap lock is kept small: a span's whole free list (from
 * free to free_tail) is taken in one step when it fits what the caller asked
 * for, else that many objects are unlinked from it (taking more left other
 * threads' refills to carve new memory while this thread's bin held the
 * class's touched objects); fresh objects, a hole's or uncarved ones, are
 * reserved as a range.  After the unlock the lists are joined through their
 * tails and only the fresh
 * objects are written (link and free key: recycled ones carry both already),
 * so objects freed by threads on other cores are first touched when malloc
 * hands them out, not here.  When the last part taken is fresh, nothing of
 * it is written: its first object goes to the caller, the rest stay a range
 * the thread cache hands out by bumping a pointer, so a class's memory is
 * first touched by the program (a malloc/free loop that does not write its
 * object costs no page fault). */
#define REFILL_PARTS 16
static unsigned stash_take(hpcmem_heap_t *h, unsigned cls, hpcmem_refill_t *out, unsigned want);   /* the stash, below */
unsigned _hpcmem_heap_refill(hpcmem_heap_t *h, unsigned cls, hpcmem_refill_t *out, unsigned want,
                             hpcmem_lone_t *lone, int recycled_only) {
  struct { void *head, *tail; char *fresh; unsigned n; } part[REFILL_PARTS];
  unsigned got = 0, np = 0;
  void *head = NULL, *tail = NULL;
  size_t size = _hpcmem_class_size[cls];
  _hpcmem_lock_st(&h->lock);
  if (__atomic_load_n(&h->pending, __ATOMIC_RELAXED)) collect_remote(h);
  if (h->stash_bytes && (got = stash_take(h, cls, out, want)) != 0) return got;   /* a whole list (below) */
  while (got < want && np < REFILL_PARTS) {
    hpcmem_span_t *s = h->partial[cls];
    unsigned before = got;
    if (s) {                                  /* recycled objects first */
      unsigned nfree = s->bump - s->used - hole_n(s);
      if (got + nfree <= want) {              /* the whole list in one step */
        part[np++] = (typeof(part[0])){s->free, s->free_tail, NULL, nfree};
        s->free = NULL;
        got += nfree;
      } else {
        while (got < want && s->free) {       /* a long list: take what was asked */
          void *p = s->free;
          s->free = next_of(p);
          if (!tail) tail = p;
          set_next(p, head); head = p; got++;
        }
      }
      h->free_small_bytes -= (uint64_t)(got - before) * size;
    } else if (recycled_only) {
      break;
    } else if ((s = h->fresh[cls]) && s->hole) {     /* then fresh ones: a hole's first */
      uint32_t at = _hpcmem_hole_at(s->hole), n = hole_n(s);
      unsigned fresh = n < want - got ? n : want - got;
      part[np++] = (typeof(part[0])){NULL, NULL, s->start + (size_t)at * size, fresh};
      hole_set(s, at + fresh, n - fresh);
      got += fresh;
    } else {                                  /* carved lazily */
      if (!s && !(s = span_new(h, cls, lone))) break;
      unsigned fresh = s->capacity - s->bump;
      if (fresh > want - got) fresh = want - got;
      part[np++] = (typeof(part[0])){NULL, NULL, s->start + (size_t)s->bump * size, fresh};
      carve(h, s, (int32_t)fresh);
      got += fresh;
    }
    span_unkeep(h, s);
    s->used += got - before;
    span_file(h, s);
  }
  _hpcmem_unlock_st(&h->lock);
  out->first = NULL;
  out->fresh = NULL;
  out->nfresh = 0;
  for (unsigned i = 0; i < np; i++) {
    if (part[i].head) {                       /* the chain goes in front */
      set_next(part[i].tail, head);
      if (!tail) tail = part[i].tail;
      head = part[i].head;
    } else if (i == np - 1) {                 /* the last fresh range stays unwritten */
      out->first = part[i].fresh;
      out->fresh = part[i].fresh + size;
      out->nfresh = part[i].n - 1;
    } else {
      for (unsigned k = part[i].n; k-- > 0;) {
        void *p = part[i].fresh + (size_t)k * size;
        ((uint64_t *)p)[1] = _hpcmem_free_key;
        if (!tail) tail = p;
        set_next(p, head); head = p;
      }
    }
  }
  if (got && !out->first) {                   /* a recycled object: off the list, key cleared */
    out->first = head;
    head = next_of(head);
    ((uint64_t *)out->first)[1] = 0;
  }
  out->list = head;
  out->nlist = got ? got - 1 - out->nfresh : 0;
  return got;
}

int _hpcmem_heap_uncarve(char *fresh, unsigned n) {
  hpcmem_span_t *s = _hpcmem_span_of(fresh);
  hpcmem_heap_t *h = &_hpcmem_heaps.heap[s->heap];
  uint32_t at = (uint32_t)((size_t)(fresh - s->start) / s->obj_size);
  int done = 1;
  _hpcmem_lock_st(&h->lock);
  /* A thread's range follows the object its refill handed out first, so it
   * can join a hole only from below (the rest of a hole a refill took part
   * of), and it never starts where a hole ends: the hole never ends at bump. */
  if (at + n == s->bump) {
    carve(h, s, -(int32_t)n);             /* the span's last carving: it is uncarved */
  } else if (!s->hole) {
    hole_set(s, at, n);                   /* carved before another thread's: the span's hole */
  } else if (at + n == _hpcmem_hole_at(s->hole)) {
    hole_set(s, at, n + hole_n(s));
  } else {
    done = 0;                             /* a second hole: the caller writes the objects onto a list */
  }
  if (done) {
    s->used -= n;
    if (s->hole && s->in_partial == LIST_FRESH && h->fresh[s->cls] != s) {
      list_remove(h, s);                  /* the class's next refill takes the hole */
      list_push(h, s, LIST_FRESH);
    }
    span_file(h, s);
    span_maybe_release(h, s);
  }
  _hpcmem_unlock_st(&h->lock);
  return done;
}

void _hpcmem_span_remote_free(hpcmem_span_t *s, void *p) {
  ((uint64_t *)p)[1] = _hpcmem_free_key;        /* a second free of p is searched for */
  void *old = __atomic_load_n(&s->remote, __ATOMIC_RELAXED);
  do set_next(p, old);
  while (!__atomic_compare_exchange_n(&s->remote, &old, p, 1, __ATOMIC_RELEASE, __ATOMIC_RELAXED));
  if (old == NULL && !__atomic_exchange_n(&s->pending, 1, __ATOMIC_ACQ_REL)) {
    hpcmem_heap_t *h = &_hpcmem_heaps.heap[s->heap];
    hpcmem_span_t *top = __atomic_load_n(&h->pending, __ATOMIC_RELAXED);
    do s->pending_next = top;
    while (!__atomic_compare_exchange_n(&h->pending, &top, s, 1, __ATOMIC_RELEASE, __ATOMIC_RELAXED));
  }
}

/* Under the owner's lock nothing takes objects off either list (other groups
 * only push onto the remote list, which leaves the nodes already there as
 * they are), so both walks are safe; they stop after `capacity` steps. */
int _hpcmem_span_holds_free(hpcmem_span_t *s, const void *p) {
  hpcmem_heap_t *h = &_hpcmem_heaps.heap[s->heap];
  int found = 0;
  _hpcmem_lock_st(&h->lock);
  unsigned n = 0;
  for (void *q = s->free; q && n <= s->capacity && !found; q = next_of(q), n++) found = q == p;
  n = 0;
  for (void *q = __atomic_load_n(&s->remote, __ATOMIC_ACQUIRE); q && n <= s->capacity && !found; q = next_of(q), n++)
    found = q == p;
  for (unsigned k = 0; k < h->stash_count[s->cls] && !found; k++) {
    n = 0;
    for (void *q = h->stash[s->cls][k]; q && n < h->stash_n[s->cls][k] && !found; q = next_of(q), n++) found = q == p;
  }
  _hpcmem_unlock_st(&h->lock);
  return found;
}

/* The objects are sorted into per-span chains outside the lock (a batch
 * comes from a few spans); under the lock each chain is spliced in O(1). */
#define FLUSH_SPANS 8
struct flush_group { hpcmem_span_t *s; void *head, *tail; unsigned n; };

static void flush_groups(hpcmem_heap_t *mine, struct flush_group *g, unsigned ng) {
  _hpcmem_lock_st(&mine->lock);
  for (unsigned i = 0; i < ng; i++) {
    hpcmem_span_t *s = g[i].s;
    if (!s->free) s->free_tail = g[i].tail;
    set_next(g[i].tail, s->free);
    s->free = g[i].head;
    s->used -= g[i].n;
    mine->free_small_bytes += (uint64_t)g[i].n * s->obj_size;
    unsigned was = s->in_partial;
    span_file(mine, s);
    if (was) span_maybe_release(mine, s);
  }
  _hpcmem_unlock_st(&mine->lock);
}

__attribute__((noinline)) static int stash_put(hpcmem_heap_t *h, unsigned cls, void *list, unsigned n);

void _hpcmem_heap_flush(hpcmem_heap_t *mine, unsigned cls, void *list, unsigned n, uint64_t *remote_count) {
  if (cls && stash_put(mine, cls, list, n)) return;   /* whole, into the stash (below) */
  struct flush_group g[FLUSH_SPANS];
  unsigned ng = 0;
  while (list && n--) {
    void *p = list;
    list = next_of(p);
    hpcmem_span_t *s = _hpcmem_span_of(p);
    if (s->heap != mine->index) { _hpcmem_span_remote_free(s, p); (*remote_count)++; continue; }
    unsigned i = 0;
    while (i < ng && g[i].s != s) i++;
    if (i == ng) {
      if (ng == FLUSH_SPANS) { flush_groups(mine, g, ng); ng = i = 0; }
      g[ng++] = (struct flush_group){s, NULL, p, 0};
    }
    set_next(p, g[i].head);
    g[i].head = p;
    g[i].n++;
  }
  if (ng) flush_groups(mine, g, ng);
}

/* ---- the stash ----
 *
 * A thread cache flushes half a bin when it runs full, and a refill takes
 * half a bin when it runs empty.  Through the spans, both cost a walk of
 * the objects: the flush looks up each object's span and splices it back,
 * the refill pops the objects one by one from a span's free list.  Where
 * threads of one group allocate and free at the same time (16 threads on
 * the two cpus of one heap; a producer and its consumer), those walks ran
 * under the heap's lock and missed the cache on every span record and
 * object the other cpu had written last (alloc_threads --mode local
 * --threads 16: 7.5 % of the run in the refill, two thirds of it on two
 * loads).  So a flushed list that is all of the heap's own slice is kept
 * whole, up to HPCMEM_STASH lists of each class and STASH_BYTES in all, and
 * a refill of its class takes it back whole: one store and one load under
 * the lock, and its objects are first read where malloc hands them out
 * (the fast path fetches the next one ahead).  The objects stay counted as
 * used in their spans (a span with stashed objects does not empty);
 * malloc_trim and the checks see the stash.  (tcmalloc's transfer cache
 * moves batches between its thread caches the same way.)  The caches flush
 * into it only with HPCMEM_STASH_THREADS_PER_CPU live threads or more a cpu
 * (tcache.c: with fewer, lists waited here that a span would have handed
 * out, and the peaks grew).  Its code is out of line and outside the window
 * of code every process runs (stash_take, stash_put). */
#define STASH_BYTES ((uint64_t)1 << 18)

/* Is list n objects of h's slice, ending in NULL?  (The caller's own bin:
 * its objects were freed by this thread, so the walk reads its cache.) */
static int stash_fits(const hpcmem_heap_t *h, void *list, unsigned n) {
  if (!n || n > UINT16_MAX) return 0;
  for (unsigned i = 0; i < n; i++) {
    if (!list || (uintptr_t)list - (uintptr_t)h->base >= SLICE) return 0;
    list = next_of(list);
  }
  return list == NULL;
}

/* Under h's lock: list (n objects of class cls, stash_fits) into the stash
 * when it has room; 1 taken, 0 not. */
static int stash_push(hpcmem_heap_t *h, unsigned cls, void *list, unsigned n) {
  unsigned k = h->stash_count[cls];
  uint64_t bytes = (uint64_t)n * _hpcmem_class_size[cls];
  if (k == HPCMEM_STASH || h->stash_bytes + bytes > STASH_BYTES) return 0;
  h->stash[cls][k] = list;
  h->stash_n[cls][k] = (uint16_t)n;
  h->stash_count[cls] = (uint8_t)(k + 1);
  h->stash_bytes += bytes;
  return 1;
}

/* list (n objects of class cls) whole into h's stash when it is n objects
 * of h's slice and the stash has room: 1 kept, 0 not (the caller gives
 * them to their spans).  Out of line, as stash_take: only a process with
 * many threads a cpu runs them, and the code every process runs stays
 * within its window (docs/footprint.md, Code pages). */
__attribute__((noinline)) static int stash_put(hpcmem_heap_t *h, unsigned cls, void *list, unsigned n) {
  if (!stash_fits(h, list, n)) return 0;
  _hpcmem_lock_st(&h->lock);
  int kept = stash_push(h, cls, list, n);
  _hpcmem_unlock_st(&h->lock);
  return kept;
}

/* Under h's lock: the newest list of class cls that holds at most max
 * objects (a list from a thread with a larger bin waits for one like it;
 * the lists after it move down), else NULL; *n its objects. */
static void *stash_pop(hpcmem_heap_t *h, unsigned cls, unsigned max, unsigned *n) {
  unsigned k = h->stash_count[cls];
  while (k-- > 0) {
    if (h->stash_n[cls][k] > max) continue;
    void *list = h->stash[cls][k];
    *n = h->stash_n[cls][k];
    for (unsigned j = k + 1; j < h->stash_count[cls]; j++) {
      h->stash[cls][j - 1] = h->stash[cls][j];
      h->stash_n[cls][j - 1] = h->stash_n[cls][j];
    }
    h->stash_count[cls]--;
    h->stash_bytes -= (uint64_t)*n * _hpcmem_class_size[cls];
    return list;
  }
  return NULL;
}

/* A refill's part (h locked): a list of the stash, about the size asked
 * for, or any one rather than untouched memory (the bin may then hold more
 * than its room: its next free flushes), is all the refill takes.
 * Unlocks h and returns its objects into out (its first object handed
 * out, without the free key), or returns 0 with h still locked. */
__attribute__((noinline)) static unsigned stash_take(hpcmem_heap_t *h, unsigned cls, hpcmem_refill_t *out, unsigned want) {
  unsigned n = 0;
  void *list = stash_pop(h, cls, h->partial[cls] ? 2 * want + 1 : UINT16_MAX, &n);
  if (!list) return 0;
  _hpcmem_unlock_st(&h->lock);
  out->first = list;
  out->list = next_of(list);
  out->nlist = n - 1;
  out->fresh = NULL;
  out->nfresh = 0;
  ((uint64_t *)list)[1] = 0;
  return n;
}

/* The stash's lists back to their spans (malloc_trim; the last thread
 * above the stash's threshold exited): those there when it starts
 * (HPCMEM_STASH a class; threads may stash others meanwhile). */
void _hpcmem_heap_stash_drain(hpcmem_heap_t *h) {
  if (!__atomic_load_n(&h->stash_bytes, __ATOMIC_RELAXED)) return;
  for (unsigned c = 1; c < HPCMEM_NCLASSES; c++) {
    for (unsigned k = 0; k < HPCMEM_STASH; k++) {
      unsigned n = 0;
      uint64_t remote = 0;
      _hpcmem_lock_st(&h->lock);
      void *list = stash_pop(h, c, UINT16_MAX, &n);
      _hpcmem_unlock_st(&h->lock);
      if (!list) break;
      _hpcmem_heap_flush(h, 0, list, n, &remote);   /* class 0: to the spans */
    }
  }
}

/* ---- direct runs ---- */

void *_hpcmem_heap_run_alloc(hpcmem_heap_t *h, size_t size, size_t align) {
  size_t need = size > align ? size : align;    /* runs are aligned to their own size */
  if (need > ((size_t)1 << (HPCMEM_SLICE_SHIFT - 1))) return NULL;
  _hpcmem_lock_st(&h->lock);
  hpcmem_span_t *s = run_new(h, order_for(need), HPCMEM_SPAN_RUN);
  if (s) s->run_size = (size_t)1 << (s->order + _hpcmem_heaps.block_shift);
  _hpcmem_unlock_st(&h->lock);
  return s ? s->start : NULL;
}

int _hpcmem_heap_run_free(hpcmem_span_t *s, void *p) {
  hpcmem_heap_t *h = &_hpcmem_heaps.heap[s->heap];
  _hpcmem_lock_st(&h->lock);
  if (s->kind != HPCMEM_SPAN_RUN || s->start != (char *)p) { _hpcmem_unlock_st(&h->lock); return -EINVAL; }
  run_release(h, s);
  _hpcmem_unlock_st(&h->lock);
  return 0;
}

/* ---- malloc_trim ---- */

uint64_t _hpcmem_heap_trim(hpcmem_heap_t *h) {
  _hpcmem_heap_stash_drain(h);     /* its objects back in their spans, which may then be empty */
  _hpcmem_lock_st(&h->lock);
  uint64_t mapped = h->mapped_bytes;
  if (__atomic_load_n(&h->pending, __ATOMIC_RELAXED)) collect_remote(h);   /* may release spans */
  uint64_t given = mapped - h->mapped_bytes;
  given += kept_release(h, 1);     /* empties the queue: no span left on it may be released twice */
  for (unsigned c = 1; c < HPCMEM_NCLASSES; c++) {
    hpcmem_span_t *lists[2] = {h->partial[c], h->fresh[c]};
    for (unsigned l = 0; l < 2; l++)
      for (hpcmem_span_t *s = lists[l], *next; s; s = next) {
        next = s->next;
        if (s->used) continue;
        given += span_bytes(s);     /* a class's last span, never kept */
        span_release(h, s);
      }
  }
  _hpcmem_unlock_st(&h->lock);
  return given;
}

uint64_t _hpcmem_heap_free_objects(hpcmem_heap_t *h, unsigned cls) {
  uint64_t n = 0;
  _hpcmem_lock_st(&h->lock);
  for (const hpcmem_span_t *s = h->partial[cls]; s; s = s->next) n += s->bump - s->used - hole_n(s);
  for (unsigned k = 0; k < h->stash_count[cls]; k++) n += h->stash_n[cls][k];
  _hpcmem_unlock_st(&h->lock);
  return n;
}

/* ---- checks and fork ---- */

/* One span of class c found on list `list` after prev: its free bytes, or -1 after a warning. */
static int64_t check_span(hpcmem_heap_t *h, hpcmem_span_t *s, unsigned c, unsigned list, hpcmem_span_t *prev) {
  int bad = 0;
  unsigned nfree = 0;
  void *last = NULL;
  for (void *p = s->free; p && nfree <= s->capacity; last = p, p = next_of(p)) {
    if (_hpcmem_span_of(p) != s || !_hpcmem_span_is_object(s, p)) {
      _hpcmem_warn("heap %u: free list of span %p holds foreign %p", h->index, (void *)s->start, p);
      bad = 1; break;
    }
    nfree++;
  }
  if (s->free && last != s->free_tail) {
    _hpcmem_warn("heap %u: span %p: free list ends at %p, its tail says %p", h->index, (void *)s->start,
                 last, s->free_tail);
    bad = 1;
  }
  size_t chunk = (size_t)(s->start - _hpcmem_heaps.base) >> HPCMEM_CHUNK_SHIFT;
  if (_hpcmem_heaps.classmap[chunk] != HPCMEM_CLASS_KEY(c)) {
    _hpcmem_warn("heap %u: class map says %u for span %p of class %u", h->index,
                 _hpcmem_heaps.classmap[chunk], (void *)s->start, c);
    bad = 1;
  }
  /* the partial list holds spans with free objects, the fresh list those with only uncarved room or a hole */
  if (s->cls != c || s->prev != prev || s->in_partial != list || s->bump > s->capacity ||
      (s->hole && _hpcmem_hole_at(s->hole) + hole_n(s) >= s->bump) ||
      (list == LIST_PARTIAL ? !s->free : s->free || (s->bump == s->capacity && !s->hole)) ||
      s->used + nfree + hole_n(s) != s->bump || _hpcmem_itree_order(&h->tree, (size_t)(s->start - h->base) >> _hpcmem_heaps.block_shift) != s->order) {
    _hpcmem_warn("heap %u: span %p of class %u is inconsistent (list %u/%u, used %u free %u carved %u of %u)",
                 h->index, (void *)s->start, c, list, s->in_partial, s->used, nfree, s->bump, s->capacity);
    bad = 1;
  }
  return bad ? -1 : (int64_t)nfree * s->obj_size;
}

/* The stash (lock held): every list is as long as recorded and ends in
 * NULL, its objects are objects of a span of its class in h (counted there
 * as used) carrying the free key; the bytes add up.  0 or -1 after a warning. */
static int check_stash(hpcmem_heap_t *h) {
  uint64_t bytes = 0;
  for (unsigned c = 1; c < HPCMEM_NCLASSES; c++) {
    if (h->stash_count[c] > HPCMEM_STASH) {
      _hpcmem_warn("heap %u: %u stashed lists of class %u", h->index, h->stash_count[c], c);
      return -1;
    }
    for (unsigned k = 0; k < h->stash_count[c]; k++) {
      void *p = h->stash[c][k];
      for (unsigned i = 0; i < h->stash_n[c][k]; i++, p = next_of(p)) {
        hpcmem_span_t *s = p ? _hpcmem_span_of(p) : NULL;
        if (!s || s->kind != HPCMEM_SPAN_SMALL || s->heap != h->index || s->cls != c || !_hpcmem_span_is_object(s, p) ||
            ((uint64_t *)p)[1] != _hpcmem_free_key) {
          _hpcmem_warn("heap %u: stashed list %u of class %u holds %p (object %u of %u): not a free object of the class",
                       h->index, k, c, p, i, h->stash_n[c][k]);
          return -1;
        }
      }
      if (p) {
        _hpcmem_warn("heap %u: stashed list %u of class %u runs past its %u objects", h->index, k, c, h->stash_n[c][k]);
        return -1;
      }
      bytes += (uint64_t)h->stash_n[c][k] * _hpcmem_class_size[c];
    }
  }
  if (bytes != h->stash_bytes) {
    _hpcmem_warn("heap %u: %llu bytes stashed, %llu counted", h->index, (unsigned long long)bytes,
                 (unsigned long long)h->stash_bytes);
    return -1;
  }
  return 0;
}

int _hpcmem_heap_check(hpcmem_heap_t *h) {
  int rc = 0;
  _hpcmem_lock_st(&h->lock);
  if (_hpcmem_itree_check(&h->tree) < 0) rc = -EFAULT;
  uint64_t free_bytes = 0;
  for (unsigned c = 1; c < HPCMEM_NCLASSES; c++) {
    for (unsigned list = LIST_PARTIAL; list <= LIST_FRESH; list++) {
      hpcmem_span_t *first = list == LIST_PARTIAL ? h->partial[c] : h->fresh[c];
      for (hpcmem_span_t *s = first, *prev = NULL; s; prev = s, s = s->next) {
        int64_t f = check_span(h, s, c, list, prev);
        if (f < 0) rc = -EFAULT; else free_bytes += (uint64_t)f;
      }
    }
  }
  uint64_t kept_bytes = 0, dirty = 0, n = 0;
  for (hpcmem_span_t *s = h->kept_head; s && n <= h->mapped_bytes; s = s->kept_next, n++) {
    dirty += dirty_tail(s);
    if (s->kept && s->dirty) {
      _hpcmem_warn("heap %u: kept span %p has a tail of another class", h->index, (void *)s->start);
      rc = -EFAULT;
    }
    if (!s->on_kept_list || (s->kept && (s->used || s->kind != HPCMEM_SPAN_SMALL))) {
      _hpcmem_warn("heap %u: span %p on the kept queue is not an empty span (used %u)", h->index, (void *)s->start, s->used);
      rc = -EFAULT;
    }
    if (s->kept) kept_bytes += span_bytes(s);
    if (!s->kept_next && s != h->kept_tail) {
      _hpcmem_warn("heap %u: the kept queue ends at %p, its tail says %p", h->index, (void *)s, (void *)h->kept_tail);
      rc = -EFAULT;
    }
  }
  if (dirty != h->dirty_bytes) {
    _hpcmem_warn("heap %u: %llu bytes of taken-over tails on the queue, %llu counted", h->index,
                 (unsigned long long)dirty, (unsigned long long)h->dirty_bytes);
    rc = -EFAULT;
  }
  if (kept_bytes != h->empty_bytes) {
    _hpcmem_warn("heap %u: %llu bytes of kept spans on the queue, %llu counted", h->index,
                 (unsigned long long)kept_bytes, (unsigned long long)h->empty_bytes);
    rc = -EFAULT;
  }
  if (check_stash(h) < 0) rc = -EFAULT;
  if (free_bytes != h->free_small_bytes && !__atomic_load_n(&h->pending, __ATOMIC_RELAXED) && rc == 0) {
    _hpcmem_warn("heap %u: %llu free bytes in spans, %llu counted", h->index,
                 (unsigned long long)free_bytes, (unsigned long long)h->free_small_bytes);
    rc = -EFAULT;
  }
  _hpcmem_unlock_st(&h->lock);
  return rc;
}

void _hpcmem_heaps_fork_prepare(void) {
  for (unsigned i = 0; i < _hpcmem_heaps.count; i++) _hpcmem_lock(&_hpcmem_heaps.heap[i].lock);
}
void _hpcmem_heaps_fork_parent(void) {
  for (unsigned i = 0; i < _hpcmem_heaps.count; i++) _hpcmem_unlock(&_hpcmem_heaps.heap[i].lock);
}
void _hpcmem_heaps_fork_child(void) { _hpcmem_heaps_fork_parent(); }
