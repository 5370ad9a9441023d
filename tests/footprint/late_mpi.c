/* A program that opens the MPI library itself, after libhpcmem was loaded
 * (what Python's mpi4py or Julia do), and reaches MPI_Init / MPI_Finalize
 * through the global scope, as the MPI library's users do: under
 * LD_PRELOAD=libhpcmem.so those are libhpcmem's wrappers, whose weak
 * references to the MPI library were settled (empty) before it came.
 * argv[1]: the MPI library; argv[2] "local" opens it RTLD_LOCAL. */
#include <dlfcn.h>
#include <stdio.h>
#include <string.h>

int main(int argc, char **argv) {
  if (argc < 2) {
    fprintf(stderr, "usage: late_mpi LIBMPI [local]\n");
    return 2;
  }
  int local = argc > 2 && strcmp(argv[2], "local") == 0;
  void *h = dlopen(argv[1], RTLD_NOW | (local ? RTLD_LOCAL : RTLD_GLOBAL));
  if (!h) {
    printf("dlopen: %s\n", dlerror());
    return 2;
  }
  int (*init)(int *, char ***) = (int (*)(int *, char ***))dlsym(RTLD_DEFAULT, "MPI_Init");
  int (*fin)(void) = (int (*)(void))dlsym(RTLD_DEFAULT, "MPI_Finalize");
  int (*initialized)(int *) = (int (*)(int *))dlsym(h, "MPI_Initialized");
  if (!init || !fin || !initialized) {
    printf("MPI_Init %p, MPI_Finalize %p, MPI_Initialized %p\n", (void *)init, (void *)fin, (void *)initialized);
    return 2;
  }
  int flag = 0;
  int rc = init(NULL, NULL);
  initialized(&flag);
  printf("MPI_Init %d initialized %d\n", rc, flag);
  rc = fin();
  printf("MPI_Finalize %d\n", rc);
  return 0;
}
