/* Process start: --runs starts of a small program, one after the other, each
 * with posix_spawn and waited for.  Reports the mean time of one start and
 * exit.  The children inherit the environment, LD_PRELOAD included, so each
 * one starts with the allocator under test: what a shell script, a build or
 * a job's wrapper pays a process for having it preloaded.
 *
 *   alloc_start [--runs 500] [--program PATH] [--corrupt]
 *
 * Without --program the child is this program again (`--child`): one
 * malloc, written, read back and freed, as a plain C program's start; with
 * it, PATH runs without arguments (/bin/true).  Every child must exit 0.
 * --corrupt makes the first child fail on purpose, so the smoke test can
 * prove the check fires.
 *
 * Not one of run.sh's benchmarks (the allocator-core issue names those);
 * BENCHMARKS.md, session 26, has its figures. */
#include "bench_util.h"
#include <spawn.h>
#include <sys/wait.h>

extern char **environ;

static int child(int fail)
{
    unsigned char *volatile p = malloc(100);
    if (p == NULL)
        return 1;
    memset(p, 0x5a, 100);
    int bad = p[99] != 0x5a || fail;
    free(p);
    return bad;
}

int main(int argc, char **argv)
{
    if (argc == 2 && strcmp(argv[1], "--child") == 0)
        return child(0);
    if (argc == 2 && strcmp(argv[1], "--child-fail") == 0)
        return child(1);
    uint64_t runs = 500;
    const char *program = NULL;
    int corrupt = 0;
    struct bench_args args = { argc, argv, 1, &corrupt, "[--runs N] [--program PATH] [--corrupt]" };
    const char *a, *v;
    while ((a = bench_next_option(&args, &v)) != NULL) {
        if (strcmp(a, "--runs") == 0) runs = bench_parse_count(a, v);
        else if (strcmp(a, "--program") == 0) program = v;
        else bench_unknown_option(a);
    }
    if (runs == 0 || runs > 1000000)
        bench_usage_error("--runs: 1..1000000");
    char self[4096];
    if (program == NULL) {
        ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
        if (n <= 0)
            bench_fail("cannot find this program (/proc/self/exe): errno %d", errno);
        self[n] = 0;
        program = self;
    } else if (access(program, X_OK) != 0) {
        bench_usage_error("--program %s: not an executable file", program);
    }
    const char *name = strrchr(program, '/') ? strrchr(program, '/') + 1 : program;

    bench_print_allocator();
    uint64_t t0 = bench_now_ns();
    for (uint64_t i = 0; i < runs; i++) {
        char *child_argv[3] = { (char *)program, NULL, NULL };
        if (program == self)
            child_argv[1] = (char *)(corrupt && i == 0 ? "--child-fail" : "--child");
        pid_t pid;
        int rc = posix_spawn(&pid, program, NULL, NULL, child_argv, environ);
        if (rc != 0)
            bench_fail("cannot start %s: %s", program, strerror(rc));
        int status;
        if (waitpid(pid, &status, 0) != pid)
            bench_fail("waitpid for start %llu of %s: errno %d", (unsigned long long)i + 1, program, errno);
        if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
            bench_fail("start %llu of %s %s %d", (unsigned long long)i + 1, name,
                       WIFEXITED(status) ? "exited" : "was killed by signal",
                       WIFEXITED(status) ? WEXITSTATUS(status) : WTERMSIG(status));
    }
    uint64_t ns = bench_now_ns() - t0;
    bench_result("start", program == self ? "malloc_free" : name, "1", "us_per_start",
                 (double)ns / 1e3 / (double)runs, "us");
    printf("validate,start,ok\n");
    return 0;
}
