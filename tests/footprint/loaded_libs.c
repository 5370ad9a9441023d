/* Which shared objects a process has mapped after its first malloc.
 *
 * Prints one line per library of /proc/self/maps whose file name contains
 * one of the words given on the command line ("libmpi", "hwloc", ...), then
 * "libhpcmem: yes|no" so the caller can tell the allocator was there at all.
 * No assertion on RSS: the set of libraries is what decides the fixed cost,
 * and it does not depend on the machine's load. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static volatile void *sink;

int main(int argc, char **argv) {
  sink = malloc(1);
  free((void *)sink);
  FILE *f = fopen("/proc/self/maps", "r");
  if (!f) {
    perror("/proc/self/maps");
    return 2;
  }
  char line[4096], last[4096] = "";
  int hpcmem = 0;
  while (fgets(line, sizeof line, f)) {
    char *path = strchr(line, '/');
    if (!path) continue;
    path[strcspn(path, "\n")] = 0;
    const char *base = strrchr(path, '/') + 1;
    if (strstr(base, "libhpcmem")) hpcmem = 1;
    if (strcmp(path, last) == 0) continue;   /* one line per library, not per mapping */
    snprintf(last, sizeof last, "%s", path);
    for (int i = 1; i < argc; i++)
      if (strstr(base, argv[i])) {
        printf("%s\n", path);
        break;
      }
  }
  fclose(f);
  printf("libhpcmem: %s\n", hpcmem ? "yes" : "no");
  return 0;
}
