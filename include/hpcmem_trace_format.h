/**
 * @file hpcmem_trace_format.h
 * @brief The on-disk format of libhpcmem allocation traces (".hmt", version 1).
 *
 * This header is the contract between the recorder inside libhpcmem
 * (src/trace/) and the post-run tools (hpcmem-report, hpcmem-replay, or any
 * program of your own): both use the layouts, constants and the inline
 * encoders/decoders below, so the two sides cannot drift apart.  The format
 * is described for humans in docs/trace-format.md.
 *
 * A file is a 256-byte header followed by blocks.  Every block carries its
 * own length and two CRC-32C checksums (of its header and of its payload),
 * so a reader can stop cleanly at the last complete block of a truncated
 * file and name the offset of a damaged one.  All integers are little-endian.
 * Event records inside a block are varint / delta encoded against a state
 * that starts from the block header; the models of a format 1.2 block may
 * continue those of its thread's previous block (HMT_BF_CHAIN).
 *
 * Nothing here allocates memory or calls the C library beyond memcpy, so the
 * recorder can use it inside malloc.
 */
#ifndef HPCMEM_TRACE_FORMAT_H
#define HPCMEM_TRACE_FORMAT_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#ifdef __cplusplus
extern "C" {
#endif

/* ------------------------------------------------------------------ */
/* Constants                                                            */

#define HMT_FILE_MAGIC "HPCMEMTR"          /**< 8 bytes at offset 0 */
#define HMT_VERSION_MAJOR 1                /**< readers reject other majors */
#define HMT_VERSION_MINOR 4                /**< readers accept any minor (1: columnar EVENTS blocks, 2: with chained models, 3: streams compressed one by one, 4: events coded under models, codec HMT_CODEC_MODEL) */
#define HMT_HEADER_SIZE 256
#define HMT_BLOCK_MAGIC 0x42544d48u        /**< "HMTB" in file byte order */
#define HMT_BLOCK_HEADER_SIZE 56
#define HMT_MAX_DEPTH 4096                 /**< deepest stack a reader accepts */
#define HMT_MAX_BLOCK (1u << 30)           /**< largest raw or stored block payload */
#define HMT_MAX_RECORD(depth) (16 + 10 * ((size_t)(depth) + 2))  /**< bound of one encoded record */

/** Allocation event kinds (the recorder's `kind` argument and the record type). */
enum {
  HPCMEM_EV_MALLOC = 1,   /**< malloc, operator new */
  HPCMEM_EV_CALLOC = 2,   /**< calloc (size = nmemb * size) */
  HPCMEM_EV_REALLOC = 3,  /**< realloc: old_ptr -> ptr; ptr 0 and size 0 means old_ptr was freed */
  HPCMEM_EV_FREE = 4,     /**< free, operator delete */
  HPCMEM_EV_MEMALIGN = 5  /**< posix_memalign, aligned_alloc, memalign, valloc, pvalloc (with align) */
};
/** OR'ed into a kind: the event was caused by libhpcmem itself ('S' in WMTrace), not the application ('A'). */
#define HPCMEM_EV_SYS 0x10

/** Record types that are not events. */
enum {
  HMT_REC_STACK = 14,  /**< definition of call-stack nodes (a trie of stacks sharing their outer frames) */
  HMT_REC_EXT = 15     /**< extension: varint type, varint length, bytes (skipped by readers that do not know it) */
};
/** Tag byte of a record: type in bits 0-3, then these flags. */
#define HMT_TAG_TYPE 0x0f
#define HMT_TAG_SYS 0x10         /**< libhpcmem-internal event */
#define HMT_TAG_SAME_STACK 0x20  /**< allocation event: same stack id as the previous one (id omitted) */
#define HMT_TAG_RESERVED 0xc0    /**< must be 0 in version 1 */

/** Block types. */
enum {
  HMT_BLOCK_EVENTS = 1,   /**< one thread's records (events and stack definitions) */
  HMT_BLOCK_MODULES = 2,  /**< the loaded objects (for symbolising after the run) */
  HMT_BLOCK_FLUSH = 3     /**< marker written by every flush of all buffers: reason and recorder counters */
};
/** Block payload codecs.  HMT_CODEC_MODEL (format 1.4) is not a general
 *  compressor: an EVENTS payload coded record by record under the models
 *  of hpcmem_trace_model.h; other blocks never carry it. */
enum { HMT_CODEC_NONE = 0, HMT_CODEC_ZSTD = 1, HMT_CODEC_ZLIB = 2, HMT_CODEC_MODEL = 3 };

/** Why the buffers were flushed (first varint of a FLUSH block). */
enum {
  HMT_FLUSH_EXPLICIT = 0,  /**< asked for (tests, hpcmem API) */
  HMT_FLUSH_EXIT = 1,      /**< normal process exit */
  HMT_FLUSH_FINALIZE = 2,  /**< MPI_Finalize */
  HMT_FLUSH_ABORT = 3,     /**< MPI_Abort */
  HMT_FLUSH_EXEC = 4,      /**< an exec* call: the program is replaced (or the exec failed and it goes on).
                                Readers older than this value name it "reason 4". */
  HMT_FLUSH_SIGNAL = 0x100 /**< + signal number: fatal signal */
};

/** Counters of the recorder, written in every FLUSH block after the reason,
 *  as a varint count followed by that many varints in this order (new
 *  fields are only ever appended).  X(name, help) */
#define HMT_FLUSH_FIELDS(X) \
  X(events, "events recorded") \
  X(stacks, "distinct stacks interned") \
  X(dropped, "events that could not be recorded (re-entrant while flushing, no memory)") \
  X(blocks, "event blocks written") \
  X(raw_bytes, "event bytes before compression") \
  X(stored_bytes, "event bytes after compression") \
  X(memory_bytes, "memory held by the recorder (buffers, compressors, stack table)") \
  X(threads, "thread buffers created") \
  X(write_errors, "blocks that could not be written") \
  X(writer_blocks, "event blocks written by the writer thread (the others: by the recording threads themselves)")

/* Header flags. */
#define HMT_HF_RANK_FROM_MPI 0x1   /**< rank/size were set by MPI_Init (else: launcher guess) */
#define HMT_HF_CLOCK_OFFSET 0x2    /**< clock_offset_ns was measured against rank 0 */

/* ------------------------------------------------------------------ */
/* Little-endian access                                                 */

static inline void hmt_st16(uint8_t *p, uint16_t v) { p[0] = (uint8_t)v; p[1] = (uint8_t)(v >> 8); }
static inline void hmt_st32(uint8_t *p, uint32_t v) { for (int i = 0; i < 4; i++) p[i] = (uint8_t)(v >> (8 * i)); }
static inline void hmt_st64(uint8_t *p, uint64_t v) { for (int i = 0; i < 8; i++) p[i] = (uint8_t)(v >> (8 * i)); }
static inline uint16_t hmt_ld16(const uint8_t *p) { return (uint16_t)(p[0] | (p[1] << 8)); }
static inline uint32_t hmt_ld32(const uint8_t *p) {
  return (uint32_t)p[0] | ((uint32_t)p[1] << 8) | ((uint32_t)p[2] << 16) | ((uint32_t)p[3] << 24);
}
static inline uint64_t hmt_ld64(const uint8_t *p) { return (uint64_t)hmt_ld32(p) | ((uint64_t)hmt_ld32(p + 4) << 32); }

/* ------------------------------------------------------------------ */
/* CRC-32C (Castagnoli, reflected, init and final xor 0xffffffff)        */

static const uint32_t hmt_crc32c_table[256] = {
  0x00000000u, 0xf26b8303u, 0xe13b70f7u, 0x1350f3f4u, 0xc79a971fu, 0x35f1141cu,
  0x26a1e7e8u, 0xd4ca64ebu, 0x8ad958cfu, 0x78b2dbccu, 0x6be22838u, 0x9989ab3bu,
  0x4d43cfd0u, 0xbf284cd3u, 0xac78bf27u, 0x5e133c24u, 0x105ec76fu, 0xe235446cu,
  0xf165b798u, 0x030e349bu, 0xd7c45070u, 0x25afd373u, 0x36ff2087u, 0xc494a384u,
  0x9a879fa0u, 0x68ec1ca3u, 0x7bbcef57u, 0x89d76c54u, 0x5d1d08bfu, 0xaf768bbcu,
  0xbc267848u, 0x4e4dfb4bu, 0x20bd8edeu, 0xd2d60dddu, 0xc186fe29u, 0x33ed7d2au,
  0xe72719c1u, 0x154c9ac2u, 0x061c6936u, 0xf477ea35u, 0xaa64d611u, 0x580f5512u,
  0x4b5fa6e6u, 0xb93425e5u, 0x6dfe410eu, 0x9f95c20du, 0x8cc531f9u, 0x7eaeb2fau,
  0x30e349b1u, 0xc288cab2u, 0xd1d83946u, 0x23b3ba45u, 0xf779deaeu, 0x05125dadu,
  0x1642ae59u, 0xe4292d5au, 0xba3a117eu, 0x4851927du, 0x5b016189u, 0xa96ae28au,
  0x7da08661u, 0x8fcb0562u, 0x9c9bf696u, 0x6ef07595u, 0x417b1dbcu, 0xb3109ebfu,
  0xa0406d4bu, 0x522bee48u, 0x86e18aa3u, 0x748a09a0u, 0x67dafa54u, 0x95b17957u,
  0xcba24573u, 0x39c9c670u, 0x2a993584u, 0xd8f2b687u, 0x0c38d26cu, 0xfe53516fu,
  0xed03a29bu, 0x1f682198u, 0x5125dad3u, 0xa34e59d0u, 0xb01eaa24u, 0x42752927u,
  0x96bf4dccu, 0x64d4cecfu, 0x77843d3bu, 0x85efbe38u, 0xdbfc821cu, 0x2997011fu,
  0x3ac7f2ebu, 0xc8ac71e8u, 0x1c661503u, 0xee0d9600u, 0xfd5d65f4u, 0x0f36e6f7u,
  0x61c69362u, 0x93ad1061u, 0x80fde395u, 0x72966096u, 0xa65c047du, 0x5437877eu,
  0x4767748au, 0xb50cf789u, 0xeb1fcbadu, 0x197448aeu, 0x0a24bb5au, 0xf84f3859u,
  0x2c855cb2u, 0xdeeedfb1u, 0xcdbe2c45u, 0x3fd5af46u, 0x7198540du, 0x83f3d70eu,
  0x90a324fau, 0x62c8a7f9u, 0xb602c312u, 0x44694011u, 0x5739b3e5u, 0xa55230e6u,
  0xfb410cc2u, 0x092a8fc1u, 0x1a7a7c35u, 0xe811ff36u, 0x3cdb9bddu, 0xceb018deu,
  0xdde0eb2au, 0x2f8b6829u, 0x82f63b78u, 0x709db87bu, 0x63cd4b8fu, 0x91a6c88cu,
  0x456cac67u, 0xb7072f64u, 0xa457dc90u, 0x563c5f93u, 0x082f63b7u, 0xfa44e0b4u,
  0xe9141340u, 0x1b7f9043u, 0xcfb5f4a8u, 0x3dde77abu, 0x2e8e845fu, 0xdce5075cu,
  0x92a8fc17u, 0x60c37f14u, 0x73938ce0u, 0x81f80fe3u, 0x55326b08u, 0xa759e80bu,
  0xb4091bffu, 0x466298fcu, 0x1871a4d8u, 0xea1a27dbu, 0xf94ad42fu, 0x0b21572cu,
  0xdfeb33c7u, 0x2d80b0c4u, 0x3ed04330u, 0xccbbc033u, 0xa24bb5a6u, 0x502036a5u,
  0x4370c551u, 0xb11b4652u, 0x65d122b9u, 0x97baa1bau, 0x84ea524eu, 0x7681d14du,
  0x2892ed69u, 0xdaf96e6au, 0xc9a99d9eu, 0x3bc21e9du, 0xef087a76u, 0x1d63f975u,
  0x0e330a81u, 0xfc588982u, 0xb21572c9u, 0x407ef1cau, 0x532e023eu, 0xa145813du,
  0x758fe5d6u, 0x87e466d5u, 0x94b49521u, 0x66df1622u, 0x38cc2a06u, 0xcaa7a905u,
  0xd9f75af1u, 0x2b9cd9f2u, 0xff56bd19u, 0x0d3d3e1au, 0x1e6dcdeeu, 0xec064eedu,
  0xc38d26c4u, 0x31e6a5c7u, 0x22b65633u, 0xd0ddd530u, 0x0417b1dbu, 0xf67c32d8u,
  0xe52cc12cu, 0x1747422fu, 0x49547e0bu, 0xbb3ffd08u, 0xa86f0efcu, 0x5a048dffu,
  0x8ecee914u, 0x7ca56a17u, 0x6ff599e3u, 0x9d9e1ae0u, 0xd3d3e1abu, 0x21b862a8u,
  0x32e8915cu, 0xc083125fu, 0x144976b4u, 0xe622f5b7u, 0xf5720643u, 0x07198540u,
  0x590ab964u, 0xab613a67u, 0xb831c993u, 0x4a5a4a90u, 0x9e902e7bu, 0x6cfbad78u,
  0x7fab5e8cu, 0x8dc0dd8fu, 0xe330a81au, 0x115b2b19u, 0x020bd8edu, 0xf0605beeu,
  0x24aa3f05u, 0xd6c1bc06u, 0xc5914ff2u, 0x37faccf1u, 0x69e9f0d5u, 0x9b8273d6u,
  0x88d28022u, 0x7ab90321u, 0xae7367cau, 0x5c18e4c9u, 0x4f48173du, 0xbd23943eu,
  0xf36e6f75u, 0x0105ec76u, 0x12551f82u, 0xe03e9c81u, 0x34f4f86au, 0xc69f7b69u,
  0xd5cf889du, 0x27a40b9eu, 0x79b737bau, 0x8bdcb4b9u, 0x988c474du, 0x6ae7c44eu,
  0xbe2da0a5u, 0x4c4623a6u, 0x5f16d052u, 0xad7d5351u,
};

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <cpuid.h>
/* The SSE4.2 crc32 instruction computes the same CRC-32C 8 bytes at a time. */
__attribute__((target("sse4.2"))) static inline uint32_t hmt_crc32c_sse42(uint32_t crc, const uint8_t *p, size_t len) {
  uint64_t c = ~crc;
  for (; len >= 8; p += 8, len -= 8) {
    uint64_t v;
    memcpy(&v, p, 8);
    c = __builtin_ia32_crc32di(c, v);
  }
  uint32_t c32 = (uint32_t)c;
  while (len--) c32 = __builtin_ia32_crc32qi(c32, *p++);
  return ~c32;
}
/* cpuid, asked once per translation unit.  Not __builtin_cpu_supports: that
 * links libgcc's cpu-model constructor into every library including this
 * header, and libhpcmem.so ran it (4.6 KiB of code, cpuid) at every start,
 * tracing or not (docs/footprint.md). */
static inline int hmt_crc32c_has_sse42(void) {
  static int known; /* 0: not asked yet, 1: no, 2: yes */
  int k = __atomic_load_n(&known, __ATOMIC_RELAXED);
  if (!k) {
    unsigned a, b, c, d;
    k = __get_cpuid(1, &a, &b, &c, &d) && (c & bit_SSE4_2) ? 2 : 1;
    __atomic_store_n(&known, k, __ATOMIC_RELAXED);
  }
  return k == 2;
}
#define HMT_CRC32C_HW 1
#endif

/** Continue a CRC-32C over len bytes; start with crc = 0. */
static inline uint32_t hmt_crc32c(uint32_t crc, const void *buf, size_t len) {
  const uint8_t *p = (const uint8_t *)buf;
#ifdef HMT_CRC32C_HW
  if (len >= 64 && hmt_crc32c_has_sse42()) return hmt_crc32c_sse42(crc, p, len);
#endif
  crc = ~crc;
  while (len--) crc = hmt_crc32c_table[(crc ^ *p++) & 0xff] ^ (crc >> 8);
  return ~crc;
}

/* ------------------------------------------------------------------ */
/* Varints: unsigned LEB128 (7 bits a byte, low first, at most 10 bytes);  */
/* signed values are zigzag mapped first.                                 */

static inline uint8_t *hmt_put_varint(uint8_t *p, uint64_t v) {
  while (v >= 0x80) { *p++ = (uint8_t)(v | 0x80); v >>= 7; }
  *p++ = (uint8_t)v;
  return p;
}
/** Decode one varint; NULL when it runs past end or is longer than 10 bytes. */
static inline const uint8_t *hmt_get_varint(const uint8_t *p, const uint8_t *end, uint64_t *v) {
  if (p < end && *p < 0x80) { *v = *p; return p + 1; }  /* most are one byte: the loop costs 20 instructions */
  uint64_t x = 0;
  for (unsigned shift = 0; shift < 64; shift += 7) {
    if (p >= end) return NULL;
    uint8_t b = *p++;
    if (shift == 63 && b > 1) return NULL;  /* more than 64 bits */
    x |= (uint64_t)(b & 0x7f) << shift;
    if (!(b & 0x80)) { *v = x; return p; }
  }
  return NULL;
}
static inline uint64_t hmt_zigzag(int64_t v) { return ((uint64_t)v << 1) ^ (uint64_t)(v >> 63); }
static inline int64_t hmt_unzigzag(uint64_t v) { return (int64_t)(v >> 1) ^ -(int64_t)(v & 1); }

/* ------------------------------------------------------------------ */
/* File header (256 bytes at offset 0)                                   */
/*                                                                      */
/*   0 magic[8] "HPCMEMTR"     8 u16 version_major   10 u16 version_minor */
/*  12 u32 header_size (256)  16 u32 flags (HMT_HF_*)                     */
/*  20 i32 rank               24 i32 size             28 u32 pid          */
/*  32 i64 clock_offset_ns: add to a time stamp to get the job's clock,   */
/*         common to all ranks (the MPI layer: ns since the job's origin)  */
/*  40 u64 start_ns (CLOCK_MONOTONIC)  48 u64 start_realtime_ns (epoch)   */
/*  56 u32 pointer_size       60 u32 page_size                            */
/*  64 u32 max_depth          68 u32 buffer_size      72 u32 codec        */
/*  76 u32 reserved (0)       80 hostname[64]         144 jobid[64]       */
/* 208 reserved (0) up to    252 u32 CRC-32C of bytes 0..251              */

typedef struct hmt_header {
  uint16_t version_major, version_minor;
  uint32_t flags;
  int32_t rank, size;
  uint32_t pid;
  int64_t clock_offset_ns;
  uint64_t start_ns, start_realtime_ns;
  uint32_t pointer_size, page_size, max_depth, buffer_size, codec;
  char hostname[64];  /* NUL-terminated */
  char jobid[64];     /* NUL-terminated */
} hmt_header_t;

/** Result codes of the decoders (negative). */
enum {
  HMT_OK = 0,
  HMT_E_TRUNCATED = -1,  /**< data ends inside the structure */
  HMT_E_MAGIC = -2,      /**< not a trace file / not a block */
  HMT_E_VERSION = -3,    /**< unsupported major version */
  HMT_E_CHECKSUM = -4,   /**< CRC mismatch */
  HMT_E_RANGE = -5,      /**< a field has an impossible value */
  HMT_E_RECORD = -6      /**< malformed record inside a block */
};

static inline void hmt_header_encode(const hmt_header_t *h, uint8_t out[HMT_HEADER_SIZE]) {
  memset(out, 0, HMT_HEADER_SIZE);
  memcpy(out, HMT_FILE_MAGIC, 8);
  hmt_st16(out + 8, h->version_major); hmt_st16(out + 10, h->version_minor);
  hmt_st32(out + 12, HMT_HEADER_SIZE); hmt_st32(out + 16, h->flags);
  hmt_st32(out + 20, (uint32_t)h->rank); hmt_st32(out + 24, (uint32_t)h->size); hmt_st32(out + 28, h->pid);
  hmt_st64(out + 32, (uint64_t)h->clock_offset_ns);
  hmt_st64(out + 40, h->start_ns); hmt_st64(out + 48, h->start_realtime_ns);
  hmt_st32(out + 56, h->pointer_size); hmt_st32(out + 60, h->page_size);
  hmt_st32(out + 64, h->max_depth); hmt_st32(out + 68, h->buffer_size); hmt_st32(out + 72, h->codec);
  for (int i = 0; i < 63 && h->hostname[i]; i++) out[80 + i] = (uint8_t)h->hostname[i];
  for (int i = 0; i < 63 && h->jobid[i]; i++) out[144 + i] = (uint8_t)h->jobid[i];
  hmt_st32(out + 252, hmt_crc32c(0, out, 252));
}

/** Decode and check a file header from the first len bytes of a file. */
static inline int hmt_header_decode(const uint8_t *in, size_t len, hmt_header_t *h) {
  if (len < 8 || memcmp(in, HMT_FILE_MAGIC, 8) != 0) return len < 8 ? HMT_E_TRUNCATED : HMT_E_MAGIC;
  if (len < HMT_HEADER_SIZE) return HMT_E_TRUNCATED;
  if (hmt_ld32(in + 252) != hmt_crc32c(0, in, 252)) return HMT_E_CHECKSUM;
  memset(h, 0, sizeof *h);
  h->version_major = hmt_ld16(in + 8); h->version_minor = hmt_ld16(in + 10);
  if (h->version_major != HMT_VERSION_MAJOR) return HMT_E_VERSION;
  if (hmt_ld32(in + 12) != HMT_HEADER_SIZE) return HMT_E_RANGE;
  h->flags = hmt_ld32(in + 16);
  h->rank = (int32_t)hmt_ld32(in + 20); h->size = (int32_t)hmt_ld32(in + 24); h->pid = hmt_ld32(in + 28);
  h->clock_offset_ns = (int64_t)hmt_ld64(in + 32);
  h->start_ns = hmt_ld64(in + 40); h->start_realtime_ns = hmt_ld64(in + 48);
  h->pointer_size = hmt_ld32(in + 56); h->page_size = hmt_ld32(in + 60);
  h->max_depth = hmt_ld32(in + 64); h->buffer_size = hmt_ld32(in + 68); h->codec = hmt_ld32(in + 72);
  memcpy(h->hostname, in + 80, 63); memcpy(h->jobid, in + 144, 63);
  if (h->size < 1 || h->rank < -1 || h->rank >= h->size || (h->pointer_size != 4 && h->pointer_size != 8))
    return HMT_E_RANGE;
  return HMT_OK;
}

/* ------------------------------------------------------------------ */
/* Block header (56 bytes), followed by stored_len payload bytes          */
/*                                                                      */
/*   0 u32 magic HMT_BLOCK_MAGIC   4 u8 type   5 u8 codec   6 u16 flags(0) */
/*   8 u32 stored_len (payload bytes in the file)                          */
/*  12 u32 raw_len (payload bytes after decompression)                     */
/*  16 u32 tid (kernel thread id of an EVENTS block, else 0)               */
/*  20 u32 count (records in an EVENTS block)                              */
/*  24 u64 base_time  32 u64 base_ptr  40 u64 base_stack: the decoder state */
/*         the first record of an EVENTS block is encoded against          */
/*  48 u32 CRC-32C of the stored payload   52 u32 CRC-32C of bytes 0..51   */

typedef struct hmt_block {
  uint8_t type, codec;
  uint16_t flags;
  uint32_t stored_len, raw_len, tid, count;
  uint64_t base_time, base_ptr, base_stack;
  uint32_t payload_crc;
} hmt_block_t;

static inline void hmt_block_encode(const hmt_block_t *b, uint8_t out[HMT_BLOCK_HEADER_SIZE]) {
  hmt_st32(out, HMT_BLOCK_MAGIC);
  out[4] = b->type; out[5] = b->codec; hmt_st16(out + 6, b->flags);
  hmt_st32(out + 8, b->stored_len); hmt_st32(out + 12, b->raw_len);
  hmt_st32(out + 16, b->tid); hmt_st32(out + 20, b->count);
  hmt_st64(out + 24, b->base_time); hmt_st64(out + 32, b->base_ptr); hmt_st64(out + 40, b->base_stack);
  hmt_st32(out + 48, b->payload_crc);
  hmt_st32(out + 52, hmt_crc32c(0, out, 52));
}

/** Decode and check a block header (not its payload). */
static inline int hmt_block_decode(const uint8_t *in, size_t len, hmt_block_t *b) {
  if (len < HMT_BLOCK_HEADER_SIZE) return HMT_E_TRUNCATED;
  if (hmt_ld32(in) != HMT_BLOCK_MAGIC) return HMT_E_MAGIC;
  if (hmt_ld32(in + 52) != hmt_crc32c(0, in, 52)) return HMT_E_CHECKSUM;
  b->type = in[4]; b->codec = in[5]; b->flags = hmt_ld16(in + 6);
  b->stored_len = hmt_ld32(in + 8); b->raw_len = hmt_ld32(in + 12);
  b->tid = hmt_ld32(in + 16); b->count = hmt_ld32(in + 20);
  b->base_time = hmt_ld64(in + 24); b->base_ptr = hmt_ld64(in + 32); b->base_stack = hmt_ld64(in + 40);
  b->payload_crc = hmt_ld32(in + 48);
  if (b->codec > HMT_CODEC_MODEL || b->stored_len > HMT_MAX_BLOCK || b->raw_len > HMT_MAX_BLOCK ||
      (b->codec == HMT_CODEC_NONE && b->stored_len != b->raw_len))
    return HMT_E_RANGE;
  return HMT_OK;
}

/* ------------------------------------------------------------------ */
/* Records of an EVENTS block                                            */
/*                                                                      */
/* tag byte, then varints:                                              */
/*   MALLOC, CALLOC  dt, dptr, size, [stack]                            */
/*   MEMALIGN        dt, dptr, size, align, [stack]                      */
/*   REALLOC         dt, dptr, dold, size, [stack]                       */
/*   FREE            dt, dptr                                           */
/*   STACK           first, first - parent, n, frame[0], zigzag(frame[i]-frame[i-1])... */
/*   EXT             type, length, bytes                                 */
/* dt = time - state.time (ns, never negative within a thread);           */
/* dptr = zigzag(ptr - state.ptr); dold = zigzag(old_ptr - ptr);          */
/* [stack] = stack id, omitted when HMT_TAG_SAME_STACK says it equals     */
/* state.stack.  After each event state.time = time, state.ptr = ptr and  */
/* (allocation events) state.stack = stack.  Stack id 0 = no stack.       */
/*                                                                      */
/* Stacks form a trie from the outermost frame inwards, so stacks that    */
/* share their callers share nodes (as heaptrack's trace tree).  A STACK  */
/* record defines n nodes with the ids first .. first + n - 1: node       */
/* first + k is frame[n - 1 - k] called from node first + k - 1 (from    */
/* `parent` for k = 0; parent 0 is the root, and parent < first).  The   */
/* stack of node id is its frame, then the stack of its parent: so the    */
/* stack of the last node, first + n - 1, is frame[0] (innermost) ...     */
/* frame[n - 1], then the stack of parent.  Events name such a node.      */
/* Frames are return addresses (symbolise at address - 1).               */

typedef struct hmt_state { uint64_t time, ptr, stack; } hmt_state_t;

/** One decoded record. */
typedef struct hmt_record {
  unsigned type;       /**< HPCMEM_EV_* or HMT_REC_STACK / HMT_REC_EXT */
  unsigned sys;        /**< 1: libhpcmem-internal event */
  uint64_t time, ptr, old_ptr, size, align, stack;
  /* HMT_REC_STACK: nodes stack_id .. stack_id + depth - 1 on parent */
  uint64_t stack_id, parent;
  uint32_t depth;
  const uint8_t *frames;  /**< encoded frames (decode with hmt_stack_frames) */
  size_t frames_len;
  /* HMT_REC_EXT: */
  uint64_t ext_type;
  const uint8_t *ext;
  uint64_t ext_len;
} hmt_record_t;

static inline int hmt_is_alloc(unsigned type) {
  return type == HPCMEM_EV_MALLOC || type == HPCMEM_EV_CALLOC || type == HPCMEM_EV_REALLOC ||
         type == HPCMEM_EV_MEMALIGN;
}

/** Encode one event at p (room for HMT_MAX_RECORD(0) bytes); returns the end. */
static inline uint8_t *hmt_encode_event(uint8_t *p, hmt_state_t *st, unsigned type, int sys, uint64_t time,
                                        uint64_t ptr, uint64_t old_ptr, uint64_t size, uint64_t align,
                                        uint64_t stack) {
  uint8_t *tag = p++;
  *tag = (uint8_t)((type & HMT_TAG_TYPE) | (sys ? HMT_TAG_SYS : 0));
  p = hmt_put_varint(p, time - st->time);
  p = hmt_put_varint(p, hmt_zigzag((int64_t)(ptr - st->ptr)));
  if (type == HPCMEM_EV_REALLOC) p = hmt_put_varint(p, hmt_zigzag((int64_t)(old_ptr - ptr)));
  if (hmt_is_alloc(type)) {
    p = hmt_put_varint(p, size);
    if (type == HPCMEM_EV_MEMALIGN) p = hmt_put_varint(p, align);
    if (stack == st->stack) *tag |= HMT_TAG_SAME_STACK;
    else p = hmt_put_varint(p, stack);
    st->stack = stack;
  }
  st->time = time; st->ptr = ptr;
  return p;
}

/** Encode the definition of n stack nodes first .. first + n - 1 on parent
 *  (frames innermost first) at p (room for HMT_MAX_RECORD(n) bytes). */
static inline uint8_t *hmt_encode_stack(uint8_t *p, hmt_state_t *st, uint64_t first, uint64_t parent,
                                        const uint64_t *frames, uint32_t n) {
  *p++ = HMT_REC_STACK;
  p = hmt_put_varint(p, first);
  p = hmt_put_varint(p, first - parent);
  p = hmt_put_varint(p, n);
  uint64_t prev = 0;
  for (uint32_t i = 0; i < n; i++) {
    p = i ? hmt_put_varint(p, hmt_zigzag((int64_t)(frames[i] - prev))) : hmt_put_varint(p, frames[0]);
    prev = frames[i];
  }
  st->stack = first + n - 1;
  return p;
}

/** Decode the record at *pp (advanced past it) and update the state.
 *  Returns HMT_OK or HMT_E_RECORD (truncated or malformed). */
static inline int hmt_decode_record(const uint8_t **pp, const uint8_t *end, hmt_state_t *st, hmt_record_t *r) {
  const uint8_t *p = *pp;
  uint64_t v;
  if (p >= end) return HMT_E_RECORD;
  uint8_t tag = *p++;
  if (tag & HMT_TAG_RESERVED) return HMT_E_RECORD;
  r->type = tag & HMT_TAG_TYPE;
  r->sys = (tag & HMT_TAG_SYS) ? 1 : 0;
  if (r->type == HMT_REC_STACK) {
    if (tag != HMT_REC_STACK) return HMT_E_RECORD;
    uint64_t up;
    if (!(p = hmt_get_varint(p, end, &r->stack_id)) || !(p = hmt_get_varint(p, end, &up)) ||
        !(p = hmt_get_varint(p, end, &v)) || v == 0 || v > HMT_MAX_DEPTH || r->stack_id == 0 || up == 0 ||
        up > r->stack_id || r->stack_id + v < r->stack_id)
      return HMT_E_RECORD;
    r->parent = r->stack_id - up;
    r->depth = (uint32_t)v;
    r->frames = p;
    for (uint32_t i = 0; i < r->depth; i++)
      if (!(p = hmt_get_varint(p, end, &v))) return HMT_E_RECORD;
    r->frames_len = (size_t)(p - r->frames);
    st->stack = r->stack_id + r->depth - 1;
    *pp = p;
    return HMT_OK;
  }
  if (r->type == HMT_REC_EXT) {
    if (tag != HMT_REC_EXT || !(p = hmt_get_varint(p, end, &r->ext_type)) ||
        !(p = hmt_get_varint(p, end, &r->ext_len)) || r->ext_len > (uint64_t)(end - p))
      return HMT_E_RECORD;
    r->ext = p;
    *pp = p + r->ext_len;
    return HMT_OK;
  }
  if (r->type < HPCMEM_EV_MALLOC || r->type > HPCMEM_EV_MEMALIGN) return HMT_E_RECORD;
  if ((tag & HMT_TAG_SAME_STACK) && !hmt_is_alloc(r->type)) return HMT_E_RECORD;
  if (!(p = hmt_get_varint(p, end, &v))) return HMT_E_RECORD;
  r->time = st->time + v;
  if (r->time < st->time) return HMT_E_RECORD;  /* time wrapped */
  if (!(p = hmt_get_varint(p, end, &v))) return HMT_E_RECORD;
  r->ptr = st->ptr + (uint64_t)hmt_unzigzag(v);
  r->old_ptr = 0; r->size = 0; r->align = 0; r->stack = 0;
  if (r->type == HPCMEM_EV_REALLOC) {
    if (!(p = hmt_get_varint(p, end, &v))) return HMT_E_RECORD;
    r->old_ptr = r->ptr + (uint64_t)hmt_unzigzag(v);
  }
  if (hmt_is_alloc(r->type)) {
    if (!(p = hmt_get_varint(p, end, &r->size))) return HMT_E_RECORD;
    if (r->type == HPCMEM_EV_MEMALIGN && !(p = hmt_get_varint(p, end, &r->align))) return HMT_E_RECORD;
    if (tag & HMT_TAG_SAME_STACK) r->stack = st->stack;
    else if (!(p = hmt_get_varint(p, end, &r->stack))) return HMT_E_RECORD;
    st->stack = r->stack;
  }
  st->time = r->time; st->ptr = r->ptr;
  *pp = p;
  return HMT_OK;
}

/** Decode the frames of a STACK record into out[r->depth]. */
static inline int hmt_stack_frames(const hmt_record_t *r, uint64_t *out) {
  const uint8_t *p = r->frames, *end = r->frames + r->frames_len;
  uint64_t v, prev = 0;
  for (uint32_t i = 0; i < r->depth; i++) {
    if (!(p = hmt_get_varint(p, end, &v))) return HMT_E_RECORD;
    prev = i ? prev + (uint64_t)hmt_unzigzag(v) : v;
    out[i] = prev;
  }
  return HMT_OK;
}

/* ------------------------------------------------------------------ */
/* Columnar EVENTS payload (format 1.1, block flag HMT_BF_COLUMNS)        */
/*                                                                      */
/* The same records as above, regrouped before compression so that each   */
/* kind of value sits with its own kind and the compressor sees regular    */
/* streams, with two models that remove most of the address bytes:         */
/*   byte 0xC1 (never a valid row tag), varint tick shift s, then 7        */
/*   varint stream lengths (tags, time, addr, ref, size, stack, defs) and  */
/*   the streams in that order.                                           */
/* tags:  one byte per record: bits 0-4 as a row tag, bit 5 same stack,    */
/*        bit 6 the address is modelled (HMT_CTAG_MODEL), bit 7 0.          */
/* time:  per event varint (time >> s) - (previous time >> s); decoded     */
/*        time = tick << s (the state starts at base_time >> s).            */
/* addr:  per event without HMT_CTAG_MODEL: zigzag(ptr - previous ptr);   */
/*        realloc then zigzag(old - ptr).                                   */
/* ref:   free with HMT_CTAG_MODEL: varint d >= 1, the address of the d-th */
/*        latest allocation event of this block (allocations: malloc,     */
/*        calloc, memalign, realloc with ptr != 0, counted in order).     */
/* size:  allocation: varint size, memalign: then varint align.            */
/* stack: allocation without same stack: varint stack id.                  */
/* defs:  STACK and EXT records without their tag byte (tag type 14/15).   */
/* An allocation with HMT_CTAG_MODEL has the address most recently freed   */
/* (by a free with HMT_CTAG_MODEL) among blocks of its size: a table of    */
/* HMT_COL_FREED entries indexed by hmt_col_hash(size), each holding      */
/* (size, up to HMT_COL_DEPTH addresses, newest last); a modelled free    */
/* pushes its allocation's address (dropping the oldest when full), a      */
/* modelled allocation pops it.  Every block starts with an empty table.   */

#define HMT_BF_COLUMNS 0x1      /**< block flag: EVENTS payload in columns */
#define HMT_COL_MARK 0xC1       /**< first byte of a columnar payload */
#define HMT_COL_STREAMS 7
#define HMT_CTAG_ADDR 0xc0     /**< tag bits 6-7: address mode */
#define HMT_CTAG_MODEL 0xc0    /**< address mode 3: modelled */
#define HMT_COL_HIST 3
#define HMT_COL_FREED_BITS 12
#define HMT_COL_FREED (1u << HMT_COL_FREED_BITS)
#define HMT_COL_DEPTH 4
#define HMT_COL_LIVE_BITS 15    /* the encoder's table of live allocations */
#define HMT_COL_LIVE (1u << HMT_COL_LIVE_BITS)

typedef struct { uint64_t size, addr[HMT_COL_DEPTH]; uint32_t n, pad; } hmt_col_freed_t;
typedef struct { uint64_t addr, size; uint64_t idx; } hmt_col_live_t;
/** Work tables of the columnar encoder (the decoder needs only freed). */
typedef struct { hmt_col_freed_t freed[HMT_COL_FREED]; hmt_col_live_t live[HMT_COL_LIVE]; } hmt_col_work_t;

static inline uint32_t hmt_col_hash(uint64_t v, unsigned bits) {
  return (uint32_t)((v * 0x9e3779b97f4a7c15ull) >> (64 - bits));
}
static inline unsigned hmt_varint_len(uint64_t v) { unsigned n = 1; while (v >= 0x80) { v >>= 7; n++; } return n; }
static inline int hmt_col_pop(hmt_col_freed_t *t, uint64_t size, uint64_t *addr) {
  hmt_col_freed_t *e = &t[hmt_col_hash(size, HMT_COL_FREED_BITS)];
  if (e->size != size || e->n == 0) return 0;
  *addr = e->addr[e->n - 1];
  return 1;
}
static inline void hmt_col_taken(hmt_col_freed_t *t, uint64_t size) {
  t[hmt_col_hash(size, HMT_COL_FREED_BITS)].n--;
}
static inline void hmt_col_push(hmt_col_freed_t *t, uint64_t size, uint64_t addr) {
  hmt_col_freed_t *e = &t[hmt_col_hash(size, HMT_COL_FREED_BITS)];
  if (e->size != size) { e->size = size; e->n = 0; }
  if (e->n == HMT_COL_DEPTH) { memmove(e->addr, e->addr + 1, (HMT_COL_DEPTH - 1) * sizeof e->addr[0]); e->n--; }
  e->addr[e->n++] = addr;
}

/* The encoder writes each stream into 4 KiB chunks of one pool (the
 * streams together are never longer than the rows: every value is at most
 * as long as the row's, and a modelled value is shorter or absent). */
#define HMT_COL_CHUNK 4096u
typedef struct { uint8_t *p, *end; uint32_t first, last; } hmt_col_stream_t;
typedef struct {
  uint8_t *pool;
  uint32_t nchunks, used;
  uint32_t *next, *fill;  /* per chunk: next chunk of its stream, bytes used */
  hmt_col_stream_t s[HMT_COL_STREAMS];
} hmt_col_pool_t;

/** Pool bytes the encoder needs for len bytes of rows (chunks plus their
 *  two u32 per chunk of bookkeeping). */
static inline size_t hmt_col_pool_size(size_t len) {
  size_t n = (len + HMT_COL_CHUNK - 1) / HMT_COL_CHUNK + HMT_COL_STREAMS + 1;
  return n * (HMT_COL_CHUNK + 8);
}
static inline int hmt_col_newchunk(hmt_col_pool_t *P, hmt_col_stream_t *s) {
  if (P->used == P->nchunks) return -1;
  uint32_t c = P->used++;
  P->next[c] = UINT32_MAX; P->fill[c] = 0;
  if (s->p) { P->fill[s->last] = (uint32_t)(s->p - (P->pool + (size_t)s->last * HMT_COL_CHUNK)); P->next[s->last] = c; }
  else s->first = c;
  s->last = c;
  s->p = P->pool + (size_t)c * HMT_COL_CHUNK;
  s->end = s->p + HMT_COL_CHUNK;
  return 0;
}
static inline int hmt_col_put(hmt_col_pool_t *P, int k, const uint8_t *b, size_t n) {
  hmt_col_stream_t *s = &P->s[k];
  while (n) {
    if (s->p == s->end && hmt_col_newchunk(P, s)) return -1;
    size_t m = (size_t)(s->end - s->p) < n ? (size_t)(s->end - s->p) : n;
    memcpy(s->p, b, m); s->p += m; b += m; n -= m;
  }
  return 0;
}
static inline int hmt_col_putv(hmt_col_pool_t *P, int k, uint64_t v) {
  hmt_col_stream_t *s = &P->s[k];
  if (s->end - s->p >= 10) { s->p = hmt_put_varint(s->p, v); return 0; }
  uint8_t tmp[10];
  return hmt_col_put(P, k, tmp, (size_t)(hmt_put_varint(tmp, v) - tmp));
}

/* An address that is not modelled is a delta against one of the last
 * HMT_COL_HIST event addresses (the shortest; tag bits 6-7 say which). */
static inline uint8_t hmt_col_put_addr(hmt_col_pool_t *P, const uint64_t *hist, uint64_t ptr, int *e) {
  unsigned best = 0, bl = 99;
  for (unsigned k = 0; k < HMT_COL_HIST; k++) {
    unsigned l = hmt_varint_len(hmt_zigzag((int64_t)(ptr - hist[k])));
    if (l < bl) { bl = l; best = k; }
  }
  *e |= hmt_col_putv(P, 2, hmt_zigzag((int64_t)(ptr - hist[best])));
  return (uint8_t)(best << 6);
}

/* Close the streams of P and write the payload at out: the mark, the tick
 * shift, (format 1.2: the number of streams,) each stream's length, then
 * the streams.  0 when it would be longer than len + 64 bytes of rows. */
static inline size_t hmt_col_gather(hmt_col_pool_t *P, uint8_t *out, uint8_t mark, uint64_t shift, int nstreams,
                                    size_t len) {
  uint64_t slen[HMT_COL_STREAMS] = {0};
  for (int k = 0; k < HMT_COL_STREAMS; k++) {
    hmt_col_stream_t *s = &P->s[k];
    if (!s->p) continue;
    P->fill[s->last] = (uint32_t)(s->p - (P->pool + (size_t)s->last * HMT_COL_CHUNK));
    for (uint32_t c = s->first; c != UINT32_MAX; c = P->next[c]) slen[k] += P->fill[c];
  }
  uint8_t *o = out;
  *o++ = mark;
  o = hmt_put_varint(o, shift);
  if (nstreams) o = hmt_put_varint(o, HMT_COL_STREAMS);
  for (int k = 0; k < HMT_COL_STREAMS; k++) o = hmt_put_varint(o, slen[k]);
  size_t total = (size_t)(o - out);
  for (int k = 0; k < HMT_COL_STREAMS; k++) total += slen[k];
  if (total > len + 64) return 0;
  for (int k = 0; k < HMT_COL_STREAMS; k++) {
    if (!P->s[k].p) continue;
    for (uint32_t c = P->s[k].first; c != UINT32_MAX; c = P->next[c]) {
      memcpy(o, P->pool + (size_t)c * HMT_COL_CHUNK, P->fill[c]);
      o += P->fill[c];
    }
  }
  return (size_t)(o - out);
}

/** Regroup len bytes of rows (encoded against *st, which is advanced to
 *  their end) into a columnar payload at out (room for len + 64 bytes),
 *  with time ticks of 2^shift ns.  pool: hmt_col_pool_size(len) bytes;
 *  w: scratch tables.  Returns the payload length, 0 when the rows do not
 *  decode (nothing to regroup) or the payload would not be shorter. */
static inline size_t hmt_columns_encode(const uint8_t *rows, size_t len, hmt_state_t *st, unsigned shift,
                                        uint8_t *out, void *pool, hmt_col_work_t *w) {
  hmt_col_pool_t P;
  size_t nch = (len + HMT_COL_CHUNK - 1) / HMT_COL_CHUNK + HMT_COL_STREAMS + 1;
  memset(&P, 0, sizeof P);
  P.pool = (uint8_t *)pool; P.nchunks = (uint32_t)nch;
  P.next = (uint32_t *)(P.pool + nch * HMT_COL_CHUNK); P.fill = P.next + nch;
  for (uint32_t i = 0; i < HMT_COL_FREED; i++) w->freed[i].size = UINT64_MAX, w->freed[i].n = 0;
  for (uint32_t i = 0; i < HMT_COL_LIVE; i++) w->live[i].addr = 0;
  const uint8_t *p = rows, *end = rows + len;
  uint64_t nalloc = 0, hist[HMT_COL_HIST];
  for (int k = 0; k < HMT_COL_HIST; k++) hist[k] = st->ptr;
  hmt_record_t r;
  while (p < end) {
    const uint8_t *rec0 = p;
    uint64_t prev_time = st->time, prev_stack = st->stack;
    if (hmt_decode_record(&p, end, st, &r) != HMT_OK) return 0;
    uint8_t tag = *rec0 & (HMT_TAG_TYPE | HMT_TAG_SYS);
    if (r.type == HMT_REC_STACK || r.type == HMT_REC_EXT) {
      if (hmt_col_put(&P, 0, &tag, 1) || hmt_col_put(&P, 6, rec0 + 1, (size_t)(p - rec0 - 1))) return 0;
      continue;
    }
    int e = hmt_col_putv(&P, 1, (r.time >> shift) - (prev_time >> shift));
    int model = 0;
    if (r.type == HPCMEM_EV_FREE) {
      hmt_col_live_t *l = &w->live[hmt_col_hash(r.ptr, HMT_COL_LIVE_BITS)];
      if (r.ptr && l->addr == r.ptr && hmt_varint_len(nalloc - l->idx) <= hmt_varint_len(hmt_zigzag((int64_t)(r.ptr - hist[0])))) {
        model = 1;
        e |= hmt_col_putv(&P, 3, nalloc - l->idx);
        hmt_col_push(w->freed, l->size, r.ptr);
      }
      if (l->addr == r.ptr) l->addr = 0;
    } else {
      uint64_t pred;
      if (r.type != HPCMEM_EV_REALLOC && hmt_col_pop(w->freed, r.size, &pred) && pred == r.ptr) {
        model = 1;
        hmt_col_taken(w->freed, r.size);
      }
      if (!model) tag |= hmt_col_put_addr(&P, hist, r.ptr, &e);
      if (r.type == HPCMEM_EV_REALLOC) {
        e |= hmt_col_putv(&P, 2, hmt_zigzag((int64_t)(r.old_ptr - r.ptr)));
        if (r.old_ptr) {
          hmt_col_live_t *o = &w->live[hmt_col_hash(r.old_ptr, HMT_COL_LIVE_BITS)];
          if (o->addr == r.old_ptr) o->addr = 0;
        }
      }
      e |= hmt_col_putv(&P, 4, r.size);
      if (r.type == HPCMEM_EV_MEMALIGN) e |= hmt_col_putv(&P, 4, r.align);
      if (r.stack == prev_stack) tag |= HMT_TAG_SAME_STACK;
      else e |= hmt_col_putv(&P, 5, r.stack);
      if (r.type != HPCMEM_EV_REALLOC || r.ptr) {
        nalloc++;
        hmt_col_live_t *l = &w->live[hmt_col_hash(r.ptr, HMT_COL_LIVE_BITS)];
        l->addr = r.ptr; l->size = r.size; l->idx = nalloc - 1;
      }
    }
    if (model) tag |= HMT_CTAG_MODEL;
    else if (r.type == HPCMEM_EV_FREE) tag |= hmt_col_put_addr(&P, hist, r.ptr, &e);
    for (int k = HMT_COL_HIST - 1; k > 0; k--) hist[k] = hist[k - 1];
    hist[0] = r.ptr;
    e |= hmt_col_put(&P, 0, &tag, 1);
    if (e) return 0;
  }
  return hmt_col_gather(&P, out, HMT_COL_MARK, shift, 0, len);
}

/* A STACK or EXT record kept whole in the raw stream *raw (up to end):
 * find its length from its varints, copy it behind its type byte rt to *o
 * (up to oend) and decode it against *row, as the row reader will. */
static inline int hmt_col_copy_record(unsigned rt, const uint8_t **raw, const uint8_t *end, uint8_t **o,
                                      uint8_t *oend, hmt_state_t *row) {
  const uint8_t *q = *raw;
  uint64_t a, b, n;
  if (rt == HMT_REC_STACK) {
    if (!(q = hmt_get_varint(q, end, &a)) || !(q = hmt_get_varint(q, end, &b)) ||
        !(q = hmt_get_varint(q, end, &n)) || n > HMT_MAX_DEPTH)
      return HMT_E_RECORD;
    for (uint64_t f = 0; f < n; f++)
      if (!(q = hmt_get_varint(q, end, &a))) return HMT_E_RECORD;
  } else {
    if (!(q = hmt_get_varint(q, end, &a)) || !(q = hmt_get_varint(q, end, &n)) || n > (uint64_t)(end - q))
      return HMT_E_RECORD;
    q += n;
  }
  size_t rl = (size_t)(q - *raw);
  if ((size_t)(oend - *o) < rl + 1) return HMT_E_RANGE;
  uint8_t *r0 = *o, *w = *o;
  *w++ = (uint8_t)rt; memcpy(w, *raw, rl); w += rl;
  *raw = q; *o = w;
  const uint8_t *rp = r0;
  hmt_record_t rec;
  return hmt_decode_record(&rp, w, row, &rec) == HMT_OK ? HMT_OK : HMT_E_RECORD;
}

/* An event of the columns: its type valid, room for its row, its tick
 * (a delta in the time column *t, up to end) added to *tick without
 * overflowing the shift. */
static inline int hmt_col_event_start(unsigned type, const uint8_t *o, const uint8_t *oend, const uint8_t **t,
                                      const uint8_t *end, uint64_t *tick, unsigned shift) {
  uint64_t v;
  if (type < HPCMEM_EV_MALLOC || type > HPCMEM_EV_MEMALIGN) return HMT_E_RECORD;
  if ((size_t)(oend - o) < HMT_MAX_RECORD(0)) return HMT_E_RANGE;
  if (!(*t = hmt_get_varint(*t, end, &v)) || *tick + v < *tick || ((*tick + v) << shift) >> shift != *tick + v)
    return HMT_E_RECORD;
  *tick += v;
  return HMT_OK;
}

/* The stream lengths at p, then the streams up to end: s[k]..se[k].  The
 * tag stream holds one byte per record (count). */
static inline int hmt_col_split(const uint8_t *p, const uint8_t *end, uint64_t count, const uint8_t **s,
                                const uint8_t **se) {
  uint64_t sl[HMT_COL_STREAMS];
  for (int k = 0; k < HMT_COL_STREAMS; k++)
    if (!(p = hmt_get_varint(p, end, &sl[k])) || sl[k] > (uint64_t)(end - p)) return HMT_E_RECORD;
  for (int k = 0; k < HMT_COL_STREAMS; k++) {
    if (sl[k] > (uint64_t)(end - p)) return HMT_E_RECORD;
    s[k] = p; p += sl[k]; se[k] = p;
  }
  return p == end && sl[0] == count ? HMT_OK : HMT_E_RECORD;
}

/** Decode a columnar payload back into rows at out (out_cap bytes) that
 *  the row decoder reads from *st.  On entry *st is the block header's
 *  base state; on return it is the state the rows start from (time rounded
 *  down to the tick).  allocs: room for 2 * count words; freed: scratch.
 *  Returns HMT_OK, HMT_E_RECORD (malformed) or HMT_E_RANGE (out is too
 *  small: try again with more room); *out_len, *nrec: rows and records. */
static inline int hmt_columns_decode(const uint8_t *in, size_t len, hmt_state_t *st, uint8_t *out, size_t out_cap,
                                     size_t *out_len, uint64_t *nrec, uint64_t *allocs, uint64_t count,
                                     hmt_col_freed_t *freed) {
  const uint8_t *p = in, *end = in + len;
  uint64_t shift;
  if (p >= end || *p++ != HMT_COL_MARK || !(p = hmt_get_varint(p, end, &shift)) || shift > 40) return HMT_E_RECORD;
  const uint8_t *s[HMT_COL_STREAMS], *se[HMT_COL_STREAMS];
  if (hmt_col_split(p, end, count, s, se) != HMT_OK) return HMT_E_RECORD;
  for (uint32_t i = 0; i < HMT_COL_FREED; i++) freed[i].size = UINT64_MAX, freed[i].n = 0;
  st->time = (st->time >> shift) << shift;
  hmt_state_t row = *st;  /* the rows' encoder state */
  uint64_t tick = st->time >> shift, nalloc = 0, v, hist[HMT_COL_HIST];
  for (int k = 0; k < HMT_COL_HIST; k++) hist[k] = st->ptr;
  uint8_t *o = out, *oend = out + out_cap;
  for (uint64_t i = 0; i < count; i++) {
    uint8_t tag = s[0][i];
    unsigned type = tag & HMT_TAG_TYPE;
    unsigned mode = (tag & HMT_CTAG_ADDR) >> 6;
    if (type == HMT_REC_STACK || type == HMT_REC_EXT) {
      if (tag != type) return HMT_E_RECORD;
      int d = hmt_col_copy_record(type, &s[6], se[6], &o, oend, &row);
      if (d != HMT_OK) return d;
      continue;
    }
    int d = hmt_col_event_start(type, o, oend, &s[1], se[1], &tick, shift);
    if (d != HMT_OK) return d;
    uint64_t ptr = 0, old = 0, size = 0, align = 0, stack = 0;
    if (type == HPCMEM_EV_FREE) {
      if (tag & HMT_TAG_SAME_STACK) return HMT_E_RECORD;
      if (mode == 3) {
        if (!(s[3] = hmt_get_varint(s[3], se[3], &v)) || v == 0 || v > nalloc) return HMT_E_RECORD;
        ptr = allocs[2 * (nalloc - v)];
        hmt_col_push(freed, allocs[2 * (nalloc - v) + 1], ptr);
      } else {
        if (!(s[2] = hmt_get_varint(s[2], se[2], &v))) return HMT_E_RECORD;
        ptr = hist[mode] + (uint64_t)hmt_unzigzag(v);
      }
    } else {
      if (!(s[4] = hmt_get_varint(s[4], se[4], &size))) return HMT_E_RECORD;
      if (type == HPCMEM_EV_MEMALIGN && !(s[4] = hmt_get_varint(s[4], se[4], &align))) return HMT_E_RECORD;
      if (mode == 3) {
        if (type == HPCMEM_EV_REALLOC || !hmt_col_pop(freed, size, &ptr)) return HMT_E_RECORD;
        hmt_col_taken(freed, size);
      } else {
        if (!(s[2] = hmt_get_varint(s[2], se[2], &v))) return HMT_E_RECORD;
        ptr = hist[mode] + (uint64_t)hmt_unzigzag(v);
      }
      if (type == HPCMEM_EV_REALLOC) {
        if (!(s[2] = hmt_get_varint(s[2], se[2], &v))) return HMT_E_RECORD;
        old = ptr + (uint64_t)hmt_unzigzag(v);
      }
      if (tag & HMT_TAG_SAME_STACK) stack = row.stack;
      else if (!(s[5] = hmt_get_varint(s[5], se[5], &stack))) return HMT_E_RECORD;
      if (type != HPCMEM_EV_REALLOC || ptr) {
        if (nalloc >= count) return HMT_E_RECORD;
        allocs[2 * nalloc] = ptr; allocs[2 * nalloc + 1] = size;
        nalloc++;
      }
    }
    for (int k = HMT_COL_HIST - 1; k > 0; k--) hist[k] = hist[k - 1];
    hist[0] = ptr;
    o = hmt_encode_event(o, &row, type, (tag & HMT_TAG_SYS) != 0, tick << shift, ptr, old, size, align, stack);
  }
  for (int k = 1; k < HMT_COL_STREAMS; k++)
    if (s[k] != se[k]) return HMT_E_RECORD;
  *out_len = (size_t)(o - out);
  *nrec = count;
  return HMT_OK;
}

/* ------------------------------------------------------------------ */
/* Columnar EVENTS payload with chained models (format 1.2, block flags  */
/* HMT_BF_COLUMNS | HMT_BF_MODELS, optionally HMT_BF_CHAIN)              */
/*                                                                      */
/* The same records again, with models that a thread's blocks share: a  */
/* block with HMT_BF_CHAIN continues the models where the previous       */
/* EVENTS block of the same tid in the file left them (a reader reads a  */
/* thread's blocks in order anyway); one without starts them afresh.     */
/*   byte 0xC2, varint tick shift s, varint stream count (7), the 7      */
/*   varint stream lengths (tags, time, addr, ref, size, stack, defs) and */
/*   the streams in that order.                                          */
/* tags:  one byte per record: bits 0-2 the type (1-5 events, 6 STACK,    */
/*        7 EXT), bit 3 S, bits 4-5 the address mode, bit 6 same stack as */
/*        the previous allocation, bit 7 same size as the last allocation */
/*        with the same stack (the site table).  STACK/EXT: bits 3-7 0.   */
/* time:  per event varint (time >> s) - (previous time >> s).            */
/* addr:  explicit addresses, zigzag deltas (below); a realloc whose ref  */
/*        is 0 then zigzag(old - ptr).                                     */
/* ref:   a free in mode 1: varint d >= 1, the d-th latest allocation of  */
/*        the thread (d <= HMT_C2_RING), across blocks while chained; in   */
/*        mode 3: zigzag(index - index of the allocation last freed by     */
/*        reference); a realloc: varint d, its old block is the d-th latest */
/*        allocation (0: explicit; when it moved, old goes on top of its   */
/*        class's freed list).                                             */
/* size:  allocation without bit 7: varint size; memalign: varint align.  */
/* stack: allocation without bit 6: varint stack id.                      */
/* defs:  STACK and EXT records without their tag byte.                   */
/* Address modes.  free: 0, 2 zigzag(ptr - the address of the event 1, 2 */
/* events back); 1, 3 by reference (its allocation's address; it then    */
/* goes on top of its size class's freed list).  allocation               */
/* (malloc, calloc, memalign, realloc with ptr != 0) of size class c =    */
/* hmt_c2_class(size): 0 zigzag(ptr - address of the previous event),     */
/* 1 the top of c's freed list (popped), 2 c's last address + c's stride, */
/* 3 zigzag(ptr - c's last address).  After modes 0, 2, 3 the stride of c */
/* becomes ptr - c's last address (when there was one), and c's last      */
/* address ptr.  A freed list holds the HMT_C2_LIFO latest addresses.     */
/* realloc with ptr 0 (old freed): mode 0.  The site table: 4096 entries  */
/* indexed by hmt_col_hash(stack, 12), each (stack, size) of the latest   */
/* allocation with a stack of that hash.                                 */

#define HMT_BF_MODELS 0x2       /**< block flag: columns with models (format 1.2, mark 0xC2) */
#define HMT_BF_CHAIN 0x4        /**< block flag: the models continue from the tid's previous EVENTS block */
#define HMT_COL2_MARK 0xC2
#define HMT_C2_TYPE 0x07
#define HMT_C2_SYS 0x08
#define HMT_C2_MODE 0x30
#define HMT_C2_MODE_SHIFT 4
#define HMT_C2_SAME_STACK 0x40
#define HMT_C2_SAME_SIZE 0x80
#define HMT_C2_STACK_TYPE 6
#define HMT_C2_EXT_TYPE 7
#define HMT_C2_NCLASS 256
#define HMT_C2_LIFO 8
#define HMT_C2_SITE_BITS 12
#define HMT_C2_RING_BITS 20
#define HMT_C2_RING (1ull << HMT_C2_RING_BITS)  /**< farthest allocation a free may name */

/** The size classes of the model (libhpcmem's small classes: 16-byte steps
 *  to 128, eight per power of two to 1 KiB, four per power of two above).
 *  Only a prediction: a trace of another allocator stays exact. */
static inline unsigned hmt_c2_class(uint64_t size) {
  if (size <= 128) return size ? (unsigned)((size + 15) >> 4) : 1;
  unsigned e = 63u - (unsigned)__builtin_clzll(size - 1);  /* 2^e < size <= 2^(e+1) */
  if (e < 10) return 9 + (e - 7) * 8 + (unsigned)(((size - 1) >> (e - 3)) & 7);
  return 33 + (e - 10) * 4 + (unsigned)(((size - 1) >> (e - 2)) & 3);  /* at most 248 */
}

typedef struct { uint64_t lifo[HMT_C2_LIFO]; uint64_t last, stride; uint32_t n, pad; } hmt_c2_class_t;
typedef struct { uint64_t stack, size; } hmt_c2_site_t;
/** The models a thread's chained blocks share (encoder and decoder alike). */
typedef struct hmt_col_model {
  uint64_t nalloc;                  /**< allocations so far */
  uint64_t last_ref;                /**< index of the allocation last freed by reference */
  uint64_t hist[HMT_COL_HIST];      /**< the last event addresses */
  hmt_c2_class_t cls[HMT_C2_NCLASS];
  hmt_c2_site_t site[1u << HMT_C2_SITE_BITS];
} hmt_col_model_t;

static inline void hmt_c2_reset(hmt_col_model_t *m, uint64_t base_ptr) {
  memset(m, 0, sizeof *m);
  for (int k = 0; k < HMT_COL_HIST; k++) m->hist[k] = base_ptr;
  for (unsigned i = 0; i < (1u << HMT_C2_SITE_BITS); i++) m->site[i].stack = UINT64_MAX;
}
static inline void hmt_c2_push(hmt_col_model_t *m, unsigned c, uint64_t addr) {
  hmt_c2_class_t *k = &m->cls[c];
  if (k->n == HMT_C2_LIFO) { memmove(k->lifo, k->lifo + 1, (HMT_C2_LIFO - 1) * sizeof k->lifo[0]); k->n--; }
  k->lifo[k->n++] = addr;
}
/* after an allocation of class c at ptr, not taken from the freed list */
static inline void hmt_c2_fresh(hmt_col_model_t *m, unsigned c, uint64_t ptr) {
  hmt_c2_class_t *k = &m->cls[c];
  if (k->last) k->stride = ptr - k->last;
  k->last = ptr;
}
static inline void hmt_c2_hist(hmt_col_model_t *m, uint64_t ptr) {
  for (int k = HMT_COL_HIST - 1; k > 0; k--) m->hist[k] = m->hist[k - 1];
  m->hist[0] = ptr;
}

/** The encoder's map of the thread's live allocations: address -> (index,
 *  class), open addressing with linear probing in `mask + 1` entries (a
 *  power of two; addr 0 = empty).  The caller provides the table and keeps
 *  n + the block's records <= (mask + 1) / 2 (insertions beyond that are
 *  skipped: their frees fall back to addresses). */
typedef struct { uint64_t addr, idx_class; } hmt_c2_live_t;
typedef struct { hmt_c2_live_t *t; uint64_t mask, n; } hmt_c2_livemap_t;

static inline hmt_c2_live_t *hmt_c2_live_find(hmt_c2_livemap_t *L, uint64_t addr) {
  if (!L->t) return NULL;
  for (uint64_t i = hmt_col_hash(addr, 64) & L->mask;; i = (i + 1) & L->mask) {
    if (L->t[i].addr == addr) return &L->t[i];
    if (!L->t[i].addr) return NULL;
  }
}
static inline void hmt_c2_live_put(hmt_c2_livemap_t *L, uint64_t addr, uint64_t idx, unsigned c) {
  if (!L->t || !addr) return;
  uint64_t i = hmt_col_hash(addr, 64) & L->mask;
  for (; L->t[i].addr && L->t[i].addr != addr; i = (i + 1) & L->mask) {}
  if (!L->t[i].addr) {
    if (2 * (L->n + 1) > L->mask + 1) return;
    L->n++;
  }
  L->t[i].addr = addr; L->t[i].idx_class = idx << 8 | c;
}
/* backward-shift deletion keeps every probe chain whole */
static inline void hmt_c2_live_del(hmt_c2_livemap_t *L, hmt_c2_live_t *e) {
  uint64_t i = (uint64_t)(e - L->t), j = i;
  L->n--;
  for (;;) {
    L->t[i].addr = 0;
    for (;;) {
      j = (j + 1) & L->mask;
      if (!L->t[j].addr) return;
      uint64_t h = hmt_col_hash(L->t[j].addr, 64) & L->mask;
      /* move j to i unless its home lies cyclically in (i, j] */
      if (i <= j ? (h <= i || h > j) : (h <= i && h > j)) break;
    }
    L->t[i] = L->t[j];
    i = j;
  }
}

/** Regroup len bytes of rows (encoded against *st, advanced to their end)
 *  into a format 1.2 payload at out (room for len + 64 bytes), continuing
 *  the models m and L (chained != 0) or starting them afresh.  pool:
 *  hmt_col_pool_size(len) bytes.  Returns the payload length, 0 when the
 *  rows do not decode or the payload would not be shorter (the models are
 *  then in an undefined state: start afresh). */
static inline size_t hmt_columns2_encode(const uint8_t *rows, size_t len, hmt_state_t *st, unsigned shift,
                                         uint8_t *out, void *pool, hmt_col_model_t *m, hmt_c2_livemap_t *L,
                                         int chained) {
  hmt_col_pool_t P;
  size_t nch = (len + HMT_COL_CHUNK - 1) / HMT_COL_CHUNK + HMT_COL_STREAMS + 1;
  memset(&P, 0, sizeof P);
  P.pool = (uint8_t *)pool; P.nchunks = (uint32_t)nch;
  P.next = (uint32_t *)(P.pool + nch * HMT_COL_CHUNK); P.fill = P.next + nch;
  if (!chained) {
    hmt_c2_reset(m, st->ptr);
    if (L->t) memset(L->t, 0, (L->mask + 1) * sizeof *L->t);
    L->n = 0;
  }
  const uint8_t *p = rows, *end = rows + len;
  hmt_record_t r;
  while (p < end) {
    const uint8_t *rec0 = p;
    uint64_t prev_time = st->time, prev_stack = st->stack;
    if (hmt_decode_record(&p, end, st, &r) != HMT_OK) return 0;
    uint8_t tag = (uint8_t)((*rec0 & HMT_TAG_SYS) ? HMT_C2_SYS : 0);
    if (r.type == HMT_REC_STACK || r.type == HMT_REC_EXT) {
      tag = r.type == HMT_REC_STACK ? HMT_C2_STACK_TYPE : HMT_C2_EXT_TYPE;
      if (hmt_col_put(&P, 0, &tag, 1) || hmt_col_put(&P, 6, rec0 + 1, (size_t)(p - rec0 - 1))) return 0;
      continue;
    }
    tag |= (uint8_t)r.type;
    int e = hmt_col_putv(&P, 1, (r.time >> shift) - (prev_time >> shift));
    unsigned mode = 0;
    uint64_t best = 0;  /* explicit: the delta and its base */
    unsigned bl = 99;
    if (r.type == HPCMEM_EV_FREE) {
      for (unsigned k = 0; k < 2; k++) {
        unsigned l = hmt_varint_len(hmt_zigzag((int64_t)(r.ptr - m->hist[k])));
        if (l < bl) { bl = l; mode = k ? 2 : 0; best = hmt_zigzag((int64_t)(r.ptr - m->hist[k])); }
      }
      hmt_c2_live_t *l = r.ptr ? hmt_c2_live_find(L, r.ptr) : NULL;
      if (l) {
        uint64_t idx = l->idx_class >> 8, d = m->nalloc - idx, z = hmt_zigzag((int64_t)(idx - m->last_ref));
        unsigned c = (unsigned)(l->idx_class & 0xff);
        if (d >= 1 && d <= HMT_C2_RING && (hmt_varint_len(d) <= bl || hmt_varint_len(z) <= bl)) {
          if (hmt_varint_len(z) < hmt_varint_len(d)) { mode = 3; e |= hmt_col_putv(&P, 3, z); }
          else { mode = 1; e |= hmt_col_putv(&P, 3, d); }
          hmt_c2_push(m, c, r.ptr);
          m->last_ref = idx;
        }
        hmt_c2_live_del(L, l);
      }
      if (mode != 1 && mode != 3) e |= hmt_col_putv(&P, 2, best);
    } else {
      int is_alloc = r.type != HPCMEM_EV_REALLOC || r.ptr;
      unsigned c = hmt_c2_class(r.size);
      hmt_c2_class_t *k = &m->cls[c];
      if (!is_alloc) {
        e |= hmt_col_putv(&P, 2, hmt_zigzag((int64_t)(r.ptr - m->hist[0])));
      } else if (k->n && k->lifo[k->n - 1] == r.ptr) {
        mode = 1;
        k->n--;
      } else {
        if (k->last && k->last + k->stride == r.ptr) {
          mode = 2;
        } else {
          uint64_t z0 = hmt_zigzag((int64_t)(r.ptr - m->hist[0])), z3 = hmt_zigzag((int64_t)(r.ptr - k->last));
          if (k->last && hmt_varint_len(z3) < hmt_varint_len(z0)) { mode = 3; e |= hmt_col_putv(&P, 2, z3); }
          else e |= hmt_col_putv(&P, 2, z0);
        }
        hmt_c2_fresh(m, c, r.ptr);
      }
      if (r.type == HPCMEM_EV_REALLOC) {
        hmt_c2_live_t *o = r.old_ptr ? hmt_c2_live_find(L, r.old_ptr) : NULL;
        uint64_t d = o ? m->nalloc - (o->idx_class >> 8) : 0;
        if (o && d >= 1 && d <= HMT_C2_RING) {
          e |= hmt_col_putv(&P, 3, d);
          if (r.ptr != r.old_ptr) hmt_c2_push(m, (unsigned)(o->idx_class & 0xff), r.old_ptr);
        } else {
          e |= hmt_col_putv(&P, 3, 0);
          e |= hmt_col_putv(&P, 2, hmt_zigzag((int64_t)(r.old_ptr - r.ptr)));
        }
        if (o) hmt_c2_live_del(L, o);
      }
      if (r.stack == prev_stack) tag |= HMT_C2_SAME_STACK;
      else e |= hmt_col_putv(&P, 5, r.stack);
      hmt_c2_site_t *s = &m->site[hmt_col_hash(r.stack, HMT_C2_SITE_BITS)];
      if (s->stack == r.stack && s->size == r.size) tag |= HMT_C2_SAME_SIZE;
      else e |= hmt_col_putv(&P, 4, r.size);
      s->stack = r.stack; s->size = r.size;
      if (r.type == HPCMEM_EV_MEMALIGN) e |= hmt_col_putv(&P, 4, r.align);
      if (is_alloc) {
        m->nalloc++;
        hmt_c2_live_put(L, r.ptr, m->nalloc - 1, c);
      }
    }
    tag |= (uint8_t)(mode << HMT_C2_MODE_SHIFT);
    hmt_c2_hist(m, r.ptr);
    e |= hmt_col_put(&P, 0, &tag, 1);
    if (e) return 0;
  }
  return hmt_col_gather(&P, out, HMT_COL2_MARK, shift, 1, len);
}

/** Decode a format 1.2 payload into rows at out (out_cap bytes), as
 *  hmt_columns_decode does, continuing the models m (chained != 0: the
 *  state after the tid's previous block) or starting them afresh.  ring:
 *  the (address, size) of allocation i at ring[2 * (i % ring_cap)];
 *  ring_cap a power of two, at least min(HMT_C2_RING, m->nalloc + count)
 *  (grown without wrapping until it is HMT_C2_RING).  On an error the
 *  models are undefined (HMT_E_RANGE: restore them from a copy and try
 *  again with more room). */
static inline int hmt_columns2_decode(const uint8_t *in, size_t len, hmt_state_t *st, uint8_t *out, size_t out_cap,
                                      size_t *out_len, uint64_t *nrec, uint64_t count, hmt_col_model_t *m,
                                      uint64_t *ring, uint64_t ring_cap, int chained) {
  const uint8_t *p = in, *end = in + len;
  uint64_t shift, ns;
  if (p >= end || *p++ != HMT_COL2_MARK || !(p = hmt_get_varint(p, end, &shift)) || shift > 40 ||
      !(p = hmt_get_varint(p, end, &ns)) || ns != HMT_COL_STREAMS)
    return HMT_E_RECORD;
  if (!chained) hmt_c2_reset(m, st->ptr);
  if (!ring_cap || (ring_cap & (ring_cap - 1)) ||
      ring_cap < (m->nalloc + count < HMT_C2_RING ? m->nalloc + count : HMT_C2_RING))
    return HMT_E_RANGE;
  const uint8_t *s[HMT_COL_STREAMS], *se[HMT_COL_STREAMS];
  if (hmt_col_split(p, end, count, s, se) != HMT_OK) return HMT_E_RECORD;
  st->time = (st->time >> shift) << shift;
  hmt_state_t row = *st;
  uint64_t tick = st->time >> shift, v;
  uint8_t *o = out, *oend = out + out_cap;
  for (uint64_t i = 0; i < count; i++) {
    uint8_t tag = s[0][i];
    unsigned type = tag & HMT_C2_TYPE, mode = (tag & HMT_C2_MODE) >> HMT_C2_MODE_SHIFT;
    if (type == HMT_C2_STACK_TYPE || type == HMT_C2_EXT_TYPE) {
      if (tag != type) return HMT_E_RECORD;
      int d = hmt_col_copy_record(type == HMT_C2_STACK_TYPE ? HMT_REC_STACK : HMT_REC_EXT, &s[6], se[6], &o, oend, &row);
      if (d != HMT_OK) return d;
      continue;
    }
    int d = hmt_col_event_start(type, o, oend, &s[1], se[1], &tick, shift);
    if (d != HMT_OK) return d;
    uint64_t ptr = 0, old = 0, size = 0, align = 0, stack = 0;
    if (type == HPCMEM_EV_FREE) {
      if (tag & (HMT_C2_SAME_STACK | HMT_C2_SAME_SIZE)) return HMT_E_RECORD;
      if (mode == 1 || mode == 3) {
        if (!(s[3] = hmt_get_varint(s[3], se[3], &v))) return HMT_E_RECORD;
        uint64_t idx = mode == 1 ? m->nalloc - v : m->last_ref + (uint64_t)hmt_unzigzag(v);
        if (idx >= m->nalloc || m->nalloc - idx > HMT_C2_RING) return HMT_E_RECORD;
        const uint64_t *a = &ring[2 * (idx & (ring_cap - 1))];
        ptr = a[0];
        hmt_c2_push(m, hmt_c2_class(a[1]), ptr);
        m->last_ref = idx;
      } else {
        if (!(s[2] = hmt_get_varint(s[2], se[2], &v))) return HMT_E_RECORD;
        ptr = m->hist[mode ? 1 : 0] + (uint64_t)hmt_unzigzag(v);
      }
    } else {
      if (tag & HMT_C2_SAME_STACK) stack = row.stack;
      else if (!(s[5] = hmt_get_varint(s[5], se[5], &stack))) return HMT_E_RECORD;
      hmt_c2_site_t *st2 = &m->site[hmt_col_hash(stack, HMT_C2_SITE_BITS)];
      if (tag & HMT_C2_SAME_SIZE) {
        if (st2->stack != stack) return HMT_E_RECORD;
        size = st2->size;
      } else if (!(s[4] = hmt_get_varint(s[4], se[4], &size))) return HMT_E_RECORD;
      st2->stack = stack; st2->size = size;
      if (type == HPCMEM_EV_MEMALIGN && !(s[4] = hmt_get_varint(s[4], se[4], &align))) return HMT_E_RECORD;
      unsigned c = hmt_c2_class(size);
      hmt_c2_class_t *k = &m->cls[c];
      if (mode == 1) {
        if (!k->n) return HMT_E_RECORD;
        ptr = k->lifo[--k->n];
      } else {
        if (mode == 2) {
          if (!k->last) return HMT_E_RECORD;
          ptr = k->last + k->stride;
        } else {
          if (!(s[2] = hmt_get_varint(s[2], se[2], &v)) || (mode == 3 && !k->last)) return HMT_E_RECORD;
          ptr = (mode == 3 ? k->last : m->hist[0]) + (uint64_t)hmt_unzigzag(v);
        }
      }
      int is_alloc = type != HPCMEM_EV_REALLOC || ptr;
      if (!is_alloc && mode != 0) return HMT_E_RECORD;
      if (is_alloc && mode != 1) hmt_c2_fresh(m, c, ptr);
      if (type == HPCMEM_EV_REALLOC) {
        if (!(s[3] = hmt_get_varint(s[3], se[3], &v)) || v > m->nalloc || v > HMT_C2_RING) return HMT_E_RECORD;
        if (v) {
          const uint64_t *a = &ring[2 * ((m->nalloc - v) & (ring_cap - 1))];
          old = a[0];
          if (ptr != old) hmt_c2_push(m, hmt_c2_class(a[1]), old);
        } else {
          if (!(s[2] = hmt_get_varint(s[2], se[2], &v))) return HMT_E_RECORD;
          old = ptr + (uint64_t)hmt_unzigzag(v);
        }
      }
      if (is_alloc) {
        uint64_t *a = &ring[2 * (m->nalloc & (ring_cap - 1))];
        a[0] = ptr; a[1] = size;
        m->nalloc++;
      }
    }
    hmt_c2_hist(m, ptr);
    o = hmt_encode_event(o, &row, type, (tag & HMT_C2_SYS) != 0, tick << shift, ptr, old, size, align, stack);
  }
  for (int k = 1; k < HMT_COL_STREAMS; k++)
    if (s[k] != se[k]) return HMT_E_RECORD;
  *out_len = (size_t)(o - out);
  *nrec = count;
  return HMT_OK;
}

/* ------------------------------------------------------------------ */
/* Streams compressed one by one (format 1.3, block flag HMT_BF_SPLIT    */
/* with HMT_BF_COLUMNS | HMT_BF_MODELS [| HMT_BF_CHAIN])                 */
/*                                                                      */
/* The streams of a format 1.2 payload, each compressed on its own: the  */
/* bytes of each stream have statistics of their own, which one frame    */
/* over all of them mixes.  Stored payload: byte 0xC3, varint tick shift  */
/* s, varint stream count (7), per stream varint raw length and varint    */
/* stored length, then the stored streams in order -- each one frame of   */
/* the block's codec (zstd frame, zlib stream), or the bytes as they are  */
/* when its stored length equals its raw length (empty: 0 and 0).  The    */
/* block's raw_len is the length of the format 1.2 payload the streams    */
/* make (mark 0xC2, s, 7, the raw lengths, the streams), which the        */
/* decoder reads as any format 1.2 block.                                 */

#define HMT_BF_SPLIT 0x8        /**< block flag: the column streams compressed one by one (format 1.3, mark 0xC3) */
#define HMT_SPLIT_MARK 0xC3
#define HMT_SPLIT_HEAD_MAX (1 + 10 + 10 + HMT_COL_STREAMS * 20)  /**< longest head of a split payload */

typedef struct {
  uint64_t shift;
  uint64_t raw[HMT_COL_STREAMS], stored[HMT_COL_STREAMS];
  size_t head;  /**< bytes of the head: the stored streams follow */
} hmt_split_t;

/** The streams of a format 1.2 payload (p, len): shift, lengths and where
 *  the first starts.  HMT_OK or HMT_E_RECORD. */
static inline int hmt_c2_streams(const uint8_t *p, size_t len, uint64_t *shift, uint64_t *sl, size_t *head) {
  const uint8_t *q = p, *end = p + len;
  uint64_t ns, total = 0;
  if (q >= end || *q++ != HMT_COL2_MARK || !(q = hmt_get_varint(q, end, shift)) ||
      !(q = hmt_get_varint(q, end, &ns)) || ns != HMT_COL_STREAMS)
    return HMT_E_RECORD;
  for (int k = 0; k < HMT_COL_STREAMS; k++) {
    if (!(q = hmt_get_varint(q, end, &sl[k])) || sl[k] > len) return HMT_E_RECORD;
    total += sl[k];
  }
  *head = (size_t)(q - p);
  return total == (uint64_t)(end - q) ? HMT_OK : HMT_E_RECORD;
}

/** Write the head of a split payload at out (HMT_SPLIT_HEAD_MAX bytes); its length. */
static inline size_t hmt_split_put_head(uint8_t *out, const hmt_split_t *sp) {
  uint8_t *o = out;
  *o++ = HMT_SPLIT_MARK;
  o = hmt_put_varint(o, sp->shift);
  o = hmt_put_varint(o, HMT_COL_STREAMS);
  for (int k = 0; k < HMT_COL_STREAMS; k++) {
    o = hmt_put_varint(o, sp->raw[k]);
    o = hmt_put_varint(o, sp->stored[k]);
  }
  return (size_t)(o - out);
}

/** Read the head of a split payload of len stored bytes: HMT_OK when the
 *  stored streams fill the rest exactly and make a format 1.2 payload of
 *  raw_len bytes (the block header's). */
static inline int hmt_split_parse(const uint8_t *p, size_t len, uint64_t raw_len, hmt_split_t *sp) {
  const uint8_t *q = p, *end = p + len;
  uint64_t ns, stored = 0, raw = 0;
  if (q >= end || *q++ != HMT_SPLIT_MARK || !(q = hmt_get_varint(q, end, &sp->shift)) || sp->shift > 40 ||
      !(q = hmt_get_varint(q, end, &ns)) || ns != HMT_COL_STREAMS)
    return HMT_E_RECORD;
  uint8_t tmp[HMT_SPLIT_HEAD_MAX], *t = tmp;
  *t++ = HMT_COL2_MARK;
  t = hmt_put_varint(t, sp->shift);
  t = hmt_put_varint(t, HMT_COL_STREAMS);
  for (int k = 0; k < HMT_COL_STREAMS; k++) {
    if (!(q = hmt_get_varint(q, end, &sp->raw[k])) || !(q = hmt_get_varint(q, end, &sp->stored[k])) ||
        sp->raw[k] > HMT_MAX_BLOCK || sp->stored[k] > len || (sp->stored[k] == 0) != (sp->raw[k] == 0))
      return HMT_E_RECORD;
    stored += sp->stored[k]; raw += sp->raw[k];
    t = hmt_put_varint(t, sp->raw[k]);
  }
  sp->head = (size_t)(q - p);
  return stored == (uint64_t)(end - q) && raw + (uint64_t)(t - tmp) == raw_len ? HMT_OK : HMT_E_RECORD;
}

/** Write the head of the format 1.2 payload that a split payload makes;
 *  its length (the streams follow it, raw, in order). */
static inline size_t hmt_split_c2_head(const hmt_split_t *sp, uint8_t *out) {
  uint8_t *o = out;
  *o++ = HMT_COL2_MARK;
  o = hmt_put_varint(o, sp->shift);
  o = hmt_put_varint(o, HMT_COL_STREAMS);
  for (int k = 0; k < HMT_COL_STREAMS; k++) o = hmt_put_varint(o, sp->raw[k]);
  return (size_t)(o - out);
}

/* Format 1.4: EVENTS blocks coded under models (HMT_CODEC_MODEL). */
#include "hpcmem_trace_model.h"

/* ------------------------------------------------------------------ */
/* MODULES block payload: varint count, then per loaded object:           */
/*   varint bias (load address: file address + bias = run-time address)  */
/*   varint lo, varint hi (run-time address range of its PT_LOAD segments) */
/*   varint build_id_len, build id bytes (GNU build id, may be empty)    */
/*   varint path_len, path bytes (absolute path of the file; empty: none) */
/* Each MODULES block lists every object loaded when it was written; a    */
/* later block supersedes an earlier one for overlapping ranges.          */
/*                                                                      */
/* FLUSH block payload: varint reason (HMT_FLUSH_*), varint time (ns,     */
/*   CLOCK_MONOTONIC), varint n, n varints in HMT_FLUSH_FIELDS order.     */

#ifdef __cplusplus
}
#endif
#endif /* HPCMEM_TRACE_FORMAT_H */
