/* The MPI layer of libhpcmem: started right after the real PMPI_Init*,
 * reports right before the real PMPI_Finalize (pmpi.c holds the wrappers).
 * All of its traffic goes over its own duplicates of MPI_COMM_WORLD, with
 * PMPI_* calls only, so it never meets the application's messages. */
#ifndef HPCMEM_MPI_LAYER_H
#define HPCMEM_MPI_LAYER_H
#include <mpi.h>
#include "weak.h"

/* After a successful PMPI_Init / PMPI_Init_thread (collective over
 * MPI_COMM_WORLD): rank, size, node communicator, node index, job id from
 * rank 0, the job clock (aligned at a barrier), the agreed report mode.
 * Idempotent.  0, or a negative errno-style code (the layer stays off). */
int _hpcmem_mpi_start(void);

/* Before the real PMPI_Finalize (collective): reduce every rank's record,
 * rank 0 prints the banner and writes the JSON; then the layer's
 * communicators, datatypes and operators are freed.  Idempotent. */
void _hpcmem_mpi_finish(void);

/* The node's communicator (ranks sharing memory with this one), for the
 * node-wide shared segment; MPI_COMM_NULL before _hpcmem_mpi_start(). */
MPI_Comm _hpcmem_mpi_node_comm(void);

/* Node-wide placement accounting (place_share.c): the ranks of a node share
 * the bytes each has placed per NUMA node through a shared-memory window on
 * the node communicator, so placement decisions see what the node really
 * has free.  start: after the layer has started (collective over the node;
 * 0 or -errno, the ranks then stay on their own view); stop: before the
 * communicators are freed (collective, idempotent). */
int _hpcmem_place_share_start(void);
void _hpcmem_place_share_stop(void);

/* Create the node-shared segment (mpi/segment.c), collective over the
 * node's communicator.  An MPI error code; a failure to make the mapping is
 * reported and leaves the segment unavailable, not the layer. */
int _hpcmem_mpi_segment_start(MPI_Comm shm);

#endif
