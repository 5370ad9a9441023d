/* For tests/trace/test_signal.sh: allocates 1000 blocks of 1 KiB (kept),
 * then dies as asked:  signal_app TERM|INT|SEGV|ABRT|KILL|EXIT|TWO
 * (KILL first makes 100000 malloc/free pairs, so that some blocks of the
 * trace are written before the kill; TWO: a second thread keeps 1000
 * blocks of 512 B, both make 200000 pairs and then fault at the same
 * moment, so that one thread's SIGSEGV comes while the other's writes the
 * buffers) */
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static void *volatile keep[1000], *volatile keep2[1000];
static pthread_barrier_t both;

__attribute__((noinline)) static void fault(void) {
  for (int i = 0; i < 200000; i++) free(malloc(64));
  pthread_barrier_wait(&both);
  volatile int *volatile p = NULL;
  *p = 1;
}

__attribute__((noinline)) static void *twin(void *arg) {
  (void)arg;
  for (int i = 0; i < 1000; i++) keep2[i] = malloc(512);
  fault();
  return NULL;
}

__attribute__((noinline)) static void fill(void) {
  for (int i = 0; i < 1000; i++) {
    keep[i] = malloc(1024);
    memset(keep[i], 1, 1024);
  }
}

int main(int argc, char **argv) {
  if (argc != 2) return 2;
  fill();
  const char *how = argv[1];
  if (!strcmp(how, "TERM")) raise(SIGTERM);
  else if (!strcmp(how, "INT")) raise(SIGINT);
  else if (!strcmp(how, "ABRT")) abort();
  else if (!strcmp(how, "KILL")) {
    for (int i = 0; i < 100000; i++) free(malloc(64));
    raise(SIGKILL);
  }
  else if (!strcmp(how, "SEGV")) { volatile int *volatile p = NULL; *p = 1; }
  else if (!strcmp(how, "EXIT")) exit(0);
  else if (!strcmp(how, "TWO")) {
    pthread_t t;
    pthread_barrier_init(&both, NULL, 2);
    if (pthread_create(&t, NULL, twin, NULL) != 0) return 4;
    fault();
  }
  return 3;
}
