// Unit tests of the recorder (src/trace/) read back through the reader
// (tools/hmt_reader.c): events recorded through _hpcmem_trace_event come back
// exactly -- kinds, addresses, sizes, alignment, S/A marks, threads, call
// stacks -- for every codec, block size and thread interleaving; files are
// created safely; set_rank renames; flush_all while threads record loses
// nothing and duplicates nothing.
#include <gtest/gtest.h>
#include <dirent.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>
#include <atomic>
#include <map>
#include <set>
#include <string>
#include <fstream>
#include <thread>
#include <vector>
extern "C" {
#include "prim/prim.h"
#include "heap/sizeclass.h"
#include "trace/trace.h"
#include "util/job.h"
#include "util/options.h"
#include "hmt_reader.h"
}

namespace {

// Events recorded by the tests use addresses in [FAKE, 2 * FAKE), far from
// anything mmap hands out; once the core reports the test program's own
// allocations too, read_back keeps only these.
constexpr uint64_t FAKE = 0x100000000000ull;
bool fake(uint64_t p) { return p >= FAKE && p < 2 * FAKE; }
void *fp(uint64_t off) { return (void *)(uintptr_t)(FAKE + off); }

struct Expected {
  unsigned type, sys;
  uint64_t ptr, old_ptr, size, align;
  int site;  // which call site recorded it (-1: none)
};

std::string make_tmpdir() {
  char tmpl[] = "/tmp/hpcmem-trace-test-XXXXXX";
  const char *d = mkdtemp(tmpl);
  EXPECT_NE(d, nullptr);
  return d ? d : "/tmp";
}

void rm_rf(const std::string &dir) {
  std::string cmd = "rm -rf '" + dir + "'";
  if (system(cmd.c_str()) != 0) perror("rm");
}

std::vector<std::string> files_in(const std::string &dir) {
  std::vector<std::string> out;
  DIR *d = opendir(dir.c_str());
  if (!d) return out;
  while (dirent *e = readdir(d))
    if (e->d_name[0] != '.') out.push_back(e->d_name);
  closedir(d);
  std::sort(out.begin(), out.end());
  return out;
}

// Start a trace with these settings (plus HPCMEM_TRACE=1 and the dir).
void start_trace(const std::string &dir, std::vector<std::string> vars) {
  _hpcmem_options_init();  // so that init does not re-read the real environment
  vars.push_back("HPCMEM_TRACE=1");
  vars.push_back("HPCMEM_TRACE_DIR=" + dir);
  std::vector<char *> env;
  for (auto &v : vars) env.push_back(&v[0]);
  env.push_back(nullptr);
  _hpcmem_options_load(env.data());
  _hpcmem_trace_init();
  ASSERT_EQ(_hpcmem_trace_enabled, 1);
}

// Call sites at known places: each records its event and remembers the
// return address into its caller, which must be frame 1 of the stack
// (frame 0 is the site itself, the caller of the hook).
std::atomic<uint64_t> site_caller[4];

#define SITE(n)                                                                               \
  __attribute__((noinline)) void site##n(int kind, uint64_t p, uint64_t size, uint64_t old, \
                                         uint64_t align) {                                  \
    site_caller[n] = (uint64_t)(uintptr_t)__builtin_return_address(0);                      \
    _hpcmem_trace_event(kind, (void *)(uintptr_t)p, size, (void *)(uintptr_t)old, align);   \
    asm volatile("" ::: "memory"); /* not a tail call */                                    \
  }
SITE(0)
SITE(1)
SITE(2)
SITE(3)
typedef void (*site_fn)(int, uint64_t, uint64_t, uint64_t, uint64_t);
const site_fn sites[] = {site0, site1, site2, site3};

// A deterministic mixed sequence of n events over the four sites.
std::vector<Expected> record_sequence(int n, uint64_t base, unsigned seed) {
  std::vector<Expected> ev;
  std::vector<uint64_t> live;
  uint64_t next = base;
  unsigned x = seed;
  auto rnd = [&x]() { x = x * 1103515245u + 12345u; return x >> 8; };
  for (int i = 0; i < n; i++) {
    unsigned r = rnd() % 10;
    int s = (int)(rnd() % 4);
    Expected e{};
    e.site = s;
    if (r < 4 || live.empty()) {
      e.type = r == 1 ? HPCMEM_EV_CALLOC : r == 2 ? HPCMEM_EV_MEMALIGN : HPCMEM_EV_MALLOC;
      e.ptr = next; next += 4096 + (rnd() % 4096) * 16;
      e.size = 1 + rnd() % 100000;
      e.align = e.type == HPCMEM_EV_MEMALIGN ? (64u << (rnd() % 4)) : 0;
      live.push_back(e.ptr);
    } else if (r < 6) {
      size_t k = rnd() % live.size();
      e.type = HPCMEM_EV_REALLOC;
      e.old_ptr = live[k];
      e.ptr = (rnd() % 2) ? live[k] : (next += 8192);
      e.size = 1 + rnd() % 200000;
      live[k] = e.ptr;
    } else {
      size_t k = rnd() % live.size();
      e.type = HPCMEM_EV_FREE;
      e.ptr = live[k];
      live.erase(live.begin() + (long)k);
      e.site = -1;
    }
    sites[s](e.type, e.ptr, e.size, e.old_ptr, e.align);
    ev.push_back(e);
  }
  return ev;
}

struct ReadBack {
  std::vector<hmt_event_t> events;
  hmt_header_t header;
  hmt_info_t info;
  std::map<uint64_t, std::vector<uint64_t>> stacks;
  std::vector<hmt_module_t> modules;
  std::vector<std::string> module_paths;
  int rc = 0;
  std::string error;
};

ReadBack read_back(const std::string &path, int flags = 0) {
  ReadBack rb;
  hmt_reader_t *r;
  hmt_error_t err;
  rb.rc = hmt_open(path.c_str(), flags, &r, &err);
  if (rb.rc) { rb.error = err.message; return rb; }
  hmt_event_t ev;
  int k;
  std::set<uint64_t> used;
  while ((k = hmt_next(r, &ev)) == 1)
    if (fake(ev.ptr) || fake(ev.old_ptr)) { rb.events.push_back(ev); used.insert(ev.stack); }
  if (k < 0) { rb.rc = k; rb.error = hmt_error(r)->message; }
  rb.header = *hmt_header(r);
  rb.info = *hmt_info(r);
  for (size_t i = 0; i < hmt_stack_count(r); i++) {
    uint64_t id = hmt_stack_id(r, i);
    const uint64_t *f;
    uint32_t d;
    if (used.count(id) && hmt_stack(r, id, &f, &d) == 0) rb.stacks[id] = std::vector<uint64_t>(f, f + d);
  }
  const hmt_module_t *m;
  size_t n = hmt_modules(r, &m);
  for (size_t i = 0; i < n; i++) { rb.modules.push_back(m[i]); rb.module_paths.push_back(m[i].path); }
  for (auto &mod : rb.modules) mod.path = nullptr;  // owned by the reader
  hmt_close(r);
  return rb;
}

std::string only_file(const std::string &dir) {
  auto f = files_in(dir);
  EXPECT_EQ(f.size(), 1u);
  return f.empty() ? "" : dir + "/" + f[0];
}

void expect_same(const std::vector<Expected> &want, const std::vector<hmt_event_t> &got) {
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < want.size(); i++) {
    SCOPED_TRACE("event " + std::to_string(i));
    EXPECT_EQ(got[i].type, want[i].type);
    EXPECT_EQ(got[i].ptr, want[i].ptr);
    if (want[i].type != HPCMEM_EV_FREE) { EXPECT_EQ(got[i].size, want[i].size); }
    if (want[i].type == HPCMEM_EV_REALLOC) { EXPECT_EQ(got[i].old_ptr, want[i].old_ptr); }
    if (want[i].type == HPCMEM_EV_MEMALIGN) { EXPECT_EQ(got[i].align, want[i].align); }
    EXPECT_EQ(got[i].sys, want[i].sys);
    if (i) { EXPECT_GE(got[i].time, got[i - 1].time); }
  }
}

class TraceCodec : public ::testing::TestWithParam<const char *> {};

TEST_P(TraceCodec, round_trip_is_exact) {
  std::string dir = make_tmpdir();
  start_trace(dir, {std::string("HPCMEM_TRACE_COMPRESS=") + GetParam(), "HPCMEM_TRACE_BUFFER=64K"});
  auto want = record_sequence(20000, FAKE + 0x1000, 7);
  _hpcmem_trace_shutdown();
  ReadBack rb = read_back(only_file(dir));
  ASSERT_EQ(rb.rc, 0) << rb.error;
  expect_same(want, rb.events);
  EXPECT_GT(rb.info.event_blocks, 2u) << "a 64K buffer must have been written several times";
  EXPECT_FALSE(rb.info.truncated);
  ASSERT_TRUE(rb.info.flush.present);
  EXPECT_EQ(rb.info.flush.reason, (uint64_t)HMT_FLUSH_EXPLICIT);
  EXPECT_GE(rb.info.flush.events, want.size());
  EXPECT_EQ(rb.info.flush.dropped, 0u);
  // one stack per call site, and the stack of each event is its site's
  std::map<int, uint64_t> site_stack;
  for (size_t i = 0; i < want.size(); i++) {
    if (want[i].site < 0) { EXPECT_EQ(rb.events[i].stack, 0u); continue; }
    auto it = site_stack.find(want[i].site);
    if (it == site_stack.end()) site_stack[want[i].site] = rb.events[i].stack;
    else EXPECT_EQ(rb.events[i].stack, it->second) << "event " << i;
  }
  EXPECT_EQ(site_stack.size(), 4u);
  EXPECT_EQ(rb.stacks.size(), 4u);
  for (auto &s : site_stack) {
    ASSERT_TRUE(rb.stacks.count(s.second));
    const auto &f = rb.stacks[s.second];
    ASSERT_GE(f.size(), 2u);
    uint64_t fn = (uint64_t)(uintptr_t)sites[s.first];
    EXPECT_GT(f[0], fn) << "frame 0 is inside site" << s.first;
    EXPECT_LT(f[0], fn + 512);
    EXPECT_EQ(f[1], site_caller[s.first]) << "frame 1 is the return address into the site's caller";
  }
  // header
  EXPECT_EQ(rb.header.version_major, HMT_VERSION_MAJOR);
  EXPECT_EQ(rb.header.pid, (uint32_t)getpid());
  EXPECT_EQ(rb.header.pointer_size, sizeof(void *));
  EXPECT_EQ(rb.header.buffer_size, 64u * 1024);
  EXPECT_STREQ(rb.header.hostname, _hpcmem_job.hostname);
  rm_rf(dir);
}

INSTANTIATE_TEST_SUITE_P(trace_event, TraceCodec, ::testing::Values("zstd", "zlib", "none", "model"));

// Every capture method finds the call site and its caller (this file is
// built with frame pointers, so the frame-pointer walk sees them too).
class TraceUnwind : public ::testing::TestWithParam<const char *> {};

TEST_P(TraceUnwind, captures_the_call_site_and_its_caller) {
  std::string dir = make_tmpdir();
  start_trace(dir, {std::string("HPCMEM_TRACE_UNWIND=") + GetParam()});
  site3(HPCMEM_EV_MALLOC, FAKE + 0x1000, 10, 0, 0);
  _hpcmem_trace_shutdown();
  ReadBack rb = read_back(only_file(dir));
  ASSERT_EQ(rb.rc, 0) << rb.error;
  ASSERT_EQ(rb.events.size(), 1u);
  const auto &f = rb.stacks[rb.events[0].stack];
  ASSERT_GE(f.size(), 2u);
  uint64_t fn = (uint64_t)(uintptr_t)site3;
  EXPECT_GT(f[0], fn);
  EXPECT_LT(f[0], fn + 512);
  EXPECT_EQ(f[1], site_caller[3]);
  rm_rf(dir);
}

INSTANTIATE_TEST_SUITE_P(trace_event, TraceUnwind, ::testing::Values("libunwind", "backtrace", "frame"));

TEST(trace_event, modules_map_the_stacks_to_files) {
  std::string dir = make_tmpdir();
  start_trace(dir, {});
  site0(HPCMEM_EV_MALLOC, FAKE + 0x1000, 10, 0, 0);
  _hpcmem_trace_shutdown();
  ReadBack rb = read_back(only_file(dir));
  ASSERT_EQ(rb.rc, 0) << rb.error;
  ASSERT_EQ(rb.events.size(), 1u);
  char exe[4096];
  ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
  ASSERT_GT(n, 0);
  exe[n] = 0;
  const auto &f = rb.stacks[rb.events[0].stack];
  ASSERT_FALSE(f.empty());
  bool found = false;
  for (size_t i = 0; i < rb.modules.size(); i++)
    if (f[0] >= rb.modules[i].lo && f[0] < rb.modules[i].hi) {
      EXPECT_EQ(rb.module_paths[i], exe);
      EXPECT_GT(rb.modules[i].build_id_len, 0u);
      found = true;
      break;
    }
  EXPECT_TRUE(found) << "frame 0 lies in no recorded module";
  rm_rf(dir);
}

TEST(trace_event, depth_limits_the_stack) {
  std::string dir = make_tmpdir();
  start_trace(dir, {"HPCMEM_TRACE_DEPTH=2"});
  site1(HPCMEM_EV_MALLOC, FAKE + 0x1000, 10, 0, 0);
  _hpcmem_trace_shutdown();
  ReadBack rb = read_back(only_file(dir));
  ASSERT_EQ(rb.rc, 0) << rb.error;
  ASSERT_EQ(rb.events.size(), 1u);
  EXPECT_EQ(rb.stacks[rb.events[0].stack].size(), 2u);
  EXPECT_EQ(rb.stacks[rb.events[0].stack][1], site_caller[1]);
  rm_rf(dir);

  dir = make_tmpdir();
  start_trace(dir, {"HPCMEM_TRACE_DEPTH=0"});
  site1(HPCMEM_EV_MALLOC, FAKE + 0x1000, 10, 0, 0);
  _hpcmem_trace_shutdown();
  rb = read_back(only_file(dir));
  ASSERT_EQ(rb.events.size(), 1u);
  EXPECT_EQ(rb.events[0].stack, 0u);
  EXPECT_TRUE(rb.stacks.empty());
  rm_rf(dir);
}

TEST(trace_event, marks_libhpcmem_allocations_as_S) {
  std::string dir = make_tmpdir();
  start_trace(dir, {});
  _hpcmem_trace_event(HPCMEM_EV_MALLOC, fp(0x1000), 16, nullptr, 0);
  _hpcmem_trace_event(HPCMEM_EV_MALLOC | HPCMEM_EV_SYS, fp(0x2000), 32, nullptr, 0);
  _hpcmem_trace_lib_enter();
  _hpcmem_trace_event(HPCMEM_EV_CALLOC, fp(0x3000), 48, nullptr, 0);
  _hpcmem_trace_event(HPCMEM_EV_FREE, fp(0x3000), 0, nullptr, 0);
  _hpcmem_trace_lib_leave();
  _hpcmem_trace_event(HPCMEM_EV_FREE, fp(0x1000), 0, nullptr, 0);
  _hpcmem_trace_event(99, fp(0x1000), 0, nullptr, 0);  // not a kind: ignored
  _hpcmem_trace_shutdown();
  ReadBack rb = read_back(only_file(dir));
  ASSERT_EQ(rb.rc, 0) << rb.error;
  ASSERT_EQ(rb.events.size(), 5u);
  unsigned want_sys[] = {0, 1, 1, 1, 0};
  for (int i = 0; i < 5; i++) EXPECT_EQ(rb.events[i].sys, want_sys[i]) << i;
  rm_rf(dir);
}

TEST(trace_event, realloc_to_zero_and_from_null) {
  std::string dir = make_tmpdir();
  start_trace(dir, {});
  _hpcmem_trace_event(HPCMEM_EV_REALLOC, fp(0x5000), 100, nullptr, 0);        // realloc(NULL, 100)
  _hpcmem_trace_event(HPCMEM_EV_REALLOC, fp(0x9000), 300, fp(0x5000), 0); // moved
  _hpcmem_trace_event(HPCMEM_EV_REALLOC, nullptr, 0, fp(0x9000), 0);          // realloc(p, 0)
  _hpcmem_trace_shutdown();
  ReadBack rb = read_back(only_file(dir));
  ASSERT_EQ(rb.rc, 0) << rb.error;
  ASSERT_EQ(rb.events.size(), 3u);
  EXPECT_EQ(rb.events[0].old_ptr, 0u);
  EXPECT_EQ(rb.events[0].ptr, FAKE + 0x5000u);
  EXPECT_EQ(rb.events[1].old_ptr, FAKE + 0x5000u);
  EXPECT_EQ(rb.events[1].ptr, FAKE + 0x9000u);
  EXPECT_EQ(rb.events[1].size, 300u);
  EXPECT_EQ(rb.events[2].ptr, 0u);
  EXPECT_EQ(rb.events[2].old_ptr, FAKE + 0x9000u);
  EXPECT_EQ(rb.events[2].stack, 0u) << "a realloc that frees has no stack";
  rm_rf(dir);
}

// Each thread records its own sequence; per thread the order is exact, and
// the merged stream is in time order.
TEST(trace_event, threads_keep_their_own_order) {
  std::string dir = make_tmpdir();
  start_trace(dir, {"HPCMEM_TRACE_BUFFER=64K"});
  const int nt = 4, n = 5000;
  std::vector<std::vector<Expected>> want(nt);
  std::vector<int> tids(nt);
  std::vector<std::thread> th;
  for (int t = 0; t < nt; t++)
    th.emplace_back([&, t] {
      tids[t] = _hpcmem_trace_tid();
      want[t] = record_sequence(n, FAKE + 0x10000000000ull * t, 100 + t);
      _hpcmem_trace_thread_exit();
    });
  for (auto &x : th) x.join();
  _hpcmem_trace_shutdown();
  ReadBack rb = read_back(only_file(dir));
  ASSERT_EQ(rb.rc, 0) << rb.error;
  ASSERT_EQ(rb.events.size(), (size_t)nt * n);
  std::map<uint32_t, std::vector<hmt_event_t>> by_tid;
  for (size_t i = 0; i < rb.events.size(); i++) {
    by_tid[rb.events[i].tid].push_back(rb.events[i]);
    if (i) { EXPECT_GE(rb.events[i].time, rb.events[i - 1].time); }
  }
  EXPECT_GE(rb.info.threads, (uint64_t)nt);
  for (int t = 0; t < nt; t++) {
    SCOPED_TRACE("thread " + std::to_string(t));
    expect_same(want[t], by_tid[(uint32_t)tids[t]]);
  }
  EXPECT_EQ(rb.stacks.size(), 4u) << "the four sites' stacks are shared by all threads";
  rm_rf(dir);
}

// flush_all from another thread writes the committed part of a buffer while
// its owner keeps appending: nothing lost, nothing twice, order kept.
TEST(trace_flush_all, concurrent_with_recording_threads) {
  std::string dir = make_tmpdir();
  start_trace(dir, {"HPCMEM_TRACE_BUFFER=64K", "HPCMEM_TRACE_COMPRESS=zlib"});
  const int nt = 2, flushes = 50;
  std::atomic<int> started{0};
  std::atomic<int> progress[2] = {{0}, {0}};
  std::atomic<bool> stop{false};
  std::vector<int> tids(nt), counts(nt);
  std::vector<std::thread> th;
  for (int t = 0; t < nt; t++)
    th.emplace_back([&, t] {
      tids[t] = _hpcmem_trace_tid();
      started++;
      int i = 0;
      for (; !stop || i < 1000; i++) {
        _hpcmem_trace_event(HPCMEM_EV_MALLOC, fp(0x10000000ull * (t + 1) + 16 * (uint64_t)i), i + 1, nullptr, 0);
        progress[t].store(i, std::memory_order_relaxed);
      }
      counts[t] = i;
    });
  while (started < nt) sched_yield();
  for (int f = 0; f < flushes; f++) {
    // each flush finds new records in both buffers: the threads moved on
    int p0 = progress[0], p1 = progress[1];
    while (progress[0] < p0 + 100 || progress[1] < p1 + 100) sched_yield();
    _hpcmem_trace_flush_all(HMT_FLUSH_EXPLICIT);
  }
  stop = true;
  for (auto &x : th) x.join();
  hpcmem_trace_stats_t st;
  _hpcmem_trace_get_stats(&st);
  _hpcmem_trace_shutdown();
  ReadBack rb = read_back(only_file(dir));
  ASSERT_EQ(rb.rc, 0) << rb.error;
  EXPECT_GE(st.blocks, (uint64_t)flushes * nt) << "every flush wrote both threads' partial buffers";
  std::map<uint32_t, std::vector<hmt_event_t>> by_tid;
  for (auto &e : rb.events) by_tid[e.tid].push_back(e);
  for (int t = 0; t < nt; t++) {
    auto &v = by_tid[(uint32_t)tids[t]];
    ASSERT_EQ(v.size(), (size_t)counts[t]) << "thread " << t;
    for (int i = 0; i < counts[t]; i++) {
      ASSERT_EQ(v[i].ptr, FAKE + 0x10000000ull * (t + 1) + 16 * (uint64_t)i) << "thread " << t << " event " << i;
      ASSERT_EQ(v[i].size, (uint64_t)i + 1);
    }
  }
  rm_rf(dir);
}

// Full buffers are written by the writer thread, in order, while the
// recording thread goes on in its other half.
TEST(trace_writer, writes_full_halves_in_order) {
  std::string dir = make_tmpdir();
  start_trace(dir, {"HPCMEM_TRACE_BUFFER=64K"});
  auto want = record_sequence(200000, FAKE + 0x1000, 11);
  hpcmem_trace_stats_t st;
  _hpcmem_trace_get_stats(&st);
  _hpcmem_trace_shutdown();
  ReadBack rb = read_back(only_file(dir));
  ASSERT_EQ(rb.rc, 0) << rb.error;
  expect_same(want, rb.events);
  ASSERT_TRUE(rb.info.flush.present);
  EXPECT_GT(rb.info.flush.writer_blocks, 0u) << "the writer thread wrote some of the blocks";
  EXPECT_LE(rb.info.flush.writer_blocks, rb.info.flush.blocks);
  EXPECT_EQ(rb.info.flush.dropped, 0u);
  rm_rf(dir);
}

// A sequence like an allocator's: addresses reused last-freed-first per
// size, fresh ones bumped through spans, long-lived blocks freed many
// blocks later, reallocs, frees of blocks no event allocated (another
// thread's) and the same address allocated again -- what the format 1.2
// models predict, and where they must fall back.
std::vector<Expected> record_allocator_like(int n, uint64_t base, unsigned seed) {
  std::vector<Expected> ev;
  std::map<uint64_t, std::vector<uint64_t>> freed;  // size -> addresses
  std::map<uint64_t, uint64_t> bump;                // size -> next fresh address
  std::vector<std::pair<uint64_t, uint64_t>> live;  // (address, size)
  unsigned x = seed;
  auto rnd = [&x]() { x = x * 1103515245u + 12345u; return x >> 8; };
  static const uint64_t sizes[] = {24, 32, 48, 100, 256, 1000, 5000, 70000};
  uint64_t region = 0;
  for (int i = 0; i < n; i++) {
    unsigned r = rnd() % 16;
    Expected e{};
    e.site = (int)(rnd() % 4);
    if (r < 7 || live.size() < 4) {
      uint64_t size = sizes[rnd() % 8];
      e.type = r == 1 ? HPCMEM_EV_CALLOC : r == 2 ? HPCMEM_EV_MEMALIGN : HPCMEM_EV_MALLOC;
      auto &f = freed[size];
      if (!f.empty() && rnd() % 8) { e.ptr = f.back(); f.pop_back(); }
      else {
        if (!bump[size]) bump[size] = base + (++region << 28);
        e.ptr = bump[size]; bump[size] += size;
      }
      e.size = size;
      e.align = e.type == HPCMEM_EV_MEMALIGN ? 16 : 0;
      live.push_back({e.ptr, size});
    } else if (r < 9) {
      size_t k = rnd() % live.size();
      e.type = HPCMEM_EV_REALLOC;
      e.old_ptr = live[k].first;
      e.size = live[k].second * 2;
      e.ptr = rnd() % 2 ? e.old_ptr : base + (++region << 28);
      live[k] = {e.ptr, e.size};
    } else if (r < 10) {
      e.type = HPCMEM_EV_FREE;  // allocated by no event here
      e.ptr = base + 0x10 + 16 * (rnd() % 1000);
      e.site = -1;
    } else {
      // mostly the latest blocks, sometimes one from long ago
      size_t k = rnd() % 4 ? live.size() - 1 - rnd() % std::min<size_t>(live.size(), 8) : rnd() % live.size();
      e.type = HPCMEM_EV_FREE;
      e.ptr = live[k].first;
      freed[live[k].second].push_back(e.ptr);
      live.erase(live.begin() + (long)k);
      e.site = -1;
    }
    sites[e.site < 0 ? 0 : e.site](e.type, e.ptr, e.size, e.old_ptr, e.align);
    ev.push_back(e);
  }
  return ev;
}

// The EVENTS blocks of a file: (offset, header).
std::vector<std::pair<size_t, hmt_block_t>> event_blocks(const std::vector<uint8_t> &f) {
  std::vector<std::pair<size_t, hmt_block_t>> out;
  for (size_t off = HMT_HEADER_SIZE; off + HMT_BLOCK_HEADER_SIZE <= f.size();) {
    hmt_block_t b;
    if (hmt_block_decode(&f[off], f.size() - off, &b) != HMT_OK) break;
    if (b.type == HMT_BLOCK_EVENTS) out.push_back({off, b});
    off += HMT_BLOCK_HEADER_SIZE + b.stored_len;
  }
  return out;
}

std::vector<uint8_t> file_bytes(const std::string &path) {
  std::ifstream in(path, std::ios::binary);
  return std::vector<uint8_t>((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

void put_file(const std::string &path, const std::vector<uint8_t> &b) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write((const char *)b.data(), (std::streamsize)b.size());
}

// Format 1.2 (in the split blocks of 1.3, zstd) and format 1.4 (model):
// the models continue across a thread's blocks, frees name allocations of
// earlier blocks, and every event still comes back exactly; a damaged block
// takes the thread's later chained blocks with it in salvage mode, and a
// cut file is read to its last whole block.
class TraceChained : public ::testing::TestWithParam<const char *> {};

TEST_P(TraceChained, chained_models_round_trip_exactly) {
  std::string dir = make_tmpdir();
  const bool m4 = std::string(GetParam()) == "model";
  start_trace(dir, {"HPCMEM_TRACE_BUFFER=64K", std::string("HPCMEM_TRACE_COMPRESS=") + GetParam()});
  auto want = record_allocator_like(60000, FAKE + 0x1000, 5);
  // another thread, whose buffer is then reused by a third one
  std::vector<Expected> t2, t3;
  std::thread([&t2] { t2 = record_allocator_like(3000, FAKE + 0x40000000000ull, 6); _hpcmem_trace_thread_exit(); }).join();
  std::thread([&t3] { t3 = record_allocator_like(3000, FAKE + 0x50000000000ull, 7); _hpcmem_trace_thread_exit(); }).join();
  _hpcmem_trace_shutdown();
  std::string path = only_file(dir);
  ReadBack rb = read_back(path);
  ASSERT_EQ(rb.rc, 0) << rb.error;
  std::map<uint32_t, std::vector<hmt_event_t>> by_tid;
  for (auto &e : rb.events) by_tid[e.tid].push_back(e);
  std::vector<std::vector<Expected>> wants = {want, t2, t3};
  if (by_tid.size() == 2) {  // the kernel gave the third thread the second one's id
    wants[1].insert(wants[1].end(), t3.begin(), t3.end());
    wants.pop_back();
  }
  ASSERT_EQ(by_tid.size(), wants.size());
  std::vector<std::vector<hmt_event_t>> gots;
  for (auto &t : by_tid) gots.push_back(t.second);
  std::sort(gots.begin(), gots.end(), [](auto &a, auto &b) { return a[0].ptr < b[0].ptr; });
  for (size_t i = 0; i < wants.size(); i++) { SCOPED_TRACE("thread " + std::to_string(i)); expect_same(wants[i], gots[i]); }
  auto f = file_bytes(path);
  auto blocks = event_blocks(f);
  size_t chained = 0, models = 0, split = 0, coded = 0, plain = 0, plain_few = 0;
  for (auto &b : blocks) {
    models += (b.second.flags & HMT_BF_MODELS) != 0;
    chained += (b.second.flags & HMT_BF_CHAIN) != 0;
    split += (b.second.flags & HMT_BF_SPLIT) != 0;
    coded += b.second.codec == HMT_CODEC_MODEL && (b.second.flags & ~HMT_BF_CHAIN) == HMT_BF_M4;
    plain += b.second.codec == HMT_CODEC_NONE;
    plain_few += b.second.codec == HMT_CODEC_NONE && b.second.count <= 64;
  }
  // every block's thread, codec, flags and events, said when a check fails
  std::string table;
  for (auto &b : blocks)
    table += " [tid " + std::to_string(b.second.tid) + " codec " + std::to_string(b.second.codec) + " flags " +
             std::to_string(b.second.flags) + " events " + std::to_string(b.second.count) + "]";
  SCOPED_TRACE("blocks:" + table);
  // A block of a few events goes out as plain rows: compression does not
  // shrink it.  The writer thread makes one when it writes a thread's buffer
  // just after the thread began (its test of a buffer's age, too_old in
  // trace.c, reads a segment position that may be stale): beside the stress
  // test, 6 runs of 197 had a block of 2 - 12 of the second thread's first
  // events, and every event still came back.  At most one for each of the
  // two threads that start.
  EXPECT_EQ(plain, plain_few) << "only a block of a few events is not compressed";
  EXPECT_LE(plain, 2u);
  if (m4) {
    EXPECT_EQ(coded, blocks.size() - plain) << "format 1.4: every compressed block coded under the models";
  } else {
    EXPECT_EQ(models, blocks.size() - plain) << "every compressed block has the models";
    EXPECT_EQ(split, blocks.size() - plain) << "format 1.3: every compressed block's streams compressed one by one";
  }
  EXPECT_GE(chained, 3u);
  EXPECT_LE(chained, blocks.size() - 3) << "each thread's first block starts afresh";
  EXPECT_EQ(hmt_ld16(&f[10]), HMT_VERSION_MINOR);
  // damage the payload of the main thread's second block
  size_t k = 0;
  while (k < blocks.size() && !(blocks[k].second.flags & HMT_BF_CHAIN)) k++;
  ASSERT_LT(k, blocks.size());
  uint32_t tid = blocks[k].second.tid;
  size_t later = 0;
  for (size_t j = k + 1; j < blocks.size() && (blocks[j].second.flags & HMT_BF_CHAIN); j++)
    later += blocks[j].second.tid == tid;
  auto x = f;
  x[blocks[k].first + HMT_BLOCK_HEADER_SIZE + 5] ^= 0x40;
  put_file(dir + "/damaged.hmt", x);
  ReadBack bad = read_back(dir + "/damaged.hmt");
  EXPECT_LT(bad.rc, 0);
  EXPECT_NE(bad.error.find("offset " + std::to_string(blocks[k].first)), std::string::npos) << bad.error;
  ReadBack salv = read_back(dir + "/damaged.hmt", HMT_OPEN_SALVAGE);
  ASSERT_EQ(salv.rc, 0) << salv.error;
  EXPECT_GE(salv.info.skipped_blocks, 1 + later) << "the chained blocks after it cannot be decoded";
  EXPECT_LT(salv.events.size(), rb.events.size());
  EXPECT_GE(salv.events.size(), t2.size() + t3.size());
  // cut inside the last EVENTS block: everything before it is read
  size_t cut = blocks.back().first + HMT_BLOCK_HEADER_SIZE + 7;
  put_file(dir + "/cut.hmt", std::vector<uint8_t>(f.begin(), f.begin() + (long)cut));
  ReadBack c = read_back(dir + "/cut.hmt");
  ASSERT_EQ(c.rc, 0) << c.error;
  EXPECT_TRUE(c.info.truncated);
  EXPECT_LT(c.events.size(), rb.events.size());
  EXPECT_GE(c.events.size(), rb.events.size() - blocks.back().second.count);
  rm_rf(dir);
}

INSTANTIATE_TEST_SUITE_P(trace_event, TraceChained, ::testing::Values("zstd", "model"));

// Format 1.4 on a thread whose live set is far beyond the tracked limit
// (4,096 for a 64K buffer): its blocks switch to tracking 1,024 (the
// tracked allocations moved to small arrays), try the full limit again
// later, stay chained throughout, and every event comes back exactly.
TEST(trace_event, model_lowers_the_tracked_limit_of_a_thrashing_thread) {
  std::string dir = make_tmpdir();
  start_trace(dir, {"HPCMEM_TRACE_BUFFER=64K", "HPCMEM_TRACE_COMPRESS=model"});
  std::vector<Expected> want;
  for (int round = 0; round < 12; round++) {
    for (int i = 0; i < 20000; i++) {
      uint64_t p = FAKE + 0x1000000 + 64 * (uint64_t)i;
      sites[i % 2](HPCMEM_EV_MALLOC, p, 48, 0, 0);
      want.push_back({HPCMEM_EV_MALLOC, 0, p, 0, 48, 0, i % 2});
    }
    for (int i = 20000; i-- > 0;) {
      uint64_t p = FAKE + 0x1000000 + 64 * (uint64_t)((i * 7919) % 20000);  // not the order they came in
      _hpcmem_trace_event(HPCMEM_EV_FREE, fp(p - FAKE), 0, nullptr, 0);
      want.push_back({HPCMEM_EV_FREE, 0, p, 0, 0, 0, -1});
    }
  }
  _hpcmem_trace_shutdown();
  std::string path = only_file(dir);
  ReadBack rb = read_back(path);
  ASSERT_EQ(rb.rc, 0) << rb.error;
  expect_same(want, rb.events);
  auto f = file_bytes(path);
  size_t low = 0, full = 0, unchained = 0;
  for (auto &b : event_blocks(f)) {
    unsigned shift = 0;
    uint32_t nmax = 0;
    ASSERT_GT(hmt_m4_head(&f[b.first + HMT_BLOCK_HEADER_SIZE], b.second.stored_len, &shift, &nmax), 0u);
    low += nmax == 1024;
    full += nmax == 4096;
    unchained += !(b.second.flags & HMT_BF_CHAIN);
  }
  EXPECT_GT(low, 20u) << "blocks of the thrashing thread track 1,024";
  EXPECT_GE(full, 3u) << "the first blocks, and a try every 32nd block";
  EXPECT_LE(unchained, 2u) << "the limit changes within the chain";
  rm_rf(dir);
}

// Format 1.4 keeps exactly what its models cannot predict: sizes and
// addresses at the ends of the 64-bit range, frees of blocks another thread
// allocated (that thread tracked them; the freeing one names them by
// address), a thread's frees of blocks the first thread frees too, reallocs
// to and from null, memalign, and the same address given out again after
// another thread freed it.
TEST(trace_event, model_keeps_extreme_values_and_cross_thread_frees) {
  std::string dir = make_tmpdir();
  start_trace(dir, {"HPCMEM_TRACE_BUFFER=64K", "HPCMEM_TRACE_COMPRESS=model"});
  const uint64_t top = ~0ull - 0xfff, huge = 1ull << 62;
  std::vector<Expected> a, b;
  auto ev = [](std::vector<Expected> &v, unsigned type, uint64_t p, uint64_t size, uint64_t old, uint64_t align) {
    sites[v.size() % 4](type, p, size, old, align);
    v.push_back({type, 0, p, old, size, align, (int)(v.size() % 4)});
  };
  for (int round = 0; round < 300; round++) {
    uint64_t x = FAKE + 0x100000 + 0x1000 * (uint64_t)round;
    ev(a, HPCMEM_EV_MALLOC, x, 24, 0, 0);
    ev(a, HPCMEM_EV_MALLOC, top - 16 * (uint64_t)round, ~0ull - (uint64_t)round, 0, 0);
    ev(a, HPCMEM_EV_MEMALIGN, x + 0x800, huge + (uint64_t)round, 0, 1ull << 40);
    ev(a, HPCMEM_EV_REALLOC, x + 0x900, 0, 0, 0);          /* realloc(NULL, 0) */
    ev(a, HPCMEM_EV_REALLOC, 0, 0, x + 0x900, 0);          /* realloc(p, 0): freed */
    ev(a, HPCMEM_EV_CALLOC, 16 + 16 * (uint64_t)round, 0, 0, 0);  /* low addresses */
    ev(a, HPCMEM_EV_FREE, top - 16 * (uint64_t)round, 0, 0, 0);
  }
  // the other thread frees the first thread's blocks x, and allocates at
  // their addresses again, which the first thread then frees
  std::thread([&] {
    for (int round = 0; round < 300; round++) {
      uint64_t x = FAKE + 0x100000 + 0x1000 * (uint64_t)round;
      ev(b, HPCMEM_EV_FREE, x, 0, 0, 0);
      ev(b, HPCMEM_EV_MALLOC, x, 40, 0, 0);
    }
    _hpcmem_trace_thread_exit();
  }).join();
  for (int round = 0; round < 300; round++) ev(a, HPCMEM_EV_FREE, FAKE + 0x100000 + 0x1000 * (uint64_t)round, 0, 0, 0);
  _hpcmem_trace_shutdown();
  hmt_reader_t *r;
  hmt_error_t err;
  ASSERT_EQ(hmt_open(only_file(dir).c_str(), 0, &r, &err), 0) << err.message;
  std::map<uint32_t, std::vector<hmt_event_t>> by_tid;
  hmt_event_t e;
  int k;
  std::set<uint64_t> mine;
  for (auto *v : {&a, &b})
    for (auto &x : *v) { mine.insert(x.ptr); mine.insert(x.old_ptr); }
  mine.erase(0);
  while ((k = hmt_next(r, &e)) == 1)
    if (mine.count(e.ptr) || mine.count(e.old_ptr)) by_tid[e.tid].push_back(e);
  ASSERT_EQ(k, 0) << hmt_error(r)->message;
  hmt_close(r);
  ASSERT_EQ(by_tid.size(), 2u);
  std::vector<std::vector<hmt_event_t>> got;
  for (auto &t : by_tid) got.push_back(t.second);
  if (got[0].size() != a.size()) std::swap(got[0], got[1]);
  { SCOPED_TRACE("first thread"); expect_same(a, got[0]); }
  { SCOPED_TRACE("second thread"); expect_same(b, got[1]); }
  rm_rf(dir);
}

// The format's size classes are a prediction of libhpcmem's: keep them equal.
TEST(trace_event, model_classes_are_libhpcmem_classes) {
  for (size_t n = 1; n <= HPCMEM_SMALL_MAX; n++) {
    ASSERT_EQ(hmt_c2_class(n), _hpcmem_size_class(n)) << "size " << n;
  }
  EXPECT_EQ(hmt_c2_class(0), hmt_c2_class(1));
  EXPECT_LT(hmt_c2_class(UINT64_MAX), (unsigned)HMT_C2_NCLASS);
}

// A thread's buffer is written when it exits and reused by the next thread.
TEST(trace_thread_exit, flushes_and_recycles_the_buffer) {
  std::string dir = make_tmpdir();
  start_trace(dir, {});
  for (int round = 0; round < 5; round++) {
    std::thread([round] {
      for (int i = 0; i < 100; i++)
        _hpcmem_trace_event(HPCMEM_EV_MALLOC, fp(0x1000 * (round * 100 + i + 1)), 8, nullptr, 0);
      _hpcmem_trace_thread_exit();
    }).join();
  }
  hpcmem_trace_stats_t st;
  _hpcmem_trace_get_stats(&st);
  EXPECT_LE(st.threads, 2u) << "exited threads' buffers are reused (the main thread may have one)";
  EXPECT_GE(st.blocks, 5u) << "one block per exiting thread";
  _hpcmem_trace_shutdown();
  ReadBack rb = read_back(only_file(dir));
  ASSERT_EQ(rb.rc, 0) << rb.error;
  ASSERT_EQ(rb.events.size(), 500u);
  for (int i = 0; i < 500; i++) EXPECT_EQ(rb.events[i].ptr, FAKE + 0x1000u * (i + 1));
  rm_rf(dir);
}

// A thread that records events after its exit hook (a thread-specific
// destructor of glibc's last round allocates) keeps its buffer until it is
// gone; the next thread to start writes it out and frees it
// (_hpcmem_thread_cache, which gives gone threads' late caches back).
namespace {
pthread_key_t late_key;
void late_destructor(void *v) {
  long round = (long)v;
  if (round < PTHREAD_DESTRUCTOR_ITERATIONS) {
    pthread_setspecific(late_key, (void *)(round + 1));
    return;
  }
  for (int i = 0; i < 10; i++) free(malloc(24));    // after libhpcmem's hook ran for the last time
}
}  // namespace

TEST(trace_thread_gone, writes_and_recycles_the_buffer_of_a_gone_thread) {
  std::string dir = make_tmpdir();
  start_trace(dir, {});
  ASSERT_EQ(pthread_key_create(&late_key, late_destructor), 0);
  hpcmem_trace_stats_t before, after;
  _hpcmem_trace_get_stats(&before);
  std::vector<int> tids;
  for (int round = 0; round < 8; round++) {
    int tid = 0;
    std::thread([&tid] {
      tid = _hpcmem_trace_tid();
      free(malloc(24));
      pthread_setspecific(late_key, (void *)1L);
    }).join();
    tids.push_back(tid);
  }
  for (int tid : tids)
    for (int i = 0; i < 1000 && _hpcmem_prim_thread_alive(tid); i++) usleep(1000);
  std::thread([] { free(malloc(24)); }).join();     // a new thread's cache: gone threads' go back first
  _hpcmem_trace_get_stats(&after);
  EXPECT_LE(after.threads, before.threads + 2) << "each gone thread kept a buffer";
  EXPECT_EQ(pthread_key_delete(late_key), 0);
  _hpcmem_trace_shutdown();
  ReadBack rb = read_back(only_file(dir));
  EXPECT_EQ(rb.rc, 0) << rb.error;
  rm_rf(dir);
}

// The recorder's memory does not grow with the number of events.
TEST(trace_event, memory_is_bounded_by_the_buffer) {
  std::string dir = make_tmpdir();
  start_trace(dir, {"HPCMEM_TRACE_BUFFER=64K"});
  auto run = [](int n, uint64_t base) {
    for (int i = 0; i < n; i++) sites[i % 4](HPCMEM_EV_MALLOC, base + 64 * i, 64, 0, 0);
  };
  auto churn = [](int n, uint64_t base) {
    for (int i = 0; i < n; i++) {
      sites[i % 4](HPCMEM_EV_MALLOC, base + 64 * (i % 1000), 64, 0, 0);
      _hpcmem_trace_event(HPCMEM_EV_FREE, fp(base + 64 * (i % 1000)), 0, nullptr, 0);
    }
  };
  churn(20000, FAKE + 0x10000000);
  hpcmem_trace_stats_t a, b, c, d;
  _hpcmem_trace_get_stats(&a);
  churn(200000, FAKE + 0x10000000);
  _hpcmem_trace_get_stats(&b);
  EXPECT_EQ(a.memory_bytes, b.memory_bytes) << "a small live set";
  EXPECT_GT(b.blocks, a.blocks);
  // the map of live allocations grows with the live set, up to
  // HPCMEM_TRACE_BUFFER entries of 16 bytes
  run(200000, FAKE + 0x20000000);
  _hpcmem_trace_get_stats(&c);
  run(200000, FAKE + 0x30000000);
  _hpcmem_trace_get_stats(&d);
  EXPECT_EQ(c.memory_bytes, d.memory_bytes) << "the live map stops at its bound";
  EXPECT_LE(d.memory_bytes, b.memory_bytes + 16 * 65536 + 4096);
  EXPECT_LT(d.memory_bytes, 8u << 20) << "buffer, one compressor, a small stack table and the live map";
  _hpcmem_trace_shutdown();
  rm_rf(dir);
}

TEST(trace_init, does_nothing_without_HPCMEM_TRACE) {
  _hpcmem_options_init();
  char *env[] = {nullptr};
  _hpcmem_options_load(env);
  _hpcmem_trace_init();
  EXPECT_EQ(_hpcmem_trace_enabled, 0);
  _hpcmem_trace_event(HPCMEM_EV_MALLOC, fp(0x1000), 1, nullptr, 0);  // ignored, no crash
  _hpcmem_trace_flush_all(HMT_FLUSH_EXIT);
}

TEST(trace_file, is_created_only_when_something_is_written) {
  std::string dir = make_tmpdir() + "/sub/dir";
  start_trace(dir, {});
  EXPECT_STREQ(_hpcmem_trace_path(), "");
  _hpcmem_trace_event(HPCMEM_EV_MALLOC, fp(0x1000), 1, nullptr, 0);
  _hpcmem_trace_flush_all(HMT_FLUSH_EXPLICIT);
  EXPECT_EQ(std::string(_hpcmem_trace_path()), dir + "/rank-0.hmt") << "nested directories are made";
  _hpcmem_trace_shutdown();
  rm_rf(dir.substr(0, dir.size() - 8));
}

TEST(trace_file, never_overwrites_nor_follows_a_symlink) {
  std::string dir = make_tmpdir();
  std::string victim = dir + "/victim";
  { FILE *f = fopen(victim.c_str(), "w"); fputs("precious", f); fclose(f); }
  ASSERT_EQ(symlink(victim.c_str(), (dir + "/rank-0.hmt").c_str()), 0);
  { FILE *f = fopen((dir + "/rank-0-1.hmt").c_str(), "w"); fputs("older trace", f); fclose(f); }
  start_trace(dir, {});
  testing::internal::CaptureStderr();
  _hpcmem_trace_event(HPCMEM_EV_MALLOC, fp(0x1000), 1, nullptr, 0);
  _hpcmem_trace_flush_all(HMT_FLUSH_EXPLICIT);
  std::string err = testing::internal::GetCapturedStderr();
  EXPECT_NE(err.find("exists; not overwriting"), std::string::npos) << err;
  EXPECT_EQ(std::string(_hpcmem_trace_path()), dir + "/rank-0-2.hmt");
  _hpcmem_trace_shutdown();
  char buf[64] = {0};
  FILE *f = fopen(victim.c_str(), "r");
  ASSERT_TRUE(f);
  EXPECT_TRUE(fgets(buf, sizeof buf, f));
  fclose(f);
  EXPECT_STREQ(buf, "precious");
  f = fopen((dir + "/rank-0-1.hmt").c_str(), "r");
  EXPECT_TRUE(fgets(buf, sizeof buf, f));
  fclose(f);
  EXPECT_STREQ(buf, "older trace");
  ReadBack rb = read_back(dir + "/rank-0-2.hmt");
  EXPECT_EQ(rb.rc, 0) << rb.error;
  EXPECT_EQ(rb.events.size(), 1u);
  rm_rf(dir);
}

TEST(trace_file, uncreatable_directory_turns_tracing_off_with_a_warning) {
  std::string dir = make_tmpdir();
  { FILE *f = fopen((dir + "/afile").c_str(), "w"); fclose(f); }  // not a directory, even for root
  start_trace(dir + "/afile/sub", {});
  testing::internal::CaptureStderr();
  _hpcmem_trace_event(HPCMEM_EV_MALLOC, fp(0x1000), 1, nullptr, 0);
  _hpcmem_trace_flush_all(HMT_FLUSH_EXPLICIT);
  _hpcmem_trace_event(HPCMEM_EV_MALLOC, fp(0x2000), 1, nullptr, 0);
  _hpcmem_trace_flush_all(HMT_FLUSH_EXPLICIT);
  std::string err = testing::internal::GetCapturedStderr();
  EXPECT_NE(err.find("cannot create directory"), std::string::npos) << err;
  EXPECT_NE(err.find("(HPCMEM_TRACE_DIR)"), std::string::npos) << "names the option: " << err;
  EXPECT_EQ(err.find("cannot create directory"), err.rfind("cannot create directory")) << "warned once: " << err;
  hpcmem_trace_stats_t st;
  _hpcmem_trace_get_stats(&st);
  EXPECT_GE(st.write_errors, 1u);
  _hpcmem_trace_shutdown();
  rm_rf(dir);
}

TEST(trace_set_rank, renames_the_file_and_rewrites_the_header) {
  std::string dir = make_tmpdir();
  start_trace(dir, {});
  _hpcmem_trace_event(HPCMEM_EV_MALLOC, fp(0x1000), 1, nullptr, 0);
  _hpcmem_trace_flush_all(HMT_FLUSH_EXPLICIT);
  _hpcmem_trace_set_rank(3, 4, -12345);
  _hpcmem_trace_event(HPCMEM_EV_FREE, fp(0x1000), 0, nullptr, 0);
  EXPECT_EQ(std::string(_hpcmem_trace_path()), dir + "/rank-3.hmt");
  _hpcmem_trace_shutdown();
  auto f = files_in(dir);
  ASSERT_EQ(f.size(), 1u);
  EXPECT_EQ(f[0], "rank-3.hmt");
  ReadBack rb = read_back(dir + "/rank-3.hmt");
  ASSERT_EQ(rb.rc, 0) << rb.error;
  EXPECT_EQ(rb.header.rank, 3);
  EXPECT_EQ(rb.header.size, 4);
  EXPECT_EQ(rb.header.clock_offset_ns, -12345);
  EXPECT_TRUE(rb.header.flags & HMT_HF_RANK_FROM_MPI);
  EXPECT_EQ(rb.events.size(), 2u);
  rm_rf(dir);
}

TEST(trace_set_rank, before_the_file_exists_names_it_right_away) {
  std::string dir = make_tmpdir();
  start_trace(dir, {});
  _hpcmem_trace_set_rank(2, 3, 0);
  _hpcmem_trace_event(HPCMEM_EV_MALLOC, fp(0x1000), 1, nullptr, 0);
  _hpcmem_trace_shutdown();
  auto f = files_in(dir);
  ASSERT_EQ(f.size(), 1u);
  EXPECT_EQ(f[0], "rank-2.hmt");
  rm_rf(dir);
}

// Time stamps are CLOCK_MONOTONIC nanoseconds (read from the TSC where the
// kernel's clocksource is the TSC): each lies between clock_gettime calls
// made around it, within a small error, also after a while.
TEST(trace_event, times_are_clock_monotonic) {
  std::string dir = make_tmpdir();
  start_trace(dir, {"HPCMEM_TRACE_BUFFER=64K"});
  std::vector<std::pair<uint64_t, uint64_t>> brackets;
  for (int i = 0; i < 4; i++) {
    uint64_t a = _hpcmem_prim_now_ns();
    _hpcmem_trace_event(HPCMEM_EV_MALLOC, fp(0x1000 * (i + 1)), 8, nullptr, 0);
    uint64_t b = _hpcmem_prim_now_ns();
    brackets.push_back({a, b});
    // a full buffer lets the recorder refine its clock
    for (int k = 0; k < 20000; k++) _hpcmem_trace_event(HPCMEM_EV_FREE, fp(0x100000 + k), 0, nullptr, 0);
    usleep(300000);
  }
  _hpcmem_trace_shutdown();
  ReadBack rb = read_back(only_file(dir));
  ASSERT_EQ(rb.rc, 0) << rb.error;
  int n = 0;
  for (auto &e : rb.events) {
    if (e.type != HPCMEM_EV_MALLOC) continue;
    const int64_t slack = 200000;  // 200 us
    EXPECT_GE((int64_t)e.time, (int64_t)brackets[n].first - slack) << n;
    EXPECT_LE((int64_t)e.time, (int64_t)brackets[n].second + slack) << n;
    n++;
  }
  EXPECT_EQ(n, 4);
  rm_rf(dir);
}

// ---- fatal signals -------------------------------------------------------
//
// A child records events, then dies by a signal.  The parent checks that it
// died exactly as it would have without the recorder (same signal) and that
// every event is in the file, followed by a FLUSH block naming the signal.

enum Death { RAISE, FAULT, ABORT };

int run_child_and_die(const std::string &dir, int sig, Death how, int nevents, bool user_handler = false) {
  pid_t pid = fork();
  if (pid == 0) {
    struct rlimit no_core = {0, 0};
    setrlimit(RLIMIT_CORE, &no_core);
    // the default action, whatever the test runner left: a shell's background
    // job (make check &, nohup) starts with SIGINT and SIGQUIT ignored, and
    // the recorder leaves an ignored signal alone
    signal(sig, SIG_DFL);
    if (user_handler) {
      // installed before the recorder: it must still run, after our flush
      signal(sig, [](int) { _exit(42); });
    }
    start_trace(dir, {"HPCMEM_TRACE_BUFFER=64K"});
    for (int i = 0; i < nevents; i++) _hpcmem_trace_event(HPCMEM_EV_MALLOC, fp(0x1000 + 16 * i), i + 1, nullptr, 0);
    if (how == FAULT) {
      volatile int *volatile bad = nullptr;
      *bad = 1;
    }
    else if (how == ABORT) abort();
    else raise(sig);
    _exit(3);  // the signal did not end us
  }
  int status = 0;
  waitpid(pid, &status, 0);
  return status;
}

void expect_all_events(const std::string &dir, int n, int sig) {
  ReadBack rb = read_back(only_file(dir));
  ASSERT_EQ(rb.rc, 0) << rb.error;
  ASSERT_EQ(rb.events.size(), (size_t)n);
  for (int i = 0; i < n; i++) ASSERT_EQ(rb.events[i].ptr, FAKE + 0x1000 + 16 * i) << i;
  ASSERT_TRUE(rb.info.flush.present);
  EXPECT_EQ(rb.info.flush.reason, (uint64_t)(HMT_FLUSH_SIGNAL + sig));
  EXPECT_FALSE(rb.info.truncated);
  EXPECT_FALSE(rb.modules.empty()) << "the modules are known even when the file is made in the handler";
}

class TraceSignal : public ::testing::TestWithParam<int> {};

TEST_P(TraceSignal, flushes_and_dies_by_the_same_signal) {
  int sig = GetParam();
  std::string dir = make_tmpdir();
  int status = run_child_and_die(dir, sig, sig == SIGSEGV ? FAULT : sig == SIGABRT ? ABORT : RAISE, 20000);
  ASSERT_TRUE(WIFSIGNALED(status)) << "status " << status;
  EXPECT_EQ(WTERMSIG(status), sig);
  expect_all_events(dir, 20000, sig);
  rm_rf(dir);
}

INSTANTIATE_TEST_SUITE_P(trace_signals, TraceSignal, ::testing::Values(SIGTERM, SIGINT, SIGSEGV, SIGABRT, SIGBUS));

// The signal comes while the writer thread is busy with a large segment
// (it holds the buffer's lock while it codes and writes): the handler
// waits for it, however long the writer is kept off the CPU, and then
// writes the rest.  A handler that gave up after a fixed number of tries
// (about 2 ms) lost the block and everything after it -- on a busy machine
// a writer preempted for a few ms lost 6,900 of the 20,000 events of the
// test above in 4 runs of 60.  Here every run loses them without the wait:
// 8 MiB buffers, and pairs of malloc and free (few live allocations, so the
// models stay small) fill two segments and a tenth of the third; the
// second goes to the writer, 87,000 events to code; 2 ms gives it the time
// to wake up and take the lock.
TEST(trace_signals, waits_for_the_writer_busy_with_a_segment) {
  const size_t buffer = 8u << 20;
  const long pairs = (long)(buffer / 48 + buffer / 480);  // a pair's raw entries: 48 bytes
  for (int run = 0; run < 5; run++) {
    SCOPED_TRACE("run " + std::to_string(run));
    std::string dir = make_tmpdir();
    pid_t pid = fork();
    if (pid == 0) {
      signal(SIGTERM, SIG_DFL);
      struct rlimit no_core = {0, 0};
      setrlimit(RLIMIT_CORE, &no_core);
      start_trace(dir, {"HPCMEM_TRACE_BUFFER=" + std::to_string(buffer), "HPCMEM_TRACE_DEPTH=0"});
      for (long i = 0; i < pairs; i++) {
        _hpcmem_trace_event(HPCMEM_EV_MALLOC, fp(0x1000 + 16 * (i % 1000)), (size_t)i + 1, nullptr, 0);
        _hpcmem_trace_event(HPCMEM_EV_FREE, fp(0x1000 + 16 * (i % 1000)), 0, nullptr, 0);
      }
      usleep(2000);
      raise(SIGTERM);
      _exit(3);
    }
    int status = 0;
    waitpid(pid, &status, 0);
    ASSERT_TRUE(WIFSIGNALED(status)) << "status " << status;
    EXPECT_EQ(WTERMSIG(status), SIGTERM);
    ReadBack rb = read_back(only_file(dir));
    ASSERT_EQ(rb.rc, 0) << rb.error;
    ASSERT_EQ(rb.events.size(), (size_t)(2 * pairs));
    for (long i = 0; i < 2 * pairs; i++) {
      const hmt_event_t &e = rb.events[(size_t)i];
      ASSERT_EQ(e.type, i % 2 ? HPCMEM_EV_FREE : HPCMEM_EV_MALLOC) << i;
      ASSERT_EQ(e.ptr, FAKE + 0x1000 + 16 * (uint64_t)(i / 2 % 1000)) << i;
      if (i % 2 == 0) { ASSERT_EQ(e.size, (uint64_t)(i / 2 + 1)) << i; }
    }
    ASSERT_TRUE(rb.info.flush.present);
    EXPECT_EQ(rb.info.flush.reason, (uint64_t)(HMT_FLUSH_SIGNAL + SIGTERM));
    EXPECT_EQ(rb.info.flush.write_errors, 0u);
    EXPECT_FALSE(rb.info.truncated);
    rm_rf(dir);
  }
}

TEST(trace_signals, previous_handler_still_runs) {
  std::string dir = make_tmpdir();
  int status = run_child_and_die(dir, SIGTERM, RAISE, 500, true);
  ASSERT_TRUE(WIFEXITED(status)) << "status " << status;
  EXPECT_EQ(WEXITSTATUS(status), 42) << "the application's handler ran";
  expect_all_events(dir, 500, SIGTERM);
  rm_rf(dir);
}

TEST(trace_signals, ignored_signal_stays_ignored) {
  std::string dir = make_tmpdir();
  pid_t pid = fork();
  if (pid == 0) {
    signal(SIGHUP, SIG_IGN);
    start_trace(dir, {});
    _hpcmem_trace_event(HPCMEM_EV_MALLOC, fp(0x1000), 1, nullptr, 0);
    raise(SIGHUP);
    _hpcmem_trace_shutdown();
    _exit(7);
  }
  int status = 0;
  waitpid(pid, &status, 0);
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 7);
  rm_rf(dir);
}

// Events in the EVENTS blocks before the file's last FLUSH block, from the
// block headers (with HPCMEM_TRACE_DEPTH=0 a block's count is its events);
// -1 without a FLUSH block.
long long events_before_last_flush(const std::string &path) {
  FILE *f = fopen(path.c_str(), "rb");
  if (!f) return -1;
  long long sum = 0, at_flush = -1;
  uint8_t h[HMT_BLOCK_HEADER_SIZE];
  if (fseek(f, HMT_HEADER_SIZE, SEEK_SET) == 0)
    while (fread(h, 1, sizeof h, f) == sizeof h) {
      hmt_block_t b;
      if (hmt_block_decode(h, sizeof h, &b) != HMT_OK) break;
      if (b.type == HMT_BLOCK_EVENTS) sum += b.count;
      if (b.type == HMT_BLOCK_FLUSH) at_flush = sum;
      if (fseek(f, b.stored_len, SEEK_CUR) != 0) break;
    }
  fclose(f);
  return at_flush;
}

// While a fatal signal's handler writes the buffers, the other threads go
// on recording, each writing its events through itself from then on, and
// the process ends as soon as the handler returns.  Every event the end
// marker counts must be in a block before it: a thread that committed an
// event after its buffer had been written, and was still writing it (or
// waiting for its lock) when the handler returned, lost it -- the handler
// did not wait for it.  Four threads recording on one CPU, so that the
// scheduler leaves most of them off it in the middle of such a write: before
// the handler wrote the buffers a second time after counting, 13 of 15
// children (every run of the test) died with 1-6 such events lost.
TEST(trace_signals, every_event_the_marker_counts_precedes_it) {
  for (int run = 0; run < 3; run++) {
    SCOPED_TRACE("run " + std::to_string(run));
    std::string dir = make_tmpdir();
    pid_t pid = fork();
    if (pid == 0) {
      signal(SIGTERM, SIG_DFL);
      struct rlimit no_core = {0, 0};
      setrlimit(RLIMIT_CORE, &no_core);
      cpu_set_t one;
      CPU_ZERO(&one);
      CPU_SET(sched_getcpu() < 0 ? 0 : sched_getcpu(), &one);
      sched_setaffinity(0, sizeof one, &one);  // the threads inherit it
      start_trace(dir, {"HPCMEM_TRACE_BUFFER=64K", "HPCMEM_TRACE_DEPTH=0"});
      const int nt = 4;
      static std::atomic<int> started{0};
      for (int t = 0; t < nt; t++)
        std::thread([t] {
          for (uint64_t i = 0;; i++) {
            _hpcmem_trace_event(HPCMEM_EV_MALLOC, fp(((uint64_t)(t + 1) << 32) + 16 * i), 8, nullptr, 0);
            if (i == 1000) started++;
            for (volatile int k = 0; k < 2000; k++) {
            }
          }
        }).detach();
      while (started < nt) sched_yield();
      raise(SIGTERM);
      _exit(3);
    }
    int status = 0;
    waitpid(pid, &status, 0);
    ASSERT_TRUE(WIFSIGNALED(status)) << "status " << status;
    EXPECT_EQ(WTERMSIG(status), SIGTERM);
    std::string path = only_file(dir);
    ReadBack rb = read_back(path);
    ASSERT_EQ(rb.rc, 0) << rb.error;
    ASSERT_TRUE(rb.info.flush.present);
    EXPECT_EQ(rb.info.flush.reason, (uint64_t)(HMT_FLUSH_SIGNAL + SIGTERM));
    EXPECT_GE(rb.info.records, rb.info.flush.events) << "events the marker counts are not in the file";
    EXPECT_GE(events_before_last_flush(path), (long long)rb.info.flush.events)
        << "events the marker counts are missing before it";
    // and no thread lost one in the middle: each one's events are 0, 1, 2, ...
    std::map<uint64_t, uint64_t> next;
    for (auto &e : rb.events) {
      uint64_t t = (e.ptr - FAKE) >> 32, i = ((e.ptr - FAKE) & 0xffffffffu) / 16;
      ASSERT_EQ(i, next[t]) << "thread " << t;
      next[t] = i + 1;
    }
    EXPECT_EQ(next.size(), 4u);
    rm_rf(dir);
  }
}

// SIGKILL cannot be caught: the file still reads up to its last complete
// block, and with a small buffer most events are already there.
TEST(trace_signals, sigkill_leaves_a_readable_file) {
  std::string dir = make_tmpdir();
  int fds[2];
  ASSERT_EQ(pipe(fds), 0);
  pid_t pid = fork();
  if (pid == 0) {
    start_trace(dir, {"HPCMEM_TRACE_BUFFER=64K"});
    for (uint64_t i = 0;; i++) {
      _hpcmem_trace_event(HPCMEM_EV_MALLOC, fp(0x1000 + 16 * (i % 1000000)), 8, nullptr, 0);
      if (i == 200000 && write(fds[1], "x", 1) != 1) _exit(1);
    }
  }
  char c;
  ASSERT_EQ(read(fds[0], &c, 1), 1);
  kill(pid, SIGKILL);
  int status = 0;
  waitpid(pid, &status, 0);
  close(fds[0]); close(fds[1]);
  EXPECT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL);
  ReadBack rb = read_back(only_file(dir));
  ASSERT_EQ(rb.rc, 0) << rb.error;
  EXPECT_GT(rb.events.size(), 150000u);
  EXPECT_FALSE(rb.info.flush.present) << "no flush marker: the process never knew";
  for (size_t i = 0; i < rb.events.size(); i++) ASSERT_EQ(rb.events[i].ptr, FAKE + 0x1000 + 16 * (i % 1000000));
  rm_rf(dir);
}

// A thread that records a little and then stops: the writer thread writes
// its events once they are 2 s old, so SIGKILL later loses none of them.
TEST(trace_writer, writes_old_events_of_a_quiet_thread) {
  std::string dir = make_tmpdir();
  pid_t pid = fork();
  if (pid == 0) {
    start_trace(dir, {});
    for (int i = 0; i < 10; i++) _hpcmem_trace_event(HPCMEM_EV_MALLOC, fp(0x1000 + 16 * i), 8, nullptr, 0);
    usleep(200000);  // the writer starts with the first event after 100 ms
    for (int i = 10; i < 20; i++) _hpcmem_trace_event(HPCMEM_EV_MALLOC, fp(0x1000 + 16 * i), 8, nullptr, 0);
    for (;;) pause();
  }
  usleep(3000000);
  kill(pid, SIGKILL);
  int status = 0;
  waitpid(pid, &status, 0);
  EXPECT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL);
  ReadBack rb = read_back(only_file(dir));
  ASSERT_EQ(rb.rc, 0) << rb.error;
  ASSERT_EQ(rb.events.size(), 20u);
  for (size_t i = 0; i < rb.events.size(); i++) EXPECT_EQ(rb.events[i].ptr, FAKE + 0x1000 + 16 * i);
  rm_rf(dir);
}

// The recorder's cached thread id is prim's gettid, per thread; a fork's
// child has its own, whether the trace runs at the fork or was stopped
// before it (it may start again in the child).
int trace_tid_in_child() {
  if (_hpcmem_trace_tid() != getpid() || _hpcmem_trace_tid() != _hpcmem_prim_gettid()) return 1;
  int rc = 2;
  std::thread([&rc] { rc = _hpcmem_trace_tid() == _hpcmem_prim_gettid() && _hpcmem_trace_tid() != getpid() ? 0 : 3; }).join();
  return rc;
}

TEST(_hpcmem_trace_tid, is_prim_gettid_and_the_child_s_own_after_fork) {
  EXPECT_EQ(_hpcmem_trace_tid(), _hpcmem_prim_gettid());
  int other = 0;
  std::thread([&other] { other = _hpcmem_trace_tid() == _hpcmem_prim_gettid() ? _hpcmem_trace_tid() : -1; }).join();
  EXPECT_GT(other, 0);
  EXPECT_NE(other, _hpcmem_trace_tid());
  for (bool running : {true, false}) {
    std::string dir = make_tmpdir();
    start_trace(dir, {});
    ASSERT_EQ(_hpcmem_trace_tid(), (int)getpid());   // cached in the parent
    if (!running) _hpcmem_trace_shutdown();
    pid_t pid = fork();
    if (pid == 0) _exit(trace_tid_in_child());
    int status = 0;
    ASSERT_EQ(waitpid(pid, &status, 0), pid);
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0)
        << (running ? "trace running" : "trace stopped") << " at the fork: the child's exit "
        << (WIFEXITED(status) ? WEXITSTATUS(status) : -1) << " (1: its main thread's id, 3: another thread's)";
    if (running) _hpcmem_trace_shutdown();
    rm_rf(dir);
  }
}

// fork: the child records into a file of its own; the parent's buffered
// events are not written twice.
TEST(trace_event, fork_child_gets_its_own_file) {
  std::string dir = make_tmpdir();
  start_trace(dir, {});
  _hpcmem_trace_event(HPCMEM_EV_MALLOC, fp(0x1000), 1, nullptr, 0);  // buffered in the parent
  pid_t pid = fork();
  if (pid == 0) {
    site2(HPCMEM_EV_MALLOC, FAKE + 0x2000, 2, 0, 0);
    _hpcmem_trace_flush_all(HMT_FLUSH_EXIT);
    _exit(0);
  }
  int status;
  waitpid(pid, &status, 0);
  _hpcmem_trace_event(HPCMEM_EV_MALLOC, fp(0x3000), 3, nullptr, 0);
  _hpcmem_trace_shutdown();
  auto f = files_in(dir);
  ASSERT_EQ(f.size(), 2u);
  ReadBack a = read_back(dir + "/" + f[0]), b = read_back(dir + "/" + f[1]);
  // whoever wrote first got rank-0.hmt: tell them apart by pid
  ReadBack &parent = a.header.pid == (uint32_t)getpid() ? a : b, &child = &parent == &a ? b : a;
  ASSERT_EQ(parent.rc, 0) << parent.error;
  ASSERT_EQ(child.rc, 0) << child.error;
  ASSERT_EQ(parent.events.size(), 2u);
  EXPECT_EQ(parent.events[1].ptr, FAKE + 0x3000);
  ASSERT_EQ(child.events.size(), 1u);
  EXPECT_EQ(child.events[0].ptr, FAKE + 0x2000);
  EXPECT_EQ(child.header.pid, (uint32_t)pid);
  EXPECT_EQ(child.stacks.size(), 1u) << "the child defines its stacks in its own file";
  rm_rf(dir);
}

}  // namespace
