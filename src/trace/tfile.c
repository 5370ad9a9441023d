/* The trace file of this rank: created at the first block (so a rank that
 * never allocates leaves nothing), never through a symbolic link and never
 * over an existing file; blocks are appended whole under one lock, and a
 * failed write is cut off again so the file stays readable.  Also the list
 * of loaded objects (MODULES blocks), re-written after dlopen/dlclose. */
#include "config.h"
#include "trace/trace.h"
#include "prim/prim.h"
#include "util/log.h"
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <link.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <unistd.h>

#ifndef RENAME_NOREPLACE
#define RENAME_NOREPLACE 1
#endif

static struct {
  hmt_tlock_t lock;
  int fd, dirfd;
  int failed;                /* creation failed once: do not retry */
  uint64_t off;              /* end of the file */
  int dir_nofollow;          /* the default name: not through a symbolic link */
  unsigned long long adds, subs;  /* dl_iterate_phdr counters at the last MODULES block */
  int modules_known;
} F = {.fd = -1, .dirfd = -1};
/* F's names and header apart, in .bss: F's -1s put all of it in .data,
 * whose file pages a process then had resident (6 KiB) without tracing */
static struct {
  char dir[PATH_MAX / 2];
  char name[64];
  char path[PATH_MAX];
  hmt_header_t hdr;
} FN;

/* ---- configuration from trace.c ------------------------------------ */

static void rescan_modules(void);

void _hpcmem_tfile_configure(const hmt_header_t *h, const char *dir, int dir_is_default) {
  FN.hdr = *h;
  snprintf(FN.dir, sizeof FN.dir, "%s", dir);
  F.dir_nofollow = dir_is_default;
  rescan_modules();  /* start-up: nobody else records yet */
}

const char *_hpcmem_tfile_path(void) { return F.fd >= 0 ? FN.path : ""; }

/* ---- creation -------------------------------------------------------- */

/* mkdir -p; existing directories are fine */
static int make_dirs(const char *dir) {
  char buf[PATH_MAX / 2];
  size_t n = strlen(dir);
  if (n == 0 || n >= sizeof buf) return -ENAMETOOLONG;
  memcpy(buf, dir, n + 1);
  for (char *p = buf + 1; *p; p++) {
    if (*p != '/') continue;
    *p = 0;
    if (mkdir(buf, 0777) != 0 && errno != EEXIST) return -errno;
    *p = '/';
  }
  if (mkdir(buf, 0777) != 0 && errno != EEXIST) return -errno;
  return 0;
}

static int write_all_at(int fd, const struct iovec *iov, int n, uint64_t off) {
  struct iovec v[4];
  memcpy(v, iov, (size_t)n * sizeof *v);
  int i = 0;
  while (i < n) {
    ssize_t w = pwritev(fd, v + i, n - i, (off_t)off);
    if (w < 0) { if (errno == EINTR) continue; return -errno; }
    if (w == 0) return -EIO;
    off += (uint64_t)w;
    while (i < n && (size_t)w >= v[i].iov_len) { w -= (ssize_t)v[i].iov_len; i++; }
    if (i < n) { v[i].iov_base = (char *)v[i].iov_base + w; v[i].iov_len -= (size_t)w; }
  }
  return 0;
}

static int write_header(void) {
  uint8_t h[HMT_HEADER_SIZE];
  hmt_header_encode(&FN.hdr, h);
  struct iovec v = {h, sizeof h};
  return write_all_at(F.fd, &v, 1, 0);
}

static void file_name(char *buf, size_t len, int rank, int n) {
  if (n == 0) snprintf(buf, len, "rank-%d.hmt", rank < 0 ? 0 : rank);
  else snprintf(buf, len, "rank-%d-%d.hmt", rank < 0 ? 0 : rank, n);
}

/* Is the existing file `name` a trace of this same job -- another rank that
 * took the name first because the ranks were not known yet, or the parent
 * of a forked child -- rather than a leftover of another run or something
 * else altogether?  Only the latter is worth a warning: every rank of a
 * job writes into the directory one of them made, and guessed names
 * collide there as a matter of course.  A file too short to hold a header
 * is being created by a sibling right now. */
/* A job id made from the pid ("pid1234"): the process had no launcher. */
static int launcherless(const char *id) {
  if (strncmp(id, "pid", 3) != 0 || !id[3]) return 0;
  for (id += 3; *id; id++)
    if (*id < '0' || *id > '9') return 0;
  return 1;
}

static int same_job(const char *name) {
  int fd = openat(F.dirfd, name, O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) return 0;  /* a symbolic link, or unreadable */
  struct stat st;
  uint8_t h[HMT_HEADER_SIZE];
  ssize_t n = fstat(fd, &st) == 0 && S_ISREG(st.st_mode) ? pread(fd, h, sizeof h, 0) : -1;
  close(fd);
  if (n < 0) return 0;
  if (n < (ssize_t)sizeof h) return 1;
  hmt_header_t o;
  if (hmt_header_decode(h, sizeof h, &o) != HMT_OK) return 0;
  if (strncmp(o.hostname, FN.hdr.hostname, sizeof o.hostname) != 0) return 0;
  /* processes without a launcher each name their job after their own pid:
   * those that share a directory (a script and its children, a command
   * that runs helpers, under one HPCMEM_TRACE_DIR) are one job as well --
   * a shim chain of 26 processes gave 28 warnings */
  return strncmp(o.jobid, FN.hdr.jobid, sizeof o.jobid) == 0 || (launcherless(o.jobid) && launcherless(FN.hdr.jobid));
}

static int create_file(void) {
  int err = make_dirs(FN.dir);
  /* the default directory hpcmem-trace-<jobid> has a name others can
   * guess: a symbolic link planted under it would put the traces wherever
   * it points.  A directory the user named may be a link on purpose. */
  if (err == 0 && (F.dirfd = open(FN.dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC | (F.dir_nofollow ? O_NOFOLLOW : 0))) < 0)
    err = -errno;
  if (err == -ELOOP || (err == -ENOTDIR && F.dir_nofollow)) {
    _hpcmem_warn("trace: %s is a symbolic link or not a directory; the default trace directory is not "
                 "entered through one (HPCMEM_TRACE_DIR names a directory to use); tracing is off", FN.dir);
    return err;
  }
  if (err) {
    _hpcmem_warn("trace: cannot create directory %s (HPCMEM_TRACE_DIR): %s; tracing is off", FN.dir, strerror(-err));
    return err;
  }
  /* O_EXCL: never reuse an existing file; with O_CREAT it also refuses a
   * symbolic link (even a dangling one), and O_NOFOLLOW says so twice */
  int warned = 0;
  for (int n = 0; n < 1000; n++) {
    file_name(FN.name, sizeof FN.name, FN.hdr.rank, n);
    F.fd = openat(F.dirfd, FN.name, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
    if (F.fd >= 0) break;
    if (errno != EEXIST) { err = -errno; break; }
    if (!warned && !same_job(FN.name)) {
      warned = 1;
      _hpcmem_warn("trace: %s/%s exists; not overwriting it (it is not a trace of this job)", FN.dir, FN.name);
    }
  }
  if (F.fd < 0) {
    _hpcmem_warn("trace: cannot create a trace file in %s: %s; tracing is off", FN.dir,
                 strerror(err ? -err : EEXIST));
    close(F.dirfd); F.dirfd = -1;
    return err ? err : -EEXIST;
  }
  snprintf(FN.path, sizeof FN.path, "%s/%s", FN.dir, FN.name);
  FN.hdr.pid = (uint32_t)getpid();
  if ((err = write_header()) != 0) {
    _hpcmem_warn("trace: cannot write %s: %s; tracing is off", FN.path, strerror(-err));
    close(F.fd); F.fd = -1;
    return err;
  }
  F.off = HMT_HEADER_SIZE;
  F.modules_known = 0;
  return 0;
}

/* ---- blocks ---------------------------------------------------------- */

static int block_append_locked(hmt_block_t *b, const void *payload) {
  if (F.fd < 0) {
    if (F.failed) return -EBADF;
    int err = create_file();
    if (err) { F.failed = 1; return err; }
  }
  uint8_t h[HMT_BLOCK_HEADER_SIZE];
  b->payload_crc = hmt_crc32c(0, payload, b->stored_len);
  hmt_block_encode(b, h);
  struct iovec v[2] = {{h, sizeof h}, {(void *)payload, b->stored_len}};
  int err = write_all_at(F.fd, v, b->stored_len ? 2 : 1, F.off);
  if (err) {
    /* cut the partial block off: the file must end on a block boundary */
    if (ftruncate(F.fd, (off_t)F.off) != 0) { /* nothing more to do */ }
    return err;
  }
  F.off += sizeof h + b->stored_len;
  return 0;
}

static void modules_locked(void);

int _hpcmem_tfile_write_block(hmt_block_t *b, const void *payload, int may_wait) {
  int tid = _hpcmem_trace_tid();
  if (may_wait) _hpcmem_tlock(&F.lock, tid);
  else if (_hpcmem_tlock_signal(&F.lock, tid)) return -EBUSY;  /* a signal handler */
  int first = F.fd < 0;
  int err = block_append_locked(b, payload);
  if (err == 0 && first) modules_locked();
  _hpcmem_tlock_release(&F.lock);
  return err;
}

int _hpcmem_tfile_held_by(int tid) { return __atomic_load_n(&F.lock.owner, __ATOMIC_RELAXED) == tid; }

/* ---- identity (MPI_Init) ------------------------------------------- */

void _hpcmem_tfile_set_identity(const hmt_file_identity_t *id) {
  int tid = _hpcmem_trace_tid();
  _hpcmem_tlock(&F.lock, tid);
  int old_rank = FN.hdr.rank;
  FN.hdr.rank = id->rank; FN.hdr.size = id->size;
  FN.hdr.clock_offset_ns = id->clock_offset_ns;
  FN.hdr.flags |= HMT_HF_CLOCK_OFFSET;
  if (id->rank_from_mpi) FN.hdr.flags |= HMT_HF_RANK_FROM_MPI;
  if (F.fd >= 0) {
    if (old_rank != id->rank) {
      char name[64];
      for (int n = 0; n < 1000; n++) {
        file_name(name, sizeof name, id->rank, n);
        if (syscall(SYS_renameat2, F.dirfd, FN.name, F.dirfd, name, RENAME_NOREPLACE) == 0) {
          memcpy(FN.name, name, sizeof name);
          snprintf(FN.path, sizeof FN.path, "%s/%s", FN.dir, FN.name);
          break;
        }
        if (errno != EEXIST) break;  /* keep the old name; the header has the rank */
        if (n == 0 && !same_job(name))
          _hpcmem_warn("trace: %s/%s exists; not overwriting it (it is not a trace of this job)", FN.dir, name);
      }
    }
    int err = write_header();
    if (err) _hpcmem_warn("trace: cannot update the header of %s: %s", FN.path, strerror(-err));
  }
  _hpcmem_tlock_release(&F.lock);
}

/* ---- modules ------------------------------------------------------- */

typedef struct {
  uint8_t *buf;          /* NULL: only measure */
  size_t len, cap;
  uint64_t count;
  unsigned long long adds, subs;
  char exe[PATH_MAX];
} mod_scan_t;

static void put_bytes(mod_scan_t *s, const void *p, size_t n) {
  if (s->buf && s->len + n <= s->cap) memcpy(s->buf + s->len, p, n);
  s->len += n;
}
static void put_varint(mod_scan_t *s, uint64_t v) {
  uint8_t tmp[10];
  put_bytes(s, tmp, (size_t)(hmt_put_varint(tmp, v) - tmp));
}

static size_t build_id(struct dl_phdr_info *info, const uint8_t **id) {
  for (int i = 0; i < info->dlpi_phnum; i++) {
    const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
    if (ph->p_type != PT_NOTE) continue;
    const uint8_t *p = (const uint8_t *)(info->dlpi_addr + ph->p_vaddr), *end = p + ph->p_memsz;
    while (p + sizeof(ElfW(Nhdr)) <= end) {
      const ElfW(Nhdr) *nh = (const ElfW(Nhdr) *)p;
      const uint8_t *name = p + sizeof *nh;
      const uint8_t *desc = name + ((nh->n_namesz + 3) & ~3u);
      if (desc + nh->n_descsz > end) break;
      if (nh->n_type == NT_GNU_BUILD_ID && nh->n_namesz == 4 && memcmp(name, "GNU", 4) == 0) {
        *id = desc;
        return nh->n_descsz;
      }
      p = desc + ((nh->n_descsz + 3) & ~3u);
    }
  }
  return 0;
}

static int scan_one(struct dl_phdr_info *info, size_t size, void *data) {
  mod_scan_t *s = data;
  if (s->count == 0 && size >= offsetof(struct dl_phdr_info, dlpi_subs) + sizeof info->dlpi_subs) {
    s->adds = info->dlpi_adds; s->subs = info->dlpi_subs;
  }
  uintptr_t lo = (uintptr_t)-1, hi = 0;
  for (int i = 0; i < info->dlpi_phnum; i++) {
    const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
    if (ph->p_type != PT_LOAD) continue;
    uintptr_t a = info->dlpi_addr + ph->p_vaddr;
    if (a < lo) lo = a;
    if (a + ph->p_memsz > hi) hi = a + ph->p_memsz;
  }
  if (hi == 0) return 0;
  const char *path = info->dlpi_name ? info->dlpi_name : "";
  if (!path[0] && s->count == 0) path = s->exe;  /* the main program */
  const uint8_t *id = NULL;
  size_t idlen = build_id(info, &id);
  put_varint(s, info->dlpi_addr); put_varint(s, lo); put_varint(s, hi);
  put_varint(s, idlen); put_bytes(s, id, idlen);
  size_t plen = strlen(path);
  put_varint(s, plen); put_bytes(s, path, plen);
  s->count++;
  return 0;
}

static int peek_counters(struct dl_phdr_info *info, size_t size, void *data) {
  unsigned long long *c = data;
  if (size >= offsetof(struct dl_phdr_info, dlpi_subs) + sizeof info->dlpi_subs) {
    c[0] = info->dlpi_adds; c[1] = info->dlpi_subs;
  }
  return 1;
}

/* The MODULES payload is built in normal context and kept, so that a
 * file first created in a signal handler (a program that dies before its
 * first buffer fills) still gets one: dl_iterate_phdr is not safe there. */
static struct {
  uint8_t *buf;      /* payload: count varint, then the modules */
  size_t len, cap;
  uint32_t count;
  unsigned long long adds, subs;
} M;

/* The scan runs without F.lock: dl_iterate_phdr holds the loader's lock
 * while it visits the objects, and a thread inside a dl_iterate_phdr
 * callback of its own holds that lock and may allocate and write a block
 * (waiting for F.lock): holding F.lock across the scan hung the writer
 * and that thread for ever (tests/trace/phdr_app.c).  The scan has a lock
 * of its own that nobody waits for: a thread that finds it taken leaves
 * the scan to its holder and looks at the counters again later. */
static hmt_tlock_t scan_lock;

static void rescan_modules(void) {
  static mod_scan_t s;  /* under scan_lock; PATH_MAX is too much for small thread stacks */
  int tid = _hpcmem_trace_tid();
  if (!_hpcmem_tlock_try(&scan_lock, tid)) return;
  memset(&s, 0, offsetof(mod_scan_t, exe));
  ssize_t n = readlink("/proc/self/exe", s.exe, sizeof s.exe - 1);
  s.exe[n > 0 ? n : 0] = 0;
  dl_iterate_phdr(scan_one, &s);  /* measure */
  size_t cap = s.len + 10 + 4096;
  uint8_t *buf = _hpcmem_trace_alloc(cap);
  if (!buf) { _hpcmem_tlock_release(&scan_lock); return; }
  s.buf = buf; s.cap = cap - 10; s.len = 10; s.count = 0;
  dl_iterate_phdr(scan_one, &s);
  if (s.len > s.cap) {  /* loaded in between: next time */
    _hpcmem_trace_free(buf);
    _hpcmem_tlock_release(&scan_lock);
    return;
  }
  /* the count goes in front, as a varint right-aligned in the 10 spare bytes */
  uint8_t tmp[10];
  size_t cl = (size_t)(hmt_put_varint(tmp, s.count) - tmp);
  memcpy(buf + 10 - cl, tmp, cl);
  memmove(buf, buf + 10 - cl, s.len - 10 + cl);
  _hpcmem_tlock(&F.lock, tid);
  uint8_t *old = M.buf;
  M.buf = buf; M.cap = cap; M.len = s.len - 10 + cl; M.count = (uint32_t)s.count;
  M.adds = s.adds; M.subs = s.subs;
  F.modules_known = 0;
  _hpcmem_tlock_release(&F.lock);
  _hpcmem_tlock_release(&scan_lock);
  _hpcmem_trace_free(old);
}

static void modules_locked(void) {
  if (!M.buf || F.fd < 0) return;
  hmt_block_t b = {0};
  b.type = HMT_BLOCK_MODULES; b.codec = HMT_CODEC_NONE;
  b.stored_len = b.raw_len = (uint32_t)M.len;
  b.count = M.count;
  if (block_append_locked(&b, M.buf) == 0) { F.adds = M.adds; F.subs = M.subs; F.modules_known = 1; }
}

void _hpcmem_tfile_check_modules(int may_wait) {
  if (!may_wait || F.failed) return;
  unsigned long long c[2] = {0, 0};
  dl_iterate_phdr(peek_counters, c);
  if (M.buf && c[0] == M.adds && c[1] == M.subs && (F.fd < 0 || F.modules_known)) return;
  if (!M.buf || c[0] != M.adds || c[1] != M.subs) rescan_modules();
  _hpcmem_tlock(&F.lock, _hpcmem_trace_tid());
  if (F.fd >= 0 && !F.modules_known) modules_locked();
  _hpcmem_tlock_release(&F.lock);
}

/* ---- shutdown and fork ---------------------------------------------- */

void _hpcmem_tfile_close(void) {
  if (F.fd >= 0) close(F.fd);
  if (F.dirfd >= 0) close(F.dirfd);
  F.fd = F.dirfd = -1;
  F.failed = 0; F.off = 0; F.modules_known = 0;
  FN.path[0] = 0;
  F.lock.owner = 0;
}

/* In a child of fork: the parent's file is not ours; the next block
 * creates a new one (rank-<r>-<n>.hmt, the header says which pid). */
void _hpcmem_tfile_after_fork_child(void) {
  F.lock.owner = 0;
  if (F.fd >= 0) close(F.fd);
  if (F.dirfd >= 0) close(F.dirfd);
  F.fd = F.dirfd = -1;
  F.off = 0; F.modules_known = 0; FN.path[0] = 0;
}
