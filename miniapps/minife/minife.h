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

/* Where the big arrays (matrix, vectors) come from: --alloc=KIND. */
enum minife_alloc {
  MINIFE_ALLOC_MALLOC,       /* plain malloc, whichever allocator the process has */
  MINIFE_ALLOC_PRIVATE,      /* libhpcmem's private segment */
  MINIFE_ALLOC_INTERLEAVED,  /* libhpcmem's interleaved segment */
  MINIFE_ALLOC_SHARED,       /* ghosted vectors in the node-shared segment, halo through it */
  MINIFE_ALLOC_PLACE,        /* libhpcmem placement, lazily committed */
  MINIFE_ALLOC_COUNT
};
/** MINIFE_ALLOC_* of a name ("interleaved" or "segment-interleaved"...), or -EINVAL. */
int minife_alloc_parse(const char *name);
const char *minife_alloc_name(int kind);
const char *minife_alloc_what(int kind);
/** Choose the kind.  @return 0; -ENOSYS when it needs libhpcmem as the
 *  process's malloc and this run has another one (*why says so). */
int minife_alloc_init(int kind, const char **why);
int minife_alloc_kind(void);

/** A big array.  @p ghosted: a vector whose end planes the neighbour ranks
 *  read (the shared variant puts those in the node-shared segment). */
void *minife_big_alloc(size_t bytes, const char *what, int ghosted);
void minife_big_free(void *p);
/** Placement: decide and bind the arrays made since the last commit (rank 0
 *  prints where they went when @p verbose).  Other kinds: nothing.  @return 0 or -errno. */
int minife_big_commit(const char *when, int verbose);

/** Row structure of the matrix (27-point couplings, boundary columns left out). */
int minife_structure(const decomp_t *d, csr_t *A);
/** Element integrals summed into the rows this rank owns; b gets the load. */
int minife_assemble(const decomp_t *d, csr_t *A, double *b);
void minife_csr_free(csr_t *A);

/** A vector with ghost planes and, in the shared variant, the neighbours'
 *  copies of it that this rank can read directly (NULL: over MPI). */
typedef struct halo {
  double *x;
  const double *below_plane, *above_plane;
} halo_t;
/** Collective over the ranks: learn where the neighbours' vectors are. @return 0. */
int minife_halo_open(const decomp_t *d, double *x, halo_t *h);
/** Bring the neighbours' end planes into x's ghost planes. */
void minife_halo(const decomp_t *d, const halo_t *h);

typedef struct cg_result {
  int iterations;
  double rel_residual;  /* ||b - A x|| / ||b||, recomputed after the solve */
  double matvec_s, dot_s, axpy_s;
  double halo_s;        /* part of matvec_s: the ghost-plane exchange */
  int shared_planes;    /* ghost planes of p read through the node-shared segment (0..2) */
  int halo_planes;      /* ghost planes of p (0..2) */
} cg_result_t;

/** Conjugate gradients from x = 0 to ||r|| / ||b|| <= tol or max_iter. x has nlocal entries. */
int minife_cg(const decomp_t *d, const csr_t *A, const double *b, double *x, int max_iter, double tol,
              cg_result_t *res);

#endif
