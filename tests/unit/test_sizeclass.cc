// Size classes (src/heap/sizeclass.h): every request maps to the smallest class that holds it.
#include <gtest/gtest.h>
extern "C" {
#include "heap/sizeclass.h"
}

TEST(_hpcmem_size_class, smallest_class_that_fits) {
  for (size_t n = 1; n <= HPCMEM_SMALL_MAX; n++) {
    unsigned c = _hpcmem_size_class(n);
    ASSERT_GE(c, 1u);
    ASSERT_LT(c, (unsigned)HPCMEM_NCLASSES);
    ASSERT_GE(_hpcmem_class_size[c], n) << n;
    if (c > 1) {
      ASSERT_LT(_hpcmem_class_size[c - 1], n) << n;
    }
  }
}

TEST(_hpcmem_size_class, every_power_of_two_is_a_class) {
  for (size_t p = 16; p <= HPCMEM_SMALL_MAX; p *= 2) EXPECT_EQ(_hpcmem_class_size[_hpcmem_size_class(p)], p);
}

TEST(_hpcmem_size_class, classes_are_multiples_of_16_and_waste_is_bounded) {
  for (unsigned c = 1; c < HPCMEM_NCLASSES; c++) {
    EXPECT_EQ(_hpcmem_class_size[c] % 16, 0u);
    if (c > 1) {
      EXPECT_LE(_hpcmem_class_size[c], _hpcmem_class_size[c - 1] * 5 / 4 + 16);
    }
  }
  EXPECT_EQ(_hpcmem_class_size[HPCMEM_NCLASSES - 1], HPCMEM_SMALL_MAX);
}

// malloc's table: the key (4 x class) of every size up to 1 KiB, by the size itself.
TEST(_hpcmem_key_of_size, is_the_class_key_of_every_tiny_size) {
  EXPECT_EQ(_hpcmem_key_of_size[0], HPCMEM_CLASS_KEY(1u));   // malloc(0): a 16-byte object
  for (size_t n = 1; n <= HPCMEM_TINY_MAX; n++) {
    unsigned k = _hpcmem_key_of_size[n], c = HPCMEM_KEY_CLASS(k);
    ASSERT_EQ(k, HPCMEM_CLASS_KEY(c)) << n;
    ASSERT_GE(_hpcmem_class_size[c], n) << n;
    ASSERT_LT(_hpcmem_class_size[c - 1], n) << n;             // the smallest that holds n
  }
  EXPECT_EQ(HPCMEM_CLASS_KEY(HPCMEM_NCLASSES - 1) <= 255, true);  // every key fits the class map's byte
}
