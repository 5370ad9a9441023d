/* libhmtpreload.so: the recorder on top of the C library's malloc, for
 * measuring what tracing costs by itself (without libhpcmem's allocator,
 * so that the comparison with heaptrack -- which also wraps glibc -- is
 * like for like) and for running real programs traced before the core
 * calls the hooks:
 *
 *   HPCMEM_TRACE=1 LD_PRELOAD=tests/trace/.libs/libhmtpreload.so ./app
 *
 * Each entry point calls glibc's own function and reports the event the
 * way the core does (frees before the memory is released).  Not installed. */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <unistd.h>
#include "trace/trace.h"

extern void *__libc_malloc(size_t);
extern void __libc_free(void *);
extern void *__libc_calloc(size_t, size_t);
extern void *__libc_realloc(void *, size_t);
extern void *__libc_memalign(size_t, size_t);

/* frame pointers in the entry points, so that HPCMEM_TRACE_UNWIND=frame can
 * walk from the hook into a program built with them */
#define EXPORT __attribute__((visibility("default"), optimize("no-omit-frame-pointer")))
#define TRACING (__builtin_expect(!started, 0) ? start_now() : __builtin_expect(_hpcmem_trace_enabled, 0))

static pthread_key_t exit_key;
static __thread int armed;
static volatile int started;

/* The recorder starts at the first allocation, not at our constructor:
 * libraries initialised before us (libstdc++'s 72 KiB exception pool)
 * allocate too.  The pthread key comes later, from the constructor. */
static int start_now(void) {
  static volatile int starting;
  if (__atomic_exchange_n(&starting, 1, __ATOMIC_ACQ_REL)) return _hpcmem_trace_enabled;
  _hpcmem_trace_init();
  started = 1;
  return _hpcmem_trace_enabled;
}

static void thread_gone(void *arg) { (void)arg; _hpcmem_trace_thread_exit(); }

static int key_ready;

static inline void arm(void) {
  /* the key's destructor writes the thread's buffer when it exits */
  if (!armed && key_ready) { armed = 1; pthread_setspecific(exit_key, (void *)1); }
}

EXPORT void *malloc(size_t n) {
  void *p = __libc_malloc(n);
  if (TRACING && p) { arm(); _hpcmem_trace_event(HPCMEM_EV_MALLOC, p, n, NULL, 0); }
  return p;
}

EXPORT void free(void *p) {
  if (TRACING && p) _hpcmem_trace_event(HPCMEM_EV_FREE, p, 0, NULL, 0);
  __libc_free(p);
}

EXPORT void *calloc(size_t n, size_t s) {
  void *p = __libc_calloc(n, s);
  if (TRACING && p) { arm(); _hpcmem_trace_event(HPCMEM_EV_CALLOC, p, n * s, NULL, 0); }
  return p;
}

EXPORT void *realloc(void *old, size_t n) {
  void *p = __libc_realloc(old, n);
  if (TRACING && (p || (old && n == 0))) { arm(); _hpcmem_trace_event(HPCMEM_EV_REALLOC, p, p ? n : 0, old, 0); }
  return p;
}

__attribute__((optimize("no-omit-frame-pointer"))) static void *aligned(size_t align, size_t n) {
  void *p = __libc_memalign(align, n);
  if (TRACING && p) { arm(); _hpcmem_trace_event(HPCMEM_EV_MEMALIGN, p, n, NULL, align); }
  return p;
}

EXPORT int posix_memalign(void **out, size_t align, size_t n) {
  if (align < sizeof(void *) || (align & (align - 1))) return EINVAL;
  void *p = aligned(align, n);
  if (!p) return ENOMEM;
  *out = p;
  return 0;
}
EXPORT void *aligned_alloc(size_t align, size_t n) { return aligned(align, n); }
EXPORT void *memalign(size_t align, size_t n) { return aligned(align, n); }
EXPORT void *valloc(size_t n) { return aligned((size_t)sysconf(_SC_PAGESIZE), n); }
EXPORT void *pvalloc(size_t n) {
  size_t pg = (size_t)sysconf(_SC_PAGESIZE);
  return aligned(pg, (n + pg - 1) & ~(pg - 1));
}

__attribute__((constructor)) static void start(void) {
  if (pthread_key_create(&exit_key, thread_gone) == 0) key_ready = 1;
  if (!started) start_now();
}
