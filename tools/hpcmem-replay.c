/* hpcmem-replay: replays the allocations of one rank's trace -- their
 * order, sizes and alignments, not their stacks -- against several
 * allocators and prints the time each spends in allocation:
 *
 *   hpcmem-replay [--repeat N] [--touch] [--allocator NAME[=LIB]]... TRACE
 *
 * The trace is first turned into a flat list of operations on dense slot
 * numbers (a file in $TMPDIR); then for each allocator the program runs
 * itself again with LD_PRELOAD=<the allocator> (the way applications use
 * them), maps the list, and times the loop.  Nothing of the replayer uses
 * malloc while it is timed.  Events are replayed in their recorded time
 * order on one thread.  See docs/hpcmem-report.md ("hpcmem-replay"). */
#include "config.h"
#include "hmt_map.h"
#include "hmt_reader.h"
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <limits.h>
#include <malloc.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#ifndef HPCMEM_LIBDIR
#define HPCMEM_LIBDIR "/usr/local/lib"
#endif

enum { OP_MALLOC = 1, OP_CALLOC, OP_REALLOC, OP_FREE, OP_MEMALIGN };

/* one operation: size << 16 | log2(align) << 8 | op */
typedef struct {
  uint32_t slot, old;
  uint64_t word;
} op_t;

typedef struct {
  char magic[8];
  uint64_t nops, nslots, peak_live;
  uint64_t count[6];
} ops_header_t;

static char ops_path[PATH_MAX];  /* the temporary file of operations, removed on any exit */

static void die(const char *fmt, ...) {
  if (ops_path[0]) unlink(ops_path);
  va_list ap;
  va_start(ap, fmt);
  fputs("hpcmem-replay: ", stderr);
  vfprintf(stderr, fmt, ap);
  fputc('\n', stderr);
  va_end(ap);
  exit(2);
}

static uint64_t now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* ---- the child: replay under LD_PRELOAD -------------------------------- */

static long resident_kb(void) {
  long pages = 0, res = 0;
  FILE *f = fopen("/proc/self/statm", "r");
  if (f) {
    if (fscanf(f, "%ld %ld", &pages, &res) != 2) res = 0;
    fclose(f);
  }
  return res * (sysconf(_SC_PAGESIZE) / 1024);
}

static int run_ops(const char *path, int touch) {
  int fd = open(path, O_RDONLY);
  struct stat st;
  if (fd < 0 || fstat(fd, &st) != 0) die("%s: %s", path, strerror(errno));
  const uint8_t *map = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_PRIVATE | MAP_POPULATE, fd, 0);
  if (map == MAP_FAILED) die("%s: %s", path, strerror(errno));
  const ops_header_t *h = (const ops_header_t *)map;
  const op_t *ops = (const op_t *)(map + sizeof *h);
  void **slot = mmap(NULL, (h->nslots + 1) * sizeof *slot, PROT_READ | PROT_WRITE,
                     MAP_PRIVATE | MAP_ANONYMOUS | MAP_POPULATE, -1, 0);
  if (slot == MAP_FAILED) die("slot table: %s", strerror(errno));
  size_t page = (size_t)sysconf(_SC_PAGESIZE);
  uint64_t failed = 0;
  /* what is resident before the loop (program, operations, slot table) is
   * not the allocator's: the result is the peak above it */
  long base_kb = resident_kb();
  uint64_t t0 = now_ns();
  for (uint64_t i = 0; i < h->nops; i++) {
    const op_t *o = &ops[i];
    size_t size = (size_t)(o->word >> 16);
    void *p = NULL;
    switch (o->word & 0xff) {
      case OP_MALLOC: p = malloc(size); break;
      case OP_CALLOC: p = calloc(1, size); break;
      case OP_REALLOC: p = realloc(o->old ? slot[o->old] : NULL, size); if (o->old) slot[o->old] = NULL; break;
      case OP_MEMALIGN: {
        size_t a = (size_t)1 << ((o->word >> 8) & 0xff);
        if (a < sizeof(void *)) a = sizeof(void *);
        if (posix_memalign(&p, a, size) != 0) p = NULL;
        break;
      }
      case OP_FREE: free(slot[o->slot]); slot[o->slot] = NULL; continue;
    }
    if (!p && size) failed++;
    slot[o->slot] = p;
    if (touch && p)
      for (size_t k = 0; k < size; k += page) ((volatile char *)p)[k] = 1;
  }
  uint64_t t = now_ns() - t0;
  struct rusage ru;
  getrusage(RUSAGE_SELF, &ru);
  printf("%llu %ld %llu\n", (unsigned long long)t, ru.ru_maxrss > base_kb ? ru.ru_maxrss - base_kb : 0,
         (unsigned long long)failed);
  return 0;
}

/* ---- the parent: trace -> operations ----------------------------------- */

static void write_all(int fd, const void *p, size_t n) {
  const char *c = p;
  while (n) {
    ssize_t w = write(fd, c, n);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) die("writing the operations: %s", strerror(errno));
    c += w; n -= (size_t)w;
  }
}

static int log2u(uint64_t v) {
  int l = 0;
  while (v > 1) { v >>= 1; l++; }
  return l;
}

static void convert(const char *trace, int fd, ops_header_t *h) {
  hmt_reader_t *r;
  hmt_error_t err;
  if (hmt_open(trace, 0, &r, &err) != 0) die("%s", err.message);
  hmt_map_t live = {0};   /* address -> slot */
  uint32_t *free_slots = NULL;
  size_t nfree = 0, capfree = 0;
  uint64_t next = 1, cur = 0;
  hmt_map_t sizes = {0};  /* slot -> size, for the live-bytes peak */
  memset(h, 0, sizeof *h);
  memcpy(h->magic, "HMTOPS1", 8);
  write_all(fd, h, sizeof *h);
  op_t buf[4096];
  size_t nb = 0;
  hmt_event_t e;
  int k;
#define EMIT(o)                                                     \
  do {                                                              \
    buf[nb++] = (o);                                                \
    if (nb == 4096) { write_all(fd, buf, sizeof buf); nb = 0; }     \
    h->nops++;                                                      \
  } while (0)
#define PUSH_FREE(x)                                                                  \
  do {                                                                                \
    if (nfree == capfree) {                                                           \
      capfree = capfree ? capfree * 2 : 1024;                                         \
      if (!(free_slots = realloc(free_slots, capfree * sizeof *free_slots))) die("out of memory"); \
    }                                                                                 \
    free_slots[nfree++] = (uint32_t)(x);                                              \
  } while (0)
  while ((k = hmt_next(r, &e)) == 1) {
    uint64_t old_slot = 0, v;
    if (e.type == HPCMEM_EV_FREE || e.type == HPCMEM_EV_REALLOC) {
      uint64_t addr = e.type == HPCMEM_EV_FREE ? e.ptr : e.old_ptr;
      if (addr && hmt_map_del(&live, addr, &old_slot) && hmt_map_del(&sizes, old_slot, &v)) cur -= v;
    }
    /* a free, or a realloc to size 0 that freed; frees of memory from
     * before the trace are not ours to replay */
    if (e.type == HPCMEM_EV_FREE || !e.ptr) {
      if (old_slot) {
        EMIT(((op_t){(uint32_t)old_slot, 0, OP_FREE}));
        h->count[OP_FREE]++;
        PUSH_FREE(old_slot);
      }
      continue;
    }
    uint64_t s = nfree ? free_slots[--nfree] : next++;
    if (s > UINT32_MAX) die("%s: more than 4 G live allocations", trace);
    unsigned op = e.type == HPCMEM_EV_CALLOC ? OP_CALLOC : e.type == HPCMEM_EV_MEMALIGN ? OP_MEMALIGN
                : e.type == HPCMEM_EV_REALLOC ? OP_REALLOC : OP_MALLOC;
    if (e.size >> 48) die("%s: an allocation of %llu bytes cannot be replayed", trace, (unsigned long long)e.size);
    uint64_t word = e.size << 16 | (uint64_t)(op == OP_MEMALIGN ? log2u(e.align) : 0) << 8 | op;
    EMIT(((op_t){(uint32_t)s, (uint32_t)(op == OP_REALLOC ? old_slot : 0), word}));
    h->count[op]++;
    /* the old block's slot is free again once the realloc has run */
    if (old_slot) PUSH_FREE(old_slot);
    uint64_t *slotp = hmt_map_put(&live, e.ptr, NULL);
    uint64_t *sz = hmt_map_put(&sizes, s, NULL);
    if (!slotp || !sz) die("out of memory");
    *slotp = s;
    *sz = e.size;
    cur += e.size;
    if (cur > h->peak_live) h->peak_live = cur;
  }
  if (k < 0) die("%s", hmt_error(r)->message);
  if (nb) write_all(fd, buf, nb * sizeof *buf);
  h->nslots = next;
  if (pwrite(fd, h, sizeof *h, 0) != (ssize_t)sizeof *h) die("writing the operations: %s", strerror(errno));
  const hmt_info_t *info = hmt_info(r);
  if (info->truncated) fprintf(stderr, "hpcmem-replay: note: %s is truncated; replaying what it holds\n", trace);
  if (info->threads > 1)
    fprintf(stderr, "hpcmem-replay: note: %llu threads are replayed on one, in time order\n",
            (unsigned long long)info->threads);
  hmt_map_free(&live); hmt_map_free(&sizes); free(free_slots);
  hmt_close(r);
}

/* ---- allocators ------------------------------------------------------- */

typedef struct {
  char name[64];
  char lib[PATH_MAX];  /* empty: the system allocator */
} alloc_t;

static int find_lib(const char *const *names, char *out, size_t len) {
  static const char *const dirs[] = {"/usr/lib/x86_64-linux-gnu", "/usr/lib/aarch64-linux-gnu", "/usr/lib64",
                                     "/usr/lib", "/usr/local/lib", NULL};
  for (int i = 0; names[i]; i++)
    for (int d = 0; dirs[d]; d++) {
      snprintf(out, len, "%s/%s", dirs[d], names[i]);
      if (access(out, R_OK) == 0) return 0;
    }
  return -1;
}

static int find_hpcmem(const char *argv0, char *out, size_t len) {
  const char *env = getenv("HPCMEM_LIB");
  if (env && access(env, R_OK) == 0) { snprintf(out, len, "%s", env); return 0; }
  /* the build tree: tools/hpcmem-replay next to .libs/libhpcmem.so */
  char exe[PATH_MAX];
  ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
  if (n > 0) {
    exe[n] = 0;
    char *slash = strrchr(exe, '/');
    if (slash) {
      *slash = 0;
      static const char *const rel[] = {"/../.libs/libhpcmem.so", "/../lib/libhpcmem.so"};
      for (int i = 0; i < 2; i++) {
        char cand[PATH_MAX + 32];
        snprintf(cand, sizeof cand, "%s%s", exe, rel[i]);
        if (realpath(cand, out) && access(out, R_OK) == 0) return 0;
      }
    }
  }
  (void)argv0;
  snprintf(out, len, "%s/libhpcmem.so", HPCMEM_LIBDIR);
  return access(out, R_OK) == 0 ? 0 : -1;
}

static int known(const char *name, const char *argv0, alloc_t *a) {
  static const char *const je[] = {"libjemalloc.so.2", "libjemalloc.so", NULL};
  static const char *const tc[] = {"libtcmalloc_minimal.so.4", "libtcmalloc.so.4", "libtcmalloc_minimal.so", NULL};
  static const char *const mi[] = {"libmimalloc.so.2", "libmimalloc.so", NULL};
  snprintf(a->name, sizeof a->name, "%s", name);
  a->lib[0] = 0;
  if (!strcmp(name, "system")) return 0;
  if (!strcmp(name, "jemalloc")) return find_lib(je, a->lib, sizeof a->lib);
  if (!strcmp(name, "tcmalloc")) return find_lib(tc, a->lib, sizeof a->lib);
  if (!strcmp(name, "mimalloc")) return find_lib(mi, a->lib, sizeof a->lib);
  if (!strcmp(name, "libhpcmem")) return find_hpcmem(argv0, a->lib, sizeof a->lib);
  return -1;
}

extern char **environ;

/* Run the replay under one allocator; 0 and the results, or -1. */
static int replay_with(const alloc_t *a, const char *self, const char *ops, int touch, uint64_t *ns, long *rss_kb,
                       uint64_t *failed) {
  int p[2];
  if (pipe(p) != 0) return -1;
  pid_t pid = fork();
  if (pid < 0) return -1;
  if (pid == 0) {
    close(p[0]);
    dup2(p[1], 1);
    /* the replay must not trace itself, whatever the caller's environment */
    unsetenv("HPCMEM_TRACE");
    setenv("HPCMEM_REPORT", "off", 1);  /* libhpcmem: no report at exit */
    if (a->lib[0]) setenv("LD_PRELOAD", a->lib, 1);
    else unsetenv("LD_PRELOAD");
    execl(self, self, "--run-ops", ops, touch ? "--touch" : (char *)NULL, (char *)NULL);
    _exit(127);
  }
  close(p[1]);
  char buf[256] = "";
  ssize_t n = read(p[0], buf, sizeof buf - 1);
  close(p[0]);
  int st;
  waitpid(pid, &st, 0);
  if (n <= 0 || !WIFEXITED(st) || WEXITSTATUS(st) != 0) return -1;
  buf[n] = 0;
  unsigned long long t, f;
  if (sscanf(buf, "%llu %ld %llu", &t, rss_kb, &f) != 3) return -1;
  *ns = t;
  *failed = f;
  return 0;
}

static void usage(FILE *o) {
  fputs("usage: hpcmem-replay [OPTIONS] TRACE-FILE | TRACE-DIR\n"
        "Replays one rank's allocations against several allocators and times them.\n\n"
        "  -r, --rank=R                the rank to replay from a directory (default 0)\n"
        "  -n, --repeat=N              run each allocator N times, report the fastest (default 3)\n"
        "  -A, --allocator=NAME[=LIB]  system, jemalloc, tcmalloc, mimalloc, libhpcmem, or any\n"
        "                              NAME=path/to/lib.so (repeatable; default: all found)\n"
        "  -t, --touch                 write to every page of each allocation (first-touch cost)\n"
        "  -h, --help\n",
        o);
}

int main(int argc, char **argv) {
  if (argc >= 3 && !strcmp(argv[1], "--run-ops")) return run_ops(argv[2], argc > 3 && !strcmp(argv[3], "--touch"));
  static const struct option lo[] = {{"rank", required_argument, 0, 'r'},      {"repeat", required_argument, 0, 'n'},
                                     {"allocator", required_argument, 0, 'A'}, {"touch", no_argument, 0, 't'},
                                     {"help", no_argument, 0, 'h'},            {0, 0, 0, 0}};
  int rank = 0, repeat = 3, touch = 0, c;
  alloc_t *allocs = NULL;
  size_t nalloc = 0;
  char *end;
  while ((c = getopt_long(argc, argv, "r:n:A:th", lo, NULL)) != -1) {
    switch (c) {
      case 'r': rank = (int)strtol(optarg, &end, 10); if (*end || rank < 0) die("--rank: '%s' is not a rank", optarg); break;
      case 'n': repeat = (int)strtol(optarg, &end, 10); if (*end || repeat < 1) die("--repeat: '%s' is not a count", optarg); break;
      case 't': touch = 1; break;
      case 'A': {
        if (!(allocs = realloc(allocs, (nalloc + 1) * sizeof *allocs))) die("out of memory");
        alloc_t *a = &allocs[nalloc];
        const char *eq = strchr(optarg, '=');
        if (eq) {
          snprintf(a->name, sizeof a->name, "%.*s", (int)(eq - optarg), optarg);
          snprintf(a->lib, sizeof a->lib, "%s", eq + 1);
          if (access(a->lib, R_OK) != 0) die("--allocator %s: %s: %s", a->name, a->lib, strerror(errno));
        } else if (known(optarg, argv[0], a) != 0) {
          die("--allocator %s: not found (give NAME=path/to/lib.so)", optarg);
        }
        nalloc++;
        break;
      }
      case 'h': usage(stdout); return 0;
      default: usage(stderr); return 2;
    }
  }
  if (optind != argc - 1) { usage(stderr); return 2; }
  const char *input = argv[optind];
  char trace[PATH_MAX];
  struct stat st;
  if (stat(input, &st) != 0) die("%s: %s", input, strerror(errno));
  if (S_ISDIR(st.st_mode)) snprintf(trace, sizeof trace, "%s/rank-%d.hmt", input, rank);
  else snprintf(trace, sizeof trace, "%s", input);
  if (!nalloc) {
    static const char *const all[] = {"system", "jemalloc", "tcmalloc", "mimalloc", "libhpcmem"};
    allocs = calloc(5, sizeof *allocs);
    for (int i = 0; i < 5; i++)
      if (known(all[i], argv[0], &allocs[nalloc]) == 0) nalloc++;
      else fprintf(stderr, "hpcmem-replay: note: %s not found, skipped\n", all[i]);
  }
  const char *tmp = getenv("TMPDIR");
  char *ops = ops_path;
  snprintf(ops_path, sizeof ops_path, "%s/hpcmem-replay.XXXXXX", tmp && *tmp ? tmp : "/tmp");
  int fd = mkstemp(ops_path);
  if (fd < 0) { char bad[PATH_MAX]; memcpy(bad, ops_path, sizeof bad); ops_path[0] = 0; die("%s: %s", bad, strerror(errno)); }
  ops_header_t h;
  convert(trace, fd, &h);
  close(fd);
  char self[PATH_MAX];
  ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
  if (n <= 0) die("cannot find my own executable");
  self[n] = 0;
  char pk[32];
  double mib = (double)h.peak_live / 1048576.0;
  snprintf(pk, sizeof pk, "%.2f MiB", mib);
  printf("hpcmem-replay: %s: %llu operations (%llu malloc, %llu calloc, %llu realloc, %llu aligned, %llu free), "
         "peak live %s%s\n",
         trace, (unsigned long long)h.nops, (unsigned long long)h.count[OP_MALLOC], (unsigned long long)h.count[OP_CALLOC],
         (unsigned long long)h.count[OP_REALLOC], (unsigned long long)h.count[OP_MEMALIGN],
         (unsigned long long)h.count[OP_FREE], pk, touch ? ", pages touched" : "");
  printf("  %-12s %12s %10s %12s %14s  %s\n", "allocator", "time (ms)", "ns/op", "RSS added", "/ peak live", "library");
  int rc = 0;
  for (size_t i = 0; i < nalloc; i++) {
    uint64_t best = UINT64_MAX, failed = 0;
    long rss = 0;
    int ok = 0;
    for (int k = 0; k < repeat; k++) {
      uint64_t t, f;
      long r;
      if (replay_with(&allocs[i], self, ops, touch, &t, &r, &f) == 0) {
        ok = 1;
        if (t < best) { best = t; rss = r; failed = f; }
      }
    }
    if (!ok) {
      printf("  %-12s %12s  (the replay failed under %s)\n", allocs[i].name, "-", allocs[i].lib[0] ? allocs[i].lib : "the system allocator");
      rc = 1;
      continue;
    }
    char rb[32];
    snprintf(rb, sizeof rb, "%.1f MiB", (double)rss / 1024.0);
    printf("  %-12s %12.3f %10.1f %12s %14.2f  %s%s\n", allocs[i].name, (double)best / 1e6,
           h.nops ? (double)best / (double)h.nops : 0.0, rb, h.peak_live ? (double)rss * 1024.0 / (double)h.peak_live : 0.0,
           allocs[i].lib[0] ? allocs[i].lib : "(glibc)", failed ? " (some allocations failed)" : "");
  }
  unlink(ops);
  free(allocs);
  return rc;
}
