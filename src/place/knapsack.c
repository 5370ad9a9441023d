/* The placement decision (hexe IV-C): which request gets how much of which
 * class.  Pure: no system calls, no globals, the caller's scratch only.
 *
 * Fixed splits (EQUAL, CHUNK) are charged first: their shape is the user's.
 * Then the free-form requests (OS, SPILL_OVER) go round by round over their
 * class lists: in round k every request still holding unplaced bytes asks
 * its k-th target.  Per target:
 *   - everything fits: done;
 *   - else a 0/1 knapsack (value = (priority+1) * bytes) picks whole
 *     requests; when total demand far exceeds capacity only small ones fit,
 *     as the paper says;
 *   - a group of near-equal requests (same priority, sizes within 1/16) is
 *     never cut by the knapsack: if only some members were picked, none is,
 *     and the group shares what is left like every unpicked request;
 *   - what is left is shared by the unpicked requests in proportion to
 *     (priority+1) * bytes, each capped at its size (water filling), so
 *     they are split between this target and the next.
 * Identical requests get identical shares (shares are rounded down, never
 * handed out by position), which makes the result independent of arrival
 * order.  MISMATCH_ERROR requests left with unplaced bytes fail and the
 * decision is made again without them. */
#include "config.h"
#include "place/place.h"
#include <string.h>

/* The canonical order: priority (high first), size (small first), then the
 * rest of what was asked, so that two different requests never fall back
 * on their arrival numbers (a fixed-shape ERROR request that fits only
 * before another one would otherwise win or lose by arriving first).  The
 * arrival number orders only requests identical in every field. */
static int req_before(const hpcmem_place_req_t *a, const hpcmem_place_req_t *b) {
  if (a->priority != b->priority) return a->priority > b->priority;
  if (a->size != b->size) return a->size < b->size;
  if (a->split != b->split) return a->split < b->split;
  if (a->mismatch != b->mismatch) return a->mismatch < b->mismatch;
  if (a->split == HPCMEM_SPLIT_CHUNK && a->chunk != b->chunk) return a->chunk < b->chunk;
  if (a->ntargets != b->ntargets) return a->ntargets < b->ntargets;
  for (int t = 0; t < a->ntargets; t++) {
    if (a->targets[t].cls != b->targets[t].cls) return a->targets[t].cls < b->targets[t].cls;
    if (a->targets[t].nodes != b->targets[t].nodes) return a->targets[t].nodes < b->targets[t].nodes;
  }
  return a->id < b->id;
}

static void sort_reqs(hpcmem_place_req_t **r, int n) {
  for (int i = 1; i < n; i++) {   /* insertion sort: n is small, and stable */
    hpcmem_place_req_t *x = r[i];
    int j = i - 1;
    while (j >= 0 && req_before(x, r[j])) { r[j + 1] = r[j]; j--; }
    r[j + 1] = x;
  }
}

static uint64_t mask_free(uint64_t mask, const uint64_t *node_free) {
  uint64_t s = 0;
  for (int n = 0; n < HPCMEM_PLACE_NODES; n++)
    if (mask >> n & 1) s += node_free[n];
  return s;
}

/* Take `bytes` from the nodes of mask, evenly (a node that runs out leaves
 * its share to the others); charged[] gets what each node gave.  Bytes the
 * nodes cannot hold are charged to the first node (the kernel decides). */
static void consume(uint64_t mask, uint64_t bytes, uint64_t *node_free, uint64_t *charged) {
  while (bytes > 0) {
    int k = 0;
    for (int n = 0; n < HPCMEM_PLACE_NODES; n++)
      if ((mask >> n & 1) && node_free[n] > 0) k++;
    if (k == 0) {
      for (int n = 0; n < HPCMEM_PLACE_NODES; n++)
        if (mask >> n & 1) { charged[n] += bytes; break; }
      return;
    }
    uint64_t share = (bytes + k - 1) / k;
    for (int n = 0; n < HPCMEM_PLACE_NODES && bytes > 0; n++) {
      if (!(mask >> n & 1) || node_free[n] == 0) continue;
      uint64_t t = share < node_free[n] ? share : node_free[n];
      if (t > bytes) t = bytes;
      node_free[n] -= t;
      charged[n] += t;
      bytes -= t;
    }
  }
}

int _hpcmem_place_node_list(const hpcmem_place_req_t *r, int *nodes, int *cls) {
  uint64_t seen = 0;
  int k = 0;
  for (int t = 0; t < r->ntargets; t++)
    for (int n = 0; n < HPCMEM_PLACE_NODES; n++)
      if ((r->targets[t].nodes >> n & 1) && !(seen >> n & 1)) {
        seen |= 1ULL << n;
        nodes[k] = n;
        if (cls) cls[k] = r->targets[t].cls;
        k++;
      }
  return k;
}

long _hpcmem_place_piece_count(const hpcmem_place_req_t *r, uint64_t page) {
  int nodes[HPCMEM_PLACE_NODES];
  switch (r->split) {
  case HPCMEM_SPLIT_EQUAL: {
    int k = _hpcmem_place_node_list(r, nodes, NULL);
    uint64_t pages = r->size / page;
    return k == 0 ? 1 : (long)(pages < (uint64_t)k ? pages : (uint64_t)k);
  }
  case HPCMEM_SPLIT_CHUNK:
    return (long)((r->size + r->chunk - 1) / r->chunk);
  case HPCMEM_SPLIT_SPILL_OVER: {
    long c = 0;
    uint64_t placed = 0;
    for (int t = 0; t < r->ntargets; t++)
      if (r->bytes[t]) { c++; placed += r->bytes[t]; }
    return c + (placed < r->size);
  }
  default:
    return 1;
  }
}

long _hpcmem_place_piece(const hpcmem_place_req_t *r, long i, hpcmem_place_piece_t *out, uint64_t page) {
  long count = _hpcmem_place_piece_count(r, page);
  if (i < 0 || i >= count) return -1;
  int nodes[HPCMEM_PLACE_NODES], cls[HPCMEM_PLACE_NODES];
  int k = _hpcmem_place_node_list(r, nodes, cls);
  hpcmem_place_piece_t p = {0, r->size, HPCMEM_CLASS_ANY, 0};
  if (r->failed) {
    /* nothing bound */
  } else if (r->split == HPCMEM_SPLIT_EQUAL && k > 0) {
    uint64_t q = r->size / page / (uint64_t)count * page;
    p.off = (uint64_t)i * q;
    p.len = i == count - 1 ? r->size - p.off : q;
    p.cls = cls[i];
    p.nodes = 1ULL << nodes[i];
  } else if (r->split == HPCMEM_SPLIT_CHUNK && k > 0) {
    p.off = (uint64_t)i * r->chunk;
    p.len = r->size - p.off < r->chunk ? r->size - p.off : r->chunk;
    p.cls = cls[i % k];
    p.nodes = 1ULL << nodes[i % k];
  } else if (r->split == HPCMEM_SPLIT_SPILL_OVER) {
    long c = 0;
    uint64_t off = 0;
    for (int t = 0; t < r->ntargets; t++) {
      if (!r->bytes[t]) continue;
      if (c++ == i) {
        p = (hpcmem_place_piece_t){off, r->bytes[t], r->targets[t].cls, r->targets[t].nodes};
        break;
      }
      off += r->bytes[t];
    }
    if (c <= i) p = (hpcmem_place_piece_t){off, r->size - off, HPCMEM_CLASS_ANY, 0};
  } else {   /* OS: one policy over every node given bytes; the class of the largest share */
    uint64_t best = 0;
    for (int t = 0; t < r->ntargets; t++) {
      if (!r->bytes[t]) continue;
      p.nodes |= r->targets[t].nodes;
      if (r->bytes[t] > best) { best = r->bytes[t]; p.cls = r->targets[t].cls; }
    }
  }
  *out = p;
  return count;
}

/* EQUAL / CHUNK: the shape is fixed; charge each node its pieces. */
static void decide_fixed(hpcmem_place_req_t *r, uint64_t *node_free, uint64_t page) {
  uint64_t need[HPCMEM_PLACE_NODES] = {0};
  long count = _hpcmem_place_piece_count(r, page);
  hpcmem_place_piece_t p;
  for (long i = 0; i < count; i++) {
    _hpcmem_place_piece(r, i, &p, page);
    for (int n = 0; n < HPCMEM_PLACE_NODES; n++)
      if (p.nodes >> n & 1) { need[n] += p.len; break; }
  }
  for (int n = 0; n < HPCMEM_PLACE_NODES; n++)
    if (need[n] > node_free[n] && r->mismatch == HPCMEM_MISMATCH_ERROR) { r->failed = 1; return; }
  for (int n = 0; n < HPCMEM_PLACE_NODES; n++) {
    uint64_t t = need[n] < node_free[n] ? need[n] : node_free[n];
    node_free[n] -= t;
    r->charged[n] += need[n];
  }
  for (int t = 0; t < r->ntargets; t++)   /* bytes per target: from the pieces' classes */
    for (int n = 0; n < HPCMEM_PLACE_NODES; n++)
      if ((r->targets[t].nodes >> n & 1)) {
        int first = 1;
        for (int u = 0; u < t; u++)
          if (r->targets[u].nodes >> n & 1) first = 0;
        if (first) r->bytes[t] += need[n];
      }
}

/* Water filling: share `left` among items by weight (priority+1) * need,
 * capped at their need.  Caps are found for all items at once before `left`
 * changes, and shares are rounded down to pages, so equal items get equal
 * shares whatever their position. */
static void share_rest(hpcmem_place_req_t **it, int n, const uint64_t *need, uint64_t *give,
                       uint64_t left, uint64_t page) {
  unsigned char capped[HPCMEM_PLACE_MAX_REQS];
  memset(capped, 0, (size_t)n);
  for (;;) {
    unsigned __int128 wsum = 0;
    for (int i = 0; i < n; i++)
      if (!capped[i]) wsum += (unsigned __int128)(it[i]->priority + 1) * need[i];
    if (wsum == 0) return;
    unsigned char now[HPCMEM_PLACE_MAX_REQS];
    int any = 0;
    for (int i = 0; i < n; i++) {
      now[i] = 0;
      if (capped[i]) continue;
      unsigned __int128 s = (unsigned __int128)left * ((unsigned __int128)(it[i]->priority + 1) * need[i]) / wsum;
      if (s >= need[i]) now[i] = 1, any = 1;
    }
    if (!any) {
      for (int i = 0; i < n; i++)
        if (!capped[i])
          give[i] = (uint64_t)((unsigned __int128)left * ((unsigned __int128)(it[i]->priority + 1) * need[i]) / wsum) / page * page;
      return;
    }
    for (int i = 0; i < n; i++)
      if (now[i]) { capped[i] = 1; give[i] = need[i]; left -= need[i]; }
  }
}

/* 0/1 knapsack over items (already in canonical order) with capacity cap:
 * sets pick[i].  Sizes are rounded up to units of cap/DP_UNITS (never less
 * than a page), so a pick always fits.  Items past DP_ITEMS are taken
 * greedily in order when they still fit. */
static void knapsack(hpcmem_place_req_t **it, int n, const uint64_t *need, uint64_t cap,
                     unsigned char *pick, void *scratch, uint64_t page) {
  uint64_t unit = (cap + HPCMEM_PLACE_DP_UNITS - 1) / HPCMEM_PLACE_DP_UNITS;
  unit = (unit + page - 1) / page * page;
  if (unit == 0) unit = page;
  int W = (int)(cap / unit);
  int m = n < HPCMEM_PLACE_DP_ITEMS ? n : HPCMEM_PLACE_DP_ITEMS;
  uint64_t *best = (uint64_t *)scratch;
  unsigned char *take = (unsigned char *)scratch + 8 * (HPCMEM_PLACE_DP_UNITS + 1);
  for (int w = 0; w <= W; w++) best[w] = 0;
  for (int i = 0; i < m; i++) {
    unsigned char *row = take + (size_t)i * (W + 1);
    memset(row, 0, (size_t)W + 1);
    uint64_t wi = (need[i] + unit - 1) / unit;
    if (wi > (uint64_t)W) continue;
    uint64_t vi = (uint64_t)(it[i]->priority + 1) * wi;
    for (int w = W; w >= (int)wi; w--)
      if (best[w - wi] + vi > best[w]) { best[w] = best[w - wi] + vi; row[w] = 1; }
  }
  int w = W;
  uint64_t used = 0;
  for (int i = m - 1; i >= 0; i--) {
    pick[i] = take[(size_t)i * (W + 1) + w];
    if (pick[i]) { w -= (int)((need[i] + unit - 1) / unit); used += need[i]; }
  }
  for (int i = m; i < n; i++) {
    pick[i] = used + need[i] <= cap;
    if (pick[i]) used += need[i];
  }
}

static int same_group(const hpcmem_place_req_t *first, uint64_t first_need, const hpcmem_place_req_t *x,
                      uint64_t x_need) {
  return x->priority == first->priority && x_need <= first_need + first_need / 16;
}

/* One target in one round: items want need[i] more bytes of target (cls, mask). */
static void decide_target(hpcmem_place_req_t **it, int n, int round, uint64_t *node_free,
                          void *scratch, uint64_t page) {
  uint64_t need[HPCMEM_PLACE_MAX_REQS], give[HPCMEM_PLACE_MAX_REQS];
  unsigned char pick[HPCMEM_PLACE_MAX_REQS];
  uint64_t mask = it[0]->targets[round].nodes, cap = mask_free(mask, node_free), total = 0;
  for (int i = 0; i < n; i++) {
    uint64_t placed = 0;
    for (int t = 0; t < round; t++) placed += it[i]->bytes[t];
    need[i] = it[i]->size - placed;
    total += need[i];
    give[i] = 0;
  }
  if (total <= cap) {
    for (int i = 0; i < n; i++) give[i] = need[i];
  } else {
    knapsack(it, n, need, cap, pick, scratch, page);
    for (int g = 0; g < n;) {   /* a near-equal group is picked whole or not at all */
      int e = g + 1, all = pick[g], none = !pick[g];
      while (e < n && same_group(it[g], need[g], it[e], need[e])) { all &= pick[e]; none &= !pick[e]; e++; }
      if (!all && !none)
        for (int i = g; i < e; i++) pick[i] = 0;
      g = e;
    }
    uint64_t left = cap;
    for (int i = 0; i < n; i++)
      if (pick[i]) { give[i] = need[i]; left -= need[i]; }
    hpcmem_place_req_t *rest[HPCMEM_PLACE_MAX_REQS];
    uint64_t rneed[HPCMEM_PLACE_MAX_REQS], rgive[HPCMEM_PLACE_MAX_REQS];
    int k = 0;
    for (int i = 0; i < n; i++)
      if (!pick[i]) { rest[k] = it[i]; rneed[k] = need[i]; rgive[k] = 0; k++; }
    share_rest(rest, k, rneed, rgive, left, page);
    for (int i = 0, j = 0; i < n; i++)
      if (!pick[i]) give[i] = rgive[j++];
  }
  for (int i = 0; i < n; i++) {
    it[i]->bytes[round] = give[i];
    consume(mask, give[i], node_free, it[i]->charged);
  }
}

static int target_before(const hpcmem_place_target_t *a, const hpcmem_place_target_t *b) {
  if (a->cls != b->cls) return a->cls < b->cls;
  return a->nodes < b->nodes;
}

static int decide_once(hpcmem_place_req_t **r, int n, uint64_t *node_free, void *scratch, uint64_t page) {
  for (int i = 0; i < n; i++) {
    if (r[i]->failed) continue;
    memset(r[i]->bytes, 0, sizeof r[i]->bytes);
    memset(r[i]->charged, 0, sizeof r[i]->charged);
  }
  for (int i = 0; i < n; i++)
    if (!r[i]->failed && (r[i]->split == HPCMEM_SPLIT_EQUAL || r[i]->split == HPCMEM_SPLIT_CHUNK))
      decide_fixed(r[i], node_free, page);
  hpcmem_place_req_t *it[HPCMEM_PLACE_MAX_REQS];
  for (int round = 0; round < HPCMEM_PLACE_MAX_CLASSES; round++) {
    /* targets of this round, one at a time in (class, nodes) order */
    unsigned char done[HPCMEM_PLACE_MAX_REQS];
    int cand = 0;
    for (int i = 0; i < n; i++) {
      hpcmem_place_req_t *x = r[i];
      done[i] = 1;
      if (x->failed || x->split == HPCMEM_SPLIT_EQUAL || x->split == HPCMEM_SPLIT_CHUNK ||
          round >= x->ntargets)
        continue;
      uint64_t placed = 0;
      for (int t = 0; t < round; t++) placed += x->bytes[t];
      if (placed < x->size) done[i] = 0, cand++;
    }
    while (cand > 0) {
      const hpcmem_place_target_t *tg = NULL;
      for (int i = 0; i < n; i++)
        if (!done[i] && (!tg || target_before(&r[i]->targets[round], tg))) tg = &r[i]->targets[round];
      hpcmem_place_target_t cur = *tg;
      int k = 0;
      for (int i = 0; i < n; i++)
        if (!done[i] && r[i]->targets[round].cls == cur.cls && r[i]->targets[round].nodes == cur.nodes) {
          it[k++] = r[i];
          done[i] = 1;
          cand--;
        }
      decide_target(it, k, round, node_free, scratch, page);
    }
  }
  int failed = 0;
  for (int i = 0; i < n; i++) {
    hpcmem_place_req_t *x = r[i];
    if (x->failed || x->mismatch != HPCMEM_MISMATCH_ERROR) continue;
    uint64_t placed = 0;
    for (int t = 0; t < x->ntargets; t++) placed += x->bytes[t];
    if (placed < x->size) { x->failed = 1; failed++; }
  }
  return failed;
}

int _hpcmem_place_decide(hpcmem_place_req_t **reqs, int n, uint64_t *node_free, void *scratch,
                         uint64_t page) {
  if (n > HPCMEM_PLACE_MAX_REQS) n = HPCMEM_PLACE_MAX_REQS;
  sort_reqs(reqs, n);
  uint64_t start[HPCMEM_PLACE_NODES];
  memcpy(start, node_free, sizeof start);
  for (int i = 0; i < n; i++) reqs[i]->failed = 0;
  /* every failure removes one request at least, so this ends */
  while (decide_once(reqs, n, node_free, scratch, page) > 0) memcpy(node_free, start, sizeof start);
  int failed = 0;
  for (int i = 0; i < n; i++)
    if (reqs[i]->failed) {
      memset(reqs[i]->bytes, 0, sizeof reqs[i]->bytes);
      memset(reqs[i]->charged, 0, sizeof reqs[i]->charged);
      failed++;
    }
  return failed;
}
