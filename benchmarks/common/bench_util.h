/* Small helpers shared by the benchmarks and miniapps: clocks, getrusage
 * figures, size and list parsing, the last-level cache size.
 * Benchmarks use only plain malloc or the public libhpcmem API (DESIGN.md),
 * so nothing here reaches into the allocator. */
#ifndef BENCH_UTIL_H
#define BENCH_UTIL_H

#include <stddef.h>
#include <stdio.h>

#ifdef __cplusplus
extern "C" {
#endif

/** Monotonic wall clock in seconds. */
double bench_now(void);

/** What getrusage tells about this process (the software figures). */
typedef struct bench_rusage {
  double utime, stime;  /* seconds of user and system CPU time */
  long minflt, majflt;  /* page faults without / with I/O */
  long nvcsw, nivcsw;   /* voluntary / involuntary context switches */
  long maxrss_kib;      /* resident-set high-water mark */
} bench_rusage_t;

void bench_rusage(bench_rusage_t *out);
/** out = b - a for the counting fields; maxrss is b's. */
void bench_rusage_diff(const bench_rusage_t *a, const bench_rusage_t *b, bench_rusage_t *out);

/**
 * Size with an optional suffix: 4096, 64k, 64K, 32M, 1G (binary units).
 * @return 0, or -EINVAL for anything else (empty, junk after the number, overflow).
 */
int bench_parse_size(const char *s, size_t *out);

/**
 * Comma-separated positive integers ("1,2,4,8,16").
 * @return how many were stored (at most max), or -EINVAL.
 */
int bench_parse_int_list(const char *s, int *out, int max);

/** A positive int from s, or -EINVAL (junk, <= 0, overflow). */
int bench_parse_pos_int(const char *s, int *out);

/**
 * Size of the last-level data cache of one CPU package, from sysconf or
 * /sys; falls back to 32 MiB when neither says (so default sizes stay sane).
 */
size_t bench_llc_bytes(void);

/** Threads an OpenMP parallel region would use now (1 without OpenMP). */
int bench_max_threads(void);

/** Human-readable bytes ("1.50 GiB") into buf. @return buf. */
char *bench_fmt_bytes(double bytes, char *buf, size_t len);

#ifdef __cplusplus
}
#endif
#endif
