/* A small program with a thread, for test_hot_text.sh's page counts: the
 * main thread and a second one each allocate, reallocate and free objects
 * of a few small sizes and one large block (the second thread frees NULL
 * before its first malloc), then the program prints
 *   - without arguments: its own /proc/self/smaps;
 *   - with --pages: "page OFFSET" for each page of libhpcmem's .bss (the
 *     anonymous mapping right after its last file mapping) that is present
 *     in /proc/self/pagemap, OFFSET from libhpcmem's load address (the
 *     addresses nm prints).  A page that was only read is present too (the
 *     zero page, where the kernel has one), so the list does not depend on
 *     the kernel.
 * Files are read with read(2) into stack buffers, so that printing adds no
 * heap and touches no variable of libhpcmem's. */
#include <fcntl.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static void work(void) {
  void *p[64];
  for (int i = 0; i < 64; i++) {
    p[i] = malloc(16 + (size_t)i * 24);
    if (!p[i]) abort();
    memset(p[i], i, 16);
  }
  for (int i = 0; i < 64; i += 2) {
    p[i] = realloc(p[i], 40 + (size_t)i * 24);
    if (!p[i]) abort();
  }
  for (int i = 0; i < 64; i++) free(p[i]);
  char *big = malloc(256 << 10);
  if (!big) abort();
  big[0] = 1;
  free(big);
}

/* free(NULL) before the thread's first malloc runs on the placeholder cache
 * (src/heap/tcache.c), through a pointer the compiler cannot see through */
static void (*volatile free_fn)(void *) = free;

static void *thread_main(void *arg) {
  (void)arg;
  free_fn(NULL);
  work();
  return NULL;
}

static int copy_out(const char *path) {
  int fd = open(path, O_RDONLY);
  if (fd < 0) {
    perror(path);
    return 2;
  }
  char buf[8192];
  ssize_t n;
  while ((n = read(fd, buf, sizeof buf)) > 0)
    if (write(1, buf, (size_t)n) != n) return 2;
  close(fd);
  return n < 0 ? 2 : 0;
}

static int print_pages(void) {
  static char maps[1 << 16];   /* the program's own .bss, not libhpcmem's */
  int fd = open("/proc/self/maps", O_RDONLY);
  if (fd < 0) return perror("/proc/self/maps"), 2;
  size_t len = 0;
  ssize_t n;
  while (len < sizeof maps - 1 && (n = read(fd, maps + len, sizeof maps - 1 - len)) > 0) len += (size_t)n;
  close(fd);
  maps[len] = 0;
  uintptr_t base = 0, last_end = 0, lo = 0, hi = 0;
  for (char *line = maps; *line;) {
    char *nl = strchr(line, '\n');
    if (nl) *nl = 0;
    unsigned long s, e;
    char perm[8];
    int path_at = 0;
    if (sscanf(line, "%lx-%lx %7s %*s %*s %*s %n", &s, &e, perm, &path_at) >= 3) {
      const char *path = path_at ? line + path_at : "";
      const char *slash = strrchr(path, '/');
      if (slash && strncmp(slash + 1, "libhpcmem.so", 12) == 0) {   /* not a build directory named so */
        if (!base) base = s;
        last_end = e;
      } else if (!*path && last_end && s == last_end && !lo) {
        lo = s;
        hi = e;
      }
    }
    if (!nl) break;
    line = nl + 1;
  }
  if (!base || !lo) return fprintf(stderr, "no libhpcmem .bss mapping in /proc/self/maps\n"), 2;
  fd = open("/proc/self/pagemap", O_RDONLY);
  if (fd < 0) return perror("/proc/self/pagemap"), 2;
  static uintptr_t present[4096];   /* all read before stdio's first malloc */
  size_t np = 0;
  for (uintptr_t a = lo; a < hi && np < sizeof present / sizeof present[0]; a += 4096) {
    uint64_t v;
    if (pread(fd, &v, sizeof v, (off_t)(a / 4096 * 8)) != sizeof v) return perror("pagemap"), 2;
    if (v >> 63) present[np++] = a - base;
  }
  close(fd);
  for (size_t i = 0; i < np; i++) printf("page %lx\n", (unsigned long)present[i]);
  return 0;
}

int main(int argc, char **argv) {
  pthread_t t;
  work();
  if (pthread_create(&t, NULL, thread_main, NULL) != 0 || pthread_join(t, NULL) != 0) {
    perror("pthread_create");
    return 2;
  }
  if (argc > 1 && strcmp(argv[1], "--pages") == 0) return print_pages();
  return copy_out("/proc/self/smaps");
}
