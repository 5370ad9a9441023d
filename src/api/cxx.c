/* C++ operator new and delete, written in C under their mangled names so
 * that libhpcmem needs no C++ runtime: they take effect when the program
 * links one.  A failing throwing new calls the new-handler and retries, and
 * throws std::bad_alloc when there is none, through the C++ runtime's own
 * functions found at that moment (a program without a C++ runtime never
 * calls a throwing new). */
#include "config.h"
#include "hpcmem.h"
#include "util/log.h"
#include <dlfcn.h>
#include <stdlib.h>

#define EXPORT __attribute__((visibility("default")))

typedef void (*new_handler_t)(void);

static void *new_slow(size_t n, size_t align) {
  for (;;) {
    void *p = NULL;
    if (align) { if (posix_memalign(&p, align, n ? n : 1) != 0) p = NULL; }
    else p = malloc(n ? n : 1);
    if (p) return p;
    new_handler_t (*get)(void) = (new_handler_t (*)(void))dlsym(RTLD_DEFAULT, "_ZSt15get_new_handlerv");
    new_handler_t h = get ? get() : NULL;
    if (h) { h(); continue; }
    void (*throw_bad_alloc)(void) = (void (*)(void))dlsym(RTLD_DEFAULT, "_ZSt17__throw_bad_allocv");
    if (throw_bad_alloc) throw_bad_alloc();
    _hpcmem_fatal("operator new(%zu): out of memory and no C++ runtime to throw std::bad_alloc", n);
  }
}

static inline void *new_nothrow(size_t n, size_t align) {
  void *p = NULL;
  if (align) { if (posix_memalign(&p, align, n ? n : 1) != 0) p = NULL; }
  else p = malloc(n ? n : 1);
  return p;
}

static inline void *new_throw(size_t n, size_t align) {
  void *p = align ? NULL : malloc(n ? n : 1);
  return p ? p : new_slow(n, align);
}

/* operator new / new[] (size), (size, nothrow), (size, align), (size, align, nothrow) */
EXPORT void *_Znwm(size_t n) { return new_throw(n, 0); }
EXPORT void *_Znam(size_t n) { return new_throw(n, 0); }
EXPORT void *_ZnwmRKSt9nothrow_t(size_t n, const void *nt) { (void)nt; return new_nothrow(n, 0); }
EXPORT void *_ZnamRKSt9nothrow_t(size_t n, const void *nt) { (void)nt; return new_nothrow(n, 0); }
EXPORT void *_ZnwmSt11align_val_t(size_t n, size_t a) { return new_throw(n, a); }
EXPORT void *_ZnamSt11align_val_t(size_t n, size_t a) { return new_throw(n, a); }
EXPORT void *_ZnwmSt11align_val_tRKSt9nothrow_t(size_t n, size_t a, const void *nt) { (void)nt; return new_nothrow(n, a); }
EXPORT void *_ZnamSt11align_val_tRKSt9nothrow_t(size_t n, size_t a, const void *nt) { (void)nt; return new_nothrow(n, a); }

/* operator delete / delete[]: plain, sized, aligned, sized+aligned, nothrow forms */
EXPORT void _ZdlPv(void *p) { free(p); }
EXPORT void _ZdaPv(void *p) { free(p); }
EXPORT void _ZdlPvm(void *p, size_t n) { (void)n; free(p); }
EXPORT void _ZdaPvm(void *p, size_t n) { (void)n; free(p); }
EXPORT void _ZdlPvSt11align_val_t(void *p, size_t a) { (void)a; free(p); }
EXPORT void _ZdaPvSt11align_val_t(void *p, size_t a) { (void)a; free(p); }
EXPORT void _ZdlPvmSt11align_val_t(void *p, size_t n, size_t a) { (void)n; (void)a; free(p); }
EXPORT void _ZdaPvmSt11align_val_t(void *p, size_t n, size_t a) { (void)n; (void)a; free(p); }
EXPORT void _ZdlPvRKSt9nothrow_t(void *p, const void *nt) { (void)nt; free(p); }
EXPORT void _ZdaPvRKSt9nothrow_t(void *p, const void *nt) { (void)nt; free(p); }
EXPORT void _ZdlPvSt11align_val_tRKSt9nothrow_t(void *p, size_t a, const void *nt) { (void)a; (void)nt; free(p); }
EXPORT void _ZdaPvSt11align_val_tRKSt9nothrow_t(void *p, size_t a, const void *nt) { (void)a; (void)nt; free(p); }
