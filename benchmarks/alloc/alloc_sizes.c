/* Size sweep (SWAlloc paper, Fig. 7): for each size from --min to --max
 * (times --factor), --rounds rounds of malloc + (optionally) touching every
 * page + free, starting with nothing resident.  Reports the mean time of one
 * round per size.
 *
 *   alloc_sizes --mode touch|notouch [--rounds 64] [--min 4] [--max 128M]
 *               [--factor 2] [--corrupt]
 *
 * touch:   one write per 4 KiB page and the last byte, all read back and
 *          checked before free (the first-touch cost is part of the round,
 *          which is what makes retaining memory pay off).
 * notouch: malloc + free only, as the paper times it; the block is checked
 *          in an untimed pass after the timed rounds of each size.
 * --corrupt damages one block on purpose so the smoke test can prove the
 * checks fire.
 */
#include "bench_util.h"

struct opts {
    int touch;
    unsigned rounds;
    uint64_t min, max, factor;
    int corrupt;
};

static void parse(int argc, char **argv, struct opts *o)
{
    int have_mode = 0;
    o->touch = 0;
    o->rounds = 64;
    o->min = 4;
    o->max = 128ull << 20;
    o->factor = 2;
    o->corrupt = 0;
    struct bench_args args = { argc, argv, 1, &o->corrupt, NULL };
    const char *a, *v;
    while ((a = bench_next_option(&args, &v)) != NULL) {
        if (strcmp(a, "--mode") == 0) {
            o->touch = bench_parse_choice(a, v, "touch", "notouch") == 0;
            have_mode = 1;
        } else if (strcmp(a, "--rounds") == 0) {
            uint64_t r = bench_parse_count(a, v);
            if (r == 0 || r > 1000000) bench_usage_error("--rounds: 1..1000000");
            o->rounds = (unsigned)r;
        } else if (strcmp(a, "--min") == 0) {
            o->min = bench_parse_size(a, v);
        } else if (strcmp(a, "--max") == 0) {
            o->max = bench_parse_size(a, v);
        } else if (strcmp(a, "--factor") == 0) {
            o->factor = bench_parse_count(a, v);
        } else {
            bench_unknown_option(a);
        }
    }
    if (!have_mode)
        bench_usage_error("usage: %s --mode touch|notouch [--rounds N] [--min S] [--max S] "
                          "[--factor F] [--corrupt]", argv[0]);
    if (o->min == 0 || o->min > o->max || o->max > (16ull << 30))
        bench_usage_error("sizes: need 1 <= --min <= --max <= 16G");
    if (o->factor < 2 || o->factor > 1024)
        bench_usage_error("--factor: 2..1024");
}

/* One byte per page plus the last byte, each a function of (round, page) so a
 * block handed out twice or a lost write shows up. */
static inline unsigned char page_byte(unsigned round, size_t page)
{
    return (unsigned char)(round * 31u + page * 7u + 1u);
}

static void touch_and_check(unsigned char *p, size_t n, unsigned round, int corrupt)
{
    size_t pages = (n + BENCH_PAGE - 1) / BENCH_PAGE, pg;
    unsigned char *last = p + (n - 1);
    unsigned char last_byte = (unsigned char)~page_byte(round, n);

    for (pg = 0; pg < pages; pg++)
        p[pg * BENCH_PAGE] = page_byte(round, pg);
    *last = last_byte;
    if (corrupt)
        p[n / 2 & ~(size_t)(BENCH_PAGE - 1)] ^= 0x40;
    for (pg = 0; pg < pages; pg++) {
        if (p + pg * BENCH_PAGE == last)
            break; /* overwritten by the last byte, checked below */
        if (p[pg * BENCH_PAGE] != page_byte(round, pg))
            bench_fail("size %zu round %u: page %zu lost its byte", n, round, pg);
    }
    if (*last != last_byte)
        bench_fail("size %zu round %u: last byte lost", n, round);
}

static double run_size(const struct opts *o, size_t n, int corrupt)
{
    if (n == 0)
        bench_usage_error("size 0 is not part of the sweep");
    uint64_t t0 = bench_now_ns();
    for (unsigned r = 0; r < o->rounds; r++) {
        unsigned char *p = malloc(n);
        if (p == NULL)
            bench_fail("malloc(%zu) returned NULL (errno %d)", n, errno);
        if (!bench_aligned_ok(p, n))
            bench_fail("malloc(%zu) returned misaligned %p", n, (void *)p);
        if (o->touch)
            touch_and_check(p, n, r, corrupt && r == 0);
        bench_sink = p;
        free(p);
    }
    uint64_t t1 = bench_now_ns();
    if (!o->touch) {
        /* untimed: the notouch rounds must still hand out usable memory */
        unsigned char *p = malloc(n);
        if (p == NULL)
            bench_fail("malloc(%zu) returned NULL (errno %d)", n, errno);
        bench_tag_write(p, n, n);
        if (corrupt)
            p[0] ^= 0x40;
        if (!bench_tag_ok(p, n, n))
            bench_fail("size %zu: block does not keep its contents", n);
        free(p);
    }
    return (double)(t1 - t0) / o->rounds;
}

int main(int argc, char **argv)
{
    struct opts o;
    parse(argc, argv, &o);
    const char *mode = o.touch ? "touch" : "notouch";

    bench_print_allocator();
    printf("info,rounds,%u\n", o.rounds);
    /* library start-up (first malloc of the process) is not a per-size cost */
    bench_sink = malloc(1);
    free(bench_sink);
    bench_result("sizes", mode, "start", "start_rss", (double)bench_current_rss_kib(), "KiB");

    char param[32];
    for (uint64_t n = o.min; n <= o.max; n *= o.factor) {
        double ns = run_size(&o, (size_t)n, o.corrupt && n == o.min);
        snprintf(param, sizeof param, "%llu", (unsigned long long)n);
        bench_result("sizes", mode, param, "ns_per_round", ns, "ns");
        if (n > UINT64_MAX / o.factor)
            break;
    }
    bench_result_rss("sizes", mode, "all");
    printf("validate,sizes,ok\n");
    return 0;
}
