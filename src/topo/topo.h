/* Topology: the machine as Linux sysfs and hwloc describe it, kept in plain
 * static tables (NUMA nodes with capacity, cpus, memory kind, bandwidth and
 * latency; cpu -> NUMA node; cpu -> thread group; memory classes).
 *
 * The cpus, their caches and the NUMA nodes come from Linux sysfs, read
 * without the heap; that is all the thread groups need.  They are read at
 * the first question (_hpcmem_topo_start, once and thread-safely): a
 * process whose one thread asks nothing never reads them (the allocator
 * asks when a second thread takes a cache, api/alloc.c).  hwloc -- opened
 * with dlopen, read into the tables, closed again -- is loaded only when
 * something asks for more: a topology file or hwloc variable, or, once and
 * thread-safely, the first call that needs node sizes, memory kinds or
 * attributes, cores or caches (_hpcmem_topo_numa_info and what uses it: the
 * classes, LOCAL, the summary; cache and core counts).  hwloc calls malloc,
 * so the queries are asked outside the allocator's locks, after it works.
 * Once loaded, the functions read the tables only: no heap, no locks, no
 * system calls.
 *
 * Indexes: "cpu" is always the OS cpu number (sched_getcpu); a NUMA node is
 * named by its OS index (what mbind takes) except in _hpcmem_topo_numa_info,
 * which walks the nodes by position 0 .. _hpcmem_topo_numa_count()-1.
 *
 * An explicit load (_hpcmem_topo_load, _hpcmem_topo_load_sysfs: tests) and
 * _hpcmem_topo_group_count, which rebuilds the group table, are not
 * thread-safe against the queries: the allocator builds the groups once,
 * before it lets any thread read them (api/alloc.c, know_groups).  hwloc's
 * later details never change the groups. */
#ifndef HPCMEM_TOPO_TOPO_H
#define HPCMEM_TOPO_TOPO_H
#include <stdint.h>
#include <stdio.h>

#define HPCMEM_TOPO_MAX_NODES 256    /* NUMA nodes kept; more are ignored with a warning */
#define HPCMEM_TOPO_MAX_NODE_OS 1024 /* node OS indexes a node mask can name */
#define HPCMEM_TOPO_MAX_CPUS 4096    /* OS cpu numbers the cpu tables cover */
#define HPCMEM_TOPO_MASK_LONGS (HPCMEM_TOPO_MAX_NODE_OS / (8 * (int)sizeof(unsigned long)))

/* Kinds of memory.  Classes are listed in this order. */
typedef enum {
  HPCMEM_MEM_DRAM = 0,
  HPCMEM_MEM_HBM,
  HPCMEM_MEM_NVM,
  HPCMEM_MEM_UNKNOWN,   /* hwloc names the node something we do not recognise (e.g. GPUMemory) */
  HPCMEM_MEM_KINDS_
} hpcmem_mem_kind_t;

/* Where a node's kind came from. */
typedef enum {
  HPCMEM_KIND_FROM_DEFAULT = 0, /* nothing said otherwise: ordinary DRAM */
  HPCMEM_KIND_FROM_MEMATTR,     /* hwloc memory attributes (bandwidth/latency vs. its neighbours) */
  HPCMEM_KIND_FROM_SUBTYPE      /* hwloc subtype or DAXType info ("MCDRAM", "NVM", ...) */
} hpcmem_kind_source_t;

typedef struct {
  int os_index;                 /* what mbind and numactl call the node */
  uint64_t capacity;            /* bytes */
  int cpu_count;                /* cpus local to the node (0 for a cpu-less node) */
  char cpus[96];                /* the same as a list, "0-7,16-23" ("..." when truncated) */
  hpcmem_mem_kind_t kind;
  hpcmem_kind_source_t kind_from;
  uint64_t bandwidth;           /* MiB/s from the node's own cpus (hwloc memattr), 0 if unknown */
  uint64_t latency;             /* ns from the node's own cpus (hwloc memattr), 0 if unknown */
  char subtype[32];             /* hwloc subtype ("MCDRAM"...), "" when none */
} hpcmem_numa_info_t;

/* All nodes of one kind. */
typedef struct {
  hpcmem_mem_kind_t kind;
  int node_count;
  unsigned long nodes[HPCMEM_TOPO_MASK_LONGS]; /* by OS index, an mbind node mask */
  uint64_t capacity;            /* bytes, summed over the nodes */
  uint64_t bandwidth;           /* MiB/s, mean over the nodes that know it; 0 if none does */
  uint64_t latency;             /* ns, mean over the nodes that know it; 0 if none does */
} hpcmem_mem_class_t;

/* Load the topology: xml_path if not NULL, else the HPCMEM_TOPOLOGY option,
 * else hwloc's HWLOC_SYNTHETIC / HWLOC_XMLFILE, else this machine.  A source
 * that cannot be used gets one warning naming it and the reason, and the next
 * one in that list is used.  May be called again (tests): the tables are
 * rebuilt.  Returns 0; -errno (with a warning) when hwloc could not describe
 * even this machine: the tables then hold one NUMA node with the online cpus,
 * and _hpcmem_topo_loaded() is 1 all the same. */
int _hpcmem_topo_load(const char *xml_path_or_null);
/* The start's reading (tests call it; the constructor through
 * _hpcmem_topo_read_at_start): Linux sysfs, unless HPCMEM_TOPOLOGY or one of hwloc's variables
 * that change what it describes (HWLOC_XMLFILE, HWLOC_SYNTHETIC,
 * HWLOC_FSROOT, ...) is set or sysfs cannot be read: then
 * _hpcmem_topo_load(NULL).  Returns what that returns. */
int _hpcmem_topo_start(void);
/* Whether _hpcmem_topo_start would read through hwloc (HPCMEM_TOPOLOGY or
 * one of hwloc's variables is set), which allocates and opens libraries:
 * the allocator then reads at start (api/alloc.c), not inside a thread's
 * first malloc. */
int _hpcmem_topo_start_needs_hwloc(void);
/* The reading at once, by _hpcmem_topo_start (hwloc where it says so):
 * for the constructor, where hwloc may allocate and open its library.  The
 * reading a later first question does is sysfs's alone (no heap, no
 * library: it may run inside a thread's first malloc), and where sysfs
 * fails then, one node of the online cpus (a warning says so). */
void _hpcmem_topo_read_at_start(void);
/* Load cpus, caches and nodes from the Linux file system below root ("/":
 * this machine; tests give fake trees, and hwloc's later details then come
 * from the same tree through HWLOC_FSROOT).  0, or -errno (tables empty). */
int _hpcmem_topo_load_sysfs(const char *root);
/* The cpus the kernel may ever bring online (root/sys/devices/system/cpu/
 * possible; the count sysconf(_SC_NPROCESSORS_CONF) gives, below
 * HPCMEM_TOPO_MAX_CPUS): their number, or -errno.  sysconf parses the file
 * with strtoul, whose code and tables are two 64 KiB windows of libc that a
 * program which does not parse numbers never maps (docs/footprint.md). */
int _hpcmem_topo_sysfs_possible_cpus(const char *root);
/* In the child of fork: the lock of a (sysfs) reading that another thread
 * of the parent was in is free again; a loading of hwloc's details that
 * another thread was in is given up at once (sysfs read again, the thread
 * groups kept, the child without the details, with a warning). */
void _hpcmem_topo_fork_child(void);
/* Set by the layer above: called with 1 before hwloc is loaded after start
 * and with 0 afterwards (the trace marks hwloc's mallocs as libhpcmem's). */
extern void (*_hpcmem_topo_hwloc_guard)(int entering);
/* 1 once hwloc's details are in (or cannot be had). */
int _hpcmem_topo_detailed(void);
/* The i-th cpu in topology order (OS number; what HPCMEM_HEAPS deals out),
 * -EINVAL out of range. */
int _hpcmem_topo_cpu_at(int i);
int _hpcmem_topo_loaded(void);
/* Forget the topology (back to the answers before a load); for tests and exit. */
void _hpcmem_topo_unload(void);
/* "this machine", the XML file's path, or "synthetic:<description>". */
const char *_hpcmem_topo_source(void);

int _hpcmem_topo_numa_count(void);
/* Node at position `node` (0 .. count-1, ascending OS index): 0 or -EINVAL. */
int _hpcmem_topo_numa_info(int node, hpcmem_numa_info_t *out);
/* Position of the node with this OS index, or -ENODEV. */
int _hpcmem_topo_numa_lookup(int os_index);

int _hpcmem_topo_cpu_count(void);
/* Largest OS cpu number + 1 (cpu numbers may have holes). */
int _hpcmem_topo_cpu_limit(void);
/* Cores (0 when the topology does not say, e.g. without hwloc). */
int _hpcmem_topo_core_count(void);
/* Size in bytes of one data (or unified) cache of a level (1..5), 0 when the
 * machine has none; and the cache line size (64 when unknown). */
uint64_t _hpcmem_topo_cache_size(int level);
int _hpcmem_topo_cache_line(void);
/* NUMA node (OS index) of a cpu: among the nodes whose cpus include it, the
 * nearest one, DRAM first; -EINVAL for cpu < 0, -ENODEV for a cpu the topology
 * does not have. */
int _hpcmem_topo_cpu_numa(int cpu);

/* Thread groups: neighbouring cpus share a group heap.  Builds the cpu ->
 * group table and returns the number of groups:
 *   HPCMEM_HEAPS > 0:  that many groups, cpus dealt out in topology order
 *                      (neighbours together);
 *   hint > 0:          the finest level of the machine (core, a cache, NUMA
 *                      node, package) whose objects hold at least `hint` cpus
 *                      on average;
 *   otherwise:         cpus sharing the last-level cache, or the NUMA node
 *                      when NUMA nodes split it (or the machine has no caches). */
int _hpcmem_topo_group_count(int threads_per_group_hint);
/* Group of a cpu (never negative for cpu >= 0: cpus the topology does not
 * know wrap round the groups); -EINVAL for cpu < 0. */
int _hpcmem_topo_cpu_group(int cpu);
/* Home NUMA node (OS index) of a group: the node of its first cpu; -EINVAL
 * for a group out of range, -ENODEV for a group without cpus. */
int _hpcmem_topo_group_numa(int group);
/* What the groups follow: "L3 cache", "NUMA node", "HPCMEM_HEAPS", ... */
const char *_hpcmem_topo_group_level(void);

/* Parse a node list: "all" or numbers and ranges ("0-3,6").  Clears bits
 * 0 .. maxnode-1 of mask and sets the listed nodes.  Returns the number of
 * nodes set, -EINVAL for bad syntax, -ENODEV for a node the loaded topology
 * does not have (or a number far too large), -ERANGE for a node >= maxnode
 * (mask NULL: validate only, maxnode ignored).  Errors are reported with
 * one warning that starts with `what` (NULL: silent). */
int _hpcmem_topo_nodeset_parse_as(const char *what, const char *text, unsigned long *mask, int maxnode);
/* The same, reported as "node list '...'". */
int _hpcmem_topo_nodeset_parse(const char *text, unsigned long *mask, int maxnode);
/* Format a node mask as a list ("0-3,6"); returns buf. */
char *_hpcmem_topo_nodeset_format(const unsigned long *mask, int maxnode, char *buf, size_t len);

/* Memory classes present, in kind order (DRAM, HBM, NVM, unknown); fills at
 * most max of them and returns how many exist (-EINVAL if out is NULL with max > 0). */
int _hpcmem_topo_classes(hpcmem_mem_class_t *out, int max);
/* The class of one kind: 0, or -ENODEV when the machine has no such memory. */
int _hpcmem_topo_class(hpcmem_mem_kind_t kind, hpcmem_mem_class_t *out);
/* LOCAL: the nodes of a kind nearest to a cpu (those whose cpus include it,
 * narrowest first; when none does, every node of the kind).  Fills mask like
 * nodeset_parse; returns the number of nodes, -ENODEV if the kind is absent,
 * -EINVAL for a bad cpu or kind, -ERANGE if a node does not fit in maxnode. */
int _hpcmem_topo_local_nodes(int cpu, hpcmem_mem_kind_t kind, unsigned long *mask, int maxnode);
/* "DRAM", "HBM", "NVM", "unknown". */
const char *_hpcmem_topo_kind_name(hpcmem_mem_kind_t kind);
/* Kind named (case-insensitive) by text, or -EINVAL. */
int _hpcmem_topo_kind_parse(const char *text);

/* Human-readable summary (HPCMEM_VERBOSE). */
void _hpcmem_topo_print(FILE *out);

#endif
