/**
 * @file hpcmem.h
 * @brief Public C API of libhpcmem, the MPI-aware runtime memory allocator.
 *
 * Linking with -lhpcmem (or LD_PRELOAD=libhpcmem.so) replaces the whole
 * malloc family; nothing in this header is needed for that.  The functions
 * here are for programs that want to ask the allocator something: its
 * version, its settings, its statistics; or choose where memory goes:
 * segments (hpcmem_seg.h), placement (hpcmem_place.h), contiguous regions
 * (hpcmem_contig.h).
 *
 * Conventions: functions return 0 or a negative errno-style code;
 * allocation functions return NULL with errno set, as the C library does.
 */
#ifndef HPCMEM_H
#define HPCMEM_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include "hpcmem_stats_fields.h"
#include "hpcmem_contig.h"
#include "hpcmem_place.h"
#include "hpcmem_seg.h"

#ifdef __cplusplus
extern "C" {
#endif


/** @return the library version as "major.minor.patch" (static storage). */
const char *hpcmem_version(void);

/**
 * Version numbers of the loaded library.
 * @return 0, or -EINVAL if any pointer is NULL.
 */
int hpcmem_version_numbers(int *major, int *minor, int *patch);

/* ------------------------------------------------------------------ */
/* Settings (HPCMEM_* environment variables, read once at start-up)     */

/**
 * The effective value of one setting, as text (e.g. "131072" or "abort").
 * @param name  with or without the HPCMEM_ prefix, case-sensitive ("LARGE_THRESHOLD").
 * @return 0; -ENOENT for an unknown name; -EINVAL for NULL arguments;
 *         -ERANGE if buf is too small (buf then holds a truncated value).
 */
int hpcmem_option(const char *name, char *buf, size_t len);

/**
 * Print every setting.  @p markdown != 0 prints the reference table of
 * docs/environment.md (name, type, default, range, help); 0 prints the
 * effective values, as HPCMEM_VERBOSE=1 does at start-up.
 * @return 0, or -EINVAL if out is NULL.
 */
int hpcmem_options_print(FILE *out, int markdown);

/* ------------------------------------------------------------------ */
/* Statistics (always on)                                               */

/** Allocator statistics; the fields are listed once in hpcmem_stats_fields.h. */
typedef struct hpcmem_stats {
#define HPCMEM_STATS_FIELD_(name, kind, help) uint64_t name;
  HPCMEM_STATS_FIELDS(HPCMEM_STATS_FIELD_)
#undef HPCMEM_STATS_FIELD_
} hpcmem_stats_t;

/**
 * Statistics of this process, merged over all threads (live and exited).
 * current_bytes/peak_bytes are exact for large blocks and within
 * 64 KiB per thread for small ones (threads publish in batches).
 * @return 0, or -EINVAL if out is NULL.
 */
int hpcmem_stats(hpcmem_stats_t *out);

/** Reset peak_bytes to current_bytes (start a new measuring phase). @return 0. */
int hpcmem_stats_reset_peak(void);

/** Print statistics as "name value" lines. @return 0, or -EINVAL. */
int hpcmem_stats_print(FILE *out, const hpcmem_stats_t *stats);

/**
 * Choose this process's memory report over HPCMEM_REPORT: 0 off, 1 summary, 2 full.
 * Call it before MPI_Init (the ranks agree on the mode there) or in a program
 * without MPI; a tool linked with libhpcmem turns its own report off this way.
 * @return 0; -EINVAL for another mode; -EBUSY after MPI_Init or once the report was written.
 */
int hpcmem_report_mode(int mode);

/** One point of the memory timeline. */
typedef struct hpcmem_sample {
  uint64_t t_ns;    /**< hpcmem_clock_ns() time of the sample */
  uint64_t bytes;   /**< live bytes (current_bytes) at that time */
} hpcmem_sample_t;

/**
 * The process's memory over time: samples of current_bytes, taken whenever
 * it moved by more than 1/64 of its peak (and at least 1 MiB) since the last
 * sample, always including the peak.  When the buffer of 4096 samples fills
 * up, every other sample is dropped (the peak kept) and the step doubles, so
 * the whole run stays covered.
 * @param out  room for @p max samples (may be NULL with max 0 to ask the count)
 * @return the number of samples available (copied: the first min(count, max)).
 */
size_t hpcmem_timeline(hpcmem_sample_t *out, size_t max);

/** The allocator's clock: CLOCK_MONOTONIC in ns (peak_time_ns and the timeline use it). */
uint64_t hpcmem_clock_ns(void);

/** hpcmem_clock_ns() at the allocator's start (first allocation of the process). */
uint64_t hpcmem_start_ns(void);

/**
 * Check the allocator's internal invariants (trees, lists, size sums).
 * @return 0 when consistent, -EFAULT (with a message on stderr) otherwise.
 */
int hpcmem_check(void);

#ifdef __cplusplus
}
#endif
#endif /* HPCMEM_H */
