/* Large-block tier (SWAlloc): requests at or above HPCMEM_LARGE_THRESHOLD.
 *
 * One address range is reserved once (lazily backed) and cut into blocks
 * [padding | data | remainder] on a grid of the configured alignment.  The
 * metadata of a block is a record in a dense pool at the front of the
 * reservation: the address-ordered list (O(1) coalescing), the best-fit
 * red-black tree of free blocks keyed by (size, address), and the decay
 * bookkeeping.  free(p) finds the record through a hash table keyed by the
 * data pointer, which also validates p exactly.  Nothing is ever written
 * into the blocks themselves: no page of a block is touched by the
 * allocator, a user overflow cannot damage the metadata, and decay can give
 * back every whole page of a free block.  docs/large-tier.md explains why
 * (measurements against an in-band header) and how decay works. */
#ifndef HPCMEM_HEAP_LARGE_H
#define HPCMEM_HEAP_LARGE_H
#include <stddef.h>
#include <stdint.h>
#include <pthread.h>
#include <time.h>
#include "util/lock.h"

/* The coarse monotonic clock: the kernel's tick (1-4 ms), from the vDSO in a
 * few ns (the exact clock costs ~27 ns on the development VM).  For what
 * works in milliseconds: decay ages, rate limits. */
static inline uint64_t _hpcmem_coarse_now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC_COARSE, &ts);
  return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

#ifdef __cplusplus
extern "C" {
#endif

typedef struct hpcmem_large_config {
  size_t reserve;      /* bytes of address space for the data region (0: 1 TiB); lazily backed */
  size_t align;        /* data alignment, power of two >= 16 (0: 256) */
  size_t min_split;    /* split off a remainder (or an alignment lead) only if larger than this */
  uint64_t decay_ns;   /* free pages unused this long are given back (0: at once) */
  int thp;             /* transparent huge pages for blocks of 16 MiB and more (own arena) */
  char *region;        /* NULL: reserve the data region; else manage [region, region + reserve),
                          memory the caller mapped (a segment's part of a shared mapping) */
  int discard;         /* decay drops the backing store too (MADV_REMOVE: shared memory) */
  unsigned quick;      /* freed blocks kept whole for reuse (at most HPCMEM_LARGE_QUICK; 0: none) */
  size_t warm;         /* >0: at init, allocate and free a block of this size (see _hpcmem_large_init;
                          _hpcmem_large_config_from_options leaves it 0) */
  int ends;            /* end placement and sweep (docs/large-tier.md): 0 when the residency probe
                          finds programs write block ends only, >0 always, <0 never */
  unsigned probe_min;  /* frees between residency probes at first (0: HPCMEM_LARGE_PROBE_MIN) */
  unsigned sweep_allocs; /* the sweep's age, in allocations (0: HPCMEM_LARGE_SWEEP_ALLOCS) */
  int spots;           /* landing spots (with end placement): 0 while it misses often, >0 always, <0 never */
  int tcache;          /* >0: threads keep a few freed blocks in a cache of their own (one tier of a
                          process at most: the cache is the thread's, see HPCMEM_LARGE_TC_BYTES) */
} hpcmem_large_config_t;

typedef struct hpcmem_large_rec hpcmem_large_rec_t;

/* A part of the data region with its own blocks.  With huge pages on, the
 * upper half of the reservation is a second arena for blocks of 16 MiB and
 * more, whose interiors are advised MADV_HUGEPAGE (see thp_advise). */
#define HPCMEM_LARGE_QUICK 8        /* most blocks the quick list holds */
#define HPCMEM_LARGE_PROBE_MIN 4096 /* frees between residency probes, at first and after a change */
#define HPCMEM_LARGE_PROBE_MAX 65536 /* ... at most, while the probes agree */
#define HPCMEM_LARGE_SWEEP_ALLOCS 32768 /* the sweep: garbage this many allocations old goes back */
#define HPCMEM_LARGE_CLASSES 192   /* size classes of the free-block trees (4 per power of 2) */
#define HPCMEM_LARGE_TC_SLOTS 4    /* freed blocks a thread's cache holds ... */
#define HPCMEM_LARGE_TC_BYTES ((size_t)1 << 20)   /* ... and their usable bytes, at most */
#define HPCMEM_LARGE_TC_WINDOW 64  /* a thread's cache is switched off after this many of its locked
                                      allocations (misses) with ... */
#define HPCMEM_LARGE_TC_MISS_RATIO 8   /* ... fewer hits than 1 in this many of them, */
#define HPCMEM_LARGE_TC_PROBE 4096 /* and on again, for a window, after this many more */
typedef struct hpcmem_large_arena {
  char *lo, *top, *end;               /* blocks tile [lo, top); room up to end */
  hpcmem_large_rec_t *first, *last;   /* address-ordered block list */
  hpcmem_large_rec_t *roots[HPCMEM_LARGE_CLASSES];   /* free blocks by (size, address) */
  uint64_t nonempty[HPCMEM_LARGE_CLASSES / 64];      /* classes with a tree */
} hpcmem_large_arena_t;

typedef struct hpcmem_large_stats {
  size_t reserved_bytes;  /* address space reserved for data */
  size_t mapped_bytes;    /* extent of the region in use (blocks cover it exactly) */
  size_t live_bytes;      /* usable bytes of live blocks */
  size_t overhead_bytes;  /* alignment padding in front of live data */
  size_t free_bytes;      /* bytes in free blocks; mapped = live + overhead + free */
  size_t retained_bytes;  /* free bytes that may still be backed (not yet decayed) */
  size_t decayed_bytes;   /* bytes given back with madvise, in total */
  size_t meta_bytes;      /* records in use and the hash table */
  size_t live_blocks;
  size_t free_blocks;
  size_t largest_free;    /* largest free block */
  size_t quick_blocks;    /* freed blocks kept whole on the quick list (counted as free, retained) */
  size_t quick_bytes;
  int ends_mode;          /* 1: block ends placed on believed-resident pages and swept */
  uint64_t land_tries;    /* allocations placed with end placement on */
  uint64_t land_hits;     /* ... whose first and last page were both believed resident */
  uint64_t swept_pages;   /* believed-resident pages given back early (the sweep, stale pages) */
  uint64_t probe_count;   /* residency probes made */
  int spots_mode;         /* 1: landing spots on (end placement misses often) */
  size_t tcache_blocks;   /* freed blocks held in threads' caches (counted as free and retained) */
  size_t tcache_bytes;
  uint64_t tcache_hits;   /* allocations and frees served by a thread's cache (no lock; not in the
                             alloc_count and free_count of the tier) */
  size_t tcache_off;      /* threads' caches switched off now (they missed; see tc_window) */
  uint64_t tcache_offs;   /* times a thread's cache was switched off */
  uint64_t tcache_grows;  /* larger requests served by growing a thread's cached block in place
                             (under the lock; counted in alloc_count) */
  uint64_t spot_hits;     /* allocations placed on a landing spot (counted in land_hits too) */
  uint64_t alloc_count;
  uint64_t free_count;
  uint64_t resize_count;  /* resizes done in place */
  uint64_t grow_count;    /* times the region extent grew */
  uint64_t decay_count;   /* madvise calls made by decay */
  uint64_t error_count;   /* invalid or double frees / resizes detected */
} hpcmem_large_stats_t;

/* The tier's state.  Embedded in static storage by the core: no field needs
 * memory other than the reservation made by _hpcmem_large_init. */
typedef struct hpcmem_large {
  hpcmem_lock_t lock;
  int thp;
  int discard;             /* decay with _hpcmem_prim_discard (shared memory) */
  size_t align;            /* default data alignment */
  size_t page;
  size_t min_split;
  uint64_t decay_ns;
  uint64_t next_decay_ns;  /* earliest time the next decay pass may run */
  /* quick list: the last blocks freed, kept whole (still in the hash table,
   * not in the trees), oldest first; a request they fit takes one back
   * without a tree operation.  Sizes are kept here so a scan reads no record. */
  unsigned nquick, quick_max;
  size_t quick_bytes;
  size_t quick_usable[HPCMEM_LARGE_QUICK];
  hpcmem_large_rec_t *quick[HPCMEM_LARGE_QUICK];
  uint64_t now_ns;         /* the clock as last read (see clock_tick) */
  unsigned tick;
  hpcmem_large_rec_t *last_out;  /* the block handed out last: its free needs no hash probe */

  char *map;               /* whole reservation: records, then data (unless given a region) */
  size_t map_size;
  char *base;              /* data region [base, end) */
  char *end;
  hpcmem_large_arena_t ar[2];
  int narenas;
  size_t huge_min;         /* requests this large go to arena 1 (when there are two) */

  hpcmem_large_rec_t *recs, *recs_end;  /* record pool */
  hpcmem_large_rec_t *rec_bump;          /* first never-used record */
  hpcmem_large_rec_t *rec_free;          /* recycled records */
  size_t recs_used;

  hpcmem_large_rec_t *dhead, *dtail;     /* dirty free blocks, oldest first */
  hpcmem_large_rec_t *busy;              /* blocks being decayed outside the lock */
  struct hpcmem_large_slot *htab;        /* data pointer -> record of live blocks */
  size_t hcap, hcap_max, hcount;
  unsigned hshift;
  int hside;
  char *harea[2];                        /* the table doubles from one area into the other */
  uintptr_t *ring;                       /* recent frees, to tell a double free */
  uint64_t *hbits;                       /* huge arena: 2 MiB chunks advised MADV_HUGEPAGE */
  unsigned ring_pos;

  /* End placement and sweep (docs/large-tier.md, "Block ends").  Two bits
   * per page of the data region, the words of 64 pages side by side (one
   * cache line for both): bits[w][0], the page is believed resident because
   * it holds the first or the last byte of a request handed out since it was
   * last given back; bits[w][1], it is also stale (see mark_stale). */
  uint64_t (*bits)[2];
  unsigned pshift;         /* log2(page) */
  int ends_cfg;            /* config.ends */
  int ends;                /* on now (the probe's verdict, or config.ends > 0) */
  int probe_score;         /* 0..7; >= 4 means "programs write the ends of their blocks only" */
  unsigned probe_gap, probe_min, probe_wait;   /* frees between probes (doubles while they agree) */
  unsigned sweep_allocs;   /* believed-resident garbage this many allocations old goes back */
  uint64_t land_tries, land_hits, swept_pages, probe_count;
  /* Landing spots (large.c, "landing spots"): pairs of believed-resident
   * pages of free blocks by their distance, on while end placement misses
   * often (judged over windows of allocations). */
  struct hpcmem_large_spot *spots;   /* NULL: none (a region of 2^32 pages or more) */
  int spots_cfg;           /* config.spots */
  unsigned spots_on, spot_clock;
  unsigned spot_dmin;      /* distances shorter than this serve no request seen so far */
  size_t spot_smin;        /* ... the smallest request seen (with end placement on) */
  unsigned win_tries, win_miss;
  uint64_t spot_hits;

  /* Threads' caches of freed blocks (large.c, "thread caches"); the tier
   * counts their blocks as live (state TCACHED: freed, kept by a thread). */
  int tc_on;
  int tc_key_ok;
  pthread_key_t tc_key;                  /* its destructor gives a cache back at thread exit */
  struct hpcmem_large_tc *tcs;           /* the caches of live threads, under the lock */
  uint64_t tc_hits_gone;                 /* hits of the caches of threads that exited */
  uint64_t tc_offs_gone;                 /* ... and their switches off */
  uint64_t tc_grows;                     /* cached blocks grown for a larger request (tc_grow) */

  size_t live_bytes, overhead_bytes, free_bytes, retained_bytes, decayed_bytes;
  size_t live_blocks, free_blocks;
  uint64_t alloc_count, free_count, resize_count, grow_count, decay_count, error_count;
} hpcmem_large_t;

/* Fill *cfg from the HPCMEM_* options (LARGE_ALIGN, DECAY_MS, THP) and the
 * defaults for the rest (reserve 1 TiB, min_split 128 KiB). */
void _hpcmem_large_config_from_options(hpcmem_large_config_t *cfg);

/* Reserve the region.  cfg NULL: from the options (and warmed with a block
 * of HPCMEM_LARGE_THRESHOLD bytes: the process's tier).  0 or -errno
 * (-EINVAL for a bad alignment, -ENOMEM when the reservation fails).
 * With cfg->warm, one block of that size is allocated and freed (not
 * counted, never touched, so it costs no RSS): it is on the quick list for
 * the first request, and the tier's code and tables are no longer cold then. */
int _hpcmem_large_init(hpcmem_large_t *L, const hpcmem_large_config_t *cfg);
/* Give the whole reservation back (tests; the allocator never calls it). */
void _hpcmem_large_destroy(hpcmem_large_t *L);

/* Best-fit allocation.  align 0 or below the configured alignment means the
 * configured alignment; otherwise any power of two.  NULL with errno ENOMEM
 * when the request cannot be served, EINVAL when align is not a power of 2. */
void *_hpcmem_large_alloc(hpcmem_large_t *L, size_t size, size_t align);
/* The same, also storing the usable size (saves a second lock round trip). */
void *_hpcmem_large_alloc_usable(hpcmem_large_t *L, size_t size, size_t align, size_t *usable);
/* For calloc: all usable bytes read as zero.  Only what may have been
 * written since the pages were fresh or given back is cleared, so a block
 * from never-used or decayed memory costs no page touched at all. */
void *_hpcmem_large_alloc_zeroed(hpcmem_large_t *L, size_t size, size_t align, size_t *usable);
/* 0; -EINVAL when p is not the start of a live block of this tier (foreign,
 * interior, misaligned); -EALREADY for a double free that is still
 * recognisable.  Bad input changes nothing.  *size_out (may be NULL)
 * receives the usable size of the freed block. */
int _hpcmem_large_free(hpcmem_large_t *L, void *p, size_t *size_out);
/* Resize in place: shrink (the tail is split off when large enough) or
 * grow into a free next neighbour or at the end of the region.  0 done,
 * -ENOMEM cannot (the caller moves the data), -EINVAL bad p.  When done,
 * *delta (may be NULL) receives the change of the block's usable size. */
int _hpcmem_large_resize(hpcmem_large_t *L, void *p, size_t new_size, int64_t *delta);
/* Usable bytes of a live block, 0 if p is not one. */
size_t _hpcmem_large_usable_size(hpcmem_large_t *L, const void *p);
/* Decay pass: free pages that stayed unused for decay_ns before now_ns
 * (all of them when force) are given back to the OS. */
void _hpcmem_large_decay(hpcmem_large_t *L, uint64_t now_ns, int force);
/* Full invariant check: 0, or -EFAULT after logging what is wrong. */
int _hpcmem_large_check(hpcmem_large_t *L);
void _hpcmem_large_stats(hpcmem_large_t *L, hpcmem_large_stats_t *out);
/* The same without waiting more than wait_ns for the lock (the summary of
 * a fatal signal): 0 exact, 1 approximate (counters only, read unlocked). */
int _hpcmem_large_stats_nowait(hpcmem_large_t *L, hpcmem_large_stats_t *out, uint64_t wait_ns);

void _hpcmem_large_fork_prepare(hpcmem_large_t *L);
void _hpcmem_large_fork_parent(hpcmem_large_t *L);
void _hpcmem_large_fork_child(hpcmem_large_t *L);
/* Calls fn(arg, start, bytes) for every live block, whole (padding and
 * metadata included), in address order; no lock (a forked child). */
void _hpcmem_large_each_live(hpcmem_large_t *L, void (*fn)(void *arg, char *start, size_t bytes), void *arg);

/* Whether p lies in this tier's data region (not whether it is live). */
static inline int _hpcmem_large_owns(const hpcmem_large_t *L, const void *p) {
  return (const char *)p >= L->base && (const char *)p < L->end;
}

#ifdef __cplusplus
}
#endif
#endif
