/* For tests/trace/test_phdr.sh: allocation inside dl_iterate_phdr callbacks
 * while other threads allocate (each allocation a traced event whose stack
 * is captured) and load and unload a library, for SECONDS seconds:
 *   phdr_app SECONDS
 * A thread in a dl_iterate_phdr callback holds the loader's lock.  Traced
 * with libunwind, three lock orders hung this program for ever: the
 * callback's allocation waiting for libunwind's cache lock, held by a
 * thread waiting for the loader's lock; the recorder's file lock held
 * across its own scan of the loaded objects; and the recorder's writer
 * thread started (pthread_create) from inside a callback.  Prints "done". */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <link.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static volatile int stop;

/* distinct call depths make distinct stacks: new stacks make the recorder
 * look at the loaded objects again */
__attribute__((noinline)) static void *nested(int depth) {
  if (depth == 0) return malloc(32);
  void *p = nested(depth - 1);
  __asm__ volatile("" ::: "memory");
  return p;
}

static int visit(struct dl_phdr_info *info, size_t size, void *data) {
  (void)info; (void)size;
  int *k = data;
  free(nested((*k)++ % 40));
  return 1;
}

static void *in_callbacks(void *arg) {
  (void)arg;
  int k = 0;
  while (!stop) dl_iterate_phdr(visit, &k);
  return NULL;
}

static void *allocating(void *arg) {
  (void)arg;
  int k = 0;
  while (!stop) free(nested(k++ % 37));
  return NULL;
}

static void *loading(void *arg) {
  const char *lib = arg;
  while (!stop) {
    void *h = dlopen(lib, RTLD_NOW | RTLD_LOCAL);
    if (h) dlclose(h);
  }
  return NULL;
}

int main(int argc, char **argv) {
  if (argc < 2) {
    fprintf(stderr, "usage: phdr_app SECONDS [LIBRARY]\n");
    return 2;
  }
  pthread_t t[3];
  if (pthread_create(&t[0], NULL, in_callbacks, NULL) || pthread_create(&t[1], NULL, allocating, NULL) ||
      pthread_create(&t[2], NULL, loading, argc > 2 ? argv[2] : "libm.so.6"))
    return 1;
  struct timespec d = {atoi(argv[1]), 0};
  nanosleep(&d, NULL);
  stop = 1;
  for (int i = 0; i < 3; i++) pthread_join(t[i], NULL);
  puts("done");
  return 0;
}
