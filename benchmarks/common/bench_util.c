#include "config.h"
#include "bench_util.h"

#include <errno.h>
#include <limits.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>
#ifdef _OPENMP
#include <omp.h>
#endif

double bench_now(void)
{
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

void bench_rusage(bench_rusage_t *out)
{
  struct rusage ru;
  memset(out, 0, sizeof *out);
  if (getrusage(RUSAGE_SELF, &ru) != 0)
    return;
  out->utime = (double)ru.ru_utime.tv_sec + 1e-6 * (double)ru.ru_utime.tv_usec;
  out->stime = (double)ru.ru_stime.tv_sec + 1e-6 * (double)ru.ru_stime.tv_usec;
  out->minflt = ru.ru_minflt;
  out->majflt = ru.ru_majflt;
  out->nvcsw = ru.ru_nvcsw;
  out->nivcsw = ru.ru_nivcsw;
  out->maxrss_kib = ru.ru_maxrss;
}

void bench_rusage_diff(const bench_rusage_t *a, const bench_rusage_t *b, bench_rusage_t *out)
{
  out->utime = b->utime - a->utime;
  out->stime = b->stime - a->stime;
  out->minflt = b->minflt - a->minflt;
  out->majflt = b->majflt - a->majflt;
  out->nvcsw = b->nvcsw - a->nvcsw;
  out->nivcsw = b->nivcsw - a->nivcsw;
  out->maxrss_kib = b->maxrss_kib;
}

int bench_parse_size(const char *s, size_t *out)
{
  char *end;
  unsigned long long v;
  unsigned shift = 0;

  if (s == NULL || out == NULL || *s < '0' || *s > '9')
    return -EINVAL;
  errno = 0;
  v = strtoull(s, &end, 10);
  if (errno != 0)
    return -EINVAL;
  switch (*end) {
  case 'k': case 'K': shift = 10; end++; break;
  case 'm': case 'M': shift = 20; end++; break;
  case 'g': case 'G': shift = 30; end++; break;
  case 't': case 'T': shift = 40; end++; break;
  default: break;
  }
  if (*end == 'i' && shift != 0)   /* accept "64Mi" and "64MiB" too */
    end++;
  if ((*end == 'B' || *end == 'b') && shift != 0)
    end++;
  if (*end != '\0')
    return -EINVAL;
  if (shift != 0 && v > (SIZE_MAX >> shift))
    return -EINVAL;
  *out = (size_t)(v << shift);
  return 0;
}

int bench_parse_pos_int(const char *s, int *out)
{
  char *end;
  long v;

  if (s == NULL || out == NULL || *s == '\0')
    return -EINVAL;
  errno = 0;
  v = strtol(s, &end, 10);
  if (errno != 0 || *end != '\0' || v <= 0 || v > INT_MAX)
    return -EINVAL;
  *out = (int)v;
  return 0;
}

int bench_parse_int_list(const char *s, int *out, int max)
{
  int n = 0;
  char buf[32];

  if (s == NULL || out == NULL || max <= 0 || *s == '\0')
    return -EINVAL;
  while (*s != '\0') {
    size_t len = strcspn(s, ",");
    if (len == 0 || len >= sizeof buf || n >= max)
      return -EINVAL;
    memcpy(buf, s, len);
    buf[len] = '\0';
    if (bench_parse_pos_int(buf, &out[n]) != 0)
      return -EINVAL;
    n++;
    s += len;
    if (*s == ',' && *++s == '\0')
      return -EINVAL;  /* trailing comma */
  }
  return n;
}

/* /sys/devices/system/cpu/cpu0/cache/indexN: the highest level that is a
 * data or unified cache.  Used when sysconf does not know (musl, VMs). */
static size_t llc_from_sysfs(void)
{
  size_t best = 0;
  int best_level = 0;

  for (int i = 0; i < 8; i++) {
    char path[128], type[32] = "", size[32] = "";
    int level = 0;
    FILE *f;

    snprintf(path, sizeof path, "/sys/devices/system/cpu/cpu0/cache/index%d/level", i);
    if ((f = fopen(path, "r")) == NULL)
      break;
    if (fscanf(f, "%d", &level) != 1)
      level = 0;
    fclose(f);
    snprintf(path, sizeof path, "/sys/devices/system/cpu/cpu0/cache/index%d/type", i);
    if ((f = fopen(path, "r")) != NULL) {
      if (fscanf(f, "%31s", type) != 1)
        type[0] = '\0';
      fclose(f);
    }
    if (strcmp(type, "Instruction") == 0)
      continue;
    snprintf(path, sizeof path, "/sys/devices/system/cpu/cpu0/cache/index%d/size", i);
    if ((f = fopen(path, "r")) != NULL) {
      if (fscanf(f, "%31s", size) != 1)
        size[0] = '\0';
      fclose(f);
    }
    size_t bytes;
    if (level > best_level && bench_parse_size(size, &bytes) == 0) {
      best_level = level;
      best = bytes;
    }
  }
  return best;
}

/* sysfs first: it is what the kernel (and lscpu) shows.  In virtual
 * machines glibc's sysconf decodes CPUID and may report the whole host's
 * L3 (384 MiB on one of ours) instead of the slice this guest can use. */
size_t bench_llc_bytes(void)
{
  size_t s = llc_from_sysfs();
  if (s != 0)
    return s;
#ifdef _SC_LEVEL3_CACHE_SIZE
  long v = sysconf(_SC_LEVEL3_CACHE_SIZE);
  if (v <= 0)
    v = sysconf(_SC_LEVEL2_CACHE_SIZE);
  if (v > 0)
    return (size_t)v;
#endif
  return (size_t)32 << 20;
}

int bench_max_threads(void)
{
#ifdef _OPENMP
  return omp_get_max_threads();
#else
  return 1;
#endif
}

char *bench_fmt_bytes(double bytes, char *buf, size_t len)
{
  static const char *unit[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  int u = 0;
  while (bytes >= 1024.0 && u < 4) {
    bytes /= 1024.0;
    u++;
  }
  snprintf(buf, len, u == 0 ? "%.0f %s" : "%.2f %s", bytes, unit[u]);
  return buf;
}
