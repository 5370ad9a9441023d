/* Reader of libhpcmem trace files (see hmt_reader.h). */
#include "config.h"
#include "hmt_reader.h"
#include "hmt_map.h"
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#ifdef HAVE_ZSTD
#include <zstd.h>
#endif
#ifdef HAVE_ZLIB
#include <zlib.h>
#endif

typedef struct {
  uint64_t off;
  hmt_block_t b;
} blk_t;

typedef struct {
  uint32_t tid;
  size_t *blocks, nblocks, cap;  /* indices into r->blks, in file order */
  size_t next;                   /* next block to load */
  uint8_t *raw;
  size_t raw_cap;
  uint8_t *rows;           /* a columnar block's records, back in rows */
  size_t rows_cap;
  uint64_t *allocs;        /* its allocations' (address, size), by index */
  size_t allocs_cap;
  hmt_col_model_t *model;  /* format 1.2: the models of the thread's blocks */
  hmt_col_model_t *saved;  /* ... before the block being decoded */
  int model_ok;            /* they follow the last block loaded (a chained block may come next) */
  uint64_t *ring;          /* its allocations' (address, size), by index modulo ring_cap */
  uint64_t ring_cap;
  hmt_m4_model_t *m4;      /* format 1.4: the models of the thread's blocks */
  int m4_ok;               /* they follow the last block loaded */
  const uint8_t *p, *end, *start;
  uint64_t block_off, block_records, block_count;
  hmt_state_t st;
  uint64_t last_time;      /* of the stream's previous event */
  int has_ev;              /* ev holds the stream's next event */
  hmt_event_t ev;
  /* the stream's events of the tick being ordered (order_tick()) */
  struct tick_ev *tk;
  size_t tk_n, tk_cap;
} stream_t;

typedef struct {
  uint64_t id;
  uint64_t *frames;
  uint32_t depth;
} stack_t_;

typedef struct {
  uint64_t id, parent, frame;
} node_t;

struct hmt_reader {
  char *path;
  int fd, flags;
  hmt_header_t hdr;
  hmt_info_t info;
  blk_t *blks;
  size_t nblks, blks_cap;
  stream_t *streams;
  size_t nstreams;
  size_t *heap, heap_n;
  int started, failed;
  hmt_map_t node_index;    /* node id -> index into nodes */
  node_t *nodes;
  hmt_col_freed_t *freed; /* the columnar decoder's table */
  size_t nnodes, nodes_cap;
  hmt_map_t stack_index;   /* node id -> index into stacks: stacks resolved so far */
  stack_t_ *stacks;
  size_t nstacks, stacks_cap;
  uint64_t **chunks;
  size_t nchunks, chunk_used;
  hmt_module_t *mods;
  size_t nmods;
  uint8_t *stored;
  size_t stored_cap;
  uint64_t progress;
  hmt_error_t err;
  /* Addresses live after the events returned so far, kept only when the
   * file has several threads: it decides the order of one thread's free
   * and another's allocation of the same address within a tick (order_tick()). */
  hmt_map_t live;
  int track_live;
  /* A tick that several threads share, ordered as a whole (order_tick()):
   * its threads, its addresses, the search's steps, and the events in the
   * order chosen, which hmt_next() hands out from out_pos. */
  size_t *tick_s, tick_n;
  hmt_map_t tick_addr;
  hmt_map_t tick_dead;     /* positions the search found lead nowhere (pos_hash) */
  uint64_t credit;         /* steps the search may still take (order_tick()) */
  struct tick_step *steps;
  size_t steps_cap;
  struct tick_node *tnodes;
  size_t tnodes_n, tnodes_cap;
  hmt_event_t *out;
  size_t out_n, out_pos, out_cap;
};

#define CHUNK_FRAMES 65536

/* ---- errors ---------------------------------------------------------- */

static int fail(hmt_reader_t *r, hmt_error_t *e, int code, uint64_t off, const char *fmt, ...)
    __attribute__((format(printf, 5, 6)));
static int fail(hmt_reader_t *r, hmt_error_t *e, int code, uint64_t off, const char *fmt, ...) {
  if (!e) e = &r->err;
  e->code = code;
  e->offset = off;
  int n = snprintf(e->message, sizeof e->message, "%s: offset %llu: ", r->path, (unsigned long long)off);
  if (n < 0 || (size_t)n >= sizeof e->message) n = 0;
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(e->message + n, sizeof e->message - (size_t)n, fmt, ap);
  va_end(ap);
  return code;
}

static const char *code_text(int code) {
  switch (code) {
    case HMT_E_TRUNCATED: return "truncated";
    case HMT_E_MAGIC: return "bad magic number";
    case HMT_E_VERSION: return "unsupported format version";
    case HMT_E_CHECKSUM: return "checksum mismatch";
    case HMT_E_RANGE: return "field out of range";
    case HMT_E_RECORD: return "malformed record";
    default: return "error";
  }
}

const char *hmt_kind_name(unsigned type) {
  static const char *const names[] = {"?", "malloc", "calloc", "realloc", "free", "memalign"};
  return type <= HPCMEM_EV_MEMALIGN ? names[type] : "?";
}

const char *hmt_flush_reason_name(uint64_t reason, char *buf, size_t len) {
  const char *s = NULL;
  switch (reason) {
    case HMT_FLUSH_EXPLICIT: s = "explicit"; break;
    case HMT_FLUSH_EXIT: s = "exit"; break;
    case HMT_FLUSH_FINALIZE: s = "MPI_Finalize"; break;
    case HMT_FLUSH_ABORT: s = "MPI_Abort"; break;
    case HMT_FLUSH_EXEC: s = "exec"; break;
  }
  if (s) snprintf(buf, len, "%s", s);
  else if (reason >= HMT_FLUSH_SIGNAL && reason < HMT_FLUSH_SIGNAL + 128)
    snprintf(buf, len, "signal %d", (int)(reason - HMT_FLUSH_SIGNAL));
  else snprintf(buf, len, "reason %llu", (unsigned long long)reason);
  return buf;
}

/* ---- I/O ------------------------------------------------------------- */

static int read_at(hmt_reader_t *r, void *buf, size_t len, uint64_t off, size_t *got) {
  size_t n = 0;
  while (n < len) {
    ssize_t k = pread(r->fd, (char *)buf + n, len - n, (off_t)(off + n));
    if (k < 0) { if (errno == EINTR) continue; return -errno; }
    if (k == 0) break;
    n += (size_t)k;
  }
  *got = n;
  return 0;
}

static int grow_buf(uint8_t **buf, size_t *cap, size_t need) {
  if (*cap >= need) return 0;
  size_t c = *cap ? *cap : 4096;
  while (c < need) c *= 2;
  uint8_t *b = realloc(*buf, c);
  if (!b) return -ENOMEM;
  *buf = b; *cap = c;
  return 0;
}

/* Read a block's stored payload into r->stored and check its CRC. */
static int load_payload(hmt_reader_t *r, const blk_t *k, hmt_error_t *e) {
  if (grow_buf(&r->stored, &r->stored_cap, k->b.stored_len + 1)) return fail(r, e, -ENOMEM, k->off, "out of memory");
  size_t got;
  int err = read_at(r, r->stored, k->b.stored_len, k->off + HMT_BLOCK_HEADER_SIZE, &got);
  if (err) return fail(r, e, err, k->off, "read error: %s", strerror(-err));
  if (got != k->b.stored_len) return fail(r, e, HMT_E_TRUNCATED, k->off, "block payload truncated");
  uint32_t crc = hmt_crc32c(0, r->stored, k->b.stored_len);
  if (crc != k->b.payload_crc)
    return fail(r, e, HMT_E_CHECKSUM, k->off, "block payload checksum mismatch (stored %08x, computed %08x)",
                k->b.payload_crc, crc);
  return 0;
}

/* Decompress r->stored into *raw (raw_len bytes exactly). */
/* No codec of ours expands data by more than this: a header claiming more
 * is damaged, and must not make us allocate a gigabyte. */
#define MAX_RATIO 8192
#define RATIO_SLACK (1u << 20)

/* src (slen bytes, one frame of codec) into exactly rl bytes at dst. */
static int inflate_to(hmt_reader_t *r, hmt_error_t *e, const blk_t *k, unsigned codec, const uint8_t *src, size_t slen,
                      uint8_t *dst, size_t rl) {
#ifdef HAVE_ZSTD
  if (codec == HMT_CODEC_ZSTD) {
    unsigned long long cs = ZSTD_getFrameContentSize(src, slen);
    if (cs != rl)
      return fail(r, e, HMT_E_RECORD, k->off, "zstd frame holds %lld bytes, the block header says %zu",
                  cs == ZSTD_CONTENTSIZE_UNKNOWN || cs == ZSTD_CONTENTSIZE_ERROR ? -1LL : (long long)cs, rl);
  }
#endif
  switch (codec) {
    case HMT_CODEC_NONE:
      if (slen != rl) return fail(r, e, HMT_E_RECORD, k->off, "stored %zu bytes for %zu", slen, rl);
      memcpy(dst, src, rl);
      return 0;
    case HMT_CODEC_ZSTD: {
#ifdef HAVE_ZSTD
      size_t n = ZSTD_decompress(dst, rl, src, slen);
      if (ZSTD_isError(n) || n != rl)
        return fail(r, e, HMT_E_RECORD, k->off, "zstd payload does not decompress to %zu bytes%s%s", rl,
                    ZSTD_isError(n) ? ": " : "", ZSTD_isError(n) ? ZSTD_getErrorName(n) : "");
      return 0;
#else
      return fail(r, e, HMT_E_RANGE, k->off, "block is zstd-compressed; this reader was built without zstd");
#endif
    }
    case HMT_CODEC_ZLIB: {
#ifdef HAVE_ZLIB
      uLongf n = (uLongf)rl;
      int zr = uncompress(dst, &n, src, (uLong)slen);
      if (zr != Z_OK || n != rl)
        return fail(r, e, HMT_E_RECORD, k->off, "zlib payload does not decompress to %zu bytes (zlib %d)", rl, zr);
      return 0;
#else
      return fail(r, e, HMT_E_RANGE, k->off, "block is zlib-compressed; this reader was built without zlib");
#endif
    }
  }
  return fail(r, e, HMT_E_RANGE, k->off, "unknown codec %u", codec);
}

/* Rows a format 1.4 payload may claim: a record costs at least two coded
 * bits of probability 1 - 2^-11 (0.0014 bits) and its row at most 36 bytes,
 * so 2^18 times the stored bytes (+ 64 KiB) bounds any honest block. */
#define M4_MAX_RATIO (1u << 18)

static int decompress(hmt_reader_t *r, const blk_t *k, uint8_t **raw, size_t *cap, hmt_error_t *e) {
  size_t rl = k->b.raw_len;
  if (k->b.codec == HMT_CODEC_MODEL || (k->b.flags & HMT_BF_M4)) {
    /* format 1.4: the payload is decoded record by record (m4_to_rows) */
    if (k->b.type != HMT_BLOCK_EVENTS || k->b.codec != HMT_CODEC_MODEL || k->b.flags != (k->b.flags & (HMT_BF_M4 | HMT_BF_CHAIN)) ||
        !(k->b.flags & HMT_BF_M4))
      return fail(r, e, HMT_E_RANGE, k->off, "codec %u with flags 0x%x: not a format 1.4 EVENTS block", k->b.codec,
                  k->b.flags);
    if (rl > (uint64_t)k->b.stored_len * M4_MAX_RATIO + (1u << 16) || k->b.count > rl / 3)
      return fail(r, e, HMT_E_RANGE, k->off, "block claims %u records in %zu bytes of rows from %u coded bytes",
                  k->b.count, rl, k->b.stored_len);
    if (grow_buf(raw, cap, (size_t)k->b.stored_len + 1)) return fail(r, e, -ENOMEM, k->off, "out of memory");
    memcpy(*raw, r->stored, k->b.stored_len);
    return 0;
  }
  if (k->b.codec != HMT_CODEC_NONE && rl > (uint64_t)k->b.stored_len * MAX_RATIO + RATIO_SLACK)
    return fail(r, e, HMT_E_RANGE, k->off, "block claims %zu bytes from %u compressed bytes", rl, k->b.stored_len);
  if (grow_buf(raw, cap, rl + 1)) return fail(r, e, -ENOMEM, k->off, "out of memory");
  if (k->b.type != HMT_BLOCK_EVENTS || !(k->b.flags & HMT_BF_SPLIT)) {
    if (k->b.codec == HMT_CODEC_NONE) { memcpy(*raw, r->stored, rl); return 0; }
    return inflate_to(r, e, k, k->b.codec, r->stored, k->b.stored_len, *raw, rl);
  }
  /* format 1.3: the streams one by one, back into the format 1.2 payload */
  hmt_split_t sp;
  if ((k->b.flags & (HMT_BF_COLUMNS | HMT_BF_MODELS)) != (HMT_BF_COLUMNS | HMT_BF_MODELS) ||
      hmt_split_parse(r->stored, k->b.stored_len, rl, &sp) != HMT_OK)
    return fail(r, e, HMT_E_RECORD, k->off, "malformed head of a block of separately compressed streams");
  uint8_t *o = *raw + hmt_split_c2_head(&sp, *raw);
  const uint8_t *src = r->stored + sp.head;
  for (int i = 0; i < HMT_COL_STREAMS; i++) {
    unsigned codec = sp.stored[i] == sp.raw[i] ? HMT_CODEC_NONE : k->b.codec;
    int err = inflate_to(r, e, k, codec, src, sp.stored[i], o, sp.raw[i]);
    if (err) return err;
    src += sp.stored[i]; o += sp.raw[i];
  }
  return 0;
}

/* ---- meta blocks ----------------------------------------------------- */

static int parse_modules(hmt_reader_t *r, hmt_error_t *e, const blk_t *k, const uint8_t *p, const uint8_t *end) {
  uint64_t n;
  if (!(p = hmt_get_varint(p, end, &n)) || n > 100000)
    return fail(r, e, HMT_E_RECORD, k->off, "MODULES block: bad count");
  hmt_module_t *m = calloc(n ? n : 1, sizeof *m);
  if (!m) return fail(r, e, -ENOMEM, k->off, "out of memory");
  uint64_t i = 0;
  int rc = 0;
  for (; i < n; i++) {
    hmt_module_t *x = &m[i];
    uint64_t idlen = 0, plen = 0;
    if (!(p = hmt_get_varint(p, end, &x->bias)) || !(p = hmt_get_varint(p, end, &x->lo)) ||
        !(p = hmt_get_varint(p, end, &x->hi)) || !(p = hmt_get_varint(p, end, &idlen)) || idlen > 64 ||
        idlen > (uint64_t)(end - p)) { rc = HMT_E_RECORD; break; }
    memcpy(x->build_id, p, idlen); x->build_id_len = idlen; p += idlen;
    if (!(p = hmt_get_varint(p, end, &plen)) || plen > 65536 || plen > (uint64_t)(end - p) || x->lo > x->hi) {
      rc = HMT_E_RECORD; break;
    }
    if (!(x->path = malloc(plen + 1))) { rc = -ENOMEM; break; }
    memcpy(x->path, p, plen); x->path[plen] = 0; p += plen;
  }
  hmt_module_t *all = rc ? NULL : realloc(r->mods, (r->nmods + n) * sizeof *all);
  if (rc || (!all && n)) {
    for (uint64_t j = 0; j < i; j++) free(m[j].path);
    free(m);
    if (rc == HMT_E_RECORD) return fail(r, e, rc, k->off, "MODULES block: malformed entry %llu", (unsigned long long)i);
    return fail(r, e, -ENOMEM, k->off, "out of memory");
  }
  /* newest first, so a lookup in order finds the current mapping */
  if (all) {
    memmove(all + n, all, r->nmods * sizeof *all);
    memcpy(all, m, n * sizeof *all);
    r->mods = all;
    r->nmods += n;
  }
  free(m);
  return 0;
}

static int parse_flush(hmt_reader_t *r, hmt_error_t *e, const blk_t *k, const uint8_t *p, const uint8_t *end) {
  hmt_flush_info_t f;
  memset(&f, 0, sizeof f);
  uint64_t n, vals[64] = {0};
  if (!(p = hmt_get_varint(p, end, &f.reason)) || !(p = hmt_get_varint(p, end, &f.time)) ||
      !(p = hmt_get_varint(p, end, &n)) || n > 64)
    return fail(r, e, HMT_E_RECORD, k->off, "FLUSH block: malformed");
  for (uint64_t i = 0; i < n; i++)
    if (!(p = hmt_get_varint(p, end, &vals[i]))) return fail(r, e, HMT_E_RECORD, k->off, "FLUSH block: malformed");
  int i = 0;
#define HMT_READER_FLUSH_(name, help) f.name = vals[i++];
  HMT_FLUSH_FIELDS(HMT_READER_FLUSH_)
#undef HMT_READER_FLUSH_
  f.present = 1;
  r->info.flush = f;
  return 0;
}

/* ---- indexing -------------------------------------------------------- */

static stream_t *stream_for(hmt_reader_t *r, hmt_map_t *tids, uint32_t tid) {
  int added;
  uint64_t *v = hmt_map_put(tids, tid, &added);
  if (!v) return NULL;
  if (added) {
    stream_t *s = realloc(r->streams, (r->nstreams + 1) * sizeof *s);
    if (!s) return NULL;
    r->streams = s;
    memset(&s[r->nstreams], 0, sizeof *s);
    s[r->nstreams].tid = tid;
    *v = r->nstreams++;
  }
  return &r->streams[*v];
}

/* Look for the next valid block header after off (salvage). */
static uint64_t resync(hmt_reader_t *r, uint64_t off) {
  uint8_t buf[65536 + HMT_BLOCK_HEADER_SIZE];
  for (uint64_t pos = off + 1; pos + HMT_BLOCK_HEADER_SIZE <= r->info.file_size;) {
    size_t got;
    if (read_at(r, buf, sizeof buf, pos, &got) || got < HMT_BLOCK_HEADER_SIZE) break;
    for (size_t i = 0; i + HMT_BLOCK_HEADER_SIZE <= got; i++) {
      hmt_block_t b;
      if (buf[i] == 'H' && hmt_block_decode(buf + i, got - i, &b) == HMT_OK) return pos + i;
    }
    pos += got - HMT_BLOCK_HEADER_SIZE + 1;
  }
  return r->info.file_size;
}

static int index_blocks(hmt_reader_t *r, hmt_error_t *e) {
  hmt_map_t tids = {0};
  uint64_t off = HMT_HEADER_SIZE, size = r->info.file_size;
  int rc = 0;
  r->info.t_first = UINT64_MAX;
  while (off < size) {
    uint8_t h[HMT_BLOCK_HEADER_SIZE];
    size_t got;
    int err = read_at(r, h, sizeof h, off, &got);
    if (err) { rc = fail(r, e, err, off, "read error: %s", strerror(-err)); break; }
    blk_t k = {off, {0}};
    int d = hmt_block_decode(h, got, &k.b);
    if (d == HMT_E_TRUNCATED || (d == HMT_OK && off + HMT_BLOCK_HEADER_SIZE + k.b.stored_len > size)) {
      /* the file ends inside this block: a killed writer; keep what is complete */
      r->info.truncated = 1;
      r->info.truncated_at = off;
      break;
    }
    if (d != HMT_OK) {
      if (r->flags & HMT_OPEN_SALVAGE) {
        uint64_t next = resync(r, off);
        r->info.skipped_bytes += next - off;
        r->info.skipped_blocks++;
        off = next;
        continue;
      }
      rc = fail(r, e, d, off, "block header: %s", code_text(d));
      break;
    }
    r->info.blocks++;
    if (k.b.type == HMT_BLOCK_EVENTS) {
      if (r->nblks == r->blks_cap) {
        size_t c = r->blks_cap ? r->blks_cap * 2 : 256;
        blk_t *nb = realloc(r->blks, c * sizeof *nb);
        if (!nb) { rc = fail(r, e, -ENOMEM, off, "out of memory"); break; }
        r->blks = nb; r->blks_cap = c;
      }
      stream_t *s = stream_for(r, &tids, k.b.tid);
      if (!s) { rc = fail(r, e, -ENOMEM, off, "out of memory"); break; }
      if (s->nblocks == s->cap) {
        size_t c = s->cap ? s->cap * 2 : 16;
        size_t *nb = realloc(s->blocks, c * sizeof *nb);
        if (!nb) { rc = fail(r, e, -ENOMEM, off, "out of memory"); break; }
        s->blocks = nb; s->cap = c;
      }
      s->blocks[s->nblocks++] = r->nblks;
      r->blks[r->nblks++] = k;
      r->info.event_blocks++;
      r->info.stored_bytes += k.b.stored_len;
      r->info.raw_bytes += k.b.raw_len;
      r->info.records += k.b.count;
      if (k.b.count && k.b.base_time < r->info.t_first) r->info.t_first = k.b.base_time;
      if (k.b.base_time > r->info.t_last) r->info.t_last = k.b.base_time;
    } else if (k.b.type == HMT_BLOCK_MODULES || k.b.type == HMT_BLOCK_FLUSH) {
      uint8_t *raw = NULL;
      size_t cap = 0;
      int perr = load_payload(r, &k, e);
      if (!perr) perr = decompress(r, &k, &raw, &cap, e);
      if (!perr)
        perr = k.b.type == HMT_BLOCK_MODULES ? parse_modules(r, e, &k, raw, raw + k.b.raw_len)
                                             : parse_flush(r, e, &k, raw, raw + k.b.raw_len);
      free(raw);
      if (perr && perr != -ENOMEM && (r->flags & HMT_OPEN_SALVAGE)) {
        r->info.skipped_blocks++;
        r->info.skipped_bytes += HMT_BLOCK_HEADER_SIZE + k.b.stored_len;
      } else if (perr) {
        rc = perr;
        break;
      }
    }
    /* other types: a newer minor version; skipped by their length */
    off += HMT_BLOCK_HEADER_SIZE + k.b.stored_len;
  }
  if (r->info.t_first == UINT64_MAX) r->info.t_first = 0;
  r->info.threads = r->nstreams;
  hmt_map_free(&tids);
  if (rc == 0) memset(e, 0, sizeof *e);  /* salvaged damage is in info, not an error */
  return rc;
}

/* ---- open / close ---------------------------------------------------- */

int hmt_open(const char *path, int flags, hmt_reader_t **out, hmt_error_t *err) {
  hmt_error_t dummy;
  if (!err) err = &dummy;
  memset(err, 0, sizeof *err);
  *out = NULL;
  hmt_reader_t *r = calloc(1, sizeof *r);
  if (!r || !(r->path = strdup(path))) {
    free(r);
    snprintf(err->message, sizeof err->message, "%s: out of memory", path);
    return err->code = -ENOMEM;
  }
  r->flags = flags;
  r->fd = open(path, O_RDONLY | O_CLOEXEC);
  struct stat st;
  if (r->fd < 0 || fstat(r->fd, &st) != 0) {
    int e = errno;
    snprintf(err->message, sizeof err->message, "%s: %s", path, strerror(e));
    err->code = -e;
    hmt_close(r);
    return -e;
  }
  if (!S_ISREG(st.st_mode)) {
    snprintf(err->message, sizeof err->message, "%s: not a regular file", path);
    hmt_close(r);
    return err->code = -EINVAL;
  }
  r->info.file_size = (uint64_t)st.st_size;
  uint8_t h[HMT_HEADER_SIZE];
  size_t got;
  int rc = read_at(r, h, sizeof h, 0, &got);
  if (rc) { fail(r, err, rc, 0, "read error: %s", strerror(-rc)); hmt_close(r); return rc; }
  int d = hmt_header_decode(h, got, &r->hdr);
  if (d != HMT_OK) {
    if (d == HMT_E_TRUNCATED) fail(r, err, d, got, "file header truncated (%zu of %d bytes)", got, HMT_HEADER_SIZE);
    else if (d == HMT_E_MAGIC) fail(r, err, d, 0, "not a libhpcmem trace file (bad magic number)");
    else if (d == HMT_E_VERSION)
      fail(r, err, d, 8, "format version %u.%u is not supported (this reader reads %d.x)", hmt_ld16(h + 8),
           hmt_ld16(h + 10), HMT_VERSION_MAJOR);
    else fail(r, err, d, d == HMT_E_CHECKSUM ? 252 : 0, "file header: %s", code_text(d));
    hmt_close(r);
    return d;
  }
  if ((rc = index_blocks(r, err)) != 0) { hmt_close(r); return rc; }
  *out = r;
  return 0;
}

void hmt_close(hmt_reader_t *r) {
  if (!r) return;
  if (r->fd >= 0) close(r->fd);
  hmt_map_free(&r->live);
  for (size_t i = 0; i < r->nstreams; i++) {
    free(r->streams[i].blocks); free(r->streams[i].raw); free(r->streams[i].rows); free(r->streams[i].allocs);
    free(r->streams[i].model); free(r->streams[i].saved); free(r->streams[i].ring);
    if (r->streams[i].m4) {
      free(r->streams[i].m4->sites); free(r->streams[i].m4->ent); free(r->streams[i].m4->map);
      free(r->streams[i].m4);
    }
  }
  for (size_t i = 0; i < r->nstreams; i++) free(r->streams[i].tk);
  free(r->tick_s); free(r->steps); free(r->out); free(r->tnodes);
  hmt_map_free(&r->tick_addr);
  hmt_map_free(&r->tick_dead);
  free(r->freed);
  free(r->streams);
  free(r->blks);
  free(r->heap);
  for (size_t i = 0; i < r->nchunks; i++) free(r->chunks[i]);
  free(r->chunks);
  free(r->stacks);
  hmt_map_free(&r->stack_index);
  free(r->nodes);
  hmt_map_free(&r->node_index);
  for (size_t i = 0; i < r->nmods; i++) free(r->mods[i].path);
  free(r->mods);
  free(r->stored);
  free(r->path);
  free(r);
}

const hmt_header_t *hmt_header(const hmt_reader_t *r) { return &r->hdr; }
const hmt_info_t *hmt_info(const hmt_reader_t *r) { return &r->info; }
const char *hmt_path(const hmt_reader_t *r) { return r->path; }
const hmt_error_t *hmt_error(const hmt_reader_t *r) { return &r->err; }
uint64_t hmt_progress(const hmt_reader_t *r) { return r->progress; }

/* ---- stacks ---------------------------------------------------------- */

static int add_stack(hmt_reader_t *r, const hmt_record_t *rec, uint64_t off) {
  uint64_t f[HMT_MAX_DEPTH];
  if (hmt_stack_frames(rec, f) != HMT_OK) return fail(r, NULL, HMT_E_RECORD, off, "malformed stack record");
  for (uint32_t k = 0; k < rec->depth; k++) {
    uint64_t id = rec->stack_id + k;
    int added;
    uint64_t *v = hmt_map_put(&r->node_index, id, &added);
    if (!v) return fail(r, NULL, -ENOMEM, off, "out of memory");
    if (!added) continue;  /* defined again (a fork child's table, a full trie): the same */
    if (r->nnodes == r->nodes_cap) {
      size_t c = r->nodes_cap ? r->nodes_cap * 2 : 1024;
      node_t *n = realloc(r->nodes, c * sizeof *n);
      if (!n) return fail(r, NULL, -ENOMEM, off, "out of memory");
      r->nodes = n; r->nodes_cap = c;
    }
    r->nodes[r->nnodes] = (node_t){id, k ? id - 1 : rec->parent, f[rec->depth - 1 - k]};
    *v = r->nnodes++;
  }
  return 0;
}

/* The frames of a node: its frame, then its parent's, to the root.  A
 * node whose chain is not all in the file (a truncated trace) has none.
 * Resolved stacks are kept. */
int hmt_stack(const hmt_reader_t *cr, uint64_t id, const uint64_t **frames, uint32_t *depth) {
  hmt_reader_t *r = (hmt_reader_t *)cr;  /* the cache of resolved stacks */
  const uint64_t *v = hmt_map_get(&r->stack_index, id);
  if (v) {
    *frames = r->stacks[*v].frames;
    *depth = r->stacks[*v].depth;
    return 0;
  }
  uint32_t d = 0;
  for (uint64_t n = id; n; d++) {
    const uint64_t *ni = hmt_map_get(&r->node_index, n);
    if (!ni || d >= HMT_MAX_DEPTH) return -1;
    n = r->nodes[*ni].parent;  /* always smaller: the walk ends */
  }
  if (d == 0 || d > CHUNK_FRAMES) return -1;
  if (r->nchunks == 0 || r->chunk_used + d > CHUNK_FRAMES) {
    uint64_t **c = realloc(r->chunks, (r->nchunks + 1) * sizeof *c);
    if (!c) return -1;
    r->chunks = c;
    if (!(c[r->nchunks] = malloc(CHUNK_FRAMES * sizeof(uint64_t)))) return -1;
    r->nchunks++;
    r->chunk_used = 0;
  }
  if (r->nstacks == r->stacks_cap) {
    size_t c = r->stacks_cap ? r->stacks_cap * 2 : 1024;
    stack_t_ *s = realloc(r->stacks, c * sizeof *s);
    if (!s) return -1;
    r->stacks = s; r->stacks_cap = c;
  }
  uint64_t *f = r->chunks[r->nchunks - 1] + r->chunk_used;
  uint32_t k = 0;
  for (uint64_t n = id; n; k++) {
    const node_t *nd = &r->nodes[*hmt_map_get(&r->node_index, n)];
    f[k] = nd->frame;
    n = nd->parent;
  }
  uint64_t *slot = hmt_map_put(&r->stack_index, id, NULL);
  if (!slot) return -1;
  r->chunk_used += d;
  r->stacks[r->nstacks] = (stack_t_){id, f, d};
  *slot = r->nstacks++;
  *frames = f;
  *depth = d;
  return 0;
}

size_t hmt_stack_count(const hmt_reader_t *r) { return r->nnodes; }
uint64_t hmt_stack_id(const hmt_reader_t *r, size_t i) { return i < r->nnodes ? r->nodes[i].id : 0; }

size_t hmt_modules(const hmt_reader_t *r, const hmt_module_t **mods) {
  *mods = r->mods;
  return r->nmods;
}

const hmt_module_t *hmt_module_of(const hmt_reader_t *r, uint64_t addr) {
  for (size_t i = 0; i < r->nmods; i++)
    if (addr >= r->mods[i].lo && addr < r->mods[i].hi) return &r->mods[i];
  return NULL;
}

/* ---- events ---------------------------------------------------------- */

/* A columnar EVENTS block (format 1.1): back into rows, which the row
 * decoder then reads as any other block's. */
static int columns_to_rows(hmt_reader_t *r, stream_t *s, const blk_t *k) {
  if (k->b.count > k->b.raw_len)
    return fail(r, NULL, HMT_E_RECORD, k->off, "columnar block claims %u records in %u bytes", k->b.count, k->b.raw_len);
  if (!r->freed && !(r->freed = malloc(HMT_COL_FREED * sizeof *r->freed)))
    return fail(r, NULL, -ENOMEM, k->off, "out of memory");
  size_t need = 2 * (size_t)k->b.count + 2;
  if (s->allocs_cap < need) {
    uint64_t *a = realloc(s->allocs, need * sizeof *a);
    if (!a) return fail(r, NULL, -ENOMEM, k->off, "out of memory");
    s->allocs = a; s->allocs_cap = need;
  }
  size_t cap = s->rows_cap > 2 * (size_t)k->b.raw_len + 64 ? s->rows_cap : 2 * (size_t)k->b.raw_len + 64;
  for (;;) {
    if (grow_buf(&s->rows, &s->rows_cap, cap)) return fail(r, NULL, -ENOMEM, k->off, "out of memory");
    hmt_state_t st = s->st;
    size_t len = 0;
    uint64_t n = 0;
    int d = hmt_columns_decode(s->raw, k->b.raw_len, &st, s->rows, s->rows_cap, &len, &n, s->allocs, k->b.count,
                               r->freed);
    if (d == HMT_OK) {
      s->st = st;
      s->start = s->p = s->rows;
      s->end = s->rows + len;
      return 0;
    }
    if (d != HMT_E_RANGE) return fail(r, NULL, HMT_E_RECORD, k->off, "malformed columnar block");
    if (s->rows_cap >= HMT_MAX_BLOCK) return fail(r, NULL, HMT_E_RANGE, k->off, "columnar block decodes to more than 1 GiB");
    cap = s->rows_cap * 2;
  }
}

/* A format 1.2 block: its models continue from the thread's previous
 * block (HMT_BF_CHAIN), which must have been loaded, or start afresh. */
static int models_to_rows(hmt_reader_t *r, stream_t *s, const blk_t *k) {
  int chained = (k->b.flags & HMT_BF_CHAIN) != 0;
  if (chained && !s->model_ok)
    return fail(r, NULL, HMT_E_RECORD, k->off, "block continues the models of a block that was not read");
  if (k->b.count > k->b.raw_len)
    return fail(r, NULL, HMT_E_RECORD, k->off, "columnar block claims %u records in %u bytes", k->b.count, k->b.raw_len);
  if ((!s->model && !(s->model = malloc(sizeof *s->model))) || (!s->saved && !(s->saved = malloc(sizeof *s->saved))))
    return fail(r, NULL, -ENOMEM, k->off, "out of memory");
  s->model_ok = 0;
  uint64_t need = (chained ? s->model->nalloc : 0) + k->b.count, cap = s->ring_cap ? s->ring_cap : 1024;
  while (cap < need && cap < HMT_C2_RING) cap *= 2;
  if (cap != s->ring_cap) {
    /* grown before any index wrapped: allocation i stays at i % cap */
    uint64_t *a = realloc(s->ring, 2 * cap * sizeof *a);
    if (!a) return fail(r, NULL, -ENOMEM, k->off, "out of memory");
    s->ring = a; s->ring_cap = cap;
  }
  if (chained) memcpy(s->saved, s->model, sizeof *s->model);
  size_t rcap = s->rows_cap > 2 * (size_t)k->b.raw_len + 64 ? s->rows_cap : 2 * (size_t)k->b.raw_len + 64;
  for (;;) {
    if (grow_buf(&s->rows, &s->rows_cap, rcap)) return fail(r, NULL, -ENOMEM, k->off, "out of memory");
    hmt_state_t st = s->st;
    size_t len = 0;
    uint64_t n = 0;
    int d = hmt_columns2_decode(s->raw, k->b.raw_len, &st, s->rows, s->rows_cap, &len, &n, k->b.count, s->model,
                                s->ring, s->ring_cap, chained);
    if (d == HMT_OK) {
      s->st = st;
      s->start = s->p = s->rows;
      s->end = s->rows + len;
      s->model_ok = 1;
      return 0;
    }
    if (d != HMT_E_RANGE) return fail(r, NULL, HMT_E_RECORD, k->off, "malformed columnar block");
    if (s->rows_cap >= HMT_MAX_BLOCK) return fail(r, NULL, HMT_E_RANGE, k->off, "columnar block decodes to more than 1 GiB");
    if (chained) memcpy(s->model, s->saved, sizeof *s->model);
    rcap = s->rows_cap * 2;
  }
}

/* The arrays of a format 1.4 model, with room for what the block needs
 * (chained: they go on); doubled as the records need them, so a damaged
 * header cannot make the reader allocate more than the records do. */
static int m4_room(hmt_m4_model_t *m, hmt_m4_room_t need, int keep) {
  hmt_m4_room_t r = need;
  r.sites = m->site_cap > r.sites ? m->site_cap : r.sites;
  if (r.sites > m->site_cap && r.sites < 2 * m->site_cap) r.sites = 2 * m->site_cap;
  if (r.sites > HMT_M4_SITES_MAX) r.sites = HMT_M4_SITES_MAX;
  r.ents = m->ent_cap > r.ents ? m->ent_cap : r.ents;
  if (r.ents > m->ent_cap && r.ents < 2 * m->ent_cap) r.ents = 2 * m->ent_cap;
  if (r.ents > m->nmax + 1) r.ents = m->nmax + 1;
  if (r.ents < m->ent_cap) r.ents = m->ent_cap;  /* never smaller: entries beyond a lower limit stay in use */
  for (r.map_slots = 64; r.map_slots < 2ull * r.ents; r.map_slots *= 2) {}
  r.smap_slots = 0;
  hmt_m4_site_t *sites = m->sites;
  hmt_m4_ent_t *ent = m->ent;
  hmt_m4_mslot_t *map = m->map, *omap = m->map;
  if (r.sites != m->site_cap || !sites) {
    if (!(sites = realloc(m->sites, r.sites * sizeof *sites))) return -ENOMEM;
    m->sites = sites;
  }
  if (r.ents != m->ent_cap || !ent) {
    if (!(ent = realloc(m->ent, r.ents * sizeof *ent))) return -ENOMEM;
    m->ent = ent;
  }
  if (!map || r.map_slots != m->map_mask + 1)
    if (!(map = malloc(r.map_slots * sizeof *map))) return -ENOMEM;
  m->map = omap;  /* hmt_m4_grow rebuilds the map when it changes */
  hmt_m4_grow(m, r, sites, ent, map, NULL, keep);
  if (omap != map) free(omap);
  return 0;
}

/* A format 1.4 block: its models continue from the thread's previous
 * block (HMT_BF_CHAIN), which must have been loaded, or start afresh. */
static int m4_to_rows(hmt_reader_t *r, stream_t *s, const blk_t *k) {
  int chained = (k->b.flags & HMT_BF_CHAIN) != 0;
  if (chained && !s->m4_ok)
    return fail(r, NULL, HMT_E_RECORD, k->off, "block continues the models of a block that was not read");
  s->m4_ok = 0;
  unsigned shift;
  uint32_t nmax;
  if (!hmt_m4_head(s->raw, k->b.stored_len, &shift, &nmax))
    return fail(r, NULL, HMT_E_RECORD, k->off, "malformed head of a block of coded events");
  if (!s->m4 && !(s->m4 = calloc(1, sizeof *s->m4))) return fail(r, NULL, -ENOMEM, k->off, "out of memory");
  hmt_m4_model_t *m = s->m4;
  if (!chained || nmax > m->nmax) m->nmax = nmax;  /* fewer: hmt_m4_dec_begin evicts the oldest */
  if (m4_room(m, hmt_m4_need(m, chained, 0, m->nmax), chained) ||
      grow_buf(&s->rows, &s->rows_cap, (size_t)k->b.raw_len + 1))
    return fail(r, NULL, -ENOMEM, k->off, "out of memory");
  hmt_state_t st = s->st;
  hmt_m4_dec_t d;
  int rc = hmt_m4_dec_begin(&d, s->raw, k->b.stored_len, &st, s->rows, k->b.raw_len, k->b.count, m, chained);
  while (rc == HMT_OK && (rc = hmt_m4_dec_run(&d, m)) == HMT_E_RANGE) {
    if (m4_room(m, hmt_m4_need(m, 1, 1, m->nmax), 1)) return fail(r, NULL, -ENOMEM, k->off, "out of memory");
    rc = HMT_OK;
  }
  if (rc != HMT_OK) return fail(r, NULL, HMT_E_RECORD, k->off, "malformed block of coded events");
  if ((size_t)(d.o - d.out) != k->b.raw_len)
    return fail(r, NULL, HMT_E_RECORD, k->off, "coded events decode to %zu bytes of rows, the block header says %u",
                (size_t)(d.o - d.out), k->b.raw_len);
  s->st = st;
  s->start = s->p = s->rows;
  s->end = s->rows + k->b.raw_len;
  s->m4_ok = 1;
  return 0;
}

/* Load the stream's next block; 1 loaded, 0 none left, <0 error. */
static int load_block(hmt_reader_t *r, stream_t *s) {
  while (s->next < s->nblocks) {
    const blk_t *k = &r->blks[s->blocks[s->next++]];
    r->progress += HMT_BLOCK_HEADER_SIZE + k->b.stored_len;
    int err = load_payload(r, k, NULL);
    if (!err) err = decompress(r, k, &s->raw, &s->raw_cap, NULL);
    if (err) {
      s->model_ok = s->m4_ok = 0;
      if (err != -ENOMEM && (r->flags & HMT_OPEN_SALVAGE)) {
        r->info.skipped_blocks++;
        r->info.skipped_bytes += HMT_BLOCK_HEADER_SIZE + k->b.stored_len;
        continue;
      }
      return err;
    }
    s->start = s->p = s->raw;
    s->end = s->raw + k->b.raw_len;
    s->st.time = k->b.base_time; s->st.ptr = k->b.base_ptr; s->st.stack = k->b.base_stack;
    if (k->b.codec == HMT_CODEC_MODEL) {
      s->model_ok = 0;
      err = m4_to_rows(r, s, k);
    } else if (k->b.flags & HMT_BF_COLUMNS) {
      s->m4_ok = 0;
      if (k->b.flags & HMT_BF_MODELS) err = models_to_rows(r, s, k);
      else { s->model_ok = 0; err = columns_to_rows(r, s, k); }
    } else {
      s->model_ok = s->m4_ok = 0;  /* rows: the writer starts its models afresh after them */
    }
    if (err) {
      if (err != -ENOMEM && (r->flags & HMT_OPEN_SALVAGE)) {
        r->info.skipped_blocks++;
        r->info.skipped_bytes += HMT_BLOCK_HEADER_SIZE + k->b.stored_len;
        continue;
      }
      return err;
    }
    s->block_off = k->off;
    s->block_records = 0;
    s->block_count = k->b.count;
    return 1;
  }
  return 0;
}

/* Decode the stream's next event into s->ev; 1, 0 (exhausted), <0. */
static int fill(hmt_reader_t *r, stream_t *s) {
  for (;;) {
    if (!s->p || s->p >= s->end) {
      if (s->p && s->block_records != s->block_count && !(r->flags & HMT_OPEN_SALVAGE))
        return fail(r, NULL, HMT_E_RECORD, s->block_off, "block holds %llu records, its header says %llu",
                    (unsigned long long)s->block_records, (unsigned long long)s->block_count);
      int k = load_block(r, s);
      if (k <= 0) { s->p = s->end = NULL; return k; }
      continue;
    }
    hmt_record_t rec;
    uint64_t at = (uint64_t)(s->p - s->start);
    if (hmt_decode_record(&s->p, s->end, &s->st, &rec) != HMT_OK) {
      if (r->flags & HMT_OPEN_SALVAGE) {
        r->info.skipped_blocks++;
        s->p = s->end;
        s->block_records = s->block_count;
        continue;
      }
      return fail(r, NULL, HMT_E_RECORD, s->block_off, "malformed record at byte %llu of the block's data",
                  (unsigned long long)at);
    }
    s->block_records++;
    if (rec.type == HMT_REC_STACK) {
      int err = add_stack(r, &rec, s->block_off);
      if (err) return err;
      continue;
    }
    if (rec.type == HMT_REC_EXT) continue;
    s->ev.type = rec.type; s->ev.sys = rec.sys; s->ev.tid = s->tid;
    /* a columnar block keeps time in ticks, rounded down, and may follow a
     * block in rows (exact ns: a small flush that compression did not
     * shrink): a thread's events stay in order */
    if (rec.time < s->last_time) rec.time = s->last_time;
    s->last_time = rec.time;
    s->ev.time = rec.time; s->ev.ptr = rec.ptr; s->ev.old_ptr = rec.old_ptr;
    s->ev.size = rec.size; s->ev.align = rec.align; s->ev.stack = rec.stack;
    return 1;
  }
}

/* The address an event gives back (a free, a realloc that moved), or 0. */
static uint64_t released(const hmt_event_t *e) {
  if (e->type == HPCMEM_EV_FREE) return e->ptr;
  if (e->type == HPCMEM_EV_REALLOC && e->old_ptr != e->ptr) return e->old_ptr;
  return 0;
}

int hmt_event_frees(const hmt_event_t *e) {
  return e->type == HPCMEM_EV_FREE || (e->type == HPCMEM_EV_REALLOC && !e->ptr);
}

/* The thread that allocated live address a, or NULL when a is not live. */
static const uint64_t *live_by(const hmt_reader_t *r, uint64_t a) {
  return a && a != HMT_MAP_EMPTY ? hmt_map_get(&r->live, a) : NULL;  /* the map cannot hold EMPTY */
}

/* Merge order.  Columnar blocks keep time in ticks (2^16 ns since format
 * 1.3), rounded down, so the events of different threads in one tick come
 * in an unknown order; a thread's own order is never changed.  Streams
 * whose next events differ in time go by time (the heap below).  The
 * events of a tick that several threads share are ordered as a whole by
 * order_tick(): every free must find its block live and every allocation
 * an address that is not, which settles who went first when threads hand
 * blocks to each other (a block freed by a consumer thread and got back at
 * once by its producer; Open MPI's progress thread freeing a block the
 * main thread allocated in the same 65 us).  Where several orders do,
 * prefer() chooses. */

/* The address an event allocates (0: none; a realloc in place keeps its own). */
static uint64_t taken(const hmt_event_t *e) {
  if (e->type == HPCMEM_EV_FREE || (e->type == HPCMEM_EV_REALLOC && e->old_ptr == e->ptr)) return 0;
  return e->ptr;
}

/* 1 when x should go before y, two threads' events of one tick that the
 * live addresses both let go: a free of a live address before another
 * thread's allocation of it (which it made possible); a free of a block
 * that another thread allocated after that thread's events (it may free
 * the block itself and allocate the address again: the free is of that
 * one); then allocations before frees -- the peak within a tick errs
 * upwards, never below what the program held (a thread's last allocations
 * before a barrier against another's frees after it) -- and then the order
 * in the file. */
static int prefer(const hmt_reader_t *r, const hmt_event_t *x, uint64_t xoff, size_t a, const hmt_event_t *y,
                  uint64_t yoff, size_t b) {
  uint64_t rx = released(x), ry = released(y);
  if (rx && rx == y->ptr && !hmt_event_frees(y)) return 1;
  if (ry && ry == x->ptr && !hmt_event_frees(x)) return 0;
  if (r->track_live) {
    const uint64_t *lx = live_by(r, rx), *ly = live_by(r, ry);
    int wx = lx && *lx == y->tid && *lx != x->tid, wy = ly && *ly == x->tid && *ly != y->tid;
    if (wx != wy) return wy;
  }
  int fx = hmt_event_frees(x), fy = hmt_event_frees(y);
  if (fx != fy) return fy;
  if (xoff != yoff) return xoff < yoff;
  return a < b;
}

static int before(const hmt_reader_t *r, size_t a, size_t b) {
  const stream_t *x = &r->streams[a], *y = &r->streams[b];
  if (x->ev.time != y->ev.time) return x->ev.time < y->ev.time;
  return prefer(r, &x->ev, x->block_off, a, &y->ev, y->block_off, b);
}

/* What an event changed in the live addresses, to take it back. */
typedef struct {
  uint64_t key[2], val[2];
  uint8_t had[2], n;
} undo_t;

static void undo_save(const hmt_reader_t *r, undo_t *u, uint64_t key) {
  if (!u || (u->n && u->key[0] == key)) return;
  const uint64_t *v = hmt_map_get(&r->live, key);
  u->key[u->n] = key; u->had[u->n] = v != NULL; u->val[u->n] = v ? *v : 0;
  u->n++;
}

/* The live addresses after ev, each with the thread that allocated it
 * (only what prefer() and order_tick() ask about); what it changed into
 * *u when u is not NULL. */
static int track(hmt_reader_t *r, const hmt_event_t *ev, undo_t *u) {
  uint64_t old = ev->type == HPCMEM_EV_FREE ? ev->ptr : ev->type == HPCMEM_EV_REALLOC ? ev->old_ptr : 0;
  if (u) u->n = 0;
  if (old && old != HMT_MAP_EMPTY) {
    undo_save(r, u, old);
    hmt_map_del(&r->live, old, NULL);
  }
  if (ev->type != HPCMEM_EV_FREE && ev->ptr && ev->ptr != HMT_MAP_EMPTY) {
    undo_save(r, u, ev->ptr);
    uint64_t *v = hmt_map_put(&r->live, ev->ptr, NULL);
    if (!v) return fail(r, NULL, -ENOMEM, 0, "out of memory");
    *v = ev->tid;
  }
  return 0;
}

static void untrack(hmt_reader_t *r, const undo_t *u) {
  for (unsigned i = u->n; i-- > 0;) {
    if (!u->had[i]) { hmt_map_del(&r->live, u->key[i], NULL); continue; }
    uint64_t *v = hmt_map_put(&r->live, u->key[i], NULL);  /* there was room for it before */
    if (v) *v = u->val[i];
  }
}

/* ---- a tick that several threads share ---------------------------------- */

struct tick_ev {
  hmt_event_t ev;
  uint64_t block_off;
};

/* A step of the search: the thread (index into tick_s) whose event came
 * next, the threads tried so far at this step (bit i: thread tick_s[i]),
 * and what the event changed. */
struct tick_step {
  uint64_t tried;
  size_t thread;
  undo_t undo;
};

static void sift_down(hmt_reader_t *r, size_t i);

/* tick_addr: per address of the tick, the allocations and frees of it in
 * the tick (16 bits each, saturating), the first of its events in
 * tick_nodes (+1), and a flag */
#define TA_ALLOCS(v) ((v) & 0xffffu)
#define TA_FREES(v) (((v) >> 16) & 0xffffu)
#define TA_NODE(v) (((v) >> 32) & 0x3fffffffu)
#define TA_EXEMPT (1ull << 63)  /* no order of the tick can match its frees and allocations */

/* an event of the tick on an address: the thread (index into tick_s), its
 * place in the thread's events, whether it allocates the address, and the
 * address's next node (+1; a thread's nodes follow each other, latest first) */
struct tick_node {
  uint32_t thread, pos, next;
  int alloc;
};

static int tick_count(hmt_reader_t *r, uint64_t a, int alloc, size_t thread, size_t pos, int *shared) {
  if (!a || a == HMT_MAP_EMPTY) return 0;
  if (r->tnodes_n == r->tnodes_cap) {
    size_t cap = r->tnodes_cap ? 2 * r->tnodes_cap : 64;
    struct tick_node *n = cap < 0x3fffffffu ? realloc(r->tnodes, cap * sizeof *n) : NULL;
    if (!n) return fail(r, NULL, -ENOMEM, 0, "out of memory");
    r->tnodes = n; r->tnodes_cap = cap;
  }
  uint64_t *v = hmt_map_put(&r->tick_addr, a, NULL);
  if (!v) return fail(r, NULL, -ENOMEM, 0, "out of memory");
  struct tick_node *n = &r->tnodes[r->tnodes_n];
  n->thread = (uint32_t)thread; n->pos = (uint32_t)pos; n->alloc = alloc; n->next = (uint32_t)TA_NODE(*v);
  if (n->next && r->tnodes[n->next - 1].thread != thread) *shared = 1;  /* two threads touch it */
  *v = (*v & ~(0x3fffffffull << 32)) | (uint64_t)(++r->tnodes_n) << 32;
  if (alloc && TA_ALLOCS(*v) < 0xffffu) *v += 1;
  if (!alloc && TA_FREES(*v) < 0xffffu) *v += 1u << 16;
  return 0;
}

/* 0 when address a can no longer go on: events of it are left in the tick
 * but no thread's next one of them fits its state (a free when it is live,
 * an allocation when not).  Checked for the addresses of each step, it
 * catches an allocation that took an address another thread needed. */
static int tick_addr_ok(const hmt_reader_t *r, const size_t *pos, uint64_t a) {
  if (!a || a == HMT_MAP_EMPTY) return 1;
  const uint64_t *v = hmt_map_get(&r->tick_addr, a);
  if (!v || (*v & TA_EXEMPT)) return 1;
  int want_alloc = !live_by(r, a), left = 0;
  const struct tick_node *cand = NULL;
  for (uint32_t k = (uint32_t)TA_NODE(*v); k; k = r->tnodes[k - 1].next) {
    const struct tick_node *n = &r->tnodes[k - 1];
    if (cand && cand->thread != n->thread) {
      if (cand->alloc == want_alloc) return 1;
      cand = NULL;
    }
    if (n->pos >= pos[n->thread]) { cand = n; left = 1; }
  }
  return !left || (cand && cand->alloc == want_alloc);
}

/* 1 when the live addresses rule ev out now: it frees an address not live,
 * or allocates one that is live.  Addresses whose frees and allocations in
 * the tick cannot alternate whatever the order (a free of memory from
 * before the trace, an event lost with a killed thread) never hold an event
 * back. */
static int tick_blocked(const hmt_reader_t *r, const hmt_event_t *ev) {
  uint64_t rel = released(ev), got = taken(ev);
  const uint64_t *v;
  if (rel && rel != HMT_MAP_EMPTY && !live_by(r, rel) && (v = hmt_map_get(&r->tick_addr, rel)) && !(*v & TA_EXEMPT))
    return 1;
  return got && got != HMT_MAP_EMPTY && live_by(r, got) && (v = hmt_map_get(&r->tick_addr, got)) && !(*v & TA_EXEMPT);
}

/* Read every event of tick t0 of the streams whose next event is in it. */
static int gather_tick(hmt_reader_t *r, uint64_t t0, int *shared) {
  r->tick_n = 0;
  r->tnodes_n = 0;
  *shared = 0;
  for (size_t i = 0; i < r->heap_n; i++) {
    stream_t *s = &r->streams[r->heap[i]];
    if (s->ev.time != t0) continue;
    size_t th = r->tick_n;
    r->tick_s[r->tick_n++] = r->heap[i];
    s->tk_n = 0;
    for (;;) {
      if (s->tk_n == s->tk_cap) {
        size_t cap = s->tk_cap ? 2 * s->tk_cap : 16;
        struct tick_ev *tk = realloc(s->tk, cap * sizeof *tk);
        if (!tk) return fail(r, NULL, -ENOMEM, 0, "out of memory");
        s->tk = tk; s->tk_cap = cap;
      }
      s->tk[s->tk_n].ev = s->ev;
      s->tk[s->tk_n++].block_off = s->block_off;
      int err = tick_count(r, released(&s->ev), 0, th, s->tk_n - 1, shared);
      if (!err) err = tick_count(r, taken(&s->ev), 1, th, s->tk_n - 1, shared);
      if (err) return err;
      int k = fill(r, s);
      if (k < 0) return k;
      if (k == 0) { s->has_ev = 0; break; }
      if (s->ev.time != t0) break;
    }
  }
  /* an address whose frees and allocations cannot alternate from its state
   * at the start of the tick */
  for (size_t i = 0; *shared && i < r->tick_n; i++) {
    const stream_t *s = &r->streams[r->tick_s[i]];
    for (size_t j = 0; j < s->tk_n; j++) {
      uint64_t ad[2] = {released(&s->tk[j].ev), taken(&s->tk[j].ev)};
      for (int k = 0; k < 2; k++) {
        uint64_t *v = ad[k] && ad[k] != HMT_MAP_EMPTY ? hmt_map_get(&r->tick_addr, ad[k]) : NULL;
        if (!v) continue;
        uint64_t a = TA_ALLOCS(*v), f = TA_FREES(*v);
        int ok = live_by(r, ad[k]) ? (f == a || f == a + 1) : (a == f || a == f + 1);
        if (!ok || a == 0xffffu || f == 0xffffu) *v |= TA_EXEMPT;
      }
    }
  }
  /* the streams with events left go back into the heap */
  size_t n = 0;
  for (size_t i = 0; i < r->heap_n; i++)
    if (r->streams[r->heap[i]].has_ev) r->heap[n++] = r->heap[i];
  r->heap_n = n;
  for (size_t i = n / 2; i-- > 0;) sift_down(r, i);
  return 0;
}

/* The best of the tick's threads' next events (pos[i]: how many of thread
 * i's are out): among those not tried (skip), the ones the live addresses
 * let go (all when !strict, those first), in prefer() order.  Returns the
 * thread, or -1. */
static long tick_best(const hmt_reader_t *r, const size_t *pos, uint64_t skip, int strict) {
  long best = -1;
  int best_blocked = 0;
  for (size_t i = 0; i < r->tick_n; i++) {
    const stream_t *s = &r->streams[r->tick_s[i]];
    if (pos[i] == s->tk_n || (i < 64 && (skip >> i) & 1)) continue;
    const struct tick_ev *e = &s->tk[pos[i]];
    int bl = tick_blocked(r, &e->ev);
    if (bl && strict) continue;
    if (best >= 0) {
      const struct tick_ev *b = &r->streams[r->tick_s[best]].tk[pos[best]];
      if (bl > best_blocked) continue;
      if (bl == best_blocked && !prefer(r, &e->ev, e->block_off, r->tick_s[i], &b->ev, b->block_off, r->tick_s[best]))
        continue;
    }
    best = (long)i;
    best_blocked = bl;
  }
  return best;
}

/* 1 when an event the live addresses hold back can no longer go: no other
 * thread has an event left in the tick that would let it (the allocation
 * of the address it frees, the free of the address it allocates).  The
 * search goes back at once instead of at the end of the tick. */
static int tick_stuck(const hmt_reader_t *r, const size_t *pos) {
  for (size_t i = 0; i < r->tick_n; i++) {
    const stream_t *s = &r->streams[r->tick_s[i]];
    if (pos[i] == s->tk_n) continue;
    const hmt_event_t *e = &s->tk[pos[i]].ev;
    if (!tick_blocked(r, e)) continue;
    uint64_t rel = released(e);
    const uint64_t *v = rel ? hmt_map_get(&r->tick_addr, rel) : NULL;
    int need_alloc = v && !live_by(r, rel) && !(*v & TA_EXEMPT);
    if (!need_alloc) v = hmt_map_get(&r->tick_addr, taken(e));
    int found = 0;
    for (uint32_t k = v ? (uint32_t)TA_NODE(*v) : 0; k && !found; k = r->tnodes[k - 1].next) {
      const struct tick_node *n = &r->tnodes[k - 1];
      found = n->thread != i && n->pos >= pos[n->thread] && n->alloc == need_alloc;
    }
    if (!found) return 1;
  }
  return 0;
}

/* the search's steps: at most TICK_CREDIT in one tick, and on average
 * TICK_STEPS an event of the ticks searched */
#define TICK_CREDIT (1ull << 22)
#define TICK_STEPS 64

/* The search's key of a set of positions: the sum over the tick's threads
 * of each one's count of events out times a random odd number, mixed. */
static uint64_t pos_key(size_t thread) { return hmt_map_hash(thread + 1) | 1; }
static uint64_t pos_hash(uint64_t h) {
  h = hmt_map_hash(h);
  return h == HMT_MAP_EMPTY ? 0 : h;
}

/* Order the gathered tick into r->out: a depth-first search for an order
 * in which no event is held back by the live addresses, trying the
 * preferred event first at each step, so that it costs one pass when the
 * preferred order works.  Which events are out (pos) settles the live
 * addresses, so a set of positions found to lead nowhere is not searched
 * again (kept by a hash of the positions); a step that leaves an address
 * no thread can go on with (tick_addr_ok) or an event held back for good
 * (tick_stuck) turns back at once.  Over 64 threads in the tick, or when
 * the search runs out of steps (credit), the preferred event goes next,
 * held back or not (as before the search). */
static int order_tick(hmt_reader_t *r, int shared) {
  size_t total = 0;
  for (size_t i = 0; i < r->tick_n; i++) total += r->streams[r->tick_s[i]].tk_n;
  if (total > r->out_cap || total + 1 > r->steps_cap) {
    size_t cap = 2 * total + 16;
    hmt_event_t *out = realloc(r->out, cap * sizeof *out);
    if (out) r->out = out;
    struct tick_step *st = realloc(r->steps, (cap + 1) * sizeof *st);
    if (st) r->steps = st;
    if (!out || !st) return fail(r, NULL, -ENOMEM, 0, "out of memory");
    r->out_cap = cap; r->steps_cap = cap + 1;
  }
  size_t *pos = r->tick_s + r->nstreams;  /* the second half of tick_s */
  for (size_t i = 0; i < r->tick_n; i++) pos[i] = 0;
  size_t depth = 0;
  int search = shared && r->tick_n <= 64;
  /* each tick's events add to the search's credit, a hard tick may spend
   * what easy ones left: the whole file costs at most TICK_CREDIT steps
   * plus TICK_STEPS an event */
  r->credit += TICK_STEPS * (uint64_t)total;
  if (r->credit > 4 * TICK_CREDIT) r->credit = 4 * TICK_CREDIT;
  uint64_t budget = r->credit < TICK_CREDIT ? r->credit : TICK_CREDIT, spent = 0, h = 0;
  r->steps[0].tried = 0;
  while (depth < total) {
    struct tick_step *st = &r->steps[depth];
    long i;
    if (!search) i = tick_best(r, pos, 0, 0);
    else if (depth > 0 && tick_stuck(r, pos)) i = -1;
    else i = tick_best(r, pos, st->tried, 1);
    if (i >= 0 && (!search || spent++ < budget)) {
      const struct tick_ev *e = &r->streams[r->tick_s[i]].tk[pos[i]];
      int err = track(r, &e->ev, search ? &st->undo : NULL);
      if (err) return err;
      r->out[depth] = e->ev;
      st->thread = (size_t)i;
      pos[i]++;
      if (!search) { depth++; continue; }
      st->tried |= 1ull << i;
      h += pos_key(i);
      if (!tick_addr_ok(r, pos, released(&e->ev)) || !tick_addr_ok(r, pos, taken(&e->ev)) ||
          hmt_map_get(&r->tick_dead, pos_hash(h))) {
        untrack(r, &st->undo);
        pos[i]--;
        h -= pos_key(i);
        continue;
      }
      r->steps[++depth].tried = 0;
      continue;
    }
    if (!search) return fail(r, NULL, HMT_E_RECORD, 0, "no event left to order in a tick");  /* cannot happen */
    /* a dead end: remembered, and the search goes back one step */
    if (depth > 0 && spent < budget) {
      if (!hmt_map_put(&r->tick_dead, pos_hash(h), NULL)) return fail(r, NULL, -ENOMEM, 0, "out of memory");
      depth--;
      untrack(r, &r->steps[depth].undo);
      pos[r->steps[depth].thread]--;
      h -= pos_key(r->steps[depth].thread);
      continue;
    }
    while (depth > 0) {
      depth--;
      untrack(r, &r->steps[depth].undo);
      pos[r->steps[depth].thread]--;
    }
    search = 0;
  }
  r->credit -= spent < r->credit ? spent : r->credit;
  if (r->tick_dead.count) hmt_map_free(&r->tick_dead);
  r->out_n = total;
  r->out_pos = 0;
  /* the tick's addresses are done with */
  for (size_t i = 0; i < r->tick_n; i++) {
    const stream_t *s = &r->streams[r->tick_s[i]];
    for (size_t j = 0; j < s->tk_n; j++) {
      uint64_t a = released(&s->tk[j].ev), g = taken(&s->tk[j].ev);
      if (a && a != HMT_MAP_EMPTY) hmt_map_del(&r->tick_addr, a, NULL);
      if (g && g != HMT_MAP_EMPTY) hmt_map_del(&r->tick_addr, g, NULL);
    }
  }
  return 0;
}

static void sift_down(hmt_reader_t *r, size_t i) {
  for (;;) {
    size_t l = 2 * i + 1, m = i;
    if (l < r->heap_n && before(r, r->heap[l], r->heap[m])) m = l;
    if (l + 1 < r->heap_n && before(r, r->heap[l + 1], r->heap[m])) m = l + 1;
    if (m == i) return;
    size_t t = r->heap[i]; r->heap[i] = r->heap[m]; r->heap[m] = t;
    i = m;
  }
}

static int start(hmt_reader_t *r) {
  r->heap = malloc((r->nstreams + 1) * sizeof *r->heap);
  r->tick_s = malloc((2 * r->nstreams + 1) * sizeof *r->tick_s);
  if (!r->heap || !r->tick_s) return fail(r, NULL, -ENOMEM, 0, "out of memory");
  r->heap_n = 0;
  r->track_live = r->nstreams > 1;
  r->credit = TICK_CREDIT;
  for (size_t i = 0; i < r->nstreams; i++) {
    int k = fill(r, &r->streams[i]);
    if (k < 0) return k;
    r->streams[i].has_ev = k;
    if (k) r->heap[r->heap_n++] = i;
  }
  for (size_t i = r->heap_n; i-- > 0;) sift_down(r, i);
  r->started = 1;
  return 0;
}

int hmt_next(hmt_reader_t *r, hmt_event_t *ev) {
  if (r->failed) return r->err.code ? r->err.code : -1;
  if (!r->started) {
    int err = start(r);
    if (err) { r->failed = 1; return err; }
  }
  if (r->out_pos < r->out_n) {
    *ev = r->out[r->out_pos++];
    return 1;
  }
  if (r->heap_n == 0) return 0;
  size_t top = r->heap[0];
  uint64_t t0 = r->streams[top].ev.time;
  /* the second in time is a child of the first */
  if (r->track_live && ((r->heap_n > 1 && r->streams[r->heap[1]].ev.time == t0) ||
                        (r->heap_n > 2 && r->streams[r->heap[2]].ev.time == t0))) {
    int shared, err = gather_tick(r, t0, &shared);
    if (!err) err = order_tick(r, shared);
    if (err) { r->failed = 1; return err; }
    *ev = r->out[r->out_pos++];
    return 1;
  }
  *ev = r->streams[top].ev;
  if (r->track_live && track(r, ev, NULL) < 0) { r->failed = 1; return r->err.code; }
  int k = fill(r, &r->streams[top]);
  if (k < 0) { r->failed = 1; return k; }
  r->streams[top].has_ev = k;
  if (k == 0) r->heap[0] = r->heap[--r->heap_n];
  sift_down(r, 0);
  return 1;
}

int hmt_rewind(hmt_reader_t *r) {
  for (size_t i = 0; i < r->nstreams; i++) {
    stream_t *s = &r->streams[i];
    s->next = 0; s->p = s->end = s->start = NULL; s->has_ev = 0; s->model_ok = s->m4_ok = 0;
    s->last_time = 0;  /* else every time of the new pass is held at the old pass's last one */
  }
  free(r->heap);
  r->heap = NULL;
  r->heap_n = 0;
  free(r->tick_s);
  r->tick_s = NULL;
  r->tick_n = r->out_n = r->out_pos = 0;
  hmt_map_free(&r->live);
  hmt_map_free(&r->tick_addr);
  hmt_map_free(&r->tick_dead);
  r->started = r->failed = 0;
  r->progress = 0;
  memset(&r->err, 0, sizeof r->err);
  return 0;
}
