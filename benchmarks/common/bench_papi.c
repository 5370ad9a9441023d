#include "config.h"
#include "bench_papi.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#ifdef _OPENMP
#include <omp.h>
#endif
#ifdef HAVE_PAPI
#include <papi.h>
#endif

#define MAX_THREADS 256

struct slot {
  int es;              /* PAPI event set of one team thread */
  pthread_t owner;     /* the thread that created it: PAPI binds sets to threads */
  int valid;
};

struct bench_counters {
  char status[512];
  int n;
  char names[BENCH_MAX_EVENTS][128];
  int process_wide[BENCH_MAX_EVENTS];
  long long values[BENCH_MAX_EVENTS];
  int nthreads;
  double t0, seconds;
  bench_rusage_t r0, dr;
  struct slot slot[MAX_THREADS];
};

#ifdef HAVE_PAPI
static const char *default_events =
    "PAPI_TOT_CYC,PAPI_TOT_INS,PAPI_L1_DCM,PAPI_L2_DCM,PAPI_L3_TCM,PAPI_TLB_DM";

static pthread_once_t papi_once = PTHREAD_ONCE_INIT;
static int papi_ok;
static char papi_error[256];

static unsigned long thread_id(void) { return (unsigned long)pthread_self(); }

static void papi_init_once(void)
{
  int rc = PAPI_library_init(PAPI_VER_CURRENT);
  if (rc != PAPI_VER_CURRENT) {
    snprintf(papi_error, sizeof papi_error, "PAPI_library_init failed: %s",
             rc > 0 ? "version mismatch" : PAPI_strerror(rc));
    return;
  }
  if ((rc = PAPI_thread_init(thread_id)) != PAPI_OK) {
    snprintf(papi_error, sizeof papi_error, "PAPI_thread_init failed: %s", PAPI_strerror(rc));
    return;
  }
  papi_ok = 1;
}

/* Hardware counters come from perf_event; its component says whether the
 * kernel lets us have them and, if not, why. */
static int perf_event_reason(char *why, size_t len)
{
  int cidx = PAPI_get_component_index("perf_event");
  const PAPI_component_info_t *ci;

  if (cidx < 0) {
    snprintf(why, len, "PAPI has no perf_event component");
    return -1;
  }
  ci = PAPI_get_component_info(cidx);
  if (ci == NULL) {
    snprintf(why, len, "no information on the perf_event component");
    return -1;
  }
  if (ci->disabled) {
    snprintf(why, len, "perf_event component disabled: %.300s",
             ci->disabled_reason[0] ? ci->disabled_reason : "no reason given");
    return -1;
  }
  if (ci->num_cntrs <= 0) {
    snprintf(why, len, "perf_event component has no counters");
    return -1;
  }
  return 0;
}

/* Keep the events that exist and that fit together in one event set. */
static void choose_events(bench_counters_t *c, const char *list, char *dropped, size_t dlen)
{
  int es = PAPI_NULL;
  char *copy = strdup(list), *save = NULL, *tok;

  dropped[0] = '\0';
  if (copy == NULL || PAPI_create_eventset(&es) != PAPI_OK) {
    free(copy);
    return;
  }
  for (tok = strtok_r(copy, ",", &save); tok != NULL; tok = strtok_r(NULL, ",", &save)) {
    if (c->n >= BENCH_MAX_EVENTS || strlen(tok) >= sizeof c->names[0]
        || PAPI_add_named_event(es, tok) != PAPI_OK) {
      size_t used = strlen(dropped);
      snprintf(dropped + used, dlen - used, "%s%s", used ? " " : "", tok);
      continue;
    }
    strcpy(c->names[c->n], tok);
    c->process_wide[c->n] = strncmp(tok, "sde:::", 6) == 0;
    c->n++;
  }
  PAPI_cleanup_eventset(es);
  PAPI_destroy_eventset(&es);
  free(copy);
}
#endif

bench_counters_t *bench_counters_new(const char *events)
{
  bench_counters_t *c = calloc(1, sizeof *c);
  if (c == NULL)
    return NULL;
  c->nthreads = 1;
#ifdef HAVE_PAPI
  char why[384], dropped[384];
  int user_list = events != NULL && events[0] != '\0';

  pthread_once(&papi_once, papi_init_once);
  if (!papi_ok) {
    snprintf(c->status, sizeof c->status, "PAPI: no counters (%s); software figures from getrusage", papi_error);
    return c;
  }
  int have_hw = perf_event_reason(why, sizeof why) == 0;
  if (!have_hw && !user_list) {
    snprintf(c->status, sizeof c->status, "PAPI: no hardware counters (%s); software figures from getrusage", why);
    return c;
  }
  choose_events(c, user_list ? events : default_events, dropped, sizeof dropped);
  if (c->n == 0) {
    snprintf(c->status, sizeof c->status, "PAPI: none of the events can be counted (%s%s%s); software figures from getrusage",
             have_hw ? "" : why, have_hw ? "" : "; ", dropped);
    return c;
  }
  int len = snprintf(c->status, sizeof c->status, "PAPI: counting");
  for (int i = 0; i < c->n && len < (int)sizeof c->status; i++)
    len += snprintf(c->status + len, sizeof c->status - len, " %s", c->names[i]);
  if (dropped[0] != '\0' && len < (int)sizeof c->status)
    snprintf(c->status + len, sizeof c->status - len, " (not available here: %s)", dropped);
#else
  (void)events;
  snprintf(c->status, sizeof c->status, "PAPI: not in this build (configure found no libpapi); software figures from getrusage");
#endif
  for (int i = 0; i < MAX_THREADS; i++)
    c->slot[i].es = -1;
  return c;
}

void bench_counters_free(bench_counters_t *c)
{
  if (c == NULL)
    return;
#ifdef HAVE_PAPI
  /* Sets owned by other threads cannot be destroyed from here; PAPI frees
   * them at shutdown.  The caller's own set (thread 0) can go now. */
  for (int i = 0; i < MAX_THREADS; i++)
    if (c->slot[i].valid && pthread_equal(c->slot[i].owner, pthread_self())) {
      PAPI_cleanup_eventset(c->slot[i].es);
      PAPI_destroy_eventset(&c->slot[i].es);
    }
#endif
  free(c);
}

const char *bench_counters_status(const bench_counters_t *c) { return c->status; }
int bench_counters_n(const bench_counters_t *c) { return c->n; }
const char *bench_counters_event(const bench_counters_t *c, int i) { return i >= 0 && i < c->n ? c->names[i] : NULL; }
long long bench_counters_value(const bench_counters_t *c, int i) { return i >= 0 && i < c->n ? c->values[i] : 0; }
double bench_counters_seconds(const bench_counters_t *c) { return c->seconds; }
const bench_rusage_t *bench_counters_rusage(const bench_counters_t *c) { return &c->dr; }

#ifdef HAVE_PAPI
static int thread_start(bench_counters_t *c, int tid)
{
  struct slot *s = &c->slot[tid];

  if (s->valid && !pthread_equal(s->owner, pthread_self()))
    s->valid = 0;  /* the runtime gave this team slot to another thread: leave the old set */
  if (!s->valid) {
    s->es = PAPI_NULL;
    if (PAPI_create_eventset(&s->es) != PAPI_OK)
      return -EIO;
    for (int i = 0; i < c->n; i++)
      if (PAPI_add_named_event(s->es, c->names[i]) != PAPI_OK)
        return -EIO;
    s->owner = pthread_self();
    s->valid = 1;
  }
  return PAPI_start(s->es) == PAPI_OK ? 0 : -EIO;
}

static int thread_stop(bench_counters_t *c, int tid)
{
  long long v[BENCH_MAX_EVENTS];
  struct slot *s = &c->slot[tid];

  if (!s->valid || !pthread_equal(s->owner, pthread_self()) || PAPI_stop(s->es, v) != PAPI_OK)
    return -EIO;
  for (int i = 0; i < c->n; i++) {
    if (c->process_wide[i] && tid != 0)
      continue;
#ifdef _OPENMP
#pragma omp atomic
#endif
    c->values[i] += v[i];
  }
  return 0;
}
#endif

int bench_counters_start(bench_counters_t *c, int nthreads)
{
  int err = 0;

  if (nthreads < 1)
    nthreads = 1;
  if (nthreads > MAX_THREADS)
    nthreads = MAX_THREADS;
#ifndef _OPENMP
  nthreads = 1;
#endif
  c->nthreads = nthreads;
  memset(c->values, 0, sizeof c->values);
#ifdef HAVE_PAPI
  if (c->n > 0) {
#ifdef _OPENMP
#pragma omp parallel num_threads(nthreads) reduction(|| : err)
    err = thread_start(c, omp_get_thread_num()) != 0;
#else
    err = thread_start(c, 0) != 0;
#endif
  }
#endif
  bench_rusage(&c->r0);
  c->t0 = bench_now();
  return err ? -EIO : 0;
}

int bench_counters_stop(bench_counters_t *c)
{
  int err = 0;
  bench_rusage_t r1;

  c->seconds = bench_now() - c->t0;
  bench_rusage(&r1);
  bench_rusage_diff(&c->r0, &r1, &c->dr);
#ifdef HAVE_PAPI
  if (c->n > 0) {
#ifdef _OPENMP
#pragma omp parallel num_threads(c->nthreads) reduction(|| : err)
    err = thread_stop(c, omp_get_thread_num()) != 0;
#else
    err = thread_stop(c, 0) != 0;
#endif
  }
#endif
  return err ? -EIO : 0;
}

char *bench_counters_format(const bench_counters_t *c, char *buf, size_t len)
{
  int used = snprintf(buf, len, "minflt=%ld majflt=%ld utime=%.3fs stime=%.3fs maxrss=%ldMiB",
                      c->dr.minflt, c->dr.majflt, c->dr.utime, c->dr.stime, c->dr.maxrss_kib / 1024);
  for (int i = 0; i < c->n && used > 0 && (size_t)used < len; i++)
    used += snprintf(buf + used, len - used, " %s=%lld", c->names[i], c->values[i]);
  return buf;
}
