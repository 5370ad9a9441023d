/* Prints where plain malloc puts blocks and what the interleaved segment is
 * made of, for tests/segment/test_seg_env.sh:
 *   default <seg> small <seg> large <seg> calloc <seg> nodes <list> check <rc> */
#include <stdio.h>
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
  hpcmem_seg_info_t in;
  hpcmem_seg_info(HPCMEM_SEG_INTERLEAVED, &in);
  printf("default %s small %s large %s calloc %s realloc %s zero %d nodes %s",
         hpcmem_seg_name(hpcmem_seg_default()), hpcmem_seg_name(hpcmem_seg_of(grown)),
         hpcmem_seg_name(hpcmem_seg_of(large)), hpcmem_seg_name(hpcmem_seg_of(zero)),
         grown[4999] == 0 || grown[0] == 1 ? "kept" : "lost", zero_ok, in.nodes);
  free(grown);
  free(large);
  free(zero);
  printf(" check %d\n", hpcmem_check());
  return 0;
}
