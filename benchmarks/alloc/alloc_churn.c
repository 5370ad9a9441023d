/* Small-object churn, one thread: a working set of --live slots; each step
 * picks a random slot, frees its object (after checking its tags) and puts a
 * new object of a random size in [--min, --max] there.  Reports malloc+free
 * operations per second (one step = 2 operations) and the peak RSS.
 *
 *   alloc_churn [--min 8] [--max 1K] [--live 10000] [--ops 20M] [--seed 42]
 *               [--corrupt]
 */
#include "bench_util.h"

struct obj {
    unsigned char *p;
    uint32_t size;
    uint32_t id;
};

int main(int argc, char **argv)
{
    uint64_t min = 8, max = 1024, live = 10000, ops = 20000000, seed = 42;
    int corrupt = 0;
    struct bench_args args = { argc, argv, 1, &corrupt,
                               "[--min S] [--max S] [--live N] [--ops N] [--seed S] [--corrupt]" };
    const char *a, *v;
    while ((a = bench_next_option(&args, &v)) != NULL) {
        if (strcmp(a, "--min") == 0) min = bench_parse_size(a, v);
        else if (strcmp(a, "--max") == 0) max = bench_parse_size(a, v);
        else if (strcmp(a, "--live") == 0) live = bench_parse_count(a, v);
        else if (strcmp(a, "--ops") == 0) ops = bench_parse_count(a, v);
        else if (strcmp(a, "--seed") == 0) seed = bench_parse_count(a, v);
        else bench_unknown_option(a);
    }
    if (min == 0 || min > max || max > (1u << 30))
        bench_usage_error("sizes: need 1 <= --min <= --max <= 1G");
    if (live == 0 || live > (1u << 26) || ops < 2)
        bench_usage_error("--live: 1..64M, --ops: at least 2");

    char cas[64];
    snprintf(cas, sizeof cas, "%llu-%llu", (unsigned long long)min, (unsigned long long)max);
    bench_print_allocator();

    struct obj *slot = calloc(live, sizeof *slot);
    if (slot == NULL)
        bench_fail("calloc of %llu slots failed", (unsigned long long)live);
    bench_rng_t rng;
    bench_rng_seed(&rng, seed);
    uint32_t id = 0;

    for (uint64_t i = 0; i < live; i++) {
        size_t n = bench_rng_range(&rng, min, max);
        slot[i].p = malloc(n);
        if (slot[i].p == NULL)
            bench_fail("malloc(%zu) returned NULL", n);
        slot[i].size = (uint32_t)n;
        slot[i].id = ++id;
        bench_tag_write(slot[i].p, n, id);
    }
    if (corrupt)
        slot[live / 2].p[0] ^= 0x40;

    uint64_t steps = ops / 2;
    uint64_t t0 = bench_now_ns(), c0 = bench_thread_cpu_ns();
    for (uint64_t k = 0; k < steps; k++) {
        uint64_t r = bench_rng_next(&rng);
        struct obj *s = &slot[(uint64_t)(((unsigned __int128)r * live) >> 64)];
        if (__builtin_expect(!bench_tag_ok(s->p, s->size, s->id), 0))
            bench_fail("object %p (%u bytes, #%u) lost its tags", (void *)s->p, s->size, s->id);
        free(s->p);
        /* the low bits of r were not used for the slot: reuse them for the size */
        size_t n = min + (size_t)((r & 0xffffffffu) * (max - min + 1) >> 32);
        unsigned char *p = malloc(n);
        if (__builtin_expect(p == NULL || !bench_aligned_ok(p, n), 0))
            bench_fail("malloc(%zu) returned %p", n, (void *)p);
        s->p = p;
        s->size = (uint32_t)n;
        s->id = ++id;
        bench_tag_write(p, n, id);
    }
    uint64_t t1 = bench_now_ns(), c1 = bench_thread_cpu_ns();

    for (uint64_t i = 0; i < live; i++) {
        if (!bench_tag_ok(slot[i].p, slot[i].size, slot[i].id))
            bench_fail("object %p lost its tags", (void *)slot[i].p);
        free(slot[i].p);
    }
    free(slot);

    double secs = (double)(t1 - t0) / 1e9;
    bench_result("churn", cas, "1", "mops", (double)(steps * 2) / secs / 1e6, "Mops/s");
    bench_result("churn", cas, "1", "cpu_mops", (double)(steps * 2) / ((double)(c1 - c0) / 1e9) / 1e6, "Mops/s");
    bench_result_rss("churn", cas, "1");
    printf("validate,churn,ok\n");
    return 0;
}
