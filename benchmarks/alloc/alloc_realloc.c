/* realloc growth: one buffer grown by --step bytes at a time from --step to
 * --max, --reps times, as a string builder or a log buffer grows.  Each
 * step writes one byte at the new end; the bytes of the steps before are
 * checked after the last one (a lost byte shows a realloc that moved the
 * buffer without its contents).  Reports the mean time of one realloc.
 *
 *   alloc_realloc [--step 16] [--max 128K] [--reps 100] [--corrupt]
 *
 * Not one of run.sh's benchmarks (the allocator-core issue names those);
 * BENCHMARKS.md, session 25, has its figures.  --corrupt damages one byte
 * on purpose so the smoke test can prove the check fires. */
#include "bench_util.h"

static unsigned char mark(size_t end) { return (unsigned char)(end * 131u >> 4); }

int main(int argc, char **argv)
{
    uint64_t step = 16, max = 128 << 10, reps = 100;
    int corrupt = 0;
    struct bench_args args = { argc, argv, 1, &corrupt, "[--step S] [--max S] [--reps N] [--corrupt]" };
    const char *a, *v;
    while ((a = bench_next_option(&args, &v)) != NULL) {
        if (strcmp(a, "--step") == 0) step = bench_parse_size(a, v);
        else if (strcmp(a, "--max") == 0) max = bench_parse_size(a, v);
        else if (strcmp(a, "--reps") == 0) reps = bench_parse_count(a, v);
        else bench_unknown_option(a);
    }
    if (step == 0 || step > max || max > (1ull << 32))
        bench_usage_error("sizes: need 1 <= --step <= --max <= 4G");
    if (reps == 0 || reps > 1000000)
        bench_usage_error("--reps: 1..1000000");

    bench_print_allocator();
    uint64_t calls = 0, ns = 0, moves = 0;
    for (uint64_t r = 0; r < reps; r++) {
        unsigned char *p = NULL;
        size_t n = 0;
        uint64_t t0 = bench_now_ns();
        while (n + step <= max) {
            unsigned char *q = realloc(p, n + step);
            if (q == NULL)
                bench_fail("realloc(%p, %zu) returned NULL (errno %d)", (void *)p, (size_t)(n + step), errno);
            moves += q != p;
            p = q;
            n += step;
            p[n - 1] = mark(n);
            calls++;
        }
        ns += bench_now_ns() - t0;
        if (corrupt && r == 0)
            p[n / 2 / step * step - 1] ^= 0x40;
        for (size_t end = step; end <= n; end += step)
            if (p[end - 1] != mark(end))
                bench_fail("byte %zu of a buffer grown to %zu lost its value", end - 1, n);
        free(p);
    }
    char param[64];
    snprintf(param, sizeof param, "%llu-%llu", (unsigned long long)step, (unsigned long long)max);
    bench_result("realloc", "grow", param, "ns_per_realloc", (double)ns / (double)calls, "ns");
    bench_result("realloc", "grow", param, "moves_per_growth", (double)moves / (double)reps, "moves");
    printf("validate,realloc,ok\n");
    return 0;
}
