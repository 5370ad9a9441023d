// hpcmem_option, hpcmem_options_print (public API only).  The process is
// started with a few HPCMEM_* variables set (see main below).
#include <gtest/gtest.h>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <string>
#include "hpcmem.h"

TEST(hpcmem_option, reads_default_and_environment) {
  char buf[64];
  ASSERT_EQ(hpcmem_option("LARGE_THRESHOLD", buf, sizeof buf), 0);
  EXPECT_STREQ(buf, "131072");
  ASSERT_EQ(hpcmem_option("HPCMEM_ON_ERROR", buf, sizeof buf), 0);
  EXPECT_STREQ(buf, getenv("HPCMEM_ON_ERROR") ? "warn" : "abort");
}

TEST(hpcmem_option, bad_arguments) {
  char buf[4];
  EXPECT_EQ(hpcmem_option("NO_SUCH_OPTION", buf, sizeof buf), -ENOENT);
  EXPECT_EQ(hpcmem_option(nullptr, buf, sizeof buf), -EINVAL);
  EXPECT_EQ(hpcmem_option("HEAPS", nullptr, 4), -EINVAL);
  EXPECT_EQ(hpcmem_option("HEAPS", buf, 0), -EINVAL);
  EXPECT_EQ(hpcmem_option("LARGE_THRESHOLD", buf, sizeof buf), -ERANGE);
}

TEST(hpcmem_options_print, markdown_lists_every_variable) {
  FILE *f = tmpfile();
  ASSERT_NE(f, nullptr);
  ASSERT_EQ(hpcmem_options_print(f, 1), 0);
  rewind(f);
  std::string text;
  char line[1024];
  while (fgets(line, sizeof line, f)) text += line;
  fclose(f);
  EXPECT_EQ(text.rfind("| variable | type | default | accepted | meaning |", 0), 0u);
  for (const char *v : {"HPCMEM_VERBOSE", "HPCMEM_LARGE_THRESHOLD", "HPCMEM_ON_ERROR", "HPCMEM_TRACE"})
    EXPECT_NE(text.find(std::string("`") + v + "`"), std::string::npos) << v;
}

TEST(hpcmem_options_print, effective_values) {
  FILE *f = tmpfile();
  ASSERT_EQ(hpcmem_options_print(f, 0), 0);
  rewind(f);
  char line[1024];
  bool seen = false;
  while (fgets(line, sizeof line, f)) seen |= std::string(line) == "libhpcmem: HPCMEM_BLOCK_SIZE=4096\n";
  fclose(f);
  EXPECT_TRUE(seen);
  EXPECT_EQ(hpcmem_options_print(nullptr, 0), -EINVAL);
}
