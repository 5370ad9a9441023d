/**
 * @file hpcmem_place.h
 * @brief Heterogeneous memory placement (after hexe): memory classes,
 * allocation attributes, lazy placement decided at hpcmem_commit().
 *
 * A placed allocation is its own page-aligned virtual range.  Its pages are
 * bound (mbind) to the nodes of the memory classes its attributes name,
 * either at once (HPCMEM_MAP_IMMEDIATE) or at the next hpcmem_commit()
 * (HPCMEM_MAP_ON_COMMIT), where one decision over all pending requests
 * (a knapsack over size and priority against each class's free capacity)
 * chooses who gets the scarce memory.  See docs/placement.md.
 *
 * Conventions as in hpcmem.h: functions return 0 (or a count) or a negative
 * errno code; hpcmem_place_alloc returns NULL with errno set.
 */
#ifndef HPCMEM_PLACE_H
#define HPCMEM_PLACE_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/** Memory classes.  The numbers match the kinds of the topology layer. */
enum hpcmem_class {
  HPCMEM_CLASS_DRAM = 0,   /**< ordinary memory */
  HPCMEM_CLASS_HBM = 1,    /**< high-bandwidth memory (MCDRAM, HBM2...) */
  HPCMEM_CLASS_NVM = 2,    /**< persistent / slow large memory */
  HPCMEM_CLASS_NEAR = 4,   /**< the nodes nearest to the calling thread, any kind */
  HPCMEM_CLASS_ANY = -1    /**< (output only) no binding: the OS chooses */
};

/** Index of a class: a number 0..n-1 picks the n-th node of the class
 *  (ascending OS index); or one of these. */
#define HPCMEM_INDEX_ALL (-1)    /**< every node of the class */
#define HPCMEM_INDEX_LOCAL (-2)  /**< the nodes of the class nearest to the calling thread */

/** How a range is split between the listed classes. */
enum hpcmem_split {
  HPCMEM_SPLIT_OS = 0,         /**< one policy naming every decided node; the kernel splits */
  HPCMEM_SPLIT_SPILL_OVER = 1, /**< as much as fits in the first class, the rest in the next... */
  HPCMEM_SPLIT_EQUAL = 2,      /**< equal contiguous chunks, one per node of the listed classes */
  HPCMEM_SPLIT_CHUNK = 3       /**< chunks of chunk_size dealt round-robin over those nodes */
};

/** When the pages get their class. */
enum hpcmem_mapping {
  HPCMEM_MAP_IMMEDIATE = 0,    /**< at hpcmem_place_alloc */
  HPCMEM_MAP_ON_COMMIT = 1     /**< at the next hpcmem_commit (address at once, binding later) */
};

/** What happens when the classes cannot take the request. */
enum hpcmem_mismatch {
  HPCMEM_MISMATCH_ERROR = 0,   /**< fail (ENOMEM: no capacity; ENODEV: the kernel lacks the nodes) */
  HPCMEM_MISMATCH_FALLBACK = 1 /**< use other memory silently (the rest stays with the OS default) */
};

#define HPCMEM_PLACE_MAX_CLASSES 8  /**< classes one attribute may list */

/** One entry of an attribute's class list. */
typedef struct hpcmem_place_class {
  int cls;     /**< enum hpcmem_class */
  int index;   /**< node number within the class, HPCMEM_INDEX_ALL or HPCMEM_INDEX_LOCAL */
} hpcmem_place_class_t;

/** Attributes of a placed allocation (initialise with hpcmem_place_attr_init). */
typedef struct hpcmem_place_attr {
  int nclasses;                                    /**< entries used in classes[], preferred first */
  hpcmem_place_class_t classes[HPCMEM_PLACE_MAX_CLASSES];
  int split;                                       /**< enum hpcmem_split */
  size_t chunk_size;                               /**< HPCMEM_SPLIT_CHUNK: a multiple of the page size */
  int mapping;                                     /**< enum hpcmem_mapping */
  int mismatch;                                    /**< enum hpcmem_mismatch */
  int priority;                                    /**< >= 0; higher wins scarce memory at commit */
} hpcmem_place_attr_t;

/**
 * Defaults: no class (DRAM, all nodes, is used when none is added), split OS,
 * IMMEDIATE, FALLBACK, priority 1.  @return 0, or -EINVAL if a is NULL.
 */
int hpcmem_place_attr_init(hpcmem_place_attr_t *a);

/**
 * Append a class (the first added is preferred, the next ones are fallbacks).
 * @return 0; -EINVAL for a NULL attribute or an unknown class; -ENODEV if
 *         this machine has no memory of that class; -ERANGE for an index
 *         outside 0..nodes-1 (and not ALL/LOCAL); -ENOSPC when the list is full.
 */
int hpcmem_place_attr_add(hpcmem_place_attr_t *a, int cls, int index);

/**
 * Allocate @p size bytes (rounded up to pages) with placement attributes
 * (NULL: the defaults).  The address is valid at once; the pages' class is
 * fixed now (IMMEDIATE) or at the next hpcmem_commit (ON_COMMIT).  From
 * 2 MiB on, the range is 2 MiB-aligned and advised for transparent huge
 * pages (unless HPCMEM_THP=0).  Under MPI the free capacity is the node's:
 * what the other ranks of the node placed counts (docs/placement.md).
 * @return the range, or NULL with errno: EINVAL (size 0, bad attribute
 *   field, chunk size not a page multiple), ENODEV (class absent, or
 *   MISMATCH_ERROR and the kernel cannot bind those nodes), ERANGE (index out
 *   of range), ENOMEM (no address space, or MISMATCH_ERROR and the classes
 *   lack the capacity).
 */
void *hpcmem_place_alloc(size_t size, const hpcmem_place_attr_t *attr);

/** Give back a range from hpcmem_place_alloc.  @return 0, or -EINVAL if p is not one. */
int hpcmem_place_free(void *p);

/** hpcmem_commit flags */
#define HPCMEM_COMMIT_EPOCH 0  /**< place the requests made since the last commit */
#define HPCMEM_COMMIT_ALL 1    /**< decide again for every live ON_COMMIT request */

/**
 * Decide and bind the pending ON_COMMIT requests, then start a new epoch.
 * Pages touched before the commit are migrated (MPOL_MF_MOVE); the bytes
 * moved and the time are in hpcmem_place_stats.
 * @return 0; -EINVAL for unknown flags; -ENODATA when nothing is pending
 *   (the epoch does not advance); -ENOMEM when a MISMATCH_ERROR request did
 *   not fit (it stays unbound and is reported as failed by hpcmem_where, the
 *   others are placed); -ENODEV when a MISMATCH_ERROR request names nodes
 *   the kernel cannot bind (likewise).
 */
int hpcmem_commit(int flags);

/** Request state, as hpcmem_where reports it. */
enum hpcmem_place_state {
  HPCMEM_PLACE_PENDING = 0,  /**< ON_COMMIT, not committed yet */
  HPCMEM_PLACE_BOUND = 1,    /**< bound as decided */
  HPCMEM_PLACE_UNBOUND = 2,  /**< decided, but the kernel refused the nodes (FALLBACK: OS default) */
  HPCMEM_PLACE_FAILED = 3    /**< MISMATCH_ERROR and the decision could not be met */
};

/** One piece of a range with one placement. */
typedef struct hpcmem_where {
  size_t offset;         /**< from the pointer given to hpcmem_where */
  size_t length;
  int cls;               /**< decided class, HPCMEM_CLASS_ANY when none */
  uint64_t nodes;        /**< decided nodes (bit = OS index, nodes 0..63) */
  int state;             /**< enum hpcmem_place_state */
  int epoch;             /**< epoch of the request */
  int kernel_policy;     /**< get_mempolicy(MPOL_F_ADDR) mode at the piece's first page, or -errno */
  uint64_t kernel_nodes; /**< the policy's node mask (nodes 0..63) */
  int page_node;         /**< node holding the first page (move_pages), -ENOENT if not touched */
} hpcmem_where_t;

/**
 * Which classes and nodes back [p, p+len): the decided placement and,
 * separately, what the kernel reports.
 * @return the number of pieces (the first min(count, max) are written);
 *   -EINVAL for NULL p, len 0, or out NULL with max > 0; -ENOENT if the
 *   range is not inside one placed allocation.
 */
int hpcmem_where(const void *p, size_t len, hpcmem_where_t *out, int max);

/** One memory class of the machine. */
typedef struct hpcmem_class_info {
  int cls;               /**< enum hpcmem_class */
  int node_count;
  uint64_t nodes;        /**< bit = OS index (nodes 0..63) */
  uint64_t capacity;     /**< bytes (after hpcmem_class_limit) */
  uint64_t used;         /**< bytes placed here by this process */
  uint64_t used_node;    /**< bytes placed here by the other ranks of the node (MPI layer) */
  uint64_t bandwidth;    /**< MiB/s, 0 when unknown */
  uint64_t latency;      /**< ns, 0 when unknown */
} hpcmem_class_info_t;

/** The classes present (DRAM, HBM, NVM order).  @return how many exist; -EINVAL for out NULL with max > 0. */
int hpcmem_classes(hpcmem_class_info_t *out, int max);

/**
 * Consider at most @p bytes of a class (spread over its nodes in proportion
 * to their size); 0 removes the limit.  For sharing scarce memory with other
 * programs, and for tests.  @return 0, -EINVAL for an unknown class, -ENODEV if absent.
 */
int hpcmem_class_limit(int cls, uint64_t bytes);

/** Placement counters. */
typedef struct hpcmem_place_stats {
  uint64_t allocs;         /**< hpcmem_place_alloc successes */
  uint64_t frees;
  uint64_t commits;        /**< hpcmem_commit calls that placed something */
  uint64_t epoch;          /**< current epoch (starts at 0) */
  uint64_t pending;        /**< requests waiting for a commit */
  uint64_t moved_bytes;    /**< bytes touched before their commit: bound with MPOL_MF_MOVE, which
                                migrates the pages not on a decided node */
  uint64_t commit_ns;      /**< time spent in hpcmem_commit */
  uint64_t fallback_bytes; /**< bytes placed outside their preferred class */
  uint64_t bind_failures;  /**< mbind refusals (nodes the kernel lacks) */
  uint64_t move_ns;        /**< part of commit_ns spent binding touched ranges (the migration's cost) */
} hpcmem_place_stats_t;

/** @return 0, or -EINVAL if out is NULL. */
int hpcmem_place_stats(hpcmem_place_stats_t *out);

#ifdef __cplusplus
}
#endif
#endif /* HPCMEM_PLACE_H */
