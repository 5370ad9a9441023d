// Unit tests of the topology layer (src/topo/topo.c), replaying the saved
// machines of tests/data/ (see docs/topology.md for what each one models):
//   plain-1numa.xml       1 package, 1 NUMA node (16 GiB), 4 cores x 2 threads, one L3
//   2socket-4numa.xml     2 packages x 2 dies; one NUMA node (32 GiB) and one L3 per die;
//                         4 cores x 2 threads per die, siblings numbered +16; HMAT-like
//                         bandwidth/latency
//   knl-snc4-flat.xml     KNL 7210-like, SNC-4 flat: DRAM nodes 0-3 (24 GiB), MCDRAM nodes
//                         4-7 (4 GiB, subtype MCDRAM), 64 cores x 4 threads, cpu = core + 64*thread,
//                         L2 per 2-core tile
//   2socket-dram-nvm.xml  2 packages, DRAM nodes 0-1 (96 GiB) and persistent-memory nodes 2-3
//                         (768 GiB) told apart only by bandwidth/latency attributes
#include <gtest/gtest.h>
#include <hwloc.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>
#include <string>
#include <vector>
extern "C" {
#include "topo/topo.h"
#include "util/options.h"
}

namespace {

const uint64_t GiB = 1ULL << 30;

std::string data(const char *name) {
  const char *top = getenv("top_srcdir");
  return std::string(top && *top ? top : TOP_SRCDIR) + "/tests/data/" + name;
}

void set_options(std::vector<std::string> vars) {
  std::vector<char *> env;
  for (auto &v : vars) env.push_back(&v[0]);
  env.push_back(nullptr);
  _hpcmem_options_load(env.data());
}

struct Loaded {
  int rc;
  std::string err;
};

// Load (path may be NULL) and return the result and what went to stderr.
Loaded load(const char *path) {
  testing::internal::CaptureStderr();
  int rc = _hpcmem_topo_load(path);
  return {rc, testing::internal::GetCapturedStderr()};
}

Loaded load(const std::string &path) { return load(path.c_str()); }

std::string temp_file(const char *contents) {
  char name[] = "/tmp/hpcmem-topo-XXXXXX";
  int fd = mkstemp(name);
  EXPECT_GE(fd, 0);
  if (contents) {
    EXPECT_EQ(write(fd, contents, strlen(contents)), (ssize_t)strlen(contents));
  }
  close(fd);
  return name;
}

// The real machine as hwloc sees it, independently of libhpcmem.
struct RealMachine {
  int nodes = 0, cpus = 0;
  RealMachine() {
    hwloc_topology_t t;
    hwloc_topology_init(&t);
    hwloc_topology_load(t);
    nodes = hwloc_get_nbobjs_by_type(t, HWLOC_OBJ_NUMANODE);
    cpus = hwloc_get_nbobjs_by_type(t, HWLOC_OBJ_PU);
    hwloc_topology_destroy(t);
  }
};

std::string nodes_of(const unsigned long *mask, int maxnode = HPCMEM_TOPO_MAX_NODE_OS) {
  char buf[256];
  return _hpcmem_topo_nodeset_format(mask, maxnode, buf, sizeof buf);
}

std::string printed() {
  char *buf = nullptr;
  size_t len = 0;
  FILE *f = open_memstream(&buf, &len);
  _hpcmem_topo_print(f);
  fclose(f);
  std::string s(buf, len);
  free(buf);
  return s;
}

// Every test starts from default options and without hwloc's variables, so
// that the environment of the person running the tests cannot change them.
class Topo : public testing::Test {
 protected:
  void SetUp() override {
    unsetenv("HWLOC_SYNTHETIC");
    unsetenv("HWLOC_XMLFILE");
    set_options({});
  }
  void TearDown() override {
    unsetenv("HWLOC_SYNTHETIC");
    unsetenv("HWLOC_XMLFILE");
    set_options({});
  }
};

// Suites are named after the function they test, without the _hpcmem_ prefix.
class topo_load : public Topo {};
class topo_numa_info : public Topo {};
class topo_cpu_numa : public Topo {};
class topo_group_count : public Topo {};
class topo_cpu_group : public Topo {};
class topo_nodeset_parse : public Topo {};
class topo_nodeset_format : public Topo {};
class topo_classes : public Topo {};
class topo_local_nodes : public Topo {};
class topo_kind_name : public Topo {};
class topo_print : public Topo {};
class topo_unload : public Topo {};
class topo_core_count : public Topo {};
class topo_start_needs_hwloc : public Topo {};

/* ------------------------------------------------------------------ */
/* _hpcmem_topo_start_needs_hwloc                                       */

// The allocator reads such a topology at start, not in a thread's first malloc.
TEST_F(topo_start_needs_hwloc, a_file_or_an_hwloc_variable) {
  for (const char *v : {"HWLOC_FSROOT", "HWLOC_CPUID_PATH", "HWLOC_COMPONENTS", "HWLOC_ALLOW", "HWLOC_THISSYSTEM"})
    unsetenv(v);   // SetUp cleared the other two
  EXPECT_EQ(_hpcmem_topo_start_needs_hwloc(), 0);
  set_options({"HPCMEM_TOPOLOGY=" + data("plain-1numa.xml")});
  EXPECT_EQ(_hpcmem_topo_start_needs_hwloc(), 1);
  set_options({});
  setenv("HWLOC_SYNTHETIC", "pack:2 pu:1", 1);
  EXPECT_EQ(_hpcmem_topo_start_needs_hwloc(), 1);
  setenv("HWLOC_SYNTHETIC", "", 1);               // set but empty: not asked
  EXPECT_EQ(_hpcmem_topo_start_needs_hwloc(), 0);
}

/* ------------------------------------------------------------------ */
/* _hpcmem_topo_load                                                    */

TEST_F(topo_load, saved_file_by_path) {
  Loaded r = load(data("plain-1numa.xml"));
  EXPECT_EQ(r.rc, 0);
  EXPECT_EQ(r.err, "");
  EXPECT_EQ(_hpcmem_topo_loaded(), 1);
  EXPECT_EQ(std::string(_hpcmem_topo_source()), data("plain-1numa.xml"));
  EXPECT_EQ(_hpcmem_topo_numa_count(), 1);
  EXPECT_EQ(_hpcmem_topo_cpu_count(), 8);
  EXPECT_EQ(_hpcmem_topo_cpu_limit(), 8);
}

TEST_F(topo_load, HPCMEM_TOPOLOGY_option) {
  set_options({"HPCMEM_TOPOLOGY=" + data("knl-snc4-flat.xml")});
  Loaded r = load(nullptr);
  EXPECT_EQ(r.rc, 0);
  EXPECT_EQ(r.err, "");
  EXPECT_EQ(std::string(_hpcmem_topo_source()), data("knl-snc4-flat.xml"));
  EXPECT_EQ(_hpcmem_topo_numa_count(), 8);
  EXPECT_EQ(_hpcmem_topo_cpu_count(), 256);
}

TEST_F(topo_load, argument_wins_over_option) {
  set_options({"HPCMEM_TOPOLOGY=" + data("knl-snc4-flat.xml")});
  EXPECT_EQ(load(data("2socket-4numa.xml")).rc, 0);
  EXPECT_EQ(_hpcmem_topo_numa_count(), 4);
}

TEST_F(topo_load, option_wins_over_hwloc_variables) {
  setenv("HWLOC_SYNTHETIC", "pack:3 pu:1", 1);
  set_options({"HPCMEM_TOPOLOGY=" + data("2socket-4numa.xml")});
  EXPECT_EQ(load(nullptr).rc, 0);
  EXPECT_EQ(_hpcmem_topo_numa_count(), 4);
}

TEST_F(topo_load, HWLOC_SYNTHETIC_from_environment) {
  const char *desc = "pack:2 [numa(memory=8GiB)] l3:1 core:4 pu:2";
  setenv("HWLOC_SYNTHETIC", desc, 1);
  Loaded r = load(nullptr);
  EXPECT_EQ(r.rc, 0);
  EXPECT_EQ(r.err, "");
  EXPECT_EQ(std::string(_hpcmem_topo_source()), std::string("synthetic:") + desc);
  EXPECT_EQ(_hpcmem_topo_numa_count(), 2);
  EXPECT_EQ(_hpcmem_topo_cpu_count(), 16);
  hpcmem_numa_info_t n;
  ASSERT_EQ(_hpcmem_topo_numa_info(1, &n), 0);
  EXPECT_EQ(n.capacity, 8 * GiB);
  EXPECT_EQ(_hpcmem_topo_group_count(0), 2);
}

TEST_F(topo_load, HWLOC_XMLFILE_from_environment) {
  setenv("HWLOC_XMLFILE", data("2socket-dram-nvm.xml").c_str(), 1);
  Loaded r = load(nullptr);
  EXPECT_EQ(r.rc, 0);
  EXPECT_EQ(r.err, "");
  EXPECT_EQ(std::string(_hpcmem_topo_source()), data("2socket-dram-nvm.xml"));
  EXPECT_EQ(_hpcmem_topo_numa_count(), 4);
}

TEST_F(topo_load, nonexistent_file_warns_and_uses_this_machine) {
  RealMachine real;
  Loaded r = load("/nonexistent/machine.xml");
  EXPECT_EQ(r.rc, 0);
  EXPECT_EQ(r.err, "libhpcmem: warning: topology: cannot read topology file '/nonexistent/machine.xml': "
                   "No such file or directory; using this machine instead\n");
  EXPECT_EQ(_hpcmem_topo_loaded(), 1);
  EXPECT_STREQ(_hpcmem_topo_source(), "this machine");
  EXPECT_EQ(_hpcmem_topo_numa_count(), real.nodes);
  EXPECT_EQ(_hpcmem_topo_cpu_count(), real.cpus);
}

TEST_F(topo_load, option_with_nonexistent_file_names_the_option) {
  set_options({"HPCMEM_TOPOLOGY=/nonexistent/machine.xml"});
  Loaded r = load(nullptr);
  EXPECT_EQ(r.rc, 0);
  EXPECT_EQ(r.err, "libhpcmem: warning: HPCMEM_TOPOLOGY: cannot read topology file '/nonexistent/machine.xml': "
                   "No such file or directory; using this machine instead\n");
  EXPECT_STREQ(_hpcmem_topo_source(), "this machine");
}

TEST_F(topo_load, directory_is_unreadable) {
  RealMachine real;
  std::string dir = data("");
  Loaded r = load(dir);
  EXPECT_EQ(r.rc, 0);
  EXPECT_EQ(r.err, "libhpcmem: warning: topology: cannot read topology file '" + dir +
                       "': Is a directory; using this machine instead\n");
  EXPECT_STREQ(_hpcmem_topo_source(), "this machine");
  EXPECT_EQ(_hpcmem_topo_cpu_count(), real.cpus);
}

TEST_F(topo_load, file_without_read_permission) {
  std::string f = temp_file("<topology/>");
  chmod(f.c_str(), 0);
  if (access(f.c_str(), R_OK) == 0) {  // root reads everything
    unlink(f.c_str());
    GTEST_SKIP() << "running as root: a file without read permission is still readable";
  }
  Loaded r = load(f);
  unlink(f.c_str());
  EXPECT_EQ(r.err, "libhpcmem: warning: topology: cannot read topology file '" + f +
                       "': Permission denied; using this machine instead\n");
  EXPECT_STREQ(_hpcmem_topo_source(), "this machine");
}

TEST_F(topo_load, empty_file) {
  std::string f = temp_file("");
  Loaded r = load(f);
  unlink(f.c_str());
  EXPECT_EQ(r.rc, 0);
  EXPECT_EQ(r.err, "libhpcmem: warning: topology: topology file '" + f + "' is empty; using this machine instead\n");
  EXPECT_STREQ(_hpcmem_topo_source(), "this machine");
}

TEST_F(topo_load, malformed_xml) {
  RealMachine real;
  std::string f = temp_file("<?xml version=\"1.0\"?>\n<topology version=\"2.0\">\n  <object type=\"Machine\"\n");
  Loaded r = load(f);
  unlink(f.c_str());
  EXPECT_EQ(r.rc, 0);
  EXPECT_EQ(r.err, "libhpcmem: warning: topology: '" + f +
                       "' is not a valid hwloc XML topology; using this machine instead\n");
  EXPECT_STREQ(_hpcmem_topo_source(), "this machine");
  EXPECT_EQ(_hpcmem_topo_numa_count(), real.nodes);
}

TEST_F(topo_load, xml_that_is_not_a_topology) {
  std::string f = temp_file("<?xml version=\"1.0\"?>\n<html><body>hello</body></html>\n");
  Loaded r = load(f);
  unlink(f.c_str());
  EXPECT_EQ(r.err, "libhpcmem: warning: topology: '" + f +
                       "' is not a valid hwloc XML topology; using this machine instead\n");
  EXPECT_STREQ(_hpcmem_topo_source(), "this machine");
}

// hwloc re-reads HWLOC_XMLFILE itself when asked for this machine, so a file
// that parses but is no topology leaves only the machine without hwloc.
TEST_F(topo_load, HWLOC_XMLFILE_that_is_no_topology_leaves_the_minimal_machine) {
  std::string f = temp_file("<?xml version=\"1.0\"?>\n<html><body>hello</body></html>\n");
  setenv("HWLOC_XMLFILE", f.c_str(), 1);
  Loaded r = load(nullptr);
  unlink(f.c_str());
  long online = sysconf(_SC_NPROCESSORS_ONLN);
  EXPECT_EQ(r.rc, -EINVAL);
  EXPECT_EQ(r.err, "libhpcmem: warning: hwloc cannot describe this machine (Invalid argument); using one NUMA node "
                   "with " + std::to_string(online) + " cpus\n"
                   "libhpcmem: warning: HWLOC_XMLFILE: '" + f + "' is not a valid hwloc XML topology; using this "
                   "machine (one node, without hwloc) instead\n");
  EXPECT_EQ(_hpcmem_topo_loaded(), 1);
  EXPECT_EQ(_hpcmem_topo_numa_count(), 1);
  EXPECT_EQ(_hpcmem_topo_cpu_count(), online);
  EXPECT_EQ(_hpcmem_topo_cpu_numa((int)online - 1), 0);
  EXPECT_EQ(_hpcmem_topo_group_count(0), 1);
  EXPECT_EQ(_hpcmem_topo_group_count(1), online);
  hpcmem_numa_info_t n;
  ASSERT_EQ(_hpcmem_topo_numa_info(0, &n), 0);
  EXPECT_EQ(n.kind, HPCMEM_MEM_DRAM);
  EXPECT_GT(n.capacity, 0u);
}

TEST_F(topo_load, bad_file_falls_back_to_HWLOC_SYNTHETIC) {
  setenv("HWLOC_SYNTHETIC", "pack:3 pu:1", 1);
  set_options({"HPCMEM_TOPOLOGY=/nonexistent/machine.xml"});
  Loaded r = load(nullptr);
  EXPECT_EQ(r.err, "libhpcmem: warning: HPCMEM_TOPOLOGY: cannot read topology file '/nonexistent/machine.xml': "
                   "No such file or directory; using synthetic:pack:3 pu:1 instead\n");
  EXPECT_EQ(_hpcmem_topo_cpu_count(), 3);
}

TEST_F(topo_load, bad_HWLOC_SYNTHETIC_warns) {
  RealMachine real;
  setenv("HWLOC_SYNTHETIC", "garbage:3", 1);
  Loaded r = load(nullptr);
  EXPECT_EQ(r.rc, 0);
  EXPECT_EQ(r.err, "libhpcmem: warning: HWLOC_SYNTHETIC: 'garbage:3' is not a valid synthetic topology "
                   "description; using this machine instead\n");
  EXPECT_STREQ(_hpcmem_topo_source(), "this machine");
  EXPECT_EQ(_hpcmem_topo_cpu_count(), real.cpus);
}

TEST_F(topo_load, bad_HWLOC_XMLFILE_warns) {
  setenv("HWLOC_XMLFILE", "/nonexistent/hwloc.xml", 1);
  Loaded r = load(nullptr);
  EXPECT_EQ(r.err, "libhpcmem: warning: HWLOC_XMLFILE: cannot read topology file '/nonexistent/hwloc.xml': "
                   "No such file or directory; using this machine instead\n");
  EXPECT_STREQ(_hpcmem_topo_source(), "this machine");
}

TEST_F(topo_load, this_machine_by_default) {
  RealMachine real;
  Loaded r = load(nullptr);
  EXPECT_EQ(r.rc, 0);
  EXPECT_EQ(r.err, "");
  EXPECT_STREQ(_hpcmem_topo_source(), "this machine");
  EXPECT_EQ(_hpcmem_topo_numa_count(), real.nodes);
  EXPECT_EQ(_hpcmem_topo_cpu_count(), real.cpus);
  EXPECT_GE(_hpcmem_topo_group_count(0), 1);
}

TEST_F(topo_load, reload_replaces_the_tables) {
  ASSERT_EQ(load(data("knl-snc4-flat.xml")).rc, 0);
  ASSERT_EQ(_hpcmem_topo_numa_count(), 8);
  ASSERT_EQ(load(data("plain-1numa.xml")).rc, 0);
  EXPECT_EQ(_hpcmem_topo_numa_count(), 1);
  EXPECT_EQ(_hpcmem_topo_cpu_count(), 8);
  EXPECT_EQ(_hpcmem_topo_cpu_numa(100), -ENODEV);  // a KNL cpu no longer exists
  hpcmem_mem_class_t c;
  EXPECT_EQ(_hpcmem_topo_class(HPCMEM_MEM_HBM, &c), -ENODEV);
}

/* ------------------------------------------------------------------ */
/* _hpcmem_topo_unload: the answers before a load                       */

TEST_F(topo_unload, answers_one_node_one_group) {
  ASSERT_EQ(load(data("2socket-4numa.xml")).rc, 0);
  _hpcmem_topo_unload();
  EXPECT_EQ(_hpcmem_topo_loaded(), 0);
  EXPECT_EQ(_hpcmem_topo_numa_count(), 1);
  EXPECT_EQ(_hpcmem_topo_cpu_count(), 1);
  EXPECT_EQ(_hpcmem_topo_cpu_numa(7), 0);
  EXPECT_EQ(_hpcmem_topo_cpu_group(7), 0);
  EXPECT_EQ(_hpcmem_topo_group_count(0), 1);
  hpcmem_numa_info_t n;
  ASSERT_EQ(_hpcmem_topo_numa_info(0, &n), 0);
  EXPECT_EQ(n.os_index, 0);
  EXPECT_EQ(n.kind, HPCMEM_MEM_DRAM);
  set_options({"HPCMEM_HEAPS=4"});
  EXPECT_EQ(_hpcmem_topo_group_count(0), 4);
  EXPECT_EQ(_hpcmem_topo_cpu_group(7), 3);
  EXPECT_STREQ(_hpcmem_topo_source(), "not loaded");
}

/* ------------------------------------------------------------------ */
/* _hpcmem_topo_numa_info, _hpcmem_topo_numa_lookup                     */

TEST_F(topo_numa_info, plain_machine) {
  ASSERT_EQ(load(data("plain-1numa.xml")).rc, 0);
  hpcmem_numa_info_t n;
  ASSERT_EQ(_hpcmem_topo_numa_info(0, &n), 0);
  EXPECT_EQ(n.os_index, 0);
  EXPECT_EQ(n.capacity, 16 * GiB);
  EXPECT_EQ(n.cpu_count, 8);
  EXPECT_STREQ(n.cpus, "0-7");
  EXPECT_EQ(n.kind, HPCMEM_MEM_DRAM);
  EXPECT_EQ(n.kind_from, HPCMEM_KIND_FROM_DEFAULT);
  EXPECT_EQ(n.bandwidth, 0u);
  EXPECT_EQ(n.latency, 0u);
  EXPECT_STREQ(n.subtype, "");
}

TEST_F(topo_numa_info, two_sockets_four_nodes) {
  ASSERT_EQ(load(data("2socket-4numa.xml")).rc, 0);
  ASSERT_EQ(_hpcmem_topo_numa_count(), 4);
  const char *cpus[] = {"0-3,16-19", "4-7,20-23", "8-11,24-27", "12-15,28-31"};
  for (int i = 0; i < 4; i++) {
    hpcmem_numa_info_t n;
    ASSERT_EQ(_hpcmem_topo_numa_info(i, &n), 0);
    EXPECT_EQ(n.os_index, i);
    EXPECT_EQ(n.capacity, 32 * GiB);
    EXPECT_EQ(n.cpu_count, 8);
    EXPECT_STREQ(n.cpus, cpus[i]);
    EXPECT_EQ(n.kind, HPCMEM_MEM_DRAM);
    EXPECT_EQ(n.bandwidth, 40960u);  // from its own die, not the remote values
    EXPECT_EQ(n.latency, 85u);
  }
}

TEST_F(topo_numa_info, knl_dram_and_mcdram) {
  ASSERT_EQ(load(data("knl-snc4-flat.xml")).rc, 0);
  ASSERT_EQ(_hpcmem_topo_numa_count(), 8);
  for (int i = 0; i < 8; i++) {
    hpcmem_numa_info_t n;
    ASSERT_EQ(_hpcmem_topo_numa_info(i, &n), 0);
    EXPECT_EQ(n.os_index, i);
    int cluster = i % 4;
    char cpus[96];
    snprintf(cpus, sizeof cpus, "%d-%d,%d-%d,%d-%d,%d-%d", 16 * cluster, 16 * cluster + 15, 64 + 16 * cluster,
             64 + 16 * cluster + 15, 128 + 16 * cluster, 128 + 16 * cluster + 15, 192 + 16 * cluster,
             192 + 16 * cluster + 15);
    EXPECT_STREQ(n.cpus, cpus) << i;
    EXPECT_EQ(n.cpu_count, 64);
    if (i < 4) {
      EXPECT_EQ(n.kind, HPCMEM_MEM_DRAM) << i;
      EXPECT_EQ(n.capacity, 24 * GiB);
      EXPECT_STREQ(n.subtype, "");
    } else {
      EXPECT_EQ(n.kind, HPCMEM_MEM_HBM) << i;
      EXPECT_EQ(n.kind_from, HPCMEM_KIND_FROM_SUBTYPE);
      EXPECT_EQ(n.capacity, 4 * GiB);
      EXPECT_STREQ(n.subtype, "MCDRAM");
    }
  }
}

TEST_F(topo_numa_info, nvm_known_from_memory_attributes) {
  ASSERT_EQ(load(data("2socket-dram-nvm.xml")).rc, 0);
  ASSERT_EQ(_hpcmem_topo_numa_count(), 4);
  for (int i = 0; i < 4; i++) {
    hpcmem_numa_info_t n;
    ASSERT_EQ(_hpcmem_topo_numa_info(i, &n), 0);
    EXPECT_EQ(n.os_index, i);
    EXPECT_STREQ(n.subtype, "");
    EXPECT_STREQ(n.cpus, i % 2 ? "8-15,24-31" : "0-7,16-23");
    if (i < 2) {
      EXPECT_EQ(n.kind, HPCMEM_MEM_DRAM) << i;
      EXPECT_EQ(n.capacity, 96 * GiB);
      EXPECT_EQ(n.bandwidth, 102400u);
      EXPECT_EQ(n.latency, 85u);
    } else {
      EXPECT_EQ(n.kind, HPCMEM_MEM_NVM) << i;
      EXPECT_EQ(n.kind_from, HPCMEM_KIND_FROM_MEMATTR);
      EXPECT_EQ(n.capacity, 768 * GiB);
      EXPECT_EQ(n.bandwidth, 30720u);
      EXPECT_EQ(n.latency, 305u);
    }
  }
}

// A two-node machine (node 0: 64 GiB, node 1: 16 GiB, same cpus) written by
// hwloc itself after `edit` set names and attributes; returns the file.
struct Mem {
  const char *subtype = nullptr, *daxtype = nullptr;
  uint64_t bandwidth = 0, latency = 0;
};

std::string two_node_machine(Mem m0, Mem m1) {
  hwloc_topology_t t;
  hwloc_topology_init(&t);
  hwloc_topology_set_synthetic(t, "pack:1 [numa(memory=64GiB)] [numa(memory=16GiB)] core:4 pu:1");
  EXPECT_EQ(hwloc_topology_load(t), 0);
  Mem m[2] = {m0, m1};
  for (int i = 0; i < 2; i++) {
    hwloc_obj_t node = hwloc_get_obj_by_type(t, HWLOC_OBJ_NUMANODE, i);
    if (m[i].subtype) {  // hwloc 2.9 has no hwloc_obj_set_subtype; hwloc-annotate does this
      free(node->subtype);
      node->subtype = strdup(m[i].subtype);
    }
    if (m[i].daxtype) hwloc_obj_add_info(node, "DAXType", m[i].daxtype);
    struct hwloc_location loc;
    loc.type = HWLOC_LOCATION_TYPE_CPUSET;
    loc.location.cpuset = node->cpuset;
    if (m[i].bandwidth) {
      EXPECT_EQ(hwloc_memattr_set_value(t, HWLOC_MEMATTR_ID_BANDWIDTH, node, &loc, 0, m[i].bandwidth), 0);
    }
    if (m[i].latency) {
      EXPECT_EQ(hwloc_memattr_set_value(t, HWLOC_MEMATTR_ID_LATENCY, node, &loc, 0, m[i].latency), 0);
    }
  }
  std::string f = temp_file(nullptr);
  EXPECT_EQ(hwloc_topology_export_xml(t, f.c_str(), 0), 0);
  hwloc_topology_destroy(t);
  return f;
}

// Load such a machine and return the kinds (and where they came from) of nodes 0 and 1.
std::string kinds(Mem m0, Mem m1) {
  std::string f = two_node_machine(m0, m1);
  Loaded r = load(f);
  unlink(f.c_str());
  EXPECT_EQ(r.err, "");
  std::string out;
  static const char *from[] = {"default", "memattr", "subtype"};
  for (int i = 0; i < 2; i++) {
    hpcmem_numa_info_t n;
    EXPECT_EQ(_hpcmem_topo_numa_info(i, &n), 0);
    out += std::string(i ? " " : "") + _hpcmem_topo_kind_name(n.kind) + "/" + from[n.kind_from];
  }
  return out;
}

TEST_F(topo_numa_info, hbm_from_bandwidth_and_latency) {
  EXPECT_EQ(kinds({nullptr, nullptr, 100000, 100}, {nullptr, nullptr, 400000, 120}), "DRAM/default HBM/memattr");
}

TEST_F(topo_numa_info, hbm_from_bandwidth_alone_against_the_larger_node) {
  EXPECT_EQ(kinds({nullptr, nullptr, 100000, 0}, {nullptr, nullptr, 400000, 0}), "DRAM/default HBM/memattr");
}

TEST_F(topo_numa_info, nvm_from_latency_alone) {
  EXPECT_EQ(kinds({nullptr, nullptr, 0, 300}, {nullptr, nullptr, 0, 90}), "NVM/memattr DRAM/default");
}

TEST_F(topo_numa_info, similar_attributes_are_both_dram) {
  EXPECT_EQ(kinds({nullptr, nullptr, 100000, 90}, {nullptr, nullptr, 150000, 100}), "DRAM/default DRAM/default");
}

TEST_F(topo_numa_info, contradicting_attributes_decide_nothing) {
  // twice the bandwidth (HBM) and twice the latency (NVM): neither
  EXPECT_EQ(kinds({nullptr, nullptr, 100000, 90}, {nullptr, nullptr, 200000, 180}), "DRAM/default DRAM/default");
}

TEST_F(topo_numa_info, subtypes_name_the_kind) {
  EXPECT_EQ(kinds({"DRAM"}, {"HBM"}), "DRAM/subtype HBM/subtype");
  EXPECT_EQ(kinds({"CXL-DRAM"}, {"NVM"}), "DRAM/subtype NVM/subtype");
  EXPECT_EQ(kinds({nullptr, "NVM"}, {}), "NVM/subtype DRAM/default");
  // an explicit name wins over attributes that would say otherwise
  EXPECT_EQ(kinds({nullptr, nullptr, 100000, 90}, {"MCDRAM", nullptr, 100000, 90}), "DRAM/default HBM/subtype");
}

TEST_F(topo_numa_info, unrecognised_subtype_is_unknown_unless_attributes_tell) {
  EXPECT_EQ(kinds({}, {"GPUMemory"}), "DRAM/default unknown/subtype");
  EXPECT_EQ(kinds({nullptr, nullptr, 100000, 90}, {"SPM", nullptr, 500000, 100}), "DRAM/default HBM/memattr");
  hpcmem_mem_class_t c;
  EXPECT_EQ(_hpcmem_topo_class(HPCMEM_MEM_UNKNOWN, &c), -ENODEV);
  kinds({}, {"GPUMemory"});
  ASSERT_EQ(_hpcmem_topo_class(HPCMEM_MEM_UNKNOWN, &c), 0);
  EXPECT_EQ(c.node_count, 1);
  EXPECT_EQ(c.capacity, 16 * GiB);
}

TEST_F(topo_numa_info, bad_arguments) {
  ASSERT_EQ(load(data("2socket-4numa.xml")).rc, 0);
  hpcmem_numa_info_t n;
  EXPECT_EQ(_hpcmem_topo_numa_info(-1, &n), -EINVAL);
  EXPECT_EQ(_hpcmem_topo_numa_info(4, &n), -EINVAL);
  EXPECT_EQ(_hpcmem_topo_numa_info(0, nullptr), -EINVAL);
}

TEST_F(topo_numa_info, lookup_by_os_index) {
  ASSERT_EQ(load(data("knl-snc4-flat.xml")).rc, 0);
  EXPECT_EQ(_hpcmem_topo_numa_lookup(5), 5);
  EXPECT_EQ(_hpcmem_topo_numa_lookup(0), 0);
  EXPECT_EQ(_hpcmem_topo_numa_lookup(8), -ENODEV);
  EXPECT_EQ(_hpcmem_topo_numa_lookup(-1), -ENODEV);
}

/* ------------------------------------------------------------------ */
/* _hpcmem_topo_core_count, _hpcmem_topo_cache_size, _hpcmem_topo_cache_line */

TEST_F(topo_core_count, cores_and_caches) {
  ASSERT_EQ(load(data("2socket-4numa.xml")).rc, 0);
  EXPECT_EQ(_hpcmem_topo_core_count(), 16);
  EXPECT_EQ(_hpcmem_topo_cache_size(1), 48u * 1024);
  EXPECT_EQ(_hpcmem_topo_cache_size(2), 1u << 20);
  EXPECT_EQ(_hpcmem_topo_cache_size(3), 16u << 20);
  EXPECT_EQ(_hpcmem_topo_cache_size(4), 0u);
  EXPECT_EQ(_hpcmem_topo_cache_size(0), 0u);
  EXPECT_EQ(_hpcmem_topo_cache_size(9), 0u);
  EXPECT_EQ(_hpcmem_topo_cache_line(), 64);
  ASSERT_EQ(load(data("knl-snc4-flat.xml")).rc, 0);
  EXPECT_EQ(_hpcmem_topo_core_count(), 64);
  EXPECT_EQ(_hpcmem_topo_cache_size(2), 1u << 20);
  EXPECT_EQ(_hpcmem_topo_cache_size(3), 0u);  // KNL has no L3
  setenv("HWLOC_SYNTHETIC", "pack:2 core:2 pu:1", 1);
  ASSERT_EQ(load(nullptr).rc, 0);
  EXPECT_EQ(_hpcmem_topo_cache_size(1), 0u);
  EXPECT_EQ(_hpcmem_topo_cache_line(), 64);  // unknown: the usual size
  _hpcmem_topo_unload();
  EXPECT_EQ(_hpcmem_topo_core_count(), 0);
  EXPECT_EQ(_hpcmem_topo_cache_size(3), 0u);
}

/* ------------------------------------------------------------------ */
/* _hpcmem_topo_cpu_numa                                                */

TEST_F(topo_cpu_numa, two_sockets_with_sibling_numbering) {
  ASSERT_EQ(load(data("2socket-4numa.xml")).rc, 0);
  EXPECT_EQ(_hpcmem_topo_cpu_count(), 32);
  for (int cpu = 0; cpu < 32; cpu++) EXPECT_EQ(_hpcmem_topo_cpu_numa(cpu), (cpu % 16) / 4) << cpu;
}

TEST_F(topo_cpu_numa, knl_cpus_belong_to_dram) {
  ASSERT_EQ(load(data("knl-snc4-flat.xml")).rc, 0);
  for (int cpu = 0; cpu < 256; cpu++) EXPECT_EQ(_hpcmem_topo_cpu_numa(cpu), (cpu % 64) / 16) << cpu;
}

TEST_F(topo_cpu_numa, bad_cpus) {
  ASSERT_EQ(load(data("2socket-4numa.xml")).rc, 0);
  EXPECT_EQ(_hpcmem_topo_cpu_numa(-1), -EINVAL);
  EXPECT_EQ(_hpcmem_topo_cpu_numa(32), -ENODEV);
  EXPECT_EQ(_hpcmem_topo_cpu_numa(HPCMEM_TOPO_MAX_CPUS + 5), -ENODEV);
}

/* ------------------------------------------------------------------ */
/* _hpcmem_topo_group_count, _hpcmem_topo_cpu_group                     */

TEST_F(topo_group_count, two_sockets_group_by_l3) {
  ASSERT_EQ(load(data("2socket-4numa.xml")).rc, 0);
  EXPECT_EQ(_hpcmem_topo_group_count(0), 4);
  EXPECT_STREQ(_hpcmem_topo_group_level(), "L3 cache");
  // the cpus of one die share its L3 and one group, hyperthread siblings included
  for (int cpu = 0; cpu < 32; cpu++) {
    EXPECT_EQ(_hpcmem_topo_cpu_group(cpu), _hpcmem_topo_cpu_group((cpu % 16) / 4 * 4)) << cpu;
    EXPECT_EQ(_hpcmem_topo_group_numa(_hpcmem_topo_cpu_group(cpu)), (cpu % 16) / 4) << cpu;
  }
  EXPECT_NE(_hpcmem_topo_cpu_group(0), _hpcmem_topo_cpu_group(4));
  EXPECT_NE(_hpcmem_topo_cpu_group(0), _hpcmem_topo_cpu_group(8));
  for (int g = 0; g < 4; g++) EXPECT_GE(_hpcmem_topo_group_numa(g), 0);
  EXPECT_EQ(_hpcmem_topo_group_numa(4), -EINVAL);
  EXPECT_EQ(_hpcmem_topo_group_numa(-1), -EINVAL);
}

TEST_F(topo_group_count, hint_picks_a_coarser_level) {
  ASSERT_EQ(load(data("2socket-4numa.xml")).rc, 0);
  EXPECT_EQ(_hpcmem_topo_group_count(16), 2);  // 16 cpus per group: one per package
  EXPECT_STREQ(_hpcmem_topo_group_level(), "package");
  EXPECT_EQ(_hpcmem_topo_cpu_group(0), _hpcmem_topo_cpu_group(7));
  EXPECT_EQ(_hpcmem_topo_cpu_group(0), _hpcmem_topo_cpu_group(23));
  EXPECT_NE(_hpcmem_topo_cpu_group(0), _hpcmem_topo_cpu_group(8));
  EXPECT_EQ(_hpcmem_topo_group_count(8), 4);  // dies (L3 wins over NUMA at equal width? both 4 groups)
  EXPECT_EQ(_hpcmem_topo_group_count(2), 16);  // cores: siblings together
  EXPECT_STREQ(_hpcmem_topo_group_level(), "core");
  EXPECT_EQ(_hpcmem_topo_cpu_group(3), _hpcmem_topo_cpu_group(19));
  EXPECT_NE(_hpcmem_topo_cpu_group(3), _hpcmem_topo_cpu_group(4));
  EXPECT_EQ(_hpcmem_topo_group_count(1), 32);
  EXPECT_STREQ(_hpcmem_topo_group_level(), "cpu");
  EXPECT_EQ(_hpcmem_topo_group_count(1000), 1);
  EXPECT_STREQ(_hpcmem_topo_group_level(), "machine");
  EXPECT_EQ(_hpcmem_topo_cpu_group(31), 0);
}

TEST_F(topo_group_count, knl_groups_by_l2_tile) {
  ASSERT_EQ(load(data("knl-snc4-flat.xml")).rc, 0);
  EXPECT_EQ(_hpcmem_topo_group_count(0), 32);
  EXPECT_STREQ(_hpcmem_topo_group_level(), "L2 cache");
  // cores 2t and 2t+1 share a tile; each core's 4 threads are cpu, cpu+64, cpu+128, cpu+192
  for (int cpu = 0; cpu < 256; cpu++)
    EXPECT_EQ(_hpcmem_topo_cpu_group(cpu), _hpcmem_topo_cpu_group((cpu % 64) / 2 * 2)) << cpu;
  EXPECT_NE(_hpcmem_topo_cpu_group(0), _hpcmem_topo_cpu_group(2));
  EXPECT_EQ(_hpcmem_topo_group_count(64), 4);  // clusters: the NUMA localities
  EXPECT_STREQ(_hpcmem_topo_group_level(), "NUMA node");
  EXPECT_EQ(_hpcmem_topo_group_numa(_hpcmem_topo_cpu_group(200)), 0);  // core 8 is in cluster 0
  EXPECT_EQ(_hpcmem_topo_group_numa(_hpcmem_topo_cpu_group(250)), 3);
}

TEST_F(topo_group_count, synthetic_machine_without_caches_groups_by_numa) {
  setenv("HWLOC_SYNTHETIC", "pack:2 [numa] core:3 pu:1", 1);
  ASSERT_EQ(load(nullptr).rc, 0);
  EXPECT_EQ(_hpcmem_topo_group_count(0), 2);
  EXPECT_STREQ(_hpcmem_topo_group_level(), "NUMA node");
  EXPECT_EQ(_hpcmem_topo_cpu_group(2), 0);
  EXPECT_EQ(_hpcmem_topo_cpu_group(3), 1);
}

TEST_F(topo_group_count, numa_nodes_finer_than_the_llc) {
  // one L3 per package, two NUMA nodes below it (sub-NUMA clustering)
  setenv("HWLOC_SYNTHETIC", "pack:2 l3:1 group:2 [numa] core:2 pu:1", 1);
  ASSERT_EQ(load(nullptr).rc, 0);
  EXPECT_EQ(_hpcmem_topo_numa_count(), 4);
  EXPECT_EQ(_hpcmem_topo_group_count(0), 4);
  EXPECT_STREQ(_hpcmem_topo_group_level(), "NUMA node");
}

TEST_F(topo_group_count, memory_of_the_whole_machine_is_not_a_group) {
  // node 2 hangs off the machine (all cpus), as CPU-less CXL or far memory does
  setenv("HWLOC_SYNTHETIC", "[numa(memory=64GiB)] pack:2 [numa(memory=16GiB)] core:2 pu:1", 1);
  ASSERT_EQ(load(nullptr).rc, 0);
  ASSERT_EQ(_hpcmem_topo_numa_count(), 3);
  EXPECT_EQ(_hpcmem_topo_group_count(0), 2);
  EXPECT_STREQ(_hpcmem_topo_group_level(), "NUMA node");
  EXPECT_EQ(_hpcmem_topo_cpu_group(1), 0);
  EXPECT_EQ(_hpcmem_topo_cpu_group(2), 1);
  EXPECT_EQ(_hpcmem_topo_cpu_numa(0), 0);  // the narrowest node, not the machine-wide one
  EXPECT_EQ(_hpcmem_topo_cpu_numa(3), 1);
  EXPECT_EQ(_hpcmem_topo_group_count(2), 2);
}

TEST_F(topo_group_count, HPCMEM_HEAPS_overrides) {
  ASSERT_EQ(load(data("2socket-4numa.xml")).rc, 0);
  set_options({"HPCMEM_HEAPS=3"});
  EXPECT_EQ(_hpcmem_topo_group_count(0), 3);
  EXPECT_EQ(_hpcmem_topo_group_count(16), 3);  // the option wins over the hint
  EXPECT_STREQ(_hpcmem_topo_group_level(), "HPCMEM_HEAPS");
  int per[3] = {0, 0, 0};
  for (int cpu = 0; cpu < 32; cpu++) {
    int g = _hpcmem_topo_cpu_group(cpu);
    ASSERT_GE(g, 0);
    ASSERT_LT(g, 3);
    per[g]++;
  }
  EXPECT_EQ(per[0], 11);
  EXPECT_EQ(per[1], 11);
  EXPECT_EQ(per[2], 10);
  // dealt in topology order: a core's siblings stay together, die 0 is in group 0
  EXPECT_EQ(_hpcmem_topo_cpu_group(0), 0);
  EXPECT_EQ(_hpcmem_topo_cpu_group(16), 0);
  EXPECT_EQ(_hpcmem_topo_cpu_group(3), 0);
  EXPECT_EQ(_hpcmem_topo_cpu_group(31), 2);
}

TEST_F(topo_group_count, HPCMEM_HEAPS_above_cpu_count) {
  ASSERT_EQ(load(data("plain-1numa.xml")).rc, 0);
  set_options({"HPCMEM_HEAPS=64"});
  EXPECT_EQ(_hpcmem_topo_group_count(0), 64);
  for (int cpu = 0; cpu < 8; cpu++) EXPECT_EQ(_hpcmem_topo_cpu_group(cpu), 8 * cpu);
  EXPECT_EQ(_hpcmem_topo_group_numa(8), 0);
  EXPECT_EQ(_hpcmem_topo_group_numa(9), -ENODEV);  // a group no cpu maps to
}

TEST_F(topo_group_count, plain_machine_one_group) {
  ASSERT_EQ(load(data("plain-1numa.xml")).rc, 0);
  EXPECT_EQ(_hpcmem_topo_group_count(0), 1);
  EXPECT_STREQ(_hpcmem_topo_group_level(), "L3 cache");
  for (int cpu = 0; cpu < 8; cpu++) EXPECT_EQ(_hpcmem_topo_cpu_group(cpu), 0);
}

TEST_F(topo_cpu_group, unknown_cpus_wrap_and_negative_fails) {
  ASSERT_EQ(load(data("2socket-4numa.xml")).rc, 0);
  ASSERT_EQ(_hpcmem_topo_group_count(0), 4);
  EXPECT_EQ(_hpcmem_topo_cpu_group(-1), -EINVAL);
  EXPECT_EQ(_hpcmem_topo_cpu_group(33), 1);
  EXPECT_EQ(_hpcmem_topo_cpu_group(HPCMEM_TOPO_MAX_CPUS + 2), (HPCMEM_TOPO_MAX_CPUS + 2) % 4);
}

/* ------------------------------------------------------------------ */
/* _hpcmem_topo_nodeset_parse                                           */

struct Parsed {
  int rc;
  std::string err;
  std::string nodes;
};

Parsed parse(const char *text, int maxnode = HPCMEM_TOPO_MAX_NODE_OS, const char *what = "node list") {
  unsigned long mask[HPCMEM_TOPO_MASK_LONGS];
  memset(mask, 0xff, sizeof mask);  // stale bits must be cleared
  testing::internal::CaptureStderr();
  int rc = _hpcmem_topo_nodeset_parse_as(what, text, mask, maxnode);
  std::string err = testing::internal::GetCapturedStderr();
  return {rc, err, rc > 0 ? nodes_of(mask, maxnode) : ""};
}

TEST_F(topo_nodeset_parse, valid_lists) {
  ASSERT_EQ(load(data("knl-snc4-flat.xml")).rc, 0);
  Parsed p = parse("all");
  EXPECT_EQ(p.rc, 8);
  EXPECT_EQ(p.err, "");
  EXPECT_EQ(p.nodes, "0-7");
  p = parse("0-3,6");
  EXPECT_EQ(p.rc, 5);
  EXPECT_EQ(p.nodes, "0-3,6");
  p = parse("5");
  EXPECT_EQ(p.rc, 1);
  EXPECT_EQ(p.nodes, "5");
  p = parse(" 4-7 ");
  EXPECT_EQ(p.rc, 4);
  EXPECT_EQ(p.nodes, "4-7");
  p = parse("ALL");
  EXPECT_EQ(p.rc, 8);
  p = parse("7,0,3-3");
  EXPECT_EQ(p.rc, 3);
  EXPECT_EQ(p.nodes, "0,3,7");
  p = parse("1,1");  // listed twice, counted twice, set once
  EXPECT_EQ(p.nodes, "1");
}

TEST_F(topo_nodeset_parse, the_plain_wrapper_fills_an_mbind_mask) {
  ASSERT_EQ(load(data("2socket-4numa.xml")).rc, 0);
  unsigned long mask[1] = {~0UL};
  EXPECT_EQ(_hpcmem_topo_nodeset_parse("1-2", mask, 64), 2);
  EXPECT_EQ(mask[0], 0x6UL);
  EXPECT_EQ(_hpcmem_topo_nodeset_parse("all", mask, 64), 4);
  EXPECT_EQ(mask[0], 0xfUL);
  EXPECT_EQ(_hpcmem_topo_nodeset_parse("3", nullptr, 0), 1);  // validate only
}

TEST_F(topo_nodeset_parse, bad_syntax) {
  ASSERT_EQ(load(data("knl-snc4-flat.xml")).rc, 0);
  const char *expected = " (expected \"all\" or node numbers and ranges like 0-3,6)\n";
  Parsed p = parse("");
  EXPECT_EQ(p.rc, -EINVAL);
  EXPECT_EQ(p.err, std::string("libhpcmem: warning: node list '': empty") + expected);
  p = parse("   ");
  EXPECT_EQ(p.rc, -EINVAL);
  p = parse("0-3,x");
  EXPECT_EQ(p.rc, -EINVAL);
  EXPECT_EQ(p.err, std::string("libhpcmem: warning: node list '0-3,x': syntax error at 'x'") + expected);
  p = parse("abc");
  EXPECT_EQ(p.rc, -EINVAL);
  EXPECT_EQ(p.err, std::string("libhpcmem: warning: node list 'abc': syntax error at 'abc'") + expected);
  p = parse("0-");
  EXPECT_EQ(p.rc, -EINVAL);
  EXPECT_EQ(p.err, std::string("libhpcmem: warning: node list '0-': syntax error at '0-'") + expected);
  p = parse("1,");
  EXPECT_EQ(p.rc, -EINVAL);
  EXPECT_EQ(p.err, std::string("libhpcmem: warning: node list '1,': nothing after the last ','") + expected);
  p = parse("0, 1");
  EXPECT_EQ(p.rc, -EINVAL);
  EXPECT_EQ(p.err, std::string("libhpcmem: warning: node list '0, 1': syntax error at ' 1'") + expected);
  p = parse("-1");
  EXPECT_EQ(p.rc, -EINVAL);
  p = parse("1..3");
  EXPECT_EQ(p.rc, -EINVAL);
  p = parse("3-1");
  EXPECT_EQ(p.rc, -EINVAL);
  EXPECT_EQ(p.err, "libhpcmem: warning: node list '3-1': range 3-1 runs backwards\n");
  p = parse("allx");
  EXPECT_EQ(p.rc, -EINVAL);
  testing::internal::CaptureStderr();
  EXPECT_EQ(_hpcmem_topo_nodeset_parse(nullptr, nullptr, 0), -EINVAL);
  EXPECT_EQ(testing::internal::GetCapturedStderr(), "libhpcmem: warning: node list '(null)': no node list given\n");
}

TEST_F(topo_nodeset_parse, nonexistent_node) {
  ASSERT_EQ(load(data("knl-snc4-flat.xml")).rc, 0);
  Parsed p = parse("0-9");
  EXPECT_EQ(p.rc, -ENODEV);
  EXPECT_EQ(p.err, "libhpcmem: warning: node list '0-9': NUMA node 8 does not exist (the topology has nodes 0-7)\n");
  p = parse("2,12");
  EXPECT_EQ(p.rc, -ENODEV);
  EXPECT_EQ(p.err, "libhpcmem: warning: node list '2,12': NUMA node 12 does not exist (the topology has nodes 0-7)\n");
  p = parse("99999999999999999999");
  EXPECT_EQ(p.rc, -ENODEV);
  EXPECT_EQ(p.err, "libhpcmem: warning: node list '99999999999999999999': node number '99999999999999999999' is "
                   "far too large\n");
  p = parse("0-100000000");  // bounded: stops at the first missing node
  EXPECT_EQ(p.rc, -ENODEV);
}

TEST_F(topo_nodeset_parse, node_beyond_the_mask) {
  ASSERT_EQ(load(data("knl-snc4-flat.xml")).rc, 0);
  Parsed p = parse("all", 4);
  EXPECT_EQ(p.rc, -ERANGE);
  EXPECT_EQ(p.err, "libhpcmem: warning: node list 'all': NUMA node 4 does not fit in a mask of 4 nodes\n");
  p = parse("0-3", 4);
  EXPECT_EQ(p.rc, 4);
}

TEST_F(topo_nodeset_parse, named_caller_and_silent_mode) {
  ASSERT_EQ(load(data("2socket-4numa.xml")).rc, 0);
  Parsed p = parse("0-5", HPCMEM_TOPO_MAX_NODE_OS, "HPCMEM_INTERLEAVE_NODES");
  EXPECT_EQ(p.rc, -ENODEV);
  EXPECT_EQ(p.err, "libhpcmem: warning: HPCMEM_INTERLEAVE_NODES '0-5': NUMA node 4 does not exist "
                   "(the topology has nodes 0-3)\n");
  p = parse("zz", HPCMEM_TOPO_MAX_NODE_OS, nullptr);
  EXPECT_EQ(p.rc, -EINVAL);
  EXPECT_EQ(p.err, "");
}

/* ------------------------------------------------------------------ */
/* _hpcmem_topo_nodeset_format                                          */

TEST_F(topo_nodeset_format, ranges_and_truncation) {
  unsigned long mask[HPCMEM_TOPO_MASK_LONGS] = {0};
  char buf[64];
  EXPECT_STREQ(_hpcmem_topo_nodeset_format(mask, 128, buf, sizeof buf), "");
  for (int n : {0, 1, 2, 3, 6, 64, 65, 127}) mask[n / (8 * sizeof(long))] |= 1UL << (n % (8 * sizeof(long)));
  EXPECT_STREQ(_hpcmem_topo_nodeset_format(mask, 128, buf, sizeof buf), "0-3,6,64-65,127");
  EXPECT_STREQ(_hpcmem_topo_nodeset_format(mask, 100, buf, sizeof buf), "0-3,6,64-65");
  char small[10];
  EXPECT_STREQ(_hpcmem_topo_nodeset_format(mask, 128, small, sizeof small), "0-3,6,...");
}

/* ------------------------------------------------------------------ */
/* _hpcmem_topo_classes, _hpcmem_topo_class                             */

TEST_F(topo_classes, knl_dram_and_hbm) {
  ASSERT_EQ(load(data("knl-snc4-flat.xml")).rc, 0);
  hpcmem_mem_class_t c[4];
  ASSERT_EQ(_hpcmem_topo_classes(c, 4), 2);
  EXPECT_EQ(c[0].kind, HPCMEM_MEM_DRAM);
  EXPECT_EQ(c[0].node_count, 4);
  EXPECT_EQ(nodes_of(c[0].nodes), "0-3");
  EXPECT_EQ(c[0].capacity, 96 * GiB);
  EXPECT_EQ(c[1].kind, HPCMEM_MEM_HBM);
  EXPECT_EQ(c[1].node_count, 4);
  EXPECT_EQ(nodes_of(c[1].nodes), "4-7");
  EXPECT_EQ(c[1].capacity, 16 * GiB);
  EXPECT_EQ(c[1].bandwidth, 0u);  // KNL has no HMAT: unknown
  EXPECT_EQ(c[1].latency, 0u);
}

TEST_F(topo_classes, dram_and_nvm_with_bandwidth_and_latency) {
  ASSERT_EQ(load(data("2socket-dram-nvm.xml")).rc, 0);
  hpcmem_mem_class_t c[4];
  ASSERT_EQ(_hpcmem_topo_classes(c, 4), 2);
  EXPECT_EQ(c[0].kind, HPCMEM_MEM_DRAM);
  EXPECT_EQ(nodes_of(c[0].nodes), "0-1");
  EXPECT_EQ(c[0].capacity, 192 * GiB);
  EXPECT_EQ(c[0].bandwidth, 102400u);
  EXPECT_EQ(c[0].latency, 85u);
  EXPECT_EQ(c[1].kind, HPCMEM_MEM_NVM);
  EXPECT_EQ(nodes_of(c[1].nodes), "2-3");
  EXPECT_EQ(c[1].capacity, 1536 * GiB);
  EXPECT_EQ(c[1].bandwidth, 30720u);
  EXPECT_EQ(c[1].latency, 305u);
}

TEST_F(topo_classes, counts_and_bad_arguments) {
  ASSERT_EQ(load(data("knl-snc4-flat.xml")).rc, 0);
  EXPECT_EQ(_hpcmem_topo_classes(nullptr, 0), 2);
  EXPECT_EQ(_hpcmem_topo_classes(nullptr, 1), -EINVAL);
  hpcmem_mem_class_t one;
  one.kind = HPCMEM_MEM_UNKNOWN;
  EXPECT_EQ(_hpcmem_topo_classes(&one, 1), 2);  // fills one, says two exist
  EXPECT_EQ(one.kind, HPCMEM_MEM_DRAM);
  hpcmem_mem_class_t c;
  EXPECT_EQ(_hpcmem_topo_class(HPCMEM_MEM_HBM, &c), 0);
  EXPECT_EQ(c.node_count, 4);
  EXPECT_EQ(_hpcmem_topo_class(HPCMEM_MEM_NVM, &c), -ENODEV);
  EXPECT_EQ(_hpcmem_topo_class((hpcmem_mem_kind_t)17, &c), -EINVAL);
}

TEST_F(topo_classes, plain_machine_is_all_dram) {
  ASSERT_EQ(load(data("plain-1numa.xml")).rc, 0);
  hpcmem_mem_class_t c[4];
  ASSERT_EQ(_hpcmem_topo_classes(c, 4), 1);
  EXPECT_EQ(c[0].kind, HPCMEM_MEM_DRAM);
  EXPECT_EQ(c[0].capacity, 16 * GiB);
  EXPECT_EQ(_hpcmem_topo_class(HPCMEM_MEM_HBM, nullptr), -ENODEV);
}

/* ------------------------------------------------------------------ */
/* _hpcmem_topo_local_nodes                                             */

std::string local(int cpu, hpcmem_mem_kind_t kind, int *rc) {
  unsigned long mask[HPCMEM_TOPO_MASK_LONGS];
  *rc = _hpcmem_topo_local_nodes(cpu, kind, mask, HPCMEM_TOPO_MAX_NODE_OS);
  return *rc > 0 ? nodes_of(mask) : "";
}

TEST_F(topo_local_nodes, knl_cluster_memory) {
  ASSERT_EQ(load(data("knl-snc4-flat.xml")).rc, 0);
  int rc;
  EXPECT_EQ(local(0, HPCMEM_MEM_HBM, &rc), "4");
  EXPECT_EQ(rc, 1);
  EXPECT_EQ(local(16, HPCMEM_MEM_HBM, &rc), "5");
  EXPECT_EQ(local(16, HPCMEM_MEM_DRAM, &rc), "1");
  EXPECT_EQ(local(255, HPCMEM_MEM_HBM, &rc), "7");
  EXPECT_EQ(local(130, HPCMEM_MEM_DRAM, &rc), "0");
  EXPECT_EQ(local(300, HPCMEM_MEM_HBM, &rc), "4-7");  // a cpu the topology lacks: every node
  EXPECT_EQ(rc, 4);
}

TEST_F(topo_local_nodes, nvm_per_package) {
  ASSERT_EQ(load(data("2socket-dram-nvm.xml")).rc, 0);
  int rc;
  EXPECT_EQ(local(8, HPCMEM_MEM_NVM, &rc), "3");
  EXPECT_EQ(local(16, HPCMEM_MEM_NVM, &rc), "2");
  EXPECT_EQ(local(24, HPCMEM_MEM_DRAM, &rc), "1");
}

TEST_F(topo_local_nodes, bad_arguments_and_missing_kind) {
  ASSERT_EQ(load(data("knl-snc4-flat.xml")).rc, 0);
  unsigned long mask[HPCMEM_TOPO_MASK_LONGS];
  EXPECT_EQ(_hpcmem_topo_local_nodes(-1, HPCMEM_MEM_HBM, mask, HPCMEM_TOPO_MAX_NODE_OS), -EINVAL);
  EXPECT_EQ(_hpcmem_topo_local_nodes(0, (hpcmem_mem_kind_t)9, mask, HPCMEM_TOPO_MAX_NODE_OS), -EINVAL);
  EXPECT_EQ(_hpcmem_topo_local_nodes(0, HPCMEM_MEM_NVM, mask, HPCMEM_TOPO_MAX_NODE_OS), -ENODEV);
  EXPECT_EQ(_hpcmem_topo_local_nodes(0, HPCMEM_MEM_HBM, mask, 4), -ERANGE);
  EXPECT_EQ(_hpcmem_topo_local_nodes(0, HPCMEM_MEM_HBM, nullptr, 8), -EINVAL);
  EXPECT_EQ(_hpcmem_topo_local_nodes(0, HPCMEM_MEM_HBM, nullptr, 0), 1);
}

/* ------------------------------------------------------------------ */
/* _hpcmem_topo_kind_name, _hpcmem_topo_kind_parse                      */

TEST_F(topo_kind_name, names_round_trip) {
  for (int k = 0; k < HPCMEM_MEM_KINDS_; k++)
    EXPECT_EQ(_hpcmem_topo_kind_parse(_hpcmem_topo_kind_name((hpcmem_mem_kind_t)k)), k);
  EXPECT_STREQ(_hpcmem_topo_kind_name(HPCMEM_MEM_HBM), "HBM");
  EXPECT_EQ(_hpcmem_topo_kind_parse("hbm"), HPCMEM_MEM_HBM);
  EXPECT_EQ(_hpcmem_topo_kind_parse("SRAM"), -EINVAL);
  EXPECT_EQ(_hpcmem_topo_kind_parse(nullptr), -EINVAL);
  EXPECT_STREQ(_hpcmem_topo_kind_name((hpcmem_mem_kind_t)42), "invalid");
}

/* ------------------------------------------------------------------ */
/* _hpcmem_topo_print                                                   */

TEST_F(topo_print, knl_summary) {
  ASSERT_EQ(load(data("knl-snc4-flat.xml")).rc, 0);
  std::string s = printed();
  EXPECT_EQ(s.rfind("topology: " + data("knl-snc4-flat.xml") + "\n", 0), 0u) << s;
  EXPECT_NE(s.find("  256 cpus, 8 NUMA nodes, 32 thread groups (by L2 cache)\n"
                   "  64 cores, L1 32.0 KiB, L2 1.0 MiB, 64-byte cache lines\n"), std::string::npos) << s;
  EXPECT_NE(s.find("  node 0: DRAM, 24.0 GiB, 64 cpus 0-15,64-79,128-143,192-207\n"), std::string::npos) << s;
  EXPECT_NE(s.find("  node 5: HBM (MCDRAM), 4.0 GiB, 64 cpus 16-31,80-95,144-159,208-223 (from its hwloc name)\n"),
            std::string::npos)
      << s;
  EXPECT_NE(s.find("  class HBM: nodes 4-7, 16.0 GiB\n"), std::string::npos) << s;
}

TEST_F(topo_print, nvm_summary_shows_attributes) {
  ASSERT_EQ(load(data("2socket-dram-nvm.xml")).rc, 0);
  std::string s = printed();
  EXPECT_NE(s.find("  node 3: NVM, 768.0 GiB, 16 cpus 8-15,24-31, bandwidth 30720 MiB/s, latency 305 ns "
                   "(from memory attributes)\n"),
            std::string::npos)
      << s;
  EXPECT_NE(s.find("  class DRAM: nodes 0-1, 192.0 GiB, bandwidth 102400 MiB/s, latency 85 ns\n"), std::string::npos)
      << s;
}

TEST_F(topo_print, before_load) {
  _hpcmem_topo_unload();
  EXPECT_EQ(printed(), "topology: not loaded (one node, 1 thread group)\n");
}

}  // namespace
