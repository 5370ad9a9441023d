/* _exit, _Exit and the exec family.  A process that ends with _exit (a
 * child of fork that must not run its parent's exit handlers: Python's
 * os._exit and multiprocessing workers, a shell's children) or becomes
 * another program runs no destructor, and what the trace buffers held was
 * lost.  libhpcmem defines these names, so a program's calls (through its
 * PLT, under LD_PRELOAD or -lhpcmem) come here first: each writes the
 * buffers when this process records (_hpcmem_trace_leave) and then calls
 * the next definition, the C library's.  The C library's own calls --
 * exit's _exit, posix_spawn's and system's exec -- use its internal names
 * and never come here: exit has the recorder's destructor, and
 * posix_spawn's child runs on the parent's memory, as a vfork child does.
 *
 * The next definitions are found without dlsym, which takes the loader's
 * lock: an exec may run in a child of vfork (or of a clone that shares
 * memory) of a multithreaded program while another thread of the parent
 * holds that lock -- it is in dlopen, running a constructor -- and the
 * child, on the parent's memory, would wait for ever (or, once the other
 * thread let go, change the loader's state under it).  _dl_find_object
 * (glibc 2.35; lock-free and async-signal-safe) gives libhpcmem's
 * link_map; the objects loaded after it are searched, each through its
 * dynamic symbol table's hash, for the name's default version: RTLD_NEXT's
 * answer for a library loaded at start, the C library.  Nothing allocates
 * or locks, so the lookup runs wherever an exec may.
 *
 * A traced process looks them up when its recorder starts.  A process
 * that does not trace pays nothing at its start (looking them up there
 * cost ~96 KiB of resident C library and loader pages) and one load and
 * branch a call: its _exit and _Exit make the system call themselves, and
 * an exec looks the C library's up at its first call, about what binding
 * that call lazily would have cost.  Without _dl_find_object (an older C
 * library) dlsym(RTLD_NEXT) looks them up, and a vfork child's first exec
 * keeps the risk above.  No C library after us (a static link): _exit
 * makes the system call, an exec fails with ENOSYS. */
#include "config.h"
#include "trace/trace.h"
#include <dlfcn.h>
#include <errno.h>
#include <limits.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/syscall.h>
#include <unistd.h>
#include <link.h>

/* public, and out of the allocator's hot text (src/hot-text.ld): they run
 * once in a process's life */
#define LEAVE_API __attribute__((visibility("default"), cold, noinline))

extern char **environ;

enum { NX_EXIT, NX_EXIT_, NX_EXECVE, NX_EXECVP, NX_EXECVPE, NX_FEXECVE, NX_EXECVEAT, NX_DL_ITERATE_PHDR, NX_COUNT };
static const char *const next_name[NX_COUNT] = {"_exit", "_Exit", "execve", "execvp", "execvpe", "fexecve", "execveat",
                                                "dl_iterate_phdr"};
static void *next_fn[NX_COUNT];
static int next_found;

typedef void exit_fn(int);
typedef int execve_fn(const char *, char *const[], char *const[]);
typedef int execvp_fn(const char *, char *const[]);
typedef int fexecve_fn(int, char *const[], char *const[]);
typedef int execveat_fn(int, const char *, char *const[], char *const[], int);
typedef int phdr_cb(struct dl_phdr_info *, size_t, void *);
typedef int dl_iterate_phdr_fn(phdr_cb *, void *);

#ifdef HAVE__DL_FIND_OBJECT

/* Called through a pointer loaded from the GOT: a direct call would add an
 * entry to the PLT and move the malloc and free fast paths behind it
 * (src/hot-text.ld; src/api/alloc.c's libc_alloc). */
static int (*volatile find_object)(void *, struct dl_find_object *) = _dl_find_object;

/* One object's dynamic symbol table, and the hash that indexes it (GNU's,
 * or else the System V one). */
typedef struct {
  ElfW(Addr) base;
  const ElfW(Sym) *sym;
  const char *str;
  const ElfW(Half) *versym; /* NULL: no versions */
  const uint32_t *gnu_hash;
  const ElfW(Word) *hash;
} dynsym_t;

/* ld.so makes the addresses in a dynamic section it may write absolute
 * (glibc's elf_get_dynamic_info: every library's and its own); the vDSO's,
 * read-only, stay offsets from l_addr, below which no absolute one lies. */
static const void *dyn_ptr(const struct link_map *m, ElfW(Addr) p) {
  return (const void *)(p < m->l_addr ? m->l_addr + p : p);
}

static int dynsym_of(const struct link_map *m, dynsym_t *d) {
  *d = (dynsym_t){.base = m->l_addr};
  for (const ElfW(Dyn) *e = m->l_ld; e && e->d_tag != DT_NULL; e++) {
    switch (e->d_tag) {
    case DT_SYMTAB: d->sym = dyn_ptr(m, e->d_un.d_ptr); break;
    case DT_STRTAB: d->str = dyn_ptr(m, e->d_un.d_ptr); break;
    case DT_VERSYM: d->versym = dyn_ptr(m, e->d_un.d_ptr); break;
    case DT_GNU_HASH: d->gnu_hash = dyn_ptr(m, e->d_un.d_ptr); break;
    case DT_HASH: d->hash = dyn_ptr(m, e->d_un.d_ptr); break;
    }
  }
  return d->sym && d->str && (d->gnu_hash || d->hash);
}

/* strcmp, whose binding the PLT could leave to the first call */
static int same_name(const char *a, const char *b) {
  while (*a && *a == *b) a++, b++;
  return *a == *b;
}

/* What dlsym accepts (glibc's do_lookup_x): a defined function, global or
 * weak, of the default version -- a hidden one (bit 15 of its version
 * index: memcpy@GLIBC_2.2.5 beside memcpy@@GLIBC_2.14) is for programs
 * linked before the default's time.  None of our names is an ifunc in
 * glibc 2.36; were one, its resolver gives the address, called as ld.so
 * calls it on x86_64 (no argument). */
static void *accept_sym(const dynsym_t *d, uint32_t i, const char *name) {
  const ElfW(Sym) *s = &d->sym[i];
  int type = ELF64_ST_TYPE(s->st_info), bind = ELF64_ST_BIND(s->st_info); /* the same in either class */
  if (s->st_shndx == SHN_UNDEF || s->st_value == 0) return NULL;
  if (type != STT_FUNC && type != STT_GNU_IFUNC) return NULL;
  if (bind != STB_GLOBAL && bind != STB_WEAK) return NULL;
  if (d->versym && (d->versym[i] & 0x8000)) return NULL;
  if (!same_name(d->str + s->st_name, name)) return NULL;
  void *p = (void *)(d->base + s->st_value);
  return type == STT_GNU_IFUNC ? ((void *(*)(void))p)() : p;
}

static void *gnu_lookup(const dynsym_t *d, const char *name) {
  uint32_t h = 5381;
  for (const unsigned char *c = (const unsigned char *)name; *c; c++) h = h * 33 + *c;
  const uint32_t *t = d->gnu_hash;
  uint32_t nbuckets = t[0], symoffset = t[1], bloom_size = t[2], bloom_shift = t[3];
  const ElfW(Addr) *bloom = (const ElfW(Addr) *)(t + 4);
  const uint32_t *bucket = (const uint32_t *)(bloom + bloom_size), *chain = bucket + nbuckets;
  const unsigned bits = sizeof(ElfW(Addr)) * CHAR_BIT;
  ElfW(Addr) word = bloom[(h / bits) % bloom_size];
  if (!((word >> (h % bits)) & (word >> ((h >> bloom_shift) % bits)) & 1)) return NULL;
  uint32_t i = bucket[h % nbuckets];
  if (i < symoffset) return NULL;
  for (;; i++) {
    uint32_t hi = chain[i - symoffset];
    void *p = (hi | 1) == (h | 1) ? accept_sym(d, i, name) : NULL;
    if (p || (hi & 1)) return p;
  }
}

static void *sysv_lookup(const dynsym_t *d, const char *name) {
  uint32_t h = 0;
  for (const unsigned char *c = (const unsigned char *)name; *c; c++) {
    h = (h << 4) + *c;
    h ^= (h >> 24) & 0xf0;
    h &= 0x0fffffff;
  }
  const ElfW(Word) *bucket = d->hash + 2, *chain = bucket + d->hash[0];
  for (ElfW(Word) i = bucket[h % d->hash[0]]; i != STN_UNDEF; i = chain[i]) {
    void *p = accept_sym(d, i, name);
    if (p) return p;
  }
  return NULL;
}

/* The walk ends at the C library, which defines every name (glibc 2.35
 * has execveat); it and the objects before it were loaded at start and
 * stay.  Objects a dlopen adds come after it: only a process whose C
 * library is not after libhpcmem reaches them. */
static void look_up_next(void *fn[NX_COUNT]) {
  struct dl_find_object self;
  if (find_object((void *)look_up_next, &self) || !self.dlfo_link_map) return;
  int left = NX_COUNT;
  for (const struct link_map *m = self.dlfo_link_map->l_next; m && left; m = m->l_next) {
    dynsym_t d;
    if (!dynsym_of(m, &d)) continue;
    for (int i = 0; i < NX_COUNT; i++) {
      if (fn[i]) continue;
      fn[i] = d.gnu_hash ? gnu_lookup(&d, next_name[i]) : sysv_lookup(&d, next_name[i]);
      if (fn[i]) left--;
    }
  }
}

#else

static void look_up_next(void *fn[NX_COUNT]) {
  for (int i = 0; i < NX_COUNT; i++) fn[i] = dlsym(RTLD_NEXT, next_name[i]);
}

#endif

/* From the recorder's start, or from an untraced process's first exec,
 * maybe in a child of vfork: it then writes the same addresses into its
 * parent's memory as the parent would. */
void _hpcmem_trace_leave_init(void) {
  void *fn[NX_COUNT] = {NULL};
  look_up_next(fn);
  for (int i = 0; i < NX_COUNT; i++) __atomic_store_n(&next_fn[i], fn[i], __ATOMIC_RELAXED);
  __atomic_store_n(&next_found, 1, __ATOMIC_RELEASE);
}

static void *next(int i) {
  if (!__atomic_load_n(&next_found, __ATOMIC_ACQUIRE)) _hpcmem_trace_leave_init();
  return __atomic_load_n(&next_fn[i], __ATOMIC_RELAXED);
}

static int no_next(void) {
  errno = ENOSYS;
  return -1;
}

/* ---- _exit ----------------------------------------------------------- */

/* A process that never looked the next definitions up (it does not trace)
 * does not start now: the C library's _exit is this system call, and the
 * lookup would only read its symbol tables in -- or, without
 * _dl_find_object, call dlsym in a signal handler or a child of vfork. */
__attribute__((noreturn)) static void end(int which, int status) {
  exit_fn *f = __atomic_load_n(&next_found, __ATOMIC_ACQUIRE) ? (exit_fn *)__atomic_load_n(&next_fn[which], __ATOMIC_RELAXED) : NULL;
  if (f) f(status);
  for (;;) syscall(SYS_exit_group, status);
}

/* Only the trace: the rank's summary (HPCMEM_REPORT) and the rest of the
 * exit work stay undone, as the program's own exit handlers do. */
LEAVE_API void _exit(int status) {
  if (_hpcmem_trace_enabled) _hpcmem_trace_leave(HMT_FLUSH_EXIT);
  end(NX_EXIT, status);
}

LEAVE_API void _Exit(int status) {
  if (_hpcmem_trace_enabled) _hpcmem_trace_leave(HMT_FLUSH_EXIT);
  end(NX_EXIT_, status);
}

/* ---- exec ------------------------------------------------------------ */

/* Not final: a failed exec returns and the program goes on recording (the
 * C library's errno comes back untouched).  Events other threads record
 * between this flush and a successful exec are lost with those threads. */
static int exec_ve(const char *path, char *const argv[], char *const envp[]) {
  if (_hpcmem_trace_enabled) _hpcmem_trace_leave(HMT_FLUSH_EXEC);
  execve_fn *f = (execve_fn *)next(NX_EXECVE);
  return f ? f(path, argv, envp) : no_next();
}

static int exec_vp(const char *file, char *const argv[]) {
  if (_hpcmem_trace_enabled) _hpcmem_trace_leave(HMT_FLUSH_EXEC);
  execvp_fn *f = (execvp_fn *)next(NX_EXECVP);
  return f ? f(file, argv) : no_next();
}

LEAVE_API int execve(const char *path, char *const argv[], char *const envp[]) { return exec_ve(path, argv, envp); }

LEAVE_API int execv(const char *path, char *const argv[]) { return exec_ve(path, argv, environ); }

LEAVE_API int execvp(const char *file, char *const argv[]) { return exec_vp(file, argv); }

LEAVE_API int execvpe(const char *file, char *const argv[], char *const envp[]) {
  if (_hpcmem_trace_enabled) _hpcmem_trace_leave(HMT_FLUSH_EXEC);
  execve_fn *f = (execve_fn *)next(NX_EXECVPE);
  return f ? f(file, argv, envp) : no_next();
}

LEAVE_API int fexecve(int fd, char *const argv[], char *const envp[]) {
  if (_hpcmem_trace_enabled) _hpcmem_trace_leave(HMT_FLUSH_EXEC);
  fexecve_fn *f = (fexecve_fn *)next(NX_FEXECVE);
  return f ? f(fd, argv, envp) : no_next();
}

#ifdef HAVE_EXECVEAT
LEAVE_API int execveat(int dirfd, const char *path, char *const argv[], char *const envp[], int flags) {
  if (_hpcmem_trace_enabled) _hpcmem_trace_leave(HMT_FLUSH_EXEC);
  execveat_fn *f = (execveat_fn *)next(NX_EXECVEAT);
  return f ? f(dirfd, path, argv, envp, flags) : no_next();
}
#endif

/* The list forms, as the C library makes them: count the arguments (arg,
 * the first, is one; the list ends at a null pointer), then an argv of
 * that many on the stack -- nothing here may allocate (a child of vfork
 * calls these) -- and the vector form.  E2BIG at INT_MAX arguments. */
#define ARGV_FROM_LIST(arg, argv, ap)                                              \
  size_t argc_ = 1;                                                                \
  va_start(ap, arg);                                                               \
  while (va_arg(ap, char *)) {                                                     \
    if (++argc_ == INT_MAX) { va_end(ap); errno = E2BIG; return -1; }              \
  }                                                                                \
  va_end(ap);                                                                      \
  char *argv[argc_ + 1];                                                           \
  va_start(ap, arg);                                                               \
  argv[0] = (char *)arg;                                                           \
  for (size_t i_ = 1; i_ <= argc_; i_++) argv[i_] = va_arg(ap, char *);  /* the last: the null */

LEAVE_API int execl(const char *path, const char *arg, ...) {
  va_list ap;
  ARGV_FROM_LIST(arg, argv, ap)
  va_end(ap);
  return exec_ve(path, argv, environ);
}

LEAVE_API int execlp(const char *file, const char *arg, ...) {
  va_list ap;
  ARGV_FROM_LIST(arg, argv, ap)
  va_end(ap);
  return exec_vp(file, argv);
}

/* the environment follows the list's null pointer */
LEAVE_API int execle(const char *path, const char *arg, ...) {
  va_list ap;
  ARGV_FROM_LIST(arg, argv, ap)
  char *const *envp = va_arg(ap, char *const *);
  va_end(ap);
  return exec_ve(path, argv, envp);
}

/* ---- dl_iterate_phdr --------------------------------------------------- */

/* A thread inside dl_iterate_phdr holds the loader's lock while its
 * callback runs, and a callback may allocate.  Debian's libunwind keeps
 * its unwind cache under one lock of its own and, holding it, calls
 * dl_iterate_phdr: a traced allocation in such a callback, unwound with
 * libunwind, waited for that lock while the thread holding it waited for
 * the loader's -- the program hung (tests/trace/phdr_app.c).  So the
 * program's dl_iterate_phdr comes here first and counts the calls this
 * thread is inside; the recorder then captures the stack with libgcc's
 * unwinder, which finds the unwind tables without the loader's lock
 * (_dl_find_object).  Calls from inside the C library do not come here:
 * they hold no lock libunwind takes. */
__thread int _hpcmem_t_in_phdr;

__attribute__((visibility("default"), noinline)) int dl_iterate_phdr(phdr_cb *callback, void *data) {
  dl_iterate_phdr_fn *f = (dl_iterate_phdr_fn *)next(NX_DL_ITERATE_PHDR);
  if (!f) return 0;  /* no C library after us: no object to visit */
  _hpcmem_t_in_phdr++;
  int r = f(callback, data);
  _hpcmem_t_in_phdr--;
  return r;
}
