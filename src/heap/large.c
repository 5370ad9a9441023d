/* Large-block tier (SWAlloc).  See large.h for the layout and
 * docs/large-tier.md for the reasoning and the measurements.
 *
 * Invariants (checked by _hpcmem_large_check, except the last):
 *  - blocks tile each arena's [lo, top) in address order; every block start
 *    and size is a multiple of the configured alignment A0, so data that
 *    needs only A0 alignment never needs padding;
 *  - no two FREE blocks are adjacent (BUSY ones, being decayed outside the
 *    lock, and CACHED ones, on the quick list, are the exceptions: they
 *    rejoin their neighbours afterwards);
 *  - every FREE block is in its arena's tree for its size class; a FREE
 *    block is in the decay FIFO iff its dirty hull [dlo, dhi) is non-empty,
 *    and the FIFO is sorted by stamp;
 *  - every LIVE or CACHED block's data pointer is in the hash table, mapped
 *    to its record, and nothing else is; the quick list holds exactly the
 *    CACHED blocks, oldest first;
 *  - a LIVE block's last requested byte (tail) lies inside it; a stale page
 *    is a believed-resident one (docs/large-tier.md, "Block ends");
 *  - a FREE block reads as zero outside its dirty hull. */
#include "config.h"
#include "heap/large.h"
#include "heap/single.h"
#include "prim/prim.h"
#include "util/log.h"
#include "util/options.h"
#include <errno.h>
#include <limits.h>
#include <string.h>

#define REC_CAP_MAX ((size_t)1 << 24)   /* 16 M blocks: 2 GiB of records, lazily backed */
#define RING 1024                       /* recent frees kept to tell a double free */
#define HASH_MIN 256                    /* slots of the smallest table */
#define DECAY_BATCH 32
#define SWEEP_RUNS 128                  /* runs of pages given back by one sweep batch */
#define SWEEP_VISITS 1024               /* decay-list entries one sweep pass looks at */
#define STALE_RUNS 32                   /* runs of stale pages given back at one allocation */
/* End placement looks at this many free blocks, from the best fit up, and at
 * most this many believed-resident first pages in each (docs/large-tier.md).
 * Residents with tags at N = 4,096: 32 blocks 323-338 MiB, 159 k faults,
 * 1.6-1.8 s of CPU; 8 blocks 605-614 MiB, 244 k, 1.6-2.0 s; 2 blocks
 * 1,141 MiB, 435 k, 1.9-2.1 s. */
#define TC_OUT 4          /* blocks a thread was handed last whose free it recognises without the lock */
#define LAND_CANDIDATES 32
#define LAND_SHORT 4      /* ... and this many while the landing spots are on */
/* Landing spots (docs/large-tier.md): pairs of believed-resident pages at
 * most SPOT_DMAX pages apart (8 MiB with 4 KiB pages), indexed by their
 * distance, SPOT_WAYS to a distance (one cache line).  A free block that
 * changes pairs up to SPOT_SCAN of its believed-resident pages near what
 * changed, SPOT_PUTS pairs at most.  They are on while more than one
 * allocation in SPOT_ON_RATE misses a landing, off again below one in
 * SPOT_OFF_RATE, judged over SPOT_WINDOW allocations. */
#define SPOT_DMAX 2048
#define SPOT_WAYS 8
#define SPOT_SCAN 32
#define SPOT_PUTS 48
#define SPOT_WINDOW 4096
#define SPOT_ON_RATE 5
#define SPOT_OFF_RATE 8
#define LAND_HEADS 64
#define THP_SIZE ((size_t)2 << 20)
/* Transparent huge pages only for blocks of at least this size, in an arena
 * of their own.  Marking the whole region made every first touch fault in
 * 2 MiB: a heap of 4,096 blocks of up to 8 MiB of which the program touches
 * two pages each grew from 30 MiB to the whole extent (17 GiB).  Touching
 * all of a big block runs twice as fast with huge pages (fewer faults and
 * TLB misses); only its interior is advised, see thp_advise. */
#define THP_BLOCK_MIN ((size_t)16 << 20)

/* Total bytes the quick list may hold; a block larger than this is kept
 * alone.  Blocks of every size go on it: a miss sends the whole list to the
 * trees before anything is carved (large_alloc), so a larger request still
 * merges with and grows into what was freed (before that rule, a size sweep
 * with every page touched kept the 64 MiB and the 128 MiB block resident at
 * once, 251 instead of 138 MiB, and blocks of 16 MiB and more were kept
 * off the list; a pair of 32 MiB then cost 3x a pair of 8 MiB). */
#define QUICK_BYTES ((size_t)32 << 20)

/* CACHED: freed, on the quick list, still in the hash table (see quick_push) */
/* TCACHED: freed, kept in a thread's cache, counted as live (see "thread caches") */
enum { REC_UNUSED = 0, REC_LIVE = 0x11, REC_FREE = 0x22, REC_BUSY = 0x33, REC_CACHED = 0x44, REC_TCACHED = 0x55 };

/* Out-of-band block record.  The first cache line is all the best-fit
 * search and the coalescing look at. */
struct hpcmem_large_rec {
  size_t size;                      /* block bytes, start to the next block's start */
  char *start;
  hpcmem_large_rec_t *child[2], *parent;       /* free tree */
  hpcmem_large_rec_t *prev, *next;             /* address order (next: recycled list too) */
  uint32_t state;
  uint16_t red;
  uint16_t cls;                     /* FREE: the size class whose tree holds it (set_insert) */
  /* second line */
  char *data;                       /* LIVE: the pointer handed out */
  uint64_t stamp;                   /* FREE and dirty: when it became so */
  hpcmem_large_rec_t *dprev, *dnext;  /* decay FIFO (FREE) or busy list (BUSY) */
  char *dlo, *dhi;                  /* dirty hull: may be backed and non-zero */
  char *tail;                       /* LIVE: the last byte of the request */
  uint32_t swept;                   /* FREE: its believed-resident pages were given back (sweep) */
  uint32_t astamp;                  /* FREE and dirty: allocations made when it became so (mod 2^32) */
} __attribute__((aligned(64)));

/* Slot of the table from data pointer to record (linear probing; key 0 is
 * an empty slot). */
struct hpcmem_large_slot { uintptr_t key; hpcmem_large_rec_t *rec; };
typedef struct hpcmem_large_slot slot_t;

typedef hpcmem_large_rec_t rec_t;
/* A landing spot: free block rec (index + 1 into the record pool; 0: none)
 * holds believed-resident pages `page` and `page` + its bucket's distance. */
typedef struct hpcmem_large_spot { uint32_t rec, page; } spot_t;

/* A thread's cache of freed blocks (see "thread caches"). */
struct hpcmem_large_tc {
  hpcmem_large_t *L;                   /* the tier it serves; NULL before the thread's first use */
  hpcmem_large_t *on;                  /* L while the cache is switched on, else NULL: the one
                                          test of the unlocked paths (see tc_window) */
  int wait;                            /* the thread's locked allocations until tc_window looks */
  uint64_t mark;                       /* hits when the window began */
  uint64_t offs;                       /* times tc_window switched the cache off */
  rec_t *slot[HPCMEM_LARGE_TC_SLOTS];  /* freed blocks (TCACHED) or NULL; see tc_grab */
  char *data[HPCMEM_LARGE_TC_SLOTS];   /* the owner's copies: data pointer, usable bytes */
  size_t usable[HPCMEM_LARGE_TC_SLOTS];
  uint64_t stamp[HPCMEM_LARGE_TC_SLOTS];   /* freed at (the tier's clock as last read) */
  unsigned used;                       /* the owner's view: slots it filled (a decay pass may have
                                          emptied one since), and their usable bytes */
  size_t held;
  char *out[TC_OUT];                   /* the blocks handed out to the thread last */
  rec_t *outrec[TC_OUT];
  unsigned outpos;
  int dead;                            /* the thread is exiting: no more caching */
  int armed;                           /* the exit destructor is set */
  uint64_t hits;
  struct hpcmem_large_tc *prev, *next; /* L->tcs, under L's lock */
};
static __thread struct hpcmem_large_tc tc_self;

typedef hpcmem_large_arena_t arena_t;

static inline char *rend(const rec_t *r) { return r->start + r->size; }
static inline size_t hull(const rec_t *r) { return (size_t)(r->dhi - r->dlo); }
static inline size_t usable(const rec_t *r) { return (size_t)(rend(r) - r->data); }
static inline uintptr_t up(uintptr_t v, size_t a) { return (v + a - 1) & ~(uintptr_t)(a - 1); }
static inline uintptr_t down(uintptr_t v, size_t a) { return v & ~(uintptr_t)(a - 1); }
static inline arena_t *arena_of(hpcmem_large_t *L, const rec_t *r) {
  return L->narenas > 1 && r->start >= L->ar[1].lo ? &L->ar[1] : &L->ar[0];
}

static inline size_t lead_for(const char *start, size_t align) {
  return (size_t)(up((uintptr_t)start, align) - (uintptr_t)start);
}

/* Pages believed resident (see large.h); indexes are pages from L->base. */
static inline size_t pidx(const hpcmem_large_t *L, const void *p) {
  return (size_t)((const char *)p - L->base) >> L->pshift;
}
static inline int rbit(const hpcmem_large_t *L, size_t i) { return (int)((L->bits[i / 64][0] >> (i % 64)) & 1); }
static inline void rbit_set(hpcmem_large_t *L, size_t i) { L->bits[i / 64][0] |= (uint64_t)1 << (i % 64); }

/* Forget the pages [lo, hi) (page aligned): they were given back. */
static void bits_clear(hpcmem_large_t *L, const char *lo, const char *hi) {
  size_t i = pidx(L, lo), e = pidx(L, hi);
  for (; i < e && i % 64; i++) {
    L->bits[i / 64][0] &= ~((uint64_t)1 << (i % 64));
    L->bits[i / 64][1] &= ~((uint64_t)1 << (i % 64));
  }
  for (; i + 64 <= e; i += 64)
    if (L->bits[i / 64][0]) L->bits[i / 64][0] = L->bits[i / 64][1] = 0;   /* reads first: most words are
                                                                        zero, and never backed */
  for (; i < e; i++) {
    L->bits[i / 64][0] &= ~((uint64_t)1 << (i % 64));
    L->bits[i / 64][1] &= ~((uint64_t)1 << (i % 64));
  }
}

/* Mark the believed-resident pages of [lo, hi) (page aligned) stale: they
 * stayed inside a block for its whole long life without being one of its
 * ends (see large_alloc). */
static void stale_mark(hpcmem_large_t *L, const char *lo, const char *hi) {
  size_t i = pidx(L, lo), e = pidx(L, hi);
  while (i < e) {
    size_t w = i / 64, stop = (w + 1) * 64 < e ? (w + 1) * 64 : e;
    uint64_t m = (stop - w * 64 == 64 ? ~(uint64_t)0 : ((uint64_t)1 << (stop - w * 64)) - 1) &
                 (~(uint64_t)0 << (i % 64));
    L->bits[w][1] |= L->bits[w][0] & m;
    i = stop;
  }
}

/* End placement on now (one load: the configuration is folded in at init) */
static inline int ends_on(const hpcmem_large_t *L) { return __atomic_load_n(&L->ends, __ATOMIC_RELAXED); }

/* Landing spots (see "landing spots" below) */
static void spots_gen(hpcmem_large_t *L, const rec_t *r, size_t flo, size_t fhi);
/* Threads' caches (see "thread caches" below) */
static void tc_expire(hpcmem_large_t *L, uint64_t now, int force);
static void tc_exit(void *arg);
static int grow_in_place(hpcmem_large_t *L, rec_t *r, char *new_end);

/* ---------------------------------------------------------------- records */

static rec_t *rec_new(hpcmem_large_t *L) {
  rec_t *r = L->rec_free;
  if (r) L->rec_free = r->next;
  else if (L->rec_bump < L->recs_end) r = L->rec_bump++;
  else return NULL;
  memset(r, 0, sizeof *r);
  L->recs_used++;
  return r;
}

static void rec_put(hpcmem_large_t *L, rec_t *r) {
  r->state = REC_UNUSED;
  r->data = NULL;
  r->next = L->rec_free;
  L->rec_free = r;
  L->recs_used--;
}

/* ------------------------------------------------------------ hash table */

/* Data pointer -> record.  Out of band on purpose: an in-band header costs a
 * TLB and cache miss on every free and a page fault for every allocation
 * that lands on an untouched page, which dominated the cost of a large
 * allocation (docs/large-tier.md has the numbers). */

static inline size_t hash_home(unsigned shift, uintptr_t key) {
  return (size_t)(((uint64_t)key * 0x9e3779b97f4a7c15ull) >> shift);
}

/* Index of key's slot, or SIZE_MAX. */
static size_t hash_slot(const hpcmem_large_t *L, uintptr_t key) {
  size_t mask = L->hcap - 1;
  for (size_t i = hash_home(L->hshift, key);; i = (i + 1) & mask) {
    uintptr_t k = L->htab[i].key;
    if (k == key) return i;
    if (!k) return SIZE_MAX;
  }
}

static rec_t *hash_find(const hpcmem_large_t *L, uintptr_t key) {
  size_t i = hash_slot(L, key);
  return i == SIZE_MAX ? NULL : L->htab[i].rec;
}

static void hash_put(slot_t *tab, size_t cap, unsigned shift, uintptr_t key, rec_t *r) {
  size_t i = hash_home(shift, key);
  while (tab[i].key) i = (i + 1) & (cap - 1);
  tab[i].key = key;
  tab[i].rec = r;
}

/* Room for one more entry at a load of at most 1/2.  A full table doubles
 * into the other of its two areas; the old one is given back so that it
 * reads as zero when its turn comes again. */
static int hash_reserve(hpcmem_large_t *L) {
  if ((L->hcount + 1) * 2 <= L->hcap) return 0;
  size_t ocap = L->hcap, ncap = ocap * 2;
  if (ncap > L->hcap_max) return -ENOMEM;
  slot_t *old = L->htab, *nt = (slot_t *)L->harea[!L->hside];
  for (size_t i = 0; i < ocap; i++)
    if (old[i].key) hash_put(nt, ncap, L->hshift - 1, old[i].key, old[i].rec);
  L->htab = nt;
  L->hcap = ncap;
  L->hshift--;
  L->hside = !L->hside;
  _hpcmem_prim_decommit(old, ocap * sizeof(slot_t));
  return 0;
}

static void hash_remove_at(hpcmem_large_t *L, size_t i) {
  size_t mask = L->hcap - 1;
  slot_t *t = L->htab;
  /* backward shift: no tombstones, so probe chains never grow with churn */
  for (size_t j = i;;) {
    j = (j + 1) & mask;
    if (!t[j].key) break;
    size_t k = hash_home(L->hshift, t[j].key);
    if (i <= j ? (i < k && k <= j) : (i < k || k <= j)) continue;
    t[i] = t[j];
    i = j;
  }
  t[i].key = 0;
  t[i].rec = NULL;
  L->hcount--;
}

/* --------------------------------------------------- red-black free tree */

/* Children as an array so that descents pick a side without a branch:
 * the comparisons of a best-fit search are unpredictable by nature. */
static inline int key_less(const rec_t *a, const rec_t *b) {
  unsigned __int128 ka = ((unsigned __int128)a->size << 64) | (uintptr_t)a->start;
  unsigned __int128 kb = ((unsigned __int128)b->size << 64) | (uintptr_t)b->start;
  return ka < kb;
}

static inline int is_red(const rec_t *n) { return n && n->red; }

/* dir 0: x's right child takes x's place and x becomes its left child. */
static void rotate(rec_t **root, rec_t *x, int dir) {
  rec_t *y = x->child[!dir];
  x->child[!dir] = y->child[dir];
  if (y->child[dir]) y->child[dir]->parent = x;
  y->parent = x->parent;
  if (!x->parent) *root = y;
  else x->parent->child[x == x->parent->child[1]] = y;
  y->child[dir] = x;
  x->parent = y;
}

static void tree_insert(rec_t **root, rec_t *z) {
  rec_t *y = NULL, *x = *root;
  int dir = 0;
  while (x) { y = x; dir = !key_less(z, x); x = x->child[dir]; }
  z->parent = y;
  z->child[0] = z->child[1] = NULL;
  z->red = 1;
  if (!y) *root = z;
  else y->child[dir] = z;
  rec_t *p;
  while ((p = z->parent) && p->red) {
    rec_t *g = p->parent;
    int pd = p == g->child[1];
    rec_t *u = g->child[!pd];
    if (is_red(u)) { p->red = u->red = 0; g->red = 1; z = g; continue; }
    if (z == p->child[!pd]) { rotate(root, p, pd); z = p; p = z->parent; }
    p->red = 0; g->red = 1;
    rotate(root, g, !pd);
  }
  (*root)->red = 0;
}

static void transplant(rec_t **root, rec_t *u, rec_t *v) {
  if (!u->parent) *root = v;
  else u->parent->child[u == u->parent->child[1]] = v;
  if (v) v->parent = u->parent;
}

static void erase_fixup(rec_t **root, rec_t *x, rec_t *xp) {
  /* x may be NULL; a removed black node always leaves x a non-NULL sibling */
  while (x != *root && !is_red(x)) {
    int d = x != xp->child[0];
    rec_t *w = xp->child[!d];
    if (w->red) { w->red = 0; xp->red = 1; rotate(root, xp, d); w = xp->child[!d]; }
    if (!is_red(w->child[0]) && !is_red(w->child[1])) { w->red = 1; x = xp; xp = x->parent; continue; }
    if (!is_red(w->child[!d])) { w->child[d]->red = 0; w->red = 1; rotate(root, w, !d); w = xp->child[!d]; }
    w->red = xp->red; xp->red = 0;
    w->child[!d]->red = 0;
    rotate(root, xp, d);
    x = *root;
  }
  if (x) x->red = 0;
}

static void tree_erase(rec_t **root, rec_t *z) {
  rec_t *x, *xp;
  int removed_red = z->red;
  if (!z->child[0] || !z->child[1]) {
    x = z->child[0] ? z->child[0] : z->child[1];
    xp = z->parent;
    transplant(root, z, x);
  } else {
    rec_t *y = z->child[1];
    while (y->child[0]) y = y->child[0];
    removed_red = y->red;
    x = y->child[1];
    if (y->parent == z) {
      xp = y;
    } else {
      xp = y->parent;
      transplant(root, y, y->child[1]);
      y->child[1] = z->child[1];
      y->child[1]->parent = y;
    }
    transplant(root, z, y);
    y->child[0] = z->child[0];
    y->child[0]->parent = y;
    y->red = z->red;
  }
  if (!removed_red) erase_fixup(root, x, xp);
  z->child[0] = z->child[1] = z->parent = NULL;
}

/* smallest free block of at least `size` bytes (lowest address among equals) */
static rec_t *tree_lower_bound(rec_t *n, size_t size) {
  rec_t *best = NULL;
  while (n) {
    int small = n->size < size;
    best = small ? best : n;
    n = n->child[small];
  }
  return best;
}

static rec_t *tree_next(rec_t *n) {
  if (n->child[1]) { n = n->child[1]; while (n->child[0]) n = n->child[0]; return n; }
  while (n->parent && n == n->parent->child[1]) n = n->parent;
  return n->parent;
}

/* The free blocks of an arena are split by size class (four per power of
 * two), one red-black tree per class and a bitmap of the non-empty ones.
 * Together they are still one set ordered by (size, address) with exact
 * best fit, but each tree is a few levels deep instead of log2(n): the
 * descents and rebalancing were half of the cost of an alloc+free pair. */
static inline unsigned size_class(size_t s) {
  unsigned lg = 63u - (unsigned)__builtin_clzl(s);   /* s >= 16 */
  return 4 * (lg - 2) + (unsigned)((s >> (lg - 2)) & 3);
}

static inline rec_t *leftmost(rec_t *n) {
  while (n->child[0]) n = n->child[0];
  return n;
}

/* First non-empty class above c, or -1. */
static int next_class(const arena_t *A, unsigned c) {
  unsigned i = c + 1;
  for (unsigned w = i / 64; w < HPCMEM_LARGE_CLASSES / 64; w++) {
    uint64_t m = A->nonempty[w];
    if (w == i / 64) m &= ~(uint64_t)0 << (i % 64);
    if (m) return (int)(w * 64 + (unsigned)__builtin_ctzll(m));
  }
  return -1;
}

static void set_insert(arena_t *A, rec_t *r) {
  unsigned c = size_class(r->size);
  r->cls = (uint16_t)c;   /* a block's size changes only while it is out of the tree */
  tree_insert(&A->roots[c], r);
  A->nonempty[c / 64] |= (uint64_t)1 << (c % 64);
}

static void set_erase(arena_t *A, rec_t *r) {
  unsigned c = r->cls;
  tree_erase(&A->roots[c], r);
  if (!A->roots[c]) A->nonempty[c / 64] &= ~((uint64_t)1 << (c % 64));
}

/* smallest free block of at least `size` bytes (lowest address among equals) */
static rec_t *set_lower_bound(const arena_t *A, size_t size) {
  unsigned c = size_class(size);
  rec_t *n = tree_lower_bound(A->roots[c], size);
  if (n) return n;
  int d = next_class(A, c);
  return d < 0 ? NULL : leftmost(A->roots[d]);
}

static rec_t *set_next(const arena_t *A, rec_t *n) {
  rec_t *m = tree_next(n);
  if (m) return m;
  int d = next_class(A, size_class(n->size));
  return d < 0 ? NULL : leftmost(A->roots[d]);
}

static rec_t *set_first(const arena_t *A) {
  int d = next_class(A, (unsigned)-1);
  return d < 0 ? NULL : leftmost(A->roots[d]);
}

/* ------------------------------------------------- decay FIFO, busy list */

static void fifo_insert_after(hpcmem_large_t *L, rec_t *pos, rec_t *r) {
  r->dprev = pos;
  r->dnext = pos ? pos->dnext : L->dhead;
  if (r->dnext) r->dnext->dprev = r; else L->dtail = r;
  if (pos) pos->dnext = r; else L->dhead = r;
}

static void fifo_remove(hpcmem_large_t *L, rec_t *r) {
  if (r->dprev) r->dprev->dnext = r->dnext; else L->dhead = r->dnext;
  if (r->dnext) r->dnext->dprev = r->dprev; else L->dtail = r->dprev;
  r->dprev = r->dnext = NULL;
}

static void busy_push(hpcmem_large_t *L, rec_t *r) {
  r->dprev = NULL;
  r->dnext = L->busy;
  if (L->busy) L->busy->dprev = r;
  L->busy = r;
}

static void busy_remove(hpcmem_large_t *L, rec_t *r) {
  if (r->dprev) r->dprev->dnext = r->dnext; else L->busy = r->dnext;
  if (r->dnext) r->dnext->dprev = r->dprev;
  r->dprev = r->dnext = NULL;
}

/* ------------------------------------------------------ free block sets */

/* Make r (detached, not counted) a counted FREE block in the tree; the
 * caller puts it into the FIFO when dirty. */
static void free_attach(hpcmem_large_t *L, rec_t *r) {
  r->state = REC_FREE;
  set_insert(arena_of(L, r), r);
  L->free_blocks++;
  L->free_bytes += r->size;
  L->retained_bytes += hull(r);
}

/* Take a FREE block out of the tree and out of the counts (not the FIFO). */
static void free_unlink(hpcmem_large_t *L, rec_t *r) {
  set_erase(arena_of(L, r), r);
  L->free_blocks--;
  L->free_bytes -= r->size;
  L->retained_bytes -= hull(r);
}

/* The same and out of the FIFO.  Returns its FIFO predecessor so that a
 * piece of it can take its place. */
static rec_t *free_detach(hpcmem_large_t *L, rec_t *r) {
  rec_t *pos = NULL;
  if (r->dlo < r->dhi) { pos = r->dprev; fifo_remove(L, r); }
  free_unlink(L, r);
  return pos;
}

/* Clip r's dirty hull to its own extent (after the block was cut). */
static void clip_hull(rec_t *r, char *lo, char *hi) {
  char *a = lo > r->start ? lo : r->start, *b = hi < rend(r) ? hi : rend(r);
  if (a < b) { r->dlo = a; r->dhi = b; }
  else r->dlo = r->dhi = NULL;
}

/* b directly follows a: a takes over b's extent and dirty pages. */
static void absorb(hpcmem_large_t *L, rec_t *a, rec_t *b) {
  a->size += b->size;
  a->swept &= b->swept;
  a->next = b->next;
  if (b->next) b->next->prev = a; else arena_of(L, a)->last = a;
  if (b->dlo < b->dhi) {
    if (a->dlo < a->dhi) {
      if (b->dlo < a->dlo) a->dlo = b->dlo;
      if (b->dhi > a->dhi) a->dhi = b->dhi;
    } else {
      a->dlo = b->dlo;
      a->dhi = b->dhi;
    }
  }
  rec_put(L, b);
}

/* r (detached, uncounted, with its dirty hull set) becomes free: it merges
 * with its free neighbours and joins the tree.  A dirty result joins the
 * decay FIFO with the age of its oldest dirty part, in that part's place:
 * stamping it "now" instead would let a steady trickle of small frees next
 * to an old free region keep that region's pages forever.  The price is
 * that a piece freed next to an old dirty block may go back to the OS with
 * it, once per decay period at most. */
static rec_t *release_block(hpcmem_large_t *L, rec_t *r, uint64_t now, uint32_t anow) {
  rec_t *p = r->prev, *n = r->next, *old = NULL, *pos = L->dtail;
  if (p && p->state != REC_FREE) p = NULL;
  if (n && n->state != REC_FREE) n = NULL;
  if (p && p->dlo < p->dhi) old = p;
  if (n && n->dlo < n->dhi) {
    if (!old || n->stamp < old->stamp) {
      if (old) fifo_remove(L, old);
      old = n;
    } else {
      fifo_remove(L, n);
    }
  }
  uint64_t stamp = now;
  if (old) {
    stamp = old->stamp;
    anow = old->astamp;
    pos = old->dprev;
    fifo_remove(L, old);
  } else if (L->dtail && L->dtail->stamp > stamp) {
    stamp = L->dtail->stamp;   /* an explicit `now` from the past: keep the FIFO sorted */
  }
  if (p) { free_unlink(L, p); absorb(L, p, r); r = p; }
  if (n) { free_unlink(L, n); absorb(L, r, n); }
  free_attach(L, r);
  if (r->dlo < r->dhi) {
    r->stamp = stamp;
    r->astamp = anow;
    fifo_insert_after(L, pos, r);
  }
  return r;
}

/* Cut [start, end) of a new piece off block r into a fresh free block that
 * inherits r's dirty pages there and r's FIFO place (pos, stamp). */
static rec_t *split_free(hpcmem_large_t *L, rec_t *r, rec_t *piece, int before,
                         size_t bytes, rec_t **pos, uint64_t stamp, uint32_t astamp) {
  char *dlo = r->dlo, *dhi = r->dhi;
  if (before) {
    piece->start = r->start;
    piece->size = bytes;
    piece->prev = r->prev;
    piece->next = r;
    if (r->prev) r->prev->next = piece; else arena_of(L, r)->first = piece;
    r->prev = piece;
    r->start += bytes;
  } else {
    piece->start = rend(r) - bytes;
    piece->size = bytes;
    piece->next = r->next;
    piece->prev = r;
    if (r->next) r->next->prev = piece; else arena_of(L, r)->last = piece;
    r->next = piece;
  }
  r->size -= bytes;
  clip_hull(piece, dlo, dhi);
  piece->swept = r->swept;
  free_attach(L, piece);
  if (L->spots_on && ends_on(L)) spots_gen(L, piece, pidx(L, piece->start), pidx(L, rend(piece) - 1));
  if (piece->dlo < piece->dhi) {
    piece->stamp = stamp;
    piece->astamp = astamp;
    fifo_insert_after(L, *pos, piece);
    *pos = piece;
  }
  return piece;
}

/* ------------------------------------------------------------ debugging */

static int fail(const char *what, const void *where) {
  _hpcmem_warn("large tier corrupt: %s (at %p)", what, where);
  return -EFAULT;
}

#ifdef HPCMEM_DEBUG
/* Cheap local check after each operation: the block and its neighbours. */
static void debug_local(hpcmem_large_t *L, const rec_t *r) {
  if (!r || r->state == REC_UNUSED) return;
  const arena_t *A = arena_of(L, r);
  const rec_t *p = r->prev, *n = r->next;
  if ((p ? rend(p) : A->lo) != r->start) _hpcmem_fatal("large: block %p not contiguous with prev", r->start);
  if ((n ? n->start : A->top) != rend(r)) _hpcmem_fatal("large: block %p not contiguous with next", r->start);
  if (p && p->next != r) _hpcmem_fatal("large: broken prev link at %p", r->start);
  if (n && n->prev != r) _hpcmem_fatal("large: broken next link at %p", r->start);
  if (r->state == REC_FREE && ((p && p->state == REC_FREE) || (n && n->state == REC_FREE)))
    _hpcmem_fatal("large: adjacent free blocks at %p", r->start);
  size_t mapped = 0;
  for (int i = 0; i < L->narenas; i++) mapped += (size_t)(L->ar[i].top - L->ar[i].lo);
  if (L->free_bytes + L->live_bytes + L->overhead_bytes != mapped)
    _hpcmem_fatal("large: byte counts do not add up");
}
#define DEBUG_LOCAL(L, r) debug_local(L, r)
#else
#define DEBUG_LOCAL(L, r) ((void)0)
#endif

/* ------------------------------------------------------------ quick list */

/* The last few blocks freed are kept whole on the quick list (a departure
 * from the paper, docs/large-tier.md): a block stays in the hash table with
 * its data pointer, is not merged and not put into a tree, and a request
 * it fits with little waste takes it back as it is.  A malloc+free pair of
 * one size then costs no tree descent, no rebalancing, no coalescing and no
 * hash table update; and what was freed last, whose pages are the most
 * likely to be resident, is reused first.  Entries count as free and
 * retained bytes; they leave for the trees (as dirty free blocks stamped
 * with their free time) when the list is full, and by the same decay as
 * every free block. */

static void quick_take_out(hpcmem_large_t *L, unsigned i) {
  rec_t *r = L->quick[i];
  L->quick_bytes -= r->size;
  L->free_blocks--;
  L->free_bytes -= r->size;
  L->retained_bytes -= r->size;
  L->nquick--;
  for (unsigned k = i; k < L->nquick; k++) {
    L->quick[k] = L->quick[k + 1];
    L->quick_usable[k] = L->quick_usable[k + 1];
  }
}

/* Entry i leaves the list for the trees, as a block freed at its stamp. */
static void quick_evict(hpcmem_large_t *L, unsigned i) {
  rec_t *r = L->quick[i];
  if (L->spots_on) {   /* where spots_gen will start reading bits: r's or its free neighbour's start */
    size_t f = pidx(L, r->start);
    __builtin_prefetch(&L->bits[(f > SPOT_DMAX ? f - SPOT_DMAX : 0) / 64][0]);
    if (r->prev) __builtin_prefetch(&L->bits[pidx(L, r->prev->start) / 64][0]);
  }
  quick_take_out(L, i);
  hash_remove_at(L, hash_slot(L, (uintptr_t)r->data));
  L->ring[L->ring_pos++ % RING] = (uintptr_t)r->data;
  size_t flo = pidx(L, r->start), fhi = pidx(L, rend(r) - 1);
  r->data = NULL;
  r->dlo = r->start;
  r->dhi = rend(r);
  r->swept = 0;
  r = release_block(L, r, r->stamp, r->astamp);
  if (L->spots_on && ends_on(L)) spots_gen(L, r, flo, fhi);
  DEBUG_LOCAL(L, r);
}

/* r, just freed (uncounted, still in the hash table), joins the list. */
static void quick_push(hpcmem_large_t *L, rec_t *r, uint64_t now) {
  r->state = REC_CACHED;
  r->stamp = now;
  r->astamp = (uint32_t)L->alloc_count;
  r->dlo = r->start;     /* the owner may have touched all of it */
  r->dhi = rend(r);
  L->quick_bytes += r->size;   /* counted first: the byte sums hold while the oldest leave */
  L->free_blocks++;
  L->free_bytes += r->size;
  L->retained_bytes += r->size;
  while (L->nquick && (L->nquick == L->quick_max || L->quick_bytes > QUICK_BYTES))
    quick_evict(L, 0);     /* a block over QUICK_BYTES stays, alone */
  L->quick[L->nquick] = r;
  L->quick_usable[L->nquick] = usable(r);
  L->nquick++;
}

/* The entry that serves kb bytes at align with the least waste (at most an
 * eighth of it, the newest among equals), or -1. */
static int quick_find(const hpcmem_large_t *L, size_t kb, size_t align) {
  int best = -1;
  size_t bu = SIZE_MAX;
  for (unsigned i = 0; i < L->nquick; i++) {
    size_t u = L->quick_usable[i];
    if (u < kb || u - kb > u / 8 || u > bu) continue;
    if (align > L->align && ((uintptr_t)L->quick[i]->data & (align - 1))) continue;
    best = (int)i;
    bu = u;
  }
  return best;
}

/* Entries freed more than the decay time ago (all when force) go to the
 * trees, where this decay pass finds them. */
static void quick_expire(hpcmem_large_t *L, uint64_t now, int force);

/* --------------------------------------------------------------- decay */

static int decay_due(const hpcmem_large_t *L, const rec_t *r, uint64_t now) {
  return now >= r->stamp && now - r->stamp >= L->decay_ns;
}


static void schedule(hpcmem_large_t *L, uint64_t now) {
  /* with end placement on, the sweep (aged in allocations) wants passes
   * more often than decay: every decay/256, but not more than once a ms */
  uint64_t step = L->decay_ns / 4;
  if (ends_on(L) && step > 1000000) step = L->decay_ns / 256 > 1000000 ? L->decay_ns / 256 : 1000000;
  L->next_decay_ns = now + step < now ? UINT64_MAX : now + step;
}

static void quick_expire(hpcmem_large_t *L, uint64_t now, int force) {
  while (L->nquick && (force || decay_due(L, L->quick[0], now))) quick_evict(L, 0);
}

/* Runs of believed-resident pages in [a, b) (page aligned) appended to
 * rlo/rhi from *k, at most cap in all, their bits cleared.  -1 (nothing
 * appended or cleared) when they do not fit. */
static int collect_runs(hpcmem_large_t *L, char *a, char *b, char **rlo, char **rhi, unsigned *k, unsigned cap) {
  size_t i = pidx(L, a), e = pidx(L, b);
  unsigned k0 = *k, kk = k0;
  while (i < e) {
    uint64_t w = L->bits[i / 64][0] & (~(uint64_t)0 << (i % 64));
    while (!w && (i = (i / 64 + 1) * 64) < e) w = L->bits[i / 64][0];
    if (!w) break;
    size_t s0 = i / 64 * 64 + (size_t)__builtin_ctzll(w);
    if (s0 >= e) break;
    uint64_t z = ~L->bits[s0 / 64][0] & (~(uint64_t)0 << (s0 % 64));
    size_t t = s0;
    while (!z && (t = (t / 64 + 1) * 64) < e) z = ~L->bits[t / 64][0];
    t = z ? t / 64 * 64 + (size_t)__builtin_ctzll(z) : e;
    if (t > e) t = e;
    if (kk == cap) return -1;
    rlo[kk] = L->base + (s0 << L->pshift);
    rhi[kk] = L->base + (t << L->pshift);
    kk++;
    i = t;
  }
  for (unsigned x = k0; x < kk; x++) bits_clear(L, rlo[x], rhi[x]);
  *k = kk;
  return 0;
}

static void count_swept(hpcmem_large_t *L, char *const *lo, char *const *hi, unsigned n) {
  for (unsigned x = 0; x < n; x++) {
    L->swept_pages += (size_t)(hi[x] - lo[x]) >> L->pshift;
    L->decayed_bytes += (size_t)(hi[x] - lo[x]);
  }
  L->decay_count += n;
}

/* The whole pages of free block r's dirty hull, [*a, *b), and the hull
 * clipped to the block, [*ha, *hb). */
static void hull_pages(const hpcmem_large_t *L, const rec_t *r, char **ha, char **hb, char **a, char **b) {
  *ha = r->dlo > r->start ? r->dlo : r->start;
  *hb = r->dhi < rend(r) ? r->dhi : rend(r);
  *a = (char *)up((uintptr_t)*ha, L->page);
  *b = (char *)down((uintptr_t)*hb, L->page);
}

/* Free block r leaves the tree for the decay list's batch (BUSY): nobody
 * allocates it while its pages go back without the lock. */
static void make_busy(hpcmem_large_t *L, rec_t *r, char *ha, char *hb) {
  free_detach(L, r);
  r->state = REC_BUSY;
  r->dlo = ha; r->dhi = hb;   /* what fork_child must assume is still dirty */
  L->free_blocks++;
  L->free_bytes += r->size;
  busy_push(L, r);
}

/* Entered with the lock held, leaves it released.  Old dirty free blocks
 * are taken out (BUSY) so nobody allocates them while madvise runs without
 * the lock; then they rejoin their neighbours as clean blocks.  With end
 * placement on, the sweep also takes out free blocks that stayed dirty
 * while sweep_allocs blocks were allocated and were not swept yet, and
 * gives back only their believed-resident pages; they rejoin still dirty
 * (the rest of the hull waits for decay). */
static void decay_unlock(hpcmem_large_t *L, uint64_t now, int force) {
  for (;;) {
    rec_t *batch[DECAY_BATCH];
    char *lo[DECAY_BATCH], *hi[DECAY_BATCH];   /* hull decay: pages [lo, hi); sweep: lo NULL */
    unsigned first[DECAY_BATCH + 1];           /* sweep: runs [first[i], first[i + 1]) */
    char *rlo[SWEEP_RUNS], *rhi[SWEEP_RUNS];
    int n = 0, more = 0;
    unsigned nr = 0;
    if (L->tcs) tc_expire(L, now, force);
    quick_expire(L, now, force);
    while (L->dhead) {
      rec_t *r = L->dhead;
      if (!force && !decay_due(L, r, now)) break;
      if (n == DECAY_BATCH) { more = 1; break; }
      char *ha, *hb, *a, *b;
      hull_pages(L, r, &ha, &hb, &a, &b);
      if (a >= b) {     /* only pages shared with live neighbours: clear our bytes of them */
        fifo_remove(L, r);
        L->retained_bytes -= hull(r);
        memset(ha, 0, (size_t)(hb - ha));
        r->dlo = r->dhi = NULL;
        continue;
      }
      make_busy(L, r, ha, hb);
      first[n] = nr;
      batch[n] = r; lo[n] = a; hi[n] = b; n++;
    }
    if (!more && !force && ends_on(L)) {
      int visits = 0;
      for (rec_t *r = L->dhead, *nx; r && visits < SWEEP_VISITS; r = nx, visits++) {
        nx = r->dnext;
        if ((uint32_t)((uint32_t)L->alloc_count - r->astamp) < L->sweep_allocs) break;
        if (r->swept) continue;
        if (n == DECAY_BATCH) { more = 1; break; }
        char *ha, *hb, *a, *b;
        hull_pages(L, r, &ha, &hb, &a, &b);
        unsigned k = nr;
        if (a < b && collect_runs(L, a, b, rlo, rhi, &k, SWEEP_RUNS) < 0) {
          if (nr) { more = 1; break; }   /* the next batch */
          /* more runs than a batch holds: believed resident almost
           * everywhere, so the whole hull goes back, as at decay */
          make_busy(L, r, ha, hb);
          first[n] = nr;
          batch[n] = r; lo[n] = a; hi[n] = b; n++;
          continue;
        }
        if (k == nr) { r->swept = 1; continue; }   /* nothing believed resident */
        make_busy(L, r, ha, hb);
        first[n] = nr;
        batch[n] = r; lo[n] = NULL; hi[n] = NULL; n++;
        nr = k;
      }
    }
    first[n] = nr;
    if (!more) schedule(L, now);
    _hpcmem_unlock_st(&L->lock);
    if (!n) return;
    for (int i = 0; i < n; i++) {
      /* whole pages go back to the OS; the parts of pages shared with live
       * neighbours are cleared, so that a free block reads as zero outside
       * its dirty hull (what _hpcmem_large_alloc_zeroed relies on) */
      rec_t *r = batch[i];
      if (!lo[i]) continue;   /* sweep: its runs go back all at once, below */
      if (L->discard) _hpcmem_prim_discard(lo[i], (size_t)(hi[i] - lo[i]));
      else _hpcmem_prim_decommit(lo[i], (size_t)(hi[i] - lo[i]));
      memset(r->dlo, 0, (size_t)(lo[i] - r->dlo));
      memset(hi[i], 0, (size_t)(r->dhi - hi[i]));
    }
    if (nr) _hpcmem_prim_decommit_many(rlo, rhi, nr, L->discard);
    _hpcmem_lock_st(&L->lock);
    for (int i = 0; i < n; i++) {
      rec_t *r = batch[i];
      busy_remove(L, r);
      L->free_blocks--;
      L->free_bytes -= r->size;
      if (lo[i]) {
        L->decayed_bytes += (size_t)(hi[i] - lo[i]);
        L->decay_count++;
        bits_clear(L, lo[i], hi[i]);
        r->dlo = r->dhi = NULL;
      } else {
        count_swept(L, rlo + first[i], rhi + first[i], first[i + 1] - first[i]);
        r->swept = 1;              /* dirty still: the rest of its hull waits for decay */
      }
      r = release_block(L, r, now, (uint32_t)L->alloc_count);
      DEBUG_LOCAL(L, r);
    }
    if (!more && !(force && L->dhead)) { _hpcmem_unlock_st(&L->lock); return; }
  }
}

/* Decay works in milliseconds: the coarse monotonic clock (the kernel's
 * tick, 1-4 ms, read from the vDSO in ~3 ns against ~27 ns for the exact
 * one on the development VM) is read on one operation in eight; reading the
 * exact clock on every call was a quarter of the cost of an alloc+free pair.
 * It lags the exact clock by at most a tick, which only makes a block decay
 * that much earlier.  Called with the lock held. */
static inline uint64_t clock_tick(hpcmem_large_t *L) {
  if (!(L->tick++ & 7)) L->now_ns = _hpcmem_coarse_now_ns();
  return L->now_ns;
}

static inline void finish_unlock(hpcmem_large_t *L, uint64_t now) {
  if ((L->dhead || L->nquick || L->tcs) && now >= L->next_decay_ns) decay_unlock(L, now, 0);
  else _hpcmem_unlock_st(&L->lock);
}

/* ---------------------------------------------------------------- setup */

void _hpcmem_large_config_from_options(hpcmem_large_config_t *cfg) {
  _hpcmem_options_init();
  cfg->reserve = (size_t)1 << 40;
  cfg->align = (size_t)_hpcmem_opt(LARGE_ALIGN);
  cfg->min_split = (size_t)128 << 10;
  cfg->decay_ns = (uint64_t)_hpcmem_opt(DECAY_MS) * 1000000u;
  /* huge pages for big blocks where the kernel hands them out without
   * compacting memory in the fault: where it compacts (defrag "madvise", the
   * default), a huge page faulted in cost 2-4 ms on the development VM, 2-3x
   * its 512 small pages, and resident memory was no faster to touch
   * (docs/large-tier.md) */
  int64_t mode = _hpcmem_opt(LARGE_THP);
  cfg->thp = _hpcmem_opt(THP) && (mode == HPCMEM_LARGE_THP_ON ||
                                  (mode == HPCMEM_LARGE_THP_AUTO && _hpcmem_prim_thp_fault_stalls() == 0));
  cfg->region = NULL;
  cfg->discard = 0;
  cfg->quick = HPCMEM_LARGE_QUICK;
  cfg->warm = 0;
  cfg->ends = 0;
  cfg->probe_min = 0;
  cfg->sweep_allocs = 0;
  cfg->spots = 0;
  cfg->tcache = 0;
}

/* Start-up code, run once a process: compiled for size as the start's
 * files are (topo/sysfs.c), 325 bytes less of the code every process runs
 * (src/hot-text.ld). */
__attribute__((optimize("Os"))) int _hpcmem_large_init(hpcmem_large_t *L, const hpcmem_large_config_t *cfg) {
  hpcmem_large_config_t c;
  if (cfg) c = *cfg;
  else {
    _hpcmem_large_config_from_options(&c);
    c.warm = (size_t)_hpcmem_opt(LARGE_THRESHOLD);   /* the process's tier */
    c.tcache = 1;
  }
  if (!c.reserve) c.reserve = (size_t)1 << 40;
  if (!c.align) c.align = 256;
  if (c.align < 16 || (c.align & (c.align - 1)) || c.align > ((size_t)1 << 30)) return -EINVAL;

  size_t page = _hpcmem_prim_page_size();
  size_t gran = c.align > THP_SIZE ? c.align : THP_SIZE;
  if (c.reserve > ((size_t)1 << 46)) return -ENOMEM;
  if (c.region && ((uintptr_t)c.region % c.align || c.reserve % c.align)) return -EINVAL;
  size_t reserve = c.region ? c.reserve : up(c.reserve, gran);
  size_t cap = reserve / c.align + 2;
  if (cap > REC_CAP_MAX) cap = REC_CAP_MAX;
  size_t hcap_max = HASH_MIN;
  while (hcap_max < 2 * cap) hcap_max *= 2;
  /* [records | hash table area 0 | area 1 | recent frees | data], all lazily backed */
  size_t rec_bytes = up(cap * sizeof(rec_t), page);
  size_t hbytes = up(hcap_max * sizeof(slot_t), page);
  size_t ring_bytes = up(RING * sizeof(uintptr_t), page);
  int two = c.thp && !c.region && reserve >= 4 * THP_BLOCK_MIN;
  size_t hbits_bytes = two ? up((reserve / THP_SIZE + 63) / 64 * 8, page) : 0;
  size_t bits_bytes = up((reserve / page + 63) / 64 * 16, page);   /* 64 MiB a TiB */
  /* spots name pages in 32 bits */
  size_t spot_bytes = reserve / page < UINT32_MAX - SPOT_DMAX ? up((SPOT_DMAX + 1) * SPOT_WAYS * sizeof(spot_t), page) : 0;
  size_t meta = up(rec_bytes + 2 * hbytes + ring_bytes + hbits_bytes + bits_bytes + spot_bytes, gran);
  char *map = _hpcmem_prim_reserve(c.region ? meta : meta + reserve, gran);
  if (!map) return -(errno ? errno : ENOMEM);

  memset(L, 0, sizeof *L);
  L->thp = c.thp;
  L->align = c.align;
  L->page = page;
  L->min_split = c.min_split;
  L->decay_ns = c.decay_ns;
  /* decay 0 gives pages back at every free: nothing may wait on the list */
  L->quick_max = !c.decay_ns ? 0 : c.quick > HPCMEM_LARGE_QUICK ? HPCMEM_LARGE_QUICK : c.quick;
  L->map = map;
  L->map_size = c.region ? meta : meta + reserve;
  L->discard = c.discard;
  L->recs = L->rec_bump = (rec_t *)map;
  L->recs_end = L->recs + cap;
  L->harea[0] = map + rec_bytes;
  L->harea[1] = map + rec_bytes + hbytes;
  L->htab = (slot_t *)L->harea[0];
  L->hcap = HASH_MIN;
  L->hcap_max = hcap_max;
  L->hshift = 64 - (unsigned)__builtin_ctzl(HASH_MIN);
  L->ring = (uintptr_t *)(map + rec_bytes + 2 * hbytes);
  L->bits = (uint64_t (*)[2])(map + rec_bytes + 2 * hbytes + ring_bytes + hbits_bytes);
  L->pshift = (unsigned)__builtin_ctzl(page);
  L->spots = spot_bytes ? (spot_t *)((char *)L->bits + bits_bytes) : NULL;
  L->spot_smin = SIZE_MAX;
  L->spots_cfg = c.spots;
  L->spots_on = c.spots > 0 && L->spots;
  /* a thread's cache holds blocks as the quick list does, with its decay */
  L->tc_on = c.tcache > 0 && L->quick_max;
  if (L->tc_on) L->tc_on = L->tc_key_ok = pthread_key_create(&L->tc_key, tc_exit) == 0;
  /* end placement needs data that may start anywhere in a page, and pages
   * that stay after a free (decay 0 gives every one back at once) */
  L->ends_cfg = c.align > page || !c.decay_ns ? -1 : c.ends;
  L->ends = L->ends_cfg > 0;
  L->probe_score = 3;      /* one probe that finds written ends only turns it on */
  L->probe_min = c.probe_min ? c.probe_min : HPCMEM_LARGE_PROBE_MIN;
  L->probe_gap = L->probe_wait = L->probe_min;
  L->sweep_allocs = c.sweep_allocs ? c.sweep_allocs : HPCMEM_LARGE_SWEEP_ALLOCS;
  L->base = c.region ? c.region : map + meta;
  L->end = L->base + reserve;
  L->narenas = 1;
  L->ar[0].lo = L->ar[0].top = L->base;
  L->ar[0].end = L->end;
  if (two) {
    /* blocks of 16 MiB and more in the upper half, their interiors on huge
     * pages; the rest of the arena is marked NOHUGEPAGE, which changes
     * nothing in the kernel's "madvise" mode and keeps the ends of blocks on
     * small pages in its "always" mode */
    char *mid = L->base + down(reserve / 2, gran);
    L->ar[0].end = mid;
    L->ar[1].lo = L->ar[1].top = mid;
    L->ar[1].end = L->end;
    L->narenas = 2;
    L->huge_min = THP_BLOCK_MIN;
    L->hbits = (uint64_t *)(map + rec_bytes + 2 * hbytes + ring_bytes);
    _hpcmem_prim_hugepages(mid, (size_t)(L->end - mid), 0);
  }
  /* fault in the first page of each table now, in the allocator's start-up,
   * rather than in the first large allocation */
  memset(L->recs, 0, sizeof(rec_t));
  memset(L->harea[0], 0, sizeof(slot_t));
  L->ring[0] = 0;
  if (L->hbits) L->hbits[0] = 0;
  L->now_ns = _hpcmem_coarse_now_ns();
  schedule(L, L->now_ns);
  if (c.warm && L->quick_max) {
    /* The first large request of a process found the tier's code and
     * tables cold: 1-3 us on the development VM, which the size sweep's
     * 64-round mean saw as +15-40 ns at 128 KiB.  A block allocated and
     * freed now (never touched: no RSS) warms them and waits on the quick
     * list for that first request. */
    void *w = _hpcmem_large_alloc(L, c.warm, 0);
    if (w) _hpcmem_large_free(L, w, NULL);
    L->alloc_count = L->free_count = L->grow_count = 0;
    L->land_tries = L->land_hits = 0;
  }
  return 0;
}

void _hpcmem_large_destroy(hpcmem_large_t *L) {
  if (tc_self.L == L) memset(&tc_self, 0, sizeof tc_self);   /* other threads' caches must be gone */
  if (L->tc_key_ok) pthread_key_delete(L->tc_key);
  if (L->map) _hpcmem_prim_release(L->map, L->map_size);
  memset(L, 0, sizeof *L);
}

/* ----------------------------------------------------------- allocation */

/* A free block where `kb` bytes of blocks fit after the padding that
 * `align` needs.  With the default alignment that is the lower bound; with
 * a larger one a few successors are tried before asking for a block large
 * enough for any padding, so the search stays O(log n). */
static rec_t *find_fit(hpcmem_large_t *L, arena_t *A, size_t kb, size_t align, size_t *lead) {
  rec_t *n = set_lower_bound(A, kb);
  *lead = 0;
  if (!n || align <= L->align) return n;
  for (int tries = 0; n && tries < 8; tries++, n = set_next(A, n)) {
    *lead = lead_for(n->start, align);
    if (*lead <= n->size && n->size - *lead >= kb) return n;
  }
  if (kb > SIZE_MAX - align) return NULL;
  n = set_lower_bound(A, kb + align - L->align);
  if (n) *lead = lead_for(n->start, align);
  return n;
}

/* No free block fits: extend the region's extent, starting from a free last
 * block when there is one.  Returns the detached block to carve. */
static rec_t *grow(hpcmem_large_t *L, arena_t *A, size_t kb, size_t align, size_t *lead, rec_t **pos) {
  rec_t *r = A->last;
  char *s = (r && r->state == REC_FREE) ? r->start : A->top;
  *lead = align > L->align ? lead_for(s, align) : 0;
  size_t room = (size_t)(A->end - s);
  if (*lead > room || kb > room - *lead) return NULL;
  char *need_end = s + *lead + kb;
  if (r && r->state == REC_FREE) {
    *pos = free_detach(L, r);
    r->size = (size_t)(need_end - s);
  } else {
    r = rec_new(L);
    if (!r) return NULL;
    r->start = s;
    r->size = (size_t)(need_end - s);
    r->prev = A->last;
    if (A->last) A->last->next = r; else A->first = r;
    A->last = r;
  }
  A->top = need_end;
  L->grow_count++;
  return r;
}

/* End placement (docs/large-tier.md, "Block ends"): a place in free block c
 * for a request of `size` bytes whose first and last pages are both
 * believed resident; 1 and *lead (data - c->start), or 0.  The data may
 * start anywhere in its first page, so the last byte can fall on either of
 * two pages: each believed-resident page of c that can hold the first byte
 * is tried with both (at most LAND_HEADS of them). */
static int land_in(const hpcmem_large_t *L, const rec_t *c, size_t kb, size_t size, size_t *lead) {
  const uintptr_t G = L->align, P = L->page, base = (uintptr_t)L->base;
  uintptr_t lo = (uintptr_t)c->start, hi = lo + (c->size - kb);   /* data in [lo, hi] */
  size_t plo = pidx(L, (char *)lo), phi = pidx(L, (char *)hi);
  if (phi - plo >= 64 * 16) phi = plo + 64 * 16 - 1;   /* 16 words of first pages at most */
  int heads = 0;
  for (size_t w = plo / 64; w <= phi / 64; w++) {
    uint64_t m = L->bits[w][0];
    if (w == plo / 64) m &= ~(uint64_t)0 << (plo % 64);
    if (w == phi / 64 && phi % 64 != 63) m &= ((uint64_t)1 << (phi % 64 + 1)) - 1;
    for (; m; m &= m - 1) {
      if (++heads > LAND_HEADS) return 0;
      uintptr_t pb = base + ((w * 64 + (size_t)__builtin_ctzll(m)) << L->pshift);
      uintptr_t dlo = pb > lo ? pb : lo, dhi = pb + P - G < hi ? pb + P - G : hi;
      if (dlo > dhi) continue;
      for (size_t t = pidx(L, (char *)(dlo + size - 1)); t <= pidx(L, (char *)(dhi + size - 1)); t++) {
        if (!rbit(L, t)) continue;
        uintptr_t tb = base + (t << L->pshift);   /* data + size - 1 in [tb, tb + P) */
        uintptr_t a = tb >= size - 1 && tb - (size - 1) > dlo ? up(tb - (size - 1), G) : dlo;
        uintptr_t b = tb + P - size < dhi ? tb + P - size : dhi;
        if (a <= b) { *lead = (size_t)(a - lo); return 1; }
      }
    }
  }
  return 0;
}

/* The best fit r, or a free block a little larger where the request's
 * first and last pages land on believed-resident pages (*lead set). */
static inline void land_prefetch(const hpcmem_large_t *L, const rec_t *c, size_t size) {
  __builtin_prefetch(&L->bits[pidx(L, c->start) / 64][0]);
  __builtin_prefetch(&L->bits[pidx(L, c->start + size - 1) / 64][0]);
}

static rec_t *land_fit(hpcmem_large_t *L, arena_t *A, rec_t *r, size_t kb, size_t size, size_t *lead, int depth, int *hit) {
  /* the bitmap words a candidate reads first are cache misses in a large
   * heap (4 MiB of bits for 64 GiB): fetched one candidate ahead (finding
   * and prefetching 4 or 8 candidates before looking at any made no
   * measurable difference at N = 16,384) */
  land_prefetch(L, r, size);
  rec_t *c = r, *nx = set_next(A, r);
  for (int k = 0; c && k < depth; k++) {
    if (nx) land_prefetch(L, nx, size);
    if (land_in(L, c, kb, size, lead)) {
      *hit = 1;
      return c;
    }
    c = nx;
    nx = c && k + 2 < depth ? set_next(A, c) : NULL;
  }
  *lead = 0;
  *hit = 0;
  return r;
}

/* ------------------------------------------------------ landing spots */

/* End placement's candidates are free blocks by size, each looked at in
 * the bitmap: cache misses for every candidate (two lines of bits, a line
 * of the record), and when few of them hold a landing (N = 16,384 live
 * blocks: 40 % of the searches missed all 32 candidates, 83 % of all the
 * candidates looked at) that search is the tier's largest cost.  The
 * spots turn it around: when a free block changes (a block freed into it,
 * a piece cut off it), pairs of its believed-resident pages go into a
 * table by their distance in pages; a request looks up the one or two
 * distances its first and last byte can be apart.  A spot is a hint: it
 * is taken only while its block is free, holds both pages in its extent
 * and both are still believed resident (spots of blocks that merged,
 * split or were swept fail that and are dropped).  An allocation reads one
 * line of spots and, for each spot, the record and two words of bits,
 * prefetched together. */

static inline void spot_put(hpcmem_large_t *L, size_t d, const rec_t *r, size_t h) {
  spot_t *b = L->spots + d * SPOT_WAYS;
  uint32_t ri = (uint32_t)(r - L->recs) + 1;
  unsigned k = SPOT_WAYS;
  for (unsigned i = 0; i < SPOT_WAYS; i++) {
    if (b[i].rec == ri && b[i].page == h) return;
    if (!b[i].rec && k == SPOT_WAYS) k = i;
  }
  if (k == SPOT_WAYS) k = L->spot_clock++ % SPOT_WAYS;   /* full: one of them goes */
  b[k].rec = ri;
  b[k].page = (uint32_t)h;
}

/* Free block r changed in pages [flo, fhi]: pairs of its believed-resident
 * pages within SPOT_DMAX of that range, at least one of them in it (pairs
 * elsewhere in r were indexed before, under r or under the neighbour that
 * absorbed it), become spots.  Distances shorter than any request so far
 * cannot serve one.  The buckets are prefetched before any is written (a
 * cache miss each, in parallel). */
static void spots_gen(hpcmem_large_t *L, const rec_t *r, size_t flo, size_t fhi) {
  size_t a = pidx(L, r->start), b = pidx(L, rend(r) - 1);
  size_t lo = flo > a + SPOT_DMAX ? flo - SPOT_DMAX : a, hi = fhi + SPOT_DMAX < b ? fhi + SPOT_DMAX : b;
  uint32_t g[SPOT_SCAN], pd[SPOT_PUTS], ph[SPOT_PUTS];
  unsigned m = 0, np = 0;
  for (size_t w = lo / 64; w <= hi / 64 && m < SPOT_SCAN; w++) {
    uint64_t x = L->bits[w][0];
    if (w == lo / 64) x &= ~(uint64_t)0 << (lo % 64);
    if (w == hi / 64 && hi % 64 != 63) x &= ((uint64_t)1 << (hi % 64 + 1)) - 1;
    for (; x && m < SPOT_SCAN; x &= x - 1) g[m++] = (uint32_t)(w * 64 + (size_t)__builtin_ctzll(x));
  }
  for (unsigned i = 0; i < m && np < SPOT_PUTS; i++)
    for (unsigned j = i + 1; j < m && g[j] - g[i] <= SPOT_DMAX && np < SPOT_PUTS; j++) {
      if (g[j] - g[i] < L->spot_dmin || !((g[i] >= flo && g[i] <= fhi) || (g[j] >= flo && g[j] <= fhi))) continue;
      pd[np] = g[j] - g[i];
      ph[np] = g[i];
      __builtin_prefetch(L->spots + (size_t)pd[np] * SPOT_WAYS, 1);
      np++;
    }
  for (unsigned i = 0; i < np; i++) spot_put(L, pd[i], r, ph[i]);
}

/* A free block of arena A where a request of `size` bytes (kb on the grid)
 * lands on a spot, and *lead; NULL when none does.  The data starts in
 * page h on the grid and ends in page h + D: D is (size - 1) / page or, when
 * the data can start late enough in h, one more. */
static rec_t *spot_find(hpcmem_large_t *L, arena_t *A, size_t kb, size_t size, size_t *lead) {
  const uintptr_t P = L->page, G = L->align, base = (uintptr_t)L->base;
  size_t d0 = (size - 1) >> L->pshift, d1 = (size - 1 + P - G) >> L->pshift;
  if (d1 > SPOT_DMAX) d1 = SPOT_DMAX;
  for (size_t D = d0; D <= d1; D++) {
    const spot_t *b = L->spots + D * SPOT_WAYS;
    for (unsigned i = 0; i < SPOT_WAYS; i++)
      if (b[i].rec) {
        __builtin_prefetch(L->recs + b[i].rec - 1);
        __builtin_prefetch(&L->bits[b[i].page / 64][0]);
        __builtin_prefetch(&L->bits[(b[i].page + D) / 64][0]);
      }
  }
  for (size_t D = d0; D <= d1; D++) {
    spot_t *b = L->spots + D * SPOT_WAYS;
    for (unsigned i = 0; i < SPOT_WAYS; i++) {
      if (!b[i].rec) continue;
      const rec_t *c = L->recs + b[i].rec - 1;
      size_t h = b[i].page, t = h + D;
      if (c->state != REC_FREE || h < pidx(L, c->start) || t > pidx(L, rend(c) - 1) || !rbit(L, h) || !rbit(L, t)) {
        b[i].rec = 0;
        continue;
      }
      if (c->size < kb || arena_of(L, c) != A) continue;
      uintptr_t hb = base + (h << L->pshift), tb = base + (t << L->pshift);
      uintptr_t lo = hb, hi = hb + P - G;   /* where the data may start, on the grid */
      if ((uintptr_t)c->start > lo) lo = (uintptr_t)c->start;
      if (tb - (size - 1) > lo) lo = tb - (size - 1);
      if ((uintptr_t)rend(c) - kb < hi) hi = (uintptr_t)rend(c) - kb;
      if (tb + P - size < hi) hi = tb + P - size;
      lo = up(lo, G);
      if (lo > hi) continue;
      *lead = (size_t)(lo - (uintptr_t)c->start);
      b[i].rec = 0;
      return (rec_t *)c;
    }
  }
  return NULL;
}

/* Spots on while end placement misses often (more than one allocation in
 * SPOT_ON_RATE), off below one in SPOT_OFF_RATE: with few misses the
 * candidates by size find the landings, and the spots only cost their
 * upkeep (residents with tags, N = 256: 0.8 s of CPU for 10^6 pairs
 * without them, 1.4 - 1.8 s with). */
static void spots_judge(hpcmem_large_t *L, int hit) {
  L->win_miss += !hit;
  if (++L->win_tries < SPOT_WINDOW) return;
  if (L->spots_cfg) {}
  else if (!L->spots_on && L->spots && L->win_miss * SPOT_ON_RATE > L->win_tries) L->spots_on = 1;
  else if (L->spots_on && L->win_miss * SPOT_OFF_RATE < L->win_tries) L->spots_on = 0;
  L->win_tries = L->win_miss = 0;
}

/* A detached block for the request in arena A, from the tree or by growing. */
static rec_t *take(hpcmem_large_t *L, arena_t *A, size_t kb, size_t size, size_t align, size_t *lead,
                   rec_t **pos) {
  rec_t *r = NULL, *c;
  int hit = 0;
  if (!ends_on(L) || align > L->align) {
    r = find_fit(L, A, kb, align, lead);
  } else {
    if (size < L->spot_smin) {
      L->spot_smin = size;
      L->spot_dmin = (unsigned)((size - 1) >> L->pshift);
    }
    /* a try: some free block is large enough (else the arena grows) */
    if ((r = find_fit(L, A, kb, align, lead))) {
      r = land_fit(L, A, r, kb, size, lead, L->spots_on ? LAND_SHORT : LAND_CANDIDATES, &hit);
      if (!hit && L->spots_on && size > L->page && size <= SPOT_DMAX * L->page &&
          (c = spot_find(L, A, kb, size, lead))) {
        L->spot_hits++;
        r = c;
        hit = 1;
      }
      L->land_tries++;
      L->land_hits += (unsigned)hit;
      spots_judge(L, hit);
    }
  }
  if (r) {
    *pos = free_detach(L, r);
    return r;
  }
  return grow(L, A, kb, align, lead, pos);
}

/* Huge pages for the interior of a block of the huge arena: its 2 MiB
 * chunks, less the chunk of its first byte and the chunk of its last.
 * Advising whole blocks made the head and tail that a program writes into a
 * buffer it does not otherwise use (a header, a sentinel, a check) cost a
 * huge page each: 10 MiB of RSS in the size sweep with nothing but the
 * ends written.  Chunks keep their advice (a bitmap) until a later block
 * wants the other, so a block reused at the same place makes no system
 * call; a new layout costs one madvise per run of chunks that changes.
 * Called with the lock held: rare (a block of 16 MiB or more carved from
 * the trees), and the bitmap is shared by neighbouring blocks. */
static void thp_advise(hpcmem_large_t *L, const rec_t *r) {
  const uintptr_t H = THP_SIZE, base = (uintptr_t)L->ar[1].lo;
  uintptr_t lo = down((uintptr_t)r->data, H), hi = up((uintptr_t)rend(r), H);
  uintptr_t ilo = lo + H, ihi = down((uintptr_t)rend(r) - 1, H);
  uint64_t *bits = L->hbits;
  for (uintptr_t c = lo; c < hi;) {
    int want = c >= ilo && c < ihi;
    size_t i = (c - base) / H;
    if ((int)((bits[i / 64] >> (i % 64)) & 1) == want) { c += H; continue; }
    uintptr_t e = c;
    for (; e < hi && (e >= ilo && e < ihi) == want; e += H) {
      size_t k = (e - base) / H;
      if ((int)((bits[k / 64] >> (k % 64)) & 1) == want) break;
      bits[k / 64] ^= (uint64_t)1 << (k % 64);
    }
    _hpcmem_prim_hugepages((void *)c, (size_t)(e - c), want);
    c = e;
  }
}

/* r is handed out for `size` bytes: remember where the request ends and,
 * with end placement on, believe its first and last pages resident. */
static inline void mark_ends(hpcmem_large_t *L, rec_t *r, size_t size) {
  r->tail = r->data + (size ? size : 1) - 1;
  if (ends_on(L)) {
    size_t h = pidx(L, r->data), t = pidx(L, r->tail);
    rbit_set(L, h);
    rbit_set(L, t);
    L->bits[h / 64][1] &= ~((uint64_t)1 << (h % 64));   /* ends again: no longer stale */
    L->bits[t / 64][1] &= ~((uint64_t)1 << (t % 64));
    r->astamp = (uint32_t)L->alloc_count;   /* LIVE: its birth (see mark_stale) */
  }
}

/* The whole pages of live block r other than the pages of its first and
 * last requested byte: three ranges into cut. */
static void inner_pages(const hpcmem_large_t *L, const rec_t *r, char *cut[3][2]) {
  char *a = (char *)up((uintptr_t)r->start, L->page), *b = (char *)down((uintptr_t)rend(r), L->page);
  char *h = (char *)down((uintptr_t)r->data, L->page), *t = (char *)down((uintptr_t)r->tail, L->page);
  cut[0][0] = a;                                cut[0][1] = h < b ? h : b;
  cut[1][0] = h + L->page > a ? h + L->page : a; cut[1][1] = t < b ? t : b;
  cut[2][0] = t + L->page > a ? t + L->page : a; cut[2][1] = b;
}

/* A block that lived sweep_allocs allocations is freed: the pages believed
 * resident inside it (ends of earlier blocks that it swallowed when it was
 * carved) stayed unused all that time.  They become stale; the next block
 * carved over one of them without making it an end gives it back. */
static void mark_stale(hpcmem_large_t *L, const rec_t *r) {
  char *cut[3][2];
  inner_pages(L, r, cut);
  for (int i = 0; i < 3; i++)
    if (cut[i][0] < cut[i][1]) stale_mark(L, cut[i][0], cut[i][1]);
}

/* Runs of stale pages inside the block r just carved (its own end pages
 * excluded) into rlo/rhi, at most cap, their bits cleared; how many. */
static unsigned collect_stale(hpcmem_large_t *L, const rec_t *r, char **rlo, char **rhi, unsigned cap) {
  char *cut[3][2];
  unsigned k = 0;
  inner_pages(L, r, cut);
  for (int c = 0; c < 3; c++) {
    size_t i = pidx(L, cut[c][0]), e = pidx(L, cut[c][1]);
    while (i < e && k < cap) {
      uint64_t w = L->bits[i / 64][1] & (~(uint64_t)0 << (i % 64));
      if (!w) { i = (i / 64 + 1) * 64; continue; }
      size_t s0 = i / 64 * 64 + (size_t)__builtin_ctzll(w);
      if (s0 >= e) break;
      size_t t = s0 + 1;
      while (t < e && (L->bits[t / 64][1] >> (t % 64)) & 1) t++;
      rlo[k] = L->base + (s0 << L->pshift);
      rhi[k] = L->base + (t << L->pshift);
      bits_clear(L, rlo[k], rhi[k]);
      k++;
      i = t;
    }
  }
  return k;
}

/* End placement on: the block r just carved gives back the stale pages it
 * swallowed, after the lock is released (the block is the caller's from
 * then on, nobody else may carve there) and before it is handed out.  Out
 * of large_alloc's way: its arrays and calls cost the other mode nothing. */
static __attribute__((noinline)) void stale_unlock(hpcmem_large_t *L, const rec_t *r, uint64_t now) {
  char *slo[STALE_RUNS], *shi[STALE_RUNS];
  unsigned ns = collect_stale(L, r, slo, shi, STALE_RUNS);
  if (ns) count_swept(L, slo, shi, ns);
  finish_unlock(L, now);
  if (ns) _hpcmem_prim_decommit_many(slo, shi, ns, L->discard);
}

static inline int in_huge_arena(const hpcmem_large_t *L, const rec_t *r) {
  return L->hbits && r->start >= L->ar[1].lo;
}

/* Block bytes for `size` usable bytes, on the A0 grid; 0 when too large. */
static inline size_t block_bytes(const hpcmem_large_t *L, size_t size) {
  if (size > (size_t)(L->end - L->base)) return 0;
  return up(size ? size : 1, L->align);
}

/* The live block whose data is p.  Only the tier's own tables are read, so
 * any pointer at all is safe to ask about. */
static int lookup_slot(const hpcmem_large_t *L, const void *p, rec_t **out, size_t *slot) {
  uintptr_t c = (uintptr_t)p;
  if ((c & (L->align - 1)) || c < (uintptr_t)L->base || c >= (uintptr_t)L->end) return -EINVAL;
  size_t i = hash_slot(L, c);
  if (i == SIZE_MAX) {
    for (unsigned k = 0; k < RING; k++)
      if (L->ring[k] == c) return -EALREADY;
    return -EINVAL;
  }
  rec_t *r = L->htab[i].rec;
  if (r->state == REC_CACHED || r->state == REC_TCACHED) return -EALREADY;
  if (r->state != REC_LIVE || r->data != (char *)p) return -EINVAL;   /* cannot happen */
  *out = r;
  *slot = i;
  return 0;
}

static int lookup(const hpcmem_large_t *L, const void *p, rec_t **out) {
  size_t slot;
  return lookup_slot(L, p, out, &slot);
}

/* The residency probe (docs/large-tier.md, "Block ends").  Now and then a
 * free asks the kernel about three pages of the block: its first page, the
 * page of the request's last byte, and one in between.  A program that
 * writes the ends of its blocks and not the rest (a header and a trailer,
 * the benchmark's tags) votes for end placement; one that writes nothing
 * (the first page is not resident: one system call) or everything votes
 * against.  Four votes more for than against turn it on; probes come rarer
 * (up to HPCMEM_LARGE_PROBE_MAX frees apart) while they agree with the mode.
 * Made under the lock: 1-5 us once in thousands of frees, and every field
 * it changes is then the lock's. */
static __attribute__((noinline, cold)) void probe(hpcmem_large_t *L, const rec_t *r) {
  L->probe_wait = L->probe_gap;
  if (L->ends_cfg) return;
  size_t hp = (uintptr_t)r->data >> L->pshift, tp = (uintptr_t)r->tail >> L->pshift;
  int vote = _hpcmem_prim_resident(r->data) == 1 && _hpcmem_prim_resident(r->tail) == 1 &&
             (tp - hp < 2 || _hpcmem_prim_resident((char *)((hp + (tp - hp) / 2) << L->pshift)) == 0);
  int score = L->probe_score;
  score = vote ? (score < 7 ? score + 1 : 7) : (score > 0 ? score - 1 : 0);
  L->probe_gap = vote == L->ends ? (L->probe_gap < HPCMEM_LARGE_PROBE_MAX ? L->probe_gap * 2 : HPCMEM_LARGE_PROBE_MAX)
                                 : L->probe_min;
  L->probe_score = score;
  __atomic_store_n(&L->ends, score >= 4, __ATOMIC_RELAXED);
  L->probe_count++;
}

/* At a free, under the lock: the residency probe when it is due, and with
 * end placement on, the stale pages inside a block that lived long. */
static __attribute__((noinline)) void free_ends(hpcmem_large_t *L, const rec_t *r) {
  if (!L->probe_wait) probe(L, r);
  if (ends_on(L) && (uint32_t)((uint32_t)L->alloc_count - r->astamp) >= L->sweep_allocs) mark_stale(L, r);
}

static void unaccount_live(hpcmem_large_t *L, rec_t *r) {
  L->live_blocks--;
  L->live_bytes -= usable(r);
  L->overhead_bytes -= (size_t)(r->data - r->start);
}

/* --------------------------------------------------------- thread caches */

/* A malloc+free pair of one size in the tier took ~27 ns with its lock and
 * its bookkeeping (the quick list, hash table, counters), against ~5 ns in
 * tcmalloc's per-thread caches (256 KiB and smaller).  With tcache set (the
 * process's tier), a thread keeps up to HPCMEM_LARGE_TC_SLOTS blocks it
 * freed, HPCMEM_LARGE_TC_BYTES of them at most, and takes them back
 * without the lock:
 *  - free(p) without the lock only for the blocks the thread was handed
 *    last (out[]): their record, read without the lock, says whether p is
 *    still a live block's data pointer.  Any other pointer (an interior or
 *    foreign one, a second free, a block of another thread) goes the
 *    locked way through the hash table, which tells a double free of a
 *    block in some thread's cache (state TCACHED) like that of one on the
 *    quick list;
 *  - the tier counts a cached block as live (no counter changes without
 *    the lock); its statistics move them to the free and retained bytes;
 *  - a cached block goes back to the tier (a free under the lock) when the
 *    thread's cache misses (so that it merges before anything is carved, as
 *    the quick list's blocks do), at thread exit (a key destructor), and
 *    when a decay pass finds it older than the decay time: the pass takes
 *    it out of the owner's slot with an atomic exchange, which the owner
 *    also uses to take one (plain loads and stores in a single-threaded
 *    process, where the pass runs in the owner);
 *  - not with end placement on (a block taken back would set page bits
 *    without the lock), nor for calloc (cached blocks are dirty). */

/* Slot i's block, now the caller's; NULL when a decay pass took it. */
static inline rec_t *tc_grab(struct hpcmem_large_tc *c, unsigned i) {
  if (_hpcmem_single_threaded()) {
    rec_t *r = c->slot[i];
    c->slot[i] = NULL;
    return r;
  }
  return __atomic_exchange_n(&c->slot[i], NULL, __ATOMIC_ACQUIRE);
}

static inline void tc_note_out(struct hpcmem_large_tc *c, rec_t *r) {
  unsigned k = c->outpos++ % TC_OUT;
  c->out[k] = r->data;
  c->outrec[k] = r;
}

/* Free r (its record found, LIVE or TCACHED) under the lock: to the quick
 * list, or with `stamp` to the trees.  Inlined: out of line, the residents
 * benchmark's pair (N = 256, nothing touched) took 4 ns more. */
static inline __attribute__((always_inline)) void free_locked(hpcmem_large_t *L, rec_t *r, size_t slot, uint64_t now, uint64_t stamp, int quick) {
  if (__builtin_expect((--L->probe_wait == 0) | ends_on(L), 0)) free_ends(L, r);
  unaccount_live(L, r);
  L->free_count++;
  if (quick && L->quick_max) {
    quick_push(L, r, now);
    DEBUG_LOCAL(L, r);
    return;
  }
  hash_remove_at(L, slot != SIZE_MAX ? slot : hash_slot(L, (uintptr_t)r->data));
  L->ring[L->ring_pos++ % RING] = (uintptr_t)r->data;
  size_t flo = pidx(L, r->start), fhi = pidx(L, rend(r) - 1);
  r->data = NULL;
  r->dlo = r->start;     /* the owner may have touched all of it */
  r->dhi = rend(r);
  r->swept = 0;
  r = release_block(L, r, stamp, (uint32_t)L->alloc_count);
  if (L->spots_on && ends_on(L)) spots_gen(L, r, flo, fhi);
  DEBUG_LOCAL(L, r);
}

/* Under the lock: the calling thread's cache gives its blocks back (its
 * cache missed), or starts to serve this tier at the thread's first call;
 * 1 then: the caller arms the exit destructor (tc_arm) after the lock. */
static int tc_flush_mine(hpcmem_large_t *L, uint64_t now) {
  struct hpcmem_large_tc *c = &tc_self;
  if (c->L != L) {
    /* none after the allocator's exit hook: a thread whose first large
     * block came in glibc's last destructor round listed its cache with a
     * destructor that never ran, and the list pointed into its freed thread
     * storage (the next thread there listed its own on top: a list that
     * loops, and hpcmem_stats() spun for ever) */
    if (c->L || c->dead || _hpcmem_thread_exiting) return 0;
    c->L = L;
    c->prev = NULL;
    c->next = L->tcs;
    if (L->tcs) L->tcs->prev = c;
    L->tcs = c;
    c->armed = 0;
    return 1;
  }
  for (unsigned m = c->used; m; m &= m - 1) {
    unsigned i = (unsigned)__builtin_ctz(m);
    rec_t *r = tc_grab(c, i);
    if (r) free_locked(L, r, SIZE_MAX, now, now, 0);   /* to the trees: the request missed them */
  }
  c->used = 0;
  c->held = 0;
  return 0;
}

/* Under the lock: blocks cached longer than the decay time (all with
 * force) go back, taken out of their owners' slots. */
static void tc_expire(hpcmem_large_t *L, uint64_t now, int force) {
  for (struct hpcmem_large_tc *c = L->tcs; c; c = c->next)
    for (unsigned i = 0; i < HPCMEM_LARGE_TC_SLOTS; i++) {
      if (!__atomic_load_n(&c->slot[i], __ATOMIC_ACQUIRE)) continue;
      uint64_t st = __atomic_load_n(&c->stamp[i], __ATOMIC_RELAXED);
      if (!force && !(now >= st && now - st >= L->decay_ns)) continue;
      rec_t *r = tc_grab(c, i);
      if (r) free_locked(L, r, SIZE_MAX, now, st, 0);
    }
}

static void tc_unlink(hpcmem_large_t *L, struct hpcmem_large_tc *c) {
  L->tc_offs_gone += c->offs;
  c->offs = 0;
  c->on = NULL;
  if (c->prev) c->prev->next = c->next; else L->tcs = c->next;
  if (c->next) c->next->prev = c->prev;
  c->prev = c->next = NULL;
  c->L = NULL;
}

/* The key's destructor: the exiting thread's blocks go back. */
static void tc_exit(void *arg) {
  struct hpcmem_large_tc *c = arg;
  hpcmem_large_t *L = c->L;
  c->dead = 1;
  if (!L) return;
  _hpcmem_lock_st(&L->lock);
  uint64_t now = clock_tick(L);
  tc_flush_mine(L, now);
  L->tc_hits_gone += c->hits;
  tc_unlink(L, c);
  finish_unlock(L, now);
}

/* After the lock is released, once the thread's cache was listed: arm the
 * exit destructor (pthread_setspecific of an early key allocates nothing;
 * a later one may, which is why not under the lock).  Should it fail, the
 * thread keeps no cache (it holds no block yet). */
static __attribute__((noinline, cold)) void tc_arm(hpcmem_large_t *L) {
  struct hpcmem_large_tc *c = &tc_self;
  if (c->armed || c->L != L) return;
  if (pthread_setspecific(L->tc_key, c) == 0) {
    c->armed = 1;
    return;
  }
  _hpcmem_lock_st(&L->lock);
  tc_unlink(L, c);
  c->dead = 1;
  _hpcmem_unlock_st(&L->lock);
}

/* Under the lock, at a locked allocation of the thread's while its cache
 * holds blocks (they go back: tc_flush_mine) or when `wait` ran out: the
 * thread's first call (its cache is listed and switched on; 1: the caller
 * arms the exit destructor) or the end of a window.  The cache's checks cost
 * on every call whether it hits or not (residents, N = 256, where 1.5 % of
 * the frees hit: +61 instructions a pair), so a thread whose cache served
 * fewer than one hit per HPCMEM_LARGE_TC_MISS_RATIO locked allocations in
 * the last HPCMEM_LARGE_TC_WINDOW switches it off (its unlocked paths then
 * test tc_self.on alone, and only this countdown runs under the lock) and
 * on again for a window, a probe, after HPCMEM_LARGE_TC_PROBE more. */
static __attribute__((noinline)) int tc_window(hpcmem_large_t *L, uint64_t now) {
  struct hpcmem_large_tc *c = &tc_self;
  int arm = tc_flush_mine(L, now);
  if (c->L != L) {                     /* exiting (no more caching), or the cache serves another
                                          tier (a test's: one per process otherwise), whose
                                          window this call must not end */
    if (!c->L) c->wait = INT_MAX;
    else if (c->wait < 0) c->wait = 0;
    return 0;
  }
  if (c->wait >= 0) return arm;
  if (c->on && !arm && (c->hits - c->mark) * HPCMEM_LARGE_TC_MISS_RATIO < HPCMEM_LARGE_TC_WINDOW) {
    c->on = NULL;
    c->offs++;
    memset(c->out, 0, sizeof c->out);  /* blocks handed out while off are not the thread's to know */
    c->wait = HPCMEM_LARGE_TC_PROBE;
    return 0;
  }
  c->on = L;                           /* the first call, a probe, or a window with hits */
  c->mark = c->hits;
  c->wait = HPCMEM_LARGE_TC_WINDOW;
  return arm;
}

/* The owner learns that slot i is empty (it took the block, or a decay
 * pass did). */
static inline void tc_vacate(struct hpcmem_large_tc *c, unsigned i) {
  c->used &= ~(1u << i);
  c->held -= c->usable[i];
}

/* Without the lock: a cached block for kb bytes at align, with the quick
 * list's rule (least waste, at most an eighth); NULL on a miss. */
static inline __attribute__((always_inline)) char *tc_alloc(hpcmem_large_t *L, size_t kb, size_t size, size_t align, size_t *usable_out) {
  struct hpcmem_large_tc *c = &tc_self;
  int best = -1;
  size_t bu = SIZE_MAX;
  for (unsigned m = c->used; m; m &= m - 1) {
    unsigned i = (unsigned)__builtin_ctz(m);
    size_t u = c->usable[i];
    if (u < kb || u - kb > u / 8 || u > bu) continue;
    if (align > L->align && ((uintptr_t)c->data[i] & (align - 1))) continue;
    best = (int)i;
    bu = u;
  }
  if (best < 0 || ends_on(L)) return NULL;
  rec_t *r = tc_grab(c, (unsigned)best);
  tc_vacate(c, (unsigned)best);
  if (!r) return NULL;
  __atomic_store_n(&r->state, REC_LIVE, __ATOMIC_RELAXED);
  r->tail = r->data + (size ? size : 1) - 1;
  tc_note_out(c, r);
  c->hits++;
  *usable_out = bu;
  return r->data;
}

/* Without the lock: p, if it is one of the blocks the thread was handed
 * last (the newest first) and still live, goes into the thread's cache
 * when there is room. */
static inline int tc_free(hpcmem_large_t *L, void *p, size_t *size_out) {
  struct hpcmem_large_tc *c = &tc_self;
  /* most frees are of other blocks: one branch for all of out[] (a loop
   * cost 20-28 instructions a free in the residents benchmark, where 1.5 %
   * of frees hit) */
  _Static_assert(TC_OUT == 4, "out[] is compared unrolled");
  char *q = p;
  if (__builtin_expect(!((c->out[0] == q) | (c->out[1] == q) | (c->out[2] == q) | (c->out[3] == q)), 1)) return 0;
  for (unsigned j = 1; j <= TC_OUT; j++) {   /* the newest first: p may be there twice */
    unsigned k = (c->outpos - j) % TC_OUT;
    if (c->out[k] != (char *)p) continue;
    rec_t *r = c->outrec[k];
    c->out[k] = NULL;
    if (__atomic_load_n(&r->state, __ATOMIC_RELAXED) != REC_LIVE || r->data != (char *)p || ends_on(L)) return 0;
    size_t u = usable(r);
    unsigned e = (unsigned)__builtin_ctz(~c->used);
    if (e >= HPCMEM_LARGE_TC_SLOTS || c->held + u > HPCMEM_LARGE_TC_BYTES) return 0;
    __atomic_store_n(&r->state, REC_TCACHED, __ATOMIC_RELAXED);
    c->data[e] = (char *)p;
    c->usable[e] = u;
    c->used |= 1u << e;
    c->held += u;
    __atomic_store_n(&c->stamp[e], __atomic_load_n(&L->now_ns, __ATOMIC_RELAXED), __ATOMIC_RELAXED);
    if (_hpcmem_single_threaded()) c->slot[e] = r;
    else __atomic_store_n(&c->slot[e], r, __ATOMIC_RELEASE);
    c->hits++;
    if (size_out) *size_out = u;
    return 1;
  }
  return 0;
}

/* ----------------------------------------------------- alloc and free */

/* A block just handed out (under the lock): the tier's counts, and the
 * thread's cache notes it (blocks over HPCMEM_LARGE_TC_BYTES are never
 * cached).  Returns its usable bytes. */
static inline size_t count_out(hpcmem_large_t *L, rec_t *r, size_t overhead) {
  size_t u = usable(r);
  L->live_blocks++;
  L->live_bytes += u;
  L->overhead_bytes += overhead;
  L->alloc_count++;
  DEBUG_LOCAL(L, r);
  if (tc_self.on == L && u <= HPCMEM_LARGE_TC_BYTES) tc_note_out(&tc_self, r);
  return u;
}

/* Under the lock, a request larger than every block the thread's cache
 * holds (a miss): a cached block that can grow in place to kb bytes (it
 * ends at its arena's top, or before a free block that reaches far enough)
 * becomes the caller's, LIVE again and grown, with its data pointer and
 * hash-table slot unchanged; the thread's other cached blocks stay.  A
 * buffer freed and asked for again larger (the size sweep's next size, a
 * growing work array) then costs no release into the trees and no carve:
 * the first 256 KiB allocation after 128 KiB ones took 1,500-2,300 TSC
 * ticks that way on the development VM, the same path warm ~400 (its tree
 * operations and hash updates run cold once per size).  Returns the data
 * with the lock released, or NULL with it held (no such block: the caller
 * goes on to tc_window, which gives the cached blocks back).  Out of line
 * with its hand-out and its checks: in large_alloc, they cost every locked
 * allocation of the residents benchmark (cache off) 4-12 instructions. */
static __attribute__((noinline)) char *tc_grow(hpcmem_large_t *L, size_t kb, size_t size, size_t align, int zero,
                                                uint64_t now, size_t *usable_out) {
  struct hpcmem_large_tc *c = &tc_self;
  /* not for calloc (cached blocks are dirty) nor a larger alignment */
  if (zero || align != L->align || c->on != L || ends_on(L) || (L->narenas > 1 && size >= L->huge_min)) return NULL;
  for (unsigned m = c->used; m; m &= m - 1) {
    unsigned i = (unsigned)__builtin_ctz(m);
    rec_t *r = __atomic_load_n(&c->slot[i], __ATOMIC_RELAXED);   /* the decay pass takes slots under the lock only */
    if (!r || c->usable[i] >= kb || in_huge_arena(L, r) || (size_t)(arena_of(L, r)->end - r->data) < kb) continue;
    size_t old = usable(r), over = (size_t)(r->data - r->start);
    if (grow_in_place(L, r, r->data + kb) < 0) continue;
    tc_grab(c, i);
    tc_vacate(c, i);
    L->live_blocks--;                  /* counted live while cached; count_out counts it again */
    L->live_bytes -= old;
    L->overhead_bytes -= over;
    L->tc_grows++;
    L->free_count++;                   /* as tc_window's release of the block and a carve would
                                          count: the cached block's free, then an allocation */
    r->state = REC_LIVE;
    mark_ends(L, r, size);
    L->last_out = r;
    size_t u = count_out(L, r, over);
    finish_unlock(L, now);
    if (usable_out) *usable_out = u;
    return r->data;
  }
  return NULL;
}

/* zero: clear what may be dirty of the block (outside the lock); nothing
 * else needs it, since free memory reads as zero outside its dirty hull.
 * cached: the caller asked the thread's cache already
 * (_hpcmem_large_alloc_usable). */
static __attribute__((noinline)) void *large_alloc(hpcmem_large_t *L, size_t size, size_t align, size_t *usable_out, int zero, int cached) {
  if (align & (align - 1)) { errno = EINVAL; return NULL; }
  if (align < L->align) align = L->align;
  size_t kb = block_bytes(L, size);
  if (!kb || align > (size_t)(L->end - L->base)) { errno = ENOMEM; return NULL; }
  size_t lead;
  rec_t *pos = NULL, *r;
  if (tc_self.on == L && !zero && !cached && kb <= HPCMEM_LARGE_TC_BYTES) {
    size_t u;
    char *p = tc_alloc(L, kb, size, align, &u);
    if (p) {
      if (usable_out) *usable_out = u;
      return p;
    }
  }
  if (L->spots_on && size > L->page && size <= SPOT_DMAX * L->page)
    __builtin_prefetch(L->spots + ((size - 1) >> L->pshift) * SPOT_WAYS);
  _hpcmem_lock_st(&L->lock);
  uint64_t now = clock_tick(L);
  int arm = 0;
  /* one countdown a call while the cache is off (see tc_window); a cache
   * that holds blocks first tries to grow one for the request (tc_grow) */
  if (L->tc_on && ((--tc_self.wait < 0) | (tc_self.used != 0))) {
    char *p;
    if (tc_self.used && (p = tc_grow(L, kb, size, align, zero, now, usable_out))) return p;
    arm = tc_window(L, now);
  }
  int qi;
  if (L->nquick && !zero && (qi = quick_find(L, kb, align)) >= 0) {
    r = L->quick[qi];
    quick_take_out(L, qi);
    L->last_out = r;
    r->state = REC_LIVE;
    r->dlo = r->dhi = NULL;
    mark_ends(L, r, size);
    size_t u = count_out(L, r, (size_t)(r->data - r->start));
    finish_unlock(L, now);
    if (__builtin_expect(arm, 0)) tc_arm(L);
    if (usable_out) *usable_out = u;
    return r->data;
  }
  /* a miss sends the list to the trees first: its blocks merge with their
   * free neighbours, and a larger request can grow into what was freed
   * (a size sweep that touches every page faulted each size in afresh,
   * 1.5-3.8x slower, while the list kept the previous size aside) */
  while (L->nquick) quick_evict(L, 0);
  if (hash_reserve(L) < 0) goto nomem;
  /* huge requests have their own arena when there are two; either arena
   * serves the other's requests when its own is full */
  int a = L->narenas > 1 && size >= L->huge_min;
  if (!(r = take(L, &L->ar[a], kb, size, align, &lead, &pos)) &&
      (L->narenas < 2 || !(r = take(L, &L->ar[!a], kb, size, align, &lead, &pos))))
    goto nomem;
  uint64_t stamp = r->stamp;
  uint32_t astamp = r->astamp;
  rec_t *piece;
  if (lead > L->min_split && (piece = rec_new(L))) {
    split_free(L, r, piece, 1, lead, &pos, stamp, astamp);
    lead = 0;
  }
  size_t rem = r->size - lead - kb;
  if (rem > L->min_split && (piece = rec_new(L))) split_free(L, r, piece, 0, rem, &pos, stamp, astamp);
  char *data = r->start + lead, *zlo = r->dlo, *zhi = r->dhi;
  r->state = REC_LIVE;
  r->dlo = r->dhi = NULL;
  r->data = data;
  hash_put(L->htab, L->hcap, L->hshift, (uintptr_t)data, r);
  L->hcount++;
  mark_ends(L, r, size);
  L->last_out = r;
  if (in_huge_arena(L, r)) thp_advise(L, r);
  size_t u = count_out(L, r, lead);
  if (ends_on(L)) stale_unlock(L, r, now);
  else finish_unlock(L, now);
  if (__builtin_expect(arm, 0)) tc_arm(L);
  if (zero) {
    if (zlo < data) zlo = data;
    if (zhi > data + u) zhi = data + u;
    if (zlo < zhi) memset(zlo, 0, (size_t)(zhi - zlo));
  }
  if (usable_out) *usable_out = u;
  return data;
nomem:
  _hpcmem_unlock_st(&L->lock);
  if (__builtin_expect(arm, 0)) tc_arm(L);   /* tc_flush_mine listed the thread's cache */
  errno = ENOMEM;
  return NULL;
}

void *_hpcmem_large_alloc(hpcmem_large_t *L, size_t size, size_t align) {
  return large_alloc(L, size, align, NULL, 0, 0);
}

/* malloc's way: the thread's cache is asked here, so that a hit does not
 * pay large_alloc's entry (its registers and checks: a 128 KiB
 * malloc+free pair from the cache: 491 -> 456 instructions) */
void *_hpcmem_large_alloc_usable(hpcmem_large_t *L, size_t size, size_t align, size_t *usable_out) {
  if (tc_self.on == L && !(align & (align - 1))) {
    size_t kb = block_bytes(L, size), u;
    char *p;
    if (kb - 1 < HPCMEM_LARGE_TC_BYTES && (p = tc_alloc(L, kb, size, align < L->align ? L->align : align, &u))) {
      if (usable_out) *usable_out = u;
      return p;
    }
    return large_alloc(L, size, align, usable_out, 0, 1);
  }
  return large_alloc(L, size, align, usable_out, 0, 0);
}

void *_hpcmem_large_alloc_zeroed(hpcmem_large_t *L, size_t size, size_t align, size_t *usable_out) {
  return large_alloc(L, size, align, usable_out, 1, 0);
}

static __attribute__((noinline)) int large_free(hpcmem_large_t *L, void *p, size_t *size_out);

int _hpcmem_large_free(hpcmem_large_t *L, void *p, size_t *size_out) {
  if (tc_self.on == L && tc_free(L, p, size_out)) return 0;   /* on: L->tc_on, and the thread's */
  return large_free(L, p, size_out);
}

/* free under the lock (the thread's cache did not take p) */
static int large_free(hpcmem_large_t *L, void *p, size_t *size_out) {
  rec_t *r;
  size_t slot = SIZE_MAX;
  _hpcmem_lock_st(&L->lock);
  r = L->last_out;
  /* the block handed out last (a buffer allocated and freed in a loop): a
   * LIVE record whose data is p is p's block, as the hash table would say,
   * so the probe can wait until the slot is needed (not for the quick list) */
  if (!r || r->state != REC_LIVE || r->data != (char *)p) {
    int rc = lookup_slot(L, p, &r, &slot);
    if (rc) {
      L->error_count++;
      _hpcmem_unlock_st(&L->lock);
      return rc;
    }
  }
  uint64_t now = clock_tick(L);
  size_t u = usable(r);
  free_locked(L, r, slot, now, now, 1);
  finish_unlock(L, now);
  if (size_out) *size_out = u;
  return 0;
}

/* Grow r (live) to end at new_end using its free next neighbour and, when
 * that is the last block, the unused rest of the reservation. */
static int grow_in_place(hpcmem_large_t *L, rec_t *r, char *new_end) {
  arena_t *A = arena_of(L, r);
  rec_t *nx = r->next;
  int nx_free = nx && nx->state == REC_FREE;
  char *avail = nx_free ? rend(nx) : rend(r);
  int at_top = nx_free ? nx->next == NULL : nx == NULL;
  if (new_end > avail && !(at_top && new_end <= A->end)) return -ENOMEM;
  rec_t *pos = NULL;
  uint64_t stamp = 0;
  uint32_t astamp = 0;
  if (nx_free) {
    stamp = nx->stamp;
    astamp = nx->astamp;
    pos = free_detach(L, nx);
  }
  if (new_end > avail) {             /* take the free tail and extend the extent */
    if (nx_free) absorb(L, r, nx);
    r->size = (size_t)(new_end - r->start);
    A->top = new_end;
    L->grow_count++;
  } else if (nx_free) {
    size_t rem = (size_t)(avail - new_end);
    if (rem > L->min_split) {
      char *dlo = nx->dlo, *dhi = nx->dhi;
      nx->start = new_end;
      nx->size = rem;
      r->size = (size_t)(new_end - r->start);
      clip_hull(nx, dlo, dhi);
      free_attach(L, nx);
      if (nx->dlo < nx->dhi) {
        nx->stamp = stamp;
        nx->astamp = astamp;
        fifo_insert_after(L, pos, nx);
      }
    } else {
      absorb(L, r, nx);
    }
  }
  r->dlo = r->dhi = NULL;
  return 0;
}

int _hpcmem_large_resize(hpcmem_large_t *L, void *p, size_t new_size, int64_t *delta) {
  rec_t *r;
  _hpcmem_lock_st(&L->lock);
  if (lookup(L, p, &r)) {
    L->error_count++;
    _hpcmem_unlock_st(&L->lock);
    return -EINVAL;
  }
  uint64_t now = clock_tick(L);
  size_t kb = block_bytes(L, new_size);
  char *base = r->data;
  if (!kb || kb > (size_t)(arena_of(L, r)->end - base)) { _hpcmem_unlock_st(&L->lock); return -ENOMEM; }
  char *new_end = base + kb;
  size_t old = usable(r);
  int rc = 0;
  if (new_end <= rend(r)) {
    size_t rem = (size_t)(rend(r) - new_end);
    rec_t *t;
    if (rem > L->min_split && (t = rec_new(L))) {
      t->start = new_end;
      t->size = rem;
      t->prev = r;
      t->next = r->next;
      if (r->next) r->next->prev = t; else arena_of(L, r)->last = t;
      r->next = t;
      r->size -= rem;
      t->dlo = t->start;
      t->dhi = rend(t);
      release_block(L, t, now, (uint32_t)L->alloc_count);
    }
  } else {
    rc = grow_in_place(L, r, new_end);
  }
  if (!rc) {
    mark_ends(L, r, new_size);
    if (in_huge_arena(L, r)) thp_advise(L, r);
    if (delta) *delta = (int64_t)usable(r) - (int64_t)old;
    L->live_bytes = L->live_bytes - old + usable(r);
    L->resize_count++;
    DEBUG_LOCAL(L, r);
    DEBUG_LOCAL(L, r->next);
  }
  finish_unlock(L, now);
  return rc;
}

size_t _hpcmem_large_usable_size(hpcmem_large_t *L, const void *p) {
  rec_t *r;
  size_t u = 0;
  _hpcmem_lock_st(&L->lock);
  if (!lookup(L, p, &r)) u = usable(r);
  _hpcmem_unlock_st(&L->lock);
  return u;
}

void _hpcmem_large_decay(hpcmem_large_t *L, uint64_t now_ns, int force) {
  _hpcmem_lock_st(&L->lock);
  decay_unlock(L, now_ns, force);
}

/* ---------------------------------------------------- statistics, check */

/* The counters of L, plain loads: what needs no walk. */
static void stats_counters(const hpcmem_large_t *L, hpcmem_large_stats_t *out) {
  out->reserved_bytes = (size_t)(L->end - L->base);
  for (int i = 0; i < L->narenas; i++) out->mapped_bytes += (size_t)(L->ar[i].top - L->ar[i].lo);
  out->live_bytes = L->live_bytes;
  out->overhead_bytes = L->overhead_bytes;
  out->free_bytes = L->free_bytes;
  out->retained_bytes = L->retained_bytes;
  out->decayed_bytes = L->decayed_bytes;
  out->meta_bytes = L->recs_used * sizeof(rec_t) + L->hcap * sizeof(slot_t);
  out->live_blocks = L->live_blocks;
  out->free_blocks = L->free_blocks;
  out->quick_blocks = L->nquick;
  out->quick_bytes = L->quick_bytes;
  out->ends_mode = ends_on(L);
  out->tcache_hits = L->tc_hits_gone;
  out->tcache_offs = L->tc_offs_gone;
  out->tcache_grows = L->tc_grows;
  out->land_tries = L->land_tries;
  out->land_hits = L->land_hits;
  out->swept_pages = L->swept_pages;
  out->probe_count = L->probe_count;
  out->spots_mode = (int)L->spots_on;
  out->spot_hits = L->spot_hits;
  out->alloc_count = L->alloc_count;
  out->free_count = L->free_count;
  out->resize_count = L->resize_count;
  out->grow_count = L->grow_count;
  out->decay_count = L->decay_count;
  out->error_count = L->error_count;
}

/* Under the lock: the counters and what takes walks of the lists and trees
 * (the threads' caches, the largest free block). */
static void stats_locked(const hpcmem_large_t *L, hpcmem_large_stats_t *out) {
  stats_counters(L, out);
  for (const struct hpcmem_large_tc *c = L->tcs; c; c = c->next) {   /* racy: their owners go on */
    out->tcache_hits += c->hits;
    out->tcache_offs += __atomic_load_n(&c->offs, __ATOMIC_RELAXED);
    out->tcache_off += !__atomic_load_n(&c->on, __ATOMIC_RELAXED);
    for (unsigned i = 0; i < HPCMEM_LARGE_TC_SLOTS; i++)
      if (__atomic_load_n(&c->slot[i], __ATOMIC_RELAXED)) {
        out->tcache_blocks++;
        out->tcache_bytes += c->usable[i];
      }
  }
  /* the tier counts them as live: they are free and retained */
  out->live_blocks -= out->tcache_blocks;
  out->live_bytes -= out->tcache_bytes;
  out->free_blocks += out->tcache_blocks;
  out->free_bytes += out->tcache_bytes;
  out->retained_bytes += out->tcache_bytes;
  for (int i = 0; i < L->narenas; i++) {
    const arena_t *A = &L->ar[i];
    for (int c = HPCMEM_LARGE_CLASSES - 1; c >= 0; c--) {
      rec_t *n = A->roots[c];
      if (!n) continue;
      while (n->child[1]) n = n->child[1];
      if (n->size > out->largest_free) out->largest_free = n->size;
      break;
    }
  }
}

void _hpcmem_large_stats(hpcmem_large_t *L, hpcmem_large_stats_t *out) {
  memset(out, 0, sizeof *out);
  _hpcmem_lock_st(&L->lock);
  stats_locked(L, out);
  _hpcmem_unlock_st(&L->lock);
}

/* For the summary of a fatal signal, which may have interrupted the lock's
 * holder (this very thread, in a large free): the lock if it comes free
 * within wait_ns, else the counters alone, read as they are -- perhaps in
 * the middle of an update, and without the threads' cached blocks and the
 * largest free block, whose lists and trees may be half relinked.  A
 * single-threaded process takes no lock, but its mark tells whether the
 * signal came inside (heap/single.h).  0: exact; 1: approximate. */
__attribute__((noinline, cold)) int _hpcmem_large_stats_nowait(hpcmem_large_t *L, hpcmem_large_stats_t *out, uint64_t wait_ns) {
  memset(out, 0, sizeof *out);
  if (!_hpcmem_lock_within_st(&L->lock, wait_ns)) { stats_counters(L, out); return 1; }
  stats_locked(L, out);
  _hpcmem_unlock_st(&L->lock);
  return 0;
}

/* Black height of the subtree, or -1 after reporting a violation. */
static long check_tree(const rec_t *n, const rec_t *parent, size_t *count) {
  if (!n) return 1;
  if (n->parent != parent) return fail("tree parent link", n->start), -1;
  if (n->state != REC_FREE) return fail("non-free block in the tree", n->start), -1;
  if (n->cls != size_class(n->size)) return fail("size class of a tree node", n->start), -1;
  if (n->red && parent && parent->red) return fail("red node with red parent", n->start), -1;
  if (n->child[0] && !key_less(n->child[0], n)) return fail("tree order (left)", n->start), -1;
  if (n->child[1] && !key_less(n, n->child[1])) return fail("tree order (right)", n->start), -1;
  (*count)++;
  long l = check_tree(n->child[0], n, count);
  if (l < 0) return -1;
  long r = check_tree(n->child[1], n, count);
  if (r < 0) return -1;
  if (l != r) return fail("unequal black heights", n->start), -1;
  return l + !n->red;
}

/* One arena's block list; adds to the totals. */
static int check_list(hpcmem_large_t *L, const arena_t *A, size_t *t) {
  const size_t Al = L->align;
  char *expect = A->lo;
  const rec_t *prev = NULL;
  if ((A->first == NULL) != (A->top == A->lo)) return fail("empty list but non-empty extent", A->lo);
  if (A->top > A->end) return fail("extent beyond its arena", A->top);
  for (const rec_t *r = A->first; r; prev = r, r = r->next) {
    if (++t[7] > L->recs_used) return fail("block list longer than the records in use (cycle?)", r);
    if (r < L->recs || r >= L->rec_bump) return fail("record outside the pool", r);
    if (r->prev != prev) return fail("prev link", r->start);
    if (r->start != expect) return fail("blocks not contiguous", r->start);
    if (!r->size || r->size % Al || (uintptr_t)r->start % Al) return fail("block off the alignment grid", r->start);
    if (rend(r) > A->top || rend(r) < r->start) return fail("block beyond the extent", r->start);
    expect = rend(r);
    switch (r->state) {
    case REC_TCACHED:
      t[9]++;   /* counted as live */
      __attribute__((fallthrough));
    case REC_LIVE:
      if (r->data < r->start || r->data >= rend(r) || ((uintptr_t)r->data % Al))
        return fail("live data outside its block", r->start);
      if (hash_find(L, (uintptr_t)r->data) != r) return fail("live block missing from the hash table", r->data);
      if (r->tail < r->data || r->tail >= rend(r)) return fail("end of the request outside its block", r->data);
      t[0]++; t[1] += usable(r); t[2] += (size_t)(r->data - r->start);
      break;
    case REC_FREE:
      if (prev && prev->state == REC_FREE) return fail("adjacent free blocks", r->start);
      if (r->dlo > r->dhi || (r->dlo < r->dhi && (r->dlo < r->start || r->dhi > rend(r))))
        return fail("dirty hull outside its block", r->start);
      if (r->dlo < r->dhi) t[6]++;
      t[3]++; t[4] += r->size; t[5] += hull(r);
      break;
    case REC_BUSY:
      t[3]++; t[4] += r->size;
      break;
    case REC_CACHED:
      if (r->data < r->start || r->data >= rend(r) || ((uintptr_t)r->data % Al))
        return fail("cached data outside its block", r->start);
      if (hash_find(L, (uintptr_t)r->data) != r) return fail("cached block missing from the hash table", r->data);
      if (r->dlo != r->start || r->dhi != rend(r)) return fail("cached block not wholly dirty", r->start);
      t[3]++; t[4] += r->size; t[5] += hull(r); t[8]++;
      break;
    default:
      return fail("bad block state", r->start);
    }
  }
  if (expect != A->top) return fail("blocks do not reach the top of the extent", expect);
  if (prev != A->last) return fail("last block pointer", A->last);
  return 0;
}

/* One arena's trees: red-black rules, each node in its class, the bitmap,
 * then the whole set in order.  Adds the node count. */
static int check_arena_tree(const arena_t *A, size_t *ntree) {
  size_t n0 = *ntree;
  for (unsigned c = 0; c < HPCMEM_LARGE_CLASSES; c++) {
    rec_t *root = A->roots[c];
    int bit = (int)((A->nonempty[c / 64] >> (c % 64)) & 1);
    if (bit != (root != NULL)) return fail("size class bitmap", root);
    if (!root) continue;
    if (root->red || root->parent) return fail("tree root", root->start);
    size_t before = *ntree;
    if (check_tree(root, NULL, ntree) < 0) return -EFAULT;
    if (size_class(leftmost(root)->size) != c) return fail("block in the wrong size class", root->start);
    rec_t *r = root;
    while (r->child[1]) r = r->child[1];
    if (size_class(r->size) != c) return fail("block in the wrong size class", r->start);
    (void)before;
  }
  rec_t *n = set_first(A), *pk = NULL;
  size_t nin = 0;
  for (; n; pk = n, n = set_next(A, n)) {   /* in order, across subtrees and classes */
    if (pk && !key_less(pk, n)) return fail("tree order", n->start);
    if (++nin > *ntree - n0) return fail("tree walk longer than the trees", n->start);
  }
  if (nin != *ntree - n0) return fail("tree walk shorter than the trees", NULL);
  return 0;
}

static int check_locked(hpcmem_large_t *L) {
  /* t: live blocks, live bytes, overhead, free blocks, free bytes, retained, dirty, records, cached,
   * thread-cached */
  size_t t[10] = {0}, mapped = 0, ntree = 0;
  for (int i = 0; i < L->narenas; i++) {
    if (check_list(L, &L->ar[i], t) < 0) return -EFAULT;
    if (check_arena_tree(&L->ar[i], &ntree) < 0) return -EFAULT;
    mapped += (size_t)(L->ar[i].top - L->ar[i].lo);
  }
  size_t nlive = t[0], live = t[1], over = t[2], nfree = t[3], fbytes = t[4], retained = t[5];
  size_t ndirty = t[6], nrec = t[7], ncached = t[8];
  if (nlive != L->live_blocks || live != L->live_bytes || over != L->overhead_bytes)
    return fail("live counts", NULL);
  if (nfree != L->free_blocks || fbytes != L->free_bytes || retained != L->retained_bytes)
    return fail("free counts", NULL);
  if (live + over + fbytes != mapped) return fail("bytes do not add up", NULL);
  if (nrec != L->recs_used) return fail("records in use but not in the list", NULL);
  if (L->hcount != nlive + ncached || L->hcount * 2 > L->hcap) return fail("hash table count", NULL);
  for (size_t i = 0, n = 0; i < L->hcap; i++) {
    const slot_t *sl = &L->htab[i];
    if (!sl->key) continue;
    if (++n > L->hcount || sl->rec < L->recs || sl->rec >= L->rec_bump ||
        (sl->rec->state != REC_LIVE && sl->rec->state != REC_CACHED && sl->rec->state != REC_TCACHED) ||
        (uintptr_t)sl->rec->data != sl->key)
      return fail("stale hash table entry", (void *)sl->key);
  }
  for (int i = 0; i < L->narenas; i++) {   /* a stale page is a believed-resident one */
    const arena_t *A = &L->ar[i];
    if (A->top == A->lo) continue;
    for (size_t w = pidx(L, A->lo) / 64, e = (pidx(L, A->top - 1)) / 64; w <= e; w++)
      if (L->bits[w][1] & ~L->bits[w][0]) return fail("stale page not believed resident", A->lo);
  }
  if (L->spots) {   /* spots are hints, but name records of the pool and pages of the region */
    size_t npages = (size_t)(L->end - L->base) >> L->pshift;
    for (size_t i = 0; i < (size_t)(SPOT_DMAX + 1) * SPOT_WAYS; i++) {
      const spot_t *sp = &L->spots[i];
      if (sp->rec && (L->recs + sp->rec - 1 >= L->rec_bump || sp->page + i / SPOT_WAYS >= npages))
        return fail("landing spot outside the records or the region", sp);
    }
  }
  if (ncached != L->nquick || L->nquick > L->quick_max) return fail("quick list count", NULL);
  if (_hpcmem_single_threaded()) {   /* else the owners change their caches meanwhile */
    size_t ntc = 0;
    for (const struct hpcmem_large_tc *c = L->tcs; c; c = c->next) {
      if (c->L != L) return fail("thread cache of another tier", c);
      for (unsigned i = 0; i < HPCMEM_LARGE_TC_SLOTS; i++) {
        const rec_t *r = c->slot[i];
        if (!r) continue;
        if (r < L->recs || r >= L->rec_bump || r->state != REC_TCACHED || r->data != c->data[i] ||
            usable(r) != c->usable[i])
          return fail("thread cache entry", r);
        ntc++;
      }
    }
    if (ntc != t[9]) return fail("thread-cached blocks not in a thread's cache", NULL);
  }
  size_t qbytes = 0;
  for (unsigned i = 0; i < L->nquick; i++) {
    const rec_t *r = L->quick[i];
    if (r < L->recs || r >= L->rec_bump || r->state != REC_CACHED) return fail("quick list entry", r);
    if (L->quick_usable[i] != usable(r)) return fail("quick list usable size", r->start);
    if (i && L->quick[i - 1]->stamp > r->stamp) return fail("quick list out of order", r->start);
    qbytes += r->size;
  }
  if (qbytes != L->quick_bytes || (qbytes > QUICK_BYTES && L->nquick > 1)) return fail("quick list bytes", NULL);
  size_t nbusy = 0;
  for (const rec_t *r = L->busy; r; r = r->dnext) {
    if (r->state != REC_BUSY || ++nbusy > nrec) return fail("busy list", r);
  }
  if (ntree + nbusy + ncached != nfree) return fail("free blocks missing from the tree", NULL);
  size_t nfifo = 0;
  const rec_t *fp = NULL;
  for (const rec_t *r = L->dhead; r; fp = r, r = r->dnext) {
    if (++nfifo > ndirty) return fail("decay list longer than the dirty blocks", r);
    if (r->state != REC_FREE || r->dlo >= r->dhi) return fail("clean or non-free block in the decay list", r->start);
    if (r->dprev != fp) return fail("decay list link", r->start);
    if (fp && fp->stamp > r->stamp) return fail("decay list out of order", r->start);
  }
  if (fp != L->dtail) return fail("decay list tail", L->dtail);
  if (nfifo != ndirty) return fail("dirty blocks missing from the decay list", NULL);
  return 0;
}

int _hpcmem_large_check(hpcmem_large_t *L) {
  _hpcmem_lock_st(&L->lock);
  int rc = check_locked(L);
  _hpcmem_unlock_st(&L->lock);
  return rc;
}

/* ------------------------------------------------------------------ fork */

void _hpcmem_large_each_live(hpcmem_large_t *L, void (*fn)(void *arg, char *start, size_t bytes), void *arg) {
  for (int i = 0; i < L->narenas; i++)
    for (rec_t *r = L->ar[i].first; r; r = r->next)
      if (r->state == REC_LIVE) fn(arg, r->start, r->size);
}

void _hpcmem_large_fork_prepare(hpcmem_large_t *L) { _hpcmem_lock(&L->lock); }
void _hpcmem_large_fork_parent(hpcmem_large_t *L) { _hpcmem_unlock(&L->lock); }

/* The child has only the forking thread: blocks another thread was
 * decaying come back as free and, since the madvise may not have happened
 * before the fork, as dirty. */
void _hpcmem_large_fork_child(hpcmem_large_t *L) {
  L->lock.v = 0;
  uint64_t now = _hpcmem_coarse_now_ns();
  /* the other threads' caches (their memory is still mapped) give their blocks back */
  for (struct hpcmem_large_tc *c = L->tcs, *nx; c; c = nx) {
    nx = c->next;
    if (c == &tc_self) continue;
    for (unsigned i = 0; i < HPCMEM_LARGE_TC_SLOTS; i++) {
      rec_t *r = c->slot[i];
      c->slot[i] = NULL;
      if (r) free_locked(L, r, SIZE_MAX, now, now, 0);
    }
    L->tc_hits_gone += c->hits;
    tc_unlink(L, c);
  }
  while (L->busy) {
    rec_t *r = L->busy;
    busy_remove(L, r);
    L->free_blocks--;
    L->free_bytes -= r->size;
    release_block(L, r, now, (uint32_t)L->alloc_count);
  }
}
