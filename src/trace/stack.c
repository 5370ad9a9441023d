/* Call stacks: capture and interning.
 *
 * Capture has three methods (HPCMEM_TRACE_UNWIND): libunwind's
 * unw_backtrace (DWARF unwind tables, cached per thread), glibc's
 * backtrace() (libgcc's unwinder), and a frame-pointer walk, which is the
 * fastest but only sees the whole stack when every caller keeps frame
 * pointers (-fno-omit-frame-pointer; the recorder's own functions do).  The
 * measured costs are in docs/trace-format.md.  In front of all three, a
 * per-thread cache recognises a stack seen before without unwinding it
 * (below, "the per-thread stack cache").
 *
 * Interning: each distinct stack gets an id the first time it is seen;
 * events then carry the id only.  Ids are nodes of a trie grown from the
 * outermost frame inwards (include/hpcmem_trace_format.h), so a new stack
 * is written as the few frames by which it differs from stacks already
 * written: MPI's start-up alone makes thousands of stacks that share
 * their callers.  The full-stack table is open addressing with lock-free
 * lookups (the common case: a stack seen before) and a lock for
 * insertions; growing it publishes a new table and keeps the old one (a
 * reader may still be in it), so at most twice the final size is held.
 * The trie's own table is used under the lock only.  Frames live in an
 * append-only arena of 1 MiB chunks. */
#include "config.h"
#include "trace/trace.h"
#include "prim/prim.h"
#include <errno.h>
#include <link.h>
#include <string.h>
#ifdef HAVE_LIBUNWIND
#define UNW_LOCAL_ONLY
#include <libunwind.h>
#endif
#include <execinfo.h>
#include <unwind.h>
#include <dlfcn.h>
#include <stdio.h>

#ifdef HAVE_LIBUNWIND
/* libunwind is loaded with dlopen when tracing starts with
 * HPCMEM_TRACE_UNWIND=libunwind, not linked (compress.c says why). */
#define HMT_UNWIND_SONAME "libunwind.so.8"
#define HMT_STR_(x) #x
#define HMT_STR(x) HMT_STR_(x)
static int (*p_unw_backtrace)(void **, int);
static void *unw_lib;

static int load_libunwind(char *why, size_t whylen) {
  if (p_unw_backtrace) return 0;
  void *h = unw_lib ? unw_lib : dlopen(HMT_UNWIND_SONAME, RTLD_NOW | RTLD_LOCAL);
  if (!h) { snprintf(why, whylen, "cannot load %s (%s)", HMT_UNWIND_SONAME, dlerror()); return -ENOENT; }
  unw_lib = h;
  int (*set_policy)(unw_addr_space_t, unw_caching_policy_t);
  unw_addr_space_t *local_as = dlsym(h, "_UL" HMT_STR(UNW_TARGET) "_local_addr_space");
  *(void **)&set_policy = dlsym(h, "_UL" HMT_STR(UNW_TARGET) "_set_caching_policy");
  int (*bt)(void **, int);
  *(void **)&bt = dlsym(h, "unw_backtrace");
  if (!bt || !set_policy || !local_as) {
    snprintf(why, whylen, "%s has no unw_backtrace / caching policy", HMT_UNWIND_SONAME);
    return -ENOENT;
  }
  set_policy(*local_as, UNW_CACHE_PER_THREAD);
  p_unw_backtrace = bt;
  return 0;
}
#define unw_backtrace p_unw_backtrace
#endif

#if defined(__x86_64__)
static int load_libgcc(char *why, size_t whylen);
#endif

#define HMT_CHUNK_FRAMES (128 * 1024)  /* 1 MiB of frames per arena chunk */
#define HMT_MAX_CHUNKS 4096            /* 4 GiB of frames at most */
#define HMT_MAX_STACKS (1u << 24)      /* beyond this, stacks are not interned */

typedef struct {
  volatile uint64_t hash;  /* 0: empty; published last */
  uint64_t id;
  const uint64_t *frames;
  uint32_t depth;
} hmt_slot_t;

typedef struct {
  size_t mask;
  hmt_slot_t slots[];
} hmt_table_t;

static int method = -1;
static uintptr_t self_lo, self_hi;  /* our own code when we are a shared object */
static hmt_table_t *volatile table;
static hmt_tlock_t table_lock;
static uint64_t *chunks[HMT_MAX_CHUNKS];
static size_t nchunks, chunk_used;
static volatile uint64_t next_id = 1, nstacks;
static size_t table_bytes;

/* the trie: (parent node, frame) -> node, under table_lock */
typedef struct { uint64_t parent, frame, id; } hmt_tnode_t;
static hmt_tnode_t *trie;
static size_t trie_mask, trie_count, trie_bytes;
static hmt_table_t *old_tables[64];  /* superseded, kept for lookups in flight */
static int nold;

/* ---- capture ------------------------------------------------------- */

static int find_self(struct dl_phdr_info *info, size_t size, void *data) {
  (void)size;
  uintptr_t me = (uintptr_t)data;
  for (int i = 0; i < info->dlpi_phnum; i++) {
    const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
    if (ph->p_type != PT_LOAD) continue;
    uintptr_t lo = info->dlpi_addr + ph->p_vaddr, hi = lo + ph->p_memsz;
    if (me >= lo && me < hi) {
      /* the main program: our frames are mixed with the application's */
      if (!info->dlpi_name || !info->dlpi_name[0]) return 1;
      self_lo = (uintptr_t)-1; self_hi = 0;
      for (int j = 0; j < info->dlpi_phnum; j++) {
        const ElfW(Phdr) *q = &info->dlpi_phdr[j];
        if (q->p_type != PT_LOAD || !(q->p_flags & PF_X)) continue;
        uintptr_t a = info->dlpi_addr + q->p_vaddr;
        if (a < self_lo) self_lo = a;
        if (a + q->p_memsz > self_hi) self_hi = a + q->p_memsz;
      }
      return 1;
    }
  }
  return 0;
}

int _hpcmem_stack_init(int m, char *why, size_t whylen) {
  method = m;
#ifndef HAVE_LIBUNWIND
  if (method == HMT_UNWIND_LIBUNWIND) method = HMT_UNWIND_BACKTRACE;
#else
  if (method == HMT_UNWIND_LIBUNWIND && load_libunwind(why, whylen)) return -ENOENT;
  if (method == HMT_UNWIND_LIBUNWIND) {
    /* backtrace() stands in for libunwind inside dl_iterate_phdr
     * (method_here()); the C library loads libgcc_s at its first call,
     * with the loader's lock, which is not to be waited for there */
    void *one[1];
    backtrace(one, 1);
  }
#endif
#if defined(__x86_64__)
  if (load_libgcc(why, whylen)) return -ENOENT;
#endif
  (void)why; (void)whylen;
  self_lo = self_hi = 0;
  dl_iterate_phdr(find_self, (void *)(uintptr_t)&_hpcmem_stack_capture);
  return 0;
}

const char *_hpcmem_stack_method_name(int m) {
  switch (m) {
    case HMT_UNWIND_LIBUNWIND: return "libunwind";
    case HMT_UNWIND_BACKTRACE: return "backtrace";
    case HMT_UNWIND_FRAMEPOINTER: return "frame";
    default: return "?";
  }
}

/* Follow the saved frame-pointer chain.  A link is accepted only when it
 * points further up the stack by less than 1 MiB and is aligned, so a
 * frame without a frame pointer ends the walk instead of faulting in the
 * common case (its rbp holds data, rarely a nearby higher stack address). */
__attribute__((noinline, optimize("no-omit-frame-pointer"))) static uint32_t fp_walk(uint64_t *out, uint32_t max) {
  uintptr_t *fp = __builtin_frame_address(0);
  uint32_t n = 0;
  while (n < max) {
    uintptr_t ret = fp[1];
    if (ret < 4096) break;
    out[n++] = ret;
    uintptr_t *next = (uintptr_t *)fp[0];
    if (next <= fp || (uintptr_t)next - (uintptr_t)fp > (1u << 20) || ((uintptr_t)next & 7)) break;
    fp = next;
  }
  return n;
}

/* Where the recorder's own frames end: the index of `from` among the
 * first frames (-1: not seen), then past the library's entry points if we
 * are a shared object (the report strips the rest by name). */
static int first_kept(const uint64_t *frames, int n, const void *from, int *at_from) {
  int start = 0;
  *at_from = -1;
  for (int i = 0; i < n && i < HMT_CAPTURE_EXTRA; i++)
    if (frames[i] == (uint64_t)(uintptr_t)from) { start = *at_from = i; break; }
  while (start < n && frames[start] >= self_lo && frames[start] < self_hi) start++;
  return start;
}

/* The method for this capture: libgcc's unwinder instead of libunwind
 * while the thread is inside dl_iterate_phdr (leave.c says why). */
static inline int method_here(void) {
  return method == HMT_UNWIND_LIBUNWIND && _hpcmem_t_in_phdr ? HMT_UNWIND_BACKTRACE : method;
}

/* keeps a frame pointer, like the hook, so that the walk can pass through */
__attribute__((optimize("no-omit-frame-pointer")))
uint32_t _hpcmem_stack_capture(uint64_t *frames, uint32_t max, const void *from) {
  int want = (int)(max + HMT_CAPTURE_EXTRA), n = 0;
  switch (method_here()) {
#ifdef HAVE_LIBUNWIND
    case HMT_UNWIND_LIBUNWIND: n = unw_backtrace((void **)frames, want); break;
#endif
    case HMT_UNWIND_FRAMEPOINTER: n = (int)fp_walk(frames, (uint32_t)want); break;
    default: n = backtrace((void **)frames, want); break;
  }
  if (n <= 0) return 0;
  int at;
  int start = first_kept(frames, n, from, &at);
  n -= start;
  if (n > (int)max) n = (int)max;
  if (start) memmove(frames, frames + start, (size_t)n * sizeof *frames);
  return (uint32_t)n;
}

/* ---- the per-thread stack cache --------------------------------------
 * Unwinding is most of what a traced allocation costs, and an
 * allocation-heavy program allocates from the same few stacks over and
 * over.  Unwinding is a function of the registers at the start and of the
 * stack memory it reads; on x86-64 each step reads the return address at
 * CFA - 8 of the frame below, and the CFA of a frame is fixed by its code
 * address and the stack pointer.  So when the hook is entered from the
 * same return address with its frame at the same stack address as before,
 * and every return-address slot the last unwind read from there holds the
 * same value again, the stack is the same one: same frames, same id.
 * Checking that is one load and compare per frame (a few ns for the whole
 * stack) instead of an unwind, a hash of the frames and a table lookup.
 *
 * On a miss the slots come from libgcc's unwinder (the CFA of each frame;
 * with HPCMEM_TRACE_UNWIND=libunwind, used only where it agrees with
 * unw_backtrace) or from the frame-pointer walk (the address of each saved
 * return address).  A stack whose slots do not hold its frames (a signal
 * frame: the interrupted address comes from the signal context) is not
 * cached, nor one spread over more than 8 MiB of stack or longer than an
 * entry.
 *
 * Frames that find their CFA through the frame pointer and change their
 * size at run time (alloca) are the assumption's edge: the chain above
 * such a frame would have moved, and every slot above would have to hold
 * the old values by chance for a wrong hit.  Entries belong to one thread
 * (cleared when a buffer changes hands) and to one generation of the
 * intern table (_hpcmem_stack_reset invalidates them all). */
#define HMT_SC_SETS 32
#define HMT_SC_WAYS 8
#define HMT_SC_MAX_CHAIN 64
#define HMT_SC_FIRST 16
#define HMT_SC_SEEN 512
#define HMT_SC_MAX_SPAN (8u << 20)

typedef struct {
  uint64_t from, base;  /* key; base 0: empty */
  uint64_t id;
  uint32_t gen, n;
} hmt_sc_entry_t;

struct hmt_scache {
  uint32_t cap;           /* slots per entry */
  uint32_t victim;
  volatile uint64_t hits, misses;  /* read by _hpcmem_trace_flush_all's verbose line */
  /* per hook call site: where the first slot above it is.  Its value (the
   * return address into whoever called the allocator entry, or into the
   * application) picks the set, so that the many call sites of one
   * application function, whose calls put the hook's frame at the same
   * stack address, spread over the sets instead of fighting for one. */
  struct { uint64_t from; uint32_t off0, gen; } first[HMT_SC_FIRST];
  uint32_t seen[HMT_SC_SEEN];  /* tags of places that missed lately */
  uint64_t walks;              /* captures with the slots */
  hmt_sc_entry_t e[HMT_SC_SETS * HMT_SC_WAYS];
  /* then per entry: uint32_t off[cap] (from the base), uint64_t val[cap] */
};

static volatile uint32_t sc_gen = 1;

static uint32_t sc_cap(uint32_t max) {
  uint32_t c = max + HMT_CAPTURE_EXTRA;
  return c > HMT_SC_MAX_CHAIN ? HMT_SC_MAX_CHAIN : c;
}

size_t _hpcmem_scache_size(uint32_t max) {
  return sizeof(hmt_scache_t) + (size_t)HMT_SC_SETS * HMT_SC_WAYS * sc_cap(max) * (sizeof(uint32_t) + sizeof(uint64_t));
}

void _hpcmem_scache_counts(const hmt_scache_t *c, uint64_t *hits, uint64_t *misses) {
  *hits += __atomic_load_n(&c->hits, __ATOMIC_RELAXED);
  *misses += __atomic_load_n(&c->misses, __ATOMIC_RELAXED);
}

void _hpcmem_scache_clear(hmt_scache_t *c, uint32_t max) {
  uint64_t hits = c->hits, misses = c->misses, walks = c->walks;  /* the process's counts go on */
  memset(c, 0, sizeof *c);
  c->cap = sc_cap(max);
  c->hits = hits; c->misses = misses; c->walks = walks;
}

static inline uint32_t *sc_off(hmt_scache_t *c, size_t i) {
  return (uint32_t *)((uint8_t *)(c + 1) + i * c->cap * (sizeof(uint32_t) + sizeof(uint64_t)));
}
static inline uint64_t *sc_val(hmt_scache_t *c, size_t i) { return (uint64_t *)(sc_off(c, i) + c->cap); }

#if defined(__x86_64__)
/* libgcc's unwinder with the stack pointer of each frame (what
 * _Unwind_GetCFA gives for it: the CFA of the frame it returns from), 8
 * bytes above the slot its return address was read from.  Used
 * for the slots on a cache miss (libunwind's cursor, which would give them
 * too, masks signals with two system calls per frame in this version). */
typedef struct { uint64_t *ip, *cfa; int n, max; } hmt_gw_t;

/* libgcc_s is opened when tracing starts, not linked: a C program without
 * tracing then never maps it (docs/footprint.md). */
#define HMT_GCC_SONAME "libgcc_s.so.1"
static _Unwind_Reason_Code (*p_backtrace)(_Unwind_Trace_Fn, void *);
static _Unwind_Ptr (*p_get_ip_info)(struct _Unwind_Context *, int *);
static _Unwind_Word (*p_get_cfa)(struct _Unwind_Context *);

static int load_libgcc(char *why, size_t whylen) {
  if (p_backtrace) return 0;
  void *h = dlopen(HMT_GCC_SONAME, RTLD_NOW | RTLD_LOCAL);
  if (!h) { snprintf(why, whylen, "cannot load %s (%s)", HMT_GCC_SONAME, dlerror()); return -ENOENT; }
  *(void **)&p_get_ip_info = dlsym(h, "_Unwind_GetIPInfo");
  *(void **)&p_get_cfa = dlsym(h, "_Unwind_GetCFA");
  void *bt = dlsym(h, "_Unwind_Backtrace");
  if (!bt || !p_get_ip_info || !p_get_cfa) {
    snprintf(why, whylen, "%s has no _Unwind_Backtrace / _Unwind_GetIPInfo / _Unwind_GetCFA", HMT_GCC_SONAME);
    return -ENOENT;
  }
  __atomic_store_n((void **)&p_backtrace, bt, __ATOMIC_RELEASE);
  return 0;
}

static _Unwind_Reason_Code gw_frame(struct _Unwind_Context *ctx, void *arg) {
  hmt_gw_t *g = arg;
  if (g->n >= g->max) return _URC_END_OF_STACK;
  int before = 0;
  uint64_t ip = p_get_ip_info(ctx, &before);
  if (ip == 0) return _URC_END_OF_STACK;
  g->ip[g->n] = ip;
  /* a signal frame's address is not a return address in a slot */
  g->cfa[g->n] = before ? 0 : p_get_cfa(ctx);
  g->n++;
  return _URC_NO_REASON;
}

/* frames as return addresses, slots[k] where frames[k] was found (0:
 * unknown) */
__attribute__((noinline)) static int gcc_walk_slots(uint64_t *out, uint64_t *slots, uint64_t *cfa, int max) {
  hmt_gw_t g = {out, cfa, 0, max};
  if (!p_backtrace) return 0;
  p_backtrace(gw_frame, &g);
  for (int k = 0; k < g.n; k++) slots[k] = cfa[k] ? cfa[k] - 8 : 0;
  return g.n;
}

__attribute__((noinline, optimize("no-omit-frame-pointer"))) static int fp_walk_slots(uint64_t *out, uint64_t *slots,
                                                                                        uint32_t max) {
  uintptr_t *fp = __builtin_frame_address(0);
  uint32_t n = 0;
  while (n < max) {
    uintptr_t ret = fp[1];
    if (ret < 4096) break;
    slots[n] = (uint64_t)(uintptr_t)&fp[1];
    out[n++] = ret;
    uintptr_t *next = (uintptr_t *)fp[0];
    if (next <= fp || (uintptr_t)next - (uintptr_t)fp > (1u << 20) || ((uintptr_t)next & 7)) break;
    fp = next;
  }
  return (int)n;
}
#endif

static inline size_t sc_set(uint64_t from, uint64_t base, uint64_t v0) {
  uint64_t h = from ^ (base * 0x9e3779b97f4a7c15ULL) ^ (v0 * 0xc2b2ae3d27d4eb4fULL);
  h ^= h >> 29;
  h *= 0xbf58476d1ce4e5b9ULL;
  return ((size_t)(h >> 58) & (HMT_SC_SETS - 1)) * HMT_SC_WAYS;
}

static inline size_t sc_first(uint64_t from) { return (size_t)((from * 0x9e3779b97f4a7c15ULL) >> 60) & (HMT_SC_FIRST - 1); }

/* keeps a frame pointer so that the frame-pointer walk passes through */
__attribute__((optimize("no-omit-frame-pointer")))
uint64_t _hpcmem_stack_get(hmt_scache_t *c, uint64_t *frames, uint64_t *scratch, uint32_t max, const void *from,
                           const void *hook_frame, hmt_stack_def_t *def) {
  def->n = 0;
#if defined(__x86_64__)
  /* the slot of `from`, the hook's own return address: the hook keeps a
   * frame pointer, so it is right above the saved one */
  uint64_t base = (uint64_t)(uintptr_t)hook_frame + 8, f = (uint64_t)(uintptr_t)from;
  uint32_t gen = __atomic_load_n(&sc_gen, __ATOMIC_RELAXED);
  if (!c) {
    uint32_t n = _hpcmem_stack_capture(frames, max, from);
    return n ? _hpcmem_stack_intern(frames, n, def) : 0;
  }
  size_t fi = sc_first(f);
  int known = c->first[fi].from == f && c->first[fi].gen == gen;
  uint64_t v0 = known ? *(const volatile uint64_t *)(uintptr_t)(base + c->first[fi].off0) : 0;
  if (known) {
    size_t set = sc_set(f, base, v0);
    for (size_t w = 0; w < HMT_SC_WAYS; w++) {
      hmt_sc_entry_t *e = &c->e[set + w];
      if (e->base != base || e->from != f || e->gen != gen) continue;
      const uint32_t *off = sc_off(c, set + w);
      const uint64_t *val = sc_val(c, set + w);
      uint32_t i = 0;
      while (i < e->n && *(const volatile uint64_t *)(uintptr_t)(base + off[i]) == val[i]) i++;
      if (i == e->n) { __atomic_store_n(&c->hits, c->hits + 1, __ATOMIC_RELAXED); return e->id; }
    }
  }
  __atomic_store_n(&c->misses, c->misses + 1, __ATOMIC_RELAXED);
  /* A miss.  Finding the slots takes a second unwind with libgcc's
   * unwinder, which is slow (microseconds: it interprets the unwind tables
   * afresh for every frame), so it is done only for a place seen missing
   * before -- stacks met once (MPI's start-up; a frame that alloca shifts
   * every time) are captured as without the cache -- and only while the
   * cache earns it: at most one walk per 64 hits, beyond a first 64. */
  uint64_t kh = sc_set(f, base, v0) ^ (f * 0x9e3779b97f4a7c15ULL) ^ base;
  size_t si = (size_t)(kh >> 7) & (HMT_SC_SEEN - 1);
  uint32_t tag = (uint32_t)(kh >> 32) | 1u;
  int walk = method == HMT_UNWIND_FRAMEPOINTER ||
             (c->seen[si] == tag && c->walks < 64 + c->misses / 32 + c->hits / 64);
  c->seen[si] = tag;
  if (!walk) {
    uint32_t n = _hpcmem_stack_capture(frames, max, from);
    return n ? _hpcmem_stack_intern(frames, n, def) : 0;
  }
  c->walks++;
  int want = (int)(max + HMT_CAPTURE_EXTRA), n = 0, ok = 1;
  uint64_t *slots = scratch, *g_ip = scratch + want, *g_slot = scratch + 2 * want, *g_cfa = scratch + 3 * want;
  switch (method_here()) {
    case HMT_UNWIND_FRAMEPOINTER: n = fp_walk_slots(frames, slots, (uint32_t)want); break;
#ifdef HAVE_LIBUNWIND
    case HMT_UNWIND_LIBUNWIND: {
      /* the stack as libunwind sees it; the slots from libgcc, used only
       * where both agree from `from` on */
      n = unw_backtrace((void **)frames, want);
      int ng = gcc_walk_slots(g_ip, g_slot, g_cfa, want), au = -1, ag = -1;
      for (int i = 0; i < n && i < HMT_CAPTURE_EXTRA && au < 0; i++) if (frames[i] == f) au = i;
      for (int i = 0; i < ng && i < HMT_CAPTURE_EXTRA && ag < 0; i++) if (g_ip[i] == f) ag = i;
      for (int i = 0; i < n; i++) slots[i] = 0;
      if (au >= 0 && ag >= 0)
        for (int i = 0; au + i < n && ag + i < ng && frames[au + i] == g_ip[ag + i]; i++) slots[au + i] = g_slot[ag + i];
      break;
    }
#endif
    default: n = gcc_walk_slots(frames, slots, g_cfa, want); break;
  }
  if (n <= 0) return 0;
  int at;
  int start = first_kept(frames, n, from, &at);
  int kept = n - start;
  if (kept > (int)max) kept = (int)max;
  if (kept <= 0) return 0;
  int end = start + kept;  /* the chain a later call checks: at + 1 .. end - 1 */
  ok = at >= 0 && slots[at] == base && end - (at + 1) <= (int)c->cap;
  for (int i = at + 1; ok && i < end; i++)
    ok = slots[i] > (i > at + 1 ? slots[i - 1] : base) && slots[i] - base < HMT_SC_MAX_SPAN && (slots[i] & 7) == 0 &&
         *(const uint64_t *)(uintptr_t)slots[i] == frames[i];
  uint64_t chain_val[HMT_SC_MAX_CHAIN];
  uint32_t chain_off[HMT_SC_MAX_CHAIN], nchain = 0;
  if (ok)
    for (int i = at + 1; i < end; i++) {
      chain_off[nchain] = (uint32_t)(slots[i] - base);
      chain_val[nchain++] = frames[i];
    }
  if (start) memmove(frames, frames + start, (size_t)kept * sizeof *frames);
  uint64_t id = _hpcmem_stack_intern(frames, (uint32_t)kept, def);
  if (ok && id && nchain > 0) {
    c->first[fi].from = f; c->first[fi].off0 = chain_off[0]; c->first[fi].gen = gen;
    size_t set = sc_set(f, base, chain_val[0]), w = 0;
    for (; w < HMT_SC_WAYS; w++)
      if (c->e[set + w].base == 0 || c->e[set + w].gen != gen) break;
    if (w == HMT_SC_WAYS) w = c->victim++ % HMT_SC_WAYS;  /* else take turns */
    hmt_sc_entry_t *e = &c->e[set + w];
    memcpy(sc_off(c, set + w), chain_off, nchain * sizeof *chain_off);
    memcpy(sc_val(c, set + w), chain_val, nchain * sizeof *chain_val);
    e->from = f; e->base = base; e->id = id; e->gen = gen; e->n = nchain;
  }
  return id;
#else
  (void)c; (void)scratch; (void)hook_frame;
  uint32_t n = _hpcmem_stack_capture(frames, max, from);
  return n ? _hpcmem_stack_intern(frames, n, def) : 0;
#endif
}

/* ---- interning ----------------------------------------------------- */

static uint64_t hash_frames(const uint64_t *f, uint32_t depth) {
  uint64_t h = 0x9e3779b97f4a7c15ULL ^ depth;
  for (uint32_t i = 0; i < depth; i++) {
    h ^= f[i];
    h *= 0xff51afd7ed558ccdULL;
    h ^= h >> 32;
  }
  h ^= h >> 29;
  return h | 1;  /* never 0: 0 marks an empty slot */
}

static uint64_t lookup(hmt_table_t *t, uint64_t h, const uint64_t *f, uint32_t depth) {
  if (!t) return 0;
  for (size_t i = h & t->mask;; i = (i + 1) & t->mask) {
    hmt_slot_t *s = &t->slots[i];
    uint64_t sh = __atomic_load_n(&s->hash, __ATOMIC_ACQUIRE);
    if (sh == 0) return 0;
    if (sh == h && s->depth == depth && memcmp(s->frames, f, depth * sizeof *f) == 0) return s->id;
  }
}

static void put(hmt_table_t *t, uint64_t h, uint64_t id, const uint64_t *frames, uint32_t depth) {
  size_t i = h & t->mask;
  while (t->slots[i].hash) i = (i + 1) & t->mask;
  hmt_slot_t *s = &t->slots[i];
  s->id = id; s->frames = frames; s->depth = depth;
  __atomic_store_n(&s->hash, h, __ATOMIC_RELEASE);
}

static hmt_table_t *grow(hmt_table_t *old) {
  size_t cap = old ? (old->mask + 1) * 2 : 4096;
  size_t bytes = sizeof(hmt_table_t) + cap * sizeof(hmt_slot_t);
  hmt_table_t *t = _hpcmem_trace_alloc(bytes);
  if (!t) return NULL;
  table_bytes += bytes;
  t->mask = cap - 1;
  if (old)
    for (size_t i = 0; i <= old->mask; i++)
      if (old->slots[i].hash) put(t, old->slots[i].hash, old->slots[i].id, old->slots[i].frames, old->slots[i].depth);
  return t;
}

static uint64_t *arena_copy(const uint64_t *f, uint32_t depth) {
  if (nchunks == 0 || chunk_used + depth > HMT_CHUNK_FRAMES) {
    if (nchunks == HMT_MAX_CHUNKS) return NULL;
    uint64_t *c = _hpcmem_trace_alloc(HMT_CHUNK_FRAMES * sizeof *c);
    if (!c) return NULL;
    chunks[nchunks++] = c;
    chunk_used = 0;
  }
  uint64_t *dst = chunks[nchunks - 1] + chunk_used;
  memcpy(dst, f, depth * sizeof *f);
  chunk_used += depth;
  return dst;
}

static size_t trie_slot(uint64_t parent, uint64_t frame) {
  uint64_t h = (parent * 0x9e3779b97f4a7c15ULL) ^ frame;
  h ^= h >> 29; h *= 0xbf58476d1ce4e5b9ULL; h ^= h >> 32;
  return (size_t)h & trie_mask;
}

static uint64_t trie_get(uint64_t parent, uint64_t frame) {
  if (!trie) return 0;
  for (size_t i = trie_slot(parent, frame);; i = (i + 1) & trie_mask) {
    if (!trie[i].id) return 0;
    if (trie[i].parent == parent && trie[i].frame == frame) return trie[i].id;
  }
}

static int trie_put(uint64_t parent, uint64_t frame, uint64_t id) {
  if (!trie || (trie_count + 1) * 4 > (trie_mask + 1) * 3) {
    if (trie_count >= HMT_MAX_STACKS) return -1;
    size_t cap = trie ? (trie_mask + 1) * 2 : 4096, bytes = cap * sizeof(hmt_tnode_t);
    hmt_tnode_t *n = _hpcmem_trace_alloc(bytes), *old = trie;
    if (!n) return -1;
    memset(n, 0, bytes);
    size_t oldcap = trie ? trie_mask + 1 : 0;
    trie = n; trie_mask = cap - 1;
    for (size_t i = 0; i < oldcap; i++)
      if (old[i].id) {
        size_t j = trie_slot(old[i].parent, old[i].frame);
        while (trie[j].id) j = (j + 1) & trie_mask;
        trie[j] = old[i];
      }
    if (old) { _hpcmem_trace_free(old); trie_bytes -= oldcap * sizeof(hmt_tnode_t); }
    trie_bytes += bytes;
  }
  size_t i = trie_slot(parent, frame);
  while (trie[i].id) i = (i + 1) & trie_mask;
  trie[i] = (hmt_tnode_t){parent, frame, id};
  trie_count++;
  return 0;
}

uint64_t _hpcmem_stack_intern(const uint64_t *frames, uint32_t depth, hmt_stack_def_t *def) {
  uint64_t h = hash_frames(frames, depth);
  uint64_t id = lookup(__atomic_load_n(&table, __ATOMIC_ACQUIRE), h, frames, depth);
  def->n = 0;
  if (id) return id;
  int tid = _hpcmem_trace_tid();
  _hpcmem_tlock(&table_lock, tid);
  hmt_table_t *t = table;
  if ((id = lookup(t, h, frames, depth)) != 0) { _hpcmem_tlock_release(&table_lock); return id; }
  /* the longest chain of outer frames already in the trie */
  uint64_t node = 0;
  uint32_t i = depth;
  while (i > 0) {
    uint64_t child = trie_get(node, frames[i - 1]);
    if (!child) break;
    node = child;
    i--;
  }
  if (i == 0) {
    id = node;  /* the stack is a node already (the outer part of a deeper one) */
  } else {
    uint64_t first = __atomic_fetch_add(&next_id, i, __ATOMIC_RELAXED), prev = node;
    for (uint32_t k = 0; k < i; k++) {
      /* a full trie only stops sharing: the record still defines the nodes */
      if (trie_put(prev, frames[i - 1 - k], first + k) != 0) break;
      prev = first + k;
    }
    def->n = i; def->first = first; def->parent = node;
    id = first + i - 1;
  }
  if (nstacks < HMT_MAX_STACKS) {
    if (!t || nstacks + 1 > (t->mask + 1) / 2) {
      hmt_table_t *g = grow(t);
      if (g) {
        if (t && nold < 64) old_tables[nold++] = t;
        __atomic_store_n(&table, t = g, __ATOMIC_RELEASE);
      }
    }
    const uint64_t *copy = t && nstacks + 1 <= (t->mask + 1) * 3 / 4 ? arena_copy(frames, depth) : NULL;
    if (copy) { put(t, h, id, copy, depth); nstacks++; }
  }
  _hpcmem_tlock_release(&table_lock);
  return id;
}

uint64_t _hpcmem_stack_count(void) { return __atomic_load_n(&next_id, __ATOMIC_RELAXED) - 1; }

size_t _hpcmem_stack_memory(void) { return table_bytes + trie_bytes + nchunks * HMT_CHUNK_FRAMES * sizeof(uint64_t); }

/* Forget every stack (tests; nobody may be recording).  Old tables are
 * released too: nobody can be inside a lookup now. */
void _hpcmem_stack_reset(void) {
  for (size_t i = 0; i < nchunks; i++) _hpcmem_trace_free(chunks[i]);
  nchunks = chunk_used = 0;
  if (trie) _hpcmem_trace_free(trie);
  trie = NULL; trie_mask = trie_count = trie_bytes = 0;
  for (int i = 0; i < nold; i++) _hpcmem_trace_free(old_tables[i]);
  nold = 0;
  if (table) _hpcmem_trace_free(table);
  table = NULL;
  table_bytes = 0;
  next_id = 1; nstacks = 0;
  table_lock.owner = 0;
  __atomic_add_fetch(&sc_gen, 1, __ATOMIC_RELAXED);  /* cached ids are gone too */
}
