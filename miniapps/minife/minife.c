/* miniFE driver: options, phases and their times, verification against
 * the exact solution, a per-rank table that shows (im)balance. */
#include "config.h"
#include "minife.h"

#include <errno.h>
#include <getopt.h>
#include <math.h>
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench_hpcmem.h"
#include "bench_papi.h"
#include "bench_util.h"
#include "hpcmem_sde.h"

typedef struct options {
  int nx, ny, nz, max_iter, alloc;
  double imbalance, tol;
  const char *papi_events;
} options_t;

static int rank, nranks;

static void usage(FILE *out)
{
  fprintf(out,
    "usage: minife [options] NX [NY NZ]     (NY and NZ default to NX)\n"
    "  --nx=N --ny=N --nz=N  elements along each axis (instead of the numbers)\n"
    "  --imbalance=F         uneven slabs: rank r gets the weight 1 + F*r/(ranks-1) (default 0)\n"
    "  --max-iter=N          conjugate-gradient iteration limit (default 2000)\n"
    "  --tol=F               relative residual the solver stops at (default 1e-10)\n"
    "  --alloc=KIND          where the matrix and vectors come from (default malloc):\n"
    "                          malloc       plain malloc (whichever allocator the process has)\n"
    "                          private      libhpcmem's private segment\n"
    "                          interleaved  libhpcmem's interleaved segment (pages over all NUMA nodes)\n"
    "                          shared       vectors with ghost planes in the node-shared segment; the halo\n"
    "                                       exchange reads same-node neighbours' planes directly\n"
    "                          place        libhpcmem placement (ON_COMMIT, priority 1, HBM then DRAM)\n"
    "                        all but malloc need libhpcmem as the malloc (LD_PRELOAD=libhpcmem.so);\n"
    "                        under another allocator they print why and exit with status 77\n"
    "  --papi-events=LIST    PAPI events to count around the solve (e.g. sde:::libhpcmem::current_bytes)\n");
}

static int fail(const char *fmt, const char *arg)
{
  if (rank == 0) {
    fprintf(stderr, "minife: ");
    fprintf(stderr, fmt, arg);
    fprintf(stderr, "\n");
  }
  return -EINVAL;
}

static int parse_args(int argc, char **argv, options_t *o)
{
  static const struct option longopts[] = {
    {"nx", required_argument, NULL, 'x'}, {"ny", required_argument, NULL, 'y'},
    {"nz", required_argument, NULL, 'z'}, {"imbalance", required_argument, NULL, 'i'},
    {"max-iter", required_argument, NULL, 'm'}, {"tol", required_argument, NULL, 't'},
    {"alloc", required_argument, NULL, 'a'},
    {"papi-events", required_argument, NULL, 'p'}, {"help", no_argument, NULL, 'h'},
    {NULL, 0, NULL, 0},
  };
  int c;
  char *end;

  memset(o, 0, sizeof *o);
  o->max_iter = 2000;
  o->tol = 1e-10;
  while ((c = getopt_long(argc, argv, "h", longopts, NULL)) != -1) {
    switch (c) {
    case 'x': if (bench_parse_pos_int(optarg, &o->nx) != 0) return fail("bad --nx '%s'", optarg); break;
    case 'y': if (bench_parse_pos_int(optarg, &o->ny) != 0) return fail("bad --ny '%s'", optarg); break;
    case 'z': if (bench_parse_pos_int(optarg, &o->nz) != 0) return fail("bad --nz '%s'", optarg); break;
    case 'i':
      o->imbalance = strtod(optarg, &end);
      if (*optarg == '\0' || *end != '\0' || !(o->imbalance >= 0.0 && o->imbalance <= 100.0))
        return fail("bad --imbalance '%s' (a number from 0 to 100)", optarg);
      break;
    case 'm':
      if (bench_parse_pos_int(optarg, &o->max_iter) != 0)
        return fail("bad --max-iter '%s'", optarg);
      break;
    case 't':
      o->tol = strtod(optarg, &end);
      if (*optarg == '\0' || *end != '\0' || !(o->tol > 0.0 && o->tol < 1.0))
        return fail("bad --tol '%s' (between 0 and 1)", optarg);
      break;
    case 'a':
      if ((o->alloc = minife_alloc_parse(optarg)) < 0)
        return fail("bad --alloc '%s' (malloc, private, interleaved, shared or place)", optarg);
      break;
    case 'p': o->papi_events = optarg; break;
    case 'h': if (rank == 0) usage(stdout); return 1;
    default: if (rank == 0) usage(stderr); return -EINVAL;
    }
  }
  int npos = argc - optind, *dims[3] = {&o->nx, &o->ny, &o->nz};
  if (npos != 0 && npos != 1 && npos != 3)
    return fail("give NX, or NX NY NZ%s", "");
  for (int k = 0; k < npos; k++)
    if (bench_parse_pos_int(argv[optind + k], dims[k]) != 0)
      return fail("bad size '%s'", argv[optind + k]);
  if (npos == 1)
    o->ny = o->nz = o->nx;
  if (o->nx == 0 || o->ny == 0 || o->nz == 0)
    return fail("the problem size is missing (NX [NY NZ])%s", "");
  if (o->nx < 2 || o->ny < 2 || o->nz < 2 || o->nx > 4096 || o->ny > 4096 || o->nz > 4096)
    return fail("sizes go from 2 to 4096 elements per axis%s", "");
  return 0;
}

/* max |x - u_exact| over this rank's nodes */
static double max_error(const decomp_t *d, const double *x)
{
  double err = 0.0;
#pragma omp parallel for schedule(static) reduction(max : err)
  for (int64_t r = 0; r < d->nown; r++) {
    int i = (int)(r % (d->nx + 1)), j = (int)(r / (d->nx + 1) % (d->ny + 1)), k = d->k0 + (int)(r / d->plane);
    double u = minife_exact((double)i / d->nx, (double)j / d->ny, (double)k / d->nz);
    double e = fabs(x[r] - u);
    if (e > err)
      err = e;
  }
  return err;
}

enum { F_PLANES, F_ROWS, F_NNZ, F_MIB, F_ASSEMBLY, F_SOLVE, F_COMPUTE, NFIELDS };

int main(int argc, char **argv)
{
  options_t o;
  decomp_t d;
  csr_t A;
  cg_result_t cg;

  MPI_Init(&argc, &argv);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &nranks);
  int sde_rc = hpcmem_sde_init();  /* before PAPI starts, as a library would */
  int rc = parse_args(argc, argv, &o);
  if (rc != 0) {
    MPI_Finalize();
    return rc > 0 ? 0 : 2;
  }
  const char *why = NULL;
  if (minife_alloc_init(o.alloc, &why) != 0) {
    if (rank == 0)
      printf("minife: --alloc=%s skipped: %s\n", minife_alloc_name(o.alloc), why);
    MPI_Finalize();
    return 77;
  }
  if (minife_decompose(o.nx, o.ny, o.nz, rank, nranks, o.imbalance, &d) != 0) {
    if (rank == 0)
      fprintf(stderr, "minife: %d node planes along z cannot be shared by %d ranks\n", o.nz + 1, nranks);
    MPI_Finalize();
    return 2;
  }
  bench_counters_t *ctr = bench_counters_new(o.papi_events);
  if (rank == 0) {
    printf("miniFE (libhpcmem miniapps): %d x %d x %d hexahedral elements, %lld unknowns\n", o.nx, o.ny, o.nz,
           (long long)(o.nx + 1) * (o.ny + 1) * (o.nz + 1));
    printf("%d ranks x %d OpenMP threads; slabs of node planes along z, %s\n", nranks, bench_max_threads(),
           o.imbalance > 0 ? "uneven" : "even");
    if (o.imbalance > 0)
      printf("uneven decomposition: rank r has the weight 1 + %g * r / %d\n", o.imbalance,
             nranks > 1 ? nranks - 1 : 1);
    printf("allocation: %s (%s); malloc of this process: %s\n", minife_alloc_name(o.alloc),
           minife_alloc_what(o.alloc), bench_malloc_provider());
    printf("%s\n", bench_counters_status(ctr));
    printf("SDE: %s\n", sde_rc == 0 ? "libhpcmem statistics exported as sde:::" HPCMEM_SDE_LIBRARY "::<field>"
                        : sde_rc == -ENOSYS ? "not exported (no PAPI SDE support, or libhpcmem is not loaded)"
                        : "registration with libsde failed");
  }

  double *b = NULL, *x = NULL;
  int ok = 1, all_ok;
  bench_rusage_t ru0, ru1, ru2;
  MPI_Barrier(MPI_COMM_WORLD);
  double t0 = bench_now();
  /* b and x first, so that placement decides for them together with the
   * matrix, in the commit before the matrix is first touched */
  b = minife_big_alloc(sizeof(double) * (size_t)d.nown, "right-hand side b", 0);
  x = minife_big_alloc(sizeof(double) * (size_t)d.nlocal, "solution x (with ghosts)", 1);
  if (b == NULL || x == NULL || minife_structure(&d, &A) != 0)
    ok = 0;
  double t_setup = bench_now() - t0;
  MPI_Allreduce(&ok, &all_ok, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
  if (!all_ok) {
    if (rank == 0)
      fprintf(stderr, "minife: out of memory building the matrix\n");
    MPI_Abort(MPI_COMM_WORLD, 1);
  }

  bench_rusage(&ru0);
  t0 = bench_now();
  minife_assemble(&d, &A, b);
  double t_assembly = bench_now() - t0;
  bench_rusage(&ru1);
  MPI_Barrier(MPI_COMM_WORLD);
  double t_assembly_all = bench_now() - t0;

  bench_counters_start(ctr, bench_max_threads());
  t0 = bench_now();
  if (minife_cg(&d, &A, b, x, o.max_iter, o.tol, &cg) != 0)
    MPI_Abort(MPI_COMM_WORLD, 1);
  double t_solve = bench_now() - t0;
  bench_counters_stop(ctr);
  bench_rusage(&ru2);
  /* CPU seconds of all ranks (MPI's busy waiting included) */
  double cpu[2] = {ru1.utime + ru1.stime - ru0.utime - ru0.stime, ru2.utime + ru2.stime - ru1.utime - ru1.stime},
         cpu_sum[2];
  MPI_Reduce(cpu, cpu_sum, 2, MPI_DOUBLE, MPI_SUM, 0, MPI_COMM_WORLD);
  int planes[2] = {cg.shared_planes, cg.halo_planes}, planes_sum[2];
  MPI_Reduce(planes, planes_sum, 2, MPI_INT, MPI_SUM, 0, MPI_COMM_WORLD);

  double err_local = max_error(&d, x), err;
  MPI_Allreduce(&err_local, &err, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);

  /* per-rank figures to rank 0 */
  double mine[NFIELDS] = {
    (double)(d.k1 - d.k0), (double)d.nown, (double)A.nnz,
    (sizeof(int64_t) * (d.nown + 1.0) + (sizeof(int32_t) + sizeof(double)) * (double)A.nnz
     + sizeof(double) * (4.0 * d.nown + 2.0 * d.nlocal)) / 1048576.0,
    t_assembly, t_solve, cg.matvec_s + cg.axpy_s,
  };
  double *all = rank == 0 ? malloc(sizeof mine * nranks) : NULL;
  MPI_Gather(mine, NFIELDS, MPI_DOUBLE, all, NFIELDS, MPI_DOUBLE, 0, MPI_COMM_WORLD);
  double t_setup_max;
  MPI_Reduce(&t_setup, &t_setup_max, 1, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD);

  /* Q1 elements: the nodal error of this smooth solution falls as h^2; the
   * constant (measured 1.55 .. 1.67 for n = 4 .. 64) gets a margin of 1.5 */
  double h = fmax(1.0 / o.nx, fmax(1.0 / o.ny, 1.0 / o.nz)), limit = 2.5 * h * h;
  int passed = cg.rel_residual <= 10 * o.tol && err <= limit;

  if (rank == 0) {
    printf("\n%5s %7s %10s %11s %9s %11s %9s %12s\n", "rank", "planes", "rows", "nonzeros", "MiB",
           "assembly s", "solve s", "compute s");
    double mx[NFIELDS] = {0}, sum[NFIELDS] = {0};
    for (int r = 0; r < nranks; r++) {
      const double *f = all + r * NFIELDS;
      printf("%5d %7.0f %10.0f %11.0f %9.1f %11.3f %9.3f %12.3f\n", r, f[F_PLANES], f[F_ROWS], f[F_NNZ],
             f[F_MIB], f[F_ASSEMBLY], f[F_SOLVE], f[F_COMPUTE]);
      for (int k = 0; k < NFIELDS; k++) {
        mx[k] = f[k] > mx[k] ? f[k] : mx[k];
        sum[k] += f[k];
      }
    }
    printf("imbalance (max / mean): rows %.2f, memory %.2f, solver compute %.2f\n",
           mx[F_ROWS] / (sum[F_ROWS] / nranks), mx[F_MIB] / (sum[F_MIB] / nranks),
           sum[F_COMPUTE] > 0 ? mx[F_COMPUTE] / (sum[F_COMPUTE] / nranks) : 1.0);
    char cbuf[512];
    printf("\nsetup %.3f s, assembly %.3f s, solve %.3f s (CG %d iterations: matvec %.3f s including halo "
           "%.3f s, dot %.3f s, axpy %.3f s on rank 0)\n", t_setup_max, t_assembly_all, t_solve, cg.iterations,
           cg.matvec_s, cg.halo_s, cg.dot_s, cg.axpy_s);
    printf("CPU time of all ranks: assembly %.3f s, solve %.3f s\n", cpu_sum[0], cpu_sum[1]);
    if (o.alloc == MINIFE_ALLOC_SHARED)
      printf("halo: %d of %d ghost planes read from the neighbour's vector in the node-shared segment, "
             "the others over MPI\n", planes_sum[0], planes_sum[1]);
    printf("solve counters (rank 0): %s\n", bench_counters_format(ctr, cbuf, sizeof cbuf));
    printf("residual: ||b - A x|| / ||b|| = %.3e (solver target %.1e)\n", cg.rel_residual, o.tol);
    printf("solution: max |u - u_exact| = %.3e at the nodes (h = %.4g, limit 2.5 h^2 = %.3e)\n", err, h, limit);
    printf("verification: %s\n", passed ? "passed" : "FAILED");
    /* nx ny nz ranks threads setup assembly solve iterations residual error alloc
     * assembly-cpu solve-cpu passed|failed */
    printf("#result minife %d %d %d %d %d %.4f %.4f %.4f %d %.3e %.3e %s %.4f %.4f %s\n", o.nx, o.ny, o.nz, nranks,
           bench_max_threads(), t_setup_max, t_assembly_all, t_solve, cg.iterations, cg.rel_residual, err,
           minife_alloc_name(o.alloc), cpu_sum[0], cpu_sum[1], passed ? "passed" : "failed");
    fflush(stdout);
  }
  free(all);
  bench_counters_free(ctr);
  minife_big_free(b);
  minife_big_free(x);
  minife_csr_free(&A);
  MPI_Finalize();
  return passed ? 0 : 1;
}
