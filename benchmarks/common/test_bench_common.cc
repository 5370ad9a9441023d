// The benchmarks' shared helpers: parsing, cache size, counters, and
// libhpcmem's API found at run time (this test is linked with libhpcmem, so
// libhpcmem is its malloc; the other side, another malloc, is checked by the
// STREAM and miniFE scripts under glibc).
#include <gtest/gtest.h>

#include <papi.h>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <string>

#include "bench_hpcmem.h"
#include "bench_papi.h"
#include "bench_util.h"
#include "hpcmem.h"
#include "hpcmem_sde.h"

namespace {

TEST(bench_parse_size, AcceptsBinarySuffixes) {
  size_t v = 0;
  EXPECT_EQ(bench_parse_size("4096", &v), 0);
  EXPECT_EQ(v, 4096u);
  EXPECT_EQ(bench_parse_size("64k", &v), 0);
  EXPECT_EQ(v, 65536u);
  EXPECT_EQ(bench_parse_size("32M", &v), 0);
  EXPECT_EQ(v, 32u << 20);
  EXPECT_EQ(bench_parse_size("2GiB", &v), 0);
  EXPECT_EQ(v, (size_t)2 << 30);
}

TEST(bench_parse_size, RefusesJunk) {
  size_t v = 7;
  for (const char *s : {"", "M", "-1", "12X", "1.5G", "4096 ", "99999999999999999999", "17179869184G"})
    EXPECT_EQ(bench_parse_size(s, &v), -EINVAL) << s;
  EXPECT_EQ(bench_parse_size(nullptr, &v), -EINVAL);
  EXPECT_EQ(v, 7u);
}

TEST(bench_parse_int_list, ReadsCommaLists) {
  int v[8];
  ASSERT_EQ(bench_parse_int_list("1,2,4,8,16", v, 8), 5);
  EXPECT_EQ(v[0], 1);
  EXPECT_EQ(v[4], 16);
  for (const char *s : {"", ",", "1,", ",1", "1,,2", "0", "1,-2", "x", "1,2,3,4,5,6,7,8,9"})
    EXPECT_EQ(bench_parse_int_list(s, v, 8), -EINVAL) << s;
}

TEST(bench_parse_pos_int, RefusesZeroNegativeAndOverflow) {
  int v = 0;
  EXPECT_EQ(bench_parse_pos_int("12", &v), 0);
  EXPECT_EQ(v, 12);
  for (const char *s : {"0", "-3", "3x", "", "99999999999"})
    EXPECT_EQ(bench_parse_pos_int(s, &v), -EINVAL) << s;
}

TEST(bench_llc_bytes, IsAPlausibleCacheSize) {
  size_t llc = bench_llc_bytes();
  EXPECT_GE(llc, (size_t)256 << 10);
  EXPECT_LE(llc, (size_t)4 << 30);
}

TEST(bench_counters_new, StatusSaysWhatIsCounted) {
  bench_counters_t *c = bench_counters_new(nullptr);
  ASSERT_NE(c, nullptr);
  std::string st = bench_counters_status(c);
  int cidx = PAPI_get_component_index("perf_event");
  const PAPI_component_info_t *ci = cidx >= 0 ? PAPI_get_component_info(cidx) : nullptr;
  if (ci == nullptr || ci->disabled) {
    // one line with the reason, and the benchmark carries on without counters
    EXPECT_EQ(st.rfind("PAPI: no hardware counters (", 0), 0u) << st;
    if (ci != nullptr) {
      EXPECT_NE(st.find(ci->disabled_reason), std::string::npos) << st;
    }
    EXPECT_EQ(bench_counters_n(c), 0);
  } else {
    // The component may be enabled on a machine whose PMU offers none of the
    // default events (a VM without a virtual PMU): then the status names them
    // and nothing is counted; otherwise the counted events are listed.
    const char *events[] = {"PAPI_TOT_CYC", "PAPI_TOT_INS", "PAPI_L1_DCM",
                            "PAPI_L2_DCM", "PAPI_L3_TCM", "PAPI_TLB_DM"};
    int countable = 0;
    for (const char *e : events) {
      int code = 0;
      if (PAPI_event_name_to_code(e, &code) == PAPI_OK && PAPI_query_event(code) == PAPI_OK)
        countable++;
    }
    if (countable == 0) {
      EXPECT_EQ(st.rfind("PAPI: none of the events can be counted (", 0), 0u) << st;
      for (const char *e : events)
        EXPECT_NE(st.find(e), std::string::npos) << e << " missing from: " << st;
      EXPECT_EQ(bench_counters_n(c), 0);
    } else {
      EXPECT_EQ(st.rfind("PAPI: counting ", 0), 0u) << st;
      EXPECT_GT(bench_counters_n(c), 0);
    }
  }
  bench_counters_free(c);
}

TEST(bench_counters_new, UnknownEventsAreDroppedAndNamed) {
  bench_counters_t *c = bench_counters_new("NO_SUCH_EVENT_XYZ");
  ASSERT_NE(c, nullptr);
  EXPECT_EQ(bench_counters_n(c), 0);
  EXPECT_NE(std::string(bench_counters_status(c)).find("NO_SUCH_EVENT_XYZ"), std::string::npos);
  // a region without PAPI events still has its software figures
  ASSERT_EQ(bench_counters_start(c, 2), 0);
  void *volatile p = std::malloc(8 << 20);
  std::memset(p, 1, 8 << 20);
  std::free(p);
  ASSERT_EQ(bench_counters_stop(c), 0);
  EXPECT_GT(bench_counters_seconds(c), 0.0);
  EXPECT_GE(bench_counters_rusage(c)->minflt, 1);
  bench_counters_free(c);
}

// A process-wide software-defined event read from per-thread event sets
// must be counted once, not once per thread.
TEST(bench_counters_start, ProcessWideEventCountedOnceOverThreads) {
  ASSERT_EQ(hpcmem_sde_init(), 0);
  bench_counters_t *c = bench_counters_new("sde:::libhpcmem::alloc_count");
  ASSERT_NE(c, nullptr);
  ASSERT_EQ(bench_counters_n(c), 1) << bench_counters_status(c);
  hpcmem_stats_t s0, s1;
  ASSERT_EQ(bench_counters_start(c, 2), 0);
  ASSERT_EQ(hpcmem_stats(&s0), 0);
#pragma omp parallel num_threads(2)
  for (int i = 0; i < 100; i++) {
    void *volatile p = std::malloc(64);
    std::free(p);
  }
  ASSERT_EQ(hpcmem_stats(&s1), 0);
  ASSERT_EQ(bench_counters_stop(c), 0);
  long long v = bench_counters_value(c, 0);
  EXPECT_GE(v, (long long)(s1.alloc_count - s0.alloc_count));
  EXPECT_GE(s1.alloc_count - s0.alloc_count, 100u);
  // summed over the two threads' event sets it would be twice the region's count
  EXPECT_LT(v, 3 * (long long)(s1.alloc_count - s0.alloc_count) / 2);
  char buf[512];
  EXPECT_NE(std::string(bench_counters_format(c, buf, sizeof buf)).find("sde:::libhpcmem::alloc_count="),
            std::string::npos);
  bench_counters_free(c);
}

TEST(bench_malloc_provider, NamesTheLibraryOfMalloc) {
  EXPECT_NE(std::string(bench_malloc_provider()).find("libhpcmem"), std::string::npos)
      << bench_malloc_provider();
}

TEST(bench_hpcmem_get, FindsBothApisWhenLibhpcmemIsTheMalloc) {
  const char *why = "untouched";
  const bench_hpcmem_t *seg = bench_hpcmem_get(BENCH_HPCMEM_SEGMENTS, &why);
  ASSERT_NE(seg, nullptr) << why;
  const bench_hpcmem_t *place = bench_hpcmem_get(BENCH_HPCMEM_PLACEMENT, &why);
  ASSERT_NE(place, nullptr) << why;
  EXPECT_STREQ(why, "untouched");
  // the pointers are libhpcmem's own functions
  void *p = seg->malloc_seg(1 << 20, HPCMEM_SEG_INTERLEAVED);
  ASSERT_NE(p, nullptr);
  EXPECT_EQ(seg->seg_of(p), hpcmem_seg_of(p));
  EXPECT_EQ(seg->seg_of(p), HPCMEM_SEG_INTERLEAVED);
  EXPECT_STREQ(seg->seg_name(HPCMEM_SEG_SHARED), "shared");
  EXPECT_EQ(seg->free_seg(p, HPCMEM_SEG_INTERLEAVED), 0);
}

TEST(bench_hpcmem_get, UnknownApiIsRefusedWithAReason) {
  const char *why = nullptr;
  EXPECT_EQ(bench_hpcmem_get(0, &why), nullptr);
  ASSERT_NE(why, nullptr);
  EXPECT_NE(std::string(why).find("unknown"), std::string::npos);
  EXPECT_EQ(bench_hpcmem_get(BENCH_HPCMEM_SEGMENTS | BENCH_HPCMEM_PLACEMENT, nullptr), nullptr);
}

TEST(bench_place_describe, PendingUntilCommitThenBound) {
  const bench_hpcmem_t *h = bench_hpcmem_get(BENCH_HPCMEM_PLACEMENT, nullptr);
  ASSERT_NE(h, nullptr);
  hpcmem_place_attr_t a;
  ASSERT_EQ(h->place_attr_init(&a), 0);
  ASSERT_EQ(h->place_attr_add(&a, HPCMEM_CLASS_DRAM, HPCMEM_INDEX_ALL), 0);
  a.mapping = HPCMEM_MAP_ON_COMMIT;
  const size_t bytes = 256 << 10;
  void *p = h->place_alloc(bytes, &a);
  ASSERT_NE(p, nullptr);
  char line[256];
  EXPECT_EQ(bench_place_describe(h, p, bytes, "x", line, sizeof line), 0);
  EXPECT_NE(std::string(line).find("(pending)"), std::string::npos) << line;
  ASSERT_EQ(h->commit(HPCMEM_COMMIT_EPOCH), 0);
  EXPECT_EQ(bench_place_describe(h, p, bytes, "x", line, sizeof line), 1);
  EXPECT_STREQ(line, "x: DRAM 256.00 KiB (bound)");
  // a range that is no placed allocation
  char stack[64];
  EXPECT_EQ(bench_place_describe(h, stack, sizeof stack, "y", line, sizeof line), 0);
  EXPECT_NE(std::string(line).find("hpcmem_where failed"), std::string::npos) << line;
  // a short buffer is cut, not overrun
  char tiny[8];
  memset(tiny, 'Z', sizeof tiny);
  bench_place_describe(h, p, bytes, "x", tiny, 6);
  EXPECT_EQ(strlen(tiny), 5u);
  EXPECT_EQ(tiny[7], 'Z');
  EXPECT_EQ(h->place_free(p), 0);
}

}  // namespace
