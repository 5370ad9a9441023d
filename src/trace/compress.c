/* Block compression for the recorder: zstd or zlib, both given allocators
 * over prim/ memory, because this code runs inside malloc, or the events
 * coded under models (format 1.4, include/hpcmem_trace_model.h: no
 * library).  A few compressors are shared by all threads (a thread takes a
 * free one when its buffer is full), which bounds the memory to a few
 * contexts and output buffers however many threads record. */
#include "config.h"
#include "trace/trace.h"
#include "prim/prim.h"
#include <errno.h>
#include <stdio.h>
#include <string.h>
#ifdef HAVE_ZSTD
#define ZSTD_STATIC_LINKING_ONLY  /* ZSTD_customMem: the advanced API, exported by libzstd.so too */
#include <zstd.h>
#endif
#ifdef HAVE_ZLIB
#include <zlib.h>
#endif
#include <dlfcn.h>

/* The codec libraries are loaded with dlopen when tracing starts, not
 * linked: linked, they cost every process 0.26 MiB of resident memory
 * (their relocated data and page tables) whether it traces or not.  The
 * headers give the types; these pointers the functions. */
static struct {
  volatile int tried[3], ok[3];
#ifdef HAVE_ZSTD
  ZSTD_CCtx *(*zstd_create)(ZSTD_customMem);
  size_t (*zstd_compress)(ZSTD_CCtx *, void *, size_t, const void *, size_t, int);
  unsigned (*zstd_is_error)(size_t);
  size_t (*zstd_bound)(size_t);
  size_t (*zstd_free)(ZSTD_CCtx *);
#endif
#ifdef HAVE_ZLIB
  int (*deflate_init)(z_streamp, int, const char *, int);
  int (*deflate_reset)(z_streamp);
  int (*deflate_)(z_streamp, int);
  int (*deflate_end)(z_streamp);
  uLong (*bound)(uLong);
#endif
} D;

#define HMT_ZSTD_SONAME "libzstd.so.1"
#define HMT_ZLIB_SONAME "libz.so.1"

const char *_hpcmem_codec_library(int codec) {
  return codec == HMT_CODEC_ZSTD ? HMT_ZSTD_SONAME : codec == HMT_CODEC_ZLIB ? HMT_ZLIB_SONAME : "";
}

/* dlsym every name or fail (the message names the library and what is
 * missing: dlerror's text) */
static int load_codec(int codec, char *why, size_t whylen) {
  void *h = dlopen(_hpcmem_codec_library(codec), RTLD_NOW | RTLD_LOCAL);
  if (!h) { snprintf(why, whylen, "%s", dlerror()); return -ENOENT; }
#define SYM(field, name)                                                      \
  if (!(*(void **)&D.field = dlsym(h, name))) {                               \
    snprintf(why, whylen, "%s: no %s", _hpcmem_codec_library(codec), name); \
    return -ENOENT;                                                           \
  }
#ifdef HAVE_ZSTD
  if (codec == HMT_CODEC_ZSTD) {
    SYM(zstd_create, "ZSTD_createCCtx_advanced") SYM(zstd_compress, "ZSTD_compressCCtx")
    SYM(zstd_is_error, "ZSTD_isError") SYM(zstd_bound, "ZSTD_compressBound") SYM(zstd_free, "ZSTD_freeCCtx")
  }
#endif
#ifdef HAVE_ZLIB
  if (codec == HMT_CODEC_ZLIB) {
    SYM(deflate_init, "deflateInit_") SYM(deflate_reset, "deflateReset") SYM(deflate_, "deflate")
    SYM(deflate_end, "deflateEnd") SYM(bound, "compressBound")
  }
#endif
#undef SYM
  return 0;
}

int _hpcmem_codec_load(int codec, char *why, size_t whylen) {
  if (why && whylen) why[0] = 0;
  if (codec == HMT_CODEC_NONE || codec == HMT_CODEC_MODEL) return 0;
  if (codec < 0 || codec > 2) return -EINVAL;
  if (!D.tried[codec]) {
    char tmp[256];
    D.ok[codec] = load_codec(codec, tmp, sizeof tmp) == 0;
    D.tried[codec] = 1;
    if (!D.ok[codec] && why) snprintf(why, whylen, "%s", tmp);
  } else if (!D.ok[codec] && why) {
    snprintf(why, whylen, "%s could not be loaded", _hpcmem_codec_library(codec));
  }
  return D.ok[codec] ? 0 : -ENOENT;
}

/* Levels measured on traces of the test programs (docs/trace-format.md,
 * "Compression"): zstd 1 and zlib 1 give nearly the ratio of their default
 * levels at a fraction of the time. */
#define HMT_ZSTD_LEVEL 5
#define HMT_ZLIB_LEVEL 1
#define HMT_NCOMP 4

static volatile size_t alloc_bytes;

/* ---- small allocations from prim memory ---------------------------- */

/* 64-byte header in front of each allocation keeps its mapping size. */
void *_hpcmem_trace_alloc(size_t size) {
  size_t page = _hpcmem_prim_page_size();
  size_t total = (size + 64 + page - 1) & ~(page - 1);
  char *p = _hpcmem_prim_reserve(total, page);
  if (!p) return NULL;
  *(size_t *)p = total;
  __atomic_add_fetch(&alloc_bytes, total, __ATOMIC_RELAXED);
  return p + 64;
}

void _hpcmem_trace_free(void *q) {
  if (!q) return;
  char *p = (char *)q - 64;
  size_t total = *(size_t *)p;
  __atomic_sub_fetch(&alloc_bytes, total, __ATOMIC_RELAXED);
  _hpcmem_prim_release(p, total);
}

#ifdef HAVE_ZSTD
static void *zstd_alloc(void *opaque, size_t size) { (void)opaque; return _hpcmem_trace_alloc(size); }
static void zstd_free(void *opaque, void *p) { (void)opaque; _hpcmem_trace_free(p); }
#endif
#ifdef HAVE_ZLIB
static voidpf zlib_alloc(voidpf opaque, uInt n, uInt size) {
  (void)opaque;
  if (size && n > (size_t)-1 / size) return Z_NULL;
  return _hpcmem_trace_alloc((size_t)n * size);
}
static void zlib_free(voidpf opaque, voidpf p) { (void)opaque; _hpcmem_trace_free(p); }
#endif

/* ---- the shared compressors --------------------------------------- */

typedef struct {
  hmt_tlock_t lock;
  void *zstd;        /* ZSTD_CCtx */
  void *zlib;        /* z_stream, deflateInit done */
  uint8_t *out;      /* output buffer */
  size_t out_cap;
  uint8_t *col;      /* an EVENTS block regrouped in columns */
  size_t col_cap;
  void *pool;        /* the column encoder's stream chunks */
  size_t pool_cap;
  hmt_col_work_t *work;
} hmt_comp_t;

static hmt_comp_t comps[HMT_NCOMP];

int _hpcmem_codec_built(int codec) {
  switch (codec) {
    case HMT_CODEC_NONE: case HMT_CODEC_MODEL: return 1;
#ifdef HAVE_ZSTD
    case HMT_CODEC_ZSTD: return 1;
#endif
#ifdef HAVE_ZLIB
    case HMT_CODEC_ZLIB: return 1;
#endif
    default: return 0;
  }
}

int _hpcmem_codec_available(int codec) {
  switch (codec) {
    case HMT_CODEC_NONE: case HMT_CODEC_MODEL: return 1;
#ifdef HAVE_ZSTD
    case HMT_CODEC_ZSTD: return D.ok[codec];
#endif
#ifdef HAVE_ZLIB
    case HMT_CODEC_ZLIB: return D.ok[codec];
#endif
    default: return 0;
  }
}

size_t _hpcmem_compress_bound(int codec, size_t len) {
#ifdef HAVE_ZSTD
  if (codec == HMT_CODEC_ZSTD) return D.zstd_bound(len);
#endif
#ifdef HAVE_ZLIB
  if (codec == HMT_CODEC_ZLIB) return D.bound((uLong)len);
#endif
  return len;
}

static int ensure_out(hmt_comp_t *c, size_t need) {
  if (c->out_cap >= need) return 0;
  _hpcmem_trace_free(c->out);
  c->out = _hpcmem_trace_alloc(need);
  c->out_cap = c->out ? need : 0;
  return c->out ? 0 : -ENOMEM;
}

/* Compress src into dst (cap bytes); 0 on failure. */
static size_t run_codec(hmt_comp_t *c, int codec, const void *src, size_t len, void *dst, size_t cap) {
#ifdef HAVE_ZSTD
  if (codec == HMT_CODEC_ZSTD) {
    if (!c->zstd) {
      ZSTD_customMem mem = {zstd_alloc, zstd_free, NULL};
      if (!(c->zstd = D.zstd_create(mem))) return 0;
    }
    size_t n = D.zstd_compress(c->zstd, dst, cap, src, len, HMT_ZSTD_LEVEL);
    return D.zstd_is_error(n) ? 0 : n;
  }
#endif
#ifdef HAVE_ZLIB
  if (codec == HMT_CODEC_ZLIB) {
    z_stream *zs = c->zlib;
    if (!zs) {
      if (!(zs = _hpcmem_trace_alloc(sizeof *zs))) return 0;
      memset(zs, 0, sizeof *zs);
      zs->zalloc = zlib_alloc; zs->zfree = zlib_free;
      if (D.deflate_init(zs, HMT_ZLIB_LEVEL, ZLIB_VERSION, (int)sizeof(z_stream)) != Z_OK) { _hpcmem_trace_free(zs); return 0; }
      c->zlib = zs;
    } else if (D.deflate_reset(zs) != Z_OK) {
      return 0;
    }
    zs->next_in = (Bytef *)src; zs->avail_in = (uInt)len;
    zs->next_out = dst; zs->avail_out = (uInt)cap;
    if (D.deflate_(zs, Z_FINISH) != Z_STREAM_END) return 0;
    return (size_t)zs->total_out;
  }
#endif
  (void)c; (void)codec; (void)src; (void)len; (void)dst; (void)cap;
  return 0;
}

static int ensure(void **buf, size_t *cap, size_t need) {
  if (*cap >= need) return 0;
  _hpcmem_trace_free(*buf);
  *buf = _hpcmem_trace_alloc(need);
  *cap = *buf ? need : 0;
  return *buf ? 0 : -ENOMEM;
}

/* Format 1.3: the streams of the format 1.2 payload col (len bytes), each
 * compressed on its own (the bytes of a stream share their statistics; one
 * frame over all of them mixes them: BWA-MEM 0.44 -> 0.38 bytes an event
 * at the same level), into c->out.  Its length, 0 on failure. */
static size_t split_streams(hmt_comp_t *c, int codec, const uint8_t *col, size_t len) {
  hmt_split_t sp;
  size_t head, bound = HMT_SPLIT_HEAD_MAX;
  if (hmt_c2_streams(col, len, &sp.shift, sp.raw, &head) != HMT_OK) return 0;
  for (int k = 0; k < HMT_COL_STREAMS; k++) bound += _hpcmem_compress_bound(codec, sp.raw[k]);
  if (ensure_out(c, 2 * bound) != 0) return 0;
  /* the streams into the second half, then the head and the streams into the first */
  uint8_t *tmp = c->out + bound, *o = tmp;
  const uint8_t *src = col + head;
  for (int k = 0; k < HMT_COL_STREAMS; k++) {
    size_t n = 0;
    if (sp.raw[k]) n = run_codec(c, codec, src, sp.raw[k], o, bound - (size_t)(o - tmp));
    if (sp.raw[k] && (n == 0 || n >= sp.raw[k])) { memcpy(o, src, sp.raw[k]); n = sp.raw[k]; }
    sp.stored[k] = n;
    o += n; src += sp.raw[k];
  }
  size_t h = hmt_split_put_head(c->out, &sp);
  memmove(c->out + h, tmp, (size_t)(o - tmp));
  return h + (size_t)(o - tmp);
}

/* take a free shared compressor (may_wait: or wait for one) */
static hmt_comp_t *comp_take(int may_wait) {
  int tid = _hpcmem_trace_tid();
  for (int i = 0; i < HMT_NCOMP; i++)
    if (_hpcmem_tlock_try(&comps[i].lock, tid)) return &comps[i];
  if (!may_wait) return NULL;
  hmt_comp_t *c = &comps[(unsigned)tid % HMT_NCOMP];
  _hpcmem_tlock(&c->lock, tid);
  return c;
}

/* Compress src with a free shared compressor; the result stays in that
 * compressor's buffer, so the caller writes it and then releases with
 * _hpcmem_compress_done.  Returns the compressor (and *out, *out_len) or
 * NULL: codec unavailable, none free and may_wait == 0, failure, or no gain. */
void *_hpcmem_compress_begin(int codec, const void *src, size_t len, int may_wait,
                             const void **out, size_t *out_len) {
  return _hpcmem_compress_events_begin(codec, src, len, NULL, 0, NULL, NULL, 0, may_wait, out, out_len, NULL, NULL);
}

void *_hpcmem_compress_events_begin(int codec, const void *src, size_t len, const hmt_state_t *base, unsigned shift,
                                    hmt_col_model_t *model, hmt_c2_livemap_t *live, int chained, int may_wait,
                                    const void **out, size_t *out_len, size_t *raw_len, int *columns) {
  if (columns) *columns = 0;
  if (codec == HMT_CODEC_NONE || codec == HMT_CODEC_MODEL || !_hpcmem_codec_available(codec) || len == 0) return NULL;
  hmt_comp_t *c = comp_take(may_wait);
  if (!c) return NULL;
  size_t n = 0, rl = len;
  if (base && model && ensure(&c->pool, &c->pool_cap, hmt_col_pool_size(len)) == 0 &&
      ensure((void **)&c->col, &c->col_cap, len + 64) == 0) {
    /* format 1.2: models kept by the thread's buffer across its blocks */
    hmt_state_t st = *base;
    size_t cl = hmt_columns2_encode(src, len, &st, shift, c->col, c->pool, model, live, chained);
    if (cl) { src = c->col; len = cl; *columns = 2; }
  } else if (base && ensure(&c->pool, &c->pool_cap, hmt_col_pool_size(len)) == 0 &&
             ensure((void **)&c->col, &c->col_cap, len + 64) == 0 &&
             (c->work || (c->work = _hpcmem_trace_alloc(sizeof *c->work)))) {
    /* no memory for the models: format 1.1, each block on its own */
    hmt_state_t st = *base;
    size_t cl = hmt_columns_encode(src, len, &st, shift, c->col, c->pool, c->work);
    if (cl) { src = c->col; len = cl; *columns = 1; }
  }
  if (raw_len) *raw_len = len;
  (void)rl;
  if (*columns == 2) {
    n = split_streams(c, codec, src, len);
    if (n) *columns = 3;
  } else if (ensure_out(c, _hpcmem_compress_bound(codec, len)) == 0) {
    n = run_codec(c, codec, src, len, c->out, c->out_cap);
  }
  if (n == 0 || n >= len) { _hpcmem_tlock_release(&c->lock); return NULL; }
  *out = c->out; *out_len = n;
  return c;
}

void *_hpcmem_compress_m4_begin(const void *src, size_t len, const hmt_state_t *base, unsigned shift,
                                hmt_m4_model_t *model, int chained, int may_wait, const void **out, size_t *out_len,
                                size_t *raw_len) {
  if (!len) return NULL;
  hmt_comp_t *c = comp_take(may_wait);
  if (!c) return NULL;
  /* a payload longer than the rows is not worth it: they go as they are */
  hmt_state_t st = *base;
  uint64_t rl = 0;
  size_t n = 0;
  if (ensure_out(c, len + 64) == 0)
    n = hmt_m4_encode(src, len, &st, shift, c->out, len < c->out_cap ? len : c->out_cap, model, chained, &rl);
  if (n == 0 || rl > UINT32_MAX) { _hpcmem_tlock_release(&c->lock); return NULL; }
  *out = c->out; *out_len = n; *raw_len = (size_t)rl;
  return c;
}

void _hpcmem_compress_done(void *comp) {
  if (comp) _hpcmem_tlock_release(&((hmt_comp_t *)comp)->lock);
}

size_t _hpcmem_trace_alloc_bytes(void) { return __atomic_load_n(&alloc_bytes, __ATOMIC_RELAXED); }

/* Free every compressor (tests; no compression may be running). */
void _hpcmem_compress_reset(void) {
  for (int i = 0; i < HMT_NCOMP; i++) {
    hmt_comp_t *c = &comps[i];
#ifdef HAVE_ZSTD
    if (c->zstd) D.zstd_free(c->zstd);
#endif
#ifdef HAVE_ZLIB
    if (c->zlib) { D.deflate_end(c->zlib); _hpcmem_trace_free(c->zlib); }
#endif
    _hpcmem_trace_free(c->out);
    _hpcmem_trace_free(c->col);
    _hpcmem_trace_free(c->pool);
    _hpcmem_trace_free(c->work);
    memset(c, 0, sizeof *c);
  }
}

/* In a child of fork: threads that held a compressor are gone.  Each use
 * starts the codec afresh, so the contexts themselves are fine. */
void _hpcmem_compress_after_fork_child(void) {
  for (int i = 0; i < HMT_NCOMP; i++) comps[i].lock.owner = 0;
}
