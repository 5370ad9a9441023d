/* Size classes of the small tier.
 * 16..128 in steps of 16, eight classes per power of two up to 1 KiB (at
 * most 12.5 % rounding where most allocations are: it packs the working set
 * tighter and the tail of a reused object more often lands on a line its
 * predecessor touched), then four per power of two up to 128 KiB:
 * every power of two is a class, so an object of a power-of-two class is
 * aligned to that power (spans start block-aligned), which the aligned
 * allocation functions rely on.  Class 0 is unused ("not small"). */
#ifndef HPCMEM_HEAP_SIZECLASS_H
#define HPCMEM_HEAP_SIZECLASS_H
#include <stddef.h>
#include <stdint.h>

/* Internal data the fast paths read: hidden, so the library addresses it
 * directly instead of through the GOT. */
#ifndef HPCMEM_HIDDEN
#define HPCMEM_HIDDEN __attribute__((visibility("hidden")))
#endif

#define HPCMEM_SMALL_MAX ((size_t)128 * 1024)   /* largest class */
#define HPCMEM_NCLASSES 61                        /* classes 1..60 */
#define HPCMEM_TINY_MAX 1024                      /* classes found by table lookup */

extern HPCMEM_HIDDEN const uint32_t _hpcmem_class_size[HPCMEM_NCLASSES];
extern HPCMEM_HIDDEN const uint8_t _hpcmem_class_tiny[HPCMEM_TINY_MAX / 16 + 1];

/* Class of a request of n bytes, 1 <= result < HPCMEM_NCLASSES; n <= HPCMEM_SMALL_MAX. */
static inline unsigned _hpcmem_size_class(size_t n) {
  if (n <= HPCMEM_TINY_MAX) return _hpcmem_class_tiny[(n + 15) >> 4];
  /* four classes per doubling above 1 KiB (class 32 is 1 KiB): 1K < n <= 2K -> 1.25K, 1.5K, 1.75K, 2K */
  unsigned lg = 63u - (unsigned)__builtin_clzll((unsigned long long)(n - 1));  /* 2^lg < n <= 2^(lg+1) */
  unsigned quarter = (unsigned)((n - 1) >> (lg - 2)) & 3;                     /* which quarter above 2^lg */
  return 32 + 4 * (lg - 10) + quarter + 1;
}

#endif
