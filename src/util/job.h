/* Who this process is in a parallel job, known before MPI_Init: rank, size
 * and job id from the launcher's environment (Open MPI, PMI/MPICH/Hydra,
 * Slurm), hostname from uname.  The MPI layer overwrites rank/size with the
 * communicator's values at MPI_Init.  Reads the environment directly because
 * these are the launcher's variables, not HPCMEM_* settings. */
#ifndef HPCMEM_UTIL_JOB_H
#define HPCMEM_UTIL_JOB_H
#ifdef __cplusplus
extern "C" {
#endif

typedef struct {
  int rank;            /* -1 when not launched by an MPI launcher */
  int size;            /* 1 when unknown */
  int from_launcher;   /* rank/size came from the environment */
  char jobid[64];      /* launcher's job id, or "pid<N>" for a lone process */
  char hostname[64];
} hpcmem_job_t;

extern hpcmem_job_t _hpcmem_job;

/* Fill _hpcmem_job from the environment (safe inside malloc: no heap). */
void _hpcmem_job_init(void);
/* The same from an explicit environment list (for tests). */
void _hpcmem_job_load(char *const *env, int pid);

#ifdef __cplusplus
}
#endif
#endif
