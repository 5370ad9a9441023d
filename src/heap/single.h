/* Locks and atomics that a single-threaded process can skip.
 *
 * glibc sets __libc_single_threaded to 0 in pthread_create, in the creating
 * thread and before the new thread runs, and back to 1 only in the child of
 * a fork.  While it reads 1, the calling thread is the only one, and it
 * cannot start another from inside the allocator: a lock it skips and the
 * unlock that follows see the same value, and no other thread can be inside
 * the critical section.  The heaps' locks, the large tier's lock and the
 * statistics' shared counters cost an atomic instruction each, about as much
 * as the rest of a large-block malloc+free together.  (Threads made with a
 * raw clone() instead of pthread_create are not seen; they cannot use the C
 * library's allocator safely either.)  The fork handlers keep using the real
 * locks. */
#ifndef HPCMEM_HEAP_SINGLE_H
#define HPCMEM_HEAP_SINGLE_H
#include "util/lock.h"
#if defined(__has_include)
#if __has_include(<sys/single_threaded.h>)
#include <sys/single_threaded.h>
#define HPCMEM_HAVE_SINGLE_THREADED 1
#endif
#endif

static inline int _hpcmem_single_threaded(void) {
#ifdef HPCMEM_HAVE_SINGLE_THREADED
  return __libc_single_threaded != 0;
#else
  return 0;
#endif
}

/* Single-threaded, the lock word is still set and cleared, with plain
 * stores: no other thread needs it, but a signal handler does.  The summary
 * of a fatal signal (_hpcmem_lock_within_st) sees from it that the thread it
 * interrupted is inside, its lists perhaps half relinked.  The signal fences
 * cost no instruction; they only keep the compiler from moving the section's
 * stores outside the mark. */
static inline void _hpcmem_lock_st(hpcmem_lock_t *l) {
  if (!_hpcmem_single_threaded()) {
    _hpcmem_lock(l);
  } else {
    l->v = 1;
    __atomic_signal_fence(__ATOMIC_SEQ_CST);
  }
}
static inline void _hpcmem_unlock_st(hpcmem_lock_t *l) {
  if (!_hpcmem_single_threaded()) {
    _hpcmem_unlock(l);
  } else {
    __atomic_signal_fence(__ATOMIC_SEQ_CST);
    l->v = 0;
  }
}

/* For a reader in a signal handler: the lock if it comes free within about
 * ns nanoseconds (_hpcmem_lock_within); single-threaded, only if the
 * interrupted thread was not inside (waiting would be for ever).  1: held,
 * let go with _hpcmem_unlock_st; 0: read without it. */
static inline int _hpcmem_lock_within_st(hpcmem_lock_t *l, uint64_t ns) {
  if (!_hpcmem_single_threaded()) return _hpcmem_lock_within(l, ns);
  if (l->v) return 0;
  _hpcmem_lock_st(l);
  return 1;
}

#endif
