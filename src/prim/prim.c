/* Primitives (see prim.h). */
#include "config.h"
#include "prim/prim.h"
#include "util/startdata.h"
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <sys/stat.h>
#include <linux/mempolicy.h>
#include <stdint.h>
#include <sys/mman.h>
#include <sys/auxv.h>
#include <sys/random.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

/* An address-space limit (ulimit -v) counts the extra `align` of the
 * over-reservation too (16 GiB for a heap slice): map just the size, and if
 * it is not aligned, ask for the aligned address below or above it.  Out of
 * line: no start runs it but one under such a limit. */
__attribute__((noinline, cold)) static void *reserve_tight(size_t size, size_t align) {
  if (errno != ENOMEM) return NULL;
  char *raw = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (raw == MAP_FAILED) return NULL;
  if (((uintptr_t)raw & (align - 1)) == 0) return raw;
  munmap(raw, size);
  uintptr_t down = (uintptr_t)raw & ~(uintptr_t)(align - 1);
  uintptr_t hints[2] = {down, down + align};
  for (int i = 0; i < 2; i++) {
    if (!hints[i]) continue;
    char *p = mmap((void *)hints[i], size, PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_FIXED_NOREPLACE, -1, 0);
    if (p == (char *)hints[i]) return p;
    if (p != MAP_FAILED) munmap(p, size);    /* a kernel that took the address as a hint only */
  }
  errno = ENOMEM;
  return NULL;
}

void *_hpcmem_prim_reserve(size_t size, size_t align) {
  size_t page = _hpcmem_prim_page_size();
  if (align < page) align = page;
  if (size == 0 || size + align < size) { errno = ENOMEM; return NULL; }
  /* over-reserve by `align`, then trim both ends to the aligned range */
  char *raw = mmap(NULL, size + align, PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (raw == MAP_FAILED) return align > page ? reserve_tight(size, align) : NULL;
  char *p = (char *)(((uintptr_t)raw + align - 1) & ~(uintptr_t)(align - 1));
  if (p > raw) munmap(raw, (size_t)(p - raw));
  size_t tail = (size_t)(raw + size + align - (p + size));
  if (tail) munmap(p + size, tail);
  return p;
}

size_t _hpcmem_prim_as_limit(void) {
  struct rlimit r;
  if (getrlimit(RLIMIT_AS, &r) != 0 || r.rlim_cur == RLIM_INFINITY) return 0;
  return (size_t)r.rlim_cur;
}

int _hpcmem_prim_move_over(void *from, void *to, size_t size) {
  void *p = mremap(from, size, size, MREMAP_MAYMOVE | MREMAP_FIXED, to);
  return p == MAP_FAILED ? -errno : 0;
}

int _hpcmem_prim_release(void *p, size_t size) {
  return munmap(p, size) == 0 ? 0 : -errno;
}

int _hpcmem_prim_decommit(void *p, size_t size) {
  return madvise(p, size, MADV_DONTNEED) == 0 ? 0 : -errno;
}

/* process_madvise on the calling process names it with this pidfd
 * (PIDFD_SELF_PROCESS, Linux 6.15): a pidfd of our own would go on naming
 * the parent in a child after fork. */
#define PIDFD_SELF_PROC (-10001)
static int many_unsupported;

int _hpcmem_prim_decommit_many(char *const *lo, char *const *hi, unsigned n, int discard) {
  int adv = discard ? MADV_REMOVE : MADV_DONTNEED, rc = 0;
  unsigned i = 0;
#ifdef SYS_process_madvise
  /* one call for many ranges: 0.5 us a one-page range on the development VM
   * against 1.3 us for a madvise each */
  while (n - i >= 2 && !__atomic_load_n(&many_unsupported, __ATOMIC_RELAXED)) {
    struct iovec iov[64];
    unsigned k = 0;
    size_t want = 0;
    for (; k < 64 && i + k < n; k++) {
      iov[k].iov_base = lo[i + k];
      iov[k].iov_len = (size_t)(hi[i + k] - lo[i + k]);
      want += iov[k].iov_len;
    }
    long got = syscall(SYS_process_madvise, PIDFD_SELF_PROC, iov, (size_t)k, adv, 0u);
    if (got < 0) {
      /* EBADF / EINVAL / ENOSYS / EPERM: no such pidfd, or this advice is
       * not allowed through it on this kernel: madvise from now on */
      __atomic_store_n(&many_unsupported, 1, __ATOMIC_RELAXED);
      break;
    }
    if ((size_t)got == want) { i += k; continue; }
    /* stopped part way (an error in some range): madvise the rest one by one */
    for (unsigned x = 0; x < k && (size_t)got >= iov[x].iov_len; x++) {
      got -= (long)iov[x].iov_len;
      i++;
    }
    break;
  }
#endif
  for (; i < n; i++)
    if (madvise(lo[i], (size_t)(hi[i] - lo[i]), adv) != 0 && !rc) rc = -errno;
  return rc;
}

int _hpcmem_prim_resident(const void *p) {
  size_t page = _hpcmem_prim_page_size();
  unsigned char v = 0;
  void *a = (void *)((uintptr_t)p & ~(uintptr_t)(page - 1));
  return mincore(a, page, &v) == 0 ? (int)(v & 1) : -errno;
}

int _hpcmem_prim_resident_pages(const void *p, size_t size, unsigned char *vec) {
  return mincore((void *)p, size, vec) == 0 ? 0 : -errno;
}

int _hpcmem_prim_hugepages(void *p, size_t size, int on) {
#ifdef MADV_HUGEPAGE
  return madvise(p, size, on ? MADV_HUGEPAGE : MADV_NOHUGEPAGE) == 0 ? 0 : -errno;
#else
  (void)p; (void)size; (void)on;
  return -ENOSYS;
#endif
}

int _hpcmem_thp_defrag_stalls(const char *text) {
  const char *open_ = text ? strchr(text, '[') : NULL;
  const char *close_ = open_ ? strchr(open_, ']') : NULL;
  if (!close_) return -1;
  size_t n = (size_t)(close_ - open_ - 1);
  static const struct { char name[14]; int stalls; } choice[] HPCMEM_START_RO = {
    {"always", 1}, {"madvise", 1}, {"defer+madvise", 1}, {"defer", 0}, {"never", 0}};
  for (size_t i = 0; i < sizeof choice / sizeof choice[0]; i++)
    if (strlen(choice[i].name) == n && memcmp(open_ + 1, choice[i].name, n) == 0) return choice[i].stalls;
  return -1;
}

int _hpcmem_prim_thp_fault_stalls(void) {
  char buf[128];
  int fd = open(HPCMEM_START_STR("/sys/kernel/mm/transparent_hugepage/defrag"), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return -1;
  ssize_t n = read(fd, buf, sizeof buf - 1);
  close(fd);
  if (n <= 0) return -1;
  buf[n] = 0;
  return _hpcmem_thp_defrag_stalls(buf);
}

/* The NUMA calls are the kernel's own, made directly: libnuma's mbind,
 * get_mempolicy and move_pages are the same system calls, and not linking it
 * saves every process 50 KiB of RSS (docs/footprint.md). */
static int sys_mbind(void *p, size_t size, int mode, const unsigned long *nodemask, unsigned long maxnode,
                     unsigned flags) {
  return syscall(SYS_mbind, p, size, mode, nodemask, maxnode, flags) == 0 ? 0 : -errno;
}

int _hpcmem_prim_interleave(void *p, size_t size, const unsigned long *nodemask, unsigned long maxnode) {
  return sys_mbind(p, size, MPOL_INTERLEAVE, nodemask, maxnode, 0);
}

int _hpcmem_prim_mems_allowed(unsigned long *nodemask, unsigned long maxnode) {
  return syscall(SYS_get_mempolicy, NULL, nodemask, maxnode, NULL, MPOL_F_MEMS_ALLOWED) == 0 ? 0 : -errno;
}

int _hpcmem_prim_bind(void *p, size_t size, int mode, const unsigned long *nodemask,
                      unsigned long maxnode, int move) {
  return sys_mbind(p, size, mode, nodemask, maxnode, move ? MPOL_MF_MOVE : 0);
}

int _hpcmem_prim_policy_of(void *addr, int *mode, unsigned long *nodemask, unsigned long maxnode) {
  return syscall(SYS_get_mempolicy, mode, nodemask, maxnode, addr, MPOL_F_ADDR) == 0 ? 0 : -errno;
}

int _hpcmem_prim_page_nodes(void **pages, unsigned long count, int *status) {
  return syscall(SYS_move_pages, 0, count, pages, NULL, status, 0) == 0 ? 0 : -errno;
}

int _hpcmem_prim_shm_create(const char *dir, const char *stem, size_t size, char *path, size_t len) {
  for (int attempt = 0; attempt < 8; attempt++) {
    int n = snprintf(path, len, "%s/%s-%016llx", dir, stem, (unsigned long long)_hpcmem_prim_random64());
    if (n < 0 || (size_t)n >= len) return -ENAMETOOLONG;
    int fd = open(path, O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
    if (fd < 0 && errno == EEXIST) continue;
    if (fd < 0) return -errno;
    int rc = ftruncate(fd, (off_t)size) == 0 ? 0 : -errno;
    close(fd);
    if (rc < 0) unlink(path);
    return rc;
  }
  return -EEXIST;
}

void *_hpcmem_prim_shm_map(const char *path, size_t size) {
  int fd = open(path, O_RDWR | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0) return NULL;
  struct stat st;
  if (fstat(fd, &st) < 0 || (size_t)st.st_size < size) { close(fd); errno = EINVAL; return NULL; }
  void *p = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_NORESERVE, fd, 0);
  int saved = errno;
  close(fd);                        /* the mapping keeps the file */
  errno = saved;
  return p == MAP_FAILED ? NULL : p;
}

void *_hpcmem_prim_shm_anon(size_t size) {
  void *p = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  return p == MAP_FAILED ? NULL : p;
}

int _hpcmem_prim_shm_unlink(const char *path) { return unlink(path) == 0 ? 0 : -errno; }

int _hpcmem_prim_discard(void *p, size_t size) {
  return madvise(p, size, MADV_REMOVE) == 0 ? 0 : -errno;
}

/* These two run at start in every process.  They ask the kernel's values
 * directly rather than through sysconf / sched_getaffinity + CPU_COUNT:
 * those wrappers lie in other 64 KiB windows of libc's code than mmap and
 * syscall (and sysconf reads a jump table from libc's read-only data), so
 * each would map up to 64 KiB of libc that a program without them never
 * maps (docs/footprint.md). */
size_t _hpcmem_prim_page_size(void) {
  static size_t page;
  if (!page) {
    unsigned long v = getauxval(AT_PAGESZ);
    page = v ? (size_t)v : (size_t)sysconf(_SC_PAGESIZE);
  }
  return page;
}

unsigned _hpcmem_prim_cpus_allowed(void) {
  unsigned long set[1024 / (8 * sizeof(unsigned long))] = {0};   /* CPU_SETSIZE bits, as cpu_set_t */
  long r = syscall(SYS_sched_getaffinity, 0, sizeof set, set);
  unsigned n = 0;
  for (long i = 0; r > 0 && i < r / (long)sizeof set[0]; i++) n += (unsigned)__builtin_popcountl(set[i]);
  return n ? n : 1;
}

__thread uint8_t _hpcmem_thread_exiting __attribute__((tls_model("initial-exec")));

int _hpcmem_prim_gettid(void) { return (int)syscall(SYS_gettid); }

int _hpcmem_prim_thread_alive(int tid) {
  if (syscall(SYS_tgkill, (long)getpid(), (long)tid, 0L) == 0) return 1;
  if (errno == ESRCH) return 0;
  /* tgkill refused (a seccomp filter may): the kernel's list of our threads */
  char path[48];
  snprintf(path, sizeof path, "/proc/self/task/%d", tid);
  struct stat st;
  return stat(path, &st) == 0 || errno != ENOENT;
}

uint64_t _hpcmem_prim_now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

uint64_t _hpcmem_prim_random64(void) {
  uint64_t v;
  if (getrandom(&v, sizeof v, GRND_NONBLOCK) == (ssize_t)sizeof v) return v;
  v = _hpcmem_prim_now_ns() ^ ((uint64_t)getpid() << 32);
  v ^= v >> 33; v *= 0xff51afd7ed558ccdULL; v ^= v >> 33;
  return v;
}

static uint64_t ticks0, ns0;

void _hpcmem_prim_ticks_init(void) {
  ns0 = _hpcmem_prim_now_ns();
  ticks0 = _hpcmem_prim_ticks();
}

uint64_t _hpcmem_prim_ticks_to_ns(uint64_t ticks) {
  uint64_t dn = _hpcmem_prim_now_ns() - ns0, dt = _hpcmem_prim_ticks() - ticks0;
  if (dt == 0 || dn == 0) return ticks;
  return (uint64_t)((double)ticks * (double)dn / (double)dt);
}
