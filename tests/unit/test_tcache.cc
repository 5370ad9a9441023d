// The thread cache's accounting word (src/heap/tcache.h): one subtraction a hit,
// exact calls and bytes once settled, an empty budget that sends the next call
// to the slow path.
#include <gtest/gtest.h>
#include <string.h>
extern "C" {
#include "heap/tcache.h"
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
