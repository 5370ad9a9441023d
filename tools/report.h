/* hpcmem-report: the analysis state shared by its files.
 *   hpcmem-report.c   options, reading and merging the ranks, statistics
 *   report_text.c     the text and JSON reports
 *   report_svg.c      the plots
 *   report_heaptrack.c  export of one rank for heaptrack_gui / heaptrack_print */
#ifndef HPCMEM_TOOLS_REPORT_H
#define HPCMEM_TOOLS_REPORT_H
#include <stdint.h>
#include <stdio.h>
#include "hmt_map.h"
#include "hmt_reader.h"
#include "hmt_symbols.h"

#define RPT_TL_BUCKETS 1024  /* points of a memory-over-time curve */
#define RPT_HIST_BINS 65     /* size 0, then [2^k, 2^(k+1)) for k = 0..63 */

/* Memory over time: RPT_TL_BUCKETS buckets of equal width from t0; when the
 * run outlasts them, neighbours merge and the width doubles, so the whole
 * run is covered at any length.  Each bucket keeps the highest value seen
 * in it (the peak is never lost) and the value at its end. */
typedef struct {
  uint64_t t0, width;
  int64_t max[RPT_TL_BUCKETS], last[RPT_TL_BUCKETS];
  uint8_t seen[RPT_TL_BUCKETS];
  int n;  /* buckets in use */
} rpt_timeline_t;

/* One stack of one process.  cur/cnt are live bytes/allocations now; the
 * values at the process's and at the job's peak are kept lazily by epoch:
 * a stack untouched since the last peak still holds its value at the peak
 * in cur, so nothing is copied when a new peak is reached. */
typedef struct {
  uint64_t id;
  int64_t cur, cnt;
  int64_t at_peak, cnt_at_peak;
  int64_t at_jpeak, cnt_at_jpeak;
  uint32_t ep, jep;
  uint64_t allocs, bytes;
  int attr;  /* attribution frame (index into rpt_lstack's calls), -1 none */
} rpt_stack_t;

typedef struct {
  uint64_t size;
  uint32_t stack;  /* index into proc.stacks */
  uint8_t sys;
} rpt_live_t;

typedef struct {
  char *path;
  hmt_reader_t *r;
  hmt_header_t h;
  hmt_info_t info;       /* after reading */
  int64_t off;           /* clock offset */
  hmt_event_t ev;
  int has;               /* ev is the next event */
  int failed;            /* reading stopped at an error */
  char error[700];
  /* live allocations */
  hmt_map_t live;        /* address -> index into lv */
  rpt_live_t *lv;
  uint32_t *lv_free;
  size_t nlv, caplv, nfree, capfree;
  /* stacks: index 0 is "no stack" */
  rpt_stack_t *st;
  size_t nst, capst;
  hmt_map_t st_idx;      /* stack id -> index */
  rpt_stack_t sys;       /* the S allocations, tracked like a stack */
  /* totals */
  int64_t cur, peak;
  uint64_t peak_t;       /* global time of the peak */
  uint32_t epoch;
  int64_t at_jpeak;
  uint32_t jep;
  uint64_t n_kind[6], n_sys, n_events, n_unmatched_free, n_unknown_realloc, n_reused;
  uint64_t bytes_allocated;
  uint64_t t_first, t_last;  /* global times of the first and last event */
  uint64_t hist_count[RPT_HIST_BINS], hist_bytes[RPT_HIST_BINS];
  rpt_timeline_t tl;
} rpt_proc_t;

typedef struct {
  int json;
  const char *json_path;
  int text;
  int top;
  int collapse;
  const char **wrappers;
  int nwrappers;
  int sym_method;
  const char *svg_dir;
  int png;
  int heaptrack_rank;      /* -1: none */
  const char *heaptrack_out;
  int salvage;
  int progress;            /* -1 auto, 0 off, 1 on */
  int all_ranks;
  int *ranks;              /* extra ranks whose breakdown is printed */
  int nranks;
  int strict;
} rpt_opts_t;

typedef struct {
  rpt_opts_t o;
  const char *input;       /* directory or file as given */
  rpt_proc_t *p;
  size_t np;
  uint64_t t0;             /* job start (global ns) */
  int64_t cur, peak;
  uint64_t peak_t;
  uint32_t epoch;
  rpt_timeline_t tl;
  hmt_symtab_t *sym;
  struct rpt_lframe *lf;   /* rpt_lstack's result */
  size_t lfcap;
  uint64_t hist_count[RPT_HIST_BINS], hist_bytes[RPT_HIST_BINS];
  int errors;
} rpt_t;

/* one function (or library) and what it holds */
typedef struct {
  char *name;
  char *file;     /* a source file of it, may be NULL */
  char *module;
  int64_t bytes, count;
} rpt_agg_t;

/* hpcmem-report.c */
const hmt_sym_t *rpt_frame(rpt_t *R, rpt_proc_t *P, uint64_t addr);
/* The function of a frame as the tables name it: its symbol, or for code
 * without one "object+0xoffset" (an offset alone would merge the unnamed
 * code of different objects into one row, and say nothing). */
const char *rpt_function(const hmt_sym_t *s, char *buf, size_t len);
/* A stack as calls: each return address's inlined functions (innermost
 * first, sym->inlined set) and then its own function.  rpt_stack_t.attr
 * indexes these.  The array lives until the next call. */
typedef struct rpt_lframe { const hmt_sym_t *sym; uint64_t addr; } rpt_lframe_t;
int rpt_lstack(rpt_t *R, rpt_proc_t *P, const rpt_stack_t *s, const rpt_lframe_t **lf, uint32_t *n);
int rpt_stack_frames(rpt_proc_t *P, const rpt_stack_t *s, const uint64_t **f, uint32_t *d);
int64_t rpt_at_peak(const rpt_proc_t *P, const rpt_stack_t *s, int64_t *count);
int64_t rpt_at_jpeak(const rpt_t *R, const rpt_stack_t *s, int64_t *count);
int64_t rpt_proc_at_jpeak(const rpt_t *R, const rpt_proc_t *P);
/* aggregate the stacks of P (or of all procs when P is NULL) by attribution
 * function (by_library = 0) or library (1); which: 0 at the process peak,
 * 1 at the job peak, 2 live at the end.  Sorted by bytes, descending. */
rpt_agg_t *rpt_aggregate(rpt_t *R, rpt_proc_t *P, int by_library, int which, size_t *n);
void rpt_agg_free(rpt_agg_t *a, size_t n);
/* stacks of P sorted by bytes (which as above); returns indices */
size_t *rpt_top_stacks(rpt_t *R, rpt_proc_t *P, int which, size_t *n);
/* stacks that symbolise the same (from the attribution frame on: function,
 * file, line), of P or of all procs, summed and sorted by bytes */
typedef struct {
  char *key;
  rpt_proc_t *P;   /* one of them, for printing the frames */
  size_t idx;
  int64_t bytes, count;
  int procs;       /* how many processes have it */
  rpt_proc_t *last_proc;
} rpt_group_t;
rpt_group_t *rpt_stack_groups(rpt_t *R, rpt_proc_t *only, int which, size_t *n);
void rpt_groups_free(rpt_group_t *g, size_t n);
void rpt_hwm_stats(const rpt_t *R, double *min, double *max, double *mean, double *sd, size_t *imin, size_t *imax);
size_t *rpt_ranks_by_hwm(const rpt_t *R);
double rpt_seconds(const rpt_t *R, uint64_t t);
const char *rpt_bytes(double b, char *buf, size_t len);
/* How the outputs name a process.  rpt_is_rank: 0 for one that is no MPI
 * rank (a plain program); rpt_rank_number: what --rank / --heaptrack match
 * (0 for such a process, as its file name).  The label is the cell of a rank
 * column: "3", or "3 (pid N)" when several processes have rank 3; "-" for a
 * process without a rank ("- (pid N)" when there are several).  The name is
 * the label in a sentence: "rank 3", "rank 3 (pid N)", "process N". */
int rpt_is_rank(const rpt_proc_t *P);
int rpt_rank_number(const rpt_proc_t *P);
const char *rpt_proc_label(const rpt_t *R, const rpt_proc_t *P, char *buf, size_t len);
const char *rpt_proc_name(const rpt_t *R, const rpt_proc_t *P, char *buf, size_t len);

/* report_text.c */
void rpt_print_text(rpt_t *R, FILE *out);
int rpt_write_json(rpt_t *R, FILE *out);

/* report_svg.c */
int rpt_write_svgs(rpt_t *R, const char *dir);

/* report_heaptrack.c */
int rpt_write_heaptrack(rpt_t *R, rpt_proc_t *P, const char *path);

#endif
