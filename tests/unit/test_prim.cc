// Primitives that replace libc wrappers at start (src/prim/prim.c,
// docs/footprint.md): they must answer what the wrappers answer.
#include <gtest/gtest.h>
#include <errno.h>
#include <linux/audit.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <pthread.h>
#include <sched.h>
#include <stddef.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>
#include <atomic>
#include <chrono>
#include <thread>
extern "C" {
#include "prim/prim.h"
}

namespace {

TEST(_hpcmem_prim_page_size, is_sysconf_page_size) {
  EXPECT_EQ(_hpcmem_prim_page_size(), (size_t)sysconf(_SC_PAGESIZE));
  EXPECT_EQ(_hpcmem_prim_page_size(), (size_t)sysconf(_SC_PAGESIZE));   // the cached value
}

TEST(_hpcmem_prim_cpus_allowed, follows_the_affinity_mask) {
  cpu_set_t all;
  ASSERT_EQ(sched_getaffinity(0, sizeof all, &all), 0);
  EXPECT_EQ(_hpcmem_prim_cpus_allowed(), (unsigned)CPU_COUNT(&all));
  // one cpu: the highest allowed one, so a mask word above the first counts too
  int last = -1;
  for (int c = 0; c < CPU_SETSIZE; c++)
    if (CPU_ISSET(c, &all)) last = c;
  ASSERT_GE(last, 0);
  cpu_set_t one;
  CPU_ZERO(&one);
  CPU_SET(last, &one);
  ASSERT_EQ(sched_setaffinity(0, sizeof one, &one), 0);
  EXPECT_EQ(_hpcmem_prim_cpus_allowed(), 1u);
  ASSERT_EQ(sched_setaffinity(0, sizeof all, &all), 0);
  EXPECT_EQ(_hpcmem_prim_cpus_allowed(), (unsigned)CPU_COUNT(&all));
}

TEST(_hpcmem_prim_gettid, is_the_kernel_s_thread_id) {
  EXPECT_EQ(_hpcmem_prim_gettid(), (int)syscall(SYS_gettid));
  EXPECT_EQ(_hpcmem_prim_gettid(), (int)getpid());     // the test's main thread
  int other = 0;
  std::thread([&] { other = _hpcmem_prim_gettid(); }).join();
  EXPECT_NE(other, 0);
  EXPECT_NE(other, (int)getpid());
}

TEST(_hpcmem_prim_thread_alive, until_the_thread_is_gone) {
  EXPECT_EQ(_hpcmem_prim_thread_alive(_hpcmem_prim_gettid()), 1);
  std::atomic<int> tid{0}, go{0};
  std::thread t([&] {
    tid = _hpcmem_prim_gettid();
    while (!go) std::this_thread::yield();
  });
  while (!tid) std::this_thread::yield();
  EXPECT_EQ(_hpcmem_prim_thread_alive(tid), 1);
  go = 1;
  t.join();
  // join returns when the thread's id is released; the kernel may list the
  // task a moment longer
  int alive = 1;
  for (int i = 0; i < 1000 && (alive = _hpcmem_prim_thread_alive(tid)); i++)
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  EXPECT_EQ(alive, 0);
  EXPECT_EQ(_hpcmem_prim_thread_alive(0x7ffffff0), 0) << "no such thread";
}

// Where a seccomp filter refuses tgkill, the answer comes from
// /proc/self/task.  The filter cannot be taken off again, so it goes on a
// forked child, which reports by its exit status.
enum {
  REFUSED_OK,
  REFUSED_NO_SECCOMP,     // the kernel has no seccomp filters: skip
  REFUSED_SETUP,          // prctl, pipe or pthread_create failed otherwise
  REFUSED_NOT_REFUSED,    // tgkill went through the filter
  REFUSED_SELF,           // the calling thread said gone
  REFUSED_LIVE,           // a blocked thread said gone
  REFUSED_JOINED,         // a joined thread still said alive after 1 s
  REFUSED_NONE,           // a tid that never existed said alive
};
const char *const refused_what[] = {
  "", "", "prctl, pipe or pthread_create failed in the child", "tgkill was not refused by the filter",
  "the calling thread reported gone", "a live (blocked) thread reported gone",
  "a joined thread still reported alive after 1 s", "a tid that does not exist reported alive"};

int refuse_tgkill() {
#if defined(__x86_64__)
  static sock_filter code[] = {
    BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, arch)),
    BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, AUDIT_ARCH_X86_64, 1, 0),
    BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),            // another ABI: leave it be
    BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)),
    BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, __NR_tgkill, 0, 1),
    BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | (EPERM & SECCOMP_RET_DATA)),
    BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
  };
  sock_fprog prog = {(unsigned short)(sizeof code / sizeof code[0]), code};
  if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0 || prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &prog) != 0)
    return errno == EINVAL ? REFUSED_NO_SECCOMP : REFUSED_SETUP;
  return REFUSED_OK;
#else
  return REFUSED_NO_SECCOMP;
#endif
}

void *blocked_thread(void *arg) {   // sends its tid, then waits on the pipe
  int *fds = (int *)arg, tid = _hpcmem_prim_gettid();
  char c;
  if (write(fds[1], &tid, sizeof tid) != sizeof tid) return nullptr;
  while (read(fds[0], &c, 1) < 0 && errno == EINTR) {}
  return nullptr;
}

void *short_thread(void *arg) {
  *(int *)arg = _hpcmem_prim_gettid();
  return nullptr;
}

int thread_alive_with_tgkill_refused() {
  int rc = refuse_tgkill();
  if (rc != REFUSED_OK) return rc;
  errno = 0;
  if (syscall(SYS_tgkill, (long)getpid(), (long)_hpcmem_prim_gettid(), 0L) != -1 || errno != EPERM)
    return REFUSED_NOT_REFUSED;
  if (_hpcmem_prim_thread_alive(_hpcmem_prim_gettid()) != 1) return REFUSED_SELF;

  int tid_pipe[2], go_pipe[2], fds[2], live = 0;
  pthread_t t;
  if (pipe(tid_pipe) != 0 || pipe(go_pipe) != 0) return REFUSED_SETUP;
  fds[0] = go_pipe[0];
  fds[1] = tid_pipe[1];
  if (pthread_create(&t, nullptr, blocked_thread, fds) != 0) return REFUSED_SETUP;
  if (read(tid_pipe[0], &live, sizeof live) != sizeof live) return REFUSED_SETUP;
  rc = _hpcmem_prim_thread_alive(live) == 1 ? REFUSED_OK : REFUSED_LIVE;
  if (write(go_pipe[1], "x", 1) != 1) return REFUSED_SETUP;
  pthread_join(t, nullptr);
  if (rc != REFUSED_OK) return rc;

  int gone = 0;
  if (pthread_create(&t, nullptr, short_thread, &gone) != 0) return REFUSED_SETUP;
  pthread_join(t, nullptr);
  // the kernel may list the task a moment after join returns
  int alive = 1;
  for (int i = 0; i < 1000 && (alive = _hpcmem_prim_thread_alive(gone)); i++) usleep(1000);
  if (alive) return REFUSED_JOINED;
  if (_hpcmem_prim_thread_alive(0x7ffffff0) != 0) return REFUSED_NONE;
  return REFUSED_OK;
}

TEST(_hpcmem_prim_thread_alive, falls_back_to_proc_when_tgkill_is_refused) {
  pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) _exit(thread_alive_with_tgkill_refused());
  int status = 0;
  ASSERT_EQ(waitpid(pid, &status, 0), pid);
  ASSERT_TRUE(WIFEXITED(status)) << "the child died of signal " << (WIFSIGNALED(status) ? WTERMSIG(status) : 0);
  int rc = WEXITSTATUS(status);
  if (rc == REFUSED_NO_SECCOMP) GTEST_SKIP() << "no seccomp filters here (prctl: EINVAL, or not x86-64)";
  ASSERT_LT(rc, (int)(sizeof refused_what / sizeof refused_what[0])) << "the child exited with " << rc;
  EXPECT_EQ(rc, REFUSED_OK) << refused_what[rc];
}

}  // namespace
