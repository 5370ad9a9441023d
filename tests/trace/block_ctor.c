/* For tests/trace/vfork_lock_app.c: a library whose constructor blocks.
 * dlopen runs constructors holding the dynamic loader's lock, so while
 * this one waits, the thread that loads it holds that lock.  HMT_BLOCK_FDS
 * is "R W": the constructor writes one byte to W (it has started), then
 * waits until R gives one byte or closes. */
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

__attribute__((constructor)) static void block(void) {
  const char *fds = getenv("HMT_BLOCK_FDS");
  int r, w;
  char c = 1;
  if (!fds || sscanf(fds, "%d %d", &r, &w) != 2) return;
  if (write(w, &c, 1) != 1) return;
  while (read(r, &c, 1) < 0) {
  }
}
