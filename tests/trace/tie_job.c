/* Two ranks whose events share a time stamp, written by hand (blocks in
 * rows, exact times) for tests/trace/test_report.sh:
 *   tie_job DIR
 * rank 0 (the first file, the first in every tie)
 *   t = 1000   malloc 10 MiB        t = 5000   free it
 * rank 1
 *   t = 5000   malloc 20 MiB        t = 9000   free it
 * At t = 5000 rank 1's allocation and rank 0's free come in an unknown
 * order (as within one tick of a columnar block: ranks leaving a barrier
 * tie with the last one arriving).  The merge takes allocations first, so
 * the job's peak counts rank 1's 20 MiB with what rank 0 still holds, an
 * upper bound of the truth; in file order (rank 0 first) it would come out
 * at 20 MiB, below what the job may have held.  Rank 0 has the same tie between its own threads: thread 2
 * (its block first in the file) allocates 1 MiB at t = 2000 and frees it
 * at t = 3000, when thread 1 allocates 2 MiB more (freed at t = 5000):
 * rank 0 peaks at 13 MiB, the job at 32 MiB (12 + 20).
 *
 *   tie_job DIR lost-free
 * one rank whose trace misses a free: 10 MiB at A (t = 1000), 4 MiB at A
 * again (t = 2000) without a free between, 1 MiB at B (t = 3000), A freed
 * (t = 4000).  The block first at A ended unseen by t = 2000 at the latest:
 * the rank peaks at 10 MiB (not 15) and leaks the 1 MiB at B.  It ends at
 * SIGTERM with a marker that counts 5 events: one is not in the file.
 *
 *   tie_job DIR no-rank
 * two processes that are no MPI ranks (rank -1 in the header, as the format
 * allows; jobs named after their pids) on a host with a long name: pid 4242
 * holds 3 MiB from t = 1000 to 4000, pid 4343 5 MiB from 2000 to 3000. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "hpcmem_trace_format.h"

#define MiB (1024u * 1024u)

typedef struct { unsigned type; uint64_t t, ptr, size; } ev_t;

static int put_block(FILE *f, uint32_t tid, const ev_t *ev, int n) {
  uint8_t payload[1024], *p = payload, h[HMT_BLOCK_HEADER_SIZE];
  hmt_state_t st = {ev[0].t, 0, 0};
  for (int i = 0; i < n; i++) p = hmt_encode_event(p, &st, ev[i].type, 0, ev[i].t, ev[i].ptr, 0, ev[i].size, 0, 0);
  hmt_block_t b;
  memset(&b, 0, sizeof b);
  b.type = HMT_BLOCK_EVENTS;
  b.codec = HMT_CODEC_NONE;
  b.stored_len = b.raw_len = (uint32_t)(p - payload);
  b.tid = tid;
  b.count = (uint32_t)n;
  b.base_time = ev[0].t;
  b.payload_crc = hmt_crc32c(0, payload, b.stored_len);
  hmt_block_encode(&b, h);
  return fwrite(h, 1, sizeof h, f) != sizeof h || fwrite(payload, 1, b.stored_len, f) != b.stored_len;
}

static int write_rank(const char *dir, int rank) {
  char path[4096];
  snprintf(path, sizeof path, "%s/rank-%d.hmt", dir, rank);
  FILE *f = fopen(path, "wb");
  if (!f) { perror(path); return 1; }
  hmt_header_t hd;
  memset(&hd, 0, sizeof hd);
  hd.version_major = HMT_VERSION_MAJOR; hd.version_minor = HMT_VERSION_MINOR;
  hd.flags = HMT_HF_RANK_FROM_MPI;
  hd.rank = rank; hd.size = 2; hd.pid = 100 + (uint32_t)rank;
  hd.start_ns = 500;
  hd.pointer_size = 8; hd.page_size = 4096;
  strcpy(hd.hostname, "node0");
  strcpy(hd.jobid, "tie");
  uint8_t h[HMT_HEADER_SIZE];
  hmt_header_encode(&hd, h);
  int err = fwrite(h, 1, sizeof h, f) != sizeof h;
  uint64_t base = 0x100000000000ull * (uint64_t)(rank + 1);
  if (rank == 0) {
    const ev_t other[] = {{HPCMEM_EV_MALLOC, 2000, base + 0x40000000, MiB}, {HPCMEM_EV_FREE, 3000, base + 0x40000000, 0}};
    const ev_t main_[] = {{HPCMEM_EV_MALLOC, 1000, base, 10 * MiB}, {HPCMEM_EV_MALLOC, 3000, base + 0x80000000, 2 * MiB},
                          {HPCMEM_EV_FREE, 5000, base, 0}, {HPCMEM_EV_FREE, 5000, base + 0x80000000, 0}};
    err |= put_block(f, 2, other, 2);
    err |= put_block(f, 1, main_, 4);
  } else {
    const ev_t main_[] = {{HPCMEM_EV_MALLOC, 5000, base, 20 * MiB}, {HPCMEM_EV_FREE, 9000, base, 0}};
    err |= put_block(f, 1, main_, 2);
  }
  err |= fclose(f) != 0;
  if (err) fprintf(stderr, "tie_job: cannot write %s\n", path);
  return err;
}

static int write_lost_free(const char *dir) {
  char path[4096];
  snprintf(path, sizeof path, "%s/rank-0.hmt", dir);
  FILE *f = fopen(path, "wb");
  if (!f) { perror(path); return 1; }
  hmt_header_t hd;
  memset(&hd, 0, sizeof hd);
  hd.version_major = HMT_VERSION_MAJOR; hd.version_minor = HMT_VERSION_MINOR;
  hd.rank = 0; hd.size = 1; hd.pid = 100;
  hd.start_ns = 500;
  hd.pointer_size = 8; hd.page_size = 4096;
  strcpy(hd.hostname, "node0");
  strcpy(hd.jobid, "lost");
  uint8_t h[HMT_HEADER_SIZE];
  hmt_header_encode(&hd, h);
  int err = fwrite(h, 1, sizeof h, f) != sizeof h;
  const uint64_t a = 0x100000000000ull, b = 0x100080000000ull;
  const ev_t ev[] = {{HPCMEM_EV_MALLOC, 1000, a, 10 * MiB}, {HPCMEM_EV_MALLOC, 2000, a, 4 * MiB},
                     {HPCMEM_EV_MALLOC, 3000, b, MiB}, {HPCMEM_EV_FREE, 4000, a, 0}};
  err |= put_block(f, 1, ev, 4);
  /* FLUSH: signal 15 at t = 5000, one counter (events): 5 */
  uint8_t payload[32], *p = payload, bh[HMT_BLOCK_HEADER_SIZE];
  p = hmt_put_varint(p, HMT_FLUSH_SIGNAL + 15);
  p = hmt_put_varint(p, 5000);
  p = hmt_put_varint(p, 1);
  p = hmt_put_varint(p, 5);
  hmt_block_t fb;
  memset(&fb, 0, sizeof fb);
  fb.type = HMT_BLOCK_FLUSH;
  fb.codec = HMT_CODEC_NONE;
  fb.stored_len = fb.raw_len = (uint32_t)(p - payload);
  fb.payload_crc = hmt_crc32c(0, payload, fb.stored_len);
  hmt_block_encode(&fb, bh);
  err |= fwrite(bh, 1, sizeof bh, f) != sizeof bh || fwrite(payload, 1, fb.stored_len, f) != fb.stored_len;
  err |= fclose(f) != 0;
  if (err) fprintf(stderr, "tie_job: cannot write %s\n", path);
  return err;
}

static int write_no_rank(const char *dir, int k) {
  char path[4096];
  snprintf(path, sizeof path, k ? "%s/rank-0-%d.hmt" : "%s/rank-0.hmt", dir, k);
  FILE *f = fopen(path, "wb");
  if (!f) { perror(path); return 1; }
  hmt_header_t hd;
  memset(&hd, 0, sizeof hd);
  hd.version_major = HMT_VERSION_MAJOR; hd.version_minor = HMT_VERSION_MINOR;
  hd.rank = -1; hd.size = 1; hd.pid = k ? 4343 : 4242;
  hd.start_ns = 500;
  hd.pointer_size = 8; hd.page_size = 4096;
  strcpy(hd.hostname, "login-node-with-a-rather-long-name.cluster.example.org");
  snprintf(hd.jobid, sizeof hd.jobid, "pid%u", hd.pid);
  uint8_t h[HMT_HEADER_SIZE];
  hmt_header_encode(&hd, h);
  int err = fwrite(h, 1, sizeof h, f) != sizeof h;
  const uint64_t a = 0x100000000000ull * (uint64_t)(k + 1);
  const ev_t ev[2][2] = {{{HPCMEM_EV_MALLOC, 1000, a, 3 * MiB}, {HPCMEM_EV_FREE, 4000, a, 0}},
                         {{HPCMEM_EV_MALLOC, 2000, a, 5 * MiB}, {HPCMEM_EV_FREE, 3000, a, 0}}};
  err |= put_block(f, 1, ev[k], 2);
  err |= fclose(f) != 0;
  if (err) fprintf(stderr, "tie_job: cannot write %s\n", path);
  return err;
}

int main(int argc, char **argv) {
  if (argc == 3 && strcmp(argv[2], "lost-free") == 0) return write_lost_free(argv[1]);
  if (argc == 3 && strcmp(argv[2], "no-rank") == 0) return write_no_rank(argv[1], 0) || write_no_rank(argv[1], 1);
  if (argc != 2) { fprintf(stderr, "usage: tie_job DIR [lost-free | no-rank]\n"); return 2; }
  return write_rank(argv[1], 0) || write_rank(argv[1], 1);
}
