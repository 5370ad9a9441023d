/* Segments (see segment.h). */
#include "config.h"
#include "segment/segment.h"
#include "prim/prim.h"
#include "topo/topo.h"
#include "util/job.h"
#include "util/log.h"
#include "util/options.h"
#include <errno.h>
#include <string.h>

hpcmem_segment_t _hpcmem_segs[HPCMEM_SEG_COUNT];
hpcmem_seg_range_t _hpcmem_seg_range[HPCMEM_SEG_COUNT];
int64_t _hpcmem_seg_other_live;
static int forked_child;            /* this process was forked: the shared parts are the parent's */

/* Where s lies, for _hpcmem_seg_holding(): size first, base last with
 * release, so that a reader that sees the base sees the size too. */
static void publish_range(const hpcmem_segment_t *s, char *base, size_t size) {
  hpcmem_seg_range_t *r = &_hpcmem_seg_range[_hpcmem_seg_id(s)];
  r->size = size;
  __atomic_store_n(&r->base, base, __ATOMIC_RELEASE);
}

#define GRAIN ((size_t)256)           /* Sunway's interleave granule, and the tier's alignment */
#define PART_ALIGN ((size_t)2 << 20)

static size_t align_up(size_t v, size_t a) { return (v + a - 1) & ~(a - 1); }

/* The SWAlloc tier over the segment's own part, at a fine grain: a segment
 * serves every size, so remainders are split off as soon as they hold a
 * granule (the private large tier splits only above 128 KiB). */
static int tier_init(hpcmem_segment_t *s, char *region, size_t bytes, int discard) {
  hpcmem_large_config_t c;
  _hpcmem_large_config_from_options(&c);
  c.align = (size_t)_hpcmem_opt(LARGE_ALIGN) > GRAIN ? (size_t)_hpcmem_opt(LARGE_ALIGN) : GRAIN;
  c.min_split = c.align;
  c.thp = 0;                        /* no huge-page arena: see make_interleaved */
  c.reserve = bytes;
  c.region = region;
  c.discard = discard;
  return _hpcmem_large_init(&s->tier, &c);
}

static void set_ready(hpcmem_segment_t *s) { __atomic_store_n(&s->state, HPCMEM_SEG_READY, __ATOMIC_RELEASE); }

static int fail(hpcmem_segment_t *s, int err) {
  s->error = err;
  __atomic_store_n(&s->state, HPCMEM_SEG_FAILED, __ATOMIC_RELEASE);
  return -err;
}

/* ------------------------------------------------------------------ */
/* interleaved                                                          */

/* The node set: HPCMEM_INTERLEAVE_NODES checked against the topology; a list
 * naming nodes that do not exist is reported and replaced by all nodes. */
static int interleave_mask(unsigned long *mask, char *text, size_t len) {
  const char *want = _hpcmem_opt_str(INTERLEAVE_NODES);
  int n = _hpcmem_topo_nodeset_parse_as("HPCMEM_INTERLEAVE_NODES", want, mask, HPCMEM_TOPO_MAX_NODE_OS);
  if (n <= 0) {
    _hpcmem_warn("HPCMEM_INTERLEAVE_NODES: using all NUMA nodes instead");
    n = _hpcmem_topo_nodeset_parse_as(NULL, "all", mask, HPCMEM_TOPO_MAX_NODE_OS);
  }
  if (n > 0) _hpcmem_topo_nodeset_format(mask, HPCMEM_TOPO_MAX_NODE_OS, text, len);
  return n;
}

static int make_interleaved(hpcmem_segment_t *s) {
  size_t size = align_up((size_t)_hpcmem_opt(INTERLEAVED_SIZE), PART_ALIGN);
  if (tier_init(s, NULL, size, 0) < 0) return fail(s, ENOMEM);
  unsigned long mask[HPCMEM_TOPO_MASK_LONGS];
  if (interleave_mask(mask, s->nodes, sizeof s->nodes) > 0) {
    /* the policy goes on the whole range before any page exists: every page
     * the tier ever backs is placed by it, also after decay gave it back */
    int rc = _hpcmem_prim_interleave(s->tier.base, size, mask, HPCMEM_TOPO_MAX_NODE_OS + 1);
    if (rc == -EINVAL) {
      /* a topology file describes another machine than this one: interleave
       * over the nodes the kernel lets this process use */
      char given[64];
      memcpy(given, s->nodes, sizeof given);
      rc = _hpcmem_prim_mems_allowed(mask, HPCMEM_TOPO_MAX_NODE_OS + 1);
      if (rc == 0) rc = _hpcmem_prim_interleave(s->tier.base, size, mask, HPCMEM_TOPO_MAX_NODE_OS + 1);
      if (rc == 0) {
        _hpcmem_topo_nodeset_format(mask, HPCMEM_TOPO_MAX_NODE_OS, s->nodes, sizeof s->nodes);
        _hpcmem_warn("interleaved segment: nodes %s (topology: %s) are not all on this machine; "
                     "interleaving over its nodes %s", given, _hpcmem_topo_source(), s->nodes);
      }
    }
    if (rc < 0) _hpcmem_warn("interleaved segment: mbind(MPOL_INTERLEAVE) failed: %s; pages are placed by first touch",
                             strerror(-rc));
  }
  /* Interleaved requests are large arrays swept by every core: huge pages
   * cut their TLB misses, and the tier packs blocks from the bottom, so a
   * touched huge page is mostly used.  The whole range, not an arena of big
   * blocks as in the private tier; the kernel then interleaves whole 2 MiB
   * pages (docs/segments.md). */
  if (_hpcmem_opt(THP)) {
    int rc = _hpcmem_prim_hugepages(s->tier.base, size, 1);
    if (rc < 0 && _hpcmem_opt(VERBOSE))
      _hpcmem_info("interleaved segment: madvise(MADV_HUGEPAGE) failed: %s; ordinary pages", strerror(-rc));
  }
  s->own = s->tier.base;
  s->own_size = size;
  publish_range(s, s->own, size);
  s->node_ranks = 1;
  set_ready(s);
  return 0;
}

/* ------------------------------------------------------------------ */
/* shared                                                               */

static int run_shared(hpcmem_segment_t *s, char *base, size_t part, int node_ranks, int node_rank, int discard) {
  char *own = base + (size_t)node_rank * part;
  if (tier_init(s, own, part, discard) < 0) return -ENOMEM;
  s->node_ranks = node_ranks;
  s->node_rank = node_rank;
  s->own = own;
  s->own_size = part;
  /* the range last: from here _hpcmem_seg_holding() sees the segment */
  publish_range(s, base, (size_t)node_ranks * part);
  set_ready(s);
  return 0;
}

/* Outside an MPI job: anonymous shared memory of this process. */
static int make_process_local(hpcmem_segment_t *s) {
  size_t part = align_up((size_t)_hpcmem_opt(SHARED_SIZE), PART_ALIGN);
  char *base = _hpcmem_prim_shm_anon(part);
  if (!base) return fail(s, ENOMEM);
  s->process_local = 1;
  if (run_shared(s, base, part, 1, 0, 1) < 0) return fail(s, ENOMEM);
  if (_hpcmem_opt(VERBOSE))
    _hpcmem_info("shared segment: not an MPI job, so it is process-local (%zu MiB of anonymous shared memory)",
                 part >> 20);
  return 0;
}

int _hpcmem_seg_shared_attach(const char *path, size_t part, int node_ranks, int node_rank) {
  hpcmem_segment_t *s = &_hpcmem_segs[HPCMEM_SEG_SHARED];
  if (node_ranks < 1 || node_rank < 0 || node_rank >= node_ranks || !part || part % PART_ALIGN) return -EINVAL;
  _hpcmem_lock(&s->lock);
  int rc = 0;
  if (s->state == HPCMEM_SEG_READY) {
    /* a lone process made its process-local segment before MPI_Init (a
     * singleton run): with one rank per node that is the node's segment */
    if (node_ranks > 1)
      _hpcmem_warn("shared segment: used before MPI_Init, so it stays process-local; "
                   "allocate shared objects after MPI_Init to share them with the node's ranks");
    rc = -EBUSY;
  } else {
    char *base = _hpcmem_prim_shm_map(path, (size_t)node_ranks * part);
    if (!base) rc = -errno;
    else if ((rc = run_shared(s, base, part, node_ranks, node_rank, 1)) < 0) _hpcmem_prim_release(base, (size_t)node_ranks * part);
    if (rc < 0) fail(s, -rc == ENOMEM ? ENOMEM : ENODEV);
  }
  _hpcmem_unlock(&s->lock);
  return rc;
}

void _hpcmem_seg_shared_fail(int err) {
  hpcmem_segment_t *s = &_hpcmem_segs[HPCMEM_SEG_SHARED];
  _hpcmem_lock(&s->lock);
  if (s->state == HPCMEM_SEG_UNSET) fail(s, err);
  _hpcmem_unlock(&s->lock);
}

/* ------------------------------------------------------------------ */
/* making segments ready                                                */

int _hpcmem_seg_ready(int id) {
  if (id <= HPCMEM_SEG_PRIVATE || id >= HPCMEM_SEG_COUNT) return id == HPCMEM_SEG_PRIVATE ? 0 : -EINVAL;
  hpcmem_segment_t *s = &_hpcmem_segs[id];
  int st = __atomic_load_n(&s->state, __ATOMIC_ACQUIRE);
  if (st == HPCMEM_SEG_READY) return forked_child && id == HPCMEM_SEG_SHARED ? -ENODEV : 0;
  if (st == HPCMEM_SEG_FAILED) return -s->error;
  if (id == HPCMEM_SEG_SHARED && _hpcmem_seg_mpi_linked && _hpcmem_seg_mpi_linked() && _hpcmem_job.from_launcher)
    return -EAGAIN;                 /* an MPI job: MPI_Init makes the node's mapping */
  _hpcmem_lock(&s->lock);
  int rc = 0;
  if (s->state == HPCMEM_SEG_UNSET) {
    rc = id == HPCMEM_SEG_INTERLEAVED ? make_interleaved(s) : make_process_local(s);
  } else if (s->state == HPCMEM_SEG_FAILED) {
    rc = -s->error;
  }
  _hpcmem_unlock(&s->lock);
  return rc;
}

int _hpcmem_seg_serves_malloc(int id) {
  if (id != HPCMEM_SEG_SHARED) return _hpcmem_seg_ready(id) == 0;
  const hpcmem_segment_t *s = &_hpcmem_segs[id];
  return __atomic_load_n(&s->state, __ATOMIC_ACQUIRE) == HPCMEM_SEG_READY && !s->process_local && !forked_child;
}

/* ------------------------------------------------------------------ */
/* blocks                                                               */

/* Live bytes move by d (the segment's and the total of the non-private ones). */
static void add_live(hpcmem_segment_t *s, int64_t d) {
  __atomic_add_fetch(&_hpcmem_seg_other_live, d, __ATOMIC_RELAXED);
  int64_t now = __atomic_add_fetch(&s->live, d, __ATOMIC_RELAXED);
  int64_t old = __atomic_load_n(&s->peak, __ATOMIC_RELAXED);
  while (now > old && !__atomic_compare_exchange_n(&s->peak, &old, now, 1, __ATOMIC_RELAXED, __ATOMIC_RELAXED)) {
  }
}

static void count_alloc(hpcmem_segment_t *s, size_t usable) {
  __atomic_add_fetch(&s->allocs, 1, __ATOMIC_RELAXED);
  __atomic_add_fetch(&s->bytes_allocated, usable, __ATOMIC_RELAXED);
  add_live(s, (int64_t)usable);
}

static void count_free(hpcmem_segment_t *s, size_t usable) {
  __atomic_add_fetch(&s->frees, 1, __ATOMIC_RELAXED);
  __atomic_add_fetch(&s->bytes_freed, usable, __ATOMIC_RELAXED);
  add_live(s, -(int64_t)usable);
}

void *_hpcmem_seg_alloc(int id, size_t n, size_t align, int zero, size_t *usable) {
  int rc = _hpcmem_seg_ready(id);
  if (rc < 0) { errno = -rc; return NULL; }
  hpcmem_segment_t *s = &_hpcmem_segs[id];
  size_t u = 0;
  void *p = zero ? _hpcmem_large_alloc_zeroed(&s->tier, n, align, &u)
                 : _hpcmem_large_alloc_usable(&s->tier, n, align, &u);
  if (!p) return NULL;                 /* errno from the tier */
  count_alloc(s, u);
  if (usable) *usable = u;
  return p;
}

int _hpcmem_seg_part_of(const hpcmem_segment_t *s, const void *p) {
  if (_hpcmem_seg_id(s) != HPCMEM_SEG_SHARED || !s->own_size) return -1;
  const hpcmem_seg_range_t *r = &_hpcmem_seg_range[HPCMEM_SEG_SHARED];
  size_t off = (size_t)((const char *)p - r->base);
  return off < r->size ? (int)(off / s->own_size) : -1;
}

static int in_own_part(const hpcmem_segment_t *s, const void *p) {
  return (uintptr_t)p - (uintptr_t)s->own < s->own_size;
}

int _hpcmem_seg_free(hpcmem_segment_t *s, void *p, size_t *usable) {
  if (!in_own_part(s, p)) return -EPERM;
  if (forked_child && _hpcmem_seg_id(s) == HPCMEM_SEG_SHARED) {
    /* the parent's blocks: its records are the ones that count */
    if (usable) *usable = 0;
    return 0;
  }
  size_t u = 0;
  int rc = _hpcmem_large_free(&s->tier, p, &u);
  if (rc < 0) return rc;
  count_free(s, u);
  if (usable) *usable = u;
  return 0;
}

size_t _hpcmem_seg_usable(hpcmem_segment_t *s, const void *p) {
  return in_own_part(s, p) ? _hpcmem_large_usable_size(&s->tier, p) : 0;
}

int _hpcmem_seg_resize(hpcmem_segment_t *s, void *p, size_t n, int64_t *delta) {
  if (!in_own_part(s, p)) return -EPERM;
  if (forked_child && _hpcmem_seg_id(s) == HPCMEM_SEG_SHARED) return -ENOMEM;
  int64_t d = 0;
  int rc = _hpcmem_large_resize(&s->tier, p, n, &d);
  if (rc < 0) return rc;
  if (d > 0) __atomic_add_fetch(&s->bytes_allocated, (uint64_t)d, __ATOMIC_RELAXED);
  else __atomic_add_fetch(&s->bytes_freed, (uint64_t)-d, __ATOMIC_RELAXED);
  add_live(s, d);
  *delta = d;
  return 0;
}

/* ------------------------------------------------------------------ */
/* checks and fork                                                      */

int _hpcmem_seg_check(void) {
  int rc = 0;
  for (int i = HPCMEM_SEG_INTERLEAVED; i < HPCMEM_SEG_COUNT; i++)
    if (__atomic_load_n(&_hpcmem_segs[i].state, __ATOMIC_ACQUIRE) == HPCMEM_SEG_READY &&
        _hpcmem_large_check(&_hpcmem_segs[i].tier) < 0)
      rc = -EFAULT;
  return rc;
}

struct own_copy { char *from, *to; };

/* The resident pages of a live block, into the copy (a page a neighbour
 * shares may be copied twice: the same bytes). */
static void copy_block(void *arg, char *start, size_t bytes) {
  struct own_copy *c = arg;
  size_t pg = _hpcmem_prim_page_size();
  char *lo = (char *)((uintptr_t)start & ~(uintptr_t)(pg - 1));
  char *hi = (char *)(((uintptr_t)start + bytes + pg - 1) & ~(uintptr_t)(pg - 1));
  unsigned char vec[256];
  for (char *at = lo; at < hi;) {
    size_t n = (size_t)(hi - at) / pg < sizeof vec ? (size_t)(hi - at) / pg : sizeof vec;
    if (_hpcmem_prim_resident_pages(at, n * pg, vec) < 0) memset(vec, 1, n);   /* copy them all */
    for (size_t i = 0; i < n; i++)
      if (vec[i] & 1) memcpy(c->to + (at + i * pg - c->from), at + i * pg, pg);
    at += n * pg;
  }
}

/* With HPCMEM_DEFAULT_SEGMENT=shared a forked child must get a copy of the
 * rank's part, which holds malloc's objects, as fork copies the rest of the
 * heap.  The parent makes it in the fork's prepare step (a copy made in the
 * child would see what the parent does after fork returned to it): private
 * memory holding the live blocks' resident pages (pages never touched are
 * holes of the node's file, which a read would fill; a tmpfs page swapped
 * out is not resident and stays as the child sees it, shared).  The child
 * moves it over its part; the parent lets it go. */
static char *fork_copy;

static void copy_own_part(hpcmem_segment_t *s) {
  char *to = _hpcmem_prim_reserve(s->own_size, PART_ALIGN);
  if (!to) {
    _hpcmem_warn("fork: no memory for a copy of this rank's part of the shared segment (%s); "
                 "the child shares malloc's objects there with the parent", strerror(errno));
    return;
  }
  struct own_copy c = {s->own, to};
  _hpcmem_large_each_live(&s->tier, copy_block, &c);
  fork_copy = to;
}

void _hpcmem_seg_fork_prepare(int own_copy) {
  for (int i = HPCMEM_SEG_INTERLEAVED; i < HPCMEM_SEG_COUNT; i++) {
    hpcmem_segment_t *s = &_hpcmem_segs[i];
    _hpcmem_lock(&s->lock);
    if (s->state != HPCMEM_SEG_READY) continue;
    _hpcmem_large_fork_prepare(&s->tier);
    /* a forked child's part is private already: its children copy it as any memory */
    if (i == HPCMEM_SEG_SHARED && own_copy && !s->process_local && !forked_child) copy_own_part(s);
  }
}

void _hpcmem_seg_fork_parent(void) {
  if (fork_copy) _hpcmem_prim_release(fork_copy, _hpcmem_segs[HPCMEM_SEG_SHARED].own_size);
  fork_copy = NULL;
  for (int i = HPCMEM_SEG_COUNT - 1; i >= HPCMEM_SEG_INTERLEAVED; i--) {
    if (_hpcmem_segs[i].state == HPCMEM_SEG_READY) _hpcmem_large_fork_parent(&_hpcmem_segs[i].tier);
    _hpcmem_unlock(&_hpcmem_segs[i].lock);
  }
}

/* The child shares the parent's shared mapping but has a copy of its
 * records: allocating there would hand out the parent's free space twice,
 * so the child reads and writes shared objects but allocates none. */
void _hpcmem_seg_fork_child(void) {
  if (fork_copy) {
    hpcmem_segment_t *s = &_hpcmem_segs[HPCMEM_SEG_SHARED];
    int rc = _hpcmem_prim_move_over(fork_copy, s->own, s->own_size);
    if (rc < 0) {
      _hpcmem_prim_release(fork_copy, s->own_size);
      _hpcmem_warn("forked child: could not put the copy of its part of the shared segment in place (%s); "
                   "malloc's objects there stay shared with the parent", strerror(-rc));
    }
    fork_copy = NULL;
  }
  for (int i = HPCMEM_SEG_COUNT - 1; i >= HPCMEM_SEG_INTERLEAVED; i--) {
    if (_hpcmem_segs[i].state == HPCMEM_SEG_READY) _hpcmem_large_fork_child(&_hpcmem_segs[i].tier);
    _hpcmem_unlock(&_hpcmem_segs[i].lock);
  }
  forked_child = 1;
}
