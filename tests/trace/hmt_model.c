/* Bits per event of each field of format 1.4 (include/hpcmem_trace_model.h),
 * on the events of a trace file, and what each modelling idea is worth:
 * every thread's events are encoded again in rows, in blocks of BLOCK bytes
 * of rows (the recorder's HPCMEM_TRACE_BUFFER / 2), with a STACK record
 * before a thread's first use of each stack (its frames as one chain: the
 * file's trie is not rebuilt), coded under the models chained across the
 * thread's blocks, and decoded again: every event must come back exactly
 * (time to the tick of 2^16 ns).  Printed: per field, bytes and coded bits
 * per event; the coder's time; the whole again with each idea left out
 * (HMT_M4_X_*); and with other limits of tracked allocations.
 *   hmt_model FILE [BLOCK [NMAX_BITS]]
 * For docs/trace-format.md's figures of format 1.4. */
#define HMT_M4_STATS 1
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "hmt_reader.h"
#include "events_by_thread.h"
#include "hmt_map.h"

static const char *field_name[HMT_M4_F_N] = {"token",     "token-new", "time",      "size",       "size-new", "free",
                                             "realloc",   "free-addr", "addr",      "addr-new",   "stack/ext"};


typedef struct {
  double bytes, stat[HMT_M4_F_N], nbits[HMT_M4_F_N], enc_s, dec_s;
  size_t bad, blocks;
} result_t;

/* the model and its arrays, grown as the blocks need */
typedef struct {
  hmt_m4_model_t m;
  int enc;
} model_t;

static void room(model_t *x, int chained, uint64_t count) {
  hmt_m4_model_t *m = &x->m;
  hmt_m4_room_t r = hmt_m4_need(m, chained, count, m->nmax);
  if (r.sites <= m->site_cap && r.ents <= m->ent_cap && m->map) return;
  /* doubled, as the reader does: a block grows them a few times at most */
  if (r.sites < 2 * m->site_cap) r.sites = 2 * m->site_cap < HMT_M4_SITES_MAX ? 2 * m->site_cap : HMT_M4_SITES_MAX;
  if (r.ents < 2 * m->ent_cap) r.ents = 2 * m->ent_cap < m->nmax + 1 ? 2 * m->ent_cap : m->nmax + 1;
  if (r.sites < m->site_cap) r.sites = m->site_cap;
  if (r.ents < m->ent_cap) r.ents = m->ent_cap;
  for (r.map_slots = 64; r.map_slots < 2ull * r.ents; r.map_slots *= 2) {}
  for (r.smap_slots = 64; r.smap_slots < 2ull * r.sites; r.smap_slots *= 2) {}
  hmt_m4_site_t *s = malloc(r.sites * sizeof *s), *os = m->sites;
  hmt_m4_ent_t *e = malloc(r.ents * sizeof *e), *oe = m->ent;
  hmt_m4_mslot_t *mp = malloc(r.map_slots * sizeof *mp), *om = m->map;
  uint32_t *sm = x->enc ? malloc(r.smap_slots * sizeof *sm) : NULL, *osm = m->smap;
  if (!s || !e || !mp || (x->enc && !sm)) { fprintf(stderr, "out of memory\n"); exit(1); }
  hmt_m4_grow(m, r, s, e, mp, sm, chained);
  free(os); free(oe); free(om); free(osm);
}
static void model_free(model_t *x) {
  free(x->m.sites); free(x->m.ent); free(x->m.map); free(x->m.smap);
  free(x);
}
static model_t *model_new(uint32_t nmax, uint32_t ablate, int enc) {
  model_t *x = calloc(1, sizeof *x);
  if (!x) { fprintf(stderr, "out of memory\n"); exit(1); }
  x->m.nmax = nmax; x->m.ablate = ablate; x->enc = enc;
  return x;
}

static double now(void) {
  struct timespec t;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
  return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static int same(const hmt_record_t *r, const hmt_event_t *e) {
  return r->type == e->type && r->ptr == e->ptr && r->old_ptr == e->old_ptr && r->size == e->size &&
         r->align == e->align && (!hmt_is_alloc(r->type) || r->stack == e->stack) && r->sys == e->sys &&
         r->time >> 16 == e->time >> 16;
}

/* every thread's events, in blocks of `block` bytes of rows, through the coder and back */
static result_t run(hmt_reader_t *rd, thread_t *th, size_t nth, size_t block, uint32_t nmax, uint32_t ablate) {
  result_t res;
  memset(&res, 0, sizeof res);
  uint8_t *rows = malloc(block + 65536), *out = malloc(2 * block + 65536), *back = malloc(4 * block + 65536);
  uint64_t *frames = malloc(HMT_MAX_DEPTH * sizeof *frames);
  if (!rows || !out || !back || !frames) { fprintf(stderr, "out of memory\n"); exit(1); }
  for (size_t t = 0; t < nth; t++) {
    model_t *me = model_new(nmax, ablate, 1), *md = model_new(nmax, ablate, 0);
    hmt_map_t defined = {NULL, 0, 0};
    hmt_state_t st = {th[t].ev[0].time, 0, 0};
    size_t i = 0;
    int chained = 0;
    while (i < th[t].n) {
      hmt_state_t base = st;
      uint8_t *o = rows;
      size_t first = i;
      uint64_t count = 0;
      while (i < th[t].n && (size_t)(o - rows) < block) {
        hmt_event_t *e = &th[t].ev[i++];
        const uint64_t *f;
        uint32_t depth;
        if (e->stack && !hmt_map_get(&defined, e->stack) && hmt_stack(rd, e->stack, &f, &depth) == 0 && depth &&
            depth <= e->stack) {
          memcpy(frames, f, depth * sizeof *f);
          o = hmt_encode_stack(o, &st, e->stack - depth + 1, 0, frames, depth);
          hmt_map_put(&defined, e->stack, NULL);
          count++;
        }
        o = hmt_encode_event(o, &st, e->type, (int)e->sys, e->time, e->ptr, e->old_ptr, e->size, e->align, e->stack);
        count++;
      }
      size_t len = (size_t)(o - rows);
      room(me, chained, count);
      hmt_state_t s = base;
      uint64_t rl = 0;
      hmt_m4_enc_t enc;
      double t0 = now();
      size_t cl = hmt_m4_encode_e(&enc, rows, len, &s, 16, out, 2 * block + 65536, &me->m, chained, &rl);
      double t1 = now();
      if (!cl) { fprintf(stderr, "tid %u: encoding failed\n", th[t].tid); exit(1); }
      for (int k = 0; k < HMT_M4_F_N; k++) { res.stat[k] += enc.c.stat[k]; res.nbits[k] += enc.c.nbits[k]; }
      res.bytes += (double)cl;
      res.enc_s += t1 - t0;
      /* back again, the arrays grown as the records need them (as the reader does) */
      unsigned sh;
      uint32_t nm;
      if (!hmt_m4_head(out, cl, &sh, &nm)) { fprintf(stderr, "bad head\n"); exit(1); }
      if (!chained || nm > md->m.nmax) md->m.nmax = nm;
      room(md, chained, 0);
      hmt_state_t d = base;
      hmt_m4_dec_t dec;
      t0 = now();
      int rc = hmt_m4_dec_begin(&dec, out, cl, &d, back, 4 * block + 65536, count, &md->m, chained);
      while (rc == HMT_OK && (rc = hmt_m4_dec_run(&dec, &md->m)) == HMT_E_RANGE) { room(md, 1, 1); rc = HMT_OK; }
      res.dec_s += now() - t0;
      if (rc != HMT_OK || (uint64_t)(dec.o - dec.out) != rl) { fprintf(stderr, "tid %u: decoding failed\n", th[t].tid); exit(1); }
      const uint8_t *bp = back, *be = dec.o;
      for (size_t j = first; j < i;) {
        hmt_record_t rec;
        if (hmt_decode_record(&bp, be, &d, &rec) != HMT_OK) { res.bad++; break; }
        if (rec.type == HMT_REC_STACK) continue;
        if (!same(&rec, &th[t].ev[j])) res.bad++;
        j++;
      }
      chained = 1;
      res.blocks++;
    }
    hmt_map_free(&defined);
    model_free(me);
    model_free(md);
  }
  free(rows); free(out); free(back); free(frames);
  return res;
}

int main(int argc, char **argv) {
  if (argc < 2) { fprintf(stderr, "usage: %s FILE [BLOCK [NMAX_BITS]]\n", argv[0]); return 2; }
  size_t block = argc > 2 ? strtoull(argv[2], NULL, 0) : 512 * 1024;
  unsigned nbits = argc > 3 ? (unsigned)atoi(argv[3]) : 16;  /* the recorder's for HPCMEM_TRACE_BUFFER=1M */
  if (nbits > HMT_M4_NMAX_BITS) nbits = HMT_M4_NMAX_BITS;
  hmt_reader_t *r;
  thread_t *th;
  size_t nth;
  long long nev = open_events_by_thread(argv[1], &r, &th, &nth);
  if (nev < 0) return 1;
  size_t total = (size_t)nev;
  if (!total) { fprintf(stderr, "%s: no events\n", argv[1]); return 1; }
  result_t full = run(r, th, nth, block, 1u << nbits, 0);
  double n = (double)total;
  printf("%s: %zu events, %zu threads, %zu blocks of %zu bytes of rows, %u tracked allocations; %zu events differ\n",
         argv[1], total, nth, full.blocks, block, 1u << nbits, full.bad);
  printf("%-12s %12s %18s\n", "field", "bytes/event", "coded bits/event");
  double sum = 0;
  for (int f = 0; f < HMT_M4_F_N; f++) {
    printf("%-12s %12.4f %18.2f\n", field_name[f], full.stat[f] / 8 / n, full.nbits[f] / n);
    sum += full.stat[f] / 8;
  }
  printf("%-12s %12.4f   (payloads: %.4f with heads and the coder's flush)\n", "sum", sum / n, full.bytes / n);
  printf("coder: %.1f ns/event encoding, %.1f ns/event decoding (thread CPU time)\n", 1e9 * full.enc_s / n,
         1e9 * full.dec_s / n);
  static const struct { uint32_t x; const char *what; } ideas[] = {
      {HMT_M4_X_ORDER2, "tokens without the context of the last two"},
      {HMT_M4_X_SITELIST, "frees without the newest/oldest of the site"},
      {HMT_M4_X_CURSOR, "frees without the neighbours of recent frees"},
      {HMT_M4_X_RUNS, "untracked frees without the runs of addresses"},
      {HMT_M4_X_RATIO, "sizes without the scaled step"},
      {HMT_M4_X_TIMERUN, "time without the count of events in the tick"},
  };
  printf("each idea left out (bytes/event; the whole model: %.4f):\n", full.bytes / n);
  for (size_t i = 0; i < sizeof ideas / sizeof ideas[0]; i++) {
    result_t x = run(r, th, nth, block, 1u << nbits, ideas[i].x);
    printf("  %-48s %.4f%s\n", ideas[i].what, x.bytes / n, x.bad ? "  (events differ!)" : "");
    full.bad += x.bad;
  }
  printf("tracked allocations (bytes/event, encoding ns/event):\n");
  for (unsigned b = 10; b <= 20; b += 2) {
    result_t x = run(r, th, nth, block, 1u << b, 0);
    printf("  %-8u %.4f %6.1f\n", 1u << b, x.bytes / n, 1e9 * x.enc_s / n);
    full.bad += x.bad;
  }
  hmt_close(r);
  return full.bad != 0;
}
