/* Allocation stacks that the recorder's stack cache (src/trace/stack.c)
 * must tell apart: the same allocating function entered with its frame at
 * the same stack address from different callers, recursion to varying
 * depths, frames whose size changes at run time (alloca), stacks deeper
 * than the cache keeps, and two threads.  Every allocation this program
 * makes on purpose has a size in [3001, 3999], so that test_stack_cache.sh
 * can compare its stacks, captured with the cache, against the same
 * program traced without it.  Run with libhpcmem preloaded. */
#include <alloca.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

static void *volatile sink;

__attribute__((noinline)) static void leaf(size_t n) {
  void *p = malloc(n);
  sink = p;
  free(p);
  __asm__ volatile("" ::: "memory");
}

/* two callers with frames of the same size: leaf's frame lands at the same
 * address from either */
__attribute__((noinline)) static void via_a(size_t n) { leaf(n); __asm__ volatile("" ::: "memory"); }
__attribute__((noinline)) static void via_b(size_t n) { leaf(n + 1); __asm__ volatile("" ::: "memory"); }

__attribute__((noinline)) static void recurse(int d, size_t n) {
  if (d > 0) { recurse(d - 1, n); __asm__ volatile("" ::: "memory"); return; }
  leaf(n);
}

__attribute__((noinline)) static void with_alloca(size_t pad, size_t n) {
  char *a = alloca(pad);
  memset(a, 0, pad);
  sink = a;
  leaf(n);
  __asm__ volatile("" ::: "memory");
}

/* a caller one level up that differs while everything below is the same */
__attribute__((noinline)) static void outer_x(size_t n) { via_a(n); __asm__ volatile("" ::: "memory"); }
__attribute__((noinline)) static void outer_y(size_t n) { via_a(n + 2); __asm__ volatile("" ::: "memory"); }

/* ... and one that differs five frames above the allocation */
__attribute__((noinline)) static void mid3(size_t n) { via_a(n); __asm__ volatile("" ::: "memory"); }
__attribute__((noinline)) static void mid2(size_t n) { mid3(n); __asm__ volatile("" ::: "memory"); }
__attribute__((noinline)) static void mid1(size_t n) { mid2(n); __asm__ volatile("" ::: "memory"); }
__attribute__((noinline)) static void far_x(size_t n) { mid1(n); __asm__ volatile("" ::: "memory"); }
__attribute__((noinline)) static void far_y(size_t n) { mid1(n + 1); __asm__ volatile("" ::: "memory"); }

static void workload(size_t base) {
  for (int i = 0; i < 2000; i++) {
    if (i & 1) via_a(base); else via_b(base + 10);
    if (i % 3 == 0) outer_x(base + 20); else outer_y(base + 20);
    if (i % 4 == 0) far_x(base + 60); else far_y(base + 60);
    recurse(i % 7, base + 30 + (size_t)(i % 7));
    with_alloca(16 + (size_t)(i % 5) * 48, base + 40);
    if (i % 100 == 0) recurse(120, base + 50);  /* deeper than the cache keeps */
  }
}

static void *thread_main(void *arg) {
  (void)arg;
  workload(3500);
  return NULL;
}

int main(void) {
  pthread_t t;
  if (pthread_create(&t, NULL, thread_main, NULL) != 0) return 1;
  workload(3001);
  pthread_join(t, NULL);
  /* same again from main after the thread is gone: its buffer (and cache)
   * goes to the next thread */
  if (pthread_create(&t, NULL, thread_main, NULL) != 0) return 1;
  pthread_join(t, NULL);
  return 0;
}
