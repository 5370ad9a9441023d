/* Job identity from the launcher's environment (see job.h). */
#include "config.h"
/* Start-up code, run once a process: compiled for size, so that the code
 * every process runs fits one 64 KiB window with room (src/hot-text.ld;
 * these four files at -Os: 5.8 KiB less of it, docs/footprint.md). */
#pragma GCC optimize("Os")
#include "util/job.h"
#include "util/startdata.h"
#include <stdlib.h>
#include <string.h>
#include <sys/utsname.h>
#include <unistd.h>

extern char **environ;
hpcmem_job_t _hpcmem_job = {-1, 1, 0, "", ""};

static const char *env_get(char *const *env, const char *name) {
  size_t n = strlen(name);
  for (char *const *e = env; e && *e; e++)
    if (strncmp(*e, name, n) == 0 && (*e)[n] == '=') return *e + n + 1;
  return NULL;
}

/* names: variable names, each ended by a NUL, the list by an empty one */
static int env_int(char *const *env, const char *names, int *out) {
  for (; *names; names += strlen(names) + 1) {
    const char *v = env_get(env, names);
    char *end;
    if (!v || !*v) continue;
    long x = strtol(v, &end, 10);
    if (*end == 0 && x >= 0 && x < (1L << 30)) { *out = (int)x; return 1; }
  }
  return 0;
}

/* Appends text to dst (size cap, holding a string) as far as it fits.  Not
 * snprintf: this runs at start in every process, and libc's printf engine is
 * two 64 KiB windows of its code and one of its tables that a program which
 * does not print would never map (docs/footprint.md). */
static void append(char *dst, size_t cap, const char *text) {
  size_t k = strlen(dst);
  while (*text && k + 1 < cap) dst[k++] = *text++;
  dst[k] = 0;
}

static void append_uint(char *dst, size_t cap, unsigned v) {
  char digits[16], *p = digits + sizeof digits;
  *--p = 0;
  do *--p = (char)('0' + v % 10); while (v /= 10);
  append(dst, cap, p);
}

void _hpcmem_job_load(char *const *env, int pid) {
  /* the launchers' names, in the start's data (util/startdata.h) */
  static const char rank_vars[] HPCMEM_START_TEXT = "OMPI_COMM_WORLD_RANK\0PMI_RANK\0PMIX_RANK\0SLURM_PROCID\0";
  static const char size_vars[] HPCMEM_START_TEXT = "OMPI_COMM_WORLD_SIZE\0PMI_SIZE\0SLURM_NTASKS\0";
  static const char job_vars[] HPCMEM_START_TEXT = "SLURM_JOB_ID\0OMPI_MCA_ess_base_jobid\0PMIX_NAMESPACE\0PMI_JOBID\0";
  hpcmem_job_t *j = &_hpcmem_job;
  j->rank = -1; j->size = 1; j->from_launcher = 0;
  if (env_int(env, rank_vars, &j->rank)) j->from_launcher = 1;
  env_int(env, size_vars, &j->size);
  if (j->size < 1) j->size = 1;
  j->jobid[0] = 0;
  for (const char *v = job_vars; *v && !j->jobid[0]; v += strlen(v) + 1) {
    const char *s = env_get(env, v);
    if (!s || !*s) continue;
    /* keep it file-name safe: letters, digits, '-', '_', '.' */
    size_t k = 0;
    for (; *s && k < sizeof j->jobid - 1; s++)
      j->jobid[k++] = (*s == '-' || *s == '_' || *s == '.' || (*s >= '0' && *s <= '9') || ((*s | 0x20) >= 'a' && (*s | 0x20) <= 'z')) ? *s : '_';
    j->jobid[k] = 0;
  }
  /* every srun of one Slurm allocation shares SLURM_JOB_ID: the step tells
   * them apart, so a second step does not overwrite the first one's files */
  const char *step = env_get(env, HPCMEM_START_STR("SLURM_STEP_ID"));
  if (j->jobid[0] && step && *step && env_get(env, job_vars /* its first: SLURM_JOB_ID */)) {
    size_t k = strlen(j->jobid);
    int ok = 1;
    for (const char *c = step; *c; c++) ok &= *c >= '0' && *c <= '9';
    if (ok && k + 2 + strlen(step) < sizeof j->jobid) { append(j->jobid, sizeof j->jobid, HPCMEM_START_STR(".")); append(j->jobid, sizeof j->jobid, step); }
  }
  if (!j->jobid[0]) { append(j->jobid, sizeof j->jobid, HPCMEM_START_STR("pid")); append_uint(j->jobid, sizeof j->jobid, (unsigned)pid); }
  struct utsname u;
  j->hostname[0] = 0;
  if (uname(&u) == 0) append(j->hostname, sizeof j->hostname, u.nodename);
}

void _hpcmem_job_init(void) { _hpcmem_job_load(environ, (int)getpid()); }
