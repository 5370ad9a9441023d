/**
 * @file hpcmem_contig.h
 * @brief Contiguous allocation across regions (CLMalloc).
 *
 * An arena is one virtual range cut into regions of equal size (one per
 * NUMA node, or fixed-size areas).  A request larger than one region is
 * served as one contiguous range spanning adjacent regions, found through
 * one global bitmap over all regions.  Physical memory can be
 * pre-allocated once (config.prealloc or HPCMEM_PREALLOC) and is then
 * reused by later allocations without page faults.
 *
 * Memory from hpcmem_contig_malloc() must be given back with
 * hpcmem_contig_free() on the same arena, never with free().
 *
 * Conventions: functions return 0 or a negative errno-style code;
 * hpcmem_contig_malloc returns NULL with errno set.  Every error is also
 * explained by one "libhpcmem: warning:" line on stderr.
 * See docs/contig.md.
 */
#ifndef HPCMEM_CONTIG_H
#define HPCMEM_CONTIG_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/** Opaque arena. */
typedef struct hpcmem_contig hpcmem_contig_t;

/** How a request finds its chunks. */
typedef enum {
  /** CLMalloc: first fit over one bitmap of all regions; runs cross region boundaries. */
  HPCMEM_CONTIG_GLOBAL = 0,
  /** The paper's per-area baseline: a request that fits in one region takes the first
   *  region with room (first fit inside it); a larger one takes whole, completely free,
   *  adjacent regions. */
  HPCMEM_CONTIG_PER_AREA = 1
} hpcmem_contig_mode_t;

/** config.prealloc: pre-allocate nothing, whatever HPCMEM_PREALLOC says. */
#define HPCMEM_CONTIG_NO_PREALLOC ((size_t)-1)

/** Arena configuration; a zeroed struct plus region_size and nregions is a valid one. */
typedef struct hpcmem_contig_config {
  /** Bytes per region: a multiple of the page size and of the chunk. */
  size_t region_size;
  /** Number of regions; 0 with @c nodes: one region per listed node. */
  int nregions;
  /** NUMA nodes the regions are bound to ("all", "0-3,6"), NULL: no binding.
   *  With more regions than nodes, consecutive regions share a node (blocks). */
  const char *nodes;
  /** Bitmap granularity, a power of two >= the page size; 0: 64 KiB (or the
   *  largest power of two up to 64 KiB that divides region_size). */
  size_t chunk;
  /** Bytes touched once at creation, from the start of the arena, and kept
   *  until destroy (rounded up to chunks, capped at the arena).  0: the
   *  HPCMEM_PREALLOC setting; HPCMEM_CONTIG_NO_PREALLOC: none. */
  size_t prealloc;
  /** HPCMEM_CONTIG_GLOBAL (default) or HPCMEM_CONTIG_PER_AREA. */
  int mode;
} hpcmem_contig_config_t;

/** Arena-wide numbers. */
typedef struct hpcmem_contig_stats {
  size_t arena_bytes;     /**< region_size * nregions */
  size_t region_size;
  int nregions;
  int mode;
  size_t chunk;
  size_t prealloc_bytes;  /**< physical memory kept for the arena's life */
  size_t used_bytes;      /**< in live allocations (whole chunks) */
  size_t free_bytes;
  size_t largest_free;    /**< longest free run: the largest request that would succeed (global mode) */
  size_t live;            /**< live allocations */
  uint64_t allocs, frees, failures;
  uint64_t spanning;      /**< allocations that crossed a region boundary */
} hpcmem_contig_stats_t;

/** One region. */
typedef struct hpcmem_contig_region {
  void *base;
  size_t size;
  int node;               /**< OS index of the NUMA node it is bound to, -1: none */
  size_t free_bytes;
  size_t largest_free;    /**< longest free run inside the region */
} hpcmem_contig_region_t;

/** Where one live allocation lies (CLMalloc Table 1: start_zone and offset). */
typedef struct hpcmem_contig_block {
  size_t size;            /**< bytes reserved for it (whole chunks) */
  int first_region;       /**< start_zone */
  int last_region;
  size_t offset;          /**< from the start of first_region */
} hpcmem_contig_block_t;

/**
 * Create an arena.
 * @return 0 and *out; -EINVAL for NULL arguments, region_size 0 or not a
 *         multiple of the page size or of the chunk, nregions < 0 (or 0
 *         without nodes), a chunk that is not a power of two >= the page size,
 *         a bad mode or node-list syntax; -ENODEV for a node that does not
 *         exist; -ENOMEM when the address space or pre-allocation fails;
 *         -EMFILE when too many arenas are alive; -errno of mbind.
 */
int hpcmem_contig_create(const hpcmem_contig_config_t *cfg, hpcmem_contig_t **out);

/**
 * Allocate @p size bytes as one contiguous range (chunk aligned).
 * @return the range; NULL with errno EINVAL (unknown arena, size 0) or
 *         ENOMEM (no free run that long, or larger than the arena).
 */
void *hpcmem_contig_malloc(hpcmem_contig_t *a, size_t size);

/**
 * Give back a range from hpcmem_contig_malloc(a, ...).  NULL is a no-op.
 * Pages outside the pre-allocated part go back to the system.
 * @return 0; -EINVAL for an unknown arena, a pointer outside the arena, not
 *         the start of a live allocation (interior pointer, double free).
 */
int hpcmem_contig_free(hpcmem_contig_t *a, void *p);

/**
 * Destroy an arena and every allocation still in it.
 * @return 0, or -EINVAL for an unknown arena (already destroyed...).
 */
int hpcmem_contig_destroy(hpcmem_contig_t *a);

/** Arena statistics. @return 0, or -EINVAL. */
int hpcmem_contig_stats(const hpcmem_contig_t *a, hpcmem_contig_stats_t *out);

/** Region @p i (0 .. nregions-1). @return 0, or -EINVAL. */
int hpcmem_contig_region(const hpcmem_contig_t *a, int i, hpcmem_contig_region_t *out);

/**
 * Where the live allocation starting at @p p lies.
 * @return 0, or -EINVAL (unknown arena, p not the start of a live allocation).
 */
int hpcmem_contig_block(const hpcmem_contig_t *a, const void *p, hpcmem_contig_block_t *out);

/**
 * The arena holding @p p (inside any of its allocations or free space).
 * @return the arena, or NULL if no live arena contains p.
 */
hpcmem_contig_t *hpcmem_contig_owner(const void *p);

#ifdef __cplusplus
}
#endif
#endif
