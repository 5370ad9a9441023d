/* MPI ranks that never reach MPI_Finalize.  Rank r allocates (r+1)*MIB MiB
 * (one large block, touched) and keeps it; then:
 *   no_finalize exit MIB    every rank returns from main without MPI_Finalize
 *   no_finalize abort MIB   rank 1 calls MPI_Abort; mpirun kills the others
 *   no_finalize segv MIB    rank 2 dies of SIGSEGV; mpirun kills the others
 *   no_finalize fatal MIB   rank 1 sends to a rank that does not exist:
 *                           MPI_ERRORS_ARE_FATAL, and Open MPI ends it with
 *                           _exit (no summary: tests/trace/test_mpi_abort.sh
 *                           checks its trace); mpirun kills the others
 * Each rank's own summary must still be written.
 *   no_finalize exitterm MIB  every rank returns from main without
 *                           MPI_Finalize and a thread of its own sends the
 *                           process SIGTERM at once (what mpirun does to the
 *                           ranks still running): the exit path's summary is
 *                           being written when the signal comes
 *   no_finalize finwait MIB the ranks but rank 1 enter MPI_Finalize and wait
 *                           in the report's collectives; rank 1 dies of
 *                           SIGSEGV a second later, mpirun kills the others
 *   no_finalize caught MIB  the program handles SIGINT itself (installed
 *                           before MPI_Init); rank 1 gets one, writes its
 *                           summary, carries on, and all ranks do reach
 *                           MPI_Finalize: the job report must still come.
 * In every mode hpcmem_report_mode() must refuse to change the mode after
 * MPI_Init (exit status 6 otherwise). */
#include <mpi.h>
#include <errno.h>
#include <hpcmem.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* public API, declared here until include/hpcmem.h carries it */
int hpcmem_report_mode(int mode);

static volatile sig_atomic_t interrupted;
static void on_sigint(int sig) { (void)sig; interrupted = 1; }

static volatile int leaving;
static void *terminator(void *arg) {
  (void)arg;
  while (!__atomic_load_n(&leaving, __ATOMIC_ACQUIRE)) usleep(50);
  kill(getpid(), SIGTERM);
  return NULL;
}
static void leave(void) { __atomic_store_n(&leaving, 1, __ATOMIC_RELEASE); }

int main(int argc, char **argv) {
  int rank;
  if (argc > 1 && strcmp(argv[1], "caught") == 0) signal(SIGINT, on_sigint);
  MPI_Init(&argc, &argv);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  /* the ranks agreed on the report mode at MPI_Init: too late to change it */
  if (hpcmem_report_mode(0) != -EBUSY) return 6;
  const char *how = argc > 1 ? argv[1] : "exit";
  size_t mib = argc > 2 ? strtoul(argv[2], NULL, 10) : 16;
  size_t bytes = (size_t)(rank + 1) * mib << 20;
  char *keep = malloc(bytes);
  memset(keep, 1, bytes);
  MPI_Barrier(MPI_COMM_WORLD);   /* everyone holds its memory before anyone goes */
  if (strcmp(how, "abort") == 0) {
    if (rank == 1) MPI_Abort(MPI_COMM_WORLD, 3);
    sleep(30);   /* killed by mpirun long before this ends */
  } else if (strcmp(how, "segv") == 0) {
    if (rank == 2) raise(SIGSEGV);
    sleep(30);
  } else if (strcmp(how, "fatal") == 0) {
    int size, x = 0;
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    if (rank == 1) MPI_Send(&x, 1, MPI_INT, size + 7, 0, MPI_COMM_WORLD);
    sleep(30);
  } else if (strcmp(how, "exitterm") == 0) {
    pthread_t t;
    pthread_create(&t, NULL, terminator, NULL);
    atexit(leave);   /* exit() runs it just before the libraries' destructors, libhpcmem's summary */
  } else if (strcmp(how, "finwait") == 0) {
    if (rank == 1) {
      sleep(1);
      raise(SIGSEGV);
    }
    MPI_Finalize();
    sleep(30);
  } else if (strcmp(how, "caught") == 0) {
    if (rank == 1) raise(SIGINT);
    free(keep);
    MPI_Barrier(MPI_COMM_WORLD);
    MPI_Finalize();
    return rank == 1 && !interrupted ? 2 : 0;   /* the program's own handler ran too */
  }
  /* "exit": leave without MPI_Finalize */
  return keep[bytes - 1] == 1 ? 0 : 1;
}
