/* Multi-thread malloc/free throughput.
 *
 *   alloc_threads --mode xfree|local --threads T [--ops 8M] [--min 8] [--max 1K]
 *                 [--live 1000] [--queue 1024] [--seed 42] [--trials 1] [--corrupt] [--pages no|yes]
 *
 * xfree: the threads form a ring; thread i allocates objects and hands them
 *        to thread i+1 through a single-producer single-consumer lock-free
 *        queue, and frees the objects it receives from thread i-1.  With
 *        T >= 2 every free is a cross-thread free; T = 1 is the same loop
 *        with the thread feeding itself.  The consumer recomputes the id and
 *        size of each object it receives (FIFO order) and checks its tags.
 * local: each thread churns its own working set of --live objects (the
 *        single-thread churn, T times in parallel); nothing crosses threads.
 *
 * --trials K runs the whole measurement K times (new threads each time) and
 * reports the best.
 *
 * --pages yes (local mode) also says, for each trial, how the threads' live
 * objects lie at the end of the churn: the 4 KiB pages one thread's objects
 * start on (mean over the threads), and the threads whose objects start on
 * a page (mean over the pages).  One heap's spans shared by many threads
 * show there as pages shared by threads; each thread's loop then touches
 * more pages and cache lines than its objects need (BENCHMARKS.md,
 * session 22).  The pages are
 * noted inside the timed loop (one store an object), so a --pages run's
 * times are not the benchmark's figures.
 *
 * --ops is the total number of malloc + free calls over all threads (strong
 * scaling: on a 2-core machine more threads cannot add throughput, they show
 * what contention and oversubscription cost).
 */
#include "bench_util.h"
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>

#define BURST 64

struct spsc {
    _Alignas(64) _Atomic uint64_t head; /* written by the consumer */
    _Alignas(64) _Atomic uint64_t tail; /* written by the producer */
    _Alignas(64) void **buf;
    uint64_t mask;
};

struct opts {
    int xfree;
    unsigned threads;
    uint64_t ops, min, max, live, queue, seed;
    unsigned trials;
    int corrupt;
    int pages;
};

struct worker {
    unsigned index;
    const struct opts *o;
    struct spsc *out, *in;
    unsigned upstream;
    pthread_barrier_t *start;
    uint64_t t_start, t_end; /* per thread: main may be descheduled at the barrier */
    uint64_t cpu_ns;         /* CPU time of the thread's loop */
    uintptr_t *page;         /* --pages: the page each live object starts on at the end, or NULL */
};

static size_t size_of(const struct opts *o, uint64_t id)
{
    uint64_t h = bench_tag_value(id);
    h ^= h >> 29;
    return (size_t)(o->min + (uint64_t)(((unsigned __int128)h * (o->max - o->min + 1)) >> 64));
}

static uint64_t per_thread_objects(const struct opts *o)
{
    return o->ops / 2 / o->threads;
}

static void xfree_loop(struct worker *w)
{
    const struct opts *o = w->o;
    uint64_t per = per_thread_objects(o);
    uint64_t produced = 0, consumed = 0;
    uint64_t cap = w->out->mask + 1;
    uint64_t mine = (uint64_t)w->index << 40, theirs = (uint64_t)w->upstream << 40;

    while (produced < per || consumed < per) {
        uint64_t progress = 0;
        if (produced < per) {
            uint64_t tail = atomic_load_explicit(&w->out->tail, memory_order_relaxed);
            uint64_t head = atomic_load_explicit(&w->out->head, memory_order_acquire);
            uint64_t k = cap - (tail - head);
            if (k > per - produced) k = per - produced;
            if (k > BURST) k = BURST;
            for (uint64_t j = 0; j < k; j++) {
                uint64_t id = mine | (produced + j + 1);
                size_t n = size_of(o, id);
                unsigned char *p = malloc(n);
                if (p == NULL || !bench_aligned_ok(p, n))
                    bench_fail("thread %u: malloc(%zu) returned %p", w->index, n, (void *)p);
                bench_tag_write(p, n, id);
                if (o->corrupt && w->index == 0 && produced + j == 0)
                    p[0] ^= 0x40;
                w->out->buf[(tail + j) & w->out->mask] = p;
            }
            atomic_store_explicit(&w->out->tail, tail + k, memory_order_release);
            produced += k;
            progress += k;
        }
        uint64_t head = atomic_load_explicit(&w->in->head, memory_order_relaxed);
        uint64_t tail = atomic_load_explicit(&w->in->tail, memory_order_acquire);
        uint64_t k = tail - head;
        if (k > BURST) k = BURST;
        for (uint64_t j = 0; j < k; j++) {
            unsigned char *p = w->in->buf[(head + j) & w->in->mask];
            uint64_t id = theirs | (consumed + j + 1);
            if (!bench_tag_ok(p, size_of(o, id), id))
                bench_fail("thread %u: object %p from thread %u (#%llu) lost its tags",
                           w->index, (void *)p, w->upstream,
                           (unsigned long long)(consumed + j + 1));
            free(p);
        }
        atomic_store_explicit(&w->in->head, head + k, memory_order_release);
        consumed += k;
        progress += k;
        if (progress == 0)
            sched_yield(); /* 16 threads on 2 cores: let the partner run */
    }
}

struct obj {
    unsigned char *p;
    uint64_t id;
};

static void local_loop(struct worker *w)
{
    const struct opts *o = w->o;
    uint64_t steps = per_thread_objects(o);
    struct obj *slot = malloc(o->live * sizeof *slot);
    if (slot == NULL)
        bench_fail("thread %u: no memory for the slots", w->index);
    uint64_t id = (uint64_t)w->index << 40;
    bench_rng_t rng;
    bench_rng_seed(&rng, o->seed + w->index);

    for (uint64_t i = 0; i < o->live; i++) {
        slot[i].id = ++id;
        size_t n = size_of(o, id);
        slot[i].p = malloc(n);
        if (slot[i].p == NULL)
            bench_fail("thread %u: malloc(%zu) returned NULL", w->index, n);
        bench_tag_write(slot[i].p, n, id);
    }
    if (o->corrupt && w->index == 0)
        slot[0].p[0] ^= 0x40;
    for (uint64_t k = 0; k < steps; k++) {
        struct obj *s = &slot[bench_rng_range(&rng, 0, o->live - 1)];
        if (__builtin_expect(!bench_tag_ok(s->p, size_of(o, s->id), s->id), 0))
            bench_fail("thread %u: object %p lost its tags", w->index, (void *)s->p);
        free(s->p);
        s->id = ++id;
        size_t n = size_of(o, id);
        s->p = malloc(n);
        if (__builtin_expect(s->p == NULL || !bench_aligned_ok(s->p, n), 0))
            bench_fail("thread %u: malloc(%zu) returned %p", w->index, n, (void *)s->p);
        bench_tag_write(s->p, n, id);
    }
    if (w->page != NULL)
        for (uint64_t i = 0; i < o->live; i++)
            w->page[i] = (uintptr_t)slot[i].p >> 12;
    for (uint64_t i = 0; i < o->live; i++) {
        if (!bench_tag_ok(slot[i].p, size_of(o, slot[i].id), slot[i].id))
            bench_fail("thread %u: object %p lost its tags", w->index, (void *)slot[i].p);
        free(slot[i].p);
    }
    free(slot);
}

static void *worker_main(void *arg)
{
    struct worker *w = arg;
    pthread_barrier_wait(w->start);
    w->t_start = bench_now_ns();
    uint64_t c0 = bench_thread_cpu_ns();
    if (w->o->xfree)
        xfree_loop(w);
    else
        local_loop(w);
    w->cpu_ns = bench_thread_cpu_ns() - c0;
    w->t_end = bench_now_ns();
    return NULL;
}

static void parse(int argc, char **argv, struct opts *o)
{
    int have_mode = 0;
    *o = (struct opts){ .threads = 1, .ops = 8000000, .min = 8, .max = 1024, .live = 1000,
                        .queue = 1024, .seed = 42, .trials = 1 };
    struct bench_args args = { argc, argv, 1, &o->corrupt, NULL };
    const char *a, *v;
    while ((a = bench_next_option(&args, &v)) != NULL) {
        if (strcmp(a, "--mode") == 0) {
            o->xfree = bench_parse_choice(a, v, "xfree", "local") == 0;
            have_mode = 1;
        } else if (strcmp(a, "--threads") == 0) o->threads = (unsigned)bench_parse_count(a, v);
        else if (strcmp(a, "--ops") == 0) o->ops = bench_parse_count(a, v);
        else if (strcmp(a, "--min") == 0) o->min = bench_parse_size(a, v);
        else if (strcmp(a, "--max") == 0) o->max = bench_parse_size(a, v);
        else if (strcmp(a, "--live") == 0) o->live = bench_parse_count(a, v);
        else if (strcmp(a, "--queue") == 0) o->queue = bench_parse_count(a, v);
        else if (strcmp(a, "--seed") == 0) o->seed = bench_parse_count(a, v);
        else if (strcmp(a, "--trials") == 0) o->trials = (unsigned)bench_parse_count(a, v);
        else if (strcmp(a, "--pages") == 0) o->pages = bench_parse_choice(a, v, "no", "yes");
        else bench_unknown_option(a);
    }
    if (o->trials == 0 || o->trials > 100)
        bench_usage_error("--trials: 1..100");
    if (!have_mode)
        bench_usage_error("usage: %s --mode xfree|local --threads T [--ops N] [--min S] "
                          "[--max S] [--live N] [--queue N] [--seed S] [--trials K] [--corrupt] [--pages no|yes]", argv[0]);
    if (o->pages && o->xfree)
        bench_usage_error("--pages yes: local mode only");
    if (o->threads == 0 || o->threads > 1024)
        bench_usage_error("--threads: 1..1024");
    if (o->min == 0 || o->min > o->max || o->max > (1u << 30))
        bench_usage_error("sizes: need 1 <= --min <= --max <= 1G");
    if (o->queue < 2 || o->queue > (1u << 24) || (o->queue & (o->queue - 1)) != 0)
        bench_usage_error("--queue: a power of two, 2..16M");
    if (o->live == 0 || o->live > (1u << 24))
        bench_usage_error("--live: 1..16M");
    if (per_thread_objects(o) == 0)
        bench_usage_error("--ops: at least 2 per thread");
}

static int cmp_uintptr(const void *a, const void *b)
{
    uintptr_t x = *(const uintptr_t *)a, y = *(const uintptr_t *)b;
    return x < y ? -1 : x > y;
}

/* --pages: the pages each thread's live objects started on at the end
 * (sorted in place), and how many threads' objects the pages held; frees
 * the arrays. */
static void print_pages(struct worker *w, unsigned t, uint64_t live)
{
    uint64_t thread_pages = 0, pages = 0;
    uintptr_t *all = calloc(t * live, sizeof *all);
    if (all == NULL)
        bench_fail("no memory for the pages of %u threads", t);
    for (unsigned i = 0; i < t; i++) {
        qsort(w[i].page, live, sizeof *w[i].page, cmp_uintptr);
        for (uint64_t k = 0; k < live; k++)
            if (k == 0 || w[i].page[k] != w[i].page[k - 1])
                all[thread_pages++] = w[i].page[k];     /* once per thread */
        free(w[i].page);
    }
    qsort(all, thread_pages, sizeof *all, cmp_uintptr);
    for (uint64_t k = 0; k < thread_pages; k++)
        pages += k == 0 || all[k] != all[k - 1];
    free(all);
    printf("info,pages_per_thread,%.1f\n", (double)thread_pages / t);
    printf("info,threads_per_page,%.2f\n", (double)thread_pages / (double)pages);   /* a (thread, page) pair each */
}

/* One trial: fresh queues and threads; returns the wall time from the first
 * thread's start to the last thread's end, and in *cpu the CPU time of all
 * threads' loops together. */
static uint64_t trial(const struct opts *o, uint64_t *cpu)
{
    unsigned t = o->threads;
    struct worker *w = calloc(t, sizeof *w);
    struct spsc *q = aligned_alloc(64, t * sizeof *q);
    pthread_t *tid = calloc(t, sizeof *tid);
    if (w == NULL || q == NULL || tid == NULL)
        bench_fail("no memory for %u workers", t);
    for (unsigned i = 0; i < t; i++) {
        memset(&q[i], 0, sizeof q[i]);
        q[i].mask = o->queue - 1;
        q[i].buf = calloc(o->queue, sizeof(void *));
        if (q[i].buf == NULL)
            bench_fail("no memory for queue %u", i);
    }
    pthread_barrier_t start;
    pthread_barrier_init(&start, NULL, t);
    for (unsigned i = 0; i < t; i++) {
        w[i] = (struct worker){ .index = i, .o = o, .out = &q[i], .in = &q[(i + t - 1) % t],
                                .upstream = (i + t - 1) % t, .start = &start };
        if (o->pages && (w[i].page = calloc(o->live, sizeof(uintptr_t))) == NULL)
            bench_fail("no memory for thread %u's pages", i);
        int rc = pthread_create(&tid[i], NULL, worker_main, &w[i]);
        if (rc != 0)
            bench_fail("pthread_create: %s", strerror(rc));
    }
    uint64_t t0 = UINT64_MAX, t1 = 0;
    *cpu = 0;
    for (unsigned i = 0; i < t; i++) {
        pthread_join(tid[i], NULL);
        *cpu += w[i].cpu_ns;
        if (w[i].t_start < t0) t0 = w[i].t_start;
        if (w[i].t_end > t1) t1 = w[i].t_end;
    }
    if (o->pages)
        print_pages(w, t, o->live);
    for (unsigned i = 0; i < t; i++) {
        if (atomic_load(&q[i].head) != atomic_load(&q[i].tail))
            bench_fail("queue %u not drained", i);
        free(q[i].buf);
    }
    free(q);
    free(w);
    free(tid);
    pthread_barrier_destroy(&start);
    return t1 - t0;
}

int main(int argc, char **argv)
{
    struct opts o;
    parse(argc, argv, &o);
    const char *mode = o.xfree ? "xfree" : "local";
    bench_print_allocator();

    /* T threads time-sharing 2 cores with whatever else runs: the best of a
     * few trials is the allocator's figure, the spread goes to info lines */
    double ops = (double)per_thread_objects(&o) * 2.0 * o.threads, best = 0, best_cpu = 0;
    for (unsigned k = 0; k < o.trials; k++) {
        uint64_t cpu;
        double mops = ops / ((double)trial(&o, &cpu) / 1e9) / 1e6;
        double cpu_mops = ops / ((double)cpu / 1e9) / 1e6;
        printf("info,trial_mops,%.6g\n", mops);
        printf("info,trial_cpu_mops,%.6g\n", cpu_mops);
        if (mops > best)
            best = mops;
        if (cpu_mops > best_cpu)
            best_cpu = cpu_mops;
    }

    char param[16];
    snprintf(param, sizeof param, "%u", o.threads);
    bench_result("threads", mode, param, "mops", best, "Mops/s");
    bench_result("threads", mode, param, "cpu_mops", best_cpu, "Mops/s");
    bench_result_rss("threads", mode, param);
    printf("validate,threads,ok\n");
    return 0;
}
