// The thread cache's accounting word (src/heap/tcache.h): one subtraction a hit,
// exact calls and bytes once settled, an empty budget that sends the next call
// to the slow path.
//
// Thread caches and group heaps (src/heap/tcache.c, src/heap/group.c): which
// memory a refill takes, how much room a bin gets, idle bins.  The process's
// own allocator is libhpcmem (libhpcmem-core), so the heaps are the real ones;
// each test uses size classes nothing else in the process uses.
#include <gtest/gtest.h>
#include <fcntl.h>
#include <sched.h>
#include <malloc.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iterator>
#include <thread>
#include <vector>
extern "C" {
#include "heap/tcache.h"
#include "prim/prim.h"
#include "topo/machine.h"
#include "topo/topo.h"
#include "hpcmem.h"
}

namespace {
hpcmem_heap_t *heap0() {
  free(malloc(1));                       // the allocator is up
  return &_hpcmem_heaps.heap[0];
}

// Hand n objects back to h as a list that carries the free key, as a cache's flush does.
void give_back(hpcmem_heap_t *h, std::vector<void *> objs) {
  void *list = nullptr;
  for (void *p : objs) {
    *(void **)p = list;
    ((uint64_t *)p)[1] = _hpcmem_free_key;
    list = p;
  }
  uint64_t remote = 0;
  _hpcmem_heap_flush(h, 0, list, (unsigned)objs.size(), &remote);
}

// Every object of a refill: first, the list, the fresh range.
std::vector<void *> objects_of(const hpcmem_refill_t &r, size_t size) {
  std::vector<void *> v{r.first};
  for (void *p = r.list; p; p = *(void **)p) v.push_back(p);
  for (unsigned i = 0; i < r.nfresh; i++) v.push_back(r.fresh + i * size);
  return v;
}
}  // namespace

TEST(_hpcmem_heap_refill, takes_a_free_object_before_carving_a_fresh_one) {
  hpcmem_heap_t *h = heap0();
  unsigned cls = _hpcmem_size_class(112 << 10);       // a class no one else here uses
  size_t size = _hpcmem_class_size[cls];
  hpcmem_refill_t r;
  ASSERT_EQ(_hpcmem_heap_refill(h, cls, &r, 1, nullptr, 0), 1u);
  hpcmem_span_t *x = _hpcmem_span_of(r.first);
  unsigned cap = x->capacity;
  ASSERT_GE(cap, 4u);
  std::vector<void *> xs{r.first};
  ASSERT_EQ(_hpcmem_heap_refill(h, cls, &r, cap - 1, nullptr, 0), cap - 1);   // span x carved out
  for (void *p : objects_of(r, size)) { ASSERT_EQ(_hpcmem_span_of(p), x); xs.push_back(p); }
  ASSERT_EQ(_hpcmem_heap_refill(h, cls, &r, cap, nullptr, 0), cap);               // a second span, y
  hpcmem_span_t *y = _hpcmem_span_of(r.first);
  ASSERT_NE(y, x);
  ASSERT_EQ(r.nfresh, cap - 1);
  void *y0 = r.first;
  give_back(h, {xs[0]});                              // x gets a free object
  ASSERT_EQ(_hpcmem_heap_uncarve(r.fresh, r.nfresh), 1);   // y gets its room back (a thread's exit)
  EXPECT_EQ(_hpcmem_heap_check(h), 0);
  ASSERT_EQ(_hpcmem_heap_refill(h, cls, &r, 1, nullptr, 0), 1u);
  EXPECT_EQ(r.first, xs[0]) << "a refill carved y's fresh memory while x had a free object";
  EXPECT_EQ(r.nfresh, 0u);
  EXPECT_EQ(_hpcmem_heap_check(h), 0);
  give_back(h, xs);                                   // all of x and y go back
  give_back(h, {y0});
  EXPECT_EQ(_hpcmem_heap_check(h), 0);
}

TEST(_hpcmem_heap_refill, carves_fresh_objects_once_no_span_has_a_free_one) {
  hpcmem_heap_t *h = heap0();
  unsigned cls = _hpcmem_size_class(96 << 10);
  size_t size = _hpcmem_class_size[cls];
  hpcmem_refill_t r;
  ASSERT_EQ(_hpcmem_heap_refill(h, cls, &r, 2, nullptr, 0), 2u);
  std::vector<void *> got = objects_of(r, size);
  give_back(h, {got[1]});
  ASSERT_EQ(_hpcmem_heap_refill(h, cls, &r, 3, nullptr, 0), 3u);  // the free one, then two fresh ones
  std::vector<void *> more = objects_of(r, size);
  ASSERT_EQ(more.size(), 3u);
  int recycled = 0;
  for (void *p : more) recycled += p == got[1];
  EXPECT_EQ(recycled, 1);
  EXPECT_EQ(_hpcmem_heap_check(h), 0);
  give_back(h, more);
  give_back(h, {got[0]});
  EXPECT_EQ(_hpcmem_heap_check(h), 0);
}

namespace {
// Run class `size` empty and full many times on the calling thread; the bin's room after it.
unsigned churned_room(size_t size) {
  std::vector<void *> v(600);
  for (int round = 0; round < 20; round++) {
    for (auto &p : v) p = malloc(size);
    for (auto &p : v) free(p);
  }
  return _hpcmem_tc->bin[_hpcmem_size_class(size)].max;
}
}  // namespace

TEST(_hpcmem_tcache_refill, bins_get_less_room_when_threads_outnumber_cpus) {
  cpu_set_t set;
  ASSERT_EQ(sched_getaffinity(0, sizeof set, &set), 0);
  unsigned cpus = (unsigned)CPU_COUNT(&set);
  size_t size = 1280;                                  // a class only this test uses
  unsigned alone = 0, crowded = 0;
  std::thread([&] { alone = churned_room(size); }).join();
  EXPECT_GE(alone * size, 24u << 10) << "a thread per cpu keeps large bins";
  // 16 threads per cpu, all alive while one of them churns
  std::atomic<int> ready{0}, done{0};
  std::vector<std::thread> crowd;
  for (unsigned i = 0; i < 16 * cpus; i++)
    crowd.emplace_back([&] {
      free(malloc(16));                                // the thread has a cache: it counts
      ready++;
      while (!done) std::this_thread::yield();
    });
  while (ready < (int)crowd.size()) std::this_thread::yield();
  std::thread([&] { crowded = churned_room(size); }).join();
  done = 1;
  for (auto &t : crowd) t.join();
  EXPECT_LT(crowded, alone);
  EXPECT_LE(crowded * size, 8u << 10);
  EXPECT_GE(crowded, 4u);
  // the threads are gone: room grows again
  unsigned after = 0;
  std::thread([&] { after = churned_room(size); }).join();
  EXPECT_EQ(after, alone);
  EXPECT_EQ(hpcmem_check(), 0);
}

TEST(_hpcmem_tcache_refill, a_forked_child_gets_the_room_of_its_one_thread) {
  size_t size = 1536;                                  // a class only this test uses
  unsigned alone = 0;
  std::thread([&] { alone = churned_room(size); }).join();
  cpu_set_t set;
  ASSERT_EQ(sched_getaffinity(0, sizeof set, &set), 0);
  std::atomic<int> ready{0}, done{0};
  std::vector<std::thread> crowd;
  for (int i = 0; i < 16 * CPU_COUNT(&set); i++)
    crowd.emplace_back([&] {
      free(malloc(16));
      ready++;
      while (!done) std::this_thread::yield();
    });
  while (ready < (int)crowd.size()) std::this_thread::yield();
  pid_t pid = fork();
  if (pid == 0) {                                      // the crowd did not come along
    unsigned room = 0;
    std::thread([&] { room = churned_room(size); }).join();
    _exit(room == alone && hpcmem_check() == 0 ? 0 : 1);
  }
  done = 1;
  for (auto &t : crowd) t.join();
  int status = 0;
  ASSERT_EQ(waitpid(pid, &status, 0), pid);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "the child's bins got the room of 17 threads";
}

TEST(_hpcmem_tcache_flush, an_idle_bin_goes_back_to_the_heap) {
  std::thread([] {
    size_t idle = 3584, busy = 2560;                   // classes only this test uses
    unsigned ci = _hpcmem_size_class(idle);
    std::vector<void *> v(200);
    for (auto &p : v) p = malloc(idle);
    for (auto &p : v) free(p);
    hpcmem_bin_t *b = &_hpcmem_tc->bin[ci];
    ASSERT_GT(b->count, 0u);                           // the idle class's bin holds objects
    // thousands of refills and flushes of another class, none of the idle one
    for (int round = 0; round < 2000 && b->count; round++) {
      for (auto &p : v) p = malloc(busy);
      for (auto &p : v) free(p);
    }
    EXPECT_EQ(b->count, 0u);
    EXPECT_LE(b->max * idle, 8u << 10) << "an idle bin starts small again";
    EXPECT_EQ(hpcmem_check(), 0);
  }).join();
}

// free's hit puts its object aside (pend) while the bin has a list, and
// pushes the one put aside before onto that one's bin (src/heap/tcache.h)
TEST(_hpcmem_tcache_pend_flush, the_object_put_aside_joins_its_list) {
  std::thread([] {
    size_t size = 2304;                               // a class only this test uses
    unsigned c = _hpcmem_size_class(size);
    void *a = malloc(size), *b = malloc(size), *p = malloc(size);
    hpcmem_tcache_t *t = _hpcmem_tc;                  // the thread's cache, now that it has one
    free(a);
    free(b);                                          // the bin has a list now
    _hpcmem_tcache_pend_flush(t);                     // (b, or another object, may be aside)
    unsigned listed = t->bin[c].count;
    free(p);                                          // put aside
    // no test macro until the second snapshot: they allocate
    hpcmem_stats_t aside, back;
    int rc = hpcmem_stats(&aside);
    void *pend = t->pend, *pend_bin = t->pend_bin;
    unsigned count_aside = t->bin[c].count;
    int contains = _hpcmem_tcache_contains(t, c, p);
    _hpcmem_tcache_pend_flush(t);
    void *pend_after = t->pend, *head = t->bin[c].head;
    unsigned count_after = t->bin[c].count;
    uint64_t key = ((uint64_t *)p)[1];
    void *again = malloc(size);
    rc |= hpcmem_stats(&back);
    ASSERT_EQ(rc, 0);
    ASSERT_GE(listed, 1u) << "a list, so that free puts p aside";
    EXPECT_EQ(pend, p);
    EXPECT_EQ(pend_bin, &t->bin[c]);
    EXPECT_EQ(count_aside, listed) << "not in the list while aside";
    EXPECT_EQ(contains, 1) << "a second free of it is a double free";
    EXPECT_EQ(pend_after, nullptr);
    EXPECT_EQ(count_after, listed + 1);
    EXPECT_EQ(head, p);
    EXPECT_EQ(key, _hpcmem_free_key) << "on a list: it carries the free key";
    EXPECT_EQ(again, p);
    EXPECT_EQ(aside.retained_bytes - back.retained_bytes, _hpcmem_class_size[c]) << "aside, the cache held it";
    EXPECT_EQ(back.free_count, aside.free_count) << "counted when it was put aside, not again";
    EXPECT_EQ(hpcmem_check(), 0);
  }).join();
}

// with the fast path off (tracing, routed plain malloc) every free is a slow
// one: the first pushes the object put aside, which would wait there for good
TEST(_hpcmem_tcache_pend_flush, a_slow_free_pushes_the_object_put_aside) {
  pid_t pid = fork();                                  // the fast path stays off in the child
  if (pid == 0) {
    size_t size = 2816;                                // a class only this test uses
    unsigned c = _hpcmem_size_class(size);
    void *a = malloc(size), *b = malloc(size), *p = malloc(size), *x = malloc(64);
    hpcmem_tcache_t *t = _hpcmem_tc;
    free(a);
    free(b);
    _hpcmem_tcache_pend_flush(t);
    free(p);                                           // put aside
    int aside = t->pend == p;
    _hpcmem_tcache_fast_path_off(1);
    free(x);                                           // the slow path
    int pushed = t->pend == nullptr && t->bin[c].head == p;
    _exit(!aside ? 1 : !pushed ? 2 : hpcmem_check() != 0 ? 3 : 0);
  }
  int status = 0;
  ASSERT_EQ(waitpid(pid, &status, 0), pid);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "exit " << WEXITSTATUS(status)
      << " (1: p not put aside, 2: not pushed by the slow free, 3: heap check)";
}

TEST(hpcmem_stats, retained_bytes_count_what_thread_caches_hold) {
  std::thread([] {
    size_t size = 1792;                               // a class only this test uses
    void *p1 = malloc(size), *p2 = malloc(size);
    hpcmem_stats_t before, after;
    ASSERT_EQ(hpcmem_stats(&before), 0);
    free(p1);                                         // into this thread's bin (slot, then list)
    free(p2);
    ASSERT_EQ(hpcmem_stats(&after), 0);
    EXPECT_EQ(_hpcmem_tc->bin[_hpcmem_size_class(size)].count, 2u);
    EXPECT_EQ(after.retained_bytes - before.retained_bytes, 2 * size);
  }).join();
}

TEST(_hpcmem_heap_flush, a_small_heap_keeps_few_empty_spans_committed) {
  const size_t size = 20 << 10, n = 400;             // 8 MiB of a class only this test uses
  std::vector<char *> v(n);
  std::thread([&] {
    for (auto &p : v) { p = (char *)malloc(size); p[0] = 1; }   // one touched page each
    for (auto &p : v) free(p);
  }).join();                                          // the thread's exit gives its bins back
  long page = sysconf(_SC_PAGESIZE);
  size_t resident = 0;
  for (char *p : v) {
    unsigned char in = 0;
    char *pg = (char *)((uintptr_t)p & ~(uintptr_t)(page - 1));
    ASSERT_EQ(mincore(pg, (size_t)page, &in), 0);
    resident += (in & 1) ? size : 0;
  }
  // empty spans stay committed up to a quarter of the heap's spans in use (at least 512 KiB)
  uint64_t in_use = 0;
  for (unsigned i = 0; i < _hpcmem_heaps.count; i++)
    in_use += _hpcmem_heaps.heap[i].mapped_bytes - _hpcmem_heaps.heap[i].empty_bytes;
  EXPECT_LE(resident, std::max<uint64_t>(512 << 10, in_use / 4) + (128 << 10)) << "KiB of 8 MiB emptied: " << (resident >> 10);
  EXPECT_EQ(hpcmem_check(), 0);
}

namespace {
struct Cache {
  hpcmem_tcache_t t;
  Cache() { memset(&t, 0, sizeof t); }
};
uint64_t step(uint32_t size) { return (uint64_t)size << 32 | 1; }
}  // namespace

TEST(_hpcmem_acct_take, takes_until_the_budget_is_spent) {
  Cache c;
  _hpcmem_tcache_set_budgets(&c.t, 0);
  EXPECT_EQ(c.t.credit_alloc, (uint32_t)HPCMEM_PUBLISH_BYTES);
  unsigned hits = 0;
  while (!_hpcmem_acct_take(&c.t.acct_alloc, step(48))) hits++;
  EXPECT_EQ(hits, (unsigned)(HPCMEM_PUBLISH_BYTES / 48));
  uint64_t before = c.t.acct_alloc;
  EXPECT_EQ(_hpcmem_acct_take(&c.t.acct_alloc, step(48)), 1);   // refused: nothing taken
  EXPECT_EQ(c.t.acct_alloc, before);
  EXPECT_EQ(_hpcmem_tcache_n_alloc(&c.t), hits);
  EXPECT_EQ(_hpcmem_tcache_b_alloc(&c.t), (uint64_t)hits * 48);
}

TEST(_hpcmem_tcache_settle, moves_the_hits_into_the_counters) {
  Cache c;
  _hpcmem_tcache_set_budgets(&c.t, 1000);   // live bytes 1000 past what was published
  EXPECT_EQ(c.t.credit_alloc, (uint32_t)(HPCMEM_PUBLISH_BYTES - 1000));
  EXPECT_EQ(c.t.credit_free, (uint32_t)(HPCMEM_PUBLISH_BYTES + 1000));
  for (int i = 0; i < 100; i++) ASSERT_EQ(_hpcmem_acct_take(&c.t.acct_alloc, step(16)), 0);
  for (int i = 0; i < 30; i++) ASSERT_EQ(_hpcmem_acct_take(&c.t.acct_free, step(256)), 0);
  _hpcmem_tcache_settle(&c.t);
  EXPECT_EQ(c.t.n_alloc, 100u);
  EXPECT_EQ(c.t.b_alloc, 1600u);
  EXPECT_EQ(c.t.n_free, 30u);
  EXPECT_EQ(c.t.b_freed, 30u * 256);
  _hpcmem_tcache_settle(&c.t);               // nothing new: nothing counted twice
  EXPECT_EQ(_hpcmem_tcache_n_alloc(&c.t), 100u);
  EXPECT_EQ(_hpcmem_tcache_b_freed(&c.t), 30u * 256);
  // the budgets left stay
  EXPECT_EQ(c.t.credit_alloc, (uint32_t)(HPCMEM_PUBLISH_BYTES - 1000 - 1600));
}

TEST(_hpcmem_tcache_set_budgets, an_empty_budget_when_the_timing_sample_is_due) {
  Cache c;
  _hpcmem_tcache_set_budgets(&c.t, 0);
  EXPECT_FALSE(c.t.time_alloc);
  c.t.n_alloc = HPCMEM_SAMPLE_PERIOD;        // a period of calls since the last timed one
  _hpcmem_tcache_set_budgets(&c.t, 0);
  EXPECT_TRUE(c.t.time_alloc);
  EXPECT_EQ(c.t.credit_alloc, 0u);
  EXPECT_EQ(_hpcmem_acct_take(&c.t.acct_alloc, step(16)), 1);   // the next call goes to the slow path
  EXPECT_FALSE(c.t.time_free);
  EXPECT_EQ(_hpcmem_acct_take(&c.t.acct_free, step(16)), 0);    // the other direction goes on
}

// A span that empties stays with its class (kept, or its class's last one):
// taking it over for another class cost resident memory (group.c); only a
// lone object's span is taken over (below).
TEST(_hpcmem_heap_refill, an_emptied_span_stays_with_its_class) {
  hpcmem_heap_t *h = heap0();
  unsigned a = _hpcmem_size_class(40 << 10), b = _hpcmem_size_class(48 << 10);   // classes only this test uses
  ASSERT_EQ(_hpcmem_class_geom[a].span_mask, _hpcmem_class_geom[b].span_mask);   // spans of one size
  hpcmem_refill_t r;
  ASSERT_EQ(_hpcmem_heap_refill(h, a, &r, 2, nullptr, 0), 2u);
  std::vector<void *> xs = objects_of(r, _hpcmem_class_size[a]);
  hpcmem_span_t *s = _hpcmem_span_of(xs[0]);
  give_back(h, xs);                                   // the span is empty: its class's last one
  ASSERT_EQ(_hpcmem_heap_refill(h, b, &r, 1, nullptr, 0), 1u);
  EXPECT_NE(_hpcmem_span_of(r.first), s);
  EXPECT_EQ(s->cls, a);
  give_back(h, {r.first});
  ASSERT_EQ(_hpcmem_heap_refill(h, a, &r, 1, nullptr, 0), 1u);
  EXPECT_EQ(_hpcmem_span_of(r.first), s) << "class a did not get its emptied span back";
  give_back(h, {r.first});
  EXPECT_EQ(_hpcmem_heap_check(h), 0);
}

// A lone object offered to a refill that needs a new span goes back only
// when nothing else of its span is out; its span then becomes the new
// class's, starting where the lone object's class started.
TEST(_hpcmem_heap_refill, takes_the_span_of_a_lone_object_that_empties_it) {
  hpcmem_heap_t *h = heap0();
  unsigned a = _hpcmem_size_class(12 << 10), b = _hpcmem_size_class(14 << 10), c = _hpcmem_size_class(10 << 10);
  ASSERT_EQ(_hpcmem_class_geom[a].span_mask, _hpcmem_class_geom[b].span_mask);   // 128 KiB spans, classes
  ASSERT_EQ(_hpcmem_class_geom[a].span_mask, _hpcmem_class_geom[c].span_mask);   // only this test uses
  hpcmem_refill_t r;
  ASSERT_EQ(_hpcmem_heap_refill(h, a, &r, 2, nullptr, 0), 2u);
  std::vector<void *> xs = objects_of(r, _hpcmem_class_size[a]);
  hpcmem_span_t *s = _hpcmem_span_of(xs[0]);
  memset(xs[1], 1, _hpcmem_class_size[a]);
  hpcmem_lone_t lone = {};
  lone.obj[0] = xs[1];
  lone.cls[0] = a;
  lone.n = 1;
  lone.taken = -1;
  ASSERT_EQ(_hpcmem_heap_refill(h, b, &r, 1, &lone, 0), 1u);
  EXPECT_EQ(lone.taken, -1) << "xs[0] is out too: the span does not empty";
  EXPECT_NE(_hpcmem_span_of(r.first), s);
  void *other = r.first;
  give_back(h, {xs[0]});                              // now xs[1] is all that is out of s
  EXPECT_EQ(s->used, 1u);
  ASSERT_EQ(_hpcmem_heap_refill(h, c, &r, 1, &lone, 0), 1u);
  EXPECT_EQ(lone.taken, 0);
  EXPECT_EQ(_hpcmem_span_of(r.first), s);
  EXPECT_EQ((char *)r.first, s->start) << "the new class starts where the old one did";
  EXPECT_EQ(s->cls, c);
  EXPECT_NE(((uint64_t *)r.first)[1], _hpcmem_free_key);
  EXPECT_EQ(_hpcmem_heap_check(h), 0);
  give_back(h, {r.first});
  give_back(h, {other});
  EXPECT_EQ(_hpcmem_heap_check(h), 0);
}

// The pages the old class touched in a span taken over count against the
// heap's empty-span budget until the new class has carved past them.
TEST(_hpcmem_heap_refill, a_taken_over_span_counts_the_old_class_pages_until_carved) {
  hpcmem_heap_t *h = heap0();
  unsigned a = _hpcmem_size_class(3 << 10), b = _hpcmem_size_class(7 << 10);     // classes only this test uses
  ASSERT_EQ(_hpcmem_class_geom[a].span_mask, _hpcmem_class_geom[b].span_mask);
  hpcmem_refill_t r;
  ASSERT_EQ(_hpcmem_heap_refill(h, a, &r, 10, nullptr, 0), 10u);
  std::vector<void *> xs = objects_of(r, _hpcmem_class_size[a]);
  for (void *x : xs) memset(x, 1, _hpcmem_class_size[a]);
  void *lone_obj = xs[3];                             // not the last carving: it goes onto the free list
  xs.erase(xs.begin() + 3);
  give_back(h, xs);
  hpcmem_span_t *s = _hpcmem_span_of(lone_obj);
  ASSERT_EQ(s->used, 1u);
  uint64_t before = h->dirty_bytes;
  hpcmem_lone_t lone = {};
  lone.obj[0] = lone_obj;
  lone.cls[0] = a;
  lone.n = 1;
  lone.taken = -1;
  ASSERT_EQ(_hpcmem_heap_refill(h, b, &r, 1, &lone, 0), 1u);
  ASSERT_EQ(lone.taken, 0);
  ASSERT_EQ(_hpcmem_span_of(r.first), s);
  std::vector<void *> ys{r.first};
  EXPECT_EQ(s->dirty, 32768u) << "ten objects of 3 KiB: eight pages touched";
  EXPECT_EQ(h->dirty_bytes - before, 32768u - 8192u) << "less the new class's first object's pages";
  EXPECT_EQ(_hpcmem_heap_check(h), 0);
  ASSERT_EQ(_hpcmem_heap_refill(h, b, &r, 4, nullptr, 0), 4u);   // five objects of 7 KiB: carved past it
  for (void *y : objects_of(r, _hpcmem_class_size[b])) ys.push_back(y);
  EXPECT_EQ(s->dirty, 0u);
  EXPECT_EQ(h->dirty_bytes, before);
  EXPECT_EQ(_hpcmem_heap_check(h), 0);
  for (void *y : ys) { *(void **)y = nullptr; ((uint64_t *)y)[1] = 0; }
  give_back(h, ys);
  EXPECT_EQ(_hpcmem_heap_check(h), 0);
}

// A thread that moves on to a new size lends its lone object of the last
// size, and the new class starts on that object's page; two classes that
// take turns do not pass a span back and forth at every turn.
TEST(_hpcmem_tcache_refill, a_lone_object_makes_room_for_a_new_class) {
  std::thread([] {
    size_t sa = 5 << 10, sb = 6 << 10;                // classes only this test uses, 64 KiB spans
    char *p = (char *)malloc(sa);
    memset(p, 1, sa);
    free(p);                                          // the bin's slot holds it
    hpcmem_heap_t *h = _hpcmem_tc->heap;
    bool kept = h->empty_bytes != 0;                  // else a kept empty span serves the new class
    char *q = (char *)malloc(sb);
    unsigned char in = 0;
    ASSERT_EQ(mincore((void *)((uintptr_t)q & ~(uintptr_t)4095), 4096, &in), 0);
    EXPECT_TRUE(in & 1) << "the new class's first object is on untouched memory";
    if (!kept) {
      EXPECT_EQ(q, p) << "the new class did not take the span of the lone object";
      EXPECT_TRUE((_hpcmem_tc->lent >> _hpcmem_size_class(sa)) & 1);
    }
    memset(q, 2, sb);
    free(q);
    char *first_a = nullptr, *first_b = nullptr;
    int moves = 0;
    for (int i = 0; i < 100; i++) {                   // taking turns, one object each
      char *x = (char *)malloc(sa), *y;
      x[0] = 3;
      free(x);
      y = (char *)malloc(sb);
      y[0] = 4;
      free(y);
      if (i && (x != first_a || y != first_b)) moves++;
      first_a = x;
      first_b = y;
    }
    EXPECT_LE(moves, 2) << "a span went back and forth between two classes";
    EXPECT_EQ(hpcmem_check(), 0);
  }).join();
}

namespace {
// Pages of [p, p + n) that are resident.
unsigned resident_pages(const void *p, size_t n) {
  uintptr_t a = (uintptr_t)p & ~(uintptr_t)4095, e = ((uintptr_t)p + n + 4095) & ~(uintptr_t)4095;
  std::vector<unsigned char> in((e - a) / 4096);
  if (mincore((void *)a, e - a, in.data()) != 0) return ~0u;
  unsigned r = 0;
  for (unsigned char c : in) r += c & 1;
  return r;
}
unsigned hole_at(const hpcmem_span_t *s) { return _hpcmem_hole_at(s->hole); }
unsigned hole_n(const hpcmem_span_t *s) { return _hpcmem_hole_n(s->hole); }
}  // namespace

// A thread's exit gives back the fresh objects it never handed out.  When
// another thread carved from the span after them they cannot be uncarved:
// they become the span's hole, unwritten, and the class's refills hand them
// out as fresh objects (written onto a list, their pages were touched by
// nobody's use, and every new set of threads carved past them).
TEST(_hpcmem_heap_uncarve, a_range_carved_before_another_becomes_the_span_s_hole) {
  hpcmem_heap_t *h = heap0();
  unsigned cls = _hpcmem_size_class(24 << 10);        // a class only this test uses
  size_t size = _hpcmem_class_size[cls];
  hpcmem_refill_t r;
  ASSERT_EQ(_hpcmem_heap_refill(h, cls, &r, 1, nullptr, 0), 1u);
  void *x0 = r.first;
  hpcmem_span_t *s = _hpcmem_span_of(x0);
  ASSERT_GE(s->capacity, 8u);
  ASSERT_EQ(_hpcmem_heap_refill(h, cls, &r, 4, nullptr, 0), 4u);   // thread A: one object and a range of 3
  void *a0 = r.first;
  char *a_range = r.fresh;
  ASSERT_EQ(r.nfresh, 3u);
  ASSERT_EQ(_hpcmem_heap_refill(h, cls, &r, 2, nullptr, 0), 2u);   // thread B, carved after A
  void *b0 = r.first;
  char *b_range = r.fresh;
  ASSERT_EQ(s->bump, 7u);
  ASSERT_EQ(resident_pages(a_range, 3 * size), 0u);
  EXPECT_EQ(_hpcmem_heap_uncarve(a_range, 3), 1) << "A's exit: its range becomes the hole";
  EXPECT_EQ(s->bump, 7u);
  EXPECT_EQ(hole_n(s), 3u);
  EXPECT_EQ(s->start + (size_t)hole_at(s) * size, a_range);
  EXPECT_EQ(resident_pages(a_range, 3 * size), 0u) << "the hole was written";
  EXPECT_FALSE(_hpcmem_span_is_object(s, a_range)) << "a hole's object was never handed out";
  EXPECT_TRUE(_hpcmem_span_is_object(s, b0));
  EXPECT_EQ(_hpcmem_heap_check(h), 0);
  ASSERT_EQ(_hpcmem_heap_refill(h, cls, &r, 2, nullptr, 0), 2u);   // the hole first, not new memory
  EXPECT_EQ(r.first, (void *)a_range);
  EXPECT_EQ(r.fresh, a_range + size);
  EXPECT_EQ(r.nfresh, 1u);
  EXPECT_EQ(s->bump, 7u);
  EXPECT_EQ(hole_n(s), 1u);
  EXPECT_EQ(resident_pages(a_range, 3 * size), 0u);
  EXPECT_EQ(_hpcmem_heap_check(h), 0);
  void *c0 = r.first;
  ASSERT_EQ(_hpcmem_heap_uncarve(r.fresh, 1), 1) << "right below the hole: the hole grows";
  EXPECT_EQ(hole_n(s), 2u);
  EXPECT_EQ(s->start + (size_t)hole_at(s) * size, a_range + size);
  ASSERT_EQ(_hpcmem_heap_uncarve(b_range, 1), 1) << "B's range was the last carving";
  EXPECT_EQ(s->bump, 6u);
  EXPECT_EQ(_hpcmem_heap_check(h), 0);
  give_back(h, {x0, a0, b0, c0});
  EXPECT_EQ(_hpcmem_heap_check(h), 0);
}

// A span has one hole: a range that is neither the last carving nor right
// below the hole is left to the caller, which writes it onto a list.
TEST(_hpcmem_heap_uncarve, a_second_hole_is_left_to_the_caller) {
  hpcmem_heap_t *h = heap0();
  unsigned cls = _hpcmem_size_class(28 << 10);        // a class only this test uses
  size_t size = _hpcmem_class_size[cls];
  hpcmem_refill_t r;
  std::vector<void *> out;
  char *range[3];
  for (int i = 0; i < 3; i++) {                       // threads A, B, C: one object out and one fresh each
    ASSERT_EQ(_hpcmem_heap_refill(h, cls, &r, 2, nullptr, 0), 2u);
    out.push_back(r.first);
    range[i] = r.fresh;
  }
  hpcmem_span_t *s = _hpcmem_span_of(out[0]);
  ASSERT_EQ(s->bump, 6u);
  ASSERT_EQ(_hpcmem_heap_uncarve(range[0], 1), 1);    // A: the hole
  EXPECT_EQ(_hpcmem_heap_uncarve(range[1], 1), 0) << "B's object would be a second hole";
  EXPECT_EQ(hole_n(s), 1u);
  EXPECT_EQ(s->used, 5u);
  EXPECT_EQ(_hpcmem_heap_check(h), 0);
  ASSERT_EQ(_hpcmem_heap_uncarve(range[2], 1), 1);    // C's: the last carving
  EXPECT_EQ(s->bump, 5u);
  for (void *p : out) memset(p, 0, size);
  out.push_back(range[1]);                            // B's goes back as its cache would: onto a list
  give_back(h, out);
  EXPECT_EQ(_hpcmem_heap_check(h), 0);
}

// The span that gets a hole goes to the front of its class's fresh list: the
// next refill takes the hole before another span's uncarved room.
TEST(_hpcmem_heap_uncarve, the_class_s_next_refill_takes_the_hole) {
  hpcmem_heap_t *h = heap0();
  unsigned cls = _hpcmem_size_class(80 << 10);        // a class only this test uses
  size_t size = _hpcmem_class_size[cls];
  hpcmem_refill_t r;
  ASSERT_EQ(_hpcmem_heap_refill(h, cls, &r, 3, nullptr, 0), 3u);   // span A: a0, then a1 .. a2 fresh
  void *a0 = r.first;
  char *a_range = r.fresh;
  hpcmem_span_t *a = _hpcmem_span_of(a0);
  unsigned rest = a->capacity - a->bump;
  ASSERT_GE(rest, 3u);
  ASSERT_EQ(_hpcmem_heap_refill(h, cls, &r, rest, nullptr, 0), rest);   // a3, and the rest of A fresh
  void *a3 = r.first;
  char *a_last = r.fresh;
  unsigned a_last_n = r.nfresh;
  ASSERT_EQ(a->bump, a->capacity);
  ASSERT_EQ(_hpcmem_heap_refill(h, cls, &r, 2, nullptr, 0), 2u);   // span B: b0, b1 (b1 keeps B in use)
  void *b0 = r.first, *b1 = r.fresh;
  hpcmem_span_t *b = _hpcmem_span_of(b0);
  ASSERT_NE(b, a);
  ASSERT_EQ(_hpcmem_heap_uncarve(a_last, a_last_n), 1);          // A has room again: A, B
  give_back(h, {b0});
  ASSERT_EQ(_hpcmem_heap_refill(h, cls, &r, 1, nullptr, 0), 1u);   // B's free object: B goes first, A behind
  ASSERT_EQ(r.first, b0);
  ASSERT_EQ(h->fresh[cls], b);
  ASSERT_EQ(_hpcmem_heap_uncarve(a_range, 2), 1);                // a1 .. a2: A's hole
  EXPECT_EQ(h->fresh[cls], a);
  uint32_t b_bump = b->bump;
  ASSERT_EQ(_hpcmem_heap_refill(h, cls, &r, 2, nullptr, 0), 2u);
  EXPECT_EQ(r.first, (void *)a_range) << "carved B's room while A had a hole";
  EXPECT_EQ(b->bump, b_bump);
  EXPECT_EQ(_hpcmem_heap_check(h), 0);
  std::vector<void *> out{a0, a3, b0, b1, r.first, r.fresh};
  for (void *p : out) memset(p, 0, size);
  give_back(h, out);
  EXPECT_EQ(_hpcmem_heap_check(h), 0);
}

// The hole is one word: free's and malloc_usable_size's checks read it
// without the lock while refills and exits change it, and a hole read half
// old, half new took live objects for never-handed-out ones (realloc then
// freed its block and returned NULL).
TEST(_hpcmem_span_is_object, a_live_object_is_one_while_the_hole_changes) {
  hpcmem_heap_t *h = heap0();
  unsigned cls = _hpcmem_size_class(32 << 10);        // a class only this test uses
  hpcmem_refill_t r;
  ASSERT_EQ(_hpcmem_heap_refill(h, cls, &r, 1, nullptr, 0), 1u);
  void *x0 = r.first;
  ASSERT_EQ(_hpcmem_heap_refill(h, cls, &r, 5, nullptr, 0), 5u);   // x1, and x2 .. x5 fresh
  void *x1 = r.first;
  char *range = r.fresh;
  ASSERT_EQ(_hpcmem_heap_refill(h, cls, &r, 1, nullptr, 0), 1u);   // x6, carved after the range
  void *x6 = r.first;
  hpcmem_span_t *s = _hpcmem_span_of(x0);
  std::atomic<bool> done{false};
  std::atomic<long> wrong{0};
  std::thread reader([&] {
    long n = 0;
    while (!done.load(std::memory_order_relaxed)) {
      n += !_hpcmem_span_is_object(s, x0) + !_hpcmem_span_is_object(s, x1) + !_hpcmem_span_is_object(s, x6);
    }
    wrong = n;
  });
  for (int i = 0; i < 200000; i++) {                  // the hole comes and goes: [2, 6), then none
    ASSERT_EQ(_hpcmem_heap_uncarve(range, 4), 1);
    ASSERT_EQ(_hpcmem_heap_refill(h, cls, &r, 4, nullptr, 0), 4u);
    ASSERT_EQ(r.first, (void *)range);
  }
  done = true;
  reader.join();
  EXPECT_EQ(wrong.load(), 0) << "a live object was read as part of the hole";
  ASSERT_EQ(_hpcmem_heap_uncarve(range, 4), 1);
  EXPECT_EQ(_hpcmem_heap_check(h), 0);
  ASSERT_EQ(_hpcmem_heap_refill(h, cls, &r, 4, nullptr, 0), 4u);
  std::vector<void *> all{x0, x1, x6};
  for (int i = 0; i < 4; i++) all.push_back(range + i * _hpcmem_class_size[cls]);
  give_back(h, all);
  EXPECT_EQ(_hpcmem_heap_check(h), 0);
}

// A refill takes at most what it asks for: a span's whole free list only
// when it fits.  Taking a whole list up to a full bin left a thread's
// neighbours nothing, and they carved new memory while its bin held the
// class's touched objects (the resident set grew with each new set of
// threads).
TEST(_hpcmem_heap_refill, takes_no_more_than_it_asks_for) {
  hpcmem_heap_t *h = heap0();
  unsigned cls = _hpcmem_size_class(56 << 10);        // a class only this test uses
  size_t size = _hpcmem_class_size[cls];
  hpcmem_refill_t r;
  ASSERT_EQ(_hpcmem_heap_refill(h, cls, &r, 6, nullptr, 0), 6u);
  std::vector<void *> xs = objects_of(r, size);
  hpcmem_span_t *s = _hpcmem_span_of(xs[0]);
  give_back(h, xs);                                   // a free list of six
  ASSERT_EQ(_hpcmem_heap_refill(h, cls, &r, 4, nullptr, 0), 4u);
  std::vector<void *> got = objects_of(r, size);
  EXPECT_EQ(got.size(), 4u);
  EXPECT_EQ(r.nfresh, 0u) << "carved while the span had free objects";
  EXPECT_EQ(s->used, 4u);
  EXPECT_EQ(_hpcmem_heap_check(h), 0);
  give_back(h, got);
  EXPECT_EQ(_hpcmem_heap_check(h), 0);
}

// A thread's refill (half its bin's room) leaves the rest of a long free
// list in the heap.
TEST(_hpcmem_tcache_refill, leaves_the_rest_of_a_long_list_to_other_threads) {
  std::thread([] {
    free(malloc(16));                                 // the thread has a cache
    hpcmem_tcache_t *t = _hpcmem_tc;
    hpcmem_heap_t *h = t->heap;
    size_t size = 960;                                // a class only this test uses
    unsigned cls = _hpcmem_size_class(size);
    hpcmem_refill_t r;
    ASSERT_EQ(_hpcmem_heap_refill(h, cls, &r, 60, nullptr, 0), 60u);
    std::vector<void *> xs = objects_of(r, size);
    hpcmem_span_t *s = _hpcmem_span_of(xs[0]);
    give_back(h, xs);                                 // a free list of 60
    _hpcmem_tcache_bin_start(t, cls);                 // not the first use: a batch
    hpcmem_bin_t *b = &t->bin[cls];
    b->max = 64;
    void *p = _hpcmem_tcache_refill(t, cls, nullptr);
    ASSERT_NE(p, nullptr);
    unsigned took = 1 + b->count + b->nfresh;
    EXPECT_LE(took, 32u) << "room for " << b->max << ", half of it asked for";
    EXPECT_EQ(s->used, took);
    EXPECT_NE(s->free, nullptr) << "the rest stays for other threads";
    free(p);
    EXPECT_EQ(hpcmem_check(), 0);
  }).join();
}

// At a thread's exit, a fresh range another thread carved past stays
// unwritten: the span's hole, which the next refill of the class hands out.
TEST(_hpcmem_tcache_flush_all, a_range_another_thread_carved_past_is_not_written) {
  size_t size = 64 << 10;                            // a class only this test uses
  unsigned cls = _hpcmem_size_class(size);
  size_t lsize = _hpcmem_class_size[cls];
  std::atomic<int> step{0};
  char *a_fresh = nullptr;
  unsigned a_n = 0;
  hpcmem_span_t *s = nullptr;
  std::thread a([&] {
    free(malloc(16));
    hpcmem_tcache_t *t = _hpcmem_tc;
    _hpcmem_tcache_bin_start(t, cls);
    t->bin[cls].max = 8;                              // a batch: one out, the rest fresh
    void *p = _hpcmem_tcache_refill(t, cls, nullptr);
    s = _hpcmem_span_of(p);
    a_fresh = t->fresh[cls];
    a_n = t->bin[cls].nfresh;
    free(p);
    step = 1;
    while (step < 2) std::this_thread::yield();
  });
  while (step < 1) std::this_thread::yield();
  void *q = malloc(size);                             // this thread carves after a's range
  step = 2;
  a.join();                                           // a's exit gives its objects back
  if (_hpcmem_span_of(q) != s) {
    free(q);
    GTEST_SKIP() << "the two threads allocate from different group heaps";
  }
  ASSERT_GE(a_n, 1u);
  ASSERT_GT((char *)q, a_fresh);
  EXPECT_EQ(hole_n(s), a_n);
  EXPECT_EQ(s->start + (size_t)hole_at(s) * lsize, a_fresh);
  EXPECT_EQ(resident_pages(a_fresh, a_n * lsize), 0u) << "the exit wrote a range nobody used";
  EXPECT_EQ(hpcmem_check(), 0);
  std::thread([&] {                                   // a new thread: a's object, then the hole's
    void *p1 = malloc(size), *p2 = malloc(size);
    EXPECT_EQ(p2, (void *)a_fresh) << "carved new memory while the span had a hole";
    free(p1);
    free(p2);
  }).join();
  EXPECT_EQ(hpcmem_check(), 0);
  free(q);
}

// A cache made after its thread's exit hook ran (a thread-specific destructor
// allocated in glibc's last round) is noted with its thread's id; retiring it
// (a destructor round came after all) takes the note away.
TEST(_hpcmem_tcache_mark_late, notes_the_thread_until_the_cache_is_retired) {
  std::atomic<int> marked{0}, go{0};
  hpcmem_tcache_t *t = nullptr;
  int tid = 0;
  std::thread a([&] {
    free(malloc(16));
    t = _hpcmem_tc;
    _hpcmem_tcache_mark_late(t);
    marked = t->late_tid == _hpcmem_prim_gettid() ? 1 : -1;
    while (!go) std::this_thread::yield();
  });
  while (!marked) std::this_thread::yield();
  EXPECT_EQ(marked.load(), 1);
  EXPECT_EQ(_hpcmem_tcache_dead_late(&tid), nullptr) << "its thread is alive";
  go = 1;
  a.join();                                            // its exit hook retires the cache
  EXPECT_EQ(t->late_tid, 0);
  EXPECT_EQ(t->live, 0);
  EXPECT_EQ(_hpcmem_tcache_dead_late(&tid), nullptr);
}

// Once the noted thread is gone, the cache is handed out (once) for the
// caller to give back.
TEST(_hpcmem_tcache_dead_late, finds_a_late_cache_whose_thread_is_gone) {
  int gone = 0;
  std::thread([&] { gone = _hpcmem_prim_gettid(); }).join();
  for (int i = 0; i < 1000 && _hpcmem_prim_thread_alive(gone); i++)
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  ASSERT_EQ(_hpcmem_prim_thread_alive(gone), 0);
  std::thread([&] {
    free(malloc(16));
    hpcmem_tcache_t *t = _hpcmem_tc;
    _hpcmem_tcache_mark_late(t);
    int tid = 0;
    EXPECT_EQ(_hpcmem_tcache_dead_late(&tid), nullptr) << "this thread is alive";
    t->late_tid = gone;                                // as if it were the gone thread's cache
    EXPECT_EQ(_hpcmem_tcache_dead_late(&tid), t);
    EXPECT_EQ(tid, gone);
    EXPECT_EQ(t->late_tid, 0);
    EXPECT_EQ(t->live, 1) << "the caller gives it back";
    EXPECT_EQ(_hpcmem_tcache_dead_late(&tid), nullptr) << "handed out once";
  }).join();
}

// A forked child drops the other threads' caches without reading them: a
// thread inside a fast path when the process forked leaves the child a half
// updated copy (here: a fresh range one object too long, as between malloc's
// two stores, or one over a live object), which the child's next threads
// would flush into the heaps.
TEST(_hpcmem_tcache_fork_child, other_threads_caches_are_dropped_unread) {
  size_t size = 16 << 10;                              // a class only this test uses
  unsigned cls = _hpcmem_size_class(size);
  std::atomic<int> ready{0}, go{0};
  hpcmem_tcache_t *ta = nullptr;
  void *held = nullptr;
  std::thread a([&] {
    void *p[3];
    for (auto &q : p) q = malloc(size);
    held = p[0];                                       // live while the process forks
    free(p[1]);
    free(p[2]);
    ta = _hpcmem_tc;
    ready = 1;
    while (!go) std::this_thread::yield();
    free(held);
  });
  while (!ready) std::this_thread::yield();
  hpcmem_bin_t *b = &ta->bin[cls];
  char *fresh = ta->fresh[cls];
  uint32_t nfresh = b->nfresh;
  if (nfresh) {
    b->nfresh = nfresh + 1;                            // torn: the range's end one object too far
  } else {
    ta->fresh[cls] = (char *)held;                     // torn: a range over a live object
    b->nfresh = 1;
  }
  pid_t pid = fork();
  if (pid == 0) {
    int dropped = b->nfresh == 0 && b->count == 0 && ta->pend == nullptr;
    std::vector<std::thread> ts;                       // new threads take every free cache, a's included
    for (int i = 0; i < 32; i++)
      ts.emplace_back([size] {
        for (int k = 0; k < 100; k++) free(malloc(size));
      });
    for (auto &t : ts) t.join();
    _exit(hpcmem_check() != 0 ? 1 : !dropped ? 2 : 0);
  }
  ta->fresh[cls] = fresh;
  b->nfresh = nfresh;
  int status = 0;
  if (pid > 0) waitpid(pid, &status, 0);
  go = 1;
  a.join();
  ASSERT_GT(pid, 0) << "fork failed";
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0)
      << "the child " << (WIFEXITED(status) ? WEXITSTATUS(status) == 1 ? "found its heap inconsistent" : "kept the cache"
                                             : "died of a signal");
  EXPECT_EQ(hpcmem_check(), 0);
}


// malloc_trim's part in a thread's cache: every bin empty (the objects back
// on their spans, the fresh range uncarved) and starting small again.
TEST(_hpcmem_tcache_trim, empties_the_bins_and_starts_them_small) {
  size_t size = 1536;                                   // a class only this test uses
  unsigned cls = _hpcmem_size_class(size);
  std::thread([&] {
    free(malloc(size));
    unsigned start = _hpcmem_tc->bin[cls].max;          // a new thread's room for the class
    unsigned grown = churned_room(size);
    EXPECT_GT(grown, start);
    hpcmem_bin_t *b = &_hpcmem_tc->bin[cls];
    EXPECT_GT(b->count + b->nfresh + (b->slot != nullptr), 0u);
    _hpcmem_tcache_trim(_hpcmem_tc);
    for (unsigned c = 1; c < HPCMEM_NCLASSES; c++) {
      hpcmem_bin_t *x = &_hpcmem_tc->bin[c];
      EXPECT_EQ(x->count, 0u) << c;
      EXPECT_EQ(x->nfresh, 0u) << c;
      EXPECT_EQ(x->slot, nullptr) << c;
    }
    EXPECT_EQ(b->max, start);
    void *p = malloc(size);                             // and the cache goes on
    ASSERT_NE(p, nullptr);
    memset(p, 1, size);
    free(p);
    EXPECT_EQ(hpcmem_check(), 0);
  }).join();
}

// The stash (src/heap/group.c): a flushed list of one class, all of the
// heap's slice, is kept whole and handed to the class's next refill whole.
namespace {
// objs linked as a cache's flush links them (first word, free key), NULL at the end.
void *linked(const std::vector<void *> &objs) {
  void *list = nullptr;
  for (size_t i = objs.size(); i-- > 0;) {
    *(void **)objs[i] = list;
    ((uint64_t *)objs[i])[1] = _hpcmem_free_key;
    list = objs[i];
  }
  return list;
}
// n objects of class cls, refilled from h (nothing of the class is free:
// exactly n), in the order objects_of gives them.
std::vector<void *> taken(hpcmem_heap_t *h, unsigned cls, unsigned n) {
  hpcmem_refill_t r;
  EXPECT_EQ(_hpcmem_heap_refill(h, cls, &r, n, nullptr, 0), n);
  return objects_of(r, _hpcmem_class_size[cls]);
}
// Heap 0 with nothing in its stash (earlier tests' caches flushed into it;
// malloc_trim's part gives it back to the spans).
hpcmem_heap_t *stash_emptied() {
  hpcmem_heap_t *h = heap0();
  (void)_hpcmem_heap_trim(h);
  return h;
}
// A stash test's start: heap 0 with nothing in its stash, and n objects of
// the class of `bytes` taken from it.
struct Taken {
  hpcmem_heap_t *h;
  unsigned cls;
  size_t size;
  std::vector<void *> xs;
};
Taken take_from_emptied(size_t bytes, unsigned n) {
  hpcmem_heap_t *h = stash_emptied();
  unsigned cls = _hpcmem_size_class(bytes);
  return {h, cls, _hpcmem_class_size[cls], taken(h, cls, n)};
}
}  // namespace

TEST(_hpcmem_heap_flush, keeps_a_whole_list_for_the_next_refill_of_its_class) {
  auto [h, cls, size, xs] = take_from_emptied(20 << 10, 6);  // a class only this test uses
  hpcmem_refill_t r;
  hpcmem_span_t *s = _hpcmem_span_of(xs[0]);
  uint64_t before = h->stash_bytes, remote = 0;
  _hpcmem_heap_flush(h, cls, linked(xs), 6, &remote);
  ASSERT_EQ(h->stash_count[cls], 1u);
  EXPECT_EQ(h->stash_n[cls][0], 6u);
  EXPECT_EQ(h->stash_bytes, before + 6 * size);
  EXPECT_EQ(s->used, 6u) << "stashed objects stay counted as out of their span";
  EXPECT_EQ(_hpcmem_heap_free_objects(h, cls), 6u);
  EXPECT_EQ(_hpcmem_heap_check(h), 0);
  hpcmem_stats_t st;
  hpcmem_stats(&st);
  EXPECT_GE(st.retained_bytes, 6 * size) << "stashed bytes are retained, free bytes";

  ASSERT_EQ(_hpcmem_heap_refill(h, cls, &r, 3, nullptr, 0), 6u) << "the list comes back whole";
  EXPECT_EQ(r.first, xs[0]);
  EXPECT_EQ(((uint64_t *)r.first)[1], 0u) << "the object handed out does not carry the free key";
  EXPECT_EQ(r.nlist, 5u);
  EXPECT_EQ(r.nfresh, 0u);
  EXPECT_EQ(objects_of(r, size), xs);
  EXPECT_EQ(h->stash_count[cls], 0u);
  EXPECT_EQ(h->stash_bytes, before);
  EXPECT_EQ(s->used, 6u);
  EXPECT_EQ(_hpcmem_heap_check(h), 0);
  give_back(h, xs);                                    // to the spans (class 0: not stashed)
  EXPECT_EQ(s->used, 0u);
  EXPECT_EQ(_hpcmem_heap_check(h), 0);
}

// A refill whose class has free objects in a span and only stashed lists
// longer than it asks for takes from the span, and lets the heap's lock go.
TEST(_hpcmem_heap_refill, leaves_a_list_longer_than_it_asks_for_in_the_stash) {
  auto [h, cls, size, xs] = take_from_emptied(12 << 10, 8);
  uint64_t remote = 0;
  _hpcmem_heap_flush(h, cls, linked({xs[0], xs[1], xs[2], xs[3], xs[4], xs[5]}), 6, &remote);
  ASSERT_EQ(h->stash_count[cls], 1u);
  give_back(h, {xs[6]});                               // a span of the class has a free object
  hpcmem_refill_t r;
  ASSERT_EQ(_hpcmem_heap_refill(h, cls, &r, 1, nullptr, 0), 1u);
  std::vector<void *> back = objects_of(r, size);
  EXPECT_EQ(std::find(xs.begin(), xs.begin() + 6, r.first), xs.begin() + 6) << "a span's object, not the stashed list's";
  EXPECT_EQ(h->stash_count[cls], 1u);
  EXPECT_EQ(h->lock.v, 0) << "the lock was let go";
  EXPECT_EQ(_hpcmem_heap_check(h), 0);
  ASSERT_EQ(_hpcmem_heap_refill(h, cls, &r, 3, nullptr, 0), 6u) << "asked for 3: the list of six comes whole";
  EXPECT_EQ(h->stash_count[cls], 0u);
  EXPECT_EQ(h->lock.v, 0);
  for (void *p : objects_of(r, size)) back.push_back(p);
  back.push_back(xs[7]);                               // (xs[6], unless handed out above, is free in its span)
  give_back(h, back);
  EXPECT_EQ(_hpcmem_heap_check(h), 0);
}

// The newest stashed list that fits is taken, an older one when the newest
// is longer than the refill asks for.
TEST(_hpcmem_heap_refill, takes_an_older_stashed_list_that_fits) {
  auto [h, cls, size, xs] = take_from_emptied(12 << 10, 9);
  uint64_t remote = 0;
  _hpcmem_heap_flush(h, cls, linked({xs[0], xs[1]}), 2, &remote);                       // older, two
  _hpcmem_heap_flush(h, cls, linked({xs[2], xs[3], xs[4], xs[5], xs[6], xs[7]}), 6, &remote);   // newer, six
  ASSERT_EQ(h->stash_count[cls], 2u);
  give_back(h, {xs[8]});                               // a span of the class has a free object
  hpcmem_refill_t r;
  ASSERT_EQ(_hpcmem_heap_refill(h, cls, &r, 1, nullptr, 0), 2u) << "the list of two: six is more than 2 * 1 + 1";
  EXPECT_EQ(objects_of(r, size), (std::vector<void *>{xs[0], xs[1]}));
  ASSERT_EQ(h->stash_count[cls], 1u);
  EXPECT_EQ(h->stash_n[cls][0], 6u) << "the list of six moved down";
  EXPECT_EQ(h->stash[cls][0], xs[2]);
  EXPECT_EQ(_hpcmem_heap_check(h), 0);
  std::vector<void *> back{xs[0], xs[1]};
  give_back(h, back);
  (void)_hpcmem_heap_trim(h);                          // the six back to the spans
  EXPECT_EQ(h->stash_count[cls], 0u);
  EXPECT_EQ(_hpcmem_heap_check(h), 0);
}

// A list longer than it says, or one the stash has no room for, goes to the spans.
TEST(_hpcmem_heap_flush, a_list_that_does_not_end_where_it_says_goes_to_the_spans) {
  auto [h, cls, size, xs] = take_from_emptied(2048, 3);  // a class only this test uses
  hpcmem_refill_t r;
  hpcmem_span_t *s = _hpcmem_span_of(xs[0]);
  uint64_t remote = 0;
  _hpcmem_heap_flush(h, cls, linked(xs), 2, &remote);  // three linked, two given
  EXPECT_EQ(h->stash_count[cls], 0u);
  EXPECT_EQ(s->used, 1u) << "the two given went back to their span";
  EXPECT_EQ(_hpcmem_heap_check(h), 0);
  give_back(h, {xs[2]});
  // more lists than the stash keeps of a class: the rest go to the spans
  std::vector<std::vector<void *>> lists;
  for (unsigned k = 0; k <= HPCMEM_STASH; k++) {
    ASSERT_EQ(_hpcmem_heap_refill(h, cls, &r, 1, nullptr, 0), 1u);
    lists.push_back({r.first});
  }
  for (auto &l : lists) _hpcmem_heap_flush(h, cls, linked(l), 1, &remote);
  EXPECT_EQ(h->stash_count[cls], (unsigned)HPCMEM_STASH);
  EXPECT_GE(_hpcmem_heap_free_objects(h, cls), HPCMEM_STASH + 1u) << "the stash's and the one in its span";
  EXPECT_EQ(_hpcmem_heap_check(h), 0);
  (void)_hpcmem_heap_trim(h);                          // malloc_trim gives the stash back to the spans
  EXPECT_EQ(h->stash_count[cls], 0u);
  EXPECT_EQ(_hpcmem_heap_check(h), 0);
}

TEST(_hpcmem_span_holds_free, finds_an_object_of_a_stashed_list) {
  auto [h, cls, size, xs] = take_from_emptied(6 << 10, 5);  // a class only this test uses
  hpcmem_refill_t r;
  hpcmem_span_t *s = _hpcmem_span_of(xs[0]);
  uint64_t remote = 0;
  _hpcmem_heap_flush(h, cls, linked({xs[0], xs[1], xs[2], xs[3]}), 4, &remote);
  ASSERT_EQ(h->stash_count[cls], 1u);
  EXPECT_EQ(_hpcmem_span_holds_free(s, xs[2]), 1) << "a second free of a stashed object is a double free";
  EXPECT_EQ(_hpcmem_span_holds_free(s, xs[4]), 0) << "a live object is not free";
  ASSERT_EQ(_hpcmem_heap_refill(h, cls, &r, 2, nullptr, 0), 4u);
  EXPECT_EQ(_hpcmem_span_holds_free(s, xs[2]), 0) << "handed out again";
  std::vector<void *> back = objects_of(r, size);
  back.push_back(xs[4]);
  give_back(h, back);
  EXPECT_EQ(_hpcmem_heap_check(h), 0);
}

TEST(_hpcmem_heap_check, finds_a_damaged_stashed_list) {
  auto [h, cls, size, xs] = take_from_emptied(20 << 10, 3);
  hpcmem_refill_t r;
  uint64_t remote = 0;
  _hpcmem_heap_flush(h, cls, linked(xs), 3, &remote);
  ASSERT_EQ(h->stash_count[cls], 1u);
  EXPECT_EQ(_hpcmem_heap_check(h), 0);
  ((uint64_t *)xs[1])[1] = 0;                          // an object that looks handed out
  EXPECT_EQ(_hpcmem_heap_check(h), -EFAULT);
  ((uint64_t *)xs[1])[1] = _hpcmem_free_key;
  h->stash_n[cls][0] = 2;                              // the list runs past its count
  EXPECT_EQ(_hpcmem_heap_check(h), -EFAULT);
  h->stash_n[cls][0] = 3;
  h->stash_bytes += size;                              // the bytes do not add up
  EXPECT_EQ(_hpcmem_heap_check(h), -EFAULT);
  h->stash_bytes -= size;
  EXPECT_EQ(_hpcmem_heap_check(h), 0);
  ASSERT_EQ(_hpcmem_heap_refill(h, cls, &r, 1, nullptr, 0), 3u) << "no span has a free object: any list";
  give_back(h, objects_of(r, size));
  EXPECT_EQ(_hpcmem_heap_check(h), 0);
}

namespace {
// Threads that have allocated (their caches are live) and wait until the
// object goes: with 4 of them a cpu, the live threads are enough for the
// stash whatever the process had before.
class LiveThreads {
 public:
  explicit LiveThreads(unsigned n) {
    for (unsigned i = 0; i < n; i++)
      threads_.emplace_back([this] {
        free(malloc(16));
        started_.fetch_add(1);
        while (!done_.load()) std::this_thread::sleep_for(std::chrono::milliseconds(1));
      });
    while (started_.load() < n) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  ~LiveThreads() {
    done_.store(true);
    for (auto &t : threads_) t.join();
  }

 private:
  std::vector<std::thread> threads_;
  std::atomic<unsigned> started_{0};
  std::atomic<bool> done_{false};
};
unsigned stash_threads() { return HPCMEM_STASH_THREADS_PER_CPU * std::max(1u, _hpcmem_prim_cpus_allowed()); }
}  // namespace

TEST(_hpcmem_tcache_stash_on, follows_the_live_threads_a_cpu) {
  free(malloc(16));
  EXPECT_EQ(_hpcmem_tcache_stash_on(), 0) << "one thread: flushes go to the spans";
  {
    LiveThreads many(stash_threads());
    EXPECT_EQ(_hpcmem_tcache_stash_on(), 1) << stash_threads() << " more live threads";
  }
  EXPECT_EQ(_hpcmem_tcache_stash_on(), 0) << "they exited";
}

// Through the thread caches: a producer's objects freed by a consumer of the
// same group reach the producer's next refill as the list the consumer
// flushed, while the threads are many a cpu; with few, the list goes to the
// spans.
namespace {
// The most lists of class cls heap h's stash held while a consumer thread
// freed v, or kOtherGroup when the consumer ran in another group (its frees
// went to remote lists: nothing to see).
constexpr unsigned kOtherGroup = ~0u;
unsigned consume(std::vector<void *> &v, unsigned cls, hpcmem_heap_t *h) {
  unsigned stashed = 0;
  std::thread([&] {
    free(malloc(16));
    if (_hpcmem_tc->heap != h) stashed = kOtherGroup;
    for (auto &p : v) {
      free(p);
      if (stashed != kOtherGroup) stashed = std::max<unsigned>(stashed, h->stash_count[cls]);
    }
    EXPECT_EQ(hpcmem_check(), 0);
  }).join();
  return stashed;
}
}  // namespace

TEST(_hpcmem_tcache_flush, a_consumer_s_flush_reaches_the_producer_s_refill_whole) {
  size_t size = 4608;                                  // a class only this test uses
  unsigned cls = _hpcmem_size_class(size);
  std::vector<void *> v(64);
  for (auto &p : v) { p = malloc(size); memset(p, 7, size); }
  hpcmem_heap_t *h = _hpcmem_tc->heap;
  {
    LiveThreads many(stash_threads());
    ASSERT_EQ(_hpcmem_tcache_stash_on(), 1);
    unsigned stashed = consume(v, cls, h);
    if (stashed == kOtherGroup) GTEST_SKIP() << "the consumer ran in another group";
    EXPECT_GT(stashed, 0u) << "the consumer's full bin went whole into the stash";
    unsigned lists = h->stash_count[cls];
    ASSERT_GT(lists, 0u);
    for (auto &p : v) { p = malloc(size); ASSERT_NE(p, nullptr); memset(p, 9, size); }
    EXPECT_LT(h->stash_count[cls], lists) << "the producer's refills took lists back";
    EXPECT_EQ(hpcmem_check(), 0);
    for (auto &p : v) free(p);                         // into the stash again (the bin's flushes)
  }
  EXPECT_EQ(h->stash_count[cls], 0u) << "the threads went below the stash's threshold: its lists went to the spans";
  EXPECT_EQ(h->stash_bytes, 0u);
  EXPECT_EQ(hpcmem_check(), 0);
}

TEST(_hpcmem_tcache_flush, goes_to_the_spans_with_few_threads_a_cpu) {
  size_t size = 10 << 10;                              // no other test leaves one of the class stashed
  unsigned cls = _hpcmem_size_class(size);
  std::vector<void *> v(64);
  for (auto &p : v) { p = malloc(size); memset(p, 7, size); }
  hpcmem_heap_t *h = _hpcmem_tc->heap;
  ASSERT_EQ(_hpcmem_tcache_stash_on(), 0);
  unsigned stashed = consume(v, cls, h);
  if (stashed == kOtherGroup) GTEST_SKIP() << "the consumer ran in another group";
  EXPECT_EQ(stashed, 0u) << "the consumer's flushes went to the spans";
  EXPECT_EQ(h->stash_count[cls], 0u);
  EXPECT_EQ(hpcmem_check(), 0);
}

// Loans (tcache.c): a class with nothing free in the thread's reach takes a
// recycled object of one of the next two classes from the list of the
// thread's own bin instead of touching new memory.  Each test runs in a
// thread of its own (empty bins) and first takes the heap's free objects of
// the class it asks for out of the way (Drained), so that it does not depend
// on what the tests before it left there.
namespace {
bool heap_has_recycled(const hpcmem_heap_t *h, unsigned cls) { return h->partial[cls] || h->stash_count[cls]; }

// Holds every free object of class cls that heap h had (its spans' free
// lists and its stash), and gives them back when it goes.
struct Drained {
  hpcmem_heap_t *h;
  std::vector<void *> objs;
  Drained(hpcmem_heap_t *heap, unsigned cls) : h(heap) {
    hpcmem_refill_t r;
    while (_hpcmem_heap_refill(h, cls, &r, 64, nullptr, 1) != 0) {
      objs.push_back(r.first);
      for (void *p = r.list; p; p = *(void **)p) objs.push_back(p);
    }
  }
  ~Drained() {
    if (!objs.empty()) give_back(h, objs);
  }
};

// The calling thread's cache, its bin of class `lender` holding two objects
// on its list (a slot's lone object is not lent), and no look for a loan of
// class cls due to grow the class instead.
hpcmem_tcache_t *two_on_the_list_of(unsigned lender, unsigned cls, void **first) {
  size_t big = _hpcmem_class_size[lender];
  void *p = malloc(big), *p2 = malloc(big);
  free(p2);                                          // the slot,
  free(p);                                           // then both on the list, p first
  hpcmem_tcache_t *t = _hpcmem_tc;
  t->loan_tries[cls] = 0;
  if (first) *first = p;
  return t;
}
}  // namespace

TEST(_hpcmem_tcache_refill, lends_an_object_of_the_next_class_up_when_the_class_has_none_free) {
  std::thread([] {
    size_t small = 3584, big = 4096;                  // classes 39 and 40
    unsigned c = _hpcmem_size_class(small);
    ASSERT_EQ(_hpcmem_size_class(big), c + 1);
    void *p;
    hpcmem_tcache_t *t = two_on_the_list_of(c + 1, c, &p);
    ASSERT_EQ(t->bin[c + 1].head, p);
    Drained d(t->heap, c);
    ASSERT_FALSE(heap_has_recycled(t->heap, c));
    char *q = (char *)malloc(small);
    EXPECT_EQ(q, p) << "the touched object of the class above, not new memory";
    EXPECT_EQ(malloc_usable_size(q), big) << "a lent object keeps its class";
    memset(q, 6, big);
    free(q);                                          // put aside (the pending free), then
    _hpcmem_tcache_pend_flush(t);                     // into the bin of its class
    EXPECT_EQ(t->bin[c + 1].count, 2u) << "the object went back to the bin of its class";
    EXPECT_EQ(t->bin[c].count, 0u);
    EXPECT_EQ(hpcmem_check(), 0);
  }).join();
}

// A class that keeps borrowing grows by one object of its own every 1,024th
// look for a loan (LOAN_GROW), so that a lasting deficit stops costing a slow
// call a malloc.
TEST(_hpcmem_tcache_refill, a_class_that_keeps_borrowing_grows_every_1024th_time) {
  std::thread([] {
    size_t small = 3584, big = 4096;                  // classes 39 and 40
    unsigned c = _hpcmem_size_class(small);
    hpcmem_tcache_t *t = two_on_the_list_of(c + 1, c, nullptr);
    Drained d(t->heap, c);
    ASSERT_FALSE(heap_has_recycled(t->heap, c));
    unsigned n = 0;
    size_t got;
    do {
      void *q = malloc(small);
      ASSERT_NE(q, nullptr);
      got = malloc_usable_size(q);
      free(q);
      _hpcmem_tcache_pend_flush(t);                  // a lent object back onto its bin's list
      n++;
    } while (got == big && n <= 2048);
    EXPECT_EQ(got, small) << "the class grew";
    EXPECT_EQ(n, 1024u) << "the 1,024th look took a fresh object";
    void *q = malloc(small);
    EXPECT_EQ(malloc_usable_size(q), small) << "its own object, freed into its bin, serves it now";
    free(q);
    EXPECT_EQ(hpcmem_check(), 0);
  }).join();
}

TEST(_hpcmem_tcache_refill, lends_nothing_from_three_classes_up) {
  std::thread([] {
    size_t small = 2048, far = 3584;                  // classes 36 and 39
    unsigned c = _hpcmem_size_class(small);
    ASSERT_EQ(_hpcmem_size_class(far), c + 3);
    hpcmem_tcache_t *t = two_on_the_list_of(c + 3, c, nullptr);
    Drained d(t->heap, c);
    ASSERT_FALSE(heap_has_recycled(t->heap, c));
    char *q = (char *)malloc(small);                  // (its span may become class c's: lone_offer)
    ASSERT_NE(q, nullptr);
    EXPECT_EQ(malloc_usable_size(q), small) << "an object three classes up is not lent";
    EXPECT_EQ(t->bin[c + 3].count, 2u);
    free(q);
    EXPECT_EQ(hpcmem_check(), 0);
  }).join();
}

TEST(_hpcmem_tcache_refill, lends_nothing_while_the_heap_has_a_free_object_of_the_class) {
  std::thread([] {
    size_t small = 2048, big = 2560;                  // classes 36 and 37
    unsigned c = _hpcmem_size_class(small);
    ASSERT_EQ(_hpcmem_size_class(big), c + 1);
    hpcmem_tcache_t *t = two_on_the_list_of(c + 1, c, nullptr);
    hpcmem_heap_t *h = t->heap;
    hpcmem_refill_t r;
    ASSERT_EQ(_hpcmem_heap_refill(h, c, &r, 1, nullptr, 0), 1u);
    give_back(h, {r.first});                          // a free object of class c in the thread's heap
    ASSERT_TRUE(heap_has_recycled(h, c));
    void *q = malloc(small);
    EXPECT_EQ(malloc_usable_size(q), small) << "a free object of the heap's class, not a loan";
    EXPECT_EQ(t->bin[c + 1].count, 2u);
    free(q);
    EXPECT_EQ(hpcmem_check(), 0);
  }).join();
}

TEST(_hpcmem_tcache_refill, lends_nothing_to_an_aligned_request) {
  std::thread([] {
    size_t small = 8192, big = 10240;                 // classes 44 and 45: 8192 is 4 KiB aligned, 10240 is not
    unsigned c = _hpcmem_size_class(small);
    ASSERT_EQ(_hpcmem_size_class(big), c + 1);
    hpcmem_tcache_t *t = two_on_the_list_of(c + 1, c, nullptr);
    Drained d(t->heap, c);
    ASSERT_FALSE(heap_has_recycled(t->heap, c));
    void *q = nullptr;
    ASSERT_EQ(posix_memalign(&q, 4096, small), 0);
    EXPECT_EQ(malloc_usable_size(q), small) << "an aligned request takes no loan";
    EXPECT_EQ((uintptr_t)q % 4096, 0u);
    EXPECT_EQ(t->bin[c + 1].count, 2u);
    void *x = memalign(64, small);
    EXPECT_EQ(malloc_usable_size(x), small);
    EXPECT_EQ(t->bin[c + 1].count, 2u);
    free(x);
    free(q);
    EXPECT_EQ(hpcmem_check(), 0);
  }).join();
}

// A bin whose fresh range is not used up takes the heap's free objects of
// its class first (they were touched already); the range waits.
TEST(_hpcmem_tcache_refill, a_bin_with_a_fresh_range_takes_the_heap_s_free_objects_first) {
  std::thread([] {
    size_t size = 8192;                               // class 44
    unsigned cls = _hpcmem_size_class(size);
    free(malloc(16));
    hpcmem_tcache_t *t = _hpcmem_tc;
    hpcmem_heap_t *h = t->heap;
    _hpcmem_tcache_bin_start(t, cls);
    hpcmem_refill_t r;
    std::vector<void *> given;                        // the heap's free objects of the class, then
    do {                                              // fresh ones: the last refill's range
      ASSERT_GE(_hpcmem_heap_refill(h, cls, &r, 4, nullptr, 0), 1u);
      given.push_back(r.first);
      for (void *p = r.list; p; p = *(void **)p) given.push_back(p);
    } while (r.nfresh == 0);
    hpcmem_bin_t *b = &t->bin[cls];
    t->fresh[cls] = r.fresh;                          // the bin's fresh range (list and slot empty)
    b->nfresh = r.nfresh;
    unsigned nfresh = b->nfresh;
    give_back(h, given);                              // freed: the heap has recycled objects
    ASSERT_TRUE(heap_has_recycled(h, cls));
    unsigned got_cls = cls;
    void *q = _hpcmem_tcache_refill(t, cls, &got_cls);
    EXPECT_NE(std::find(given.begin(), given.end(), q), given.end()) << "a free object of the heap, not a fresh one";
    EXPECT_EQ(got_cls, cls);
    EXPECT_EQ(b->nfresh, nfresh) << "the fresh range waits";
    EXPECT_EQ(t->fresh[cls], r.fresh);
    free(q);
    EXPECT_EQ(hpcmem_check(), 0);
  }).join();                                          // the exit gives the range back unwritten
}

// malloc's fast path hands out the bin's fresh objects only while the lists
// of the next two classes' bins are empty; else the refill lends one of
// theirs (touched already) and the fresh range waits.
TEST(malloc, takes_a_fresh_object_only_while_the_next_two_classes_have_none_free) {
  std::thread([] {
    size_t small = 3584, big = 4096;                  // classes 39 and 40
    unsigned c = _hpcmem_size_class(small);
    std::vector<void *> keep;
    free(malloc(16));
    hpcmem_tcache_t *t = _hpcmem_tc;
    Drained d(t->heap, c);
    hpcmem_bin_t *b = &t->bin[c];
    while (b->nfresh < 2 && keep.size() < 64) keep.push_back(malloc(small));   // refills grow: a fresh range
    ASSERT_GE(b->nfresh, 2u);
    ASSERT_EQ(b->head, nullptr);
    ASSERT_EQ(b->slot, nullptr);
    unsigned nfresh = b->nfresh;
    char *next = t->fresh[c];
    void *p = malloc(small);                          // nothing above: fresh, on the fast path
    EXPECT_EQ(p, (void *)next);
    EXPECT_EQ(b->nfresh, nfresh - 1);
    void *a = malloc(big), *a2 = malloc(big);
    free(a2);
    free(a);                                          // a list in the bin of class c + 1
    t->loan_tries[c] = 0;
    void *q = malloc(small);
    EXPECT_EQ(q, a) << "a loan, not a fresh object";
    EXPECT_EQ(b->nfresh, nfresh - 1) << "the fresh range waits";
    free(q);
    free(p);
    for (void *k : keep) free(k);
    EXPECT_EQ(hpcmem_check(), 0);
  }).join();
}

// The thread groups wait for a second thread (api/alloc.c, know_groups).
// Each case runs in a fresh process: this program again, with only the test
// `DISABLED_fresh_start` below and TEST_TCACHE_FRESH saying what to expect.
namespace {
void run_fresh(const char *mode, const char *variable, const char *value) {
  char exe[4096];
  ssize_t len = readlink("/proc/self/exe", exe, sizeof exe - 1);
  ASSERT_GT(len, 0);
  exe[len] = 0;
  pid_t pid = fork();
  if (pid == 0) {
    for (const char *v : {"HPCMEM_VERBOSE", "HPCMEM_TOPOLOGY", "HPCMEM_DEFAULT_SEGMENT", "HPCMEM_HEAPS", "HWLOC_XMLFILE",
                          "HWLOC_SYNTHETIC", "HWLOC_FSROOT", "HWLOC_CPUID_PATH", "HWLOC_COMPONENTS", "HWLOC_ALLOW",
                          "HWLOC_THISSYSTEM"})
      unsetenv(v);
    setenv("TEST_TCACHE_FRESH", mode, 1);
    if (variable) setenv(variable, value, 1);
    execl(exe, exe, "--gtest_brief=1", "--gtest_also_run_disabled_tests",
          "--gtest_filter=_hpcmem_thread_cache.DISABLED_fresh_start",
          (char *)nullptr);
    _exit(127);
  }
  int status = 0;
  ASSERT_EQ(waitpid(pid, &status, 0), pid);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0)
      << mode << ": " << (WIFSIGNALED(status) ? "killed by signal " : "exit ")
      << (WIFSIGNALED(status) ? WTERMSIG(status) : WEXITSTATUS(status));
}
}  // namespace

// Disabled: it runs only in a process of its own, which the tests below start.
TEST(_hpcmem_thread_cache, DISABLED_fresh_start) {
  const char *mode = getenv("TEST_TCACHE_FRESH");
  ASSERT_NE(mode, nullptr) << "run by the tests below, in a process of its own";
  std::vector<void *> before;
  for (int i = 0; i < 100; i++) before.push_back(malloc(48));
  hpcmem_tcache_t *t = _hpcmem_tc;
  ASSERT_NE(t, &_hpcmem_tcache_none);
  if (strcmp(mode, "eager") == 0) {               // the start read them
    EXPECT_NE(_hpcmem_cpu_to_group, nullptr);
    EXPECT_EQ(t->bind_gen, _hpcmem_tcache_bind_gen);
    for (void *p : before) free(p);
    return;
  }
  // one thread: no topology file read (one file told the slices: the
  // possible cpus), heap 0
  int files = _hpcmem_topo_sysfs_files;
  EXPECT_LE(files, 1);
  EXPECT_EQ(_hpcmem_cpu_to_group, nullptr);
  EXPECT_EQ(_hpcmem_tcache_bind_gen, 0u);
  EXPECT_EQ(t->heap_index, 0u);
  EXPECT_EQ(_hpcmem_topo_detailed(), 0);           // asks without reading (a fatal signal's summary)
  EXPECT_EQ(_hpcmem_topo_sysfs_files, files);
  int cpu = sched_getcpu();
  ASSERT_GE(cpu, 0);
  cpu_set_t one;
  CPU_ZERO(&one);
  CPU_SET(cpu, &one);
  ASSERT_EQ(sched_setaffinity(0, sizeof one, &one), 0);   // the next binding's cpu is known
  // a second thread's first malloc reads them
  if (strcmp(mode, "late_hwloc") == 0) setenv("HWLOC_SYNTHETIC", "pack:1 l3:1 core:2 pu:1", 1);
  std::vector<int> fds;
  if (strcmp(mode, "nofiles") == 0) {             // sysfs cannot be read then
    for (int fd; (fd = open("/dev/null", O_RDONLY)) >= 0;) fds.push_back(fd);
    ASSERT_EQ(errno, EMFILE);
  }
  std::thread([] { free(malloc(64)); }).join();
  for (int fd : fds) close(fd);
  if (strcmp(mode, "nofiles") == 0) {
    std::ifstream maps("/proc/self/maps");
    std::string all((std::istreambuf_iterator<char>(maps)), std::istreambuf_iterator<char>());
    EXPECT_EQ(all.find("libhwloc"), std::string::npos);
    EXPECT_EQ(std::string(_hpcmem_topo_source()), "this machine (one node, without hwloc)");
  }
  if (strcmp(mode, "late_hwloc") == 0) {          // read from sysfs, not through hwloc inside a malloc
    EXPECT_EQ(std::string(_hpcmem_topo_source()), "this machine");
  }
  ASSERT_NE(_hpcmem_cpu_to_group, nullptr);
  EXPECT_EQ(_hpcmem_tcache_bind_gen, 1u);
  EXPECT_TRUE(_hpcmem_topo_loaded());
  if (strcmp(_hpcmem_topo_source(), "this machine") == 0) {
    EXPECT_GT(_hpcmem_topo_sysfs_files, files);
  }
  if (strcmp(mode, "nofiles") == 0) return;        // one node: the groups by cpu count, nothing more to see
  EXPECT_EQ(t->bind_gen, 0u);                      // this thread's cache: at its next refill or direct run
  void *p = nullptr;
  if (strcmp(mode, "run") == 0) {                  // an alignment no class has: a run of the heap
    p = aligned_alloc(16384, 20000);
    ASSERT_NE(p, nullptr);
    EXPECT_EQ((uintptr_t)p % 16384, 0u);
    EXPECT_EQ((uintptr_t)p - (uintptr_t)t->slice < ((uintptr_t)1 << HPCMEM_SLICE_SHIFT), 1) << "not of its heap";
  } else {
    p = malloc(24000);                             // a class this process has not used: a refill
  }
  ASSERT_NE(p, nullptr);
  EXPECT_EQ(t->bind_gen, 1u);
  EXPECT_EQ(t->heap_index, _hpcmem_cpu_to_group(cpu) % _hpcmem_heaps.count);
  EXPECT_EQ(_hpcmem_heaps.heap[t->heap_index].base, t->slice);
  for (void *q : before) free(q);                  // from the heap it had before: sent home
  free(p);
  EXPECT_EQ(hpcmem_check(), 0);
}

TEST(_hpcmem_thread_cache, reads_the_groups_when_a_second_thread_allocates) { run_fresh("lazy", nullptr, nullptr); }

// the thread alone before binds again at its first direct run too
TEST(_hpcmem_thread_cache, binds_again_at_a_direct_run) { run_fresh("run", nullptr, nullptr); }

TEST(_hpcmem_thread_cache, reads_the_groups_at_start_for_the_summary) {
  run_fresh("eager", "HPCMEM_VERBOSE", "1");
}

// hwloc allocates and opens its library: not inside a thread's first malloc
TEST(_hpcmem_thread_cache, reads_the_groups_at_start_where_hwloc_reads_them) {
  run_fresh("eager", "HWLOC_SYNTHETIC", "pack:1 l3:1 core:2 pu:1");
}

// A reading inside a thread's first malloc is sysfs's alone: hwloc's
// variables set after the start do not make it open hwloc there.
TEST(_hpcmem_thread_cache, a_later_reading_opens_no_library) { run_fresh("late_hwloc", nullptr, nullptr); }

// sysfs unreadable at the second thread's first malloc (no file descriptor
// left): one node, said on stderr, and the program goes on
TEST(_hpcmem_thread_cache, a_later_reading_without_sysfs_gives_one_node) { run_fresh("nofiles", nullptr, nullptr); }
