/* The options table: every HPCMEM_* environment variable, declared once.
 * X(ID, type, default, min, max, choices, help)
 *   type: BOOL, INT, SIZE (K/M/G suffixes), ENUM (choices "a|b|c", value is the index),
 *         STRING (no range), POW2 (a SIZE that must be a power of two)
 * Values are parsed once at start-up by _hpcmem_options_init(); read them with
 * _hpcmem_opt(ID) (numbers, enum indices) or _hpcmem_opt_str(ID). */
#ifndef HPCMEM_UTIL_OPTIONS_H
#define HPCMEM_UTIL_OPTIONS_H
#include <stdint.h>
#include <stdio.h>

#define HPCMEM_KI 1024LL
#define HPCMEM_MI (1024LL * 1024)
#define HPCMEM_GI (1024LL * 1024 * 1024)

#define HPCMEM_OPTIONS(X) \
  X(VERBOSE, BOOL, "0", 0, 1, "", "print every effective setting at start-up") \
  X(HEAPS, INT, "0", 0, 64, "", "thread-group heaps (at most 64); 0 = one per cache/NUMA group of the hwloc topology") \
  X(BLOCK_SIZE, POW2, "4K", 4096, HPCMEM_MI, "", "datablock size of the group heaps") \
  X(LARGE_THRESHOLD, SIZE, "128K", 16 * HPCMEM_KI, HPCMEM_GI, "", "requests of at least this size go to the large-block tier") \
  X(LARGE_ALIGN, POW2, "256", 16, 4096, "", "alignment of large-block data (bytes)") \
  X(DECAY_MS, INT, "1000", 0, 3600000, "", "free large-tier pages unused this long go back to the OS (0: at once)") \
  X(THP, BOOL, "1", 0, 1, "", "use transparent huge pages for the large region and the interleaved segment where the kernel allows") \
  X(LARGE_THP, ENUM, "auto", 0, 2, "auto|on|off", "huge pages for large blocks of 16 MiB and more (with HPCMEM_THP=1); auto: only where the kernel gives them without compacting memory at fault time (docs/large-tier.md)") \
  X(CHECK, BOOL, "0", 0, 1, "", "periodic consistency checks of all heaps in a release build (the checks take at most ~10% of the time)") \
  X(ON_ERROR, ENUM, "abort", 0, 2, "abort|warn|ignore", "what to do after reporting an invalid or double free") \
  X(DEFAULT_SEGMENT, ENUM, "private", 0, 2, "private|shared|interleaved", "segment that plain malloc uses") \
  X(INTERLEAVE_NODES, STRING, "all", 0, 0, "", "NUMA nodes of the interleaved segment (\"all\" or a list like 0-3,6)") \
  X(INTERLEAVED_SIZE, SIZE, "256G", 64 * HPCMEM_MI, 16384 * HPCMEM_GI, "", "address space of the interleaved segment (backed only where used)") \
  X(SHARED_SIZE, SIZE, "4G", 64 * HPCMEM_MI, 1024 * HPCMEM_GI, "", "shared segment: bytes each rank may allocate in the node-wide mapping (a sparse file: backed only where used)") \
  X(SHARED_DIR, STRING, "/dev/shm", 0, 0, "", "directory of the node-wide shared-segment file (a tmpfs; the file is removed as soon as every rank mapped it)") \
  X(TOPOLOGY, STRING, "", 0, 0, "", "hwloc XML file describing the machine instead of the real one (see docs/topology.md)") \
  X(PREALLOC, SIZE, "0", 0, 64 * HPCMEM_GI, "", "physical memory pre-allocated for contiguous regions") \
  X(TRACE, BOOL, "0", 0, 1, "", "record every allocation event into one trace file per rank") \
  X(TRACE_DIR, STRING, "", 0, 0, "", "trace directory (default hpcmem-trace-<jobid>)") \
  X(TRACE_DEPTH, INT, "64", 0, 1024, "", "deepest call stack recorded per event") \
  X(TRACE_BUFFER, SIZE, "1M", 64 * HPCMEM_KI, HPCMEM_GI, "", "per-thread trace buffer size") \
  X(TRACE_COMPRESS, ENUM, "model", 0, 3, "zstd|zlib|none|model", "compression of trace blocks (model: the events coded under models of their fields, format 1.4)") \
  X(TRACE_UNWIND, ENUM, "libunwind", 0, 2, "libunwind|backtrace|frame", "how trace stacks are captured: DWARF unwind tables (libunwind), glibc backtrace, or frame pointers (fastest; needs code built with -fno-omit-frame-pointer)") \
  X(TRACE_STACK_CACHE, BOOL, "1", 0, 1, "", "recognise a stack seen before by its return-address slots instead of unwinding it again (docs/trace-format.md)") \
  X(REPORT, ENUM, "auto", 0, 3, "off|summary|full|auto", "report at MPI_Finalize / exit; auto = summary for MPI ranks, off for a lone process") \
  X(REPORT_DIR, STRING, ".", 0, 0, "", "directory of hpcmem-report-<jobid>.json") \
  X(REPORT_NODE_SIZE, INT, "0", 0, 1048576, "", "ranks per node in the report's node sums; 0 = the ranks that share memory (less splits a machine, e.g. to try multi-node reports on one)") \
  X(IMBALANCE_THRESHOLD, INT, "20", 0, 100, "", "flag imbalance when (max-mean)/max exceeds this percentage")

typedef enum {
#define HPCMEM_OPT_ENUM_(id, ...) HPCMEM_OPT_##id,
  HPCMEM_OPTIONS(HPCMEM_OPT_ENUM_)
#undef HPCMEM_OPT_ENUM_
  HPCMEM_OPT_COUNT_
} hpcmem_opt_id_t;

typedef enum { HPCMEM_OT_BOOL, HPCMEM_OT_INT, HPCMEM_OT_SIZE, HPCMEM_OT_ENUM,
               HPCMEM_OT_STRING, HPCMEM_OT_POW2 } hpcmem_opt_type_t;

enum { HPCMEM_ON_ERROR_ABORT, HPCMEM_ON_ERROR_WARN, HPCMEM_ON_ERROR_IGNORE };
enum { HPCMEM_LARGE_THP_AUTO, HPCMEM_LARGE_THP_ON, HPCMEM_LARGE_THP_OFF };
enum { HPCMEM_REPORT_OFF, HPCMEM_REPORT_SUMMARY, HPCMEM_REPORT_FULL, HPCMEM_REPORT_AUTO };
enum { HPCMEM_COMPRESS_ZSTD, HPCMEM_COMPRESS_ZLIB, HPCMEM_COMPRESS_NONE, HPCMEM_COMPRESS_MODEL };

typedef struct {
  const char *name;        /* without the HPCMEM_ prefix */
  hpcmem_opt_type_t type;
  const char *def;
  long long min, max;
  const char *choices;
  const char *help;
} hpcmem_opt_desc_t;

#define HPCMEM_OPT_STR_MAX 256

extern long long _hpcmem_opt_values[HPCMEM_OPT_COUNT_];
extern char _hpcmem_opt_strings[HPCMEM_OPT_COUNT_][HPCMEM_OPT_STR_MAX];
extern const char *_hpcmem_opt_text[HPCMEM_OPT_COUNT_];   /* the default's text or the copy */
extern const hpcmem_opt_desc_t _hpcmem_opt_desc[HPCMEM_OPT_COUNT_];

#define _hpcmem_opt(id) (_hpcmem_opt_values[HPCMEM_OPT_##id])
#define _hpcmem_opt_str(id) (_hpcmem_opt_text[HPCMEM_OPT_##id] ? _hpcmem_opt_text[HPCMEM_OPT_##id] : "")

/* Parse from the process environment (once; later calls do nothing). */
void _hpcmem_options_init(void);
/* Parse from an explicit environment (NULL-terminated "NAME=value" list):
 * resets every option to its default first.  Used by init and by the tests. */
void _hpcmem_options_load(char *const *env);
/* Parse one value of option id; 0 and *out on success, -EINVAL/-ERANGE otherwise. */
int _hpcmem_option_parse(int id, const char *text, long long *out);
int _hpcmem_option_format(int id, char *buf, size_t len);

#endif
