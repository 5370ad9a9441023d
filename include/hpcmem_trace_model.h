/**
 * @file hpcmem_trace_model.h
 * @brief Format 1.4 of the ".hmt" EVENTS blocks: the events coded one by one
 * by an adaptive binary range coder under models of the allocation fields.
 *
 * Included by hpcmem_trace_format.h (include that one).  Like the rest of
 * the format header this is the contract between the recorder and the
 * tools: both sides run the same model code, the encoder knowing each
 * value and the decoder learning it, so the two cannot drift apart.
 * docs/trace-format.md ("Format 1.4") describes it for other languages.
 *
 * An EVENTS block of codec HMT_CODEC_MODEL (flag HMT_BF_M4, and
 * HMT_BF_CHAIN when its models continue those of the thread's previous
 * block) holds: byte 0xC4, varint tick shift s, varint log2 of the tracked
 * allocations' limit, then the range coder's bytes.  Its raw_len is the
 * length of the rows it decodes to (time rounded down to the tick).  Every
 * record of the block is one event (or STACK / EXT record) coded as:
 *
 *   token   kind, S bit and allocation site (the stack, or for a free the
 *           site of the block it frees): ranked among the tokens that
 *           followed the last two tokens, then the last one, else spelled out
 *   time    tick delta: zero or not (by how many events the tick has held), else
 *           an integer
 *   free    which tracked allocation: the newest or oldest of its site, the
 *           thread's newest, a neighbour (in allocation order) of one of
 *           the last frees -- or an address, a step from a run of such
 *           addresses (untracked: another thread's, or evicted)
 *   realloc the old block as a free is; the new one as an allocation
 *   size    the site's last size, the one before, the last step at the
 *           previous allocation scaled as last time, or the value
 *   address the top of the size class's freed list, the old address, the
 *           class's next stride, or a delta
 *
 * Nothing here allocates: the caller gives the model its growable arrays
 * (hmt_m4_need says how large, hmt_m4_grow moves the model into them).
 */
#ifndef HPCMEM_TRACE_MODEL_H
#define HPCMEM_TRACE_MODEL_H

#ifndef HPCMEM_TRACE_FORMAT_H
#error "include hpcmem_trace_format.h"
#endif

#if defined(__GNUC__) || defined(__clang__)
#define HMT_M4_INLINE static inline __attribute__((always_inline))
#define HMT_M4_PREFETCH(p) __builtin_prefetch(p)
#else
#define HMT_M4_INLINE static inline
#define HMT_M4_PREFETCH(p) ((void)0)
#endif

/* HMT_M4_STATS (defined before including): the coder adds each coded bit's
 * cost -log2 p to c->stat[c->field] and counts it in c->nbits[...]: the
 * per-field figures of tests/trace/hmt_model.c.  Off, it costs nothing. */
#ifdef HMT_M4_STATS
#include <math.h>
#define HMT_M4_FIELD(c, k) ((c)->field = (k))
#else
#define HMT_M4_FIELD(c, k) ((void)0)
#endif
/** Fields of the per-field figures (HMT_M4_STATS). */
enum {
  HMT_M4_F_TOKEN, HMT_M4_F_TOKEN_NEW, HMT_M4_F_TIME, HMT_M4_F_SIZE, HMT_M4_F_SIZE_NEW, HMT_M4_F_FREE,
  HMT_M4_F_REALLOC, HMT_M4_F_FREE_ADDR, HMT_M4_F_ADDR, HMT_M4_F_ADDR_NEW, HMT_M4_F_STACK, HMT_M4_F_N
};

/* ------------------------------------------------------------------ */
/* Binary range coder                                                  */
/*                                                                    */
/* 32-bit range, carries propagated through a cached byte and a count  */
/* of 0xff bytes (as LZMA's), probabilities of 16 bits: a bit whose    */
/* probability is near 1 costs 0.0007 bits, and most bits of a         */
/* predictable trace are such (11-bit probabilities would cost 0.02    */
/* bits each, a third of BWA-MEM's whole trace).  The encoder emits one */
/* leading zero byte and flushes four more; the decoder reads exactly  */
/* what was written.                                                   */

/** An adaptive bit: P(1) = (q ^ 0x8000) / 65536 (so zeroed memory is 1/2),
 *  n: updates so far (the rate of adaptation falls with it). */
typedef struct { uint16_t q, n; } hmt_m4_bit_t;
typedef struct {
  uint8_t *o, *oend;        /* encoder: output */
  const uint8_t *i, *iend;  /* decoder: input */
  uint64_t low, csize;
  uint32_t range, code;
  uint8_t cache;
  int err;                  /* encoder: out of room; decoder: read past the end, or a value the model cannot take */
#ifdef HMT_M4_STATS
  unsigned field;
  double stat[HMT_M4_F_N], nbits[HMT_M4_F_N];
#endif
} hmt_rc_t;

/* The adaptation: the first four updates of a context move p 1/2, 1/4,
 * 1/8, 1/16 of the way (a context seen a few times learns fast), later ones
 * 1/32 (a trace drifts).  Against 1/(k + 1.5) down to 1/61.5 (a table and a
 * multiply): BWA-MEM 1% larger, the churn and gcc's cc1 0.1-0.5% smaller,
 * five instructions fewer a bit.  A fixed 1/32: BWA-MEM 2% larger. */
#define HMT_M4_PMIN 32  /* p stays within [PMIN, 65536 - PMIN] */

static inline void hmt_rc_enc_init(hmt_rc_t *c, uint8_t *out, size_t cap) {
  memset(c, 0, sizeof *c);
  c->o = out; c->oend = out + cap;
  c->range = 0xffffffffu; c->csize = 1;
}
static inline void hmt_rc_dec_init(hmt_rc_t *c, const uint8_t *in, size_t len) {
  memset(c, 0, sizeof *c);
  c->i = in; c->iend = in + len; c->range = 0xffffffffu;
  if (len < 5 || in[0] != 0) c->err = 1;
  for (int k = 0; k < 5; k++) c->code = (c->code << 8) | (c->i < c->iend ? *c->i++ : 0);
}
static inline void hmt_rc_shift(hmt_rc_t *c) {
  if ((uint32_t)c->low < 0xff000000u || (c->low >> 32)) {
    uint8_t carry = (uint8_t)(c->low >> 32), t = c->cache;
    do {
      if (c->o < c->oend) *c->o++ = (uint8_t)(t + carry); else c->err = 1;
      t = 0xff;
    } while (--c->csize);
    c->cache = (uint8_t)(c->low >> 24);
  }
  c->csize++;
  c->low = (c->low & 0x00ffffffu) << 8;
}
/** Flush the encoder; the bytes written since hmt_rc_enc_init (0: out of room). */
static inline size_t hmt_rc_enc_finish(hmt_rc_t *c, const uint8_t *out) {
  for (int k = 0; k < 5; k++) hmt_rc_shift(c);
  return c->err ? 0 : (size_t)(c->o - out);
}
HMT_M4_INLINE void hmt_rc_norm(hmt_rc_t *c, const int dec) {
  while (c->range < (1u << 24)) {
    c->range <<= 8;
    if (dec) {
      if (c->i < c->iend) c->code = (c->code << 8) | *c->i++;
      else { c->code <<= 8; c->err = 1; }
    } else hmt_rc_shift(c);
  }
}
/** Code one bit with the adaptive probability b: the encoder codes `bit`,
 *  the decoder (dec != 0, a constant at each call) returns the bit it reads. */
HMT_M4_INLINE int hmt_rc_bit(hmt_rc_t *c, hmt_m4_bit_t *b, int bit, const int dec) {
  uint32_t p = (uint32_t)(b->q ^ 0x8000u);
  uint32_t bound = (uint32_t)(((uint64_t)c->range * p) >> 16);
  if (dec) bit = c->code < bound;
#ifdef HMT_M4_STATS
  c->stat[c->field] -= log2(bit ? p / 65536.0 : 1 - p / 65536.0);
  c->nbits[c->field]++;
#endif
  if (bit) c->range = bound;
  else {
    if (dec) c->code -= bound; else c->low += bound;
    c->range -= bound;
  }
  hmt_rc_norm(c, dec);
  /* 1/2, 1/4, 1/8, 1/16 of the way towards PMIN or 65536 - PMIN, then 1/32 */
  unsigned sh = b->n < 4 ? b->n + 1u : 5u;
  if (bit) p += (65536u - HMT_M4_PMIN - p) >> sh;
  else p -= (p - HMT_M4_PMIN) >> sh;
  b->q = (uint16_t)(p ^ 0x8000u);
  b->n = (uint16_t)(b->n + (b->n < 4));
  return bit;
}

/* a symbol of `bits` bits by a binary tree of contexts t[1 .. 2^bits - 1] */
HMT_M4_INLINE unsigned hmt_rc_tree(hmt_rc_t *c, hmt_m4_bit_t *t, unsigned bits, unsigned v, const int dec) {
  unsigned node = 1;
  for (int i = (int)bits - 1; i >= 0; i--) node = node << 1 | (unsigned)hmt_rc_bit(c, &t[node], (int)((v >> i) & 1), dec);
  return node - (1u << bits);
}

/* Integers: the bit length L (0..64) -- in unary up to 4 (a context per
 * step), beyond by a 6-bit tree of L - 4 (an address or frame delta of 20
 * bits: 10 decisions instead of 21) -- the three bits below the leading
 * one by a tree per L (L above 24 share one), the others by their
 * position, so that bits that are always 0 (aligned addresses) or always 1
 * (a negative step, zigzagged) cost nothing. */
typedef struct { hmt_m4_bit_t len[4], lt[64], top[25][7], low[64]; } hmt_m4_int_t;
HMT_M4_INLINE uint64_t hmt_rc_int(hmt_rc_t *c, hmt_m4_int_t *m, uint64_t v, const int dec) {
  unsigned L = dec ? 0 : (v ? 64u - (unsigned)__builtin_clzll(v) : 0u), l = 0;
  while (l < 4 && hmt_rc_bit(c, &m->len[l], l < L, dec)) l++;
  if (l == 4) {
    l = 4 + hmt_rc_tree(c, m->lt, 6, L - 4, dec);
    if (l > 64) { c->err = 1; l = 64; }
  }
  if (l <= 1) return l;
  hmt_m4_bit_t *top = m->top[l < 24 ? l : 24];
  uint64_t x = 1;
  unsigned node = 1;
  for (int i = (int)l - 2; i >= 0; i--) {
    int bit = (int)((v >> i) & 1);
    if (node < 8) { bit = hmt_rc_bit(c, &top[node - 1], bit, dec); node = node << 1 | (unsigned)bit; }
    else bit = hmt_rc_bit(c, &m->low[i], bit, dec);
    x = x << 1 | (uint64_t)bit;
  }
  return x;
}
HMT_M4_INLINE int64_t hmt_rc_sint(hmt_rc_t *c, hmt_m4_int_t *m, int64_t v, const int dec) {
  return hmt_unzigzag(hmt_rc_int(c, m, hmt_zigzag(v), dec));
}

/* ------------------------------------------------------------------ */
/* The model                                                           */

#define HMT_BF_M4 0x10          /**< block flag: EVENTS payload of format 1.4 (codec HMT_CODEC_MODEL) */
#define HMT_M4_MARK 0xC4        /**< first byte of a format 1.4 payload */
#define HMT_M4_HEAD_MAX 12

/** Kinds of a token (a realloc is one of three: they behave differently). */
enum {
  HMT_M4_MALLOC = 1, HMT_M4_CALLOC = 2, HMT_M4_REALLOC = 3 /* old != 0, ptr != 0 */, HMT_M4_FREE = 4,
  HMT_M4_MEMALIGN = 5, HMT_M4_REALLOC0 = 6 /* old == 0: an allocation */, HMT_M4_REALLOCF = 7 /* ptr == 0: a free */,
  HMT_M4_STACK = 8, HMT_M4_EXT = 9
};
#define HMT_M4_NCUR 4                 /* cursors and runs of addresses */
#define HMT_M4_SLOT_BITS 12           /* the followers of two tokens: 4096 slots (2^14 gains 0.6% on gcc's cc1) */
#define HMT_M4_SITES_MAX (1u << 16)   /* sites of a thread; more share site 1 and spell their stack */
#define HMT_M4_NMAX_BITS 24           /* largest limit of tracked allocations a reader takes */
#define HMT_M4_SIZE_CTX 16
#define HMT_M4_FRAME_BITS 12          /* the caller frames remembered after a frame: 4096 */

/* the followers of a context: tokens, most recent first, and the last
 * ranks they were found at (2 bits each) */
typedef struct { uint32_t t[4]; uint32_t st; } hmt_m4_fol_t;
typedef struct { uint32_t chk; hmt_m4_fol_t f; } hmt_m4_slot_t;
/** An allocation site (a stack id), by order of first appearance. */
typedef struct {
  uint64_t stack, s1, s2, align;  /* the last two sizes, the last alignment */
  int64_t rn, rd;                 /* size step here / at the previous allocation, last time */
  uint32_t head, tail;            /* its tracked allocations: newest, oldest */
  uint8_t szo, fm, rm, pad;       /* last size option, last free / realloc method */
  hmt_m4_fol_t fol[2];            /* tokens after an allocation here, after a free of one */
} hmt_m4_site_t;
/** A tracked allocation: address, site << 8 | size class, its slot in the
 *  address map, its neighbours in its site's list and in the thread's. */
typedef struct { uint64_t ptr; uint32_t sc, ms, snewer, solder, gnewer, golder; } hmt_m4_ent_t;
/** The address map: linear probing, backward-shift deletion. */
typedef struct { uint64_t ptr; uint32_t e, pad; } hmt_m4_mslot_t;
/* a size class: its freed list (a ring of the HMT_C2_LIFO latest: top at
 * lifo[(top - 1) % HMT_C2_LIFO], n of them), last address and stride */
typedef struct { uint64_t lifo[HMT_C2_LIFO]; uint64_t last, stride; uint32_t n, top, mh, pad; } hmt_m4_cls_t;

/* methods naming the allocation a free gives back */
enum { HMT_M4_M_LIFO, HMT_M4_M_FIFO, HMT_M4_M_NEWEST, HMT_M4_M_CUR, HMT_M4_M_ADDR = HMT_M4_M_CUR + 2 * HMT_M4_NCUR,
       HMT_M4_M_N };
/* modes of an allocation's address */
enum { HMT_M4_A_LIFO, HMT_M4_A_OLD, HMT_M4_A_BUMP, HMT_M4_A_CLASS, HMT_M4_A_HIST, HMT_M4_A_N };
#define HMT_M4_FA_N (2 + 2 * HMT_M4_NCUR)  /* bases of a free's address */

/** Measurements only (tests/trace/hmt_model.c): predictions to leave out,
 *  to see what each is worth.  A file never depends on them: the recorder
 *  and the reader keep 0. */
enum {
  HMT_M4_X_ORDER2 = 1,    /* tokens: no context of the last two tokens */
  HMT_M4_X_SITELIST = 2,  /* frees: not the newest / oldest of the site */
  HMT_M4_X_CURSOR = 4,    /* frees: not a neighbour of a recent free */
  HMT_M4_X_RUNS = 8,      /* free addresses: no runs */
  HMT_M4_X_RATIO = 16,    /* sizes: no scaled step */
  HMT_M4_X_TIMERUN = 32   /* time: no count of events within the tick */
};

/** The state a thread's chained blocks share (encoder and decoder alike). */
typedef struct hmt_m4_model {
  /* the caller's growable memory (hmt_m4_need, hmt_m4_grow) */
  hmt_m4_site_t *sites;
  hmt_m4_ent_t *ent;
  hmt_m4_mslot_t *map;
  uint32_t *smap;                 /* stack -> site, encoder only */
  uint32_t site_cap, ent_cap;
  uint64_t map_mask, smap_mask;
  unsigned map_shift, smap_shift;
  uint32_t nmax;                  /* tracked allocations at most (the block head's) */
  uint32_t ablate;                /* HMT_M4_X_*: measurements only */
  uint64_t tracked, evicted;      /* allocations tracked, and evicted (counts for the encoder's choice of nmax) */
  /* ---- from here on cleared when the models start afresh ---- */
  uint32_t nsites, nent, free_ent, ntracked, ghead, gtail;
  uint32_t tok1, tok2, run, fam;
  int64_t pdelta;                 /* size step of the last allocation */
  uint64_t arep[2];               /* the last explicit address deltas (from the class's last, the last event's) */
  uint64_t tick, hist[2], deflast, newstack, ovstack, nextnode, frame0, fprev, laststack;
  uint32_t cur[HMT_M4_NCUR][2];   /* older / newer neighbour of the last frees */
  uint64_t acur[HMT_M4_NCUR][2], astep[HMT_M4_NCUR][2];  /* runs of untracked addresses: last two, and their steps */
  hmt_m4_cls_t cls[HMT_C2_NCLASS];
  hmt_m4_slot_t slot[1u << HMT_M4_SLOT_BITS];
  hmt_m4_bit_t b_sr[3][256][4], b_kind[16][16], b_sys[16], b_newsite, b_deflast, b_tracked;
  hmt_m4_bit_t b_dt0[16][20], b_mpref[2][HMT_M4_M_N], b_mtree[2][HMT_M4_M_N][16];
  hmt_m4_bit_t b_fsame[HMT_M4_FA_N], b_fam[HMT_M4_FA_N][16], b_fstep[3], b_arep[2], b_size[4][3][2], b_align, b_amode[HMT_M4_A_N][HMT_M4_A_N][2];
  hmt_m4_int_t i_site, i_stack, i_ovstack, i_dt[10], i_faddr[3], i_size[HMT_M4_SIZE_CTX][2], i_align, i_aaddr[2];
  hmt_m4_int_t i_sfirst, i_sup, i_supnear, i_sn, i_sf0, i_sfd[4], i_etype, i_elen;
  hmt_m4_bit_t b_supnear, b_fnext[4];
  uint64_t fnext[1u << HMT_M4_FRAME_BITS];  /* the caller frame found after a frame */
  hmt_m4_bit_t b_byte[256];
} hmt_m4_model_t;

static inline uint64_t hmt_m4_h(uint64_t v) { return v * 0x9e3779b97f4a7c15ull; }

/* ------------------------------------------------------------------ */
/* Tracked allocations: the thread's live blocks it allocated (up to    */
/* nmax, the oldest evicted), each in its site's list and the thread's, */
/* found by address through the map.                                    */

/* the slot of ptr, or the empty slot ending its probe */
HMT_M4_INLINE hmt_m4_mslot_t *hmt_m4_find(const hmt_m4_model_t *m, uint64_t ptr) {
  for (uint64_t i = hmt_m4_h(ptr) >> m->map_shift;; i = (i + 1) & m->map_mask) {
    hmt_m4_mslot_t *x = &m->map[i];
    if (x->ptr == ptr || x->ptr == 0) return x;
  }
}
HMT_M4_INLINE uint32_t hmt_m4_lookup(const hmt_m4_model_t *m, uint64_t ptr) {
  if (!ptr) return 0;
  hmt_m4_mslot_t *x = hmt_m4_find(m, ptr);
  return x->ptr ? x->e : 0;
}
/* backward-shift deletion keeps every probe chain whole (no tombstones,
 * so probes stay short); a moved slot's entry learns its new place */
HMT_M4_INLINE void hmt_m4_mapdel(hmt_m4_model_t *m, uint64_t i) {
  uint64_t j = i;
  for (;;) {
    m->map[i].ptr = 0;
    for (;;) {
      j = (j + 1) & m->map_mask;
      if (!m->map[j].ptr) return;
      uint64_t h = hmt_m4_h(m->map[j].ptr) >> m->map_shift;
      if (i <= j ? (h <= i || h > j) : (h <= i && h > j)) break;
    }
    m->map[i] = m->map[j];
    m->ent[m->map[i].e].ms = (uint32_t)i;
    i = j;
  }
}
/* take entry e out of every structure */
HMT_M4_INLINE void hmt_m4_untrack(hmt_m4_model_t *m, uint32_t e) {
  hmt_m4_ent_t *x = &m->ent[e];
  hmt_m4_site_t *s = &m->sites[x->sc >> 8];
  if (x->snewer) m->ent[x->snewer].solder = x->solder; else s->head = x->solder;
  if (x->solder) m->ent[x->solder].snewer = x->snewer; else s->tail = x->snewer;
  if (x->gnewer) m->ent[x->gnewer].golder = x->golder; else m->ghead = x->golder;
  if (x->golder) m->ent[x->golder].gnewer = x->gnewer; else m->gtail = x->gnewer;
  for (unsigned k = 0; k < HMT_M4_NCUR; k++) {
    if (m->cur[k][0] == e) m->cur[k][0] = x->golder;
    if (m->cur[k][1] == e) m->cur[k][1] = x->gnewer;
  }
  hmt_m4_mapdel(m, x->ms);
  x->gnewer = m->free_ent; m->free_ent = e;
  m->ntracked--;
}
HMT_M4_INLINE void hmt_m4_track(hmt_m4_model_t *m, uint64_t ptr, unsigned cls, uint32_t site) {
  if (!ptr) return;
  hmt_m4_mslot_t *ms = hmt_m4_find(m, ptr);
  if (ms->ptr) hmt_m4_untrack(m, ms->e);  /* freed by another thread and given out again */
  if (m->ntracked >= m->nmax) { hmt_m4_untrack(m, m->gtail); m->evicted++; }
  m->tracked++;
  ms = hmt_m4_find(m, ptr);
  uint32_t e = m->free_ent;
  if (e) m->free_ent = m->ent[e].gnewer; else e = m->nent++;
  hmt_m4_ent_t *x = &m->ent[e];
  hmt_m4_site_t *s = &m->sites[site];
  x->ptr = ptr; x->sc = site << 8 | cls; x->ms = (uint32_t)(ms - m->map);
  ms->ptr = ptr; ms->e = e;
  x->snewer = 0; x->solder = s->head;
  if (s->head) m->ent[s->head].snewer = e; else s->tail = e;
  s->head = e;
  x->gnewer = 0; x->golder = m->ghead;
  if (m->ghead) m->ent[m->ghead].gnewer = e; else m->gtail = e;
  m->ghead = e;
  m->ntracked++;
}

/* stack -> site (encoder) */
HMT_M4_INLINE uint32_t *hmt_m4_smapslot(const hmt_m4_model_t *m, uint64_t stack) {
  for (uint64_t i = hmt_m4_h(stack + 1) >> m->smap_shift;; i = (i + 1) & m->smap_mask)
    if (m->smap[i] == 0 || m->sites[m->smap[i]].stack == stack) return &m->smap[i];
}

/* ------------------------------------------------------------------ */
/* Memory                                                              */

/** The capacities the model needs before a block of count records (its
 *  arrays are then grown with hmt_m4_grow): sites, entries, and the slots
 *  of the two maps (twice as many, powers of two). */
typedef struct { uint32_t sites, ents; uint64_t map_slots, smap_slots; } hmt_m4_room_t;
static inline hmt_m4_room_t hmt_m4_need(const hmt_m4_model_t *m, int chained, uint64_t count, uint32_t nmax) {
  hmt_m4_room_t r;
  uint64_t ns = (chained ? m->nsites : 2) + count, ne = (chained ? m->nent : 1) + count;
  if (ns > HMT_M4_SITES_MAX) ns = HMT_M4_SITES_MAX;
  if (ne > (uint64_t)nmax + 1) ne = (uint64_t)nmax + 1;
  r.sites = (uint32_t)ns; r.ents = (uint32_t)ne;
  for (r.map_slots = 64; r.map_slots < 2 * ne; r.map_slots *= 2) {}
  for (r.smap_slots = 64; r.smap_slots < 2 * ns; r.smap_slots *= 2) {}
  return r;
}
/** Move the model into larger arrays (the old ones stay the caller's to
 *  free): sites[room.sites], ent[room.ents], map[room.map_slots] and, for
 *  an encoder, smap[room.smap_slots] (NULL for a decoder); keep: the model
 *  continues (the next block is chained), else its contents are dropped
 *  (the block starts it afresh).  Each pointer may be the current one when
 *  that array is large enough already. */
static inline void hmt_m4_grow(hmt_m4_model_t *m, hmt_m4_room_t room, hmt_m4_site_t *sites, hmt_m4_ent_t *ent,
                               hmt_m4_mslot_t *map, uint32_t *smap, int keep) {
  if (!keep) m->nsites = m->nent = m->ghead = m->gtail = 0;
  if (sites != m->sites) {
    if (m->sites && m->nsites) memcpy(sites, m->sites, m->nsites * sizeof *sites);
    m->sites = sites;
  }
  m->site_cap = room.sites;
  if (ent != m->ent) {
    if (m->ent && m->nent) memcpy(ent, m->ent, m->nent * sizeof *ent);
    m->ent = ent;
  }
  m->ent_cap = room.ents;
  if (map != m->map || m->map_mask + 1 != room.map_slots) {
    m->map = map;
    m->map_mask = room.map_slots - 1;
    m->map_shift = 64u - (unsigned)__builtin_ctzll(room.map_slots);
    memset(map, 0, room.map_slots * sizeof *map);
    for (uint32_t e = m->ghead; e; e = m->ent[e].golder) {
      hmt_m4_mslot_t *x = hmt_m4_find(m, m->ent[e].ptr);
      x->ptr = m->ent[e].ptr; x->e = e;
      m->ent[e].ms = (uint32_t)(x - m->map);
    }
  }
  if (smap && (smap != m->smap || m->smap_mask + 1 != room.smap_slots)) {
    m->smap = smap;
    m->smap_mask = room.smap_slots - 1;
    m->smap_shift = 64u - (unsigned)__builtin_ctzll(room.smap_slots);
    memset(smap, 0, room.smap_slots * sizeof *smap);
    for (uint32_t s = 2; s < m->nsites; s++) *hmt_m4_smapslot(m, m->sites[s].stack) = s;
  }
}

/* A block may track fewer allocations than the one before (its head says
 * how many): the oldest go first, on both sides alike. */
static inline void hmt_m4_limit(hmt_m4_model_t *m, uint32_t nmax) {
  while (m->ntracked > nmax) hmt_m4_untrack(m, m->gtail);
  m->nmax = nmax;
}

/** After hmt_m4_limit lowered the limit, move the tracked allocations into
 *  entries 1 .. ntracked of ent (room.ents of them, more than ntracked) and
 *  rebuild the map in map (room.map_slots): a small limit then fits in the
 *  caches (which was its point).  The old arrays are the caller's to free;
 *  the model means the same (entry numbers are the memory's, not the
 *  format's). */
static inline void hmt_m4_compact(hmt_m4_model_t *m, hmt_m4_room_t room, hmt_m4_ent_t *ent, hmt_m4_mslot_t *map) {
  hmt_m4_ent_t *old = m->ent;
  uint32_t n = 0;
  for (uint32_t e = m->gtail; e; e = old[e].gnewer) old[e].ms = ++n;  /* new numbers, oldest first */
#define HMT_M4_RENUM(v) ((v) ? old[v].ms : 0u)
  for (uint32_t e = m->gtail; e; e = old[e].gnewer) {
    hmt_m4_ent_t *x = &ent[old[e].ms];
    *x = old[e];
    x->snewer = HMT_M4_RENUM(x->snewer); x->solder = HMT_M4_RENUM(x->solder);
    x->gnewer = HMT_M4_RENUM(x->gnewer); x->golder = HMT_M4_RENUM(x->golder);
  }
  for (uint32_t s = 0; s < m->nsites; s++) {
    m->sites[s].head = HMT_M4_RENUM(m->sites[s].head);
    m->sites[s].tail = HMT_M4_RENUM(m->sites[s].tail);
  }
  for (unsigned k = 0; k < HMT_M4_NCUR; k++) {
    m->cur[k][0] = HMT_M4_RENUM(m->cur[k][0]);
    m->cur[k][1] = HMT_M4_RENUM(m->cur[k][1]);
  }
  m->ghead = HMT_M4_RENUM(m->ghead); m->gtail = HMT_M4_RENUM(m->gtail);
#undef HMT_M4_RENUM
  m->ent = ent; m->ent_cap = room.ents;
  m->nent = n + 1; m->free_ent = 0;
  m->map = map;
  m->map_mask = room.map_slots - 1;
  m->map_shift = 64u - (unsigned)__builtin_ctzll(room.map_slots);
  memset(map, 0, room.map_slots * sizeof *map);
  for (uint32_t e = 1; e <= n; e++) {
    hmt_m4_mslot_t *x = hmt_m4_find(m, ent[e].ptr);
    x->ptr = ent[e].ptr; x->e = e;
    ent[e].ms = (uint32_t)(x - map);
  }
}

/* start afresh (the arrays stay; hmt_m4_need(.., 0, ..) sized them) */
static inline void hmt_m4_reset(hmt_m4_model_t *m, uint64_t base_ptr) {
  size_t off = offsetof(hmt_m4_model_t, nsites);
  memset((char *)m + off, 0, sizeof *m - off);
  m->nsites = 2;  /* 0: an untracked free, STACK and EXT; 1: sites beyond HMT_M4_SITES_MAX */
  memset(m->sites, 0, 2 * sizeof *m->sites);
  m->sites[1].stack = UINT64_MAX;
  m->nent = 1;    /* entry 0: none */
  memset(m->map, 0, (m->map_mask + 1) * sizeof *m->map);
  if (m->smap) memset(m->smap, 0, (m->smap_mask + 1) * sizeof *m->smap);
  m->hist[0] = m->hist[1] = base_ptr;
  for (unsigned k = 0; k < HMT_M4_NCUR; k++) m->acur[k][0] = m->acur[k][1] = base_ptr;
}

/* ------------------------------------------------------------------ */
/* Fields                                                              */

HMT_M4_INLINE int hmt_m4_frees(unsigned kind) { return kind == HMT_M4_FREE || kind == HMT_M4_REALLOCF; }

HMT_M4_INLINE void hmt_m4_fol_update(hmt_m4_fol_t *f, uint32_t tok, unsigned r) {
  unsigned pos = r < 4 ? r : 3;
  for (unsigned k = pos; k > 0; k--) f->t[k] = f->t[k - 1];
  f->t[0] = tok;
  f->st = ((f->st << 2) | (r < 2 ? r : r < 4 ? 2 : 3)) & 0xff;
}
/* The rank of tok among f's followers (those in ex, already refused at
 * the higher order, skipped): one bit per follower tried; 4: none. */
HMT_M4_INLINE unsigned hmt_m4_sr(hmt_rc_t *c, hmt_m4_model_t *m, unsigned order, const hmt_m4_fol_t *f, uint32_t *tok,
                                 const uint32_t *ex, const int dec) {
  unsigned k = 0;
  for (unsigned r = 0; r < 4 && f->t[r]; r++) {
    if (ex && (ex[0] == f->t[r] || ex[1] == f->t[r] || ex[2] == f->t[r] || ex[3] == f->t[r])) continue;
    if (hmt_rc_bit(c, &m->b_sr[order][f->st][k++], dec ? 0 : f->t[r] == *tok, dec)) { *tok = f->t[r]; return r; }
  }
  return 4;
}

/* The token (site << 5 | S << 4 | kind): ranked among the followers of the
 * last two tokens, else of the last one (an allocation site's followers
 * live in its entry), else spelled out: kind, S, and the site -- known by
 * its index, or new (its stack: the node a STACK record just defined, or
 * a delta from the last new one).  *stack: the encoder's stack of a new
 * site, the decoder's on return. */
HMT_M4_INLINE uint32_t hmt_m4_token(hmt_rc_t *c, hmt_m4_model_t *m, uint32_t tok, uint64_t *stack, const int dec) {
  uint64_t h = hmt_m4_h(hmt_m4_h(m->tok1 + 1) + m->tok2);
  hmt_m4_slot_t *sl = &m->slot[h >> (64 - HMT_M4_SLOT_BITS)];
  uint32_t chk = (uint32_t)h | 1;
  if (sl->chk != chk) { memset(sl, 0, sizeof *sl); sl->chk = chk; }
  hmt_m4_fol_t *f1 = &m->sites[m->tok1 >> 5].fol[hmt_m4_frees(m->tok1 & 15)];
  HMT_M4_FIELD(c, HMT_M4_F_TOKEN);
  unsigned r2 = 4, r1 = 4;
  if (!(m->ablate & HMT_M4_X_ORDER2)) r2 = hmt_m4_sr(c, m, 2, &sl->f, &tok, NULL, dec);
  /* the order-1 followers learn only what order 2 missed (as fast, smaller) */
  if (r2 == 4) r1 = hmt_m4_sr(c, m, 1, f1, &tok, (m->ablate & HMT_M4_X_ORDER2) ? NULL : sl->f.t, dec);
  if (r2 == 4 && r1 == 4) {
    HMT_M4_FIELD(c, HMT_M4_F_TOKEN_NEW);
    unsigned kind = hmt_rc_tree(c, m->b_kind[m->tok1 & 15], 4, tok & 15, dec);
    if (kind == 0 || kind > HMT_M4_EXT) { c->err = 1; kind = HMT_M4_STACK; }
    unsigned sys = (unsigned)hmt_rc_bit(c, &m->b_sys[kind], (tok >> 4) & 1, dec);
    uint32_t site = tok >> 5;
    if (kind == HMT_M4_STACK || kind == HMT_M4_EXT) site = 0;
    else if (kind == HMT_M4_FREE && !hmt_rc_bit(c, &m->b_tracked, site != 0, dec)) site = 0;
    else if (kind != HMT_M4_FREE && m->nsites < HMT_M4_SITES_MAX &&
             hmt_rc_bit(c, &m->b_newsite, site == m->nsites, dec)) {
      uint64_t s = *stack;
      if (hmt_rc_bit(c, &m->b_deflast, s == m->deflast, dec)) s = m->deflast;
      else s = m->newstack + (uint64_t)hmt_rc_sint(c, &m->i_stack, (int64_t)(s - m->newstack), dec);
      m->newstack = *stack = s;
      site = m->nsites++;
      hmt_m4_site_t *ns = &m->sites[site];
      memset(ns, 0, sizeof *ns);
      ns->stack = s;
      if (!dec) *hmt_m4_smapslot(m, s) = site;
    } else {
      int64_t d = hmt_rc_sint(c, &m->i_site, (int64_t)site - (int64_t)(m->tok1 >> 5), dec);
      site = (uint32_t)((int64_t)(m->tok1 >> 5) + d);
      if (site >= m->nsites || site == 0) { c->err = 1; site = 1; }
    }
    tok = site << 5 | sys << 4 | kind;
  }
  hmt_m4_fol_update(&sl->f, tok, r2);
  if (r2 == 4) hmt_m4_fol_update(f1, tok, r1);
  m->tok2 = m->tok1; m->tok1 = tok;
  return tok;
}

/* An address given back that names no tracked allocation (another
 * thread's block, an evicted one): a delta from the last event's address,
 * the one before, or one of the last two addresses of a run of such
 * addresses -- frees continuing a run, like the frees of two kinds of
 * blocks freed in turn, each a step from the last of their kind (a
 * std::map cleared beyond the tracked allocations: 6.4 bits a free with
 * the last events' addresses alone, 1 bit with the runs) -- and the step
 * is predicted to be the one that gave that address. */
HMT_M4_INLINE uint64_t hmt_m4_faddr(hmt_rc_t *c, hmt_m4_model_t *m, uint64_t ptr, const int dec) {
  uint64_t b[HMT_M4_FA_N], st[HMT_M4_FA_N];
  unsigned nb = (m->ablate & HMT_M4_X_RUNS) ? 2 : HMT_M4_FA_N;
  b[0] = m->hist[0]; b[1] = m->hist[1]; st[0] = st[1] = 0;
  for (unsigned k = 0; k < HMT_M4_NCUR; k++)
    for (unsigned j = 0; j < 2; j++) { b[2 + 2 * k + j] = m->acur[k][j]; st[2 + 2 * k + j] = m->astep[k][j]; }
  unsigned mode = 0;
  if (!dec) {
    if (m->fam < nb && ptr - b[m->fam] == st[m->fam]) mode = m->fam;
    else {
      unsigned bl = 99;
      for (unsigned k = 0; k < nb && bl; k++) {
        unsigned l = ptr - b[k] == st[k] ? 0 : hmt_varint_len(hmt_zigzag((int64_t)(ptr - b[k])));
        if (l < bl) { bl = l; mode = k; }
      }
    }
  }
  HMT_M4_FIELD(c, HMT_M4_F_FREE_ADDR);
  if (hmt_rc_bit(c, &m->b_fsame[m->fam], mode == m->fam, dec)) mode = m->fam;
  else {
    mode = hmt_rc_tree(c, m->b_fam[m->fam], 4, mode, dec);
    if (mode >= HMT_M4_FA_N) { c->err = 1; mode = 0; }
  }
  unsigned mc = mode < 2 ? mode : 2;
  uint64_t d = ptr - b[mode];
  if (hmt_rc_bit(c, &m->b_fstep[mc], d == st[mode], dec)) d = st[mode];
  else d = (uint64_t)hmt_rc_sint(c, &m->i_faddr[mc], (int64_t)d, dec);
  ptr = b[mode] + d;
  m->fam = mode;
  /* the run it continues: a step (below 64 KiB) from one of a run's last two */
  unsigned k = HMT_M4_NCUR;
  if ((int64_t)d > -(1 << 16) && (int64_t)d < (1 << 16))
    for (k = 0; k < HMT_M4_NCUR && m->acur[k][0] != b[mode] && m->acur[k][1] != b[mode]; k++) {}
  uint64_t last = m->hist[0], lstep = 0;
  if (k < HMT_M4_NCUR) { last = m->acur[k][0]; lstep = m->astep[k][0]; } else k = HMT_M4_NCUR - 1;
  for (; k > 0; k--)
    for (unsigned j = 0; j < 2; j++) { m->acur[k][j] = m->acur[k - 1][j]; m->astep[k][j] = m->astep[k - 1][j]; }
  m->acur[0][0] = ptr; m->astep[0][0] = d; m->acur[0][1] = last; m->astep[0][1] = lstep;
  return ptr;
}

/* Which allocation a free (rk 0) or a realloc (rk 1) gives back: a tracked
 * entry named by a method -- the newest or oldest of the site (the free's
 * token names the block's site, a realloc's its own), the thread's newest,
 * a neighbour of the block one of the last frees gave back -- or by its
 * address (then the entry the address names, if any).  The site remembers
 * the method that worked last.  e: the encoder's entry (0: untracked). */
HMT_M4_INLINE uint32_t hmt_m4_cand(const hmt_m4_model_t *m, const hmt_m4_site_t *s, unsigned k) {
  if (k < HMT_M4_M_NEWEST) return (m->ablate & HMT_M4_X_SITELIST) ? 0 : k == HMT_M4_M_LIFO ? s->head : s->tail;
  if (k == HMT_M4_M_NEWEST) return m->ghead;
  if (k < HMT_M4_M_ADDR) return (m->ablate & HMT_M4_X_CURSOR) ? 0 : m->cur[(k - HMT_M4_M_CUR) / 2][(k - HMT_M4_M_CUR) & 1];
  return 0;
}
HMT_M4_INLINE uint32_t hmt_m4_ident(hmt_rc_t *c, hmt_m4_model_t *m, uint32_t site, unsigned rk, uint32_t e,
                                    uint64_t *addr, unsigned *methp, const int dec) {
  hmt_m4_site_t *s = &m->sites[site];
  unsigned pref = rk ? s->rm : s->fm, meth = HMT_M4_M_ADDR;
  if (!dec && e) {
    if (hmt_m4_cand(m, s, pref) == e) meth = pref;
    else
      for (unsigned k = 0; k < HMT_M4_M_ADDR; k++)
        if (hmt_m4_cand(m, s, k) == e) { meth = k; break; }
  }
  HMT_M4_FIELD(c, rk ? HMT_M4_F_REALLOC : HMT_M4_F_FREE);
  if (hmt_rc_bit(c, &m->b_mpref[rk][pref], meth == pref, dec)) meth = pref;
  else {
    meth = hmt_rc_tree(c, m->b_mtree[rk][pref], 4, meth, dec);
    if (meth >= HMT_M4_M_N) { c->err = 1; meth = HMT_M4_M_ADDR; }
  }
  if (rk) s->rm = (uint8_t)meth; else s->fm = (uint8_t)meth;
  *methp = meth;
  if (meth != HMT_M4_M_ADDR) {
    e = hmt_m4_cand(m, s, meth);
    if (!e) { c->err = 1; return 0; }
    *addr = m->ent[e].ptr;
    return e;
  }
  *addr = hmt_m4_faddr(c, m, *addr, dec);
  return hmt_m4_lookup(m, *addr);
}

/* A size: the site's last, the one before, the step of the previous
 * allocation scaled as last time (sizes that grow together: BWA-MEM's
 * 16 + n, 100 + n, 4 n + 4, 5 n - 4 from one n, read after read), or the
 * value itself (by a context of the site). */
HMT_M4_INLINE uint64_t hmt_m4_size(hmt_rc_t *c, hmt_m4_model_t *m, uint32_t site, unsigned rt, uint64_t size,
                                   const int dec) {
  hmt_m4_site_t *s = &m->sites[site];
  uint64_t pred = 0;
  int have = 0;
  int64_t num;  /* pdelta * rn / rd when exact (a product beyond 64 bits: no prediction) */
  if (s->rd && m->pdelta && !(m->ablate & HMT_M4_X_RATIO) && !__builtin_mul_overflow(m->pdelta, s->rn, &num) &&
      (s->rd == -1 || num % s->rd == 0)) {
    pred = s->s1 + (s->rd == -1 ? 0 - (uint64_t)num : (uint64_t)(num / s->rd));
    have = pred != s->s1 && pred != s->s2;
  }
  unsigned opt = 3;
  if (!dec) opt = size == s->s1 ? 0 : size == s->s2 ? 1 : have && size == pred ? 2 : 3;
  HMT_M4_FIELD(c, HMT_M4_F_SIZE);
  if (hmt_rc_bit(c, &m->b_size[s->szo][0][rt], opt == 0, dec)) opt = 0;
  else if (s->s2 != s->s1 && hmt_rc_bit(c, &m->b_size[s->szo][1][rt], opt == 1, dec)) opt = 1;
  else if (have && hmt_rc_bit(c, &m->b_size[s->szo][2][rt], opt == 2, dec)) opt = 2;
  else opt = 3;
  if (opt == 0) size = s->s1;
  else if (opt == 1) size = s->s2;
  else if (opt == 2) size = pred;
  else {
    HMT_M4_FIELD(c, HMT_M4_F_SIZE_NEW);
    size = hmt_rc_int(c, &m->i_size[site % HMT_M4_SIZE_CTX][rt], size, dec);
  }
  int64_t delta = (int64_t)(size - s->s1);
  if (m->pdelta && delta) { s->rn = delta; s->rd = m->pdelta; }
  m->pdelta = delta;
  if (size != s->s1) { s->s2 = s->s1; s->s1 = size; }
  s->szo = (uint8_t)opt;
  return size;
}

/* An allocation's address: the top of its size class's freed list, the
 * old block's (a realloc in place), the class's last address + its last
 * stride (a bump through a fresh span), or a delta from the class's last
 * address or the last event's (modes of format 1.2, here coded by bits in
 * the context of the class's last mode). */
HMT_M4_INLINE uint64_t hmt_m4_aaddr(hmt_rc_t *c, hmt_m4_model_t *m, unsigned kind, uint64_t size, uint64_t old,
                                    uint64_t ptr, const int dec) {
  hmt_m4_cls_t *k = &m->cls[hmt_c2_class(size)];
  unsigned rt = kind == HMT_M4_REALLOC, mode = HMT_M4_A_HIST;
  int av[HMT_M4_A_N] = {k->n > 0, kind == HMT_M4_REALLOC, k->last != 0, k->last != 0, 1};
  if (!dec) {
    if (av[HMT_M4_A_LIFO] && k->lifo[(k->top - 1) % HMT_C2_LIFO] == ptr) mode = HMT_M4_A_LIFO;
    else if (av[HMT_M4_A_OLD] && old == ptr) mode = HMT_M4_A_OLD;
    else if (av[HMT_M4_A_BUMP] && k->last + k->stride == ptr) mode = HMT_M4_A_BUMP;
    else if (av[HMT_M4_A_CLASS] && hmt_varint_len(hmt_zigzag((int64_t)(ptr - k->last))) <
                                       hmt_varint_len(hmt_zigzag((int64_t)(ptr - m->hist[0]))))
      mode = HMT_M4_A_CLASS;
  }
  HMT_M4_FIELD(c, HMT_M4_F_ADDR);
  unsigned md = HMT_M4_A_HIST;
  for (unsigned x = 0; x < HMT_M4_A_HIST; x++)
    if (av[x] && hmt_rc_bit(c, &m->b_amode[k->mh][x][rt], mode == x, dec)) { md = x; break; }
  mode = md;
  HMT_M4_FIELD(c, HMT_M4_F_ADDR_NEW);
  switch (mode) {
    case HMT_M4_A_LIFO: ptr = k->lifo[--k->top % HMT_C2_LIFO]; k->n--; break;
    case HMT_M4_A_OLD: ptr = old; break;
    case HMT_M4_A_BUMP: ptr = k->last + k->stride; break;
    default: {
      /* a delta; first whether it is this mode's last one (a thread
       * stepping through memory: one bit instead of fifteen) */
      unsigned j = mode == HMT_M4_A_CLASS ? 0 : 1;
      uint64_t b = j ? m->hist[0] : k->last, d = ptr - b;
      if (hmt_rc_bit(c, &m->b_arep[j], d == m->arep[j], dec)) d = m->arep[j];
      else d = (uint64_t)hmt_rc_sint(c, &m->i_aaddr[j], (int64_t)d, dec);
      m->arep[j] = d;
      ptr = b + d;
      break;
    }
  }
  if (mode >= HMT_M4_A_BUMP) {
    if (k->last) k->stride = ptr - k->last;
    k->last = ptr;
  }
  k->mh = mode;
  return ptr;
}

HMT_M4_INLINE void hmt_m4_push(hmt_m4_model_t *m, unsigned cls, uint64_t ptr) {
  hmt_m4_cls_t *k = &m->cls[cls];
  k->lifo[k->top++ % HMT_C2_LIFO] = ptr;
  k->n += k->n < HMT_C2_LIFO;
}

/** One event or record, as the coder sees it. */
typedef struct {
  unsigned kind, sys;
  uint64_t tick, ptr, old, size, align, stack;
} hmt_m4_ev_t;

/* One record: its token, and an event's fields.  The bodies of STACK and
 * EXT records are the caller's. */
HMT_M4_INLINE void hmt_m4_event(hmt_rc_t *c, hmt_m4_model_t *m, hmt_m4_ev_t *ev, const int dec) {
  uint32_t tok = 0, fe = 0;
  if (!dec) {
    uint32_t site = 0;
    if (ev->kind == HMT_M4_FREE) {
      fe = hmt_m4_lookup(m, ev->ptr);
      site = fe ? m->ent[fe].sc >> 8 : 0;
    } else if (ev->kind != HMT_M4_STACK && ev->kind != HMT_M4_EXT) {
      uint32_t *ss = hmt_m4_smapslot(m, ev->stack);
      site = *ss ? *ss : m->nsites < HMT_M4_SITES_MAX ? m->nsites : 1u;
    }
    tok = site << 5 | ev->sys << 4 | ev->kind;
  }
  tok = hmt_m4_token(c, m, tok, &ev->stack, dec);
  unsigned kind = tok & 15;
  uint32_t site = tok >> 5;
  ev->kind = kind; ev->sys = (tok >> 4) & 1;
  if (kind == HMT_M4_STACK || kind == HMT_M4_EXT) return;
  if (kind != HMT_M4_FREE) {
    if (site == 1) {  /* beyond HMT_M4_SITES_MAX: the stack spelled out */
      HMT_M4_FIELD(c, HMT_M4_F_TOKEN_NEW);
      ev->stack = m->ovstack + (uint64_t)hmt_rc_sint(c, &m->i_ovstack, (int64_t)(ev->stack - m->ovstack), dec);
      m->ovstack = ev->stack;
    } else ev->stack = m->sites[site].stack;
    m->laststack = ev->stack;
  }
  /* time: most events share the tick of the one before; the chance of a
   * new tick grows with the events the tick has held (BWA-MEM: 0.015 ->
   * 0.011 bytes an event with that count as context) */
  HMT_M4_FIELD(c, HMT_M4_F_TIME);
  uint64_t dt = dec ? 0 : ev->tick - m->tick;
  unsigned run = (m->ablate & HMT_M4_X_TIMERUN) ? (m->run != 0) : m->run < 16 ? m->run : 16u + (m->run >= 32) + (m->run >= 64);
  if (hmt_rc_bit(c, &m->b_dt0[kind][run], dt == 0, dec)) { dt = 0; m->run++; }
  else { dt = 1 + hmt_rc_int(c, &m->i_dt[kind], dt - 1, dec); m->run = 0; }
  if (m->tick + dt < m->tick) c->err = 1;
  m->tick += dt; ev->tick = m->tick;
  unsigned meth = HMT_M4_M_ADDR;
  if (kind == HMT_M4_FREE) {
    if (site) fe = hmt_m4_ident(c, m, site, 0, fe, &ev->ptr, &meth, dec);
    else { ev->ptr = hmt_m4_faddr(c, m, ev->ptr, dec); fe = hmt_m4_lookup(m, ev->ptr); }
    if (fe) {
      /* the freed block goes on its class's freed list; a cursor keeps its neighbours */
      hmt_m4_ent_t *x = &m->ent[fe];
      uint32_t older = x->golder, newer = x->gnewer;
      hmt_m4_push(m, x->sc & 0xff, x->ptr);
      hmt_m4_untrack(m, fe);
      unsigned k = meth >= HMT_M4_M_CUR && meth < HMT_M4_M_ADDR ? (meth - HMT_M4_M_CUR) / 2 : HMT_M4_NCUR - 1;
      for (; k > 0; k--) { m->cur[k][0] = m->cur[k - 1][0]; m->cur[k][1] = m->cur[k - 1][1]; }
      m->cur[0][0] = older; m->cur[0][1] = newer;
    }
    ev->old = ev->size = ev->align = 0;
    m->hist[1] = m->hist[0]; m->hist[0] = ev->ptr;
    return;
  }
  uint32_t oe = 0;
  if (kind == HMT_M4_REALLOC || kind == HMT_M4_REALLOCF) {
    if (!dec) oe = hmt_m4_lookup(m, ev->old);
    oe = hmt_m4_ident(c, m, site, 1, oe, &ev->old, &meth, dec);
  } else ev->old = 0;
  unsigned rt = kind == HMT_M4_REALLOC || kind == HMT_M4_REALLOCF;
  ev->size = hmt_m4_size(c, m, site, rt, ev->size, dec);
  if (kind == HMT_M4_MEMALIGN) {
    hmt_m4_site_t *s = &m->sites[site];
    if (hmt_rc_bit(c, &m->b_align, ev->align == s->align, dec)) ev->align = s->align;
    else ev->align = hmt_rc_int(c, &m->i_align, ev->align, dec);
    s->align = ev->align;
  } else ev->align = 0;
  if (kind == HMT_M4_REALLOCF) ev->ptr = 0;
  else ev->ptr = hmt_m4_aaddr(c, m, kind, ev->size, ev->old, ev->ptr, dec);
  if (oe) {
    if (ev->ptr != ev->old) hmt_m4_push(m, m->ent[oe].sc & 0xff, ev->old);
    hmt_m4_untrack(m, oe);
  }
  hmt_m4_track(m, ev->ptr, hmt_c2_class(ev->size), site);
  m->hist[1] = m->hist[0]; m->hist[0] = ev->ptr;
}

/* STACK record body: first (a delta from the node after the last record's),
 * first - parent, n, frame 0 (a delta from the last record's), then the
 * zigzag frame deltas of the row by their position */
HMT_M4_INLINE int hmt_m4_stack(hmt_rc_t *c, hmt_m4_model_t *m, uint64_t *first, uint64_t *up, uint64_t *n,
                               const int dec) {
  HMT_M4_FIELD(c, HMT_M4_F_STACK);
  *first = m->nextnode + (uint64_t)hmt_rc_sint(c, &m->i_sfirst, (int64_t)(*first - m->nextnode), dec);
  /* the parent: a step up from the last allocation's stack (the new stack
   * branches off a path the thread was just on), or first - parent */
  uint64_t parent = *first - *up;
  int near = dec ? 0 : hmt_varint_len(hmt_zigzag((int64_t)(m->laststack - parent))) < hmt_varint_len(*up);
  if (hmt_rc_bit(c, &m->b_supnear, near, dec))
    *up = *first - (m->laststack - (uint64_t)hmt_rc_sint(c, &m->i_supnear, (int64_t)(m->laststack - parent), dec));
  else *up = hmt_rc_int(c, &m->i_sup, *up, dec);
  *n = hmt_rc_int(c, &m->i_sn, *n, dec);
  if (*n == 0 || *n > HMT_MAX_DEPTH || *first == 0 || *up == 0 || *up > *first || *first + *n < *first)
    return HMT_E_RECORD;
  m->nextnode = *first + *n;
  m->deflast = *first + *n - 1;
  return HMT_OK;
}
/* A frame of a STACK record (v as the row has it: frame 0, then zigzag
 * deltas).  Frame 0 is a delta from the last record's; a caller's frame is
 * first predicted from the frame it returns to (the caller found last time
 * after that frame: a function is mostly called from a few places). */
HMT_M4_INLINE uint64_t hmt_m4_frame(hmt_rc_t *c, hmt_m4_model_t *m, uint64_t i, uint64_t v, const int dec) {
  uint64_t f;
  if (i == 0) {
    f = m->frame0 = m->frame0 + (uint64_t)hmt_rc_sint(c, &m->i_sf0, (int64_t)(v - m->frame0), dec);
  } else {
    uint64_t *slot = &m->fnext[hmt_m4_h(m->fprev) >> (64 - HMT_M4_FRAME_BITS)];
    uint64_t pv = hmt_zigzag((int64_t)(*slot - m->fprev));
    if (hmt_rc_bit(c, &m->b_fnext[i < 4 ? i : 3], v == pv, dec)) v = pv;
    else v = hmt_rc_int(c, &m->i_sfd[i < 4 ? i : 3], v, dec);
    f = m->fprev + (uint64_t)hmt_unzigzag(v);
    *slot = f;
  }
  m->fprev = f;
  return i ? v : f;
}


/* ------------------------------------------------------------------ */
/* Payloads                                                            */

/** The head of a format 1.4 payload: tick shift and tracked-allocation
 *  limit.  Its length, 0 when malformed. */
static inline size_t hmt_m4_head(const uint8_t *p, size_t len, unsigned *shift, uint32_t *nmax) {
  const uint8_t *q = p, *end = p + len;
  uint64_t s, nb;
  if (q >= end || *q++ != HMT_M4_MARK || !(q = hmt_get_varint(q, end, &s)) || s > 40 ||
      !(q = hmt_get_varint(q, end, &nb)) || nb > HMT_M4_NMAX_BITS)
    return 0;
  *shift = (unsigned)s; *nmax = 1u << nb;
  return (size_t)(q - p);
}

/** A block being coded, fed record by record: the recorder codes its raw
 *  entries as it takes them, without making rows and reading them again
 *  (a quarter of the encoder's instructions: 150-200 of some 850 an event). */
typedef struct {
  hmt_rc_t c;
  hmt_state_t row;     /* the state of the rows the payload decodes to */
  uint8_t *out;        /* the payload: head, then the coder's bytes */
  uint64_t rows_len;   /* of those rows */
  uint64_t count;      /* records coded */
  unsigned shift;
} hmt_m4_enc_t;

/** Start a payload at out (cap bytes) for records that follow the state
 *  *base (the block header's), with time ticks of 2^shift ns, continuing
 *  the models m (chained != 0) or starting them afresh, with m->nmax
 *  tracked allocations at most (a power of two; a chained block may track
 *  fewer than the one before: the oldest are evicted).  The arrays must
 *  have the room of hmt_m4_need for the records coded before they are
 *  grown again.  0, or -1 (nmax or cap unusable). */
static inline int hmt_m4_enc_begin(hmt_m4_enc_t *e, uint8_t *out, size_t cap, const hmt_state_t *base, unsigned shift,
                                   hmt_m4_model_t *m, int chained) {
  if (cap < HMT_M4_HEAD_MAX + 8 || !m->nmax || (m->nmax & (m->nmax - 1)) || m->nmax > (1u << HMT_M4_NMAX_BITS) ||
      shift > 40)
    return -1;
  if (!chained) hmt_m4_reset(m, base->ptr);
  else if (m->ntracked > m->nmax) hmt_m4_limit(m, m->nmax);
  uint8_t *o = out;
  *o++ = HMT_M4_MARK;
  o = hmt_put_varint(o, shift);
  o = hmt_put_varint(o, (uint64_t)__builtin_ctz(m->nmax));
  hmt_rc_enc_init(&e->c, o, cap - (size_t)(o - out));
  e->out = out;
  e->row = *base;
  e->row.time = (base->time >> shift) << shift;
  e->rows_len = e->count = 0;
  e->shift = shift;
  m->tick = base->time >> shift;
  return 0;
}
/** Bytes of the payload so far, with what the coder still holds. */
static inline size_t hmt_m4_enc_size(const hmt_m4_enc_t *e) { return (size_t)(e->c.o - e->out) + e->c.csize + 4; }

/** Code an event (time in ns, never before the last one's; rows' fields).
 *  0, or -1: out of room (the payload is then unusable). */
HMT_M4_INLINE int hmt_m4_enc_event(hmt_m4_enc_t *e, hmt_m4_model_t *m, unsigned type, int sys, uint64_t time,
                                   uint64_t ptr, uint64_t old, uint64_t size, uint64_t align, uint64_t stack) {
  hmt_m4_ev_t ev;
  ev.kind = type == HPCMEM_EV_REALLOC ? (unsigned)(!old ? HMT_M4_REALLOC0 : !ptr ? HMT_M4_REALLOCF : HMT_M4_REALLOC) : type;
  ev.sys = sys ? 1 : 0;
  ev.tick = time >> e->shift;
  ev.ptr = ptr; ev.old = old; ev.size = size; ev.align = align; ev.stack = stack;
  hmt_m4_event(&e->c, m, &ev, 0);
  /* the length of the row the decoder will make (time rounded to the tick) */
  uint64_t t = ev.tick << e->shift;
  uint64_t l = 1 + hmt_varint_len(t - e->row.time) + hmt_varint_len(hmt_zigzag((int64_t)(ptr - e->row.ptr)));
  if (type == HPCMEM_EV_REALLOC) l += hmt_varint_len(hmt_zigzag((int64_t)(old - ptr)));
  if (type != HPCMEM_EV_FREE) {
    l += hmt_varint_len(size);
    if (type == HPCMEM_EV_MEMALIGN) l += hmt_varint_len(align);
    if (stack != e->row.stack) l += hmt_varint_len(stack);
    e->row.stack = stack;
  }
  e->row.time = t; e->row.ptr = ptr;
  e->rows_len += l;
  e->count++;
  return e->c.err ? -1 : 0;
}

/** Code a STACK record: nodes first .. first + n - 1 on parent, frames
 *  innermost first (as hmt_encode_stack).  0, or -1 (out of room, or not a
 *  valid record). */
static inline int hmt_m4_enc_stack(hmt_m4_enc_t *e, hmt_m4_model_t *m, uint64_t first, uint64_t parent,
                                   const uint64_t *frames, uint32_t n) {
  hmt_m4_ev_t ev;
  memset(&ev, 0, sizeof ev);
  ev.kind = HMT_M4_STACK;
  hmt_m4_event(&e->c, m, &ev, 0);
  uint64_t up = first - parent, nn = n;
  if (hmt_m4_stack(&e->c, m, &first, &up, &nn, 0) != HMT_OK) return -1;
  uint64_t l = 1 + hmt_varint_len(first) + hmt_varint_len(up) + hmt_varint_len(nn), prev = 0;
  for (uint32_t i = 0; i < n; i++) {
    uint64_t v = i ? hmt_zigzag((int64_t)(frames[i] - prev)) : frames[0];
    hmt_m4_frame(&e->c, m, i, v, 0);
    l += hmt_varint_len(v);
    prev = frames[i];
  }
  e->row.stack = first + n - 1;
  e->rows_len += l;
  e->count++;
  return e->c.err ? -1 : 0;
}

/** Code an EXT record. 0 or -1. */
static inline int hmt_m4_enc_ext(hmt_m4_enc_t *e, hmt_m4_model_t *m, uint64_t type, const uint8_t *bytes, uint64_t len) {
  hmt_m4_ev_t ev;
  memset(&ev, 0, sizeof ev);
  ev.kind = HMT_M4_EXT;
  hmt_m4_event(&e->c, m, &ev, 0);
  HMT_M4_FIELD(&e->c, HMT_M4_F_STACK);
  hmt_rc_int(&e->c, &m->i_etype, type, 0);
  hmt_rc_int(&e->c, &m->i_elen, len, 0);
  for (uint64_t i = 0; i < len; i++) hmt_rc_tree(&e->c, m->b_byte, 8, bytes[i], 0);
  e->rows_len += 1 + hmt_varint_len(type) + hmt_varint_len(len) + len;
  e->count++;
  return e->c.err ? -1 : 0;
}

/** Finish the payload: its length (0: out of room). */
static inline size_t hmt_m4_enc_end(hmt_m4_enc_t *e) { return hmt_rc_enc_finish(&e->c, e->out); }

/* The records a few ahead of the one being coded have their map slots
 * fetched: on a thread with a large live set the map is beyond the caches,
 * and the probes were most of the encoder's time. */
#define HMT_M4_AHEAD 8
HMT_M4_INLINE void hmt_m4_prefetch(const hmt_m4_model_t *m, const hmt_record_t *r) {
  if (r->type >= HPCMEM_EV_MALLOC && r->type <= HPCMEM_EV_MEMALIGN) {
    HMT_M4_PREFETCH(&m->map[hmt_m4_h(r->ptr) >> m->map_shift]);
    if (r->type == HPCMEM_EV_REALLOC) HMT_M4_PREFETCH(&m->map[hmt_m4_h(r->old_ptr) >> m->map_shift]);
  }
}

/** Encode len bytes of rows (against *st, which is advanced to their end)
 *  into a format 1.4 payload at out (cap bytes), as hmt_m4_enc_begin
 *  starts it.  The arrays must have the room hmt_m4_need gives for the
 *  block's records.  Returns the payload length and in *rows_len the
 *  length of the rows it decodes to; 0 when the rows do not decode or cap
 *  is too small (the models are then in an undefined state: start
 *  afresh).  e: the coder (its figures, HMT_M4_STATS). */
static inline size_t hmt_m4_encode_e(hmt_m4_enc_t *e, const uint8_t *rows, size_t len, hmt_state_t *st,
                                     unsigned shift, uint8_t *out, size_t cap, hmt_m4_model_t *m, int chained,
                                     uint64_t *rows_len) {
  if (hmt_m4_enc_begin(e, out, cap, st, shift, m, chained)) return 0;
  const uint8_t *p = rows, *end = rows + len;
  /* a ring of decoded records: q[head] is coded while the next are fetched */
  hmt_record_t q[HMT_M4_AHEAD];
  unsigned n = 0, head = 0;
  for (;;) {
    while (n < HMT_M4_AHEAD && p < end) {
      unsigned k = (head + n) % HMT_M4_AHEAD;
      if (hmt_decode_record(&p, end, st, &q[k]) != HMT_OK) return 0;
      hmt_m4_prefetch(m, &q[k]);
      n++;
    }
    if (!n) break;
    const hmt_record_t *r = &q[head];
    head = (head + 1) % HMT_M4_AHEAD;
    n--;
    int rc;
    if (r->type == HMT_REC_STACK) {
      /* the frames as the row has them: frame 0, then zigzag deltas */
      hmt_m4_ev_t ev;
      memset(&ev, 0, sizeof ev);
      ev.kind = HMT_M4_STACK;
      hmt_m4_event(&e->c, m, &ev, 0);
      uint64_t first = r->stack_id, up = r->stack_id - r->parent, nn = r->depth;
      if (hmt_m4_stack(&e->c, m, &first, &up, &nn, 0) != HMT_OK) return 0;
      uint64_t l = 1 + hmt_varint_len(first) + hmt_varint_len(up) + hmt_varint_len(nn);
      const uint8_t *fq = r->frames, *fe = r->frames + r->frames_len;
      for (uint64_t i = 0; i < nn; i++) {
        uint64_t v = 0;
        fq = hmt_get_varint(fq, fe, &v);
        hmt_m4_frame(&e->c, m, i, v, 0);
        l += hmt_varint_len(v);
      }
      e->row.stack = first + nn - 1;
      e->rows_len += l;
      e->count++;
      rc = e->c.err ? -1 : 0;
    } else if (r->type == HMT_REC_EXT) {
      rc = hmt_m4_enc_ext(e, m, r->ext_type, r->ext, r->ext_len);
    } else {
      rc = hmt_m4_enc_event(e, m, r->type, (int)r->sys, r->time, r->ptr, r->old_ptr, r->size, r->align, r->stack);
    }
    if (rc) return 0;
  }
  size_t nb = hmt_m4_enc_end(e);
  if (!nb) return 0;
  *rows_len = e->rows_len;
  return nb;
}
static inline size_t hmt_m4_encode(const uint8_t *rows, size_t len, hmt_state_t *st, unsigned shift, uint8_t *out,
                                   size_t cap, hmt_m4_model_t *m, int chained, uint64_t *rows_len) {
  hmt_m4_enc_t e;
  return hmt_m4_encode_e(&e, rows, len, st, shift, out, cap, m, chained, rows_len);
}

/* rows out to exactly raw_len bytes: each value checked against the room */
HMT_M4_INLINE uint8_t *hmt_m4_put(uint8_t *o, const uint8_t *oend, uint8_t b) {
  if (o >= oend) return NULL;
  *o++ = b;
  return o;
}
HMT_M4_INLINE uint8_t *hmt_m4_putv(uint8_t *o, const uint8_t *oend, uint64_t v) {
  return (size_t)(oend - o) < hmt_varint_len(v) ? NULL : hmt_put_varint(o, v);
}

/** A payload being decoded: a block decodes in steps when the model's
 *  arrays must grow in between (a reader grows them as the records need,
 *  not as a damaged header claims). */
typedef struct {
  hmt_rc_t c;
  hmt_state_t row;         /* the rows' encoder state */
  uint8_t *out, *o, *oend;
  uint64_t i, count;
  unsigned shift;
} hmt_m4_dec_t;

/** Start decoding a format 1.4 payload of count records into rows at out
 *  (out_cap bytes: the block's raw_len) that the row decoder reads from
 *  *st, continuing the models m (chained != 0: the state after the tid's
 *  previous block) or starting them afresh.  On entry *st is the block
 *  header's base state; on return the state the rows start from (time
 *  rounded down to the tick).  The arrays need at least the room of
 *  hmt_m4_need(m, chained, 0, nmax) (nmax: the head's, hmt_m4_head).
 *  HMT_OK or HMT_E_RECORD. */
static inline int hmt_m4_dec_begin(hmt_m4_dec_t *d, const uint8_t *in, size_t len, hmt_state_t *st, uint8_t *out,
                                   size_t out_cap, uint64_t count, hmt_m4_model_t *m, int chained) {
  uint32_t nmax;
  size_t h = hmt_m4_head(in, len, &d->shift, &nmax);
  if (!h) return HMT_E_RECORD;
  if (!chained) { m->nmax = nmax; hmt_m4_reset(m, st->ptr); }
  else hmt_m4_limit(m, nmax);
  st->time = (st->time >> d->shift) << d->shift;
  d->row = *st;
  m->tick = st->time >> d->shift;
  hmt_rc_dec_init(&d->c, in + h, len - h);
  d->out = d->o = out; d->oend = out + out_cap;
  d->i = 0; d->count = count;
  return d->c.err ? HMT_E_RECORD : HMT_OK;
}

/** Decode records until the block is done: HMT_OK (the input used up
 *  exactly; the rows are d->out .. d->o), HMT_E_RANGE (the next record may
 *  need one more site or tracked allocation than the arrays hold: grow them
 *  -- hmt_m4_need(m, 1, 1, m->nmax) at least -- and call again), or
 *  HMT_E_RECORD (malformed: the models are then undefined). */
static inline int hmt_m4_dec_run(hmt_m4_dec_t *d, hmt_m4_model_t *m) {
  hmt_rc_t *c = &d->c;
  uint8_t *o = d->o, *oend = d->oend;
  int rc = HMT_OK;
  for (; d->i < d->count; d->i++) {
    if ((m->nsites >= m->site_cap && m->nsites < HMT_M4_SITES_MAX) ||
        (m->nent >= m->ent_cap && !m->free_ent && m->ntracked < m->nmax)) {
      rc = HMT_E_RANGE;
      break;
    }
    hmt_m4_ev_t ev;
    memset(&ev, 0, sizeof ev);
    hmt_m4_event(c, m, &ev, 1);
    if (c->err) return HMT_E_RECORD;
    if (ev.kind == HMT_M4_STACK) {
      uint64_t first = 0, up = 0, n = 0;
      if (hmt_m4_stack(c, m, &first, &up, &n, 1) != HMT_OK) return HMT_E_RECORD;
      uint8_t *r0 = o;
      if (!(o = hmt_m4_put(o, oend, HMT_REC_STACK)) || !(o = hmt_m4_putv(o, oend, first)) ||
          !(o = hmt_m4_putv(o, oend, up)) || !(o = hmt_m4_putv(o, oend, n)))
        return HMT_E_RECORD;
      for (uint64_t k = 0; k < n; k++)
        if (!(o = hmt_m4_putv(o, oend, hmt_m4_frame(c, m, k, 0, 1)))) return HMT_E_RECORD;
      const uint8_t *rp = r0;
      hmt_record_t rec;
      if (c->err || hmt_decode_record(&rp, o, &d->row, &rec) != HMT_OK) return HMT_E_RECORD;
    } else if (ev.kind == HMT_M4_EXT) {
      HMT_M4_FIELD(c, HMT_M4_F_STACK);
      uint64_t t = hmt_rc_int(c, &m->i_etype, 0, 1), n = hmt_rc_int(c, &m->i_elen, 0, 1);
      if (c->err || !(o = hmt_m4_put(o, oend, HMT_REC_EXT)) || !(o = hmt_m4_putv(o, oend, t)) ||
          !(o = hmt_m4_putv(o, oend, n)) || n > (uint64_t)(oend - o))
        return HMT_E_RECORD;
      for (uint64_t k = 0; k < n && !c->err; k++) *o++ = (uint8_t)hmt_rc_tree(c, m->b_byte, 8, 0, 1);
      if (c->err) return HMT_E_RECORD;
    } else {
      if ((ev.tick << d->shift) >> d->shift != ev.tick) return HMT_E_RECORD;
      unsigned type = ev.kind == HMT_M4_REALLOC0 || ev.kind == HMT_M4_REALLOCF ? (unsigned)HPCMEM_EV_REALLOC : ev.kind;
      uint8_t tmp[HMT_MAX_RECORD(0)];
      size_t l = (size_t)(hmt_encode_event(tmp, &d->row, type, (int)ev.sys, ev.tick << d->shift, ev.ptr, ev.old,
                                           ev.size, ev.align, ev.stack) - tmp);
      if (l > (size_t)(oend - o)) return HMT_E_RECORD;
      memcpy(o, tmp, l);
      o += l;
    }
  }
  d->o = o;
  if (rc != HMT_OK) return rc;
  return c->err || c->i != c->iend ? HMT_E_RECORD : HMT_OK;
}

/** Decode a whole payload at once (the arrays sized beforehand by
 *  hmt_m4_need for the block): HMT_OK (*out_len: the rows' length) or
 *  HMT_E_RECORD (malformed, or the arrays too small). */
static inline int hmt_m4_decode_c(hmt_rc_t *c, const uint8_t *in, size_t len, hmt_state_t *st, uint8_t *out,
                                  size_t out_cap, size_t *out_len, uint64_t count, hmt_m4_model_t *m, int chained) {
  hmt_m4_dec_t d;
  int rc = hmt_m4_dec_begin(&d, in, len, st, out, out_cap, count, m, chained);
  if (rc == HMT_OK) rc = hmt_m4_dec_run(&d, m);
  *c = d.c;
  if (rc != HMT_OK) return HMT_E_RECORD;
  *out_len = (size_t)(d.o - d.out);
  return HMT_OK;
}
static inline int hmt_m4_decode(const uint8_t *in, size_t len, hmt_state_t *st, uint8_t *out, size_t out_cap,
                                size_t *out_len, uint64_t count, hmt_m4_model_t *m, int chained) {
  hmt_rc_t c;
  return hmt_m4_decode_c(&c, in, len, st, out, out_cap, out_len, count, m, chained);
}

#endif /* HPCMEM_TRACE_MODEL_H */
