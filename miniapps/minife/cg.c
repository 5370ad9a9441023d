/* Unpreconditioned conjugate gradients, as miniFE's cg_solve: matvec with
 * a ghost-plane exchange, two dot products and three vector updates per
 * iteration, each an OpenMP loop over this rank's rows. */
#include "config.h"
#include "minife.h"

#include <errno.h>
#include <math.h>
#include <mpi.h>
#include <stdlib.h>
#include <string.h>

#include "bench_util.h"

static void matvec(const csr_t *A, const double *x, double *y)
{
#pragma omp parallel for schedule(static)
  for (int64_t r = 0; r < A->nrows; r++) {
    double s = 0.0;
    for (int64_t p = A->row[r]; p < A->row[r + 1]; p++)
      s += A->val[p] * x[A->col[p]];
    y[r] = s;
  }
}

static double dot(int64_t n, const double *a, const double *b)
{
  double local = 0.0, global;
#pragma omp parallel for schedule(static) reduction(+ : local)
  for (int64_t r = 0; r < n; r++)
    local += a[r] * b[r];
  MPI_Allreduce(&local, &global, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
  return global;
}

/* y = alpha x + beta y */
static void axpby(int64_t n, double alpha, const double *x, double beta, double *y)
{
#pragma omp parallel for schedule(static)
  for (int64_t r = 0; r < n; r++)
    y[r] = alpha * x[r] + beta * y[r];
}

int minife_cg(const decomp_t *d, const csr_t *A, const double *b, double *x, int max_iter, double tol,
              cg_result_t *res)
{
  const int64_t n = d->nown;
  double *r = minife_big_alloc(sizeof(double) * (size_t)n, "CG residual r", 0);
  double *p = minife_big_alloc(sizeof(double) * (size_t)d->nlocal, "CG direction p (with ghosts)", 1);
  double *Ap = minife_big_alloc(sizeof(double) * (size_t)n, "CG A*p", 0);
  double t;
  int ok = r != NULL && p != NULL && Ap != NULL, all_ok;
  halo_t hp, hx;

  memset(res, 0, sizeof *res);
  /* every rank takes part in the commit and the halo set-up, or none */
  MPI_Allreduce(&ok, &all_ok, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
  if (all_ok && minife_big_commit("before the solve", d->rank == 0) != 0)
    ok = 0;
  MPI_Allreduce(&ok, &all_ok, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
  if (!all_ok) {
    minife_big_free(r);
    minife_big_free(p);
    minife_big_free(Ap);
    return -ENOMEM;
  }
  minife_halo_open(d, p, &hp);
  minife_halo_open(d, x, &hx);
  res->shared_planes = (hp.below_plane != NULL) + (hp.above_plane != NULL);
  res->halo_planes = (d->below >= 0) + (d->above >= 0);
#pragma omp parallel for schedule(static)
  for (int64_t i = 0; i < d->nlocal; i++) {
    x[i] = 0.0;
    p[i] = i < n ? b[i] : 0.0;
    if (i < n) {
      r[i] = b[i];
      Ap[i] = 0.0;
    }
  }
  double bnorm = sqrt(dot(n, b, b)), rr = bnorm * bnorm;
  int it = 0;
  if (bnorm > 0.0) {
    for (it = 0; it < max_iter && sqrt(rr) > tol * bnorm; it++) {
      t = bench_now();
      minife_halo(d, &hp);
      res->halo_s += bench_now() - t;
      matvec(A, p, Ap);
      res->matvec_s += bench_now() - t;
      t = bench_now();
      double pAp = dot(n, p, Ap);
      res->dot_s += bench_now() - t;
      double alpha = rr / pAp;
      t = bench_now();
      axpby(n, alpha, p, 1.0, x);
      axpby(n, -alpha, Ap, 1.0, r);
      res->axpy_s += bench_now() - t;
      t = bench_now();
      double rr_new = dot(n, r, r);
      res->dot_s += bench_now() - t;
      t = bench_now();
      axpby(n, 1.0, r, rr_new / rr, p);
      res->axpy_s += bench_now() - t;
      rr = rr_new;
    }
  }
  res->iterations = it;
  /* the true residual, not the recurrence's */
  minife_halo(d, &hx);
  matvec(A, x, Ap);
  axpby(n, 1.0, b, -1.0, Ap);
  double rn = sqrt(dot(n, Ap, Ap));
  res->rel_residual = bnorm > 0.0 ? rn / bnorm : rn;
  minife_big_free(r);
  minife_big_free(p);
  minife_big_free(Ap);
  return 0;
}
