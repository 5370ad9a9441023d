/* Public entry points of the contiguous arenas (include/hpcmem_contig.h).
 * The work and the messages are in src/place/contig.c; this layer turns
 * negative codes into errno for the allocation function. */
#include "config.h"
#include "hpcmem_contig.h"
#include "place/contig.h"
#include <errno.h>

#define EXPORT __attribute__((visibility("default")))

EXPORT int hpcmem_contig_create(const hpcmem_contig_config_t *cfg, hpcmem_contig_t **out) {
  return _hpcmem_contig_create(cfg, out);
}

EXPORT void *hpcmem_contig_malloc(hpcmem_contig_t *a, size_t size) {
  int err = 0;
  void *p = _hpcmem_contig_alloc(a, size, &err);
  if (!p) errno = -err;
  return p;
}

EXPORT int hpcmem_contig_free(hpcmem_contig_t *a, void *p) { return _hpcmem_contig_release(a, p); }

EXPORT int hpcmem_contig_destroy(hpcmem_contig_t *a) { return _hpcmem_contig_destroy(a); }

EXPORT int hpcmem_contig_stats(const hpcmem_contig_t *a, hpcmem_contig_stats_t *out) {
  return _hpcmem_contig_get_stats(a, out);
}

EXPORT int hpcmem_contig_region(const hpcmem_contig_t *a, int i, hpcmem_contig_region_t *out) {
  return _hpcmem_contig_get_region(a, i, out);
}

EXPORT int hpcmem_contig_block(const hpcmem_contig_t *a, const void *p, hpcmem_contig_block_t *out) {
  return _hpcmem_contig_get_block(a, p, out);
}

EXPORT hpcmem_contig_t *hpcmem_contig_owner(const void *p) { return _hpcmem_contig_owner(p); }
