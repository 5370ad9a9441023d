/* The per-rank record of the memory report and the cross-rank aggregate.
 *
 * A record is one flat array of uint64 fields, listed once: the allocator's
 * statistics (include/hpcmem_stats_fields.h) followed by what the report
 * adds.  The MPI datatype (a contiguous run of uint64), the reduction
 * operator, the banner and the JSON printer are all expanded from
 * HPCMEM_RECORD_FIELDS, so a field added to either list shows up everywhere.
 *
 * This header and record.c do not need mpi.h: the same code serves the
 * MPI_Finalize report, the at-exit per-rank summary and the unit tests. */
#ifndef HPCMEM_MPI_RECORD_H
#define HPCMEM_MPI_RECORD_H
#include <stddef.h>
#include <stdint.h>
#include "hpcmem.h"

/* What the report adds to the allocator's statistics.  Kinds, besides the
 * statistics' SUM / MAX / PEAKTIME: TIME is a time stamp on the job clock. */
#define HPCMEM_RECORD_EXTRA_FIELDS(X) \
  X(vm_hwm_bytes,     MAX,  "VmHWM of /proc/self/status: peak resident memory of the whole process") \
  X(vm_rss_bytes,     SUM,  "VmRSS of /proc/self/status when the report was taken") \
  X(start_ns,         TIME, "allocator start (first allocation of the process), on the job clock") \
  X(end_ns,           TIME, "when the report was taken, on the job clock") \
  X(timeline_samples, SUM,  "samples in the rank's memory timeline")

/* Per-segment statistics (hpcmem_seg_stats; the three add up to the totals). */
#define HPCMEM_RECORD_SEGMENT_FIELDS(X) \
  X(private_bytes,          SUM, "bytes live in the private segment") \
  X(private_peak_bytes,     MAX, "high-water mark of the private segment") \
  X(interleaved_bytes,      SUM, "bytes live in the interleaved segment") \
  X(interleaved_peak_bytes, MAX, "high-water mark of the interleaved segment") \
  X(shared_bytes,           SUM, "bytes live in the rank's part of the node-shared segment") \
  X(shared_peak_bytes,      MAX, "high-water mark of the rank's part of the node-shared segment")

/* Placement (hexe, hpcmem_place_alloc): where this rank's placed memory went. */
#define HPCMEM_RECORD_PLACE_FIELDS(X) \
  X(place_dram_bytes,     SUM, "bytes placed in DRAM by hpcmem_place_alloc (live at the report)") \
  X(place_hbm_bytes,      SUM, "bytes placed in high-bandwidth memory (live at the report)") \
  X(place_nvm_bytes,      SUM, "bytes placed in NVM (live at the report)") \
  X(place_fallback_bytes, SUM, "bytes placed outside their preferred class") \
  X(place_moved_bytes,    SUM, "bytes touched before their commit and migrated")

#define HPCMEM_RECORD_FIELDS(X) \
  HPCMEM_STATS_FIELDS(X) \
  HPCMEM_RECORD_EXTRA_FIELDS(X) \
  HPCMEM_RECORD_SEGMENT_FIELDS(X) \
  HPCMEM_RECORD_PLACE_FIELDS(X)

enum {
#define HPCMEM_REC_ENUM_(name, kind, help) HPCMEM_REC_##name,
  HPCMEM_RECORD_FIELDS(HPCMEM_REC_ENUM_)
#undef HPCMEM_REC_ENUM_
  HPCMEM_REC_NFIELDS
};

typedef enum {
  HPCMEM_KIND_SUM,       /* adds up across ranks (bytes live, counts) */
  HPCMEM_KIND_MAX,       /* a maximum (high-water mark, largest request) */
  HPCMEM_KIND_PEAKTIME,  /* the time of the preceding MAX field, on the job clock */
  HPCMEM_KIND_TIME       /* a time stamp on the job clock */
} hpcmem_kind_t;

typedef struct {
  const char *name;
  hpcmem_kind_t kind;
  const char *help;
} hpcmem_field_desc_t;

extern const hpcmem_field_desc_t _hpcmem_rec_fields[HPCMEM_REC_NFIELDS];

/* One rank.  All words are uint64 so that the MPI datatype is a plain
 * contiguous run (HPCMEM_REC_WORDS of MPI_UINT64_T) on every platform. */
typedef struct {
  uint64_t rank;
  uint64_t node;                  /* index of the rank's node, 0..nodes-1 */
  uint64_t v[HPCMEM_REC_NFIELDS];
} hpcmem_rec_t;

#define HPCMEM_REC_WORDS (sizeof(hpcmem_rec_t) / sizeof(uint64_t))

/* One field over a set of ranks.  Merging is commutative (ties go to the
 * lower rank), so it can be an MPI operator; the spread uses the pairwise
 * update of Chan et al., which stays accurate when the ranks are alike. */
typedef struct {
  uint64_t min, max, sum, n;
  int64_t min_rank, max_rank;
  double mean, m2;                /* running mean and sum of squared deviations */
} hpcmem_agg_t;

void _hpcmem_agg_init(hpcmem_agg_t *a, uint64_t value, int64_t rank);
void _hpcmem_agg_merge(hpcmem_agg_t *into, const hpcmem_agg_t *from);
/* Element-wise over a whole record's aggregates (the MPI operator's body). */
void _hpcmem_agg_merge_n(hpcmem_agg_t *into, const hpcmem_agg_t *from, size_t n);
/* Aggregates of a single record (one per field). */
void _hpcmem_agg_from_rec(hpcmem_agg_t *aggs, const hpcmem_rec_t *rec);
/* sum / n, exact to the double */
double _hpcmem_agg_mean(const hpcmem_agg_t *a);
/* population standard deviation (the ranks are the whole population) */
double _hpcmem_agg_stddev(const hpcmem_agg_t *a);
/* stddev / mean, 0 when the mean is 0 */
double _hpcmem_agg_cv(const hpcmem_agg_t *a);
/* (max - mean) / max, 0 when max is 0: the share of the heaviest rank's
 * memory that a perfectly balanced run would not need */
double _hpcmem_agg_imbalance(const hpcmem_agg_t *a);

/* Resample a timeline onto nbins bins of bin_ns each, starting at time 0 of
 * the job clock (a sample's job time is t_ns - origin_ns; earlier samples
 * count for bin 0).  bins[b] becomes the largest live-bytes value of the step
 * function during bin b: the value carried in from the last earlier sample,
 * or any sample inside.  Summing such bins over ranks gives, per bin, a value
 * between the true sum and the sum of the ranks' peaks.  Samples must be in
 * time order.  end_ns: job time when the rank's record was taken; later
 * samples are ignored and the carried value stops there. */
void _hpcmem_timeline_bin(const hpcmem_sample_t *s, size_t n, uint64_t origin_ns,
                          uint64_t end_ns, uint64_t bin_ns, size_t nbins, uint64_t *bins);
/* Raise one bin to at least `bytes` at job time t (a point that is known
 * exactly, such as the recorded peak, without carrying it forward). */
void _hpcmem_timeline_point(uint64_t t, uint64_t bytes, uint64_t bin_ns, size_t nbins, uint64_t *bins);
/* Bin width for a span: at least 1 ns, nbins bins cover [0, span_ns]. */
uint64_t _hpcmem_timeline_bin_ns(uint64_t span_ns, size_t nbins);

/* Parse "VmHWM:" / "VmRSS:" (kB) out of /proc/self/status text; 0 or -ENOENT. */
int _hpcmem_proc_status_parse(const char *text, uint64_t *vm_hwm, uint64_t *vm_rss);

/* Fill rec with this process's statistics now (hpcmem_stats, /proc), time
 * fields on the job clock (local clock minus origin_ns).  Heap-free and
 * lock-free apart from hpcmem_stats() itself.  nowait: in a fatal-signal
 * handler, no lock is waited for long (its holder may be the interrupted
 * code); returns 1 when a figure may then be approximate, else 0. */
int _hpcmem_rec_sample(hpcmem_rec_t *rec, int64_t rank, uint64_t node, uint64_t origin_ns, int nowait);
/* This process's timeline, copied into static storage (no heap): one copy
 * for MPI_Finalize's report (HPCMEM_TL_FINALIZE) and one for the summary at
 * exit or on a signal (HPCMEM_TL_EXIT), which may interrupt that report. */
enum { HPCMEM_TL_FINALIZE, HPCMEM_TL_EXIT };
size_t _hpcmem_rec_timeline(int which, const hpcmem_sample_t **out, int nowait, int *approx);

#endif
