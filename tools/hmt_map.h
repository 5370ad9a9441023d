/* A hash map from 64-bit keys to 64-bit values for the trace tools: open
 * addressing, linear probing, deletion by backward shift (no tombstones, so
 * a map of live allocations that churns for hours does not degrade).
 * Key HMT_MAP_EMPTY cannot be stored. */
#ifndef HPCMEM_TOOLS_HMT_MAP_H
#define HPCMEM_TOOLS_HMT_MAP_H
#include <stdint.h>
#include <stdlib.h>

#define HMT_MAP_EMPTY UINT64_MAX

typedef struct { uint64_t key, val; } hmt_map_slot_t;
typedef struct {
  hmt_map_slot_t *s;
  size_t mask, count;
} hmt_map_t;

static inline size_t hmt_map_hash(uint64_t k) {
  k ^= k >> 33; k *= 0xff51afd7ed558ccdULL; k ^= k >> 33; k *= 0xc4ceb9fe1a85ec53ULL; k ^= k >> 33;
  return (size_t)k;
}

static inline void hmt_map_free(hmt_map_t *m) { free(m->s); m->s = NULL; m->mask = m->count = 0; }

static inline int hmt_map_grow(hmt_map_t *m) {
  size_t cap = m->s ? (m->mask + 1) * 2 : 64;
  hmt_map_slot_t *s = (hmt_map_slot_t *)malloc(cap * sizeof *s);
  if (!s) return -1;
  for (size_t i = 0; i < cap; i++) s[i].key = HMT_MAP_EMPTY;
  hmt_map_slot_t *old = m->s;
  size_t oldcap = old ? m->mask + 1 : 0;
  m->s = s; m->mask = cap - 1;
  for (size_t i = 0; i < oldcap; i++) {
    if (old[i].key == HMT_MAP_EMPTY) continue;
    size_t j = hmt_map_hash(old[i].key) & m->mask;
    while (s[j].key != HMT_MAP_EMPTY) j = (j + 1) & m->mask;
    s[j] = old[i];
  }
  free(old);
  return 0;
}

/** Pointer to the value of key, or NULL. */
static inline uint64_t *hmt_map_get(const hmt_map_t *m, uint64_t key) {
  if (!m->s) return NULL;
  for (size_t i = hmt_map_hash(key) & m->mask;; i = (i + 1) & m->mask) {
    if (m->s[i].key == key) return &m->s[i].val;
    if (m->s[i].key == HMT_MAP_EMPTY) return NULL;
  }
}

/** Pointer to the value of key, inserted with value 0 if absent (*added = 1); NULL on no memory. */
static inline uint64_t *hmt_map_put(hmt_map_t *m, uint64_t key, int *added) {
  if (added) *added = 0;
  if (!m->s || (m->count + 1) * 4 > (m->mask + 1) * 3)
    if (hmt_map_grow(m) != 0) return NULL;
  size_t i = hmt_map_hash(key) & m->mask;
  for (;; i = (i + 1) & m->mask) {
    if (m->s[i].key == key) return &m->s[i].val;
    if (m->s[i].key == HMT_MAP_EMPTY) break;
  }
  m->s[i].key = key; m->s[i].val = 0;
  m->count++;
  if (added) *added = 1;
  return &m->s[i].val;
}

/** Remove key; returns 1 and its value in *val if it was there. */
static inline int hmt_map_del(hmt_map_t *m, uint64_t key, uint64_t *val) {
  if (!m->s) return 0;
  size_t i = hmt_map_hash(key) & m->mask;
  for (;; i = (i + 1) & m->mask) {
    if (m->s[i].key == key) break;
    if (m->s[i].key == HMT_MAP_EMPTY) return 0;
  }
  if (val) *val = m->s[i].val;
  /* backward shift: pull later members of the probe run into the hole */
  size_t hole = i;
  for (size_t j = (i + 1) & m->mask; m->s[j].key != HMT_MAP_EMPTY; j = (j + 1) & m->mask) {
    size_t home = hmt_map_hash(m->s[j].key) & m->mask;
    /* j may move to hole if home is not in (hole, j] cyclically */
    if (((j - home) & m->mask) >= ((j - hole) & m->mask)) { m->s[hole] = m->s[j]; hole = j; }
  }
  m->s[hole].key = HMT_MAP_EMPTY;
  m->count--;
  return 1;
}

#endif
