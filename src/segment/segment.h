/* Segments of the rank's memory (DESIGN.md item 4, after the Sunway design):
 *
 *   private      the core's heaps (thread caches, group heaps, large tier);
 *                nothing here: this layer only says which addresses are
 *                not private.
 *   interleaved  one reserved address range whose pages are spread over a
 *                node set with mbind(MPOL_INTERLEAVE) before anything touches
 *                them.
 *   shared       one node-wide mapping of a sparse tmpfs file, made
 *                collectively in MPI_Init (mpi/segment.c): every rank of the
 *                node maps all of it, each allocates only in its own part
 *                [node_rank * part, (node_rank + 1) * part), so any rank of
 *                the node can read and write any object, and an offset from
 *                the mapping's start names the same bytes in every rank.
 *                Without MPI it is anonymous shared memory of this process.
 *
 * The interleaved and shared segments each run an instance of the SWAlloc
 * tier (heap/large.h) over their range at a 256-byte grain: best fit in
 * O(log n), metadata out of band (in private memory: a rank never writes
 * records into the node's mapping), coalescing, decay.  Segment requests
 * are few and large (arrays meant to be interleaved or shared); small-object
 * churn stays in the private segment's thread caches.  Which segment holds a
 * pointer is two address-range checks. */
#ifndef HPCMEM_SEGMENT_SEGMENT_H
#define HPCMEM_SEGMENT_SEGMENT_H
#include <stddef.h>
#include <stdint.h>
#include "heap/large.h"
#include "hpcmem_seg.h"
#include "util/lock.h"

enum { HPCMEM_SEG_UNSET = 0, HPCMEM_SEG_READY, HPCMEM_SEG_FAILED };

typedef struct hpcmem_segment {
  hpcmem_lock_t lock;          /* creation only; the tier has its own lock */
  int state;
  int error;                   /* FAILED: the errno requests get */
  int process_local;           /* shared segment that only this process maps */
  int node_ranks, node_rank;
  char *own;                   /* the part this process allocates from */
  size_t own_size;
  char nodes[64];              /* interleaved: the node list applied */
  hpcmem_large_t tier;         /* SWAlloc over [own, own + own_size) */
  /* statistics: exact, updated with atomics */
  int64_t live, peak;
  uint64_t allocs, frees, bytes_allocated, bytes_freed;
} hpcmem_segment_t;

/* Index 0 (private) is unused: the core's own heaps are that segment. */
extern hpcmem_segment_t _hpcmem_segs[HPCMEM_SEG_COUNT];
/* Where each segment lies: the whole mapping (shared: every rank's part);
 * base NULL and size 0 until it is ready.  Apart from the records (4 KiB
 * each, most of it the tier), so that _hpcmem_seg_holding(), which every
 * realloc and every free outside the heaps runs, reads one line and not a
 * page of each record (on a kernel without a shared zero page, as the test
 * machine's, a read of untouched .bss costs a page of RSS). */
typedef struct hpcmem_seg_range {
  char *base;
  size_t size;
} hpcmem_seg_range_t;
extern hpcmem_seg_range_t _hpcmem_seg_range[HPCMEM_SEG_COUNT];
/* A segment's id is its index: no initialised field, so the table stays in
 * .bss (in .data it made 12 KiB of the library's file pages resident). */
static inline int _hpcmem_seg_id(const hpcmem_segment_t *s) { return (int)(s - _hpcmem_segs); }
/* Live bytes of the interleaved and shared segments together (the private
 * segment's share of the process total is the rest). */
extern int64_t _hpcmem_seg_other_live;
/* Defined by the MPI layer when it is part of the library: 1 when the
 * program has the MPI library (its PMPI functions are bound).  A
 * shared-segment request under an MPI launcher then waits for MPI_Init
 * instead of falling back to process-local memory.  A function, not a flag
 * a constructor sets: the first requests can come before the constructors
 * ran (tracing and HPCMEM_VERBOSE load libraries at start, with malloc). */
int _hpcmem_seg_mpi_linked(void) __attribute__((weak, visibility("hidden")));

/* The segment (interleaved or shared) whose range holds p, or NULL. */
static inline hpcmem_segment_t *_hpcmem_seg_holding(const void *p) {
  for (int i = HPCMEM_SEG_INTERLEAVED; i < HPCMEM_SEG_COUNT; i++) {
    /* base is stored last, with release: once it is set, size is too */
    char *base = __atomic_load_n(&_hpcmem_seg_range[i].base, __ATOMIC_ACQUIRE);
    if (base && (uintptr_t)p - (uintptr_t)base < _hpcmem_seg_range[i].size) return &_hpcmem_segs[i];
  }
  return NULL;
}

/* Make the segment usable (interleaved: reserve and mbind on first use;
 * shared: the process-local fallback outside an MPI job).  0, or -errno:
 * -EAGAIN shared segment before MPI_Init, -ENOMEM, -EINVAL bad id. */
int _hpcmem_seg_ready(int id);

/* Allocation in segment id (interleaved or shared), align a power of two
 * (0: 256 bytes).  NULL with errno.  *usable: the block's usable size. */
void *_hpcmem_seg_alloc(int id, size_t n, size_t align, int zero, size_t *usable);
/* Free a block of segment s.  0; -EPERM when p lies in another rank's part
 * of the shared mapping; -EINVAL / -EALREADY from the tier.  *usable: size freed. */
int _hpcmem_seg_free(hpcmem_segment_t *s, void *p, size_t *usable);
/* Usable size of a live block of s (0 if p is not one). */
size_t _hpcmem_seg_usable(hpcmem_segment_t *s, const void *p);
/* Resize in place (see _hpcmem_large_resize); *delta gets the change of usable bytes. */
int _hpcmem_seg_resize(hpcmem_segment_t *s, void *p, size_t n, int64_t *delta);
/* Node rank whose part of the shared mapping holds p (-1 when not shared). */
int _hpcmem_seg_part_of(const hpcmem_segment_t *s, const void *p);

/* Attach the node-wide mapping (mpi/segment.c, collectively in MPI_Init):
 * map the file at path (node_ranks parts of `part` bytes) and run this
 * rank's part.  0 or -errno (the segment is then FAILED with that reason). */
int _hpcmem_seg_shared_attach(const char *path, size_t part, int node_ranks, int node_rank);
/* The MPI layer could not make the node mapping: requests fail with errno err. */
void _hpcmem_seg_shared_fail(int err);

/* May plain malloc (HPCMEM_DEFAULT_SEGMENT) use segment id now?  The
 * interleaved one once it could be made; the shared one only as the node's
 * mapping after MPI_Init, never as a process-local one (memory shared with
 * the children the process forks is no place for malloc's objects) nor in
 * a forked child. */
int _hpcmem_seg_serves_malloc(int id);

int _hpcmem_seg_check(void);
/* own_copy: the child gets a private copy of this rank's part of the
 * shared segment, made here (plain malloc's data lives there:
 * HPCMEM_DEFAULT_SEGMENT=shared). */
void _hpcmem_seg_fork_prepare(int own_copy);
void _hpcmem_seg_fork_parent(void);
void _hpcmem_seg_fork_child(void);

#endif
