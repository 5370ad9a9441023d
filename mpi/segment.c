/* The node-shared segment over MPI: in MPI_Init the lowest rank of each node
 * creates one sparse file (HPCMEM_SHARED_DIR, a tmpfs) large enough for
 * every rank's part, every rank of the node maps it, and once all have
 * (an allreduce over the node's communicator) the file is removed, so
 * nothing is left behind however the job ends.  See src/segment/segment.h. */
#include "config.h"
#include "layer.h"
#include "prim/prim.h"
#include "segment/segment.h"
#include "util/job.h"
#include "util/log.h"
#include "util/options.h"
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#define PART_ALIGN ((uint64_t)2 << 20)

/* A shared-segment request under an MPI launcher waits for MPI_Init, in a
 * program that has the MPI library (a plain program started by mpirun has
 * no MPI_Init to wait for). */
int _hpcmem_seg_mpi_linked(void) { return _hpcmem_mpi_linked(); }

typedef struct {
  uint64_t part;       /* bytes per rank */
  int32_t rc;          /* the leader's 0 or -errno */
  char path[244];
} shared_msg_t;

/* The job id as a file name part. */
static void stem_of(char *out, size_t len) {
  char id[sizeof _hpcmem_job.jobid];
  size_t k = 0;
  for (size_t i = 0; _hpcmem_job.jobid[i] && k + 1 < sizeof id; i++) {
    char c = _hpcmem_job.jobid[i];
    id[k++] = (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '-' ? c : '_';
  }
  id[k] = 0;
  snprintf(out, len, "hpcmem-shared-%s", id);
}

int _hpcmem_mpi_segment_start(MPI_Comm shm) {
  int r, n;
  PMPI_Comm_rank(shm, &r);
  PMPI_Comm_size(shm, &n);
  shared_msg_t msg;
  memset(&msg, 0, sizeof msg);
  if (r == 0) {
    uint64_t part = ((uint64_t)_hpcmem_opt(SHARED_SIZE) + PART_ALIGN - 1) & ~(PART_ALIGN - 1);
    char stem[96];
    stem_of(stem, sizeof stem);
    msg.part = part;
    msg.rc = _hpcmem_prim_shm_create(_hpcmem_opt_str(SHARED_DIR), stem, (size_t)part * (size_t)n,
                                     msg.path, sizeof msg.path);
    if (msg.rc < 0)
      _hpcmem_warn("shared segment: cannot create the node's file in %s (HPCMEM_SHARED_DIR): %s; "
                   "shared-segment requests fail with ENODEV", _hpcmem_opt_str(SHARED_DIR), strerror(-msg.rc));
  }
  int rc = PMPI_Bcast(&msg, (int)sizeof msg, MPI_BYTE, 0, shm);
  if (rc != MPI_SUCCESS) { _hpcmem_seg_shared_fail(ENODEV); return rc; }
  int mine = msg.rc;
  if (mine == 0) {
    mine = _hpcmem_seg_shared_attach(msg.path, (size_t)msg.part, n, r);
    if (mine < 0 && mine != -EBUSY)
      _hpcmem_warn("shared segment: cannot map the node's file %s (%zu MiB): %s; shared-segment requests fail",
                   msg.path, (size_t)(msg.part * (uint64_t)n) >> 20, strerror(-mine));
  } else {
    _hpcmem_seg_shared_fail(ENODEV);
  }
  int worst = 0;
  rc = PMPI_Allreduce(&mine, &worst, 1, MPI_INT, MPI_MIN, shm);   /* every rank has mapped it (or failed) */
  if (r == 0 && msg.rc == 0) _hpcmem_prim_shm_unlink(msg.path);
  return rc;
}
