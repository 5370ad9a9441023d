/* The allocation event recorder (WMTrace).  The core calls these hooks; the
 * recorder writes one trace file per rank in the format of
 * include/hpcmem_trace_format.h.  Nothing here calls malloc: buffers,
 * compressor workspaces and the stack table live in prim/ memory.
 *
 *   trace.c     state, per-thread buffers, the event hook, flushing
 *   stack.c     call-stack capture (libunwind / glibc backtrace / frame
 *               pointers) and the stack intern table
 *   tfile.c     the trace file: creation, header, block writes, modules
 *   compress.c  zstd / zlib over prim memory, format 1.4's coder
 *   signal.c    flush on fatal signals, chaining to the previous handlers
 *   leave.c     _exit, _Exit and the exec family: flush, then the C
 *               library's own */
#ifndef HPCMEM_TRACE_TRACE_H
#define HPCMEM_TRACE_TRACE_H
#include <stddef.h>
#include <stdint.h>
#include "hpcmem_trace_format.h"

/* ---- the interface with the core ---------------------------------- */

/* Set once at start-up from HPCMEM_TRACE (by _hpcmem_trace_init). */
extern int _hpcmem_trace_enabled;

/* Read the options and get ready (the file is created at the first flush).
 * Called by the core once the allocator works; uses only prim/ memory.
 * Calling it again does nothing. */
void _hpcmem_trace_init(void);

/* Record one event of the calling thread.  kind: HPCMEM_EV_*, optionally
 * | HPCMEM_EV_SYS for allocations libhpcmem makes for itself.  Called after
 * the operation succeeded -- except that what it gives back, a free's block
 * or a realloc's old one, is reported before it is released: another thread
 * may reuse the address at once, and its allocation must be stamped later;
 * and a fatal signal in between must not leave the trace holding live a
 * block the program had freed.  Never calls malloc. */
void _hpcmem_trace_event(int kind, const void *ptr, size_t size, const void *old_ptr, size_t align);

/* Write every thread's buffer and a FLUSH marker (reason: HMT_FLUSH_*,
 * HMT_FLUSH_SIGNAL + signo).  Safe in a signal handler.  After EXIT, ABORT
 * or a signal the recorder writes events through at once (nothing
 * buffered). */
void _hpcmem_trace_flush_all(int reason);

/* The process ends without its exit handlers (_exit, _Exit: reason
 * HMT_FLUSH_EXIT, final as at exit) or is about to be replaced (exec:
 * HMT_FLUSH_EXEC, not final -- the exec may fail and the program go on).
 * Writes every buffer as a signal handler would (safe in one, never waits
 * for a lock this thread holds); nothing unless this process records and
 * is not final yet, and nothing at all in a process whose pid is not the
 * recorder's (a child of vfork on the parent's memory).  Keeps errno. */
void _hpcmem_trace_leave(int reason);

/* Flush the calling thread's buffer and give it back (thread-exit hook). */
void _hpcmem_trace_thread_exit(void);
/* The same for thread tid, which is gone: it recorded events after its
 * exit hook (a thread-specific destructor of glibc's last round allocated,
 * see _hpcmem_tcache_mark_late), and its buffer would stay taken. */
void _hpcmem_trace_thread_gone(int tid);

/* The MPI layer's rank, size and clock offset at MPI_Init: added to a
 * local time stamp it gives a clock common to all ranks of the job (for
 * example -origin, where origin is this rank's clock at the job's time
 * zero; on one host 0 is right).  Renames the file if the launcher's
 * guess was different and rewrites the header; re-installs the signal
 * handlers (MPI libraries install their own at MPI_Init). */
void _hpcmem_trace_set_rank(int rank, int size, int64_t clock_offset_ns);

/* Bracket work libhpcmem does for itself (topology, report): allocations
 * made in between are marked S.  Nest freely. */
void _hpcmem_trace_lib_enter(void);
void _hpcmem_trace_lib_leave(void);

/* ---- for tests and tools ------------------------------------------ */

/* Counters of the recorder (HMT_FLUSH_FIELDS order). */
typedef struct {
#define HMT_TRACE_STAT_(name, help) uint64_t name;
  HMT_FLUSH_FIELDS(HMT_TRACE_STAT_)
#undef HMT_TRACE_STAT_
} hpcmem_trace_stats_t;
void _hpcmem_trace_get_stats(hpcmem_trace_stats_t *out);

/* Path of the trace file (empty until it is created). */
const char *_hpcmem_trace_path(void);

/* Stop recording, flush, close the file and forget all state so that a
 * test can start another trace in the same process (not thread-safe:
 * no other thread may be recording). */
void _hpcmem_trace_shutdown(void);

/* ---- between the recorder's files --------------------------------- */

typedef struct hmt_tlock { volatile int owner; } hmt_tlock_t;  /* 0 free, else tid */
int _hpcmem_tlock_try(hmt_tlock_t *l, int tid);
void _hpcmem_tlock(hmt_tlock_t *l, int tid);
void _hpcmem_tlock_release(hmt_tlock_t *l);
/* In a signal handler: take a lock another thread holds -- the writer
 * thread coding or writing a block, a thread writing its own buffer --
 * waiting for it as long as it runs on: on a busy machine the holder may
 * be off the CPU for tens of ms, so the wait is bounded by time, not by
 * tries, and gives the CPU away.  0, or -EBUSY when this thread holds it
 * (the signal interrupted the holder) or at the signal flush's deadline
 * (HMT_SIGNAL_WAIT_NS after it started: the holder may be waiting for
 * something the interrupted thread holds).  Async-signal-safe. */
#define HMT_SIGNAL_WAIT_NS (2ull * 1000 * 1000 * 1000)
int _hpcmem_tlock_signal(hmt_tlock_t *l, int tid);
int _hpcmem_trace_tid(void);

/* stack.c */
enum { HMT_UNWIND_LIBUNWIND, HMT_UNWIND_BACKTRACE, HMT_UNWIND_FRAMEPOINTER };
/* 0, or -ENOENT when the method needs a library that cannot be loaded
 * (the reason in why) */
int _hpcmem_stack_init(int method, char *why, size_t whylen);
/* Capture up to max return addresses of the caller of `from` (the frames
 * above it are dropped).  Returns the depth. */
uint32_t _hpcmem_stack_capture(uint64_t *frames, uint32_t max, const void *from);
/* Intern a stack: its id (a trie node, see the format header).  When this
 * call made new nodes, def says which: nodes first .. first + n - 1 on
 * parent for frames[0 .. n - 1] (to be written as a STACK record before
 * the event); def->n is 0 otherwise. */
typedef struct { uint32_t n; uint64_t first, parent; } hmt_stack_def_t;
uint64_t _hpcmem_stack_intern(const uint64_t *frames, uint32_t depth, hmt_stack_def_t *def);
/* The same through a per-thread cache of recent stacks (stack.c says
 * how a hit is recognised): capture (frames is scratch for
 * HPCMEM_TRACE_DEPTH + HMT_CAPTURE_EXTRA entries, scratch for four times
 * as many) and intern only when the
 * stack is not the one recorded last time from the same place.  hook_frame:
 * __builtin_frame_address(0) of the hook, whose return address is from.
 * Returns the stack id, 0 without a stack. */
#define HMT_CAPTURE_EXTRA 16  /* frames above the hook's caller a capture may see */
typedef struct hmt_scache hmt_scache_t;
size_t _hpcmem_scache_size(uint32_t max);
void _hpcmem_scache_clear(hmt_scache_t *c, uint32_t max);
/* adds the cache's hits and misses (captures) to *hits and *misses */
void _hpcmem_scache_counts(const hmt_scache_t *c, uint64_t *hits, uint64_t *misses);
uint64_t _hpcmem_stack_get(hmt_scache_t *c, uint64_t *frames, uint64_t *scratch, uint32_t max, const void *from,
                           const void *hook_frame, hmt_stack_def_t *def);
uint64_t _hpcmem_stack_count(void);
size_t _hpcmem_stack_memory(void);
void _hpcmem_stack_reset(void);
const char *_hpcmem_stack_method_name(int method);

/* compress.c: compress src with a free shared compressor.  The result
 * stays in that compressor's buffer: write it, then _hpcmem_compress_done.
 * Returns NULL (nothing held) when the codec is unavailable, none is free
 * and may_wait == 0 (signal handler), it failed, or it did not shrink. */
void *_hpcmem_compress_begin(int codec, const void *src, size_t len, int may_wait,
                             const void **out, size_t *out_len);
/* The same for the rows of an EVENTS block encoded against *base: they are
 * regrouped in columns first (time ticks of 2^shift ns) when that works:
 * format 1.2 with the buffer's models (continued when chained, else
 * started afresh; the caller sizes live) with its streams compressed one
 * by one (format 1.3), or 1.1 when model is NULL.  *columns says which (0
 * rows, 1, 3; 2 is not returned), *raw_len is the length before
 * compression (of the format 1.2 payload for 3). */
void *_hpcmem_compress_events_begin(int codec, const void *src, size_t len, const hmt_state_t *base, unsigned shift,
                                    hmt_col_model_t *model, hmt_c2_livemap_t *live, int chained, int may_wait,
                                    const void **out, size_t *out_len, size_t *raw_len, int *columns);
/* Format 1.4: the rows coded under the buffer's models (continued when
 * chained, else started afresh with model->nmax tracked allocations; the
 * caller sized its arrays for the block, hmt_m4_need).  *raw_len: the
 * length of the rows the payload decodes to.  NULL when the payload would
 * not be shorter than the rows, or none is free and may_wait == 0 (the
 * models are then undefined: start afresh). */
void *_hpcmem_compress_m4_begin(const void *src, size_t len, const hmt_state_t *base, unsigned shift,
                                hmt_m4_model_t *model, int chained, int may_wait, const void **out, size_t *out_len,
                                size_t *raw_len);
void _hpcmem_compress_done(void *comp);
size_t _hpcmem_compress_bound(int codec, size_t len);
/* built in (headers at configure time) / loaded (dlopen succeeded) */
int _hpcmem_codec_built(int codec);
int _hpcmem_codec_available(int codec);
/* dlopen the codec's library (once); 0, or -ENOENT with the reason in why */
int _hpcmem_codec_load(int codec, char *why, size_t whylen);
const char *_hpcmem_codec_library(int codec);
void _hpcmem_compress_reset(void);
void _hpcmem_compress_after_fork_child(void);
/* page-granular allocations for the codecs and the recorder (prim memory) */
void *_hpcmem_trace_alloc(size_t size);
void _hpcmem_trace_free(void *p);
size_t _hpcmem_trace_alloc_bytes(void);

/* tfile.c */
typedef struct {
  int rank, size;
  int64_t clock_offset_ns;
  int rank_from_mpi;
} hmt_file_identity_t;
/* Write one block (header + payload, stored_len bytes) at the end of the
 * file, creating it first if needed.  may_wait = 0 (signal handler): wait
 * for another thread that holds the file as _hpcmem_tlock_signal does,
 * give up when this one does.  0 or -errno. */
int _hpcmem_tfile_write_block(hmt_block_t *b, const void *payload, int may_wait);
/* this thread holds the file's lock (a signal interrupted its write) */
int _hpcmem_tfile_held_by(int tid);
void _hpcmem_tfile_set_identity(const hmt_file_identity_t *id);
/* dir_is_default: dir is the default name, not the user's HPCMEM_TRACE_DIR,
 * and is not entered through a symbolic link (anyone could plant one). */
void _hpcmem_tfile_configure(const hmt_header_t *h, const char *dir, int dir_is_default);
/* Re-scan the loaded objects if dlopen/dlclose happened since the last
 * scan and write a MODULES block (from the event path: cheap when nothing
 * changed). */
void _hpcmem_tfile_check_modules(int may_wait);
const char *_hpcmem_tfile_path(void);
void _hpcmem_tfile_close(void);
void _hpcmem_tfile_after_fork_child(void);

/* signal.c */
void _hpcmem_trace_signals_install(void);
void _hpcmem_trace_signals_uninstall(void);

/* leave.c: find the C library's _exit, _Exit and exec functions (the next
 * definitions after ours), so that none is looked up while the process
 * ends.  From _hpcmem_trace_init, and from an untraced process's first
 * exec (no lock, no allocation: it may be a child of vfork). */
void _hpcmem_trace_leave_init(void);
/* calls of dl_iterate_phdr this thread is inside (leave.c): it holds the
 * loader's lock, and the stack is not captured with libunwind */
extern __thread int _hpcmem_t_in_phdr;

#endif
