// Tests of the trace reader (tools/hmt_reader.c) on damaged input: every
// kind of damage gives an error that names the file and the offset; a file
// cut at any byte is read up to its last complete block; any flipped byte
// is caught; salvage mode skips what is damaged; the committed corpus
// (tests/trace/corpus/) runs through the fuzz target without a crash.
//
// HPCMEM_WRITE_CORPUS=DIR ./test_trace_reader writes the crafted inputs
// into DIR (how tests/trace/corpus/ was made; also seeds the fuzzer).
#include <gtest/gtest.h>
#include <dirent.h>
#include <unistd.h>
#include <fstream>
#include <functional>
#include <map>
#include <string>
#include <vector>
extern "C" {
#include "hmt_reader.h"
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int hmt_fuzz_read_path(const char *path, int flags);
void hmt_fuzz_fix_checksums(uint8_t *d, size_t n);
}

namespace {

typedef std::vector<uint8_t> bytes;

// ---- building files by hand, with the format header's encoders ----------

hmt_header_t default_header() {
  hmt_header_t h;
  memset(&h, 0, sizeof h);
  h.version_major = HMT_VERSION_MAJOR;
  h.rank = 1; h.size = 4; h.pid = 4242;
  h.start_ns = 1000000;
  h.pointer_size = 8; h.page_size = 4096; h.max_depth = 64; h.buffer_size = 65536;
  strcpy(h.hostname, "node7");
  strcpy(h.jobid, "job99");
  return h;
}

bytes header_bytes(const hmt_header_t &h) {
  bytes b(HMT_HEADER_SIZE);
  hmt_header_encode(&h, b.data());
  return b;
}

void append_block(bytes &f, uint8_t type, uint8_t codec, const bytes &payload, uint32_t tid = 0,
                  uint32_t count = 0, uint64_t base_time = 0, uint32_t raw_len = UINT32_MAX, uint16_t flags = 0) {
  hmt_block_t blk;
  memset(&blk, 0, sizeof blk);
  blk.type = type; blk.codec = codec; blk.flags = flags;
  blk.stored_len = (uint32_t)payload.size();
  blk.raw_len = raw_len == UINT32_MAX ? (uint32_t)payload.size() : raw_len;
  blk.tid = tid; blk.count = count; blk.base_time = base_time;
  blk.payload_crc = hmt_crc32c(0, payload.data(), payload.size());
  uint8_t h[HMT_BLOCK_HEADER_SIZE];
  hmt_block_encode(&blk, h);
  f.insert(f.end(), h, h + sizeof h);
  f.insert(f.end(), payload.begin(), payload.end());
}

struct Ev { unsigned type; uint64_t t, ptr, old, size, align, stack; };

// An EVENTS payload (codec none) with a stack definition for each new id.
bytes events_payload(const std::vector<Ev> &evs, uint64_t base_time, uint32_t *count,
                     const std::map<uint64_t, std::vector<uint64_t>> &stacks = {}) {
  bytes b(64 * (evs.size() + 1) + 4096);
  uint8_t *p = b.data();
  hmt_state_t st = {base_time, 0, 0};
  std::map<uint64_t, bool> defined;
  *count = 0;
  for (auto &e : evs) {
    if (e.stack && stacks.count(e.stack) && !defined[e.stack]) {
      auto &f = stacks.at(e.stack);
      // nodes stack - n + 1 .. stack, the last one the whole stack
      p = hmt_encode_stack(p, &st, e.stack - f.size() + 1, 0, f.data(), (uint32_t)f.size());
      defined[e.stack] = true;
      ++*count;
    }
    p = hmt_encode_event(p, &st, e.type, 0, e.t, e.ptr, e.old, e.size, e.align, e.stack);
    ++*count;
  }
  b.resize((size_t)(p - b.data()));
  return b;
}

bytes modules_payload() {
  bytes b(256);
  uint8_t *p = b.data();
  p = hmt_put_varint(p, 1);
  p = hmt_put_varint(p, 0x400000); p = hmt_put_varint(p, 0x400000); p = hmt_put_varint(p, 0x500000);
  p = hmt_put_varint(p, 4); memcpy(p, "\x01\x02\x03\x04", 4); p += 4;
  p = hmt_put_varint(p, 8); memcpy(p, "/bin/app", 8); p += 8;
  b.resize((size_t)(p - b.data()));
  return b;
}

bytes flush_payload(uint64_t reason) {
  bytes b(64);
  uint8_t *p = b.data();
  p = hmt_put_varint(p, reason);
  p = hmt_put_varint(p, 99);
  p = hmt_put_varint(p, 2);
  p = hmt_put_varint(p, 3);  // events
  p = hmt_put_varint(p, 1);  // stacks
  b.resize((size_t)(p - b.data()));
  return b;
}

// A small valid file: two threads, three events each, one stack, modules, flush.
bytes valid_file() {
  bytes f = header_bytes(default_header());
  append_block(f, HMT_BLOCK_MODULES, HMT_CODEC_NONE, modules_payload());
  std::map<uint64_t, std::vector<uint64_t>> stacks = {{3, {0x401000, 0x402000, 0x403000}}};
  uint32_t n;
  bytes a = events_payload({{HPCMEM_EV_MALLOC, 100, 0x1000, 0, 10, 0, 3},
                            {HPCMEM_EV_CALLOC, 300, 0x2000, 0, 20, 0, 3},
                            {HPCMEM_EV_FREE, 500, 0x1000, 0, 0, 0, 0}}, 100, &n, stacks);
  append_block(f, HMT_BLOCK_EVENTS, HMT_CODEC_NONE, a, 11, n, 100);
  bytes b = events_payload({{HPCMEM_EV_MEMALIGN, 200, 0x3000, 0, 30, 64, 3},
                            {HPCMEM_EV_REALLOC, 400, 0x4000, 0x3000, 40, 0, 3},
                            {HPCMEM_EV_FREE, 600, 0x2000, 0, 0, 0, 0}}, 200, &n);
  append_block(f, HMT_BLOCK_EVENTS, HMT_CODEC_NONE, b, 12, n, 200);
  append_block(f, HMT_BLOCK_FLUSH, HMT_CODEC_NONE, flush_payload(HMT_FLUSH_EXIT));
  return f;
}

// ---- format 1.4: rows coded under the models, as the recorder would ------

// A model with its arrays (hmt_m4_grow moves it into larger ones).
struct M4 {
  hmt_m4_model_t m;
  std::vector<hmt_m4_site_t> sites;
  std::vector<hmt_m4_ent_t> ent;
  std::vector<hmt_m4_mslot_t> map;
  std::vector<uint32_t> smap;
  explicit M4(uint32_t nmax) { memset(&m, 0, sizeof m); m.nmax = nmax; }
  void room(int chained, uint64_t count) {
    hmt_m4_room_t r = hmt_m4_need(&m, chained, count, m.nmax);
    if (r.ents < m.ent_cap) r.ents = m.ent_cap;
    for (r.map_slots = 64; r.map_slots < 2ull * r.ents; r.map_slots *= 2) {}
    std::vector<hmt_m4_site_t> s2(r.sites);
    std::vector<hmt_m4_ent_t> e2(r.ents);
    std::vector<hmt_m4_mslot_t> m2(r.map_slots);
    std::vector<uint32_t> sm2(r.smap_slots);
    hmt_m4_grow(&m, r, s2.data(), e2.data(), m2.data(), sm2.data(), chained);
    sites.swap(s2); ent.swap(e2); map.swap(m2); smap.swap(sm2);
  }
};

// An EVENTS block of format 1.4 coding these rows (count records, from
// base_time; tid's models chained or not).
void append_model_block(bytes &f, M4 &m, const bytes &rows, uint32_t count, uint32_t tid, uint64_t base_time,
                        int chained) {
  m.room(chained, count);
  bytes out(rows.size() + 64);
  hmt_state_t st = {base_time, 0, 0};
  uint64_t rl = 0;
  size_t n = hmt_m4_encode(rows.data(), rows.size(), &st, 16, out.data(), out.size(), &m.m, chained, &rl);
  ASSERT_GT(n, 0u);
  out.resize(n);
  append_block(f, HMT_BLOCK_EVENTS, HMT_CODEC_MODEL, out, tid, count, base_time, (uint32_t)rl,
               (uint16_t)(HMT_BF_M4 | (chained ? HMT_BF_CHAIN : 0)));
}

// The events of the format 1.4 file: thread 11 allocates from two sites
// (sizes repeated, stepping, huge), frees last-in-first-out and
// first-in-first-out, reallocs, memaligns, over three chained blocks (the
// third tracking fewer allocations than the others); thread 12 frees some
// of thread 11's blocks and reallocs to and from null.  The first block
// has STACK records and an EXT record.
std::vector<std::vector<Ev>> model_events() {
  std::vector<std::vector<Ev>> blocks(4);
  uint64_t t = 1000;
  std::vector<uint64_t> fifo;
  for (int b = 0; b < 3; b++)
    for (int i = 0; i < 200; i++) {
      t += 30000;
      uint64_t p = 0x7f0000000000ull + 0x100 * (uint64_t)(b * 200 + i);
      blocks[b].push_back({HPCMEM_EV_MALLOC, t, p, 0, 24 + (uint64_t)(i % 3) * 8, 0, 3});
      blocks[b].push_back({HPCMEM_EV_MALLOC, t + 1, p + 0x80, 0, 100 + (uint64_t)i, 0, 7});
      fifo.push_back(p + 0x80);
      blocks[b].push_back({HPCMEM_EV_FREE, t + 2, p, 0, 0, 0, 0});
      if (i % 10 == 9) {
        blocks[b].push_back({HPCMEM_EV_FREE, t + 3, fifo.front(), 0, 0, 0, 0});
        fifo.erase(fifo.begin());
        blocks[b].push_back({HPCMEM_EV_REALLOC, t + 4, p + 0x40, fifo.front(), 4000, 0, 7});
        fifo.erase(fifo.begin());
        blocks[b].push_back({HPCMEM_EV_MEMALIGN, t + 5, ~0ull - 0xfff - (uint64_t)i * 0x1000, 0, 1ull << 62, 1ull << 21, 3});
      }
    }
  for (int i = 0; i < 50; i++) {
    blocks[3].push_back({HPCMEM_EV_FREE, 2000 + 10 * (uint64_t)i, fifo[(size_t)i], 0, 0, 0, 0});
    blocks[3].push_back({HPCMEM_EV_REALLOC, 2001 + 10 * (uint64_t)i, 0x5000 + 16 * (uint64_t)i, 0, 0, 0, 7});
    blocks[3].push_back({HPCMEM_EV_REALLOC, 2002 + 10 * (uint64_t)i, 0, 0x5000 + 16 * (uint64_t)i, 0, 0, 7});
  }
  return blocks;
}

bytes model_file(std::vector<size_t> *offsets = nullptr) {
  bytes f = header_bytes(default_header());
  append_block(f, HMT_BLOCK_MODULES, HMT_CODEC_NONE, modules_payload());
  auto ev = model_events();
  std::map<uint64_t, std::vector<uint64_t>> stacks = {{3, {0x401000, 0x402000, 0x403000}}, {7, {0x401200, 0x402000}}};
  M4 a(256), b(256);
  uint64_t base = 1000;
  for (int k = 0; k < 3; k++) {
    uint32_t n;
    bytes rows = events_payload(ev[(size_t)k], base, &n, k == 0 ? stacks : std::map<uint64_t, std::vector<uint64_t>>{});
    if (k == 0) {  // an extension record first
      bytes x = {HMT_REC_EXT, 9, 4, 'h', 'm', 't', '4'};
      rows.insert(rows.begin(), x.begin(), x.end());
      n++;
    }
    if (k == 2) a.m.nmax = 16;  // fewer tracked: the oldest go, on both sides
    if (offsets) offsets->push_back(f.size());
    append_model_block(f, a, rows, n, 11, base, k > 0);
    base = ev[(size_t)k].back().t;
  }
  uint32_t n;
  bytes rows = events_payload(ev[3], 1000, &n);
  if (offsets) offsets->push_back(f.size());
  append_model_block(f, b, rows, n, 12, 1000, 0);
  append_block(f, HMT_BLOCK_FLUSH, HMT_CODEC_NONE, flush_payload(HMT_FLUSH_EXIT));
  return f;
}

// A file with one block changed, its checksums recomputed.
bytes with_block(bytes f, size_t off, const std::function<void(bytes &payload, hmt_block_t &b)> &change) {
  hmt_block_t b;
  EXPECT_EQ(hmt_block_decode(&f[off], f.size() - off, &b), HMT_OK);
  bytes p(f.begin() + (long)(off + HMT_BLOCK_HEADER_SIZE), f.begin() + (long)(off + HMT_BLOCK_HEADER_SIZE + b.stored_len));
  change(p, b);
  bytes out(f.begin(), f.begin() + (long)off);
  append_block(out, b.type, b.codec, p, b.tid, b.count, b.base_time, b.raw_len, b.flags);
  out.insert(out.end(), f.begin() + (long)(off + HMT_BLOCK_HEADER_SIZE + hmt_ld32(&f[off + 8])), f.end());
  return out;
}

std::string tmpdir() {
  static std::string d;
  if (d.empty()) {
    char t[] = "/tmp/hpcmem-reader-test-XXXXXX";
    d = mkdtemp(t);
  }
  return d;
}

std::string write_file(const std::string &name, const bytes &b) {
  std::string path = tmpdir() + "/" + name;
  std::ofstream(path, std::ios::binary).write((const char *)b.data(), (std::streamsize)b.size());
  return path;
}

struct Result {
  int open_rc = 0, next_rc = 0;
  std::string message;
  uint64_t offset = 0;
  std::vector<hmt_event_t> events;
  hmt_info_t info{};
};

Result read_all(const std::string &path, int flags = 0) {
  Result res;
  hmt_reader_t *r;
  hmt_error_t err;
  res.open_rc = hmt_open(path.c_str(), flags, &r, &err);
  if (res.open_rc) { res.message = err.message; res.offset = err.offset; return res; }
  hmt_event_t ev;
  while ((res.next_rc = hmt_next(r, &ev)) == 1) res.events.push_back(ev);
  if (res.next_rc < 0) { res.message = hmt_error(r)->message; res.offset = hmt_error(r)->offset; }
  res.info = *hmt_info(r);
  hmt_close(r);
  return res;
}

// Every crafted input: name -> bytes.  The prefix says what the reader must
// make of it: ok- reads cleanly, trunc- reads and flags truncation, err- fails.
std::map<std::string, bytes> crafted() {
  std::map<std::string, bytes> c;
  bytes good = valid_file();
  c["ok-valid"] = good;
  c["ok-header-only"] = header_bytes(default_header());
  c["err-empty"] = {};
  c["err-short-header"] = bytes(good.begin(), good.begin() + 100);
  bytes x = good; x[0] = 'X'; c["err-bad-magic"] = x;
  hmt_header_t h = default_header(); h.version_major = 2; c["err-version-2"] = header_bytes(h);
  x = good; x[100] ^= 1; c["err-header-checksum"] = x;
  h = default_header(); h.rank = 9; c["err-rank-out-of-range"] = header_bytes(h);
  x = good; x[256] ^= 0xff; c["err-block-magic"] = x;
  x = good; x[256 + 20] ^= 1; c["err-block-header-checksum"] = x;
  x = good; x[good.size() - 70] ^= 0x40; c["err-payload-checksum"] = x;
  c["trunc-mid-block"] = bytes(good.begin(), good.end() - 10);
  c["trunc-mid-block-header"] = bytes(good.begin(), good.begin() + 256 + 30);
  // well-formed checksums around bad contents
  bytes f = header_bytes(default_header());
  append_block(f, HMT_BLOCK_EVENTS, HMT_CODEC_NONE, {0x07}, 1, 1, 0);
  c["err-bad-record-type"] = f;
  f = header_bytes(default_header());
  append_block(f, HMT_BLOCK_EVENTS, HMT_CODEC_NONE, {HPCMEM_EV_MALLOC, 0x80, 0x80}, 1, 1, 0);
  c["err-record-runs-off-the-block"] = f;
  f = header_bytes(default_header());
  append_block(f, HMT_BLOCK_EVENTS, HMT_CODEC_NONE, {HPCMEM_EV_FREE | HMT_TAG_SAME_STACK, 1, 2}, 1, 1, 0);
  c["err-free-with-stack-flag"] = f;
  f = header_bytes(default_header());
  {
    uint32_t n;
    bytes p = events_payload({{HPCMEM_EV_MALLOC, 5, 0x10, 0, 1, 0, 0}}, 0, &n);
    append_block(f, HMT_BLOCK_EVENTS, HMT_CODEC_NONE, p, 1, n + 5, 0);
  }
  c["err-count-mismatch"] = f;
  f = header_bytes(default_header());
  {
    bytes p(16);
    uint8_t *q = p.data();
    *q++ = HMT_REC_STACK;
    q = hmt_put_varint(q, 1);
    q = hmt_put_varint(q, 1);
    q = hmt_put_varint(q, HMT_MAX_DEPTH + 1);
    p.resize((size_t)(q - p.data()));
    append_block(f, HMT_BLOCK_EVENTS, HMT_CODEC_NONE, p, 1, 1, 0);
  }
  c["err-stack-too-deep"] = f;
  f = header_bytes(default_header());
  {
    bytes p(16);
    uint8_t *q = p.data();
    *q++ = HMT_REC_STACK;
    q = hmt_put_varint(q, 5);  // nodes 5.. with up = 0: a node would be its own parent
    q = hmt_put_varint(q, 0);
    q = hmt_put_varint(q, 1);
    q = hmt_put_varint(q, 0x401000);
    p.resize((size_t)(q - p.data()));
    append_block(f, HMT_BLOCK_EVENTS, HMT_CODEC_NONE, p, 1, 1, 0);
  }
  c["err-stack-parent-not-before"] = f;
  // a stack whose outer nodes never made it into the file: the event reads, its stack does not
  f = header_bytes(default_header());
  {
    bytes p(64);
    uint8_t *q = p.data();
    uint64_t fr = 0x401000;
    hmt_state_t st = {0, 0, 0};
    q = hmt_encode_stack(q, &st, 10, 9, &fr, 1);
    q = hmt_encode_event(q, &st, HPCMEM_EV_MALLOC, 0, 5, 0x1000, 0, 8, 0, 10);
    p.resize((size_t)(q - p.data()));
    append_block(f, HMT_BLOCK_EVENTS, HMT_CODEC_NONE, p, 1, 2, 0);
  }
  c["ok-stack-chain-incomplete"] = f;
  f = header_bytes(default_header());
  append_block(f, HMT_BLOCK_EVENTS, HMT_CODEC_ZSTD, {1, 2, 3, 4, 5, 6, 7, 8}, 1, 1, 0, 1u << 29);
  c["err-zstd-claims-a-huge-block"] = f;
  f = header_bytes(default_header());
  append_block(f, HMT_BLOCK_EVENTS, HMT_CODEC_ZLIB, {1, 2, 3, 4, 5, 6, 7, 8}, 1, 1, 0, 100);
  c["err-zlib-garbage"] = f;
  f = header_bytes(default_header());
  {
    bytes m(8);
    uint8_t *q = m.data();
    q = hmt_put_varint(q, 3);  // three modules, none there
    m.resize((size_t)(q - m.data()));
    append_block(f, HMT_BLOCK_MODULES, HMT_CODEC_NONE, m);
  }
  c["err-modules-short"] = f;
  f = header_bytes(default_header());
  append_block(f, HMT_BLOCK_FLUSH, HMT_CODEC_NONE, {0x80});
  c["err-flush-malformed"] = f;
  // a block of a type this version does not know is skipped by its length
  f = good;
  append_block(f, 77, HMT_CODEC_NONE, {1, 2, 3});
  c["ok-unknown-block-type"] = f;
  // an extension record inside events is skipped
  f = header_bytes(default_header());
  {
    bytes p = {HMT_REC_EXT, 5, 3, 'a', 'b', 'c'};
    uint32_t n;
    bytes e = events_payload({{HPCMEM_EV_MALLOC, 5, 0x10, 0, 1, 0, 0}}, 0, &n);
    p.insert(p.end(), e.begin(), e.end());
    append_block(f, HMT_BLOCK_EVENTS, HMT_CODEC_NONE, p, 1, n + 1, 0);
  }
  c["ok-extension-record"] = f;
  // format 1.4
  std::vector<size_t> mo;
  bytes m4 = model_file(&mo);
  c["ok-model"] = m4;
  c["trunc-model-mid-block"] = bytes(m4.begin(), m4.begin() + (long)(mo[3] + HMT_BLOCK_HEADER_SIZE + 9));
  {  // the second block of thread 11 without the first
    bytes x(m4.begin(), m4.begin() + (long)mo[0]);
    x.insert(x.end(), m4.begin() + (long)mo[1], m4.end());
    c["err-model-chain-without-predecessor"] = x;
  }
  c["err-model-raw-len-off"] = with_block(m4, mo[0], [](bytes &, hmt_block_t &b) { b.raw_len++; });
  c["err-model-count-off"] = with_block(m4, mo[0], [](bytes &, hmt_block_t &b) { b.count++; });
  c["err-model-head"] = with_block(m4, mo[0], [](bytes &p, hmt_block_t &) { p[0] = HMT_COL2_MARK; });
  c["err-model-without-flag"] = with_block(m4, mo[0], [](bytes &, hmt_block_t &b) { b.flags = 0; });
  c["err-model-claims-a-huge-block"] =
      with_block(m4, mo[0], [](bytes &p, hmt_block_t &b) { b.raw_len = (uint32_t)p.size() * (1u << 18) + (1u << 16) + 1; });
  {  // a coded byte changed (checksums right): the first change the decoder notices
    bytes x;
    for (size_t i = 12; i < 64; i++) {
      x = with_block(m4, mo[0], [i](bytes &p, hmt_block_t &) { p[i] ^= 0x10; });
      if (read_all(write_file("probe.hmt", x)).next_rc < 0) break;
    }
    c["err-model-flipped"] = x;
  }
  f = header_bytes(default_header());
  append_block(f, HMT_BLOCK_MODULES, HMT_CODEC_MODEL, modules_payload());
  c["err-model-codec-on-modules"] = f;
  return c;
}

TEST(hmt_open, valid_hand_made_file_reads_exactly) {
  Result r = read_all(write_file("valid.hmt", valid_file()));
  ASSERT_EQ(r.open_rc, 0) << r.message;
  ASSERT_EQ(r.next_rc, 0) << r.message;
  ASSERT_EQ(r.events.size(), 6u);
  // merged in time order across the two threads
  uint64_t want_t[] = {100, 200, 300, 400, 500, 600};
  uint32_t want_tid[] = {11, 12, 11, 12, 11, 12};
  unsigned want_type[] = {HPCMEM_EV_MALLOC, HPCMEM_EV_MEMALIGN, HPCMEM_EV_CALLOC, HPCMEM_EV_REALLOC,
                          HPCMEM_EV_FREE, HPCMEM_EV_FREE};
  for (int i = 0; i < 6; i++) {
    EXPECT_EQ(r.events[i].time, want_t[i]) << i;
    EXPECT_EQ(r.events[i].tid, want_tid[i]) << i;
    EXPECT_EQ(r.events[i].type, want_type[i]) << i;
  }
  EXPECT_EQ(r.events[1].align, 64u);
  EXPECT_EQ(r.events[3].old_ptr, 0x3000u);
  EXPECT_EQ(r.events[3].stack, 3u);
  EXPECT_EQ(r.info.threads, 2u);
  EXPECT_FALSE(r.info.truncated);
  EXPECT_TRUE(r.info.flush.present);
  EXPECT_EQ(r.info.flush.reason, (uint64_t)HMT_FLUSH_EXIT);
  EXPECT_EQ(r.info.flush.events, 3u);
  EXPECT_EQ(r.info.flush.dropped, 0u) << "fields a writer did not write read as 0";
}

// One thread's free and another's allocation of the same address in the
// same tick (rows here, exact times: the same tie).  Thread 11's block
// comes first in the file, so file order alone would put its event first.
std::vector<hmt_event_t> tie_events(const std::vector<Ev> &t11, const std::vector<Ev> &t12, const char *name) {
  bytes f = header_bytes(default_header());
  uint32_t n;
  bytes p = events_payload(t11, t11[0].t, &n);
  append_block(f, HMT_BLOCK_EVENTS, HMT_CODEC_NONE, p, 11, n, t11[0].t);
  p = events_payload(t12, t12[0].t, &n);
  append_block(f, HMT_BLOCK_EVENTS, HMT_CODEC_NONE, p, 12, n, t12[0].t);
  Result r = read_all(write_file(name, f));
  EXPECT_EQ(r.open_rc, 0) << r.message;
  EXPECT_EQ(r.next_rc, 0) << r.message;
  return r.events;
}

TEST(hmt_next, same_tick_free_of_a_live_address_goes_before_its_reuse) {
  // thread 12 holds 0x5000 since t = 100 and frees it at 200; thread 11
  // gets the address back at 200: the free made that possible
  auto ev = tie_events({{HPCMEM_EV_MALLOC, 200, 0x5000, 0, 64, 0, 0}},
                       {{HPCMEM_EV_MALLOC, 100, 0x5000, 0, 32, 0, 0}, {HPCMEM_EV_FREE, 200, 0x5000, 0, 0, 0, 0}},
                       "tie-live.hmt");
  ASSERT_EQ(ev.size(), 3u);
  EXPECT_EQ(ev[1].type, (unsigned)HPCMEM_EV_FREE);
  EXPECT_EQ(ev[1].tid, 12u);
  EXPECT_EQ(ev[2].type, (unsigned)HPCMEM_EV_MALLOC);
  EXPECT_EQ(ev[2].tid, 11u);
  // the same with a realloc that moves the block away from 0x5000
  ev = tie_events({{HPCMEM_EV_MALLOC, 200, 0x5000, 0, 64, 0, 0}},
                  {{HPCMEM_EV_MALLOC, 100, 0x5000, 0, 32, 0, 0}, {HPCMEM_EV_REALLOC, 200, 0x9000, 0x5000, 99, 0, 0}},
                  "tie-live-realloc.hmt");
  ASSERT_EQ(ev.size(), 3u);
  EXPECT_EQ(ev[1].type, (unsigned)HPCMEM_EV_REALLOC);
  EXPECT_EQ(ev[2].tid, 11u);
}

// Each free finds its block live and each allocation an address that is not.
void expect_live_order(const std::vector<hmt_event_t> &ev) {
  std::map<uint64_t, bool> live;
  for (size_t i = 0; i < ev.size(); i++) {
    if (ev[i].type == HPCMEM_EV_FREE) {
      EXPECT_TRUE(live[ev[i].ptr]) << "event " << i << ": free of " << std::hex << ev[i].ptr << ", not live";
      live[ev[i].ptr] = false;
    } else {
      EXPECT_FALSE(live[ev[i].ptr]) << "event " << i << ": allocation of " << std::hex << ev[i].ptr << ", live";
      live[ev[i].ptr] = true;
    }
  }
}

TEST(hmt_next, same_tick_allocation_goes_before_another_threads_free_of_it) {
  // 0x5000 is not live: thread 11 allocates it at 200 and thread 12 frees
  // that very block in the same tick (handed over at once).  Free first
  // would lose the free and keep the block live to the end.
  auto ev = tie_events({{HPCMEM_EV_MALLOC, 200, 0x5000, 0, 64, 0, 0}, {HPCMEM_EV_MALLOC, 300, 0x6000, 0, 8, 0, 0}},
                       {{HPCMEM_EV_MALLOC, 100, 0x7000, 0, 32, 0, 0}, {HPCMEM_EV_FREE, 200, 0x5000, 0, 0, 0, 0}},
                       "tie-not-live.hmt");
  ASSERT_EQ(ev.size(), 4u);
  EXPECT_EQ(ev[1].type, (unsigned)HPCMEM_EV_MALLOC);
  EXPECT_EQ(ev[1].tid, 11u);
  EXPECT_EQ(ev[2].type, (unsigned)HPCMEM_EV_FREE);
  EXPECT_EQ(ev[2].tid, 12u);
  // Open MPI's start-up, as recorded on miniFE: the main thread (12, later
  // in the file) allocates 0x5000, frees another block, frees 0x5000 and
  // allocates it again; the progress thread (11) frees that second block
  // -- all in one tick.  Each free must find its block live.
  ev = tie_events({{HPCMEM_EV_MALLOC, 100, 0x7000, 0, 32, 0, 0}, {HPCMEM_EV_FREE, 200, 0x5000, 0, 0, 0, 0}},
                  {{HPCMEM_EV_MALLOC, 100, 0x6000, 0, 8, 0, 0},
                   {HPCMEM_EV_MALLOC, 200, 0x5000, 0, 15, 0, 0},
                   {HPCMEM_EV_FREE, 200, 0x6000, 0, 0, 0, 0},
                   {HPCMEM_EV_FREE, 200, 0x5000, 0, 0, 0, 0},
                   {HPCMEM_EV_MALLOC, 200, 0x5000, 0, 11, 0, 0}},
                  "tie-handed-over-twice.hmt");
  ASSERT_EQ(ev.size(), 7u);
  expect_live_order(ev);
  EXPECT_EQ(ev[6].tid, 11u);
  EXPECT_EQ(ev[6].type, (unsigned)HPCMEM_EV_FREE);
  // and after hmt_rewind the same order again: the live addresses start
  // afresh (0x5000 is live at the end of the first pass)
  bytes f = header_bytes(default_header());
  uint32_t n;
  bytes p = events_payload({{HPCMEM_EV_MALLOC, 200, 0x5000, 0, 64, 0, 0}, {HPCMEM_EV_MALLOC, 300, 0x5000, 0, 8, 0, 0}},
                           200, &n);
  append_block(f, HMT_BLOCK_EVENTS, HMT_CODEC_NONE, p, 11, n, 200);
  p = events_payload({{HPCMEM_EV_FREE, 200, 0x5000, 0, 0, 0, 0}}, 200, &n);
  append_block(f, HMT_BLOCK_EVENTS, HMT_CODEC_NONE, p, 12, n, 200);
  hmt_reader_t *r;
  hmt_error_t err;
  ASSERT_EQ(hmt_open(write_file("tie-rewind.hmt", f).c_str(), 0, &r, &err), 0) << err.message;
  for (int pass = 0; pass < 2; pass++) {
    hmt_event_t e;
    ASSERT_EQ(hmt_next(r, &e), 1);
    EXPECT_EQ(e.type, (unsigned)HPCMEM_EV_MALLOC) << "pass " << pass;
    ASSERT_EQ(hmt_next(r, &e), 1);
    EXPECT_EQ(e.type, (unsigned)HPCMEM_EV_FREE) << "pass " << pass;
    ASSERT_EQ(hmt_next(r, &e), 1);
    EXPECT_EQ(hmt_next(r, &e), 0);
    hmt_rewind(r);
  }
  hmt_close(r);
}

TEST(hmt_next, same_tick_allocation_of_a_live_address_waits_for_its_free) {
  // a producer (11) hands blocks to a consumer (12), which frees them; in
  // the tick at 200 the consumer frees 0x6000 and 0x5000 and the producer
  // gets 0x5000 back.  The consumer's first free is of a block the producer
  // allocated (that rule alone lets the producer go first): the allocation
  // of the live 0x5000 must still wait for its free.
  auto ev = tie_events({{HPCMEM_EV_MALLOC, 100, 0x5000, 0, 64, 0, 0},
                        {HPCMEM_EV_MALLOC, 100, 0x6000, 0, 64, 0, 0},
                        {HPCMEM_EV_MALLOC, 200, 0x5000, 0, 32, 0, 0}},
                       {{HPCMEM_EV_FREE, 200, 0x6000, 0, 0, 0, 0}, {HPCMEM_EV_FREE, 200, 0x5000, 0, 0, 0, 0}},
                       "tie-handoff.hmt");
  ASSERT_EQ(ev.size(), 5u);
  expect_live_order(ev);
  EXPECT_EQ(ev[4].tid, 11u);
  // five threads: the heap of streams was ordered while 0x5000 was not
  // live, and the consumer's free of it (last in the file) sits below three
  // frees of memory from before the trace, which no allocation of the tick
  // lets go; the producer's second allocation of 0x5000 must still wait
  bytes f = header_bytes(default_header());
  uint32_t n;
  std::vector<std::vector<Ev>> t = {
      {{HPCMEM_EV_MALLOC, 200, 0x5000, 0, 64, 0, 0},
       {HPCMEM_EV_MALLOC, 200, 0x6000, 0, 64, 0, 0},
       {HPCMEM_EV_MALLOC, 200, 0x5000, 0, 8, 0, 0}},
      {{HPCMEM_EV_FREE, 200, 0xa000, 0, 0, 0, 0}},
      {{HPCMEM_EV_FREE, 200, 0xb000, 0, 0, 0, 0}},
      {{HPCMEM_EV_FREE, 200, 0xc000, 0, 0, 0, 0}},
      {{HPCMEM_EV_FREE, 200, 0x5000, 0, 0, 0, 0}}};
  for (size_t i = 0; i < t.size(); i++) {
    bytes p = events_payload(t[i], t[i][0].t, &n);
    append_block(f, HMT_BLOCK_EVENTS, HMT_CODEC_NONE, p, 11 + (uint32_t)i, n, t[i][0].t);
  }
  Result r = read_all(write_file("tie-handoff-5.hmt", f));
  ASSERT_EQ(r.open_rc, 0) << r.message;
  ASSERT_EQ(r.next_rc, 0) << r.message;
  ASSERT_EQ(r.events.size(), 7u);
  std::vector<hmt_event_t> of5000;
  for (auto &e : r.events)
    if (e.ptr == 0x5000) of5000.push_back(e);
  ASSERT_EQ(of5000.size(), 3u);
  expect_live_order(of5000);
}

TEST(hmt_next, same_tick_order_is_searched_when_the_preferred_event_misleads) {
  // 0x5000 is live (thread 12 since t = 100).  In the tick at 200 thread 12
  // frees it, allocates 0x6000, gets 0x5000 back and frees it again, and
  // thread 11 (first in the file) allocates 0x5000 once.  Event by event,
  // once 12's first free is out, 11's allocation and 12's are both allowed
  // and allocations go in file order: 11 took the address 12 needed, and 12's
  // allocation then found it live (a "missing free" in every run of four
  // threads trading large blocks).  Only 11 last has every free find its
  // block live.
  auto ev = tie_events({{HPCMEM_EV_MALLOC, 200, 0x5000, 0, 64, 0, 0}},
                       {{HPCMEM_EV_MALLOC, 100, 0x5000, 0, 32, 0, 0},
                        {HPCMEM_EV_FREE, 200, 0x5000, 0, 0, 0, 0},
                        {HPCMEM_EV_MALLOC, 200, 0x6000, 0, 16, 0, 0},
                        {HPCMEM_EV_MALLOC, 200, 0x5000, 0, 48, 0, 0},
                        {HPCMEM_EV_FREE, 200, 0x5000, 0, 0, 0, 0}},
                       "tie-search.hmt");
  ASSERT_EQ(ev.size(), 6u);
  expect_live_order(ev);
  EXPECT_EQ(ev[5].tid, 11u);
  EXPECT_EQ(ev[5].size, 64u);
}

TEST(hmt_next, same_tick_free_of_memory_from_before_the_trace_holds_nothing_back) {
  // thread 11 frees 0x9000, which no event allocated (memory from before
  // the trace): no order makes that free find its block live, and it must
  // not stop the tick's other events from being ordered by the live
  // addresses (0x5000: 12 frees it, then 11 gets it back)
  auto ev = tie_events({{HPCMEM_EV_FREE, 200, 0x9000, 0, 0, 0, 0}, {HPCMEM_EV_MALLOC, 200, 0x5000, 0, 64, 0, 0}},
                       {{HPCMEM_EV_MALLOC, 100, 0x5000, 0, 32, 0, 0}, {HPCMEM_EV_FREE, 200, 0x5000, 0, 0, 0, 0}},
                       "tie-before-trace.hmt");
  ASSERT_EQ(ev.size(), 4u);
  std::vector<hmt_event_t> of5000;
  for (auto &e : ev)
    if (e.ptr == 0x5000) of5000.push_back(e);
  ASSERT_EQ(of5000.size(), 3u);
  expect_live_order(of5000);
  EXPECT_EQ(of5000[2].tid, 11u);
}

// Format 1.4: every event back exactly (time to the tick of 2^16 ns),
// threads merged, stacks resolved, the extension record skipped.
TEST(hmt_open, model_blocks_read_exactly) {
  Result r = read_all(write_file("model.hmt", model_file()));
  ASSERT_EQ(r.open_rc, 0) << r.message;
  ASSERT_EQ(r.next_rc, 0) << r.message;
  auto ev = model_events();
  std::map<uint32_t, std::vector<hmt_event_t>> by_tid;
  for (auto &e : r.events) by_tid[e.tid].push_back(e);
  ASSERT_EQ(by_tid.size(), 2u);
  std::vector<Ev> a = ev[0];
  a.insert(a.end(), ev[1].begin(), ev[1].end());
  a.insert(a.end(), ev[2].begin(), ev[2].end());
  for (auto [tid, want] : std::vector<std::pair<uint32_t, std::vector<Ev>>>{{11, a}, {12, ev[3]}}) {
    SCOPED_TRACE("tid " + std::to_string(tid));
    auto &got = by_tid[tid];
    ASSERT_EQ(got.size(), want.size());
    for (size_t i = 0; i < want.size(); i++) {
      SCOPED_TRACE("event " + std::to_string(i));
      EXPECT_EQ(got[i].type, want[i].type);
      EXPECT_EQ(got[i].ptr, want[i].ptr);
      EXPECT_EQ(got[i].old_ptr, want[i].old);
      EXPECT_EQ(got[i].time, want[i].t >> 16 << 16);
      if (want[i].type != HPCMEM_EV_FREE) {
        EXPECT_EQ(got[i].size, want[i].size);
        EXPECT_EQ(got[i].align, want[i].align);
        EXPECT_EQ(got[i].stack, want[i].stack);
      }
    }
  }
  EXPECT_EQ(r.info.event_blocks, 4u);
}

TEST(hmt_open, header_and_modules_are_decoded) {
  hmt_reader_t *r;
  hmt_error_t err;
  std::string path = write_file("valid2.hmt", valid_file());
  ASSERT_EQ(hmt_open(path.c_str(), 0, &r, &err), 0) << err.message;
  const hmt_header_t *h = hmt_header(r);
  EXPECT_EQ(h->rank, 1);
  EXPECT_EQ(h->size, 4);
  EXPECT_EQ(h->pid, 4242u);
  EXPECT_STREQ(h->hostname, "node7");
  EXPECT_STREQ(h->jobid, "job99");
  const hmt_module_t *m;
  ASSERT_EQ(hmt_modules(r, &m), 1u);
  EXPECT_STREQ(m[0].path, "/bin/app");
  EXPECT_EQ(m[0].build_id_len, 4u);
  EXPECT_EQ(hmt_module_of(r, 0x401234), &m[0]);
  EXPECT_EQ(hmt_module_of(r, 0x500000), nullptr);
  hmt_event_t ev;
  while (hmt_next(r, &ev) == 1) {}
  const uint64_t *f;
  uint32_t d;
  ASSERT_EQ(hmt_stack(r, 3, &f, &d), 0);
  ASSERT_EQ(d, 3u);
  EXPECT_EQ(f[0], 0x401000u);
  EXPECT_EQ(f[2], 0x403000u);
  // the outer nodes are stacks too: node 2 is the stack of the caller
  ASSERT_EQ(hmt_stack(r, 2, &f, &d), 0);
  ASSERT_EQ(d, 2u);
  EXPECT_EQ(f[0], 0x402000u);
  EXPECT_EQ(hmt_stack(r, 4, &f, &d), -1);
  hmt_close(r);
}

TEST(hmt_open, missing_file_names_it) {
  Result r = read_all("/nonexistent/rank-0.hmt");
  EXPECT_EQ(r.open_rc, -ENOENT);
  EXPECT_NE(r.message.find("/nonexistent/rank-0.hmt"), std::string::npos) << r.message;
}

TEST(hmt_open, each_damage_is_an_error_naming_file_and_offset) {
  struct Want { const char *name; uint64_t offset; const char *text; };
  std::vector<size_t> mo;
  model_file(&mo);
  const uint64_t mb = mo[0];  // the first format 1.4 block
  std::vector<Want> wants = {
      {"err-empty", 0, "file header truncated (0 of 256 bytes)"},
      {"err-short-header", 100, "file header truncated (100 of 256 bytes)"},
      {"err-bad-magic", 0, "not a libhpcmem trace file"},
      {"err-version-2", 8, "format version 2.0 is not supported"},
      {"err-header-checksum", 252, "file header: checksum mismatch"},
      {"err-rank-out-of-range", 0, "file header: field out of range"},
      {"err-block-magic", 256, "block header: bad magic number"},
      {"err-block-header-checksum", 256, "block header: checksum mismatch"},
      {"err-bad-record-type", 256, "malformed record at byte 0"},
      {"err-record-runs-off-the-block", 256, "malformed record at byte 0"},
      {"err-free-with-stack-flag", 256, "malformed record"},
      {"err-count-mismatch", 256, "block holds 1 records, its header says 6"},
      {"err-stack-too-deep", 256, "malformed record"},
      {"err-stack-parent-not-before", 256, "malformed record"},
      {"err-zstd-claims-a-huge-block", 256, "block claims"},
      {"err-zlib-garbage", 256, "zlib payload does not decompress"},
      {"err-modules-short", 256, "MODULES block: malformed entry 0"},
      {"err-flush-malformed", 256, "FLUSH block: malformed"},
      {"err-model-chain-without-predecessor", mb, "continues the models of a block that was not read"},
      {"err-model-raw-len-off", mb, "the block header says"},
      {"err-model-count-off", mb, "malformed block of coded events"},
      {"err-model-head", mb, "malformed head of a block of coded events"},
      {"err-model-without-flag", mb, "not a format 1.4 EVENTS block"},
      {"err-model-claims-a-huge-block", mb, "block claims"},
      {"err-model-flipped", mb, "malformed block of coded events"},
      {"err-model-codec-on-modules", 256, "not a format 1.4 EVENTS block"},
  };
  auto all = crafted();
  for (auto &w : wants) {
    SCOPED_TRACE(w.name);
    std::string path = write_file(std::string(w.name) + ".hmt", all.at(w.name));
    Result r = read_all(path);
    EXPECT_TRUE(r.open_rc < 0 || r.next_rc < 0);
    EXPECT_EQ(r.offset, w.offset) << r.message;
    EXPECT_NE(r.message.find(path + ": offset " + std::to_string(w.offset) + ": "), std::string::npos) << r.message;
    EXPECT_NE(r.message.find(w.text), std::string::npos) << r.message;
  }
  // the payload checksum of the second events block
  bytes good = valid_file();
  std::string path = write_file("err-payload-checksum.hmt", all.at("err-payload-checksum"));
  Result r = read_all(path);
  EXPECT_EQ(r.open_rc, 0);
  EXPECT_LT(r.next_rc, 0);
  EXPECT_NE(r.message.find("block payload checksum mismatch"), std::string::npos) << r.message;
  EXPECT_GT(r.offset, 256u);
  EXPECT_LT(r.offset, good.size());
}

TEST(hmt_open, ok_inputs_read_cleanly) {
  for (auto &c : crafted()) {
    if (c.first.compare(0, 3, "ok-") != 0) continue;
    SCOPED_TRACE(c.first);
    Result r = read_all(write_file(c.first + ".hmt", c.second));
    EXPECT_EQ(r.open_rc, 0) << r.message;
    EXPECT_EQ(r.next_rc, 0) << r.message;
    EXPECT_FALSE(r.info.truncated);
  }
  Result r = read_all(write_file("ext.hmt", crafted().at("ok-extension-record")));
  EXPECT_EQ(r.events.size(), 1u);
  hmt_reader_t *rd;
  hmt_error_t err;
  std::string path = write_file("chain.hmt", crafted().at("ok-stack-chain-incomplete"));
  ASSERT_EQ(hmt_open(path.c_str(), 0, &rd, &err), 0);
  hmt_event_t ev;
  ASSERT_EQ(hmt_next(rd, &ev), 1);
  EXPECT_EQ(ev.stack, 10u);
  while (hmt_next(rd, &ev) == 1) {}
  const uint64_t *fr;
  uint32_t d;
  EXPECT_EQ(hmt_stack(rd, 10, &fr, &d), -1) << "node 9 is not in the file";
  hmt_close(rd);
}

// Cut the file at every byte: up to the header an error, then every complete
// block is read and the cut is reported unless it falls on a block boundary.
TEST(hmt_open, truncated_file_reads_every_complete_block) {
  bytes good = valid_file();
  Result full = read_all(write_file("full.hmt", good));
  ASSERT_EQ(full.events.size(), 6u);
  // block boundaries
  std::vector<size_t> ends;
  for (size_t off = HMT_HEADER_SIZE; off < good.size();) {
    ends.push_back(off);
    off += HMT_BLOCK_HEADER_SIZE + hmt_ld32(&good[off + 8]);
  }
  ends.push_back(good.size());
  for (size_t cut = 0; cut <= good.size(); cut++) {
    SCOPED_TRACE("cut at " + std::to_string(cut));
    std::string path = write_file("cut.hmt", bytes(good.begin(), good.begin() + (long)cut));
    Result r = read_all(path);
    if (cut < HMT_HEADER_SIZE) {
      EXPECT_LT(r.open_rc, 0);
      EXPECT_NE(r.message.find(path), std::string::npos);
      continue;
    }
    ASSERT_EQ(r.open_rc, 0) << r.message;
    ASSERT_EQ(r.next_rc, 0) << r.message;
    bool boundary = std::find(ends.begin(), ends.end(), cut) != ends.end();
    EXPECT_EQ(r.info.truncated, boundary ? 0 : 1);
    if (!boundary) {
      size_t last = 0;
      for (size_t e : ends) if (e < cut) last = e;
      EXPECT_EQ(r.info.truncated_at, last);
    }
    // what is read is what the complete event blocks hold
    size_t complete_blocks = 0;
    for (size_t i = 1; i < ends.size(); i++) if (ends[i] <= cut) complete_blocks++;
    size_t want = complete_blocks >= 3 ? 6 : complete_blocks == 2 ? 3 : 0;
    EXPECT_EQ(r.events.size(), want);
  }
}

// Any flipped bit is an error in strict mode, and salvage mode reads what
// is undamaged (except in the file header, which nothing can replace).
TEST(hmt_open, any_flipped_bit_is_caught) {
  bytes good = valid_file();
  for (size_t i = 0; i < good.size(); i++) {
    for (int bit : {0, 5}) {
      SCOPED_TRACE("byte " + std::to_string(i) + " bit " + std::to_string(bit));
      bytes x = good;
      x[i] ^= (uint8_t)(1 << bit);
      std::string path = write_file("flip.hmt", x);
      Result r = read_all(path);
      ASSERT_TRUE(r.open_rc < 0 || r.next_rc < 0) << "damage not detected";
      EXPECT_NE(r.message.find(path + ": offset "), std::string::npos) << r.message;
      Result s = read_all(path, HMT_OPEN_SALVAGE);
      if (i < HMT_HEADER_SIZE) {
        EXPECT_LT(s.open_rc, 0);
      } else {
        EXPECT_EQ(s.open_rc, 0) << s.message;
        EXPECT_EQ(s.next_rc, 0) << s.message;
        EXPECT_GE(s.info.skipped_blocks, 1u);
        EXPECT_LE(s.events.size(), 6u);
      }
    }
  }
}

// The same for a file of format 1.4 blocks: cut anywhere, it reads its
// complete blocks; a flipped bit is caught by the checksums, and salvage
// reads around it (a thread's chained blocks after a damaged one go with it).
TEST(hmt_open, model_file_cut_or_flipped_anywhere) {
  std::vector<size_t> mo;
  bytes good = model_file(&mo);
  Result full = read_all(write_file("m-full.hmt", good));
  ASSERT_EQ(full.next_rc, 0) << full.message;
  for (size_t cut = HMT_HEADER_SIZE; cut <= good.size(); cut += 7) {
    SCOPED_TRACE("cut at " + std::to_string(cut));
    Result r = read_all(write_file("m-cut.hmt", bytes(good.begin(), good.begin() + (long)cut)));
    ASSERT_EQ(r.open_rc, 0) << r.message;
    ASSERT_EQ(r.next_rc, 0) << r.message;
    EXPECT_LE(r.events.size(), full.events.size());
  }
  for (size_t i = HMT_HEADER_SIZE; i < good.size(); i += 3) {
    SCOPED_TRACE("byte " + std::to_string(i));
    bytes x = good;
    x[i] ^= 0x08;
    std::string path = write_file("m-flip.hmt", x);
    Result r = read_all(path);
    ASSERT_TRUE(r.open_rc < 0 || r.next_rc < 0) << "damage not detected";
    Result sv = read_all(path, HMT_OPEN_SALVAGE);
    EXPECT_EQ(sv.next_rc, 0) << sv.message;
    EXPECT_LT(sv.events.size(), full.events.size() + 1);
  }
}

// Coded bytes changed under recomputed checksums (what the fuzzer does):
// the decoder never crashes, and nearly always notices -- the range coder
// must use up the payload exactly and the rows must come to raw_len.
TEST(hmt_open, model_payload_damaged_under_good_checksums) {
  std::vector<size_t> mo;
  bytes good = model_file(&mo);
  size_t tried = 0, caught = 0;
  for (size_t k = 0; k < mo.size(); k++) {
    size_t from = mo[k] + HMT_BLOCK_HEADER_SIZE, len = hmt_ld32(&good[mo[k] + 8]);
    for (size_t i = from; i < from + len; i++) {
      bytes x = good;
      x[i] ^= (uint8_t)(1u << (i % 8));
      hmt_fuzz_fix_checksums(x.data(), x.size());
      Result r = read_all(write_file("m-damage.hmt", x));
      tried++;
      caught += r.open_rc < 0 || r.next_rc < 0;
      Result sv = read_all(write_file("m-damage.hmt", x), HMT_OPEN_SALVAGE);
      EXPECT_EQ(sv.next_rc, 0) << sv.message;
    }
  }
  EXPECT_GE(caught * 100, tried * 95) << caught << " of " << tried << " caught";
  RecordProperty("caught", std::to_string(caught) + " of " + std::to_string(tried));
}

TEST(hmt_open, salvage_resynchronises_after_a_damaged_block_header) {
  bytes good = valid_file();
  size_t first_events = HMT_HEADER_SIZE + HMT_BLOCK_HEADER_SIZE + hmt_ld32(&good[HMT_HEADER_SIZE + 8]);
  bytes x = good;
  x[first_events + 3] ^= 0xff;  // magic of the first EVENTS block
  Result r = read_all(write_file("resync.hmt", x), HMT_OPEN_SALVAGE);
  ASSERT_EQ(r.open_rc, 0) << r.message;
  EXPECT_EQ(r.events.size(), 3u) << "the other thread's block is found again";
  EXPECT_EQ(r.info.skipped_blocks, 1u);
  EXPECT_GT(r.info.skipped_bytes, (uint64_t)HMT_BLOCK_HEADER_SIZE);
  EXPECT_TRUE(r.info.flush.present);
}

TEST(hmt_rewind, reads_the_same_events_again) {
  // rows, and format 1.4 blocks chained across a thread: the second pass
  // gives every event again exactly -- times, threads, merge order
  std::vector<size_t> mo;
  for (const bytes &file : {valid_file(), model_file(&mo)}) {
    hmt_reader_t *r;
    hmt_error_t err;
    std::string path = write_file("rw.hmt", file);
    ASSERT_EQ(hmt_open(path.c_str(), 0, &r, &err), 0) << err.message;
    hmt_event_t ev;
    std::vector<hmt_event_t> p1, p2;
    while (hmt_next(r, &ev) == 1) p1.push_back(ev);
    EXPECT_EQ(hmt_progress(r), hmt_info(r)->stored_bytes + hmt_info(r)->event_blocks * HMT_BLOCK_HEADER_SIZE);
    hmt_rewind(r);
    while (hmt_next(r, &ev) == 1) p2.push_back(ev);
    hmt_close(r);
    ASSERT_GE(p1.size(), 6u);
    ASSERT_EQ(p1.size(), p2.size());
    for (size_t i = 0; i < p1.size(); i++) {
      EXPECT_EQ(p2[i].time, p1[i].time) << "event " << i;
      EXPECT_EQ(p2[i].tid, p1[i].tid) << "event " << i;
      EXPECT_EQ(p2[i].type, p1[i].type) << "event " << i;
      EXPECT_EQ(p2[i].ptr, p1[i].ptr) << "event " << i;
      EXPECT_EQ(p2[i].old_ptr, p1[i].old_ptr) << "event " << i;
      EXPECT_EQ(p2[i].size, p1[i].size) << "event " << i;
      EXPECT_EQ(p2[i].stack, p1[i].stack) << "event " << i;
    }
  }
}

// The committed corpus: every file through the fuzz entry point (which
// aborts on a crash-worthy finding), and each one's expected outcome.
TEST(hmt_fuzz, corpus_runs_clean) {
  const char *src = getenv("top_srcdir");
  std::string dir = std::string(src ? src : "..") + "/tests/trace/corpus";
  DIR *d = opendir(dir.c_str());
  ASSERT_NE(d, nullptr) << dir;
  int n = 0;
  while (dirent *e = readdir(d)) {
    std::string name = e->d_name;
    if (name[0] == '.') continue;
    SCOPED_TRACE(name);
    std::ifstream in(dir + "/" + name, std::ios::binary);
    bytes b((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    LLVMFuzzerTestOneInput(b.data(), b.size());
    Result r = read_all(dir + "/" + name);
    if (name.compare(0, 3, "ok-") == 0) {
      EXPECT_EQ(r.open_rc, 0) << r.message;
      EXPECT_EQ(r.next_rc, 0) << r.message;
      EXPECT_FALSE(r.info.truncated);
    } else if (name.compare(0, 6, "trunc-") == 0) {
      EXPECT_EQ(r.open_rc, 0) << r.message;
      EXPECT_TRUE(r.info.truncated);
    } else if (name.compare(0, 4, "err-") == 0) {
      EXPECT_TRUE(r.open_rc < 0 || r.next_rc < 0);
    }
    n++;
  }
  closedir(d);
  EXPECT_GE(n, 20) << "the corpus is in " << dir;
}

}  // namespace

int main(int argc, char **argv) {
  if (const char *out = getenv("HPCMEM_WRITE_CORPUS")) {
    for (auto &c : crafted())
      std::ofstream(std::string(out) + "/" + c.first + ".hmt", std::ios::binary)
          .write((const char *)c.second.data(), (std::streamsize)c.second.size());
    return 0;
  }
  testing::InitGoogleTest(&argc, argv);
  int rc = RUN_ALL_TESTS();
  std::string cmd = "rm -rf '" + tmpdir() + "'";
  if (system(cmd.c_str()) != 0) rc = 1;
  return rc;
}
