// The malloc family as drop-in replacements (public behaviour only).  This
// program is linked with libhpcmem, so every allocation in it, gtest's own
// included, comes from libhpcmem.
#include <gtest/gtest.h>
#include <malloc.h>
#include <pthread.h>
#include <stdint.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>
#include <fstream>
#include <string>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <set>
#include <thread>
#include <new>
#include <vector>
#include "hpcmem.h"

extern "C" void cfree(void *);

namespace {
bool aligned(const void *p, size_t a) { return ((uintptr_t)p & (a - 1)) == 0; }
void fill_check(void *p, size_t n, unsigned char v) {
  memset(p, v, n);
  for (size_t i = 0; i < n; i += 61) ASSERT_EQ(((unsigned char *)p)[i], v);
}
const size_t kSizes[] = {0, 1, 8, 15, 16, 17, 100, 1000, 1024, 1025, 4096, 10000, 65536, 100000,
                         131071, 131072, 200000, 1 << 20, 5 << 20, 64 << 20};
bool resident(const void *p) {
  long page = sysconf(_SC_PAGESIZE);
  unsigned char v = 0;
  EXPECT_EQ(mincore((void *)((uintptr_t)p & ~(uintptr_t)(page - 1)), (size_t)page, &v), 0);
  return v & 1;
}
bool thp_always() {
  std::ifstream f("/sys/kernel/mm/transparent_hugepage/enabled");
  std::string s;
  std::getline(f, s);
  return s.find("[always]") != std::string::npos;
}
// Plain malloc in another segment (HPCMEM_DEFAULT_SEGMENT): every block is a
// segment block, which the tests of the small tier's layout do not describe.
const char *in_a_segment() {
  const char *seg = getenv("HPCMEM_DEFAULT_SEGMENT");
  return seg && *seg && strcmp(seg, "private") != 0 ? "HPCMEM_DEFAULT_SEGMENT is set" : nullptr;
}
// Runs this test program again, only the test `filter`, with variable=value
// in its environment (and the private segment: the heaps are the subject).
void run_again_with(const char *variable, const char *value, const char *filter) {
  char exe[4096];
  ssize_t len = readlink("/proc/self/exe", exe, sizeof exe - 1);
  ASSERT_GT(len, 0);
  exe[len] = 0;
  std::string arg = std::string("--gtest_filter=") + filter;
  pid_t pid = fork();
  if (pid == 0) {
    setenv(variable, value, 1);
    unsetenv("HPCMEM_DEFAULT_SEGMENT");
    execl(exe, exe, arg.c_str(), (char *)nullptr);
    _exit(127);
  }
  int status = 0;
  ASSERT_EQ(waitpid(pid, &status, 0), pid);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0)
      << "with " << variable << "=" << value << ": " << (WIFSIGNALED(status) ? "killed by signal " : "exit ")
      << (WIFSIGNALED(status) ? WTERMSIG(status) : WEXITSTATUS(status));
}
}  // namespace

// First in this file: the class of 45000 bytes (49152) is used by no other
// test here, so its first object is fresh.  A malloc/free loop cycles that
// one object and neither call writes into it: its page stays unmapped until
// the program writes it (what makes an untouched size sweep cost no page
// fault per size).
TEST(malloc, loop_on_a_new_class_does_not_touch_the_object) {
  if (const char *why = in_a_segment()) GTEST_SKIP() << why;
  if (thp_always()) GTEST_SKIP() << "transparent huge pages always on: a neighbour's fault maps 2 MiB";
  const size_t n = 45000;
  char *p = (char *)malloc(n);
  ASSERT_NE(p, nullptr);
  EXPECT_FALSE(resident(p));
  free(p);
  for (int i = 0; i < 64; i++) {
    char *q = (char *)malloc(n);
    EXPECT_EQ(q, p);
    free(q);
  }
  EXPECT_FALSE(resident(p));
  char *q = (char *)malloc(n);
  ASSERT_EQ(q, p);
  fill_check(q, n, 0x5a);
  EXPECT_TRUE(resident(q));
  free(q);
  EXPECT_EQ(hpcmem_check(), 0);
}

// Objects of one class come from the list, the slot and the refill's
// unwritten range in turn; every mix hands out distinct, usable objects and
// the heaps stay consistent, also after a thread exits with objects in all
// three (they go back to their spans).
static unsigned char tag(const char *p) { return (unsigned char)((uintptr_t)p >> 4 ^ (uintptr_t)p >> 12); }
static void *mix_classes(void *) {
  for (size_t n : {24u, 200u, 3000u, 20000u}) {
    std::vector<char *> v;
    std::set<char *> seen;
    for (int round = 0; round < 3; round++) {
      for (int i = 0; i < 300; i++) {
        char *p = (char *)malloc(n);
        if (!p || !seen.insert(p).second) return (void *)1;
        memset(p, tag(p), n);
        v.push_back(p);
      }
      for (size_t i = 0; i < v.size(); i += 2) {   // every other one: the bin's list and slot fill
        if ((unsigned char)v[i][0] != tag(v[i]) || (unsigned char)v[i][n - 1] != tag(v[i])) return (void *)2;
        seen.erase(v[i]);
        free(v[i]);
        v[i] = nullptr;
      }
      std::vector<char *> keep;
      for (char *p : v) if (p) keep.push_back(p);
      v = keep;
    }
    char *one = (char *)malloc(n);                  // leaves one in the slot when freed
    free(one);
    for (size_t i = 0; i + 1 < v.size(); i++) {
      if ((unsigned char)v[i][n / 2] != tag(v[i])) return (void *)3;
      free(v[i]);
    }
    v.clear();
  }
  return nullptr;
}

TEST(malloc, slot_list_and_fresh_range_hand_out_distinct_objects) {
  for (int t = 0; t < 4; t++) {
    pthread_t th;
    void *rc = (void *)-1;
    ASSERT_EQ(pthread_create(&th, nullptr, mix_classes, nullptr), 0);
    ASSERT_EQ(pthread_join(th, &rc), 0);
    EXPECT_EQ(rc, nullptr) << "round " << t;
  }
  EXPECT_EQ(hpcmem_check(), 0);
}

TEST(malloc, every_size_is_usable_aligned_and_distinct) {
  std::vector<void *> v;
  std::set<void *> seen;
  for (size_t n : kSizes) {
    void *p = malloc(n);
    ASSERT_NE(p, nullptr) << n;
    EXPECT_TRUE(aligned(p, 16)) << n;
    EXPECT_GE(malloc_usable_size(p), n);
    EXPECT_TRUE(seen.insert(p).second);
    fill_check(p, n, (unsigned char)n);
    v.push_back(p);
  }
  for (void *p : v) free(p);
  EXPECT_EQ(hpcmem_check(), 0);
}

TEST(malloc, zero_returns_unique_freeable_pointers) {
  void *a = malloc(0), *b = malloc(0);
  ASSERT_NE(a, nullptr);
  ASSERT_NE(b, nullptr);
  EXPECT_NE(a, b);
  free(a);
  free(b);
}

TEST(malloc, impossible_size_is_enomem) {
  errno = 0;
  EXPECT_EQ(malloc(SIZE_MAX), nullptr);
  EXPECT_EQ(errno, ENOMEM);
  errno = 0;
  EXPECT_EQ(malloc((size_t)PTRDIFF_MAX + 1), nullptr);
  EXPECT_EQ(errno, ENOMEM);
  errno = 0;
  EXPECT_EQ(malloc((size_t)1 << 46), nullptr);   // 64 TiB: larger than the large region
  EXPECT_EQ(errno, ENOMEM);
}

TEST(malloc, reuses_freed_memory) {
  // LIFO thread cache: a malloc/free loop of one size touches one object, or
  // two when free puts each one aside before it goes onto its bin's list
  // (the pending free, docs/allocator.md)
  std::set<void *> seen;
  for (int i = 0; i < 100; i++) {
    void *p = malloc(48);
    seen.insert(p);
    free(p);
  }
  EXPECT_LE(seen.size(), 2u);
}

TEST(free, pending_object_is_handed_out_after_the_next_free) {
  if (const char *why = in_a_segment()) GTEST_SKIP() << why;
  // with a list in the bin, free(p) puts p aside and free(r) pushes it: the
  // next malloc of the size takes p (r is aside now).  In a thread of its
  // own: its bins of the classes above 80 bytes are empty, so none of the
  // four is a loan (docs/allocator.md) that its free puts into another bin
  std::thread([] {
    void *a[4];
    for (void *&x : a) x = malloc(80);
    for (void *x : a) free(x);
    void *p = malloc(80), *r = malloc(80);
    free(p);
    free(r);
    void *q = malloc(80);
    EXPECT_EQ(q, p);
    free(q);
  }).join();
}

TEST(free, null_is_a_no_op) { free(nullptr); SUCCEED(); }

TEST(calloc, zeroes_memory_even_when_recycled) {
  for (size_t n : {16, 256, 4000, 300000}) {
    unsigned char *p = (unsigned char *)malloc(n);
    memset(p, 0xAB, n);
    free(p);
    unsigned char *q = (unsigned char *)calloc(1, n);
    ASSERT_NE(q, nullptr);
    for (size_t i = 0; i < n; i++) ASSERT_EQ(q[i], 0) << n << " " << i;
    free(q);
  }
}

TEST(calloc, overflow_is_enomem) {
  errno = 0;
  EXPECT_EQ(calloc(SIZE_MAX / 2, 3), nullptr);
  EXPECT_EQ(errno, ENOMEM);
  errno = 0;
  EXPECT_EQ(calloc((size_t)1 << 33, (size_t)1 << 33), nullptr);
  EXPECT_EQ(errno, ENOMEM);
  void *p = calloc(0, 10);
  EXPECT_NE(p, nullptr);
  free(p);
}

TEST(realloc, keeps_contents_across_tiers) {
  size_t sizes[] = {10, 100, 3000, 70000, 200000, 3 << 20, 1000, 24};
  unsigned char *p = (unsigned char *)realloc(nullptr, 5);   // realloc(NULL, n) == malloc(n)
  ASSERT_NE(p, nullptr);
  for (size_t i = 0; i < 5; i++) p[i] = (unsigned char)(i % 251);
  size_t have = 5;
  for (size_t n : sizes) {
    p = (unsigned char *)realloc(p, n);
    ASSERT_NE(p, nullptr);
    size_t keep = have < n ? have : n;
    for (size_t i = 0; i < keep; i++) ASSERT_EQ(p[i], (unsigned char)(i % 251)) << n << " " << i;
    for (size_t i = 0; i < n; i++) p[i] = (unsigned char)(i % 251);
    have = n;
  }
  free(p);
  EXPECT_EQ(hpcmem_check(), 0);
}

TEST(realloc, to_zero_frees_and_returns_null) {
  void *p = malloc(100);
  EXPECT_EQ(realloc(p, 0), nullptr);
}

TEST(realloc, impossible_size_keeps_the_block) {
  char *p = (char *)malloc(100);
  strcpy(p, "still here");
  errno = 0;
  EXPECT_EQ(realloc(p, SIZE_MAX - 100), nullptr);
  EXPECT_EQ(errno, ENOMEM);
  EXPECT_STREQ(p, "still here");
  free(p);
}

TEST(realloc, shrinking_a_large_block_stays_in_place) {
  void *p = malloc(8 << 20);
  void *q = realloc(p, 6 << 20);
  EXPECT_EQ(p, q);
  EXPECT_GE(malloc_usable_size(q), (size_t)6 << 20);
  free(q);
}

TEST(realloc, grows_in_place_within_the_largest_small_class) {
  // 120,000 bytes come from the 128 KiB class, whose objects are as large
  // as the large tier's threshold but are not the large tier's
  char *p = (char *)malloc(120000);
  ASSERT_NE(p, nullptr);
  ASSERT_EQ(malloc_usable_size(p), (size_t)128 << 10);
  memset(p, 0x5a, 120000);
  for (size_t n = 120016; n <= ((size_t)128 << 10); n += 1024) {
    char *q = (char *)realloc(p, n);
    ASSERT_EQ(q, p) << n;
  }
  char *q = (char *)realloc(p, 100000);   // shrinking within the class stays too
  EXPECT_EQ(q, p);
  for (size_t i = 0; i < 100000; i += 997) ASSERT_EQ(q[i], 0x5a) << i;
  EXPECT_EQ(malloc_usable_size(q), (size_t)128 << 10);
  free(q);
  EXPECT_EQ(hpcmem_check(), 0);
}

TEST(reallocarray, checks_overflow) {
  void *p = reallocarray(nullptr, 10, 10);
  ASSERT_NE(p, nullptr);
  errno = 0;
  EXPECT_EQ(reallocarray(p, SIZE_MAX / 2, 4), nullptr);
  EXPECT_EQ(errno, ENOMEM);
  p = reallocarray(p, 20, 20);
  ASSERT_NE(p, nullptr);
  free(p);
}

TEST(posix_memalign, all_alignments_and_sizes) {
  for (size_t a = sizeof(void *); a <= ((size_t)1 << 22); a *= 2)
    for (size_t n : {1, 24, 100, 5000, 70000, 300000}) {
      void *p = nullptr;
      ASSERT_EQ(posix_memalign(&p, a, n), 0) << a << " " << n;
      EXPECT_TRUE(aligned(p, a)) << a << " " << n;
      EXPECT_GE(malloc_usable_size(p), n);
      fill_check(p, n, 0x5A);
      free(p);
    }
  EXPECT_EQ(hpcmem_check(), 0);
}

TEST(posix_memalign, bad_alignment_is_einval) {
  void *p = (void *)1;
  EXPECT_EQ(posix_memalign(&p, 24, 10), EINVAL);
  EXPECT_EQ(posix_memalign(&p, 4, 10), EINVAL);    // not a multiple of sizeof(void *)
  EXPECT_EQ(posix_memalign(&p, 0, 10), EINVAL);
  EXPECT_EQ(p, (void *)1);                          // untouched on error
  EXPECT_EQ(posix_memalign(&p, 64, SIZE_MAX), ENOMEM);
}

// memalign and aligned_alloc take any alignment as glibc 2.36 does: up to 16
// bytes (0 included) malloc's, above that the next power of two; only one
// past SIZE_MAX / 2 + 1 is EINVAL, and 2^63 cannot be had (ENOMEM).
void expect_glibc_alignment(void *(*fn)(size_t, size_t), const char *name) {
  const struct { size_t asked, got; } cases[] = {
      {0, 16}, {1, 16}, {3, 16}, {8, 16}, {16, 16}, {24, 32}, {48, 64}, {100, 128},
      {256, 256}, {4097, 8192}, {(size_t)3 << 20, (size_t)4 << 20}};
  for (auto c : cases) {
    errno = 0;
    void *p = fn(c.asked, 200);
    ASSERT_NE(p, nullptr) << name << "(" << c.asked << ", 200): errno " << errno;
    EXPECT_TRUE(aligned(p, c.got)) << name << "(" << c.asked << ") = " << p;
    memset(p, 0xab, 200);
    free(p);
  }
  errno = 0;
  EXPECT_EQ(fn(SIZE_MAX, 30), nullptr);
  EXPECT_EQ(errno, EINVAL) << name << ": an alignment past SIZE_MAX / 2 + 1";
  errno = 0;
  EXPECT_EQ(fn(SIZE_MAX / 2 + 2, 30), nullptr);
  EXPECT_EQ(errno, EINVAL);
  errno = 0;
  EXPECT_EQ(fn(SIZE_MAX / 2 + 1, 30), nullptr);
  EXPECT_EQ(errno, ENOMEM) << name << ": 2^63 is a power of two, but no such block";
}

TEST(aligned_alloc, aligns_as_glibc_and_rejects_only_impossible_alignments) {
  void *p = aligned_alloc(4096, 4096 * 3);
  ASSERT_NE(p, nullptr);
  EXPECT_TRUE(aligned(p, 4096));
  free(p);
  expect_glibc_alignment(aligned_alloc, "aligned_alloc");
}

TEST(memalign, aligns_as_glibc_and_rejects_only_impossible_alignments) {
  void *p = memalign(256, 1000);
  ASSERT_NE(p, nullptr);
  EXPECT_TRUE(aligned(p, 256));
  free(p);
  expect_glibc_alignment(memalign, "memalign");
}

TEST(valloc, page_aligned) {
  void *p = valloc(10);
  ASSERT_NE(p, nullptr);
  EXPECT_TRUE(aligned(p, 4096));
  free(p);
}

TEST(pvalloc, rounds_up_to_pages) {
  void *p = pvalloc(5000);
  ASSERT_NE(p, nullptr);
  EXPECT_TRUE(aligned(p, 4096));
  EXPECT_GE(malloc_usable_size(p), (size_t)8192);
  free(p);
  p = pvalloc(0);
  ASSERT_NE(p, nullptr);
  EXPECT_GE(malloc_usable_size(p), (size_t)4096);
  free(p);
  errno = 0;
  EXPECT_EQ(pvalloc(SIZE_MAX - 10), nullptr);
  EXPECT_EQ(errno, ENOMEM);
}

TEST(malloc_usable_size, null_and_sizes) {
  if (const char *why = in_a_segment()) GTEST_SKIP() << why;
  EXPECT_EQ(malloc_usable_size(nullptr), 0u);
  std::thread([] {                         // empty bins: no loan from a class above
    void *p = malloc(33);
    EXPECT_EQ(malloc_usable_size(p), 48u);   // its size class
    free(p);
  }).join();
}

TEST(cfree, frees) {
  void *p = malloc(10);
  cfree(p);
  SUCCEED();
}

TEST(operator_new, plain_array_aligned_nothrow) {
  int *i = new int(5);
  EXPECT_EQ(*i, 5);
  delete i;
  double *d = new double[1000];
  d[999] = 1;
  delete[] d;
  struct alignas(256) Big { char c[300]; };
  Big *b = new Big;
  EXPECT_TRUE(aligned(b, 256));
  delete b;
  Big *bs = new Big[3];
  EXPECT_TRUE(aligned(bs, 256));
  delete[] bs;
  char *n = new (std::nothrow) char[100];
  EXPECT_NE(n, nullptr);
  delete[] n;
  EXPECT_EQ(new (std::nothrow) char[(size_t)1 << 50], nullptr);
}

TEST(operator_new, throws_bad_alloc) {
  volatile size_t huge = (size_t)1 << 50;   // volatile: the compiler may not elide the pair
  char *volatile keep = nullptr;
  EXPECT_THROW({ keep = new char[huge]; }, std::bad_alloc);
  EXPECT_EQ(keep, nullptr);
}

// HPCMEM_LARGE_THRESHOLD may be set above the largest size class (128 KiB):
// the sizes between are runs of the group heaps.  They were looked up as a
// size class past the last one (a crash in calloc of 300,000 bytes).  The
// test runs itself again with the threshold at 1 MiB.
TEST(malloc, serves_sizes_between_the_largest_class_and_a_raised_threshold) {
  const char *set = getenv("HPCMEM_LARGE_THRESHOLD");
  if (!set) {
    run_again_with("HPCMEM_LARGE_THRESHOLD", "1M", "malloc.serves_sizes_between_the_largest_class_and_a_raised_threshold");
    return;
  }
  ASSERT_STREQ(set, "1M");
  const size_t sizes[] = {(128 << 10) + 1, 200000, 300000, 600000, (1 << 20) - 1, 1 << 20};
  for (size_t n : sizes) {
    unsigned char *p = (unsigned char *)malloc(n);
    ASSERT_NE(p, nullptr) << n;
    ASSERT_GE(malloc_usable_size(p), n);
    fill_check(p, n, 0x11);
    unsigned char *z = (unsigned char *)calloc(1, n);
    ASSERT_NE(z, nullptr) << n;
    for (size_t i = 0; i < n; i += 509) ASSERT_EQ(z[i], 0) << n;
    unsigned char *r = (unsigned char *)realloc(p, n + 100000);
    ASSERT_NE(r, nullptr) << n;
    for (size_t i = 0; i < n; i += 509) ASSERT_EQ(r[i], 0x11) << n;
    void *a = nullptr;
    ASSERT_EQ(posix_memalign(&a, 4096, n), 0) << n;
    ASSERT_TRUE(aligned(a, 4096));
    free(a);
    free(z);
    free(r);
  }
  // more of them than a heap's slice of the data area holds (16 GiB): the
  // rest come from the large tier (untouched, they cost address space only)
  std::vector<unsigned char *> many;
  for (size_t i = 0; i < 40000; i++) {
    unsigned char *p = (unsigned char *)malloc(600000);
    ASSERT_NE(p, nullptr) << "block " << i << " of 600,000 bytes";
    p[0] = (unsigned char)i;
    many.push_back(p);
  }
  for (size_t i = 0; i < many.size(); i++) {
    ASSERT_EQ(many[i][0], (unsigned char)i);
    ASSERT_GE(malloc_usable_size(many[i]), 600000u);
  }
  unsigned char *last = (unsigned char *)realloc(many.back(), 700000);
  ASSERT_NE(last, nullptr);
  many.back() = last;
  for (unsigned char *p : many) free(p);
  EXPECT_EQ(hpcmem_check(), 0);
}

// An alignment above the datablock size makes each small request a run of
// its own, aligned in the heap's slice: 2 MiB-aligned blocks of 100,000 bytes
// filled the 16 GiB slice after 8,192 of them (ENOMEM; glibc serves them
// all).  Past the slice they come from the large tier, as do the spans of
// small classes that need one then.
TEST(posix_memalign, serves_big_alignments_beyond_a_heap_slice) {
  // one heap, so that the small classes below have no other slice to go to
  // (and not in a segment: with huge pages over its whole range each touched
  // block would commit 2 MiB)
  if (!getenv("HPCMEM_HEAPS")) {
    run_again_with("HPCMEM_HEAPS", "1", "posix_memalign.serves_big_alignments_beyond_a_heap_slice");
    return;
  }
  if (const char *why = in_a_segment()) GTEST_SKIP() << why;
  std::vector<void *> many;
  for (size_t i = 0; i < 10000; i++) {
    void *p = nullptr;
    ASSERT_EQ(posix_memalign(&p, 2 << 20, 100000), 0) << "block " << i;
    ASSERT_TRUE(aligned(p, 2 << 20));
    ((char *)p)[99999] = 1;
    many.push_back(p);
  }
  // the slice is full: new spans of small classes come from the large tier too
  std::vector<char *> small;
  for (size_t n : {(size_t)3000, (size_t)7000, (size_t)20000, (size_t)90000, (size_t)120000})
    for (int i = 0; i < 200; i++) {
      char *p = (char *)malloc(n);
      ASSERT_NE(p, nullptr) << n << " bytes, object " << i << " (after the slice filled up)";
      memset(p, 3, n);
      small.push_back(p);
    }
  char *grown = (char *)realloc(small.back(), 200000);
  ASSERT_NE(grown, nullptr);
  small.back() = grown;
  for (char *p : small) free(p);
  for (void *p : many) free(p);
  EXPECT_EQ(hpcmem_check(), 0);
}
