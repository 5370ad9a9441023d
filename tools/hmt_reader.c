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
  int has_ev;
  hmt_event_t ev;
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
   * and another's allocation of the same address within a tick (before()). */
  hmt_map_t live;
  int track_live;
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

/* 1 when the live addresses rule ev out now: it frees an address not live
 * (rel: released(ev)), or allocates one that is live (a realloc in place
 * keeps its own). */
static int blocked(const hmt_reader_t *r, const hmt_event_t *ev, uint64_t rel) {
  if (rel && !live_by(r, rel)) return 1;
  return ev->type != HPCMEM_EV_FREE && ev->ptr != rel && !(ev->type == HPCMEM_EV_REALLOC && ev->old_ptr == ev->ptr) &&
         live_by(r, ev->ptr);
}

/* Merge order of two threads' next events.  Columnar blocks keep time in
 * ticks (2^16 ns since format 1.3), rounded down, so events of different
 * threads in the same tick come in an unknown order.  The addresses live
 * so far settle what they can.  An event the live addresses rule out waits
 * for the events of other threads in the tick, among them the one it must
 * follow: a free of an address that is not live waits for its allocation
 * (a block handed to another thread and freed there within 65 us: Open
 * MPI's progress thread does it at start-up; taken first, the free was
 * lost and the block stayed live to the end), and an allocation of an
 * address that is live waits for its free (a producer getting back at once
 * the address its consumer thread just freed: tests/trace/handoff_app.c
 * lost 1,257 of 20,000 frees and read a peak of 382 KiB for 177 KiB;
 * now none, and 354 KiB: allocations first within the tick).  Of
 * the rest, a free of a live address goes before another thread's
 * allocation of it (which it made possible); a free of a block that
 * another thread allocated waits for that thread's events of the tick (it
 * may free the block itself and allocate the address again: the free is
 * of that one).  Otherwise allocations go before frees -- the peak within
 * a tick errs upwards, never below what the program held (a thread's last
 * allocations before a barrier against another's frees after it) -- and
 * then the order in the file.  A thread's own order is never changed.
 * Liveness only reorders events of one tick, so the merge stays in time
 * order whatever it decides. */
static int before(const hmt_reader_t *r, size_t a, size_t b) {
  const stream_t *x = &r->streams[a], *y = &r->streams[b];
  if (x->ev.time != y->ev.time) return x->ev.time < y->ev.time;
  uint64_t rx = released(&x->ev), ry = released(&y->ev);
  if (r->track_live) {
    int bx = blocked(r, &x->ev, rx), by = blocked(r, &y->ev, ry);
    if (bx != by) return by;
  }
  if (rx && rx == y->ev.ptr && !hmt_event_frees(&y->ev)) return 1;
  if (ry && ry == x->ev.ptr && !hmt_event_frees(&x->ev)) return 0;
  if (r->track_live) {
    const uint64_t *lx = live_by(r, rx), *ly = live_by(r, ry);
    int wx = lx && *lx == y->ev.tid && *lx != x->ev.tid, wy = ly && *ly == x->ev.tid && *ly != y->ev.tid;
    if (wx != wy) return wy;
  }
  int fx = hmt_event_frees(&x->ev), fy = hmt_event_frees(&y->ev);
  if (fx != fy) return fy;
  if (x->block_off != y->block_off) return x->block_off < y->block_off;
  return a < b;
}

/* The live addresses after ev, each with the thread that allocated it
 * (only what before() asks about). */
static int track(hmt_reader_t *r, const hmt_event_t *ev) {
  uint64_t old = ev->type == HPCMEM_EV_FREE ? ev->ptr : ev->type == HPCMEM_EV_REALLOC ? ev->old_ptr : 0;
  if (old && old != HMT_MAP_EMPTY) hmt_map_del(&r->live, old, NULL);
  if (ev->type != HPCMEM_EV_FREE && ev->ptr && ev->ptr != HMT_MAP_EMPTY) {
    uint64_t *v = hmt_map_put(&r->live, ev->ptr, NULL);
    if (!v) return fail(r, NULL, -ENOMEM, 0, "out of memory");
    *v = ev->tid;
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
  if (!r->heap) return fail(r, NULL, -ENOMEM, 0, "out of memory");
  r->heap_n = 0;
  r->track_live = r->nstreams > 1;
  for (size_t i = 0; i < r->nstreams; i++) {
    int k = fill(r, &r->streams[i]);
    if (k < 0) return k;
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
  if (r->heap_n == 0) return 0;
  size_t top = r->heap[0];
  if (r->track_live && r->heap_n > 2 && blocked(r, &r->streams[top].ev, released(&r->streams[top].ev))) {
    /* the heap was ordered against fewer live addresses: with three threads
     * or more, an event the live set now lets go may sit below this one
     * (rare: only same-tick hand-overs, so the O(threads) rebuild is cheap) */
    for (size_t i = r->heap_n / 2; i-- > 0;) sift_down(r, i);
    top = r->heap[0];
  }
  *ev = r->streams[top].ev;
  if (r->track_live && track(r, ev) < 0) { r->failed = 1; return r->err.code; }
  int k = fill(r, &r->streams[top]);
  if (k < 0) { r->failed = 1; return k; }
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
  hmt_map_free(&r->live);
  r->started = r->failed = 0;
  r->progress = 0;
  memset(&r->err, 0, sizeof r->err);
  return 0;
}
