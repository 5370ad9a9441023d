/* Slabs of node planes along z and the local numbering with ghost planes
 * (their exchange is in alloc.c, next to the shared segment it may use). */
#include "config.h"
#include "minife.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>

int minife_decompose(int nx, int ny, int nz, int rank, int nranks, double imbalance, decomp_t *d)
{
  int planes = nz + 1;
  double total = 0.0, sum = 0.0;
  int lo = 0, hi = 0;

  if (nx < 1 || ny < 1 || nz < 1 || nranks < 1 || rank < 0 || rank >= nranks || !(imbalance >= 0.0)
      || planes < nranks)
    return -EINVAL;
  for (int r = 0; r < nranks; r++)
    total += 1.0 + (nranks > 1 ? imbalance * r / (nranks - 1) : 0.0);
  /* boundaries from cumulative weights; every rank keeps at least one plane */
  for (int r = 0; r <= rank; r++) {
    lo = hi;
    sum += 1.0 + (nranks > 1 ? imbalance * r / (nranks - 1) : 0.0);
    hi = (int)lround(planes * sum / total);
    if (hi < lo + 1)
      hi = lo + 1;
    if (hi > planes - (nranks - 1 - r))
      hi = planes - (nranks - 1 - r);
  }
  d->nx = nx;
  d->ny = ny;
  d->nz = nz;
  d->rank = rank;
  d->nranks = nranks;
  d->k0 = lo;
  d->k1 = rank == nranks - 1 ? planes : hi;
  d->below = rank > 0 ? rank - 1 : -1;
  d->above = rank < nranks - 1 ? rank + 1 : -1;
  d->plane = (int64_t)(nx + 1) * (ny + 1);
  d->nown = (int64_t)(d->k1 - d->k0) * d->plane;
  d->nlocal = d->nown + (d->below >= 0 ? d->plane : 0) + (d->above >= 0 ? d->plane : 0);
  return 0;
}

int64_t minife_local(const decomp_t *d, int i, int j, int k)
{
  int64_t in_plane = (int64_t)j * (d->nx + 1) + i;
  if (i < 0 || j < 0 || i > d->nx || j > d->ny)
    return -1;
  if (k >= d->k0 && k < d->k1)
    return (int64_t)(k - d->k0) * d->plane + in_plane;
  if (k == d->k0 - 1 && d->below >= 0)
    return d->nown + in_plane;
  if (k == d->k1 && d->above >= 0)
    return d->nown + (d->below >= 0 ? d->plane : 0) + in_plane;
  return -1;
}
