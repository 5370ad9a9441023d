/* A small spin-then-yield lock for the heaps: uncontended it is one atomic
 * exchange; contended it yields, so oversubscribed runs (16 threads on 2
 * cores) do not burn their time slices spinning. No heap, no pthreads init. */
#ifndef HPCMEM_UTIL_LOCK_H
#define HPCMEM_UTIL_LOCK_H
#include <sched.h>

typedef struct { volatile int v; } hpcmem_lock_t;
#define HPCMEM_LOCK_INIT {0}

static inline int _hpcmem_lock_try(hpcmem_lock_t *l) {
  return __atomic_exchange_n(&l->v, 1, __ATOMIC_ACQUIRE) == 0;
}
static inline void _hpcmem_lock(hpcmem_lock_t *l) {
  for (int spins = 0; !_hpcmem_lock_try(l); spins++) {
    while (__atomic_load_n(&l->v, __ATOMIC_RELAXED)) {
      if (++spins > 64) { sched_yield(); spins = 0; }
      else __builtin_ia32_pause();
    }
  }
}
static inline void _hpcmem_unlock(hpcmem_lock_t *l) { __atomic_store_n(&l->v, 0, __ATOMIC_RELEASE); }

#endif
