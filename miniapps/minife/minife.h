/* miniFE in C for libhpcmem: the idea of Mantevo's miniFE (an implicit
 * finite-element mini-application), written anew.  A box of nx*ny*nz
 * trilinear hexahedral elements on [0,1]^3 is cut into slabs of node
 * planes along z, one slab per MPI rank; each rank assembles its rows of
 * the sparse (CSR) stiffness matrix and right-hand side for
 *     -laplace(u) = f  on the unit cube,  u = 0 on the boundary,
 * with f made so that u = 64 x(1-x) y(1-y) z(1-z) is the exact solution,
 * and conjugate gradients solve it with OpenMP threads.  (A product of
 * sines would be an eigenvector of the discrete operator: CG would finish
 * in one iteration and measure nothing.)  Q1 elements are second-order
 * accurate at the nodes, so the error must shrink as h^2. */
#ifndef MINIFE_H
#define MINIFE_H

#include <stddef.h>
#include <stdint.h>

typedef struct decomp {
  int nx, ny, nz;       /* elements; nodes are (nx+1)(ny+1)(nz+1) */
  int rank, nranks;
  int k0, k1;           /* node planes [k0, k1) owned by this rank */
  int below, above;     /* neighbour ranks, -1 at the ends */
  int64_t plane;        /* nodes per plane */
  int64_t nown;         /* owned nodes = rows */
  int64_t nlocal;       /* owned + ghost nodes (columns) */
} decomp_t;

/** Cut the node planes into slabs; imbalance >= 0 gives rank r the weight
 *  1 + imbalance * r / (nranks - 1).  @return 0 or -EINVAL (too many ranks). */
int minife_decompose(int nx, int ny, int nz, int rank, int nranks, double imbalance, decomp_t *d);

/** Local index of global node (i, j, k), or -1 if this rank does not hold it. */
int64_t minife_local(const decomp_t *d, int i, int j, int k);

/** 1 if the node lies on the boundary (Dirichlet, u = 0). */
static inline int minife_on_boundary(const decomp_t *d, int i, int j, int k)
{
  return i == 0 || j == 0 || k == 0 || i == d->nx || j == d->ny || k == d->nz;
}

/** The exact solution and its load f = -laplace(u). */
static inline double minife_exact(double x, double y, double z)
{
  return 64.0 * x * (1 - x) * y * (1 - y) * z * (1 - z);
}
static inline double minife_load(double x, double y, double z)
{
  double px = x * (1 - x), py = y * (1 - y), pz = z * (1 - z);
  return 128.0 * (py * pz + px * pz + px * py);
}

typedef struct csr {
  int64_t nrows, nnz;
  int64_t *row;   /* nrows + 1 */
  int32_t *col;   /* local column indices */
  double *val;
} csr_t;

/* The big arrays come from here, so that segment and placement choices
 * for them are made in one place (plain malloc in this build). */
void *minife_big_alloc(size_t bytes, const char *what);
void minife_big_free(void *p);

/** Row structure of the matrix (27-point couplings, boundary columns left out). */
int minife_structure(const decomp_t *d, csr_t *A);
/** Element integrals summed into the rows this rank owns; b gets the load. */
int minife_assemble(const decomp_t *d, csr_t *A, double *b);
void minife_csr_free(csr_t *A);

/** Send this rank's end planes of x to the neighbours, receive their ghost planes. */
void minife_halo(const decomp_t *d, double *x);

typedef struct cg_result {
  int iterations;
  double rel_residual;  /* ||b - A x|| / ||b||, recomputed after the solve */
  double matvec_s, dot_s, axpy_s;
} cg_result_t;

/** Conjugate gradients from x = 0 to ||r|| / ||b|| <= tol or max_iter. x has nlocal entries. */
int minife_cg(const decomp_t *d, const csr_t *A, const double *b, double *x, int max_iter, double tol,
              cg_result_t *res);

#endif
