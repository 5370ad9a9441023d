/* Contiguous regions (CLMalloc), see contig.h and docs/contig.md.
 *
 * Invariants (under the arena lock):
 *   bit i of `bits` is set  <=>  chunk i belongs to a live allocation;
 *   len[i] != 0             <=>  a live allocation of len[i] chunks starts at chunk i;
 *   region_free[r]          ==   clear bits of region r;
 *   every chunk below first_free is used (a lower bound, not exact).
 * The allocation table (len) is out of band, so free(p) can check p without
 * trusting anything stored in the user's memory. */
#include "config.h"
#include "place/contig.h"
#include "prim/prim.h"
#include "topo/topo.h"
#include "util/lock.h"
#include "util/log.h"
#include "util/options.h"
#include <errno.h>
#include <numaif.h>
#include <stdint.h>
#include <string.h>

#define CONTIG_MAGIC 0x48504d434f4e5447ULL  /* "HPMCONTG" */
#define NONE ((size_t)-1)

struct hpcmem_contig {
  uint64_t magic;
  hpcmem_lock_t lock;
  char *base;
  size_t size;               /* region_size * nregions */
  size_t region_size;
  int nregions;
  int mode;
  size_t chunk;
  unsigned shift;            /* log2(chunk) */
  size_t cpr;                /* chunks per region */
  size_t nchunks;
  size_t prealloc_chunks;    /* chunks [0, prealloc_chunks) stay backed */
  uint64_t *bits;
  uint32_t *len;
  size_t *region_free;
  int *region_node;
  size_t meta_size;
  size_t first_free;
  size_t used, live;
  uint64_t allocs, frees, failures, spanning;
};

/* ------------------------------------------------------------------ */
/* registry of live arenas: lets every entry point check its arena      */
/* without dereferencing it, and lets free() recognise our pointers     */

static hpcmem_contig_t *arenas[HPCMEM_CONTIG_MAX_ARENAS];
static int arenas_hw;        /* slots [0, arenas_hw) may be in use */
static hpcmem_lock_t arenas_lock = HPCMEM_LOCK_INIT;

static int arena_register(hpcmem_contig_t *a) {
  _hpcmem_lock(&arenas_lock);
  int slot = -1;
  for (int i = 0; i < HPCMEM_CONTIG_MAX_ARENAS && slot < 0; i++)
    if (!arenas[i]) slot = i;
  if (slot >= 0) {
    __atomic_store_n(&arenas[slot], a, __ATOMIC_RELEASE);
    if (slot >= arenas_hw) __atomic_store_n(&arenas_hw, slot + 1, __ATOMIC_RELEASE);
  }
  _hpcmem_unlock(&arenas_lock);
  return slot;
}

/* Removes a; 0, or -EINVAL if it was not registered (two destroys racing). */
static int arena_unregister(const hpcmem_contig_t *a) {
  int rc = -EINVAL;
  _hpcmem_lock(&arenas_lock);
  for (int i = 0; i < arenas_hw; i++)
    if (arenas[i] == a) { __atomic_store_n(&arenas[i], NULL, __ATOMIC_RELEASE); rc = 0; break; }
  _hpcmem_unlock(&arenas_lock);
  return rc;
}

int _hpcmem_contig_valid(const hpcmem_contig_t *a) {
  if (!a) return 0;
  int hw = __atomic_load_n(&arenas_hw, __ATOMIC_ACQUIRE);
  for (int i = 0; i < hw; i++)
    if (__atomic_load_n(&arenas[i], __ATOMIC_ACQUIRE) == a) return a->magic == CONTIG_MAGIC;
  return 0;
}

hpcmem_contig_t *_hpcmem_contig_owner(const void *p) {
  int hw = __atomic_load_n(&arenas_hw, __ATOMIC_ACQUIRE);
  for (int i = 0; i < hw; i++) {
    hpcmem_contig_t *a = __atomic_load_n(&arenas[i], __ATOMIC_ACQUIRE);
    if (a && (uintptr_t)p - (uintptr_t)a->base < a->size) return a;
  }
  return NULL;
}

/* ------------------------------------------------------------------ */
/* the bitmap, a word at a time                                         */

/* First bit in [from, limit) equal to `want` (0 or 1), or limit. */
static size_t find_bit(const uint64_t *bits, size_t from, size_t limit, int want) {
  while (from < limit) {
    size_t w = from >> 6;
    uint64_t word = want ? bits[w] : ~bits[w];
    word &= ~(uint64_t)0 << (from & 63);
    if (word) {
      size_t i = (w << 6) + (size_t)__builtin_ctzll(word);
      return i < limit ? i : limit;
    }
    from = (w + 1) << 6;
  }
  return limit;
}

/* First run of n clear bits inside [from, limit), or NONE. */
static size_t find_free_chunks(const uint64_t *bits, size_t from, size_t limit, size_t n) {
  for (;;) {
    size_t s = find_bit(bits, from, limit, 0);
    if (n > limit - s) return NONE;
    size_t e = find_bit(bits, s, s + n, 1);
    if (e == s + n) return s;
    from = e;
  }
}

static void set_range(uint64_t *bits, size_t s, size_t n, int on) {
  while (n) {
    size_t w = s >> 6, off = s & 63;
    size_t take = 64 - off < n ? 64 - off : n;
    uint64_t m = (take == 64 ? ~(uint64_t)0 : (((uint64_t)1 << take) - 1)) << off;
    if (on) bits[w] |= m; else bits[w] &= ~m;
    s += take;
    n -= take;
  }
}

/* Longest clear run inside [from, limit). */
static size_t longest_run(const uint64_t *bits, size_t from, size_t limit) {
  size_t best = 0;
  while (from < limit) {
    size_t s = find_bit(bits, from, limit, 0);
    size_t e = find_bit(bits, s, limit, 1);
    if (e - s > best) best = e - s;
    from = e;
  }
  return best;
}

/* Add d (signed) free chunks to every region that [s, s+n) overlaps. */
static void account(hpcmem_contig_t *a, size_t s, size_t n, int sign) {
  size_t end = s + n;
  for (size_t r = s / a->cpr; r * a->cpr < end; r++) {
    size_t lo = r * a->cpr > s ? r * a->cpr : s;
    size_t hi = (r + 1) * a->cpr < end ? (r + 1) * a->cpr : end;
    if (sign > 0) a->region_free[r] += hi - lo; else a->region_free[r] -= hi - lo;
  }
}

/* ------------------------------------------------------------------ */
/* the two placement policies                                          */

/* CLMalloc (Table 1): one first-fit scan over the bitmap of all regions. */
static size_t place_global(hpcmem_contig_t *a, size_t n) {
  size_t s = find_free_chunks(a->bits, a->first_free, a->nchunks, n);
  if (s == a->first_free) a->first_free = s + n;
  return s;
}

/* The paper's baseline (cma areas): a region never sees its neighbours'
 * bitmaps.  A request that fits one region goes to the first region with
 * room; a larger one needs k completely free adjacent regions. */
static size_t place_per_area(hpcmem_contig_t *a, size_t n) {
  if (n <= a->cpr) {
    for (int r = 0; r < a->nregions; r++) {
      if (a->region_free[r] < n) continue;
      size_t s = find_free_chunks(a->bits, (size_t)r * a->cpr, (size_t)(r + 1) * a->cpr, n);
      if (s != NONE) return s;
    }
    return NONE;
  }
  int k = (int)((n + a->cpr - 1) / a->cpr);
  for (int r = 0; r + k <= a->nregions;) {
    int j = r;
    while (j < r + k && a->region_free[j] == a->cpr) j++;
    if (j == r + k) return (size_t)r * a->cpr;
    r = j + 1;                  /* region j is in use: no run can start at or before it */
  }
  return NONE;
}

void *_hpcmem_contig_alloc(hpcmem_contig_t *a, size_t size, int *err) {
  if (!_hpcmem_contig_valid(a)) {
    _hpcmem_warn("hpcmem_contig_malloc(%p, %zu): not a live arena (destroyed, or never returned by hpcmem_contig_create)", (void *)a, size);
    *err = -EINVAL;
    return NULL;
  }
  if (size == 0) {
    _hpcmem_warn("hpcmem_contig_malloc(%p, 0): size 0 (a contiguous range needs at least one byte)", (void *)a);
    *err = -EINVAL;
    return NULL;
  }
  if (size > a->size) {
    _hpcmem_warn("hpcmem_contig_malloc(%p, %zu): larger than the whole arena (%zu bytes)", (void *)a, size, a->size);
    __atomic_fetch_add(&a->failures, 1, __ATOMIC_RELAXED);
    *err = -ENOMEM;
    return NULL;
  }
  size_t n = (size + a->chunk - 1) >> a->shift;
  _hpcmem_lock(&a->lock);
  size_t s = a->mode == HPCMEM_CONTIG_GLOBAL ? place_global(a, n) : place_per_area(a, n);
  if (s == NONE) {
    a->failures++;
    _hpcmem_unlock(&a->lock);
    *err = -ENOMEM;         /* no warning: running full is an answer, not a mistake */
    return NULL;
  }
  set_range(a->bits, s, n, 1);
  a->len[s] = (uint32_t)n;
  account(a, s, n, -1);
  a->used += n;
  a->live++;
  a->allocs++;
  if (s / a->cpr != (s + n - 1) / a->cpr) a->spanning++;
  _hpcmem_unlock(&a->lock);
  return a->base + (s << a->shift);
}

int _hpcmem_contig_release(hpcmem_contig_t *a, void *p) {
  if (!_hpcmem_contig_valid(a)) {
    _hpcmem_warn("hpcmem_contig_free(%p, %p): not a live arena (destroyed, or never returned by hpcmem_contig_create)", (void *)a, p);
    return -EINVAL;
  }
  if (!p) return 0;
  uintptr_t off = (uintptr_t)p - (uintptr_t)a->base;
  if (off >= a->size) {
    hpcmem_contig_t *other = _hpcmem_contig_owner(p);
    if (other)
      _hpcmem_warn("hpcmem_contig_free(%p, %p): the pointer belongs to another arena (%p)", (void *)a, p, (void *)other);
    else
      _hpcmem_warn("hpcmem_contig_free(%p, %p): the pointer is not in this arena (memory from malloc goes back with free)", (void *)a, p);
    return -EINVAL;
  }
  size_t s = off >> a->shift;
  _hpcmem_lock(&a->lock);
  uint32_t n = (off & (a->chunk - 1)) ? 0 : a->len[s];
  if (!n) {
    int used = (a->bits[s >> 6] >> (s & 63)) & 1;
    _hpcmem_unlock(&a->lock);
    _hpcmem_warn("hpcmem_contig_free(%p, %p): %s", (void *)a, p,
                 used ? "interior pointer (not the start of an allocation)"
                      : "no live allocation here (double free, or never allocated)");
    return -EINVAL;
  }
  a->len[s] = 0;            /* from here on a second free of p fails, while the pages go back */
  _hpcmem_unlock(&a->lock);
  size_t keep = a->prealloc_chunks;
  if (s + n > keep) {
    size_t lo = s > keep ? s : keep;
    _hpcmem_prim_decommit(a->base + (lo << a->shift), (s + n - lo) << a->shift);
  }
  _hpcmem_lock(&a->lock);
  set_range(a->bits, s, n, 0);
  account(a, s, n, +1);
  if (s < a->first_free) a->first_free = s;
  a->used -= n;
  a->live--;
  a->frees++;
  _hpcmem_unlock(&a->lock);
  return 0;
}

/* ------------------------------------------------------------------ */
/* creation                                                             */

static size_t round_up(size_t x, size_t to) { return (x + to - 1) / to * to; }

/* Checks cfg and fills the geometry of *g; 0 or -errno (after a warning). */
static int check_config(const hpcmem_contig_config_t *cfg, hpcmem_contig_t *g,
                        unsigned long *mask, int *nnodes) {
  size_t page = _hpcmem_prim_page_size();
  *nnodes = 0;
  if (cfg->mode != HPCMEM_CONTIG_GLOBAL && cfg->mode != HPCMEM_CONTIG_PER_AREA) {
    _hpcmem_warn("hpcmem_contig_create: mode %d is neither HPCMEM_CONTIG_GLOBAL nor HPCMEM_CONTIG_PER_AREA", cfg->mode);
    return -EINVAL;
  }
  if (cfg->region_size == 0 || cfg->region_size % page) {
    _hpcmem_warn("hpcmem_contig_create: region_size %zu is not a positive multiple of the page size (%zu)", cfg->region_size, page);
    return -EINVAL;
  }
  if (cfg->nodes) {
    int n = _hpcmem_topo_nodeset_parse_as("hpcmem_contig_create: nodes", cfg->nodes, mask, HPCMEM_TOPO_MAX_NODE_OS);
    if (n < 0) return n;
    *nnodes = n;
  }
  int nreg = cfg->nregions ? cfg->nregions : *nnodes;
  if (nreg <= 0) {
    _hpcmem_warn("hpcmem_contig_create: nregions %d (give at least one region, or 0 with a node list)", cfg->nregions);
    return -EINVAL;
  }
  size_t chunk = cfg->chunk;
  if (chunk == 0) {
    chunk = HPCMEM_CONTIG_DEFAULT_CHUNK;
    while (chunk > page && cfg->region_size % chunk) chunk >>= 1;
  } else if ((chunk & (chunk - 1)) || chunk < page || cfg->region_size % chunk) {
    _hpcmem_warn("hpcmem_contig_create: chunk %zu must be a power of two >= the page size (%zu) that divides region_size %zu",
                 chunk, page, cfg->region_size);
    return -EINVAL;
  }
  if (cfg->region_size > SIZE_MAX / 2 / (size_t)nreg) {
    _hpcmem_warn("hpcmem_contig_create: %d regions of %zu bytes overflow the address space", nreg, cfg->region_size);
    return -ENOMEM;
  }
  g->region_size = cfg->region_size;
  g->nregions = nreg;
  g->mode = cfg->mode;
  g->chunk = chunk;
  g->shift = (unsigned)__builtin_ctzll(chunk);
  g->size = cfg->region_size * (size_t)nreg;
  g->cpr = cfg->region_size / chunk;
  g->nchunks = g->size / chunk;
  if (g->nchunks > UINT32_MAX) {
    _hpcmem_warn("hpcmem_contig_create: %zu chunks of %zu bytes are too many; use a larger chunk", g->nchunks, chunk);
    return -EINVAL;
  }
  size_t pre = cfg->prealloc == HPCMEM_CONTIG_NO_PREALLOC ? 0
             : cfg->prealloc ? cfg->prealloc : (size_t)_hpcmem_opt(PREALLOC);
  pre = pre > g->size ? g->size : round_up(pre, chunk);
  g->prealloc_chunks = pre >> g->shift;
  return 0;
}

/* Bind region r to the node list's entry r * nnodes / nregions (blocks of
 * neighbouring regions share a node, as the memory of one node is adjacent). */
static int bind_regions(hpcmem_contig_t *a, const unsigned long *mask, int nnodes) {
  int list[HPCMEM_TOPO_MAX_NODES], n = 0;
  for (int node = 0; node < HPCMEM_TOPO_MAX_NODE_OS && n < nnodes && n < HPCMEM_TOPO_MAX_NODES; node++)
    if (mask[node / (8 * (int)sizeof(unsigned long))] >> (node % (8 * (int)sizeof(unsigned long))) & 1) list[n++] = node;
  for (int r = 0; r < a->nregions; r++) {
    int node = list[(int)((long long)r * n / a->nregions)];
    unsigned long one[HPCMEM_TOPO_MASK_LONGS];
    memset(one, 0, sizeof one);
    one[node / (8 * (int)sizeof(unsigned long))] = 1UL << (node % (8 * (int)sizeof(unsigned long)));
    int rc = _hpcmem_prim_bind(a->base + (size_t)r * a->region_size, a->region_size, MPOL_BIND, one,
                               HPCMEM_TOPO_MAX_NODE_OS, 0);
    if (rc < 0) {
      _hpcmem_warn("hpcmem_contig_create: binding region %d to NUMA node %d failed: %s", r, node, strerror(-rc));
      return rc;
    }
    a->region_node[r] = node;
  }
  return 0;
}

int _hpcmem_contig_create(const hpcmem_contig_config_t *cfg, hpcmem_contig_t **out) {
  if (!cfg || !out) {
    _hpcmem_warn("hpcmem_contig_create: %s is NULL", cfg ? "out" : "cfg");
    return -EINVAL;
  }
  hpcmem_contig_t g;
  memset(&g, 0, sizeof g);
  unsigned long mask[HPCMEM_TOPO_MASK_LONGS];
  int nnodes;
  int rc = check_config(cfg, &g, mask, &nnodes);
  if (rc < 0) return rc;

  /* one prim block: header, bitmap, allocation table, region tables */
  size_t nwords = (g.nchunks + 63) / 64;
  size_t o_bits = round_up(sizeof g, 64);
  size_t o_len = o_bits + nwords * 8;
  size_t o_free = round_up(o_len + g.nchunks * 4, 8);
  size_t o_node = o_free + (size_t)g.nregions * sizeof(size_t);
  g.meta_size = round_up(o_node + (size_t)g.nregions * sizeof(int), _hpcmem_prim_page_size());
  char *meta = _hpcmem_prim_reserve(g.meta_size, 0);
  if (!meta) {
    _hpcmem_warn("hpcmem_contig_create: no address space for the tables (%zu bytes)", g.meta_size);
    return -ENOMEM;
  }
  hpcmem_contig_t *a = (hpcmem_contig_t *)meta;
  *a = g;
  a->bits = (uint64_t *)(meta + o_bits);     /* fresh mappings read as zero: all free */
  a->len = (uint32_t *)(meta + o_len);
  a->region_free = (size_t *)(meta + o_free);
  a->region_node = (int *)(meta + o_node);
  for (int r = 0; r < a->nregions; r++) { a->region_free[r] = a->cpr; a->region_node[r] = -1; }
  /* the tail bits of the last word are marked used so scans never run past the arena */
  if (a->nchunks & 63) a->bits[nwords - 1] = ~(uint64_t)0 << (a->nchunks & 63);

  a->base = _hpcmem_prim_reserve(a->size, a->chunk);
  if (!a->base) {
    _hpcmem_warn("hpcmem_contig_create: cannot reserve %zu bytes of address space", a->size);
    _hpcmem_prim_release(meta, g.meta_size);
    return -ENOMEM;
  }
  if (cfg->nodes && (rc = bind_regions(a, mask, nnodes)) < 0) goto fail;
  /* touch one byte per page: the faults are paid here, once, on the bound nodes */
  size_t page = _hpcmem_prim_page_size();
  for (size_t o = 0; o < (a->prealloc_chunks << a->shift); o += page) ((volatile char *)a->base)[o] = 0;
  a->magic = CONTIG_MAGIC;
  if (arena_register(a) < 0) {
    _hpcmem_warn("hpcmem_contig_create: %d arenas are alive already (the most there can be)", HPCMEM_CONTIG_MAX_ARENAS);
    rc = -EMFILE;
    goto fail;
  }
  *out = a;
  return 0;
fail:
  a->magic = 0;
  _hpcmem_prim_release(a->base, a->size);
  _hpcmem_prim_release(meta, g.meta_size);
  return rc;
}

int _hpcmem_contig_destroy(hpcmem_contig_t *a) {
  if (!_hpcmem_contig_valid(a) || arena_unregister(a) < 0) {
    _hpcmem_warn("hpcmem_contig_destroy(%p): not a live arena (destroyed already, or never created)", (void *)a);
    return -EINVAL;
  }
  _hpcmem_lock(&a->lock);     /* wait for calls in flight on other threads */
  a->magic = 0;
  _hpcmem_prim_release(a->base, a->size);
  _hpcmem_prim_release(a, a->meta_size);
  return 0;
}

/* ------------------------------------------------------------------ */
/* queries                                                              */

int _hpcmem_contig_get_stats(const hpcmem_contig_t *ca, hpcmem_contig_stats_t *out) {
  if (!_hpcmem_contig_valid(ca) || !out) {
    _hpcmem_warn("hpcmem_contig_stats(%p, %p): %s", (const void *)ca, (void *)out, out ? "not a live arena" : "out is NULL");
    return -EINVAL;
  }
  hpcmem_contig_t *a = (hpcmem_contig_t *)ca;
  memset(out, 0, sizeof *out);
  _hpcmem_lock(&a->lock);
  out->arena_bytes = a->size;
  out->region_size = a->region_size;
  out->nregions = a->nregions;
  out->mode = a->mode;
  out->chunk = a->chunk;
  out->prealloc_bytes = a->prealloc_chunks << a->shift;
  out->used_bytes = a->used << a->shift;
  out->free_bytes = (a->nchunks - a->used) << a->shift;
  out->largest_free = longest_run(a->bits, 0, a->nchunks) << a->shift;
  out->live = a->live;
  out->allocs = a->allocs;
  out->frees = a->frees;
  out->failures = a->failures;
  out->spanning = a->spanning;
  _hpcmem_unlock(&a->lock);
  return 0;
}

int _hpcmem_contig_get_region(const hpcmem_contig_t *ca, int i, hpcmem_contig_region_t *out) {
  if (!_hpcmem_contig_valid(ca) || !out || i < 0 || i >= ca->nregions) {
    _hpcmem_warn("hpcmem_contig_region(%p, %d): %s", (const void *)ca, i,
                 !_hpcmem_contig_valid(ca) ? "not a live arena" : !out ? "out is NULL" : "no such region");
    return -EINVAL;
  }
  hpcmem_contig_t *a = (hpcmem_contig_t *)ca;
  _hpcmem_lock(&a->lock);
  out->base = a->base + (size_t)i * a->region_size;
  out->size = a->region_size;
  out->node = a->region_node[i];
  out->free_bytes = a->region_free[i] << a->shift;
  out->largest_free = longest_run(a->bits, (size_t)i * a->cpr, (size_t)(i + 1) * a->cpr) << a->shift;
  _hpcmem_unlock(&a->lock);
  return 0;
}

int _hpcmem_contig_get_block(const hpcmem_contig_t *ca, const void *p, hpcmem_contig_block_t *out) {
  if (!_hpcmem_contig_valid(ca) || !out) {
    _hpcmem_warn("hpcmem_contig_block(%p, %p): %s", (const void *)ca, p, out ? "not a live arena" : "out is NULL");
    return -EINVAL;
  }
  hpcmem_contig_t *a = (hpcmem_contig_t *)ca;
  uintptr_t off = (uintptr_t)p - (uintptr_t)a->base;
  size_t s = off >> a->shift;
  _hpcmem_lock(&a->lock);
  uint32_t n = off < a->size && !(off & (a->chunk - 1)) ? a->len[s] : 0;
  _hpcmem_unlock(&a->lock);
  if (!n) {
    _hpcmem_warn("hpcmem_contig_block(%p, %p): not the start of a live allocation of this arena", (void *)a, p);
    return -EINVAL;
  }
  out->size = (size_t)n << a->shift;
  out->first_region = (int)(s / a->cpr);
  out->last_region = (int)((s + n - 1) / a->cpr);
  out->offset = off - (size_t)out->first_region * a->region_size;
  return 0;
}
