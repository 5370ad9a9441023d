// hpcmem_sde_init: libhpcmem's statistics read back through PAPI's sde component.
#include <gtest/gtest.h>

#include <papi.h>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <string>

#include "hpcmem.h"
#include "hpcmem_sde.h"

namespace {

class PapiEnv : public ::testing::Environment {
 public:
  void SetUp() override {
    // the library registers before PAPI starts, as a program linking it would
    sde_rc = hpcmem_sde_init();
    papi_rc = PAPI_library_init(PAPI_VER_CURRENT);
  }
  static int sde_rc, papi_rc;
};
int PapiEnv::sde_rc, PapiEnv::papi_rc;

#define REQUIRE_SDE()                                                          \
  do {                                                                         \
    ASSERT_EQ(PapiEnv::papi_rc, PAPI_VER_CURRENT);                             \
    ASSERT_EQ(PapiEnv::sde_rc, 0);                                             \
  } while (0)

std::string event(const char *field) {
  return std::string("sde:::" HPCMEM_SDE_LIBRARY "::") + field;
}

// PAPI accepts any sde::: name (a library may register it later), so
// "registered" means: listed by the sde component, with its description.
bool registered(const std::string &name, std::string *descr = nullptr) {
  int cidx = PAPI_get_component_index("sde");
  int code = PAPI_NATIVE_MASK;
  if (cidx < 0 || PAPI_enum_cmp_event(&code, PAPI_ENUM_FIRST, cidx) != PAPI_OK)
    return false;
  do {
    PAPI_event_info_t info;
    if (PAPI_get_event_info(code, &info) == PAPI_OK && name == info.symbol) {
      if (descr != nullptr)
        *descr = info.long_descr;
      return true;
    }
  } while (PAPI_enum_cmp_event(&code, PAPI_ENUM_EVENTS, cidx) == PAPI_OK);
  return false;
}

TEST(hpcmem_sde_init, UnknownFieldIsNotListed) {
  REQUIRE_SDE();
  EXPECT_TRUE(registered(event("current_bytes")));
  EXPECT_FALSE(registered(event("no_such_field")));
}

TEST(hpcmem_sde_init, RegistersEveryStatisticsField) {
  REQUIRE_SDE();
  std::string descr;
#define CHECK_FIELD_(name, kind, help)                 \
  EXPECT_TRUE(registered(event(#name), &descr)) << #name; \
  EXPECT_EQ(descr, help) << #name;
  HPCMEM_STATS_FIELDS(CHECK_FIELD_)
#undef CHECK_FIELD_
}

TEST(hpcmem_sde_init, SecondCallIsHarmless) {
  REQUIRE_SDE();
  EXPECT_EQ(hpcmem_sde_init(), 0);
  EXPECT_TRUE(registered(event("peak_bytes")));
}

TEST(hpcmem_sde_init, CurrentBytesReadsBackThroughPapi) {
  REQUIRE_SDE();
  int es = PAPI_NULL;
  ASSERT_EQ(PAPI_create_eventset(&es), PAPI_OK);
  ASSERT_EQ(PAPI_add_named_event(es, event("current_bytes").c_str()), PAPI_OK);
  ASSERT_EQ(PAPI_add_named_event(es, event("alloc_count").c_str()), PAPI_OK);
  ASSERT_EQ(PAPI_start(es), PAPI_OK);

  long long before[2], after[2];
  hpcmem_stats_t s0, s1;
  ASSERT_EQ(PAPI_read(es, before), PAPI_OK);
  ASSERT_EQ(hpcmem_stats(&s0), 0);
  // nothing allocates between the two reads: they must agree exactly
  EXPECT_EQ((uint64_t)before[0], s0.current_bytes);

  const size_t big = 8u << 20;
  char *p = static_cast<char *>(std::malloc(big));
  ASSERT_NE(p, nullptr);
  std::memset(p, 1, big);
  ASSERT_EQ(PAPI_read(es, after), PAPI_OK);
  ASSERT_EQ(hpcmem_stats(&s1), 0);
  EXPECT_EQ((uint64_t)after[0], s1.current_bytes);
  // alloc_count is a delta counter: it counts from PAPI_start
  EXPECT_EQ((uint64_t)after[1], s1.alloc_count - (s0.alloc_count - (uint64_t)before[1]));
  // the test links libhpcmem, so malloc is libhpcmem's: the block shows up
  EXPECT_GE(after[0] - before[0], (long long)big);
  EXPECT_GE(after[1] - before[1], 1);
  std::free(p);
  long long fin[2];
  ASSERT_EQ(PAPI_stop(es, fin), PAPI_OK);
  PAPI_cleanup_eventset(es);
  PAPI_destroy_eventset(&es);
}

}  // namespace

int main(int argc, char **argv) {
  ::testing::InitGoogleTest(&argc, argv);
  ::testing::AddGlobalTestEnvironment(new PapiEnv);
  return RUN_ALL_TESTS();
}
