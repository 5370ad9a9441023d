/* STREAM for libhpcmem: copy, scale, add and triad over three arrays, on
 * MPI ranks with OpenMP threads, once per allocation variant.
 *
 * The algorithm is McCalpin's STREAM (public); the code is ours.  What is
 * added: the arrays are allocated through a table of variants (plain
 * malloc, page-aligned malloc, the three libhpcmem segments, hexe-style
 * placement with Table I priorities), each variant is validated, and every
 * kernel's bandwidth is printed next to plain malloc's from the same run.
 * The binary is not linked with libhpcmem: it runs under every allocator,
 * and the libhpcmem variants find its API at run time. */
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

#include "bench_hpcmem.h"
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
/* Allocation variants: one table entry each.  The libhpcmem ones find the
 * API at run time (bench_hpcmem.h): this binary also runs under glibc,
 * jemalloc, tcmalloc and mimalloc, where they are skipped. */

typedef struct variant {
  const char *name, *alias, *what;
  int needs;  /* 0, or the BENCH_HPCMEM_* API the variant calls */
  void *(*alloc)(size_t bytes, int array);
  void (*release)(void *p);
  /* after the three allocations, before the first touch: 0 or -errno */
  int (*after_alloc)(double *arr[NARRAYS], size_t bytes);
  /* collective, after the timed run: print where the arrays live and check
   * what the variant promises; 1 when it holds */
  int (*after_run)(double *arr[NARRAYS], size_t n, int ntimes, double scalar);
} variant_t;

static int rank, nranks;
static const bench_hpcmem_t *hp;  /* libhpcmem's API when it is the malloc */
static MPI_Comm node_comm;        /* the ranks of this node */
static size_t hbm_limit;          /* --hbm-limit; 0: none */
static int verbose_where;         /* print hpcmem_where for every rank */

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

static void release_free(void *p) { free(p); }

static void *alloc_private(size_t bytes, int array) { (void)array; return hp->malloc_seg(bytes, HPCMEM_SEG_PRIVATE); }
static void *alloc_interleaved(size_t bytes, int array) { (void)array; return hp->malloc_seg(bytes, HPCMEM_SEG_INTERLEAVED); }
static void *alloc_shared(size_t bytes, int array) { (void)array; return hp->malloc_seg(bytes, HPCMEM_SEG_SHARED); }

/* hpcmem_free_seg checks that the block is still in the segment it was made in */
static void release_seg(void *p)
{
  int seg = hp->seg_of(p);
  if (hp->free_seg(p, seg) != 0)
    fprintf(stderr, "stream: rank %d: hpcmem_free_seg(%p, %d) refused\n", rank, p, seg);
}

static int check_segment(double *arr[NARRAYS], int seg, const char *label)
{
  int ok = 1, all_ok;
  for (int i = 0; i < NARRAYS; i++)
    if (hp->seg_of(arr[i]) != seg)
      ok = 0;
  MPI_Allreduce(&ok, &all_ok, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
  if (rank == 0)
    printf("  %s: arrays in the %s segment: %s\n", label, hp->seg_name != NULL ? hp->seg_name(seg) : "?",
           all_ok ? "yes (hpcmem_seg_of)" : "NO");
  return all_ok;
}

static int after_run_private(double *arr[NARRAYS], size_t n, int ntimes, double scalar)
{
  (void)n; (void)ntimes; (void)scalar;
  return check_segment(arr, HPCMEM_SEG_PRIVATE, "segment");
}

static int after_run_interleaved(double *arr[NARRAYS], size_t n, int ntimes, double scalar)
{
  hpcmem_seg_info_t info;
  (void)n; (void)ntimes; (void)scalar;
  if (rank == 0 && hp->seg_info(HPCMEM_SEG_INTERLEAVED, &info) == 0)
    printf("  segment: pages interleaved over NUMA nodes %s\n", info.nodes);
  return check_segment(arr, HPCMEM_SEG_INTERLEAVED, "segment");
}

static int validate(const double *a, const double *b, const double *c, size_t n,
                    int ntimes, double scalar, double err_out[NARRAYS]);

/* Every rank of the node can address every rank's arrays: each rank
 * validates its right-hand neighbour's arrays through its own mapping,
 * found from the offsets the neighbour published. */
static int after_run_shared(double *arr[NARRAYS], size_t n, int ntimes, double scalar)
{
  hpcmem_seg_info_t info;
  int node_rank, node_size, ok = 1, all_ok;
  uint64_t mine[NARRAYS + 1], *offs;

  MPI_Comm_rank(node_comm, &node_rank);
  MPI_Comm_size(node_comm, &node_size);
  ok = check_segment(arr, HPCMEM_SEG_SHARED, "segment");
  if (hp->seg_info(HPCMEM_SEG_SHARED, &info) != 0)
    memset(&info, 0, sizeof info);
  for (int i = 0; i < NARRAYS; i++)
    if (hp->seg_offset(arr[i], &mine[i]) != 0)
      ok = 0;
  mine[NARRAYS] = n;
  offs = malloc(sizeof mine * node_size);
  if (offs == NULL)
    MPI_Abort(MPI_COMM_WORLD, 1);
  MPI_Allgather(mine, NARRAYS + 1, MPI_UINT64_T, offs, NARRAYS + 1, MPI_UINT64_T, node_comm);
  const uint64_t *next = offs + (size_t)((node_rank + 1) % node_size) * (NARRAYS + 1);
  const double *na = hp->seg_pointer(next[ARR_A]), *nb = hp->seg_pointer(next[ARR_B]),
               *nc = hp->seg_pointer(next[ARR_C]);
  double err[NARRAYS];
  int neighbour_ok = na != NULL && nb != NULL && nc != NULL
                     && validate(na, nb, nc, (size_t)next[NARRAYS], ntimes, scalar, err);
  MPI_Allreduce(&neighbour_ok, &all_ok, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
  if (rank == 0) {
    printf("  segment: one mapping for the %d rank(s) of this node%s; rank %d's part at %p\n",
           info.node_ranks, info.process_local ? " (process-local: not an MPI job)" : "",
           info.node_rank, info.own_base);
    printf("  neighbour check: each rank validated the next node rank's arrays through the shared mapping: %s\n",
           all_ok ? "passed" : "FAILED");
  }
  free(offs);
  /* nobody frees its arrays while a neighbour still reads them */
  MPI_Barrier(node_comm);
  int ok_all;
  MPI_Allreduce(&ok, &ok_all, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
  return ok_all && all_ok;
}

/* hexe Table I: lazily placed (ON_COMMIT), preferred HBM then DRAM, what
 * does not fit spills over; a has priority 2, b and c priority 1.  Without
 * HBM on the machine the class list is DRAM alone. */
static int place_classes;  /* 1: DRAM only, 2: HBM then DRAM */

static void *alloc_place(size_t bytes, int array)
{
  hpcmem_place_attr_t a;

  hp->place_attr_init(&a);
  place_classes = 1;
  if (hp->place_attr_add(&a, HPCMEM_CLASS_HBM, HPCMEM_INDEX_ALL) == 0)
    place_classes = 2;
  if (hp->place_attr_add(&a, HPCMEM_CLASS_DRAM, HPCMEM_INDEX_ALL) != 0)
    return NULL;
  a.split = HPCMEM_SPLIT_SPILL_OVER;
  a.mapping = HPCMEM_MAP_ON_COMMIT;
  a.mismatch = HPCMEM_MISMATCH_FALLBACK;
  a.priority = table1_priority[array];
  return hp->place_alloc(bytes, &a);
}

static void release_place(void *p)
{
  if (hp->place_free(p) != 0)
    fprintf(stderr, "stream: rank %d: hpcmem_place_free(%p) refused\n", rank, p);
}

static int commit_place(double *arr[NARRAYS], size_t bytes)
{
  (void)arr; (void)bytes;
  int rc = hp->commit(HPCMEM_COMMIT_EPOCH);
  if (rc != 0)
    fprintf(stderr, "stream: rank %d: hpcmem_commit: %s\n", rank, strerror(-rc));
  return rc;
}

static int after_run_place(double *arr[NARRAYS], size_t n, int ntimes, double scalar)
{
  static const char *const aname[NARRAYS] = {"a", "b", "c"};
  enum { LINE = 400 };
  char line[LINE], *all = NULL;
  hpcmem_place_stats_t st;
  int ok = 1, all_ok, used = 0;
  (void)ntimes; (void)scalar;

  for (int i = 0; i < NARRAYS && used < LINE; i++) {
    char one[160];
    ok &= bench_place_describe(hp, arr[i], n * sizeof(double), aname[i], one, sizeof one);
    used += snprintf(line + used, LINE - used, "%s%s", i ? " | " : "", one);
  }
  if (hp->place_stats(&st) != 0)
    memset(&st, 0, sizeof st);
  if (rank == 0)
    all = malloc((size_t)LINE * nranks);
  MPI_Gather(line, LINE, MPI_CHAR, all, LINE, MPI_CHAR, 0, MPI_COMM_WORLD);
  MPI_Allreduce(&ok, &all_ok, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
  if (rank == 0) {
    printf("  placement: ON_COMMIT, %s, spill-over, fallback; priorities a=%d b=%d c=%d (hexe Table I)\n",
           place_classes == 2 ? "HBM preferred then DRAM" : "DRAM (this machine has no HBM)",
           table1_priority[ARR_A], table1_priority[ARR_B], table1_priority[ARR_C]);
    printf("  commit (rank 0): %.3f ms, %llu bytes migrated (the arrays were not touched before it)\n",
           1e-6 * (double)st.commit_ns, (unsigned long long)st.moved_bytes);
    for (int r = 0; r < (verbose_where ? nranks : 1); r++)
      printf("  rank %d: %s\n", r, all + (size_t)r * LINE);
    if (!verbose_where && nranks > 1)
      printf("  (--where prints every rank)\n");
    if (!all_ok)
      printf("  placement: some array was not placed (pending or failed)\n");
  }
  free(all);
  return all_ok;
}

static const variant_t variants[] = {
  {"malloc", "plain", "plain malloc", 0, alloc_malloc, release_free, NULL, NULL},
  {"malloc-aligned", "aligned", "posix_memalign, 2 MiB aligned", 0, alloc_aligned, release_free, NULL, NULL},
  {"segment-private", "private", "hpcmem_malloc_seg(HPCMEM_SEG_PRIVATE)", BENCH_HPCMEM_SEGMENTS,
   alloc_private, release_seg, NULL, after_run_private},
  {"segment-interleaved", "interleaved", "hpcmem_malloc_seg(HPCMEM_SEG_INTERLEAVED)", BENCH_HPCMEM_SEGMENTS,
   alloc_interleaved, release_seg, NULL, after_run_interleaved},
  {"segment-shared", "shared", "hpcmem_malloc_seg(HPCMEM_SEG_SHARED), the node-shared mapping",
   BENCH_HPCMEM_SEGMENTS, alloc_shared, release_seg, NULL, after_run_shared},
  {"placement", "place", "hpcmem_place_alloc with the hexe Table I priorities, then hpcmem_commit",
   BENCH_HPCMEM_PLACEMENT, alloc_place, release_place, commit_place, after_run_place},
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

static void usage(FILE *out)
{
  fprintf(out,
    "usage: stream [options]\n"
    "  --array-size=BYTES   size of EACH array summed over all ranks (suffix k, M, G);\n"
    "                       default: --llc-factor x the last-level cache\n"
    "  --llc-factor=F       default array size as a multiple of the LLC (default 4)\n"
    "  --ntimes=N           repetitions of each kernel, best of N-1 reported (default 10, >= 2)\n"
    "  --alloc=LIST         comma-separated allocation variants, by name or short name (default: all):\n");
  for (int v = 0; v < NVARIANTS; v++)
    fprintf(out, "                         %-20s %-12s %s%s\n", variants[v].name, variants[v].alias,
            variants[v].what, variants[v].needs ? " [libhpcmem]" : "");
  fprintf(out,
    "                       plain malloc always runs: the ratios are against it.  [libhpcmem]\n"
    "                       variants need libhpcmem as the malloc (LD_PRELOAD=libhpcmem.so) and\n"
    "                       are skipped, with a line saying so, under any other allocator\n"
    "  --variants=LIST      the same as --alloc\n"
    "  --hbm-limit=BYTES    placement: let libhpcmem use at most this much HBM (hpcmem_class_limit)\n"
    "  --where              placement: print every rank's placement, not only rank 0's\n"
    "  --papi-events=LIST   PAPI events to count (default: cycles, instructions, cache and TLB misses)\n"
    "  --help\n");
}

static int find_variant(const char *name, size_t len)
{
  for (int v = 0; v < NVARIANTS; v++)
    if ((strlen(variants[v].name) == len && strncmp(variants[v].name, name, len) == 0)
        || (strlen(variants[v].alias) == len && strncmp(variants[v].alias, name, len) == 0))
      return v;
  return -1;
}

static int parse_args(int argc, char **argv, options_t *o)
{
  static const struct option longopts[] = {
    {"array-size", required_argument, NULL, 's'},
    {"llc-factor", required_argument, NULL, 'f'},
    {"ntimes", required_argument, NULL, 'n'},
    {"alloc", required_argument, NULL, 'v'},
    {"variants", required_argument, NULL, 'v'},
    {"hbm-limit", required_argument, NULL, 'H'},
    {"where", no_argument, NULL, 'w'},
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
      if (*s == '\0') {
        fprintf(stderr, "stream: --alloc needs a list of variants (see --help)\n");
        return -EINVAL;
      }
      while (*s != '\0') {
        size_t len = strcspn(s, ",");
        int v = find_variant(s, len);
        if (v < 0) {
          fprintf(stderr, "stream: unknown allocation variant '%.*s' (see --help)\n", (int)len, s);
          return -EINVAL;
        }
        o->selected[v] = 1;
        s += len;
        if (*s == ',')
          s++;
      }
      break;
    }
    case 'H':
      if (bench_parse_size(optarg, &hbm_limit) != 0 || hbm_limit == 0) {
        fprintf(stderr, "stream: bad --hbm-limit '%s'\n", optarg);
        return -EINVAL;
      }
      break;
    case 'w':
      verbose_where = 1;
      break;
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
  int err_no = 0;
  for (int i = 0; i < NARRAYS && ok; i++)
    if ((arr[i] = v->alloc(bytes > 0 ? bytes : 1, i)) == NULL) {
      err_no = errno;
      ok = 0;
    }
  if (ok && v->after_alloc != NULL && v->after_alloc(arr, bytes) != 0)
    ok = 0;
  MPI_Allreduce(&ok, &all_ok, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
  if (!all_ok) {
    if (!ok)
      fprintf(stderr, "stream: variant %s: rank %d: allocation of 3 x %zu bytes failed%s%s\n", v->name, rank,
              bytes, err_no ? ": " : "", err_no ? strerror(err_no) : "");
    if (rank == 0)
      printf("\nvariant %s: allocation of 3 x %zu bytes failed on some rank\n", v->name, bytes);
    for (int i = 0; i < NARRAYS; i++)
      if (arr[i] != NULL)
        v->release(arr[i]);
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
  if (v->after_run != NULL && !v->after_run(arr, n_local, o->ntimes, scalar))
    res->valid = 0;
  for (int i = 0; i < NARRAYS; i++)
    v->release(arr[i]);
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
    if (variants[v].needs && bench_hpcmem_get(variants[v].needs, NULL) == NULL) {
      printf(" skipped: needs libhpcmem as the malloc\n");
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
  MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &node_comm);
  const char *why_seg = NULL, *why_place = NULL;
  const bench_hpcmem_t *hp_seg = bench_hpcmem_get(BENCH_HPCMEM_SEGMENTS, &why_seg);
  const bench_hpcmem_t *hp_place = bench_hpcmem_get(BENCH_HPCMEM_PLACEMENT, &why_place);
  hp = hp_seg != NULL ? hp_seg : hp_place;
  if (hbm_limit > 0 && hp_place != NULL) {
    int lrc = hp_place->class_limit(HPCMEM_CLASS_HBM, hbm_limit);
    if (rank == 0 && lrc != 0)
      printf("note: --hbm-limit not applied: %s\n", lrc == -ENODEV ? "this machine has no HBM" : strerror(-lrc));
  }
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
    printf("malloc of this process: %s\n", bench_malloc_provider());
  }

  memset(res, 0, sizeof res);
  for (int v = 0; v < NVARIANTS; v++) {
    if (!o.selected[v])
      continue;
    if (variants[v].needs) {
      const char *why = variants[v].needs == BENCH_HPCMEM_SEGMENTS ? why_seg : why_place;
      if (bench_hpcmem_get(variants[v].needs, NULL) == NULL) {
        if (rank == 0)
          printf("\nvariant %s: skipped: %s\n", variants[v].name, why);
        continue;
      }
    }
    if (run_variant(&variants[v], &o, n_local, n_total, ctr, &res[v]) != 0 || !res[v].valid)
      failed = 1;
  }
  if (rank == 0)
    print_summary(&o, res);
  bench_counters_free(ctr);
  MPI_Comm_free(&node_comm);
  MPI_Finalize();
  return failed ? 1 : 0;
}
