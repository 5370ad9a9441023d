/* Version of the library, from the VERSION file through configure. */
#include "config.h"
#include "hpcmem.h"
#include <errno.h>

const char *hpcmem_version(void) { return PACKAGE_VERSION; }

int hpcmem_version_numbers(int *major, int *minor, int *patch) {
  if (!major || !minor || !patch) return -EINVAL;
  *major = HPCMEM_VERSION_MAJOR;
  *minor = HPCMEM_VERSION_MINOR;
  *patch = HPCMEM_VERSION_PATCH;
  return 0;
}
