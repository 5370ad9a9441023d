// Job identity from the launcher's environment (src/util/job.c).
#include <gtest/gtest.h>
#include <cstring>
#include <string>
#include <sys/utsname.h>
#include "util/job.h"

namespace {
void load(std::initializer_list<const char *> vars, int pid = 42) {
  static char buf[16][128];
  static char *env[17];
  size_t i = 0;
  for (const char *v : vars) { snprintf(buf[i], sizeof buf[i], "%s", v); env[i] = buf[i]; i++; }
  env[i] = nullptr;
  _hpcmem_job_load(env, pid);
}
}  // namespace

TEST(_hpcmem_job_load, lone_process_gets_a_pid_job_id) {
  load({"HOME=/root"}, 1234);
  EXPECT_EQ(_hpcmem_job.rank, -1);
  EXPECT_EQ(_hpcmem_job.size, 1);
  EXPECT_EQ(_hpcmem_job.from_launcher, 0);
  EXPECT_STREQ(_hpcmem_job.jobid, "pid1234");
  EXPECT_NE(_hpcmem_job.hostname[0], 0);
}

// job.c formats without snprintf (docs/footprint.md): numbers at their edges,
// the host name exactly as uname gives it (cut at 63 bytes).
TEST(_hpcmem_job_load, pid_and_hostname_are_formatted_exactly) {
  load({}, 0);
  EXPECT_STREQ(_hpcmem_job.jobid, "pid0");
  load({}, 2147483647);
  EXPECT_STREQ(_hpcmem_job.jobid, "pid2147483647");
  load({}, 10);
  EXPECT_STREQ(_hpcmem_job.jobid, "pid10");
  struct utsname u;
  ASSERT_EQ(uname(&u), 0);
  EXPECT_EQ(std::string(_hpcmem_job.hostname), std::string(u.nodename).substr(0, sizeof _hpcmem_job.hostname - 1));
  // a step id that would not fit with its dot is left out; one that does is kept
  std::string job(57, '7');
  std::string jv = "SLURM_JOB_ID=" + job;
  load({"SLURM_PROCID=0", jv.c_str(), "SLURM_STEP_ID=12345"});
  EXPECT_EQ(std::string(_hpcmem_job.jobid), job);
  load({"SLURM_PROCID=0", jv.c_str(), "SLURM_STEP_ID=1234"});
  EXPECT_EQ(std::string(_hpcmem_job.jobid), job + ".1234");
}

TEST(_hpcmem_job_load, open_mpi_rank_size_and_job) {
  load({"OMPI_COMM_WORLD_RANK=3", "OMPI_COMM_WORLD_SIZE=8", "OMPI_MCA_ess_base_jobid=123456"});
  EXPECT_EQ(_hpcmem_job.rank, 3);
  EXPECT_EQ(_hpcmem_job.size, 8);
  EXPECT_EQ(_hpcmem_job.from_launcher, 1);
  EXPECT_STREQ(_hpcmem_job.jobid, "123456");
}

TEST(_hpcmem_job_load, slurm_steps_get_their_own_id) {
  load({"SLURM_PROCID=5", "SLURM_NTASKS=16", "SLURM_JOB_ID=777", "SLURM_STEP_ID=2"});
  EXPECT_EQ(_hpcmem_job.rank, 5);
  EXPECT_EQ(_hpcmem_job.size, 16);
  EXPECT_STREQ(_hpcmem_job.jobid, "777.2");
  load({"SLURM_PROCID=0", "SLURM_JOB_ID=777", "SLURM_STEP_ID=batch"});   // not a number: left out
  EXPECT_STREQ(_hpcmem_job.jobid, "777");
}

TEST(_hpcmem_job_load, job_id_is_made_file_name_safe) {
  load({"PMIX_RANK=0", "PMIX_NAMESPACE=prterun-host/1234@0"});
  EXPECT_STREQ(_hpcmem_job.jobid, "prterun-host_1234_0");
}

TEST(_hpcmem_job_load, malformed_numbers_are_ignored) {
  load({"OMPI_COMM_WORLD_RANK=abc", "PMI_RANK=2", "PMI_SIZE=-4"});
  EXPECT_EQ(_hpcmem_job.rank, 2);
  EXPECT_EQ(_hpcmem_job.size, 1);
}
