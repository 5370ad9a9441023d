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
/* Move the pages of [from, from + size) to `to`, replacing whatever was
 * mapped there (mremap MREMAP_FIXED); 0 or -errno. */
int _hpcmem_prim_move_over(void *from, void *to, size_t size);
/* The process's address-space limit (RLIMIT_AS, `ulimit -v`) in bytes; 0 if none. */
size_t _hpcmem_prim_as_limit(void);
/* Give a range back to the system entirely. */
int _hpcmem_prim_release(void *p, size_t size);
/* Drop the physical pages of a range (it stays mapped and reads as zero). */
int _hpcmem_prim_decommit(void *p, size_t size);
/* Drop the physical pages of n ranges [lo[i], hi[i]) (page aligned) in as
 * few system calls as the kernel allows: process_madvise on this process
 * (Linux 6.13 and later), else one madvise each.  discard: MADV_REMOVE
 * (shared memory) instead of MADV_DONTNEED.  0 or the first -errno. */
int _hpcmem_prim_decommit_many(char *const *lo, char *const *hi, unsigned n, int discard);
/* Is the page holding p backed by memory (mincore)?  1 yes, 0 no, -errno
 * (ENOMEM: not mapped).  A residency query only: it changes nothing. */
int _hpcmem_prim_resident(const void *p);
/* The residency of the pages of [p, p + size) (p page aligned): bit 0 of
 * vec[i] for page i (mincore); 0 or -errno. */
int _hpcmem_prim_resident_pages(const void *p, size_t size, unsigned char *vec);
/* Ask for transparent huge pages on a range (on != 0) or against them. */
int _hpcmem_prim_hugepages(void *p, size_t size, int on);
/* Does a fault in a range advised for huge pages make the kernel compact
 * memory before it returns?  From the bracketed choice of a text in the form
 * of /sys/kernel/mm/transparent_hugepage/defrag: 1 for always, madvise and
 * defer+madvise, 0 for defer and never, -1 if there is no bracketed choice. */
int _hpcmem_thp_defrag_stalls(const char *text);
/* The same for this machine's kernel (raw read, no heap); -1 if unknown. */
int _hpcmem_prim_thp_fault_stalls(void);
/* Interleave the pages of a range over the NUMA nodes in the mask
 * (mbind MPOL_INTERLEAVE); 0 or -errno. */
int _hpcmem_prim_interleave(void *p, size_t size, const unsigned long *nodemask, unsigned long maxnode);
/* The NUMA nodes this process may use, as the kernel sees them
 * (get_mempolicy MPOL_F_MEMS_ALLOWED); 0 or -errno. */
int _hpcmem_prim_mems_allowed(unsigned long *nodemask, unsigned long maxnode);
/* Bind (MPOL_BIND or MPOL_PREFERRED) / migrate (move != 0); 0 or -errno. */
int _hpcmem_prim_bind(void *p, size_t size, int mode, const unsigned long *nodemask,
                      unsigned long maxnode, int move);
/* The policy of the page at addr (get_mempolicy MPOL_F_ADDR): its mode and
 * nodes (maxnode bits); 0 or -errno. */
int _hpcmem_prim_policy_of(void *addr, int *mode, unsigned long *nodemask, unsigned long maxnode);
/* Where each page is (move_pages without moving): status[i] = its node, or
 * -errno for a page without memory; 0 or -errno. */
int _hpcmem_prim_page_nodes(void **pages, unsigned long count, int *status);
/* The kernel's page size (from the auxiliary vector, not sysconf: see prim.c). */
size_t _hpcmem_prim_page_size(void);
/* How many cpus this thread may run on (sched_getaffinity), at least 1. */
unsigned _hpcmem_prim_cpus_allowed(void);
/* Set by the allocator's thread-exit hook (api/alloc.c, thread_exit): the
 * thread runs its thread-specific destructors, and what it allocates from
 * now on may come after every hook glibc still runs.  A thread cache made
 * then is late (heap/tcache.c: _hpcmem_tcache_mark_late), the large tier
 * lists no block cache for it, a trace buffer it takes is marked late. */
extern __thread uint8_t _hpcmem_thread_exiting __attribute__((tls_model("initial-exec")));
/* The calling thread's id (gettid). */
int _hpcmem_prim_gettid(void);
/* 1 while thread tid of this process exists (tgkill with signal 0; where
 * tgkill is refused, /proc/self/task/TID), 0 once it is gone; 1 when
 * neither can tell. */
int _hpcmem_prim_thread_alive(int tid);

/* Node-shared memory (the shared segment).  A file of `size` bytes is made
 * sparse (ftruncate): its pages cost memory only once touched.
 * shm_create: a new file under dir (O_EXCL, never through a symbolic link,
 * mode 0600) named from `stem` plus a random suffix; the path is written
 * into path[len].  0 or -errno. */
int _hpcmem_prim_shm_create(const char *dir, const char *stem, size_t size, char *path, size_t len);
/* Map the whole file read/write, shared.  NULL with errno on failure
 * (ENOENT: gone; EINVAL: the file is shorter than size). */
void *_hpcmem_prim_shm_map(const char *path, size_t size);
/* Anonymous shared memory (seen by this process and children it forks). */
void *_hpcmem_prim_shm_anon(size_t size);
int _hpcmem_prim_shm_unlink(const char *path);
/* Drop pages of shared memory together with their backing store
 * (MADV_REMOVE): they read as zero afterwards, in every process. */
int _hpcmem_prim_discard(void *p, size_t size);
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
