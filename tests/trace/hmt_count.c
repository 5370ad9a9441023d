/* What a trace holds of a few allocation sizes, and how it ends.  For
 * test_leave.sh:
 *   hmt_count FILE SIZE...
 * prints
 *   flushes R1,R2,...      the reason of every FLUSH block, in file order
 *                          ("none" without one)
 *   truncated 0|1
 *   SIZE allocs N frees M ends_after 0|1
 * for each SIZE: the allocations of exactly that size, the frees of those
 * blocks, and whether the last FLUSH block was written after the last of
 * these events (its time stamp is not earlier): 0 means the trace's end
 * marker is not this process's last word.  Returns 1 when the file cannot
 * be read (the reader's message on stderr). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "hmt_reader.h"

#define MAXSIZES 8

typedef struct { uint64_t ptr; int size; } live_t;

/* the FLUSH blocks, from the block headers (the reader keeps only the last) */
static int list_flushes(const char *path, uint64_t *last_time) {
  FILE *f = fopen(path, "rb");
  if (!f) { perror(path); return -1; }
  uint8_t h[HMT_BLOCK_HEADER_SIZE];
  int n = 0;
  printf("flushes ");
  if (fseek(f, HMT_HEADER_SIZE, SEEK_SET) == 0)
    while (fread(h, 1, sizeof h, f) == sizeof h) {
      hmt_block_t b;
      if (hmt_block_decode(h, sizeof h, &b) != HMT_OK) break;
      uint8_t *p = malloc(b.stored_len ? b.stored_len : 1);
      if (!p || fread(p, 1, b.stored_len, f) != b.stored_len) { free(p); break; }
      uint64_t reason, t;
      const uint8_t *q;
      if (b.type == HMT_BLOCK_FLUSH && (q = hmt_get_varint(p, p + b.stored_len, &reason)) &&
          hmt_get_varint(q, p + b.stored_len, &t)) {
        char why[32];
        printf("%s%s", n++ ? "," : "", hmt_flush_reason_name(reason, why, sizeof why));
        *last_time = t;
      }
      free(p);
    }
  printf("%s\n", n ? "" : "none");
  fclose(f);
  return n;
}

int main(int argc, char **argv) {
  if (argc < 3 || argc - 2 > MAXSIZES) { fprintf(stderr, "usage: %s FILE SIZE...\n", argv[0]); return 2; }
  int nsizes = argc - 2;
  uint64_t sizes[MAXSIZES], allocs[MAXSIZES] = {0}, frees[MAXSIZES] = {0}, last[MAXSIZES] = {0};
  for (int i = 0; i < nsizes; i++) sizes[i] = strtoull(argv[i + 2], NULL, 0);
  uint64_t flush_time = 0;
  if (list_flushes(argv[1], &flush_time) < 0) return 1;
  hmt_reader_t *r;
  hmt_error_t err;
  if (hmt_open(argv[1], 0, &r, &err)) { fprintf(stderr, "%s\n", err.message); return 1; }
  printf("truncated %d\n", hmt_info(r)->truncated);
  live_t *live = NULL;
  size_t nlive = 0, cap = 0;
  hmt_event_t ev;
  int k;
  while ((k = hmt_next(r, &ev)) == 1) {
    if (ev.type == HPCMEM_EV_FREE || ev.type == HPCMEM_EV_REALLOC) {
      uint64_t gone = ev.type == HPCMEM_EV_FREE ? ev.ptr : ev.old_ptr;
      for (size_t j = 0; j < nlive; j++)
        if (live[j].ptr == gone) {
          frees[live[j].size]++;
          last[live[j].size] = ev.time;
          live[j] = live[--nlive];
          break;
        }
      if (ev.type == HPCMEM_EV_FREE) continue;
    }
    for (int i = 0; i < nsizes; i++) {
      if (ev.size != sizes[i]) continue;
      allocs[i]++;
      last[i] = ev.time;
      if (nlive == cap) {
        cap = cap ? 2 * cap : 1024;
        if (!(live = realloc(live, cap * sizeof *live))) { fprintf(stderr, "out of memory\n"); return 1; }
      }
      live[nlive++] = (live_t){ev.ptr, i};
      break;
    }
  }
  if (k < 0) { fprintf(stderr, "%s\n", hmt_error(r)->message); return 1; }
  for (int i = 0; i < nsizes; i++)
    printf("%llu allocs %llu frees %llu ends_after %d\n", (unsigned long long)sizes[i], (unsigned long long)allocs[i],
           (unsigned long long)frees[i], flush_time >= last[i]);
  free(live);
  hmt_close(r);
  return 0;
}
