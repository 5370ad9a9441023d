/* Record fields, cross-rank aggregates and timeline binning (see record.h).
 * Pure computation: no MPI, no heap, no global state. */
#include "config.h"
#include "record.h"
#include <errno.h>
#include <math.h>
#include <string.h>

const hpcmem_field_desc_t _hpcmem_rec_fields[HPCMEM_REC_NFIELDS] = {
#define HPCMEM_REC_DESC_(name, kind, help) {#name, HPCMEM_KIND_##kind, help},
  HPCMEM_RECORD_FIELDS(HPCMEM_REC_DESC_)
#undef HPCMEM_REC_DESC_
};

void _hpcmem_agg_init(hpcmem_agg_t *a, uint64_t value, int64_t rank) {
  a->min = a->max = a->sum = value;
  a->n = 1;
  a->min_rank = a->max_rank = rank;
  a->mean = (double)value;
  a->m2 = 0.0;
}

void _hpcmem_agg_merge(hpcmem_agg_t *into, const hpcmem_agg_t *from) {
  if (from->n == 0) return;
  if (into->n == 0) { *into = *from; return; }
  /* ties go to the lower rank so that the result does not depend on the
   * order MPI combines the operands in */
  if (from->min < into->min || (from->min == into->min && from->min_rank < into->min_rank)) {
    into->min = from->min; into->min_rank = from->min_rank;
  }
  if (from->max > into->max || (from->max == into->max && from->max_rank < into->max_rank)) {
    into->max = from->max; into->max_rank = from->max_rank;
  }
  double na = (double)into->n, nb = (double)from->n, n = na + nb;
  double delta = from->mean - into->mean;
  into->mean += delta * nb / n;
  into->m2 += from->m2 + delta * delta * na * nb / n;
  into->sum += from->sum;
  into->n += from->n;
}

void _hpcmem_agg_merge_n(hpcmem_agg_t *into, const hpcmem_agg_t *from, size_t n) {
  for (size_t i = 0; i < n; i++) _hpcmem_agg_merge(&into[i], &from[i]);
}

void _hpcmem_agg_from_rec(hpcmem_agg_t *aggs, const hpcmem_rec_t *rec) {
  for (size_t i = 0; i < HPCMEM_REC_NFIELDS; i++)
    _hpcmem_agg_init(&aggs[i], rec->v[i], (int64_t)rec->rank);
}

double _hpcmem_agg_mean(const hpcmem_agg_t *a) {
  return a->n ? (double)a->sum / (double)a->n : 0.0;
}

double _hpcmem_agg_stddev(const hpcmem_agg_t *a) {
  if (a->n == 0 || !(a->m2 > 0.0)) return 0.0;
  return sqrt(a->m2 / (double)a->n);
}

double _hpcmem_agg_cv(const hpcmem_agg_t *a) {
  double mean = _hpcmem_agg_mean(a);
  return mean > 0.0 ? _hpcmem_agg_stddev(a) / mean : 0.0;
}

double _hpcmem_agg_imbalance(const hpcmem_agg_t *a) {
  if (a->max == 0) return 0.0;
  double r = ((double)a->max - _hpcmem_agg_mean(a)) / (double)a->max;
  return r > 0.0 ? r : 0.0;
}

uint64_t _hpcmem_timeline_bin_ns(uint64_t span_ns, size_t nbins) {
  if (nbins == 0) return 1;
  uint64_t w = span_ns / nbins + 1;  /* +1: bin nbins-1 still holds span_ns itself */
  return w ? w : 1;
}

static size_t bin_of(uint64_t t, uint64_t bin_ns, size_t nbins) {
  uint64_t b = t / bin_ns;
  return b < nbins ? (size_t)b : nbins - 1;
}

void _hpcmem_timeline_point(uint64_t t, uint64_t bytes, uint64_t bin_ns, size_t nbins, uint64_t *bins) {
  if (nbins == 0 || bin_ns == 0) return;
  size_t b = bin_of(t, bin_ns, nbins);
  if (bins[b] < bytes) bins[b] = bytes;
}

void _hpcmem_timeline_bin(const hpcmem_sample_t *s, size_t n, uint64_t origin_ns,
                          uint64_t end_ns, uint64_t bin_ns, size_t nbins, uint64_t *bins) {
  memset(bins, 0, nbins * sizeof *bins);
  if (nbins == 0 || bin_ns == 0) return;
  size_t last_bin = bin_of(end_ns, bin_ns, nbins);
  uint64_t carried = 0;   /* before the first sample nothing is live */
  size_t b = 0;           /* first bin not yet filled with the carried value */
  for (size_t i = 0; i < n; i++) {
    uint64_t t = s[i].t_ns > origin_ns ? s[i].t_ns - origin_ns : 0;
    if (t > end_ns) break;   /* after the record was taken: not the application's */
    size_t sb = bin_of(t, bin_ns, nbins);
    /* the carried value holds over [previous sample, this sample] */
    for (; b <= sb; b++)
      if (bins[b] < carried) bins[b] = carried;
    b = sb;
    if (bins[sb] < s[i].bytes) bins[sb] = s[i].bytes;
    carried = s[i].bytes;
  }
  for (; b <= last_bin; b++)
    if (bins[b] < carried) bins[b] = carried;
}

/* "VmHWM:\t  123456 kB" */
static int field_kb(const char *text, const char *key, uint64_t *out) {
  size_t klen = strlen(key);
  for (const char *p = text; p && *p; p = strchr(p, '\n'), p = p ? p + 1 : NULL) {
    if (strncmp(p, key, klen) != 0) continue;
    p += klen;
    while (*p == ' ' || *p == '\t') p++;
    if (*p < '0' || *p > '9') return -ENOENT;
    uint64_t v = 0;
    for (; *p >= '0' && *p <= '9'; p++) v = v * 10 + (uint64_t)(*p - '0');
    *out = v * 1024;
    return 0;
  }
  return -ENOENT;
}

int _hpcmem_proc_status_parse(const char *text, uint64_t *vm_hwm, uint64_t *vm_rss) {
  int a = field_kb(text, "VmHWM:", vm_hwm);
  int b = field_kb(text, "VmRSS:", vm_rss);
  return a ? a : b;
}
