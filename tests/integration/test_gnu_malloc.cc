// The GNU extensions of the malloc family: mallinfo, mallinfo2, malloc_trim,
// malloc_stats, malloc_info, mallopt.  Linked with libhpcmem: a glibc
// function answering instead would report glibc's empty arena.
#include <gtest/gtest.h>
#include <malloc.h>
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <cerrno>
#include <string>
#include <sys/wait.h>
#include <unistd.h>
#include <vector>
#include "hpcmem.h"
#include "hpcmem_seg.h"

namespace {
void *volatile sink;

size_t rss_bytes() {
  long pages = 0, rss = 0;
  FILE *f = fopen("/proc/self/statm", "r");
  EXPECT_NE(f, nullptr);
  if (!f) return 0;
  EXPECT_EQ(fscanf(f, "%ld %ld", &pages, &rss), 2);
  fclose(f);
  return (size_t)rss * (size_t)sysconf(_SC_PAGESIZE);
}

std::string info_xml() {
  char *buf = nullptr;
  size_t len = 0;
  FILE *f = open_memstream(&buf, &len);
  EXPECT_NE(f, nullptr);
  EXPECT_EQ(malloc_info(0, f), 0);
  fclose(f);
  std::string s(buf, len);
  free(buf);
  return s;
}

size_t count_of(const std::string &s, const std::string &what) {
  size_t n = 0;
  for (size_t at = s.find(what); at != std::string::npos; at = s.find(what, at + 1)) n++;
  return n;
}

// The figures below assume plain malloc in the private segment and no
// trace buffers; a run of the suite with other settings skips them.
const char *unusual_settings() {
  const char *seg = getenv("HPCMEM_DEFAULT_SEGMENT"), *trace = getenv("HPCMEM_TRACE");
  if (seg && *seg && strcmp(seg, "private") != 0) return "HPCMEM_DEFAULT_SEGMENT is set";
  if (trace && *trace && strcmp(trace, "0") != 0) return "HPCMEM_TRACE is set";
  // the sizes and counts below assume the tiers' default geometry
  for (const char *v : {"HPCMEM_BLOCK_SIZE", "HPCMEM_LARGE_THRESHOLD", "HPCMEM_LARGE_ALIGN", "HPCMEM_DECAY_MS"})
    if (const char *x = getenv(v); x && *x) return v;
  return nullptr;
}

// the number after `key` in `text`, after position `from`
size_t number_after(const std::string &text, const std::string &key, size_t from = 0) {
  size_t at = text.find(key, from);
  EXPECT_NE(at, std::string::npos) << key;
  if (at == std::string::npos) return 0;
  return strtoull(text.c_str() + at + key.size(), nullptr, 10);
}
}  // namespace

TEST(mallinfo2, counts_the_live_blocks_of_both_tiers) {
  if (const char *why = unusual_settings()) GTEST_SKIP() << why;
  struct mallinfo2 a = mallinfo2();
  EXPECT_EQ(a.arena, a.uordblks + a.fordblks);
  std::vector<void *> small;
  for (int i = 0; i < 1000; i++) small.push_back(malloc(300));
  void *big = malloc(8 << 20);
  sink = big;
  struct mallinfo2 b = mallinfo2();
  EXPECT_EQ(b.hblks, a.hblks + 1);
  EXPECT_GE(b.hblkhd, a.hblkhd + (8 << 20));
  EXPECT_LE(b.hblkhd, a.hblkhd + (8 << 20) + 4096);
  // 1,000 blocks of 300 bytes (counted at their usable size) and the vector
  EXPECT_GE(b.uordblks, a.uordblks + 300000);
  EXPECT_LE(b.uordblks, a.uordblks + 1000 * malloc_usable_size(small[0]) + 16384);
  EXPECT_EQ(b.arena, b.uordblks + b.fordblks);
  EXPECT_EQ(b.smblks, 0u);
  EXPECT_EQ(b.usmblks, 0u);
  EXPECT_EQ(b.fsmblks, 0u);
  free(big);
  for (void *p : small) free(p);
  struct mallinfo2 c = mallinfo2();
  EXPECT_EQ(c.hblks, a.hblks);
  EXPECT_EQ(c.hblkhd, a.hblkhd);
  EXPECT_LE(c.uordblks, a.uordblks + 16384);       // the vector's storage is gone too
  EXPECT_EQ(c.arena, c.uordblks + c.fordblks);
}

#pragma GCC diagnostic ignored "-Wdeprecated-declarations"   // mallinfo, tested as such
TEST(mallinfo, matches_mallinfo2_and_saturates_at_int_max) {
  struct mallinfo2 m2 = mallinfo2();
  struct mallinfo m = mallinfo();
  EXPECT_EQ((size_t)m.hblks, m2.hblks);
  EXPECT_EQ((size_t)m.hblkhd, m2.hblkhd);
  EXPECT_EQ((size_t)m.arena, m2.arena);
  // 3 GiB never touched: address space only, no memory
  void *huge = malloc((size_t)3 << 30);
  ASSERT_NE(huge, nullptr);
  sink = huge;
  m = mallinfo();
  m2 = mallinfo2();
  EXPECT_GE(m2.hblkhd, (size_t)3 << 30);
  EXPECT_EQ(m.hblkhd, INT_MAX);
  EXPECT_GT(m.hblks, 0);
  free(huge);
  EXPECT_LT(mallinfo().hblkhd, INT_MAX);
}

TEST(malloc_trim, gives_back_empty_spans_and_free_large_pages) {
  if (const char *why = unusual_settings()) GTEST_SKIP() << why;
  EXPECT_GE(malloc_trim(0), 0);
  size_t base = rss_bytes();
  std::vector<char *> small;
  for (int i = 0; i < 40000; i++) {
    char *p = (char *)malloc(256);
    memset(p, 1, 256);
    small.push_back(p);
  }
  char *big = (char *)malloc(32 << 20);
  memset(big, 2, 32 << 20);
  size_t full = rss_bytes();
  ASSERT_GE(full, base + (40 << 20));
  for (char *p : small) free(p);
  free(big);
  std::vector<char *>().swap(small);
  EXPECT_GT(mallinfo2().keepcost, 0u);
  EXPECT_EQ(malloc_trim(0), 1);
  size_t after = rss_bytes();
  // all of the 42 MiB but the management pages the spans needed (~350 KiB in a debug build)
  EXPECT_LE(after, base + (512 << 10)) << "before " << base << ", full " << full;
  EXPECT_EQ(mallinfo2().keepcost, 0u);
  EXPECT_EQ(hpcmem_check(), 0);
}

TEST(malloc_trim, returns_0_when_nothing_is_left_to_give_back) {
  malloc_trim(0);
  EXPECT_EQ(malloc_trim(0), 0);
  EXPECT_EQ(malloc_trim(1 << 20), 0);   // pad: no heap top to keep room at
}

// A block in the calling thread's cache keeps its span in use: the trim
// gives it back first.  (Objects of 90 KB: one per span chunk's worth of
// pages, nothing else here uses the class.)
TEST(malloc_trim, gives_back_what_the_calling_threads_cache_holds) {
  if (const char *why = unusual_settings()) GTEST_SKIP() << why;
  malloc_trim(0);
  size_t base = rss_bytes();
  char *p = (char *)malloc(90000);
  memset(p, 3, 90000);
  free(p);                                       // into this thread's cache
  size_t cached = rss_bytes();
  ASSERT_GE(cached, base + 80000);
  EXPECT_EQ(malloc_trim(0), 1);
  EXPECT_LE(rss_bytes(), cached - 80000);
}

// A forked child's records of the shared segment are a copy; the memory is
// the parent's.  The child's trim must leave it alone: the parent has
// allocated the space again by then.
TEST(malloc_trim, in_a_forked_child_leaves_the_parents_shared_segment_alone) {
  const size_t n = 4 << 20;
  char *a = (char *)hpcmem_malloc_seg(n, HPCMEM_SEG_SHARED);
  if (!a) GTEST_SKIP() << "no shared segment here";
  memset(a, 1, n);
  free(a);                                       // free in the records the child copies
  int go[2], done[2];
  ASSERT_EQ(pipe(go), 0);
  ASSERT_EQ(pipe(done), 0);
  pid_t pid = fork();
  if (pid == 0) {
    char c;
    if (read(go[0], &c, 1) != 1) _exit(2);
    int r = malloc_trim(0);
    (void)!write(done[1], &r, sizeof r);
    _exit(0);
  }
  char *b = (char *)hpcmem_malloc_seg(n, HPCMEM_SEG_SHARED);   // the same space, live again
  ASSERT_NE(b, nullptr);
  memset(b, 7, n);
  ASSERT_EQ(write(go[1], "x", 1), 1);
  int r = -1;
  ASSERT_EQ(read(done[0], &r, sizeof r), (ssize_t)sizeof r);
  int status = 0;
  ASSERT_EQ(waitpid(pid, &status, 0), pid);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  size_t changed = 0;
  for (size_t i = 0; i < n; i++) changed += b[i] != 7;
  EXPECT_EQ(changed, 0u) << "bytes of the parent's block the child's trim (" << r << ") changed";
  free(b);
  for (int fd : {go[0], go[1], done[0], done[1]}) close(fd);
}

TEST(malloc_trim, keeps_live_blocks_and_the_heap_usable) {
  std::vector<std::pair<unsigned char *, size_t>> blocks;
  for (int i = 0; i < 6000; i++) {
    size_t n = (size_t)(i * 7919 % 40000) + 1;
    if (i % 500 == 0) n = (size_t)(i + 1) * 4096;   // large blocks among them
    unsigned char *p = (unsigned char *)malloc(n);
    ASSERT_NE(p, nullptr);
    memset(p, (unsigned char)i, n);
    blocks.emplace_back(p, n);
  }
  for (size_t i = 0; i < blocks.size(); i += 2) free(blocks[i].first);
  malloc_trim(0);
  EXPECT_EQ(hpcmem_check(), 0);
  for (size_t i = 1; i < blocks.size(); i += 2) {
    unsigned char *p = blocks[i].first;
    size_t n = blocks[i].second;
    ASSERT_EQ(p[0], (unsigned char)i) << n;
    ASSERT_EQ(p[n / 2], (unsigned char)i) << n;
    ASSERT_EQ(p[n - 1], (unsigned char)i) << n;
  }
  for (size_t i = 0; i < blocks.size(); i += 2) {   // the trimmed memory serves again
    blocks[i].first = (unsigned char *)malloc(blocks[i].second);
    ASSERT_NE(blocks[i].first, nullptr);
    memset(blocks[i].first, 0x5a, blocks[i].second);
  }
  EXPECT_EQ(hpcmem_check(), 0);
  for (auto &b : blocks) free(b.first);
  EXPECT_EQ(hpcmem_check(), 0);
}

TEST(malloc_stats, prints_system_and_in_use_bytes_per_tier_to_stderr) {
  char *freed = (char *)malloc(32 << 20);        // free but not given back yet: the large tier's
  memset(freed, 1, 32 << 20);
  free(freed);
  void *big = malloc(4 << 20);
  sink = big;
  testing::internal::CaptureStderr();
  malloc_stats();
  std::string out = testing::internal::GetCapturedStderr();
  free(big);
  size_t small = out.find("libhpcmem small tier"), large = out.find("large-block tier"), total = out.find("Total:");
  ASSERT_NE(small, std::string::npos) << out;
  ASSERT_NE(large, std::string::npos) << out;
  ASSERT_NE(total, std::string::npos) << out;
  const std::string sys = "system bytes     =", use = "in use bytes     =";
  size_t small_sys = number_after(out, sys, small), large_sys = number_after(out, sys, large);
  EXPECT_EQ(number_after(out, sys, total), small_sys + large_sys) << out;
  EXPECT_LT(small_sys, (size_t)32 << 20) << out;   // the freed block is the large tier's, counted once
  EXPECT_GE(large_sys, (size_t)36 << 20) << out;
  EXPECT_GE(number_after(out, use, large), (size_t)4 << 20) << out;
  EXPECT_EQ(number_after(out, use, total), number_after(out, use, small) + number_after(out, use, large)) << out;
  EXPECT_GE(number_after(out, "large blocks     ="), 1u) << out;
  EXPECT_NE(out.find("current_bytes"), std::string::npos) << out;   // then every statistic
}

TEST(malloc_info, writes_a_heap_element_per_heap_with_free_objects_by_size) {
  if (const char *why = unusual_settings()) GTEST_SKIP() << why;   // small objects in a segment are no span's
  // a freed object in every tenth slot stays on its span's free list (the
  // bins overflow into the spans; the live neighbours keep the spans)
  std::vector<void *> v;
  for (int i = 0; i < 20000; i++) v.push_back(malloc(200));
  for (size_t i = 0; i < v.size(); i++)
    if (i % 10) { free(v[i]); v[i] = nullptr; }
  std::string xml = info_xml();
  for (void *p : v) free(p);
  EXPECT_EQ(xml.rfind("<malloc version=\"1\" allocator=\"libhpcmem\">\n", 0), 0u) << xml;
  EXPECT_EQ(xml.substr(xml.size() - 10), "</malloc>\n") << xml;
  EXPECT_GE(count_of(xml, "kind=\"group\""), 1u);
  EXPECT_EQ(count_of(xml, "kind=\"large\""), 1u);
  EXPECT_EQ(count_of(xml, "<heap "), count_of(xml, "</heap>"));
  size_t at = xml.find("to=\"208\"");    // the class of 200 bytes
  ASSERT_NE(at, std::string::npos) << xml;
  EXPECT_GE(number_after(xml, "count=\"", at), 10000u) << xml;
  // glibc's totals, then libhpcmem's; what is mapped, counted once
  EXPECT_NE(xml.find("<total type=\"fast\" count=\"0\" size=\"0\"/>"), std::string::npos) << xml;
  EXPECT_GE(number_after(xml, "<total type=\"rest\" count=\""), 10000u) << xml;
  EXPECT_NE(xml.find("<total type=\"mmap\" count=\""), std::string::npos) << xml;
  size_t end = xml.rfind("</heap>");
  EXPECT_EQ(number_after(xml, "<system type=\"current\" size=\"", end), number_after(xml, "<aspace type=\"total\" size=\"", end))
      << xml;
}

TEST(malloc_info, rejects_options_and_a_missing_stream) {
  FILE *f = fopen("/dev/null", "w");
  ASSERT_NE(f, nullptr);
  errno = 0;
  EXPECT_EQ(malloc_info(1, f), -1);
  EXPECT_EQ(errno, EINVAL);
  fclose(f);
  errno = 0;
  EXPECT_EQ(malloc_info(0, nullptr), -1);
  EXPECT_EQ(errno, EINVAL);
}

// As glibc 2.36 (Debian 12's), whose answer programs check: 1 for every
// parameter it names, whatever the value, but M_MXFAST above 160.
TEST(mallopt, answers_as_glibc_2_36_for_its_parameters) {
  EXPECT_EQ(mallopt(M_MXFAST, 64), 1);
  EXPECT_EQ(mallopt(M_MXFAST, 160), 1);
  EXPECT_EQ(mallopt(M_MXFAST, 161), 0);
  EXPECT_EQ(mallopt(M_MXFAST, -1), 0);
  for (int param : {M_NLBLKS, M_GRAIN, M_KEEP, M_TRIM_THRESHOLD, M_TOP_PAD, M_MMAP_THRESHOLD, M_MMAP_MAX,
                    M_CHECK_ACTION, M_PERTURB, M_ARENA_TEST, M_ARENA_MAX})
    for (int value : {INT_MIN, -1, 0, 1, 4096, (32 << 20) + 1, INT_MAX})
      EXPECT_EQ(mallopt(param, value), 1) << "parameter " << param << ", value " << value;
  void *p = malloc(1 << 20);            // and malloc goes on as before
  ASSERT_NE(p, nullptr);
  memset(p, 1, 1 << 20);
  free(p);
}

TEST(mallopt, refuses_a_parameter_glibc_does_not_name) {
  EXPECT_EQ(mallopt(12345, 1), 0);
  EXPECT_EQ(mallopt(-100, 1), 0);
  EXPECT_EQ(mallopt(5, 1), 0);
}
