/* libhpcmem's live statistics as PAPI Software Defined Events.
 *
 * After hpcmem_sde_init() every field of hpcmem_stats_t is a PAPI event
 * named "sde:::libhpcmem::<field>" (e.g. sde:::libhpcmem::current_bytes),
 * so any PAPI-based tool (papi_command_line, TAU, HPCToolkit, ...) can read
 * the allocator's figures next to the hardware counters. */
#ifndef HPCMEM_SDE_H
#define HPCMEM_SDE_H

#ifdef __cplusplus
extern "C" {
#endif

/** The SDE library name under which the events appear. */
#define HPCMEM_SDE_LIBRARY "libhpcmem"

/**
 * Register one SDE counter per statistics field.  Gauges (current, peak,
 * mapped, retained bytes, largest request, peak time) are read as they
 * are; the growing counts are read as the change since PAPI_start.
 * Calling it again does nothing.
 * hpcmem_stats() is looked up in the process (libhpcmem linked or
 * preloaded), so programs using this need not link libhpcmem.
 * @return 0; -ENOSYS when this build has no PAPI SDE support (configure
 *         found no libpapi) or libhpcmem is not loaded; -EIO when libsde
 *         refused a registration.
 */
int hpcmem_sde_init(void);

#ifdef __cplusplus
}
#endif
#endif
