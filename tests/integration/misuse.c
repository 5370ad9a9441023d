/* Misuse on purpose, for test_misuse.sh: one kind of bad free per run.
 *   misuse KIND    KIND: interior double foreign stack interior-large double-large
 *                        misaligned-large realloc-foreign unallocated
 * Prints "survived" and exits 0 when the allocator let it go on. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include "hpcmem.h"

int main(int argc, char **argv) {
  if (argc != 2) { fprintf(stderr, "usage: misuse KIND\n"); return 2; }
  const char *k = argv[1];
  char *p = malloc(64), *big = malloc(1 << 20), local[32];
  char *other = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  strcpy(p, "intact");
  if (!strcmp(k, "interior")) free(p + 16);
  else if (!strcmp(k, "double")) { char *q = malloc(64); free(q); free(q); }
  else if (!strcmp(k, "foreign")) free(other + 64);
  else if (!strcmp(k, "stack")) free(local);
  else if (!strcmp(k, "interior-large")) free(big + 4096);
  else if (!strcmp(k, "misaligned-large")) free(big + 1);
  else if (!strcmp(k, "double-large")) { char *q = malloc(2 << 20); free(q); free(q); }
  else if (!strcmp(k, "realloc-foreign")) { if (realloc(other + 128, 100) != NULL) return 4; }
  else if (!strcmp(k, "unallocated")) { char *q = malloc(200000); free(q); free(q + 0); }
  else { fprintf(stderr, "unknown kind %s\n", k); return 2; }
  /* the allocator must still work and the block we kept must be intact */
  char *after = malloc(100);
  strcpy(after, p);
  if (strcmp(after, "intact") != 0 || hpcmem_check() != 0) return 5;
  hpcmem_stats_t s;
  hpcmem_stats(&s);
  printf("survived errors=%llu\n", (unsigned long long)s.error_count);
  return 0;
}
