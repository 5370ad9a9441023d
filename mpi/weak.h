/* Every MPI symbol the MPI layer uses, as a weak reference.
 *
 * libhpcmem.so is not linked with the MPI library (no DT_NEEDED on libmpi):
 * a program without MPI must not pay for loading Open MPI (libmpi,
 * open-pal, open-rte, libevent: 0.8 MiB of RSS and 30 ms of start-up).
 * The references below are weak, so the dynamic loader binds them when the
 * program brought the MPI library (mpicc links it; LD_PRELOAD puts
 * libhpcmem in front of a binary that already needs it) and leaves them
 * NULL otherwise.  _hpcmem_mpi_linked() tells which; the wrappers in pmpi.c
 * check it before anything else.  docs/mpirun.md explains the choice.
 *
 * A new PMPI_* call (or an MPI constant that names a library object) must
 * be listed here, or libhpcmem.so gets a strong undefined reference again:
 * tests/footprint/test_libraries.sh fails and names it.
 *
 * Include after <mpi.h> (layer.h does). */
#ifndef HPCMEM_MPI_WEAK_H
#define HPCMEM_MPI_WEAK_H

/* The MPI-3 functions of every MPI library: the layer works only when all
 * of them were bound (_hpcmem_mpi_linked). */
#define HPCMEM_MPI_FUNCTIONS(X)                                                           \
  X(PMPI_Init) X(PMPI_Init_thread) X(PMPI_Initialized) X(PMPI_Finalize) X(PMPI_Abort)     \
  X(PMPI_Comm_rank) X(PMPI_Comm_size) X(PMPI_Comm_dup) X(PMPI_Comm_split)                 \
  X(PMPI_Comm_split_type) X(PMPI_Comm_free) X(PMPI_Comm_set_errhandler)                   \
  X(PMPI_Comm_create_keyval) X(PMPI_Comm_free_keyval) X(PMPI_Comm_set_attr)               \
  X(PMPI_Barrier) X(PMPI_Bcast) X(PMPI_Reduce) X(PMPI_Allreduce) X(PMPI_Gather)           \
  X(PMPI_Type_contiguous) X(PMPI_Type_create_struct) X(PMPI_Type_create_resized)          \
  X(PMPI_Type_commit) X(PMPI_Type_free) X(PMPI_Op_create) X(PMPI_Op_free)                 \
  X(PMPI_Win_allocate_shared) X(PMPI_Win_shared_query) X(PMPI_Win_set_errhandler)         \
  X(PMPI_Win_lock_all) X(PMPI_Win_unlock_all) X(PMPI_Win_sync) X(PMPI_Win_free)

/* Open MPI's handles are addresses of objects in libmpi (MPI_COMM_WORLD is
 * &ompi_mpi_comm_world); MPICH's are integers and need nothing here. */
#define HPCMEM_OMPI_OBJECTS(X)                                                            \
  X(ompi_mpi_comm_world) X(ompi_mpi_comm_self) X(ompi_mpi_comm_null)                      \
  X(ompi_mpi_byte) X(ompi_mpi_char) X(ompi_mpi_int) X(ompi_mpi_double)                    \
  X(ompi_mpi_int64_t) X(ompi_mpi_uint64_t) X(ompi_mpi_datatype_null)                      \
  X(ompi_mpi_op_sum) X(ompi_mpi_op_min) X(ompi_mpi_op_max) X(ompi_mpi_op_null)            \
  X(ompi_mpi_info_null) X(ompi_mpi_errors_return) X(ompi_mpi_win_null)                    \
  X(OMPI_C_MPI_COMM_NULL_COPY_FN)

#define HPCMEM_MPI_PRAGMA_(text) _Pragma(#text)
#define HPCMEM_MPI_WEAK_(name) HPCMEM_MPI_PRAGMA_(weak name)

HPCMEM_MPI_FUNCTIONS(HPCMEM_MPI_WEAK_)
#pragma weak PMPI_Comm_f2c
#ifdef OPEN_MPI
HPCMEM_OMPI_OBJECTS(HPCMEM_MPI_WEAK_)
#endif

/* 1 when the program has the MPI library (every function above is bound),
 * 0 when it has none. */
static inline int _hpcmem_mpi_linked(void) {
#define HPCMEM_MPI_BOUND_(name) && &name != NULL
  return 1 HPCMEM_MPI_FUNCTIONS(HPCMEM_MPI_BOUND_);
#undef HPCMEM_MPI_BOUND_
}

#endif
