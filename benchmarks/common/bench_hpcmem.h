/* libhpcmem's segment and placement API, found at run time.
 *
 * The benchmarks run the same binary under glibc, jemalloc, tcmalloc,
 * mimalloc and libhpcmem (LD_PRELOAD), so they must not be linked with
 * libhpcmem: a binary that carries libhpcmem would bring its malloc and its
 * MPI_Init/MPI_Finalize wrappers into every peer's run.  Instead the
 * libhpcmem-only variants look the functions up in the process
 * (dlsym(RTLD_DEFAULT)) and are skipped, with one line saying why, when
 * libhpcmem is not the process's malloc.  The types and constants come
 * from the public headers, which need no library. */
#ifndef BENCH_HPCMEM_H
#define BENCH_HPCMEM_H

#include <stddef.h>
#include <stdint.h>

#include "hpcmem_place.h"
#include "hpcmem_seg.h"

#ifdef __cplusplus
extern "C" {
#endif

/** The libhpcmem functions the benchmarks call; NULL when absent. */
typedef struct bench_hpcmem {
  /* segments (hpcmem_seg.h) */
  void *(*malloc_seg)(size_t size, int seg);
  int (*free_seg)(void *p, int seg);
  int (*seg_of)(const void *p);
  int (*seg_info)(int seg, hpcmem_seg_info_t *out);
  int (*seg_offset)(const void *p, uint64_t *off);
  void *(*seg_pointer)(uint64_t off);
  const char *(*seg_name)(int seg);
  /* placement (hpcmem_place.h) */
  int (*place_attr_init)(hpcmem_place_attr_t *a);
  int (*place_attr_add)(hpcmem_place_attr_t *a, int cls, int index);
  void *(*place_alloc)(size_t size, const hpcmem_place_attr_t *attr);
  int (*place_free)(void *p);
  int (*commit)(int flags);
  int (*where)(const void *p, size_t len, hpcmem_where_t *out, int max);
  int (*classes)(hpcmem_class_info_t *out, int max);
  int (*class_limit)(int cls, uint64_t bytes);
  int (*place_stats)(hpcmem_place_stats_t *out);
} bench_hpcmem_t;

enum bench_hpcmem_api {
  BENCH_HPCMEM_SEGMENTS = 1,   /**< every segment function above */
  BENCH_HPCMEM_PLACEMENT = 2   /**< every placement function above */
};

/**
 * The functions of @p api (a BENCH_HPCMEM_* value) when libhpcmem is this
 * process's malloc and exports all of them; else NULL, and @p why (if not
 * NULL) gets one line for the user, e.g. "needs libhpcmem as the
 * process's malloc; this run's malloc is libjemalloc.so.2 (run it with
 * LD_PRELOAD=libhpcmem.so)".  The look-up is done once.
 */
const bench_hpcmem_t *bench_hpcmem_get(int api, const char **why);

/**
 * Base name of the shared object whose malloc this process calls
 * ("libc.so.6", "libhpcmem.so", "libjemalloc.so.2"...), or "the program"
 * when malloc is in the executable.
 */
const char *bench_malloc_provider(void);

/**
 * One line on where a placed allocation lives, by decided class and
 * state: "a: HBM 32.0 MiB + DRAM 32.0 MiB (bound)" (hpcmem_where over
 * [p, p+bytes)).  @return 1 when every piece is decided (bound, or left to
 * the OS by FALLBACK), 0 when some piece is pending or failed or
 * hpcmem_where refused the range.
 */
int bench_place_describe(const bench_hpcmem_t *h, const void *p, size_t bytes, const char *name,
                         char *buf, size_t len);

/** Name of a memory class ("DRAM", "HBM", "NVM", "near", "any"). */
const char *bench_class_name(int cls);

#ifdef __cplusplus
}
#endif
#endif
