/* Reader of libhpcmem trace files (.hmt, include/hpcmem_trace_format.h).
 *
 * hmt_open() checks the header and indexes the blocks (reading only block
 * headers and the small MODULES / FLUSH blocks); hmt_next() then returns
 * the events of all threads merged in time order, decompressing one block
 * per thread at a time, so memory stays at about one block per thread.
 * Stacks are collected as their definitions go by; after the last event
 * every stack of the file is known.
 *
 * Damage is reported, never crashed on: a file that ends inside a block
 * (a rank killed by SIGKILL) is read up to its last complete block and
 * flagged as truncated; a damaged block is an error naming the file and the
 * offset, or with HMT_OPEN_SALVAGE is skipped (the reader resynchronises at
 * the next valid block header and counts what it skipped).
 *
 * The tools link this; it never links the allocator. */
#ifndef HPCMEM_TOOLS_HMT_READER_H
#define HPCMEM_TOOLS_HMT_READER_H
#include <stddef.h>
#include <stdint.h>
#include "hpcmem_trace_format.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct hmt_reader hmt_reader_t;

/** What went wrong: the message names the file and the byte offset. */
typedef struct {
  int code;          /**< HMT_E_* or -errno */
  uint64_t offset;   /**< file offset of the damaged structure */
  char message[640];
} hmt_error_t;

/** One event, with the thread it happened on. */
typedef struct {
  unsigned type;     /**< HPCMEM_EV_* */
  unsigned sys;      /**< 1: made by libhpcmem itself (S), 0: by the application (A) */
  uint32_t tid;
  uint64_t time;     /**< local CLOCK_MONOTONIC ns (add header clock_offset_ns for rank 0's clock) */
  uint64_t ptr, old_ptr, size, align, stack;
} hmt_event_t;

/** A loaded object, to map return addresses to files. */
typedef struct {
  uint64_t bias, lo, hi;
  char *path;
  uint8_t build_id[64];
  size_t build_id_len;
} hmt_module_t;

/** The last FLUSH block: why and the recorder's counters. */
typedef struct {
  int present;
  uint64_t reason, time;
#define HMT_READER_FLUSH_(name, help) uint64_t name;
  HMT_FLUSH_FIELDS(HMT_READER_FLUSH_)
#undef HMT_READER_FLUSH_
} hmt_flush_info_t;

/** Summary of the file, known after hmt_open. */
typedef struct {
  uint64_t file_size;
  uint64_t blocks, event_blocks;
  uint64_t stored_bytes, raw_bytes;  /**< of EVENTS blocks */
  uint64_t records;                  /**< sum of the blocks' counts */
  uint64_t threads;
  int truncated;                     /**< the file ends inside a block */
  uint64_t truncated_at;             /**< offset of that incomplete block */
  uint64_t skipped_bytes;            /**< bytes skipped by HMT_OPEN_SALVAGE */
  uint64_t skipped_blocks;
  uint64_t t_first, t_last;          /**< of the events, from the block index (t_last: lower bound) */
  hmt_flush_info_t flush;
} hmt_info_t;

enum {
  HMT_OPEN_SALVAGE = 1  /**< skip damaged blocks instead of failing */
};

/** Open and index a trace file.  Returns 0, or a negative code with *err filled. */
int hmt_open(const char *path, int flags, hmt_reader_t **out, hmt_error_t *err);
void hmt_close(hmt_reader_t *r);

const hmt_header_t *hmt_header(const hmt_reader_t *r);
const hmt_info_t *hmt_info(const hmt_reader_t *r);
const char *hmt_path(const hmt_reader_t *r);

/** Next event in time order: 1 (an event), 0 (the end), or negative (error: hmt_error).
 *  Events of different threads in the same time tick: a free before another
 *  thread's allocation of the address it gave back, then allocations before
 *  frees, then file order; a thread's own order is kept. */
int hmt_next(hmt_reader_t *r, hmt_event_t *ev);
/** 1 when the event only gives memory back (free, realloc to size 0): what a
 *  merge of several threads or ranks takes after allocations of the same tick. */
int hmt_event_frees(const hmt_event_t *e);
const hmt_error_t *hmt_error(const hmt_reader_t *r);

/** Start the events again from the beginning. */
int hmt_rewind(hmt_reader_t *r);

/** Bytes of the file consumed so far by hmt_next (for progress bars). */
uint64_t hmt_progress(const hmt_reader_t *r);

/** Frames of a stack (innermost first) from the nodes seen so far; 0, or -1
 *  when its chain is not (yet) complete.  The frames stay valid until hmt_close. */
int hmt_stack(const hmt_reader_t *r, uint64_t id, const uint64_t **frames, uint32_t *depth);
/** Number of stack nodes defined so far (include/hpcmem_trace_format.h: a trie). */
size_t hmt_stack_count(const hmt_reader_t *r);
/** Iterate the nodes: id of the i-th (0 <= i < hmt_stack_count). */
uint64_t hmt_stack_id(const hmt_reader_t *r, size_t i);

/** The loaded objects (later MODULES blocks first, so a lookup in order finds the newest). */
size_t hmt_modules(const hmt_reader_t *r, const hmt_module_t **mods);
/** The module holding a run-time address, or NULL. */
const hmt_module_t *hmt_module_of(const hmt_reader_t *r, uint64_t addr);

/** Name of an event kind ("malloc", ...), of a flush reason ("exit", "signal 15", ...). */
const char *hmt_kind_name(unsigned type);
const char *hmt_flush_reason_name(uint64_t reason, char *buf, size_t len);

#ifdef __cplusplus
}
#endif
#endif
