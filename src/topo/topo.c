/* Topology (see topo.h).  Everything hwloc tells us is copied once into the
 * static tables below, so that the allocator's queries never call hwloc.
 *
 * At start the thread groups need only cpus, caches and NUMA nodes, which
 * sysfs.c reads from Linux sysfs without the heap or stdio.  hwloc is opened
 * (dlopen) only when something needs more -- node sizes and memory kinds
 * for placement, contiguous regions and the summary, cores and cache sizes,
 * or a topology file / hwloc environment named at start -- reads the
 * topology into the tables, and is destroyed and closed again.  A program
 * that needs none of that never maps libhwloc, libudev or libm (0.8 MiB,
 * and half a MiB of peak RSS while it reads), and hwloc's plugins (PCI,
 * OpenCL, GL with libX11 and libxcb; 0.6 MiB) are never loaded: the tables
 * need NUMA nodes, cpus, caches and memory attributes, which hwloc's core
 * finds without them.  docs/footprint.md has the figures.
 *
 * Both readers fill one neutral description (machine.h) from which one code
 * path computes cpu -> node and the groups, so they agree. */
#include "config.h"
/* Start-up code, run once a process: compiled for size, so that the code
 * every process runs fits one 64 KiB window with room (src/hot-text.ld;
 * these four files at -Os: 5.8 KiB less of it, docs/footprint.md). */
#pragma GCC optimize("Os")
#include "topo/topo.h"
#include "topo/machine.h"
#include "util/lock.h"
#include "util/log.h"
#include "util/options.h"
#include "util/startdata.h"
#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>
#ifdef HAVE_HWLOC
#include <dlfcn.h>
#include <hwloc.h>
#endif

#define ULONG_BITS (8 * (int)sizeof(unsigned long))

typedef struct {
  int loaded;
  int nnodes;
  int ncpus;                                       /* cpus in topology order (C[].order) */
  int cpu_limit;                                   /* largest OS cpu number + 1 */
  int ngroups;
  const char *group_level;
  int ncores;
  uint64_t cache_size[6];                          /* by level 1..5 */
  int cache_line;
  int have_node_cpus;                              /* node_cpus is filled */
  int have_levels;                                 /* C[].lead and the level counts are filled */
  int full;                                        /* hwloc's details are in (or cannot be had) */
  int level_width[TOPO_LEVELS];                    /* objects holding cpus, per level */
  int level_groups[TOPO_LEVELS];                   /* groups when the groups follow that level */
#ifdef HAVE_HWLOC
  hwloc_topology_t topo;                           /* only while loading */
#endif
  char sysfs_root[256];                            /* where sysfs was read ("" when it was not) */
  char source[HPCMEM_OPT_STR_MAX + 16];
  hpcmem_numa_info_t node[HPCMEM_TOPO_MAX_NODES];  /* ascending OS index; the used ones follow the above */
#ifdef HAVE_HWLOC
  hwloc_obj_t node_obj[HPCMEM_TOPO_MAX_NODES];     /* only while loading */
#endif
} topo_t;

/* Per cpu, one row: the cpu at this position in topology order, and this
 * cpu's node, group and the leaders of the objects holding it (machine.h).
 * One row per cpu keeps a small machine's tables on one page.  Node and
 * group are +1-biased (0: no such cpu), so that the zeroed .bss already
 * says "no cpu" and a reset clears only the rows of the cpus it had. */
typedef struct {
  int16_t order;                                   /* OS cpu number */
  uint16_t numa1;                                  /* OS node index + 1 */
  uint16_t group1;                                 /* group + 1 */
  int16_t lead[TOPO_LEVELS];
} cpu_row_t;
static cpu_row_t C[HPCMEM_TOPO_MAX_CPUS];

#define NUMA_OF(c) ((int)C[c].numa1 - 1)
#define GROUP_OF(c) ((int)C[c].group1 - 1)
#define SET_NUMA(c, v) (C[c].numa1 = (uint16_t)((v) + 1))
#define SET_GROUP(c, v) (C[c].group1 = (uint16_t)((v) + 1))

/* Zero-initialised: before a load this is a one-node, one-group machine
 * (the accessors below special-case !loaded). */
static topo_t T;

/* The cpus of each node (bit = OS cpu number).  Large, but in .bss: only
 * the rows of the nodes that exist are ever touched. */
static unsigned long node_cpus[HPCMEM_TOPO_MAX_NODES][HPCMEM_TOPO_MAX_CPUS / ULONG_BITS];

/* hwloc's details, loaded at their first use (see need_full below). */
static void need_full(void);
/* The topology itself is read at the first question too (need_start
 * below): a process whose one thread asks nothing never reads it. */
static void need_start(void);
static int started;           /* read, or a caller loaded or unloaded one (which need_start keeps) */
static __thread int in_start; /* this thread is reading it (what it calls may ask again) */
static int loaded(void) {
  need_start();
  return T.loaded;
}

/* ------------------------------------------------------------------ */
/* Kinds                                                                */

static const char *const kind_names[HPCMEM_MEM_KINDS_] = {"DRAM", "HBM", "NVM", "unknown"};

const char *_hpcmem_topo_kind_name(hpcmem_mem_kind_t kind) {
  return (unsigned)kind < HPCMEM_MEM_KINDS_ ? kind_names[kind] : "invalid";
}

int _hpcmem_topo_kind_parse(const char *text) {
  if (!text) return -EINVAL;
  for (int k = 0; k < HPCMEM_MEM_KINDS_; k++)
    if (strcasecmp(text, kind_names[k]) == 0) return k;
  return -EINVAL;
}

#ifdef HAVE_HWLOC
/* ------------------------------------------------------------------ */
/* hwloc through dlopen                                                 */

/* Every hwloc function this file calls.  hwloc.h's inline helpers call
 * some of these directly, so the ones used here have replacements below
 * (next_obj_by_type, nbobjs_by_type, info_by_name). */
#define HWLOC_FUNCTIONS(X)                                                                   \
  X(hwloc_get_api_version) X(hwloc_topology_init) X(hwloc_topology_set_synthetic)           \
  X(hwloc_topology_set_xml) X(hwloc_topology_load) X(hwloc_topology_destroy)                \
  X(hwloc_topology_is_thissystem) X(hwloc_get_type_depth) X(hwloc_get_nbobjs_by_depth)      \
  X(hwloc_get_obj_by_depth) X(hwloc_bitmap_isset) X(hwloc_bitmap_weight)                    \
  X(hwloc_bitmap_list_snprintf) X(hwloc_bitmap_iszero) X(hwloc_bitmap_isequal)              \
  X(hwloc_bitmap_isincluded) X(hwloc_bitmap_first) X(hwloc_bitmap_next)                     \
  X(hwloc_memattr_get_value) X(hwloc_memattr_get_best_initiator)

static struct {
  void *lib;
#define HWLOC_POINTER_(f) __typeof__(f) *f;
  HWLOC_FUNCTIONS(HWLOC_POINTER_)
#undef HWLOC_POINTER_
} H;

static void hwloc_close(void) {
  if (H.lib) dlclose(H.lib);
  memset(&H, 0, sizeof H);
}

/* Open the library: 0, or -ENOENT with the loader's reason in why. */
static int hwloc_open(char *why, size_t len) {
  if (H.lib) return 0;
  H.lib = dlopen(HPCMEM_HWLOC_LIBRARY, RTLD_NOW | RTLD_LOCAL);
  if (!H.lib && HPCMEM_HWLOC_LIBDIR[0]) {
    char path[512];
    snprintf(path, sizeof path, "%s/%s", HPCMEM_HWLOC_LIBDIR, HPCMEM_HWLOC_LIBRARY);
    H.lib = dlopen(path, RTLD_NOW | RTLD_LOCAL);
  }
  if (!H.lib) {
    const char *e = dlerror();
    snprintf(why, len, "%s", e ? e : "cannot open " HPCMEM_HWLOC_LIBRARY);
    return -ENOENT;
  }
#define HWLOC_RESOLVE_(f)                                                     \
  if (!(*(void **)&H.f = dlsym(H.lib, #f))) {                                 \
    snprintf(why, len, "%s has no %s", HPCMEM_HWLOC_LIBRARY, #f);             \
    hwloc_close();                                                            \
    return -ENOENT;                                                           \
  }
  HWLOC_FUNCTIONS(HWLOC_RESOLVE_)
#undef HWLOC_RESOLVE_
  return 0;
}

/* From here on the hwloc names call through the table. */
#define hwloc_get_api_version (*H.hwloc_get_api_version)
#define hwloc_topology_init (*H.hwloc_topology_init)
#define hwloc_topology_set_synthetic (*H.hwloc_topology_set_synthetic)
#define hwloc_topology_set_xml (*H.hwloc_topology_set_xml)
#define hwloc_topology_load (*H.hwloc_topology_load)
#define hwloc_topology_destroy (*H.hwloc_topology_destroy)
#define hwloc_topology_is_thissystem (*H.hwloc_topology_is_thissystem)
#define hwloc_get_type_depth (*H.hwloc_get_type_depth)
#define hwloc_get_nbobjs_by_depth (*H.hwloc_get_nbobjs_by_depth)
#define hwloc_get_obj_by_depth (*H.hwloc_get_obj_by_depth)
#define hwloc_bitmap_isset (*H.hwloc_bitmap_isset)
#define hwloc_bitmap_weight (*H.hwloc_bitmap_weight)
#define hwloc_bitmap_list_snprintf (*H.hwloc_bitmap_list_snprintf)
#define hwloc_bitmap_iszero (*H.hwloc_bitmap_iszero)
#define hwloc_bitmap_isequal (*H.hwloc_bitmap_isequal)
#define hwloc_bitmap_isincluded (*H.hwloc_bitmap_isincluded)
#define hwloc_bitmap_first (*H.hwloc_bitmap_first)
#define hwloc_bitmap_next (*H.hwloc_bitmap_next)
#define hwloc_memattr_get_value (*H.hwloc_memattr_get_value)
#define hwloc_memattr_get_best_initiator (*H.hwloc_memattr_get_best_initiator)

/* hwloc.h's inline helpers, on the table (same meaning as hwloc's). */
static hwloc_obj_t next_obj_by_type(hwloc_topology_t t, hwloc_obj_type_t type, hwloc_obj_t prev) {
  int depth = hwloc_get_type_depth(t, type);
  if (depth == HWLOC_TYPE_DEPTH_UNKNOWN || depth == HWLOC_TYPE_DEPTH_MULTIPLE) return NULL;
  if (!prev) return hwloc_get_obj_by_depth(t, depth, 0);
  return prev->depth == depth ? prev->next_cousin : NULL;
}

static int nbobjs_by_type(hwloc_topology_t t, hwloc_obj_type_t type) {
  int depth = hwloc_get_type_depth(t, type);
  if (depth == HWLOC_TYPE_DEPTH_UNKNOWN) return 0;
  if (depth == HWLOC_TYPE_DEPTH_MULTIPLE) return -1;
  return (int)hwloc_get_nbobjs_by_depth(t, depth);
}

static const char *info_by_name(hwloc_obj_t o, const char *name) {
  for (unsigned i = 0; i < o->infos_count; i++)
    if (strcmp(o->infos[i].name, name) == 0) return o->infos[i].value;
  return NULL;
}
#define hwloc_get_next_obj_by_type next_obj_by_type
#define hwloc_get_nbobjs_by_type nbobjs_by_type
#define hwloc_obj_get_info_by_name info_by_name
static int contains_ci(const char *hay, const char *needle) {
  size_t n = strlen(needle);
  for (; *hay; hay++)
    if (strncasecmp(hay, needle, n) == 0) return 1;
  return 0;
}

/* The kind a hwloc name states (subtype "MCDRAM", hwloc >= 2.10 "HBM",
 * "CXL-DRAM", DAXType "NVM" ...); -1 when the name is empty, UNKNOWN when it
 * is something else (GPUMemory, SPM: we cannot tell what it is). */
static int kind_of_name(const char *name) {
  if (!name || !*name) return -1;
  if (contains_ci(name, "MCDRAM") || strncasecmp(name, "HBM", 3) == 0) return HPCMEM_MEM_HBM;
  if (contains_ci(name, "NVM") || contains_ci(name, "NVDIMM") || contains_ci(name, "PMEM"))
    return HPCMEM_MEM_NVM;
  if (contains_ci(name, "DRAM")) return HPCMEM_MEM_DRAM;
  return HPCMEM_MEM_UNKNOWN;
}
#endif

/* ------------------------------------------------------------------ */
/* Node masks                                                           */

static void mask_set(unsigned long *mask, int bit) { mask[bit / ULONG_BITS] |= 1UL << (bit % ULONG_BITS); }
static int mask_isset(const unsigned long *mask, int bit) { return (mask[bit / ULONG_BITS] >> (bit % ULONG_BITS)) & 1; }

static void mask_clear(unsigned long *mask, int maxnode) {
  for (int i = 0; i < maxnode; i++) mask[i / ULONG_BITS] &= ~(1UL << (i % ULONG_BITS));
}

/* Writes v in decimal (no terminator), returns the digits written.  The
 * start-up path formats with this instead of snprintf: libc's printf engine
 * is two 64 KiB windows of its code and one of its tables that a program
 * which does not print would never map (docs/footprint.md). */
static size_t put_dec(char *out, unsigned v) {
  char tmp[12];
  size_t k = 0;
  do tmp[k++] = (char)('0' + v % 10); while (v /= 10);
  for (size_t i = 0; i < k; i++) out[i] = tmp[k - 1 - i];
  return k;
}

char *_hpcmem_topo_nodeset_format(const unsigned long *mask, int maxnode, char *buf, size_t len) {
  size_t n = 0;
  if (!buf || len == 0) return buf;
  buf[0] = 0;
  for (int i = 0; mask && i < maxnode; i++) {
    if (!mask_isset(mask, i)) continue;
    int j = i;
    while (j + 1 < maxnode && mask_isset(mask, j + 1)) j++;
    char piece[2 * 12 + 2];
    size_t w = 0;
    if (n) piece[w++] = ',';
    w += put_dec(piece + w, (unsigned)i);
    if (j > i) { piece[w++] = '-'; w += put_dec(piece + w, (unsigned)j); }
    if (w >= len - n) {  /* truncated: what fits, then "..." over the end */
      memcpy(buf + n, piece, len - n - 1);
      buf[len - 1] = 0;
      if (len > 4) strcpy(buf + len - 4, "...");
      return buf;
    }
    memcpy(buf + n, piece, w);
    n += w;
    buf[n] = 0;
    i = j;
  }
  return buf;
}

/* The OS indexes of the loaded nodes as a list (for messages). */
static char *existing_nodes(char *buf, size_t len) {
  unsigned long m[HPCMEM_TOPO_MASK_LONGS] = {0};
  for (int i = 0; i < T.nnodes; i++) mask_set(m, T.node[i].os_index);
  if (!loaded()) mask_set(m, 0);
  return _hpcmem_topo_nodeset_format(m, HPCMEM_TOPO_MAX_NODE_OS, buf, len);
}

/* ------------------------------------------------------------------ */
/* Simple accessors                                                     */

int _hpcmem_topo_loaded(void) { return loaded(); }
const char *_hpcmem_topo_source(void) { return loaded() ? T.source : "not loaded"; }
int _hpcmem_topo_numa_count(void) { return loaded() ? T.nnodes : 1; }
int _hpcmem_topo_cpu_count(void) { return loaded() ? T.ncpus : 1; }
int _hpcmem_topo_cpu_limit(void) { return loaded() ? T.cpu_limit : 1; }
int _hpcmem_topo_core_count(void) { need_full(); return T.loaded ? T.ncores : 0; }
uint64_t _hpcmem_topo_cache_size(int level) { need_full(); return level >= 1 && level <= 5 ? T.cache_size[level] : 0; }
int _hpcmem_topo_cache_line(void) { need_full(); return T.cache_line > 0 ? T.cache_line : 64; }
/* reads nothing (the summary of a fatal signal asks, mpi/sample.c) */
int _hpcmem_topo_detailed(void) {
  return __atomic_load_n(&started, __ATOMIC_ACQUIRE) && T.loaded && __atomic_load_n(&T.full, __ATOMIC_ACQUIRE);
}
int _hpcmem_topo_cpu_at(int i) { return loaded() && i >= 0 && i < T.ncpus ? C[i].order : -EINVAL; }
const char *_hpcmem_topo_group_level(void) {
  need_start();
  return T.group_level ? T.group_level : "none (not loaded)";
}

int _hpcmem_topo_numa_info(int node, hpcmem_numa_info_t *out) {
  if (!out || node < 0 || node >= _hpcmem_topo_numa_count()) return -EINVAL;
  need_full();
  if (T.loaded) {
    *out = T.node[node];
  } else {
    memset(out, 0, sizeof *out);
    out->kind = HPCMEM_MEM_DRAM;
  }
  return 0;
}

int _hpcmem_topo_numa_lookup(int os_index) {
  if (!loaded()) return os_index == 0 ? 0 : -ENODEV;
  for (int i = 0; i < T.nnodes; i++)
    if (T.node[i].os_index == os_index) return i;
  return -ENODEV;
}

int _hpcmem_topo_cpu_numa(int cpu) {
  if (cpu < 0) return -EINVAL;
  if (!loaded()) return 0;
  if (cpu >= HPCMEM_TOPO_MAX_CPUS || NUMA_OF(cpu) < 0) return -ENODEV;
  return NUMA_OF(cpu);
}

int _hpcmem_topo_cpu_group(int cpu) {
  if (cpu < 0) return -EINVAL;
  int l = loaded(), n = T.ngroups > 0 ? T.ngroups : 1;
  if (l && cpu < HPCMEM_TOPO_MAX_CPUS && GROUP_OF(cpu) >= 0) return GROUP_OF(cpu);
  return cpu % n;
}

int _hpcmem_topo_group_numa(int group) {
  need_start();
  int n = T.ngroups > 0 ? T.ngroups : 1;
  if (group < 0 || group >= n) return -EINVAL;
  if (!T.loaded) return 0;
  for (int i = 0; i < T.ncpus; i++)
    if (GROUP_OF(C[i].order) == group) return _hpcmem_topo_cpu_numa(C[i].order);
  return -ENODEV;
}

/* ------------------------------------------------------------------ */
/* Node lists                                                           */

static int nodeset_fail(const char *what, const char *text, int err, const char *fmt, ...)
    HPCMEM_PRINTF(4, 5);
static int nodeset_fail(const char *what, const char *text, int err, const char *fmt, ...) {
  if (what) {
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    _hpcmem_vformat(msg, sizeof msg, fmt, ap);
    va_end(ap);
    _hpcmem_warn("%s '%s': %s", what, text, msg);
  }
  return err;
}

#define NODESET_EXPECTED "expected \"all\" or node numbers and ranges like 0-3,6"

/* One node number: digits only, at most 9 of them (*toolong set beyond). */
static const char *parse_node(const char *p, long *out, int *toolong) {
  if (!isdigit((unsigned char)*p)) return NULL;
  long v = 0;
  int digits = 0;
  for (; isdigit((unsigned char)*p); p++, digits++)
    if (digits < 9) v = v * 10 + (*p - '0');
  *toolong = digits > 9;
  *out = v;
  return p;
}

/* Nodes past the mask limit never exist, which also bounds the ranges. */
static int node_exists(long node) {
  if (node < 0 || node >= HPCMEM_TOPO_MAX_NODE_OS) return 0;
  if (!loaded()) return 1;  /* nothing to check against yet */
  for (int i = 0; i < T.nnodes; i++)
    if (T.node[i].os_index == node) return 1;
  return 0;
}

static int add_node(const char *what, const char *text, long node, unsigned long *mask, int maxnode) {
  char have[128];
  if (!node_exists(node))
    return nodeset_fail(what, text, -ENODEV, "NUMA node %ld does not exist (the topology has nodes %s)",
                        node, existing_nodes(have, sizeof have));
  if (mask && node >= maxnode)
    return nodeset_fail(what, text, -ERANGE, "NUMA node %ld does not fit in a mask of %d nodes", node, maxnode);
  if (mask) mask_set(mask, (int)node);
  return 0;
}

int _hpcmem_topo_nodeset_parse_as(const char *what, const char *text, unsigned long *mask, int maxnode) {
  if (!text) return nodeset_fail(what, "(null)", -EINVAL, "no node list given");
  if (maxnode < 0 || (maxnode > 0 && !mask)) return -EINVAL;
  if (mask) mask_clear(mask, maxnode);
  const char *p = text, *end = text + strlen(text);
  while (isspace((unsigned char)*p)) p++;
  while (end > p && isspace((unsigned char)end[-1])) end--;
  if (p == end) return nodeset_fail(what, text, -EINVAL, "empty (" NODESET_EXPECTED ")");
  int count = 0;
  if ((size_t)(end - p) == 3 && strncasecmp(p, "all", 3) == 0) {
    if (!loaded()) return add_node(what, text, 0, mask, maxnode) ? -ERANGE : 1;
    for (int i = 0; i < T.nnodes; i++) {
      int r = add_node(what, text, T.node[i].os_index, mask, maxnode);
      if (r) return r;
      count++;
    }
    return count;
  }
  for (;;) {
    long a, b;
    int big_a = 0, big_b = 0;
    const char *q = parse_node(p, &a, &big_a);
    if (!q) goto syntax;
    b = a;
    if (*q == '-') {
      q = parse_node(q + 1, &b, &big_b);
      if (!q) goto syntax;
    }
    if (big_a || big_b)
      return nodeset_fail(what, text, -ENODEV, "node number '%.*s' is far too large", (int)(q - p), p);
    if (b < a) return nodeset_fail(what, text, -EINVAL, "range %ld-%ld runs backwards", a, b);
    for (long n = a; n <= b; n++) {
      int r = add_node(what, text, n, mask, maxnode);
      if (r) return r;
      count++;
    }
    p = q;
    if (p == end) return count;
    if (*p != ',') goto syntax;
    p++;
  }
syntax:
  if (p == end) return nodeset_fail(what, text, -EINVAL, "nothing after the last ',' (" NODESET_EXPECTED ")");
  return nodeset_fail(what, text, -EINVAL, "syntax error at '%.*s' (" NODESET_EXPECTED ")", (int)(end - p), p);
}

int _hpcmem_topo_nodeset_parse(const char *text, unsigned long *mask, int maxnode) {
  return _hpcmem_topo_nodeset_parse_as("node list", text, mask, maxnode);
}

/* ------------------------------------------------------------------ */
/* Classes and LOCAL                                                    */

int _hpcmem_topo_class(hpcmem_mem_kind_t kind, hpcmem_mem_class_t *out) {
  if ((unsigned)kind >= HPCMEM_MEM_KINDS_) return -EINVAL;
  hpcmem_mem_class_t c;
  memset(&c, 0, sizeof c);
  c.kind = kind;
  uint64_t bw = 0, lat = 0;
  int nbw = 0, nlat = 0;
  for (int i = 0; i < _hpcmem_topo_numa_count(); i++) {
    hpcmem_numa_info_t n;
    _hpcmem_topo_numa_info(i, &n);
    if (n.kind != kind) continue;
    c.node_count++;
    mask_set(c.nodes, n.os_index);
    c.capacity += n.capacity;
    if (n.bandwidth) { bw += n.bandwidth; nbw++; }
    if (n.latency) { lat += n.latency; nlat++; }
  }
  if (c.node_count == 0) return -ENODEV;
  c.bandwidth = nbw ? bw / (uint64_t)nbw : 0;
  c.latency = nlat ? lat / (uint64_t)nlat : 0;
  if (out) *out = c;
  return 0;
}

int _hpcmem_topo_classes(hpcmem_mem_class_t *out, int max) {
  if (max > 0 && !out) return -EINVAL;
  int n = 0;
  for (int k = 0; k < HPCMEM_MEM_KINDS_; k++) {
    hpcmem_mem_class_t c;
    if (_hpcmem_topo_class((hpcmem_mem_kind_t)k, &c) != 0) continue;
    if (n < max) out[n] = c;
    n++;
  }
  return n;
}

/* Is cpu one of node i's cpus? */
static int node_has_cpu(int i, int cpu) {
  if (T.have_node_cpus) return cpu < HPCMEM_TOPO_MAX_CPUS && mask_isset(node_cpus[i], cpu);
  return T.nnodes == 1 && cpu < T.cpu_limit;
}

int _hpcmem_topo_local_nodes(int cpu, hpcmem_mem_kind_t kind, unsigned long *mask, int maxnode) {
  if (cpu < 0 || (unsigned)kind >= HPCMEM_MEM_KINDS_ || maxnode < 0 || (maxnode > 0 && !mask)) return -EINVAL;
  if (_hpcmem_topo_class(kind, NULL) != 0) return -ENODEV;
  if (mask) mask_clear(mask, maxnode);
  if (!loaded()) return add_node(NULL, "", 0, mask, maxnode) ? -ERANGE : 1;
  int best = -1;  /* narrowest cpu count among the nodes of this kind that hold cpu */
  for (int i = 0; i < T.nnodes; i++)
    if (T.node[i].kind == kind && node_has_cpu(i, cpu) > 0 && (best < 0 || T.node[i].cpu_count < best))
      best = T.node[i].cpu_count;
  int count = 0;
  for (int i = 0; i < T.nnodes; i++) {
    if (T.node[i].kind != kind) continue;
    if (best >= 0 && !(node_has_cpu(i, cpu) > 0 && T.node[i].cpu_count == best)) continue;
    if (add_node(NULL, "", T.node[i].os_index, mask, maxnode)) return -ERANGE;
    count++;
  }
  return count;
}

/* ------------------------------------------------------------------ */
/* Loading                                                              */

static void reset_tables(void) {
  if (!in_start) __atomic_store_n(&started, 1, __ATOMIC_RELEASE);   /* a caller's own: kept */
  for (int i = 0; i < T.ncpus; i++) C[C[i].order].numa1 = C[C[i].order].group1 = 0;
  T.loaded = 0;
  T.nnodes = 0;
  T.ncpus = 0;
  T.cpu_limit = 0;
  T.ngroups = 0;
  T.group_level = NULL;
  T.ncores = 0;
  memset(T.cache_size, 0, sizeof T.cache_size);
  T.cache_line = 0;
  T.have_node_cpus = 0;
  T.have_levels = 0;
  T.full = 0;
  T.sysfs_root[0] = 0;
}

static void add_cpu(int os) {
  if (os >= HPCMEM_TOPO_MAX_CPUS) return;
  C[T.ncpus++].order = (int16_t)os;
  if (os + 1 > T.cpu_limit) T.cpu_limit = os + 1;
  for (int lv = 0; lv < TOPO_LEVELS; lv++) C[os].lead[lv] = -1;
}

/* Node for each cpu: the narrowest node holding it, DRAM before other kinds
 * at equal width (a KNL cluster's cpus belong to its DRAM, not its MCDRAM). */
static void map_cpus_to_nodes(void) {
  for (int c = 0; c < T.ncpus; c++) {
    int cpu = C[c].order, best = -1;
    for (int i = 0; i < T.nnodes; i++) {
      if (node_has_cpu(i, cpu) <= 0) continue;
      if (best < 0 || T.node[i].cpu_count < T.node[best].cpu_count ||
          (T.node[i].cpu_count == T.node[best].cpu_count && T.node[i].kind == HPCMEM_MEM_DRAM &&
           T.node[best].kind != HPCMEM_MEM_DRAM))
        best = i;
    }
    if (best < 0 && T.nnodes > 0) best = 0;  /* a cpu no node claims: keep it usable */
    SET_NUMA(cpu, best < 0 ? -1 : T.node[best].os_index);
  }
}

/* HPCMEM_HEAPS groups: deal the cpus out in topology order. */
static void groups_by_count(int count) {
  for (int i = 0; i < T.ncpus; i++)
    SET_GROUP(C[i].order, (long)i * count / (T.ncpus ? T.ncpus : 1));
  T.ngroups = count;
  T.group_level = "HPCMEM_HEAPS";
}

static void copy_str(char *dst, size_t len, const char *src) {
  size_t n = src ? strlen(src) : 0;
  if (n >= len) n = len - 1;
  if (n) memcpy(dst, src, n);
  dst[n] = 0;
}

/* ------------------------------------------------------------------ */
/* Thread groups from the neutral description (machine.h)               */

static const char *const level_name[TOPO_LEVELS] = {
    "cpu", "core", "L1 cache", "L2 cache", "L3 cache", "L4 cache", "L5 cache", "NUMA node", "package", "machine",
};

/* The levels no reader sets: a cpu is its own leader, the machine's leader
 * is its smallest cpu, a NUMA node's the smallest of the cpus mapped to it. */
static int node_pos(int os_index) {
  for (int i = 0; i < T.nnodes; i++)
    if (T.node[i].os_index == os_index) return i;
  return -1;
}

static void derived_leads(void) {
  int16_t first[HPCMEM_TOPO_MAX_NODES];
  int all = -1;
  for (int i = 0; i < T.nnodes; i++) first[i] = -1;
  for (int i = 0; i < T.ncpus; i++) {
    int c = C[i].order, pos = NUMA_OF(c) >= 0 ? node_pos(NUMA_OF(c)) : -1;
    if (all < 0 || c < all) all = c;
    if (pos >= 0 && (first[pos] < 0 || c < first[pos])) first[pos] = (int16_t)c;
  }
  for (int i = 0; i < T.ncpus; i++) {
    int c = C[i].order, pos = NUMA_OF(c) >= 0 ? node_pos(NUMA_OF(c)) : -1;
    C[c].lead[TOPO_LV_PU] = (int16_t)c;
    C[c].lead[TOPO_LV_NUMA] = pos >= 0 ? first[pos] : -1;
    C[c].lead[TOPO_LV_MACHINE] = (int16_t)all;
  }
}

/* hwloc's PU order: depth first, siblings by their first cpu -- the same
 * as ordering the cpus by their leaders from the package down. */
static int cpu_before(int a, int b) {
  static const int8_t order[] HPCMEM_START_RO = {TOPO_LV_PACKAGE, TOPO_LV_NUMA, TOPO_LV_L5, TOPO_LV_L5 - 1, TOPO_LV_L5 - 2,
                                 TOPO_LV_L5 - 3,  TOPO_LV_L1,   TOPO_LV_CORE};
  for (size_t k = 0; k < sizeof order; k++)
    if (C[a].lead[order[k]] != C[b].lead[order[k]]) return C[a].lead[order[k]] < C[b].lead[order[k]];
  return a < b;
}

static void sort_cpus(void) {   /* Shell sort: no heap, and nearly sorted input is cheap */
  for (int gap = T.ncpus / 2; gap > 0; gap /= 2)
    for (int i = gap; i < T.ncpus; i++) {
      int16_t c = C[i].order;
      int j = i;
      for (; j >= gap && cpu_before(c, C[j - gap].order); j -= gap) C[j].order = C[j - gap].order;
      C[j].order = c;
    }
}

/* Objects holding cpus per level (a cpu that leads its object counts it);
 * cpus outside every object of a level share one more group. */
static void count_levels(void) {
  for (int lv = 0; lv < TOPO_LEVELS; lv++) {
    int width = 0, stray = 0;
    for (int i = 0; i < T.ncpus; i++) {
      int c = C[i].order;
      if (C[c].lead[lv] == c) width++;
      else if (C[c].lead[lv] < 0) stray = 1;
    }
    T.level_width[lv] = width;
    T.level_groups[lv] = width + stray > 0 ? width + stray : 1;
  }
}

/* Groups = the objects of one level, numbered in topology order. */
static void groups_by_level(int lv) {
  int g = 0, stray = 0;
  for (int i = 0; i < T.ncpus; i++) SET_GROUP(C[i].order, -1);
  for (int i = 0; i < T.ncpus; i++) {
    int c = C[i].order, l = C[c].lead[lv];
    if (l < 0 || l >= HPCMEM_TOPO_MAX_CPUS || NUMA_OF(l) < 0) { stray = 1; continue; }
    if (GROUP_OF(l) < 0) SET_GROUP(l, g++);
    SET_GROUP(c, GROUP_OF(l));
  }
  for (int i = 0; i < T.ncpus; i++)
    if (GROUP_OF(C[i].order) < 0) SET_GROUP(C[i].order, g);
  T.ngroups = g + stray > 0 ? g + stray : 1;
  T.group_level = level_name[lv];
}

static void build_groups(int hint) {
  const int *width = T.level_width;
  if (hint > 0) {
    /* finest level (most objects) whose objects average at least hint cpus */
    int pick = TOPO_LV_MACHINE;
    for (int i = 0; i < TOPO_LEVELS; i++)
      if (width[i] > 0 && T.ncpus >= (long)hint * width[i] && width[i] > width[pick]) pick = i;
    groups_by_level(pick);
    return;
  }
  int llc = -1;
  for (int i = TOPO_LV_L5; i >= TOPO_LV_L1; i--)
    if (width[i] > 0) { llc = i; break; }
  groups_by_level(llc < 0 || width[TOPO_LV_NUMA] > width[llc] ? TOPO_LV_NUMA : llc);
}

void _hpcmem_topo_desc_reset(void) { _hpcmem_topo_unload(); }

int _hpcmem_topo_desc_node(int os_index, const unsigned long *cpus) {
  if (os_index < 0 || os_index >= HPCMEM_TOPO_MAX_NODE_OS || T.nnodes == HPCMEM_TOPO_MAX_NODES) return -ENOSPC;
  int at = T.nnodes++;  /* insertion sort by OS index */
  for (; at > 0 && T.node[at - 1].os_index > os_index; at--) {
    T.node[at] = T.node[at - 1];
    memcpy(node_cpus[at], node_cpus[at - 1], sizeof node_cpus[at]);
  }
  hpcmem_numa_info_t *n = &T.node[at];
  memset(n, 0, sizeof *n);
  n->os_index = os_index;
  memcpy(node_cpus[at], cpus, sizeof node_cpus[at]);
  for (size_t i = 0; i < sizeof node_cpus[at] / sizeof node_cpus[at][0]; i++)
    n->cpu_count += __builtin_popcountl(cpus[i]);
  if (n->cpu_count) _hpcmem_topo_nodeset_format(cpus, HPCMEM_TOPO_MAX_CPUS, n->cpus, sizeof n->cpus);
  T.have_node_cpus = 1;
  return 0;
}

void _hpcmem_topo_desc_cpu(int os) { add_cpu(os); }

void _hpcmem_topo_desc_lead(int cpu, int level, int leader) {
  if (cpu < 0 || cpu >= HPCMEM_TOPO_MAX_CPUS || level < 0 || level >= TOPO_LEVELS) return;
  C[cpu].lead[level] = (int16_t)(leader >= 0 && leader < HPCMEM_TOPO_MAX_CPUS ? leader : -1);
}

int _hpcmem_topo_desc_get_lead(int cpu, int level) {
  if (cpu < 0 || cpu >= HPCMEM_TOPO_MAX_CPUS || level < 0 || level >= TOPO_LEVELS) return -1;
  return C[cpu].lead[level];
}

void _hpcmem_topo_desc_finish(const char *source, int sort) {
  map_cpus_to_nodes();
  derived_leads();
  if (sort) sort_cpus();
  count_levels();
  if (source) copy_str(T.source, sizeof T.source, source);
  T.have_levels = 1;
  T.loaded = 1;
  build_groups(0);
}

#ifdef HAVE_HWLOC

/* The hwloc objects of each level a reader sets (machine.h). */
static const hwloc_obj_type_t level_type[TOPO_LEVELS] = {
    HWLOC_OBJ_PU,       HWLOC_OBJ_CORE,     HWLOC_OBJ_L1CACHE, HWLOC_OBJ_L2CACHE, HWLOC_OBJ_L3CACHE,
    HWLOC_OBJ_L4CACHE,  HWLOC_OBJ_L5CACHE,  HWLOC_OBJ_NUMANODE, HWLOC_OBJ_PACKAGE, HWLOC_OBJ_MACHINE,
};

/* Leaders from hwloc's objects: a cpu belongs to the first object holding
 * it; an object's leader is its smallest cpu not taken by an earlier one. */
static void read_levels(void) {
  for (int lv = TOPO_LV_CORE; lv < TOPO_LEVELS; lv++) {
    if (lv == TOPO_LV_NUMA || lv == TOPO_LV_MACHINE) continue;
    for (hwloc_obj_t o = NULL; (o = hwloc_get_next_obj_by_type(T.topo, level_type[lv], o));) {
      if (!o->cpuset) continue;
      int first = -1, cpu;
      hwloc_bitmap_foreach_begin(cpu, o->cpuset) {
        if (cpu >= HPCMEM_TOPO_MAX_CPUS) break;
        if (NUMA_OF(cpu) < 0 || C[cpu].lead[lv] >= 0) continue;
        if (first < 0) first = cpu;
        C[cpu].lead[lv] = (int16_t)first;
      }
      hwloc_bitmap_foreach_end();
    }
  }
}

/* Bandwidth or latency from the node's own cpus; else from the initiator
 * hwloc rates best; 0 when the topology has no such attribute. */
static uint64_t node_memattr(hwloc_memattr_id_t id, hwloc_obj_t node) {
  hwloc_uint64_t v = 0;
  if (node->cpuset && !hwloc_bitmap_iszero(node->cpuset)) {
    struct hwloc_location loc;
    loc.type = HWLOC_LOCATION_TYPE_CPUSET;
    loc.location.cpuset = node->cpuset;
    if (hwloc_memattr_get_value(T.topo, id, node, &loc, 0, &v) == 0) return v;
  }
  struct hwloc_location best;
  if (hwloc_memattr_get_best_initiator(T.topo, id, node, 0, &best, &v) == 0) return v;
  return 0;
}

static int same_locality(int i, int j) {
  return hwloc_bitmap_isequal(T.node_obj[i]->cpuset, T.node_obj[j]->cpuset);
}

static int has_memattr(int i) { return T.node[i].bandwidth || T.node[i].latency; }

/* The node that the others sharing node i's cpus are compared with: the one
 * with the lowest latency (the largest, when some latency is unknown); -1
 * when fewer than two nodes there have memory attributes. */
static int locality_reference(int i) {
  int ref = -1, peers = 0, all_lat = 1;
  for (int j = 0; j < T.nnodes; j++)
    if (same_locality(i, j) && has_memattr(j)) {
      peers++;
      all_lat &= T.node[j].latency != 0;
    }
  if (peers < 2) return -1;
  for (int j = 0; j < T.nnodes; j++) {
    if (!same_locality(i, j) || !has_memattr(j)) continue;
    const hpcmem_numa_info_t *m = &T.node[j], *r = ref < 0 ? NULL : &T.node[ref];
    if (!r || (all_lat ? m->latency < r->latency || (m->latency == r->latency && m->capacity > r->capacity)
                       : m->capacity > r->capacity))
      ref = j;
  }
  return ref;
}

/* Twice the reference's bandwidth: HBM; half its bandwidth or twice its
 * latency: NVM; -1 when the attributes do not tell (or contradict). */
static int kind_by_memattr(const hpcmem_numa_info_t *n, const hpcmem_numa_info_t *r) {
  int hbm = n->bandwidth && r->bandwidth && n->bandwidth >= 2 * r->bandwidth;
  int nvm = (n->latency && r->latency && n->latency >= 2 * r->latency) ||
            (n->bandwidth && r->bandwidth && 2 * n->bandwidth <= r->bandwidth);
  return hbm == nvm ? -1 : hbm ? HPCMEM_MEM_HBM : HPCMEM_MEM_NVM;
}

/* Kinds: an explicit hwloc name (subtype, DAXType) says what a node is;
 * otherwise memory attributes compared within its locality; otherwise DRAM
 * (or unknown, for a name we do not recognise). */
static void classify_nodes(void) {
  for (int i = 0; i < T.nnodes; i++) {
    hpcmem_numa_info_t *n = &T.node[i];
    int k = kind_of_name(n->subtype);
    if (k < 0) k = kind_of_name(hwloc_obj_get_info_by_name(T.node_obj[i], "DAXType"));
    if (k >= 0) {
      n->kind = (hpcmem_mem_kind_t)k;
      n->kind_from = HPCMEM_KIND_FROM_SUBTYPE;
      if (k != HPCMEM_MEM_UNKNOWN) continue;
    } else {
      n->kind = HPCMEM_MEM_DRAM;
      n->kind_from = HPCMEM_KIND_FROM_DEFAULT;
    }
    int ref = has_memattr(i) ? locality_reference(i) : -1;
    int m = ref < 0 ? -1 : kind_by_memattr(n, &T.node[ref]);
    if (m >= 0) {
      n->kind = (hpcmem_mem_kind_t)m;
      n->kind_from = HPCMEM_KIND_FROM_MEMATTR;
    }
  }
}

/* What hwloc knows of a node beyond its cpus. */
static void node_attrs(hpcmem_numa_info_t *n, hwloc_obj_t o) {
  n->os_index = (int)o->os_index;
  n->capacity = o->attr ? o->attr->numanode.local_memory : 0;
  n->cpu_count = o->cpuset ? hwloc_bitmap_weight(o->cpuset) : 0;
  if (n->cpu_count < 0) n->cpu_count = 0;
  if (n->cpu_count && hwloc_bitmap_list_snprintf(n->cpus, sizeof n->cpus, o->cpuset) >= (int)sizeof n->cpus)
    strcpy(n->cpus + sizeof n->cpus - 4, "...");
  copy_str(n->subtype, sizeof n->subtype, o->subtype);
  n->bandwidth = node_memattr(HWLOC_MEMATTR_ID_BANDWIDTH, o);
  n->latency = node_memattr(HWLOC_MEMATTR_ID_LATENCY, o);
}

static void read_nodes(void) {
  int total = hwloc_get_nbobjs_by_type(T.topo, HWLOC_OBJ_NUMANODE);
  if (total > HPCMEM_TOPO_MAX_NODES)
    _hpcmem_warn("topology has %d NUMA nodes; only the first %d are used", total, HPCMEM_TOPO_MAX_NODES);
  for (hwloc_obj_t o = NULL; (o = hwloc_get_next_obj_by_type(T.topo, HWLOC_OBJ_NUMANODE, o));) {
    if (T.nnodes == HPCMEM_TOPO_MAX_NODES) break;
    if (o->os_index >= HPCMEM_TOPO_MAX_NODE_OS) {
      _hpcmem_warn("NUMA node %u is beyond the %d nodes libhpcmem can address; ignored", o->os_index,
                   HPCMEM_TOPO_MAX_NODE_OS);
      continue;
    }
    int at = T.nnodes++;  /* insertion sort by OS index */
    while (at > 0 && T.node[at - 1].os_index > (int)o->os_index) {
      T.node[at] = T.node[at - 1];
      T.node_obj[at] = T.node_obj[at - 1];
      at--;
    }
    memset(&T.node[at], 0, sizeof T.node[at]);
    T.node_obj[at] = o;
    node_attrs(&T.node[at], o);
  }
  for (int i = 0; i < T.nnodes; i++) {   /* the cpusets, kept after hwloc is gone */
    memset(node_cpus[i], 0, sizeof node_cpus[i]);
    int cpu;
    if (T.node_obj[i]->cpuset) {
      hwloc_bitmap_foreach_begin(cpu, T.node_obj[i]->cpuset) {
        if (cpu >= HPCMEM_TOPO_MAX_CPUS) break;
        mask_set(node_cpus[i], cpu);
      }
      hwloc_bitmap_foreach_end();
    }
  }
  T.have_node_cpus = 1;
  classify_nodes();
}

/* Cores and the first cache of each level (caches of one level are alike on
 * the machines we target; a hybrid cpu's differing ones are not tracked). */
static void read_cores_and_caches(void) {
  static const hwloc_obj_type_t cache[6] = {0, HWLOC_OBJ_L1CACHE, HWLOC_OBJ_L2CACHE, HWLOC_OBJ_L3CACHE,
                                            HWLOC_OBJ_L4CACHE, HWLOC_OBJ_L5CACHE};
  int cores = hwloc_get_nbobjs_by_type(T.topo, HWLOC_OBJ_CORE);
  T.ncores = cores > 0 ? cores : 0;
  for (int l = 1; l <= 5; l++) {
    hwloc_obj_t c = hwloc_get_next_obj_by_type(T.topo, cache[l], NULL);
    if (!c || !c->attr) continue;
    T.cache_size[l] = c->attr->cache.size;
    if (c->attr->cache.linesize > 0 && (l == 1 || !T.cache_line)) T.cache_line = (int)c->attr->cache.linesize;
  }
}

static void read_cpus(void) {
  int warned = 0;
  for (hwloc_obj_t pu = NULL; (pu = hwloc_get_next_obj_by_type(T.topo, HWLOC_OBJ_PU, pu));) {
    if (pu->os_index >= HPCMEM_TOPO_MAX_CPUS) {
      if (!warned++)
        _hpcmem_warn("cpus numbered %d and above are not mapped to groups or NUMA nodes", HPCMEM_TOPO_MAX_CPUS);
      continue;
    }
    add_cpu((int)pu->os_index);
  }
  map_cpus_to_nodes();   /* read_levels() needs it */
}

/* Read at least one byte: open() alone accepts directories and empty files. */
static int check_readable(const char *path) {
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return -errno;
  char c;
  ssize_t r;
  do r = read(fd, &c, 1); while (r < 0 && errno == EINTR);
  int err = r < 0 ? errno : 0;
  close(fd);
  return r == 0 ? -ENODATA : -err;
}

typedef struct {
  int count;
  char text[3][HPCMEM_OPT_STR_MAX + 160];
} pending_t;

static void pend(pending_t *p, const char *fmt, ...) HPCMEM_PRINTF(2, 3);
static void pend(pending_t *p, const char *fmt, ...) {
  if (p->count == 3) return;
  va_list ap;
  va_start(ap, fmt);
  _hpcmem_vformat(p->text[p->count++], sizeof p->text[0], fmt, ap);
  va_end(ap);
}

/* One place the topology may come from. */
typedef struct {
  const char *label;  /* for warnings: "HPCMEM_TOPOLOGY", "HWLOC_SYNTHETIC"... */
  const char *value;  /* file or synthetic description */
  int synthetic;
} source_t;

static void pend_bad_source(pending_t *warn, const source_t *s, int err) {
  if (s->synthetic)
    pend(warn, "%s: '%s' is not a valid synthetic topology description", s->label, s->value);
  else if (err == EINVAL)
    pend(warn, "%s: '%s' is not a valid hwloc XML topology", s->label, s->value);
  else
    pend(warn, "%s: cannot load topology file '%s': %s", s->label, s->value, strerror(err));
}

/* Hand the source to hwloc: 1, or 0 with a warning pending. */
static int set_source(hwloc_topology_t t, const source_t *s, pending_t *warn) {
  if (!s->synthetic) {
    int err = check_readable(s->value);
    if (err == -ENODATA) { pend(warn, "%s: topology file '%s' is empty", s->label, s->value); return 0; }
    if (err) {
      pend(warn, "%s: cannot read topology file '%s': %s", s->label, s->value, strerror(-err));
      return 0;
    }
  }
  if ((s->synthetic ? hwloc_topology_set_synthetic(t, s->value) : hwloc_topology_set_xml(t, s->value)) < 0) {
    pend_bad_source(warn, s, errno);
    return 0;
  }
  return 1;
}

/* Try the sources in order (see topo.h), then this machine; T.topo is the
 * loaded topology on success.  hwloc itself reads HWLOC_SYNTHETIC and
 * HWLOC_XMLFILE when no source was set, so a broken one is tried (and
 * fails) again in the last step: failing there ends in load_minimal(). */
static int open_topology(const char *xml_path, pending_t *warn) {
  source_t src[3];
  int n = 0, err = EINVAL;
  const char *opt = xml_path ? xml_path : _hpcmem_opt_str(TOPOLOGY);
  /* hwloc's own variables are read here, not through the options table:
   * they belong to hwloc, and naming them lets the warnings name them. */
  const char *syn = getenv("HWLOC_SYNTHETIC"), *xml = getenv("HWLOC_XMLFILE");
  if (opt && *opt) src[n++] = (source_t){xml_path ? "topology" : "HPCMEM_TOPOLOGY", opt, 0};
  if (syn && *syn) src[n++] = (source_t){"HWLOC_SYNTHETIC", syn, 1};
  if (xml && *xml) src[n++] = (source_t){"HWLOC_XMLFILE", xml, 0};
  for (int i = 0; i <= n; i++) {
    hwloc_topology_t t;
    if (hwloc_topology_init(&t) < 0) return -errno;
    if (i == n || set_source(t, &src[i], warn)) {
      errno = 0;
      if (hwloc_topology_load(t) == 0) {
        if (i < n)
          snprintf(T.source, sizeof T.source, "%s%s", src[i].synthetic ? "synthetic:" : "", src[i].value);
        else  /* hwloc's HWLOC_FSROOT / HWLOC_CPUID_PATH describe another machine */
          snprintf(T.source, sizeof T.source, "%s",
                   hwloc_topology_is_thissystem(t) ? "this machine" : "hwloc environment");
        T.topo = t;
        return 0;
      }
      err = errno ? errno : EINVAL;
      if (i < n) pend_bad_source(warn, &src[i], err);
    }
    hwloc_topology_destroy(t);
  }
  return -err;
}

static void load_minimal(void);

/* hwloc opens every plugin in its plugin directory when the first topology
 * of the process is made (PCI, OpenCL, GL: libpciaccess, libOpenCL, libX11,
 * libxcb ...), though none of them adds anything our tables use.  An empty
 * HWLOC_PLUGINS_PATH keeps them all out of our topology; a path the user
 * set is left alone.  The application's own hwloc topologies, made after
 * ours is gone, see the environment as it was. */
static int plugins_off(void) {
  if (getenv("HWLOC_PLUGINS_PATH")) return 0;
  return setenv("HWLOC_PLUGINS_PATH", "", 1) == 0;
}

static void release_hwloc(void) {
  /* hwloc not opened (a start from sysfs): nothing to clear, and clearing
   * would dirty two .bss pages of zeros in every process (docs/footprint.md) */
  if (!H.lib && !T.topo) return;
  if (T.topo) hwloc_topology_destroy(T.topo);
  T.topo = NULL;
  memset(T.node_obj, 0, sizeof T.node_obj);
  hwloc_close();
}

int _hpcmem_topo_load(const char *xml_path_or_null) {
  pending_t warn;
  warn.count = 0;
  char why[256];
  _hpcmem_topo_unload();
  int r = hwloc_open(why, sizeof why);
  if (r != 0) {
    load_minimal();
    _hpcmem_warn("cannot open hwloc (%s); using one NUMA node with %d cpus", why, T.ncpus);
    return r;
  }
  unsigned api = hwloc_get_api_version();
  r = -ENOSYS;
  if ((api >> 16) == (HWLOC_API_VERSION >> 16)) {
    int unset = plugins_off();
    r = open_topology(xml_path_or_null, &warn);
    if (unset) unsetenv("HWLOC_PLUGINS_PATH");
  } else {
    _hpcmem_warn("the hwloc library (API %x) does not match the headers libhpcmem was built with (%x)", api,
                 (unsigned)HWLOC_API_VERSION);
  }
  if (r != 0) {
    load_minimal();
    _hpcmem_warn("hwloc cannot describe this machine (%s); using one NUMA node with %d cpus", strerror(-r),
                 T.ncpus);
  }
  for (int i = 0; i < warn.count; i++) _hpcmem_warn("%s; using %s instead", warn.text[i], T.source);
  if (r == 0) {
    read_nodes();
    read_cpus();
    read_cores_and_caches();
    read_levels();
    _hpcmem_topo_desc_finish(NULL, 0);
    T.full = 1;
  }
  release_hwloc();
  return r;
}

/* After a start from sysfs: node sizes, kinds and memory attributes, cores
 * and caches from hwloc.  The groups stay as they are (the heaps follow
 * them already); the nodes too, unless hwloc sees other ones. */
static void add_details(void) {
  int same = 1, count = 0;
  for (hwloc_obj_t o = NULL; (o = hwloc_get_next_obj_by_type(T.topo, HWLOC_OBJ_NUMANODE, o));) {
    if (o->os_index >= HPCMEM_TOPO_MAX_NODE_OS) continue;
    count++;
    if (_hpcmem_topo_numa_lookup((int)o->os_index) < 0) same = 0;
  }
  if (same && count == T.nnodes) {
    for (hwloc_obj_t o = NULL; (o = hwloc_get_next_obj_by_type(T.topo, HWLOC_OBJ_NUMANODE, o));) {
      int i = o->os_index < HPCMEM_TOPO_MAX_NODE_OS ? _hpcmem_topo_numa_lookup((int)o->os_index) : -1;
      if (i < 0) continue;
      T.node_obj[i] = o;
      node_attrs(&T.node[i], o);
    }
    classify_nodes();
  } else {
    char before[128];
    existing_nodes(before, sizeof before);
    T.nnodes = 0;
    read_nodes();
    map_cpus_to_nodes();
    char after[128];
    _hpcmem_warn("hwloc finds NUMA nodes %s where sysfs had %s; using hwloc's (the thread groups stay)",
                 existing_nodes(after, sizeof after), before);
  }
  read_cores_and_caches();
}

static void add_hwloc(void) {
  char why[256], source[sizeof T.source];
  pending_t warn;
  warn.count = 0;
  if (hwloc_open(why, sizeof why) != 0) {
    _hpcmem_warn("cannot open hwloc (%s); NUMA node sizes, memory kinds and caches are unknown", why);
    return;
  }
  int r = -ENOSYS;
  if ((hwloc_get_api_version() >> 16) == (HWLOC_API_VERSION >> 16)) {
    int unset = plugins_off();
    /* a test's fake sysfs tree: hwloc reads the same one */
    int fsroot = strcmp(T.sysfs_root, "/") != 0 && !getenv("HWLOC_FSROOT") &&
                 setenv("HWLOC_FSROOT", T.sysfs_root, 1) == 0;
    memcpy(source, T.source, sizeof source);
    r = open_topology(NULL, &warn);
    memcpy(T.source, source, sizeof source);
    if (fsroot) unsetenv("HWLOC_FSROOT");
    if (unset) unsetenv("HWLOC_PLUGINS_PATH");
  }
  for (int i = 0; i < warn.count; i++) _hpcmem_warn("%s", warn.text[i]);
  if (r == 0) add_details();
  else _hpcmem_warn("hwloc cannot describe this machine (%s); NUMA node sizes, memory kinds and caches are unknown",
                    strerror(-r));
  release_hwloc();
}

void _hpcmem_topo_unload(void) {
  release_hwloc();
  reset_tables();
}

#else /* !HAVE_HWLOC */

static void load_minimal(void);

int _hpcmem_topo_load(const char *xml_path_or_null) {
  const char *opt = xml_path_or_null ? xml_path_or_null : _hpcmem_opt_str(TOPOLOGY);
  reset_tables();
  load_minimal();
  if (opt && *opt) _hpcmem_warn("cannot read topology file '%s': libhpcmem was built without hwloc; using %s instead",
                                opt, T.source);
  return 0;
}

void _hpcmem_topo_unload(void) { reset_tables(); }

static void add_hwloc(void) {}   /* nothing more to be had */

#endif

/* ------------------------------------------------------------------ */
/* Start: sysfs, hwloc later                                            */

void (*_hpcmem_topo_hwloc_guard)(int entering);
static hpcmem_lock_t full_lock = HPCMEM_LOCK_INIT;
static __thread int in_full;   /* this thread is loading hwloc (its mallocs may ask us again) */

static void need_full(void) {
  if (!loaded() || __atomic_load_n(&T.full, __ATOMIC_ACQUIRE) || in_full) return;
  _hpcmem_lock(&full_lock);
  if (!T.full) {
    in_full = 1;
    if (_hpcmem_topo_hwloc_guard) _hpcmem_topo_hwloc_guard(1);
    add_hwloc();
    if (_hpcmem_topo_hwloc_guard) _hpcmem_topo_hwloc_guard(0);
    in_full = 0;
    __atomic_store_n(&T.full, 1, __ATOMIC_RELEASE);
  }
  _hpcmem_unlock(&full_lock);
}

/* A later reading of sysfs failed (r < 0): the machine is one node of the
 * online cpus, said with the errno's name -- not strerror, which may read
 * the C library's message catalogues (allocating, opening files) and waits
 * on the locale's lock, none of which a reading inside a malloc or in a
 * fork's child may do. */
static void sysfs_failed(int r) {
  load_minimal();
  const char *name = NULL;
#if defined(__GLIBC__) && defined(__GLIBC_PREREQ)
#if __GLIBC_PREREQ(2, 32)
  name = strerrorname_np(-r);
#endif
#endif
  _hpcmem_warn("cannot read the topology from sysfs (%s %d); using one node with %d cpu%s", name ? name : "errno", -r,
               T.ncpus, T.ncpus == 1 ? "" : "s");
}

/* The start's reading, at the first question: cpus, caches and nodes from
 * sysfs.  A process whose one thread asks nothing skips it: 23 files here,
 * about 270 us of a 1 ms start (docs/topology.md).  Any thread may ask,
 * and other threads wait for the answer.  A question may come inside a
 * thread's first malloc, which may run under the loader's lock (a dlopen):
 * so this reading neither allocates nor opens a library -- where sysfs
 * fails now, the machine is one node of the online cpus, said once.  What
 * hwloc would read (a topology file, hwloc's variables, no sysfs at start)
 * the allocator reads at start instead, through _hpcmem_topo_read_at_start,
 * which may. */
static hpcmem_lock_t start_lock = HPCMEM_LOCK_INIT;
static void need_start_as(int may_hwloc) {
  if (__atomic_load_n(&started, __ATOMIC_ACQUIRE) || in_start) return;
  _hpcmem_lock(&start_lock);
  if (!started) {
    in_start = 1;
    if (may_hwloc) {
      if (_hpcmem_topo_hwloc_guard) _hpcmem_topo_hwloc_guard(1);
      _hpcmem_topo_start();
      if (_hpcmem_topo_hwloc_guard) _hpcmem_topo_hwloc_guard(0);
    } else {
      int r = _hpcmem_topo_load_sysfs(HPCMEM_START_STR("/"));
      if (r) sysfs_failed(r);
    }
    in_start = 0;
    __atomic_store_n(&started, 1, __ATOMIC_RELEASE);
  }
  _hpcmem_unlock(&start_lock);
}
static void need_start(void) { need_start_as(0); }
void _hpcmem_topo_read_at_start(void) { need_start_as(1); }

static void details_lost(void);

/* A child of fork has one thread: a reading another thread of the parent
 * was in never ends there.  The start's reading is read again at the
 * child's first question (`started` is set only once the tables are
 * complete; the reading is sysfs's, which keeps no other state, as the
 * constructor reads at once what would go through hwloc).  A loading of
 * hwloc's details is given up (details_lost), here, while the child has no
 * other thread to read the tables meanwhile. */
void _hpcmem_topo_fork_child(void) {
  _hpcmem_unlock(&start_lock);
  if (__atomic_load_n(&full_lock.v, __ATOMIC_RELAXED)) {
    if (!T.full) details_lost();                   /* (complete already: the fork came just before the unlock) */
    _hpcmem_unlock(&full_lock);
  }
}

/* In a child of fork whose parent had a thread loading hwloc's details
 * (full_lock held): that thread is not here to finish.  What it left is
 * unusable -- hwloc's library perhaps half opened, its topology half built,
 * hwloc's own locks perhaps held -- so it is forgotten, not called or
 * freed.  add_details may have half changed the nodes, so the tables are
 * read from sysfs again (as inside a malloc: no allocation, no library),
 * the thread groups the heaps follow kept as they were (the groups do not
 * come from hwloc, and the last grouping may have had a hint or
 * HPCMEM_HEAPS); the child goes without the details (node sizes, kinds,
 * cores and caches), said at once.  hwloc's variables that add_hwloc sets
 * for its time stay set in the child when the fork came between its setenv
 * and unsetenv: unsetenv could wait for ever on the environment's lock,
 * which the parent's thread may have held. */
static void details_lost(void) {
#ifdef HAVE_HWLOC
  memset(&H, 0, sizeof H);
  T.topo = NULL;
  memset(T.node_obj, 0, sizeof T.node_obj);
#endif
  static int16_t order[HPCMEM_TOPO_MAX_CPUS];     /* static: 16 KiB kept off the stack */
  static uint16_t group1[HPCMEM_TOPO_MAX_CPUS];
  int ncpus = T.ncpus, ngroups = T.ngroups, same = 1;
  const char *level = T.group_level;
  for (int i = 0; i < ncpus; i++) {
    order[i] = C[i].order;
    group1[i] = C[C[i].order].group1;
  }
  char root[sizeof T.sysfs_root];
  copy_str(root, sizeof root, T.sysfs_root);
  int r = root[0] ? _hpcmem_topo_load_sysfs(root) : -ENOENT;
  if (r) sysfs_failed(r);
  for (int i = 0; i < ncpus && same; i++) same = C[i].order == order[i];
  if (same && T.ncpus == ncpus) {                  /* the same cpus: the same groups */
    for (int i = 0; i < ncpus; i++) C[order[i]].group1 = group1[i];
    T.ngroups = ngroups;
    T.group_level = level;
  } else {
    _hpcmem_topo_group_count(0);                   /* other cpus: grouped as know_groups groups them */
  }
  __atomic_store_n(&T.full, 1, __ATOMIC_RELEASE);
  _hpcmem_warn("this process was forked while another thread was reading the machine's details through hwloc; "
               "it goes without NUMA node sizes, memory kinds, cores and caches");
}

int _hpcmem_topo_load_sysfs(const char *root) {
  if (!root || !*root) return -EINVAL;
  int r = _hpcmem_topo_sysfs_read(root);
  if (r) {
    _hpcmem_topo_unload();
    return r;
  }
  int here = root[0] == '/' && !root[1];
  char source[sizeof T.source];
  copy_str(source, sizeof source, here ? HPCMEM_START_STR("this machine") : "sysfs tree ");   /* not snprintf: see put_dec */
  size_t k = strlen(source);
  if (!here) copy_str(source + k, sizeof source - k, root);
  _hpcmem_topo_desc_finish(source, 1);
  copy_str(T.sysfs_root, sizeof T.sysfs_root, root);
  return 0;
}

/* hwloc's variables that make it describe something else than what sysfs
 * says (a file, a description, another root, other components...). */
static int hwloc_asked(void) {
  static const char vars[][18] HPCMEM_START_TEXT = {"HWLOC_XMLFILE", "HWLOC_SYNTHETIC", "HWLOC_FSROOT", "HWLOC_CPUID_PATH",
                                                   "HWLOC_COMPONENTS", "HWLOC_ALLOW", "HWLOC_THISSYSTEM"};
  for (size_t i = 0; i < sizeof vars / sizeof vars[0]; i++) {
    const char *v = getenv(vars[i]);
    if (v && *v) return 1;
  }
  return 0;
}

int _hpcmem_topo_start_needs_hwloc(void) {
  const char *file = _hpcmem_opt_str(TOPOLOGY);
  return (file && *file) || hwloc_asked();
}

int _hpcmem_topo_start(void) {
  if (_hpcmem_topo_start_needs_hwloc() || _hpcmem_topo_load_sysfs(HPCMEM_START_STR("/")) != 0) return _hpcmem_topo_load(NULL);
  return 0;
}

/* Without hwloc's view: one node holding every online cpu, grouped in order. */
static void load_minimal(void) {
  reset_tables();
  long cpus = sysconf(_SC_NPROCESSORS_ONLN), pages = sysconf(_SC_PHYS_PAGES), psz = sysconf(_SC_PAGESIZE);
  if (cpus < 1) cpus = 1;
  for (long c = 0; c < cpus; c++) add_cpu((int)c);
  hpcmem_numa_info_t *n = &T.node[0];
  memset(n, 0, sizeof *n);
  n->capacity = pages > 0 && psz > 0 ? (uint64_t)pages * (uint64_t)psz : 0;
  n->cpu_count = T.ncpus;
  snprintf(n->cpus, sizeof n->cpus, "0-%d", T.ncpus - 1);
  T.nnodes = 1;
  for (int i = 0; i < T.ncpus; i++) SET_NUMA(C[i].order, 0);
  snprintf(T.source, sizeof T.source, "this machine (one node, without hwloc)");
  T.loaded = 1;
  T.full = 1;   /* hwloc failed already: not asked again */
  _hpcmem_topo_group_count(0);
}

int _hpcmem_topo_group_count(int threads_per_group_hint) {
  int heaps = (int)_hpcmem_opt(HEAPS);
  if (!loaded()) {
    T.ngroups = heaps > 0 ? heaps : 1;
    return T.ngroups;
  }
  if (heaps > 0) {
    groups_by_count(heaps);
  } else if (T.have_levels) {
    build_groups(threads_per_group_hint);
  } else {
    int hint = threads_per_group_hint;
    groups_by_count(hint > 0 ? (T.ncpus + hint - 1) / hint : 1);
    T.group_level = hint > 0 ? "cpus in order" : "machine";
  }
  return T.ngroups;
}

/* ------------------------------------------------------------------ */
/* Summary                                                              */

static const char *human(uint64_t bytes, char *buf, size_t len) {
  static const char *const unit[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB"};
  double v = (double)bytes;
  int u = 0;
  while (v >= 1024 && u < 5) { v /= 1024; u++; }
  snprintf(buf, len, u ? "%.1f %s" : "%.0f %s", v, unit[u]);
  return buf;
}

static void print_perf(FILE *out, uint64_t bw, uint64_t lat) {
  if (bw) fprintf(out, ", bandwidth %llu MiB/s", (unsigned long long)bw);
  if (lat) fprintf(out, ", latency %llu ns", (unsigned long long)lat);
}

void _hpcmem_topo_print(FILE *out) {
  static const char *const from[] = {"", " (from memory attributes)", " (from its hwloc name)"};
  char a[32], b[160];
  if (!out) return;
  need_full();
  if (!T.loaded) {
    fprintf(out, "topology: not loaded (one node, %d thread group%s)\n", T.ngroups > 1 ? T.ngroups : 1,
            T.ngroups > 1 ? "s" : "");
    return;
  }
  fprintf(out, "topology: %s\n", T.source);
  fprintf(out, "  %d cpus, %d NUMA node%s, %d thread group%s (by %s)\n", T.ncpus, T.nnodes, T.nnodes == 1 ? "" : "s",
          T.ngroups, T.ngroups == 1 ? "" : "s", _hpcmem_topo_group_level());
  if (T.ncores) {
    fprintf(out, "  %d cores", T.ncores);
    for (int l = 1; l <= 5; l++)
      if (T.cache_size[l]) fprintf(out, ", L%d %s", l, human(T.cache_size[l], a, sizeof a));
    fprintf(out, ", %d-byte cache lines\n", _hpcmem_topo_cache_line());
  }
  for (int i = 0; i < T.nnodes; i++) {
    const hpcmem_numa_info_t *n = &T.node[i];
    fprintf(out, "  node %d: %s%s%s%s, %s, ", n->os_index, _hpcmem_topo_kind_name(n->kind), n->subtype[0] ? " (" : "",
            n->subtype, n->subtype[0] ? ")" : "", human(n->capacity, a, sizeof a));
    if (n->cpu_count)
      fprintf(out, "%d cpus %s", n->cpu_count, n->cpus);
    else
      fprintf(out, "no cpus");
    print_perf(out, n->bandwidth, n->latency);
    fprintf(out, "%s\n", from[n->kind_from]);
  }
  hpcmem_mem_class_t c[HPCMEM_MEM_KINDS_];
  int nc = _hpcmem_topo_classes(c, HPCMEM_MEM_KINDS_);
  for (int i = 0; i < nc; i++) {
    fprintf(out, "  class %s: node%s %s, %s", _hpcmem_topo_kind_name(c[i].kind), c[i].node_count == 1 ? "" : "s",
            _hpcmem_topo_nodeset_format(c[i].nodes, HPCMEM_TOPO_MAX_NODE_OS, b, sizeof b),
            human(c[i].capacity, a, sizeof a));
    print_perf(out, c[i].bandwidth, c[i].latency);
    fputc('\n', out);
  }
}
