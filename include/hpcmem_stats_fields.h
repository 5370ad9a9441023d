/* libhpcmem statistics: the one list of fields.
 *
 * Each entry is X(name, kind, help).  kind says how a field merges across
 * threads and ranks: SUM adds, MAX keeps the largest, PEAKTIME is the
 * time stamp that belongs to the preceding MAX field.  The public struct
 * (hpcmem.h), the merge, the printer and the MPI reduction are all expanded
 * from this list, so they cannot drift apart.  Installed with hpcmem.h. */
#ifndef HPCMEM_STATS_FIELDS_H
#define HPCMEM_STATS_FIELDS_H

#define HPCMEM_STATS_FIELDS(X) \
  X(current_bytes,     SUM, "bytes live now (requested sizes)") \
  X(peak_bytes,        MAX, "high-water mark of live bytes") \
  X(peak_time_ns,      PEAKTIME, "when the high-water mark was reached (hpcmem_clock_ns() time)") \
  X(alloc_count,       SUM, "allocations (malloc, calloc, realloc that moved, aligned forms)") \
  X(free_count,        SUM, "frees") \
  X(realloc_count,     SUM, "realloc calls") \
  X(bytes_allocated,   SUM, "bytes allocated in total") \
  X(bytes_freed,       SUM, "bytes freed in total") \
  X(largest_alloc,     MAX, "largest single request") \
  X(small_alloc_count, SUM, "allocations served by the thread caches / group heaps") \
  X(small_free_count,  SUM, "frees into the thread caches / group heaps") \
  X(large_alloc_count, SUM, "allocations served by the large-block tier") \
  X(large_free_count,  SUM, "frees into the large-block tier") \
  X(remote_free_count, SUM, "frees of memory owned by another thread group") \
  X(mapped_bytes,      SUM, "address space backed by the allocator's regions") \
  X(retained_bytes,    SUM, "bytes held free by the allocator (not given back)") \
  X(decayed_bytes,     SUM, "bytes given back to the OS by decay (madvise)") \
  X(error_count,       SUM, "misuse detected (invalid or double free)") \
  X(alloc_time_ns,     SUM, "time spent inside the allocator (estimated from 1 call in 1024)")

#endif
