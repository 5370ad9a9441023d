/* For tests/trace/test_signal.sh: a SIGTERM that comes while a realloc's
 * event is being recorded.  main allocates a block of 2 MiB (the large
 * tier) and reallocs it to 100 bytes, which moves it, from a call site not
 * seen before: the recorder captures a stack with libunwind, which looks
 * the code up through dl_iterate_phdr.  Another thread holds the loader's
 * lock meanwhile (it is inside a dl_iterate_phdr callback), so main waits
 * there, inside the realloc's event.  That thread then asks the allocator
 * whether the old block is still allocated (malloc_usable_size: 0 once the
 * large tier has it back), prints
 *   held       still allocated: the trace, which holds it live, is right
 *   released   already free: the trace holds a block live that the
 *              program has freed (a free went missing)
 * and raises SIGTERM, which ends the process in the recorder's handler.
 * Nothing in that thread allocates while main waits (main holds libunwind's
 * lock, which an allocation's capture would wait for).  "no wait" (status
 * 4): main got through the realloc without waiting -- the capture did not
 * take the loader's lock here. */
#define _GNU_SOURCE
#include <fcntl.h>
#include <link.h>
#include <malloc.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#define BIG (2u << 20)

static void *volatile old_block, *volatile new_block;
static volatile int entering;
static int main_tid, go[2];

static void say(const char *s) {
  if (write(1, s, strlen(s)) < 0) _exit(5);
}

/* main sleeps: blocked on a lock (it does nothing else that sleeps) */
static int main_sleeps(void) {
  char path[64], buf[512];
  snprintf(path, sizeof path, "/proc/self/task/%d/stat", main_tid);
  int fd = open(path, O_RDONLY);
  if (fd < 0) return 0;
  ssize_t n = read(fd, buf, sizeof buf - 1);
  close(fd);
  if (n <= 0) return 0;
  buf[n] = 0;
  char *s = strrchr(buf, ')');
  return s && s[1] == ' ' && s[2] == 'S';
}

static int inside(struct dl_phdr_info *info, size_t size, void *arg) {
  (void)info;
  (void)size;
  if (*(int *)arg) return 1;
  *(int *)arg = 1;
  if (write(go[1], "g", 1) != 1) _exit(5);
  while (!entering) usleep(1000);
  while (!main_sleeps()) {
    if (new_block) { say("no wait\n"); _exit(4); }
    usleep(1000);
  }
  say(malloc_usable_size(old_block) ? "held\n" : "released\n");
  raise(SIGTERM);
  return 1;
}

static void *holder(void *arg) {
  (void)arg;
  int once = 0;
  dl_iterate_phdr(inside, &once);
  return NULL;
}

__attribute__((noinline)) static void *shrink(void *p) { return realloc(p, 100); }

int main(void) {
  main_tid = (int)syscall(SYS_gettid);
  if (pipe(go)) return 2;
  old_block = malloc(BIG);
  memset(old_block, 1, 4096);
  pthread_t t;
  if (pthread_create(&t, NULL, holder, NULL)) return 2;
  char c;
  if (read(go[0], &c, 1) != 1) return 2;
  entering = 1;
  new_block = shrink(old_block);
  pthread_join(t, NULL);
  say("not killed\n");
  return 3;
}
