/**
 * @file hpcmem_seg.h
 * @brief Segments: private, interleaved and node-shared memory of a rank.
 *
 * Every block libhpcmem hands out belongs to one segment:
 *  - @c HPCMEM_SEG_PRIVATE (default): the rank's own memory, first-touch
 *    local.  Plain malloc() allocates here unless HPCMEM_DEFAULT_SEGMENT says
 *    otherwise.
 *  - @c HPCMEM_SEG_INTERLEAVED: pages spread round-robin over a set of NUMA
 *    nodes (mbind MPOL_INTERLEAVE; all nodes, or HPCMEM_INTERLEAVE_NODES).
 *  - @c HPCMEM_SEG_SHARED: one mapping per node that every rank of the node
 *    addresses, created collectively in MPI_Init.  Ranks exchange references
 *    to shared objects as offsets (hpcmem_seg_offset / hpcmem_seg_pointer).
 *    Each rank allocates in its own part of the mapping and only the rank
 *    that allocated a block may free it; every rank of the node may read and
 *    write it.  In a process that is not part of an MPI job the segment is
 *    process-local (hpcmem_seg_info says so).
 *
 * free(), realloc() and malloc_usable_size() work on blocks of every segment
 * (the segment is found from the address); realloc() keeps a block in its
 * segment.  See docs/segments.md.
 */
#ifndef HPCMEM_SEG_H
#define HPCMEM_SEG_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/** Segment identifiers. */
enum hpcmem_seg_id {
  HPCMEM_SEG_PRIVATE = 0,      /**< the rank's own memory (default) */
  HPCMEM_SEG_INTERLEAVED = 1,  /**< pages interleaved over NUMA nodes */
  HPCMEM_SEG_SHARED = 2,       /**< node-wide mapping shared by the node's ranks */
  HPCMEM_SEG_COUNT = 3
};

/** Pass as @p seg to mean the segment plain malloc() uses now (hpcmem_seg_default()). */
#define HPCMEM_SEG_DEFAULT (-1)

/**
 * Allocate @p size bytes in segment @p seg.
 * @return the block (aligned to 16 bytes in the private segment, 256 bytes in
 *         the others), or NULL with errno: EINVAL for an unknown segment,
 *         EAGAIN for the shared segment before MPI_Init in an MPI job,
 *         ENODEV when the shared segment could not be created (the reason was
 *         printed at MPI_Init), ENOMEM when the segment is full.
 */
void *hpcmem_malloc_seg(size_t size, int seg);

/** Zeroed array of @p count elements of @p size bytes in @p seg (overflow: NULL, ENOMEM). */
void *hpcmem_calloc_seg(size_t count, size_t size, int seg);

/**
 * Aligned allocation in @p seg.  @p align must be a power of two (else NULL,
 * EINVAL).  Otherwise as hpcmem_malloc_seg().
 */
void *hpcmem_aligned_alloc_seg(size_t align, size_t size, int seg);

/**
 * Resize @p p to @p size bytes so that the result lies in @p seg: in place
 * when @p p is already in @p seg and the block can grow or shrink there,
 * else a new block in @p seg with the contents copied and @p p freed (a way
 * to move data between segments).  p NULL: hpcmem_malloc_seg().  On failure
 * NULL with errno and @p p is left untouched.
 */
void *hpcmem_realloc_seg(void *p, size_t size, int seg);

/**
 * Free @p p, checking that it belongs to @p seg.  NULL: nothing, 0.
 * @return 0; -EINVAL for an unknown segment or a pointer of another
 *         segment (reported, nothing freed); -EPERM for a shared block of
 *         another rank; other misuse (foreign pointer, double free) is
 *         handled as for free() (HPCMEM_ON_ERROR) and returns -EINVAL.
 */
int hpcmem_free_seg(void *p, int seg);

/**
 * The segment of an address (any address inside a segment's range, live or
 * not).  @return HPCMEM_SEG_*; -EINVAL for NULL; -ENOENT for memory that is
 * not libhpcmem's (stack, static data, mmap of the program, contiguous
 * regions of hpcmem_contig_malloc).
 */
int hpcmem_seg_of(const void *p);

/** "private", "interleaved", "shared"; NULL for an unknown id. */
const char *hpcmem_seg_name(int seg);

/**
 * The segment plain malloc() uses now, HPCMEM_SEG_*: the one
 * HPCMEM_DEFAULT_SEGMENT names when that segment can serve malloc, else
 * HPCMEM_SEG_PRIVATE (with HPCMEM_DEFAULT_SEGMENT=shared: private before
 * MPI_Init, outside an MPI job and in a forked child; shared in an MPI rank
 * after MPI_Init).
 */
int hpcmem_seg_default(void);

/** What a segment is made of. */
typedef struct hpcmem_seg_info {
  int seg;               /**< HPCMEM_SEG_* */
  int available;         /**< requests can be served now */
  int process_local;     /**< shared segment mapped by this process only (no MPI job) */
  int node_ranks;        /**< ranks mapping the shared segment (1 otherwise) */
  int node_rank;         /**< this rank's index among them (its part of the mapping) */
  void *base;            /**< start of the segment's range in this process (NULL before it exists) */
  size_t size;           /**< bytes of the range (shared: all parts of the node) */
  void *own_base;        /**< the part this process allocates from */
  size_t own_size;
  char nodes[64];        /**< interleaved: NUMA nodes the pages go to ("0-3") */
} hpcmem_seg_info_t;

/**
 * Describe segment @p seg.  Creates the interleaved segment if needed.
 * @return 0; -EINVAL for an unknown id or NULL @p out.
 */
int hpcmem_seg_info(int seg, hpcmem_seg_info_t *out);

/** Statistics of one segment. */
typedef struct hpcmem_seg_stats {
  uint64_t current_bytes;     /**< usable bytes of live blocks */
  uint64_t peak_bytes;        /**< high-water mark of current_bytes */
  uint64_t alloc_count;
  uint64_t free_count;
  uint64_t bytes_allocated;   /**< in total */
  uint64_t bytes_freed;
  uint64_t reserved_bytes;    /**< address space the segment holds in this process */
} hpcmem_seg_stats_t;

/**
 * Statistics of segment @p seg in this process.  The private segment's
 * figures are the process totals (hpcmem_stats) less the other segments', so
 * the three add up to the totals; its peak is sampled when threads publish
 * (within 64 KiB per thread, as hpcmem_stats).
 * @return 0; -EINVAL for an unknown id or NULL @p out.
 */
int hpcmem_seg_stats(int seg, hpcmem_seg_stats_t *out);

/**
 * Offset of @p p from the start of the node's shared mapping: the same
 * offset names the same byte in every rank of the node.
 * @return 0; -EINVAL when @p p is not inside the shared segment or @p off is NULL.
 */
int hpcmem_seg_offset(const void *p, uint64_t *off);

/**
 * The address of shared-segment offset @p off in this process.
 * @return the pointer; NULL with errno EINVAL when @p off is outside the
 *         mapping, EAGAIN before the shared segment exists.
 */
void *hpcmem_seg_pointer(uint64_t off);

#ifdef __cplusplus
}
#endif
#endif /* HPCMEM_SEG_H */
