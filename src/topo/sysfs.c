/* The machine from Linux sysfs, read at start (see machine.h).
 *
 * This runs inside the library constructor, before main: no malloc, no
 * stdio, no directory streams -- open/read/close into stack buffers and
 * hand-written parsing, so that start-up touches none of libc's heavier
 * pages and loads no library.  It reads what hwloc's Linux backend reads
 * for the same answers: the online cpus, the cgroup cpuset the process may
 * use (hwloc's "allowed" cpus and nodes; the process's own binding does not
 * count, as in hwloc), each cpu's core, package and caches, and the cpus of
 * each NUMA node. */
#include "config.h"
/* Start-up code, run once a process: compiled for size, so that the code
 * every process runs fits one 64 KiB window with room (src/hot-text.ld;
 * these four files at -Os: 5.8 KiB less of it, docs/footprint.md). */
#pragma GCC optimize("Os")
#include "topo/topo.h"
#include "topo/machine.h"
#include "util/startdata.h"
#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <unistd.h>

/* every name this file reads is in the start's data (util/startdata.h) */
#define S(s) HPCMEM_START_STR(s)
#define ULONG_BITS (8 * (int)sizeof(unsigned long))
#define CPU_LONGS (HPCMEM_TOPO_MAX_CPUS / ULONG_BITS)
#define NODE_LONGS HPCMEM_TOPO_MASK_LONGS

static inline __attribute__((always_inline)) void bit_set(unsigned long *m, int b) { m[b / ULONG_BITS] |= 1UL << (b % ULONG_BITS); }
static inline __attribute__((always_inline)) int bit_isset(const unsigned long *m, int b) { return (int)((m[b / ULONG_BITS] >> (b % ULONG_BITS)) & 1); }

/* ------------------------------------------------------------------ */
/* Paths and files                                                      */

typedef struct {
  char s[512];
  size_t n;
  int overflow;
} path_t;

static void put(path_t *p, const char *s) {
  for (; *s; s++) {
    if (p->n + 1 >= sizeof p->s) { p->overflow = 1; break; }
    p->s[p->n++] = *s;
  }
  p->s[p->n] = 0;
}

static void put_int(path_t *p, int v) {
  char d[12];
  int i = (int)sizeof d;
  d[--i] = 0;
  do d[--i] = (char)('0' + v % 10); while ((v /= 10) > 0 && i > 0);
  put(p, d + i);
}

/* root + rest, with exactly one '/' between them. */
static void start(path_t *p, const char *root, const char *rest) {
  p->n = 0;
  p->overflow = 0;
  p->s[0] = 0;
  put(p, root);
  while (p->n > 0 && p->s[p->n - 1] == '/') p->s[--p->n] = 0;
  while (*rest == '/') rest++;
  put(p, S("/"));
  put(p, rest);
}

int _hpcmem_topo_sysfs_files;

static int open_path(const path_t *p) {
  if (p->overflow) return -ENAMETOOLONG;
  _hpcmem_topo_sysfs_files++;
  int fd;
  do fd = open(p->s, O_RDONLY | O_CLOEXEC); while (fd < 0 && errno == EINTR);
  return fd < 0 ? -errno : fd;
}

static ssize_t read_some(int fd, char *buf, size_t len) {
  ssize_t r;
  do r = read(fd, buf, len); while (r < 0 && errno == EINTR);
  return r < 0 ? -errno : r;
}

/* A small file, NUL-terminated: its length, or -errno. */
static ssize_t read_small(const path_t *p, char *buf, size_t len) {
  int fd = open_path(p);
  if (fd < 0) return fd;
  size_t n = 0;
  ssize_t r = 0;
  while (n + 1 < len && (r = read_some(fd, buf + n, len - 1 - n)) > 0) n += (size_t)r;
  close(fd);
  buf[n] = 0;
  return r < 0 ? r : (ssize_t)n;
}

/* A list file ("0-3,8,10-11", any length) into bits 0 .. nbits-1 of m
 * (cleared first; larger numbers are dropped): 0, or -errno / -EINVAL. */
static int read_list(const path_t *p, unsigned long *m, int nbits) {
  memset(m, 0, (size_t)(nbits / ULONG_BITS) * sizeof *m);
  int fd = open_path(p);
  if (fd < 0) return fd;
  char buf[256];
  long a = -1, cur = -1;  /* range start (after '-'), number being read */
  int err = 0;
  for (;;) {
    ssize_t r = read_some(fd, buf, sizeof buf);
    if (r < 0) { err = (int)r; break; }
    int eof = r == 0;
    if (eof) { buf[0] = ','; r = 1; }   /* ends the last number */
    for (ssize_t i = 0; i < r && !err; i++) {
      char c = buf[i];
      if (c >= '0' && c <= '9') {
        cur = (cur < 0 ? 0 : cur) * 10 + (c - '0');
        if (cur > 1L << 30) cur = 1L << 30;
      } else if (c == '-' && cur >= 0 && a < 0) {
        a = cur;
        cur = -1;
      } else if (c == ',' || c == '\n' || c == ' ' || c == '\t') {
        if (cur >= 0) {
          for (long b = a >= 0 ? a : cur; b <= cur && b < nbits; b++) bit_set(m, (int)b);
        } else if (a >= 0) {
          err = -EINVAL;
        }
        a = cur = -1;
      } else {
        err = -EINVAL;
      }
    }
    if (eof || err) break;
  }
  close(fd);
  return err;
}

int _hpcmem_topo_sysfs_possible_cpus(const char *root) {
  if (!root || !*root) return -EINVAL;
  unsigned long m[CPU_LONGS];
  path_t p;
  start(&p, root, S("sys/devices/system/cpu/possible"));
  int r = read_list(&p, m, HPCMEM_TOPO_MAX_CPUS);
  if (r) return r;
  int n = 0;
  for (int i = 0; i < CPU_LONGS; i++) n += __builtin_popcountl(m[i]);
  return n ? n : -ENODEV;
}

/* Lines of a file of any length; longer lines are cut at the buffer size. */
typedef struct {
  int fd;
  char buf[512];
  int pos, len;
} lines_t;

static int next_line(lines_t *l, char *line, size_t max) {
  size_t n = 0;
  for (;;) {
    if (l->pos == l->len) {
      ssize_t r = read_some(l->fd, l->buf, sizeof l->buf);
      if (r <= 0) { line[n] = 0; return n ? (int)n : -1; }
      l->pos = 0;
      l->len = (int)r;
    }
    char c = l->buf[l->pos++];
    if (c == '\n') { line[n] = 0; return (int)n; }
    if (n + 1 < max) line[n++] = c;
  }
}

/* The n-th space-separated field of line (0-based), NUL-terminated in
 * place; NULL when missing.  Fields after it are no longer usable. */
static char *field(char *line, int n, char **rest) {
  char *p = line;
  for (int i = 0;; i++) {
    while (*p == ' ') p++;
    if (!*p) return NULL;
    char *f = p;
    while (*p && *p != ' ') p++;
    if (i == n) {
      if (*p) *p++ = 0;
      if (rest) *rest = p;
      return f;
    }
  }
}

static int has_word(const char *list, const char *word, char sep) {
  size_t w = strlen(word);
  for (const char *p = list; *p;) {
    const char *e = p;
    while (*e && *e != sep && *e != '\n') e++;
    if ((size_t)(e - p) == w && memcmp(p, word, w) == 0) return 1;
    p = *e ? e + 1 : e;
  }
  return 0;
}

/* ------------------------------------------------------------------ */
/* What the process may use: its cgroup cpuset, found as hwloc finds it  */

/* The cpuset's name: /proc/self/cpuset, else the cpuset (v1) or unified
 * (v2) line of /proc/self/cgroup. */
static int cgroup_name(const char *root, char *name, size_t len) {
  path_t p;
  start(&p, root, S("proc/self/cpuset"));
  if (read_small(&p, name, len) > 0) {
    char *nl = memchr(name, '\n', strlen(name));   /* not strcspn: its code and table are another libc window */
    if (nl) *nl = 0;
    return 0;
  }
  start(&p, root, S("proc/self/cgroup"));
  lines_t l = {.fd = open_path(&p)};
  if (l.fd < 0) return l.fd;
  char line[512];
  int found = -ENOENT;
  while (found && next_line(&l, line, sizeof line) >= 0) {
    char *colon = strchr(line, ':');
    const char *path = NULL;
    if (colon && strncmp(colon, S(":cpuset:"), 8) == 0) path = colon + 8;
    else if (colon && strncmp(colon, S("::"), 2) == 0) path = colon + 2;
    if (!path) continue;
    size_t n = strlen(path);
    if (n >= len) n = len - 1;
    memcpy(name, path, n);
    name[n] = 0;
    found = 0;
  }
  close(l.fd);
  return found;
}

/* The files holding the allowed cpus and nodes: from the first cpuset
 * mount of /proc/mounts (cgroup v2 with the cpuset controller, a cpuset
 * file system, or cgroup v1 with the cpuset option). */
static int cgroup_files(const char *root, const char *name, path_t *cpus, path_t *mems) {
  path_t p;
  start(&p, root, S("proc/mounts"));
  lines_t l = {.fd = open_path(&p)};
  if (l.fd < 0) return l.fd;
  char line[512];
  int found = -ENOENT;
  while (found && next_line(&l, line, sizeof line) >= 0) {
    char *rest, *rest2;
    char *mnt = field(line, 1, &rest);
    char *type = mnt ? field(rest, 0, &rest2) : NULL;
    char *opts = type ? field(rest2, 0, NULL) : NULL;
    if (!opts) continue;
    const char *cpu_file, *mem_file;
    if (strcmp(type, S("cgroup2")) == 0) {
      char ctrl[256];
      start(&p, root, mnt);
      put(&p, S("/cgroup.controllers"));
      if (read_small(&p, ctrl, sizeof ctrl) <= 0 || !has_word(ctrl, S("cpuset"), ' ')) continue;
      cpu_file = S("/cpuset.cpus.effective");
      mem_file = S("/cpuset.mems.effective");
    } else if (strcmp(type, S("cpuset")) == 0 ||
               (strcmp(type, S("cgroup")) == 0 && has_word(opts, S("cpuset"), ',') && has_word(opts, S("noprefix"), ','))) {
      cpu_file = S("/cpus");
      mem_file = S("/mems");
    } else if (strcmp(type, S("cgroup")) == 0 && has_word(opts, S("cpuset"), ',')) {
      cpu_file = S("/cpuset.cpus");
      mem_file = S("/cpuset.mems");
    } else {
      continue;
    }
    start(cpus, root, mnt);
    put(cpus, name);
    put(cpus, cpu_file);
    start(mems, root, mnt);
    put(mems, name);
    put(mems, mem_file);
    found = 0;
  }
  close(l.fd);
  return found;
}

/* Clear what the cgroup does not allow (nothing when there is no cpuset
 * or it cannot be read, as in hwloc). */
static void restrict_to_cgroup(const char *root, unsigned long *cpus, unsigned long *nodes) {
  char name[256];
  path_t cf, mf;
  if (cgroup_name(root, name, sizeof name) != 0 || cgroup_files(root, name, &cf, &mf) != 0) return;
  unsigned long allowed[CPU_LONGS];
  if (read_list(&cf, allowed, HPCMEM_TOPO_MAX_CPUS) == 0)
    for (int i = 0; i < CPU_LONGS; i++) cpus[i] &= allowed[i];
  if (read_list(&mf, allowed, HPCMEM_TOPO_MAX_NODE_OS) == 0)
    for (int i = 0; i < NODE_LONGS; i++) nodes[i] &= allowed[i];
}

/* ------------------------------------------------------------------ */
/* cpus and nodes                                                       */

static void cpu_path(path_t *p, const char *root, int cpu, const char *rest) {
  start(p, root, S("sys/devices/system/cpu/cpu"));
  put_int(p, cpu);
  put(p, rest);
}

/* The cpus that share an object of level lv with cpu, from the list file
 * cpu's dir + sub + file (else + old, a name older kernels use, when not
 * NULL): their leader (the smallest of the machine's cpus in the set)
 * becomes the lead of cpu and of every cpu of the set that has none yet.
 * cpu leads itself when the set holds none, or when a cache has no list
 * (old NULL); it has no lead when neither topology file is there.
 * Linux writes these lists as classes (every cpu of a core, package or
 * cache lists the same set, its own among them), so each cpu of the set
 * would read the same set from its own file: a cpu whose lead a file set
 * already does not read its own (a core's other hardware threads, a
 * package's or a shared cache's other cpus).  A sysfs whose lists
 * disagree (none that Linux writes) would get the leads of the first cpu
 * that read each set.  A
 * 128-cpu machine (2 packages, 64 cores, an L3 per 8 cores) opens 984
 * files instead of 1,798; a file costs 6 - 12 us on Linux's sysfs, so
 * about 8 ms less of every process start there. */
static void lead_from(const char *root, int cpu, int lv, const char *sub, const char *file, const char *old,
                      const unsigned long *machine) {
  unsigned long set[CPU_LONGS];
  path_t p;
  cpu_path(&p, root, cpu, sub);
  put(&p, file);
  if (read_list(&p, set, HPCMEM_TOPO_MAX_CPUS) != 0) {
    if (!old) { _hpcmem_topo_desc_lead(cpu, lv, cpu); return; }
    cpu_path(&p, root, cpu, old);
    if (read_list(&p, set, HPCMEM_TOPO_MAX_CPUS) != 0) return;   /* add_cpu left it -1 */
  }
  int l = -1;
  for (int i = 0; i < CPU_LONGS; i++)
    for (unsigned long m = set[i] & machine[i]; m; m &= m - 1) {
      int x = i * ULONG_BITS + __builtin_ctzl(m);
      if (l < 0) l = x;                       /* the first is the smallest */
      if (_hpcmem_topo_desc_get_lead(x, lv) < 0) _hpcmem_topo_desc_lead(x, lv, l);
    }
  _hpcmem_topo_desc_lead(cpu, lv, l < 0 ? cpu : l);
}

/* Data and unified caches, the first of each level (as hwloc's L1 .. L5).
 * A level whose lead cpu has (from an earlier index, or another cpu's
 * shared list) needs neither the index's type nor its list. */
static void read_caches(const char *root, int cpu, const unsigned long *machine) {
  for (int k = 0; k < 32; k++) {
    char idx[24] = "/cache/index", text[32];
    path_t p;
    size_t n = strlen(idx);
    if (k >= 10) idx[n++] = (char)('0' + k / 10);
    idx[n++] = (char)('0' + k % 10);
    idx[n] = 0;
    cpu_path(&p, root, cpu, idx);
    put(&p, S("/level"));
    if (read_small(&p, text, sizeof text) <= 0) break;
    int level = text[0] - '0';
    if (level < 1 || level > 5 || text[1] > ' ') continue;
    int lv = TOPO_LV_L1 + level - 1;
    if (_hpcmem_topo_desc_get_lead(cpu, lv) >= 0) continue;
    cpu_path(&p, root, cpu, idx);
    put(&p, S("/type"));
    if (read_small(&p, text, sizeof text) <= 0 || strncmp(text, S("Instruction"), 11) == 0) continue;
    lead_from(root, cpu, lv, idx, S("/shared_cpu_list"), NULL, machine);
  }
}

int _hpcmem_topo_sysfs_read(const char *root) {
  unsigned long machine[CPU_LONGS], nodes[NODE_LONGS], set[CPU_LONGS];
  path_t p;
  start(&p, root, S("sys/devices/system/cpu/online"));
  int r = read_list(&p, machine, HPCMEM_TOPO_MAX_CPUS);
  if (r) return r;
  start(&p, root, S("sys/devices/system/node/online"));
  int numa = read_list(&p, nodes, HPCMEM_TOPO_MAX_NODE_OS) == 0;
  if (!numa) {
    memset(nodes, 0, sizeof nodes);
    bit_set(nodes, 0);
  }
  restrict_to_cgroup(root, machine, nodes);
  int ncpus = 0;
  for (int c = 0; c < HPCMEM_TOPO_MAX_CPUS; c++) ncpus += bit_isset(machine, c);
  if (ncpus == 0) return -ENODEV;

  _hpcmem_topo_desc_reset();
  for (int n = 0; n < HPCMEM_TOPO_MAX_NODE_OS; n++) {
    if (!bit_isset(nodes, n)) continue;
    if (numa) {
      start(&p, root, S("sys/devices/system/node/node"));
      put_int(&p, n);
      put(&p, S("/cpulist"));
      if (read_list(&p, set, HPCMEM_TOPO_MAX_CPUS) != 0) continue;  /* not a node after all */
      for (int i = 0; i < CPU_LONGS; i++) set[i] &= machine[i];
    } else {
      memcpy(set, machine, sizeof set);   /* no NUMA in this kernel: one node */
    }
    _hpcmem_topo_desc_node(n, set);
  }
  for (int c = 0; c < HPCMEM_TOPO_MAX_CPUS; c++)   /* every cpu first: a list may give leads to later ones */
    if (bit_isset(machine, c)) _hpcmem_topo_desc_cpu(c);
  for (int c = 0; c < HPCMEM_TOPO_MAX_CPUS; c++) {
    if (!bit_isset(machine, c)) continue;
    if (_hpcmem_topo_desc_get_lead(c, TOPO_LV_CORE) < 0)
      lead_from(root, c, TOPO_LV_CORE, S("/topology"), S("/core_cpus_list"), S("/topology/thread_siblings_list"), machine);
    if (_hpcmem_topo_desc_get_lead(c, TOPO_LV_PACKAGE) < 0)
      lead_from(root, c, TOPO_LV_PACKAGE, S("/topology"), S("/package_cpus_list"), S("/topology/core_siblings_list"),
                machine);
    read_caches(root, c, machine);
  }
  return 0;
}
