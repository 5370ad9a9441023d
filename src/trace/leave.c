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
 * The next definitions are looked up when the recorder starts, so that no
 * dlsym runs while a traced process ends (maybe in a signal handler, or in
 * a child of vfork).  A process that does not trace pays nothing at its
 * start (looking them up there cost ~96 KiB of resident C library and
 * loader pages) and one load and branch a call: its _exit and _Exit make
 * the system call themselves, and an exec looks the C library's up at its
 * first call, about what binding that call lazily would have cost.
 * No C library after us (a static link): _exit makes the system call,
 * an exec fails with ENOSYS. */
#include "config.h"
#include "trace/trace.h"
#include <dlfcn.h>
#include <errno.h>
#include <limits.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdlib.h>
#include <sys/syscall.h>
#include <unistd.h>

/* public, and out of the allocator's hot text (src/hot-text.ld): they run
 * once in a process's life */
#define LEAVE_API __attribute__((visibility("default"), cold, noinline))

extern char **environ;

enum { NX_EXIT, NX_EXIT_, NX_EXECVE, NX_EXECVP, NX_EXECVPE, NX_FEXECVE, NX_EXECVEAT, NX_COUNT };
static const char *const next_name[NX_COUNT] = {"_exit", "_Exit", "execve", "execvp", "execvpe", "fexecve", "execveat"};
static void *next_fn[NX_COUNT];
static int next_found;

typedef void exit_fn(int);
typedef int execve_fn(const char *, char *const[], char *const[]);
typedef int execvp_fn(const char *, char *const[]);
typedef int fexecve_fn(int, char *const[], char *const[]);
typedef int execveat_fn(int, const char *, char *const[], char *const[], int);

void _hpcmem_trace_leave_init(void) {
  for (int i = 0; i < NX_COUNT; i++) __atomic_store_n(&next_fn[i], dlsym(RTLD_NEXT, next_name[i]), __ATOMIC_RELAXED);
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
 * does not start now: _exit may run in a signal handler or in a child of
 * vfork, where dlsym is not safe (it takes the loader's lock, which another
 * thread of a vfork parent may hold).  The C library's _exit is this system
 * call. */
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
