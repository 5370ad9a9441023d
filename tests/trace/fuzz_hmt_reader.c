/* Fuzz target for the trace reader (tools/hmt_reader.c).
 *
 * Built with clang's libFuzzer when available (`make fuzz-hmt-reader`, see
 * docs/trace-format.md); the same entry point runs over the committed
 * corpus in `make check` (tests/unit/test_trace_reader).
 *
 * Every input is read twice: as given (the checksums reject almost every
 * mutation, which tests that path) and with its header and block checksums
 * recomputed, so that mutations reach the block and record decoders.  Both
 * strict and salvage modes run.  The reader must return an error or data,
 * never crash, hang or leak. */
#define _GNU_SOURCE
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <stdio.h>
#include <unistd.h>
#include "hmt_reader.h"

/* Recompute the header CRC and each block's CRCs in place (as far as the
 * block headers chain). */
void hmt_fuzz_fix_checksums(uint8_t *d, size_t n) {
  if (n < HMT_HEADER_SIZE || memcmp(d, HMT_FILE_MAGIC, 8) != 0) return;
  hmt_st32(d + 252, hmt_crc32c(0, d, 252));
  size_t off = HMT_HEADER_SIZE;
  while (off + HMT_BLOCK_HEADER_SIZE <= n && hmt_ld32(d + off) == HMT_BLOCK_MAGIC) {
    uint32_t stored = hmt_ld32(d + off + 8);
    size_t avail = n - off - HMT_BLOCK_HEADER_SIZE;
    size_t len = stored < avail ? stored : avail;
    hmt_st32(d + off + 48, hmt_crc32c(0, d + off + HMT_BLOCK_HEADER_SIZE, len));
    hmt_st32(d + off + 52, hmt_crc32c(0, d + off, 52));
    if (stored > avail) break;
    off += HMT_BLOCK_HEADER_SIZE + stored;
  }
}

/* Read everything the tools would read; returns the result of the last call. */
int hmt_fuzz_read_path(const char *path, int flags) {
  hmt_reader_t *r;
  hmt_error_t err;
  int rc = hmt_open(path, flags, &r, &err);
  if (rc) {
    if (!strstr(err.message, path)) abort();  /* an error always names the file */
    return rc;
  }
  hmt_event_t ev;
  int k;
  uint64_t n = 0;
  while ((k = hmt_next(r, &ev)) == 1) {
    const uint64_t *f;
    uint32_t depth;
    if (ev.stack && hmt_stack(r, ev.stack, &f, &depth) == 0)
      for (uint32_t i = 0; i < depth; i++) (void)hmt_module_of(r, f[i]);
    if (++n > 100000000) abort();  /* a loop that never ends */
  }
  if (k < 0 && !strstr(hmt_error(r)->message, path)) abort();
  hmt_close(r);
  return k;
}

static int read_buffer(const uint8_t *data, size_t size, int flags) {
  int fd = memfd_create("hmt-fuzz", MFD_CLOEXEC);
  if (fd < 0) return -1;
  if (size && write(fd, data, size) != (ssize_t)size) { close(fd); return -1; }
  char path[64];
  snprintf(path, sizeof path, "/proc/self/fd/%d", fd);
  int rc = hmt_fuzz_read_path(path, flags);
  close(fd);
  return rc;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  read_buffer(data, size, 0);
  uint8_t *copy = malloc(size ? size : 1);
  if (!copy) return 0;
  memcpy(copy, data, size);
  hmt_fuzz_fix_checksums(copy, size);
  read_buffer(copy, size, 0);
  read_buffer(copy, size, HMT_OPEN_SALVAGE);
  free(copy);
  return 0;
}
