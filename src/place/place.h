/* Placement (hexe): the decision and the bookkeeping behind hpcmem_place.h.
 *
 * Two halves, kept apart so the decision can be tested on any topology:
 *   knapsack.c  DECISION, pure: requests + free bytes per node -> bytes per
 *               target of every request (and the pieces of a range that
 *               follow from it).  No system calls, no globals, no heap.
 *   place.c     BINDING and state: the request table (prim memory), classes
 *               from the topology, mbind of the decided pieces, commit,
 *               where (get_mempolicy / move_pages), the node usage hook.
 * Nodes are named by OS index and kept in 64-bit masks: placement handles
 * nodes 0..63 (a node beyond is left to the OS). */
#ifndef HPCMEM_PLACE_PLACE_H
#define HPCMEM_PLACE_PLACE_H
#include <stddef.h>
#include <stdint.h>
#include "hpcmem_place.h"

#define HPCMEM_PLACE_NODES 64
#define HPCMEM_PLACE_MAX_REQS 1024  /* live placed allocations per process */
#define HPCMEM_PLACE_DP_ITEMS 256   /* items one knapsack solves exactly; more go greedy */
#define HPCMEM_PLACE_DP_UNITS 1024  /* capacity granularity of the knapsack */
/* Scratch the decision needs (DP take-table and row). */
#define HPCMEM_PLACE_SCRATCH \
  ((size_t)HPCMEM_PLACE_DP_ITEMS * (HPCMEM_PLACE_DP_UNITS + 1) + 8 * (HPCMEM_PLACE_DP_UNITS + 1) + \
   8 * 4096)

typedef struct {
  int cls;          /* enum hpcmem_class */
  uint64_t nodes;   /* resolved node mask */
} hpcmem_place_target_t;

/* One request as the decision sees it. */
typedef struct hpcmem_place_req {
  uint64_t id;                   /* arrival number: only breaks ties between identical requests */
  uint64_t size;                 /* bytes, a page multiple */
  uint64_t chunk;                /* SPLIT_CHUNK chunk size */
  int priority, split, mismatch;
  int ntargets;
  hpcmem_place_target_t targets[HPCMEM_PLACE_MAX_CLASSES];
  /* decided */
  int failed;                    /* MISMATCH_ERROR and the targets could not hold it */
  uint64_t bytes[HPCMEM_PLACE_MAX_CLASSES]; /* bytes on each target; the rest: OS default */
  uint64_t charged[HPCMEM_PLACE_NODES];     /* bytes charged to each node */
} hpcmem_place_req_t;

/* A contiguous piece of a request's range with one placement. */
typedef struct {
  uint64_t off, len;
  int cls;          /* HPCMEM_CLASS_ANY: left to the OS */
  uint64_t nodes;
} hpcmem_place_piece_t;

/* Decide for n requests against node_free (bytes per node OS index; updated
 * to what is left).  Deterministic and independent of the order of reqs[]
 * (it is sorted in place by (priority desc, size asc, id asc)).  scratch:
 * HPCMEM_PLACE_SCRATCH bytes.  Returns how many requests failed. */
int _hpcmem_place_decide(hpcmem_place_req_t **reqs, int n, uint64_t *node_free, void *scratch,
                         uint64_t page);
/* Piece `i` of a decided request (0..count-1); returns the count of pieces,
 * or -1 when i is past the end (out untouched). */
long _hpcmem_place_piece(const hpcmem_place_req_t *r, long i, hpcmem_place_piece_t *out, uint64_t page);
long _hpcmem_place_piece_count(const hpcmem_place_req_t *r, uint64_t page);
/* Distinct nodes of a request's targets, in target order; returns the count. */
int _hpcmem_place_node_list(const hpcmem_place_req_t *r, int *nodes, int *cls);

/* Node-wide accounting (mpi/place_share.c): the ranks of a node share what
 * they placed, so one rank's decision sees the capacity the others took.
 *   others   fill the bytes the OTHER ranks of this node have placed on each
 *            node (index = OS index, nnodes entries); 0, or -errno: alone
 *   publish  this process's placed bytes per node, after every change
 *   lock     node-wide lock around one decision and its publish; 0 when
 *            held, -errno when not (the decision goes ahead unlocked)
 *   unlock   after a successful lock
 * Any member may be NULL.  They are called with the placement lock held,
 * from any thread and at any time malloc may run: no MPI, no allocation.
 * Installing (or removing, NULL) waits for calls in progress and publishes
 * the current usage through the new table. */
typedef int (*hpcmem_place_usage_fn)(uint64_t *others_per_node, int nnodes);
typedef struct hpcmem_place_share {
  hpcmem_place_usage_fn others;
  void (*publish)(const uint64_t *mine_per_node, int nnodes);
  int (*lock)(void);
  void (*unlock)(void);
} hpcmem_place_share_t;
void _hpcmem_place_set_share(const hpcmem_place_share_t *s);
/* The same with `others` only (tests). */
void _hpcmem_place_set_usage_hook(hpcmem_place_usage_fn fn);
/* This process's placed bytes per node (what the MPI layer shares). */
void _hpcmem_place_local_usage(uint64_t *per_node, int nnodes);

/* place.c: the public functions' work (place_api.c checks and converts). */
int _hpcmem_place_attr_add(hpcmem_place_attr_t *a, int cls, int index);
void *_hpcmem_place_alloc(size_t size, const hpcmem_place_attr_t *attr, int *err);
int _hpcmem_place_free(void *p);
int _hpcmem_place_commit(int flags);
int _hpcmem_place_where(const void *p, size_t len, hpcmem_where_t *out, int max);
int _hpcmem_place_classes(hpcmem_class_info_t *out, int max);
int _hpcmem_place_limit(int cls, uint64_t bytes);
void _hpcmem_place_get_stats(hpcmem_place_stats_t *out);
/* The two above for the summary of a fatal signal, whose handler may have
 * interrupted the holder of the placement lock: they wait wait_ns at most
 * for it, then read without it (*approx = 1, or the return value 1), and
 * never take the node's lock (an MPI call). */
int _hpcmem_place_classes_nowait(hpcmem_class_info_t *out, int max, uint64_t wait_ns, int *approx);
int _hpcmem_place_get_stats_nowait(hpcmem_place_stats_t *out, uint64_t wait_ns);

/* Forget every request and limit (tests; the ranges are released). */
void _hpcmem_place_reset(void);

#endif
