/* The least memory an allocator with size classes can touch in the churn
 * benchmarks: replays the allocation sequence of alloc_churn or of
 * alloc_threads --mode local (same generator, seeds and sizes; the threads
 * take turns one step at a time) without allocating anything, and reports
 *
 *   - the bytes requested (now and at most),
 *   - the sum over size classes of each class's high-water mark of live
 *     objects times the class size: what an allocator that keeps every class
 *     in its own memory, caches nothing per thread and reuses every freed
 *     object of the class has touched at the end.  A freed object serves
 *     only its own class, so each class peaks on its own;
 *   - the same with glibc's chunk sizes, for comparison (glibc carves every
 *     size from the same memory, so its floor is the peak of the sum
 *     instead, plus fragmentation);
 *   - for alloc_churn, the touched bytes when a class with no free object
 *     takes a free one of the next LOANS classes up instead of a new one,
 *     except every GROW-th time, as the thread caches' loans do
 *     (src/heap/tcache.c; LOANS, default 2, and GROW, default 1024, 0 for
 *     never, are the optional fifth and sixth arguments);
 *   - for alloc_threads, the sum over threads and classes of each thread's
 *     class high-water marks: what thread caches cost that keep every
 *     object their thread freed for that thread's next malloc of the class
 *     (bins with room for the whole swing of the thread's live count).
 *
 * Classes are libhpcmem's (src/heap/sizeclass.c).  Not built by make (it
 * needs the allocator's headers, not the allocator):
 *
 *   gcc -O2 -Ibenchmarks/alloc -Isrc -Iinclude benchmarks/alloc/class_floor.c \
 *       src/heap/sizeclass.c -o class_floor
 *   ./class_floor churn 8 1024 100M [LOANS [GROW]]   # alloc_churn --min 8 --max 1K --live 10000 --ops 100M
 *   ./class_floor local 8 1024 40M 16          # alloc_threads --mode local --threads 16 --ops 40M
 *
 * docs/footprint.md ("Peak RSS of the small-object benchmarks") uses its figures.
 */
#include "bench_util.h"
#include "heap/sizeclass.h"

#define NCLS HPCMEM_NCLASSES

struct tally {
    long live[NCLS], high[NCLS];
    double req, req_max, glibc, glibc_max;
};

static size_t glibc_chunk(size_t n)
{
    size_t c = (n + 8 + 15) & ~(size_t)15;
    return c < 32 ? 32 : c;
}

static void add(struct tally *t, size_t n, int sign)
{
    unsigned c = _hpcmem_size_class(n);
    t->live[c] += sign;
    if (t->live[c] > t->high[c])
        t->high[c] = t->live[c];
    t->req += sign * (double)n;
    t->glibc += sign * (double)glibc_chunk(n);
    if (t->req > t->req_max) t->req_max = t->req;
    if (t->glibc > t->glibc_max) t->glibc_max = t->glibc;
}

/* alloc_threads' size of object id (size_of there) */
static size_t thread_size(uint64_t id, uint64_t min, uint64_t max)
{
    uint64_t h = bench_tag_value(id);
    h ^= h >> 29;
    return (size_t)(min + (uint64_t)(((unsigned __int128)h * (max - min + 1)) >> 64));
}

/* Classes that lend: each object lives in the memory of its home class (its
 * own, or one up to `loans` classes above it that had a free object when
 * its own had none); touched bytes only grow. */
struct lending {
    unsigned loans, grow;
    long touched[NCLS], free[NCLS], tries[NCLS];
    double bytes, peak;
};

static uint8_t lend_alloc(struct lending *l, size_t n)
{
    unsigned c = _hpcmem_size_class(n);
    if (l->free[c] > 0) { l->free[c]--; return (uint8_t)c; }
    if (!l->grow || ++l->tries[c] % l->grow != 0)
        for (unsigned k = c + 1; k <= c + l->loans && k < NCLS; k++)
            if (l->free[k] > 0) { l->free[k]--; return (uint8_t)k; }
    l->touched[c]++;
    l->bytes += _hpcmem_class_size[c];
    if (l->bytes > l->peak) l->peak = l->bytes;
    return (uint8_t)c;
}

static void churn(struct tally *t, struct lending *l, uint64_t min, uint64_t max, uint64_t live, uint64_t ops)
{
    bench_rng_t rng;
    bench_rng_seed(&rng, 42);
    uint32_t *size = calloc(live, sizeof *size);
    uint8_t *home = calloc(live, sizeof *home);
    if (size == NULL || home == NULL) bench_fail("out of memory");
    for (uint64_t i = 0; i < live; i++) {
        size[i] = (uint32_t)bench_rng_range(&rng, min, max);
        add(t, size[i], 1);
        home[i] = lend_alloc(l, size[i]);
    }
    for (uint64_t k = 0; k < ops / 2; k++) {
        uint64_t r = bench_rng_next(&rng);
        uint64_t i = (uint64_t)(((unsigned __int128)r * live) >> 64);
        add(t, size[i], -1);
        l->free[home[i]]++;
        size[i] = (uint32_t)(min + (size_t)((r & 0xffffffffu) * (max - min + 1) >> 32));
        add(t, size[i], 1);
        home[i] = lend_alloc(l, size[i]);
    }
    free(size);
    free(home);
}

static double classes_high(const struct tally *t)
{
    double sum = 0;
    for (unsigned c = 1; c < NCLS; c++)
        sum += (double)t->high[c] * _hpcmem_class_size[c];
    return sum;
}

/* t: all threads together; per[w]: thread w alone */
static void local(struct tally *t, struct tally *per, uint64_t min, uint64_t max, uint64_t live, uint64_t ops,
                  unsigned threads)
{
    bench_rng_t *rng = calloc(threads, sizeof *rng);
    uint64_t *slot = calloc(threads * live, sizeof *slot), *id = calloc(threads, sizeof *id);
    if (rng == NULL || slot == NULL || id == NULL) bench_fail("out of memory");
    for (unsigned w = 0; w < threads; w++) {
        bench_rng_seed(&rng[w], 42 + w);
        id[w] = (uint64_t)w << 40;
        for (uint64_t i = 0; i < live; i++) {
            slot[w * live + i] = ++id[w];
            add(t, thread_size(id[w], min, max), 1);
            add(&per[w], thread_size(id[w], min, max), 1);
        }
    }
    uint64_t steps = ops / 2 / threads;
    for (uint64_t k = 0; k < steps; k++)
        for (unsigned w = 0; w < threads; w++) {
            uint64_t *s = &slot[w * live + bench_rng_range(&rng[w], 0, live - 1)];
            add(t, thread_size(*s, min, max), -1);
            add(&per[w], thread_size(*s, min, max), -1);
            *s = ++id[w];
            add(t, thread_size(*s, min, max), 1);
            add(&per[w], thread_size(*s, min, max), 1);
        }
    free(rng);
    free(slot);
    free(id);
}

int main(int argc, char **argv)
{
    if (argc < 5)
        bench_usage_error("usage: %s churn|local MIN MAX OPS [THREADS] (sizes in bytes, OPS like 100M)", argv[0]);
    uint64_t min = bench_parse_size("MIN", argv[2]), max = bench_parse_size("MAX", argv[3]);
    uint64_t ops = bench_parse_count("OPS", argv[4]);
    if (min == 0 || min > max || max > HPCMEM_SMALL_MAX)
        bench_usage_error("sizes: need 1 <= MIN <= MAX <= 128K");
    struct tally t = {0}, *per = NULL;
    struct lending lend = {0};
    unsigned threads = 0;
    if (strcmp(argv[1], "churn") == 0) {
        lend.loans = argc > 5 ? (unsigned)bench_parse_count("LOANS", argv[5]) : 2;
        lend.grow = argc > 6 ? (unsigned)bench_parse_count("GROW", argv[6]) : 1024;
        if (lend.loans > 8)
            bench_usage_error("LOANS: 0..8");
        churn(&t, &lend, min, max, 10000, ops);
    } else if (strcmp(argv[1], "local") == 0) {
        threads = argc > 5 ? (unsigned)bench_parse_count("THREADS", argv[5]) : 1;
        if (threads == 0 || threads > 1024)
            bench_usage_error("THREADS: 1..1024");
        if ((per = calloc(threads, sizeof *per)) == NULL)
            bench_fail("out of memory");
        local(&t, per, min, max, 1000, ops, threads);
    } else
        bench_usage_error("churn or local");
    double floor = classes_high(&t), now = 0;
    for (unsigned c = 1; c < NCLS; c++)
        now += (double)t.live[c] * _hpcmem_class_size[c];
    printf("requested: %.0f KiB now, %.0f KiB at most\n", t.req / 1024, t.req_max / 1024);
    printf("size classes: %.0f KiB live now; sum of the classes' high-water marks %.0f KiB\n", now / 1024, floor / 1024);
    printf("glibc chunks: %.0f KiB now, %.0f KiB at most\n", t.glibc / 1024, t.glibc_max / 1024);
    if (lend.peak > 0)
        printf("size classes lending up to %u classes up, a class growing every %u-th try (0: never): %.0f KiB touched\n",
               lend.loans, lend.grow, lend.peak / 1024);
    if (per) {
        double own = 0;
        for (unsigned w = 0; w < threads; w++)
            own += classes_high(&per[w]);
        printf("per-thread classes: sum of each thread's classes' high-water marks %.0f KiB\n", own / 1024);
        free(per);
    }
    return 0;
}
