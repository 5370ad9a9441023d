/* Micro-benchmarks of the recorder (not run by make check):
 *   bench_trace unwind   cost of one stack capture per method and depth
 *   bench_trace events   cost of one recorded event and bytes per event,
 *                        per codec, for a mix of malloc/free from 8 sites
 *                        (HPCMEM_TRACE_STACK_CACHE=0 in the environment:
 *                        without the stack cache)
 * Built with frame pointers so that the frame-pointer walk sees the whole
 * chain of the benchmark's own frames. */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include "trace/trace.h"
#include "util/options.h"

static uint64_t now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static uint64_t frames[1100];
static volatile uint32_t sink;

__attribute__((noinline)) static uint32_t descend(int d, int iters, uint64_t *ns) {
  if (d > 0) {
    uint32_t r = descend(d - 1, iters, ns);
    __asm__ volatile("" ::: "memory");
    return r;
  }
  uint64_t t0 = now();
  uint32_t n = 0;
  for (int i = 0; i < iters; i++) n = _hpcmem_stack_capture(frames, 1024, NULL);
  *ns = now() - t0;
  return n;
}

static void bench_unwind(void) {
  printf("%-10s %6s %8s %10s %10s\n", "method", "depth", "frames", "ns/capture", "ns/frame");
  int methods[] = {HMT_UNWIND_LIBUNWIND, HMT_UNWIND_BACKTRACE, HMT_UNWIND_FRAMEPOINTER};
  for (int m = 0; m < 3; m++) {
    _hpcmem_stack_init(methods[m], NULL, 0);
    for (int depth = 5; depth <= 80; depth *= 2) {
      uint64_t ns;
      descend(depth, 1000, &ns);  /* warm the caches */
      uint32_t n = descend(depth, 20000, &ns);
      printf("%-10s %6d %8u %10.1f %10.2f\n", _hpcmem_stack_method_name(methods[m]), depth, n, ns / 20000.0,
             ns / 20000.0 / (n ? n : 1));
    }
  }
}

#define SITE(k) __attribute__((noinline)) static void site##k(uint64_t p, size_t s) { \
    _hpcmem_trace_event(HPCMEM_EV_MALLOC, (void *)(uintptr_t)p, s, NULL, 0); __asm__ volatile("" ::: "memory"); }
SITE(0) SITE(1) SITE(2) SITE(3) SITE(4) SITE(5) SITE(6) SITE(7)
static void (*const sites[8])(uint64_t, size_t) = {site0, site1, site2, site3, site4, site5, site6, site7};

__attribute__((noinline)) static void work(int d, int n) {
  if (d > 0) { work(d - 1, n); __asm__ volatile("" ::: "memory"); return; }
  uint64_t base = 0x7f0000000000ull;
  unsigned x = 1;
  for (int i = 0; i < n; i++) {
    x = x * 1103515245u + 12345u;
    uint64_t p = base + 64 * (uint64_t)(i % 4096);
    sites[(x >> 8) & 7](p, 16 + ((x >> 12) & 1023));
    _hpcmem_trace_event(HPCMEM_EV_FREE, (void *)(uintptr_t)p, 0, NULL, 0);
  }
}

static void bench_events(const char *dir, int n, int depth, int method) {
  const char *codecs[] = {"model", "zstd", "zlib", "none"};
  printf("%-5s %8s %12s %12s %14s %10s\n", "codec", "events", "ns/event", "bytes/event", "raw bytes/event", "ratio");
  for (int c = 0; c < 4; c++) {
    char d[512], v1[600], v2[64], v3[64];
    snprintf(d, sizeof d, "%s/%s", dir, codecs[c]);
    snprintf(v1, sizeof v1, "HPCMEM_TRACE_DIR=%s", d);
    snprintf(v2, sizeof v2, "HPCMEM_TRACE_COMPRESS=%s", codecs[c]);
    snprintf(v3, sizeof v3, "HPCMEM_TRACE_DEPTH=%d", depth);
    char v4[64];
    const char *sc = getenv("HPCMEM_TRACE_STACK_CACHE");  /* passed on: 0 measures capture without the cache */
    snprintf(v4, sizeof v4, "HPCMEM_TRACE_STACK_CACHE=%s", sc ? sc : "1");
    char *env[] = {"HPCMEM_TRACE=1", v1, v2, v3, v4, NULL};
    _hpcmem_options_init();
    _hpcmem_options_load(env);
    _hpcmem_trace_init();
    _hpcmem_stack_init(method, NULL, 0);
    uint64_t t0 = now();
    work(20, n / 2);
    uint64_t ns = now() - t0;
    hpcmem_trace_stats_t st;
    _hpcmem_trace_flush_all(HMT_FLUSH_EXPLICIT);
    _hpcmem_trace_get_stats(&st);
    struct stat sb;
    stat(_hpcmem_trace_path(), &sb);
    printf("%-5s %8llu %12.1f %12.3f %14.2f %10.1f\n", codecs[c], (unsigned long long)st.events,
           (double)ns / st.events, (double)sb.st_size / st.events, (double)st.raw_bytes / st.events,
           (double)st.raw_bytes / st.stored_bytes);
    _hpcmem_trace_shutdown();
  }
}

int main(int argc, char **argv) {
  if (argc > 1 && strcmp(argv[1], "unwind") == 0) { bench_unwind(); return 0; }
  if (argc > 2 && strcmp(argv[1], "events") == 0) {
    int method = HMT_UNWIND_LIBUNWIND;
    if (argc > 5) method = !strcmp(argv[5], "frame") ? HMT_UNWIND_FRAMEPOINTER
                         : !strcmp(argv[5], "backtrace") ? HMT_UNWIND_BACKTRACE : HMT_UNWIND_LIBUNWIND;
    printf("stack capture: %s\n", _hpcmem_stack_method_name(method));
    bench_events(argv[2], argc > 3 ? atoi(argv[3]) : 2000000, argc > 4 ? atoi(argv[4]) : 64, method);
    return 0;
  }
  fprintf(stderr, "usage: %s unwind | events DIR [N [DEPTH [libunwind|backtrace|frame]]]\n", argv[0]);
  return 2;
}
