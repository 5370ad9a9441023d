/* bwamem: the BWA-MEM-like kernel's driver.  Builds the index once, then
 * aligns every read with 1, 2, 4, 8 and 16 OpenMP threads in turn and
 * prints reads per second for each; the allocator is whatever malloc the
 * process has (run it under LD_PRELOAD to compare allocators: run.sh). */
#include "config.h"
#include "bwa.h"

#include <errno.h>
#include <getopt.h>
#include <stdlib.h>
#include <string.h>
#ifdef _OPENMP
#include <omp.h>
#endif

#include "bench_papi.h"
#include "bench_util.h"

#define MAX_RUNS 32

typedef struct options {
  int threads[MAX_RUNS], nthreads;
  int batch, repeat, validate;
  const char *output, *name, *label, *papi_events, *ref_path, *reads_path;
} options_t;

typedef struct tally {
  long reads, mapped, confident, confident_ok, checkable, errors;
  uint64_t checksum;  /* of every read's outcome: must not depend on the thread count */
} tally_t;

static void usage(FILE *out)
{
  fprintf(out,
    "usage: bwamem [options] REF.fa READS.fq|READS.fa\n"
    "  -t, --threads=LIST   thread counts, run one after the other (default 1,2,4,8,16)\n"
    "  -o, --output=FILE    write the SAM records (default: made in memory, then dropped)\n"
    "      --batch=N        reads per batch (default 20000)\n"
    "      --repeat=N       runs per thread count, the fastest is reported (default 1)\n"
    "      --name=NAME      data set name in the result lines (default: the reads file name)\n"
    "      --label=NAME     allocator name in the result lines (default: from LD_PRELOAD)\n"
    "      --no-validate    do not check positions against the read names\n"
    "      --papi-events=L  PAPI events to count (default: cycles, instructions, cache and TLB misses)\n");
}

static int parse_args(int argc, char **argv, options_t *o)
{
  static const struct option longopts[] = {
    {"threads", required_argument, NULL, 't'}, {"output", required_argument, NULL, 'o'},
    {"batch", required_argument, NULL, 'b'}, {"repeat", required_argument, NULL, 'r'},
    {"name", required_argument, NULL, 'n'}, {"label", required_argument, NULL, 'l'},
    {"no-validate", no_argument, NULL, 'V'}, {"papi-events", required_argument, NULL, 'p'},
    {"help", no_argument, NULL, 'h'}, {NULL, 0, NULL, 0},
  };
  static const int default_threads[] = {1, 2, 4, 8, 16};
  int c;

  memset(o, 0, sizeof *o);
  memcpy(o->threads, default_threads, sizeof default_threads);
  o->nthreads = 5;
  o->batch = 20000;
  o->repeat = 1;
  o->validate = 1;
  while ((c = getopt_long(argc, argv, "t:o:h", longopts, NULL)) != -1) {
    switch (c) {
    case 't':
      if ((o->nthreads = bench_parse_int_list(optarg, o->threads, MAX_RUNS)) <= 0) {
        fprintf(stderr, "bwamem: bad --threads '%s' (positive numbers, comma-separated)\n", optarg);
        return -EINVAL;
      }
      break;
    case 'o': o->output = optarg; break;
    case 'b':
      if (bench_parse_pos_int(optarg, &o->batch) != 0) {
        fprintf(stderr, "bwamem: bad --batch '%s'\n", optarg);
        return -EINVAL;
      }
      break;
    case 'r':
      if (bench_parse_pos_int(optarg, &o->repeat) != 0) {
        fprintf(stderr, "bwamem: bad --repeat '%s'\n", optarg);
        return -EINVAL;
      }
      break;
    case 'n': o->name = optarg; break;
    case 'l': o->label = optarg; break;
    case 'V': o->validate = 0; break;
    case 'p': o->papi_events = optarg; break;
    case 'h': usage(stdout); return 1;
    default: usage(stderr); return -EINVAL;
    }
  }
  if (argc - optind != 2) {
    fprintf(stderr, "bwamem: needs a reference and a reads file\n");
    usage(stderr);
    return -EINVAL;
  }
  o->ref_path = argv[optind];
  o->reads_path = argv[optind + 1];
  return 0;
}

/* r<id>_<contig>_<pos>_<strand>; contig names may hold '_' themselves */
static int true_origin(const char *name, char *contig, size_t clen, long *pos, int *strand)
{
  const char *first = strchr(name, '_'), *last = strrchr(name, '_'), *mid;
  if (first == NULL || last == NULL || last == first || (last[1] != '+' && last[1] != '-') || last[2] != '\0')
    return -1;
  for (mid = last - 1; mid > first && *mid != '_'; mid--)
    ;
  if (mid == first)
    return -1;
  char *end;
  *pos = strtol(mid + 1, &end, 10);
  if (end != last || *pos <= 0 || (size_t)(mid - first - 1) >= clen)
    return -1;
  memcpy(contig, first + 1, (size_t)(mid - first - 1));
  contig[mid - first - 1] = '\0';
  *strand = last[1] == '-';
  return 0;
}

static void tally_read(const bwa_ref_t *ref, const bwa_read_t *r, int validate, tally_t *t)
{
  char contig[256];
  long pos;
  int strand;

  t->reads++;
  t->checksum = t->checksum * 1000003u
      + (r->mapped ? (uint64_t)r->pos_unclipped * 4 + (uint64_t)r->strand * 2 + 1 + ((uint64_t)r->mapq << 40) : 0);
  if (!r->mapped)
    return;
  t->mapped++;
  if (r->mapq > 0)
    t->confident++;
  if (!validate || true_origin(r->name, contig, sizeof contig, &pos, &strand) != 0)
    return;
  t->checkable++;
  long d = (long)r->pos_unclipped + 1 - pos;
  int ok = strcmp(ref->contigs[r->contig].name, contig) == 0 && strand == r->strand && d >= -10 && d <= 10;
  if (r->mapq > 0 && ok)
    t->confident_ok++;
}

static int run_once(const options_t *o, const bwa_index_t *idx, const bwa_score_t *sc, int nthreads,
                    FILE *sam, tally_t *t)
{
  bwa_reader_t *rd = bwa_reader_open(o->reads_path);
  bwa_read_t *reads;
  int n;

  memset(t, 0, sizeof *t);
  if (rd == NULL)
    return -EIO;
  while ((n = bwa_reader_batch(rd, o->batch, &reads)) > 0) {
    long errors = 0;
#pragma omp parallel for schedule(dynamic, 16) num_threads(nthreads) reduction(+ : errors)
    for (int i = 0; i < n; i++)
      errors += bwa_align_read(idx, sc, &reads[i]) != 0;
    t->errors += errors;
    for (int i = 0; i < n; i++) {
      if (sam != NULL && reads[i].sam != NULL)
        fputs(reads[i].sam, sam);
      tally_read(idx->ref, &reads[i], o->validate, t);
    }
    bwa_reads_free(reads, n);  /* the SAM text of the workers is freed here, by the main thread */
  }
  bwa_reader_close(rd);
  return n < 0 ? n : 0;
}

static const char *base_name(const char *path)
{
  const char *s = strrchr(path, '/');
  return s ? s + 1 : path;
}

/* "glibc" without LD_PRELOAD, else the preloaded library's file name */
static void allocator_label(const options_t *o, char *buf, size_t len)
{
  const char *pre = getenv("LD_PRELOAD");
  if (o->label != NULL)
    snprintf(buf, len, "%s", o->label);
  else if (pre == NULL || pre[0] == '\0')
    snprintf(buf, len, "glibc");
  else
    snprintf(buf, len, "%.*s", (int)strcspn(base_name(pre), ". :"), base_name(pre));
}

int main(int argc, char **argv)
{
  options_t o;
  bwa_ref_t ref;
  bwa_index_t idx;
  bwa_score_t sc;
  char label[128], b1[32];
  int rc = parse_args(argc, argv, &o);
  if (rc != 0)
    return rc > 0 ? 0 : 2;

  allocator_label(&o, label, sizeof label);
  const char *name = o.name ? o.name : base_name(o.reads_path);
  bwa_score_init(&sc);
  double t0 = bench_now();
  if (bwa_ref_load(o.ref_path, &ref) != 0)
    return 1;
  double t_load = bench_now() - t0;
  if (bwa_index_build(&ref, &idx) != 0) {
    fprintf(stderr, "bwamem: cannot build the index\n");
    return 1;
  }
  double t_index = bench_now() - t0 - t_load;

  FILE *sam = NULL;
  if (o.output != NULL) {
    if ((sam = fopen(o.output, "w")) == NULL) {
      fprintf(stderr, "bwamem: cannot write %s: %s\n", o.output, strerror(errno));
      return 1;
    }
    for (int c = 0; c < ref.ncontigs; c++)
      fprintf(sam, "@SQ\tSN:%s\tLN:%lld\n", ref.contigs[c].name, (long long)ref.contigs[c].len);
  }

  bench_counters_t *ctr = bench_counters_new(o.papi_events);
  printf("bwamem kernel (libhpcmem benchmarks): seed (k=%d), chain, banded Smith-Waterman extension\n", BWA_K);
  printf("reference %s: %d contigs, %lld bases; loaded in %.2f s, k-mer index (%s) in %.2f s\n",
         o.ref_path, ref.ncontigs, (long long)ref.len, t_load,
         bench_fmt_bytes((double)idx.nentries * 8 + 4.0 * ((1 << BWA_BUCKET_BITS) + 1), b1, sizeof b1), t_index);
  printf("reads %s (data set %s), batches of %d; allocator: %s%s%s\n", o.reads_path, name, o.batch, label,
         getenv("LD_PRELOAD") ? " via LD_PRELOAD=" : "", getenv("LD_PRELOAD") ? getenv("LD_PRELOAD") : "");
  printf("%s\n", bench_counters_status(ctr));
  printf("%8s %9s %9s %11s %8s  %s\n", "threads", "reads", "seconds", "reads/s", "speedup", "counters");

  tally_t first = {0}, t;
  double base_rate = 0.0;
  int failed = 0;
  for (int k = 0; k < o.nthreads; k++) {
    double best = 0.0, best_cpu = 0.0;
    char cbuf[512];
    for (int rep = 0; rep < o.repeat; rep++) {
      bench_counters_start(ctr, o.threads[k]);
      /* SAM output only once: the file is the same for every thread count */
      rc = run_once(&o, &idx, &sc, o.threads[k], k == 0 && rep == 0 ? sam : NULL, &t);
      bench_counters_stop(ctr);
      if (rc != 0) {
        fprintf(stderr, "bwamem: reading %s failed\n", o.reads_path);
        return 1;
      }
      double secs = bench_counters_seconds(ctr);
      const bench_rusage_t *ru = bench_counters_rusage(ctr);
      if (best == 0.0 || secs < best) {
        best = secs;
        bench_counters_format(ctr, cbuf, sizeof cbuf);
      }
      /* CPU time counts the work, whatever else the machine is running */
      if (best_cpu == 0.0 || ru->utime + ru->stime < best_cpu)
        best_cpu = ru->utime + ru->stime;
      if (k == 0 && rep == 0) {
        first = t;
      } else if (t.checksum != first.checksum || t.reads != first.reads) {
        printf("error: %d threads gave other alignments than %d thread(s)\n", o.threads[k], o.threads[0]);
        failed = 1;
      }
      if (t.errors != 0) {
        printf("error: %ld reads could not be aligned (out of memory)\n", t.errors);
        failed = 1;
      }
    }
    double rate = (double)t.reads / best;
    if (k == 0)
      base_rate = rate;
    printf("%8d %9ld %9.3f %11.1f %8.2f  %s\n", o.threads[k], t.reads, best, rate, rate / base_rate, cbuf);
    printf("#result bwamem %s %s %d %.1f %.4f %.4f\n", name, label, o.threads[k], rate, best, best_cpu);
    fflush(stdout);
  }
  if (sam != NULL && fclose(sam) != 0) {
    fprintf(stderr, "bwamem: error writing %s\n", o.output);
    failed = 1;
  }

  printf("mapped %ld of %ld reads (%.2f%%), %ld with mapq > 0\n", first.mapped, first.reads,
         first.reads ? 100.0 * first.mapped / first.reads : 0.0, first.confident);
  if (!o.validate) {
    printf("validation: skipped (--no-validate)\n");
  } else if (first.checkable == 0) {
    printf("validation: not possible (read names carry no true positions; bwagen writes them)\n");
  } else {
    /* generated reads: nearly all map, and confident mappings are right */
    double mapped = (double)first.mapped / first.reads;
    double right = first.confident ? (double)first.confident_ok / first.confident : 0.0;
    int ok = mapped >= 0.95 && right >= 0.99;
    printf("validation: %s: %.2f%% mapped (>= 95%%), %ld of %ld mapq>0 reads at their true position "
           "(%.2f%%, >= 99%%); same alignments for every thread count: %s\n",
           ok ? "passed" : "FAILED", 100.0 * mapped, first.confident_ok, first.confident, 100.0 * right,
           failed ? "no" : "yes");
    if (!ok)
      failed = 1;
  }
  bench_counters_free(ctr);
  bwa_index_free(&idx);
  bwa_ref_free(&ref);
  return failed ? 1 : 0;
}
