/* The node-shared segment in a program whose start allocates through it:
 * with HPCMEM_DEFAULT_SEGMENT=shared and tracing (whose libraries are loaded,
 * with malloc, before the library's constructors ran) the segment was taken
 * for a plain program's and stayed process-local.  After MPI_Init rank 0
 * allocates a shared block and the other ranks read it through its offset.
 * Then each rank forks: plain malloc's objects live in the shared mapping,
 * and the child's writes to them must not reach the parent (fork gives the
 * child a copy), while the child still allocates, grows and frees.
 * Prints "rank R: OK" or "rank R: FAIL ..." per rank; exit 1 on a failure. */
#include <mpi.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>
#include "hpcmem.h"
#include "hpcmem_seg.h"

#define N (1 << 20)

/* "" or what went wrong with a forked child and a plain malloc block. */
static const char *fork_check(void) {
  char *mine = malloc(N);
  if (!mine) return "malloc failed";
  if (hpcmem_seg_of(mine) != HPCMEM_SEG_SHARED) return "plain malloc not in the shared segment";
  memset(mine, 0x11, N);
  pid_t pid = fork();
  if (pid < 0) return "fork failed";
  if (pid == 0) {
    memset(mine, 0x22, N);
    char *more = malloc(5000), *grown = realloc(mine, 2 * N);
    int ok = more && grown && grown[0] == 0x22 && grown[N - 1] == 0x22;
    free(more);
    free(grown);
    _exit(ok ? 0 : 3);
  }
  int st = 0;
  if (waitpid(pid, &st, 0) != pid || !WIFEXITED(st) || WEXITSTATUS(st) != 0) return "the child failed";
  int kept = mine[0] == 0x11 && mine[N / 2] == 0x11 && mine[N - 1] == 0x11;
  free(mine);
  return kept ? "" : "the child's writes reached the parent";
}

int main(int argc, char **argv) {
  MPI_Init(&argc, &argv);
  int rank, rc = 0, ok = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  uint64_t off = 0;
  char *s = NULL;
  if (rank == 0) {
    s = hpcmem_malloc_seg(N, HPCMEM_SEG_SHARED);
    if (!s) rc = 1;
    else {
      memset(s, 0x5a, N);
      rc = hpcmem_seg_offset(s, &off);
    }
  }
  MPI_Bcast(&off, 1, MPI_UINT64_T, 0, MPI_COMM_WORLD);
  MPI_Bcast(&rc, 1, MPI_INT, 0, MPI_COMM_WORLD);
  if (rank != 0) {
    const char *t = rc == 0 ? hpcmem_seg_pointer(off) : NULL;
    ok = t && t[0] == 0x5a && t[N / 2] == 0x5a && t[N - 1] == 0x5a;
    if (ok) printf("rank %d: OK\n", rank);
    else printf("rank %d: FAIL (rank 0's rc %d, offset %llu, pointer %p)\n", rank, rc, (unsigned long long)off, (void *)t);
  } else {
    ok = rc == 0;
    printf("rank 0: %s\n", ok ? "OK" : "FAIL (no shared block)");
  }
  MPI_Barrier(MPI_COMM_WORLD);
  if (rank == 0) free(s);
  const char *why = fork_check();
  if (*why) { printf("rank %d: FAIL after fork: %s\n", rank, why); ok = 0; }
  else printf("rank %d: fork OK\n", rank);
  int all = 0;
  MPI_Allreduce(&ok, &all, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
  MPI_Finalize();
  return all ? 0 : 1;
}
