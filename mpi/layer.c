/* The MPI layer: start after MPI_Init, the job report before MPI_Finalize.
 *
 * The report is one pass of collectives over the layer's own communicators:
 *   1. allreduce of the per-field aggregates (custom datatype + operator
 *      expanded from the record's field list) -> every rank knows the job's
 *      time span, rank 0 the job summary;
 *   2. reduce of the ranks' binned timelines, over the job and over each
 *      node -> the peak over time of the summed live bytes;
 *   3. reduce of the aggregates over each node -> per-node sums;
 *   4. gather of the per-rank records and of the node records to rank 0.
 * The rank's own record is taken before any of this, so the layer's own
 * allocations never show in the numbers it reports. */
#include "config.h"
#include "layer.h"
#include "api/internal.h"
#include "trace/trace.h"
#include "hpcmem_trace_format.h"
#include "report.h"
#include "segment/segment.h"
#include "util/job.h"
#include "util/log.h"
#include "util/options.h"
#include <errno.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static struct {
  int started;
  int mode;                  /* report mode agreed by all ranks at start */
  MPI_Comm world;            /* duplicate of MPI_COMM_WORLD */
  MPI_Comm shm;              /* ranks sharing memory with this one */
  MPI_Comm node;             /* ranks of this node in the report (shm, or a part of it) */
  MPI_Comm leaders;          /* lowest rank of every node; MPI_COMM_NULL elsewhere */
  int rank, size, node_rank, node_size;
  int node_part;             /* which part of the machine (HPCMEM_REPORT_NODE_SIZE), or -1 */
  int keyval;
  MPI_Datatype rec_type, agg_type, node_type;
  MPI_Op agg_op;
} L = {0, 0, MPI_COMM_NULL, MPI_COMM_NULL, MPI_COMM_NULL, MPI_COMM_NULL, 0, 1, 0, 1, -1,
       MPI_KEYVAL_INVALID, MPI_DATATYPE_NULL, MPI_DATATYPE_NULL, MPI_DATATYPE_NULL, MPI_OP_NULL};

MPI_Comm _hpcmem_mpi_node_comm(void) { return L.shm; }

/* ------------------------------------------------------------------ */
/* datatypes and the operator, from the record's field list             */

static void agg_op(void *in, void *inout, int *len, MPI_Datatype *type) {
  (void)type;
  _hpcmem_agg_merge_n((hpcmem_agg_t *)inout, (const hpcmem_agg_t *)in, (size_t)*len);
}

static int make_types(void) {
  int rc = PMPI_Type_contiguous((int)HPCMEM_REC_WORDS, MPI_UINT64_T, &L.rec_type);
  if (rc == MPI_SUCCESS) rc = PMPI_Type_commit(&L.rec_type);

  /* hpcmem_agg_t: 4 x uint64, 2 x int64, 2 x double */
  int alen[3] = {4, 2, 2};
  MPI_Aint adisp[3] = {offsetof(hpcmem_agg_t, min), offsetof(hpcmem_agg_t, min_rank),
                       offsetof(hpcmem_agg_t, mean)};
  MPI_Datatype atypes[3] = {MPI_UINT64_T, MPI_INT64_T, MPI_DOUBLE};
  MPI_Datatype agg_raw = MPI_DATATYPE_NULL;
  if (rc == MPI_SUCCESS) rc = PMPI_Type_create_struct(3, alen, adisp, atypes, &agg_raw);
  if (rc == MPI_SUCCESS) rc = PMPI_Type_create_resized(agg_raw, 0, sizeof(hpcmem_agg_t), &L.agg_type);
  if (rc == MPI_SUCCESS) rc = PMPI_Type_commit(&L.agg_type);
  if (agg_raw != MPI_DATATYPE_NULL) PMPI_Type_free(&agg_raw);

  /* hpcmem_node_t: 4 x uint64, char host[64], one aggregate per field */
  int nlen[3] = {4, (int)sizeof(((hpcmem_node_t *)0)->host), HPCMEM_REC_NFIELDS};
  MPI_Aint ndisp[3] = {offsetof(hpcmem_node_t, index), offsetof(hpcmem_node_t, host),
                       offsetof(hpcmem_node_t, agg)};
  MPI_Datatype ntypes[3] = {MPI_UINT64_T, MPI_CHAR, L.agg_type};
  MPI_Datatype node_raw = MPI_DATATYPE_NULL;
  if (rc == MPI_SUCCESS) rc = PMPI_Type_create_struct(3, nlen, ndisp, ntypes, &node_raw);
  if (rc == MPI_SUCCESS) rc = PMPI_Type_create_resized(node_raw, 0, sizeof(hpcmem_node_t), &L.node_type);
  if (rc == MPI_SUCCESS) rc = PMPI_Type_commit(&L.node_type);
  if (node_raw != MPI_DATATYPE_NULL) PMPI_Type_free(&node_raw);

  if (rc == MPI_SUCCESS) rc = PMPI_Op_create(agg_op, 1, &L.agg_op);
  return rc;
}

static void free_all(void) {
  if (L.rec_type != MPI_DATATYPE_NULL) PMPI_Type_free(&L.rec_type);
  if (L.agg_type != MPI_DATATYPE_NULL) PMPI_Type_free(&L.agg_type);
  if (L.node_type != MPI_DATATYPE_NULL) PMPI_Type_free(&L.node_type);
  if (L.agg_op != MPI_OP_NULL) PMPI_Op_free(&L.agg_op);
  if (L.leaders != MPI_COMM_NULL) PMPI_Comm_free(&L.leaders);
  if (L.node != MPI_COMM_NULL && L.node != L.shm) PMPI_Comm_free(&L.node);
  L.node = MPI_COMM_NULL;
  if (L.shm != MPI_COMM_NULL) PMPI_Comm_free(&L.shm);
  if (L.world != MPI_COMM_NULL) PMPI_Comm_free(&L.world);
  if (L.keyval != MPI_KEYVAL_INVALID) PMPI_Comm_free_keyval(&L.keyval);
}

/* ------------------------------------------------------------------ */
/* start                                                                */

/* MPI_Finalize frees MPI_COMM_SELF first, while MPI still works: an
 * attribute on it catches a finalize that did not come through our
 * wrappers (a Fortran binding calling PMPI_Finalize, for instance). */
static int on_self_free(MPI_Comm comm, int keyval, void *value, void *extra) {
  (void)comm; (void)keyval; (void)value; (void)extra;
  _hpcmem_mpi_finish();
  return MPI_SUCCESS;
}

static int start_comms(void) {
  int rc = PMPI_Comm_dup(MPI_COMM_WORLD, &L.world);
  if (rc != MPI_SUCCESS) return rc;
  /* a failure inside the layer must not abort the application */
  PMPI_Comm_set_errhandler(L.world, MPI_ERRORS_RETURN);
  PMPI_Comm_rank(L.world, &L.rank);
  PMPI_Comm_size(L.world, &L.size);
  rc = PMPI_Comm_split_type(L.world, MPI_COMM_TYPE_SHARED, L.rank, MPI_INFO_NULL, &L.shm);
  if (rc != MPI_SUCCESS) return rc;
  int shm_rank, shm_size;
  PMPI_Comm_rank(L.shm, &shm_rank);
  PMPI_Comm_size(L.shm, &shm_size);
  /* HPCMEM_REPORT_NODE_SIZE cuts the machine into smaller report nodes; the
   * node leader's value holds for the whole machine */
  int per = (int)_hpcmem_opt(REPORT_NODE_SIZE);
  rc = PMPI_Bcast(&per, 1, MPI_INT, 0, L.shm);
  if (rc != MPI_SUCCESS) return rc;
  if (per > 0 && per < shm_size) {
    L.node_part = shm_rank / per;
    rc = PMPI_Comm_split(L.shm, L.node_part, shm_rank, &L.node);
    if (rc != MPI_SUCCESS) return rc;
  } else {
    L.node = L.shm;
  }
  PMPI_Comm_rank(L.node, &L.node_rank);
  PMPI_Comm_size(L.node, &L.node_size);
  rc = PMPI_Comm_split(L.world, L.node_rank == 0 ? 0 : MPI_UNDEFINED, L.rank, &L.leaders);
  if (rc != MPI_SUCCESS) return rc;
  /* node index = the leader's rank among the leaders (node 0 holds rank 0) */
  uint64_t nodeinfo[2] = {0, 0};
  if (L.leaders != MPI_COMM_NULL) {
    int lr, ls;
    PMPI_Comm_rank(L.leaders, &lr);
    PMPI_Comm_size(L.leaders, &ls);
    nodeinfo[0] = (uint64_t)lr; nodeinfo[1] = (uint64_t)ls;
  }
  rc = PMPI_Bcast(nodeinfo, 2, MPI_UINT64_T, 0, L.node);
  _hpcmem_report_state.node = nodeinfo[0];
  _hpcmem_report_state.nnodes = nodeinfo[1];
  return rc;
}

/* Job clock: time 0 is the earliest allocator start of any rank, counted
 * back from a barrier that all ranks leave at (nearly) the same instant.
 * The barrier's exit skew (microseconds) is the alignment's error. */
static int start_clock_and_mode(void) {
  int rc = PMPI_Barrier(L.world);
  if (rc != MPI_SUCCESS) return rc;
  rc = PMPI_Barrier(L.world);   /* the first one may set up connections */
  uint64_t sync = hpcmem_clock_ns();
  uint64_t start = hpcmem_start_ns();
  /* the report mode is agreed (the highest any rank asks for): the
   * finalize collectives must run on every rank or on none */
  int64_t mine[2] = {(int64_t)(sync > start && start ? sync - start : 0), (int64_t)_hpcmem_report_mode_local()};
  int64_t job[2];
  if (rc == MPI_SUCCESS) rc = PMPI_Allreduce(mine, job, 2, MPI_INT64_T, MPI_MAX, L.world);
  if (rc != MPI_SUCCESS) return rc;
  _hpcmem_report_state.origin_ns = sync - (uint64_t)job[0];
  L.mode = (int)job[1];
  return MPI_SUCCESS;
}

int _hpcmem_mpi_start(void) {
  if (L.started) return 0;
  if (_hpcmem_on_system()) return -ENOMEM;   /* libhpcmem did not start (api/alloc.c): no layer, no report */
  if (!_hpcmem_mpi_linked()) return -ENOSYS;   /* MPI came after us (pmpi.c) */
  _hpcmem_options_init();
  if (!_hpcmem_job.jobid[0]) _hpcmem_job_init();
  _hpcmem_job.from_launcher = 1;   /* an MPI job from here on, even a singleton: HPCMEM_REPORT=auto reports */
  int rc = start_comms();
  if (rc == MPI_SUCCESS) rc = _hpcmem_mpi_segment_start(L.shm);
  /* rank 0's job id names every file of the job, even when the launcher
   * gave none and each rank made up its own from its pid */
  char jobid[64];
  memcpy(jobid, _hpcmem_job.jobid, sizeof jobid);
  if (rc == MPI_SUCCESS) rc = PMPI_Bcast(jobid, (int)sizeof jobid, MPI_CHAR, 0, L.world);
  if (rc == MPI_SUCCESS) rc = start_clock_and_mode();
  if (rc == MPI_SUCCESS) rc = make_types();
  if (rc == MPI_SUCCESS)
    rc = PMPI_Comm_create_keyval(MPI_COMM_NULL_COPY_FN, on_self_free, &L.keyval, NULL);
  if (rc == MPI_SUCCESS) rc = PMPI_Comm_set_attr(MPI_COMM_SELF, L.keyval, NULL);
  if (rc != MPI_SUCCESS) {
    _hpcmem_seg_shared_fail(ENODEV);
    _hpcmem_warn("MPI layer not started (MPI error %d): no job report at MPI_Finalize", rc);
    free_all();
    return -EIO;
  }
  jobid[sizeof jobid - 1] = 0;
  hpcmem_report_state_t *s = &_hpcmem_report_state;
  memcpy(s->jobid, jobid, sizeof s->jobid);
  s->rank = L.rank;
  s->size = L.size;
  _hpcmem_job.rank = L.rank;
  _hpcmem_job.size = L.size;
  s->mpi_started = 1;
  L.started = 1;
  _hpcmem_place_share_start();   /* node-wide placement accounting (place_share.c) */
  /* the trace file learns the real rank and the job's common time origin */
  if (_hpcmem_trace_enabled)
    _hpcmem_trace_set_rank(L.rank, L.size, -(int64_t)s->origin_ns);
  /* after PMPI_Init, so that Open MPI's own handlers are the ones we chain to */
  if (L.mode != HPCMEM_REPORT_OFF) _hpcmem_report_catch_signals();
  return 0;
}

/* ------------------------------------------------------------------ */
/* the job report                                                       */

typedef struct {
  hpcmem_rec_t rec;
  hpcmem_agg_t mine[HPCMEM_REC_NFIELDS];
  hpcmem_agg_t job[HPCMEM_REC_NFIELDS];
  hpcmem_node_t node;
  uint64_t bins[HPCMEM_REPORT_BINS];
  uint64_t job_bins[HPCMEM_REPORT_BINS];
  uint64_t node_bins[HPCMEM_REPORT_BINS];
  uint64_t bin_ns;
  const hpcmem_sample_t *samples;   /* the timeline as of the record */
  size_t nsamples;
} work_t;

static void peak_of(const uint64_t *bins, uint64_t bin_ns, uint64_t *peak, uint64_t *when) {
  size_t best = 0;
  for (size_t i = 1; i < HPCMEM_REPORT_BINS; i++)
    if (bins[i] > bins[best]) best = i;
  *peak = bins[best];
  *when = best * bin_ns;
}

/* steps 1-3: aggregates and timelines; the node record on each leader */
static int reduce(work_t *w) {
  int rc = PMPI_Allreduce(w->mine, w->job, HPCMEM_REC_NFIELDS, L.agg_type, L.agg_op, L.world);
  if (rc != MPI_SUCCESS) return rc;
  w->bin_ns = _hpcmem_timeline_bin_ns(w->job[HPCMEM_REC_end_ns].max, HPCMEM_REPORT_BINS);
  _hpcmem_timeline_bin(w->samples, w->nsamples, _hpcmem_report_state.origin_ns, w->rec.v[HPCMEM_REC_end_ns],
                       w->bin_ns, HPCMEM_REPORT_BINS, w->bins);
  /* the recorded peak is exact: never let the sampling step hide it */
  _hpcmem_timeline_point(w->rec.v[HPCMEM_REC_peak_time_ns], w->rec.v[HPCMEM_REC_peak_bytes],
                         w->bin_ns, HPCMEM_REPORT_BINS, w->bins);
  rc = PMPI_Reduce(w->bins, w->job_bins, HPCMEM_REPORT_BINS, MPI_UINT64_T, MPI_SUM, 0, L.world);
  if (rc == MPI_SUCCESS)
    rc = PMPI_Reduce(w->bins, w->node_bins, HPCMEM_REPORT_BINS, MPI_UINT64_T, MPI_SUM, 0, L.node);
  memset(&w->node, 0, sizeof w->node);
  if (rc == MPI_SUCCESS)
    rc = PMPI_Reduce(w->mine, w->node.agg, HPCMEM_REC_NFIELDS, L.agg_type, L.agg_op, 0, L.node);
  if (L.node_rank == 0) {
    w->node.index = _hpcmem_report_state.node;
    w->node.nranks = (uint64_t)L.node_size;
    if (L.node_part >= 0)
      snprintf(w->node.host, sizeof w->node.host, "%.50s:%d", _hpcmem_job.hostname, L.node_part);
    else
      snprintf(w->node.host, sizeof w->node.host, "%s", _hpcmem_job.hostname);
    peak_of(w->node_bins, w->bin_ns, &w->node.peak_sum, &w->node.peak_sum_time);
  }
  return rc;
}

/* step 4 and the output; recs/nodes/node_bins are only read on rank 0 */
static int gather_and_emit(work_t *w) {
  int full = L.mode == HPCMEM_REPORT_FULL;
  hpcmem_rec_t *recs = NULL;
  hpcmem_node_t *nodes = NULL;
  uint64_t *node_bins = NULL;
  uint64_t nnodes = _hpcmem_report_state.nnodes;
  if (L.rank == 0) {
    recs = calloc((size_t)L.size, sizeof *recs);
    nodes = calloc((size_t)nnodes, sizeof *nodes);
    if (full) node_bins = calloc((size_t)nnodes * HPCMEM_REPORT_BINS, sizeof *node_bins);
  }
  /* a failed allocation on rank 0 must not leave the others in a collective */
  int ok = L.rank != 0 || (recs && nodes && (!full || node_bins));
  int rc = PMPI_Bcast(&ok, 1, MPI_INT, 0, L.world);
  if (rc == MPI_SUCCESS && !ok) rc = MPI_ERR_NO_MEM;
  if (rc == MPI_SUCCESS)
    rc = PMPI_Gather(&w->rec, 1, L.rec_type, recs, 1, L.rec_type, 0, L.world);
  if (rc == MPI_SUCCESS && L.leaders != MPI_COMM_NULL) {
    rc = PMPI_Gather(&w->node, 1, L.node_type, nodes, 1, L.node_type, 0, L.leaders);
    if (rc == MPI_SUCCESS && full)
      rc = PMPI_Gather(w->node_bins, HPCMEM_REPORT_BINS, MPI_UINT64_T, node_bins,
                       HPCMEM_REPORT_BINS, MPI_UINT64_T, 0, L.leaders);
  }
  /* Rank 0 writes the job report; a signal waits for it.  (It writes it
   * also when a signal handler wrote the rank's summary meanwhile and the
   * program carried on.) */
  sigset_t old;
  if (rc == MPI_SUCCESS && L.rank == 0) {
    if (!_hpcmem_report_take(&old)) _hpcmem_report_writing(&old);
    hpcmem_report_t r;
    memset(&r, 0, sizeof r);
    r.jobid = _hpcmem_report_state.jobid;
    r.source = "MPI_Finalize";
    r.complete = 1;
    r.mpi = 1;
    r.mode = L.mode;
    r.threshold_pct = (int)_hpcmem_opt(IMBALANCE_THRESHOLD);
    r.rank = -1;
    r.nranks = (uint64_t)L.size;
    r.nnodes = nnodes;
    r.clock_sync = "barrier after MPI_Init";
    r.job = w->job;
    peak_of(w->job_bins, w->bin_ns, &r.job_peak_sum, &r.job_peak_sum_time);
    r.recs = recs;
    r.nrecs = (size_t)L.size;
    r.nodes = nodes;
    r.nnode_recs = (size_t)nnodes;
    r.bin_ns = w->bin_ns;
    r.nbins = HPCMEM_REPORT_BINS;
    r.job_bins = full ? w->job_bins : NULL;
    r.node_bins = full ? node_bins : NULL;
    r.origin_ns = _hpcmem_report_state.origin_ns;
    _hpcmem_report_emit(&r, 1);
    _hpcmem_report_written(&old);
  }
  /* The other ranks stay ready to write their own summary (done 2) until
   * rank 0 says the job report is written: it may die before. */
  if (rc == MPI_SUCCESS) rc = PMPI_Bcast(&ok, 1, MPI_INT, 0, L.world);
  free(recs);
  free(nodes);
  free(node_bins);
  return rc;
}

void _hpcmem_mpi_finish(void) {
  if (_hpcmem_trace_enabled) _hpcmem_trace_flush_all(HMT_FLUSH_FINALIZE);
  if (!L.started) return;
  L.started = 0;
  /* Taken whatever the answer: a rank whose summary a signal handler
   * already wrote (and whose program carried on) must still take part in
   * the collectives, or the other ranks would wait for it forever.  While
   * they run (2), a fatal signal may still write the rank's summary: they
   * may never end (another rank died, mpirun sends SIGTERM). */
  int none = 0;
  __atomic_compare_exchange_n(&_hpcmem_report_state.done, &none, 2, 0, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE);
  if (L.mode != HPCMEM_REPORT_OFF) {
    /* static: the snapshot below must come before any allocation of ours,
     * and the work area (~30 KiB) is no business of the application's stack */
    static work_t w;
    _hpcmem_rec_sample(&w.rec, L.rank, _hpcmem_report_state.node, _hpcmem_report_state.origin_ns, 0);
    w.nsamples = _hpcmem_rec_timeline(HPCMEM_TL_FINALIZE, &w.samples, 0, NULL);
    _hpcmem_agg_from_rec(w.mine, &w.rec);
    int rc = reduce(&w);
    if (rc == MPI_SUCCESS) rc = gather_and_emit(&w);
    if (rc != MPI_SUCCESS) {
      _hpcmem_warn("memory report failed (MPI error %d)", rc);
      int two = 2;               /* no job report: the rank's summary at exit, abort or signal */
      __atomic_compare_exchange_n(&_hpcmem_report_state.done, &two, 0, 0, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE);
    }
  }
  int two = 2;                  /* the report is over (or off) */
  __atomic_compare_exchange_n(&_hpcmem_report_state.done, &two, 1, 0, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE);
  _hpcmem_place_share_stop();   /* collective on the node communicator: before free_all */
  free_all();
}
