/* Banded Smith-Waterman with affine gaps: seed extension (local, from a
 * seed's score, with z-drop) and global alignment with traceback for the
 * CIGAR.  Gotoh's recurrences; the buffers are allocated per call, as
 * BWA-MEM's extension does, because that allocation traffic is what this
 * benchmark measures. */
#include "config.h"
#include "bwa.h"

#include <limits.h>
#include <stdlib.h>
#include <string.h>

#define NEG_INF (INT_MIN / 4)

void bwa_score_init(bwa_score_t *s)
{
  /* BWA-MEM's defaults */
  s->a = 1;
  s->b = 4;
  s->o = 6;
  s->e = 1;
  s->w = 100;
  s->zdrop = 100;
  s->pen_clip = 5;
  s->min_score = 30;
  s->max_occ = 500;
  s->max_chains = 5;
  for (int i = 0; i < 5; i++)
    for (int j = 0; j < 5; j++)
      s->mat[i * 5 + j] = (int8_t)(i == BWA_N || j == BWA_N ? -1 : i == j ? s->a : -s->b);
}

static inline int max2(int a, int b) { return a > b ? a : b; }
static inline int min2(int a, int b) { return a < b ? a : b; }

void bwa_extend(int qlen, const uint8_t *q, int tlen, const uint8_t *t, const bwa_score_t *s,
                int h0, bwa_ext_t *out)
{
  const int oe = s->o + s->e;
  int8_t *qp = malloc((size_t)qlen * 5 + 1);                /* query profile */
  int *H = malloc(sizeof(int) * (size_t)(qlen + 2));
  int *E = malloc(sizeof(int) * (size_t)(qlen + 2));
  int best = h0, best_i = -1, best_j = -1, gscore = -1, g_i = -1;

  out->score = h0;
  out->qle = out->tle = 0;
  out->gscore = -1;
  out->gtle = 0;
  if (qp == NULL || H == NULL || E == NULL)
    goto done;
  for (int k = 0; k < 5; k++)
    for (int j = 0; j < qlen; j++)
      qp[k * qlen + j] = s->mat[k * 5 + q[j]];
  /* row 0: query bases against no target, i.e. an insertion after the seed */
  H[0] = h0;
  E[0] = 0;
  for (int j = 1; j <= qlen + 1; j++) {
    int v = h0 - (s->o + s->e * j);
    H[j] = j <= qlen && v > 0 ? v : 0;
    E[j] = 0;
  }
  for (int i = 0; i < tlen; i++) {
    const int8_t *prof = qp + t[i] * qlen;
    int beg = max2(0, i - s->w), end = min2(qlen, i + s->w + 1);
    int hdiag = H[beg], f = 0, row_max = 0, row_j = -1;
    int h1 = h0 - (s->o + s->e * (i + 1));

    H[beg] = beg == 0 && h1 > 0 ? h1 : 0;
    int hleft = H[beg];
    for (int j = beg; j < end; j++) {
      /* cell (i+1, j+1); 0 means "not reachable from the seed" */
      int m = hdiag > 0 ? hdiag + prof[j] : 0;
      int e = max2(H[j + 1] - oe, E[j + 1] - s->e);
      int fn = max2(hleft - oe, f - s->e);
      int h = max2(max2(m, e), max2(fn, 0));
      e = e > 0 ? e : 0;
      f = fn > 0 ? fn : 0;
      hdiag = H[j + 1];
      H[j + 1] = h;
      E[j + 1] = e;
      hleft = h;
      if (h > row_max) {
        row_max = h;
        row_j = j;
      }
    }
    if (end < qlen) {  /* the next row reads one column further: keep it empty */
      H[end + 1] = 0;
      E[end + 1] = 0;
    }
    if (end == qlen && H[qlen] > gscore) {
      gscore = H[qlen];
      g_i = i;
    }
    if (row_max == 0)
      break;
    if (row_max > best) {
      best = row_max;
      best_i = i;
      best_j = row_j;
    } else if (best - row_max > s->zdrop) {
      break;
    }
  }
  out->score = best;
  out->qle = best_j + 1;
  out->tle = best_i + 1;
  out->gscore = gscore;
  out->gtle = g_i + 1;
done:
  free(qp);
  free(H);
  free(E);
}

/* run-length CIGAR, growing by realloc */
static int push_op(uint32_t **cig, int *n, int *cap, int op, int len)
{
  if (*n > 0 && ((*cig)[*n - 1] & 0xf) == (uint32_t)op) {
    (*cig)[*n - 1] += (uint32_t)len << 4;
    return 0;
  }
  if (*n == *cap) {
    int nc = *cap ? 2 * *cap : 4;
    uint32_t *p = realloc(*cig, sizeof *p * (size_t)nc);
    if (p == NULL)
      return -1;
    *cig = p;
    *cap = nc;
  }
  (*cig)[(*n)++] = (uint32_t)len << 4 | (uint32_t)op;
  return 0;
}

enum { OP_M = 0, OP_I = 1, OP_D = 2 };
/* traceback byte: bits 0-1 where H came from (0 diagonal, 1 E, 2 F),
 * bit 2 E extended an E, bit 3 F extended an F */

int bwa_global(int qlen, const uint8_t *q, int tlen, const uint8_t *t, const bwa_score_t *s,
               int w, uint32_t **cigar, int *ncigar)
{
  const int oe = s->o + s->e;
  int width, score = NEG_INF, n = 0, cap = 0;
  uint32_t *cig = NULL;
  uint8_t *bt;
  int *Hp, *Hc, *Ep, *Ec;

  *cigar = NULL;
  *ncigar = 0;
  w = max2(w, abs(tlen - qlen) + 1);
  width = 2 * w + 1;
  bt = malloc((size_t)(tlen + 1) * (size_t)width);
  Hp = malloc(sizeof(int) * (size_t)(qlen + 1));
  Hc = malloc(sizeof(int) * (size_t)(qlen + 1));
  Ep = malloc(sizeof(int) * (size_t)(qlen + 1));
  Ec = malloc(sizeof(int) * (size_t)(qlen + 1));
  if (bt == NULL || Hp == NULL || Hc == NULL || Ep == NULL || Ec == NULL)
    goto out;

  /* row 0: only insertions; bt stores (row i, column j) at i*width + j - i + w */
  for (int j = 0; j <= qlen; j++) {
    Hp[j] = j == 0 ? 0 : j <= w ? -(s->o + s->e * j) : NEG_INF;
    Ep[j] = NEG_INF;
    if (j <= w)
      bt[j + w] = j == 0 ? 0 : (uint8_t)(2 | (j > 1 ? 8 : 0));
  }
  for (int i = 1; i <= tlen; i++) {
    int lo = max2(0, i - w), hi = min2(qlen, i + w), f = NEG_INF;
    uint8_t *row = bt + (size_t)i * width - i + w;  /* row[j] for j in [lo, hi] */

    for (int j = 0; j <= qlen; j++) {
      Hc[j] = NEG_INF;
      Ec[j] = NEG_INF;
    }
    for (int j = lo; j <= hi; j++) {
      uint8_t b = 0;
      int e_open = Hp[j] == NEG_INF ? NEG_INF : Hp[j] - oe;
      int e_ext = Ep[j] == NEG_INF ? NEG_INF : Ep[j] - s->e;
      int e = e_ext > e_open ? (b |= 4, e_ext) : e_open;
      if (j == 0) {  /* column 0: only deletions */
        Hc[0] = e;
        Ec[0] = e;
        row[0] = (uint8_t)(1 | b);
        continue;
      }
      int f_open = Hc[j - 1] == NEG_INF ? NEG_INF : Hc[j - 1] - oe;
      int f_ext = f == NEG_INF ? NEG_INF : f - s->e;
      f = f_ext > f_open ? (b |= 8, f_ext) : f_open;
      int m = Hp[j - 1] == NEG_INF ? NEG_INF : Hp[j - 1] + s->mat[t[i - 1] * 5 + q[j - 1]];
      int h = m;
      if (e > h) { h = e; b = (uint8_t)((b & ~3) | 1); }
      if (f > h) { h = f; b = (uint8_t)((b & ~3) | 2); }
      Hc[j] = h;
      Ec[j] = e;
      row[j] = b;
    }
    int *tmp = Hp; Hp = Hc; Hc = tmp;
    tmp = Ep; Ep = Ec; Ec = tmp;
  }
  score = Hp[qlen];

  /* traceback from (tlen, qlen) in state H */
  {
    int i = tlen, j = qlen, state = 0;  /* 0 H, 1 E (deletion), 2 F (insertion) */
    while (i > 0 || j > 0) {
      if (i == 0) {
        if (push_op(&cig, &n, &cap, OP_I, j) != 0) goto fail;
        break;
      }
      if (j == 0) {
        if (push_op(&cig, &n, &cap, OP_D, i) != 0) goto fail;
        break;
      }
      uint8_t b = bt[(size_t)i * width + j - i + w];
      if (state == 0)
        state = b & 3;
      if (state == 0) {
        if (push_op(&cig, &n, &cap, OP_M, 1) != 0) goto fail;
        i--, j--;
      } else if (state == 1) {
        if (push_op(&cig, &n, &cap, OP_D, 1) != 0) goto fail;
        state = (b & 4) ? 1 : 0;
        i--;
      } else {
        if (push_op(&cig, &n, &cap, OP_I, 1) != 0) goto fail;
        state = (b & 8) ? 2 : 0;
        j--;
      }
    }
  }
  for (int k = 0; k < n / 2; k++) {  /* the traceback ran backwards */
    uint32_t tmp = cig[k];
    cig[k] = cig[n - 1 - k];
    cig[n - 1 - k] = tmp;
  }
  *cigar = cig;
  *ncigar = n;
  goto out;
fail:
  free(cig);
  score = NEG_INF;
out:
  free(bt);
  free(Hp);
  free(Hc);
  free(Ep);
  free(Ec);
  return score;
}
