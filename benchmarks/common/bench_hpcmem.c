#include "config.h"
#include "bench_hpcmem.h"
#include "bench_util.h"

#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static bench_hpcmem_t api;
static int have;  /* BENCH_HPCMEM_* bits */
static char provider[256];
static char why_seg[512], why_place[512];
static pthread_once_t once = PTHREAD_ONCE_INIT;

/* dlsym returns data pointers; POSIX guarantees they convert to functions */
#define LOOKUP(field, name, missing)                          \
  do {                                                        \
    void *sym_ = dlsym(RTLD_DEFAULT, name);                   \
    if (sym_ == NULL && (missing) == NULL)                    \
      (missing) = name;                                       \
    memcpy(&api.field, &sym_, sizeof sym_);                   \
  } while (0)

static const char *base_name(const char *path)
{
  const char *slash = strrchr(path, '/');
  return slash != NULL ? slash + 1 : path;
}

static void find_provider(void)
{
  Dl_info info;
  void *m = dlsym(RTLD_DEFAULT, "malloc");

  if (m != NULL && dladdr(m, &info) != 0 && info.dli_fname != NULL && info.dli_fname[0] != '\0')
    snprintf(provider, sizeof provider, "%s", base_name(info.dli_fname));
  else
    snprintf(provider, sizeof provider, "the program");
}

/* libhpcmem must be the malloc: a segment block handed to another
 * allocator's free, or libhpcmem loaded beside another malloc, would
 * measure something else than either. */
static int same_object(void *fn, void *malloc_fn)
{
  Dl_info a, b;
  if (fn == NULL || malloc_fn == NULL || dladdr(fn, &a) == 0 || dladdr(malloc_fn, &b) == 0)
    return 0;
  return a.dli_fbase == b.dli_fbase;
}

static void explain(char *buf, size_t len, const char *missing, const char *first)
{
  if (missing != NULL && first == NULL)
    snprintf(buf, len,
             "needs libhpcmem as the process's malloc; this run's malloc is %s "
             "(run it with LD_PRELOAD=libhpcmem.so)", provider);
  else if (missing != NULL)
    snprintf(buf, len, "needs a libhpcmem with %s; the loaded one lacks it", missing);
  else
    snprintf(buf, len,
             "needs libhpcmem as the process's malloc; libhpcmem is loaded but malloc comes from %s",
             provider);
}

static void load(void)
{
  const char *miss_seg = NULL, *miss_place = NULL;
  void *m = dlsym(RTLD_DEFAULT, "malloc");

  find_provider();
  LOOKUP(malloc_seg, "hpcmem_malloc_seg", miss_seg);
  LOOKUP(free_seg, "hpcmem_free_seg", miss_seg);
  LOOKUP(seg_of, "hpcmem_seg_of", miss_seg);
  LOOKUP(seg_info, "hpcmem_seg_info", miss_seg);
  LOOKUP(seg_offset, "hpcmem_seg_offset", miss_seg);
  LOOKUP(seg_pointer, "hpcmem_seg_pointer", miss_seg);
  LOOKUP(seg_name, "hpcmem_seg_name", miss_seg);
  LOOKUP(place_alloc, "hpcmem_place_alloc", miss_place);
  LOOKUP(place_attr_init, "hpcmem_place_attr_init", miss_place);
  LOOKUP(place_attr_add, "hpcmem_place_attr_add", miss_place);
  LOOKUP(place_free, "hpcmem_place_free", miss_place);
  LOOKUP(commit, "hpcmem_commit", miss_place);
  LOOKUP(where, "hpcmem_where", miss_place);
  LOOKUP(classes, "hpcmem_classes", miss_place);
  LOOKUP(class_limit, "hpcmem_class_limit", miss_place);
  LOOKUP(place_stats, "hpcmem_place_stats", miss_place);

  void *seg_fn, *place_fn;
  memcpy(&seg_fn, &api.malloc_seg, sizeof seg_fn);
  memcpy(&place_fn, &api.place_alloc, sizeof place_fn);
  if (miss_seg == NULL && same_object(seg_fn, m))
    have |= BENCH_HPCMEM_SEGMENTS;
  else
    explain(why_seg, sizeof why_seg, miss_seg, seg_fn == NULL && place_fn == NULL ? NULL : "loaded");
  if (miss_place == NULL && same_object(place_fn, m))
    have |= BENCH_HPCMEM_PLACEMENT;
  else
    explain(why_place, sizeof why_place, miss_place, seg_fn == NULL && place_fn == NULL ? NULL : "loaded");
}

const bench_hpcmem_t *bench_hpcmem_get(int which, const char **why)
{
  pthread_once(&once, load);
  if (which != BENCH_HPCMEM_SEGMENTS && which != BENCH_HPCMEM_PLACEMENT) {
    if (why != NULL)
      *why = "unknown libhpcmem API";
    return NULL;
  }
  if ((have & which) == which)
    return &api;
  if (why != NULL)
    *why = which == BENCH_HPCMEM_SEGMENTS ? why_seg : why_place;
  return NULL;
}

const char *bench_malloc_provider(void)
{
  pthread_once(&once, load);
  return provider;
}

const char *bench_class_name(int cls)
{
  switch (cls) {
  case HPCMEM_CLASS_DRAM: return "DRAM";
  case HPCMEM_CLASS_HBM: return "HBM";
  case HPCMEM_CLASS_NVM: return "NVM";
  case HPCMEM_CLASS_NEAR: return "near";
  case HPCMEM_CLASS_ANY: return "any";
  default: return "?";
  }
}

static const char *state_name(int st)
{
  switch (st) {
  case HPCMEM_PLACE_PENDING: return "pending";
  case HPCMEM_PLACE_BOUND: return "bound";
  case HPCMEM_PLACE_UNBOUND: return "unbound: the kernel lacks those nodes, OS default";
  case HPCMEM_PLACE_FAILED: return "FAILED";
  default: return "?";
  }
}

int bench_place_describe(const bench_hpcmem_t *h, const void *p, size_t bytes, const char *name,
                         char *buf, size_t len)
{
  enum { MAXW = 32 };
  hpcmem_where_t w[MAXW];
  double by_class[5] = {0};  /* DRAM HBM NVM near none */
  static const char *const cname[5] = {"DRAM", "HBM", "NVM", "near", "OS default"};
  static const int order[5] = {1, 0, 2, 3, 4};  /* the preferred class first */
  int n = h->where(p, bytes, w, MAXW), state = -1, used, placed = 1;
  char b1[32];

  if (n <= 0) {
    snprintf(buf, len, "%s: hpcmem_where failed (%d)", name, n);
    return 0;
  }
  for (int i = 0; i < n && i < MAXW; i++) {
    int k = w[i].cls == HPCMEM_CLASS_DRAM ? 0 : w[i].cls == HPCMEM_CLASS_HBM ? 1
            : w[i].cls == HPCMEM_CLASS_NVM ? 2 : w[i].cls == HPCMEM_CLASS_NEAR ? 3 : 4;
    by_class[k] += (double)w[i].length;
    state = state < 0 || state == w[i].state ? w[i].state : 99;
    if (w[i].state == HPCMEM_PLACE_PENDING || w[i].state == HPCMEM_PLACE_FAILED)
      placed = 0;
  }
  used = snprintf(buf, len, "%s:", name);
  for (int o = 0, first = 1; o < 5 && used >= 0 && (size_t)used < len; o++) {
    int k = order[o];
    if (by_class[k] > 0) {
      used += snprintf(buf + used, len - used, "%s %s %s", first ? "" : " +", cname[k],
                       bench_fmt_bytes(by_class[k], b1, sizeof b1));
      first = 0;
    }
  }
  if (used >= 0 && (size_t)used < len)
    snprintf(buf + used, len - used, " (%s)", state == 99 ? "mixed states" : state_name(state));
  return placed;
}
