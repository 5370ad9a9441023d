/* STREAM for libhpcmem: copy, scale, add and triad over three arrays, on
 * MPI ranks with OpenMP threads, once per allocation variant.
 *
 * The algorithm is McCalpin's STREAM (public); the code is ours.  What is
 * added: the arrays are allocated through a table of variants (plain
 * malloc, page-aligned malloc, the libhpcmem segments, hexe-style
 * placement priorities), each variant is validated, and every kernel's
 * bandwidth is printed next to plain malloc's from the same run. */
#include "config.h"

#include <errno.h>
#include <float.h>
#include <getopt.h>
#include <math.h>
#include <mpi.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#ifdef _OPENMP
#include <omp.h>
#endif

#include "bench_papi.h"
#include "bench_util.h"

enum { COPY, SCALE, ADD, TRIAD, NKERNELS };
static const char *const kernel_name[NKERNELS] = {"Copy", "Scale", "Add", "Triad"};
/* arrays each kernel moves (reads + writes), as STREAM counts them */
static const int kernel_arrays[NKERNELS] = {2, 2, 3, 3};

enum { ARR_A, ARR_B, ARR_C, NARRAYS };
/* hexe Table I: every kernel writes a, and writes cost more than reads,
 * so a gets the higher placement priority. */
static const int table1_priority[NARRAYS] = {2, 1, 1};

/* ------------------------------------------------------------------ */
/* Allocation variants.  Adding the interleaved segment is one entry.  */

typedef struct variant {
  const char *name;
  const char *what;
  /* NULL when the variant does not exist in this build; then `missing` says why */
  void *(*alloc)(size_t bytes, int array);
  void (*release)(void *p, size_t bytes);
  const char *missing;
} variant_t;

static void *alloc_malloc(size_t bytes, int array)
{
  (void)array;
  return malloc(bytes);
}

/* The hexe paper found malloc lost bandwidth only because its arrays were
 * not page aligned; 2 MiB alignment also lets transparent huge pages in. */
static void *alloc_aligned(size_t bytes, int array)
{
  void *p = NULL;
  (void)array;
  return posix_memalign(&p, (size_t)2 << 20, bytes) == 0 ? p : NULL;
}

static void release_free(void *p, size_t bytes)
{
  (void)bytes;
  free(p);
}

#define NO_SEGMENTS "needs the libhpcmem segment API (hpcmem_segment_alloc), not in this build"
#define NO_PLACEMENT "needs the libhpcmem placement API (hpcmem_place_alloc), not in this build"

static const variant_t variants[] = {
  {"malloc", "plain malloc", alloc_malloc, release_free, NULL},
  {"malloc-aligned", "posix_memalign, 2 MiB aligned", alloc_aligned, release_free, NULL},
  {"segment-private", "libhpcmem private segment", NULL, NULL, NO_SEGMENTS},
  {"segment-interleaved", "libhpcmem interleaved segment", NULL, NULL, NO_SEGMENTS},
  {"segment-shared", "libhpcmem node-shared segment", NULL, NULL, NO_SEGMENTS},
  {"placement", "placement attributes with the hexe Table I priorities", NULL, NULL, NO_PLACEMENT},
};
#define NVARIANTS ((int)(sizeof variants / sizeof variants[0]))

/* ------------------------------------------------------------------ */

typedef struct options {
  size_t array_bytes;     /* one array, all ranks together */
  double llc_factor;
  int ntimes;
  int selected[NVARIANTS];
  const char *papi_events;
} options_t;

typedef struct result {
  int ran, valid;
  double best_mbs[NKERNELS];           /* all ranks together */
  double avg_s[NKERNELS], min_s[NKERNELS], max_s[NKERNELS];
  double err[NARRAYS];
} result_t;

static int rank, nranks;

static void usage(FILE *out)
{
  fprintf(out,
    "usage: stream [options]\n"
    "  --array-size=BYTES   size of EACH array summed over all ranks (suffix k, M, G);\n"
    "                       default: --llc-factor x the last-level cache\n"
    "  --llc-factor=F       default array size as a multiple of the LLC (default 4)\n"
    "  --ntimes=N           repetitions of each kernel, best of N-1 reported (default 10, >= 2)\n"
    "  --variants=LIST      comma-separated allocation variants (default: all):\n");
  for (int v = 0; v < NVARIANTS; v++)
    fprintf(out, "                         %-20s %s\n", variants[v].name, variants[v].what);
  fprintf(out,
    "  --papi-events=LIST   PAPI events to count (default: cycles, instructions, cache and TLB misses)\n"
    "  --help\n");
}

static int find_variant(const char *name, size_t len)
{
  for (int v = 0; v < NVARIANTS; v++)
    if (strlen(variants[v].name) == len && strncmp(variants[v].name, name, len) == 0)
      return v;
  return -1;
}

static int parse_args(int argc, char **argv, options_t *o)
{
  static const struct option longopts[] = {
    {"array-size", required_argument, NULL, 's'},
    {"llc-factor", required_argument, NULL, 'f'},
    {"ntimes", required_argument, NULL, 'n'},
    {"variants", required_argument, NULL, 'v'},
    {"papi-events", required_argument, NULL, 'p'},
    {"help", no_argument, NULL, 'h'},
    {NULL, 0, NULL, 0},
  };
  int c;
  char *end;

  memset(o, 0, sizeof *o);
  o->llc_factor = 4.0;
  o->ntimes = 10;
  for (int v = 0; v < NVARIANTS; v++)
    o->selected[v] = 1;
  while ((c = getopt_long(argc, argv, "", longopts, NULL)) != -1) {
    switch (c) {
    case 's':
      if (bench_parse_size(optarg, &o->array_bytes) != 0 || o->array_bytes == 0) {
        fprintf(stderr, "stream: bad --array-size '%s'\n", optarg);
        return -EINVAL;
      }
      break;
    case 'f':
      o->llc_factor = strtod(optarg, &end);
      if (*end != '\0' || !(o->llc_factor > 0.0) || o->llc_factor > 1e6) {
        fprintf(stderr, "stream: bad --llc-factor '%s'\n", optarg);
        return -EINVAL;
      }
      break;
    case 'n':
      if (bench_parse_pos_int(optarg, &o->ntimes) != 0 || o->ntimes < 2) {
        fprintf(stderr, "stream: --ntimes needs an integer >= 2, not '%s'\n", optarg);
        return -EINVAL;
      }
      break;
    case 'v': {
      const char *s = optarg;
      memset(o->selected, 0, sizeof o->selected);
      while (*s != '\0') {
        size_t len = strcspn(s, ",");
        int v = find_variant(s, len);
        if (v < 0) {
          fprintf(stderr, "stream: unknown variant '%.*s' (see --help)\n", (int)len, s);
          return -EINVAL;
        }
        o->selected[v] = 1;
        s += len;
        if (*s == ',')
          s++;
      }
      break;
    }
    case 'p':
      o->papi_events = optarg;
      break;
    case 'h':
      if (rank == 0)
        usage(stdout);
      return 1;
    default:
      if (rank == 0)
        usage(stderr);
      return -EINVAL;
    }
  }
  if (optind < argc) {
    fprintf(stderr, "stream: unexpected argument '%s'\n", argv[optind]);
    return -EINVAL;
  }
  if (!o->selected[0]) {
    /* the ratios are against plain malloc measured in the same run */
    o->selected[0] = 1;
  }
  return 0;
}

/* ------------------------------------------------------------------ */

static void first_touch(double *a, double *b, double *c, size_t n)
{
  /* same static schedule as the kernels: each thread touches the pages it will use */
#pragma omp parallel for schedule(static)
  for (size_t j = 0; j < n; j++) {
    a[j] = 1.0;
    b[j] = 2.0;
    c[j] = 0.0;
  }
#pragma omp parallel for schedule(static)
  for (size_t j = 0; j < n; j++)
    a[j] = 2.0 * a[j];
}

static void run_kernel(int k, double *restrict a, double *restrict b, double *restrict c,
                       size_t n, double scalar)
{
  switch (k) {
  case COPY:
#pragma omp parallel for schedule(static)
    for (size_t j = 0; j < n; j++)
      c[j] = a[j];
    break;
  case SCALE:
#pragma omp parallel for schedule(static)
    for (size_t j = 0; j < n; j++)
      b[j] = scalar * c[j];
    break;
  case ADD:
#pragma omp parallel for schedule(static)
    for (size_t j = 0; j < n; j++)
      c[j] = a[j] + b[j];
    break;
  case TRIAD:
#pragma omp parallel for schedule(static)
    for (size_t j = 0; j < n; j++)
      a[j] = b[j] + scalar * c[j];
    break;
  }
}

/* Replay the kernels on scalars and compare every element: STREAM's check,
 * as the mean absolute relative error of each array. */
static int validate(const double *a, const double *b, const double *c, size_t n,
                    int ntimes, double scalar, double err_out[NARRAYS])
{
  double aj = 2.0, bj = 2.0, cj = 0.0;
  double sum[NARRAYS] = {0, 0, 0};
  const double eps = 1e-13;

  for (int k = 0; k < ntimes; k++) {
    cj = aj;
    bj = scalar * cj;
    cj = aj + bj;
    aj = bj + scalar * cj;
  }
#pragma omp parallel for schedule(static) reduction(+ : sum[:NARRAYS])
  for (size_t j = 0; j < n; j++) {
    sum[ARR_A] += fabs(a[j] - aj);
    sum[ARR_B] += fabs(b[j] - bj);
    sum[ARR_C] += fabs(c[j] - cj);
  }
  err_out[ARR_A] = n ? sum[ARR_A] / (double)n / fabs(aj) : 0.0;
  err_out[ARR_B] = n ? sum[ARR_B] / (double)n / fabs(bj) : 0.0;
  err_out[ARR_C] = n ? sum[ARR_C] / (double)n / fabs(cj) : 0.0;
  return err_out[ARR_A] <= eps && err_out[ARR_B] <= eps && err_out[ARR_C] <= eps;
}

static int run_variant(const variant_t *v, const options_t *o, size_t n_local, size_t n_total,
                       bench_counters_t *ctr, result_t *res)
{
  const double scalar = 3.0;
  const size_t bytes = n_local * sizeof(double);
  double *arr[NARRAYS] = {NULL, NULL, NULL};
  int ok = 1, all_ok;
  double *t_local = calloc((size_t)NKERNELS * o->ntimes, sizeof(double));
  double *t_global = calloc((size_t)NKERNELS * o->ntimes, sizeof(double));
  double *t_max = calloc((size_t)NKERNELS * o->ntimes, sizeof(double));

  memset(res, 0, sizeof *res);
  if (t_local == NULL || t_global == NULL || t_max == NULL)
    ok = 0;
  for (int i = 0; i < NARRAYS && ok; i++)
    if ((arr[i] = v->alloc(bytes > 0 ? bytes : 1, i)) == NULL)
      ok = 0;
  MPI_Allreduce(&ok, &all_ok, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
  if (!all_ok) {
    if (rank == 0)
      printf("variant %s: allocation of 3 x %zu bytes failed on some rank\n", v->name, bytes);
    for (int i = 0; i < NARRAYS; i++)
      if (arr[i] != NULL)
        v->release(arr[i], bytes);
    free(t_local); free(t_global); free(t_max);
    return -ENOMEM;
  }
  double *a = arr[ARR_A], *b = arr[ARR_B], *c = arr[ARR_C];
  first_touch(a, b, c, n_local);

  MPI_Barrier(MPI_COMM_WORLD);
  bench_counters_start(ctr, bench_max_threads());
  for (int it = 0; it < o->ntimes; it++) {
    for (int k = 0; k < NKERNELS; k++) {
      MPI_Barrier(MPI_COMM_WORLD);
      double t0 = bench_now();
      run_kernel(k, a, b, c, n_local, scalar);
      t_local[k * o->ntimes + it] = bench_now() - t0;
      MPI_Barrier(MPI_COMM_WORLD);
      t_global[k * o->ntimes + it] = bench_now() - t0;
    }
  }
  bench_counters_stop(ctr);

  /* aggregate bandwidth uses the slowest rank's time of each repetition */
  MPI_Allreduce(t_global, t_max, NKERNELS * o->ntimes, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
  for (int k = 0; k < NKERNELS; k++) {
    double mn = DBL_MAX, mx = 0.0, sum = 0.0;
    for (int it = 1; it < o->ntimes; it++) {  /* the first pass warms up */
      double t = t_max[k * o->ntimes + it];
      mn = t < mn ? t : mn;
      mx = t > mx ? t : mx;
      sum += t;
    }
    res->min_s[k] = mn;
    res->max_s[k] = mx;
    res->avg_s[k] = sum / (o->ntimes - 1);
    res->best_mbs[k] = 1e-6 * kernel_arrays[k] * sizeof(double) * (double)n_total / mn;
  }

  /* best bandwidth per kernel and rank, from the rank's own kernel times */
  double mine[NKERNELS], *all = rank == 0 ? malloc(sizeof(double) * NKERNELS * nranks) : NULL;
  for (int k = 0; k < NKERNELS; k++) {
    double mn = DBL_MAX;
    for (int it = 1; it < o->ntimes; it++)
      mn = t_local[k * o->ntimes + it] < mn ? t_local[k * o->ntimes + it] : mn;
    mine[k] = 1e-6 * kernel_arrays[k] * sizeof(double) * (double)n_local / mn;
  }
  MPI_Gather(mine, NKERNELS, MPI_DOUBLE, all, NKERNELS, MPI_DOUBLE, 0, MPI_COMM_WORLD);

  double err[NARRAYS];
  int valid = validate(a, b, c, n_local, o->ntimes, scalar, err);
  MPI_Allreduce(err, res->err, NARRAYS, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
  MPI_Allreduce(&valid, &res->valid, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
  res->ran = 1;

  /* counters: sums over ranks (a region's time is the slowest rank's) */
  const bench_rusage_t *ru = bench_counters_rusage(ctr);
  long long soft[4] = {ru->minflt, ru->majflt, llround(1e6 * ru->utime), llround(1e6 * ru->stime)};
  long long soft_sum[4];
  int nev = bench_counters_n(ctr);
  long long hw[BENCH_MAX_EVENTS], hw_sum[BENCH_MAX_EVENTS];
  for (int i = 0; i < nev; i++)
    hw[i] = bench_counters_value(ctr, i);
  MPI_Reduce(soft, soft_sum, 4, MPI_LONG_LONG, MPI_SUM, 0, MPI_COMM_WORLD);
  if (nev > 0)
    MPI_Reduce(hw, hw_sum, nev, MPI_LONG_LONG, MPI_SUM, 0, MPI_COMM_WORLD);

  if (rank == 0) {
    printf("\nvariant %s (%s)\n", v->name, v->what);
    if (strcmp(v->name, "placement") == 0)
      printf("  priorities: a=%d b=%d c=%d\n", table1_priority[ARR_A], table1_priority[ARR_B],
             table1_priority[ARR_C]);
    printf("  %-8s %12s %11s %11s %11s\n", "Function", "Best MB/s", "Avg time", "Min time", "Max time");
    for (int k = 0; k < NKERNELS; k++)
      printf("  %-8s %12.1f %11.6f %11.6f %11.6f\n", kernel_name[k], res->best_mbs[k],
             res->avg_s[k], res->min_s[k], res->max_s[k]);
    for (int r = 0; r < nranks; r++) {
      printf("  rank %-3d best MB/s:", r);
      for (int k = 0; k < NKERNELS; k++)
        printf(" %s %.1f", kernel_name[k], all[r * NKERNELS + k]);
      printf("\n");
    }
    printf("  counters (all ranks, %d kernel passes): time=%.3fs minflt=%lld majflt=%lld utime=%.3fs stime=%.3fs",
           NKERNELS * o->ntimes, bench_counters_seconds(ctr), soft_sum[0], soft_sum[1],
           1e-6 * soft_sum[2], 1e-6 * soft_sum[3]);
    for (int i = 0; i < nev; i++)
      printf(" %s=%lld", bench_counters_event(ctr, i), hw_sum[i]);
    printf("\n  validation: %s (mean relative error a=%.2e b=%.2e c=%.2e, limit 1e-13)\n",
           res->valid ? "passed" : "FAILED", res->err[ARR_A], res->err[ARR_B], res->err[ARR_C]);
  }
  free(all);
  for (int i = 0; i < NARRAYS; i++)
    v->release(arr[i], bytes);
  free(t_local); free(t_global); free(t_max);
  return 0;
}

static void print_summary(const options_t *o, const result_t *res)
{
  const result_t *base = &res[0];
  printf("\nSummary: best MB/s of all ranks together; (x) = ratio against plain malloc in this run\n");
  printf("  %-20s", "variant");
  for (int k = 0; k < NKERNELS; k++)
    printf(" %18s", kernel_name[k]);
  printf("  validation\n");
  for (int v = 0; v < NVARIANTS; v++) {
    if (!o->selected[v])
      continue;
    printf("  %-20s", variants[v].name);
    if (variants[v].alloc == NULL) {
      printf(" not available: %s\n", variants[v].missing);
      continue;
    }
    if (!res[v].ran) {
      printf(" did not run (allocation failed)\n");
      continue;
    }
    for (int k = 0; k < NKERNELS; k++)
      printf(" %10.1f (%4.2fx)", res[v].best_mbs[k], res[v].best_mbs[k] / base->best_mbs[k]);
    printf("  %s\n", res[v].valid ? "passed" : "FAILED");
  }
  /* machine-readable lines for benchmarks/run-all.sh */
  for (int v = 0; v < NVARIANTS; v++)
    if (o->selected[v] && res[v].ran)
      for (int k = 0; k < NKERNELS; k++)
        printf("#result stream %s %s %.1f %.4f %s\n", variants[v].name, kernel_name[k],
               res[v].best_mbs[k], res[v].best_mbs[k] / base->best_mbs[k],
               res[v].valid ? "valid" : "invalid");
}

int main(int argc, char **argv)
{
  options_t o;
  result_t res[NVARIANTS];
  int rc, failed = 0;
  char b1[32], b2[32], b3[32];

  MPI_Init(&argc, &argv);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &nranks);
  rc = parse_args(argc, argv, &o);
  if (rc != 0) {
    MPI_Finalize();
    return rc > 0 ? 0 : 2;
  }
  size_t llc = bench_llc_bytes();
  if (o.array_bytes == 0)
    o.array_bytes = (size_t)(o.llc_factor * (double)llc);
  size_t n_total = o.array_bytes / sizeof(double);
  if (n_total < (size_t)nranks) {
    if (rank == 0)
      fprintf(stderr, "stream: --array-size gives fewer elements (%zu) than ranks (%d)\n", n_total, nranks);
    MPI_Finalize();
    return 2;
  }
  /* the first ranks take the remainder, one element each */
  size_t n_local = n_total / nranks + ((size_t)rank < n_total % nranks ? 1 : 0);

  bench_counters_t *ctr = bench_counters_new(o.papi_events);
  if (rank == 0) {
    printf("STREAM (libhpcmem benchmarks): copy, scale, add, triad in double precision\n");
    printf("ranks %d, OpenMP threads per rank %d, repetitions %d (best of the last %d)\n",
           nranks, bench_max_threads(), o.ntimes, o.ntimes - 1);
    printf("each array %s over all ranks (%zu elements, %zu on rank 0); last-level cache %s; "
           "memory per variant %s\n",
           bench_fmt_bytes((double)o.array_bytes, b1, sizeof b1), n_total, n_local,
           bench_fmt_bytes((double)llc, b2, sizeof b2),
           bench_fmt_bytes(3.0 * (double)o.array_bytes, b3, sizeof b3));
    if ((double)o.array_bytes < 4.0 * (double)llc)
      printf("note: arrays smaller than 4 x the last-level cache measure the cache, not memory\n");
    printf("%s\n", bench_counters_status(ctr));
  }

  memset(res, 0, sizeof res);
  for (int v = 0; v < NVARIANTS; v++) {
    if (!o.selected[v])
      continue;
    if (variants[v].alloc == NULL) {
      if (rank == 0)
        printf("\nvariant %s: not available: %s\n", variants[v].name, variants[v].missing);
      continue;
    }
    if (run_variant(&variants[v], &o, n_local, n_total, ctr, &res[v]) != 0 || !res[v].valid)
      failed = 1;
  }
  if (rank == 0)
    print_summary(&o, res);
  bench_counters_free(ctr);
  MPI_Finalize();
  return failed ? 1 : 0;
}
