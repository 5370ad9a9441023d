/* For tests/trace/test_leave.sh: a program that ends without its exit
 * handlers, replaces itself, or vforks.  First it allocates 1000 blocks of
 * 3001 bytes and frees 500 of them ("before"); then, by HOW:
 *
 *   _exit, _Exit          ends with that call, status 7
 *   execve execv execvp execvpe execl execlp execle fexecve execveat
 *                         runs /bin/sh -c 'exit $(($# + ${HMT_X:-0}))' sh a b c
 *                         through that call: status 3, or 7 from the forms
 *                         that pass an environment (HMT_X=4), which shows
 *                         the arguments and the environment arrived
 *   fail-<exec form>      the same call on a program that does not exist:
 *                         it must return -1 with ENOENT (fexecve: a
 *                         directory's fd, EACCES), then "after" and status 0
 *   vfork-_exit           vfork, the child calls _exit(0); then "after"
 *   vfork-exec            vfork, the child execs /bin/true; then "after"
 *
 * "after" allocates 1000 blocks of 3002 bytes and frees 500.  The programs
 * it starts run without LD_PRELOAD: only this process writes a trace.
 * Any other outcome prints why and returns 4. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE 1 /* execvpe, execveat */
#endif
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

static void *volatile keep[1000];

__attribute__((noinline)) static void churn(size_t size) {
  for (int i = 0; i < 1000; i++) keep[i] = malloc(size);
  for (int i = 0; i < 1000; i += 2) free(keep[i]);
}

#define SCRIPT "exit $(($# + ${HMT_X:-0}))"

static int run(const char *how, int fail) {
  char *argv[] = {"sh", "-c", SCRIPT, "sh", "a", "b", "c", NULL};
  char *envp[] = {"HMT_X=4", "PATH=/usr/bin:/bin", NULL};
  const char *path = fail ? "/nonexistent/hpcmem-leave-app" : "/bin/sh";
  const char *file = fail ? "hpcmem-no-such-program" : "sh";
  if (!strcmp(how, "execve")) return execve(path, argv, envp);
  if (!strcmp(how, "execv")) return execv(path, argv);
  if (!strcmp(how, "execvp")) return execvp(file, argv);
  if (!strcmp(how, "execvpe")) return execvpe(file, argv, envp);
  if (!strcmp(how, "execl")) return execl(path, "sh", "-c", SCRIPT, "sh", "a", "b", "c", (char *)NULL);
  if (!strcmp(how, "execlp")) return execlp(file, "sh", "-c", SCRIPT, "sh", "a", "b", "c", (char *)NULL);
  if (!strcmp(how, "execle")) return execle(path, "sh", "-c", SCRIPT, "sh", "a", "b", "c", (char *)NULL, envp);
  if (!strcmp(how, "fexecve")) {
    int fd = open(fail ? "/" : "/bin/sh", O_RDONLY);
    return fd < 0 ? -2 : fexecve(fd, argv, envp);
  }
  if (!strcmp(how, "execveat")) return execveat(AT_FDCWD, path, argv, envp, 0);
  fprintf(stderr, "leave_app: unknown exec form %s\n", how);
  exit(2);
}

static int child_status(pid_t pid) {
  int st;
  while (waitpid(pid, &st, 0) < 0)
    if (errno != EINTR) return -1;
  return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

int main(int argc, char **argv) {
  if (argc != 2) { fprintf(stderr, "usage: leave_app HOW\n"); return 2; }
  const char *how = argv[1];
  unsetenv("LD_PRELOAD");  /* what it starts is not traced */
  churn(3001);
  if (!strcmp(how, "_exit")) _exit(7);
  if (!strcmp(how, "_Exit")) _Exit(7);
  if (!strncmp(how, "fail-", 5)) {
    errno = 0;
    int rc = run(how + 5, 1);
    int want = strcmp(how, "fail-fexecve") ? ENOENT : EACCES;
    if (rc != -1 || errno != want) {
      fprintf(stderr, "leave_app: %s returned %d, errno %d (%s); expected -1, errno %d\n", how + 5, rc, errno,
              strerror(errno), want);
      return 4;
    }
  } else if (!strcmp(how, "vfork-_exit") || !strcmp(how, "vfork-exec")) {
    int exec = !strcmp(how, "vfork-exec");
    pid_t pid = vfork();
    if (pid == 0) {
      if (exec) execl("/bin/true", "true", (char *)NULL);
      _exit(exec ? 127 : 0);
    }
    int st = pid < 0 ? -1 : child_status(pid);
    if (st != 0) { fprintf(stderr, "leave_app: %s: the child ended with %d\n", how, st); return 4; }
  } else {
    int rc = run(how, 0);
    fprintf(stderr, "leave_app: %s returned %d (%s)\n", how, rc, strerror(errno));
    return 4;
  }
  churn(3002);
  return 0;
}
