// When the start finds too little address space (ulimit -v below the ~19 GiB
// one heap and the large tier need, or strict overcommit accounting),
// libhpcmem hands every call to the C library's allocator and the program
// keeps running (api/alloc.c, start_on_system; docs/footprint.md).
//
// This program is linked with libhpcmem.  main() runs it again under an
// address-space limit of 4 GiB, so that libhpcmem's start (at the first
// allocation, before main) already sees the limit; the tests run there.
#include <gtest/gtest.h>
#include <malloc.h>
#include <pthread.h>
#include <stdint.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <vector>
#include "hpcmem.h"
#include "hpcmem_seg.h"

namespace {
const rlim_t kLimit = (rlim_t)4 << 30;

bool aligned(const void *p, size_t a) { return ((uintptr_t)p & (a - 1)) == 0; }

void fill_check(void *p, size_t n, unsigned char v) {
  memset(p, v, n);
  for (size_t i = 0; i < n; i += 61) ASSERT_EQ(((unsigned char *)p)[i], v);
}

// The C library's chunk header: glibc's blocks carry their size 8 bytes
// before the pointer, libhpcmem's small objects and runs do not.
size_t glibc_chunk_size(const void *p) {
  size_t hdr;
  memcpy(&hdr, (const char *)p - sizeof hdr, sizeof hdr);
  return hdr & ~(size_t)7;
}

// Sizes no allocator can give, out of the compiler's sight (it warns about
// constant ones).
volatile size_t kHalf = SIZE_MAX / 2, kHuge = SIZE_MAX - 4096;

const size_t kSizes[] = {0, 1, 16, 100, 1024, 65536, 131072, 200000, 1 << 20, 64 << 20};
}  // namespace

TEST(on_system, the_limit_is_in_force) {
  struct rlimit r;
  ASSERT_EQ(getrlimit(RLIMIT_AS, &r), 0);
  EXPECT_EQ(r.rlim_cur, kLimit);
}

TEST(on_system, malloc_and_free_use_the_c_library) {
  for (size_t n : kSizes) {
    unsigned char *p = (unsigned char *)malloc(n);
    ASSERT_NE(p, nullptr) << n;
    EXPECT_TRUE(aligned(p, 16)) << n;
    EXPECT_GE(glibc_chunk_size(p), n) << n;   // a glibc chunk: its header is there
    fill_check(p, n, 0x5a);
    free(p);
  }
  free(nullptr);
}

TEST(on_system, calloc_zeroes_and_refuses_overflow) {
  for (size_t n : kSizes) {
    unsigned char *p = (unsigned char *)calloc(1, n);
    ASSERT_NE(p, nullptr) << n;
    for (size_t i = 0; i < n; i += 97) ASSERT_EQ(p[i], 0) << n;
    free(p);
  }
  errno = 0;
  EXPECT_EQ(calloc(kHalf, 3), nullptr);
  EXPECT_EQ(errno, ENOMEM);
}

TEST(on_system, realloc_keeps_the_contents) {
  unsigned char *p = (unsigned char *)realloc(nullptr, 100);
  ASSERT_NE(p, nullptr);
  for (int i = 0; i < 100; i++) p[i] = (unsigned char)i;
  p = (unsigned char *)realloc(p, 300000);
  ASSERT_NE(p, nullptr);
  for (int i = 0; i < 100; i++) ASSERT_EQ(p[i], (unsigned char)i);
  p = (unsigned char *)realloc(p, 10);
  ASSERT_NE(p, nullptr);
  for (int i = 0; i < 10; i++) ASSERT_EQ(p[i], (unsigned char)i);
  EXPECT_EQ(realloc(p, 0), nullptr);   // glibc: frees, returns NULL
  errno = 0;
  void *q = malloc(10);
  EXPECT_EQ(realloc(q, kHuge), nullptr);
  EXPECT_EQ(errno, ENOMEM);
  free(q);
}

TEST(on_system, reallocarray_refuses_overflow) {
  void *p = reallocarray(nullptr, 10, 10);
  ASSERT_NE(p, nullptr);
  errno = 0;
  void *volatile keep = p;   // a failed reallocarray leaves p as it was
  EXPECT_EQ(reallocarray(p, kHalf, 3), nullptr);
  EXPECT_EQ(errno, ENOMEM);
  free(keep);
}

TEST(on_system, aligned_forms_align_and_refuse_bad_alignments) {
  for (size_t a : {(size_t)16, (size_t)64, (size_t)4096, (size_t)1 << 21}) {
    void *p = nullptr;
    ASSERT_EQ(posix_memalign(&p, a, 1000), 0) << a;
    EXPECT_TRUE(aligned(p, a)) << a;
    fill_check(p, 1000, 1);
    free(p);
    p = aligned_alloc(a, 3 * a);
    ASSERT_NE(p, nullptr) << a;
    EXPECT_TRUE(aligned(p, a)) << a;
    free(p);
    p = memalign(a, 200000);
    ASSERT_NE(p, nullptr) << a;
    EXPECT_TRUE(aligned(p, a)) << a;
    fill_check(p, 200000, 2);
    free(p);
  }
  void *p = nullptr;
  EXPECT_EQ(posix_memalign(&p, 24, 100), EINVAL);
  EXPECT_EQ(posix_memalign(&p, 4096, kHuge), ENOMEM);
  long page = sysconf(_SC_PAGESIZE);
  p = valloc(100);
  ASSERT_NE(p, nullptr);
  EXPECT_TRUE(aligned(p, (size_t)page));
  free(p);
  p = pvalloc(100);
  ASSERT_NE(p, nullptr);
  EXPECT_TRUE(aligned(p, (size_t)page));
  EXPECT_GE(malloc_usable_size(p), (size_t)page);
  free(p);
}

TEST(on_system, malloc_usable_size_covers_the_request) {
  for (size_t n : kSizes) {
    void *p = malloc(n);
    ASSERT_NE(p, nullptr);
    size_t u = malloc_usable_size(p);
    EXPECT_GE(u, n) << n;
    EXPECT_LE(u, n + 4096 + 32) << n;
    fill_check(p, u, 3);   // all of it may be used
    free(p);
  }
  EXPECT_EQ(malloc_usable_size(nullptr), 0u);
}

namespace {
void *churn(void *arg) {
  std::vector<void *> *mine = (std::vector<void *> *)arg;
  for (int i = 0; i < 20000; i++) {
    void *p = malloc((size_t)(i % 3000) + 1);
    if (!p) return (void *)1;
    memset(p, i & 0xff, (size_t)(i % 3000) + 1);
    if (i % 2) mine->push_back(p);   // left for the main thread to free
    else free(p);
  }
  return nullptr;
}
}  // namespace

TEST(on_system, threads_allocate_and_free_each_others_blocks) {
  std::vector<void *> kept[4];
  pthread_t th[4];
  for (int i = 0; i < 4; i++) ASSERT_EQ(pthread_create(&th[i], nullptr, churn, &kept[i]), 0);
  for (int i = 0; i < 4; i++) {
    void *rc = (void *)2;
    ASSERT_EQ(pthread_join(th[i], &rc), 0);
    EXPECT_EQ(rc, nullptr);
  }
  for (auto &v : kept)
    for (void *p : v) free(p);
}

TEST(on_system, a_forked_child_allocates_and_frees) {
  void *before = malloc(5000);
  ASSERT_NE(before, nullptr);
  pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    int bad = 0;
    for (int i = 0; i < 10000 && !bad; i++) {
      void *p = malloc((size_t)i * 7 + 1);
      bad = p == nullptr;
      free(p);
    }
    free(before);
    _exit(bad);
  }
  int status = 0;
  ASSERT_EQ(waitpid(pid, &status, 0), pid);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  free(before);
}

TEST(on_system, operator_new_and_delete_work) {
  std::vector<std::vector<int>> v(1000);
  for (int i = 0; i < 1000; i++) v[i].assign((size_t)i, i);
  long sum = 0;
  for (auto &x : v) for (int y : x) sum += y;
  EXPECT_EQ(sum, 332833500L);
  int *a = new int[100000]();
  EXPECT_EQ(a[99999], 0);
  delete[] a;
}

TEST(on_system, hpcmem_stats_counts_nothing) {
  void *p = malloc(1000);
  hpcmem_stats_t st;
  memset(&st, 0xff, sizeof st);
  hpcmem_stats(&st);
  EXPECT_EQ(st.current_bytes, 0u);
  EXPECT_EQ(st.peak_bytes, 0u);
  free(p);
}

// glibc's extensions answer for libhpcmem's (empty) heaps, as documented in
// docs/allocator.md: they must not touch tiers that were never set up.
TEST(on_system, mallinfo2_malloc_trim_and_malloc_info_answer) {
  void *p = malloc(100000);
  struct mallinfo2 mi = mallinfo2();
  EXPECT_EQ(mi.uordblks, 0u);
  EXPECT_GE(malloc_trim(0), 0);
  char *buf = nullptr;
  size_t len = 0;
  FILE *f = open_memstream(&buf, &len);
  ASSERT_NE(f, nullptr);
  EXPECT_EQ(malloc_info(0, f), 0);
  fclose(f);
  EXPECT_NE(strstr(buf, "<malloc"), nullptr);
  free(buf);
  EXPECT_EQ(mallopt(M_ARENA_MAX, 1), 1);
  free(p);
}

TEST(on_system, hpcmem_check_finds_nothing_wrong) { EXPECT_EQ(hpcmem_check(), 0); }

TEST(on_system, hpcmem_malloc_seg_gives_private_memory_only) {
  unsigned char *p = (unsigned char *)hpcmem_malloc_seg(1000, HPCMEM_SEG_PRIVATE);
  ASSERT_NE(p, nullptr);
  EXPECT_GE(glibc_chunk_size(p), 1000u);
  fill_check(p, 1000, 4);
  free(p);
  errno = 0;
  EXPECT_EQ(hpcmem_malloc_seg(1000, HPCMEM_SEG_INTERLEAVED), nullptr);
  EXPECT_EQ(errno, ENOMEM);
}

int main(int argc, char **argv) {
  struct rlimit r;
  if (getrlimit(RLIMIT_AS, &r) == 0 && r.rlim_cur != kLimit) {
    // once more, under the limit, with the arguments gtest was given
    r.rlim_cur = kLimit;
    if (r.rlim_max != RLIM_INFINITY && r.rlim_max < kLimit) {
      printf("cannot set an address-space limit of 4 GiB (hard limit %llu)\n", (unsigned long long)r.rlim_max);
      return 77;
    }
    if (setrlimit(RLIMIT_AS, &r) != 0) { perror("setrlimit"); return 1; }
    execv("/proc/self/exe", argv);
    perror("execv /proc/self/exe");
    return 1;
  }
  testing::InitGoogleTest(&argc, argv);
  return RUN_ALL_TESTS();
}
