/* MPI test program for the job report: rank r allocates exactly
 * (r+1) * MIB MiB -- half as one large block, half as 256 equal small
 * blocks -- touches it, holds it, frees it.
 *   report_ranks overlap MIB   all ranks hold their memory at the same time
 *   report_ranks phased MIB    one rank after the other, 40 ms apart, so the
 *                              job's peak over time is one rank's, not the sum
 * Plain malloc/free: the numbers in the report come from libhpcmem.
 * With HPCMEM_TEST_INIT_THREAD=1 in the environment it starts with
 * MPI_Init_thread(MPI_THREAD_MULTIPLE). */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define NSMALL 256

static void pause_ms(long ms) {
  struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
  while (nanosleep(&ts, &ts) != 0) {}
}

static void **hold(size_t bytes) {
  void **blocks = malloc((NSMALL + 1) * sizeof *blocks);   /* 2 KiB of bookkeeping */
  size_t half = bytes / 2, piece = half / NSMALL;
  blocks[0] = malloc(half);
  memset(blocks[0], 1, half);
  for (int i = 1; i <= NSMALL; i++) {
    blocks[i] = malloc(piece);
    memset(blocks[i], 1, piece);
  }
  return blocks;
}

static void release(void **blocks) {
  for (int i = 0; i <= NSMALL; i++) free(blocks[i]);
  free(blocks);
}

int main(int argc, char **argv) {
  int rank, size, provided;
  /* HPCMEM_TEST_INIT_THREAD=1: start through MPI_Init_thread instead */
  const char *thread = getenv("HPCMEM_TEST_INIT_THREAD");
  if (thread && *thread == '1') MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
  else MPI_Init(&argc, &argv);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  int phased = argc > 1 && strcmp(argv[1], "phased") == 0;
  size_t mib = argc > 2 ? strtoul(argv[2], NULL, 10) : 32;
  size_t bytes = (size_t)(rank + 1) * mib << 20;

  if (!phased) {
    MPI_Barrier(MPI_COMM_WORLD);
    void **b = hold(bytes);
    MPI_Barrier(MPI_COMM_WORLD);
    pause_ms(50);
    MPI_Barrier(MPI_COMM_WORLD);
    release(b);
  } else {
    for (int p = 0; p < size; p++) {
      MPI_Barrier(MPI_COMM_WORLD);
      pause_ms(40);
      if (rank == p) {
        void **b = hold(bytes);
        pause_ms(40);
        release(b);
      }
    }
  }
  MPI_Barrier(MPI_COMM_WORLD);
  MPI_Finalize();
  return 0;
}
