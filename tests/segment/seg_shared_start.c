/* The node-shared segment in a program whose start allocates through it:
 * with HPCMEM_DEFAULT_SEGMENT=shared and tracing (whose libraries are loaded,
 * with malloc, before the library's constructors ran) the segment was taken
 * for a plain program's and stayed process-local.  After MPI_Init rank 0
 * allocates a shared block and the other ranks read it through its offset.
 * Then each rank forks: plain malloc's objects live in the shared mapping,
 * and the child must see them as at the fork and its writes must not reach
 * the parent (fork gives the child a copy), while the child still
 * allocates, grows and frees.  hpcmem_seg_default() follows plain malloc:
 * private before MPI_Init and in the forked child, shared in the rank.
 * Prints "rank R: OK" or "rank R: FAIL ..." per rank; exit 1 on a failure. */
#include <mpi.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>
#include "hpcmem.h"
#include "hpcmem_seg.h"

#define N (1 << 20)

/* Resident pages of [p, p + n). */
static size_t resident(const char *p, size_t n) {
  size_t pg = (size_t)sysconf(_SC_PAGESIZE), count = 0;
  unsigned char v[1024];
  for (size_t off = 0; off < n; off += sizeof v * pg) {
    size_t len = n - off < sizeof v * pg ? n - off : sizeof v * pg;
    if (mincore((void *)(p + off), len, v) != 0) return (size_t)-1;
    for (size_t i = 0; i < (len + pg - 1) / pg; i++) count += v[i] & 1;
  }
  return count;
}

/* "" or what went wrong with a forked child and plain malloc blocks: the
 * child sees its blocks as they were at the fork (not what the parent wrote
 * after it), its writes stay its own, and a block never touched beyond its
 * first page is not filled in by the copy (in the child or in the node's
 * file). */
static const char *fork_check(void) {
  const size_t BIG = (size_t)64 << 20;
  char *mine = malloc(N), *big = malloc(BIG);
  if (!mine || !big) return "malloc failed";
  if (hpcmem_seg_of(mine) != HPCMEM_SEG_SHARED) return "plain malloc not in the shared segment";
  if (hpcmem_seg_default() != HPCMEM_SEG_SHARED) return "hpcmem_seg_default() does not say shared after MPI_Init";
  memset(mine, 0x11, N);
  big[0] = 1;
  /* the block may reuse pages the rank touched before (MPI's own objects
   * live here too): its inside is made holes of the node's file again */
  size_t pg = (size_t)sysconf(_SC_PAGESIZE);
  char *hole = (char *)(((uintptr_t)big + 2 * pg) & ~(uintptr_t)(pg - 1));
  size_t hole_len = (BIG - 4 * pg) & ~(pg - 1);
  if (madvise(hole, hole_len, MADV_REMOVE) != 0 || resident(hole, hole_len) != 0) return "could not make holes";
  pid_t pid = fork();
  if (pid < 0) return "fork failed";
  if (pid == 0) {
    usleep(200000);                  /* the parent writes meanwhile */
    int code = 0;
    if (mine[0] != 0x11 || mine[N - 1] != 0x11) code = 4;          /* not the fork's snapshot */
    else if (hpcmem_seg_default() != HPCMEM_SEG_PRIVATE) code = 6;   /* its malloc is private */
    else if (big[0] != 1 || resident(hole, hole_len) != 0) code = 5;   /* untouched pages copied */
    memset(mine, 0x22, N);
    char *more = malloc(5000), *grown = realloc(mine, 2 * N);
    if (!code && !(more && grown && grown[0] == 0x22 && grown[N - 1] == 0x22)) code = 3;
    free(more);
    free(grown);
    _exit(code);
  }
  memset(mine, 0x33, N);
  int st = 0;
  if (waitpid(pid, &st, 0) != pid || !WIFEXITED(st)) return "the child did not exit";
  switch (WEXITSTATUS(st)) {
    case 0: break;
    case 4: return "the child saw the parent's writes made after the fork";
    case 5: return "the copy filled in untouched pages";
    case 6: return "hpcmem_seg_default() in the child does not say private";
    default: return "the child could not allocate";
  }
  int kept = mine[0] == 0x33 && mine[N / 2] == 0x33 && mine[N - 1] == 0x33;
  size_t in_parent = resident(hole, hole_len);
  free(mine);
  free(big);
  if (!kept) return "the child's writes reached the parent";
  return in_parent ? "the copy filled in untouched pages of the node's file" : "";
}

int main(int argc, char **argv) {
  int before = hpcmem_seg_default();   /* malloc is private until MPI_Init makes the node's segment */
  MPI_Init(&argc, &argv);
  int rank, rc = 0, ok = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  if (before != HPCMEM_SEG_PRIVATE)
    printf("rank %d: FAIL hpcmem_seg_default() before MPI_Init: %d, not private\n", rank, before);
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
  ok &= before == HPCMEM_SEG_PRIVATE;
  int all = 0;
  MPI_Allreduce(&ok, &all, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
  MPI_Finalize();
  return all ? 0 : 1;
}
