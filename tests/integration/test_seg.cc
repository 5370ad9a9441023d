// Segments (include/hpcmem_seg.h) in a process that is not part of an MPI
// job: the shared segment is process-local here (tests/mpi/seg_shared.c
// covers the node-wide mapping).  Public API only.
#include <gtest/gtest.h>
#include <malloc.h>
#include <numaif.h>
#include <stdint.h>
#include <sys/wait.h>
#include <unistd.h>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>
#include "hpcmem.h"

namespace {
const int kSegs[] = {HPCMEM_SEG_PRIVATE, HPCMEM_SEG_INTERLEAVED, HPCMEM_SEG_SHARED};
bool aligned(const void *p, size_t a) { return ((uintptr_t)p & (a - 1)) == 0; }
}  // namespace

TEST(hpcmem_malloc_seg, every_segment_serves_every_size_in_its_range) {
  const size_t sizes[] = {0, 1, 100, 4096, 100000, 1 << 20, 9 << 20};
  for (int seg : kSegs) {
    for (size_t n : sizes) {
      char *p = (char *)hpcmem_malloc_seg(n, seg);
      ASSERT_NE(p, nullptr) << seg << " " << n;
      EXPECT_EQ(hpcmem_seg_of(p), seg);
      EXPECT_GE(malloc_usable_size(p), n);
      EXPECT_TRUE(aligned(p, seg == HPCMEM_SEG_PRIVATE ? 16 : 256));
      memset(p, 0x5a, n);
      free(p);   // plain free finds the segment from the address
    }
  }
  EXPECT_EQ(hpcmem_check(), 0);
}

TEST(hpcmem_malloc_seg, unknown_segment_is_EINVAL) {
  errno = 0;
  EXPECT_EQ(hpcmem_malloc_seg(10, 3), nullptr);
  EXPECT_EQ(errno, EINVAL);
  errno = 0;
  EXPECT_EQ(hpcmem_malloc_seg(10, -7), nullptr);
  EXPECT_EQ(errno, EINVAL);
}

TEST(hpcmem_malloc_seg, default_is_the_segment_of_plain_malloc) {
  void *p = hpcmem_malloc_seg(10, HPCMEM_SEG_DEFAULT);
  ASSERT_NE(p, nullptr);
  EXPECT_EQ(hpcmem_seg_of(p), hpcmem_seg_default());
  EXPECT_EQ(hpcmem_free_seg(p, HPCMEM_SEG_DEFAULT), 0);
}

TEST(hpcmem_malloc_seg, impossible_size_is_ENOMEM) {
  errno = 0;
  EXPECT_EQ(hpcmem_malloc_seg(SIZE_MAX - 10, HPCMEM_SEG_INTERLEAVED), nullptr);
  EXPECT_EQ(errno, ENOMEM);
}

TEST(hpcmem_calloc_seg, zeroes_reused_memory) {
  for (int seg : kSegs) {
    char *p = (char *)hpcmem_malloc_seg(300000, seg);
    ASSERT_NE(p, nullptr);
    memset(p, 0xff, 300000);
    free(p);
    char *q = (char *)hpcmem_calloc_seg(1000, 300, seg);
    ASSERT_NE(q, nullptr);
    EXPECT_EQ(hpcmem_seg_of(q), seg);
    for (size_t i = 0; i < 300000; i++) ASSERT_EQ(q[i], 0) << seg << " at " << i;
    free(q);
  }
}

TEST(hpcmem_calloc_seg, overflow_is_ENOMEM) {
  errno = 0;
  EXPECT_EQ(hpcmem_calloc_seg(SIZE_MAX / 2, 3, HPCMEM_SEG_SHARED), nullptr);
  EXPECT_EQ(errno, ENOMEM);
}

TEST(hpcmem_aligned_alloc_seg, honours_the_alignment) {
  for (int seg : kSegs)
    for (size_t a : {16ul, 256ul, 4096ul, 65536ul, 2ul << 20}) {
      void *p = hpcmem_aligned_alloc_seg(a, 1000, seg);
      ASSERT_NE(p, nullptr);
      EXPECT_TRUE(aligned(p, a)) << seg << " " << a;
      EXPECT_EQ(hpcmem_seg_of(p), seg);
      free(p);
    }
}

TEST(hpcmem_aligned_alloc_seg, bad_alignment_is_EINVAL) {
  errno = 0;
  EXPECT_EQ(hpcmem_aligned_alloc_seg(48, 100, HPCMEM_SEG_INTERLEAVED), nullptr);
  EXPECT_EQ(errno, EINVAL);
  errno = 0;
  EXPECT_EQ(hpcmem_aligned_alloc_seg(0, 100, HPCMEM_SEG_PRIVATE), nullptr);
  EXPECT_EQ(errno, EINVAL);
}

TEST(hpcmem_realloc_seg, moves_between_segments_keeping_the_contents) {
  char *p = (char *)malloc(5000);
  ASSERT_NE(p, nullptr);
  for (int i = 0; i < 5000; i++) p[i] = (char)i;
  char *q = (char *)hpcmem_realloc_seg(p, 8000, HPCMEM_SEG_INTERLEAVED);
  ASSERT_NE(q, nullptr);
  EXPECT_EQ(hpcmem_seg_of(q), HPCMEM_SEG_INTERLEAVED);
  for (int i = 0; i < 5000; i++) ASSERT_EQ(q[i], (char)i);
  char *r = (char *)hpcmem_realloc_seg(q, 3000, HPCMEM_SEG_SHARED);
  ASSERT_NE(r, nullptr);
  EXPECT_EQ(hpcmem_seg_of(r), HPCMEM_SEG_SHARED);
  for (int i = 0; i < 3000; i++) ASSERT_EQ(r[i], (char)i);
  char *s = (char *)hpcmem_realloc_seg(r, 1 << 20, HPCMEM_SEG_PRIVATE);
  ASSERT_NE(s, nullptr);
  EXPECT_EQ(hpcmem_seg_of(s), HPCMEM_SEG_PRIVATE);
  for (int i = 0; i < 3000; i++) ASSERT_EQ(s[i], (char)i);
  free(s);
  EXPECT_EQ(hpcmem_check(), 0);
}

TEST(hpcmem_realloc_seg, null_allocates_and_failure_leaves_the_block) {
  char *p = (char *)hpcmem_realloc_seg(nullptr, 100, HPCMEM_SEG_INTERLEAVED);
  ASSERT_NE(p, nullptr);
  EXPECT_EQ(hpcmem_seg_of(p), HPCMEM_SEG_INTERLEAVED);
  strcpy(p, "kept");
  errno = 0;
  EXPECT_EQ(hpcmem_realloc_seg(p, SIZE_MAX / 2, HPCMEM_SEG_SHARED), nullptr);
  EXPECT_EQ(errno, ENOMEM);
  EXPECT_STREQ(p, "kept");
  errno = 0;
  EXPECT_EQ(hpcmem_realloc_seg(p, 10, 9), nullptr);
  EXPECT_EQ(errno, EINVAL);
  free(p);
}

TEST(realloc, keeps_a_segment_block_in_its_segment) {
  for (int seg : {HPCMEM_SEG_INTERLEAVED, HPCMEM_SEG_SHARED}) {
    char *p = (char *)hpcmem_malloc_seg(1000, seg);
    ASSERT_NE(p, nullptr);
    memset(p, 7, 1000);
    p = (char *)realloc(p, 3 << 20);
    ASSERT_NE(p, nullptr);
    EXPECT_EQ(hpcmem_seg_of(p), seg);
    for (int i = 0; i < 1000; i++) ASSERT_EQ(p[i], 7);
    p = (char *)realloc(p, 10);
    EXPECT_EQ(hpcmem_seg_of(p), seg);
    EXPECT_EQ(p[9], 7);
    free(p);
  }
  EXPECT_EQ(hpcmem_check(), 0);
}

TEST(hpcmem_free_seg, wrong_segment_is_refused_and_the_block_stays) {
  char *p = (char *)hpcmem_malloc_seg(64, HPCMEM_SEG_SHARED);
  ASSERT_NE(p, nullptr);
  strcpy(p, "alive");
  testing::internal::CaptureStderr();
  EXPECT_EQ(hpcmem_free_seg(p, HPCMEM_SEG_PRIVATE), -EINVAL);
  EXPECT_EQ(hpcmem_free_seg(p, HPCMEM_SEG_INTERLEAVED), -EINVAL);
  std::string err = testing::internal::GetCapturedStderr();
  EXPECT_NE(err.find("belongs to the shared segment"), std::string::npos) << err;
  EXPECT_STREQ(p, "alive");
  EXPECT_EQ(hpcmem_free_seg(p, HPCMEM_SEG_SHARED), 0);
  void *q = malloc(10);
  testing::internal::CaptureStderr();
  EXPECT_EQ(hpcmem_free_seg(q, HPCMEM_SEG_INTERLEAVED), -EINVAL);
  err = testing::internal::GetCapturedStderr();
  EXPECT_NE(err.find("belongs to the private segment"), std::string::npos) << err;
  EXPECT_EQ(hpcmem_free_seg(q, HPCMEM_SEG_PRIVATE), 0);
}

TEST(hpcmem_free_seg, unknown_id_foreign_pointer_and_null) {
  void *p = hpcmem_malloc_seg(64, HPCMEM_SEG_INTERLEAVED);
  testing::internal::CaptureStderr();
  EXPECT_EQ(hpcmem_free_seg(p, 5), -EINVAL);
  int local = 0;
  EXPECT_EQ(hpcmem_free_seg(&local, HPCMEM_SEG_PRIVATE), -EINVAL);
  std::string err = testing::internal::GetCapturedStderr();
  EXPECT_NE(err.find("unknown segment id"), std::string::npos) << err;
  EXPECT_NE(err.find("not a block of any libhpcmem segment"), std::string::npos) << err;
  EXPECT_EQ(hpcmem_free_seg(nullptr, HPCMEM_SEG_SHARED), 0);
  EXPECT_EQ(hpcmem_free_seg(p, HPCMEM_SEG_INTERLEAVED), 0);
}

TEST(free, double_free_of_a_segment_block_is_reported) {
  // a forked child does not free into the shared segment (its records are
  // the parent's): the death test runs in a fresh process instead
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  for (int seg : {HPCMEM_SEG_INTERLEAVED, HPCMEM_SEG_SHARED}) {
    void *p = hpcmem_malloc_seg(5000, seg);
    ASSERT_NE(p, nullptr);
    free(p);
    EXPECT_DEATH(free(p), "double free|not the start of a live block") << seg;
  }
}

TEST(free, interior_pointer_of_a_segment_block_is_reported) {
  char *p = (char *)hpcmem_malloc_seg(5000, HPCMEM_SEG_INTERLEAVED);
  ASSERT_NE(p, nullptr);
  EXPECT_DEATH(free(p + 256), "not the start of a live block of the interleaved or shared segment");
  free(p);
}

TEST(hpcmem_seg_of, addresses_outside_libhpcmem) {
  int local = 0;
  static int global;
  EXPECT_EQ(hpcmem_seg_of(&local), -ENOENT);
  EXPECT_EQ(hpcmem_seg_of(&global), -ENOENT);
  EXPECT_EQ(hpcmem_seg_of(nullptr), -EINVAL);
  void *p = malloc(1 << 20);   // the private large tier
  EXPECT_EQ(hpcmem_seg_of(p), HPCMEM_SEG_PRIVATE);
  free(p);
}

TEST(hpcmem_seg_name, names_and_unknown) {
  EXPECT_STREQ(hpcmem_seg_name(HPCMEM_SEG_PRIVATE), "private");
  EXPECT_STREQ(hpcmem_seg_name(HPCMEM_SEG_INTERLEAVED), "interleaved");
  EXPECT_STREQ(hpcmem_seg_name(HPCMEM_SEG_SHARED), "shared");
  EXPECT_EQ(hpcmem_seg_name(3), nullptr);
  EXPECT_EQ(hpcmem_seg_name(-1), nullptr);
}

TEST(hpcmem_seg_default, follows_HPCMEM_DEFAULT_SEGMENT) {
  // this test program runs with the default setting (tests/segment/test_seg_env.sh
  // runs plain malloc with the others)
  if (getenv("HPCMEM_DEFAULT_SEGMENT")) GTEST_SKIP() << "HPCMEM_DEFAULT_SEGMENT is set";
  EXPECT_EQ(hpcmem_seg_default(), HPCMEM_SEG_PRIVATE);
  void *p = malloc(100);
  EXPECT_EQ(hpcmem_seg_of(p), HPCMEM_SEG_PRIVATE);
  free(p);
}

TEST(hpcmem_seg_info, describes_each_segment) {
  hpcmem_seg_info_t in;
  EXPECT_EQ(hpcmem_seg_info(HPCMEM_SEG_INTERLEAVED, &in), 0);
  EXPECT_EQ(in.seg, HPCMEM_SEG_INTERLEAVED);
  EXPECT_EQ(in.available, 1);
  EXPECT_NE(in.base, nullptr);
  EXPECT_GT(in.size, 0u);
  EXPECT_NE(in.nodes[0], 0);
  void *p = hpcmem_malloc_seg(10, HPCMEM_SEG_SHARED);
  EXPECT_EQ(hpcmem_seg_info(HPCMEM_SEG_SHARED, &in), 0);
  EXPECT_EQ(in.available, 1);
  EXPECT_EQ(in.process_local, 1);   // not an MPI job
  EXPECT_EQ(in.node_ranks, 1);
  EXPECT_EQ(in.node_rank, 0);
  EXPECT_TRUE((char *)p >= (char *)in.own_base && (char *)p < (char *)in.own_base + in.own_size);
  free(p);
  EXPECT_EQ(hpcmem_seg_info(HPCMEM_SEG_PRIVATE, &in), 0);
  EXPECT_EQ(in.available, 1);
  EXPECT_EQ(hpcmem_seg_info(4, &in), -EINVAL);
  EXPECT_EQ(hpcmem_seg_info(HPCMEM_SEG_SHARED, nullptr), -EINVAL);
}

// hpcmem_stats' mapped, retained and decayed bytes counted the private
// regions only: a program whose arrays live in a segment saw none of them.
TEST(hpcmem_stats, mapped_retained_and_decayed_include_the_segments) {
  if (getenv("HPCMEM_DECAY_MS")) GTEST_SKIP() << "HPCMEM_DECAY_MS is set";
  for (int seg : {HPCMEM_SEG_INTERLEAVED, HPCMEM_SEG_SHARED}) {
    hpcmem_stats_t s0, s1, s2, s3;
    ASSERT_EQ(hpcmem_stats(&s0), 0);
    const size_t n = 48 << 20;
    char *p = (char *)hpcmem_malloc_seg(n, seg);
    ASSERT_NE(p, nullptr) << seg;
    memset(p, 1, n);
    ASSERT_EQ(hpcmem_stats(&s1), 0);
    EXPECT_GE(s1.current_bytes, n) << seg;
    EXPECT_GE(s1.mapped_bytes, s1.current_bytes) << seg;   // the block's address space is counted
    free(p);                     // free and dirty: retained until it decays (1 s by default)
    ASSERT_EQ(hpcmem_stats(&s2), 0);
    EXPECT_GE(s2.retained_bytes, s0.retained_bytes + n / 2) << seg;
    EXPECT_EQ(malloc_trim(0), 1) << seg;   // gives it back now
    ASSERT_EQ(hpcmem_stats(&s3), 0);
    EXPECT_GE(s3.decayed_bytes, s2.decayed_bytes + n / 2) << seg;
    EXPECT_LE(s3.retained_bytes + n / 2, s2.retained_bytes) << seg;
  }
}

TEST(hpcmem_seg_stats, count_exactly_and_add_up_to_the_totals) {
  hpcmem_seg_stats_t before[3], after[3];
  for (int s : kSegs) ASSERT_EQ(hpcmem_seg_stats(s, &before[s]), 0);
  void *a = hpcmem_malloc_seg(3000, HPCMEM_SEG_INTERLEAVED);
  void *b = hpcmem_malloc_seg(1 << 20, HPCMEM_SEG_SHARED);
  void *c = hpcmem_malloc_seg(5 << 20, HPCMEM_SEG_SHARED);
  size_t ua = malloc_usable_size(a), ub = malloc_usable_size(b), uc = malloc_usable_size(c);
  for (int s : kSegs) ASSERT_EQ(hpcmem_seg_stats(s, &after[s]), 0);
  EXPECT_EQ(after[1].current_bytes - before[1].current_bytes, ua);
  EXPECT_EQ(after[1].alloc_count - before[1].alloc_count, 1u);
  EXPECT_EQ(after[2].current_bytes - before[2].current_bytes, ub + uc);
  EXPECT_EQ(after[2].alloc_count - before[2].alloc_count, 2u);
  EXPECT_GE(after[2].peak_bytes, after[2].current_bytes);
  hpcmem_stats_t all;
  ASSERT_EQ(hpcmem_stats(&all), 0);
  hpcmem_seg_stats_t now[3];
  for (int s : kSegs) ASSERT_EQ(hpcmem_seg_stats(s, &now[s]), 0);
  EXPECT_EQ(now[0].alloc_count + now[1].alloc_count + now[2].alloc_count, all.alloc_count);
  EXPECT_EQ(now[0].bytes_allocated + now[1].bytes_allocated + now[2].bytes_allocated, all.bytes_allocated);
  free(a); free(b); free(c);
  for (int s : kSegs) ASSERT_EQ(hpcmem_seg_stats(s, &after[s]), 0);
  EXPECT_EQ(after[1].current_bytes, before[1].current_bytes);
  EXPECT_EQ(after[2].current_bytes, before[2].current_bytes);
  EXPECT_EQ(after[2].free_count - before[2].free_count, 2u);
  EXPECT_GE(after[2].peak_bytes, ub + uc);
  EXPECT_EQ(hpcmem_seg_stats(7, &after[0]), -EINVAL);
  EXPECT_EQ(hpcmem_seg_stats(0, nullptr), -EINVAL);
}

TEST(hpcmem_seg_offset, round_trip_through_hpcmem_seg_pointer) {
  char *p = (char *)hpcmem_malloc_seg(4096, HPCMEM_SEG_SHARED);
  ASSERT_NE(p, nullptr);
  uint64_t off = ~0ull, off2 = 0;
  ASSERT_EQ(hpcmem_seg_offset(p, &off), 0);
  EXPECT_EQ(hpcmem_seg_pointer(off), p);
  ASSERT_EQ(hpcmem_seg_offset(p + 100, &off2), 0);   // interior addresses have offsets too
  EXPECT_EQ(off2, off + 100);
  void *q = malloc(10);
  EXPECT_EQ(hpcmem_seg_offset(q, &off), -EINVAL);
  EXPECT_EQ(hpcmem_seg_offset(p, nullptr), -EINVAL);
  free(q);
  free(p);
}

TEST(hpcmem_seg_pointer, offset_out_of_range_is_EINVAL) {
  void *p = hpcmem_malloc_seg(1, HPCMEM_SEG_SHARED);
  hpcmem_seg_info_t in;
  ASSERT_EQ(hpcmem_seg_info(HPCMEM_SEG_SHARED, &in), 0);
  errno = 0;
  EXPECT_EQ(hpcmem_seg_pointer(in.size), nullptr);
  EXPECT_EQ(errno, EINVAL);
  EXPECT_NE(hpcmem_seg_pointer(in.size - 1), nullptr);
  free(p);
}

TEST(interleaved_segment, pages_carry_the_interleave_policy) {
  size_t n = 8 << 20;
  char *p = (char *)hpcmem_malloc_seg(n, HPCMEM_SEG_INTERLEAVED);
  ASSERT_NE(p, nullptr);
  memset(p, 1, n);
  for (size_t off = 0; off < n; off += n / 4) {
    int mode = -1;
    unsigned long mask[1024 / (8 * sizeof(unsigned long))] = {0};
    ASSERT_EQ(get_mempolicy(&mode, mask, 1024, p + off, MPOL_F_ADDR), 0) << strerror(errno);
    EXPECT_EQ(mode, MPOL_INTERLEAVE) << off;
    EXPECT_NE(mask[0], 0ul);
  }
  // the private segment keeps the default (first-touch) policy
  char *q = (char *)malloc(n);
  memset(q, 1, n);
  int mode = -1;
  ASSERT_EQ(get_mempolicy(&mode, nullptr, 0, q, MPOL_F_ADDR), 0);
  EXPECT_EQ(mode, MPOL_DEFAULT);
  free(q);
  free(p);
}

namespace {
// How much of [lo, hi) /proc/self/smaps maps, and how much of that lies in
// mappings whose VmFlags carry "hg" (madvise(MADV_HUGEPAGE)).
struct HugeAdvice {
  size_t mapped = 0, advised = 0;
  std::string flags;  // VmFlags of the mappings, for the failure message
};

HugeAdvice huge_advice(uintptr_t lo, uintptr_t hi) {
  HugeAdvice a;
  FILE *f = fopen("/proc/self/smaps", "r");
  if (!f) return a;
  char line[512];
  size_t overlap = 0;
  while (fgets(line, sizeof line, f)) {
    unsigned long start, end;
    char perms[8];
    if (sscanf(line, "%lx-%lx %7s", &start, &end, perms) == 3) {
      uintptr_t s = start > lo ? start : lo, e = end < hi ? end : hi;
      overlap = s < e ? e - s : 0;
    } else if (overlap && strncmp(line, "VmFlags:", 8) == 0) {
      a.mapped += overlap;
      if (strstr(line, " hg ") || strstr(line, " hg\n")) a.advised += overlap;
      line[strcspn(line, "\n")] = 0;
      a.flags += std::string(line + 8) + ";";
      overlap = 0;
    }
  }
  fclose(f);
  return a;
}

// Exit status 0 when the interleaved segment's whole range is advised for
// huge pages (want_huge) or none of it is.
int interleaved_huge_status(bool want_huge) {
  hpcmem_seg_info_t in;
  if (hpcmem_seg_info(HPCMEM_SEG_INTERLEAVED, &in) != 0) return 2;
  HugeAdvice a = huge_advice((uintptr_t)in.base, (uintptr_t)in.base + in.size);
  if (a.mapped == in.size && a.advised == (want_huge ? in.size : 0)) return 0;
  fprintf(stderr, "range %zu bytes, mapped %zu, advised %zu, VmFlags:%s\n", in.size, a.mapped, a.advised,
          a.flags.c_str());
  return 1;
}
}  // namespace

// HPCMEM_THP (on by default) lets the interleaved segment ask for
// transparent huge pages on its whole range; HPCMEM_THP=0 keeps ordinary
// pages.  This process checks its own setting, a fresh one the other.
TEST(interleaved_segment, asks_for_huge_pages_when_HPCMEM_THP_allows) {
  char mode[128] = "";
  FILE *f = fopen("/sys/kernel/mm/transparent_hugepage/enabled", "r");
  if (!f) GTEST_SKIP() << "the kernel has no transparent huge pages (no /sys/kernel/mm/transparent_hugepage/enabled)";
  if (!fgets(mode, sizeof mode, f)) mode[0] = 0;
  fclose(f);
  if (strstr(mode, "[never]"))
    GTEST_SKIP() << "transparent huge pages are [never] on this machine (/sys/kernel/mm/transparent_hugepage/enabled: "
                 << mode << "): madvise cannot give any";
  char thp[8];
  ASSERT_EQ(hpcmem_option("THP", thp, sizeof thp), 0);
  bool on = strcmp(thp, "0") != 0;
  EXPECT_EQ(interleaved_huge_status(on), 0) << "HPCMEM_THP=" << thp;

  // Settings are read once at start-up: the other one in a fresh run of this
  // test, started with HPCMEM_THP flipped.  The statement runs only there,
  // where `started` is the value it was started with and `thp` its setting.
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  const char *env = getenv("HPCMEM_THP");
  std::string started = env ? env : "";
  setenv("HPCMEM_THP", on ? "0" : "1", 1);
  EXPECT_EXIT(exit(started == thp ? interleaved_huge_status(on) : 3), testing::ExitedWithCode(0), "")
      << "run with HPCMEM_THP=" << (on ? "0" : "1");
  if (env) setenv("HPCMEM_THP", started.c_str(), 1);
  else unsetenv("HPCMEM_THP");
}

TEST(shared_segment, a_forked_child_reads_and_writes_but_does_not_allocate) {
  int *shared = (int *)hpcmem_malloc_seg(sizeof(int) * 4, HPCMEM_SEG_SHARED);
  ASSERT_NE(shared, nullptr);
  shared[0] = 41;
  pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    int ok = shared[0] == 41;
    shared[1] = 42;   // the parent sees it: the mapping is shared
    errno = 0;
    void *p = hpcmem_malloc_seg(10, HPCMEM_SEG_SHARED);
    ok = ok && p == nullptr && errno == ENODEV;
    void *q = malloc(100);   // the private segment works as usual
    ok = ok && q != nullptr;
    free(q);
    _exit(ok ? 0 : 1);
  }
  int status = 0;
  ASSERT_EQ(waitpid(pid, &status, 0), pid);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  EXPECT_EQ(shared[1], 42);
  free(shared);
  void *again = hpcmem_malloc_seg(10, HPCMEM_SEG_SHARED);   // the parent still allocates
  EXPECT_NE(again, nullptr);
  free(again);
}

TEST(segments, threads_allocate_and_free_concurrently) {
  const int kThreads = 4, kRounds = 2000;
  std::vector<std::thread> th;
  for (int t = 0; t < kThreads; t++)
    th.emplace_back([t] {
      void *keep[16] = {nullptr};
      for (int i = 0; i < kRounds; i++) {
        int seg = kSegs[(i + t) % 3];
        int k = (i * 7 + t) % 16;
        free(keep[k]);
        size_t n = 1 + (size_t)((i * 2654435761u) % 300000);
        keep[k] = hpcmem_malloc_seg(n, seg);
        ASSERT_NE(keep[k], nullptr);
        memset(keep[k], t, n < 512 ? n : 512);
      }
      for (void *p : keep) free(p);
    });
  for (auto &x : th) x.join();
  EXPECT_EQ(hpcmem_check(), 0);
}
