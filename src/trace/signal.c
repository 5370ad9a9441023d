/* Fatal signals: write the buffers, then let the signal do what it would
 * have done without us -- the previous handler runs, or the default action
 * kills the process with the same signal (and core dump).  A fault is not
 * raised again: returning re-executes the faulting instruction, which
 * faults again under the default action, exactly as without the recorder.
 * Installed at start-up and again at MPI_Init (MPI libraries install
 * their own handlers there; ours then runs first and chains to theirs). */
#include "config.h"
#include "trace/trace.h"
#include <errno.h>
#include <signal.h>
#include <string.h>
#include <time.h>

static const int sigs[] = {SIGTERM, SIGINT, SIGHUP, SIGQUIT, SIGSEGV, SIGBUS, SIGABRT, SIGFPE, SIGILL};
#define NSIGS (int)(sizeof sigs / sizeof sigs[0])

static struct sigaction prev[NSIGS];
static int installed[NSIGS];
static volatile int flushing;
static __thread int t_chaining, t_flushing;

/* how long a second fatal signal waits for the first one's flush */
#define FLUSH_WAIT_NS (5ull * 1000 * 1000 * 1000)

static int slot_of(int sig) {
  for (int i = 0; i < NSIGS; i++)
    if (sigs[i] == sig) return i;
  return -1;
}

static int is_fault(int sig) { return sig == SIGSEGV || sig == SIGBUS || sig == SIGFPE || sig == SIGILL; }

static void default_action(int sig, const siginfo_t *si) {
  struct sigaction dfl;
  memset(&dfl, 0, sizeof dfl);
  dfl.sa_handler = SIG_DFL;
  sigemptyset(&dfl.sa_mask);
  sigaction(sig, &dfl, NULL);
  /* the signal is blocked while we run: it acts when we return */
  if (!is_fault(sig) || !si || si->si_code <= 0) raise(sig);
}

static void handler(int sig, siginfo_t *si, void *uc) {
  int saved_errno = errno;
  int i = slot_of(sig);
  if (t_chaining || i < 0) {
    /* a chain that leads back to us: end it with the default action */
    default_action(sig, si);
    errno = saved_errno;
    return;
  }
  if (!__atomic_exchange_n(&flushing, 1, __ATOMIC_ACQ_REL)) {
    t_flushing = 1;
    _hpcmem_trace_flush_all(HMT_FLUSH_SIGNAL + sig);
    t_flushing = 0;
    __atomic_store_n(&flushing, 0, __ATOMIC_RELEASE);
  } else if (!t_flushing) {
    /* another thread's fatal signal is writing the buffers (two threads
     * that fault at once): the default action would end the process in
     * the middle of it, so let it finish first, for at most 5 s.  The
     * same thread's signal during its own flush goes on at once. */
    struct timespec t0, now, nap = {0, 1000000};
    clock_gettime(CLOCK_MONOTONIC, &t0);
    while (__atomic_load_n(&flushing, __ATOMIC_ACQUIRE)) {
      clock_gettime(CLOCK_MONOTONIC, &now);
      if ((uint64_t)(now.tv_sec - t0.tv_sec) * 1000000000ull + (uint64_t)now.tv_nsec - (uint64_t)t0.tv_nsec > FLUSH_WAIT_NS) break;
      nanosleep(&nap, NULL);
    }
  }
  struct sigaction *p = &prev[i];
  if ((p->sa_flags & SA_SIGINFO) && p->sa_sigaction) {
    t_chaining = 1;
    p->sa_sigaction(sig, si, uc);
    t_chaining = 0;
  } else if (p->sa_handler == SIG_IGN) {
    /* nothing: it was ignored before */
  } else if (p->sa_handler != SIG_DFL) {
    t_chaining = 1;
    p->sa_handler(sig);
    t_chaining = 0;
  } else {
    default_action(sig, si);
  }
  errno = saved_errno;
}

void _hpcmem_trace_signals_install(void) {
  for (int i = 0; i < NSIGS; i++) {
    struct sigaction cur;
    if (sigaction(sigs[i], NULL, &cur) != 0) continue;
    if ((cur.sa_flags & SA_SIGINFO) && cur.sa_sigaction == handler) continue;
    if (!(cur.sa_flags & SA_SIGINFO) && cur.sa_handler == SIG_IGN) continue;  /* keep it ignored */
    struct sigaction act;
    memset(&act, 0, sizeof act);
    act.sa_sigaction = handler;
    act.sa_flags = SA_SIGINFO | SA_ONSTACK | SA_RESTART;
    sigfillset(&act.sa_mask);
    prev[i] = cur;
    if (sigaction(sigs[i], &act, NULL) == 0) installed[i] = 1;
  }
}

void _hpcmem_trace_signals_uninstall(void) {
  for (int i = 0; i < NSIGS; i++) {
    struct sigaction cur;
    if (!installed[i] || sigaction(sigs[i], NULL, &cur) != 0) continue;
    if ((cur.sa_flags & SA_SIGINFO) && cur.sa_sigaction == handler) sigaction(sigs[i], &prev[i], NULL);
    installed[i] = 0;
  }
}
