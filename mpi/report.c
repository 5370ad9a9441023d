/* Banner and JSON of the memory report (see report.h, docs/report.md).
 * Output goes through a small buffer on the stack and write(2), so the same
 * code runs at MPI_Finalize, at exit and inside a fatal-signal handler. */
#include "config.h"
#include "report.h"
#include "util/log.h"
#include "util/options.h"
#include "util/job.h"
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define HPCMEM_REPORT_FORMAT_VERSION 1

/* ------------------------------------------------------------------ */
/* buffered writer                                                      */

typedef struct {
  int fd;
  int err;        /* first write error (errno), 0 if none */
  size_t n;
  char buf[4096];
} writer_t;

static void w_flush(writer_t *w) {
  size_t off = 0;
  while (off < w->n && !w->err) {
    ssize_t k = write(w->fd, w->buf + off, w->n - off);
    if (k < 0 && errno == EINTR) continue;
    if (k <= 0) { w->err = k < 0 ? errno : EIO; break; }
    off += (size_t)k;
  }
  w->n = 0;
}

static void w_put(writer_t *w, const char *s, size_t len) {
  while (len > 0) {
    if (w->n == sizeof w->buf) w_flush(w);
    size_t k = sizeof w->buf - w->n;
    if (k > len) k = len;
    memcpy(w->buf + w->n, s, k);
    w->n += k; s += k; len -= k;
  }
}

static void w_str(writer_t *w, const char *s) { w_put(w, s, strlen(s)); }

static void w_printf(writer_t *w, const char *fmt, ...) HPCMEM_PRINTF(2, 3);
static void w_printf(writer_t *w, const char *fmt, ...) {
  char tmp[512];
  va_list ap;
  va_start(ap, fmt);
  size_t n = _hpcmem_vformat(tmp, sizeof tmp, fmt, ap);
  va_end(ap);
  w_put(w, tmp, n);
}

/* a JSON string; job ids and host names are plain, but never trust them */
static void w_jstr(writer_t *w, const char *s) {
  w_put(w, "\"", 1);
  for (; *s; s++) {
    unsigned char c = (unsigned char)*s;
    if (c == '"' || c == '\\') { w_put(w, "\\", 1); w_put(w, s, 1); }
    else if (c < 0x20) w_printf(w, "\\u%04x", c);
    else w_put(w, s, 1);
  }
  w_put(w, "\"", 1);
}

/* JSON has no NaN or infinity */
static void w_num(writer_t *w, double x) {
  if (!isfinite(x)) x = 0.0;
  w_printf(w, "%.15g", x);
}

static void w_u64(writer_t *w, uint64_t x) { w_printf(w, "%llu", (unsigned long long)x); }

/* ------------------------------------------------------------------ */
/* JSON                                                                 */

static const char *kind_name(hpcmem_kind_t k) {
  switch (k) {
    case HPCMEM_KIND_SUM: return "SUM";
    case HPCMEM_KIND_MAX: return "MAX";
    case HPCMEM_KIND_PEAKTIME: return "PEAKTIME";
    case HPCMEM_KIND_TIME: return "TIME";
  }
  return "?";
}

static const char *mode_name(int mode) {
  return mode == HPCMEM_REPORT_FULL ? "full" : mode == HPCMEM_REPORT_OFF ? "off" : "summary";
}

static void w_agg(writer_t *w, const hpcmem_agg_t *a) {
  w_str(w, "{\"min\": "); w_u64(w, a->min);
  w_printf(w, ", \"min_rank\": %lld, \"max\": ", (long long)a->min_rank); w_u64(w, a->max);
  w_printf(w, ", \"max_rank\": %lld, \"mean\": ", (long long)a->max_rank); w_num(w, _hpcmem_agg_mean(a));
  w_str(w, ", \"stddev\": "); w_num(w, _hpcmem_agg_stddev(a));
  w_str(w, ", \"cv\": "); w_num(w, _hpcmem_agg_cv(a));
  w_str(w, ", \"imbalance\": "); w_num(w, _hpcmem_agg_imbalance(a));
  w_str(w, ", \"sum\": "); w_u64(w, a->sum);
  w_str(w, ", \"n\": "); w_u64(w, a->n);
  w_str(w, "}");
}

static void w_bins(writer_t *w, const uint64_t *bins, size_t n) {
  w_str(w, "[");
  for (size_t i = 0; i < n; i++) {
    if (i) w_str(w, (i % 16) ? ", " : ",\n      ");
    w_u64(w, bins[i]);
  }
  w_str(w, "]");
}

size_t _hpcmem_report_heaviest_node(const hpcmem_report_t *r) {
  size_t best = 0;
  for (size_t i = 1; i < r->nnode_recs; i++)
    if (r->nodes[i].peak_sum > r->nodes[best].peak_sum) best = i;
  return best;
}

static void w_job(writer_t *w, const hpcmem_report_t *r) {
  const hpcmem_agg_t *hwm = &r->job[HPCMEM_REC_peak_bytes];
  double imb = _hpcmem_agg_imbalance(hwm);
  w_str(w, "  \"job\": {\n");
  w_str(w, "    \"ranks\": "); w_u64(w, r->nranks);
  w_str(w, ", \"nodes\": "); w_u64(w, r->nnodes);
  w_str(w, ", \"ranks_reported\": "); w_u64(w, r->nrecs);
  w_str(w, ",\n    \"peak_bytes\": "); w_u64(w, r->job_peak_sum);
  w_str(w, ", \"peak_time_ns\": "); w_u64(w, r->job_peak_sum_time);
  w_str(w, ", \"timeline_bin_ns\": "); w_u64(w, r->bin_ns);
  w_str(w, ",\n    \"hwm_sum_bytes\": "); w_u64(w, hwm->sum);
  w_str(w, ",\n    \"hwm\": "); w_agg(w, hwm);
  w_str(w, ",\n    \"imbalance\": "); w_num(w, imb);
  w_printf(w, ", \"imbalance_threshold\": %.2f", r->threshold_pct / 100.0);
  w_printf(w, ", \"imbalanced\": %s", imb * 100.0 > r->threshold_pct ? "true" : "false");
  if (r->nnode_recs) {
    size_t h = _hpcmem_report_heaviest_node(r);
    w_str(w, ",\n    \"heaviest_node\": "); w_u64(w, r->nodes[h].index);
  }
  w_str(w, "\n  },\n");
}

static void w_fields(writer_t *w, const hpcmem_report_t *r) {
  w_str(w, "  \"fields\": {\n");
  for (size_t i = 0; i < HPCMEM_REC_NFIELDS; i++) {
    const hpcmem_field_desc_t *f = &_hpcmem_rec_fields[i];
    w_printf(w, "    \"%s\": {\"kind\": \"%s\", \"help\": ", f->name, kind_name(f->kind));
    w_jstr(w, f->help);
    w_str(w, ",\n      \"ranks\": ");
    w_agg(w, &r->job[i]);
    w_str(w, i + 1 < HPCMEM_REC_NFIELDS ? "},\n" : "}\n");
  }
  w_str(w, "  },\n");
}

static void w_nodes(writer_t *w, const hpcmem_report_t *r) {
  w_str(w, "  \"nodes\": [");
  for (size_t k = 0; k < r->nnode_recs; k++) {
    const hpcmem_node_t *nd = &r->nodes[k];
    w_str(w, k ? ",\n    {" : "\n    {");
    w_str(w, "\"node\": "); w_u64(w, nd->index);
    w_str(w, ", \"host\": "); w_jstr(w, nd->host);
    w_str(w, ", \"nranks\": "); w_u64(w, nd->nranks);
    w_str(w, ", \"ranks\": [");
    size_t listed = 0;
    for (size_t i = 0; i < r->nrecs; i++)
      if (r->recs[i].node == nd->index) { w_str(w, listed++ ? ", " : ""); w_u64(w, r->recs[i].rank); }
    w_str(w, "],\n     \"peak_bytes\": "); w_u64(w, nd->peak_sum);
    w_str(w, ", \"peak_time_ns\": "); w_u64(w, nd->peak_sum_time);
    w_str(w, ", \"hwm_sum_bytes\": "); w_u64(w, nd->agg[HPCMEM_REC_peak_bytes].sum);
    w_str(w, ",\n     \"hwm\": "); w_agg(w, &nd->agg[HPCMEM_REC_peak_bytes]);
    w_str(w, ",\n     \"sum\": {");
    for (size_t i = 0; i < HPCMEM_REC_NFIELDS; i++) {
      w_printf(w, "%s\"%s\": ", i ? ", " : "", _hpcmem_rec_fields[i].name);
      w_u64(w, nd->agg[i].sum);
    }
    w_str(w, "},\n     \"max\": {");
    for (size_t i = 0; i < HPCMEM_REC_NFIELDS; i++) {
      w_printf(w, "%s\"%s\": ", i ? ", " : "", _hpcmem_rec_fields[i].name);
      w_u64(w, nd->agg[i].max);
    }
    w_str(w, "}}");
  }
  w_str(w, r->nnode_recs ? "\n  ],\n" : "],\n");
}

static void w_ranks(writer_t *w, const hpcmem_report_t *r) {
  w_str(w, "  \"ranks\": [");
  for (size_t k = 0; k < r->nrecs; k++) {
    const hpcmem_rec_t *rec = &r->recs[k];
    w_str(w, k ? ",\n    {" : "\n    {");
    w_str(w, "\"rank\": "); w_printf(w, "%lld", (long long)(int64_t)rec->rank);
    w_str(w, ", \"node\": "); w_u64(w, rec->node);
    for (size_t i = 0; i < HPCMEM_REC_NFIELDS; i++) {
      w_printf(w, (i % 4 == 0) ? ",\n     \"%s\": " : ", \"%s\": ", _hpcmem_rec_fields[i].name);
      w_u64(w, rec->v[i]);
    }
    w_str(w, "}");
  }
  w_str(w, r->nrecs ? "\n  ]" : "]");
}

static void w_timeline(writer_t *w, const hpcmem_report_t *r) {
  if (r->job_bins) {
    w_str(w, ",\n  \"timeline\": {\"bin_ns\": "); w_u64(w, r->bin_ns);
    w_str(w, ",\n    \"job\": "); w_bins(w, r->job_bins, r->nbins);
    w_str(w, ",\n    \"nodes\": [");
    for (size_t k = 0; r->node_bins && k < r->nnode_recs; k++) {
      w_str(w, k ? ",\n      " : "\n      ");
      w_bins(w, r->node_bins + k * r->nbins, r->nbins);
    }
    w_str(w, "]\n  }");
  }
  if (r->samples) {
    /* the rank's own timeline, times on the job clock */
    w_str(w, ",\n  \"samples\": [");
    for (size_t i = 0; i < r->nsamples; i++) {
      uint64_t t = r->samples[i].t_ns > r->origin_ns ? r->samples[i].t_ns - r->origin_ns : 0;
      w_str(w, i ? ((i % 8) ? ", [" : ",\n    [") : "[");
      w_u64(w, t); w_str(w, ", "); w_u64(w, r->samples[i].bytes); w_str(w, "]");
    }
    w_str(w, "]");
  }
}

static void w_report(writer_t *w, const hpcmem_report_t *r) {
  w_printf(w, "{\n  \"format\": \"hpcmem-report\", \"format_version\": %d, \"library\": ",
           HPCMEM_REPORT_FORMAT_VERSION);
  w_jstr(w, hpcmem_version());
  w_str(w, ",\n  \"jobid\": "); w_jstr(w, r->jobid);
  w_str(w, ", \"source\": "); w_jstr(w, r->source);
  if (r->signal) w_printf(w, ", \"signal\": %d", r->signal);
  if (r->approximate) w_str(w, ", \"approximate\": true");
  w_printf(w, ", \"complete\": %s, \"mpi\": %s, \"rank\": ", r->complete ? "true" : "false",
           r->mpi ? "true" : "false");
  if (r->rank >= 0) w_printf(w, "%lld", (long long)r->rank); else w_str(w, "null");
  w_printf(w, ", \"report\": \"%s\",\n  \"clock\": {\"unit\": \"ns\", \"alignment\": ", mode_name(r->mode));
  w_jstr(w, r->clock_sync ? r->clock_sync : "none");
  w_str(w, "},\n");
  w_job(w, r);
  w_fields(w, r);
  w_nodes(w, r);
  w_ranks(w, r);
  w_timeline(w, r);
  w_str(w, "\n}\n");
}

/* ------------------------------------------------------------------ */
/* files                                                                */

int _hpcmem_report_path(char *buf, size_t len, const char *dir, const char *jobid, int64_t rank) {
  int n;
  if (!dir || !*dir) dir = ".";
  if (rank >= 0)
    n = snprintf(buf, len, "%s/hpcmem-report-%s.rank%lld.json", dir, jobid, (long long)rank);
  else
    n = snprintf(buf, len, "%s/hpcmem-report-%s.json", dir, jobid);
  return (n < 0 || (size_t)n >= len) ? -ENAMETOOLONG : 0;
}

/* mkdir -p of the directory part of path */
static int make_parent_dirs(const char *path) {
  char dir[4096];
  size_t n = strlen(path);
  if (n >= sizeof dir) return -ENAMETOOLONG;
  memcpy(dir, path, n + 1);
  char *slash = strrchr(dir, '/');
  if (!slash || slash == dir) return 0;
  *slash = 0;
  for (char *p = dir + 1; ; p++) {
    if (*p != '/' && *p != 0) continue;
    char c = *p;
    *p = 0;
    if (mkdir(dir, 0777) != 0 && errno != EEXIST) return -errno;
    *p = c;
    if (!c) break;
  }
  return 0;
}

int _hpcmem_report_write_json(const hpcmem_report_t *r, const char *path) {
  char tmp[4200];
  int saved = errno, rc = 0;
  if (snprintf(tmp, sizeof tmp, "%s.tmp%d", path, (int)getpid()) >= (int)sizeof tmp) return -ENAMETOOLONG;
  int mk = make_parent_dirs(path);
  writer_t w;
  w.fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0666);
  if (w.fd < 0) { rc = mk ? mk : -errno; errno = saved; return rc; }
  w.err = 0; w.n = 0;
  w_report(&w, r);
  w_flush(&w);
  if (close(w.fd) != 0 && !w.err) w.err = errno;
  if (!w.err && rename(tmp, path) != 0) w.err = errno;
  if (w.err) { unlink(tmp); rc = -w.err; }
  errno = saved;
  return rc;
}

/* ------------------------------------------------------------------ */
/* banner                                                               */

static const char *human(char *buf, size_t len, double bytes) {
  static const char *const unit[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB"};
  int u = 0;
  while (bytes >= 1024.0 && u < 5) { bytes /= 1024.0; u++; }
  if (u == 0) snprintf(buf, len, "%.0f B", bytes);
  else snprintf(buf, len, "%.1f %s", bytes, unit[u]);
  return buf;
}

static void line(int fd, const char *fmt, ...) HPCMEM_PRINTF(2, 3);
static void line(int fd, const char *fmt, ...) {
  char buf[1024];
  size_t n = 0;
  const char *pfx = "libhpcmem: ";
  n = strlen(pfx);
  memcpy(buf, pfx, n);
  va_list ap;
  va_start(ap, fmt);
  n += _hpcmem_vformat(buf + n, sizeof buf - n - 1, fmt, ap);
  va_end(ap);
  buf[n++] = '\n';
  _hpcmem_write_all(fd, buf, n);
}

static void banner_full_table(const hpcmem_report_t *r, int fd) {
  line(fd, "%-18s %20s %20s %20s %22s", "field", "min (rank)", "mean", "max (rank)", "sum");
  for (size_t i = 0; i < HPCMEM_REC_NFIELDS; i++) {
    const hpcmem_agg_t *a = &r->job[i];
    char mn[48], mx[48];
    snprintf(mn, sizeof mn, "%llu (%lld)", (unsigned long long)a->min, (long long)a->min_rank);
    snprintf(mx, sizeof mx, "%llu (%lld)", (unsigned long long)a->max, (long long)a->max_rank);
    line(fd, "%-18s %20s %20.1f %20s %22llu", _hpcmem_rec_fields[i].name, mn,
         _hpcmem_agg_mean(a), mx, (unsigned long long)a->sum);
  }
}

static void approximate_note(int fd) {
  line(fd, "figures approximate: the signal came while a lock of the allocator's statistics was held "
       "(by this thread, perhaps); they were read without it");
}

static void banner_single(const hpcmem_report_t *r, const char *json_path, int fd) {
  char a[32], b[32], c[32];
  const hpcmem_rec_t *rec = &r->recs[0];
  const uint64_t *v = rec->v;
  if (r->rank < 0) {
    line(fd, "process %d: heap high-water mark %s at %.3f s, %s live at exit; %llu allocations, "
         "%llu frees; VmHWM %s", (int)getpid(), human(a, sizeof a, (double)v[HPCMEM_REC_peak_bytes]),
         v[HPCMEM_REC_peak_time_ns] / 1e9, human(b, sizeof b, (double)v[HPCMEM_REC_current_bytes]),
         (unsigned long long)v[HPCMEM_REC_alloc_count], (unsigned long long)v[HPCMEM_REC_free_count],
         human(c, sizeof c, (double)v[HPCMEM_REC_vm_hwm_bytes]));
    if (r->approximate) approximate_note(fd);
    if (json_path) line(fd, "report: %s", json_path);
  } else {
    /* every rank writes its file; one line from the first rank is enough */
    if (r->rank != 0) return;
    char dir[HPCMEM_OPT_STR_MAX + 8];
    const char *d = _hpcmem_opt_str(REPORT_DIR);
    snprintf(dir, sizeof dir, "%s", *d ? d : ".");
    char why[48];
    if (r->signal) snprintf(why, sizeof why, "signal %d", r->signal);
    else snprintf(why, sizeof why, "%s", r->source);
    line(fd, "rank 0: %s (%s); heap high-water mark %s; per-rank summaries: "
         "%s/hpcmem-report-%s.rank*.json",
         r->mpi ? "MPI_Finalize was not reached" : "no MPI job report (MPI_Init not reached)", why,
         human(a, sizeof a, (double)v[HPCMEM_REC_peak_bytes]), dir, r->jobid);
    if (r->approximate) approximate_note(fd);
  }
  if (r->mode == HPCMEM_REPORT_FULL) banner_full_table(r, fd);
}

void _hpcmem_report_banner(const hpcmem_report_t *r, const char *json_path, int fd) {
  /* a lone process and a rank without the job report get the short form */
  if (!r->complete || (r->rank < 0 && !r->mpi)) { banner_single(r, json_path, fd); return; }
  char a[32], b[32], c[32], d[32];
  const hpcmem_agg_t *hwm = &r->job[HPCMEM_REC_peak_bytes];
  double imb = _hpcmem_agg_imbalance(hwm);
  line(fd, "job %s: %llu rank%s on %llu node%s; heap high-water mark of the job %s at %.3f s "
       "(sum of the ranks' high-water marks %s)", r->jobid, (unsigned long long)r->nranks,
       r->nranks == 1 ? "" : "s", (unsigned long long)r->nnodes, r->nnodes == 1 ? "" : "s",
       human(a, sizeof a, (double)r->job_peak_sum), r->job_peak_sum_time / 1e9,
       human(b, sizeof b, (double)hwm->sum));
  line(fd, "per-rank high-water mark: min %s (rank %lld), mean %s, max %s (rank %lld), "
       "stddev %s, cv %.2f", human(a, sizeof a, (double)hwm->min), (long long)hwm->min_rank,
       human(b, sizeof b, _hpcmem_agg_mean(hwm)), human(c, sizeof c, (double)hwm->max),
       (long long)hwm->max_rank, human(d, sizeof d, _hpcmem_agg_stddev(hwm)), _hpcmem_agg_cv(hwm));
  if (imb * 100.0 > r->threshold_pct)
    line(fd, "IMBALANCE: (max-mean)/max = %.1f%% exceeds %d%% (HPCMEM_IMBALANCE_THRESHOLD); "
         "rank %lld holds %s", imb * 100.0, r->threshold_pct, (long long)hwm->max_rank,
         human(a, sizeof a, (double)hwm->max));
  else
    line(fd, "imbalance (max-mean)/max = %.1f%% (threshold %d%%)", imb * 100.0, r->threshold_pct);
  if (r->nnode_recs) {
    const hpcmem_node_t *nd = &r->nodes[_hpcmem_report_heaviest_node(r)];
    line(fd, "heaviest node %s: %s at its peak, %llu rank%s (sum of their high-water marks %s)",
         nd->host, human(a, sizeof a, (double)nd->peak_sum), (unsigned long long)nd->nranks,
         nd->nranks == 1 ? "" : "s", human(b, sizeof b, (double)nd->agg[HPCMEM_REC_peak_bytes].sum));
  }
  const hpcmem_agg_t *ipk = &r->job[HPCMEM_REC_interleaved_peak_bytes], *spk = &r->job[HPCMEM_REC_shared_peak_bytes];
  if (ipk->max || spk->max)
    line(fd, "segments, largest high-water mark of a rank: private %s (rank %lld), interleaved %s (rank %lld), "
         "shared %s (rank %lld)", human(a, sizeof a, (double)r->job[HPCMEM_REC_private_peak_bytes].max),
         (long long)r->job[HPCMEM_REC_private_peak_bytes].max_rank, human(b, sizeof b, (double)ipk->max),
         (long long)ipk->max_rank, human(c, sizeof c, (double)spk->max), (long long)spk->max_rank);
  if (r->mode == HPCMEM_REPORT_FULL) banner_full_table(r, fd);
  if (json_path) line(fd, "report: %s", json_path);
}

int _hpcmem_report_emit(const hpcmem_report_t *r, int banner) {
  char path[4096];
  const char *dir = _hpcmem_opt_str(REPORT_DIR);
  int rc = _hpcmem_report_path(path, sizeof path, dir, r->jobid, r->complete ? -1 : r->rank);
  if (rc == 0) rc = _hpcmem_report_write_json(r, path);
  if (rc != 0)
    _hpcmem_warn("memory report not written: cannot create %s: %s (set HPCMEM_REPORT_DIR to a "
                 "writable directory)", path, strerror(-rc));
  if (banner) _hpcmem_report_banner(r, rc == 0 ? path : NULL, 2);
  return rc;
}
