/* The rank's own summary when the job report at MPI_Finalize does not
 * happen: a program without MPI, a rank that exits without MPI_Finalize,
 * MPI_Abort, or a fatal signal.  Every path claims the one report of the
 * process first, so nothing is written twice.  Heap-free: the record and
 * the timeline live in static storage. */
#include "config.h"
#include "api/internal.h"
#include "report.h"
#include "prim/prim.h"
#include "util/job.h"
#include "util/options.h"
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <poll.h>
#include <string.h>
#include <unistd.h>

hpcmem_report_state_t _hpcmem_report_state;

/* -1: HPCMEM_REPORT decides; else the mode hpcmem_report_mode() chose */
static int mode_override = -1;

/* HPCMEM_REPORT=auto (the default): a summary for MPI ranks (MPI_Init was
 * called, or an MPI launcher started the process), nothing for a lone process,
 * so that LD_PRELOAD over a shell pipeline does not leave a report per command.
 * A lone program asks for its report with HPCMEM_REPORT=summary|full. */
int _hpcmem_report_mode_local(void) {
  _hpcmem_options_init();
  int m = __atomic_load_n(&mode_override, __ATOMIC_RELAXED);
  if (m >= 0) return m;
  m = (int)_hpcmem_opt(REPORT);
  if (m != HPCMEM_REPORT_AUTO) return m;
  if (!_hpcmem_job.jobid[0]) _hpcmem_job_init();
  return _hpcmem_report_state.mpi_started || _hpcmem_job.from_launcher ? HPCMEM_REPORT_SUMMARY : HPCMEM_REPORT_OFF;
}

__attribute__((visibility("default"))) int hpcmem_report_mode(int mode) {
  if (mode < HPCMEM_REPORT_OFF || mode > HPCMEM_REPORT_FULL) return -EINVAL;
  /* an MPI job agrees on its mode at MPI_Init; a written report is final */
  if (_hpcmem_report_state.mpi_started || _hpcmem_report_state.done) return -EBUSY;
  __atomic_store_n(&mode_override, mode, __ATOMIC_RELAXED);
  return 0;
}

int _hpcmem_report_claim(void) {
  int v = __atomic_load_n(&_hpcmem_report_state.done, __ATOMIC_ACQUIRE);
  while (v != 1)
    if (__atomic_compare_exchange_n(&_hpcmem_report_state.done, &v, 1, 0, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE))
      return 1;
  return 0;
}

/* the signals mpirun stops a rank with wait while this thread writes */
static void hold_stop_signals(sigset_t *old) {
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGTERM);
  sigaddset(&set, SIGINT);
  pthread_sigmask(SIG_BLOCK, &set, old);
}

void _hpcmem_report_writing(sigset_t *old) {
  hold_stop_signals(old);
  __atomic_store_n(&_hpcmem_report_state.writer, _hpcmem_prim_gettid(), __ATOMIC_RELEASE);
}

void _hpcmem_report_written(const sigset_t *old) {
  __atomic_store_n(&_hpcmem_report_state.writer, 0, __ATOMIC_RELEASE);
  pthread_sigmask(SIG_SETMASK, old, NULL);   /* a SIGTERM that came meanwhile is taken now */
}

/* The writer's slot first, then the claim: whoever finds the report
 * claimed also finds its writer (a signal handler, the exit path) and can
 * wait for it. */
int _hpcmem_report_take(sigset_t *old) {
  hold_stop_signals(old);
  int none = 0;
  if (__atomic_compare_exchange_n(&_hpcmem_report_state.writer, &none, _hpcmem_prim_gettid(), 0,
                                  __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE)) {
    if (_hpcmem_report_claim()) return 1;
    __atomic_store_n(&_hpcmem_report_state.writer, 0, __ATOMIC_RELEASE);
  }
  pthread_sigmask(SIG_SETMASK, old, NULL);
  return 0;
}

void _hpcmem_report_wait_writer(void) {
  int me = _hpcmem_prim_gettid();
  for (int i = 0; i < 2000; i++) {
    int w = __atomic_load_n(&_hpcmem_report_state.writer, __ATOMIC_ACQUIRE);
    if (!w || w == me) return;
    poll(NULL, 0, 1);
  }
}

void _hpcmem_report_local(const char *source, int sig) {
  static hpcmem_rec_t rec;
  static hpcmem_agg_t agg[HPCMEM_REC_NFIELDS];
  static hpcmem_node_t node;
  hpcmem_report_state_t *s = &_hpcmem_report_state;

  int mode = _hpcmem_report_mode_local();
  if (mode == HPCMEM_REPORT_OFF || _hpcmem_on_system()) return;   /* on_system: nothing of ours to report */
  sigset_t old;
  if (!_hpcmem_report_take(&old)) {
    _hpcmem_report_wait_writer();    /* another thread writes it: the exit or the abort waits */
    return;
  }
  if (!_hpcmem_job.jobid[0]) _hpcmem_job_init();

  int mpi = s->mpi_started;
  int64_t rank = mpi ? s->rank : _hpcmem_job.rank;
  uint64_t origin = mpi ? s->origin_ns : hpcmem_start_ns();
  /* in a signal handler no lock is waited for: the signal may have come
   * while this thread held one (a crash inside the allocator) */
  int approx = _hpcmem_rec_sample(&rec, rank, mpi ? s->node : 0, origin, sig != 0);
  _hpcmem_agg_from_rec(agg, &rec);

  memset(&node, 0, sizeof node);
  node.index = rec.node;
  node.nranks = 1;
  node.peak_sum = rec.v[HPCMEM_REC_peak_bytes];
  node.peak_sum_time = rec.v[HPCMEM_REC_peak_time_ns];
  memcpy(node.host, _hpcmem_job.hostname, sizeof node.host);
  node.host[sizeof node.host - 1] = 0;
  memcpy(node.agg, agg, sizeof agg);

  hpcmem_report_t r;
  memset(&r, 0, sizeof r);
  r.jobid = mpi ? s->jobid : _hpcmem_job.jobid;
  r.source = source;
  r.signal = sig;
  r.rank = rank;
  /* a lone process is a whole job of one; a rank alone is only part of one */
  r.complete = rank < 0;
  r.mode = mode;
  r.threshold_pct = (int)_hpcmem_opt(IMBALANCE_THRESHOLD);
  r.mpi = mpi;
  r.nranks = mpi ? (uint64_t)s->size : (uint64_t)_hpcmem_job.size;
  r.nnodes = mpi ? s->nnodes : (rank < 0 ? 1 : 0);
  r.clock_sync = mpi ? "barrier after MPI_Init" : "none (one process)";
  r.job = agg;
  r.job_peak_sum = node.peak_sum;
  r.job_peak_sum_time = node.peak_sum_time;
  r.recs = &rec;
  r.nrecs = 1;
  r.nodes = &node;
  r.nnode_recs = 1;
  r.origin_ns = origin;
  if (r.mode == HPCMEM_REPORT_FULL) r.nsamples = _hpcmem_rec_timeline(HPCMEM_TL_EXIT, &r.samples, sig != 0, &approx);
  r.approximate = approx;
  _hpcmem_report_emit(&r, 1);
  _hpcmem_report_written(&old);
}

/* ------------------------------------------------------------------ */
/* fatal signals                                                        */

static const int caught[] = {SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGABRT, SIGTERM, SIGINT};
#define NCAUGHT (sizeof caught / sizeof caught[0])
static struct sigaction previous[NCAUGHT];

static volatile sig_atomic_t fatal_sig;

/* The summary got stuck (a crash inside the allocator may leave a lock
 * held): end the process with the signal it was dying of, so that neither
 * the exit status nor a core dump changes because of the report. */
static void on_watchdog(int unused) {
  (void)unused;
  int sig = fatal_sig;
  signal(sig, SIG_DFL);
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, sig);
  raise(sig);
  sigprocmask(SIG_UNBLOCK, &set, NULL);
  _exit(128 + sig);
}

static void on_fatal(int sig, siginfo_t *info, void *ctx) {
  int saved_errno = errno;           /* a chained handler may return to the program */
  fatal_sig = sig;
  struct sigaction wd, old_wd;
  memset(&wd, 0, sizeof wd);
  wd.sa_handler = on_watchdog;
  sigemptyset(&wd.sa_mask);
  sigaction(SIGALRM, &wd, &old_wd);
  unsigned pending_alarm = alarm(5);
  /* Another thread writing the report (the exit path's summary, the job
   * report) is waited for, up to 2 s: dying now would cut it off. */
  _hpcmem_report_local("signal", sig);
  _hpcmem_report_wait_writer();
  alarm(pending_alarm);
  sigaction(SIGALRM, &old_wd, NULL);
  for (size_t i = 0; i < NCAUGHT; i++) {
    if (caught[i] != sig) continue;
    struct sigaction *old = &previous[i];
    if ((old->sa_flags & SA_SIGINFO) && old->sa_sigaction) {
      old->sa_sigaction(sig, info, ctx);
    } else if (old->sa_handler != SIG_DFL && old->sa_handler != SIG_IGN) {
      old->sa_handler(sig);
    } else {
      /* the default action, once this handler returns and unblocks sig */
      sigaction(sig, old, NULL);
      raise(sig);
    }
    errno = saved_errno;
    return;
  }
  errno = saved_errno;
}

void _hpcmem_report_catch_signals(void) {
  static int done;
  if (__atomic_exchange_n(&done, 1, __ATOMIC_ACQ_REL)) return;
  for (size_t i = 0; i < NCAUGHT; i++) {
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_sigaction = on_fatal;
    sa.sa_flags = SA_SIGINFO | SA_ONSTACK;
    sigemptyset(&sa.sa_mask);
    if (sigaction(caught[i], NULL, &previous[i]) != 0) continue;
    /* a signal the program ignores stays ignored */
    if (!(previous[i].sa_flags & SA_SIGINFO) && previous[i].sa_handler == SIG_IGN) continue;
    sigaction(caught[i], &sa, NULL);
  }
}

/* ------------------------------------------------------------------ */
/* exit                                                                 */

/* a forked child is not a rank of its own: its exit must not overwrite
 * the parent's summary */
static void child_after_fork(void) {
  _hpcmem_report_state.done = 1;
  _hpcmem_report_state.writer = 0;   /* a thread of the parent's, writing at the fork */
}

__attribute__((constructor)) static void report_init(void) {
  pthread_atfork(NULL, NULL, child_after_fork);
}

__attribute__((destructor)) static void report_at_exit(void) {
  _hpcmem_report_local("exit", 0);
}
