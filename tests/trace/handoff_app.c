/* Blocks handed from one thread to another and freed there at once, as an
 * MPI progress thread or a producer/consumer queue does: most allocations
 * and their frees fall in the same time tick of the trace (2^16 ns), on
 * different threads.  Every malloc and free happens under one lock together
 * with the program's own count of live bytes, so the program knows the
 * exact order, peak and end:
 *   handoff_app ROUNDS
 * prints "peak <bytes> live <bytes>" (the blocks of kept() stay live).
 * tests/trace/test_report.sh compares hpcmem-report's figures with them. */
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#define QN 64
static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t cv = PTHREAD_COND_INITIALIZER;
static void *queue[QN];
static size_t qsize[QN];
static int qhead, qtail, done;
static uint64_t live, peak;

static void account(int64_t d) {
  live += (uint64_t)d;
  if (live > peak) peak = live;
}

/* the producer's allocations: each goes to the consumer */
__attribute__((noinline)) static void *produce(size_t n) {
  void *p = malloc(n);
  account((int64_t)n);
  return p;
}

/* a few blocks the producer keeps to the end: the leaks (calloc: a body
 * of its own, which identical-code folding cannot merge with produce) */
__attribute__((noinline)) static void *kept(size_t n) {
  void *p = calloc(1, n);
  account((int64_t)n);
  return p;
}

static void *consumer(void *arg) {
  (void)arg;
  pthread_mutex_lock(&mu);
  for (;;) {
    while (qhead == qtail && !done) pthread_cond_wait(&cv, &mu);
    if (qhead == qtail) break;
    void *p = queue[qhead % QN];
    size_t n = qsize[qhead % QN];
    qhead++;
    free(p);
    account(-(int64_t)n);
    pthread_cond_signal(&cv);
  }
  pthread_mutex_unlock(&mu);
  return NULL;
}

int main(int argc, char **argv) {
  int rounds = argc > 1 ? atoi(argv[1]) : 20000;
  pthread_t t;
  if (pthread_create(&t, NULL, consumer, NULL) != 0) return 1;
  void *keep[16];
  unsigned seed = 12345;
  for (int i = 0; i < rounds; i++) {
    size_t n = 16 + (rand_r(&seed) % 4000);
    pthread_mutex_lock(&mu);
    while (qtail - qhead == QN) pthread_cond_wait(&cv, &mu);
    queue[qtail % QN] = produce(n);
    qsize[qtail % QN] = n;
    qtail++;
    if (i % (rounds / 16 + 1) == 0 && i / (rounds / 16 + 1) < 16) keep[i / (rounds / 16 + 1)] = kept(1000 + (size_t)i % 7);
    pthread_cond_signal(&cv);
    pthread_mutex_unlock(&mu);
  }
  pthread_mutex_lock(&mu);
  done = 1;
  pthread_cond_broadcast(&cv);
  pthread_mutex_unlock(&mu);
  pthread_join(t, NULL);
  printf("peak %llu live %llu\n", (unsigned long long)peak, (unsigned long long)live);
  (void)keep;
  return 0;
}
