/* Shared helpers of the allocator micro-benchmarks (benchmarks/alloc/).
 *
 * The programs use nothing but plain malloc/free so that every allocator runs
 * the same binary under LD_PRELOAD.  Output contract (read by run.sh):
 *   info,<key>,<value>
 *   result,<bench>,<case>,<param>,<metric>,<value>,<unit>
 *   validate,<bench>,ok                      (last line of a good run)
 * A failed check prints "VALIDATION FAILED: ..." and exits with status 2, so a
 * broken allocator can never produce a figure.
 */
#ifndef HPCMEM_BENCH_ALLOC_UTIL_H
#define HPCMEM_BENCH_ALLOC_UTIL_H

#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#define BENCH_PAGE 4096u

static inline uint64_t bench_now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* CPU time of the calling thread: on a shared machine the wall clock also
 * counts the time other programs held the core, the CPU time does not. */
static inline uint64_t bench_thread_cpu_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* xoshiro256**: fast enough that the generator does not hide allocator cost,
 * and seeded from splitmix64 so the same seed gives every allocator the same
 * request sequence. */
typedef struct { uint64_t s[4]; } bench_rng_t;

static inline uint64_t bench_rotl(uint64_t x, int k)
{
    return (x << k) | (x >> (64 - k));
}

static inline void bench_rng_seed(bench_rng_t *r, uint64_t seed)
{
    for (int i = 0; i < 4; i++) {
        uint64_t z = (seed += 0x9e3779b97f4a7c15ull);
        z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
        z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
        r->s[i] = z ^ (z >> 31);
    }
}

static inline uint64_t bench_rng_next(bench_rng_t *r)
{
    uint64_t *s = r->s;
    uint64_t out = bench_rotl(s[1] * 5, 7) * 9;
    uint64_t t = s[1] << 17;
    s[2] ^= s[0];
    s[3] ^= s[1];
    s[1] ^= s[2];
    s[0] ^= s[3];
    s[2] ^= t;
    s[3] = bench_rotl(s[3], 45);
    return out;
}

/* Uniform in [lo, hi] without modulo bias worth caring about (Lemire). */
static inline uint64_t bench_rng_range(bench_rng_t *r, uint64_t lo, uint64_t hi)
{
    uint64_t span = hi - lo + 1;
    return lo + (uint64_t)(((unsigned __int128)bench_rng_next(r) * span) >> 64);
}

/* Peak resident set of this program: VmHWM of /proc/self/status, the
 * high-water mark of the address space exec() gave it.  Not getrusage's
 * ru_maxrss: Linux carries that over exec() from the processes that forked
 * and exec'd the program (run.sh's shell, timeout, env), so a small program's
 * figure read theirs (a glibc program of 1.2 MiB reported 1.5 - 1.6 MiB,
 * varying with the launcher).  ru_maxrss only where /proc is missing.
 * Plain read(), not stdio (no allocation at the end of a measurement). */
static inline long bench_peak_rss_kib(void)
{
    char buf[4096];
    int fd = open("/proc/self/status", O_RDONLY | O_CLOEXEC);
    if (fd >= 0) {
        ssize_t n = read(fd, buf, sizeof buf - 1);
        close(fd);
        if (n > 0) {
            buf[n] = '\0';
            char *p = strstr(buf, "\nVmHWM:");
            if (p != NULL)
                return strtol(p + 7, NULL, 10);
        }
    }
    struct rusage ru;
    if (getrusage(RUSAGE_SELF, &ru) != 0)
        return -1;
    return ru.ru_maxrss;
}

/* Resident set now (not the peak): what the allocator and the libraries it
 * pulls in cost before the benchmark does anything.  Plain read(), not stdio:
 * a FILE and its buffer would come from malloc and warm size classes that the
 * size sweep wants to find cold. */
static inline long bench_current_rss_kib(void)
{
    char buf[128];
    int fd = open("/proc/self/statm", O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return -1;
    ssize_t n = read(fd, buf, sizeof buf - 1);
    close(fd);
    if (n <= 0)
        return -1;
    buf[n] = '\0';
    char *p = strchr(buf, ' ');
    if (p == NULL)
        return -1;
    return strtol(p + 1, NULL, 10) * (long)(BENCH_PAGE / 1024);
}

__attribute__((noreturn, format(printf, 1, 2)))
static void bench_fail(const char *fmt, ...)
{
    va_list ap;
    fflush(stdout);
    fputs("VALIDATION FAILED: ", stderr);
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputc('\n', stderr);
    printf("validate,failed\n");
    fflush(NULL);
    /* _exit: other threads may still be inside malloc; exit handlers (an
     * allocator's report, say) must not run under them */
    _exit(2);
}

__attribute__((noreturn, format(printf, 1, 2)))
static void bench_usage_error(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputc('\n', stderr);
    exit(64);
}

/* "64", "8K", "8KiB", "128M", "1G" -> bytes; rejects garbage and overflow. */
static inline uint64_t bench_parse_size(const char *opt, const char *s)
{
    char *end;
    errno = 0;
    unsigned long long v = strtoull(s, &end, 10);
    if (end == s || errno != 0 || s[0] == '-')
        bench_usage_error("%s: not a size: '%s'", opt, s);
    unsigned shift = 0;
    switch (*end) {
    case 'k': case 'K': shift = 10; end++; break;
    case 'm': case 'M': shift = 20; end++; break;
    case 'g': case 'G': shift = 30; end++; break;
    default: break;
    }
    if (shift != 0 && (strcmp(end, "iB") == 0 || strcmp(end, "B") == 0))
        end += strlen(end);
    else if (shift == 0 && strcmp(end, "B") == 0)
        end++;
    if (*end != '\0' || (shift && v > (UINT64_MAX >> shift)))
        bench_usage_error("%s: not a size: '%s'", opt, s);
    return (uint64_t)v << shift;
}

static inline uint64_t bench_parse_count(const char *opt, const char *s)
{
    return bench_parse_size(opt, s);
}

/* The word options (--mode, --touch) have two values: 0 for `first`, 1 for
 * `second`. */
static inline int bench_parse_choice(const char *opt, const char *s,
                                     const char *first, const char *second)
{
    if (strcmp(s, first) == 0)
        return 0;
    if (strcmp(s, second) == 0)
        return 1;
    bench_usage_error("%s: %s or %s, not '%s'", opt, first, second, s);
}

/* The command line every program takes: "--corrupt" stands alone (damage a
 * block on purpose, for smoke.sh), every other option takes the next argument
 * as its value.  Walk it with
 *     struct bench_args args = { argc, argv, 1, &o->corrupt, NULL };
 *     while ((a = bench_next_option(&args, &v)) != NULL) ...
 * `usage`, when not NULL, is the option list printed after the program's name
 * when an option lacks its value. */
struct bench_args {
    int argc;
    char **argv;
    int next;
    int *corrupt;
    const char *usage;
};

/* The next option's name, its value in *value; NULL after the last one. */
static inline const char *bench_next_option(struct bench_args *args, const char **value)
{
    while (args->next < args->argc) {
        const char *a = args->argv[args->next++];
        if (strcmp(a, "--corrupt") == 0) {
            *args->corrupt = 1;
            continue;
        }
        if (args->next >= args->argc) {
            if (args->usage != NULL)
                bench_usage_error("%s: missing value or unknown option\nusage: %s %s",
                                  a, args->argv[0], args->usage);
            bench_usage_error("%s: missing value or unknown option", a);
        }
        *value = args->argv[args->next++];
        return a;
    }
    return NULL;
}

__attribute__((noreturn))
static inline void bench_unknown_option(const char *opt)
{
    bench_usage_error("unknown option '%s'", opt);
}

/* Which object really serves malloc: lets run.sh prove that LD_PRELOAD took
 * effect instead of silently measuring the C library twice.  Must be the
 * program's first output. */
static inline void bench_print_allocator(void)
{
    /* stdout's buffer would be the process's first 4 KiB malloc and leave
     * that size class warm for the size sweep: give stdio a static one */
    static char outbuf[1 << 16];
    setvbuf(stdout, outbuf, _IOFBF, sizeof outbuf);
    Dl_info info;
    void *sym = dlsym(RTLD_DEFAULT, "malloc");
    if (sym != NULL && dladdr(sym, &info) != 0 && info.dli_fname != NULL)
        printf("info,malloc_from,%s\n", info.dli_fname);
    else
        printf("info,malloc_from,unknown\n");
}

static inline void bench_result(const char *bench, const char *cas, const char *param,
                                const char *metric, double value, const char *unit)
{
    printf("result,%s,%s,%s,%s,%.6g,%s\n", bench, cas, param, metric, value, unit);
}

static inline void bench_result_rss(const char *bench, const char *cas, const char *param)
{
    bench_result(bench, cas, param, "peak_rss", (double)bench_peak_rss_kib(), "KiB");
}

/* Tags: an 8-byte head word (or as much as fits) and a tail byte.  Enough to
 * catch overlapping blocks, lost writes and blocks handed out twice, and cheap
 * enough not to turn the benchmark into a memory-bandwidth test. */
static inline uint64_t bench_tag_value(uint64_t id)
{
    return (id * 0x9e3779b97f4a7c15ull) ^ 0xa5a5a5a5a5a5a5a5ull;
}

static inline void bench_tag_write(void *p, size_t n, uint64_t id)
{
    uint64_t v = bench_tag_value(id);
    unsigned char *b = p;
    memcpy(b, &v, n - 1 < 8 ? n - 1 : 8);
    b[n - 1] = (unsigned char)(v >> 56) ^ (unsigned char)n;
}

static inline int bench_tag_ok(const void *p, size_t n, uint64_t id)
{
    uint64_t v = bench_tag_value(id);
    const unsigned char *b = p;
    return memcmp(b, &v, n - 1 < 8 ? n - 1 : 8) == 0
        && b[n - 1] == (unsigned char)((unsigned char)(v >> 56) ^ (unsigned char)n);
}

/* Every allocator in the comparison aligns to 16 from 16 bytes on (x86-64
 * ABI); smaller blocks need only their natural alignment. */
static inline int bench_aligned_ok(const void *p, size_t n)
{
    uintptr_t a = (uintptr_t)p;
    size_t want = n >= 16 ? 16 : (n >= 8 ? 8 : 1);
    return (a & (want - 1)) == 0;
}

/* Keeps the compiler from deleting a malloc/free pair whose block is unused. */
static void *volatile bench_sink;

#endif
