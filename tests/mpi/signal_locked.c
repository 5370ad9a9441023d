/* The summary of a fatal signal that came while a lock it reads under was
 * held -- the faulting thread's own, as when it crashes inside a large free,
 * or SIGTERM arrives there:
 *   signal_locked TERM|SEGV [large|single|registry]
 * The main thread holds 40 MiB in large blocks, takes the lock as the
 * allocator would, and then gets the signal:
 *   large     the large-block tier's lock, with a second thread running (so
 *             the lock is a real one, heap/single.h);
 *   single    the same in a single-threaded process, which takes no lock but
 *             marks the section: reading the tier's lists there read them
 *             half relinked, and the summary said it was exact;
 *   registry  the thread caches' registry lock (a thread's start or end),
 *             with a second thread running.
 * The summary must come at once, marked approximate, and the process must
 * die of the signal; reading under the lock waited for ever (until the
 * summary's 5-second watchdog ended the process without one).
 * Built from libhpcmem-core and the summary's files (tests/mpi.inc), so it
 * can reach the tier and install the handlers as MPI_Init would. */
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "api/internal.h"
#include "heap/single.h"
#include "heap/tcache.h"
#include "report.h"

static void *idle(void *arg) {
  (void)arg;
  pause();
  return NULL;
}

int main(int argc, char **argv) {
  int segv = argc > 1 && strcmp(argv[1], "SEGV") == 0;
  const char *what = argc > 2 ? argv[2] : "large";
  int single = strcmp(what, "single") == 0, registry = strcmp(what, "registry") == 0;
  pthread_t t;
  if (!single && pthread_create(&t, NULL, idle, NULL) != 0) return 2;
  if (single != _hpcmem_single_threaded()) return 4;   /* the C library does not tell */
  static void *keep[40];
  for (int i = 0; i < 40; i++) memset(keep[i] = malloc(1 << 20), 1, 1 << 20);
  _hpcmem_report_catch_signals();
  if (registry) _hpcmem_tcache_fork_prepare();   /* takes the registry's lock */
  else _hpcmem_lock_st(&_hpcmem_large.lock);
  volatile int *volatile nowhere = NULL;   /* a volatile store: the compiler may not drop it */
  if (segv) *nowhere = 1;
  raise(SIGTERM);
  return 3;   /* not reached: the signal ends the process */
}
