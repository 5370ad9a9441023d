/* The memory report: banner on stderr and hpcmem-report-<jobid>.json
 * (schema in docs/report.md).  report.c turns an assembled report into text;
 * exit.c writes a rank's own summary when MPI_Finalize is never reached;
 * layer.c (the only part that needs MPI) assembles the job-wide report.
 * Nothing here needs mpi.h. */
#ifndef HPCMEM_MPI_REPORT_H
#define HPCMEM_MPI_REPORT_H
#include <stddef.h>
#include <signal.h>
#include <stdint.h>
#include "record.h"

/* One node of the job, as its leader (lowest rank on the node) sends it. */
typedef struct {
  uint64_t index;                 /* 0..nodes-1, in the order of the leaders' ranks */
  uint64_t nranks;
  uint64_t peak_sum;              /* peak over time of the node's summed live bytes */
  uint64_t peak_sum_time;         /* job clock, start of the bin holding that peak */
  char host[64];
  hpcmem_agg_t agg[HPCMEM_REC_NFIELDS];
} hpcmem_node_t;

/* Everything the printers need; layer.c and exit.c fill it. */
typedef struct {
  const char *jobid;
  const char *source;             /* "MPI_Finalize", "exit", "MPI_Abort", "signal" */
  int signal;                     /* the fatal signal when source is "signal" */
  int approximate;                /* taken in a signal handler without a lock it could not get */
  int complete;                   /* 1: every rank's record is in (job report) */
  int mode;                       /* HPCMEM_REPORT_SUMMARY or HPCMEM_REPORT_FULL */
  int threshold_pct;              /* HPCMEM_IMBALANCE_THRESHOLD */
  int64_t rank;                   /* per-rank file: its rank; job report or lone process: -1 */
  int mpi;                        /* the process ran MPI_Init through libhpcmem */
  uint64_t nranks, nnodes;        /* of the whole job */
  const char *clock_sync;         /* how the ranks' clocks were aligned */
  const hpcmem_agg_t *job;        /* HPCMEM_REC_NFIELDS aggregates over recs */
  uint64_t job_peak_sum, job_peak_sum_time;
  const hpcmem_rec_t *recs;
  size_t nrecs;
  const hpcmem_node_t *nodes;
  size_t nnode_recs;
  uint64_t bin_ns;
  size_t nbins;
  const uint64_t *job_bins;       /* full mode: nbins values, else NULL */
  const uint64_t *node_bins;      /* full mode: nnode_recs * nbins, else NULL */
  const hpcmem_sample_t *samples; /* full mode, per-rank file: the raw timeline */
  size_t nsamples;
  uint64_t origin_ns;             /* local clock time of job time 0 */
} hpcmem_report_t;

/* Number of timeline bins of the job report. */
#define HPCMEM_REPORT_BINS 1024

/* "<dir>/hpcmem-report-<jobid>.json", or "...<jobid>.rank<R>.json" when
 * rank >= 0.  0, or -ENAMETOOLONG. */
int _hpcmem_report_path(char *buf, size_t len, const char *dir, const char *jobid, int64_t rank);

/* Write the JSON to path (through path.tmp + rename, so a reader never sees
 * half a file).  Creates missing directories.  0 or -errno; no message. */
int _hpcmem_report_write_json(const hpcmem_report_t *r, const char *path);

/* Print the banner to fd.  json_path: where the JSON went, or NULL. */
void _hpcmem_report_banner(const hpcmem_report_t *r, const char *json_path, int fd);

/* Write the JSON into HPCMEM_REPORT_DIR, then the banner if `banner`; an
 * unwritable directory gives one warning and the banner still prints. */
int _hpcmem_report_emit(const hpcmem_report_t *r, int banner);

/* Heavest node (largest peak of the summed live bytes), or 0. */
size_t _hpcmem_report_heaviest_node(const hpcmem_report_t *r);

/* ------------------------------------------------------------------ */
/* exit.c: the report of one rank, when the job report does not happen   */

typedef struct {
  volatile int mpi_started;       /* MPI_Init went through libhpcmem */
  volatile int done;              /* 1: a report (job or per-rank) was written or is being
                                     written; 2: the job report's collectives are running, and
                                     a fatal signal may still write the rank's summary (they may
                                     never end: another rank died); 0: neither */
  volatile int writer;            /* thread id of the thread writing a report, 0: none */
  int rank, size;                 /* MPI rank/size after MPI_Init */
  uint64_t origin_ns;             /* job time 0 on the local clock */
  uint64_t node;                  /* node index after MPI_Init */
  uint64_t nnodes;
  char jobid[64];                 /* rank 0's job id, same on every rank */
} hpcmem_report_state_t;

extern hpcmem_report_state_t _hpcmem_report_state;

/* Around writing a report: the writing thread's SIGTERM and SIGINT wait for
 * the end (a signal for the process goes to another thread, whose handler
 * waits for the writer: on_fatal), and its id is the writer's. */
void _hpcmem_report_writing(sigset_t *old);
void _hpcmem_report_written(const sigset_t *old);
/* Claim the report as its writer (_hpcmem_report_writing, then the claim):
 * 1 taken (end with _hpcmem_report_written), 0 not (nothing to undo). */
int _hpcmem_report_take(sigset_t *old);
/* Wait up to 2 s while another thread writes a report. */
void _hpcmem_report_wait_writer(void);

/* This process's report mode: hpcmem_report_mode()'s choice, else HPCMEM_REPORT. */
int _hpcmem_report_mode_local(void);

/* Public (proposed for hpcmem.h): choose the report mode of this process,
 * overriding HPCMEM_REPORT; 0 off, 1 summary, 2 full (the HPCMEM_REPORT
 * values).  Before MPI_Init, or in a program without MPI.
 * @return 0; -EINVAL for another mode; -EBUSY after MPI_Init (the ranks
 * agree on the mode there) or once the report was written. */
int hpcmem_report_mode(int mode);

/* Claim the one report of this process: 1 for the first caller (or the
 * first while the job report's collectives run, done 2), 0 after. */
int _hpcmem_report_claim(void);

/* Write this rank's own summary now (source: "exit", "MPI_Abort", "signal"),
 * unless a report was already written.  Heap-free. */
void _hpcmem_report_local(const char *source, int sig);

/* Catch fatal signals (and SIGTERM, which mpirun sends after MPI_Abort) to
 * write the per-rank summary first; the previous handlers run afterwards. */
void _hpcmem_report_catch_signals(void);

#endif
