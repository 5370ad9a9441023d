/* Placement state and binding (hexe IV-B, IV-C): the request table, memory
 * classes from the topology, mbind of decided pieces, commit and epochs,
 * and what the kernel says about a range.
 *
 * The request table lives in prim memory (this is the allocator: no
 * malloc); one lock guards it.  Every placed allocation is its own range
 * from _hpcmem_prim_reserve, so binding it never touches the heaps.
 *
 * The kernel's NUMA calls go through src/prim (mbind, and get_mempolicy /
 * move_pages to ask where pages are); numaif.h gives only the constants. */
#include "config.h"
#include "place/place.h"
#include "prim/prim.h"
#include "topo/topo.h"
#include "util/lock.h"
#include "util/log.h"
#include "util/options.h"
#include <errno.h>
#include <numaif.h>
#include <sched.h>
#include <string.h>

#ifndef MPOL_PREFERRED_MANY
#define MPOL_PREFERRED_MANY 5
#endif

typedef struct {
  int used;
  int mapping, state, epoch;
  char *base;
  hpcmem_place_req_t req;
} rec_t;

static hpcmem_lock_t lock = HPCMEM_LOCK_INIT;
static rec_t *table;                      /* HPCMEM_PLACE_MAX_REQS records */
static void *scratch;                     /* HPCMEM_PLACE_SCRATCH bytes for the knapsack */
static uint64_t used[HPCMEM_PLACE_NODES]; /* bytes this process placed per node */
static uint64_t limit[HPCMEM_MEM_KINDS_];
static uint64_t next_id;
static int epoch;
static hpcmem_place_stats_t stats;
static hpcmem_place_share_t share;        /* node-wide accounting (MPI layer); zeros: alone */

static uint64_t page_size(void) { return (uint64_t)_hpcmem_prim_page_size(); }

static int ensure_table(void) {
  if (!table) {
    table = _hpcmem_prim_reserve(sizeof(rec_t) * HPCMEM_PLACE_MAX_REQS, 0);
    scratch = _hpcmem_prim_reserve(HPCMEM_PLACE_SCRATCH, 0);
    if (!table || !scratch) return -ENOMEM;
  }
  return 0;
}

static uint64_t mask64(const unsigned long *m) {
  uint64_t r = 0;
  for (int n = 0; n < HPCMEM_PLACE_NODES && n < HPCMEM_TOPO_MAX_NODE_OS; n++)
    if (m[n / (8 * sizeof(long))] >> (n % (8 * sizeof(long))) & 1) r |= 1ULL << n;
  return r;
}

static int nth_node(uint64_t mask, int idx) {
  for (int n = 0; n < HPCMEM_PLACE_NODES; n++)
    if ((mask >> n & 1) && idx-- == 0) return n;
  return -1;
}

static int this_cpu(void) {
  int c = sched_getcpu();
  return c < 0 ? 0 : c;
}

/* The nodes near this thread, any kind: its own node plus, per kind, the
 * nodes of that kind whose cpus include it (a kind whose nodes are all
 * "local" because none is says nothing about nearness and is skipped). */
static uint64_t near_nodes(void) {
  int cpu = this_cpu();
  uint64_t m = 0;
  int own = _hpcmem_topo_cpu_numa(cpu);
  if (own >= 0 && own < HPCMEM_PLACE_NODES) m |= 1ULL << own;
  for (int k = 0; k < HPCMEM_MEM_KINDS_; k++) {
    hpcmem_mem_class_t c;
    unsigned long lm[HPCMEM_TOPO_MASK_LONGS];
    if (_hpcmem_topo_class((hpcmem_mem_kind_t)k, &c) != 0) continue;
    int cnt = _hpcmem_topo_local_nodes(cpu, (hpcmem_mem_kind_t)k, lm, HPCMEM_TOPO_MAX_NODE_OS);
    if (cnt > 0 && cnt < c.node_count) m |= mask64(lm);
  }
  return m;
}

/* (class, index) -> node mask; 0 or -EINVAL / -ENODEV / -ERANGE. */
static int resolve(int cls, int index, uint64_t *out) {
  uint64_t all;
  if (cls == HPCMEM_CLASS_NEAR) {
    all = near_nodes();
  } else if (cls == HPCMEM_CLASS_DRAM || cls == HPCMEM_CLASS_HBM || cls == HPCMEM_CLASS_NVM) {
    hpcmem_mem_class_t c;
    if (_hpcmem_topo_class((hpcmem_mem_kind_t)cls, &c) != 0) return -ENODEV;
    all = mask64(c.nodes);
    if (index == HPCMEM_INDEX_LOCAL) {
      unsigned long lm[HPCMEM_TOPO_MASK_LONGS];
      if (_hpcmem_topo_local_nodes(this_cpu(), (hpcmem_mem_kind_t)cls, lm, HPCMEM_TOPO_MAX_NODE_OS) <= 0)
        return -ENODEV;
      all = mask64(lm);
    }
  } else {
    return -EINVAL;
  }
  if (all == 0) return -ENODEV;   /* only nodes beyond 63 */
  if (index >= 0) {
    int n = nth_node(all, index);
    if (n < 0) return -ERANGE;
    all = 1ULL << n;
  } else if (index != HPCMEM_INDEX_ALL && index != HPCMEM_INDEX_LOCAL) {
    return -ERANGE;
  }
  *out = all;
  return 0;
}

/* Capacity per node: the topology's, scaled down by the class limit. */
static void node_caps(uint64_t *cap) {
  memset(cap, 0, sizeof(uint64_t) * HPCMEM_PLACE_NODES);
  int count = _hpcmem_topo_numa_count();
  for (int i = 0; i < count; i++) {
    hpcmem_numa_info_t ni;
    hpcmem_mem_class_t c;
    if (_hpcmem_topo_numa_info(i, &ni) != 0 || ni.os_index < 0 || ni.os_index >= HPCMEM_PLACE_NODES) continue;
    uint64_t v = ni.capacity;
    if (limit[ni.kind] && _hpcmem_topo_class(ni.kind, &c) == 0 && c.capacity > 0)
      v = (uint64_t)((unsigned __int128)limit[ni.kind] * ni.capacity / c.capacity);
    cap[ni.os_index] = v;
  }
}

static void node_others(uint64_t *others) {
  memset(others, 0, sizeof(uint64_t) * HPCMEM_PLACE_NODES);
  if (share.others && share.others(others, HPCMEM_PLACE_NODES) != 0)
    memset(others, 0, sizeof(uint64_t) * HPCMEM_PLACE_NODES);
}

/* One decision at a time on the node: what the others hold cannot change
 * between reading it and publishing what this decision took.  Called with
 * the placement lock held (so one thread per process waits here at most). */
static int node_lock(void) { return share.lock && share.lock() == 0; }
static void node_unlock(int held) {
  if (held && share.unlock) share.unlock();
}
static void publish(void) {
  if (share.publish) share.publish(used, HPCMEM_PLACE_NODES);
}

static void node_free(uint64_t *fr) {
  uint64_t cap[HPCMEM_PLACE_NODES], others[HPCMEM_PLACE_NODES];
  node_caps(cap);
  node_others(others);
  for (int n = 0; n < HPCMEM_PLACE_NODES; n++) {
    uint64_t u = used[n] + others[n];
    fr[n] = cap[n] > u ? cap[n] - u : 0;
  }
}

static void charge(const hpcmem_place_req_t *r, int sign) {
  for (int n = 0; n < HPCMEM_PLACE_NODES; n++)
    used[n] = sign > 0 ? used[n] + r->charged[n] : (used[n] > r->charged[n] ? used[n] - r->charged[n] : 0);
}

/* A decision the kernel refused in MISMATCH_ERROR mode holds no memory:
 * give its bytes back and forget them, so a later free or recommit does
 * not give them back twice. */
static void uncharge_refused(hpcmem_place_req_t *r) {
  charge(r, -1);
  memset(r->charged, 0, sizeof r->charged);
}

/* Bytes of [p, p+len) that already have pages (they must move when bound). */
static uint64_t resident_bytes(char *p, uint64_t len) {
  uint64_t page = page_size(), res = 0;
  void *pages[256];
  int status[256];
  for (uint64_t off = 0; off < len;) {
    unsigned long k = 0;
    for (; k < 256 && off < len; k++, off += page) pages[k] = p + off;
    if (_hpcmem_prim_page_nodes(pages, k, status) != 0) return 0;
    for (unsigned long i = 0; i < k; i++)
      if (status[i] >= 0) res += page;
  }
  return res;
}

static int bind_piece(char *base, const hpcmem_place_piece_t *pc, int mismatch, int move) {
  unsigned long mask[2] = {(unsigned long)pc->nodes, 0};
  if (pc->cls == HPCMEM_CLASS_ANY || pc->nodes == 0)
    return _hpcmem_prim_bind(base + pc->off, pc->len, MPOL_DEFAULT, NULL, 0, 0);
  if (mismatch == HPCMEM_MISMATCH_ERROR)
    return _hpcmem_prim_bind(base + pc->off, pc->len, MPOL_BIND, mask, 65, move);
  /* FALLBACK: a preference, so the kernel may still use other memory when
   * our view of the free capacity was wrong */
  if (__builtin_popcountll(pc->nodes) == 1)
    return _hpcmem_prim_bind(base + pc->off, pc->len, MPOL_PREFERRED, mask, 65, move);
  return _hpcmem_prim_bind(base + pc->off, pc->len, MPOL_PREFERRED_MANY, mask, 65, move);
}

/* Bind a decided record; 0 or the first error.  Called with the lock held. */
static int bind_rec(rec_t *rec) {
  hpcmem_place_req_t *r = &rec->req;
  uint64_t page = page_size();
  uint64_t res = rec->mapping == HPCMEM_MAP_ON_COMMIT ? resident_bytes(rec->base, r->size) : 0;
  uint64_t t0 = res ? _hpcmem_prim_now_ns() : 0;
  int err = 0;
  long count = _hpcmem_place_piece_count(r, page);
  hpcmem_place_piece_t pc;
  for (long i = 0; i < count; i++) {
    _hpcmem_place_piece(r, i, &pc, page);
    int rc = bind_piece(rec->base, &pc, r->mismatch, res != 0);
    if (rc != 0 && !err) err = rc;
  }
  if (res) {   /* the migration's cost: what was touched, and the time its binding took */
    stats.moved_bytes += res;
    stats.move_ns += _hpcmem_prim_now_ns() - t0;
  }
  if (err) stats.bind_failures++;
  uint64_t pref = r->ntargets ? r->bytes[0] : r->size;
  if (r->split == HPCMEM_SPLIT_EQUAL || r->split == HPCMEM_SPLIT_CHUNK) pref = r->size;
  stats.fallback_bytes += r->size - (pref < r->size ? pref : r->size);
  return err;
}

int _hpcmem_place_attr_add(hpcmem_place_attr_t *a, int cls, int index) {
  uint64_t m;
  if (!a) return -EINVAL;
  if (a->nclasses < 0 || a->nclasses >= HPCMEM_PLACE_MAX_CLASSES) return -ENOSPC;
  int rc = resolve(cls, index, &m);
  if (rc) return rc;
  a->classes[a->nclasses++] = (hpcmem_place_class_t){cls, index};
  return 0;
}

/* Attribute -> request (targets resolved); 0 or -errno. */
static int make_req(size_t size, const hpcmem_place_attr_t *a, hpcmem_place_req_t *r) {
  uint64_t page = page_size();
  memset(r, 0, sizeof *r);
  if (a->nclasses < 0 || a->nclasses > HPCMEM_PLACE_MAX_CLASSES) return -EINVAL;
  if (a->split < HPCMEM_SPLIT_OS || a->split > HPCMEM_SPLIT_CHUNK) return -EINVAL;
  if (a->mapping != HPCMEM_MAP_IMMEDIATE && a->mapping != HPCMEM_MAP_ON_COMMIT) return -EINVAL;
  if (a->mismatch != HPCMEM_MISMATCH_ERROR && a->mismatch != HPCMEM_MISMATCH_FALLBACK) return -EINVAL;
  if (a->priority < 0 || a->priority > 1000000) return -EINVAL;
  if (a->split == HPCMEM_SPLIT_CHUNK && (a->chunk_size == 0 || a->chunk_size % page)) return -EINVAL;
  r->size = (size + page - 1) / page * page;
  r->chunk = a->chunk_size;
  r->priority = a->priority;
  r->split = a->split;
  r->mismatch = a->mismatch;
  if (a->nclasses == 0) {
    r->ntargets = 1;
    r->targets[0].cls = HPCMEM_CLASS_DRAM;
    int rc = resolve(HPCMEM_CLASS_DRAM, HPCMEM_INDEX_ALL, &r->targets[0].nodes);
    if (rc) return rc;
  }
  for (int i = 0; i < a->nclasses; i++) {
    int rc = resolve(a->classes[i].cls, a->classes[i].index, &r->targets[i].nodes);
    if (rc) return rc;
    r->targets[i].cls = a->classes[i].cls;
    r->ntargets++;
  }
  return 0;
}

void *_hpcmem_place_alloc(size_t size, const hpcmem_place_attr_t *attr, int *err) {
  hpcmem_place_attr_t def;
  hpcmem_place_req_t req;
  uint64_t page = page_size();
  if (size == 0 || size > ((uint64_t)1 << 56)) { *err = size ? ENOMEM : EINVAL; return NULL; }
  if (!attr) {
    memset(&def, 0, sizeof def);
    def.mismatch = HPCMEM_MISMATCH_FALLBACK;
    def.priority = 1;
    attr = &def;
  }
  int rc = make_req(size, attr, &req);
  if (rc) { *err = -rc; return NULL; }
  size_t align = req.size >= (2u << 20) ? (2u << 20) : page;
  char *base = _hpcmem_prim_reserve(req.size, align);
  if (!base) { *err = ENOMEM; return NULL; }
  if (req.size >= (2u << 20) && _hpcmem_opt(THP)) _hpcmem_prim_hugepages(base, req.size, 1);

  _hpcmem_lock(&lock);
  rec_t *rec = NULL;
  if (ensure_table() == 0)
    for (int i = 0; i < HPCMEM_PLACE_MAX_REQS && !rec; i++)
      if (!table[i].used) rec = &table[i];
  if (!rec) {
    _hpcmem_unlock(&lock);
    _hpcmem_prim_release(base, req.size);
    *err = ENOMEM;
    return NULL;
  }
  req.id = next_id++;
  rec->req = req;
  rec->base = base;
  rec->mapping = attr->mapping;
  rec->epoch = epoch;
  rec->state = HPCMEM_PLACE_PENDING;
  if (attr->mapping == HPCMEM_MAP_IMMEDIATE) {
    uint64_t fr[HPCMEM_PLACE_NODES];
    hpcmem_place_req_t *one = &rec->req;
    /* decide and publish under the node lock; bind (page moves) outside it */
    int held = node_lock();
    node_free(fr);
    int failed = _hpcmem_place_decide(&one, 1, fr, scratch, page) > 0;
    if (!failed) {
      charge(&rec->req, +1);
      publish();
    }
    node_unlock(held);
    if (failed) {
      _hpcmem_unlock(&lock);
      _hpcmem_prim_release(base, req.size);
      *err = ENOMEM;
      return NULL;
    }
    rc = bind_rec(rec);
    if (rc && rec->req.mismatch == HPCMEM_MISMATCH_ERROR) {
      uncharge_refused(&rec->req);
      publish();
      _hpcmem_unlock(&lock);
      _hpcmem_prim_release(base, req.size);
      *err = ENODEV;
      return NULL;
    }
    rec->state = rc ? HPCMEM_PLACE_UNBOUND : HPCMEM_PLACE_BOUND;
  } else {
    stats.pending++;
  }
  rec->used = 1;
  stats.allocs++;
  _hpcmem_unlock(&lock);
  return base;
}

static rec_t *find(const void *p, size_t len) {
  if (!table) return NULL;
  for (int i = 0; i < HPCMEM_PLACE_MAX_REQS; i++) {
    rec_t *r = &table[i];
    if (r->used && (const char *)p >= r->base && (const char *)p + len <= r->base + r->req.size &&
        (const char *)p + len > (const char *)p)
      return r;
  }
  return NULL;
}

int _hpcmem_place_free(void *p) {
  _hpcmem_lock(&lock);
  rec_t *rec = find(p, 1);
  if (!rec || rec->base != p) { _hpcmem_unlock(&lock); return -EINVAL; }
  if (rec->state == HPCMEM_PLACE_PENDING) {
    stats.pending--;
  } else {
    charge(&rec->req, -1);
    publish();   /* giving back needs no node lock: the others only see more free */
  }
  rec->used = 0;
  stats.frees++;
  uint64_t size = rec->req.size;
  _hpcmem_unlock(&lock);
  return _hpcmem_prim_release(p, size);
}

int _hpcmem_place_commit(int flags) {
  if (flags != HPCMEM_COMMIT_EPOCH && flags != HPCMEM_COMMIT_ALL) return -EINVAL;
  uint64_t t0 = _hpcmem_prim_now_ns(), page = page_size();
  static hpcmem_place_req_t *reqs[HPCMEM_PLACE_MAX_REQS];   /* under the lock */
  static rec_t *recs[HPCMEM_PLACE_MAX_REQS];
  _hpcmem_lock(&lock);
  int n = 0;
  for (int i = 0; table && i < HPCMEM_PLACE_MAX_REQS; i++) {
    rec_t *r = &table[i];
    if (!r->used || r->mapping != HPCMEM_MAP_ON_COMMIT) continue;
    if (r->state != HPCMEM_PLACE_PENDING && flags != HPCMEM_COMMIT_ALL) continue;
    recs[n] = r;
    reqs[n++] = &r->req;
  }
  if (n == 0) { _hpcmem_unlock(&lock); return -ENODATA; }
  /* decide, charge and publish under the node lock; bind outside it */
  int held = node_lock();
  for (int i = 0; i < n; i++)   /* decided again: give back what they held (FAILED holds nothing) */
    if (recs[i]->state != HPCMEM_PLACE_PENDING && recs[i]->state != HPCMEM_PLACE_FAILED) charge(&recs[i]->req, -1);
  uint64_t fr[HPCMEM_PLACE_NODES];
  node_free(fr);
  _hpcmem_place_decide(reqs, n, fr, scratch, page);
  for (int i = 0; i < n; i++)
    if (!recs[i]->req.failed) charge(&recs[i]->req, +1);
  publish();
  node_unlock(held);
  int ret = 0, refused = 0;
  for (int i = 0; i < n; i++) {
    rec_t *r = recs[i];
    if (r->state == HPCMEM_PLACE_PENDING) stats.pending--;
    if (r->req.failed) {
      hpcmem_place_piece_t all = {0, r->req.size, HPCMEM_CLASS_ANY, 0};
      if (r->state != HPCMEM_PLACE_PENDING) bind_piece(r->base, &all, 0, 0);   /* a recommit: unbind */
      r->state = HPCMEM_PLACE_FAILED;
      if (!ret) ret = -ENOMEM;
      continue;
    }
    int rc = bind_rec(r);
    if (rc && r->req.mismatch == HPCMEM_MISMATCH_ERROR) {
      uncharge_refused(&r->req);
      refused = 1;
      r->state = HPCMEM_PLACE_FAILED;
      if (!ret || ret == -ENOMEM) ret = -ENODEV;
    } else {
      r->state = rc ? HPCMEM_PLACE_UNBOUND : HPCMEM_PLACE_BOUND;
    }
  }
  if (refused) publish();
  epoch++;
  stats.commits++;
  stats.commit_ns += _hpcmem_prim_now_ns() - t0;
  _hpcmem_unlock(&lock);
  return ret;
}

int _hpcmem_place_where(const void *p, size_t len, hpcmem_where_t *out, int max) {
  if (!p || len == 0 || (max > 0 && !out) || max < 0) return -EINVAL;
  uint64_t page = page_size();
  _hpcmem_lock(&lock);
  rec_t *rec = find(p, len);
  if (!rec) { _hpcmem_unlock(&lock); return -ENOENT; }
  uint64_t lo = (uint64_t)((const char *)p - rec->base), hi = lo + len;
  long count = _hpcmem_place_piece_count(&rec->req, page);
  int k = 0;
  hpcmem_place_piece_t pc;
  for (long i = 0; i < count; i++) {
    _hpcmem_place_piece(&rec->req, i, &pc, page);
    if (rec->state == HPCMEM_PLACE_PENDING) pc = (hpcmem_place_piece_t){0, rec->req.size, HPCMEM_CLASS_ANY, 0};
    uint64_t a = pc.off > lo ? pc.off : lo, b = pc.off + pc.len < hi ? pc.off + pc.len : hi;
    if (a >= b) { if (rec->state == HPCMEM_PLACE_PENDING) break; continue; }
    if (k < max) {
      hpcmem_where_t *w = &out[k];
      memset(w, 0, sizeof *w);
      w->offset = a - lo;
      w->length = b - a;
      w->cls = pc.cls;
      w->nodes = pc.nodes;
      w->state = rec->state;
      w->epoch = rec->epoch;
      char *addr = rec->base + a;
      int mode = 0;
      unsigned long km[2] = {0, 0};
      int pr = _hpcmem_prim_policy_of(addr, &mode, km, 65);
      w->kernel_policy = pr == 0 ? mode : pr;
      w->kernel_nodes = km[0];
      void *pg = (void *)((uintptr_t)addr & ~(uintptr_t)(page - 1));
      int st = -ENOENT;
      pr = _hpcmem_prim_page_nodes(&pg, 1, &st);
      w->page_node = pr == 0 ? st : pr;
    }
    k++;
    if (rec->state == HPCMEM_PLACE_PENDING) break;
  }
  _hpcmem_unlock(&lock);
  return k;
}

/* The classes; with wait_ns (the summary of a fatal signal) the lock only if
 * it comes free that soon, and not the node's (an MPI call in a signal
 * handler): *approx set when read without the lock. */
static int classes_take(hpcmem_class_info_t *out, int max, uint64_t wait_ns, int *approx) {
  if (max < 0 || (max > 0 && !out)) return -EINVAL;
  uint64_t cap[HPCMEM_PLACE_NODES], others[HPCMEM_PLACE_NODES];
  hpcmem_mem_class_t cl[HPCMEM_MEM_KINDS_];
  int n = _hpcmem_topo_classes(cl, HPCMEM_MEM_KINDS_), k = 0;
  int mine = 1;
  if (!wait_ns) _hpcmem_lock(&lock);
  else if (!(mine = _hpcmem_lock_within(&lock, wait_ns))) *approx = 1;
  node_caps(cap);
  /* under the node lock: no decision half-published, so used + used_node
   * is a sum that existed (a snapshot never shows more than the node has) */
  int held = !wait_ns && node_lock();
  node_others(others);
  node_unlock(held);
  for (int i = 0; i < n && i < HPCMEM_MEM_KINDS_; i++) {
    if (cl[i].kind == HPCMEM_MEM_UNKNOWN) continue;
    if (k < max) {
      hpcmem_class_info_t *o = &out[k];
      memset(o, 0, sizeof *o);
      o->cls = (int)cl[i].kind;
      o->nodes = mask64(cl[i].nodes);
      o->node_count = cl[i].node_count;
      o->bandwidth = cl[i].bandwidth;
      o->latency = cl[i].latency;
      for (int nd = 0; nd < HPCMEM_PLACE_NODES; nd++)
        if (o->nodes >> nd & 1) { o->capacity += cap[nd]; o->used += used[nd]; o->used_node += others[nd]; }
    }
    k++;
  }
  if (mine) _hpcmem_unlock(&lock);
  return k;
}

int _hpcmem_place_classes(hpcmem_class_info_t *out, int max) {
  int approx = 0;
  return classes_take(out, max, 0, &approx);
}

__attribute__((noinline, cold)) int _hpcmem_place_classes_nowait(hpcmem_class_info_t *out, int max, uint64_t wait_ns,
                                                                 int *approx) {
  return classes_take(out, max, wait_ns ? wait_ns : 1, approx);
}

int _hpcmem_place_limit(int cls, uint64_t bytes) {
  hpcmem_mem_class_t c;
  if (cls != HPCMEM_CLASS_DRAM && cls != HPCMEM_CLASS_HBM && cls != HPCMEM_CLASS_NVM) return -EINVAL;
  if (_hpcmem_topo_class((hpcmem_mem_kind_t)cls, &c) != 0) return -ENODEV;
  _hpcmem_lock(&lock);
  limit[cls] = bytes;
  _hpcmem_unlock(&lock);
  return 0;
}

void _hpcmem_place_get_stats(hpcmem_place_stats_t *out) {
  _hpcmem_lock(&lock);
  *out = stats;
  out->epoch = (uint64_t)epoch;
  _hpcmem_unlock(&lock);
}

__attribute__((noinline, cold)) int _hpcmem_place_get_stats_nowait(hpcmem_place_stats_t *out, uint64_t wait_ns) {
  int mine = _hpcmem_lock_within(&lock, wait_ns);
  *out = stats;
  out->epoch = (uint64_t)epoch;
  if (mine) _hpcmem_unlock(&lock);
  return !mine;
}

void _hpcmem_place_set_share(const hpcmem_place_share_t *s) {
  _hpcmem_lock(&lock);
  if (s) share = *s;
  else memset(&share, 0, sizeof share);
  /* what this process placed before the node could see it: an increase
   * for the others, so under the node lock like a decision */
  int held = node_lock();
  publish();
  node_unlock(held);
  _hpcmem_unlock(&lock);
}

void _hpcmem_place_set_usage_hook(hpcmem_place_usage_fn fn) {
  hpcmem_place_share_t s = {fn, NULL, NULL, NULL};
  _hpcmem_place_set_share(fn ? &s : NULL);
}

void _hpcmem_place_local_usage(uint64_t *per_node, int nnodes) {
  _hpcmem_lock(&lock);
  for (int n = 0; n < nnodes; n++) per_node[n] = n < HPCMEM_PLACE_NODES ? used[n] : 0;
  _hpcmem_unlock(&lock);
}

void _hpcmem_place_reset(void) {
  _hpcmem_lock(&lock);
  for (int i = 0; table && i < HPCMEM_PLACE_MAX_REQS; i++)
    if (table[i].used) {
      _hpcmem_prim_release(table[i].base, table[i].req.size);
      table[i].used = 0;
    }
  memset(used, 0, sizeof used);
  publish();
  memset(limit, 0, sizeof limit);
  memset(&stats, 0, sizeof stats);
  epoch = 0;
  next_id = 0;
  _hpcmem_unlock(&lock);
}
