/* Take this process's record: allocator statistics, /proc, timeline.
 * Runs at MPI_Finalize, at exit and in fatal-signal handlers, so it uses no
 * heap: /proc is read into a stack buffer, the timeline into static storage.
 * In a signal handler (nowait) it waits for no lock for long either: the
 * signal may have interrupted the lock's holder (api/stats.c). */
#include "config.h"
#include "record.h"
#include "api/internal.h"
#include "place/place.h"
#include "topo/topo.h"
#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <unistd.h>

/* hpcmem_timeline() keeps at most 4096 samples */
#define TIMELINE_MAX 4096
static hpcmem_sample_t timeline_buf[2][TIMELINE_MAX];   /* untouched until used: no memory */

static uint64_t job_time(uint64_t t, uint64_t origin_ns) {
  return t > origin_ns ? t - origin_ns : 0;
}

static void read_proc_status(uint64_t *hwm, uint64_t *rss) {
  char buf[4096];
  size_t n = 0;
  int saved = errno;
  int fd = open("/proc/self/status", O_RDONLY | O_CLOEXEC);
  if (fd >= 0) {
    ssize_t r;
    while (n < sizeof buf - 1 && ((r = read(fd, buf + n, sizeof buf - 1 - n)) > 0 || (r < 0 && errno == EINTR)))
      if (r > 0) n += (size_t)r;
    close(fd);
  }
  buf[n] = 0;
  *hwm = *rss = 0;
  _hpcmem_proc_status_parse(buf, hwm, rss);
  errno = saved;
}

size_t _hpcmem_rec_timeline(int which, const hpcmem_sample_t **out, int nowait, int *approx) {
  hpcmem_sample_t *buf = timeline_buf[which == HPCMEM_TL_EXIT];
  size_t n = nowait ? _hpcmem_timeline_nowait(buf, TIMELINE_MAX, approx) : hpcmem_timeline(buf, TIMELINE_MAX);
  *out = buf;
  return n < TIMELINE_MAX ? n : TIMELINE_MAX;
}

/* The memory classes for a signal handler: not when the machine was never
 * read in detail (that loads hwloc, which allocates): then nothing was
 * placed either, placing reads it first. */
static int classes_nowait(hpcmem_class_info_t *cls, int max, int *approx) {
  if (!_hpcmem_topo_detailed()) return 0;
  return _hpcmem_place_classes_nowait(cls, max, HPCMEM_SIGNAL_WAIT_NS, approx);
}

int _hpcmem_rec_sample(hpcmem_rec_t *rec, int64_t rank, uint64_t node, uint64_t origin_ns, int nowait) {
  int approx = 0;
  /* The memory classes first: their first query reads the machine with
   * hwloc, which allocates; after the statistics' snapshot that raised the
   * timeline's peak above the rank's high-water mark (the job's peak came out
   * above the sum of the ranks' marks). */
  hpcmem_class_info_t cls[4];
  int ncls = nowait ? classes_nowait(cls, 4, &approx) : hpcmem_classes(cls, 4);
  hpcmem_stats_t st;
  memset(&st, 0, sizeof st);
  if (nowait) approx |= _hpcmem_stats_nowait(&st);
  else hpcmem_stats(&st);
  memset(rec, 0, sizeof *rec);
  rec->rank = (uint64_t)rank;
  rec->node = node;
#define HPCMEM_REC_COPY_(name, kind, help) rec->v[HPCMEM_REC_##name] = st.name;
  HPCMEM_STATS_FIELDS(HPCMEM_REC_COPY_)
#undef HPCMEM_REC_COPY_
  /* every time stamp moves from the local clock onto the job clock */
  for (size_t i = 0; i < HPCMEM_REC_NFIELDS; i++)
    if (_hpcmem_rec_fields[i].kind == HPCMEM_KIND_PEAKTIME)
      rec->v[i] = job_time(rec->v[i], origin_ns);
  read_proc_status(&rec->v[HPCMEM_REC_vm_hwm_bytes], &rec->v[HPCMEM_REC_vm_rss_bytes]);
  rec->v[HPCMEM_REC_start_ns] = job_time(hpcmem_start_ns(), origin_ns);
  rec->v[HPCMEM_REC_end_ns] = job_time(hpcmem_clock_ns(), origin_ns);
  rec->v[HPCMEM_REC_timeline_samples] = nowait ? _hpcmem_timeline_nowait(NULL, 0, &approx) : hpcmem_timeline(NULL, 0);
  static const int seg_field[HPCMEM_SEG_COUNT][2] = {
      {HPCMEM_REC_private_bytes, HPCMEM_REC_private_peak_bytes},
      {HPCMEM_REC_interleaved_bytes, HPCMEM_REC_interleaved_peak_bytes},
      {HPCMEM_REC_shared_bytes, HPCMEM_REC_shared_peak_bytes}};
  for (int s = 0; s < HPCMEM_SEG_COUNT; s++) {
    hpcmem_seg_stats_t ss;
    int rc = nowait ? _hpcmem_seg_stats_nowait(s, &ss) : hpcmem_seg_stats(s, &ss);
    if (rc < 0) continue;
    approx |= rc;
    rec->v[seg_field[s][0]] = ss.current_bytes;
    rec->v[seg_field[s][1]] = ss.peak_bytes;
  }
  for (int i = 0; i < ncls && i < 4; i++) {
    if (cls[i].cls == HPCMEM_CLASS_DRAM) rec->v[HPCMEM_REC_place_dram_bytes] = cls[i].used;
    else if (cls[i].cls == HPCMEM_CLASS_HBM) rec->v[HPCMEM_REC_place_hbm_bytes] = cls[i].used;
    else if (cls[i].cls == HPCMEM_CLASS_NVM) rec->v[HPCMEM_REC_place_nvm_bytes] = cls[i].used;
  }
  hpcmem_place_stats_t ps;
  if (nowait) approx |= _hpcmem_place_get_stats_nowait(&ps, HPCMEM_SIGNAL_WAIT_NS);
  else hpcmem_place_stats(&ps);
  rec->v[HPCMEM_REC_place_fallback_bytes] = ps.fallback_bytes;
  rec->v[HPCMEM_REC_place_moved_bytes] = ps.moved_bytes;
  return approx;
}
