/* Public placement API (include/hpcmem_place.h): argument checks, errno
 * for the allocation function, and the calls into src/place. */
#include "config.h"
#include "hpcmem_place.h"
#include "api/internal.h"
#include "place/place.h"
#include <errno.h>
#include <string.h>

int hpcmem_place_attr_init(hpcmem_place_attr_t *a) {
  if (!a) return -EINVAL;
  memset(a, 0, sizeof *a);
  a->split = HPCMEM_SPLIT_OS;
  a->mapping = HPCMEM_MAP_IMMEDIATE;
  a->mismatch = HPCMEM_MISMATCH_FALLBACK;
  a->priority = 1;
  return 0;
}

int hpcmem_place_attr_add(hpcmem_place_attr_t *a, int cls, int index) {
  if (!_hpcmem_ready) _hpcmem_init();
  return _hpcmem_place_attr_add(a, cls, index);
}

void *hpcmem_place_alloc(size_t size, const hpcmem_place_attr_t *attr) {
  if (!_hpcmem_ready) _hpcmem_init();
  int err = 0;
  void *p = _hpcmem_place_alloc(size, attr, &err);
  if (!p) errno = err;
  return p;
}

int hpcmem_place_free(void *p) {
  if (!p) return -EINVAL;
  return _hpcmem_place_free(p);
}

int hpcmem_commit(int flags) { return _hpcmem_place_commit(flags); }

int hpcmem_where(const void *p, size_t len, hpcmem_where_t *out, int max) {
  return _hpcmem_place_where(p, len, out, max);
}

int hpcmem_classes(hpcmem_class_info_t *out, int max) {
  if (!_hpcmem_ready) _hpcmem_init();
  return _hpcmem_place_classes(out, max);
}

int hpcmem_class_limit(int cls, uint64_t bytes) { return _hpcmem_place_limit(cls, bytes); }

int hpcmem_place_stats(hpcmem_place_stats_t *out) {
  if (!out) return -EINVAL;
  _hpcmem_place_get_stats(out);
  return 0;
}
