/* A program without MPI, linked with libhpcmem: it allocates PEAK MiB, frees
 * all but LIVE MiB, and leaves through exit() from a nested call without
 * freeing the rest.  Its summary must still be written at exit.
 *   lone PEAK LIVE [fork|fail|api-off|api-full]
 * With "fork", a child is forked first and exits through exit() too: it is
 * not a process of its own for the report, so only the parent writes one.
 * With "fail", the program exits with status 3 (the report must not change it).
 * With "api-off" / "api-full" it chooses its report mode with
 * hpcmem_report_mode() first (exit status 4 if a bad mode is not refused). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>
#include <errno.h>
#include <hpcmem.h>

/* public API, declared here until include/hpcmem.h carries it */
int hpcmem_report_mode(int mode);

static void leave(void **keep, int status) {
  (void)keep;
  exit(status);   /* not a return from main: the summary comes from the exit path */
}

int main(int argc, char **argv) {
  size_t peak = argc > 1 ? strtoul(argv[1], NULL, 10) : 48;
  size_t live = argc > 2 ? strtoul(argv[2], NULL, 10) : 16;
  if (argc > 3 && strncmp(argv[3], "api-", 4) == 0) {
    if (hpcmem_report_mode(3) != -EINVAL || hpcmem_report_mode(-1) != -EINVAL) return 4;
    if (hpcmem_report_mode(strcmp(argv[3], "api-off") == 0 ? 0 : 2) != 0) return 5;
  }
  if (argc > 3 && strcmp(argv[3], "fork") == 0) {
    pid_t child = fork();
    if (child == 0) exit(0);
    if (child > 0) waitpid(child, NULL, 0);
  }
  void *blocks[1024];
  size_t n = 0;
  /* 1 MiB blocks: the large tier, exact in the statistics */
  for (; n < peak && n < 1024; n++) {
    blocks[n] = malloc((size_t)1 << 20);
    if (!blocks[n]) return 1;
    memset(blocks[n], 1, 4096);
  }
  for (size_t i = live; i < n; i++) free(blocks[i]);
  leave(blocks, argc > 3 && strcmp(argv[3], "fail") == 0 ? 3 : 0);
  return 1;
}
