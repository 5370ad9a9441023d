/* The measurement tools of tests/trace (hmt_streams, hmt_model) encode each
 * thread's events again, so they read a whole trace file grouped by thread,
 * in the order the reader gives them. */
#ifndef HPCMEM_TESTS_EVENTS_BY_THREAD_H
#define HPCMEM_TESTS_EVENTS_BY_THREAD_H
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "hmt_reader.h"

typedef struct { uint32_t tid; size_t n, cap; hmt_event_t *ev; } thread_t;

/* Reads every event of r into *th (*nth threads); returns the number of
 * events, or -1 after printing the reader's error. */
static inline long long read_events_by_thread(hmt_reader_t *r, thread_t **th, size_t *nth) {
  long long total = 0;
  hmt_event_t ev;
  int k;
  *th = NULL;
  *nth = 0;
  while ((k = hmt_next(r, &ev)) == 1) {
    size_t i = 0;
    while (i < *nth && (*th)[i].tid != ev.tid) i++;
    if (i == *nth) {
      *th = realloc(*th, ++*nth * sizeof **th);
      memset(&(*th)[i], 0, sizeof (*th)[i]);
      (*th)[i].tid = ev.tid;
    }
    thread_t *t = &(*th)[i];
    if (t->n == t->cap) t->ev = realloc(t->ev, (t->cap = t->cap * 2 + 1024) * sizeof ev);
    t->ev[t->n++] = ev;
    total++;
  }
  if (k < 0) { fprintf(stderr, "%s\n", hmt_error(r)->message); return -1; }
  return total;
}

/* Opens path and reads its events grouped by thread (above); returns the
 * number of events, or -1 after printing what went wrong. */
static inline long long open_events_by_thread(const char *path, hmt_reader_t **r, thread_t **th, size_t *nth) {
  hmt_error_t err;
  if (hmt_open(path, 0, r, &err)) { fprintf(stderr, "%s\n", err.message); return -1; }
  return read_events_by_thread(*r, th, nth);
}
#endif
