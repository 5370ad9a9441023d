/* Matrix structure and finite-element assembly. */
#include "config.h"
#include "minife.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

static int row_columns(const decomp_t *d, int64_t row, int32_t *cols)
{
  int i = (int)(row % (d->nx + 1)), j = (int)(row / (d->nx + 1) % (d->ny + 1));
  int k = d->k0 + (int)(row / d->plane), n = 0;

  if (minife_on_boundary(d, i, j, k)) {
    cols[0] = (int32_t)row;  /* Dirichlet row: u = 0 */
    return 1;
  }
  for (int dk = -1; dk <= 1; dk++)
    for (int dj = -1; dj <= 1; dj++)
      for (int di = -1; di <= 1; di++)
        if (!minife_on_boundary(d, i + di, j + dj, k + dk))  /* u = 0 there: no column */
          cols[n++] = (int32_t)minife_local(d, i + di, j + dj, k + dk);
  return n;
}

int minife_structure(const decomp_t *d, csr_t *A)
{
  const int64_t n = d->nown;
  int32_t tmp[27];

  memset(A, 0, sizeof *A);
  if (d->nlocal >= INT32_MAX)
    return -EINVAL;
  A->nrows = n;
  A->row = minife_big_alloc(sizeof *A->row * (size_t)(n + 1), "matrix row pointers", 0);
  if (A->row == NULL)
    return -ENOMEM;
  A->row[0] = 0;
#pragma omp parallel for schedule(static) private(tmp)
  for (int64_t r = 0; r < n; r++)
    A->row[r + 1] = row_columns(d, r, tmp);
  for (int64_t r = 0; r < n; r++)
    A->row[r + 1] += A->row[r];
  A->nnz = A->row[n];
  A->col = minife_big_alloc(sizeof *A->col * (size_t)A->nnz, "matrix column indices", 0);
  A->val = minife_big_alloc(sizeof *A->val * (size_t)A->nnz, "matrix values", 0);
  if (A->col == NULL || A->val == NULL) {
    minife_csr_free(A);
    return -ENOMEM;
  }
  /* placement: decide before the first touch below (only the row
   * pointers, already written, have to move) */
  int rc = minife_big_commit("after the matrix allocation", d->rank == 0);
  if (rc != 0) {
    minife_csr_free(A);
    return rc;
  }
  /* the same static schedule as the solver: each thread first-touches its rows */
#pragma omp parallel for schedule(static)
  for (int64_t r = 0; r < n; r++) {
    row_columns(d, r, A->col + A->row[r]);
    memset(A->val + A->row[r], 0, sizeof(double) * (size_t)(A->row[r + 1] - A->row[r]));
  }
  return 0;
}

void minife_csr_free(csr_t *A)
{
  minife_big_free(A->row);
  minife_big_free(A->col);
  minife_big_free(A->val);
  memset(A, 0, sizeof *A);
}

/* Stiffness K and load F of the element with corner (x0, y0, z0) and sides
 * hx, hy, hz: 2x2x2 Gauss quadrature of grad(N_a).grad(N_b) and f N_a.
 * Local node a is the corner (a & 1, a >> 1 & 1, a >> 2 & 1). */
static void element(double x0, double y0, double z0, double hx, double hy, double hz, double K[8][8], double F[8])
{
  const double g = 1.0 / sqrt(3.0), det = hx * hy * hz / 8.0;

  memset(K, 0, sizeof(double) * 64);
  memset(F, 0, sizeof(double) * 8);
  for (int q = 0; q < 8; q++) {
    double xi = (q & 1) ? g : -g, eta = (q & 2) ? g : -g, zeta = (q & 4) ? g : -g;
    double N[8], gx[8], gy[8], gz[8];
    for (int a = 0; a < 8; a++) {
      double sa = (a & 1) ? 1 : -1, ta = (a & 2) ? 1 : -1, ua = (a & 4) ? 1 : -1;
      double fx = 1 + sa * xi, fy = 1 + ta * eta, fz = 1 + ua * zeta;
      N[a] = fx * fy * fz / 8.0;
      gx[a] = sa * fy * fz / 8.0 * 2.0 / hx;
      gy[a] = fx * ta * fz / 8.0 * 2.0 / hy;
      gz[a] = fx * fy * ua / 8.0 * 2.0 / hz;
    }
    double x = x0 + (1 + xi) * hx / 2, y = y0 + (1 + eta) * hy / 2, z = z0 + (1 + zeta) * hz / 2;
    double f = minife_load(x, y, z);
    for (int a = 0; a < 8; a++) {
      F[a] += f * N[a] * det;
      for (int b = 0; b < 8; b++)
        K[a][b] += (gx[a] * gx[b] + gy[a] * gy[b] + gz[a] * gz[b]) * det;
    }
  }
}

static void sum_into(const decomp_t *d, csr_t *A, double *b, int ei, int ej, int ek, double K[8][8],
                     const double F[8])
{
  int64_t loc[8];
  int bnd[8];

  for (int a = 0; a < 8; a++) {
    int i = ei + (a & 1), j = ej + (a >> 1 & 1), k = ek + (a >> 2 & 1);
    loc[a] = minife_local(d, i, j, k);
    bnd[a] = minife_on_boundary(d, i, j, k);
  }
  for (int a = 0; a < 8; a++) {
    if (bnd[a] || loc[a] < 0 || loc[a] >= d->nown)
      continue;  /* another rank's row, or a Dirichlet row (stays identity) */
    int64_t r = loc[a];
    b[r] += F[a];
    for (int c = 0; c < 8; c++) {
      if (bnd[c])
        continue;
      for (int64_t p = A->row[r]; p < A->row[r + 1]; p++)
        if (A->col[p] == loc[c]) {
          A->val[p] += K[a][c];
          break;
        }
    }
  }
}

int minife_assemble(const decomp_t *d, csr_t *A, double *b)
{
  const double hx = 1.0 / d->nx, hy = 1.0 / d->ny, hz = 1.0 / d->nz;
  /* elements that touch an owned node plane */
  int ek0 = d->k0 - 1 > 0 ? d->k0 - 1 : 0, ek1 = d->k1 < d->nz ? d->k1 : d->nz;

#pragma omp parallel for schedule(static)
  for (int64_t r = 0; r < A->nrows; r++)
    b[r] = 0.0;
  /* eight colours: elements of one colour share no node, so threads
   * can sum into rows without locks */
  for (int colour = 0; colour < 8; colour++) {
    int ci = colour & 1, cj = colour >> 1 & 1, ck = colour >> 2 & 1;
#pragma omp parallel for collapse(2) schedule(dynamic, 4)
    for (int ek = ek0; ek < ek1; ek++)
      for (int ej = 0; ej < d->ny; ej++) {
        if ((ek & 1) != ck || (ej & 1) != cj)
          continue;
        double K[8][8], F[8];
        for (int ei = ci; ei < d->nx; ei += 2) {
          element(ei * hx, ej * hy, ek * hz, hx, hy, hz, K, F);
          sum_into(d, A, b, ei, ej, ek, K, F);
        }
      }
  }
  /* Dirichlet rows: identity, right-hand side 0 */
#pragma omp parallel for schedule(static)
  for (int64_t r = 0; r < A->nrows; r++) {
    int i = (int)(r % (d->nx + 1)), j = (int)(r / (d->nx + 1) % (d->ny + 1)), k = d->k0 + (int)(r / d->plane);
    if (minife_on_boundary(d, i, j, k)) {
      A->val[A->row[r]] = 1.0;
      b[r] = 0.0;
    }
  }
  return 0;
}
