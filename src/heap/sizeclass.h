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
/* The fast paths index 32-byte per-class records (a thread cache's bins,
 * the class geometries) with a byte scaled by 8, an addressing mode of its
 * own on x86-64: the size table and the heaps' class map hold the class
 * times 4, its "key". */
#define HPCMEM_CLASS_KEY(c) ((c) * 4u)
#define HPCMEM_KEY_CLASS(k) ((k) / 4u)
/* The key of the class of every request up to HPCMEM_TINY_MAX bytes,
 * indexed by the size itself: malloc's lookup is one load (1 KiB of table;
 * a program's common sizes touch a few of its lines). */
extern HPCMEM_HIDDEN const uint8_t _hpcmem_key_of_size[HPCMEM_TINY_MAX + 1];

/* Class of a request of n bytes, 1 <= result < HPCMEM_NCLASSES; n <= HPCMEM_SMALL_MAX. */
static inline unsigned _hpcmem_size_class(size_t n) {
  if (n <= HPCMEM_TINY_MAX) return HPCMEM_KEY_CLASS(_hpcmem_key_of_size[n]);
  /* four classes per doubling above 1 KiB (class 32 is 1 KiB): 1K < n <= 2K -> 1.25K, 1.5K, 1.75K, 2K */
  unsigned lg = 63u - (unsigned)__builtin_clzll((unsigned long long)(n - 1));  /* 2^lg < n <= 2^(lg+1) */
  unsigned quarter = (unsigned)((n - 1) >> (lg - 2)) & 3;                     /* which quarter above 2^lg */
  return 32 + 4 * (lg - 10) + quarter + 1;
}

#endif
