/* hpcmem-report --heaptrack: one rank's trace in the data format that
 * heaptrack_interpret writes and heaptrack_print / heaptrack_gui read
 * (file format version 2: line-based, hexadecimal numbers, gzip-compressed
 * when the name ends in .gz):
 *   v <heaptrack version> <file version>   X <command>   I <page size> <pages>
 *   s <string>                     strings, numbered from 1
 *   i <ip> <module> [<function> <file> <line>]   instruction pointers, from 1
 *   t <ip index> <parent trace>    trace tree nodes, from 1 (0 = root)
 *   a <size> <trace>               allocation infos, from 0
 *   + <info>  - <info>             allocation, deallocation
 *   c <ms>                         time stamp
 * Stacks become paths in the trace tree from the outermost frame inwards. */
#include "config.h"
#include "report.h"
#include <errno.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#ifdef HAVE_ZLIB
#include <zlib.h>
#endif

typedef struct {
  FILE *f;
#ifdef HAVE_ZLIB
  gzFile gz;
#endif
  int err;
  hmt_map_t strings;  /* hash -> string index (collisions probed) */
  char **strs;
  size_t nstr;
  hmt_map_t ips;      /* run-time address -> ip index */
  size_t nips;
  hmt_map_t nodes;    /* (ip index, parent) -> trace index */
  size_t nnodes;
  hmt_map_t infos;    /* (size, trace) -> info index + 1 */
  size_t ninfos;
  hmt_map_t live;     /* address -> info index */
  hmt_map_t stack_trace;  /* stack id -> trace index */
} ht_t;

static void out(ht_t *h, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void out(ht_t *h, const char *fmt, ...) {
  char buf[8192];
  va_list ap;
  va_start(ap, fmt);
  int n = vsnprintf(buf, sizeof buf, fmt, ap);
  va_end(ap);
  if (n < 0) { h->err = 1; return; }
  if ((size_t)n >= sizeof buf) n = sizeof buf - 1;
#ifdef HAVE_ZLIB
  if (h->gz) { if (gzwrite(h->gz, buf, (unsigned)n) != n) h->err = 1; return; }
#endif
  if (fwrite(buf, 1, (size_t)n, h->f) != (size_t)n) h->err = 1;
}

static uint64_t mix(uint64_t a, uint64_t b) {
  uint64_t k = (a * 0x9e3779b97f4a7c15ULL) ^ (b + 0x7f4a7c159e3779b9ULL + (a << 6) + (a >> 2));
  return k == HMT_MAP_EMPTY ? 0 : k;
}

static size_t string_index(ht_t *h, const char *s) {
  if (!s || !*s) return 0;
  uint64_t k = 0xcbf29ce484222325ULL;
  for (const char *p = s; *p; p++) { k ^= (uint8_t)*p; k *= 0x100000001b3ULL; }
  for (;; k++) {
    if (k == HMT_MAP_EMPTY) k = 0;
    uint64_t *v = hmt_map_get(&h->strings, k);
    if (!v) break;
    if (strcmp(h->strs[*v - 1], s) == 0) return (size_t)*v;
  }
  char **n = realloc(h->strs, (h->nstr + 1) * sizeof *n);
  if (!n) { h->err = 1; return 0; }
  h->strs = n;
  h->strs[h->nstr] = strdup(s);
  uint64_t *v = hmt_map_put(&h->strings, k, NULL);
  if (!v || !h->strs[h->nstr]) { h->err = 1; return 0; }
  *v = ++h->nstr;
  /* one line per string: newlines would break the format */
  char line[4096];
  snprintf(line, sizeof line, "%s", s);
  for (char *c = line; *c; c++) if (*c == '\n' || *c == '\r') *c = ' ';
  out(h, "s %s\n", line);
  return h->nstr;
}

static size_t ip_index(ht_t *h, rpt_t *R, rpt_proc_t *P, uint64_t addr) {
  uint64_t key = addr == HMT_MAP_EMPTY ? 0 : addr;
  uint64_t *v = hmt_map_get(&h->ips, key);
  if (v) return (size_t)*v;
  const hmt_sym_t *s = rpt_frame(R, P, addr);
  size_t mod = string_index(h, s->module);
  if (s->known) {
    size_t fn = string_index(h, s->function), file = string_index(h, s->file);
    out(h, "i %llx %zx %zx %zx %x\n", (unsigned long long)addr, mod, fn, file, s->line > 0 ? s->line : 0);
  } else {
    out(h, "i %llx %zx\n", (unsigned long long)addr, mod);
  }
  v = hmt_map_put(&h->ips, key, NULL);
  if (!v) { h->err = 1; return 0; }
  return (size_t)(*v = ++h->nips);
}

static size_t trace_index(ht_t *h, rpt_t *R, rpt_proc_t *P, uint64_t stack) {
  if (!stack) return 0;
  uint64_t *v = hmt_map_get(&h->stack_trace, stack);
  if (v) return (size_t)*v;
  const uint64_t *f;
  uint32_t d;
  size_t parent = 0;
  if (hmt_stack(P->r, stack, &f, &d) == 0)
    for (uint32_t i = d; i-- > 0;) {
      size_t ip = ip_index(h, R, P, f[i]);
      uint64_t key = mix(ip, parent);
      uint64_t *n = hmt_map_get(&h->nodes, key);
      if (n) { parent = (size_t)*n; continue; }
      out(h, "t %zx %zx\n", ip, parent);
      if (!(n = hmt_map_put(&h->nodes, key, NULL))) { h->err = 1; return 0; }
      parent = (size_t)(*n = ++h->nnodes);
    }
  if (!(v = hmt_map_put(&h->stack_trace, stack, NULL))) { h->err = 1; return 0; }
  return (size_t)(*v = parent);
}

static size_t info_index(ht_t *h, uint64_t size, size_t trace) {
  uint64_t key = mix(size, trace);
  uint64_t *v = hmt_map_get(&h->infos, key);
  if (v) return (size_t)*v - 1;
  out(h, "a %llx %zx\n", (unsigned long long)size, trace);
  if (!(v = hmt_map_put(&h->infos, key, NULL))) { h->err = 1; return 0; }
  *v = ++h->ninfos;
  return h->ninfos - 1;
}

int rpt_write_heaptrack(rpt_t *R, rpt_proc_t *P, const char *path) {
  ht_t h;
  memset(&h, 0, sizeof h);
  size_t len = strlen(path);
  int gz = len > 3 && strcmp(path + len - 3, ".gz") == 0;
#ifdef HAVE_ZLIB
  if (gz && !(h.gz = gzopen(path, "wb6"))) {
    fprintf(stderr, "hpcmem-report: %s: %s\n", path, strerror(errno));
    return -1;
  }
#else
  if (gz) {
    fprintf(stderr, "hpcmem-report: %s: this build has no zlib; use a name without .gz\n", path);
    return -1;
  }
#endif
  if (!gz && !(h.f = fopen(path, "w"))) {
    fprintf(stderr, "hpcmem-report: %s: %s\n", path, strerror(errno));
    return -1;
  }
  out(&h, "v 10400 2\n");
  char name[64];
  out(&h, "X %s (%s of job %s, exported by hpcmem-report)\n", P->path, rpt_proc_name(R, P, name, sizeof name), P->h.jobid);
  long pages = sysconf(_SC_PHYS_PAGES);
  out(&h, "I %x %lx\n", P->h.page_size ? P->h.page_size : 4096, pages > 0 ? pages : 0);
  hmt_rewind(P->r);
  hmt_event_t e;
  int k;
  uint64_t t0 = P->h.start_ns, last_ms = 0;
  while ((k = hmt_next(P->r, &e)) == 1 && !h.err) {
    uint64_t ms = e.time > t0 ? (e.time - t0) / 1000000 : 0;
    if (ms != last_ms) { out(&h, "c %llx\n", (unsigned long long)ms); last_ms = ms; }
    uint64_t idx;
    if ((e.type == HPCMEM_EV_FREE && e.ptr) || (e.type == HPCMEM_EV_REALLOC && e.old_ptr)) {
      if (hmt_map_del(&h.live, e.type == HPCMEM_EV_FREE ? e.ptr : e.old_ptr, &idx)) out(&h, "- %llx\n", (unsigned long long)idx);
    }
    if (e.type != HPCMEM_EV_FREE && e.ptr) {
      size_t info = info_index(&h, e.size, trace_index(&h, R, P, e.stack));
      int added;
      uint64_t *v = hmt_map_put(&h.live, e.ptr, &added);
      if (!v) { h.err = 1; break; }
      /* allocated again without a free in between: the free was not seen,
       * and the old block ends here, as in the report */
      if (!added) out(&h, "- %llx\n", (unsigned long long)*v);
      out(&h, "+ %zx\n", info);
      *v = info;
    }
  }
  if (k < 0) fprintf(stderr, "hpcmem-report: %s\n", hmt_error(P->r)->message);
  out(&h, "c %llx\n", (unsigned long long)(last_ms + 1));
  int rc = h.err || k < 0 ? -1 : 0;
#ifdef HAVE_ZLIB
  if (h.gz && gzclose(h.gz) != Z_OK) rc = -1;
#endif
  if (h.f && fclose(h.f) != 0) rc = -1;
  if (rc) fprintf(stderr, "hpcmem-report: %s: could not write the heaptrack file\n", path);
  for (size_t i = 0; i < h.nstr; i++) free(h.strs[i]);
  free(h.strs);
  hmt_map_free(&h.strings); hmt_map_free(&h.ips); hmt_map_free(&h.nodes);
  hmt_map_free(&h.infos); hmt_map_free(&h.live); hmt_map_free(&h.stack_trace);
  return rc;
}
