! The same as fortran_mpi.f90 through the mpi_f08 module, whose entry
! points (mpi_init_f08_ ...) differ from mpif.h's; ierror left out on
! MPI_Init and MPI_Finalize, as f08 allows.
program fortran_f08
  use mpi_f08
  implicit none
  integer :: rank, nranks, mib
  integer(kind=8) :: n
  character(len=16) :: arg
  real(kind=8), allocatable :: a(:)

  call MPI_Init()
  call MPI_Comm_rank(MPI_COMM_WORLD, rank)
  call MPI_Comm_size(MPI_COMM_WORLD, nranks)
  call get_command_argument(1, arg)
  read (arg, *) mib
  n = int(rank + 1, 8) * int(mib, 8) * 1024_8 * 1024_8 / 8_8
  call MPI_Barrier(MPI_COMM_WORLD)
  allocate (a(n))
  a = 1.0d0
  call MPI_Barrier(MPI_COMM_WORLD)
  if (a(n) /= 1.0d0) call MPI_Abort(MPI_COMM_WORLD, 1)
  deallocate (a)
  call MPI_Finalize()
end program fortran_f08
