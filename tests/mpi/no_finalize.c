/* MPI ranks that never reach MPI_Finalize.  Rank r allocates (r+1)*MIB MiB
 * (one large block, touched) and keeps it; then:
 *   no_finalize exit MIB    every rank returns from main without MPI_Finalize
 *   no_finalize abort MIB   rank 1 calls MPI_Abort; mpirun kills the others
 *   no_finalize segv MIB    rank 2 dies of SIGSEGV; mpirun kills the others
 * Each rank's own summary must still be written. */
#include <mpi.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

int main(int argc, char **argv) {
  int rank;
  MPI_Init(&argc, &argv);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
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
  }
  /* "exit": leave without MPI_Finalize */
  return keep[bytes - 1] == 1 ? 0 : 1;
}
