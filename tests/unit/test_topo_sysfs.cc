// The start-up topology reader (src/topo/sysfs.c) against hwloc: both read
// the same Linux file system tree -- fake trees built here, read by hwloc
// through HWLOC_FSROOT, and this machine's own -- and must give the same
// cpus, topology order, cpu -> node and thread groups at every level.
#include <gtest/gtest.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <pthread.h>
#include <stdio.h>
#include <sys/wait.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <algorithm>
#include <string>
#include <vector>
extern "C" {
#include "topo/topo.h"
#include "topo/machine.h"
#include "util/options.h"
}

namespace {

struct Cpu {
  int package, node, l3, l2, core;
};

std::string list_of(const std::vector<int> &cpus) {
  std::string out;
  for (size_t i = 0; i < cpus.size();) {
    size_t j = i;
    while (j + 1 < cpus.size() && cpus[j + 1] == cpus[j] + 1) j++;
    if (!out.empty()) out += ",";
    out += std::to_string(cpus[i]);
    if (j > i) out += "-" + std::to_string(cpus[j]);
    i = j + 1;
  }
  return out;
}

// Linux's mask format: 32-bit hex words, most significant first.
std::string mask_of(const std::vector<int> &cpus, int n) {
  int words = (n + 31) / 32;
  std::vector<unsigned> w(words > 0 ? words : 1, 0);
  for (int c : cpus) w[c / 32] |= 1u << (c % 32);
  std::string out;
  for (int i = (int)w.size() - 1; i >= 0; i--) {
    char buf[16];
    snprintf(buf, sizeof buf, "%s%08x", out.empty() ? "" : ",", w[i]);
    out += buf;
  }
  return out;
}

void put(const std::string &root, const std::string &path, const std::string &text) {
  std::string full = root + "/" + path;
  for (size_t s = root.size() + 1; (s = full.find('/', s + 1)) != std::string::npos;)
    mkdir(full.substr(0, s).c_str(), 0755);
  FILE *f = fopen(full.c_str(), "w");
  ASSERT_NE(f, nullptr) << full;
  fprintf(f, "%s\n", text.c_str());
  fclose(f);
}

struct Tree {
  std::vector<Cpu> cpus;
  std::vector<int> offline;
  std::vector<int> allowed;  // cgroup v2 cpuset; empty: no cgroup files
  bool numa_dir = true;
};

bool has(const std::vector<int> &v, int x) {
  for (int y : v)
    if (y == x) return true;
  return false;
}

// A sysfs (and procfs) tree as Linux writes it: lists and masks, per-cpu
// topology and caches (L1d, L1i, L2, L3), nodes with meminfo.
std::string build(const Tree &t) {
  char dir[] = "/tmp/hpcmem-sysfs-XXXXXX";
  EXPECT_NE(mkdtemp(dir), nullptr);
  std::string root = dir;
  int n = (int)t.cpus.size();
  std::vector<int> all, online;
  for (int c = 0; c < n; c++) {
    all.push_back(c);
    if (!has(t.offline, c)) online.push_back(c);
  }
  put(root, "sys/devices/system/cpu/online", list_of(online));
  put(root, "sys/devices/system/cpu/possible", list_of(all));
  put(root, "sys/devices/system/cpu/present", list_of(all));
  auto same = [&](int c, int Cpu::*field) {
    std::vector<int> v;
    for (int d = 0; d < n; d++)
      if (t.cpus[d].*field == t.cpus[c].*field && (field == &Cpu::package || t.cpus[d].package == t.cpus[c].package))
        v.push_back(d);
    return v;
  };
  for (int c = 0; c < n; c++) {
    std::string d = "sys/devices/system/cpu/cpu" + std::to_string(c) + "/";
    put(root, d + "online", has(t.offline, c) ? "0" : "1");
    if (has(t.offline, c)) continue;
    struct { const char *name; int Cpu::*field; } topo[] = {
        {"core_cpus", &Cpu::core}, {"thread_siblings", &Cpu::core},
        {"package_cpus", &Cpu::package}, {"core_siblings", &Cpu::package}};
    for (auto &f : topo) {
      put(root, d + "topology/" + f.name, mask_of(same(c, f.field), n));
      put(root, d + "topology/" + f.name + "_list", list_of(same(c, f.field)));
    }
    put(root, d + "topology/physical_package_id", std::to_string(t.cpus[c].package));
    put(root, d + "topology/core_id", std::to_string(t.cpus[c].core));
    struct { int level; const char *type; int Cpu::*field; const char *size; } cache[] = {
        {1, "Data", &Cpu::core, "32K"}, {1, "Instruction", &Cpu::core, "32K"},
        {2, "Unified", &Cpu::l2, "1024K"}, {3, "Unified", &Cpu::l3, "16384K"}};
    for (int i = 0; i < 4; i++) {
      std::string e = d + "cache/index" + std::to_string(i) + "/";
      put(root, e + "level", std::to_string(cache[i].level));
      put(root, e + "type", cache[i].type);
      put(root, e + "size", cache[i].size);
      put(root, e + "coherency_line_size", "64");
      put(root, e + "ways_of_associativity", "8");
      put(root, e + "number_of_sets", "64");
      put(root, e + "physical_line_partition", "1");
      put(root, e + "shared_cpu_map", mask_of(same(c, cache[i].field), n));
      put(root, e + "shared_cpu_list", list_of(same(c, cache[i].field)));
    }
  }
  std::vector<int> nodes;
  for (auto &cpu : t.cpus)
    if (!has(nodes, cpu.node)) nodes.push_back(cpu.node);
  std::sort(nodes.begin(), nodes.end());
  if (t.numa_dir) {
    put(root, "sys/devices/system/node/online", list_of(nodes));
    put(root, "sys/devices/system/node/possible", list_of(nodes));
    for (int node : nodes) {
      std::vector<int> cs;
      for (int c : online)
        if (t.cpus[c].node == node) cs.push_back(c);
      std::string d = "sys/devices/system/node/node" + std::to_string(node) + "/";
      put(root, d + "cpumap", mask_of(cs, n));
      put(root, d + "cpulist", list_of(cs));
      put(root, d + "meminfo", "Node " + std::to_string(node) + " MemTotal:       4194304 kB");
    }
  }
  put(root, "proc/meminfo", "MemTotal:       " + std::to_string(4194304 * nodes.size()) + " kB");
  if (!t.allowed.empty()) {
    put(root, "proc/self/cgroup", "0::/job");
    put(root, "proc/mounts", "cgroup2 /sys/fs/cgroup cgroup2 rw,relatime 0 0");
    put(root, "sys/fs/cgroup/cgroup.controllers", "cpuset cpu memory");
    put(root, "sys/fs/cgroup/job/cpuset.cpus.effective", list_of(t.allowed));
    put(root, "sys/fs/cgroup/job/cpuset.mems.effective", list_of(nodes));
  }
  return root;
}

// Everything the allocator takes from the topology at start.
struct Snapshot {
  std::vector<int> order, numa, nodes;
  std::vector<std::string> levels;
  std::vector<std::vector<int>> groups, homes;
};

const int hints[] = {0, 1, 2, 3, 4, 8, 16, 1000};

Snapshot snapshot() {
  Snapshot s;
  for (int i = 0; _hpcmem_topo_cpu_at(i) >= 0; i++) s.order.push_back(_hpcmem_topo_cpu_at(i));
  for (int c = 0; c < _hpcmem_topo_cpu_limit(); c++) s.numa.push_back(_hpcmem_topo_cpu_numa(c));
  for (int os = 0; os < 64; os++)
    if (_hpcmem_topo_numa_lookup(os) >= 0) s.nodes.push_back(os);
  for (int h : hints) {
    int n = _hpcmem_topo_group_count(h);
    s.levels.push_back(_hpcmem_topo_group_level());
    std::vector<int> g, home;
    for (int c = 0; c < _hpcmem_topo_cpu_limit(); c++) g.push_back(_hpcmem_topo_cpu_group(c));
    for (int i = 0; i < n; i++) home.push_back(_hpcmem_topo_group_numa(i));
    s.groups.push_back(g);
    s.homes.push_back(home);
  }
  _hpcmem_topo_group_count(0);
  return s;
}

Snapshot from_sysfs(const std::string &root) {
  EXPECT_EQ(_hpcmem_topo_load_sysfs(root.c_str()), 0) << root;
  EXPECT_EQ(_hpcmem_topo_detailed(), 0);
  return snapshot();
}

Snapshot from_hwloc(const std::string &root) {
  if (root != "/") setenv("HWLOC_FSROOT", root.c_str(), 1);
  testing::internal::CaptureStderr();
  int rc = _hpcmem_topo_load(nullptr);
  std::string err = testing::internal::GetCapturedStderr();
  unsetenv("HWLOC_FSROOT");
  EXPECT_EQ(rc, 0) << err;
  EXPECT_EQ(_hpcmem_topo_detailed(), 1);
  return snapshot();
}

void expect_same(const Snapshot &a, const Snapshot &b) {
  EXPECT_EQ(a.order, b.order);
  EXPECT_EQ(a.numa, b.numa);
  EXPECT_EQ(a.nodes, b.nodes);
  EXPECT_EQ(a.levels, b.levels);
  for (size_t i = 0; i < sizeof hints / sizeof hints[0]; i++) {
    EXPECT_EQ(a.groups[i], b.groups[i]) << "hint " << hints[i];
    EXPECT_EQ(a.homes[i], b.homes[i]) << "hint " << hints[i];
  }
}

void remove_tree(const std::string &root) {
  std::string cmd = "rm -rf '" + root + "'";
  EXPECT_EQ(system(cmd.c_str()), 0);
}

class topo_load_sysfs : public testing::Test {
 protected:
  void TearDown() override { _hpcmem_topo_load(nullptr); _hpcmem_topo_group_count(0); }
};

TEST_F(topo_load_sysfs, one_node_two_cores_as_hwloc) {
  Tree t;
  t.cpus.push_back({0, 0, 0, 0, 0});
  t.cpus.push_back({0, 0, 0, 1, 1});
  std::string root = build(t);
  Snapshot s = from_sysfs(root);
  EXPECT_EQ(s.order, (std::vector<int>{0, 1}));
  EXPECT_EQ(s.levels[0], "L3 cache");
  expect_same(s, from_hwloc(root));
  remove_tree(root);
}

// Two sockets x two NUMA nodes x four cores, one L3 per socket, cpus
// numbered alternately across the sockets (cpu 1 is on socket 1).
Tree two_sockets() {
  Tree t;
  for (int c = 0; c < 16; c++) {
    int pk = c % 2, core = c / 2;
    t.cpus.push_back({pk, pk * 2 + core / 4, pk, c, c});
  }
  return t;
}

TEST_F(topo_load_sysfs, two_sockets_four_numa_nodes_as_hwloc) {
  std::string root = build(two_sockets());
  Snapshot s = from_sysfs(root);
  EXPECT_EQ(s.order, (std::vector<int>{0, 2, 4, 6, 8, 10, 12, 14, 1, 3, 5, 7, 9, 11, 13, 15}));
  EXPECT_EQ(s.levels[0], "NUMA node");           // NUMA nodes split the L3
  EXPECT_EQ(s.homes[0], (std::vector<int>{0, 1, 2, 3}));
  EXPECT_EQ(s.levels[1], "cpu");
  EXPECT_EQ(s.levels[7], "machine");
  expect_same(s, from_hwloc(root));
  remove_tree(root);
}

TEST_F(topo_load_sysfs, offline_and_cgroup_restricted_cpus_as_hwloc) {
  Tree t = two_sockets();
  t.offline = {3, 4};
  t.allowed = {0, 1, 2, 5, 6, 7, 8, 9, 12, 13};  // 3 and 4 are allowed but offline
  std::string root = build(t);
  Snapshot s = from_sysfs(root);
  EXPECT_EQ(s.order, (std::vector<int>{0, 2, 6, 8, 12, 1, 5, 7, 9, 13}));
  EXPECT_EQ(s.numa[3], -ENODEV);
  EXPECT_EQ(s.numa[10], -ENODEV);
  expect_same(s, from_hwloc(root));
  remove_tree(root);
}

TEST_F(topo_load_sysfs, threads_without_numa_directory_as_hwloc) {
  Tree t;  // 4 cores x 2 threads (siblings numbered +4), L2 per core, no NUMA in the kernel
  for (int c = 0; c < 8; c++) t.cpus.push_back({0, 0, 0, c % 4, c % 4});
  t.numa_dir = false;
  std::string root = build(t);
  Snapshot s = from_sysfs(root);
  EXPECT_EQ(s.order, (std::vector<int>{0, 4, 1, 5, 2, 6, 3, 7}));
  EXPECT_EQ(s.nodes, (std::vector<int>{0}));
  EXPECT_EQ(s.levels[2], "core");
  expect_same(s, from_hwloc(root));
  remove_tree(root);
}

// A cpu whose core, package or cache another cpu's list already named
// reads no list of its own: 4 cores x 2 threads open 63 files for their
// cpus (cpu 0 13, the other first threads 10 each, the second threads 5:
// the index levels and the end of the list), where a reader that read
// every cpu's own lists opened 14 for each, 112.
TEST_F(topo_load_sysfs, a_cpu_reads_no_list_another_cpu_s_list_answered) {
  Tree t;
  for (int c = 0; c < 8; c++) t.cpus.push_back({0, 0, 0, c % 4, c % 4});
  t.numa_dir = false;
  std::string root = build(t);
  int before = _hpcmem_topo_sysfs_files;
  Snapshot s = from_sysfs(root);
  int files = _hpcmem_topo_sysfs_files - before;
  EXPECT_GE(files, 63);
  EXPECT_LE(files, 63 + 8);   // the machine's files: online cpus and nodes, cgroup
  EXPECT_EQ(s.order, (std::vector<int>{0, 4, 1, 5, 2, 6, 3, 7}));
  EXPECT_EQ(s.levels[2], "core");
  expect_same(s, from_hwloc(root));
  remove_tree(root);
}

TEST_F(topo_load_sysfs, this_machine_as_hwloc) {
  if (access("/sys/devices/system/cpu/online", R_OK) != 0) GTEST_SKIP() << "no sysfs";
  Snapshot s = from_sysfs("/");
  Snapshot h = from_hwloc("/");
  if (access("/sys/devices/system/cpu/cpu0/cache", F_OK) != 0) {
    // a kernel that lists no caches (some virtual machines): the groups are
    // the NUMA nodes (docs/topology.md), while hwloc reads caches from CPUID
    EXPECT_EQ(s.order, h.order);
    EXPECT_EQ(s.numa, h.numa);
    EXPECT_EQ(s.nodes, h.nodes);
    EXPECT_EQ(s.levels[0], "NUMA node");
    GTEST_SKIP() << "sysfs lists no caches here: only the cpus and nodes are compared with hwloc's";
  }
  expect_same(s, h);
}

TEST_F(topo_load_sysfs, details_come_from_hwloc_at_first_use) {
  std::string root = build(two_sockets());
  Snapshot before = from_sysfs(root);
  testing::internal::CaptureStderr();
  hpcmem_numa_info_t n;
  ASSERT_EQ(_hpcmem_topo_numa_info(1, &n), 0);   // loads hwloc's view of the same tree
  std::string err = testing::internal::GetCapturedStderr();
  EXPECT_EQ(err, "");
  EXPECT_EQ(_hpcmem_topo_detailed(), 1);
  EXPECT_EQ(n.os_index, 1);
  EXPECT_EQ(n.capacity, 4ULL << 30);
  EXPECT_EQ(n.cpu_count, 4);
  EXPECT_STREQ(n.cpus, "8,10,12,14");
  EXPECT_EQ(_hpcmem_topo_cache_size(3), 16ULL << 20);
  EXPECT_EQ(_hpcmem_topo_core_count(), 16);
  std::vector<int> groups;
  for (int c = 0; c < 16; c++) groups.push_back(_hpcmem_topo_cpu_group(c));
  EXPECT_EQ(groups, before.groups[0]);   // the groups do not move
  remove_tree(root);
}

TEST_F(topo_load_sysfs, bad_roots) {
  EXPECT_EQ(_hpcmem_topo_load_sysfs(nullptr), -EINVAL);
  EXPECT_EQ(_hpcmem_topo_load_sysfs(""), -EINVAL);
  EXPECT_EQ(_hpcmem_topo_load_sysfs("/nonexistent-hpcmem-root"), -ENOENT);
  EXPECT_EQ(_hpcmem_topo_loaded(), 0);
  Tree t;
  t.cpus.push_back({0, 0, 0, 0, 0});
  std::string root = build(t);
  put(root, "sys/devices/system/cpu/online", "0-x");
  EXPECT_EQ(_hpcmem_topo_load_sysfs(root.c_str()), -EINVAL);
  EXPECT_EQ(_hpcmem_topo_loaded(), 0);
  put(root, "sys/devices/system/cpu/online", "");
  EXPECT_EQ(_hpcmem_topo_load_sysfs(root.c_str()), -ENODEV);
  remove_tree(root);
}

// A child forked while another thread of the parent loads hwloc's details
// (held inside the loading by _hpcmem_topo_hwloc_guard) must not wait for
// that thread, which is not in the child: the fork's child handler gives the
// loading up, reads sysfs again, keeps the thread groups as they were (also
// those of HPCMEM_HEAPS), goes without the details and says so.
int guard_in[2], guard_out[2];
void hold_in_loading(int entering) {
  if (!entering) return;
  char c = 1;
  EXPECT_EQ(write(guard_in[1], &c, 1), 1);
  EXPECT_EQ(read(guard_out[0], &c, 1), 1);   // until the test lets go
}
void *ask_for_details(void *) { return (void *)(intptr_t)_hpcmem_topo_core_count(); }

std::vector<int> groups_now() {
  std::vector<int> g;
  for (int c = 0; c < 16; c++) g.push_back(_hpcmem_topo_cpu_group(c));
  return g;
}

// the child's checks; its exit status says which failed (0: none)
int child_after_fork(const std::vector<int> &groups) {
  alarm(20);   // waiting for the parent's thread would end here, killed
  _hpcmem_topo_fork_child();   // as alloc.c's fork handler did already, if this program has it: nothing more
  int cores = _hpcmem_topo_core_count();
  if (!_hpcmem_topo_detailed()) return 11;
  if (cores != 0) return 12;   // the details are gone: sysfs counts no cores
  hpcmem_numa_info_t n;
  if (_hpcmem_topo_numa_info(1, &n) != 0 || n.os_index != 1 || n.cpu_count != 4) return 13;
  if (groups_now() != groups) return 14;
  return 0;
}

// The parent's side: the loading held, fork, the child checked, the
// loading let go on every path (a thread left holding the details' lock
// would hang the tests after this one).
void fork_during_details(const std::string &root) {
  std::vector<int> groups = groups_now();
  ASSERT_EQ(pipe(guard_in), 0);
  ASSERT_EQ(pipe(guard_out), 0);
  void (*old_guard)(int) = _hpcmem_topo_hwloc_guard;
  _hpcmem_topo_hwloc_guard = hold_in_loading;
  pthread_t th;
  ASSERT_EQ(pthread_create(&th, nullptr, ask_for_details, nullptr), 0);
  // the thread holds the details' lock once it writes (within 20 s: a
  // fixture that loaded nothing never gets there)
  char c;
  struct pollfd in = {guard_in[0], POLLIN, 0};
  int held = poll(&in, 1, 20000) == 1 && read(guard_in[0], &c, 1) == 1;
  EXPECT_TRUE(held) << "the thread did not reach the loading";
  // the child's stderr, from the fork on (the fork's handler speaks first)
  std::string err_path = root + "-child-stderr";
  fflush(stderr);
  int saved = dup(2), file = open(err_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
  EXPECT_GE(file, 0);
  pid_t pid = -1;
  if (held && saved >= 0 && file >= 0 && dup2(file, 2) == 2) {
    pid = fork();
    if (pid == 0) _exit(child_after_fork(groups));
    dup2(saved, 2);
  }
  if (saved >= 0) close(saved);
  if (file >= 0) close(file);
  // the child, within 20 s (the fork's handler runs before its alarm is set)
  int status = -1;
  for (int ms = 0; pid > 0; ms += 10) {
    pid_t w = waitpid(pid, &status, WNOHANG);
    if (w == pid) break;
    if (w < 0 || ms >= 20000) {
      ADD_FAILURE() << "the child did not end within 20 s";
      kill(pid, SIGKILL);
      waitpid(pid, &status, 0);
      break;
    }
    usleep(10000);
  }
  c = 1;
  EXPECT_EQ(write(guard_out[1], &c, 1), 1);   // the parent's loading goes on
  void *cores = nullptr;
  EXPECT_EQ(pthread_join(th, &cores), 0);
  _hpcmem_topo_hwloc_guard = old_guard;
  for (int fd : {guard_in[0], guard_in[1], guard_out[0], guard_out[1]}) close(fd);
  ASSERT_GT(pid, 0);
  EXPECT_TRUE(WIFEXITED(status)) << "the child did not end by itself (status " << status << ")";
  EXPECT_EQ(WEXITSTATUS(status), 0) << "the child's check " << WEXITSTATUS(status) << " failed";
  FILE *f = fopen(err_path.c_str(), "r");
  ASSERT_NE(f, nullptr);
  std::string err;
  for (char line[512]; fgets(line, sizeof line, f);) err += line;
  fclose(f);
  unlink(err_path.c_str());
  EXPECT_NE(err.find("was forked while another thread was reading the machine's details"), std::string::npos) << err;
  EXPECT_EQ((intptr_t)cores, 16);   // the parent's thread got its details
  EXPECT_EQ(_hpcmem_topo_detailed(), 1);
  EXPECT_EQ(groups_now(), groups);
}

TEST_F(topo_load_sysfs, _hpcmem_topo_fork_child_gives_up_a_loading_of_the_details) {
  std::string root = build(two_sockets());
  from_sysfs(root);
  fork_during_details(root);
  remove_tree(root);
}

TEST_F(topo_load_sysfs, _hpcmem_topo_fork_child_keeps_the_groups_of_HPCMEM_HEAPS) {
  std::string root = build(two_sockets());
  from_sysfs(root);
  char heaps[] = "HPCMEM_HEAPS=3";
  char *env[] = {heaps, nullptr};
  _hpcmem_options_load(env);
  EXPECT_EQ(_hpcmem_topo_group_count(0), 3);
  fork_during_details(root);
  char *none[] = {nullptr};
  _hpcmem_options_load(none);
  remove_tree(root);
}

// What the allocator sizes its heap slices by at start, instead of
// sysconf(_SC_NPROCESSORS_CONF) (which parses the same file with strtoul).
TEST(_hpcmem_topo_sysfs_possible_cpus, counts_the_list_and_rejects_bad_files) {
  if (access("/sys/devices/system/cpu/possible", R_OK) == 0) {
    EXPECT_EQ(_hpcmem_topo_sysfs_possible_cpus("/"), sysconf(_SC_NPROCESSORS_CONF));
  }
  EXPECT_EQ(_hpcmem_topo_sysfs_possible_cpus(nullptr), -EINVAL);
  EXPECT_EQ(_hpcmem_topo_sysfs_possible_cpus(""), -EINVAL);
  EXPECT_EQ(_hpcmem_topo_sysfs_possible_cpus("/nonexistent-hpcmem-root"), -ENOENT);
  char tmpl[] = "/tmp/hpcmem-possible-XXXXXX";
  ASSERT_NE(mkdtemp(tmpl), nullptr);
  std::string root = tmpl;
  const char *file = "sys/devices/system/cpu/possible";
  put(root, file, "0-3,8,10-11");
  EXPECT_EQ(_hpcmem_topo_sysfs_possible_cpus(root.c_str()), 7);
  put(root, file, "0");
  EXPECT_EQ(_hpcmem_topo_sysfs_possible_cpus((root + "//").c_str()), 1);
  put(root, file, "0-4095,4096-9999");   // beyond the cpu tables: not counted
  EXPECT_EQ(_hpcmem_topo_sysfs_possible_cpus(root.c_str()), 4096);
  put(root, file, "0-x");
  EXPECT_EQ(_hpcmem_topo_sysfs_possible_cpus(root.c_str()), -EINVAL);
  put(root, file, "");
  EXPECT_EQ(_hpcmem_topo_sysfs_possible_cpus(root.c_str()), -ENODEV);
  remove_tree(root);
}

}  // namespace
