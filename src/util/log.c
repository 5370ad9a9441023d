/* Logging without the heap (see log.h). */
#include "config.h"
#include "util/log.h"
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

size_t _hpcmem_vformat(char *buf, size_t len, const char *fmt, va_list ap) {
  int n = vsnprintf(buf, len, fmt, ap);
  if (n < 0) n = 0;
  return (size_t)n < len ? (size_t)n : len - 1;
}

void _hpcmem_write_all(int fd, const char *buf, size_t len) {
  int saved = errno;  /* logging must not disturb the caller's errno */
  while (len > 0) {
    ssize_t w = write(fd, buf, len);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) break;
    buf += w; len -= (size_t)w;
  }
  errno = saved;
}

static void vlog(const char *prefix, const char *fmt, va_list ap) {
  char buf[1024];
  size_t n = 0;
  for (const char *p = prefix; *p && n < sizeof buf - 2; p++) buf[n++] = *p;
  n += _hpcmem_vformat(buf + n, sizeof buf - n - 1, fmt, ap);
  buf[n++] = '\n';
  _hpcmem_write_all(2, buf, n);
}

void _hpcmem_warn(const char *fmt, ...) {
  va_list ap; va_start(ap, fmt); vlog("libhpcmem: warning: ", fmt, ap); va_end(ap);
}

void _hpcmem_info(const char *fmt, ...) {
  va_list ap; va_start(ap, fmt); vlog("libhpcmem: ", fmt, ap); va_end(ap);
}

void _hpcmem_fatal(const char *fmt, ...) {
  va_list ap; va_start(ap, fmt); vlog("libhpcmem: error: ", fmt, ap); va_end(ap);
  abort();
}
