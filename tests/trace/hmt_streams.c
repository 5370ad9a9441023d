/* Bytes per event of each stream of the columnar EVENTS encodings, on the
 * events of a trace file: every thread's events are encoded again in rows,
 * in blocks of BLOCK bytes of rows (the recorder's HPCMEM_TRACE_BUFFER / 2),
 * regrouped with the format 1.1 encoder (each block on its own) and the
 * format 1.2 one (models chained across a thread's blocks) with ticks of
 * 2^SHIFT ns (default 16, the recorder's), compressed with zstd level LEVEL
 * (default 5, the recorder's; the whole payload as in 1.1 and 1.2, and each
 * stream alone as in 1.3), and decoded again: every event must come back
 * exactly (time to the tick).  Stack definitions are left out (they are
 * the same in all).  Also prints the payload before compression and the
 * time zstd took on the whole payloads.
 *   hmt_streams FILE [BLOCK [SHIFT [LEVEL]]]
 * For docs/trace-format.md's per-stream figures. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <zstd.h>
#include "hmt_reader.h"
#include "events_by_thread.h"

static const char *names[HMT_COL_STREAMS] = {"tags", "time", "addr", "ref", "size", "stack", "defs"};

static int level = 5;  /* the recorder's (src/trace/compress.c) */

static size_t zlen(const void *p, size_t n) {
  size_t cap = ZSTD_compressBound(n);
  void *o = malloc(cap);
  size_t r = ZSTD_compress(o, cap, p, n, level);
  free(o);
  return ZSTD_isError(r) ? n : r;
}

/* stream lengths from a payload's head */
static const uint8_t *streams_of(const uint8_t *p, const uint8_t *end, uint64_t *sl) {
  uint64_t v;
  int v2 = *p++ == HMT_COL2_MARK;
  p = hmt_get_varint(p, end, &v);
  if (v2) p = hmt_get_varint(p, end, &v);
  for (int k = 0; k < HMT_COL_STREAMS; k++) p = hmt_get_varint(p, end, &sl[k]);
  return p;
}

int main(int argc, char **argv) {
  if (argc < 2) { fprintf(stderr, "usage: %s FILE [BLOCK [SHIFT [LEVEL]]]\n", argv[0]); return 2; }
  size_t block = argc > 2 ? strtoull(argv[2], NULL, 0) : 512 * 1024;
  hmt_reader_t *r;
  thread_t *th;
  size_t nth;
  long long nev = open_events_by_thread(argv[1], &r, &th, &nth);
  if (nev < 0) return 1;
  size_t total = (size_t)nev;
  const unsigned shift = argc > 3 ? (unsigned)atoi(argv[3]) : 16;
  if (argc > 4) level = atoi(argv[4]);
  double ztime[2] = {0, 0}, rawlen[2] = {0, 0};
  double whole[2] = {0, 0}, per[2][HMT_COL_STREAMS] = {{0}};
  size_t blocks = 0, bad = 0, modes[8][4] = {{0}};
  uint8_t *rows = malloc(block + 4096), *col = malloc(block + 4096 + 64), *back = malloc(4 * block + 65536);
  void *pool = malloc(hmt_col_pool_size(block + 4096));
  hmt_col_work_t *w = malloc(sizeof *w);
  hmt_col_model_t *me = malloc(sizeof *me), *md = malloc(sizeof *md);
  uint64_t *ring = malloc(2 * HMT_C2_RING * sizeof *ring);
  hmt_c2_livemap_t L = {calloc(1u << 21, sizeof(hmt_c2_live_t)), (1u << 21) - 1, 0};
  for (size_t t = 0; t < nth; t++) {
    hmt_state_t st = {th[t].ev[0].time, 0, 0};
    size_t i = 0;
    int chained = 0;
    while (i < th[t].n) {
      hmt_state_t base = st;
      uint8_t *o = rows;
      size_t first = i;
      while (i < th[t].n && (size_t)(o - rows) < block) {
        hmt_event_t *e = &th[t].ev[i++];
        o = hmt_encode_event(o, &st, e->type, e->sys, e->time, e->ptr, e->old_ptr, e->size, e->align, e->stack);
      }
      size_t len = (size_t)(o - rows), count = i - first;
      for (int v = 0; v < 2; v++) {
        hmt_state_t s = base;
        size_t cl = v == 0 ? hmt_columns_encode(rows, len, &s, shift, col, pool, w)
                           : hmt_columns2_encode(rows, len, &s, shift, col, pool, me, &L, chained);
        if (!cl) { fprintf(stderr, "encoding failed\n"); return 1; }
        struct timespec t0, t1;
        clock_gettime(CLOCK_MONOTONIC, &t0);
        whole[v] += (double)zlen(col, cl);
        clock_gettime(CLOCK_MONOTONIC, &t1);
        ztime[v] += (double)(t1.tv_sec - t0.tv_sec) + 1e-9 * (double)(t1.tv_nsec - t0.tv_nsec);
        rawlen[v] += (double)cl;
        uint64_t sl[HMT_COL_STREAMS];
        const uint8_t *q = streams_of(col, col + cl, sl);
        for (int j = 0; j < HMT_COL_STREAMS; q += sl[j], j++) per[v][j] += sl[j] ? (double)zlen(q, sl[j]) : 0;
        if (v == 1) {
          const uint8_t *tg = streams_of(col, col + cl, sl);
          for (uint64_t j = 0; j < sl[0]; j++) modes[tg[j] & 7][(tg[j] >> 4) & 3]++;
        }
        /* back again */
        hmt_state_t d = base;
        size_t ol;
        uint64_t nrec;
        int rc = v == 0 ? HMT_OK
                        : hmt_columns2_decode(col, cl, &d, back, 4 * block + 65536, &ol, &nrec, count, md, ring,
                                              HMT_C2_RING, chained);
        if (rc != HMT_OK) { fprintf(stderr, "tid %u block %zu: decode %d\n", th[t].tid, blocks, rc); return 1; }
        if (v == 1) {
          const uint8_t *bp = back, *be = back + ol;
          for (size_t j = first; j < i; j++) {
            hmt_record_t rec;
            hmt_event_t *e = &th[t].ev[j];
            if (hmt_decode_record(&bp, be, &d, &rec) != HMT_OK || rec.type != e->type || rec.ptr != e->ptr ||
                rec.old_ptr != e->old_ptr || rec.size != e->size || rec.align != e->align ||
                (hmt_is_alloc(rec.type) && rec.stack != e->stack) || rec.sys != e->sys ||
                rec.time >> shift != e->time >> shift) {
              if (bad++ < 5) fprintf(stderr, "tid %u event %zu differs\n", th[t].tid, j);
            }
          }
        }
      }
      chained = 1;
      blocks++;
    }
  }
  printf("%s: %zu events, %zu threads, %zu blocks of %zu bytes of rows; %zu events differ\n", argv[1], total, nth,
         blocks, block, bad);
  printf("%-10s %8s %8s\n", "stream", "1.1", "1.2");
  for (int j = 0; j < HMT_COL_STREAMS; j++)
    printf("%-10s %8.3f %8.3f\n", names[j], per[0][j] / (double)total, per[1][j] / (double)total);
  printf("%-10s %8.3f %8.3f\n", "whole", whole[0] / (double)total, whole[1] / (double)total);
  double sum[2] = {0, 0};
  for (int j = 0; j < HMT_COL_STREAMS; j++) { sum[0] += per[0][j]; sum[1] += per[1][j]; }
  printf("%-10s %8.3f %8.3f   (1.3: the streams compressed one by one)\n", "streams", sum[0] / (double)total,
         sum[1] / (double)total);
  printf("%-10s %8.3f %8.3f\n", "raw", rawlen[0] / (double)total, rawlen[1] / (double)total);
  printf("%-10s %8.1f %8.1f\n", "zstd ns/ev", 1e9 * ztime[0] / (double)total, 1e9 * ztime[1] / (double)total);
  for (int j = 1; j <= 5; j++)
    printf("%-8s modes %zu %zu %zu %zu\n", hmt_kind_name((unsigned)j), modes[j][0], modes[j][1], modes[j][2], modes[j][3]);
  hmt_close(r);
  return bad != 0;
}
