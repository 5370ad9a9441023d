! A traced Fortran rank that calls MPI_Abort (use mpi, or use mpi_f08 when
! built with -DUSE_MPI_F08; tests/trace.inc builds both): rank r allocates
! (r+1)*MIB MiB and keeps it; rank 1 aborts, mpirun kills the others.  The
! aborting rank's trace must still hold its allocation and end at MPI_Abort.
program fortran_abort
#ifdef USE_MPI_F08
  use mpi_f08
#else
  use mpi
#endif
  implicit none
  integer :: ierr, rank, mib
  integer(kind=8) :: n
  character(len=16) :: arg
  real(kind=8), allocatable :: a(:)

  call MPI_Init(ierr)
  call MPI_Comm_rank(MPI_COMM_WORLD, rank, ierr)
  call get_command_argument(1, arg)
  read (arg, *) mib
  n = int(rank + 1, 8) * int(mib, 8) * 1024_8 * 1024_8 / 8_8
  allocate (a(n))
  a = 1.0d0
  call MPI_Barrier(MPI_COMM_WORLD, ierr)
  if (rank == 1) call MPI_Abort(MPI_COMM_WORLD, 3, ierr)
  call sleep(30)
  print *, a(n)
  call MPI_Finalize(ierr)
end program fortran_abort
