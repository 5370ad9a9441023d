/* One read through the BWA-MEM steps: seeds (maximal exact matches grown
 * from k-mer hits), chains of colinear seeds, banded extension of the best
 * seed of each good chain, the best alignment with its CIGAR, and a SAM
 * line.  Every step allocates its own buffers and frees them, as BWA-MEM
 * does; that is the allocator traffic the benchmark is about. */
#include "config.h"
#include "bwa.h"

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

typedef struct seed {
  int qbeg, len;
  int64_t rbeg;
} seed_t;

typedef struct chain {
  int strand, n, m, weight;
  int *seed;        /* indices into the strand's seed vector; grows by realloc */
} chain_t;

typedef struct region {
  int strand, qb, qe, score;
  int64_t rb, re;
} region_t;

/* a vector that grows by doubling: the realloc pattern of BWA's kvec */
#define VEC_PUSH(ptr, n, m, val, fail)                                      \
  do {                                                                      \
    if ((n) == (m)) {                                                       \
      int nm_ = (m) ? 2 * (m) : 4;                                          \
      void *np_ = realloc((ptr), sizeof *(ptr) * (size_t)nm_);              \
      if (np_ == NULL)                                                      \
        goto fail;                                                          \
      (ptr) = np_;                                                          \
      (m) = nm_;                                                            \
    }                                                                       \
    (ptr)[(n)++] = (val);                                                   \
  } while (0)

static inline int max2(int a, int b) { return a > b ? a : b; }

/* ------------------------------------------------------------------ */
/* seeding                                                              */

static int collect_seeds(const bwa_index_t *idx, const bwa_score_t *s, const uint8_t *q, int len,
                         seed_t **out, int *nout)
{
  const bwa_ref_t *ref = idx->ref;
  seed_t *v = NULL;
  int n = 0, m = 0;
  int i = 0;

  while (i + BWA_K <= len) {
    uint64_t code = 0;
    int bad = -1;
    for (int k = 0; k < BWA_K; k++) {
      if (q[i + k] > 3)
        bad = i + k;
      code = code << 2 | (q[i + k] & 3);
    }
    if (bad >= 0) {  /* a k-mer with an N matches nothing */
      i = bad + 1;
      continue;
    }
    const uint64_t *hit;
    int64_t nhits = bwa_index_lookup(idx, code, &hit);
    int next = i + 1;
    if (nhits > 0 && nhits <= s->max_occ) {
      for (int64_t h = 0; h < nhits; h++) {
        int64_t r = (int64_t)(uint32_t)hit[h];
        int covered = 0;
        for (int k = 0; k < n && !covered; k++)  /* same diagonal, already grown over i */
          covered = v[k].rbeg - v[k].qbeg == r - i && v[k].qbeg <= i && i < v[k].qbeg + v[k].len;
        if (covered)
          continue;
        const bwa_contig_t *ct = &ref->contigs[bwa_ref_contig(ref, r)];
        int qb = i, qe = i + BWA_K;
        int64_t rb = r, re = r + BWA_K;
        while (qb > 0 && rb > ct->offset && q[qb - 1] == ref->seq[rb - 1])
          qb--, rb--;
        while (qe < len && re < ct->offset + ct->len && q[qe] == ref->seq[re])
          qe++, re++;
        seed_t sd = {qb, qe - qb, rb};
        VEC_PUSH(v, n, m, sd, fail);
        /* like SMEM search: continue past the mismatch that ended the longest match */
        if (qe + 1 > next)
          next = qe + 1;
      }
    }
    i = next;
  }
  *out = v;
  *nout = n;
  return 0;
fail:
  free(v);
  return -ENOMEM;
}

/* ------------------------------------------------------------------ */
/* chaining                                                             */

static int cmp_seed_ref(const void *a, const void *b)
{
  const seed_t *x = a, *y = b;
  return x->rbeg < y->rbeg ? -1 : x->rbeg > y->rbeg ? 1 : x->qbeg - y->qbeg;
}

static int chain_weight(const chain_t *c, const seed_t *seeds)
{
  int w = 0, end = 0;
  for (int k = 0; k < c->n; k++) {
    const seed_t *sd = &seeds[c->seed[k]];
    int b = sd->qbeg > end ? sd->qbeg : end, e = sd->qbeg + sd->len;
    if (e > b)
      w += e - b;
    if (e > end)
      end = e;
  }
  return w;
}

static int make_chains(const bwa_ref_t *ref, const bwa_score_t *s, int strand, seed_t *seeds, int nseeds,
                       int len, chain_t **chains, int *nchains, int *mchains)
{
  qsort(seeds, (size_t)nseeds, sizeof *seeds, cmp_seed_ref);
  int first = *nchains;
  for (int k = 0; k < nseeds; k++) {
    const seed_t *sd = &seeds[k];
    int placed = 0;
    for (int c = first; c < *nchains && !placed; c++) {
      chain_t *ch = &(*chains)[c];
      const seed_t *last = &seeds[ch->seed[ch->n - 1]];
      int64_t dd = (sd->rbeg - sd->qbeg) - (last->rbeg - last->qbeg);
      if (sd->qbeg < last->qbeg || dd > s->w || dd < -s->w
          || sd->rbeg - (last->rbeg + last->len) > len
          || bwa_ref_contig(ref, sd->rbeg) != bwa_ref_contig(ref, last->rbeg))
        continue;
      placed = 1;
      if (dd == 0 && sd->qbeg + sd->len <= last->qbeg + last->len)
        break;  /* contained in the last seed */
      VEC_PUSH(ch->seed, ch->n, ch->m, k, fail);
    }
    if (!placed) {
      chain_t ch = {strand, 0, 0, 0, NULL};
      VEC_PUSH(ch.seed, ch.n, ch.m, k, fail);
      VEC_PUSH(*chains, *nchains, *mchains, ch, fail_chain);
      continue;
    fail_chain:
      free(ch.seed);
      return -ENOMEM;
    }
  }
  for (int c = first; c < *nchains; c++)
    (*chains)[c].weight = chain_weight(&(*chains)[c], seeds);
  return 0;
fail:
  return -ENOMEM;
}

static int cmp_chain_weight(const void *a, const void *b)
{
  return ((const chain_t *)b)->weight - ((const chain_t *)a)->weight;
}

/* ------------------------------------------------------------------ */
/* extension                                                            */

/* Extend a seed both ways inside win, the reference window [wb, we)
 * that BWA-MEM copies out for every chain. */
static int extend_seed(const bwa_score_t *s, const uint8_t *q, int len, const uint8_t *win, int64_t wb,
                       int64_t we, const seed_t *sd, int strand, region_t *out)
{
  int score = sd->len * s->a;
  int qb = sd->qbeg, qe = sd->qbeg + sd->len;
  int64_t rb = sd->rbeg, re = sd->rbeg + sd->len;
  bwa_ext_t ext;

  if (qb > 0) {  /* left: both sequences reversed */
    int64_t tb = rb - qb - s->w;
    if (tb < wb)
      tb = wb;
    int tlen = (int)(rb - tb);
    uint8_t *qr = malloc((size_t)qb + 1), *tr = malloc((size_t)tlen + 1);
    if (qr == NULL || tr == NULL) {
      free(qr);
      free(tr);
      return -ENOMEM;
    }
    for (int k = 0; k < qb; k++)
      qr[k] = q[qb - 1 - k];
    for (int k = 0; k < tlen; k++)
      tr[k] = win[rb - wb - 1 - k];
    bwa_extend(qb, qr, tlen, tr, s, score, &ext);
    free(qr);
    free(tr);
    if (ext.gscore > 0 && ext.gscore >= ext.score - s->pen_clip) {
      score = ext.gscore;  /* reaching the read's end is worth a little less score */
      rb -= ext.gtle;
      qb = 0;
    } else {
      score = ext.score;
      rb -= ext.tle;
      qb -= ext.qle;
    }
  }
  if (qe < len) {  /* right */
    int64_t te = re + (len - qe) + s->w;
    if (te > we)
      te = we;
    bwa_extend(len - qe, q + qe, (int)(te - re), win + (re - wb), s, score, &ext);
    if (ext.gscore > 0 && ext.gscore >= ext.score - s->pen_clip) {
      score = ext.gscore;
      re += ext.gtle;
      qe = len;
    } else {
      score = ext.score;
      re += ext.tle;
      qe += ext.qle;
    }
  }
  out->strand = strand;
  out->qb = qb;
  out->qe = qe;
  out->rb = rb;
  out->re = re;
  out->score = score;
  return 0;
}

/* The chain's reference window, copied out (BWA-MEM's bns_fetch_seq). */
static int extend_chain(const bwa_ref_t *ref, const bwa_score_t *s, const uint8_t *q, int len,
                        const seed_t *sd, int strand, region_t *out)
{
  const bwa_contig_t *ct = &ref->contigs[bwa_ref_contig(ref, sd->rbeg)];
  int64_t wb = sd->rbeg - sd->qbeg - s->w, we = sd->rbeg + (len - sd->qbeg) + s->w;
  if (wb < ct->offset)
    wb = ct->offset;
  if (we > ct->offset + ct->len)
    we = ct->offset + ct->len;
  uint8_t *win = malloc((size_t)(we - wb));
  if (win == NULL)
    return -ENOMEM;
  memcpy(win, ref->seq + wb, (size_t)(we - wb));
  int rc = extend_seed(s, q, len, win, wb, we, sd, strand, out);
  free(win);
  return rc;
}

/* ------------------------------------------------------------------ */
/* SAM text: a string that grows by realloc                             */

typedef struct str {
  char *s;
  size_t l, m;
} str_t;

static int str_printf(str_t *st, const char *fmt, ...)
{
  for (;;) {
    va_list ap;
    size_t room = st->m - st->l;
    va_start(ap, fmt);
    int k = vsnprintf(st->s ? st->s + st->l : NULL, room, fmt, ap);
    va_end(ap);
    if (k < 0)
      return -1;
    if ((size_t)k < room) {
      st->l += (size_t)k;
      return 0;
    }
    size_t nm = st->m ? st->m : 64;
    while (nm <= st->l + (size_t)k)
      nm *= 2;
    char *p = realloc(st->s, nm);
    if (p == NULL)
      return -1;
    st->s = p;
    st->m = nm;
  }
}

static int str_reserve(str_t *st, size_t extra)
{
  if (st->l + extra < st->m)
    return 0;
  size_t nm = st->m ? st->m : 64;
  while (nm <= st->l + extra)
    nm *= 2;
  char *p = realloc(st->s, nm);
  if (p == NULL)
    return -1;
  st->s = p;
  st->m = nm;
  return 0;
}

static int sam_line(const bwa_ref_t *ref, const bwa_read_t *r, const region_t *best, int mapq, int sub,
                    const uint32_t *cig, int ncig, str_t *st)
{
  static const char comp[256] = {['A'] = 'T', ['C'] = 'G', ['G'] = 'C', ['T'] = 'A',
                                 ['a'] = 't', ['c'] = 'g', ['g'] = 'c', ['t'] = 'a'};
  int rc = 0;

  if (best == NULL) {
    rc |= str_printf(st, "%s\t4\t*\t0\t0\t*\t*\t0\t0\t%s\t%s\n", r->name, r->seq, r->qual ? r->qual : "*");
    return rc;
  }
  const bwa_contig_t *ct = &ref->contigs[bwa_ref_contig(ref, best->rb)];
  rc |= str_printf(st, "%s\t%d\t%s\t%lld\t%d\t", r->name, best->strand ? 16 : 0, ct->name,
                   (long long)(best->rb - ct->offset + 1), mapq);
  if (best->qb > 0)
    rc |= str_printf(st, "%dS", best->qb);
  for (int k = 0; k < ncig; k++)
    rc |= str_printf(st, "%u%c", cig[k] >> 4, "MID"[cig[k] & 0xf]);
  if (best->qe < r->len)
    rc |= str_printf(st, "%dS", r->len - best->qe);
  rc |= str_printf(st, "\t*\t0\t0\t");
  if (rc != 0 || str_reserve(st, 2 * (size_t)r->len + 2) != 0)
    return -1;
  /* SAM stores the reverse strand as the reverse complement */
  for (int k = 0; k < r->len; k++) {
    char c = best->strand ? r->seq[r->len - 1 - k] : r->seq[k];
    if (best->strand)
      c = comp[(unsigned char)c] ? comp[(unsigned char)c] : 'N';
    st->s[st->l++] = c;
  }
  st->s[st->l++] = '\t';
  if (r->qual == NULL)
    st->s[st->l++] = '*';
  else
    for (int k = 0; k < r->len; k++)
      st->s[st->l++] = best->strand ? r->qual[r->len - 1 - k] : r->qual[k];
  st->s[st->l] = '\0';
  rc |= str_printf(st, "\tAS:i:%d\tXS:i:%d\n", best->score, sub);
  return rc;
}

/* ------------------------------------------------------------------ */

int bwa_align_read(const bwa_index_t *idx, const bwa_score_t *s, bwa_read_t *r)
{
  const bwa_ref_t *ref = idx->ref;
  const int len = r->len;
  uint8_t *qs[2] = {NULL, NULL};
  seed_t *seeds[2] = {NULL, NULL};
  int nseeds[2] = {0, 0};
  chain_t *chains = NULL;
  int nchains = 0, mchains = 0;
  region_t *regs = NULL, *best = NULL;
  int nregs = 0, mregs = 0, rc = -ENOMEM;
  uint32_t *cig = NULL;
  int ncig = 0, mapq = 0, sub = 0;
  str_t st = {NULL, 0, 0};

  r->mapped = 0;
  r->mapq = 0;
  qs[0] = malloc((size_t)len + 1);
  qs[1] = malloc((size_t)len + 1);
  if (qs[0] == NULL || qs[1] == NULL)
    goto out;
  for (int k = 0; k < len; k++) {
    uint8_t c = bwa_nt4[(uint8_t)r->seq[k]];
    qs[0][k] = c;
    qs[1][len - 1 - k] = c < 4 ? 3 - c : c;
  }

  for (int strand = 0; strand < 2; strand++) {
    if (collect_seeds(idx, s, qs[strand], len, &seeds[strand], &nseeds[strand]) != 0)
      goto out;
    if (make_chains(ref, s, strand, seeds[strand], nseeds[strand], len, &chains, &nchains, &mchains) != 0)
      goto out;
  }
  qsort(chains, (size_t)nchains, sizeof *chains, cmp_chain_weight);

  for (int c = 0; c < nchains && c < s->max_chains; c++) {
    const chain_t *ch = &chains[c];
    if (ch->weight < BWA_K || 2 * ch->weight < chains[0].weight)
      break;  /* BWA's drop ratio: chains below half the best are not extended */
    const seed_t *sv = seeds[ch->strand], *bs = &sv[ch->seed[0]];
    for (int k = 1; k < ch->n; k++)
      if (sv[ch->seed[k]].len > bs->len)
        bs = &sv[ch->seed[k]];
    region_t rg;
    if (extend_chain(ref, s, qs[ch->strand], len, bs, ch->strand, &rg) != 0)
      goto out;
    int dup = 0;
    for (int k = 0; k < nregs && !dup; k++)
      if (regs[k].strand == rg.strand && regs[k].rb < rg.re && rg.rb < regs[k].re) {
        dup = 1;  /* two chains that led to the same alignment */
        if (rg.score > regs[k].score)
          regs[k] = rg;
      }
    if (!dup)
      VEC_PUSH(regs, nregs, mregs, rg, out);
  }

  for (int k = 0; k < nregs; k++)
    if (best == NULL || regs[k].score > best->score)
      best = &regs[k];
  if (best != NULL && best->score >= s->min_score) {
    for (int k = 0; k < nregs; k++)
      if (&regs[k] != best && regs[k].score > sub)
        sub = regs[k].score;
    /* BWA's idea: confidence grows with the gap to the second best */
    int floor_sub = BWA_K * s->a;
    double s2 = sub > floor_sub ? sub : floor_sub;
    mapq = sub >= best->score ? 0 : (int)(30.0 * (1.0 - s2 / best->score) * log(best->score) + 0.499);
    mapq = mapq < 0 ? 0 : mapq > 60 ? 60 : mapq;
    int qlen = best->qe - best->qb, tlen = (int)(best->re - best->rb);
    int w = abs(tlen - qlen) + 10;
    bwa_global(qlen, qs[best->strand] + best->qb, tlen, ref->seq + best->rb, s,
               w < s->w ? w : s->w, &cig, &ncig);
    if (cig == NULL)
      goto out;
    int c = bwa_ref_contig(ref, best->rb);
    r->mapped = 1;
    r->mapq = mapq;
    r->strand = best->strand;
    r->contig = c;
    r->pos_unclipped = best->rb - ref->contigs[c].offset - best->qb;
  } else {
    best = NULL;
  }
  if (sam_line(ref, r, best, mapq, sub, cig, ncig, &st) != 0)
    goto out;
  free(r->sam);
  r->sam = st.s;  /* freed by the main thread after output */
  st.s = NULL;
  rc = 0;
out:
  free(st.s);
  free(cig);
  free(regs);
  for (int c = 0; c < nchains; c++)
    free(chains[c].seed);
  free(chains);
  free(seeds[0]);
  free(seeds[1]);
  free(qs[0]);
  free(qs[1]);
  return rc;
}
