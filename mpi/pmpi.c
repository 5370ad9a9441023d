/* MPI_Init / MPI_Init_thread / MPI_Finalize / MPI_Abort interception.
 *
 * Init calls the real PMPI function first and then starts the layer;
 * Finalize reports first and then calls the real PMPI function.  Linking
 * with -lhpcmem (before -lmpi, as mpicc does) or LD_PRELOAD=libhpcmem.so puts
 * these definitions ahead of the MPI library's.
 *
 * libhpcmem.so does not load the MPI library itself (weak.h): the PMPI_*
 * functions are bound only if the program brought MPI before libhpcmem was
 * loaded.  A program that dlopens MPI later (Python's mpi4py, Julia) still
 * reaches these wrappers; they then find the real function by name and pass
 * the call on, and the layer stays off (one warning says so).
 *
 * Fortran: Open MPI 4.1's mpif.h / `use mpi` entry points (mpi_init_ ...)
 * call the C PMPI_Init directly, and `use mpi_f08` (mpi_init_f08_) goes
 * through the same code, so the C wrappers never see a Fortran program.
 * We therefore define the Fortran names too and forward each to the MPI
 * library's own Fortran PMPI entry (pmpi_init_ ...), found with dlsym so
 * that whatever the Fortran layer does besides PMPI_Init still happens
 * (MPICH sets up its Fortran constants there).  Whatever path a program
 * takes, the attribute on MPI_COMM_SELF (layer.c) still reports at
 * finalize. */
#include "config.h"
#include "layer.h"
#include "trace/trace.h"
#include "hpcmem_trace_format.h"
#include "report.h"
#include "util/log.h"
#include <dlfcn.h>
#include <link.h>
#include <stddef.h>

/* The MPI library was loaded after libhpcmem: look the function up in the
 * global scope, else in every loaded object (a library opened RTLD_LOCAL is
 * loaded but not global).  Never NULL: without the function there is
 * nothing sensible to return to the program. */
typedef struct {
  const char *name;
  void *found;
} lookup_t;

static int lookup_in(struct dl_phdr_info *info, size_t size, void *arg) {
  (void)size;
  lookup_t *l = arg;
  if (!info->dlpi_name || !info->dlpi_name[0]) return 0;   /* the program: in the global scope */
  void *h = dlopen(info->dlpi_name, RTLD_LAZY | RTLD_NOLOAD);
  if (!h) return 0;
  l->found = dlsym(h, l->name);
  dlclose(h);
  return l->found != NULL;
}

static void *late_pmpi(const char *name) {
  static int warned;
  if (!warned++)
    _hpcmem_warn("the MPI library was loaded after libhpcmem (dlopen): MPI calls are passed on, but the "
                 "job report and the node-shared segment are off; preload it too, after libhpcmem "
                 "(LD_PRELOAD=\"libhpcmem.so libmpi.so\", see docs/mpirun.md)");
  lookup_t l = {name, dlsym(RTLD_DEFAULT, name)};
  if (!l.found) dl_iterate_phdr(lookup_in, &l);
  if (!l.found) _hpcmem_fatal("%s: the MPI library's %s cannot be found", name + 1, name);
  return l.found;
}

/* The real function: bound by the loader, or found late. */
#define REAL(fn) (_hpcmem_mpi_linked() ? &fn : (__typeof__(&fn))late_pmpi(#fn))

int MPI_Init(int *argc, char ***argv) {
  int rc = REAL(PMPI_Init)(argc, argv);
  if (rc == MPI_SUCCESS) _hpcmem_mpi_start();
  return rc;
}

int MPI_Init_thread(int *argc, char ***argv, int required, int *provided) {
  int rc = REAL(PMPI_Init_thread)(argc, argv, required, provided);
  if (rc == MPI_SUCCESS) _hpcmem_mpi_start();
  return rc;
}

int MPI_Finalize(void) {
  _hpcmem_mpi_finish();
  return REAL(PMPI_Finalize)();
}

int MPI_Abort(MPI_Comm comm, int errorcode) {
  /* the other ranks will be killed: each writes its own summary (SIGTERM) */
  _hpcmem_report_local("MPI_Abort", 0);
  if (_hpcmem_trace_enabled) _hpcmem_trace_flush_all(HMT_FLUSH_ABORT);
  return REAL(PMPI_Abort)(comm, errorcode);
}

/* ------------------------------------------------------------------ */
/* Fortran                                                              */

typedef void (*f_init_t)(MPI_Fint *ierr);
typedef void (*f_init_thread_t)(MPI_Fint *required, MPI_Fint *provided, MPI_Fint *ierr);
typedef void (*f_abort_t)(MPI_Fint *comm, MPI_Fint *errorcode, MPI_Fint *ierr);

static void *fortran_pmpi(const char *name) {
  /* we define no pmpi_* names, so the global scope finds the MPI library's */
  return dlsym(RTLD_DEFAULT, name);
}

static void start_if_initialized(void) {
  int flag = 0;
  /* ierr is optional in mpi_f08: ask MPI instead of trusting it */
  if (_hpcmem_mpi_linked() && PMPI_Initialized(&flag) == MPI_SUCCESS && flag) _hpcmem_mpi_start();
}

static void f_init(MPI_Fint *ierr, const char *pmpi_name) {
  f_init_t real = (f_init_t)fortran_pmpi(pmpi_name);
  if (real) {
    real(ierr);
  } else {
    int argc = 0;
    char **argv = NULL;
    int rc = REAL(PMPI_Init)(&argc, &argv);
    if (ierr) *ierr = (MPI_Fint)rc;
  }
  start_if_initialized();
}

static void f_init_thread(MPI_Fint *required, MPI_Fint *provided, MPI_Fint *ierr,
                          const char *pmpi_name) {
  f_init_thread_t real = (f_init_thread_t)fortran_pmpi(pmpi_name);
  if (real) {
    real(required, provided, ierr);
  } else {
    int argc = 0, prov = 0;
    char **argv = NULL;
    int rc = REAL(PMPI_Init_thread)(&argc, &argv, (int)*required, &prov);
    *provided = (MPI_Fint)prov;
    if (ierr) *ierr = (MPI_Fint)rc;
  }
  start_if_initialized();
}

static void f_finalize(MPI_Fint *ierr, const char *pmpi_name) {
  _hpcmem_mpi_finish();
  f_init_t real = (f_init_t)fortran_pmpi(pmpi_name);
  if (real) {
    real(ierr);
  } else {
    int rc = REAL(PMPI_Finalize)();
    if (ierr) *ierr = (MPI_Fint)rc;
  }
}

static void f_abort(MPI_Fint *comm, MPI_Fint *errorcode, MPI_Fint *ierr, const char *pmpi_name) {
  _hpcmem_report_local("MPI_Abort", 0);
  /* as in MPI_Abort: Open MPI's Fortran binding calls PMPI_Abort, which
   * ends the process without exit handlers, and the buffers with it */
  if (_hpcmem_trace_enabled) _hpcmem_trace_flush_all(HMT_FLUSH_ABORT);
  f_abort_t real = (f_abort_t)fortran_pmpi(pmpi_name);
  if (real) {
    real(comm, errorcode, ierr);
  } else {
    MPI_Comm c = _hpcmem_mpi_linked() ? PMPI_Comm_f2c(*comm)
                                      : ((MPI_Comm(*)(MPI_Fint))late_pmpi("PMPI_Comm_f2c"))(*comm);
    int rc = REAL(PMPI_Abort)(c, (int)*errorcode);
    if (ierr) *ierr = (MPI_Fint)rc;
  }
}

/* Every spelling a Fortran compiler may produce, and the mpi_f08 name. */
#define HPCMEM_F_NAMES(lower, upper, params, args, impl)                    \
  void lower##_(params) { impl(args, "p" #lower "_"); }                     \
  void lower##__(params) { impl(args, "p" #lower "__"); }                   \
  void lower(params) { impl(args, "p" #lower); }                            \
  void upper(params) { impl(args, "P" #upper); }                            \
  void lower##_f08_(params) { impl(args, "p" #lower "_f08_"); }

#define P1 MPI_Fint *ierr
#define A1 ierr
#define P3T MPI_Fint *required, MPI_Fint *provided, MPI_Fint *ierr
#define A3T required, provided, ierr
#define P3A MPI_Fint *comm, MPI_Fint *errorcode, MPI_Fint *ierr
#define A3A comm, errorcode, ierr

/* prototypes keep -Wmissing-prototypes quiet and document the ABI */
#define HPCMEM_F_PROTOS(lower, upper, params)                               \
  void lower##_(params); void lower##__(params); void lower(params);        \
  void upper(params); void lower##_f08_(params);

HPCMEM_F_PROTOS(mpi_init, MPI_INIT, P1)
HPCMEM_F_PROTOS(mpi_init_thread, MPI_INIT_THREAD, P3T)
HPCMEM_F_PROTOS(mpi_finalize, MPI_FINALIZE, P1)
HPCMEM_F_PROTOS(mpi_abort, MPI_ABORT, P3A)

HPCMEM_F_NAMES(mpi_init, MPI_INIT, P1, A1, f_init)
HPCMEM_F_NAMES(mpi_init_thread, MPI_INIT_THREAD, P3T, A3T, f_init_thread)
HPCMEM_F_NAMES(mpi_finalize, MPI_FINALIZE, P1, A1, f_finalize)
HPCMEM_F_NAMES(mpi_abort, MPI_ABORT, P3A, A3A, f_abort)
