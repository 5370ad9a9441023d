/* Threads that trade large blocks through a shared pool: each allocates a
 * block, puts it into a random slot of the pool and frees the block it took
 * out, so a block is freed by any thread and its address is handed out
 * again at once, often to another thread, within one time tick of the trace
 * (2^16 ns).  The program counts its own live bytes under the pool's lock:
 *   trade_app THREADS ROUNDS [outside]
 * prints "peak <bytes> live <bytes>" (live: 0, everything is freed).  With
 * "outside" a thread frees the block it took after letting go of the lock,
 * so more threads' events share a tick (the count then leads the frees a
 * little: its peak is a lower bound).
 * tests/trace/test_report.sh checks that hpcmem-report finds every free. */
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define SLOTS 16
static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static void *pool[SLOTS];
static size_t pool_size[SLOTS];
static uint64_t live, peak;
static int rounds, outside;

static void *trader(void *arg) {
  unsigned seed = (unsigned)(uintptr_t)arg;
  for (int i = 0; i < rounds; i++) {
    size_t n = (128u << 10) + (size_t)rand_r(&seed) % (512u << 10);
    void *p = malloc(n);
    if (!p) abort();
    ((volatile char *)p)[0] = 1;
    unsigned k = (unsigned)rand_r(&seed) % SLOTS;
    pthread_mutex_lock(&mu);
    live += n;
    if (live > peak) peak = live;
    void *q = pool[k];
    size_t qn = pool_size[k];
    pool[k] = p;
    pool_size[k] = n;
    /* freed under the lock, so the count follows the true order */
    if (!outside) free(q);
    live -= qn;
    pthread_mutex_unlock(&mu);
    if (outside) free(q);
  }
  return NULL;
}

int main(int argc, char **argv) {
  int threads = argc > 1 ? atoi(argv[1]) : 4;
  rounds = argc > 2 ? atoi(argv[2]) : 20000;
  outside = argc > 3 && strcmp(argv[3], "outside") == 0;
  if (threads < 1 || threads > 64 || rounds < 1) {
    fprintf(stderr, "usage: trade_app THREADS(1-64) ROUNDS\n");
    return 2;
  }
  pthread_t t[64];
  for (int i = 0; i < threads; i++)
    if (pthread_create(&t[i], NULL, trader, (void *)(uintptr_t)(i + 1)) != 0) return 1;
  for (int i = 0; i < threads; i++) pthread_join(t[i], NULL);
  for (int k = 0; k < SLOTS; k++) {
    free(pool[k]);
    live -= pool_size[k];
  }
  printf("peak %llu live %llu\n", (unsigned long long)peak, (unsigned long long)live);
  return 0;
}
