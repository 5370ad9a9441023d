// Unit tests of the report's building blocks, without MPI: the cross-rank
// aggregate (the MPI operator's body), timeline binning, /proc parsing, the
// report's file name, the JSON writer and the banner.
#include <gtest/gtest.h>

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <string>
#include <vector>

extern "C" {
#include "record.h"
#include "report.h"
#include "util/options.h"
}

namespace {

hpcmem_agg_t agg_of(uint64_t v, int64_t rank) {
  hpcmem_agg_t a;
  _hpcmem_agg_init(&a, v, rank);
  return a;
}

double direct_stddev(const std::vector<uint64_t> &v) {
  double mean = 0;
  for (uint64_t x : v) mean += (double)x;
  mean /= (double)v.size();
  double s = 0;
  for (uint64_t x : v) s += ((double)x - mean) * ((double)x - mean);
  return sqrt(s / (double)v.size());
}

std::string slurp(const std::string &path) {
  std::string out;
  FILE *f = fopen(path.c_str(), "r");
  if (!f) return out;
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof buf, f)) > 0) out.append(buf, n);
  fclose(f);
  return out;
}

struct TmpDir {
  std::string path;
  TmpDir() {
    char t[] = "/tmp/hpcmem-test-record-XXXXXX";
    path = mkdtemp(t);
  }
  ~TmpDir() { std::string cmd = "rm -rf '" + path + "'"; (void)!system(cmd.c_str()); }
};

}  // namespace

TEST(hpcmem_agg_init, OneValue) {
  hpcmem_agg_t a = agg_of(42, 7);
  EXPECT_EQ(a.min, 42u);
  EXPECT_EQ(a.max, 42u);
  EXPECT_EQ(a.sum, 42u);
  EXPECT_EQ(a.n, 1u);
  EXPECT_EQ(a.min_rank, 7);
  EXPECT_EQ(a.max_rank, 7);
  EXPECT_EQ(_hpcmem_agg_mean(&a), 42.0);
  EXPECT_EQ(_hpcmem_agg_stddev(&a), 0.0);
}

TEST(hpcmem_agg_merge, MinMaxWithRanksSumMeanStddev) {
  std::vector<uint64_t> v = {300, 100, 400, 200};
  hpcmem_agg_t a = agg_of(v[0], 0);
  for (size_t r = 1; r < v.size(); r++) {
    hpcmem_agg_t b = agg_of(v[r], (int64_t)r);
    _hpcmem_agg_merge(&a, &b);
  }
  EXPECT_EQ(a.min, 100u);
  EXPECT_EQ(a.min_rank, 1);
  EXPECT_EQ(a.max, 400u);
  EXPECT_EQ(a.max_rank, 2);
  EXPECT_EQ(a.sum, 1000u);
  EXPECT_EQ(a.n, 4u);
  EXPECT_DOUBLE_EQ(_hpcmem_agg_mean(&a), 250.0);
  EXPECT_NEAR(_hpcmem_agg_stddev(&a), direct_stddev(v), 1e-9);
  EXPECT_NEAR(_hpcmem_agg_cv(&a), direct_stddev(v) / 250.0, 1e-12);
  EXPECT_NEAR(_hpcmem_agg_imbalance(&a), (400.0 - 250.0) / 400.0, 1e-12);
}

// MPI may combine the operands in any order and grouping: the result must not depend on it.
TEST(hpcmem_agg_merge, OrderAndGroupingDoNotMatter) {
  std::vector<uint64_t> v = {5, 9, 5, 1, 9, 3, 7, 1};
  hpcmem_agg_t left = agg_of(v[0], 0);
  for (size_t r = 1; r < v.size(); r++) {
    hpcmem_agg_t b = agg_of(v[r], (int64_t)r);
    _hpcmem_agg_merge(&left, &b);
  }
  // a tree: (0..3) and (4..7), merged right into left, then the other way round
  hpcmem_agg_t lo = agg_of(v[3], 3), hi = agg_of(v[7], 7);
  for (int r = 2; r >= 0; r--) { hpcmem_agg_t b = agg_of(v[r], r); _hpcmem_agg_merge(&lo, &b); }
  for (int r = 6; r >= 4; r--) { hpcmem_agg_t b = agg_of(v[r], r); _hpcmem_agg_merge(&hi, &b); }
  hpcmem_agg_t tree = hi;
  _hpcmem_agg_merge(&tree, &lo);
  for (const hpcmem_agg_t *a : {&left, &tree}) {
    EXPECT_EQ(a->min, 1u);
    EXPECT_EQ(a->min_rank, 3);   // ties go to the lower rank
    EXPECT_EQ(a->max, 9u);
    EXPECT_EQ(a->max_rank, 1);
    EXPECT_EQ(a->sum, 40u);
    EXPECT_NEAR(_hpcmem_agg_stddev(a), direct_stddev(v), 1e-9);
  }
}

TEST(hpcmem_agg_merge, EmptyIsIdentity) {
  hpcmem_agg_t empty;
  memset(&empty, 0, sizeof empty);
  hpcmem_agg_t a = agg_of(11, 2);
  _hpcmem_agg_merge(&a, &empty);
  EXPECT_EQ(a.n, 1u);
  EXPECT_EQ(a.min, 11u);
  hpcmem_agg_t e = empty;
  _hpcmem_agg_merge(&e, &a);
  EXPECT_EQ(e.n, 1u);
  EXPECT_EQ(e.max_rank, 2);
}

// Ranks with almost the same large HWM: a naive sum of squares loses the spread.
TEST(hpcmem_agg_merge, StddevStaysAccurateForAlikeRanks) {
  std::vector<uint64_t> v;
  for (int r = 0; r < 1000; r++) v.push_back((uint64_t)1 << 40 | (uint64_t)(r % 10) * 1000);
  hpcmem_agg_t a = agg_of(v[0], 0);
  for (size_t r = 1; r < v.size(); r++) { hpcmem_agg_t b = agg_of(v[r], (int64_t)r); _hpcmem_agg_merge(&a, &b); }
  double want = 2872.2813232690143;   // population stddev of {0,1000,...,9000} repeated
  EXPECT_NEAR(_hpcmem_agg_stddev(&a), want, 1e-3);
}

TEST(hpcmem_agg_merge_n, ElementWise) {
  hpcmem_agg_t a[2] = {agg_of(1, 0), agg_of(50, 0)}, b[2] = {agg_of(5, 1), agg_of(10, 1)};
  _hpcmem_agg_merge_n(a, b, 2);
  EXPECT_EQ(a[0].max, 5u);
  EXPECT_EQ(a[0].max_rank, 1);
  EXPECT_EQ(a[1].max, 50u);
  EXPECT_EQ(a[1].min_rank, 1);
}

TEST(hpcmem_agg_from_rec, OnePerField) {
  hpcmem_rec_t rec;
  memset(&rec, 0, sizeof rec);
  rec.rank = 3;
  for (size_t i = 0; i < HPCMEM_REC_NFIELDS; i++) rec.v[i] = i * 10;
  hpcmem_agg_t aggs[HPCMEM_REC_NFIELDS];
  _hpcmem_agg_from_rec(aggs, &rec);
  for (size_t i = 0; i < HPCMEM_REC_NFIELDS; i++) {
    EXPECT_EQ(aggs[i].max, i * 10);
    EXPECT_EQ(aggs[i].max_rank, 3);
  }
}

TEST(hpcmem_agg_imbalance, ZeroAndBalanced) {
  hpcmem_agg_t z = agg_of(0, 0);
  EXPECT_EQ(_hpcmem_agg_imbalance(&z), 0.0);
  EXPECT_EQ(_hpcmem_agg_cv(&z), 0.0);
  hpcmem_agg_t a = agg_of(100, 0), b = agg_of(100, 1);
  _hpcmem_agg_merge(&a, &b);
  EXPECT_EQ(_hpcmem_agg_imbalance(&a), 0.0);
  EXPECT_EQ(_hpcmem_agg_stddev(&a), 0.0);
}

// The record's field list: every statistics field first, in order, then the report's own.
TEST(hpcmem_rec_fields, ListedOnce) {
  std::vector<std::string> names;
  for (size_t i = 0; i < HPCMEM_REC_NFIELDS; i++) names.push_back(_hpcmem_rec_fields[i].name);
  EXPECT_EQ(names[HPCMEM_REC_peak_bytes], "peak_bytes");
  EXPECT_EQ(_hpcmem_rec_fields[HPCMEM_REC_peak_time_ns].kind, HPCMEM_KIND_PEAKTIME);
  EXPECT_EQ(names[HPCMEM_REC_vm_hwm_bytes], "vm_hwm_bytes");
  std::vector<std::string> sorted = names;
  std::sort(sorted.begin(), sorted.end());
  EXPECT_TRUE(std::adjacent_find(sorted.begin(), sorted.end()) == sorted.end());
  EXPECT_EQ(HPCMEM_REC_WORDS, HPCMEM_REC_NFIELDS + 2);
  EXPECT_EQ(sizeof(hpcmem_stats_t) / 8, (size_t)HPCMEM_REC_vm_hwm_bytes);
}

TEST(hpcmem_timeline_bin_ns, CoversTheSpan) {
  EXPECT_EQ(_hpcmem_timeline_bin_ns(0, 1024), 1u);
  EXPECT_EQ(_hpcmem_timeline_bin_ns(1023, 1024), 1u);
  uint64_t w = _hpcmem_timeline_bin_ns(1000000, 1024);
  EXPECT_GE(w * 1024, 1000001u);
  EXPECT_LT(w * 1023, 1000000u + w);
  EXPECT_EQ(_hpcmem_timeline_bin_ns(5, 0), 1u);
}

TEST(hpcmem_timeline_bin, StepFunctionMaxPerBin) {
  // origin 1000; bins of 10 ns; the rank lives until job time 75
  hpcmem_sample_t s[] = {{1005, 100}, {1012, 300}, {1018, 50}, {1041, 70}};
  uint64_t bins[10];
  _hpcmem_timeline_bin(s, 4, 1000, 75, 10, 10, bins);
  uint64_t want[10] = {100, 300, 50, 50, 70, 70, 70, 70, 0, 0};
  for (int i = 0; i < 10; i++) EXPECT_EQ(bins[i], want[i]) << "bin " << i;
}

TEST(hpcmem_timeline_bin, EmptyAndEarlyAndLate) {
  uint64_t bins[4];
  _hpcmem_timeline_bin(nullptr, 0, 0, 100, 10, 4, bins);
  for (uint64_t b : bins) EXPECT_EQ(b, 0u);
  // a sample before the origin counts for bin 0; one past the bins is clamped into the last;
  // one after end_ns (taken after the record) is ignored
  hpcmem_sample_t s[] = {{10, 7}, {500, 9}, {1200, 99}};
  _hpcmem_timeline_bin(s, 3, 100, 1000, 10, 4, bins);
  EXPECT_EQ(bins[0], 7u);
  EXPECT_EQ(bins[3], 9u);
  EXPECT_EQ(bins[1], 7u);
}

TEST(hpcmem_timeline_point, RaisesOnlyItsBin) {
  uint64_t bins[4] = {1, 1, 1, 1};
  _hpcmem_timeline_point(25, 9, 10, 4, bins);
  EXPECT_EQ(bins[2], 9u);
  EXPECT_EQ(bins[1], 1u);
  EXPECT_EQ(bins[3], 1u);
  _hpcmem_timeline_point(25, 3, 10, 4, bins);   // never lowers
  EXPECT_EQ(bins[2], 9u);
  _hpcmem_timeline_point(1000, 5, 10, 4, bins);  // past the end: last bin
  EXPECT_EQ(bins[3], 5u);
}

TEST(hpcmem_proc_status_parse, ReadsKilobytes) {
  const char *text = "Name:\tx\nVmPeak:\t  999 kB\nVmHWM:\t  2048 kB\nVmRSS:\t    12 kB\nThreads: 1\n";
  uint64_t hwm = 0, rss = 0;
  EXPECT_EQ(_hpcmem_proc_status_parse(text, &hwm, &rss), 0);
  EXPECT_EQ(hwm, 2048u * 1024);
  EXPECT_EQ(rss, 12u * 1024);
  EXPECT_EQ(_hpcmem_proc_status_parse("Name: x\n", &hwm, &rss), -ENOENT);
  EXPECT_EQ(_hpcmem_proc_status_parse("VmHWM: kB\nVmRSS: 1 kB\n", &hwm, &rss), -ENOENT);
}

TEST(hpcmem_report_path, JobAndRankNames) {
  char buf[256];
  ASSERT_EQ(_hpcmem_report_path(buf, sizeof buf, "/d", "42", -1), 0);
  EXPECT_STREQ(buf, "/d/hpcmem-report-42.json");
  ASSERT_EQ(_hpcmem_report_path(buf, sizeof buf, "", "42", 3), 0);
  EXPECT_STREQ(buf, "./hpcmem-report-42.rank3.json");
  EXPECT_EQ(_hpcmem_report_path(buf, 10, "/d", "42", -1), -ENAMETOOLONG);
}

namespace {
// Two ranks on one node: rank 0 peaked at 1 MiB, rank 1 at 3 MiB.
struct TwoRanks {
  hpcmem_rec_t recs[2];
  hpcmem_agg_t job[HPCMEM_REC_NFIELDS];
  hpcmem_node_t node;
  hpcmem_report_t r;
  TwoRanks() {
    memset(recs, 0, sizeof recs);
    for (int k = 0; k < 2; k++) {
      recs[k].rank = (uint64_t)k;
      recs[k].v[HPCMEM_REC_peak_bytes] = (uint64_t)(1 + 2 * k) << 20;
      recs[k].v[HPCMEM_REC_alloc_count] = 10 + (uint64_t)k;
    }
    hpcmem_agg_t other[HPCMEM_REC_NFIELDS];
    _hpcmem_agg_from_rec(job, &recs[0]);
    _hpcmem_agg_from_rec(other, &recs[1]);
    _hpcmem_agg_merge_n(job, other, HPCMEM_REC_NFIELDS);
    memset(&node, 0, sizeof node);
    node.nranks = 2;
    node.peak_sum = 3u << 20;
    strcpy(node.host, "host\"a");
    memcpy(node.agg, job, sizeof job);
    memset(&r, 0, sizeof r);
    r.jobid = "j1"; r.source = "MPI_Finalize"; r.complete = 1; r.mpi = 1; r.rank = -1;
    r.mode = HPCMEM_REPORT_SUMMARY; r.threshold_pct = 20; r.nranks = 2; r.nnodes = 1;
    r.job = job; r.job_peak_sum = 3u << 20; r.recs = recs; r.nrecs = 2;
    r.nodes = &node; r.nnode_recs = 1; r.bin_ns = 1; r.nbins = 1;
  }
};
}  // namespace

TEST(hpcmem_report_write_json, CreatesDirectoriesAndWritesAtomically) {
  TmpDir tmp;
  TwoRanks t;
  std::string path = tmp.path + "/a/b/hpcmem-report-j1.json";
  ASSERT_EQ(_hpcmem_report_write_json(&t.r, path.c_str()), 0);
  std::string text = slurp(path);
  EXPECT_EQ(text.front(), '{');
  EXPECT_NE(text.find("\"jobid\": \"j1\""), std::string::npos);
  EXPECT_NE(text.find("\"host\": \"host\\\"a\""), std::string::npos);   // escaped
  EXPECT_NE(text.find("\"max_rank\": 1"), std::string::npos);
  EXPECT_NE(text.find("\"imbalanced\": true"), std::string::npos);     // (3-2)/3 > 20%
  EXPECT_EQ(text.find("nan"), std::string::npos);
  std::string ls = "ls '" + tmp.path + "/a/b' | grep -c tmp";
  FILE *p = popen(ls.c_str(), "r");
  int leftovers = -1;
  ASSERT_EQ(fscanf(p, "%d", &leftovers), 1);
  pclose(p);
  EXPECT_EQ(leftovers, 0);
}

TEST(hpcmem_report_write_json, UnwritablePlaceGivesErrno) {
  TmpDir tmp;
  TwoRanks t;
  std::string file = tmp.path + "/plain-file";
  int fd = open(file.c_str(), O_CREAT | O_WRONLY, 0644);
  ASSERT_GE(fd, 0);
  close(fd);
  std::string path = file + "/sub/hpcmem-report-j1.json";
  EXPECT_EQ(_hpcmem_report_write_json(&t.r, path.c_str()), -ENOTDIR);
}

TEST(hpcmem_report_banner, NamesTheRanksAndTheImbalance) {
  TwoRanks t;
  char name[] = "/tmp/hpcmem-banner-XXXXXX";
  int fd = mkstemp(name);
  ASSERT_GE(fd, 0);
  _hpcmem_report_banner(&t.r, "/x/hpcmem-report-j1.json", fd);
  close(fd);
  std::string text = slurp(name);
  unlink(name);
  EXPECT_NE(text.find("job j1: 2 ranks on 1 node"), std::string::npos) << text;
  EXPECT_NE(text.find("min 1.0 MiB (rank 0), mean 2.0 MiB, max 3.0 MiB (rank 1), stddev 1.0 MiB"),
            std::string::npos) << text;
  EXPECT_NE(text.find("IMBALANCE: (max-mean)/max = 33.3% exceeds 20%"), std::string::npos) << text;
  EXPECT_NE(text.find("report: /x/hpcmem-report-j1.json"), std::string::npos) << text;
  EXPECT_LE(std::count(text.begin(), text.end(), '\n'), 6);
}

TEST(hpcmem_report_banner, BelowThresholdIsNotFlagged) {
  TwoRanks t;
  t.r.threshold_pct = 50;
  char name[] = "/tmp/hpcmem-banner-XXXXXX";
  int fd = mkstemp(name);
  ASSERT_GE(fd, 0);
  _hpcmem_report_banner(&t.r, nullptr, fd);
  close(fd);
  std::string text = slurp(name);
  unlink(name);
  EXPECT_EQ(text.find("IMBALANCE"), std::string::npos) << text;
  EXPECT_NE(text.find("(threshold 50%)"), std::string::npos) << text;
  EXPECT_EQ(text.find("report:"), std::string::npos) << text;
}
