/* The summary of a fatal signal that came while a lock of the large-block
 * tier was held -- the faulting thread's own, as when it crashes inside a
 * large free, or SIGTERM arrives there:
 *   signal_locked TERM|SEGV
 * A second thread runs (so the tier's lock is a real one, heap/single.h),
 * the main thread holds 40 MiB in large blocks, takes the tier's lock as a
 * free in progress would, and then gets the signal.  The summary must come
 * at once, marked approximate, and the process must die of the signal;
 * reading the tier under its lock waited for ever (until the summary's
 * 5-second watchdog ended the process without one).
 * Built from libhpcmem-core and the summary's files (tests/mpi.inc), so it
 * can reach the tier and install the handlers as MPI_Init would. */
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "api/internal.h"
#include "report.h"

static void *idle(void *arg) {
  (void)arg;
  pause();
  return NULL;
}

int main(int argc, char **argv) {
  int segv = argc > 1 && strcmp(argv[1], "SEGV") == 0;
  pthread_t t;
  if (pthread_create(&t, NULL, idle, NULL) != 0) return 2;
  static void *keep[40];
  for (int i = 0; i < 40; i++) memset(keep[i] = malloc(1 << 20), 1, 1 << 20);
  _hpcmem_report_catch_signals();
  _hpcmem_lock(&_hpcmem_large.lock);
  int *volatile nowhere = NULL;
  if (segv) *nowhere = 1;
  raise(SIGTERM);
  _hpcmem_unlock(&_hpcmem_large.lock);
  return 3;   /* not reached: the signal ends the process */
}
