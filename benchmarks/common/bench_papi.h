/* Counters next to the times: PAPI events where the machine has them,
 * getrusage figures always.
 *
 * A measured region may run on several OpenMP threads; PAPI counts per
 * thread, so start/stop open one event set in each thread of the team
 * and add the results up.  Where PAPI has no counters (perf_event
 * disabled, as in most VMs and containers) the status line says why and
 * the region still reports time, page faults and CPU time. */
#ifndef BENCH_PAPI_H
#define BENCH_PAPI_H

#include <stddef.h>
#include "bench_util.h"

#ifdef __cplusplus
extern "C" {
#endif

#define BENCH_MAX_EVENTS 16

typedef struct bench_counters bench_counters_t;

/**
 * A counter set.  @p events is a comma-separated list of PAPI event names
 * ("PAPI_TOT_CYC,sde:::libhpcmem::current_bytes"); NULL or "" asks for
 * cycles, instructions, L1/L2/L3 data misses and TLB misses, of which the
 * ones the machine offers are kept.  Never NULL except out of memory.
 */
bench_counters_t *bench_counters_new(const char *events);
void bench_counters_free(bench_counters_t *c);

/** One line on what will be counted, or why nothing is ("PAPI: ..."). */
const char *bench_counters_status(const bench_counters_t *c);

/** Start a region run by @p nthreads OpenMP threads (clamped to >= 1). @return 0 or -EIO. */
int bench_counters_start(bench_counters_t *c, int nthreads);
/** Stop the region; values are those of this region only. @return 0 or -EIO. */
int bench_counters_stop(bench_counters_t *c);

/** Number of PAPI events counted (0 when there are no counters). */
int bench_counters_n(const bench_counters_t *c);
const char *bench_counters_event(const bench_counters_t *c, int i);
/** Sum over the region's threads (process-wide sde::: events: thread 0's). */
long long bench_counters_value(const bench_counters_t *c, int i);
/** Wall time and getrusage differences of the last region. */
double bench_counters_seconds(const bench_counters_t *c);
const bench_rusage_t *bench_counters_rusage(const bench_counters_t *c);

/** "minflt=.. majflt=.. utime=..s stime=..s [PAPI_TOT_CYC=..]" into buf. @return buf. */
char *bench_counters_format(const bench_counters_t *c, char *buf, size_t len);

#ifdef __cplusplus
}
#endif
#endif
