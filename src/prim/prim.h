/* Primitives: the only layer that talks to the kernel about memory
 * (mmap, munmap, mprotect, madvise, mbind, getrandom, clocks). */
#ifndef HPCMEM_PRIM_PRIM_H
#define HPCMEM_PRIM_PRIM_H
#include <stddef.h>
#include <stdint.h>

/* Monotonic clock in ns. */
uint64_t _hpcmem_prim_now_ns(void);

/* Reserve address space aligned to `align` (a power of two >= page size).
 * The range is readable/writable but backed lazily (MAP_NORESERVE): pages
 * cost memory only once touched.  Returns NULL (errno set) on failure. */
void *_hpcmem_prim_reserve(size_t size, size_t align);
/* Give a range back to the system entirely. */
int _hpcmem_prim_release(void *p, size_t size);
/* Drop the physical pages of a range (it stays mapped and reads as zero). */
int _hpcmem_prim_decommit(void *p, size_t size);
/* Ask for transparent huge pages on a range (on != 0) or against them. */
int _hpcmem_prim_hugepages(void *p, size_t size, int on);
/* Interleave the pages of a range over the NUMA nodes in the mask
 * (mbind MPOL_INTERLEAVE); 0 or -errno. */
int _hpcmem_prim_interleave(void *p, size_t size, const unsigned long *nodemask, unsigned long maxnode);
/* Bind (MPOL_BIND or MPOL_PREFERRED) / migrate (move != 0); 0 or -errno. */
int _hpcmem_prim_bind(void *p, size_t size, int mode, const unsigned long *nodemask,
                      unsigned long maxnode, int move);
size_t _hpcmem_prim_page_size(void);
/* A cheap time stamp counter (the TSC on x86-64, the clock elsewhere);
 * _hpcmem_prim_ticks_to_ns converts by the rate measured since start-up. */
static inline uint64_t _hpcmem_prim_ticks(void) {
#if defined(__x86_64__) || defined(__i386__)
  return __builtin_ia32_rdtsc();
#else
  return _hpcmem_prim_now_ns();
#endif
}
void _hpcmem_prim_ticks_init(void);
uint64_t _hpcmem_prim_ticks_to_ns(uint64_t ticks);
/* Random bytes without the heap (getrandom, falling back to the clock). */
uint64_t _hpcmem_prim_random64(void);

#endif
