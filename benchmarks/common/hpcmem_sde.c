#include "config.h"
#include "hpcmem_sde.h"

#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>
#include <stddef.h>
#include <string.h>

#include "hpcmem.h"

#ifdef HAVE_PAPI
#include <sde_lib.h>

/* Fields that go up and down (or are time stamps): read as they are.
 * Everything else only grows, so a region should see its difference. */
static int is_gauge(const char *name, const char *kind)
{
  static const char *const gauges[] = {"current_bytes", "mapped_bytes", "retained_bytes"};
  if (strcmp(kind, "SUM") != 0)
    return 1;  /* MAX and PEAKTIME fields */
  for (size_t i = 0; i < sizeof gauges / sizeof gauges[0]; i++)
    if (strcmp(name, gauges[i]) == 0)
      return 1;
  return 0;
}

/* Found at run time: the programs that export these events are not linked
 * with libhpcmem (they also run under other allocators), so the statistics
 * exist only when libhpcmem is loaded (LD_PRELOAD or a linked program). */
static int (*stats_fn)(hpcmem_stats_t *);

static long long read_field(void *param)
{
  hpcmem_stats_t s;
  size_t off = (size_t)(uintptr_t)param;

  if (stats_fn(&s) != 0)
    return 0;
  return (long long)*(const uint64_t *)((const char *)&s + off);
}

static const struct field {
  const char *name, *kind, *help;
  size_t offset;
} fields[] = {
#define SDE_FIELD_(name, kind, help) {#name, #kind, help, offsetof(hpcmem_stats_t, name)},
  HPCMEM_STATS_FIELDS(SDE_FIELD_)
#undef SDE_FIELD_
};

static pthread_once_t once = PTHREAD_ONCE_INIT;
static int init_result;

static void register_all(void)
{
  papi_handle_t h;
  void *sym = dlsym(RTLD_DEFAULT, "hpcmem_stats");

  if (sym == NULL) {
    init_result = -ENOSYS;
    return;
  }
  memcpy(&stats_fn, &sym, sizeof sym);
  h = papi_sde_init(HPCMEM_SDE_LIBRARY);
  if (h == NULL) {
    init_result = -EIO;
    return;
  }
  for (size_t i = 0; i < sizeof fields / sizeof fields[0]; i++) {
    const struct field *f = &fields[i];
    int mode = PAPI_SDE_RO | (is_gauge(f->name, f->kind) ? PAPI_SDE_INSTANT : PAPI_SDE_DELTA);
    if (papi_sde_register_counter_cb(h, f->name, mode, PAPI_SDE_long_long, read_field,
                                     (void *)(uintptr_t)f->offset) != SDE_OK) {
      init_result = -EIO;
      return;
    }
    papi_sde_describe_counter(h, f->name, f->help);
  }
  init_result = 0;
}

int hpcmem_sde_init(void)
{
  pthread_once(&once, register_all);
  return init_result;
}

#else

int hpcmem_sde_init(void) { return -ENOSYS; }

#endif
