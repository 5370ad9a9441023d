/* Contiguous regions (CLMalloc): an arena is one reserved range cut into
 * regions; one bitmap of chunks covers all of them, so a run found by first
 * fit may cross region boundaries.  The tables live in prim memory (this
 * layer is inside the allocator).  Every function that reports an error
 * also prints one warning naming the public function it serves. */
#ifndef HPCMEM_PLACE_CONTIG_H
#define HPCMEM_PLACE_CONTIG_H
#include <stddef.h>
#include "hpcmem_contig.h"

#define HPCMEM_CONTIG_MAX_ARENAS 256   /* live arenas at one time */
#define HPCMEM_CONTIG_DEFAULT_CHUNK ((size_t)64 << 10)

int _hpcmem_contig_create(const hpcmem_contig_config_t *cfg, hpcmem_contig_t **out);
/* NULL and *err = -errno on failure. */
void *_hpcmem_contig_alloc(hpcmem_contig_t *a, size_t size, int *err);
int _hpcmem_contig_release(hpcmem_contig_t *a, void *p);
int _hpcmem_contig_destroy(hpcmem_contig_t *a);
/* 1 if a is a live arena (found without dereferencing a). */
int _hpcmem_contig_valid(const hpcmem_contig_t *a);
int _hpcmem_contig_get_stats(const hpcmem_contig_t *a, hpcmem_contig_stats_t *out);
int _hpcmem_contig_get_region(const hpcmem_contig_t *a, int i, hpcmem_contig_region_t *out);
int _hpcmem_contig_get_block(const hpcmem_contig_t *a, const void *p, hpcmem_contig_block_t *out);
/* The live arena whose range holds p, or NULL: lets free() name the right
 * function when handed a contiguous pointer. */
hpcmem_contig_t *_hpcmem_contig_owner(const void *p);

#endif
