/* hpcmem-report: reads the trace files of one run (all ranks) and reports
 * the high-water mark per rank with its time, memory over time per rank
 * and for the job (the peak of the sum), the memory each function holds at
 * the peak, allocation sizes, leaks and the imbalance across ranks; as
 * text, JSON and SVG plots.  See docs/hpcmem-report.md.
 *
 * All ranks are read in one pass, merged in time (each rank's clock offset
 * applied), so the job's peak is the exact peak of the sum.  Per stack, the
 * bytes at a peak are kept lazily (rpt_stack_t), so one pass is enough. */
#include "config.h"
#include "report.h"
#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <fnmatch.h>
#include <getopt.h>
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static void die(const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  fputs("hpcmem-report: ", stderr);
  vfprintf(stderr, fmt, ap);
  fputc('\n', stderr);
  va_end(ap);
  exit(2);
}

static void *xrealloc(void *p, size_t n) {
  void *q = realloc(p, n ? n : 1);
  if (!q) die("out of memory");
  return q;
}

/* ---- small helpers shared with the output files -------------------- */

const char *rpt_bytes(double b, char *buf, size_t len) {
  static const char *u[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB"};
  int i = 0;
  double a = fabs(b);
  while (a >= 1024 && i < 5) { a /= 1024; b /= 1024; i++; }
  if (i == 0) snprintf(buf, len, "%.0f B", b);
  else snprintf(buf, len, "%.2f %s", b, u[i]);
  return buf;
}

double rpt_seconds(const rpt_t *R, uint64_t t) { return t >= R->t0 ? (double)(t - R->t0) / 1e9 : -(double)(R->t0 - t) / 1e9; }

/* A process that is no MPI rank: rank -1 in the header (the format's "no
 * rank"), or the recorder's rank 0 of a process that neither MPI_Init
 * numbered nor a launcher started (its job is then named after its pid,
 * "pid<N>", src/util/job.c).  A plain program, or each of the processes a
 * script starts into one HPCMEM_TRACE_DIR. */
int rpt_is_rank(const rpt_proc_t *P) {
  if (P->h.rank < 0) return 0;
  if (P->h.rank > 0 || (P->h.flags & HMT_HF_RANK_FROM_MPI)) return 1;
  const char *j = P->h.jobid;
  if (strncmp(j, "pid", 3) != 0 || !j[3]) return 1;
  for (j += 3; *j; j++)
    if (!isdigit((unsigned char)*j)) return 1;
  return 0;
}

/* The rank --rank and --heaptrack take: a process without one is 0, as the
 * name of its file (rank-0.hmt). */
int rpt_rank_number(const rpt_proc_t *P) { return P->h.rank < 0 ? 0 : P->h.rank; }

/* Another process that the label alone would not tell from P. */
static int label_shared(const rpt_t *R, const rpt_proc_t *P) {
  int rank = rpt_is_rank(P);
  for (size_t i = 0; i < R->np; i++) {
    const rpt_proc_t *Q = &R->p[i];
    if (Q != P && rpt_is_rank(Q) == rank && (!rank || Q->h.rank == P->h.rank)) return 1;
  }
  return 0;
}

const char *rpt_proc_label(const rpt_t *R, const rpt_proc_t *P, char *buf, size_t len) {
  int dup = label_shared(R, P);
  if (!rpt_is_rank(P)) snprintf(buf, len, dup ? "- (pid %u)" : "-", P->h.pid);
  else if (dup) snprintf(buf, len, "%d (pid %u)", P->h.rank, P->h.pid);
  else snprintf(buf, len, "%d", P->h.rank);
  return buf;
}

const char *rpt_proc_name(const rpt_t *R, const rpt_proc_t *P, char *buf, size_t len) {
  char lab[48];
  if (!rpt_is_rank(P)) snprintf(buf, len, "process %u", P->h.pid);
  else snprintf(buf, len, "rank %s", rpt_proc_label(R, P, lab, sizeof lab));
  return buf;
}

/* ---- timelines --------------------------------------------------------- */

static void tl_init(rpt_timeline_t *tl, uint64_t t0, uint64_t width) {
  memset(tl, 0, sizeof *tl);
  tl->t0 = t0;
  tl->width = width ? width : 1000;
}

static void tl_add(rpt_timeline_t *tl, uint64_t t, int64_t v) {
  if (t < tl->t0) t = tl->t0;
  uint64_t b = (t - tl->t0) / tl->width;
  while (b >= RPT_TL_BUCKETS) {
    /* merge neighbours, double the width */
    for (int i = 0; i < RPT_TL_BUCKETS / 2; i++) {
      int a = 2 * i, c = 2 * i + 1;
      int64_t mx = tl->seen[a] ? tl->max[a] : INT64_MIN, last = tl->last[a];
      if (tl->seen[c]) { if (tl->max[c] > mx) mx = tl->max[c]; last = tl->last[c]; }
      tl->seen[i] = tl->seen[a] | tl->seen[c];
      tl->max[i] = mx; tl->last[i] = last;
    }
    memset(tl->seen + RPT_TL_BUCKETS / 2, 0, RPT_TL_BUCKETS / 2);
    tl->width *= 2;
    b = (t - tl->t0) / tl->width;
  }
  if (!tl->seen[b] || v > tl->max[b]) tl->max[b] = v;
  tl->seen[b] = 1;
  tl->last[b] = v;
  if ((int)b + 1 > tl->n) tl->n = (int)b + 1;
}

/* ---- per-process state ------------------------------------------------- */

static rpt_t *G;  /* for the epoch of the job in the helpers below */

static uint32_t stack_index(rpt_proc_t *P, uint64_t id) {
  if (id == 0) return 0;
  int added;
  uint64_t *v = hmt_map_put(&P->st_idx, id, &added);
  if (!v) die("out of memory");
  if (!added) return (uint32_t)*v;
  if (P->nst == P->capst) {
    P->capst = P->capst ? P->capst * 2 : 256;
    P->st = xrealloc(P->st, P->capst * sizeof *P->st);
  }
  memset(&P->st[P->nst], 0, sizeof *P->st);
  P->st[P->nst].id = id;
  P->st[P->nst].attr = -1;
  *v = P->nst;
  return (uint32_t)P->nst++;
}

static void touch(rpt_proc_t *P, rpt_stack_t *s) {
  if (s->ep != P->epoch) { s->at_peak = s->cur; s->cnt_at_peak = s->cnt; s->ep = P->epoch; }
  if (s->jep != G->epoch) { s->at_jpeak = s->cur; s->cnt_at_jpeak = s->cnt; s->jep = G->epoch; }
}

static void change(rpt_proc_t *P, uint32_t si, int sys, int64_t bytes, int64_t count) {
  rpt_stack_t *s = &P->st[si];
  touch(P, s);
  s->cur += bytes; s->cnt += count;
  if (sys) { touch(P, &P->sys); P->sys.cur += bytes; P->sys.cnt += count; }
  if (P->jep != G->epoch) { P->at_jpeak = P->cur; P->jep = G->epoch; }
  P->cur += bytes;
  G->cur += bytes;
}

static void add_live(rpt_proc_t *P, uint64_t ptr, uint64_t size, uint64_t stack, int sys) {
  int added;
  uint64_t *v = hmt_map_put(&P->live, ptr, &added);
  if (!v) die("out of memory");
  if (!added) {
    /* allocated again without a free in between: the free was not seen */
    rpt_live_t *o = &P->lv[*v];
    change(P, o->stack, o->sys, -(int64_t)o->size, -1);
    P->n_reused++;
  } else {
    if (P->nfree) *v = P->lv_free[--P->nfree];
    else {
      if (P->nlv == P->caplv) {
        P->caplv = P->caplv ? P->caplv * 2 : 1024;
        P->lv = xrealloc(P->lv, P->caplv * sizeof *P->lv);
      }
      *v = P->nlv++;
    }
  }
  uint32_t si = stack_index(P, stack);
  P->lv[*v] = (rpt_live_t){size, si, (uint8_t)sys};
  P->st[si].allocs++;
  P->st[si].bytes += size;
  P->bytes_allocated += size;
  int bin = size == 0 ? 0 : 64 - __builtin_clzll(size);
  P->hist_count[bin]++;
  P->hist_bytes[bin] += size;
  change(P, si, sys, (int64_t)size, 1);
}

static int remove_live(rpt_proc_t *P, uint64_t ptr) {
  uint64_t idx;
  if (!hmt_map_del(&P->live, ptr, &idx)) return 0;
  rpt_live_t *o = &P->lv[idx];
  change(P, o->stack, o->sys, -(int64_t)o->size, -1);
  if (P->nfree == P->capfree) {
    P->capfree = P->capfree ? P->capfree * 2 : 1024;
    P->lv_free = xrealloc(P->lv_free, P->capfree * sizeof *P->lv_free);
  }
  P->lv_free[P->nfree++] = (uint32_t)idx;
  return 1;
}

static void apply(rpt_t *R, rpt_proc_t *P, const hmt_event_t *e, uint64_t t) {
  P->n_events++;
  if (e->type < 6) P->n_kind[e->type]++;
  if (e->sys) P->n_sys++;
  switch (e->type) {
    case HPCMEM_EV_MALLOC:
    case HPCMEM_EV_CALLOC:
    case HPCMEM_EV_MEMALIGN:
      if (e->ptr) add_live(P, e->ptr, e->size, e->stack, e->sys);
      break;
    case HPCMEM_EV_REALLOC:
      if (e->old_ptr && !remove_live(P, e->old_ptr)) P->n_unknown_realloc++;
      if (e->ptr) add_live(P, e->ptr, e->size, e->stack, e->sys);
      break;
    case HPCMEM_EV_FREE:
      if (e->ptr && !remove_live(P, e->ptr)) P->n_unmatched_free++;
      break;
  }
  if (P->cur > P->peak) { P->peak = P->cur; P->peak_t = t; P->epoch++; }
  if (R->cur > R->peak) { R->peak = R->cur; R->peak_t = t; R->epoch++; }
  if (!P->t_first) P->t_first = t;
  P->t_last = t;
  tl_add(&P->tl, t, P->cur);
  tl_add(&R->tl, t, R->cur);
}

int64_t rpt_at_peak(const rpt_proc_t *P, const rpt_stack_t *s, int64_t *count) {
  int fresh = s->ep == P->epoch;
  if (count) *count = fresh ? s->cnt_at_peak : s->cnt;
  return fresh ? s->at_peak : s->cur;
}

int64_t rpt_at_jpeak(const rpt_t *R, const rpt_stack_t *s, int64_t *count) {
  int fresh = s->jep == R->epoch;
  if (count) *count = fresh ? s->cnt_at_jpeak : s->cnt;
  return fresh ? s->at_jpeak : s->cur;
}

int64_t rpt_proc_at_jpeak(const rpt_t *R, const rpt_proc_t *P) { return P->jep == R->epoch ? P->at_jpeak : P->cur; }

/* ---- reading ------------------------------------------------------------ */

static int is_trace_name(const char *n) {
  size_t l = strlen(n);
  return l > 4 && strcmp(n + l - 4, ".hmt") == 0;
}

/* File names in natural order: rank-2.hmt before rank-10.hmt (digit runs
 * compare as numbers). */
static int cmp_natural(const void *pa, const void *pb) {
  const char *a = *(char *const *)pa, *b = *(char *const *)pb;
  while (*a && *b) {
    if (isdigit((unsigned char)*a) && isdigit((unsigned char)*b)) {
      while (*a == '0') a++;
      while (*b == '0') b++;
      size_t la = 0, lb = 0;
      while (isdigit((unsigned char)a[la])) la++;
      while (isdigit((unsigned char)b[lb])) lb++;
      if (la != lb) return la < lb ? -1 : 1;
      int c = strncmp(a, b, la);
      if (c) return c;
      a += la;
      b += lb;
    } else {
      if (*a != *b) return (unsigned char)*a < (unsigned char)*b ? -1 : 1;
      a++;
      b++;
    }
  }
  return *a ? 1 : *b ? -1 : 0;
}

static char **list_inputs(const char *input, size_t *n) {
  struct stat st;
  if (stat(input, &st) != 0) die("%s: %s", input, strerror(errno));
  char **v = NULL;
  *n = 0;
  if (!S_ISDIR(st.st_mode)) {
    v = xrealloc(NULL, sizeof *v);
    v[0] = strdup(input);
    *n = 1;
    return v;
  }
  DIR *d = opendir(input);
  if (!d) die("%s: %s", input, strerror(errno));
  struct dirent *e;
  while ((e = readdir(d))) {
    if (!is_trace_name(e->d_name)) continue;
    v = xrealloc(v, (*n + 1) * sizeof *v);
    size_t l = strlen(input) + strlen(e->d_name) + 2;
    v[*n] = xrealloc(NULL, l);
    snprintf(v[*n], l, "%s/%s", input, e->d_name);
    (*n)++;
  }
  closedir(d);
  if (*n == 0) die("%s: no trace files (*.hmt) in this directory", input);
  qsort(v, *n, sizeof *v, cmp_natural);
  return v;
}

static void proc_error(rpt_t *R, rpt_proc_t *P, const char *msg) {
  P->failed = 1;
  P->has = 0;
  snprintf(P->error, sizeof P->error, "%s", msg);
  fprintf(stderr, "hpcmem-report: error: %s\n", msg);
  R->errors++;
}

static void advance(rpt_t *R, rpt_proc_t *P) {
  int k = hmt_next(P->r, &P->ev);
  if (k < 0) proc_error(R, P, hmt_error(P->r)->message);
  P->has = k == 1;
}

static uint64_t gtime(const rpt_proc_t *P) { return P->ev.time + (uint64_t)P->off; }

/* heap of processes by the global time of their next event; at the same
 * time (a tick: ranks leaving a barrier tie with the last one arriving)
 * allocations before frees, as the reader merges threads: a rank's last
 * allocations before a barrier count against the job's peak together with
 * what the others still hold, and the peak errs upwards by at most the
 * bytes freed within that tick (docs/trace-format.md, "Time") */
static int earlier(rpt_t *R, size_t a, size_t b) {
  uint64_t x = gtime(&R->p[a]), y = gtime(&R->p[b]);
  if (x != y) return x < y;
  int fx = hmt_event_frees(&R->p[a].ev), fy = hmt_event_frees(&R->p[b].ev);
  return fx != fy ? fy : a < b;
}

static void sift(rpt_t *R, size_t *heap, size_t n, size_t i) {
  for (;;) {
    size_t l = 2 * i + 1, m = i;
    if (l < n && earlier(R, heap[l], heap[m])) m = l;
    if (l + 1 < n && earlier(R, heap[l + 1], heap[m])) m = l + 1;
    if (m == i) return;
    size_t t = heap[i]; heap[i] = heap[m]; heap[m] = t;
    i = m;
  }
}

static void progress(uint64_t done, uint64_t total, int final) {
  int w = 40, k = total ? (int)((double)done / total * w) : w;
  char a[32], b[32];
  fprintf(stderr, "\rreading traces [%.*s%*s] %3d%% %s / %s", k, "########################################", w - k, "",
          total ? (int)(100.0 * done / total) : 100, rpt_bytes((double)done, a, sizeof a), rpt_bytes((double)total, b, sizeof b));
  if (final) fputc('\n', stderr);
  fflush(stderr);
}

static void read_all(rpt_t *R) {
  size_t n;
  char **files = list_inputs(R->input, &n);
  R->p = calloc(n, sizeof *R->p);
  if (!R->p) die("out of memory");
  uint64_t total = 0, records = 0, t_end_est = 0;
  R->t0 = UINT64_MAX;
  for (size_t i = 0; i < n; i++) {
    rpt_proc_t *P = &R->p[R->np];
    hmt_error_t err;
    if (hmt_open(files[i], R->o.salvage ? HMT_OPEN_SALVAGE : 0, &P->r, &err) != 0) {
      fprintf(stderr, "hpcmem-report: error: %s\n", err.message);
      R->errors++;
      free(files[i]);
      if (R->o.strict) exit(1);
      continue;
    }
    P->path = files[i];
    P->h = *hmt_header(P->r);
    P->info = *hmt_info(P->r);
    P->off = P->h.clock_offset_ns;
    P->epoch = 1;
    P->sys.attr = -1;
    P->capst = 256;  /* index 0: allocations without a stack */
    P->st = xrealloc(NULL, P->capst * sizeof *P->st);
    memset(&P->st[0], 0, sizeof *P->st);
    P->st[0].attr = -1;
    P->nst = 1;
    total += P->info.stored_bytes + P->info.event_blocks * HMT_BLOCK_HEADER_SIZE;
    records += P->info.records;
    uint64_t start = P->h.start_ns + (uint64_t)P->off;
    if (start < R->t0) R->t0 = start;
    if (P->info.t_last + (uint64_t)P->off > t_end_est) t_end_est = P->info.t_last + (uint64_t)P->off;
    R->np++;
  }
  free(files);
  if (R->np == 0) die("%s: no readable trace file", R->input);
  uint64_t width = t_end_est > R->t0 ? (t_end_est - R->t0) / (RPT_TL_BUCKETS / 2) + 1 : 1000;
  tl_init(&R->tl, R->t0, width);
  R->epoch = 1;
  size_t *heap = xrealloc(NULL, R->np * sizeof *heap), hn = 0;
  for (size_t i = 0; i < R->np; i++) {
    tl_init(&R->p[i].tl, R->t0, width);
    advance(R, &R->p[i]);
    if (R->p[i].has) heap[hn++] = i;
  }
  for (size_t i = hn; i-- > 0;) sift(R, heap, hn, i);
  /* large: what takes about a second to read.  By events, not bytes: at
   * 0.06 bytes an event (format 1.4) 64 MiB are a billion events, a minute */
  int show = R->o.progress == 1 || (R->o.progress == -1 && isatty(2) && (total > (64u << 20) || records > (1u << 21)));
  uint64_t count = 0;
  while (hn) {
    rpt_proc_t *P = &R->p[heap[0]];
    apply(R, P, &P->ev, gtime(P));
    advance(R, P);
    if (R->o.strict && P->failed) exit(1);
    if (!P->has) heap[0] = heap[--hn];
    sift(R, heap, hn, 0);
    if (show && (++count & 0xffff) == 0) {
      uint64_t done = 0;
      for (size_t i = 0; i < R->np; i++) done += hmt_progress(R->p[i].r);
      progress(done, total, 0);
    }
  }
  if (show) progress(total, total, 1);
  free(heap);
  for (size_t i = 0; i < R->np; i++) {
    rpt_proc_t *P = &R->p[i];
    P->info = *hmt_info(P->r);  /* salvage counts are final now */
    for (int b = 0; b < RPT_HIST_BINS; b++) {
      R->hist_count[b] += P->hist_count[b];
      R->hist_bytes[b] += P->hist_bytes[b];
    }
  }
}

/* ---- stacks, symbols, attribution ---------------------------------------- */

int rpt_stack_frames(rpt_proc_t *P, const rpt_stack_t *s, const uint64_t **f, uint32_t *d) {
  if (s->id == 0) return -1;
  return hmt_stack(P->r, s->id, f, d);
}

const hmt_sym_t *rpt_frame(rpt_t *R, rpt_proc_t *P, uint64_t addr) { return hmt_sym_lookup(R->sym, P->r, addr); }

int rpt_lstack(rpt_t *R, rpt_proc_t *P, const rpt_stack_t *s, const rpt_lframe_t **lf, uint32_t *n) {
  const uint64_t *f;
  uint32_t d, m = 0;
  if (rpt_stack_frames(P, s, &f, &d) != 0) return -1;
  for (uint32_t j = 0; j < d; j++) {
    const hmt_sym_t *sym = rpt_frame(R, P, f[j]);
    if (m + (uint32_t)sym->ninl + 1 > R->lfcap) {
      R->lfcap = 2 * (m + (size_t)sym->ninl + 1) + 64;
      R->lf = xrealloc(R->lf, R->lfcap * sizeof *R->lf);
    }
    for (int k = 0; k < sym->ninl; k++) R->lf[m++] = (rpt_lframe_t){&sym->inl[k], f[j]};
    R->lf[m++] = (rpt_lframe_t){sym, f[j]};
  }
  *lf = R->lf;
  *n = m;
  return 0;
}

static const char *base_name(const char *p) {
  const char *b = strrchr(p, '/');
  return b ? b + 1 : p;
}

const char *rpt_function(const hmt_sym_t *s, char *buf, size_t len) {
  if (s->known) return s->function;
  snprintf(buf, len, "%s+%s", base_name(s->module), s->function);
  return buf;
}

/* Where the qualified name starts in a demangled name: after the return
 * type that templates carry ("void std::vector<int>::_M_realloc_insert<..>(..)"). */
static const char *qualified_name(const char *f) {
  const char *start = f;
  int depth = 0;
  for (const char *p = f; *p; p++) {
    if (*p == '<') depth++;
    else if (*p == '>') depth--;
    else if (*p == '(' && depth == 0) break;
    else if (*p == ' ' && depth == 0 && strncmp(start, "operator", 8) != 0) start = p + 1;
  }
  return start;
}

/* Frames of the allocator and the language runtimes: never the answer to
 * "who allocated this".  By module (the C and C++ runtimes, the loader,
 * libhpcmem) and by name (for static links and the C++ library's
 * allocation plumbing, which is inlined into the application). */
static int runtime_frame(const hmt_sym_t *s) {
  static const char *const mods[] = {"libc.so", "libc-", "libstdc++", "libgcc_s", "ld-linux", "libhpcmem", NULL};
  static const char *const prefixes[] = {"std::", "__gnu_cxx::", "operator new", "operator delete", "_hpcmem_",
                                         "hpcmem_", "__libc_", "__GI_", "_IO_", "__cxa_", NULL};
  static const char *const names[] = {"malloc", "calloc", "realloc", "free", "posix_memalign", "aligned_alloc",
                                      "memalign", "valloc", "pvalloc", "reallocarray", "strdup", "strndup", NULL};
  const char *m = base_name(s->module);
  for (int i = 0; mods[i]; i++)
    if (strncmp(m, mods[i], strlen(mods[i])) == 0) return 1;
  if (!s->known) return 0;
  const char *q = qualified_name(s->function);
  for (int i = 0; prefixes[i]; i++)
    if (strncmp(q, prefixes[i], strlen(prefixes[i])) == 0) return 1;
  for (int i = 0; names[i]; i++)
    if (strcmp(s->function, names[i]) == 0) return 1;
  return 0;
}

static uint64_t str_hash_early(const char *s) {
  uint64_t h = 0xcbf29ce484222325ULL;
  for (; *s; s++) { h ^= (uint8_t)*s; h *= 0x100000001b3ULL; }
  return h;
}

static int user_wrapper(const rpt_t *R, const hmt_sym_t *s) {
  for (int i = 0; i < R->o.nwrappers; i++)
    if (fnmatch(R->o.wrappers[i], s->function, 0) == 0) return 1;
  return 0;
}

/* A call site that is the same in every rank despite ASLR: module and
 * offset in it. */
static uint64_t site_key(rpt_proc_t *P, uint64_t addr) {
  const hmt_module_t *m = hmt_module_of(P->r, addr);
  uint64_t k = (str_hash_early(m ? m->path : "") ^ ((addr - (m ? m->bias : 0)) * 0x9e3779b97f4a7c15ULL));
  return k == HMT_MAP_EMPTY ? 0 : k;
}

/* A string-keyed table of small counters for wrapper detection. */
typedef struct {
  char *name;
  hmt_map_t sites, callers;  /* distinct call sites in it, distinct callers of it */
} wstat_t;

static uint64_t str_hash(const char *s) {
  uint64_t h = 0xcbf29ce484222325ULL;
  for (; *s; s++) { h ^= (uint8_t)*s; h *= 0x100000001b3ULL; }
  return h == HMT_MAP_EMPTY ? 0 : h;
}

/* index of name in a string table (hash -> index, probing on collision) */
static size_t str_index(hmt_map_t *m, char ***names, size_t *n, const char *name, int *added) {
  uint64_t k = str_hash(name);
  for (;; k++) {
    if (k == HMT_MAP_EMPTY) k = 0;
    uint64_t *v = hmt_map_get(m, k);
    if (!v) break;
    if (strcmp((*names)[*v], name) == 0) { if (added) *added = 0; return (size_t)*v; }
  }
  uint64_t *v = hmt_map_put(m, k, NULL);
  if (!v) die("out of memory");
  *names = xrealloc(*names, (*n + 1) * sizeof **names);
  (*names)[*n] = strdup(name);
  if (added) *added = 1;
  return (size_t)(*v = (*n)++);
}

/* Give back a str_index table and its names. */
static void str_index_free(hmt_map_t *m, char **names, size_t n) {
  for (size_t j = 0; j < n; j++) free(names[j]);
  free(names);
  hmt_map_free(m);
}

/* Which stacks matter enough to symbolise: anything at a peak, anything
 * leaked, and (for --collapse-wrappers) everything allocated. */
static int interesting(const rpt_t *R, const rpt_proc_t *P, const rpt_stack_t *s) {
  return rpt_at_peak(P, s, NULL) != 0 || rpt_at_jpeak(R, s, NULL) != 0 || s->cur != 0 || (R->o.collapse && s->allocs);
}

static void attribute(rpt_t *R) {
  /* the innermost frame that is not the allocator or a runtime */
  for (size_t i = 0; i < R->np; i++) {
    rpt_proc_t *P = &R->p[i];
    for (size_t k = 1; k < P->nst; k++) {
      rpt_stack_t *s = &P->st[k];
      const rpt_lframe_t *lf;
      uint32_t d;
      if (!interesting(R, P, s) || rpt_lstack(R, P, s, &lf, &d) != 0 || d == 0) continue;
      s->attr = 0;
      for (uint32_t j = 0; j < d; j++)
        if (!runtime_frame(lf[j].sym) && !user_wrapper(R, lf[j].sym)) { s->attr = (int)j; break; }
    }
  }
  if (!R->o.collapse) return;
  /* WMTrace's drill-down: a function that calls the allocator from one
   * place only and is called from several functions is a wrapper (the
   * paper's local_alloc); its allocations belong to its callers.  Repeat
   * for wrappers of wrappers. */
  for (int round = 0; round < 8; round++) {
    hmt_map_t idx = {0};
    char **names = NULL;
    size_t nn = 0;
    wstat_t *ws = NULL;
    for (size_t i = 0; i < R->np; i++) {
      rpt_proc_t *P = &R->p[i];
      for (size_t k = 1; k < P->nst; k++) {
        rpt_stack_t *s = &P->st[k];
        const rpt_lframe_t *lf;
        uint32_t d;
        if (s->attr < 0 || rpt_lstack(R, P, s, &lf, &d) != 0 || (uint32_t)s->attr >= d) continue;
        char fb[600], cb[600];
        int added;
        size_t w = str_index(&idx, &names, &nn, rpt_function(lf[s->attr].sym, fb, sizeof fb), &added);
        if (added) { ws = xrealloc(ws, nn * sizeof *ws); memset(&ws[w], 0, sizeof *ws); }
        hmt_map_put(&ws[w].sites, site_key(P, lf[s->attr].addr), NULL);
        uint64_t caller = (uint32_t)s->attr + 1 < d ? str_hash(rpt_function(lf[s->attr + 1].sym, cb, sizeof cb)) : 1;
        hmt_map_put(&ws[w].callers, caller, NULL);
      }
    }
    int changed = 0;
    for (size_t i = 0; i < R->np; i++) {
      rpt_proc_t *P = &R->p[i];
      for (size_t k = 1; k < P->nst; k++) {
        rpt_stack_t *s = &P->st[k];
        const rpt_lframe_t *lf;
        uint32_t d;
        if (s->attr < 0 || rpt_lstack(R, P, s, &lf, &d) != 0 || (uint32_t)s->attr + 1 >= d) continue;
        char fb[600];
        size_t w = str_index(&idx, &names, &nn, rpt_function(lf[s->attr].sym, fb, sizeof fb), NULL);
        if (ws[w].sites.count == 1 && ws[w].callers.count >= 2) { s->attr++; changed = 1; }
      }
    }
    for (size_t w = 0; w < nn; w++) { hmt_map_free(&ws[w].sites); hmt_map_free(&ws[w].callers); }
    free(ws);
    str_index_free(&idx, names, nn);
    if (!changed) break;
  }
}

static int64_t value(rpt_t *R, rpt_proc_t *P, rpt_stack_t *s, int which, int64_t *count) {
  switch (which) {
    case 0: return rpt_at_peak(P, s, count);
    case 1: return rpt_at_jpeak(R, s, count);
    default: if (count) *count = s->cnt; return s->cur;
  }
}

static int cmp_agg(const void *a, const void *b) {
  const rpt_agg_t *x = a, *y = b;
  if (x->bytes != y->bytes) return x->bytes < y->bytes ? 1 : -1;
  return strcmp(x->name, y->name);
}

rpt_agg_t *rpt_aggregate(rpt_t *R, rpt_proc_t *only, int by_library, int which, size_t *n) {
  hmt_map_t idx = {0};
  char **names = NULL;
  size_t nn = 0;
  rpt_agg_t *a = NULL;
  for (size_t i = 0; i < R->np; i++) {
    rpt_proc_t *P = &R->p[i];
    if (only && P != only) continue;
    for (size_t k = 0; k < P->nst; k++) {
      rpt_stack_t *s = &P->st[k];
      int64_t cnt, v = value(R, P, s, which, &cnt);
      if (v == 0 && cnt == 0) continue;
      const char *name = "(no stack)", *file = NULL, *module = "";
      char fb[600];
      const rpt_lframe_t *lf;
      uint32_t d;
      if (k > 0 && s->attr >= 0 && rpt_lstack(R, P, s, &lf, &d) == 0 && (uint32_t)s->attr < d) {
        const hmt_sym_t *sym = lf[s->attr].sym;
        name = by_library ? base_name(sym->module) : rpt_function(sym, fb, sizeof fb);
        file = sym->decl_file ? sym->decl_file : sym->file;
        module = sym->module;
      } else if (k > 0) {
        name = "(stack not in the trace)";
      }
      int added;
      size_t j = str_index(&idx, &names, &nn, name, &added);
      if (added) {
        a = xrealloc(a, nn * sizeof *a);
        a[j] = (rpt_agg_t){strdup(name), file && !by_library ? strdup(file) : NULL, strdup(module), 0, 0};
      }
      a[j].bytes += v;
      a[j].count += cnt;
    }
  }
  str_index_free(&idx, names, nn);
  if (nn) qsort(a, nn, sizeof *a, cmp_agg);
  *n = nn;
  return a;
}

void rpt_agg_free(rpt_agg_t *a, size_t n) {
  for (size_t i = 0; i < n; i++) { free(a[i].name); free(a[i].file); free(a[i].module); }
  free(a);
}

static rpt_t *sort_R;
static rpt_proc_t *sort_P;
static int sort_which;
static int cmp_stack(const void *a, const void *b) {
  size_t x = *(const size_t *)a, y = *(const size_t *)b;
  int64_t vx = value(sort_R, sort_P, &sort_P->st[x], sort_which, NULL);
  int64_t vy = value(sort_R, sort_P, &sort_P->st[y], sort_which, NULL);
  if (vx != vy) return vx < vy ? 1 : -1;
  return x < y ? -1 : x > y;
}

size_t *rpt_top_stacks(rpt_t *R, rpt_proc_t *P, int which, size_t *n) {
  size_t *v = xrealloc(NULL, P->nst * sizeof *v), m = 0;
  for (size_t k = 0; k < P->nst; k++)
    if (value(R, P, &P->st[k], which, NULL) > 0) v[m++] = k;
  sort_R = R; sort_P = P; sort_which = which;
  qsort(v, m, sizeof *v, cmp_stack);
  *n = m;
  return v;
}

static int cmp_group(const void *a, const void *b) {
  const rpt_group_t *x = a, *y = b;
  if (x->bytes != y->bytes) return x->bytes < y->bytes ? 1 : -1;
  return strcmp(x->key, y->key);
}

rpt_group_t *rpt_stack_groups(rpt_t *R, rpt_proc_t *only, int which, size_t *n) {
  hmt_map_t idx = {0};
  char **names = NULL;
  size_t nn = 0;
  rpt_group_t *g = NULL;
  size_t cap = 4096;
  char *key = xrealloc(NULL, cap);
  for (size_t i = 0; i < R->np; i++) {
    rpt_proc_t *P = &R->p[i];
    if (only && P != only) continue;
    for (size_t k = 0; k < P->nst; k++) {
      rpt_stack_t *s = &P->st[k];
      int64_t cnt, v = value(R, P, s, which, &cnt);
      if (v <= 0) continue;
      const rpt_lframe_t *lf;
      uint32_t d;
      size_t len = 0;
      key[0] = 0;
      if (k > 0 && rpt_lstack(R, P, s, &lf, &d) == 0) {
        for (uint32_t j = s->attr >= 0 ? (uint32_t)s->attr : 0; j < d; j++) {
          const hmt_sym_t *sym = lf[j].sym;
          size_t need = strlen(sym->function) + (sym->file ? strlen(sym->file) : 0) + 32;
          if (len + need >= cap) { cap = 2 * (len + need); key = xrealloc(key, cap); }
          len += (size_t)snprintf(key + len, cap - len, "%s\t%s\t%d\n", sym->function, sym->file ? sym->file : "", sym->line);
        }
      } else {
        snprintf(key, cap, "%s", k ? "(stack not in the trace)" : "(no stack)");
      }
      int added;
      size_t j = str_index(&idx, &names, &nn, key, &added);
      if (added) {
        g = xrealloc(g, nn * sizeof *g);
        g[j] = (rpt_group_t){strdup(key), P, k, 0, 0, 0, NULL};
      }
      g[j].bytes += v;
      g[j].count += cnt;
      if (g[j].last_proc != P) { g[j].procs++; g[j].last_proc = P; }
    }
  }
  free(key);
  str_index_free(&idx, names, nn);
  if (nn) qsort(g, nn, sizeof *g, cmp_group);
  *n = nn;
  return g;
}

void rpt_groups_free(rpt_group_t *g, size_t n) {
  for (size_t i = 0; i < n; i++) free(g[i].key);
  free(g);
}

void rpt_hwm_stats(const rpt_t *R, double *min, double *max, double *mean, double *sd, size_t *imin, size_t *imax) {
  double s = 0, s2 = 0;
  *imin = *imax = 0;
  for (size_t i = 0; i < R->np; i++) {
    double v = (double)R->p[i].peak;
    s += v;
    if (v < (double)R->p[*imin].peak) *imin = i;
    if (v > (double)R->p[*imax].peak) *imax = i;
  }
  *mean = s / (double)R->np;
  for (size_t i = 0; i < R->np; i++) {
    double d = (double)R->p[i].peak - *mean;
    s2 += d * d;
  }
  *sd = sqrt(s2 / (double)R->np);
  *min = (double)R->p[*imin].peak;
  *max = (double)R->p[*imax].peak;
}

static const rpt_t *rank_R;
static int cmp_hwm(const void *a, const void *b) {
  const rpt_proc_t *x = &rank_R->p[*(const size_t *)a], *y = &rank_R->p[*(const size_t *)b];
  if (x->peak != y->peak) return x->peak < y->peak ? 1 : -1;
  return x->h.rank - y->h.rank;
}

size_t *rpt_ranks_by_hwm(const rpt_t *R) {
  size_t *v = xrealloc(NULL, R->np * sizeof *v);
  for (size_t i = 0; i < R->np; i++) v[i] = i;
  rank_R = R;
  qsort(v, R->np, sizeof *v, cmp_hwm);
  return v;
}

/* ---- main ------------------------------------------------------------------ */

static void usage(FILE *out) {
  fputs("usage: hpcmem-report [OPTIONS] TRACE-DIR | TRACE-FILE\n"
        "Reads the traces of one run (HPCMEM_TRACE=1) and reports memory per rank and for the job.\n\n"
        "  -n, --top=N              show the N largest functions / stacks (default 10)\n"
        "  -j, --json[=FILE]        JSON instead of text (on stdout, or into FILE next to the text)\n"
        "  -s, --svg=DIR            write plots into DIR: memory over time, HWM per rank, top stacks\n"
        "                           (and PNG copies when rsvg-convert is installed)\n"
        "  -r, --rank=R             also break down rank R (repeatable; default: max and min HWM ranks)\n"
        "  -a, --all-ranks          break down every rank\n"
        "  -c, --collapse-wrappers  attribute memory past allocation wrappers, as WMTrace does\n"
        "  -w, --wrapper=GLOB       treat functions matching GLOB as wrappers (repeatable)\n"
        "      --symbols=METHOD     libdw (default when built with it), addr2line, none\n"
        "      --heaptrack=R        export rank R's trace for heaptrack_gui / heaptrack_print\n"
        "  -o, --output=FILE        file of the --heaptrack export (default heaptrack.hpcmem.R.gz)\n"
        "      --salvage            skip damaged blocks instead of stopping at them\n"
        "      --strict             stop at the first damaged file\n"
        "      --progress / --no-progress   progress bar on stderr (default: when large and a terminal)\n"
        "  -h, --help\n",
        out);
}

int main(int argc, char **argv) {
  static rpt_t R;
  G = &R;
  R.o.top = 10;
  R.o.text = 1;
  R.o.heaptrack_rank = -1;
  R.o.progress = -1;
  R.o.sym_method = HMT_SYM_AUTO;
  enum { O_SYMBOLS = 256, O_HEAPTRACK, O_SALVAGE, O_STRICT, O_PROGRESS, O_NOPROGRESS };
  static const struct option lo[] = {
      {"top", required_argument, 0, 'n'},      {"json", optional_argument, 0, 'j'},
      {"svg", required_argument, 0, 's'},      {"rank", required_argument, 0, 'r'},
      {"all-ranks", no_argument, 0, 'a'},      {"collapse-wrappers", no_argument, 0, 'c'},
      {"wrapper", required_argument, 0, 'w'},  {"symbols", required_argument, 0, O_SYMBOLS},
      {"heaptrack", required_argument, 0, O_HEAPTRACK}, {"output", required_argument, 0, 'o'},
      {"salvage", no_argument, 0, O_SALVAGE},  {"strict", no_argument, 0, O_STRICT},
      {"progress", no_argument, 0, O_PROGRESS}, {"no-progress", no_argument, 0, O_NOPROGRESS},
      {"help", no_argument, 0, 'h'},           {0, 0, 0, 0}};
  int c;
  char *end;
  while ((c = getopt_long(argc, argv, "n:j::s:r:acw:o:h", lo, NULL)) != -1) {
    switch (c) {
      case 'n':
        R.o.top = (int)strtol(optarg, &end, 10);
        if (*end || R.o.top < 1) die("--top: '%s' is not a positive number", optarg);
        break;
      case 'j':
        R.o.json = 1;
        if (optarg) R.o.json_path = optarg;
        else R.o.text = 0;
        break;
      case 's': R.o.svg_dir = optarg; break;
      case 'r': {
        long v = strtol(optarg, &end, 10);
        if (*end || v < 0 || v > INT_MAX) die("--rank: '%s' is not a rank", optarg);
        R.o.ranks = xrealloc(R.o.ranks, (size_t)(R.o.nranks + 1) * sizeof *R.o.ranks);
        R.o.ranks[R.o.nranks++] = (int)v;
        break;
      }
      case 'a': R.o.all_ranks = 1; break;
      case 'c': R.o.collapse = 1; break;
      case 'w':
        R.o.wrappers = xrealloc(R.o.wrappers, (size_t)(R.o.nwrappers + 1) * sizeof *R.o.wrappers);
        R.o.wrappers[R.o.nwrappers++] = optarg;
        break;
      case O_SYMBOLS:
        if (!strcmp(optarg, "libdw")) R.o.sym_method = HMT_SYM_LIBDW;
        else if (!strcmp(optarg, "addr2line")) R.o.sym_method = HMT_SYM_ADDR2LINE;
        else if (!strcmp(optarg, "none")) R.o.sym_method = HMT_SYM_NONE;
        else die("--symbols: '%s' is not libdw, addr2line or none", optarg);
        break;
      case O_HEAPTRACK: {
        long v = strtol(optarg, &end, 10);
        if (*end || v < 0 || v > INT_MAX) die("--heaptrack: '%s' is not a rank", optarg);
        R.o.heaptrack_rank = (int)v;
        break;
      }
      case 'o': R.o.heaptrack_out = optarg; break;
      case O_SALVAGE: R.o.salvage = 1; break;
      case O_STRICT: R.o.strict = 1; break;
      case O_PROGRESS: R.o.progress = 1; break;
      case O_NOPROGRESS: R.o.progress = 0; break;
      case 'h': usage(stdout); return 0;
      default: usage(stderr); return 2;
    }
  }
  if (optind != argc - 1) {
    if (optind == argc) fprintf(stderr, "hpcmem-report: no trace directory or file given\n");
    else fprintf(stderr, "hpcmem-report: one trace directory or file, not %d ('%s', '%s'%s)\n", argc - optind,
                 argv[optind], argv[optind + 1], argc - optind > 2 ? ", ..." : "");
    usage(stderr);
    return 2;
  }
  if (R.o.heaptrack_out && R.o.heaptrack_rank < 0) die("-o/--output names the file of --heaptrack=RANK, which is not given");
  R.input = argv[optind];
  if (!(R.sym = hmt_sym_new(R.o.sym_method))) die("out of memory");
  read_all(&R);
  for (int k = 0; k < R.o.nranks; k++) {
    size_t i = 0;
    while (i < R.np && rpt_rank_number(&R.p[i]) != R.o.ranks[k]) i++;
    if (i == R.np) die("--rank: no trace of rank %d in %s", R.o.ranks[k], R.input);
  }
  attribute(&R);
  int rc = 0;
  if (R.o.heaptrack_rank >= 0) {
    rpt_proc_t *P = NULL;
    for (size_t i = 0; i < R.np && !P; i++)
      if (rpt_rank_number(&R.p[i]) == R.o.heaptrack_rank) P = &R.p[i];
    if (!P) die("--heaptrack: no trace of rank %d in %s", R.o.heaptrack_rank, R.input);
    char def[64];
    snprintf(def, sizeof def, "heaptrack.hpcmem.%d.gz", R.o.heaptrack_rank);
    if (rpt_write_heaptrack(&R, P, R.o.heaptrack_out ? R.o.heaptrack_out : def) != 0) rc = 1;
  }
  if (R.o.svg_dir && rpt_write_svgs(&R, R.o.svg_dir) != 0) rc = 1;
  if (R.o.json) {
    FILE *f = R.o.json_path ? fopen(R.o.json_path, "w") : stdout;
    if (!f) die("%s: %s", R.o.json_path, strerror(errno));
    if (rpt_write_json(&R, f) != 0 || (R.o.json_path && fclose(f) != 0)) die("%s: write error", R.o.json_path ? R.o.json_path : "stdout");
  }
  if (R.o.text) rpt_print_text(&R, stdout);
  for (size_t i = 0; i < hmt_sym_warnings(R.sym); i++) fprintf(stderr, "hpcmem-report: warning: %s\n", hmt_sym_warning(R.sym, i));
  if (fflush(stdout) != 0) rc = 1;
  return R.errors ? 1 : rc;
}
