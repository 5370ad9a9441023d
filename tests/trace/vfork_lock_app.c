/* For tests/trace/test_exit_exec.sh: a child of vfork execs while another
 * thread of its parent holds the dynamic loader's lock.
 *
 *   vfork_lock_app LIBRARY FORM
 *
 * A second thread dlopens LIBRARY (tests/trace/block_ctor.c), whose
 * constructor blocks, holding the lock until told to go on.  Then this
 * thread vforks and the child runs /bin/true through FORM (execve, execvp
 * or execlp), the first exec call of the process.  An exec that takes the
 * loader's lock (dlsym) waits for the second thread, which waits for the
 * parent, which waits for the child: the program hangs (the test runs it
 * under timeout).  Status 0 when the child ran /bin/true, which ended
 * with 0; anything else prints why and returns 4. */
#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

extern char **environ;

static void *load(void *path) {
  void *h = dlopen(path, RTLD_NOW);
  if (!h) fprintf(stderr, "vfork_lock_app: %s\n", dlerror());
  return h;
}

static int child_status(pid_t pid) {
  int st;
  while (waitpid(pid, &st, 0) < 0)
    if (errno != EINTR) return -1;
  return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

int main(int argc, char **argv) {
  if (argc != 3) { fprintf(stderr, "usage: vfork_lock_app LIBRARY execve|execvp|execlp\n"); return 2; }
  const char *form = argv[2];
  int started[2], go[2];
  char fds[32], c;
  if (pipe(started) || pipe(go)) { perror("vfork_lock_app: pipe"); return 4; }
  snprintf(fds, sizeof fds, "%d %d", go[0], started[1]);
  setenv("HMT_BLOCK_FDS", fds, 1);
  pthread_t loader;
  if (pthread_create(&loader, NULL, load, argv[1])) { fprintf(stderr, "vfork_lock_app: pthread_create failed\n"); return 4; }
  if (read(started[0], &c, 1) != 1) { fprintf(stderr, "vfork_lock_app: the constructor did not start\n"); return 4; }

  char *args[] = {"true", NULL};
  pid_t pid = vfork();
  if (pid == 0) {
    if (!strcmp(form, "execve")) execve("/bin/true", args, environ);
    else if (!strcmp(form, "execvp")) execvp("true", args);
    else if (!strcmp(form, "execlp")) execlp("true", "true", (char *)NULL);
    _exit(127);
  }
  close(go[1]);  /* the constructor goes on */
  void *h;
  pthread_join(loader, &h);
  int st = pid < 0 ? -1 : child_status(pid);
  if (st != 0) { fprintf(stderr, "vfork_lock_app: %s: the child ended with %d\n", form, st); return 4; }
  if (!h) return 4;
  return 0;
}
