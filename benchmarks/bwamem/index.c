/* k-mer index of the reference: every k-mer (k = 19, BWA-MEM's minimum
 * seed length) by its 2-bit code, bucketed by its first 11 bases and
 * sorted by the remaining 8 inside each bucket.  Seeds are then grown to
 * maximal exact matches against the reference itself (align.c). */
#include "config.h"
#include "bwa.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#define SUFFIX_BITS (2 * BWA_K - BWA_BUCKET_BITS)
#define NBUCKETS ((uint64_t)1 << BWA_BUCKET_BITS)
#define KMASK (((uint64_t)1 << (2 * BWA_K)) - 1)

static int cmp_u64(const void *a, const void *b)
{
  uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
  return x < y ? -1 : x > y;
}

static void sort_bucket(uint64_t *e, int64_t n)
{
  if (n > 32) {
    qsort(e, (size_t)n, sizeof *e, cmp_u64);
    return;
  }
  for (int64_t i = 1; i < n; i++) {
    uint64_t v = e[i];
    int64_t j = i;
    while (j > 0 && e[j - 1] > v) {
      e[j] = e[j - 1];
      j--;
    }
    e[j] = v;
  }
}

/* call fn(code, pos) for every k-mer that lies inside one contig */
#define FOR_EACH_KMER(ref, code, pos, body)                                   \
  for (int c_ = 0; c_ < (ref)->ncontigs; c_++) {                              \
    const bwa_contig_t *ct_ = &(ref)->contigs[c_];                            \
    uint64_t code = 0;                                                        \
    for (int64_t i_ = 0; i_ < ct_->len; i_++) {                               \
      code = ((code << 2) | (ref)->seq[ct_->offset + i_]) & KMASK;            \
      if (i_ + 1 >= BWA_K) {                                                  \
        int64_t pos = ct_->offset + i_ + 1 - BWA_K;                           \
        body                                                                  \
      }                                                                       \
    }                                                                         \
  }

int bwa_index_build(const bwa_ref_t *ref, bwa_index_t *idx)
{
  memset(idx, 0, sizeof *idx);
  idx->ref = ref;
  if (ref->len >= ((int64_t)1 << 32)) {
    fprintf(stderr, "bwamem: references above 4 Gbp are not supported\n");
    return -EINVAL;
  }
  idx->bucket = calloc(NBUCKETS + 1, sizeof *idx->bucket);
  if (idx->bucket == NULL)
    return -ENOMEM;
  FOR_EACH_KMER(ref, code, pos, { (void)pos; idx->bucket[(code >> SUFFIX_BITS) + 1]++; });
  for (uint64_t b = 0; b < NBUCKETS; b++)
    idx->bucket[b + 1] += idx->bucket[b];
  idx->nentries = idx->bucket[NBUCKETS];
  idx->entry = malloc((size_t)(idx->nentries ? idx->nentries : 1) * sizeof *idx->entry);
  uint32_t *fill = malloc(NBUCKETS * sizeof *fill);
  if (idx->entry == NULL || fill == NULL) {
    free(fill);
    bwa_index_free(idx);
    return -ENOMEM;
  }
  memcpy(fill, idx->bucket, NBUCKETS * sizeof *fill);
  FOR_EACH_KMER(ref, code, pos, {
    uint64_t b = code >> SUFFIX_BITS;
    idx->entry[fill[b]++] = (code & ((1u << SUFFIX_BITS) - 1)) << 32 | (uint64_t)pos;
  });
  free(fill);
  for (uint64_t b = 0; b < NBUCKETS; b++)
    sort_bucket(idx->entry + idx->bucket[b], (int64_t)idx->bucket[b + 1] - idx->bucket[b]);
  return 0;
}

void bwa_index_free(bwa_index_t *idx)
{
  free(idx->bucket);
  free(idx->entry);
  memset(idx, 0, sizeof *idx);
}

int64_t bwa_index_lookup(const bwa_index_t *idx, uint64_t code, const uint64_t **first)
{
  uint64_t b = code >> SUFFIX_BITS, key = (code & ((1u << SUFFIX_BITS) - 1)) << 32;
  int64_t lo = idx->bucket[b], hi = idx->bucket[b + 1];

  while (lo < hi) {  /* first entry >= key */
    int64_t mid = lo + (hi - lo) / 2;
    if (idx->entry[mid] < key)
      lo = mid + 1;
    else
      hi = mid;
  }
  int64_t begin = lo;
  uint64_t next = key + ((uint64_t)1 << 32);
  hi = idx->bucket[b + 1];
  while (lo < hi) {  /* first entry of the next suffix */
    int64_t mid = lo + (hi - lo) / 2;
    if (idx->entry[mid] < next)
      lo = mid + 1;
    else
      hi = mid;
  }
  *first = idx->entry + begin;
  return lo - begin;
}
