/* Logging without the heap: messages are formatted on the stack and written
 * with write(2), so they are safe inside malloc and in signal handlers. */
#ifndef HPCMEM_UTIL_LOG_H
#define HPCMEM_UTIL_LOG_H
#include <stdarg.h>
#include <stddef.h>

#define HPCMEM_PRINTF(a, b) __attribute__((format(printf, a, b)))

/* "libhpcmem: warning: ..." on stderr */
void _hpcmem_warn(const char *fmt, ...) HPCMEM_PRINTF(1, 2);
/* "libhpcmem: ..." on stderr */
void _hpcmem_info(const char *fmt, ...) HPCMEM_PRINTF(1, 2);
/* "libhpcmem: error: ..." on stderr, then abort() */
void _hpcmem_fatal(const char *fmt, ...) HPCMEM_PRINTF(1, 2) __attribute__((noreturn));
/* Format into buf (always terminated); returns bytes written. */
size_t _hpcmem_vformat(char *buf, size_t len, const char *fmt, va_list ap);
void _hpcmem_write_all(int fd, const char *buf, size_t len);

#endif
