! Fortran MPI program (use mpi) linked with -lhpcmem: rank r allocates
! (r+1)*MIB MiB (MIB from the command line), touches it, holds it while all
! ranks hold theirs, and frees it.  Its job report must show exactly that.
program fortran_mpi
  use mpi
  implicit none
  integer :: ierr, rank, nranks, mib
  integer(kind=8) :: n
  character(len=16) :: arg
  real(kind=8), allocatable :: a(:)

  call MPI_Init(ierr)
  call MPI_Comm_rank(MPI_COMM_WORLD, rank, ierr)
  call MPI_Comm_size(MPI_COMM_WORLD, nranks, ierr)
  call get_command_argument(1, arg)
  read (arg, *) mib
  n = int(rank + 1, 8) * int(mib, 8) * 1024_8 * 1024_8 / 8_8
  call MPI_Barrier(MPI_COMM_WORLD, ierr)
  allocate (a(n))
  a = 1.0d0
  call MPI_Barrier(MPI_COMM_WORLD, ierr)
  if (a(n) /= 1.0d0) call MPI_Abort(MPI_COMM_WORLD, 1, ierr)
  deallocate (a)
  call MPI_Finalize(ierr)
end program fortran_mpi
