/* Prints where plain malloc puts blocks and what the interleaved segment is
 * made of, for tests/segment/test_seg_env.sh:
 *   default <seg> small <seg> large <seg> calloc <seg> realloc <kept|lost> zero <0|1>
 *   fork <copy|shared|failed> realloc_seg <kept|moved|enomem|error> nodes <list> check <rc>
 * fork: a forked child writes into a plain malloc block and grows it to
 * 96 MiB; the parent's block must keep its bytes (copy).
 * realloc_seg: hpcmem_realloc_seg of an interleaved block to 96 MiB (more
 * than a 64M segment holds): kept there, or NULL with ENOMEM, never moved. */
#include <errno.h>
#include <stdio.h>
#include <sys/wait.h>
#include <unistd.h>
#include <stdlib.h>
#include <string.h>
#include "hpcmem.h"

int main(void) {
  char *small = malloc(100), *large = malloc(3 << 20), *zero = calloc(1000, 1000);
  memset(small, 1, 100);
  memset(large, 2, 3 << 20);
  int zero_ok = 1;
  for (int i = 0; i < 1000000; i += 4093) zero_ok &= zero[i] == 0;
  char *grown = realloc(small, 5000);
  const char *forked = "failed";
  pid_t pid = fork();
  if (pid == 0) {
    memset(large, 7, 3 << 20);
    char *g = realloc(large, 96 << 20);   /* more than a 64M interleaved segment holds */
    _exit(g && g[0] == 7 ? 0 : 1);
  }
  int st = 0;
  if (pid > 0 && waitpid(pid, &st, 0) == pid && WIFEXITED(st) && WEXITSTATUS(st) == 0)
    forked = large[0] == 2 && large[(3 << 20) - 1] == 2 ? "copy" : "shared";
  const char *rs = "error";
  char *in_seg = hpcmem_malloc_seg(1 << 20, HPCMEM_SEG_INTERLEAVED);
  if (in_seg) {
    errno = 0;
    char *q = hpcmem_realloc_seg(in_seg, 96 << 20, HPCMEM_SEG_INTERLEAVED);
    if (q) { rs = hpcmem_seg_of(q) == HPCMEM_SEG_INTERLEAVED ? "kept" : "moved"; in_seg = q; }
    else if (errno == ENOMEM) rs = "enomem";
    free(in_seg);
  }
  hpcmem_seg_info_t in;
  hpcmem_seg_info(HPCMEM_SEG_INTERLEAVED, &in);
  printf("default %s small %s large %s calloc %s realloc %s zero %d fork %s realloc_seg %s nodes %s",
         hpcmem_seg_name(hpcmem_seg_default()), hpcmem_seg_name(hpcmem_seg_of(grown)),
         hpcmem_seg_name(hpcmem_seg_of(large)), hpcmem_seg_name(hpcmem_seg_of(zero)),
         grown[4999] == 0 || grown[0] == 1 ? "kept" : "lost", zero_ok, forked, rs, in.nodes);
  free(grown);
  free(large);
  free(zero);
  printf(" check %d\n", hpcmem_check());
  return 0;
}
