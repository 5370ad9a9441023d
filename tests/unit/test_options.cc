// Unit tests of the options table (src/util/options.c): every option type,
// malformed and out-of-range values, the warning text.
#include <gtest/gtest.h>
#include <string>
#include <vector>
extern "C" {
#include "util/options.h"
}

namespace {

// Load a synthetic environment and return what was printed on stderr.
std::string load(std::vector<std::string> vars) {
  std::vector<char *> env;
  for (auto &v : vars) env.push_back(&v[0]);
  env.push_back(nullptr);
  testing::internal::CaptureStderr();
  _hpcmem_options_load(env.data());
  return testing::internal::GetCapturedStderr();
}

TEST(options, defaults_when_environment_is_empty) {
  EXPECT_EQ(load({}), "");
  EXPECT_EQ(_hpcmem_opt(LARGE_THRESHOLD), 128 * 1024);
  EXPECT_EQ(_hpcmem_opt(BLOCK_SIZE), 4096);
  EXPECT_EQ(_hpcmem_opt(LARGE_ALIGN), 256);
  EXPECT_EQ(_hpcmem_opt(ON_ERROR), HPCMEM_ON_ERROR_ABORT);
  EXPECT_EQ(_hpcmem_opt(VERBOSE), 0);
  EXPECT_EQ(_hpcmem_opt(REPORT), HPCMEM_REPORT_AUTO);
  EXPECT_STREQ(_hpcmem_opt_str(REPORT_DIR), ".");
}

// A string from the environment is copied (the environment may change after
// the load); a default is the table's own text, and a later load without the
// variable goes back to it.
TEST(options, string_from_environment_is_copied_and_default_restored) {
  std::vector<std::string> vars = {"HPCMEM_REPORT_DIR=/tmp/reports"};
  std::vector<char *> env = {&vars[0][0], nullptr};
  _hpcmem_options_load(env.data());
  vars[0][20] = 'X';                       // the caller's buffer changes
  EXPECT_STREQ(_hpcmem_opt_str(REPORT_DIR), "/tmp/reports");
  char buf[64];
  ASSERT_EQ(_hpcmem_option_format(HPCMEM_OPT_REPORT_DIR, buf, sizeof buf), 0);
  EXPECT_STREQ(buf, "/tmp/reports");
  EXPECT_EQ(load({}), "");
  EXPECT_STREQ(_hpcmem_opt_str(REPORT_DIR), ".");
  ASSERT_EQ(_hpcmem_option_format(HPCMEM_OPT_REPORT_DIR, buf, sizeof buf), 0);
  EXPECT_STREQ(buf, ".");
}

TEST(options, bool_accepts_all_spellings) {
  const char *yes[] = {"1", "yes", "on", "true", "YES", "On"};
  const char *no[] = {"0", "no", "off", "false", "NO"};
  for (auto s : yes) { EXPECT_EQ(load({std::string("HPCMEM_THP=") + s}), ""); EXPECT_EQ(_hpcmem_opt(THP), 1) << s; }
  for (auto s : no) { EXPECT_EQ(load({std::string("HPCMEM_THP=") + s}), ""); EXPECT_EQ(_hpcmem_opt(THP), 0) << s; }
}

TEST(options, bool_malformed_warns_and_keeps_default) {
  std::string err = load({"HPCMEM_CHECK=maybe"});
  EXPECT_EQ(_hpcmem_opt(CHECK), 0);
  EXPECT_EQ(err, "libhpcmem: warning: HPCMEM_CHECK='maybe' is not valid (accepted: 0/1, yes/no, on/off, "
                 "true/false); using the default 0\n");
}

TEST(options, size_suffixes) {
  EXPECT_EQ(load({"HPCMEM_LARGE_THRESHOLD=256K"}), "");
  EXPECT_EQ(_hpcmem_opt(LARGE_THRESHOLD), 256 * 1024);
  EXPECT_EQ(load({"HPCMEM_LARGE_THRESHOLD=2m"}), "");
  EXPECT_EQ(_hpcmem_opt(LARGE_THRESHOLD), 2 * 1024 * 1024);
  EXPECT_EQ(load({"HPCMEM_PREALLOC=1G"}), "");
  EXPECT_EQ(_hpcmem_opt(PREALLOC), 1024LL * 1024 * 1024);
  EXPECT_EQ(load({"HPCMEM_PREALLOC=3GiB"}), "");
  EXPECT_EQ(_hpcmem_opt(PREALLOC), 3LL * 1024 * 1024 * 1024);
  EXPECT_EQ(load({"HPCMEM_LARGE_THRESHOLD=65536"}), "");
  EXPECT_EQ(_hpcmem_opt(LARGE_THRESHOLD), 65536);
}

TEST(options, size_malformed_and_out_of_range) {
  std::string err = load({"HPCMEM_LARGE_THRESHOLD=12Q"});
  EXPECT_EQ(_hpcmem_opt(LARGE_THRESHOLD), 128 * 1024);
  EXPECT_EQ(err, "libhpcmem: warning: HPCMEM_LARGE_THRESHOLD='12Q' is not valid (accepted: a size from 16384 "
                 "to 1073741824 bytes (K/M/G suffixes allowed)); using the default 128K\n");
  err = load({"HPCMEM_LARGE_THRESHOLD=4K"});
  EXPECT_EQ(_hpcmem_opt(LARGE_THRESHOLD), 128 * 1024);
  EXPECT_NE(err.find("HPCMEM_LARGE_THRESHOLD='4K' is not valid"), std::string::npos) << err;
  err = load({"HPCMEM_LARGE_THRESHOLD=99999999999999999999999G"});
  EXPECT_NE(err.find("is not valid"), std::string::npos);
  err = load({"HPCMEM_LARGE_THRESHOLD="});
  EXPECT_NE(err.find("HPCMEM_LARGE_THRESHOLD='' is not valid"), std::string::npos);
  err = load({"HPCMEM_LARGE_THRESHOLD=-5"});
  EXPECT_NE(err.find("'-5' is not valid"), std::string::npos);
}

TEST(options, pow2_rejects_other_sizes) {
  std::string err = load({"HPCMEM_LARGE_ALIGN=384"});
  EXPECT_EQ(_hpcmem_opt(LARGE_ALIGN), 256);
  EXPECT_EQ(err, "libhpcmem: warning: HPCMEM_LARGE_ALIGN='384' is not valid (accepted: a power of two from 16 "
                 "to 4096 bytes (K/M/G suffixes allowed)); using the default 256\n");
  EXPECT_EQ(load({"HPCMEM_LARGE_ALIGN=1K"}), "");
  EXPECT_EQ(_hpcmem_opt(LARGE_ALIGN), 1024);
}

TEST(options, int_range_and_malformed) {
  EXPECT_EQ(load({"HPCMEM_HEAPS=8"}), "");
  EXPECT_EQ(_hpcmem_opt(HEAPS), 8);
  std::string err = load({"HPCMEM_HEAPS=1000"});
  EXPECT_EQ(_hpcmem_opt(HEAPS), 0);
  EXPECT_EQ(err, "libhpcmem: warning: HPCMEM_HEAPS='1000' is not valid (accepted: an integer from 0 to 64); "
                 "using the default 0\n");
  // the heap table has 64 entries: 65 was accepted and quietly cut to 64
  err = load({"HPCMEM_HEAPS=65"});
  EXPECT_EQ(_hpcmem_opt(HEAPS), 0);
  EXPECT_NE(err.find("HPCMEM_HEAPS='65' is not valid (accepted: an integer from 0 to 64)"), std::string::npos) << err;
  EXPECT_EQ(load({"HPCMEM_HEAPS=64"}), "");
  EXPECT_EQ(_hpcmem_opt(HEAPS), 64);
  err = load({"HPCMEM_HEAPS=8K"});  // ints take no suffix
  EXPECT_NE(err.find("HPCMEM_HEAPS='8K' is not valid"), std::string::npos);
}

// The words are compared whole and case-folded in ASCII only (options.c does
// not use strcasecmp; a prefix, an extension or a non-ASCII byte is no match).
TEST(options, bool_words_are_whole_and_ascii_folded) {
  const char *yes[] = {"TRUE", "tRuE", "oN", "Yes"};
  for (auto s : yes) { EXPECT_EQ(load({std::string("HPCMEM_CHECK=") + s}), "") << s; EXPECT_EQ(_hpcmem_opt(CHECK), 1) << s; }
  const char *bad[] = {"ye", "yess", "o", "offf", "true ", "", "y\xc3\xa9s"};
  for (auto s : bad) {
    EXPECT_NE(load({std::string("HPCMEM_CHECK=") + s}).find("is not valid"), std::string::npos) << s;
    EXPECT_EQ(_hpcmem_opt(CHECK), 0) << s;   // back to the default
  }
}

TEST(options, enum_choices) {
  EXPECT_EQ(load({"HPCMEM_ON_ERROR=warn"}), "");
  EXPECT_EQ(_hpcmem_opt(ON_ERROR), HPCMEM_ON_ERROR_WARN);
  EXPECT_EQ(load({"HPCMEM_REPORT=FULL"}), "");
  EXPECT_EQ(_hpcmem_opt(REPORT), HPCMEM_REPORT_FULL);
  std::string err = load({"HPCMEM_ON_ERROR=explode"});
  EXPECT_EQ(_hpcmem_opt(ON_ERROR), HPCMEM_ON_ERROR_ABORT);
  EXPECT_EQ(err, "libhpcmem: warning: HPCMEM_ON_ERROR='explode' is not valid (accepted: one of "
                 "abort|warn|ignore); using the default abort\n");
  err = load({"HPCMEM_ON_ERROR=war"});  // a prefix is not a choice
  EXPECT_NE(err.find("is not valid"), std::string::npos);
  err = load({"HPCMEM_ON_ERROR=warnx"});  // nor an extension
  EXPECT_NE(err.find("is not valid"), std::string::npos);
  EXPECT_EQ(load({"HPCMEM_DEFAULT_SEGMENT=Interleaved"}), "");  // the last choice, mixed case
  EXPECT_EQ(_hpcmem_opt(DEFAULT_SEGMENT), 2);
}

TEST(options, string_values_and_length_limit) {
  EXPECT_EQ(load({"HPCMEM_REPORT_DIR=/tmp/reports"}), "");
  EXPECT_STREQ(_hpcmem_opt_str(REPORT_DIR), "/tmp/reports");
  std::string longv(400, 'x');
  std::string err = load({"HPCMEM_REPORT_DIR=" + longv});
  EXPECT_STREQ(_hpcmem_opt_str(REPORT_DIR), ".");
  EXPECT_NE(err.find("HPCMEM_REPORT_DIR="), std::string::npos);
  EXPECT_NE(err.find("(accepted: at most 255 characters)"), std::string::npos) << err;
}

TEST(options, unknown_variable_warns) {
  std::string err = load({"HPCMEM_LARGE_TRESHOLD=1M", "PATH=/bin", "HPCMEMORY=1"});
  EXPECT_EQ(err, "libhpcmem: warning: unknown variable HPCMEM_LARGE_TRESHOLD is ignored (see docs/environment.md)\n");
}

TEST(options, later_setting_of_same_variable_wins_and_bad_one_keeps_default) {
  EXPECT_EQ(load({"HPCMEM_HEAPS=4"}), "");
  load({"HPCMEM_HEAPS=x"});
  EXPECT_EQ(_hpcmem_opt(HEAPS), 0);  // each load starts from the defaults
}

TEST(options, format_round_trips) {
  load({"HPCMEM_TRACE_COMPRESS=zlib", "HPCMEM_BLOCK_SIZE=8K"});
  char buf[64];
  ASSERT_EQ(_hpcmem_option_format(HPCMEM_OPT_TRACE_COMPRESS, buf, sizeof buf), 0);
  EXPECT_STREQ(buf, "zlib");
  ASSERT_EQ(_hpcmem_option_format(HPCMEM_OPT_BLOCK_SIZE, buf, sizeof buf), 0);
  EXPECT_STREQ(buf, "8192");
  EXPECT_EQ(_hpcmem_option_format(HPCMEM_OPT_BLOCK_SIZE, buf, 2), -ERANGE);
  EXPECT_EQ(_hpcmem_option_format(-1, buf, sizeof buf), -EINVAL);
}

TEST(options, every_default_parses) {
  for (int id = 0; id < HPCMEM_OPT_COUNT_; id++) {
    long long v;
    EXPECT_EQ(_hpcmem_option_parse(id, _hpcmem_opt_desc[id].def, &v), 0) << _hpcmem_opt_desc[id].name;
  }
}

}  // namespace
