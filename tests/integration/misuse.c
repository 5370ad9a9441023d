/* Misuse on purpose, for test_misuse.sh: one kind of bad free per run.
 *   misuse KIND    KIND: interior double double-slot double-list foreign stack interior-large double-large double-large-cached
 *                        misaligned-large realloc-foreign unallocated double-remote
 *                        interior-run unallocated-run double-pending double-after-pending
 *                        write-after-free
 * Prints "survived" and exits 0 when the allocator let it go on.
 * write-after-free (run with HPCMEM_CHECK=1): a thread frees most of what it
 * allocated, so its exit leaves the objects on their spans' free lists; the
 * program then writes into some of them and goes on calling malloc's slow
 * path (blocks of the large tier) for up to 10 s: the first periodic check,
 * 256 slow calls on, stops it.
 * double-remote (run with HPCMEM_HEAPS=2): a thread on cpu 0 allocates, one
 * on cpu 1 frees the block twice, so the first free puts it on the remote
 * list of the other group's heap; exits 77 when that cannot be arranged. */
#define _GNU_SOURCE
#include <pthread.h>
#include <sched.h>
#include <stdint.h>
#include <stdio.h>
#include <malloc.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include "hpcmem.h"

static int pin(int cpu) {
  cpu_set_t set;
  CPU_ZERO(&set);
  CPU_SET(cpu, &set);
  return sched_setaffinity(0, sizeof set, &set) == 0 && sched_getcpu() == cpu;
}

static void *alloc_on_cpu0(void *arg) {
  (void)arg;
  return pin(0) ? malloc(64) : NULL;
}

static void *free_twice_on_cpu1(void *q) {
  hpcmem_stats_t a, b;
  if (!pin(1)) return (void *)"cannot run on cpu 1";
  hpcmem_stats(&a);
  free(q);
  hpcmem_stats(&b);
  if (b.remote_free_count != a.remote_free_count + 1) return (void *)"the first free was not a remote free";
  free(q);
  return NULL;
}

static void *objs[2000];
static void *alloc_and_free_most(void *arg) {
  (void)arg;
  for (int i = 0; i < 2000; i++) objs[i] = malloc(48);
  for (int i = 0; i < 2000; i++)
    if (i % 10) free(objs[i]);                /* every tenth stays: the spans do not empty */
  return NULL;
}

static void write_after_free(void) {
  pthread_t t;
  if (pthread_create(&t, NULL, alloc_and_free_most, NULL) != 0 || pthread_join(t, NULL) != 0) exit(3);
  for (int i = 1; i < 2000; i += 97)
    if (i % 10) memset(objs[i], 0x41, 16);    /* the freed object's link and key */
  struct timespec t0, now;
  clock_gettime(CLOCK_MONOTONIC, &t0);
  do {                                        /* a check finds it */
    for (int i = 0; i < 1000; i++) { void *volatile q = malloc(200000); free(q); }
    clock_gettime(CLOCK_MONOTONIC, &now);
  } while (now.tv_sec - t0.tv_sec < 10);
}

static void double_remote(void) {
  pthread_t t;
  void *q = NULL, *why = NULL;
  if (pthread_create(&t, NULL, alloc_on_cpu0, NULL) != 0 || pthread_join(t, &q) != 0 || !q) {
    printf("skipped: cannot allocate on cpu 0\n");
    exit(77);
  }
  if (pthread_create(&t, NULL, free_twice_on_cpu1, q) != 0 || pthread_join(t, &why) != 0 || why) {
    printf("skipped: %s\n", why ? (const char *)why : "no thread");
    exit(77);
  }
}

int main(int argc, char **argv) {
  if (argc != 2) { fprintf(stderr, "usage: misuse KIND\n"); return 2; }
  const char *k = argv[1];
  char *p = malloc(64), *big = malloc(1 << 20), local[32];
  char *other = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  strcpy(p, "intact");
  if (!strcmp(k, "interior")) free(p + 16);
  else if (!strcmp(k, "double")) { char *q = malloc(64); free(q); free(q); }
  /* a class of its own (60000 bytes): q goes into the empty bin's slot unread */
  else if (!strcmp(k, "double-slot")) { char *q = malloc(60000); free(q); free(q); }
  /* q into the slot, r moves it onto the list: the key marks it */
  else if (!strcmp(k, "double-pending") || !strcmp(k, "double-after-pending")) {
    /* a list in the 64-byte bin first: then free puts each object aside (the
     * pending free) and pushes the one before onto the list */
    char *a = malloc(64), *b = malloc(64), *c = malloc(64), *x = malloc(64), *y = malloc(64);
    free(a);
    free(b);
    free(c);
    free(x);                                  /* x put aside, c onto the list */
    if (!strcmp(k, "double-after-pending")) free(y);   /* y aside, x onto the list */
    free(x);
    if (strcmp(k, "double-after-pending")) free(y);
  }
  else if (!strcmp(k, "double-list")) { char *q = malloc(60000), *r = malloc(60000); free(q); free(r); free(q); }
  else if (!strcmp(k, "foreign")) free(other + 64);
  else if (!strcmp(k, "stack")) free(local);
  else if (!strcmp(k, "interior-large")) free(big + 4096);
  else if (!strcmp(k, "misaligned-large")) free(big + 1);
  else if (!strcmp(k, "double-large")) { char *q = malloc(2 << 20); free(q); free(q); }
  /* 256 KiB: the first free puts q into the thread's large-block cache */
  else if (!strcmp(k, "double-large-cached")) { char *q = malloc(256 << 10); free(q); free(q); }
  else if (!strcmp(k, "realloc-foreign")) { if (realloc(other + 128, 100) != NULL) return 4; }
  else if (!strcmp(k, "unallocated")) { char *q = malloc(200000); free(q); free(q + 0); }
  /* direct runs smaller than a 64 KiB chunk have their records in the page map */
  else if (!strcmp(k, "interior-run")) { char *q = memalign(8192, 100); free(q + 4096); }
  else if (!strcmp(k, "unallocated-run")) {
    char *q = memalign(8192, 100), *r = memalign(8192, 100);
    free(q);
    free(q);                                  /* its chunk still holds r */
    free(r);
  }
  else if (!strcmp(k, "double-remote")) double_remote();
  else if (!strcmp(k, "write-after-free")) write_after_free();
  else { fprintf(stderr, "unknown kind %s\n", k); return 2; }
  /* the allocator must still work and the block we kept must be intact */
  char *after = malloc(100);
  strcpy(after, p);
  if (strcmp(after, "intact") != 0 || hpcmem_check() != 0) return 5;
  hpcmem_stats_t s;
  hpcmem_stats(&s);
  printf("survived errors=%llu\n", (unsigned long long)s.error_count);
  return 0;
}
