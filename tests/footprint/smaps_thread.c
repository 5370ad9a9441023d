/* A small program with a thread, for test_hot_text.sh's page counts: the
 * main thread and a second one each allocate, reallocate and free objects
 * of a few small sizes and one large block, then the program prints its own
 * /proc/self/smaps (read with read(2) into a stack buffer, so that printing
 * adds no heap and no stdio buffer of its own). */
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static void work(void) {
  void *p[64];
  for (int i = 0; i < 64; i++) {
    p[i] = malloc(16 + (size_t)i * 24);
    if (!p[i]) abort();
    memset(p[i], i, 16);
  }
  for (int i = 0; i < 64; i += 2) {
    p[i] = realloc(p[i], 40 + (size_t)i * 24);
    if (!p[i]) abort();
  }
  for (int i = 0; i < 64; i++) free(p[i]);
  char *big = malloc(256 << 10);
  if (!big) abort();
  big[0] = 1;
  free(big);
  free(NULL);
}

static void *thread_main(void *arg) {
  (void)arg;
  work();
  return NULL;
}

int main(void) {
  pthread_t t;
  work();
  if (pthread_create(&t, NULL, thread_main, NULL) != 0 || pthread_join(t, NULL) != 0) {
    perror("pthread_create");
    return 2;
  }
  int fd = open("/proc/self/smaps", O_RDONLY);
  if (fd < 0) {
    perror("/proc/self/smaps");
    return 2;
  }
  char buf[8192];
  ssize_t n;
  while ((n = read(fd, buf, sizeof buf)) > 0)
    if (write(1, buf, (size_t)n) != n) return 2;
  close(fd);
  return n < 0 ? 2 : 0;
}
