/* hpcmem-report: the text and JSON reports. */
#include "config.h"
#include "report.h"
#include <ctype.h>
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define IMBALANCE_FLAG 0.20  /* (max - mean) / max above this is called imbalanced */

static const char *base_name(const char *p) {
  const char *b = strrchr(p, '/');
  return b ? b + 1 : p;
}

/* ---- tables ----------------------------------------------------------------
 * A table is printed once all its cells are known, each column as wide as
 * its longest cell: a long rank label, host or value widens its column
 * instead of pushing its own row out of line.  The layout string gives, per
 * column, the spaces before it, 'l' or 'r' (aligned left or right) and the
 * least width (the usual one, so that tables look alike from run to run);
 * the last column is not padded.  A note is a line of its own in the table. */
#define TBL_COLS 8

typedef struct {
  char *cell[TBL_COLS];  /* cell[0] alone: a note */
  int note;
} tbl_row_t;

typedef struct {
  int ncol, gap[TBL_COLS];
  char align[TBL_COLS];
  size_t least[TBL_COLS];
  tbl_row_t *row;
  size_t nrow, cap;
} tbl_t;

static void tbl_init(tbl_t *t, const char *layout) {
  memset(t, 0, sizeof *t);
  for (const char *c = layout; *c && t->ncol < TBL_COLS; c++) {
    if (*c == ' ') { t->gap[t->ncol]++; continue; }
    t->align[t->ncol] = *c;
    while (c[1] >= '0' && c[1] <= '9') t->least[t->ncol] = 10 * t->least[t->ncol] + (size_t)(*++c - '0');
    t->ncol++;
  }
}

static void *tbl_check(void *p) {
  if (!p) { fputs("hpcmem-report: out of memory\n", stderr); exit(2); }
  return p;
}

static tbl_row_t *tbl_new_row(tbl_t *t) {
  if (t->nrow == t->cap) {
    t->cap = t->cap ? 2 * t->cap : 32;
    t->row = tbl_check(realloc(t->row, t->cap * sizeof *t->row));
  }
  tbl_row_t *r = &t->row[t->nrow++];
  memset(r, 0, sizeof *r);
  return r;
}

/* One row: the table's ncol cells, as printf formats would give them. */
static void tbl_add(tbl_t *t, ...) {
  tbl_row_t *r = tbl_new_row(t);
  va_list ap;
  va_start(ap, t);
  for (int c = 0; c < t->ncol; c++) {
    const char *v = va_arg(ap, const char *);
    r->cell[c] = tbl_check(strdup(v ? v : ""));
  }
  va_end(ap);
}

static void tbl_note(tbl_t *t, const char *line) {
  tbl_row_t *r = tbl_new_row(t);
  r->cell[0] = tbl_check(strdup(line));
  r->note = 1;
}

/* Columns on a terminal: UTF-8 continuation bytes take none. */
static size_t text_width(const char *s) {
  size_t n = 0;
  for (; *s; s++) n += ((unsigned char)*s & 0xc0) != 0x80;
  return n;
}

static void tbl_print(FILE *out, tbl_t *t) {
  size_t w[TBL_COLS];
  memcpy(w, t->least, sizeof w);
  for (size_t i = 0; i < t->nrow; i++)
    for (int c = 0; c < t->ncol && !t->row[i].note; c++) {
      size_t n = text_width(t->row[i].cell[c]);
      if (n > w[c]) w[c] = n;
    }
  for (size_t i = 0; i < t->nrow; i++) {
    tbl_row_t *r = &t->row[i];
    if (r->note) {
      fprintf(out, "%s\n", r->cell[0]);
    } else {
      int last = t->ncol - 1;
      while (last > 0 && !*r->cell[last] && t->align[last] == 'l') last--;   /* no trailing blanks */
      for (int c = 0; c <= last; c++) {
        int pad = (int)(w[c] - text_width(r->cell[c]));
        if (c == last && t->align[c] == 'l') pad = 0;
        fprintf(out, "%*s%*s%s%*s", t->gap[c], "", t->align[c] == 'r' ? pad : 0, "", r->cell[c],
                t->align[c] == 'l' ? pad : 0, "");
      }
      fputc('\n', out);
    }
    for (int c = 0; c < TBL_COLS; c++) free(r->cell[c]);
  }
  free(t->row);
  t->row = NULL;
  t->nrow = t->cap = 0;
}

/* events the last FLUSH block counts that the file does not hold (the
 * recorder writes every event it counts before the marker) */
static uint64_t missing_events(const rpt_proc_t *P) {
  return P->info.flush.present && P->info.flush.events > P->n_events ? P->info.flush.events - P->n_events : 0;
}

/* a trace that ends at exit (or _exit), MPI_Finalize or an exec (the
 * program was replaced: what it held is gone as at exit) */
static int complete(const rpt_proc_t *P) {
  uint64_t why = P->info.flush.reason;
  return P->info.flush.present && !P->info.truncated && !P->failed &&
         (why == HMT_FLUSH_EXIT || why == HMT_FLUSH_FINALIZE || why == HMT_FLUSH_EXEC);
}

static int all_complete(const rpt_t *R) {
  for (size_t i = 0; i < R->np; i++)
    if (!complete(&R->p[i])) return 0;
  return 1;
}

/* The ranks whose breakdown is shown: max and min HWM, and those asked for. */
static int shown(const rpt_t *R, size_t i, size_t imin, size_t imax) {
  if (R->o.all_ranks || i == imin || i == imax) return 1;
  for (int k = 0; k < R->o.nranks; k++)
    if (rpt_rank_number(&R->p[i]) == R->o.ranks[k]) return 1;
  return 0;
}

static void frame_text(const hmt_sym_t *s, char *buf, size_t len) {
  if (s->file && s->line) snprintf(buf, len, "%s (%s:%d)", s->function, base_name(s->file), s->line);
  else if (s->known) snprintf(buf, len, "%s (%s)", s->function, base_name(s->module));
  else snprintf(buf, len, "%s+%s", base_name(s->module), s->function);
}

static uint64_t hosts(const rpt_t *R) {
  uint64_t n = 0;
  for (size_t i = 0; i < R->np; i++) {
    int seen = 0;
    for (size_t j = 0; j < i && !seen; j++) seen = strcmp(R->p[i].h.hostname, R->p[j].h.hostname) == 0;
    n += !seen;
  }
  return n;
}

/* Over all ranks: the sum of their high-water marks, and what they still
 * held at the end (bytes, blocks). */
static void job_totals(const rpt_t *R, int64_t *sum_peaks, int64_t *live, int64_t *live_n) {
  *sum_peaks = *live = *live_n = 0;
  for (size_t i = 0; i < R->np; i++) {
    *sum_peaks += R->p[i].peak;
    *live += R->p[i].cur;
    *live_n += (int64_t)R->p[i].live.count;
  }
}

/* When a peak (or the job's) was reached, in seconds; 0 before any memory. */
static double peak_seconds(const rpt_t *R, int64_t peak, uint64_t t) {
  return peak > 0 ? rpt_seconds(R, t) : 0.0;
}

/* One breakdown (rpt_aggregate: by function or library, of one rank or of
 * all, at a peak or live at the end) as a table of at most --top rows. */
static void print_breakdown(FILE *out, rpt_t *R, rpt_proc_t *only, int by_library, int which, int64_t total,
                            const char *what) {
  size_t n;
  rpt_agg_t *a = rpt_aggregate(R, only, by_library, which, &n);
  char b[32], pct[16], cnt[24];
  tbl_t t;
  tbl_init(&t, "  r12 r6 r10  l");
  tbl_add(&t, "bytes", "%", "allocs", what);
  for (size_t i = 0; i < n && (int)i < R->o.top; i++) {
    if (a[i].bytes <= 0) break;
    char name[600];
    if (a[i].file) snprintf(name, sizeof name, "%s (%s)", a[i].name, base_name(a[i].file));
    else snprintf(name, sizeof name, "%s", a[i].name);
    snprintf(pct, sizeof pct, "%.1f%%", total ? 100.0 * (double)a[i].bytes / (double)total : 0.0);
    snprintf(cnt, sizeof cnt, "%lld", (long long)a[i].count);
    tbl_add(&t, rpt_bytes((double)a[i].bytes, b, sizeof b), pct, cnt, name);
  }
  tbl_print(out, &t);
  rpt_agg_free(a, n);
}

static void print_stacks(FILE *out, rpt_t *R, rpt_proc_t *only, int which, int64_t total) {
  size_t n;
  rpt_group_t *g = rpt_stack_groups(R, only, which, &n);
  char b[32], fr[700];
  for (size_t i = 0; i < n && (int)i < R->o.top; i++) {
    rpt_proc_t *P = g[i].P;
    rpt_stack_t *s = &P->st[g[i].idx];
    fprintf(out, "  #%zu %s (%.1f%%) in %lld allocation%s", i + 1, rpt_bytes((double)g[i].bytes, b, sizeof b),
            total ? 100.0 * (double)g[i].bytes / (double)total : 0.0, (long long)g[i].count, g[i].count == 1 ? "" : "s");
    if (!only && R->np > 1) fprintf(out, " on %d rank%s", g[i].procs, g[i].procs == 1 ? "" : "s");
    fputc('\n', out);
    const rpt_lframe_t *lf;
    uint32_t d;
    if (rpt_lstack(R, P, s, &lf, &d) != 0) {
      fprintf(out, "       %s\n", s->id ? "(stack not in the trace)" : "(no stack recorded)");
      continue;
    }
    int start = s->attr >= 0 ? s->attr : 0, shown = 0;
    for (uint32_t j = (uint32_t)start; j < d && shown < 12; j++, shown++) {
      frame_text(lf[j].sym, fr, sizeof fr);
      fprintf(out, "       %s%s\n", fr, lf[j].sym->inlined ? " [inlined]" : "");
    }
    if (d - (uint32_t)start > 12) fprintf(out, "       ... %u more frames\n", d - (uint32_t)start - 12);
  }
  rpt_groups_free(g, n);
}

static void print_hist(FILE *out, const uint64_t *cnt, const uint64_t *bytes) {
  uint64_t tc = 0, tb = 0, mc = 0;
  for (int b = 0; b < RPT_HIST_BINS; b++) { tc += cnt[b]; tb += bytes[b]; if (cnt[b] > mc) mc = cnt[b]; }
  char lo[32], hi[32], bb[32], cn[24], pc[16], pb[16];
  tbl_t t;
  tbl_init(&t, "  l25 r12 r6 r12 r6  l");
  tbl_add(&t, "size", "allocs", "%", "bytes", "%", "");
  for (int b = 0; b < RPT_HIST_BINS; b++) {
    if (!cnt[b]) continue;
    char range[80];
    if (b == 0) snprintf(range, sizeof range, "0");
    else {
      uint64_t l = 1ull << (b - 1);
      rpt_bytes((double)l, lo, sizeof lo);
      rpt_bytes(b == 64 ? 1.8446744073709552e19 : (double)(2 * l), hi, sizeof hi);
      snprintf(range, sizeof range, "%s - %s", lo, hi);
    }
    int bar = mc ? (int)(20.0 * (double)cnt[b] / (double)mc + 0.5) : 0;
    snprintf(cn, sizeof cn, "%llu", (unsigned long long)cnt[b]);
    snprintf(pc, sizeof pc, "%.1f%%", tc ? 100.0 * (double)cnt[b] / (double)tc : 0.0);
    snprintf(pb, sizeof pb, "%.1f%%", tb ? 100.0 * (double)bytes[b] / (double)tb : 0.0);
    tbl_add(&t, range, cn, pc, rpt_bytes((double)bytes[b], bb, sizeof bb), pb, &"####################"[20 - bar]);
  }
  tbl_print(out, &t);
}

void rpt_print_text(rpt_t *R, FILE *out) {
  char b1[32], b2[32], b3[32], b4[32], lab[64];
  const rpt_proc_t *p0 = &R->p[0];
  uint64_t events = 0, stored = 0, raw = 0, stacks = 0, dropped = 0, mem = 0, threads = 0;
  for (size_t i = 0; i < R->np; i++) {
    const rpt_proc_t *P = &R->p[i];
    events += P->n_events;
    stored += P->info.stored_bytes;
    raw += P->info.raw_bytes;
    stacks += hmt_stack_count(P->r);
    dropped += P->info.flush.dropped;
    if (P->info.flush.memory_bytes > mem) mem = P->info.flush.memory_bytes;
    threads += P->info.threads;
  }
  uint64_t t_end = R->t0;
  for (size_t i = 0; i < R->np; i++) if (R->p[i].t_last > t_end) t_end = R->p[i].t_last;
  time_t when = (time_t)(p0->h.start_realtime_ns / 1000000000u);
  char date[64] = "";
  strftime(date, sizeof date, "%Y-%m-%d %H:%M:%S", localtime(&when));
  int ranked = 0;
  for (size_t i = 0; i < R->np; i++) ranked |= rpt_is_rank(&R->p[i]);
  char size[32] = "no MPI ranks";
  if (ranked) snprintf(size, sizeof size, "%d rank%s", p0->h.size, p0->h.size == 1 ? "" : "s");
  fprintf(out, "hpcmem-report: %s\n", R->input);
  fprintf(out, "  job %s, %zu process%s (%s) on %llu host%s, started %s, %.3f s traced\n", p0->h.jobid, R->np,
          R->np == 1 ? "" : "es", size, (unsigned long long)hosts(R), hosts(R) == 1 ? "" : "s", date,
          rpt_seconds(R, t_end));
  fprintf(out, "  %llu events, %llu threads, symbols: %s\n", (unsigned long long)events, (unsigned long long)threads,
          hmt_sym_method(R->sym));
  for (size_t i = 0; i < R->np; i++) {
    const rpt_proc_t *P = &R->p[i];
    rpt_proc_name(R, P, lab, sizeof lab);
    if (P->failed) fprintf(out, "  ! %s: read up to an error: %s\n", lab, P->error);
    else if (P->info.truncated)
      fprintf(out, "  ! %s: %s ends inside a block at offset %llu (the process was killed?); read up to there\n",
              lab, P->path, (unsigned long long)P->info.truncated_at);
    else if (!P->info.flush.present) fprintf(out, "  ! %s: the trace has no end marker (the process was killed?)\n", lab);
    else if (!complete(P)) {
      char why[32];
      fprintf(out, "  ! %s: the trace ends at %s\n", lab, hmt_flush_reason_name(P->info.flush.reason, why, sizeof why));
    }
    if (P->info.skipped_blocks)
      fprintf(out, "  ! %s: %llu damaged blocks skipped (%llu bytes)\n", lab,
              (unsigned long long)P->info.skipped_blocks, (unsigned long long)P->info.skipped_bytes);
    if (P->n_unmatched_free + P->n_unknown_realloc)
      fprintf(out, "  note: %s: %llu frees of memory allocated before the trace started\n", lab,
              (unsigned long long)(P->n_unmatched_free + P->n_unknown_realloc));
    if (missing_events(P))
      fprintf(out, "  ! %s: %llu event%s that the end marker counts %s not in the file\n", lab,
              (unsigned long long)missing_events(P), missing_events(P) == 1 ? "" : "s", missing_events(P) == 1 ? "is" : "are");
    if (P->n_reused)
      fprintf(out, "  ! %s: %llu allocation%s of an address the trace held live: a free is missing (the block ends there)\n",
              lab, (unsigned long long)P->n_reused, P->n_reused == 1 ? "" : "s");
  }

  /* high-water marks */
  fprintf(out, "\nHigh-water mark per rank\n");
  tbl_t t;
  tbl_init(&t, "  l8 l16 r12 r10 r12 r10 r10 r12");
  tbl_add(&t, "rank", "host", "peak", "at (s)", "live at end", "allocs", "frees", "S at peak");
  size_t *order = rpt_ranks_by_hwm(R);
  size_t *byrank = malloc(R->np * sizeof *byrank);
  for (size_t i = 0; i < R->np; i++) byrank[i] = i;
  int limit = R->np > 40 && !R->o.all_ranks;
  for (size_t k = 0; k < R->np; k++) {
    size_t i = limit ? order[k] : byrank[k];
    if (limit && k == 10) {
      char more[80];
      snprintf(more, sizeof more, "  ... %zu more ranks (--all-ranks shows them)", R->np - 20);
      tbl_note(&t, more);
      k = R->np - 11;
      continue;
    }
    const rpt_proc_t *P = &R->p[i];
    int64_t sys = rpt_at_peak(P, &P->sys, NULL);
    char at[32] = "-", allocs[24], frees[24];
    if (P->peak > 0) snprintf(at, sizeof at, "%.3f", rpt_seconds(R, P->peak_t));
    snprintf(allocs, sizeof allocs, "%llu",
             (unsigned long long)(P->n_kind[HPCMEM_EV_MALLOC] + P->n_kind[HPCMEM_EV_CALLOC] +
                                  P->n_kind[HPCMEM_EV_MEMALIGN] + P->n_kind[HPCMEM_EV_REALLOC]));
    snprintf(frees, sizeof frees, "%llu", (unsigned long long)P->n_kind[HPCMEM_EV_FREE]);
    tbl_add(&t, rpt_proc_label(R, P, lab, sizeof lab), P->h.hostname, rpt_bytes((double)P->peak, b1, sizeof b1), at,
            rpt_bytes((double)P->cur, b2, sizeof b2), allocs, frees, rpt_bytes((double)sys, b3, sizeof b3));
  }
  tbl_print(out, &t);
  free(byrank);

  /* the job */
  int64_t sum_peaks, live, live_n;
  job_totals(R, &sum_peaks, &live, &live_n);
  fprintf(out, "\nJob: peak of the sum %s at %.3f s; the sum of the rank peaks is %s", rpt_bytes((double)R->peak, b1, sizeof b1),
          peak_seconds(R, R->peak, R->peak_t), rpt_bytes((double)sum_peaks, b2, sizeof b2));
  if (sum_peaks > R->peak) fprintf(out, " (the ranks peak at different times)");
  fprintf(out, "\n");

  /* imbalance */
  double mn, mx, mean, sd;
  size_t imin, imax;
  rpt_hwm_stats(R, &mn, &mx, &mean, &sd, &imin, &imax);
  if (R->np > 1) {
    fprintf(out, "\nImbalance of the high-water mark across ranks\n");
    char lmin[64];
    fprintf(out, "  min %s (%s)  max %s (%s)  mean %s  sd %s  CV %.1f%%\n", rpt_bytes(mn, b1, sizeof b1),
            rpt_proc_name(R, &R->p[imin], lmin, sizeof lmin), rpt_bytes(mx, b2, sizeof b2),
            rpt_proc_name(R, &R->p[imax], lab, sizeof lab), rpt_bytes(mean, b3, sizeof b3),
            rpt_bytes(sd, b4, sizeof b4), mean > 0 ? 100.0 * sd / mean : 0.0);
    double imb = mx > 0 ? (mx - mean) / mx : 0;
    fprintf(out, "  (max - mean) / max = %.1f%%%s\n", 100.0 * imb,
            imb > IMBALANCE_FLAG ? ": imbalanced (the heaviest rank sets the memory the job needs)" : "");
    fprintf(out, "  heaviest:");
    for (size_t k = 0; k < R->np && k < 5; k++) {
      const rpt_proc_t *P = &R->p[order[k]];
      fprintf(out, "%s %s %s (%+.1f%%)", k ? "," : "", rpt_proc_name(R, P, lab, sizeof lab),
              rpt_bytes((double)P->peak, b1, sizeof b1), mean > 0 ? 100.0 * ((double)P->peak - mean) / mean : 0.0);
    }
    fprintf(out, "\n");
  }
  free(order);

  /* breakdowns */
  for (size_t i = 0; i < R->np; i++) {
    if (!shown(R, i, imin, imax)) continue;
    rpt_proc_t *P = &R->p[i];
    const char *why = R->np == 1 ? "" : i == imax ? " (largest high-water mark)" : i == imin ? " (smallest high-water mark)" : "";
    rpt_proc_name(R, P, lab, sizeof lab);
    lab[0] = (char)toupper((unsigned char)lab[0]);   /* "Rank 3", "Process 1234" */
    fprintf(out, "\n%s at its peak, %s at %.3f s%s\n", lab, rpt_bytes((double)P->peak, b1, sizeof b1),
            peak_seconds(R, P->peak, P->peak_t), why);
    fprintf(out, " by function (top %d)%s:\n", R->o.top, R->o.collapse ? ", wrappers collapsed" : "");
    print_breakdown(out, R, P, 0, 0, P->peak, "function");
    fprintf(out, " by library:\n");
    print_breakdown(out, R, P, 1, 0, P->peak, "object");
    fprintf(out, " top stacks:\n");
    print_stacks(out, R, P, 0, P->peak);
  }
  if (R->np > 1) {
    fprintf(out, "\nJob at its peak (%s at %.3f s), all ranks, by function (top %d):\n",
            rpt_bytes((double)R->peak, b1, sizeof b1), rpt_seconds(R, R->peak_t), R->o.top);
    print_breakdown(out, R, NULL, 0, 1, R->peak, "function");
  }

  /* sizes */
  fprintf(out, "\nAllocation sizes (all ranks)\n");
  print_hist(out, R->hist_count, R->hist_bytes);

  /* leaks */
  int at_exit = all_complete(R);
  fprintf(out, "\n%s: %s in %lld allocations (all ranks)\n", at_exit ? "Live at exit (leaks)" : "Live at the end of the trace",
          rpt_bytes((double)live, b1, sizeof b1), (long long)live_n);
  if (live > 0) {
    fprintf(out, " by function (top %d):\n", R->o.top);
    print_breakdown(out, R, NULL, 0, 2, live, "function");
    fprintf(out, " by stack (top %d):\n", R->o.top);
    print_stacks(out, R, NULL, 2, live);
  }

  /* the recorder itself */
  fprintf(out, "\nRecorder: %llu events in %s (%.2f bytes/event, compression %.1fx), %llu stacks, "
          "up to %s of memory per rank, %llu events dropped\n",
          (unsigned long long)events, rpt_bytes((double)stored, b1, sizeof b1), events ? (double)stored / (double)events : 0.0,
          stored ? (double)raw / (double)stored : 0.0, (unsigned long long)stacks, rpt_bytes((double)mem, b2, sizeof b2),
          (unsigned long long)dropped);
}

/* ---- JSON ---------------------------------------------------------------- */

static void js(FILE *o, const char *s) {
  fputc('"', o);
  for (; s && *s; s++) {
    unsigned char c = (unsigned char)*s;
    if (c == '"' || c == '\\') fprintf(o, "\\%c", c);
    else if (c == '\n') fputs("\\n", o);
    else if (c == '\t') fputs("\\t", o);
    else if (c < 0x20) fprintf(o, "\\u%04x", c);
    else fputc(c, o);
  }
  fputc('"', o);
}

/* `key` (with its quotes, colon and any comma before it), then the string. */
static void json_str(FILE *o, const char *key, const char *s) {
  fputs(key, o);
  js(o, s);
}

/* `key`, then one breakdown (see print_breakdown) as an array of at most
 * --top objects. */
static void json_breakdown(FILE *o, const char *key, rpt_t *R, rpt_proc_t *only, int by_library, int which) {
  size_t n;
  rpt_agg_t *a = rpt_aggregate(R, only, by_library, which, &n);
  fputs(key, o);
  fputc('[', o);
  int k = 0;
  for (size_t i = 0; i < n && k < R->o.top; i++) {
    if (a[i].bytes <= 0) break;
    json_str(o, k++ ? ",{\"name\":" : "{\"name\":", a[i].name);
    if (a[i].file) json_str(o, ",\"file\":", a[i].file);
    json_str(o, ",\"module\":", a[i].module);
    fprintf(o, ",\"bytes\":%lld,\"count\":%lld}", (long long)a[i].bytes, (long long)a[i].count);
  }
  fputc(']', o);
  rpt_agg_free(a, n);
}

/* The writers below start with `key` as json_breakdown does. */
static void json_stacks(FILE *o, const char *key, rpt_t *R, rpt_proc_t *only, int which) {
  size_t n;
  rpt_group_t *g = rpt_stack_groups(R, only, which, &n);
  fputs(key, o);
  fputc('[', o);
  for (size_t i = 0; i < n && (int)i < R->o.top; i++) {
    rpt_proc_t *P = g[i].P;
    rpt_stack_t *s = &P->st[g[i].idx];
    fprintf(o, "%s{\"bytes\":%lld,\"count\":%lld,\"ranks\":%d,\"attribution\":%d,\"frames\":[", i ? "," : "",
            (long long)g[i].bytes, (long long)g[i].count, g[i].procs, s->attr);
    const rpt_lframe_t *lf;
    uint32_t d;
    if (rpt_lstack(R, P, s, &lf, &d) == 0)
      for (uint32_t j = 0; j < d; j++) {
        const hmt_sym_t *sym = lf[j].sym;
        fprintf(o, "%s{\"address\":\"0x%llx\",%s\"function\":", j ? "," : "", (unsigned long long)lf[j].addr,
                sym->inlined ? "\"inlined\":true," : "");
        js(o, sym->function);
        if (sym->file) { json_str(o, ",\"file\":", sym->file); fprintf(o, ",\"line\":%d", sym->line); }
        json_str(o, ",\"module\":", sym->module);
        fputc('}', o);
      }
    fputs("]}", o);
  }
  fputc(']', o);
  rpt_groups_free(g, n);
}

static void json_timeline(FILE *o, const char *key, const rpt_t *R, const rpt_timeline_t *tl) {
  fputs(key, o);
  fputc('[', o);
  int k = 0;
  for (int b = 0; b < tl->n; b++) {
    if (!tl->seen[b]) continue;
    fprintf(o, "%s[%.6f,%lld,%lld]", k++ ? "," : "", rpt_seconds(R, tl->t0 + (uint64_t)b * tl->width),
            (long long)tl->max[b], (long long)tl->last[b]);
  }
  fputc(']', o);
}

static void json_hist(FILE *o, const char *key, const uint64_t *cnt, const uint64_t *bytes) {
  fputs(key, o);
  fputc('[', o);
  int k = 0;
  for (int b = 0; b < RPT_HIST_BINS; b++) {
    if (!cnt[b]) continue;
    uint64_t lo = b ? 1ull << (b - 1) : 0;
    fprintf(o, "%s{\"from\":%llu,\"to\":%llu,\"count\":%llu,\"bytes\":%llu}", k++ ? "," : "", (unsigned long long)lo,
            b ? (unsigned long long)(b == 64 ? UINT64_MAX : 2 * lo - 1) : 0ull, (unsigned long long)cnt[b],
            (unsigned long long)bytes[b]);
  }
  fputc(']', o);
}

int rpt_write_json(rpt_t *R, FILE *o) {
  const rpt_proc_t *p0 = &R->p[0];
  double mn, mx, mean, sd;
  size_t imin, imax;
  rpt_hwm_stats(R, &mn, &mx, &mean, &sd, &imin, &imax);
  int64_t sum_peaks, live, live_n;
  job_totals(R, &sum_peaks, &live, &live_n);
  json_str(o, "{\"tool\":\"hpcmem-report\",\"format_version\":1,\"input\":", R->input);
  json_str(o, ",\"jobid\":", p0->h.jobid);
  fprintf(o, ",\"size\":%d,\"processes\":%zu,\"start_realtime_ns\":%llu,\"symbols\":", p0->h.size, R->np,
          (unsigned long long)p0->h.start_realtime_ns);
  js(o, hmt_sym_method(R->sym));
  fprintf(o, ",\"complete\":%s,\"collapse_wrappers\":%s", all_complete(R) ? "true" : "false", R->o.collapse ? "true" : "false");
  fprintf(o, ",\"job\":{\"peak_bytes\":%lld,\"peak_time_s\":%.6f,\"sum_of_rank_peaks\":%lld,\"live_at_end_bytes\":%lld",
          (long long)R->peak, peak_seconds(R, R->peak, R->peak_t), (long long)sum_peaks, (long long)live);
  fputs(",\"ranks_at_peak\":[", o);
  for (size_t i = 0; i < R->np; i++)
    fprintf(o, "%s{\"rank\":%d,\"pid\":%u,\"bytes\":%lld}", i ? "," : "", R->p[i].h.rank, R->p[i].h.pid,
            (long long)rpt_proc_at_jpeak(R, &R->p[i]));
  json_breakdown(o, "],\"functions_at_peak\":", R, NULL, 0, 1);
  json_breakdown(o, ",\"libraries_at_peak\":", R, NULL, 1, 1);
  json_timeline(o, ",\"timeline\":", R, &R->tl);
  fputs("}", o);
  fprintf(o, ",\"imbalance\":{\"min_bytes\":%.0f,\"min_rank\":%d,\"max_bytes\":%.0f,\"max_rank\":%d,\"mean_bytes\":%.1f,"
          "\"sd_bytes\":%.1f,\"cv\":%.6f,\"max_over_mean\":%.6f,\"imbalanced\":%s,\"heaviest\":[",
          mn, R->p[imin].h.rank, mx, R->p[imax].h.rank, mean, sd, mean > 0 ? sd / mean : 0.0,
          mx > 0 ? (mx - mean) / mx : 0.0, mx > 0 && (mx - mean) / mx > IMBALANCE_FLAG ? "true" : "false");
  size_t *order = rpt_ranks_by_hwm(R);
  for (size_t k = 0; k < R->np && k < 5; k++)
    fprintf(o, "%s{\"rank\":%d,\"bytes\":%lld}", k ? "," : "", R->p[order[k]].h.rank, (long long)R->p[order[k]].peak);
  free(order);
  json_hist(o, "]},\"histogram\":", R->hist_count, R->hist_bytes);
  json_breakdown(o, ",\"leaks\":{\"functions\":", R, NULL, 0, 2);
  json_stacks(o, ",\"stacks\":", R, NULL, 2);
  fputs("},\"ranks\":[", o);
  for (size_t i = 0; i < R->np; i++) {
    rpt_proc_t *P = &R->p[i];
    fprintf(o, "%s{\"rank\":%d,\"is_rank\":%s,\"pid\":%u", i ? "," : "", P->h.rank, rpt_is_rank(P) ? "true" : "false",
            P->h.pid);
    json_str(o, ",\"host\":", P->h.hostname);
    json_str(o, ",\"file\":", P->path);
    char why[32];
    fprintf(o, ",\"complete\":%s,\"truncated\":%s,\"end\":", complete(P) ? "true" : "false", P->info.truncated ? "true" : "false");
    js(o, P->info.flush.present ? hmt_flush_reason_name(P->info.flush.reason, why, sizeof why) : "none");
    if (P->failed) json_str(o, ",\"error\":", P->error);
    fprintf(o, ",\"hwm_bytes\":%lld,\"hwm_time_s\":%.6f,\"live_at_end_bytes\":%lld,\"live_at_end_count\":%llu",
            (long long)P->peak, peak_seconds(R, P->peak, P->peak_t), (long long)P->cur,
            (unsigned long long)P->live.count);
    fprintf(o, ",\"sys_bytes_at_peak\":%lld,\"events\":%llu,\"mallocs\":%llu,\"callocs\":%llu,\"reallocs\":%llu,"
            "\"frees\":%llu,\"memaligns\":%llu,\"sys_events\":%llu,\"unmatched_frees\":%llu,\"missing_frees\":%llu,"
            "\"missing_events\":%llu,\"bytes_allocated\":%llu",
            (long long)rpt_at_peak(P, &P->sys, NULL), (unsigned long long)P->n_events,
            (unsigned long long)P->n_kind[HPCMEM_EV_MALLOC], (unsigned long long)P->n_kind[HPCMEM_EV_CALLOC],
            (unsigned long long)P->n_kind[HPCMEM_EV_REALLOC], (unsigned long long)P->n_kind[HPCMEM_EV_FREE],
            (unsigned long long)P->n_kind[HPCMEM_EV_MEMALIGN], (unsigned long long)P->n_sys,
            (unsigned long long)(P->n_unmatched_free + P->n_unknown_realloc), (unsigned long long)P->n_reused,
            (unsigned long long)missing_events(P), (unsigned long long)P->bytes_allocated);
    json_breakdown(o, ",\"functions_at_peak\":", R, P, 0, 0);
    json_breakdown(o, ",\"libraries_at_peak\":", R, P, 1, 0);
    json_stacks(o, ",\"stacks_at_peak\":", R, P, 0);
    json_stacks(o, ",\"leak_stacks\":", R, P, 2);
    json_hist(o, ",\"histogram\":", P->hist_count, P->hist_bytes);
    json_timeline(o, ",\"timeline\":", R, &P->tl);
    const hmt_flush_info_t *f = &P->info.flush;
    fprintf(o, ",\"recorder\":{\"stored_bytes\":%llu,\"raw_bytes\":%llu,\"blocks\":%llu,\"threads\":%llu,"
            "\"stacks\":%zu,\"dropped\":%llu,\"memory_bytes\":%llu,\"skipped_blocks\":%llu}}",
            (unsigned long long)P->info.stored_bytes, (unsigned long long)P->info.raw_bytes,
            (unsigned long long)P->info.event_blocks, (unsigned long long)P->info.threads, hmt_stack_count(P->r),
            (unsigned long long)f->dropped, (unsigned long long)f->memory_bytes, (unsigned long long)P->info.skipped_blocks);
  }
  fputs("]}\n", o);
  return ferror(o) ? -1 : 0;
}
