/* A small spin-then-yield lock for the heaps: uncontended it is one atomic
 * exchange; contended it yields, so oversubscribed runs (16 threads on 2
 * cores) do not burn their time slices spinning. No heap, no pthreads init. */
#ifndef HPCMEM_UTIL_LOCK_H
#define HPCMEM_UTIL_LOCK_H
#include <sched.h>
#include <stdint.h>
#include <time.h>

typedef struct { volatile int v; } hpcmem_lock_t;
#define HPCMEM_LOCK_INIT {0}

/* Always inlined: an out-of-line copy (-Os files) is a function of this
 * name in each file that has one, which the start's code list
 * (src/hot-text.ld) cannot tell apart. */
static inline __attribute__((always_inline)) int _hpcmem_lock_try(hpcmem_lock_t *l) {
  return __atomic_exchange_n(&l->v, 1, __ATOMIC_ACQUIRE) == 0;
}
static inline __attribute__((always_inline)) void _hpcmem_lock(hpcmem_lock_t *l) {
  for (int spins = 0; !_hpcmem_lock_try(l); spins++) {
    while (__atomic_load_n(&l->v, __ATOMIC_RELAXED)) {
      if (++spins > 64) { sched_yield(); spins = 0; }
      else __builtin_ia32_pause();
    }
  }
}
static inline __attribute__((always_inline)) void _hpcmem_unlock(hpcmem_lock_t *l) { __atomic_store_n(&l->v, 0, __ATOMIC_RELEASE); }

/* The lock if it comes free within about ns nanoseconds (1), else 0 and not
 * held.  For readers that must not wait for ever: the summary of a fatal
 * signal, whose handler may have interrupted the holder -- its own thread,
 * which will never let go.  Another thread's hold lasts microseconds. */
static inline int _hpcmem_lock_within(hpcmem_lock_t *l, uint64_t ns) {
  struct timespec t0, t;
  clock_gettime(CLOCK_MONOTONIC, &t0);
  for (;;) {
    if (_hpcmem_lock_try(l)) return 1;
    sched_yield();
    clock_gettime(CLOCK_MONOTONIC, &t);
    if ((uint64_t)((int64_t)(t.tv_sec - t0.tv_sec) * 1000000000 + (t.tv_nsec - t0.tv_nsec)) >= ns) return 0;
  }
}

#endif
