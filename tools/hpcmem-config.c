/* hpcmem-config: what this libhpcmem is and how it is set up.
 *   hpcmem-config --version      library version
 *   hpcmem-config --options      effective HPCMEM_* settings in this environment
 *   hpcmem-config --markdown     the reference table of docs/environment.md */
#include <stdio.h>
#include <string.h>
#include "hpcmem.h"

static int usage(FILE *out) {
  fprintf(out, "usage: hpcmem-config --version | --options | --markdown\n");
  return out == stderr ? 2 : 0;
}

int main(int argc, char **argv) {
  hpcmem_report_mode(0);   /* a tool: no memory report of its own */
  if (argc != 2) return usage(stderr);
  if (strcmp(argv[1], "--version") == 0) { printf("%s\n", hpcmem_version()); return 0; }
  if (strcmp(argv[1], "--options") == 0) return hpcmem_options_print(stdout, 0) ? 1 : 0;
  if (strcmp(argv[1], "--markdown") == 0) return hpcmem_options_print(stdout, 1) ? 1 : 0;
  if (strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0) return usage(stdout);
  fprintf(stderr, "hpcmem-config: unknown argument '%s'\n", argv[1]);
  return usage(stderr);
}
