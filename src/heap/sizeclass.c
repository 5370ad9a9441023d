/* Size class tables (see sizeclass.h); generated once, checked by tests/unit/test_sizeclass. */
#include "heap/sizeclass.h"
#include "util/startdata.h"

/* Both tables are read by every malloc: in the start's data, next to the
 * code (util/startdata.h). */

const uint32_t _hpcmem_class_size[HPCMEM_NCLASSES] HPCMEM_START_RO = {
  0, 16, 32, 48, 64, 80, 96, 112,
  128, 144, 160, 176, 192, 208, 224, 240,
  256, 288, 320, 352, 384, 416, 448, 480,
  512, 576, 640, 704, 768, 832, 896, 960,
  1024, 1280, 1536, 1792, 2048, 2560, 3072, 3584,
  4096, 5120, 6144, 7168, 8192, 10240, 12288, 14336,
  16384, 20480, 24576, 28672, 32768, 40960, 49152, 57344,
  65536, 81920, 98304, 114688, 131072,
};

/* Class of n <= 1024 as a constant expression: 16-byte steps up to 128, then
 * eight classes per doubling (class 8 is 128, 16 is 256, 24 is 512, 32 is
 * 1 KiB); malloc(0) is a 16-byte object. */
#define CLASS_IN_(n, k) (8u * ((k) - 6u) + ((n) - (1u << (k)) + (1u << ((k) - 3)) - 1u) / (1u << ((k) - 3)))
#define CLASS_OF_(n) ((n) == 0 ? 1u : (n) <= 128 ? ((n) + 15u) / 16u : (n) <= 256 ? CLASS_IN_(n, 7) \
                      : (n) <= 512 ? CLASS_IN_(n, 8) : CLASS_IN_(n, 9))
#define E1_(n) HPCMEM_CLASS_KEY(CLASS_OF_(n)),
#define E4_(n) E1_(n) E1_((n) + 1) E1_((n) + 2) E1_((n) + 3)
#define E16_(n) E4_(n) E4_((n) + 4) E4_((n) + 8) E4_((n) + 12)
#define E64_(n) E16_(n) E16_((n) + 16) E16_((n) + 32) E16_((n) + 48)
#define E256_(n) E64_(n) E64_((n) + 64) E64_((n) + 128) E64_((n) + 192)

const uint8_t _hpcmem_key_of_size[HPCMEM_TINY_MAX + 1] HPCMEM_START_RO = {
  E256_(0u) E256_(256u) E256_(512u) E256_(768u) HPCMEM_CLASS_KEY(CLASS_OF_(1024u))
};
_Static_assert(HPCMEM_TINY_MAX == 1024, "the table above is written for 1 KiB");
