/* Residents (SWAlloc paper, Fig. 9): fill N live blocks, then --pairs random
 * pairs of (free a random live block, allocate a new one in its place), sizes
 * uniform in [--min-size, --max-size] (1 B .. 8 MiB as in the paper).  The
 * request sequence depends only on --seed, so every allocator sees the same
 * one.  Reports the mean time of one pair and the peak RSS.
 *
 *   alloc_residents --n N [--pairs 1000000] [--min-size 1] [--max-size 8M]
 *                   [--seed 42] [--touch none|ends] [--corrupt]
 *
 * touch none: the paper's allocation time; nothing of the blocks is written.
 *             Checked (untimed) after the fill and at the end: no NULL, no
 *             misaligned block, and no two live blocks overlap.
 * touch ends: each block gets a head and a tail tag at allocation, checked
 *             before its free (at most two pages touched per block: the whole
 *             of every block would be tens of GiB at N = 16384).
 */
#include "bench_util.h"

struct opts {
    uint64_t n, pairs, min_size, max_size, seed;
    int touch_ends;
    int corrupt;
};

struct live {
    unsigned char *p;
    size_t size;
    uint64_t id;
};

static void parse(int argc, char **argv, struct opts *o)
{
    o->n = 0;
    o->pairs = 1000000;
    o->min_size = 1;
    o->max_size = 8ull << 20;
    o->seed = 42;
    o->touch_ends = 0;
    o->corrupt = 0;
    struct bench_args args = { argc, argv, 1, &o->corrupt, NULL };
    const char *a, *v;
    while ((a = bench_next_option(&args, &v)) != NULL) {
        if (strcmp(a, "--n") == 0) o->n = bench_parse_count(a, v);
        else if (strcmp(a, "--pairs") == 0) o->pairs = bench_parse_count(a, v);
        else if (strcmp(a, "--min-size") == 0) o->min_size = bench_parse_size(a, v);
        else if (strcmp(a, "--max-size") == 0) o->max_size = bench_parse_size(a, v);
        else if (strcmp(a, "--seed") == 0) o->seed = bench_parse_count(a, v);
        else if (strcmp(a, "--touch") == 0) o->touch_ends = bench_parse_choice(a, v, "none", "ends");
        else bench_unknown_option(a);
    }
    if (o->n == 0 || o->n > (1u << 24))
        bench_usage_error("usage: %s --n N (1..16M) [--pairs P] [--min-size S] [--max-size S] "
                          "[--seed S] [--touch none|ends] [--corrupt]", argv[0]);
    if (o->min_size == 0 || o->min_size > o->max_size || o->max_size > (1ull << 34))
        bench_usage_error("sizes: need 1 <= --min-size <= --max-size <= 16G");
}

static int cmp_live(const void *a, const void *b)
{
    const struct live *x = a, *y = b;
    return x->p < y->p ? -1 : x->p > y->p;
}

/* Untimed: a correct allocator never hands out two live blocks that overlap. */
static void check_no_overlap(const struct live *slots, uint64_t n, const char *when)
{
    struct live *s = malloc(n * sizeof *s);
    if (s == NULL)
        bench_fail("malloc for the overlap check failed");
    memcpy(s, slots, n * sizeof *s);
    qsort(s, n, sizeof *s, cmp_live);
    for (uint64_t i = 0; i + 1 < n; i++)
        if (s[i].p + s[i].size > s[i + 1].p)
            bench_fail("%s: live blocks overlap: %p+%zu and %p", when,
                       (void *)s[i].p, s[i].size, (void *)s[i + 1].p);
    free(s);
}

static inline void take(struct live *l, size_t size, uint64_t id, int touch_ends)
{
    unsigned char *p = malloc(size);
    if (p == NULL)
        bench_fail("malloc(%zu) returned NULL (errno %d)", size, errno);
    if (!bench_aligned_ok(p, size))
        bench_fail("malloc(%zu) returned misaligned %p", size, (void *)p);
    if (touch_ends)
        bench_tag_write(p, size, id);
    l->p = p;
    l->size = size;
    l->id = id;
}

static inline void give_back(struct live *l, int touch_ends)
{
    if (touch_ends && !bench_tag_ok(l->p, l->size, l->id))
        bench_fail("block %p (%zu bytes, #%llu) lost its tags before free",
                   (void *)l->p, l->size, (unsigned long long)l->id);
    free(l->p);
}

int main(int argc, char **argv)
{
    struct opts o;
    parse(argc, argv, &o);
    const char *mode = o.touch_ends ? "ends" : "none";
    char param[32];
    snprintf(param, sizeof param, "%llu", (unsigned long long)o.n);

    bench_print_allocator();
    printf("info,pairs,%llu\ninfo,seed,%llu\n", (unsigned long long)o.pairs,
           (unsigned long long)o.seed);

    struct live *slots = calloc(o.n, sizeof *slots);
    if (slots == NULL)
        bench_fail("calloc of %llu slots failed", (unsigned long long)o.n);

    bench_rng_t rng;
    bench_rng_seed(&rng, o.seed);
    uint64_t id = 0;

    uint64_t t0 = bench_now_ns();
    for (uint64_t i = 0; i < o.n; i++)
        take(&slots[i], bench_rng_range(&rng, o.min_size, o.max_size), ++id, o.touch_ends);
    uint64_t t1 = bench_now_ns();
    check_no_overlap(slots, o.n, "after fill");
    if (o.corrupt) {
        /* with no tags to damage, a fake overlap is what the check must see */
        if (o.touch_ends)
            slots[0].p[0] ^= 0x40;
        else if (o.n >= 2)
            slots[1].p = slots[0].p;
        if (!o.touch_ends)
            check_no_overlap(slots, o.n, "corrupt self-test");
    }

    uint64_t t2 = bench_now_ns();
    for (uint64_t k = 0; k < o.pairs; k++) {
        struct live *l = &slots[bench_rng_range(&rng, 0, o.n - 1)];
        give_back(l, o.touch_ends);
        take(l, bench_rng_range(&rng, o.min_size, o.max_size), ++id, o.touch_ends);
    }
    uint64_t t3 = bench_now_ns();
    check_no_overlap(slots, o.n, "after the pairs");

    for (uint64_t i = 0; i < o.n; i++)
        give_back(&slots[i], o.touch_ends);
    free(slots);

    bench_result("residents", mode, param, "ns_per_pair",
                 o.pairs ? (double)(t3 - t2) / o.pairs : 0.0, "ns");
    bench_result("residents", mode, param, "ns_per_fill_alloc", (double)(t1 - t0) / o.n, "ns");
    bench_result_rss("residents", mode, param);
    printf("validate,residents,ok\n");
    return 0;
}
